"""``layerscope bisect``: the command-template runner against a fake device command, the cache, exit codes,
and the ONNX Runtime runner with its validation mode."""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._cli_subprocess import run_cli

from conftest import ModelWriter
from layerscope.cli.main import main
from layerscope.measure.cuts import CutPlanner
from layerscope.model import load_model
from layerscope.report.views.bisect import bisect_view
from layerscope.runfile import as_run, load_document
from test_bisect import write_residual

#: A stand-in for `compile && ssh board perf`: its "latency" is the prefix file's size (1 byte = 1 µs), so
#: every increment is known exactly. Each call is logged; FAKE_FAIL_AT=n makes the n-th call fail.
FAKE_DEVICE = r'''
import json, os, signal, sys, time
model, mode = sys.argv[1], sys.argv[2]
log = os.environ["FAKE_LOG"]
with open(log, "a") as fh:
    fh.write(model + "\n")
with open(log) as fh:
    calls = sum(1 for _ in fh)
if calls == int(os.environ.get("FAKE_INTERRUPT_AT", "0")):  # Ctrl-C in the terminal: SIGINT to layerscope
    os.kill(os.getppid(), signal.SIGINT)
    time.sleep(30)
fail_at = int(os.environ.get("FAKE_FAIL_AT", "0"))
if fail_at and calls >= fail_at:
    print("loading model ... ok")
    print("ERROR: BPU device busy", file=sys.stderr)
    sys.exit(17)
size = os.path.getsize(model)
if mode == "regex":
    print(f"frame 0 latency: 99.000 ms\naverage latency: {size / 1000:.3f} ms")
elif mode == "json":
    print("perf starting")
    print(json.dumps({"perf": {"runs": [{"avg_us": size}]}}))
elif mode == "out":
    with open(sys.argv[3], "w") as fh:
        fh.write(f"latency = {size} us")
elif mode == "sleep":
    time.sleep(30)
else:
    print("no numbers here")
'''
REGEX = r"latency: ([0-9.]+) ms"


@pytest.fixture()
def model(write_model: ModelWriter) -> Path:
    return write_residual(write_model)


@pytest.fixture()
def device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    script = tmp_path / "fake_device.py"
    script.write_text(FAKE_DEVICE)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.delenv("FAKE_FAIL_AT", raising=False)
    monkeypatch.delenv("FAKE_INTERRUPT_AT", raising=False)
    return {"cmd": f"exec {sys.executable} {script}", "log": log}


def _calls(device: dict[str, Any]) -> int:
    log: Path = device["log"]
    return len(log.read_text().splitlines()) if log.exists() else 0


def _sizes(model: Path) -> list[int]:
    planner = CutPlanner.for_model(load_model(model))
    return [len(planner.prefix_model(k).SerializeToString(deterministic=True))
            for k in range(planner.layer_count + 1)]


def _bisect(model: Path, *args: str) -> int:
    return main(["bisect", str(model), "--target", "rdk-s100", *args])


# --- the command-template runner ---------------------------------------------------------------------------------

