"""Reports from saved runs: sections, CSV, Markdown, HTML markup, the annotated model and ``layerscope report``.

Also the run files the other report tests share (:func:`make_runs`): a small model whose names are hostile
(``<img src=x onerror=alert(1)>``, ``</script>``, a spreadsheet formula), estimated on the RDK S100 with the
timeline, then profiled on ONNX Runtime; and vendor imports without a model (Horizon, trtexec).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from markupsafe import escape
from onnx import TensorProto, helper, numpy_helper

from layerscope.cli.main import main
from layerscope.errors import RunFileError
from layerscope.report.annotate import annotate_model
from layerscope.report.html import EXPERIMENTS_TAB, TABS, render_html, report_data, script_json, tabs
from layerscope.report.tables import (
    CSV_COLUMNS,
    MEMORY_COLUMNS,
    RUNTIME_COLUMNS,
    csv_cell,
    layers_csv,
    markdown_summary,
    md_code,
)
from layerscope.report.units import human_us
from layerscope.report.views.bisect import more_rounds
from layerscope.report.views.experiments import experiments
from layerscope.report.views.findings import findings
from layerscope.report.views.layers import (
    block_totals,
    graph_layout,
    layer_blocks,
    layer_rows,
    op_type_totals,
    scale_factor,
    share_basis,
)
from layerscope.report.views.summary import missing_notes, summary_sections
from layerscope.report.views.timeline import estimated_tracks
from layerscope.runfile import as_run, check, load_document, upgrade
from layerscope.runfile.models import Bisect

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
        return load_document(getattr(self, name))


def make_runs(folder: Path) -> Runs:
    """Make every shared run in ``folder`` through the CLI, as a user would."""
    model = hostile_model(folder / "hostile.onnx")
    est, prof = folder / "estimate.json", folder / "profile.json"
    horizon, trt = folder / "horizon.json", folder / "trtexec.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAYERSCOPE_CACHE_DIR", str(folder / "cache"))
        assert main(["estimate", str(model), "-t", "rdk-s100", "--timeline", "-o", str(est), "--top", "0"]) == 0
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
    rows = layer_rows(as_run(run))
    assert [r.id for r in rows] == [layer["id"] for layer in run["layers"]]
    assert share_basis(as_run(run)) == "estimated"
    assert sum(r.share or 0 for r in rows) == pytest.approx(1.0)
    assert all(r.meas_us is None and r.ratio is None for r in rows)
    assert rows[0].input_shapes == ("1x3x32x32",) and rows[0].output_shapes == ("1x8x32x32",)
    assert [r.id for r in rows if r.fallback_reason] == ["topk"]
    assert {r.core for r in rows} == {0}


def test_rows_of_a_measurement(runs: Runs) -> None:
    run = as_run(runs.load("profile"))
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


def test_op_type_and_block_shares_add_their_layers_shares(runs: Runs) -> None:
    """A group's share is the sum of its layers' shares (one definition of a share, the summary tables' and the
    layer table's): 0, not missing, when every layer took 0."""
    doc = runs.load("profile")
    for times, shares in (([2.0, 1.0, 3.0, 4.0, 0.0], [0.2, 0.1, 0.3, 0.4, 0.0]), ([0.0] * 5, [0.0] * 5)):
        assert len(doc["layers"]) == len(times)  # Conv, Relu, Conv, Add, TopK
        for layer, t in zip(doc["layers"], times, strict=True):
            layer["measured"]["median_us"] = t
        rows = layer_rows(as_run(doc))
        assert [r.share for r in rows] == pytest.approx(shares)  # of 2 + 1 + 3 + 4 = 10 us
        ops = {t.op_type: t for t in op_type_totals(rows)}
        for op, total in ops.items():
            members = [r for r in rows if r.op_type == op]
            assert total.share == pytest.approx(sum(r.share or 0.0 for r in members))
            assert total.meas_us == pytest.approx(sum(r.meas_us or 0.0 for r in members))
        assert ops["Conv"].share == pytest.approx(shares[0] + shares[2])  # the two convolutions
        blocks = block_totals(rows, layer_blocks(as_run(doc)))
        assert sum(b.share for b in blocks if b.share is not None) == pytest.approx(sum(shares))


def test_missing_notes_say_what_each_run_lacks(runs: Runs) -> None:
    notes = {name: " ".join(missing_notes(as_run(runs.load(name)))) for name in ALL_RUNS}
    assert "No per-layer measurement" in notes["estimate"] and "No timeline" not in notes["estimate"]
    assert "No timeline" in notes["profile"] and "No per-layer measurement" not in notes["profile"]
    assert "No ONNX model" in notes["horizon"] and "No per-layer estimate" in notes["horizon"]
    assert "No kernel events" in notes["trtexec"]


def test_summary_sections_hold_what_the_run_has(runs: Runs) -> None:
    titles = {name: [s.title for s in summary_sections(as_run(runs.load(name)))] for name in ALL_RUNS}
    assert "Memory (estimate)" in titles["estimate"] and "Runtime (measurement)" not in titles["estimate"]
    assert {"Runtime (measurement)", "Instrument", "Latency"} <= set(titles["profile"])
    assert "Import" in titles["horizon"]


def test_estimated_tracks_without_a_timeline_are_serial(runs: Runs) -> None:
    timeline = estimated_tracks(as_run(runs.load("estimate")))
    serial = estimated_tracks(as_run(runs.load("profile")))
    assert timeline is not None and timeline.source == "timeline"
    assert serial is not None and serial.source == "serial"
    ends = sorted(s.end_us for t in serial.tracks for s in t.slices)
    assert ends[-1] == pytest.approx(sum(r.est_us or 0 for r in layer_rows(as_run(runs.load("profile")))), abs=1e-6)


def test_graph_layout_puts_consumers_below_producers(runs: Runs) -> None:
    layout = graph_layout(as_run(runs.load("estimate")))
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
    assert findings(as_run(run)) == []
    run["findings"] = FINDINGS
    rows = findings(as_run(run))
    assert [f.rule for f in rows] == ["cpu-fallback", "info-rule"]  # most severe first
    assert rows[0].expected_gain == "12.5 µs"
    # one stored form (Finding.to_dict's, in {source, count, items}): a bare list is not a run file's findings
    with pytest.raises(RunFileError, match=r"findings: expected an object"):
        check(upgrade(dict(run, findings=FINDINGS["items"])), "run.json")
    html = render_html(as_run(run))
    assert "Top findings" in html and "cpu-fallback" in html and XSS not in html
    assert "### Findings" in markdown_summary(as_run(run))
    assert "No findings" not in " ".join(missing_notes(as_run(run)))


# --------------------------------------------------------------------------------------------------- CSV, Markdown


def test_csv_has_namespaced_columns_and_one_row_per_layer(runs: Runs) -> None:
    for name in ALL_RUNS:
        run = runs.load(name)
        table = list(csv.DictReader(io.StringIO(layers_csv(as_run(run)))))
        assert len(table) == len(run["layers"])
        assert list(table[0]) == [*(c for c, _ in CSV_COLUMNS), *RUNTIME_COLUMNS, *MEMORY_COLUMNS]
    est = list(csv.DictReader(io.StringIO(layers_csv(as_run(runs.load("estimate"))))))
    assert all(row["meas.median_us"] == "" for row in est)  # not measured: empty, never 0
    assert est[0]["layer.id"] == XSS and est[0]["cost.macs"] == str(8 * 32 * 32 * 27)
    assert next(r for r in est if r["layer.op_type"] == "Add")["layer.id"] == "'" + FORMULA  # no formula
    prof = list(csv.DictReader(io.StringIO(layers_csv(as_run(runs.load("profile"))))))
    assert all(float(row["meas.median_us"]) >= 0 for row in prof)
    assert {row["meas.backend"] for row in prof} == {"onnxruntime"}
    assert all(row["meas.backend"] == row["meas.device"] == "" for row in est)


def test_csv_cells() -> None:
    assert [csv_cell(v) for v in (None, True, 3, 0.1, "-1", "+x", "@x", "ok")] == [
        "", "true", "3", "0.1", "'-1", "'+x", "'@x", "ok"]


def test_markdown_summary_escapes_names(runs: Runs) -> None:
    for name in ALL_RUNS:
        text = markdown_summary(as_run(runs.load(name)))
        assert text.startswith("## layerscope report: ")
        outside_code = re.sub(r"``.*?``|`[^`]*`", "", text)  # a code span shows HTML as text
        assert "<img" not in outside_code and "<script" not in outside_code
    text = markdown_summary(as_run(runs.load("profile")))
    assert "| P50 |" in text and "meas. µs" in text and "k = measured / estimated" in text
    assert md_code(XSS) in text
    assert md_code("a|b") == "`a\\|b`" and md_code("`x`") == "`` `x` ``"
    # CommonMark: the fence is longer than any backtick run inside, so a name cannot close the span early and let
    # what follows render as HTML; control and bidi characters are dropped
    assert md_code("a``<img src=x>``b") == "```a``<img src=x>``b```"
    assert md_code("conv\x1b[2J\x07\u202eevil") == "`conv[2Jevil`"


# --------------------------------------------------------------------------------------------------- HTML markup


def test_html_is_self_contained_and_escaped(runs: Runs) -> None:
    for name in ALL_RUNS:
        html = render_html(as_run(runs.load(name)))
        assert html.count("<script") == 3  # the data, ECharts, the report's script
        assert "Content-Security-Policy" in html and "default-src &#39;none&#39;" in html
        for needle in ("<link", 'src="http', "src='http", "@import", "<iframe"):
            assert needle not in html
        assert XSS not in html and "</script><script>alert" not in html and MODEL_NAME not in html
    html = render_html(as_run(runs.load("estimate")))
    assert "&lt;script&gt;alert(&#39;model&#39;)&lt;/script&gt;" in html  # the model name, autoescaped
    for tab in ("summary", "layers", "timeline", "temporal", "charts", "graph"):
        assert f'id="panel-{tab}"' in html


def test_script_json_cannot_close_its_element() -> None:
    text = str(script_json({"a": "</script><!-- & -->"}))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & -->"}


def test_html_is_a_pure_function_of_the_saved_run(runs: Runs, tmp_path: Path) -> None:
    run = runs.load("estimate")
    assert render_html(as_run(run)) == render_html(as_run(runs.load("estimate")))
    out = tmp_path / "est.html"
    args = ["estimate", str(runs.model), "-t", "rdk-s100", "--timeline", "--top", "0", "--html", str(out)]
    assert main(args) == 0
    assert out.read_text(encoding="utf-8") == render_html(as_run(run))


def test_report_data_is_compact(runs: Runs) -> None:
    run = as_run(runs.load("profile"))
    data = report_data(run)
    n = data["n"]
    assert n == len(run.layers) == len(data["graph"]["pos"])
    assert all(len(column) == n for column in data["layers"].values())  # columnar: one array per field
    assert all(len(column if kind != "d" else column[1]) == n for _, keys in data["details"]
               for _, (kind, column) in keys)
    strings = data["strings"]
    assert len(strings) == len(set(strings))  # each distinct string once
    assert [strings[r] for r in data["layers"]["op"]] == [layer.op_type for layer in run.layers]
    assert data["layers"]["id"] == [layer.id for layer in run.layers]
    # a detail value reads back from its column: layer 0's cost, estimate and measured sections
    detail = {group: dict(keys) for group, keys in data["details"]}
    assert detail["cost"]["macs"] == ["n", [layer.macs for layer in run.layers]]
    kind, (scale, deltas) = detail["estimate"]["latency_us"]  # delta-coded in ns: [d0, d1 - d0, ...]
    latencies = [layer.est.latency_us for layer in run.layers]
    assert kind == "d" and scale == 1000 and deltas[:2] == [round(latencies[0] * 1000),
                                                            round((latencies[1] - latencies[0]) * 1000)]
    assert [v / 1000 for v in itertools.accumulate(deltas)] == latencies  # the page's sum gives the same numbers
    assert "id" not in detail["layer"]  # the table's id column
    kind, column = detail["layer"]["outputs"]
    assert kind == "l" and [strings[r] for r in column[0]] == run.layers[0].outputs
    assert data["timeline"]["meas"]["name"] and data["timeline"]["est"]["source"] == "serial"
    est = data["timeline"]["est"]
    assert est["spans"] == len(est["start"][-1]) == len(est["end"][-1]) == sum(1 for layer in run.layers
                                                                             if layer.estimated_us is not None)
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
    again = annotate_model(model, as_run(runs.load("profile"))).model  # re-annotating replaces, never piles up
    conv2 = next(n for n in again.graph.node if n.name == XSS)
    assert conv2.doc_string == conv.doc_string and len(conv2.metadata_props) == len(conv.metadata_props)


def test_a_bare_run_still_reports(tmp_path: Path) -> None:
    for run in (BARE_RUN, dict(BARE_RUN, layers=[])):
        assert "No per-layer estimate" in " ".join(missing_notes(as_run(run)))
        assert 'id="panel-graph"' in render_html(as_run(run))
        assert len(list(csv.DictReader(io.StringIO(layers_csv(as_run(run)))))) == len(run["layers"])
        assert markdown_summary(as_run(run)).startswith("## layerscope report: `?`")
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(BARE_RUN), encoding="utf-8")
    assert main(["report", str(path), "--trace", str(tmp_path / "t.json"), "-o", str(tmp_path / "b.html")]) == 0


