"""Output paths that cannot be written: every output option of every command exits 2 with one line naming the
path and the reason, creates nothing, and leaves no temporary file; every writer is atomic and replaces a
symbolic link instead of writing through it.

The option list is checked against the commands themselves (every option whose type is an output path), so an
output option added later without a case here fails :func:`test_every_output_option_is_covered`.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import textwrap
import threading
from pathlib import Path

import click
import pytest
from tests._cli_subprocess import run_cli
from tests.conftest import zoo

from layerscope.cli.main import SUBCOMMANDS, cli, main
from layerscope.cli.outputs import OutputPath
from layerscope.errors import OutputError
from layerscope.fileio import check_writable, write_atomic

SQUEEZENET = zoo("squeezenet")

SCRIPT = textwrap.dedent("""
    def pipeline(model):
        model.run(None, dict(model.example_inputs))
""")

#: (command, option, the file name's suffix) for every output option.
OUTPUT_OPTIONS: list[tuple[str, str, str]] = [
    ("estimate", "-o", ".json"), ("estimate", "--html", ".html"),
    ("report", "-o", ".html"), ("report", "--trace", ".json"), ("report", "--csv", ".csv"),
    ("report", "--markdown", ".md"), ("report", "--annotate", ".onnx"),
    ("compare", "--markdown", ".md"), ("compare", "-o", ".json"), ("compare", "--html", ".html"),
    ("calibrate", "-o", ".toml"), ("calibrate", "--fit-json", ".json"),
    ("reconcile", "-o", ".json"), ("reconcile", "--html", ".html"),
    ("advise", "-o", ".json"), ("advise", "--html", ".html"),
    ("import", "-o", ".json"), ("import", "--html", ".html"),
    ("bench", "-o", ".json"), ("bench", "--html", ".html"),
    ("profile", "-o", ".json"), ("profile", "--html", ".html"),
    ("bisect", "-o", ".json"), ("bisect", "--html", ".html"),
    ("pipeline", "-o", ".json"), ("pipeline", "--trace", ".json"), ("pipeline", "--html", ".html"),
    ("lint", "-o", ".txt"),
]
BAD_PATHS = ("folder", "under-a-file", "proc")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Valid inputs for every command: a run file of squeezenet, a vendor profile, a pipeline script."""
    folder = tmp_path_factory.mktemp("inputs")
    run = folder / "run.json"
    assert main(["estimate", str(SQUEEZENET), "--target", "rdk-x3", "-o", str(run), "--top", "0"]) == 0
    script = folder / "pipe.py"
    script.write_text(SCRIPT)
    lint = folder / "config.yaml"
    lint.write_text("model_parameters:\n  march: nash-e\n")
    return {"run": run, "script": script, "folder": folder, "lint": lint,
            "vendor": Path(__file__).parent / "fixtures" / "importers" / "horizon" / "x3_profiler.log"}


def command_args(command: str, inputs: dict[str, Path], option: str, out: Path) -> list[str]:
    """A complete, otherwise valid command line of ``command`` with ``option out``."""
    run, model = str(inputs["run"]), str(SQUEEZENET)
    fast = ["--runs", "2", "--warmup", "0"]
    base: dict[str, list[str]] = {
        "estimate": ["estimate", model, "--target", "rdk-x3", "--top", "0"],
        "report": ["report", run],
        "compare": ["compare", run, run],
        "calibrate": ["calibrate", run, *([] if option == "-o" else ["-o", str(inputs["folder"] / "cal.toml")])],
        "reconcile": ["reconcile", run],
        "advise": ["advise", run, "--no-model"],
        "import": ["import", str(inputs["vendor"])],
        "bench": ["bench", model, *fast],
        "profile": ["profile", model, *fast],
        "bisect": ["bisect", model, "--target", "rdk-x3"],
        "pipeline": ["pipeline", f"{inputs['script']}:pipeline", model, *fast],
        "lint": ["lint", str(inputs["lint"])],
    }
    return [*base[command], option, str(out)]


