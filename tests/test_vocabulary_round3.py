"""One option vocabulary, finished: ``--json`` is a deprecated spelling of ``-o/--output`` in every command that
writes a run (one line on stderr, the value still used; both spellings at once refused); ``--html`` on ``compare``,
``reconcile``, ``advise`` and ``bisect`` writes the report of the run the command made; ``bisect --top N`` keeps the
N segments of largest time; ``calibrate --threads`` (``--kernel-threads`` deprecated); with a main output on stdout
the lines naming written files go to stderr."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from conftest import ModelWriter
from layerscope.cli.main import main
from layerscope.runfile import load_document
from test_bisect import write_residual
from test_bisect_cli import FAKE_DEVICE, REGEX, _sizes

DEPRECATED = "is deprecated and will be removed in the next release; use"
HORIZON = Path(__file__).parent / "fixtures" / "importers" / "horizon"
SCRIPT = textwrap.dedent("""
    def run_once(model):
        return model.run(None, model.example_inputs)
""")


@pytest.fixture()
def tiny(write_model: ModelWriter) -> Path:
    """y = relu(x + x): one input, two layers; cheap to run."""
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return write_model(nodes, [("x", TensorProto.FLOAT, [1, 8])], [("y", TensorProto.FLOAT, [1, 8])])


@pytest.fixture()
def measured(tiny: Path, tmp_path: Path) -> Path:
    """A profile run of ``tiny`` (an estimate and a measurement: what compare, reconcile and advise read)."""
    run = tmp_path / "measured.json"
    assert main(["profile", str(tiny), "--runs", "3", "--warmup", "1", "--threads", "1", "--top", "0",
                 "-o", str(run)]) == 0
    return run


@pytest.fixture()
def device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """test_bisect_cli's fake device: a prefix's latency is its file's size (1 byte = 1 µs)."""
    script = tmp_path / "fake_device.py"
    script.write_text(FAKE_DEVICE)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    monkeypatch.delenv("FAKE_FAIL_AT", raising=False)
    monkeypatch.delenv("FAKE_INTERRUPT_AT", raising=False)
    return f"exec {sys.executable} {script} {{model}} regex"


def _deprecations(err: str) -> list[str]:
    return [line for line in err.splitlines() if DEPRECATED in line]


def _argv(command: str, tiny: Path, run: Path, tmp_path: Path) -> list[str]:
    """A quick, complete command line of ``command`` without its output option."""
    fast = ["--runs", "2", "--warmup", "0", "--threads", "1"]
    script = tmp_path / "pipe.py"
    script.write_text(SCRIPT)
    return {"estimate": ["estimate", str(tiny), "--top", "0"],
            "profile": ["profile", str(tiny), *fast, "--top", "0"],
            "bench": ["bench", str(tiny), *fast],
            "pipeline": ["pipeline", f"{script}:run_once", str(tiny), *fast, "--no-layers"],
            "import": ["import", str(HORIZON / "s100_profiler.log")],
            "compare": ["compare", str(run), str(run)],
            "reconcile": ["reconcile", str(run)],
            "advise": ["advise", str(run), "--no-model", "--no-measure"]}[command]


@pytest.mark.parametrize("command", ["estimate", "profile", "bench", "pipeline", "import", "compare", "reconcile",
                                     "advise"])
