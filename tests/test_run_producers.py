"""The producers build the typed run (layerscope.runfile.models) and write it once: what the file holds, key for key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import zoo
from layerscope.errors import RunFileError
from layerscope.estimator import estimate_graph
from layerscope.estimator.types import Estimate
from layerscope.importers import build_run
from layerscope.importers.types import EntryKind, ImportResult, TimeStats, VendorEntry
from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.run import add_measurement, estimate_run, load_run, save_record, save_run
from layerscope.runfile import load_document
from layerscope.runfile.models import RunFile
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.targets import load_profile

#: The keys of an estimated layer in the file (``unit`` and the estimate's ``null`` fields are written as null, not
#: left out; ``measured`` is absent until something measures the layer).
LAYER_KEYS = {"id", "name", "op_type", "domain", "inputs", "outputs", "output_shapes", "dtype", "macs", "flops",
              "bytes_read", "bytes_read_act", "bytes_read_weight", "bytes_written", "weight_bytes", "params",
              "unit_kind", "unit", "known", "shape_source", "estimate"}
ESTIMATE_KEYS = {"latency_us", "compute_us", "load_us", "store_us", "overhead_us", "bound", "unit", "dtype",
                 "ddr_read_bytes", "ddr_write_bytes", "weight_passes", "fallback_reason"}


Estimated = tuple[RunFile, Graph, Estimate]


@pytest.fixture(scope="module")
def squeezenet() -> Estimated:
    graph = load_model(zoo("squeezenet"))
    profile = load_profile("rdk-s100")
    estimate = estimate_graph(graph, profile)
    return estimate_run(graph, estimate, profile), graph, estimate


def test_the_estimate_run_is_typed_and_its_file_holds_the_same_keys(squeezenet: Estimated,
                                                                    tmp_path: Path) -> None:
    run, _, _ = squeezenet
    assert isinstance(run, RunFile)
    document = run.to_json()
    assert set(document) == {"schema_version", "tool", "model", "target", "estimate_info", "layers", "folded",
                             "unknown_ops", "summary"}
    assert {"assumptions", "shape_sources"} <= set(document["model"])  # kept beside the typed fields
    assert all(set(layer) == LAYER_KEYS for layer in document["layers"])
    assert all(set(layer["estimate"]) == ESTIMATE_KEYS for layer in document["layers"])
    first = run.layers[0]
    # squeezenet's first Conv: 64 filters of 3x3x3 over a 111x111 output; 64 x 27 weights + 64 biases
    assert first.op_type == "Conv" and first.macs == 64 * 111 * 111 * 27 == 21_290_688 and first.params == 1792
    assert first.unit == first.est.unit and first.est.latency_us is not None
    assert run.summary.layer_count == len(run.layers) == 66 and run.summary.macs == sum(x.macs or 0 for x in run.layers)
    # written once, read back, written again: the same bytes
    path = save_run(run, tmp_path / "a.json")
    again = save_run(load_run(path), tmp_path / "b.json")
    assert path.read_bytes() == again.read_bytes()
    assert load_document(path) == json.loads(json.dumps(document))


def test_a_run_file_is_read_typed_and_other_records_are_written_apart(squeezenet: Estimated, tmp_path: Path) -> None:
    """load_run gives the typed run (the file's document, typed once); save_record writes a JSON record that is not
    a run (the bisect cache's) as it is, and refuses a run's document, which is written typed by save_run."""
    run, _, _ = squeezenet
    path = save_run(run, tmp_path / "run.json")
    loaded = load_run(path)
    assert isinstance(loaded, RunFile) and loaded.to_json() == load_document(path)
    written = save_record({"key": "k", "samples_us": [1.5, 2.0], "boundary": None}, tmp_path / "sample.json")
    assert written.read_text(encoding="utf-8") == (
        '{\n "boundary": null,\n "key": "k",\n "samples_us": [\n  1.5,\n  2.0\n ]\n}\n')
    with pytest.raises(ValueError, match="save_run"):
        save_record(load_document(path), tmp_path / "document.json")
    assert not (tmp_path / "document.json").exists()


def test_add_measurement_returns_a_new_run_with_the_measured_sections(
        squeezenet: Estimated) -> None:
    run, graph, _ = squeezenet
    weights = {layer.id: layer.est.latency_us or 0.0 for layer in run.layers}
    measurement = profile_model(graph, make_inputs(graph, ()), SessionConfig(threads=1), runs=2,
                                warmup=1, weights=weights)
    measured = add_measurement(run, measurement)
    assert run.measurement is None and all(layer.measured is None for layer in run.layers)  # the input is unchanged
    assert measured.measurement is not None and measured.measurement.kind == "kernel-profile"
    assert measured.latency is not None and measured.latency.p50_us == round(measurement.latency.median_us, 3)
    assert measured.summary.meas_latency_us == measured.latency.p50_us
    assert measured.summary.layer_count == run.summary.layer_count  # the estimate's summary keys stay
    for before, after in zip(run.layers, measured.layers, strict=True):
        result = measurement.layers.get(before.id)
        if result is None:
            assert after is before
        else:
            assert after.measured is not None and after.measured.method == "kernel-profile"
            assert after.measured.status == result.status and after.estimate == before.estimate
    assert len(measured.kernels) == len(measurement.kernels) > 10


def test_an_import_of_values_no_run_may_hold_is_refused_naming_the_file() -> None:
    negative = TimeStats(mean_us=-5.0, median_us=-5.0, samples=3)
    result = ImportResult(path="board/profile.log", format="test", tool="test",
                          entries=(VendorEntry("conv1", EntryKind.LAYER, op_type="Conv", stats=negative),))
    with pytest.raises(RunFileError, match=r"board/profile\.log: the imported values make no valid run: .*negative"):
        build_run([result])
    fine = ImportResult(path="board/profile.log", format="test", tool="test",
                        entries=(VendorEntry("conv1", EntryKind.LAYER, op_type="Conv",
                                             stats=TimeStats(mean_us=5.0, median_us=5.0, samples=3)),))
    run = build_run([fine]).run
    assert run.layers[0].measured is not None and run.layers[0].measured.median_us == 5.0
    assert run.kernels[0].layers == ["conv1"] and run.import_ is not None and run.import_.entries == 1
