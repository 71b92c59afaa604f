"""Run-file sections by capability, registered in one place (:mod:`layerscope.report.capabilities`): a capability
registered in this file alone (a section kept as an unknown key of the run file, a terminal view, a command) is
printed by ``layerscope report RUN --format table`` and guessed from a run that holds it; and every optional
section of the run file that a command prints belongs to a registered capability."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper
from rich.console import RenderableType
from rich.text import Text

import layerscope
from layerscope.cli.main import main
from layerscope.report import capabilities as registry
from layerscope.report.capabilities import Capability, ReportRequest, section_value
from layerscope.report.command_terminal import guessed_kind, run_kind
from layerscope.report.views.experiments import experiments
from layerscope.runfile import load
from layerscope.runfile.commands import RUN_COMMANDS
from layerscope.runfile.models import RunFile

PACKAGE = Path(layerscope.__file__).parent

#: Optional sections of the run file that belong to no capability, each with its reason.
NOT_A_CAPABILITY: dict[str, str] = {
    "tool": "who wrote the run (every command writes it; the report reads it to pick the command's views)",
    "target": "the hardware profile of the estimate: part of every run's estimate tables",
    "estimate_info": "how the estimate was made: part of every run's estimate tables",
}

# -- a fake capability, registered in this file only ----------------------------------------------------------------

FAKE_SECTION = "fake_probe_section"
FAKE_COMMAND = "fake-probe"


def _fake_view(run: RunFile, request: ReportRequest) -> list[RenderableType]:
    """One line per item of the section, then how many rows the report asked for."""
    section = section_value(run, FAKE_SECTION)
    if section is None:
        return []
    lines = [f"fake probe: {item['name']} = {item['value_us']:.1f} us" for item in section["items"]]
    return [Text("\n".join([*lines, f"fake probe rows: {request.rows}"]))]


FAKE = Capability(name="fake-probe", sections=(FAKE_SECTION,), commands=(FAKE_COMMAND,), terminal=_fake_view,
                  shown_by=(FAKE_COMMAND, "estimate"), default_top=7, precedence=5)


@pytest.fixture()
def fake_capability() -> Iterator[Capability]:
    registry.register(FAKE)
    try:
        yield FAKE
    finally:
        registry.unregister(FAKE.name)


@pytest.fixture()
def estimated(tmp_path: Path) -> Path:
    """``layerscope estimate`` of a Conv -> Relu model on rdk-x5: a run written by a real command."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], [0.01] * 216)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])], initializer=[weight])
    model = tmp_path / "probe.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    out = tmp_path / "run.json"
    assert main(["estimate", str(model), "-t", "rdk-x5", "-o", str(out)]) == 0
    return out


def _with_fake(path: Path, command: str | None) -> Path:
    """The run at ``path`` with the fake section added as an unknown key, and its ``tool.command`` set to
    ``command`` (``None``: no ``tool`` section, a run that does not say what wrote it)."""
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    document[FAKE_SECTION] = {"items": [{"name": "warm-up", "value_us": 12.25}, {"name": "steady", "value_us": 3.5}]}
    if command is None:
        document.pop("tool", None)
    else:
        document["tool"]["command"] = command
    out = path.with_name(f"fake-{command}.json")
    out.write_text(json.dumps(document), encoding="utf-8")
    return out


def _report(path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["report", str(path), "--format", "table", *args]) == 0
    return capsys.readouterr().out


FAKE_LINES = ["fake probe: warm-up = 12.2 us", "fake probe: steady = 3.5 us"]


