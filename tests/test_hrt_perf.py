"""``hrt_model_exec perf`` console summaries: real published outputs and malformed input.

The fixtures in ``tests/fixtures/hrt_perf/`` are verbatim published outputs (origins in its
``SOURCES.md``); the figures asserted below were read off those files by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from layerscope.errors import InputError
from layerscope.importers.hrt_perf import MAX_PERF_BYTES, BoardPerf, parse_board_perf, read_board_perf

HRT = Path(__file__).parent / "fixtures" / "hrt_perf"

SUMMARY = """Running condition:
  Thread number is: 1
  Frame count   is: 200
  Program run time: 818.985000 ms
Perf result:
  Frame totally latency is: 800.621155 ms
  Average    latency    is: {latency}
  Frame      rate       is: 244.204717 FPS
"""


def test_x5_libdnn_output_with_logs_and_command_echo() -> None:
    perf = read_board_perf(HRT / "x5_convnext_atto_4threads.txt")
    assert perf == BoardPerf(latency_ms=5.397686, fps=732.104618, threads=4, frames=200,
                             model_file="model/ConvNeXt_atto_224x224_nv12.bin",
                             source=str(HRT / "x5_convnext_atto_4threads.txt"))


def test_s100_ucp_output_with_prompt_and_warnings() -> None:
    perf = read_board_perf(HRT / "s100_lanenet_1thread.txt")
    assert (perf.latency_ms, perf.fps, perf.threads, perf.frames) == (14.245, 69.894, 1, 200)
    assert perf.model_file == "lanenet256x512.hbm"
    # the progress line ("Frame count: 200,  Thread Average: 14.245405 ms ... FPS: 69.897171") is not the summary
    assert perf.latency_ms != 14.245405


def test_x3_summary_block_alone_has_no_model_file() -> None:
    perf = read_board_perf(HRT / "x3_1thread_500frames.txt")
    assert (perf.latency_ms, perf.fps, perf.threads, perf.frames, perf.model_file) == \
        (72.651039, 13.756448, 1, 500, None)


def test_single_thread_fps_is_about_one_over_latency() -> None:
    for name in ("s100_lanenet_1thread.txt", "x3_1thread_500frames.txt"):
        perf = read_board_perf(HRT / name)
        assert perf.fps is not None
        assert perf.fps == pytest.approx(1000.0 / perf.latency_ms, rel=0.01)


def test_readme_bullet_form_and_model_file_equals_form() -> None:
    text = ("hrt_model_exec perf --model_file=./model/resnet152_224x224_nv12.hbm --thread_num=1\n"
            "Running condition:\n- Thread number is: 1\n- Frame count is: 200\nPerf result:\n"
            "- Frame totally latency is: 426.180 ms\n- Average latency is: 2.131 ms\n- Frame rate is: 463.021 FPS\n")
    perf = parse_board_perf(text, "readme.txt")
    assert (perf.latency_ms, perf.fps, perf.threads, perf.frames) == (2.131, 463.021, 1, 200)
    assert perf.model_file == "./model/resnet152_224x224_nv12.hbm"


def test_garbled_published_latency_is_refused_with_path_and_line() -> None:
    path = HRT / "x3_garbled_latency.txt"
    with pytest.raises(InputError) as err:
        read_board_perf(path)
    message = str(err.value)
    assert message.startswith(f"{path}: line 7: ") and "'40.36.3396 ms'" in message
    assert "\n" not in message


def test_two_summaries_in_one_file_are_refused() -> None:
    path = HRT / "x3_two_runs.txt"
    with pytest.raises(InputError, match=r"x3_two_runs\.txt: line 11: a second 'Thread number is:' line "
                                         r"\(the first is line 2\)"):
        read_board_perf(path)


@pytest.mark.parametrize(("latency", "fragment"), [
    ("abc ms", "expected a number of ms"),
    ("nan ms", "expected a finite number"),
    ("inf ms", "expected a finite number"),
    ("-4.0 ms", "expected a finite number >= 0"),
    ("0.000 ms", "must be positive"),
    ("4.0 us", "expected '<number> ms'"),
    ("", "expected '<number> ms'"),
])
def test_bad_latency_values(tmp_path: Path, latency: str, fragment: str) -> None:
    path = tmp_path / "perf.log"
    path.write_text(SUMMARY.format(latency=latency), encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        read_board_perf(path)
    assert str(err.value).startswith(f"{path}: line 7: ")


def test_bad_counts(tmp_path: Path) -> None:
    path = tmp_path / "perf.log"
    path.write_text(SUMMARY.format(latency="4.0 ms").replace("Thread number is: 1", "Thread number is: 0"),
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: thread number must be at least 1"):
        read_board_perf(path)
    path.write_text(SUMMARY.format(latency="4.0 ms").replace("is: 200", "is: 2.5e2"), encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3: expected a whole number after 'Frame count is:', got '2.5e2'"):
        read_board_perf(path)


def test_no_latency_line(tmp_path: Path) -> None:
    path = tmp_path / "perf.log"
    path.write_text("Running condition:\n  Thread number is: 1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"perf\.log: no 'Average latency is: <X> ms' line") as err:
        read_board_perf(path)
    assert str(path) in str(err.value)


def test_binary_junk(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\n\xff\xfe" + bytes(range(256)))
    with pytest.raises(InputError, match=r"model\.bin: line 1: NUL byte: binary data") as err:
        read_board_perf(path)
    assert str(path) in str(err.value)


def test_undecodable_bytes_are_replaced_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "perf.log"
    path.write_bytes(b"\xff\xfe garbage \xc3\n" + SUMMARY.format(latency="4.003106 ms").encode())
    assert read_board_perf(path).latency_ms == 4.003106


def test_oversized_file_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    with path.open("wb") as handle:
        handle.truncate(MAX_PERF_BYTES + 1)  # sparse: no 16 MiB written
    with pytest.raises(InputError, match=r"huge\.log: 16777217 bytes is larger than the 16777216 bytes \(16 MiB\)"):
        read_board_perf(path)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_board_perf(tmp_path / "absent.log")
    with pytest.raises(InputError, match="not a file"):
        read_board_perf(tmp_path)


def test_import_detects_the_console_summary_and_reads_its_totals() -> None:
    from layerscope.importers.detect import detect_format, parse_file

    path = HRT / "s100_lanenet_1thread.txt"
    assert detect_format(path.read_text(encoding="utf-8"), str(path)) == "hrt-perf"
    result = parse_file(path)
    assert (result.format, result.tool, result.entries) == ("hrt-perf", "hrt_model_exec", ())
    assert result.totals.latency is not None and result.totals.latency.mean_us == pytest.approx(14245.0)
    assert result.totals.latency.samples == 200 and result.totals.fps == pytest.approx(69.894)
    assert result.info["model_name"] == "lanenet256x512.hbm" and result.info["thread_num"] == "1"
