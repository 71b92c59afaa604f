"""Reports from saved runs: sections, CSV, Markdown, HTML markup, the annotated model and ``layerscope report``.

Also the run files the other report tests share (:func:`make_runs`): a small model whose names are hostile
(``<img src=x onerror=alert(1)>``, ``</script>``, a spreadsheet formula), estimated on the RDK S100 with the
timeline, then profiled on ONNX Runtime; and vendor imports without a model (Horizon, trtexec).
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.cli.main import main
from layerscope.report.annotate import annotate_model
from layerscope.report.html import render_html, report_data, script_json
from layerscope.report.sections import (
    estimated_tracks,
    findings,
    graph_layout,
    layer_rows,
    missing_notes,
    scale_factor,
    share_basis,
    summary_sections,
)
from layerscope.report.tables import CSV_COLUMNS, csv_cell, layers_csv, markdown_summary, md_code
from layerscope.run import load_run

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "\"></script><script>alert(2)</script>"
FORMULA = "=cmd|' /C calc'!A0"
MODEL_NAME = "<script>alert('model')</script>"


def hostile_model(path: Path) -> Path:
    """A small model whose node and graph names try to break out of HTML, JSON, CSV and Markdown.

    Conv -> Relu -> Conv 1x1 -> Add (residual) -> TopK (falls back to the CPU on the RDK S100).
    """
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), "w2")
    k = numpy_helper.from_array(np.array([5], np.int64), "k")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], name=XSS, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name=SCRIPT),
        helper.make_node("Conv", ["r", "w2"], ["d"], name="conv&amp;2 | `tick`"),
        helper.make_node("Add", ["r", "d"], ["y"], name=FORMULA),
        helper.make_node("TopK", ["y", "k"], ["values", "indices"], name="topk", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, MODEL_NAME, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("values", TensorProto.FLOAT, [1, 8, 32, 5]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [1, 8, 32, 5])], initializer=[w1, w2, k])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(path))
    return path


@dataclass(frozen=True)
class Runs:
    """Paths of the shared run files and the model they were made from."""

    model: Path
    estimate: Path
    profile: Path
    horizon: Path
    trtexec: Path

    def load(self, name: str) -> dict[str, Any]:
        """The run named ``estimate``, ``profile``, ``horizon`` or ``trtexec``."""
        return load_run(getattr(self, name))


def make_runs(folder: Path) -> Runs:
    """Make every shared run in ``folder`` through the CLI, as a user would."""
    model = hostile_model(folder / "hostile.onnx")
    est, prof = folder / "estimate.json", folder / "profile.json"
    horizon, trt = folder / "horizon.json", folder / "trtexec.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAYERSCOPE_CACHE_DIR", str(folder / "cache"))
        assert main(["estimate", str(model), "-t", "rdk-s100", "--timeline", "--json", str(est), "--top", "0"]) == 0
        assert main(["profile", str(model), "-t", "rdk-s100", "--runs", "3", "--warmup", "1", "-o", str(prof),
                     "--top", "0"]) == 0
        assert main(["import", str(FIXTURES / "horizon" / "s100_profiler.log"), "-o", str(horizon)]) == 0
        assert main(["import", str(FIXTURES / "trtexec" / "yolov5s.profile.json"), "-o", str(trt)]) == 0
    return Runs(model, est, prof, horizon, trt)


_MADE: dict[Path, Runs] = {}


def shared_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The shared runs, made once per test session (the report test modules read them, never change them)."""
    key = tmp_path_factory.getbasetemp()
    if key not in _MADE:
        _MADE[key] = make_runs(tmp_path_factory.mktemp("report-runs"))
    return _MADE[key]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return shared_runs(tmp_path_factory)


ALL_RUNS = ("estimate", "profile", "horizon", "trtexec")

#: A run with almost nothing in it: layers without costs, estimate or a usable measurement.
BARE_RUN: dict[str, Any] = {
    "schema_version": 1, "model": {"name": None}, "summary": {},
    "layers": [{"id": "a"}, {"id": "b", "inputs": ["x"], "measured": {"median_us": None, "mean_us": None},
                              "estimate": {"latency_us": None}}]}


# --------------------------------------------------------------------------------------------------- sections


def test_rows_of_an_estimate(runs: Runs) -> None:
    run = runs.load("estimate")
    rows = layer_rows(run)
    assert [r.id for r in rows] == [layer["id"] for layer in run["layers"]]
    assert share_basis(run) == "estimated"
    assert sum(r.share or 0 for r in rows) == pytest.approx(1.0)
    assert all(r.meas_us is None and r.ratio is None for r in rows)
    assert rows[0].input_shapes == ("1x3x32x32",) and rows[0].output_shapes == ("1x8x32x32",)
    assert [r.id for r in rows if r.fallback_reason] == ["topk"]
    assert {r.core for r in rows} == {0}


