"""``layerscope.runfile.derived`` reads the typed run (``RunFile``, ``Layer``) by attribute; a caller holding the JSON
document gets the same numbers (the document is converted with ``as_run``, a layer validated), and a malformed
one is refused with ``RunFileError`` as on load. The report views read the fields the producers write."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import zoo
from layerscope.errors import RunFileError
from layerscope.estimator import estimate_graph
from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.report.tables import layers_csv
from layerscope.report.views.layers import layer_rows
from layerscope.report.views.summary import summary_sections
from layerscope.run import add_measurement, estimate_run
from layerscope.runfile import as_run, derived
from layerscope.runfile.models import KernelProfileMeasurement, Steadiness
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.targets import load_profile


@pytest.fixture(scope="module")
def squeezenet_run() -> dict[str, Any]:
    """SqueezeNet (the onnx zoo's) estimated on the RDK S100 and profiled on ONNX Runtime (2 runs)."""
    graph = load_model(zoo("squeezenet"))
    profile = load_profile("rdk-s100")
    run = estimate_run(graph, estimate_graph(graph, profile), profile)
    weights = {layer.id: layer.estimated_us or 0.0 for layer in run.layers}
    measurement = profile_model(graph, make_inputs(graph, ()), SessionConfig(threads=1), runs=2, warmup=1,
                                weights=weights)
    return add_measurement(run, measurement).to_json()


def test_derived_reads_a_typed_run_and_its_document_alike(squeezenet_run: dict[str, Any]) -> None:
    doc = squeezenet_run
    typed = as_run(doc)
    assert derived.time_basis(typed) == derived.time_basis(doc) == "measured"
    assert derived.layer_shares(typed.layers, "measured") == derived.layer_shares(doc["layers"], "measured")
    shares = [s for s in derived.layer_shares(typed.layers, "measured") if s is not None]
    assert sum(shares) == pytest.approx(1.0, rel=1e-12)
    origin = derived.measurement_origin(typed)
    assert origin == derived.measurement_origin(doc)
    assert origin is not None and origin.device == "host-cpu"
    assert origin.label.startswith("ONNX Runtime kernel profile, CPUExecutionProvider on ")
    # measured on this host's CPU, estimated for the RDK S100's NPU: k compares two devices
    mismatch = derived.device_mismatch(typed)
    assert mismatch == derived.device_mismatch(doc)
    assert mismatch is not None and "'rdk-s100' (npu)" in mismatch
    k = derived.scale_factor(typed)
    assert k == derived.scale_factor(doc) == typed.k_factor
    assert k is not None and k.mismatch == mismatch and k.scope == "layers"
    assert derived.end_to_end_us(typed) == derived.end_to_end_us(doc)
    e2e = derived.end_to_end_us(typed)
    assert e2e is not None and typed.latency is not None and e2e == (typed.latency.p50_us,
                                                                       typed.summary.est_latency_us)
    # fused groups: ONNX Runtime fuses SqueezeNet's Conv + Relu pairs; the typed section and the document's agree
    cache_typed: dict[str, tuple[str, ...]] = {}
    cache_doc: dict[str, tuple[str, ...]] = {}
    groups = []
    for layer, layer_doc in zip(typed.layers, doc["layers"], strict=True):
        if layer.measured is None:
            continue
        group = derived.fused_group(typed, layer.measured, cache_typed)
        assert group == derived.fused_group(doc, layer_doc["measured"], cache_doc) == typed.fused_group(layer)
        groups.append(group)
    assert any(len(g) == 2 for g in groups)
    # steadiness: the typed section and its JSON object read the same
    m = typed.measurement
    assert isinstance(m, KernelProfileMeasurement) and m.steadiness is not None
    steadiness = doc["measurement"]["steadiness"]
    assert derived.steadiness_text(m.steadiness) == derived.steadiness_text(steadiness)
    assert derived.unsteady(m.steadiness) == derived.unsteady(steadiness)


def test_steadiness_warning_reads_the_largest_drift() -> None:
    typed = Steadiness(latency_cv=0.01, latency_drift=0.0, profiled_drift=-0.18)
    assert derived.unsteady(typed) == 0.18
    assert derived.unsteady({"latency_cv": 0.01, "latency_drift": 0.0, "profiled_drift": -0.18}) == 0.18
    assert derived.unsteady(Steadiness(latency_cv=0.05, latency_drift=-0.05, profiled_drift=0.0)) is None  # not above
    assert derived.unsteady({"latency_cv": 0.3}) == 0.3  # a partial document: the missing values read 0
    assert derived.unsteady({}) is None and derived.unsteady(None) is None
    assert derived.steadiness_text(typed) == ("run-to-run CV 1.0%; median moved +0.0% from the first to the second "
                                              "half of the runs (-18.0% in the profiled runs)")


def _doc(layers: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    return {"schema_version": 2, "model": {"name": "m"}, "summary": {}, "layers": layers, **sections}


def test_a_stored_fused_group_reads_from_its_kernel_row() -> None:
    """A group over 64 layers is stored once, in its kernel's ``layers``: both forms of the run give it back."""
    ids = [f"l{i}" for i in range(3)]
    layers = [{"id": i, "measured": {"median_us": 1.0, "kernel": "k0", "fused_group_size": 3}} for i in ids]
    doc = _doc(layers, kernels=[{"name": "other", "layers": ["x"]}, {"name": "k0", "layers": ids}])
    typed = as_run(doc)
    cache: dict[str, tuple[str, ...]] = {}
    assert derived.fused_group(doc, layers[0]["measured"], cache) == tuple(ids)
    assert cache == {"k0": tuple(ids)}
    last = typed.layers[2]
    assert last.measured is not None
    assert derived.fused_group(typed, last.measured) == tuple(ids) == typed.fused_group(last)
    # the kernel row named is validated when read from a document
    bad = _doc(layers, kernels=[{"name": "k0", "layers": "l0 l1 l2"}])
    with pytest.raises(RunFileError, match=r"kernels: layers: expected a list"):
        derived.fused_group(bad, layers[0]["measured"])


def test_a_malformed_document_is_refused_by_the_derived_functions() -> None:
    with pytest.raises(RunFileError, match=r"layer: measured\.median_us: expected a number, got \"fast\""):
        derived.layer_measured_us({"id": "a", "measured": {"median_us": "fast"}})
    with pytest.raises(RunFileError, match=r"layer: id: missing"):
        derived.layer_estimated_us({"estimate": {"latency_us": 1.0}})
    with pytest.raises(RunFileError, match=r"layers\[1\]\.estimate\.latency_us: expected a number"):
        derived.scale_factor(_doc([{"id": "a"}, {"id": "b", "estimate": {"latency_us": "1"}}]))
    # a well-formed document layer reads as its typed layer does (eliminated: 0 µs, mean when no median)
    assert derived.layer_measured_us({"id": "a", "measured": {"status": "eliminated", "median_us": 3.0}}) == 0.0
    assert derived.layer_measured_us({"id": "a", "measured": {"median_us": None, "mean_us": 2.5}}) == 2.5
    assert derived.is_eliminated({"id": "a", "measured": {"status": "eliminated"}})


def test_the_views_read_the_model_and_layer_fields_producers_write() -> None:
    """The model section's ``note``, ``assumptions`` and ``shape_sources``; a subgraph layer's ``shape_source``,
    ``parent``, ``executions`` and ``observed`` in its detail view; a layer's estimate and measurement in its row
    and the CSV (empty cells, never 0, for what a layer lacks)."""
    doc = _doc([{"id": "a", "op_type": "Conv", "macs": 10, "estimate": {"latency_us": 4.0, "bound": "compute"},
                 "measured": {"median_us": 2.0, "split": True, "kernel": "k"}},
                {"id": "b", "op_type": "Relu", "shape_source": "executed", "parent": "loop",
                 "executions": 3, "observed": {"source": "executed", "trip_count": 3}}],
               model={"name": "m", "note": "no ONNX model given", "assumptions": ["input x: batch dim set to 1"],
                      "shape_sources": {"static": 1, "executed": 1}})
    typed = as_run(doc)
    model = next(s for s in summary_sections(typed) if s.title == "Model")
    rows = {row.label: row.value for row in model.rows}
    assert rows["note"] == "no ONNX model given" and rows["assumed"] == "input x: batch dim set to 1"
    assert rows["shapes"] == "1 static, 1 executed"
    a, b = layer_rows(typed)
    assert (a.est_us, a.meas_us, a.ratio, a.split, a.kernel, a.bound) == (4.0, 2.0, 0.5, True, "k", "compute")
    assert b.detail["layer"] == {"id": "b", "op_type": "Relu", "shape_source": "executed", "parent": "loop",
                                 "executions": 3, "observed trip_count": 3}
    assert "estimate" not in b.detail and "measured" not in b.detail and b.status is None
    csv_rows = layers_csv(typed).splitlines()
    header = csv_rows[0].split(",")
    first = dict(zip(header, csv_rows[1].split(","), strict=True))
    second = dict(zip(header, csv_rows[2].split(","), strict=True))
    assert (first["cost.macs"], first["est.latency_us"], first["est.bound"], first["meas.median_us"],
            first["meas.split"], first["derived.meas_over_est"]) == ("10", "4.0", "compute", "2.0", "true", "0.5")
    assert second["meas.split"] == second["est.latency_us"] == second["meas.median_us"] == ""


def test_the_core_views_never_read_the_typed_run_by_key(squeezenet_run: dict[str, Any]) -> None:
    """A section of the typed run is not a mapping (no read by JSON key), and the summary, layer, findings and CSV
    views and the Markdown summary render a profiled run with findings from its attributes."""
    from collections.abc import Mapping

    from layerscope.analysis.findings import Finding, Severity
    from layerscope.report.tables import markdown_summary
    from layerscope.report.views.findings import findings
    from layerscope.report.views.summary import headline, missing_notes

    finding = Finding(rule_id="cpu-fallback", severity=Severity.ERROR, hazard="h", mitigation="m",
                      layer_ids=("n0",), evidence={"gain_source": "measured"}, expected_gain_us=3.0, help="")
    typed = as_run({**squeezenet_run, "findings": {"items": [finding.to_dict()]}})
    assert typed.measurement is not None and not isinstance(typed.measurement, Mapping)
    with pytest.raises(TypeError):
        typed.layers[0]["op_type"]  # type: ignore[index]
    text = markdown_summary(typed)
    assert "k = measured / estimated" in text and "cpu-fallback" in text
    assert len(layers_csv(typed).splitlines()) == len(typed.layers) + 1
    assert [m.label for m in headline(typed)][:3] == ["P50", "P90", "P99"]
    assert findings(typed)[0].expected_gain == "3.0 µs (measured)"
    assert not any(note.startswith("No findings") for note in missing_notes(typed))