# --------------------------------------------------------------------------------------------------- experiments
#
# The sections later commands add (bisect, compare -o, pipeline, --stress), made with the real commands on the
# hostile model, then rendered: the Experiments tab must show their numbers as the terminal does and every name as
# text.

#: A stand-in for a board's perf tool (as in test_bisect_cli): its "latency" is the prefix model file's size
#: (1 byte = 1 µs), so every segment's increment is known exactly.
FAKE_DEVICE = r'''
import os, sys
print(f"average latency: {os.path.getsize(sys.argv[1]) / 1000:.3f} ms")
'''
#: A pipeline around the hostile model whose pre-processing trace point has a hostile name.
PIPELINE_SCRIPT = f'''
import layerscope


def pipeline(model):
    with layerscope.trace_point({XSS!r}):
        feeds = {{name: array.copy() for name, array in model.example_inputs.items()}}
    outputs = model.run(None, feeds)
    with layerscope.trace_point("post"):
        sum(float(o.sum()) for o in outputs)
'''
AFTER_LABEL = "<i>after</i>"


def variant_model(path: Path) -> Path:
    """The hostile model after a change: the Relu became a LeakyRelu (one layer removed, one added) and the TopK
    was renamed (same op, shapes and weights: matched as renamed)."""
    model = onnx.load_model(str(hostile_model(path)))
    relu = next(n for n in model.graph.node if n.op_type == "Relu")
    relu.op_type, relu.name = "LeakyRelu", "leaky"
    relu.attribute.append(helper.make_attribute("alpha", 0.1))
    next(n for n in model.graph.node if n.op_type == "TopK").name = "topk v2"
    onnx.save_model(model, str(path))
    return path