def test_regex_runner_recovers_every_increment(model: Path, device: dict[str, Any], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert _bisect(model, "--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX,
                   "--granularity", "layer", "--repeats", "2", "--cache", str(tmp_path / "c"), "-o", str(out)) == 0
    sizes = _sizes(model)
    run = load_document(out)
    section = run["bisect"]
    assert [s["increment_us"] for s in section["segments"]] == [b - a for a, b in itertools.pairwise(sizes)]
    assert section["baseline_us"] == sizes[0] and section["full_us"] == sizes[-1]
    assert section["runner"]["runner"] == "command" and section["statistic"] == "median"
    assert not section["boundary"]["corrected"] and "whole runs only" in section["boundary"]["why"]
    assert _calls(device) == 9 * 2 == section["runs"] == section["cache"]["misses"]
    for layer in run["layers"]:
        measured = layer["measured"]
        assert measured["method"] == "differential" and measured["significant"]
        assert measured["ci_low_us"] < measured["median_us"] < measured["ci_high_us"]  # the systematic part
    for seg in section["segments"]:  # a noiseless device: the random part is nothing, the systematic part 5%
        assert seg["random_ci_low_us"] == seg["increment_us"] == seg["random_ci_high_us"]
        assert seg["ci_high_us"] - seg["increment_us"] == pytest.approx(0.05 * abs(seg["increment_us"]), abs=1e-3)
    assert run["measurement"]["source"] == "layerscope bisect"
    printed = capsys.readouterr().out
    assert "segments by differential timing" in printed and "conv0" in printed and "run file:" in printed


def test_max_ci_is_checked_and_recorded(model: Path, device: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert _bisect(model, "--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX, "--segments", "2",
                   "--repeats", "2", "--max-ci", "0.1", "--no-cache", "-o", str(out)) == 0
    section = load_document(out)["bisect"]
    # a noiseless device: every interval is a point at the first check, so no round is added
    assert section["max_ci"] == 0.1 and section["resolve_share"] == 0.05
    assert section["resolve_from"] == section["repeats"] == 2 and section["resolve_widest"] == 0.0
    assert _bisect(model, "--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX, "--max-ci",
                   "1.5") == 2  # not a fraction
    # off by default (on OpenVINO too: test_bisect_openvino), and off when given 0
    for off in ((), ("--max-ci", "0")):
        assert _bisect(model, "--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX, "--segments",
                       "2", "--repeats", "2", *off, "--no-cache", "-o", str(out)) == 0
        section = load_document(out)["bisect"]
        assert section.get("max_ci") is None and section.get("resolve_from") is None


def test_recompile_every_is_for_the_runtimes_in_this_process(model: Path, device: dict[str, Any]) -> None:
    # a device command compiles each model once, with --compile-cmd
    assert _bisect(model, "--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX,
                   "--recompile-every", "5") == 2


def test_suffixes_on_a_device_command(model: Path, device: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert _bisect(model, "--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX, "--suffixes",
                   "--granularity", "layer", "--repeats", "2", "--no-cache", "-o", str(out)) == 0
    section = load_document(out)["bisect"]
    planner = CutPlanner.for_model(load_model(model))
    prefix = _sizes(model)
    suffix = [len(planner.suffix_model(k).SerializeToString(deterministic=True)) for k in range(9)]
    meet = section["meet"]
    # segments before the meeting cut: prefix differences; from it on: suffix differences (the device's
    # "latency" is the size of the file it was given)
    expected = [prefix[k + 1] - prefix[k] if k < meet else suffix[k] - suffix[k + 1] for k in range(8)]
    assert 0 < meet < 8 and [s["increment_us"] for s in section["segments"]] == expected
    assert section["suffix_baseline_us"] == suffix[8] and section["full_us"] == prefix[8]
    assert _calls(device) == (meet + 1 + 1 + (8 - meet) + 1) * 2 == section["runs"]


def test_json_field_and_report_file(model: Path, device: dict[str, Any], tmp_path: Path) -> None:
    sizes = _sizes(model)
    for template, reader in ((" {model} json", ["--latency-json", "perf.runs.0.avg_us", "--latency-unit", "us"]),
                             (" {model} out {out}", ["--latency-regex", r"latency = (?P<latency>\d+) (?P<unit>us)"])):
        out = tmp_path / "run.json"
        assert _bisect(model, "--run-cmd", device["cmd"] + template, *reader, "--segments", "2", "--repeats", "2",
                       "--no-cache", "-o", str(out)) == 0
        section = load_document(out)["bisect"]
        assert section["full_us"] == sizes[-1] and section["baseline_us"] == sizes[0]
        assert section["sum_segments_us"] == sizes[-1] - sizes[0]


def test_compile_command_runs_once_per_prefix(model: Path, device: dict[str, Any], tmp_path: Path) -> None:
    compiled_log = tmp_path / "compiled.log"
    compile_cmd = f"cp {{model}} {{compiled}} && echo {{compiled}} >> {compiled_log}"
    assert _bisect(model, "--compile-cmd", compile_cmd, "--run-cmd", device["cmd"] + " {compiled} regex",
                   "--latency-regex", REGEX, "--granularity", "layer", "--repeats", "3", "--no-cache") == 0
    assert len(compiled_log.read_text().splitlines()) == 9 and _calls(device) == 27


def test_a_failing_command_exits_3_and_the_rerun_resumes(model: Path, device: dict[str, Any], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX, "--granularity", "layer",
            "--repeats", "2", "--cache", str(tmp_path / "c")]
    monkeypatch.setenv("FAKE_FAIL_AT", "7")
    assert _bisect(model, *args) == 3
    err = capsys.readouterr().err
    assert "exited with code 17" in err and "ERROR: BPU device busy" in err and "prefix 6/8" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    monkeypatch.delenv("FAKE_FAIL_AT")
    out = tmp_path / "run.json"
    assert _bisect(model, *args, "-o", str(out)) == 0
    assert _calls(device) == 7 + (18 - 6)  # the 6 samples measured before the failure are not measured again
    cache = load_document(out)["bisect"]["cache"]
    assert cache == {"dir": str(tmp_path / "c"), "hits": 6, "misses": 12}
    assert _bisect(model, *args) == 0 and _calls(device) == 19  # everything cached now


def test_ctrl_c_exits_130_and_the_rerun_reuses_the_cache(model: Path, device: dict[str, Any], tmp_path: Path) -> None:
    args = ["--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX, "--granularity", "layer",
            "--repeats", "2", "--cache", str(tmp_path / "c")]
    # the interrupted run is a child process (the device command signals its parent, as Ctrl-C in a terminal
    # reaches the command): a SIGINT to the test process itself is not what a user sends
    interrupted = run_cli(["bisect", str(model), "--target", "rdk-s100", *args], env={"FAKE_INTERRUPT_AT": "12"})
    assert interrupted.returncode == 130, interrupted.describe()
    assert f"cached in {tmp_path / 'c'}; run the same command again to resume" in interrupted.err
    out = tmp_path / "run.json"
    assert _bisect(model, *args, "-o", str(out)) == 0
    assert load_document(out)["bisect"]["cache"]["hits"] == 11 and _calls(device) == 12 + 18 - 11


def test_the_cache_defaults_to_the_layerscope_cache_dir(model: Path, device: dict[str, Any]) -> None:
    assert _bisect(model, "--run-cmd", device["cmd"] + " {model} regex", "--latency-regex", REGEX,
                   "--segments", "2", "--repeats", "2") == 0
    root = Path(os.environ["LAYERSCOPE_CACHE_DIR"]) / "bisect"
    assert any((root / "samples").rglob("*.json")) and any((root / "models").rglob("model.onnx"))


def test_a_command_past_its_timeout_exits_3(model: Path, device: dict[str, Any],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert _bisect(model, "--run-cmd", device["cmd"] + " {model} sleep", "--latency-regex", REGEX,
                   "--timeout", "0.5", "--no-cache") == 3
    assert "timed out after 0.5 s" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--run-cmd", "{cmd} {{model}} regex", "--latency-regex", "([0-9"], "not a valid regular expression"),
    (["--run-cmd", "{cmd} {{model}} regex", "--latency-regex", "latency"], "needs a group"),
    (["--run-cmd", "{cmd} {{modle}} regex", "--latency-regex", REGEX], "unknown placeholder(s) {modle}"),
    (["--run-cmd", "{cmd} x regex", "--latency-regex", REGEX], "never names {model}"),
    (["--run-cmd", "{cmd} {{model}} regex"], "exactly one of --latency-regex and --latency-json"),
    (["--run-cmd", "{cmd} {{model}} garbage", "--latency-regex", REGEX], "'no numbers here'"),
    (["--run-cmd", "{cmd} {{model}} json", "--latency-json", "perf.missing"], "found no latency"),
    (["--run-cmd", "{cmd} {{model}} regex", "--latency-regex", REGEX, "--validate"], "cannot check --run-cmd"),
    (["--latency-regex", REGEX], "only apply with --run-cmd"),
    (["--run-cmd", "{cmd} {{model}} regex", "--latency-regex", REGEX, "--budget", "5"], "too small"),
    (["--clock", "cpu", "--threads", "2"], "--clock cpu needs --threads 1"),
    (["--run-cmd", "{cmd} {{model}} regex", "--latency-regex", REGEX, "--boundary-runs", "5"], "whole runs only"),
])
def test_bad_input_exits_2_in_one_line(model: Path, device: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                       args: list[str], message: str) -> None:
    assert _bisect(model, *[a.format(cmd=device["cmd"]) for a in args], "--no-cache") == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# --- the ONNX Runtime runner --------------------------------------------------------------------------------------

def test_onnxruntime_runner_with_validation(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert _bisect(model, "--threads", "1", "--segments", "3", "--repeats", "3", "--pilot", "1",
                   "--runs-per-visit", "2", "--validate", "--validate-runs", "3", "--cache", str(tmp_path / "c"),
                   "-o", str(out)) == 0
    run = load_document(out)
    section = run["bisect"]
    assert section["runner"]["runner"] == "onnxruntime" and section["runner"]["threads"] == 1
    # --warm-with auto: each visit first runs the model itself, a suffix then the layers before its cut, as the
    # whole model's loop leaves the machine
    assert section["runner"]["visit_warmup"] == 1 and section["runner"]["warm_with"] == "loop"
    assert section["validation"]["method"] == "kernel-profile" and section["validation"]["runs"] == 3
    # auto: a CPU shared with other work is read by its fastest rounds, and so is the reference
    assert section["statistic"] == "p10" and section["validation"]["statistic"] == "p10"
    whole = section["validation"]["profile_latency_us"]
    assert section["validation"]["sum_vs_profile_latency"] == pytest.approx(
        (section["sum_segments_us"] + section["baseline_us"] - whole) / whole, abs=1e-4)  # µs rounded to ns
    # auto: the cuts past the middle are timed as suffixes, which meet the prefixes at one cut
    prefixes, suffixes, meet = section["prefixes"], section["suffixes"], section["meet"]
    assert suffixes and suffixes[0]["layers"] == meet == prefixes[-2]["layers"] and prefixes[-1]["layers"] == 8
    assert {p["side"] for p in prefixes} == {"prefix"} and {p["side"] for p in suffixes} == {"suffix"}
    assert len(section["segments"]) == len(prefixes) - 2 + len(suffixes) - 1
    # every model's own cost at its cut was looked for (the baselines and the whole model are the reference)
    boundary = section["boundary"]
    assert boundary["corrected"] and boundary["runs"] == 10 and boundary["max_share"] == 0.1
    # a cut costing more than 10% of a segment beside it is dropped; its model was timed and is counted
    assert boundary["models"] == len(prefixes) + len(suffixes) + len(boundary["dropped"])
    assert all(d["share"] is None or d["share"] > 0.1 for d in boundary["dropped"])
    assert prefixes[0]["boundary_us"] == prefixes[-1]["boundary_us"] == suffixes[-1]["boundary_us"] == 0.0
    # each side's corrections telescope to the meeting cut's
    assert sum(s["boundary_us"] for s in section["segments"]) == pytest.approx(
        prefixes[-2]["boundary_us"] + suffixes[0]["boundary_us"], abs=0.01)
    for seg in section["segments"]:
        assert {"profile_us", "error", "share", "ci_low_us", "ci_high_us", "significant"} <= seg.keys()
        assert seg["ci_low_us"] <= seg["ci_high_us"]
    assert sum(layer["measured"]["median_us"] for layer in run["layers"]) == pytest.approx(
        section["sum_segments_us"], abs=0.01 * len(run["layers"]))
    printed = capsys.readouterr().out
    assert "Validation against `layerscope profile`" in printed and "within 15%" in printed
    context = {row.label: row.value for row in bisect_view(as_run(run)).context}  # what the terminal prints
    assert f"prefixes + {len(suffixes)} suffixes" in context["plan"] and "suffixes (the layers" in context["halves"]
    assert "halves" in printed
    json.dumps(run)  # plain JSON all the way down


@pytest.mark.parametrize(("choice", "expected"), [("auto", "loop"), ("whole", "whole"), ("self", "self"),
                                                   ("loop", "loop")])
def test_warm_with_auto_is_the_loop(choice: str, expected: str) -> None:
    from layerscope.cli.bisect import _warm_with

    assert _warm_with(choice) == expected


@pytest.mark.parametrize(("runs", "openvino", "expected"),
                         [(None, False, 1), (None, True, 4), (0, True, 0), (2, False, 2)])
def test_visit_warmup_defaults_to_1_on_onnxruntime_and_4_on_openvino(runs: int | None, openvino: bool,
                                                                      expected: int) -> None:
    from layerscope.cli.bisect import _visit_warmup

    assert _visit_warmup(runs, openvino=openvino) == expected