def bad_path(kind: str, folder: Path, suffix: str) -> Path:
    """An output path that cannot be written, of ``kind``."""
    if kind == "folder":
        path = folder / f"out{suffix}"
        path.mkdir()
        return path
    if kind == "under-a-file":
        plain = folder / "plain.txt"
        plain.write_text("a regular file\n")
        return plain / f"out{suffix}"
    assert kind == "proc"
    return Path(f"/proc/self/out{suffix}")  # no file can be created in /proc, not even by root


def _output_options() -> set[tuple[str, tuple[str, ...]]]:
    """(command, option strings) of every option of every command whose type is :class:`OutputPath`."""
    found = set()
    for name in SUBCOMMANDS:
        command = cli.get_command(click.Context(cli), name)
        assert command is not None
        for param in command.params:
            # a hidden option is a deprecated spelling of one listed (calibrate --json: --fit-json)
            if isinstance(param, click.Option) and isinstance(param.type, OutputPath) and not param.hidden:
                found.add((name, tuple(param.opts)))
    return found


def test_every_output_option_is_covered() -> None:
    found = _output_options()
    assert len(found) == len(OUTPUT_OPTIONS) == 28
    for command, option, _ in OUTPUT_OPTIONS:
        assert [opts for name, opts in found if name == command and option in opts], (command, option)