def prefix_sizes(model: Path) -> list[int]:
    """Bytes of each prefix model the bisect times (the Identity baseline first): the fake device's latencies."""
    from layerscope.measure.cuts import CutPlanner
    from layerscope.model import load_model

    planner = CutPlanner.for_model(load_model(model))
    return [len(planner.prefix_model(k).SerializeToString(deterministic=True)) for k in range(planner.layer_count + 1)]


@dataclass(frozen=True)
class ExperimentRuns:
    """Run files with the experiment sections, all of the hostile model (``compared``: of its variant)."""

    bisect: Path  # the fake device, one segment per layer: increments known exactly
    validated: Path  # ONNX Runtime with --validate against the kernel profile
    compared: Path  # compare profile.json variant.json -o: comparison and (from profile --stress) stress
    pipeline: Path
    sizes: tuple[int, ...]

    def load(self, name: str) -> dict[str, Any]:
        return load_document(getattr(self, name))

    def merged(self) -> dict[str, Any]:
        """One run holding all four sections: ``compared`` with ``bisect`` (validated) and ``pipeline`` added from
        the other runs of the same model, for one page that shows everything."""
        run = self.load("compared")
        run["bisect"] = self.load("validated")["bisect"]
        run["pipeline"] = self.load("pipeline")["pipeline"]
        return run


