"""The scale factor k between a board measurement and a static estimate, and the shares scaled by it.

Source of the method: the seed forum thread (RDK S100): "把 processor_latency: BPU_inference_time_cost 作锚点,
按「板端 BPU 总耗时 / Summary 预估 BPU 总耗时」对占比做一次整体缩放,得到单层估计值" -- k = board BPU time /
static BPU estimate, per-layer shares of the static report scaled once by k.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES_SCALE
from layerscope.errors import InputError
from layerscope.runfile.derived import ScaleFactor, k_between, scale_layers


def test_k_is_measured_over_estimated() -> None:
    factor = k_between(4100.0, 3420.6)
    assert factor.k == pytest.approx(4100.0 / 3420.6)
    assert factor == ScaleFactor(measured_us=4100.0, estimated_us=3420.6)


@pytest.mark.parametrize("measured, estimated", [(0.0, 1.0), (1.0, 0.0), (-1.0, 2.0), (math.nan, 1.0),
                                                 (1.0, math.inf)])
def test_k_refuses_times_that_are_not_positive_numbers(measured: float, estimated: float) -> None:
    with pytest.raises(InputError, match="cannot scale"):
        k_between(measured, estimated)


def test_scaled_layers_keep_order_and_add_up_to_the_board_time() -> None:
    factor = k_between(200.0, 100.0)
    scaled = scale_layers([("conv", 30.0), ("relu", 10.0), ("pool", 0.0)], factor)
    assert [s.layer_id for s in scaled] == ["conv", "relu", "pool"]
    assert [s.share for s in scaled] == [0.75, 0.25, 0.0]
    assert [s.scaled_us for s in scaled] == [150.0, 50.0, 0.0]
    assert [s.estimated_us for s in scaled] == [30.0, 10.0, 0.0]


def test_no_cost_at_all_gives_zero_shares() -> None:
    scaled = scale_layers([("a", 0.0), ("b", -1.0)], k_between(1.0, 1.0))
    assert [(s.share, s.scaled_us, s.estimated_us) for s in scaled] == [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)]


@settings(max_examples=200 * EXAMPLES_SCALE, deadline=None, database=None)
@given(costs=st.lists(st.floats(0, 1e6), min_size=1, max_size=40), measured=st.floats(1e-3, 1e7),
       estimated=st.floats(1e-3, 1e7))
def test_shares_sum_to_one_and_scaled_to_the_measurement(costs: list[float], measured: float,
                                                         estimated: float) -> None:
    factor = k_between(measured, estimated)
    scaled = scale_layers([(str(i), c) for i, c in enumerate(costs)], factor)
    if sum(costs) > 0:
        assert sum(s.share for s in scaled) == pytest.approx(1.0)
        assert sum(s.scaled_us for s in scaled) == pytest.approx(measured)
    for s in scaled:
        assert s.scaled_us == pytest.approx(factor.k * s.share * estimated)
