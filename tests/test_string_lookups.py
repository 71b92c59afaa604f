"""benchmarks/string_lookups.py: what it counts; and the analysis package reading the typed run."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from _scripts import load_script
from conftest import zoo
from layerscope.analysis.compare import compare_runs
from layerscope.analysis.diagnose import diagnose
from layerscope.analysis.reconcile import reconcile_run
from layerscope.analysis.rules import RuleContext, run_rules
from layerscope.estimator import estimate_graph
from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.run import add_measurement, estimate_run, load_run, save_run
from layerscope.runfile import as_run, derived
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.targets import load_profile

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "string_lookups.py"


def _load() -> ModuleType:
    return load_script("string_lookups_benchmark", BENCHMARK)


sl = _load()


def test_counts_string_subscripts_and_gets_but_not_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text(
        'run = {"layers": []}\n'                   # a dict literal: not a lookup
        'a = run["layers"]\n'                      # 1
        'b = run["model"]["sha256"]\n'             # 2 more
        'c = run.get("target", {}).get("name")\n'  # 2 more
        'run["findings"] = 1\n'                    # 1 more (a store)
        'd = run[name]\n'                          # a variable key: not counted
        'e = run[0]\n'                             # an integer key: not counted
        'f = getattr(run, "get")\n'                # not a call of .get("...")
        '# run["comment"] and "run.get(\'x\')" in a string are not code\n')
    assert sl.count_file(path) == 6


def test_the_not_run_data_files_exist_and_the_owner_is_left_out() -> None:
    for rel in sl.NOT_RUN_DATA:
        assert (sl.SRC / rel).is_file(), rel
    counts = sl.count_tree()
    assert not any(rel.startswith("runfile/") for rel in counts)
    assert "run.py" in counts and "analysis/rules.py" in counts


# --------------------------------------------------------------------------------------------------- typed readers
# The typed accessors readers use (runfile.models) give what runfile.derived defines on the document, and the
# analysis readers give the same answer for a typed run and for the same run saved and read back.




@pytest.fixture(scope="module")
def squeezenet_run() -> dict[str, Any]:
    """SqueezeNet (the onnx zoo's) estimated on the RDK S100 and profiled on ONNX Runtime (2 runs)."""
    graph = load_model(zoo("squeezenet"))
    profile = load_profile("rdk-s100")
    run = estimate_run(graph, estimate_graph(graph, profile), profile)
    weights = {layer.id: layer.est.latency_us or 0.0 for layer in run.layers}
    measurement = profile_model(graph, make_inputs(graph, ()), SessionConfig(threads=1), runs=2, warmup=1,
                                weights=weights)
    return add_measurement(run, measurement).to_json()


def test_typed_layer_times_and_k_are_the_documents(squeezenet_run: dict[str, Any]) -> None:
    typed = as_run(squeezenet_run)
    assert len(typed.layers) == len(squeezenet_run["layers"]) > 50
    measured = [layer for layer in typed.layers if layer.measured_us is not None]
    assert len(measured) > 20 and any(layer.measured_us > 0 for layer in measured)
    for layer, doc in zip(typed.layers, squeezenet_run["layers"], strict=True):
        assert layer.id == doc["id"]
        assert layer.measured_us == derived.layer_measured_us(doc)
        assert layer.estimated_us == derived.layer_estimated_us(doc)
        assert layer.eliminated == derived.is_eliminated(doc)
    factor = derived.scale_factor(squeezenet_run)
    assert factor is not None and factor.scope == "layers"
    assert typed.k == factor.k and typed.k_factor == factor
    # k by hand: Σ measured / Σ estimated over the layers with both, eliminated layers left out
    pairs = [(layer.measured_us, layer.estimated_us) for layer in typed.layers
             if layer.measured_us is not None and layer.estimated_us is not None and not layer.eliminated]
    assert typed.k == pytest.approx(sum(m for m, _ in pairs) / sum(e for _, e in pairs), rel=1e-12)
    assert typed.layer_by_id["n5"] is typed.layers[5]


def test_analysis_reads_a_typed_run_and_the_same_run_saved_and_read_back_alike(squeezenet_run: dict[str, Any],
                                                                               tmp_path: Path) -> None:
    typed = as_run(squeezenet_run)
    reread = load_run(save_run(typed, tmp_path / "run.json"))
    assert diagnose(typed) == diagnose(reread)
    assert reconcile_run(typed) == reconcile_run(reread)
    assert reconcile_run(typed).factor.k == pytest.approx(typed.k or 0.0, rel=1e-12)
    profile = load_profile("rdk-s100")
    assert run_rules(RuleContext.of(typed, profile)) == run_rules(RuleContext.of(reread, profile))
    same = compare_runs(typed, reread)
    assert same.time_source == "measured" and not same.added and not same.removed
    assert all(d.delta_us == 0 for d in same.layers) and len(same.layers) == len(typed.layers)


def test_run_data_is_read_through_the_typed_run() -> None:
    """Issue #15's line: fewer than 150 string-key lookups into run data outside the run-file package (128 when
    the line was met); a reader that goes back to reading the JSON by key shows up here."""
    assert sum(sl.run_data(sl.count_tree()).values()) < 150
