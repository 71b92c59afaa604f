"""The typed ``timeline`` and ``pipeline`` sections: modelled key for key as the producers write them, malformed
parts refused with the JSON path, partial sections still rendered (terminal, Perfetto, execution trace)."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conftest import zoo
from layerscope.cli.main import main
from layerscope.errors import InputError, RunFileError
from layerscope.report.exec_trace import execution_trace
from layerscope.report.perfetto import pipeline_tracks
from layerscope.report.pipeline_terminal import pipeline_report
from layerscope.report.timeline_terminal import timeline_report
from layerscope.report.views.pipeline import pipeline_view
from layerscope.runfile import load_document
from layerscope.runfile.io import as_run
from layerscope.runfile.models import Section

BARE: dict[str, Any] = {"schema_version": 2, "model": {"name": "m"}, "summary": {},
                        "layers": [{"id": "a"}, {"id": "b"}]}


def _extras(node: Any, path: str) -> list[str]:
    """JSON paths of every key under ``node`` that no model names (kept as an unknown key)."""
    if isinstance(node, Section):
        found = [f"{path}.{key}" for key in node.model_extra or {}]
        for name in type(node).model_fields:
            found += _extras(getattr(node, name), f"{path}.{name}")
        return found
    if isinstance(node, list):
        return [p for i, item in enumerate(node) for p in _extras(item, f"{path}[{i}]")]
    return []


def _text(renderable: Any) -> str:
    console = Console(width=160, record=True, file=open("/dev/null", "w"), color_system=None)  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def test_the_timeline_section_is_modelled_key_for_key(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["estimate", str(zoo("squeezenet")), "-t", "rdk-s100", "--timeline", "--top", "0",
                 "-o", str(out)]) == 0
    document = load_document(out)
    run = as_run(document)
    timeline = run.timeline
    assert timeline is not None and timeline.summary is not None and timeline.memory is not None
    assert _extras(timeline, "timeline") == []  # every key the producer writes is a field
    assert run.to_json()["timeline"] == document["timeline"]  # nothing lost or coerced on the way through
    assert len(timeline.layers) == len(run.layers) and timeline.units and timeline.temporal is not None
    m = timeline.memory
    per_frame = (m.input_bytes or 0) + (m.output_bytes or 0) + (m.exclusive_intermediate_bytes or 0)
    assert m.static_bytes and per_frame and m.frames_in_flight == 1
    assert m.minimum_requirement_bytes == m.static_bytes + (m.shared_temporary_bytes or 0) + per_frame


SCRIPT = textwrap.dedent("""
    import layerscope

    def pipeline(model):
        with layerscope.trace_point("prepare"):
            feeds = {name: array.copy() for name, array in model.example_inputs.items()}
        model.run(None, feeds)