def test_json_is_the_deprecated_spelling_of_output(command: str, tiny: Path, measured: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(command, tiny, measured, tmp_path)
    capsys.readouterr()
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    assert main([*argv, "-o", str(new)]) == 0
    assert not _deprecations(capsys.readouterr().err)
    assert main([*argv, "--json", str(old)]) == 0
    assert _deprecations(capsys.readouterr().err) == [f"layerscope: warning: --json {DEPRECATED} -o/--output"]
    assert load_document(old).keys() == load_document(new).keys()  # the same run, written under the old spelling
    assert main([*argv, "-o", str(tmp_path / "a.json"), "--json", str(tmp_path / "b.json")]) == 2
    assert "give -o/--output or the deprecated --json, not both" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("command", ["compare", "reconcile", "advise"])
def test_analysis_commands_write_the_html_report(command: str, tiny: Path, measured: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    html, run = tmp_path / "report.html", tmp_path / "run.json"
    assert main([*_argv(command, tiny, measured, tmp_path), "-o", str(run), "--html", str(html)]) == 0
    printed = capsys.readouterr().out
    assert f"report: {html}" in printed and f"run file: {run}" in printed
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>")
    # the page of the run the command wrote, as `layerscope report` renders that run
    assert main(["report", str(run), "-o", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_text() == page


def test_reconcile_html_takes_one_run(measured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "r.html"
    assert main(["reconcile", str(measured), str(measured), "--html", str(html)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("layerscope: error: --html takes one run;") and "--save" in line
    assert not html.exists()


def test_a_main_output_on_stdout_keeps_it_alone(measured: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "a.html"
    assert main(["advise", str(measured), "--no-model", "--no-measure", "-o", "-", "--html", str(html)]) == 0
    printed = capsys.readouterr()
    json.loads(printed.out)  # the findings alone
    assert printed.err.splitlines()[-1] == f"report: {html}" and html.is_file()
    run = tmp_path / "c.json"
    assert main(["compare", str(measured), str(measured), "--markdown", "-", "-o", str(run)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("#") and "run file:" not in printed.out
    assert f"run file: {run}" in printed.err


def test_bisect_top_keeps_the_largest_segments_in_model_order(write_model: ModelWriter, device: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    model = write_residual(write_model)
    common = ["bisect", str(model), "--target", "rdk-s100", "--run-cmd", device, "--latency-regex", REGEX,
              "--granularity", "layer", "--repeats", "2", "--cache", str(tmp_path / "cache")]
    run, html = tmp_path / "b.json", tmp_path / "b.html"
    assert main([*common, "--top", "3", "-o", str(run), "--html", str(html)]) == 0
    printed = capsys.readouterr().out
    # the device's time of a segment is the growth of the prefix file: known exactly
    increments = [b - a for a, b in itertools.pairwise(_sizes(model))]
    names = [layer["name"] for layer in load_document(run)["layers"]]
    largest = sorted(sorted(range(len(increments)), key=lambda i: -increments[i])[:3])
    rows = [line.split()[1] for line in printed.splitlines() if line.strip()[:1].isdigit()
            and len(line.split()) > 2 and line.split()[1] in names]
    assert rows == [names[i] for i in largest]
    assert f"3 of {len(increments)} segments shown, the largest by bisect µs (--top)" in printed
    assert f"report: {html}" in printed and html.read_text().startswith("<!DOCTYPE html>")
    assert main([*common]) == 0  # the default: every segment (the cache answers)
    printed = capsys.readouterr().out
    assert "segments shown" not in printed
    every = [line.split()[1] for line in printed.splitlines() if line.strip()[:1].isdigit()
             and len(line.split()) > 2 and line.split()[1] in names]
    assert len(every) == len(increments), printed
    assert main([*common, "--top", "0"]) == 0  # 0 rows, as --top 0 everywhere: the summary alone
    printed = capsys.readouterr().out
    assert not [line for line in printed.splitlines() if line.strip()[:1].isdigit()
                and len(line.split()) > 2 and line.split()[1] in names]


def test_calibrate_threads_and_the_old_kernel_threads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # both spellings at once are refused before anything is timed
    assert main(["calibrate", "--kernels", "-o", str(tmp_path / "p.json"), "--kernel-threads", "2",
                 "--threads", "2"]) == 2
    err = capsys.readouterr().err
    assert _deprecations(err) == [f"layerscope: warning: --kernel-threads {DEPRECATED} --threads"]
    assert "give --threads or the deprecated --kernel-threads, not both" in err


def test_import_names_the_vendor_tool_with_from_and_keeps_format_one_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``import --from TOOL`` names the tool whose files are read (``--format`` is the report's output format
    everywhere else); ``--format TOOL`` still works, with one deprecation line, and gives the same run."""
    trt = Path(__file__).parent / "fixtures" / "importers" / "trtexec" / "resnet-a100-fp16"
    files = [str(trt / f"resnet.onnx.engine.{kind}.json") for kind in ("profile", "graph")]
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    assert main(["import", *files, "--from", "trtexec", "--top", "0", "-o", str(new)]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert main(["import", *files, "--format", "trtexec", "--top", "0", "-o", str(old)]) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if "deprecated" in line] == [
        "layerscope: warning: --format is deprecated and will be removed in the next release; use --from"]
    assert load_document(new)["layers"] == load_document(old)["layers"]
    assert main(["import", *files, "--from", "ort"]) == 2  # the tool named is the one the files are read as