def make_experiment_runs(folder: Path, runs: Runs) -> ExperimentRuns:
    """Make the experiment runs in ``folder`` through the CLI, as a user would (tiny rounds and runs)."""
    out = ExperimentRuns(folder / "bisect.json", folder / "validated.json", folder / "compared.json",
                         folder / "pipeline.json", tuple(prefix_sizes(runs.model)))
    device = folder / "fake_device.py"
    device.write_text(FAKE_DEVICE, encoding="utf-8")
    script = folder / "hostile_pipeline.py"
    script.write_text(PIPELINE_SCRIPT, encoding="utf-8")
    variant, variant_run = variant_model(folder / "variant.onnx"), folder / "variant.json"
    common = ["-t", "rdk-s100", "--threads", "1"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAYERSCOPE_CACHE_DIR", str(folder / "cache"))
        assert main(["bisect", str(runs.model), "-t", "rdk-s100", "--run-cmd", f"{sys.executable} {device} {{model}}",
                     "--latency-regex", r"latency: ([0-9.]+) ms", "--granularity", "layer", "--repeats", "2",
                     "--no-cache", "-o", str(out.bisect)]) == 0
        assert main(["bisect", str(runs.model), *common, "--granularity", "layer", "--repeats", "3", "--pilot", "1",
                     "--validate", "--validate-runs", "3", "--no-cache", "-o", str(out.validated)]) == 0
        assert main(["profile", str(variant), *common, "--runs", "3", "--warmup", "1", "--top", "0",
                     "--stress", "memory", "-o", str(variant_run)]) == 0
        assert main(["compare", str(runs.profile), str(variant_run), "--labels", f"before,{AFTER_LABEL}",
                     "-o", str(out.compared)]) == 0
        assert main(["pipeline", f"{script}:pipeline", str(runs.model), *common, "--runs", "3",
                     "--warmup", "1", "--top", "0", "-o", str(out.pipeline)]) == 0
    return out


_EXPERIMENTS: dict[Path, ExperimentRuns] = {}


def shared_experiment_runs(tmp_path_factory: pytest.TempPathFactory) -> ExperimentRuns:
    """The experiment runs, made once per test session (read, never changed, by the tests)."""
    key = tmp_path_factory.getbasetemp()
    if key not in _EXPERIMENTS:
        _EXPERIMENTS[key] = make_experiment_runs(tmp_path_factory.mktemp("experiment-runs"),
                                                 shared_runs(tmp_path_factory))
    return _EXPERIMENTS[key]


@pytest.fixture(scope="module")
def exp_runs(tmp_path_factory: pytest.TempPathFactory) -> ExperimentRuns:
    return shared_experiment_runs(tmp_path_factory)


class _Tables(HTMLParser):
    """Every ``<table id=...>``: its rows of (cell text, cell class), entities decoded (what a reader sees), and
    each row's class."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[tuple[str, str]]]] = {}
        self.row_classes: dict[str, list[str]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._cell_class = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table], self.row_classes[self._table] = [], []
        elif self._table and tag == "tr":
            self.tables[self._table].append([])
            self.row_classes[self._table].append(a.get("class") or "")
        elif self._table and tag in ("td", "th"):
            self._cell, self._cell_class = [], a.get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif self._table and tag in ("td", "th") and self._cell is not None:
            text = " ".join("".join(self._cell).split())
            self.tables[self._table][-1].append((text, self._cell_class))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> dict[str, list[list[tuple[str, str]]]]:
    """``{table id: rows (header row first) of (cell text, cell class)}``."""
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def row_classes(html: str, table_id: str) -> list[str]:
    """The class of each body row of the table ``table_id``."""
    parser = _Tables()
    parser.feed(html)
    return parser.row_classes[table_id][1:]


def key_values(html: str, section_id: str) -> list[tuple[str, str]]:
    """The label / value rows of the key-value tables in the experiment ``section_id`` (text, entities decoded)."""
    part = html[html.index(f'id="{section_id}"'):]
    end = part.find('id="exp-', 1)
    pairs = re.findall(r'<tr><th scope="row">(.*?)</th><td>(.*?)</td></tr>', part[:end if end > 0 else len(part)],
                       flags=re.S)
    return [(unescape(k), unescape(v)) for k, v in pairs]


def texts(rows: list[list[tuple[str, str]]]) -> list[list[str]]:
    return [[text for text, _ in row] for row in rows]


def assert_escaped(html: str) -> None:
    assert XSS not in html and "</script><script>alert" not in html and "<i>after</i>" not in html
    assert html.count("<script") == 3  # no script of its own: the tab is markup only


def test_runs_without_experiments_have_no_experiments_tab(runs: Runs) -> None:
    for name in ALL_RUNS:
        run = runs.load(name)
        assert not experiments(as_run(run)) and tabs(as_run(run)) == TABS
        html = render_html(as_run(run))
        assert 'id="tab-experiments"' not in html and 'id="panel-experiments"' not in html
    assert 'id="tab-experiments"' not in render_html(as_run(BARE_RUN))


def test_sections_from_older_or_partial_runs_render() -> None:
    partial = dict(BARE_RUN, bisect={"segments": [{"index": 0, "increment_us": 5.0}, {}]},
                   comparison={"metrics": [{"name": "latency P50", "unit": "us", "before": 0, "after": 2.0}],
                               "layers": [{"after_id": "a"}]},
                   pipeline={"stages": [{"name": "x", "parent": "x"}]}, stress={"rounds": [{"baseline": {}}]})
    view = experiments(as_run(partial))
    assert view.names == ("bisect", "comparison", "pipeline", "stress")
    assert view.bisect is not None and view.bisect.segments[0].share == pytest.approx(1.0)
    assert view.comparison is not None and view.comparison.metrics[0].change_text == "+2"
    html = render_html(as_run(partial))
    assert 'id="tab-experiments"' in html and tabs(as_run(partial))[-1] == EXPERIMENTS_TAB
    render_html(as_run(dict(BARE_RUN, bisect=None)))  # an empty section is absent
    for broken, where in (({"bisect": []}, "bisect"), ({"comparison": "x"}, "comparison"),
                          ({"stress": {"rounds": None}}, "stress.rounds")):
        with pytest.raises(RunFileError, match=where):  # a malformed section is refused, naming it
            render_html(as_run(dict(BARE_RUN, **broken)))


def test_bisect_segments_show_the_exact_increments(exp_runs: ExperimentRuns) -> None:
    run = exp_runs.load("bisect")
    section, sizes = run["bisect"], exp_runs.sizes
    increments = [b - a for a, b in itertools.pairwise(sizes)]
    assert [s["increment_us"] for s in section["segments"]] == increments
    html = render_html(as_run(run))
    assert_escaped(html)
    assert 'id="tab-experiments"' in html and "This run also holds bisect" in html
    header, *rows = texts(tables(html)["bisect-table"])
    assert header[:5] == ["#", "layers", "n", "est. µs", "increment µs"] and "profile µs" not in header
    assert header[-4:] == ["random CI low µs", "random CI high µs", "syst. ± µs", "gap µs"]  # the interval's parts
    assert [row[1] for row in rows] == [layer["id"] for layer in run["layers"]]  # the hostile names, as text
    total = sum(increments)
    for row, increment in zip(rows, increments, strict=True):  # by hand: size difference of the prefixes
        # a noiseless device: the bootstrap interval is a point; the stated one is its 5% systematic part
        spread = 0.05 * abs(increment)
        assert row[4] == f"{increment:.1f}" and (row[5], row[6]) == (f"{round(increment - spread, 3):.1f}",
                                                                    f"{round(increment + spread, 3):.1f}")
        assert row[7] == f"{100 * increment / total:.1f}%" and row[8] == ""
    assert rows[0][4] == f"{sizes[1] - sizes[0]}.0"
    context = dict(key_values(html, "exp-bisect"))
    assert context["baseline"].startswith(human_us(sizes[0]))
    assert context["sum"].startswith(f"{human_us(total)} = 100.0% of whole - baseline")
    assert context["plan"].startswith("5 layers: 6 prefixes x 2 rounds")
    assert "Validation" not in html


@pytest.mark.parametrize(("fields", "said"), [
    ({"repeats": 60, "repeats_min": 60, "resolve_from": 60, "resolve_from_widest": 0.08, "resolve_widest": 0.08}, ""),
    ({"repeats": 107, "repeats_min": 60}, " (more than 60: a fast model)"),
    ({"repeats": 214, "repeats_min": 60, "max_ci": 0.1, "resolve_share": 0.05, "resolve_from": 60,
      "resolve_from_widest": 0.234, "resolve_widest": 0.094},
     " (more than 60: at 60 rounds a segment of 5% of the time or more had a 95% interval of ±23% (--max-ci 0.1), "
     "the widest ±9% now)"),
    ({"repeats": 300, "repeats_min": 60, "max_ci": 0.1, "resolve_share": 0.05, "resolve_from": 107,
      "resolve_from_widest": 0.31, "resolve_widest": 0.14},
     " (more than 60: a fast model; at 107 rounds a segment of 5% of the time or more had a 95% interval of ±31% "
     "(--max-ci 0.1), the widest ±14% now)"),
    ({"repeats": 107, "repeats_min": 60, "resolve_share": 0.05, "resolve_from": 107, "resolve_from_widest": 0.06,
      "resolve_widest": 0.06}, " (more than 60: a fast model)"),
])
def test_bisect_plan_says_why_it_took_more_rounds(fields: dict[str, Any], said: str) -> None:
    assert more_rounds(Bisect(**fields)) == said


def test_bisect_validation_flags_large_segments_off_the_profile(exp_runs: ExperimentRuns) -> None:
    run = exp_runs.load("validated")
    section = run["bisect"]
    html = render_html(as_run(run))
    assert_escaped(html)
    header, *rows = tables(html)["bisect-table"]
    assert [text for text, _ in header][-2:] == ["profile µs", "error"]
    for row, seg in zip(rows, section["segments"], strict=True):
        error_text, error_class = row[-1]
        assert row[-2][0] == f"{seg['profile_us']:.1f}" and row[4][0] == f"{seg['increment_us']:.1f}"
        assert error_text == (f"{100 * seg['error']:+.1f}%" if seg["error"] is not None else "-")
        off = seg["share"] >= 0.05 and (seg["error"] is None or abs(seg["error"]) > 0.15)
        assert ("flag" in error_class) == off
        note = row[8][0]
        assert ("negative" in note) == seg["negative"] and ("not significant" in note) == (not seg["significant"])
    validation = dict(key_values(html, "exp-bisect"))
    total = section["validation"]["sum_vs_profile_latency"]
    assert validation["sum vs profile"].startswith(f"{100 * total:+.1f}%")
    assert "10th percentile over 3 profiled runs" in validation["reference"]


def test_comparison_shows_metrics_layers_and_renames(exp_runs: ExperimentRuns) -> None:
    run = exp_runs.load("compared")
    section = run["comparison"]
    html = render_html(as_run(run))
    assert_escaped(html)
    assert "&lt;i&gt;after&lt;/i&gt;" in html  # the label, escaped
    found = tables(html)
    header, *metrics = texts(found["comparison-metrics"])
    assert header == ["metric", "before", AFTER_LABEL, "change", "95% interval", "verdict", "source"]
    assert [m[0] for m in metrics] == [m["name"] for m in section["metrics"]]
    p50 = next(m for m in section["metrics"] if m["name"] == "latency P50")
    row = next(r for r in found["comparison-metrics"] if r[0][0] == "latency P50")
    assert row[1][0] == human_us(p50["before"]) and row[2][0] == human_us(p50["after"])
    assert row[3][0] == f"{100 * p50['change']:+.1f}%"
    stat = p50.get("stat") or {}  # a judged change is marked by its verdict, not by its sign
    marked = ({"faster": "better", "slower": "worse"}.get(stat["verdict"], "") if stat.get("low_us") is not None
              else "better" if p50["change"] < 0 else "worse" if p50["change"] > 0 else "")
    assert ("better" in row[3][1]) == (marked == "better") and ("worse" in row[3][1]) == (marked == "worse")
    fps = next(r for r in found["comparison-metrics"] if r[0][0] == "FPS")  # higher is better
    fps_change = next(m for m in section["metrics"] if m["name"] == "FPS")["change"]
    assert ("better" in fps[3][1]) == (fps_change > 0)
    _, *layers = texts(found["comparison-layers"])
    ranked = sorted(section["layers"], key=lambda d: -abs(d["delta_us"]))
    assert len(layers) == min(30, len(ranked)) and layers[0][5] == f"{ranked[0]['delta_us']:+.1f}"
    assert {r[1] for r in layers} >= {XSS, "topk → topk v2"}
    lists = dict(re.findall(r'data-list="(\w+)"><b>\w+ \((\d+)\)</b>', html))
    assert lists == {"renamed": "1", "added": "1", "removed": "1"}
    assert "<code>leaky (LeakyRelu)</code>" in html
    assert f"<code>{escape(SCRIPT)} (Relu)</code>" in html and SCRIPT not in html  # removed: a hostile name


def test_pipeline_shows_the_breakdown_and_stages(exp_runs: ExperimentRuns) -> None:
    run = exp_runs.load("pipeline")
    section = run["pipeline"]
    html = render_html(as_run(run))
    assert_escaped(html)
    found = tables(html)
    b = section["breakdown"]
    _, *parts = texts(found["pipeline-breakdown"])
    assert parts == [[label, f"{b[key]:.1f}", f"{100 * b[key] / b['end_to_end_us']:.1f}%"]
                     for label, key in (("pre", "pre_us"), ("model", "model_us"), ("post", "post_us"),
                                        ("other", "other_us"))]
    _, *stages = texts(found["pipeline-stages"])
    e2e = section["end_to_end"]["median_us"]
    by_name = {s["name"]: s for s in section["stages"]}
    assert {row[0] for row in stages} == {"model", "post", XSS}
    for row in stages:
        stage = by_name[row[0]]
        assert row[1:] == [stage["kind"], f"{stage['calls_per_run']:g}", f"{stage['stats']['median_us']:.1f}",
                           f"{stage['stats']['p90_us']:.1f}", f"{stage['self']['median_us']:.1f}",
                           f"{100 * stage['stats']['median_us'] / e2e:.1f}%"]
    assert by_name[XSS]["kind"] == "pre" and "pipeline-top" in found


def test_stress_shows_the_change_and_marks_sensitive_layers(exp_runs: ExperimentRuns) -> None:
    run = exp_runs.load("compared")
    stress = run["stress"]
    html = render_html(as_run(run))
    change = re.search(r'id="stress-change">([^<]*)<', html)
    assert change is not None and change.group(1) == f"{100 * (stress['latency_ratio_p50'] - 1):+.1f}%"
    found = tables(html)
    _, *rounds = texts(found["stress-rounds"])
    assert [r[3] for r in rounds] == [f"{100 * (r['ratio_p50'] - 1):+.1f}%" for r in stress["rounds"]]
    assert [r[1] for r in rounds] == [f"{r['baseline']['median_us']:.1f}" for r in stress["rounds"]]
    layers = {layer["id"]: layer["measured"] for layer in run["layers"] if "stress_ratio" in layer["measured"]}
    total = sum(m["stress_baseline_us"] for m in layers.values())
    large = {lid for lid, m in layers.items() if m["stress_baseline_us"] >= 0.005 * total}  # as the terminal
    _, *rows = found["stress-layers"]
    assert large and {row[1][0] for row in rows} == large
    classes = row_classes(html, "stress-layers")
    ratios = [float(row[6][0]) for row in rows]
    assert ratios == sorted(ratios, reverse=True)
    for row, row_class in zip(rows, classes, strict=True):
        measured = layers[row[1][0]]
        assert row[3][0] == f"{measured['stress_baseline_us']:.1f}" and row[6][0] == f"{measured['stress_ratio']:.2f}"
        assert row[5][0] == f"{100 * (measured['stress_ratio'] - 1):+.1f}%"
        assert (row_class == "sensitive") == measured["memory_sensitive"] == (row[8][0] == "memory-sensitive")
    assert XSS in layers and XSS not in html


def test_one_page_with_every_experiment(exp_runs: ExperimentRuns, tmp_path: Path) -> None:
    run = exp_runs.merged()
    assert experiments(as_run(run)).names == ("bisect", "comparison", "pipeline", "stress")
    html = render_html(as_run(run))
    assert_escaped(html)
    assert {"bisect-table", "comparison-metrics", "comparison-layers", "pipeline-breakdown", "pipeline-stages",
            "stress-rounds", "stress-layers"} <= set(tables(html))
    path = tmp_path / "merged.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    assert main(["report", str(path), "-o", str(tmp_path / "merged.html")]) == 0
    assert (tmp_path / "merged.html").read_text(encoding="utf-8") == html


# --------------------------------------------------------------------------------------------------- start-up

def test_a_report_from_a_run_file_does_not_load_onnx_or_onnxruntime(runs: Runs, tmp_path: Path) -> None:
    """Reading a saved run needs neither (importing them is most of the command's start-up)."""
    out = tmp_path / "report.html"
    code = ("import sys; from layerscope.cli.main import main; "
            f"assert main(['report', {str(runs.profile)!r}, '-o', {str(out)!r}]) == 0; "
            "print(sorted(m for m in ('onnx', 'onnxruntime') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]" and out.stat().st_size > 0
