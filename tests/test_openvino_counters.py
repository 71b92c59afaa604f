"""OpenVINO's CPU counters are running means in whole µs (the plugin's ``PerfCount::avg()``): each timed run's node
time is taken from them, warm-up runs left out."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from layerscope.runtimes.openvino.counters import CounterRuns


@dataclass
class _RunningMeanRequest:
    """An infer request as OpenVINO's CPU plugin reports it: per node, total µs / executions (integer division)."""

    times_us: dict[str, list[int]]
    done: int = 0
    totals: dict[str, int] = field(default_factory=dict)

    def infer(self) -> None:
        for name, times in self.times_us.items():
            self.totals[name] = self.totals.get(name, 0) + times[self.done]
        self.done += 1

    @property
    def profiling_info(self) -> list[SimpleNamespace]:
        return [SimpleNamespace(node_name=name, status=SimpleNamespace(name="EXECUTED"),
                                real_time=datetime.timedelta(microseconds=total // self.done))
                for name, total in self.totals.items()]


def _measure(request: _RunningMeanRequest, warmup: int, runs: int) -> list[dict[str, float]]:
    node_runs = CounterRuns(request, warmup)
    for _ in range(warmup):
        request.infer()
        node_runs.inferred()
    for _ in range(runs):
        request.infer()
        node_runs.inferred()
        node_runs.record()
    return node_runs.per_run


def test_each_timed_run_is_its_own_time_without_the_warm_up() -> None:
    conv = [5000, 3000, 100, 130, 95, 2100, 110, 105]  # two slow warm-ups, then one slow timed run
    relu = [400, 300, 40, 41, 39, 40, 42, 40]
    request = _RunningMeanRequest({"conv": conv, "relu": relu})
    per_run = _measure(request, warmup=2, runs=6)
    assert len(per_run) == 6
    for k, run in enumerate(per_run):
        executions = 2 + k + 1
        # within the two means' truncation: under `executions` µs
        assert run["conv"] == pytest.approx(conv[2 + k], abs=executions)
        assert run["relu"] == pytest.approx(relu[2 + k], abs=executions)
    # the slow timed run stands out (its median-based statistics see it as one run, not smeared over the rest)
    assert max(range(6), key=lambda k: per_run[k]["conv"]) == 3
    # the timed runs' mean within (2 x warm-up + runs) / runs µs; the running mean itself would be 1330 µs
    mean_us = sum(run["conv"] for run in per_run) / 6
    assert mean_us == pytest.approx(sum(conv[2:]) / 6, abs=(2 * 2 + 6) / 6)


def test_without_warm_up_the_first_run_is_taken_from_zero() -> None:
    request = _RunningMeanRequest({"matmul": [700, 200, 210]})
    per_run = _measure(request, warmup=0, runs=3)
    assert round(per_run[0]["matmul"]) == 700
    assert per_run[1]["matmul"] == pytest.approx(200, abs=2) and per_run[2]["matmul"] == pytest.approx(210, abs=3)