def test_rows_of_a_measurement(runs: Runs) -> None:
    run = runs.load("profile")
    rows = layer_rows(run)
    assert share_basis(run) == "measured"
    for row in rows:
        assert row.meas_us is not None and row.est_us is not None
        if row.est_us:
            assert row.ratio == pytest.approx(row.meas_us / row.est_us)
    k = scale_factor(run)
    assert k is not None
    measured = sum(r.meas_us or 0 for r in rows if r.est_us)
    assert k.value == pytest.approx(measured / sum(r.est_us or 0 for r in rows))


def test_missing_notes_say_what_each_run_lacks(runs: Runs) -> None:
    notes = {name: " ".join(missing_notes(runs.load(name))) for name in ALL_RUNS}
    assert "No per-layer measurement" in notes["estimate"] and "No timeline" not in notes["estimate"]
    assert "No timeline" in notes["profile"] and "No per-layer measurement" not in notes["profile"]
    assert "No ONNX model" in notes["horizon"] and "No per-layer estimate" in notes["horizon"]
    assert "No kernel events" in notes["trtexec"]


def test_summary_sections_hold_what_the_run_has(runs: Runs) -> None:
    titles = {name: [s.title for s in summary_sections(runs.load(name))] for name in ALL_RUNS}
    assert "Memory (estimate)" in titles["estimate"] and "Runtime (measurement)" not in titles["estimate"]
    assert {"Runtime (measurement)", "Instrument", "Latency"} <= set(titles["profile"])
    assert "Import" in titles["horizon"]


def test_estimated_tracks_without_a_timeline_are_serial(runs: Runs) -> None:
    timeline = estimated_tracks(runs.load("estimate"))
    serial = estimated_tracks(runs.load("profile"))
    assert timeline is not None and timeline.source == "timeline"
    assert serial is not None and serial.source == "serial"
    ends = sorted(s.end_us for t in serial.tracks for s in t.slices)
    assert ends[-1] == pytest.approx(sum(r.est_us or 0 for r in layer_rows(runs.load("profile"))), abs=1e-6)


def test_graph_layout_puts_consumers_below_producers(runs: Runs) -> None:
    layout = graph_layout(runs.load("estimate"))
    assert layout.edges
    for src, dst in layout.edges:
        assert layout.position[dst][1] > layout.position[src][1]


FINDINGS = {"source": "test", "count": 2, "items": [
    {"rule": "info-rule", "severity": "info", "layers": [], "hazard": "minor", "mitigation": "none",
     "expected_gain_us": None},
    {"rule": "cpu-fallback", "severity": "error", "layers": ["topk"], "hazard": f"{XSS} runs on the CPU",
     "mitigation": "replace TopK", "expected_gain_us": 12.5}]}


def test_findings_render_when_present(runs: Runs) -> None:
    run = runs.load("estimate")
    assert findings(run) == []
    run["findings"] = FINDINGS
    rows = findings(run)
    assert [f.rule for f in rows] == ["cpu-fallback", "info-rule"]  # most severe first
    assert rows[0].expected_gain == "12.5 µs"
    run_list = dict(run, findings=FINDINGS["items"])
    assert [f.rule for f in findings(run_list)] == ["cpu-fallback", "info-rule"]
    html = render_html(run)
    assert "Top findings" in html and "cpu-fallback" in html and XSS not in html
    assert "### Findings" in markdown_summary(run)
    assert "No findings" not in " ".join(missing_notes(run))


# --------------------------------------------------------------------------------------------------- CSV, Markdown


def test_csv_has_namespaced_columns_and_one_row_per_layer(runs: Runs) -> None:
    for name in ALL_RUNS:
        run = runs.load(name)
        table = list(csv.DictReader(io.StringIO(layers_csv(run))))
        assert len(table) == len(run["layers"])
        assert list(table[0]) == [c for c, _ in CSV_COLUMNS]
    est = list(csv.DictReader(io.StringIO(layers_csv(runs.load("estimate")))))
    assert all(row["meas.median_us"] == "" for row in est)  # not measured: empty, never 0
    assert est[0]["layer.id"] == XSS and est[0]["cost.macs"] == str(8 * 32 * 32 * 27)
    assert next(r for r in est if r["layer.op_type"] == "Add")["layer.id"] == "'" + FORMULA  # no formula
    prof = list(csv.DictReader(io.StringIO(layers_csv(runs.load("profile")))))
    assert all(float(row["meas.median_us"]) >= 0 for row in prof)


def test_csv_cells() -> None:
    assert [csv_cell(v) for v in (None, True, 3, 0.1, "-1", "+x", "@x", "ok")] == [
        "", "true", "3", "0.1", "'-1", "'+x", "'@x", "ok"]


def test_markdown_summary_escapes_names(runs: Runs) -> None:
    for name in ALL_RUNS:
        text = markdown_summary(runs.load(name))
        assert text.startswith("## layerscope report: ")
        outside_code = re.sub(r"``.*?``|`[^`]*`", "", text)  # a code span shows HTML as text
        assert "<img" not in outside_code and "<script" not in outside_code
    text = markdown_summary(runs.load("profile"))
    assert "| P50 |" in text and "meas. µs" in text and "k = measured / estimated" in text
    assert md_code(XSS) in text
    assert md_code("a|b") == "`a\\|b`" and md_code("`x`") == "`` `x` ``"


