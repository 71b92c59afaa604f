"""A run records the command that last wrote it (``tool.command``), and ``layerscope report`` prints that command's
tables: every command that writes a run names itself; a run without the record (older, another tool's, by hand)
gets the report guessed from its sections."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import ModelWriter
from layerscope.cli.main import main
from layerscope.report.command_terminal import guessed_kind, run_kind
from layerscope.runfile import load as load_typed
from layerscope.runfile.commands import RUN_COMMANDS
from layerscope.version import __version__
from test_bisect import write_residual
from test_bisect_cli import FAKE_DEVICE, REGEX

IMPORTS = Path(__file__).parent / "fixtures" / "importers"
QUICK = ("--runs", "2", "--warmup", "0", "--threads", "1")
PIPELINE = textwrap.dedent("""
    def pipeline(model):
        return model.run(None, dict(model.example_inputs))
""")


@pytest.fixture(autouse=True)
def _wide_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")


@pytest.fixture()
def model(write_model: ModelWriter) -> Path:
    return write_residual(write_model)


def _tool(path: Path) -> dict[str, Any]:
    tool: dict[str, Any] = json.loads(path.read_text())["tool"]
    return tool


def _written(args: list[str], out: Path) -> dict[str, Any]:
    assert main([*args, "-o", str(out)]) == 0
    return _tool(out)


def _report(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["report", str(path), "--format", "table"]) == 0
    return capsys.readouterr().out


def test_the_registry_names_each_command_once() -> None:
    assert sorted(RUN_COMMANDS) == sorted({"estimate", "profile", "bench", "bisect", "pipeline", "import",
                                           "reconcile", "advise", "compare"})


def test_every_command_that_makes_a_run_names_itself(model: Path, tmp_path: Path) -> None:
    estimate = tmp_path / "estimate.json"
    assert _written(["estimate", str(model), "-t", "rdk-s100"], estimate) == {
        "name": "layerscope", "version": __version__, "command": "estimate"}
    profile = tmp_path / "profile.json"
    assert _written(["profile", str(model), "-t", "rdk-s100", *QUICK], profile)["command"] == "profile"
    assert _written(["bench", str(model), *QUICK], tmp_path / "bench.json")["command"] == "bench"
    script = tmp_path / "pipe.py"
    script.write_text(PIPELINE)
    assert _written(["pipeline", f"{script}:pipeline", str(model), *QUICK],
                    tmp_path / "pipeline.json")["command"] == "pipeline"
    assert _written(["import", str(IMPORTS / "trtexec" / "yolov5s.profile.json")],
                    tmp_path / "import.json")["command"] == "import"
    # each run's report is its command's: the record and the guess from its sections agree on a fresh run
    for name in ("estimate", "profile", "bench", "pipeline", "import"):
        run = load_typed(tmp_path / f"{name}.json")
        assert run_kind(run) == guessed_kind(run) == name


def test_bisect_on_a_device_command_names_itself(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "fake_device.py"
    script.write_text(FAKE_DEVICE)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    monkeypatch.delenv("FAKE_FAIL_AT", raising=False)
    monkeypatch.delenv("FAKE_INTERRUPT_AT", raising=False)
    out = tmp_path / "bisect.json"
    assert _written(["bisect", str(model), "--target", "rdk-s100", "--run-cmd",
                     f"exec {sys.executable} {script} {{model}} regex", "--latency-regex", REGEX, "--segments", "2",
                     "--repeats", "2", "--pilot", "1", "--no-cache"], out)["command"] == "bisect"
    assert run_kind(load_typed(out)) == "bisect"


def test_an_analysis_names_itself_over_the_run_it_read(model: Path, tmp_path: Path) -> None:
    before, after = tmp_path / "s100.json", tmp_path / "x5.json"
    assert _written(["estimate", str(model), "-t", "rdk-s100"], before)["command"] == "estimate"
    assert _written(["estimate", str(model), "-t", "rdk-x5"], after)["command"] == "estimate"
    assert _written(["compare", str(before), str(after)], tmp_path / "cmp.json")["command"] == "compare"
    assert main(["advise", str(before), "--save"]) == 0
    assert _tool(before)["command"] == "advise"
    profiled = tmp_path / "profile.json"
    assert _written(["profile", str(model), "-t", "rdk-s100", *QUICK], profiled)["command"] == "profile"
    assert main(["reconcile", str(profiled), "--save"]) == 0
    assert _tool(profiled) == {"name": "layerscope", "version": __version__, "command": "reconcile"}
    assert [run_kind(load_typed(p)) for p in (tmp_path / "cmp.json", before, profiled)] == [
        "compare", "advise", "reconcile"]


def test_an_estimate_refreshed_into_a_run_keeps_the_command_that_made_it(model: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``estimate -o`` into an existing run refreshes its estimate; the run stays what its command made (an advised
    run reports its findings, a profiled run its measurement), now with the new estimate."""
    run = tmp_path / "run.json"
    assert main(["estimate", str(model), "-t", "rdk-s100", "-o", str(run)]) == 0
    assert main(["advise", str(run), "--save"]) == 0
    advised = _report(run, capsys)
    assert "Findings (" in advised and "by estimated latency" not in advised
    assert main(["estimate", str(model), "-t", "rdk-x5", "-o", str(run)]) == 0
    merged = load_typed(run)
    assert merged.findings is not None and merged.target is not None and merged.target.name == "rdk-x5"
    assert merged.tool is not None and merged.tool.command == "advise" and run_kind(merged) == "advise"
    assert "Findings (" in _report(run, capsys)


def test_a_run_without_the_record_gets_the_guessed_report(model: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.json"
    assert main(["estimate", str(model), "-t", "rdk-s100", "-o", str(run)]) == 0
    assert main(["advise", str(run), "--save"]) == 0
    advised = _report(run, capsys)
    document = json.loads(run.read_text())
    for tool in ({"name": "layerscope", "version": "0.0.9"},  # written before the command was recorded
                 {"name": "layerscope", "version": __version__, "command": "frobnicate"},  # a command not known here
                 {"name": "other-tool", "command": "estimate"}):  # another tool's words are not layerscope's
        run.write_text(json.dumps({**document, "tool": tool}, indent=2))
        assert run_kind(load_typed(run)) == "advise"
        assert _report(run, capsys) == advised