def _expect_refusal(code: int, err: str, out: Path, kind: str, folder: Path) -> None:
    """Exit 2, one line on stderr naming ``out`` and the reason of ``kind``."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    reason = {"folder": "it is a folder", "under-a-file": f"{folder / 'plain.txt'} is not a folder",
              "proc": "No such file or directory"}[kind]
    assert lines[0] == f"layerscope: error: {out}: cannot write ({reason})"


CASES = [(c, o, s, kind) for c, o, s in OUTPUT_OPTIONS for kind in BAD_PATHS]


@pytest.mark.parametrize("case", CASES, ids=[f"{c}{o}-{k}" for c, o, _, k in CASES])
def test_unwritable_output_exits_2_with_one_line(case: tuple[str, str, str, str], inputs: dict[str, Path],
                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All 84 cases (28 options x 3 bad paths), in process: the checks run before any work."""
    command, option, suffix, kind = case
    out = bad_path(kind, tmp_path, suffix)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code = main(command_args(command, inputs, option, out))
    _expect_refusal(code, capsys.readouterr().err, out, kind, tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created, no temporary file left


#: One bad path per option, the three kinds in turn, in a child process: the exit status a shell sees.
SUBPROCESS_CASES = [(c, o, s, BAD_PATHS[i % len(BAD_PATHS)]) for i, (c, o, s) in enumerate(OUTPUT_OPTIONS)]


@pytest.mark.parametrize("case", SUBPROCESS_CASES, ids=[f"{c}{o}-{k}" for c, o, _, k in SUBPROCESS_CASES])
def test_unwritable_output_exits_2_in_a_child_process(case: tuple[str, str, str, str], inputs: dict[str, Path],
                                                       tmp_path: Path) -> None:
    command, option, suffix, kind = case
    out = bad_path(kind, tmp_path, suffix)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = run_cli(command_args(command, inputs, option, out), env={"TMPDIR": str(tmp_path)}, timeout_s=120)
    assert "Traceback" not in result.err, result.describe()
    _expect_refusal(result.returncode, result.err, out, kind, tmp_path)
    assert result.out == ""
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_write_error_after_the_work_exits_2(inputs: dict[str, Path], tmp_path: Path) -> None:
    """The default output (RUN.html beside RUN) is not an option, so it is not checked first: the write fails."""
    run = tmp_path / "run.json"
    run.write_bytes(inputs["run"].read_bytes())
    (tmp_path / "run.html").mkdir()
    result = run_cli(["report", run])
    assert result.returncode == 2, result.describe()
    assert result.err_lines == [f"layerscope: error: {tmp_path / 'run.html'}: cannot write (it is a folder)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.html", "run.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.json"
    out.write_text("old\n")

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OutputError) as caught:
        write_atomic(out, "new, and longer than the old\n")
    assert str(caught.value) == f"{out}: cannot write (No space left on device)"
    assert caught.value.exit_code == 2
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_check_writable_creates_nothing(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "out.json"
    assert check_writable(deep) == deep
    assert list(tmp_path.iterdir()) == []  # the parents are made when the file is written, not when checked
    write_atomic(deep, "x")
    assert deep.read_text() == "x"


def test_a_long_name_near_the_limit_is_written(tmp_path: Path) -> None:
    """The temporary file's name is cut so that it is never longer than the target's own (255 bytes max)."""
    out = tmp_path / ("n" * 250 + ".json")
    write_atomic(out, "x")
    assert out.read_text() == "x"


@pytest.mark.parametrize("how", ["compare --markdown", "calibrate --fit-json", "report --csv"])
def test_a_symlink_output_is_replaced_not_written_through(how: str, inputs: dict[str, Path], tmp_path: Path,
                                                          write_model: object) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    link = tmp_path / "out.txt"
    link.symlink_to(victim)
    run = str(inputs["run"])
    args = {"compare --markdown": ["compare", run, run, "--markdown", str(link)],
            "report --csv": ["report", run, "--csv", str(link)],
            "calibrate --fit-json": ["calibrate", *_measured_runs(tmp_path), "-o", str(tmp_path / "c.toml"),
                                 "--force", "--fit-json", str(link)]}[how]
    assert main(args) == 0
    assert victim.read_text() == "not yours\n"
    assert not link.is_symlink() and link.stat().st_size > 0
    if how == "calibrate --fit-json":
        assert json.loads(link.read_text())["profile_path"] == str(tmp_path / "c.toml")


def _measured_runs(folder: Path) -> list[str]:
    """Two quick profile runs of two zoo models (calibrate needs measured runs of more than one model)."""
    paths = []
    for name in ("squeezenet", "shufflenet"):
        path = folder / f"{name}.json"
        assert main(["profile", str(zoo(name)), "--runs", "3", "--warmup", "1", "--top", "0", "--threads", "1",
                     "--target", "rdk-x3", "-o", str(path)]) == 0
        paths.append(str(path))
    return paths


# ----------------------------------------------------------------------------------- devices, FIFOs, sockets
def test_a_character_device_is_written_through_never_replaced(capsys: pytest.CaptureFixture[str]) -> None:
    null = Path("/dev/null")
    before = null.lstat()
    assert main(["schema", "-o", str(null)]) == 0  # as root a rename would have put a regular file there
    after = null.lstat()
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino and after.st_rdev == before.st_rdev
    assert check_writable(null) == null


def test_a_fifo_output_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.fifo"]  # no temporary file beside it


def test_a_socket_output_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(OutputError, match=r"s\.sock: cannot write \(not a regular file, a character device"):
            write_atomic(path, "x")
    assert stat.S_ISSOCK(path.lstat().st_mode)


def test_a_run_file_that_is_a_fifo_or_a_device_is_refused_without_reading(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came: it is never opened
    assert main(["report", str(fifo), "--format", "csv"]) == 2
    assert "run.json: not a layerscope run file (not a regular file)" in capsys.readouterr().err
    assert main(["report", "/dev/zero", "--format", "csv"]) == 2
    assert "/dev/zero: not a layerscope run file (not a regular file)" in capsys.readouterr().err


def test_estimate_json_to_a_device_writes_through_and_reads_nothing(tmp_path: Path) -> None:
    # /dev/full: every write fails with ENOSPC; before, the "existing run" was read from it until memory ran out
    assert main(["estimate", str(SQUEEZENET), "--target", "rdk-s100", "-o", "/dev/full"]) == 2
    assert main(["estimate", str(SQUEEZENET), "--target", "rdk-s100", "-o", "/dev/null"]) == 0
