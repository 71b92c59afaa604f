"""benchmarks/predictor.py: its rank correlation, top-10 overlap and scoring of a method against a measured run
(hand-checked numbers)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from _scripts import load_script

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "predictor.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("predictor_benchmark", BENCHMARK)


def test_spearman_by_hand(bench: ModuleType) -> None:
    assert bench.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert bench.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks [0, 1, 2, 3] vs [0, 2, 1, 3]: d^2 sum 2, rho = 1 - 6*2 / (4*15) = 0.8
    assert bench.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # ties take the average rank: [0.5, 0.5, 2] vs [0, 1, 2] -> 0.866
    assert bench.spearman([5, 5, 9], [1, 2, 3]) == pytest.approx(3 ** 0.5 / 2)
    assert bench.spearman([1, 2], [1, 2]) is None
    assert bench.spearman([1, 1, 1], [1, 2, 3]) is None


def test_top_overlap_by_hand(bench: ModuleType) -> None:
    measured = {f"l{i}": float(i) for i in range(20)}
    assert bench.top_overlap(measured, measured) == 1.0
    shifted = {k: (v if v < 15 else -v) for k, v in measured.items()}  # the top 5 fall to the bottom
    assert bench.top_overlap(measured, shifted) == 0.5
    assert bench.top_overlap({"a": 1.0, "b": 2.0}, {"a": 2.0, "b": 1.0}) == 1.0  # n capped at 2 layers


def test_score_reads_the_prediction_and_the_measured_layers(bench: ModuleType) -> None:
    measured = {"latency": {"p50_us": 100.0}, "layers": [
        {"id": "a", "measured": {"median_us": 50.0}}, {"id": "b", "measured": {"median_us": 30.0}},
        {"id": "c", "measured": {"median_us": 20.0}}, {"id": "d", "measured": {"status": "eliminated"}}]}
    predicted = {"predictor": {"latency_us": 110.0}, "layers": [
        {"id": "a", "predicted": {"latency_us": 60.0}}, {"id": "b", "predicted": {"latency_us": 20.0}},
        {"id": "c", "predicted": {"latency_us": 25.0}}, {"id": "d", "predicted": {"latency_us": 0.0}}]}
    s = bench.score(measured, predicted, "predictor")
    assert s["error"] == pytest.approx(0.10)
    assert s["spearman"] == pytest.approx(0.5)  # ranks [2, 1, 0] vs [2, 0, 1]: 1 - 6*2/(3*8)
    assert s["top10"] == 1.0


def test_truth_is_the_median_round_and_its_spread_is_the_rounds_range(bench: ModuleType) -> None:
    truth, spread = bench.round_spread([100.0, 110.0, 95.0])
    assert truth == 100.0 and spread == pytest.approx(0.15)  # (110 - 95) / 100
    assert bench.round_spread([42.0]) == (42.0, None)


def test_the_roofline_beside_a_prediction_is_scored_as_the_roofline(bench: ModuleType) -> None:
    measured = {"latency": {"p50_us": 100.0}, "layers": []}
    run = {"summary": {"est_latency_us": 95.0, "roofline_latency_us": 50.0}, "predictor": {"latency_us": 95.0},
           "layers": []}
    assert bench.score(measured, run, "calibrate")["error"] == pytest.approx(-0.5)
    assert bench.score(measured, run, "predictor")["error"] == pytest.approx(-0.05)