# --------------------------------------------------------------------------------------------------- HTML markup


def test_html_is_self_contained_and_escaped(runs: Runs) -> None:
    for name in ALL_RUNS:
        html = render_html(runs.load(name))
        assert html.count("<script") == 3  # the data, ECharts, the report's script
        assert "Content-Security-Policy" in html and "default-src &#39;none&#39;" in html
        for needle in ("<link", 'src="http', "src='http", "@import", "<iframe"):
            assert needle not in html
        assert XSS not in html and "</script><script>alert" not in html and MODEL_NAME not in html
    html = render_html(runs.load("estimate"))
    assert "&lt;script&gt;alert(&#39;model&#39;)&lt;/script&gt;" in html  # the model name, autoescaped
    for tab in ("summary", "layers", "timeline", "temporal", "charts", "graph"):
        assert f'id="panel-{tab}"' in html


def test_script_json_cannot_close_its_element() -> None:
    text = str(script_json({"a": "</script><!-- & -->"}))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & -->"}


def test_html_is_a_pure_function_of_the_saved_run(runs: Runs, tmp_path: Path) -> None:
    run = runs.load("estimate")
    assert render_html(run) == render_html(runs.load("estimate"))
    out = tmp_path / "est.html"
    args = ["estimate", str(runs.model), "-t", "rdk-s100", "--timeline", "--top", "0", "--html", str(out)]
    assert main(args) == 0
    assert out.read_text(encoding="utf-8") == render_html(run)


def test_report_data_is_compact(runs: Runs) -> None:
    data = report_data(runs.load("profile"))
    assert len(data["layers"]["rows"]) == len(data["details"]) == len(data["graph"]["pos"])
    assert data["timeline"]["meas"]["names"] and data["timeline"]["est"]["source"] == "serial"
    assert data["temporal"] is None and data["charts"]["k"]["value"] > 0


# --------------------------------------------------------------------------------------------------- CLI, annotate


def test_report_command_writes_every_output(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = {k: tmp_path / f"r.{k}" for k in ("html", "json.gz", "csv", "md", "onnx")}
    args = ["report", str(runs.profile), "-o", str(out["html"]), "--trace", str(out["json.gz"]), "--csv",
            str(out["csv"]), "--markdown", str(out["md"]), "--annotate", str(out["onnx"])]
    assert main(args) == 0
    assert all(p.stat().st_size > 0 for p in out.values())
    printed = capsys.readouterr().out
    assert "annotated" in printed and "missing    No timeline" in printed
    default = runs.estimate.with_suffix(".html")
    assert main(["report", str(runs.estimate)]) == 0 and default.exists()


def test_report_command_errors(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "none.json"), "-o", str(tmp_path / "x.html")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    assert main(["report", str(bad)]) == 2
    assert main(["report", str(runs.horizon), "--annotate", str(tmp_path / "x.onnx")]) == 2
    other = hostile_model(tmp_path / "other.onnx")
    other.write_bytes(other.read_bytes() + b"\0")  # another file: another sha256
    assert main(["report", str(runs.estimate), "--annotate", str(tmp_path / "y.onnx"), "--model", str(other)]) == 2
    assert "differs from the run's" in capsys.readouterr().err
    assert not (tmp_path / "y.onnx").exists()


def test_annotated_model_carries_the_numbers(runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "annotated.onnx"
    before = runs.model.read_bytes()
    assert main(["report", str(runs.profile), "--annotate", str(out)]) == 0
    assert runs.model.read_bytes() == before
    model = onnx.load_model(str(out))
    onnx.checker.check_model(model)
    conv = next(n for n in model.graph.node if n.name == XSS)
    assert conv.doc_string.startswith("layerscope: est ") and "measured" in conv.doc_string
    props = {p.key: p.value for p in conv.metadata_props}
    assert {"layerscope.est_latency_us", "layerscope.meas_median_us", "layerscope.macs", "layerscope.bound"} <= set(
        props)
    assert props["layerscope.macs"] == str(8 * 32 * 32 * 27)
    assert any(p.key == "layerscope.summary" for p in model.metadata_props)
    again = annotate_model(model, runs.load("profile")).model  # re-annotating replaces, never piles up
    conv2 = next(n for n in again.graph.node if n.name == XSS)
    assert conv2.doc_string == conv.doc_string and len(conv2.metadata_props) == len(conv.metadata_props)


def test_a_bare_run_still_reports(tmp_path: Path) -> None:
    for run in (BARE_RUN, dict(BARE_RUN, layers=[])):
        assert "No per-layer estimate" in " ".join(missing_notes(run))
        assert 'id="panel-graph"' in render_html(run)
        assert len(list(csv.DictReader(io.StringIO(layers_csv(run))))) == len(run["layers"])
        assert markdown_summary(run).startswith("## layerscope report: `?`")
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(BARE_RUN), encoding="utf-8")
    assert main(["report", str(path), "--trace", str(tmp_path / "t.json"), "-o", str(tmp_path / "b.html")]) == 0