def test_a_capability_registered_in_one_file_is_printed_by_report(
        fake_capability: Capability, estimated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_path = _with_fake(estimated, FAKE_COMMAND)
    run = load(run_path)
    assert run.model_extra is not None and FAKE_SECTION in run.model_extra  # kept as an unknown key
    assert run_kind(run) == FAKE_COMMAND
    out = _report(run_path, capsys)
    assert out.splitlines() == [*FAKE_LINES, "fake probe rows: 7"]  # its own command's report: its view alone
    assert _report(run_path, capsys, "--top", "2").splitlines()[-1] == "fake probe rows: 2"
    assert "layers by estimated latency" not in out and "ESTIMATE" not in out  # not the estimate's tables


def test_the_fake_section_names_its_command_when_the_run_does_not(
        fake_capability: Capability, estimated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_path = _with_fake(estimated, None)
    run = load(run_path)
    assert run.tool is None and guessed_kind(run) == run_kind(run) == FAKE_COMMAND  # precedence 5: first
    assert _report(run_path, capsys).splitlines()[:2] == FAKE_LINES


def test_a_capability_shown_by_another_command_follows_its_views(
        fake_capability: Capability, estimated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = _report(estimated, capsys)
    run_path = _with_fake(estimated, "estimate")
    out = _report(run_path, capsys)
    # the estimate's own tables first, unchanged, then the fake view with the estimate's rows (20)
    assert out.startswith(plain.rstrip("\n")) and "layers by estimated latency" in plain
    assert out.splitlines()[-3:] == [*FAKE_LINES, "fake probe rows: 20"]


def test_without_the_registration_the_section_is_kept_but_not_printed(
        estimated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_path = _with_fake(estimated, "estimate")
    assert FAKE_SECTION in (load(run_path).model_extra or {})
    assert "fake probe" not in _report(run_path, capsys) and run_kind(load(run_path)) == "estimate"


def test_the_fake_lives_in_this_file_only() -> None:
    sources = [p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".html") and FAKE_SECTION in p.read_text("utf-8")]
    assert sources == []


def test_a_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.capabilities()[0])


# -- the registry covers the run file -------------------------------------------------------------------------------


def _optional_sections() -> set[str]:
    """The run file's optional sections, as the file names them (fields whose default is ``None``)."""
    return {info.alias or name for name, info in RunFile.model_fields.items()
            if not info.is_required() and info.default is None}


def test_every_optional_section_belongs_to_a_capability() -> None:
    owned = {section for c in registry.capabilities() for section in c.sections}
    optional = _optional_sections()
    assert optional - owned - set(NOT_A_CAPABILITY) == set(), "register a capability for these sections"
    assert set(NOT_A_CAPABILITY) <= optional and not owned & set(NOT_A_CAPABILITY)
    assert owned <= set(RunFile.model_fields) | {i.alias for i in RunFile.model_fields.values() if i.alias}
    assert {"measurement", "latency", "bench_sweep", "timeline", "reconcile", "findings", "comparison", "pipeline",
            "stress", "bisect", "import", "predictor"} <= owned


def test_every_section_a_command_prints_has_a_view_and_a_command() -> None:
    for capability in registry.capabilities():
        assert capability.terminal is not None and capability.shown_by, capability.name
        assert set(capability.shown_by) <= set(RUN_COMMANDS), capability.name
        assert set(capability.commands) <= set(RUN_COMMANDS), capability.name


def test_every_command_that_writes_a_run_has_its_capability() -> None:
    assert sorted(registry.commands()) == sorted(RUN_COMMANDS)
    for command in RUN_COMMANDS:
        own = registry.own_capability(command)
        assert own is not None and command in own.shown_by


def test_the_experiments_tab_follows_the_registry() -> None:
    parts = experiments(load_bare()).parts
    assert [p.name for p in parts] == [c.name for c in registry.capabilities() if c.html is not None]
    assert [p.name for p in parts] == ["bisect", "comparison", "pipeline", "stress"]
    assert all(p.view is None for p in parts)
    assert all((PACKAGE / "report" / "templates" / p.template).is_file() for p in parts)


def load_bare() -> RunFile:
    return RunFile.from_json({"schema_version": 2, "model": {"name": "m"}, "layers": [], "summary": {}})
