"""Honest verdicts and advice that fits the run: measured time in cost-unknown layers, outlier layers, findings
grouped over layers alike, Horizon advice only on Horizon profiles, recurrent layers classed by per-step reuse,
coverage above 100% explained."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from onnx import helper
from rich.console import Console
from tests.conftest import F32, ModelWriter

from layerscope.analysis import rules as R
from layerscope.analysis.reconcile import reconcile_run, reconcile_section
from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.report.analysis_terminal import reconcile_report
from layerscope.report.views.coverage import coverage_text
from layerscope.run import SCHEMA_VERSION, estimate_run
from layerscope.runfile import RunFile, as_run
from layerscope.targets import load_profile

N = helper.make_node


def _run(layers: list[tuple[str, str, float, float, bool]]) -> RunFile:
    """A measured run: (id, op type, estimated µs, measured µs, cost known) per layer."""
    return as_run({"schema_version": SCHEMA_VERSION, "model": {"name": "toy", "path": "toy.onnx"},
            "target": {"name": "host"}, "summary": {"est_latency_us": sum(e for _, _, e, _, _ in layers)},
            "layers": [{"id": lid, "op_type": op, "unit_kind": "tensor", "known": known,
                        "estimate": {"latency_us": est, "bound": "compute"},
                        "measured": {"status": "measured", "median_us": meas}}
                       for lid, op, est, meas, known in layers]})


def _convs(n: int = 11, k: float = 2.0) -> list[tuple[str, str, float, float, bool]]:
    """``n`` convs measured k times their estimate, give or take 10% (alternately)."""
    return [(f"conv{i}", "Conv", 10.0 + i, k * (10.0 + i) * (1.1 if i % 2 else 0.9), True) for i in range(n)]


def _text(renderable: Any) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


# ------------------------------------------------------------------------------------ cost-unknown layers
def test_most_of_the_time_in_a_cost_unknown_layer_is_never_trusted() -> None:
    layers = _convs()
    conv_total = sum(m for *_, m, _ in layers)
    # The tree ensemble: 0.9 µs estimated (a fixed overhead: no cost function), 4x the convs' time measured.
    layers.append(("trees", "TreeEnsembleClassifier", 0.9, 4 * conv_total, False))
    rec = reconcile_run(_run(layers))
    assert rec.unknown_cost is not None
    assert rec.unknown_cost.share == 0.8  # 4 / (4 + 1), hand-checked
    assert rec.unknown_cost.layer_ids == ("trees",)
    assert rec.verdict.ranking == "no" and rec.verdict.absolute == "no"
    text = " ".join(rec.verdict.lines)
    assert "trust it --" not in text.replace("do not trust it --", "")
    assert "80% of the measured time is in 1 layer(s) whose cost the estimate does not know" in text
    k_known = rec.unknown_cost.k_known
    assert k_known is not None and abs(k_known - conv_total / sum(e for _, _, e, _, _ in _convs())) < 1e-9
    printed = _text(reconcile_report(rec))
    assert "unknown cost" in printed and "80.0% of the measured time" in printed
    assert reconcile_section(rec)["unknown_cost"]["share"] == 0.8  # type: ignore[index]


def test_a_small_cost_unknown_share_keeps_the_ranking_from_trust_it() -> None:
    trusted = reconcile_run(_run(_convs(20)))
    assert trusted.verdict.ranking == "yes" and trusted.unknown_cost is not None
    assert trusted.unknown_cost.share == 0.0
    layers = _convs(20)
    # 10% of the time in a ZipMap with no cost whose fixed overhead happens to rank it where it belongs: the ranks
    # agree as well as before, yet the verdict must not say "trust it".
    total = sum(m for *_, m, _ in layers)
    layers.append(("zipmap", "ZipMap", 40.0, total / 9, False))
    rec = reconcile_run(_run(layers))
    assert rec.unknown_cost is not None and abs(rec.unknown_cost.share - 0.1) < 1e-9
    assert rec.spearman is not None and rec.spearman >= 0.8 and rec.outliers == ()
    assert (rec.verdict.ranking, rec.verdict.absolute) == ("roughly", "no")
    assert "10% of the measured time is in 1 layer(s) whose cost the estimate does not know" in rec.verdict.lines[0]


# ----------------------------------------------------------------------------------------- outlier layers
def test_an_outlier_layer_is_one_finding_naming_it_with_causes() -> None:
    layers = _convs()
    # The face detector's first PRelu: 4.7 µs estimated, 10.3 ms measured.
    layers.insert(0, ("prelu1", "PRelu", 4.7, 10_300.0, True))
    run = _run(layers)
    rec = reconcile_run(run)
    assert [o.layer_id for o in rec.outliers] == ["prelu1"]
    assert rec.verdict.ranking == "no" and "'prelu1' measured 2191x its estimate" in rec.verdict.lines[0]
    found = R.outlier_layers(R.RuleContext.of(run, load_profile("rdk-x5")))
    assert [f.layer_ids for f in found] == [("prelu1",)]
    (f,) = found
    assert f.rule_id == "outlier-layer" and "'prelu1'" in f.hazard
    causes = f.evidence["causes"]
    assert any("denormal" in c for c in causes) and any("kernel" in c for c in causes)
    assert any("layout conversion" in c for c in causes) and any("CPU fallback" in c for c in causes)
    ratio = 10_300.0 / 4.7
    assert abs(f.evidence["measured_over_estimated"] - round(ratio, 3)) < 1e-6
    # On a CPU profile there is no accelerator to fall back from.
    host_causes = R.outlier_layers(R.RuleContext.of(run, None))[0].evidence["causes"]
    assert not any("CPU fallback" in c for c in host_causes)


def test_a_run_without_outliers_has_no_outlier_finding() -> None:
    run = _run(_convs(12))
    assert reconcile_run(run).outliers == ()
    assert R.outlier_layers(R.RuleContext.of(run, None)) == []


# ------------------------------------------------------------------------------------------------ grouping
def _context(path: Path, target: str, dtype: str | None = None) -> R.RuleContext:
    profile = load_profile(target)
    graph = load_model(path)
    return R.RuleContext.of(estimate_run(graph, estimate_graph(graph, profile, dtype), profile), profile, graph)


def test_ten_layers_alike_are_one_grouped_finding(write_model: ModelWriter) -> None:
    shape = [1, 64, 160, 160]
    path = write_model([N("Sigmoid", [f"x{i}"], [f"y{i}"], name=f"sig{i}") for i in range(10)],
                       [(f"x{i}", F32, shape) for i in range(10)], [(f"y{i}", F32, shape) for i in range(10)])
    ctx = _context(path, "rdk-s100")
    assert [f.layer_ids for f in R.bandwidth_bound(ctx)] == [tuple(f"sig{i}" for i in range(10))]
    advice = R.run_rules(ctx)
    bandwidth = [f for f in advice.findings if f.rule_id == "bandwidth-bound"]
    assert len(bandwidth) == 1
    (f,) = bandwidth
    assert f.layer_ids == tuple(f"sig{i}" for i in range(10))
    assert f.evidence["grouped_layers"] == 10 and abs(f.evidence["share"] - 1.0) < 1e-5
    assert "the same holds for 9 more layer(s) alike: 'sig1', 'sig2', 'sig3' ..." in f.hazard


# ------------------------------------------------------------------------------------- target-aware advice
def _head(write_model: ModelWriter) -> Path:
    return write_model([N("Conv", ["x", "w1"], ["a"], name="c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                        N("Conv", ["a", "w2"], ["y"], name="c2", kernel_shape=[1, 1])],
                       [("x", F32, [1, 3, 40, 40])], [("y", F32, [1, 40, 40, 40])],
                       {"w1": np.full((64, 3, 3, 3), 0.01, np.float32),
                        "w2": np.full((40, 64, 1, 1), 0.01, np.float32)})


def test_channel_alignment_advice_is_given_on_rdk_x5_and_not_on_the_host(write_model: ModelWriter) -> None:
    path = _head(write_model)
    (on_bpu,) = R.lane_alignment(_context(path, "rdk-x5"))
    assert on_bpu.layer_ids == ("c2",) and "Horizon" in on_bpu.help
    assert R.lane_alignment(_context(path, "host")) == []
    host_advice = R.run_rules(_context(path, "host"))
    assert not any("Horizon" in f.help or "hb_compile" in f.mitigation or "BPU" in f.hazard
                   for f in host_advice.findings)


def test_an_lstm_dominated_run_is_not_called_bandwidth_bound(write_model: ModelWriter) -> None:
    hidden, steps = 128, 200
    rng = np.random.default_rng(0)
    weights = {"W": rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32) * 0.1,
               "R": rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32) * 0.1}
    path = write_model([N("LSTM", ["x", "W", "R"], ["seq", "h"], name="lstm", hidden_size=hidden),
                        N("Relu", ["h"], ["y"], name="relu")],
                       [("x", F32, [steps, 1, hidden])], [("y", F32, [1, 1, hidden])], weights)
    for target in ("rdk-x5", "host"):
        ctx = _context(path, target)
        assert ctx.share(ctx.time_us(ctx.by_id["lstm"])) > 0.9
        advice = R.run_rules(ctx)
        assert not any(f.rule_id == "bandwidth-bound" and "lstm" in f.layer_ids for f in advice.findings)
        (rec,) = [f for f in advice.findings if f.rule_id == "recurrent-steps"]
        assert rec.layer_ids == ("lstm",)
        assert (rec.evidence["steps"], rec.evidence["batch"], rec.evidence["directions"]) == (steps, 1, 1)
        assert ctx.profile is not None
        resident = rec.evidence["weight_bytes"] <= ctx.profile.weight_budget_bytes
        assert rec.evidence["weights_resident"] is resident
        if resident:
            assert rec.evidence["class"] == "sequential steps" and "not to memory bandwidth" in rec.hazard
            assert "DDR" not in rec.mitigation
    # int8 on the BPU: 2 x 4 x 128 x 128 bytes = 128 KiB, within rdk-x5's 256 KiB weight share: resident.
    (bpu,) = R.recurrent_steps(_context(path, "rdk-x5"))
    assert bpu.evidence["weight_bytes"] == 2 * 4 * hidden * hidden and bpu.evidence["weights_resident"] is True
    # deployed at int16 the X5 keeps its weights at int8 (its weight_dtype), as the estimate loads them: 128 KiB again
    (wide,) = R.recurrent_steps(_context(path, "rdk-x5", "int16"))
    assert wide.evidence["weight_dtype"] == "int8" and wide.evidence["weight_bytes"] == 2 * 4 * hidden * hidden


# ------------------------------------------------------------------------------------------------ coverage
def test_coverage_above_100_percent_says_what_the_sum_counts() -> None:
    assert coverage_text(0.973) == "97.3% of each profiled run is inside kernels"
    over = coverage_text(1.82, streams=1)
    assert over.startswith("182.0%: the kernel times summed exceed the profiled run's wall time")
    assert "overlapping" in over and "nested" in over
    assert "4 streams" in coverage_text(2.83, streams=4)