""")


def test_the_pipeline_section_is_modelled_key_for_key(tmp_path: Path) -> None:
    script = tmp_path / "user_pipeline.py"
    script.write_text(SCRIPT, encoding="utf-8")
    out = tmp_path / "run.json"
    assert main(["pipeline", f"{script}:pipeline", str(zoo("squeezenet")), "--runs", "2", "--warmup", "0",
                 "--threads", "1", "--top", "0", "-o", str(out)]) == 0
    document = load_document(out)
    run = as_run(document)
    section = run.pipeline
    assert section is not None and section.stages and section.spans and section.kernels
    assert _extras(section, "pipeline") == []
    assert run.to_json()["pipeline"] == document["pipeline"]
    stages = {stage.name: stage for stage in section.stages}
    assert stages["prepare"].kind == "pre" and stages["prepare"].self_time is not None  # "self" in the file
    assert section.trace is not None and all(span.run == section.trace.run for span in section.spans)


@pytest.mark.parametrize(("section", "broken", "message"), [
    ("timeline", {"units": [{"name": "TAE", "busy": [{"layer": "a", "start_us": "abc", "end_us": 1.0}]}]},
     r"timeline\.units\[0\]\.busy\[0\]\.start_us: expected a number"),
    ("timeline", {"temporal": {"ddr_utilization": [0.5, -0.1]}}, r"timeline\.temporal\.ddr_utilization\[1\]"),
    ("timeline", {"layers": [{"unit": "TAE"}]}, r"timeline\.layers\[0\]\.id: missing"),
    ("pipeline", {"stages": [{"kind": "pre"}]}, r"pipeline\.stages\[0\]\.name: missing"),
    ("pipeline", {"spans": [{"name": "x", "thread": 1, "start_us": 0.0, "duration_us": -2.0}]},
     r"pipeline\.spans\[0\]\.duration_us"),
    ("pipeline", {"end_to_end": {"median_us": float("nan")}}, r"pipeline\.end_to_end\.median_us"),
])
def test_a_malformed_part_is_refused_naming_its_path(section: str, broken: dict[str, Any], message: str) -> None:
    with pytest.raises(RunFileError, match=message):
        as_run(dict(copy.deepcopy(BARE), **{section: broken}))


def test_a_partial_timeline_renders_what_it_has() -> None:
    run = as_run(dict(BARE, timeline={
        "note": "hand-made", "summary": {"latency_us": 200.0},
        "units": [{"name": "TAE", "core": 0, "busy_us": 50.0, "busy": [{"layer": "a", "start_us": 0, "end_us": 50}]},
                  {"name": "TAE", "core": 1, "busy_us": 50.0, "busy": [{"layer": "b", "start_us": 0, "end_us": 50}]}],
        "memory": {"static_bytes": 2048}}))
    text = _text(timeline_report(run))
    assert "ESTIMATE: hand-made" in text and "200.0 µs" in text
    assert "25.0%" in text  # 50 of 200 µs busy, core 0 only
    assert "2.00 KiB" in text and "model input" in text  # held categories print, the others "-"
    assert "No timeline" in _text(timeline_report(as_run(BARE)))


def test_a_partial_pipeline_renders_and_cycles_end_at_level_zero() -> None:
    run = as_run(dict(BARE, pipeline={
        "function": "f", "runs": 3,
        "stages": [{"name": "x", "parent": "y"}, {"name": "y", "parent": "x"}, {"name": "z", "parent": "x"}],
        "top": [{"name": "b", "kind": "layer", "median_us": 4.0}]}))
    view = pipeline_view(run)
    assert view is not None and view.runs == 3 and view.top[0].layer_index == 1
    assert [(s.name, s.level) for s in view.stages] == [("x", 0), ("y", 0), ("z", 0)]  # a cycle: no tree
    text = _text(pipeline_report(run))
    assert "Stages over 3 runs" in text and "4.0" in text


def test_pipeline_tracks_from_the_typed_spans_and_kernels() -> None:
    run = as_run(dict(BARE, kernels=[{"name": "k1", "op_type": "Conv", "layers": ["a", "b"]}], pipeline={
        "function": "f", "trace": {"phase": "profiled", "run": 2},
        "spans": [{"name": "f", "kind": "run", "thread": 7, "thread_name": "Main", "start_us": 0.0,
                   "duration_us": 100.0, "depth": 0, "run": 2},
                  {"name": "model", "kind": "model", "thread": 7, "start_us": 10.0, "duration_us": 50.0, "run": 2}],
        "kernels": [{"name": "k1", "thread": 9, "start_us": 12.0, "duration_us": 5.0, "layers": ["a", "b"]}]}))
    tracks = pipeline_tracks(run)
    assert tracks is not None and tracks.note == "PIPELINE: f, run 2 (profiled phase)"
    assert [t.name for t in tracks.tracks] == ["Main (7)", "thread 9 (9)"]
    kernel = tracks.tracks[1].slices[0]
    assert (kernel.name, kernel.start_us, kernel.end_us) == ("a (+1 fused)", 12.0, 17.0)
    assert dict(kernel.args) == {"kernel": "k1", "op_type": "Conv", "layers": "a, b"}


def test_the_execution_trace_needs_a_measured_run() -> None:
    with pytest.raises(InputError, match="needs a measured run"):
        execution_trace(as_run(BARE))
