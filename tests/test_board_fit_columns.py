"""The board fit's design matrix (``layerscope.analysis.board._Columns``): every run's layers stacked into one array
per tied group, so that one residual evaluation prices all the runs at once. Its prediction must be the calibrated
profile's own end-to-end prediction (:func:`layerscope.analysis.calibrate.predict_us`) for the same factors, layer
kinds, layout Transposes, weight loads, activation-matrix-product time, a non-default dtype's compute factor and task
overhead included."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope.analysis.board import _Columns, _Factors, fit_key
from layerscope.analysis.calibrate import LayerTerm, Params, RunData, predict_us


def _run(name: str, layers: tuple[LayerTerm, ...], task_us: float) -> RunData:
    return RunData(name, name, "npu", 1000.0, 0.0, layers, (), task_us=task_us)


#: Two runs of different lengths over two units (the tensor unit, and a move unit with two kinds the fit ties):
#: compute-bound and memory-bound layers, weight loads, a layout Transpose, an activation matrix product.
RUNS = (
    _run("a", (LayerTerm("c1", "T/tensor", 50.0, 20.0, "Conv", weight_us=15.0),
               LayerTerm("c2", "T/tensor", 10.0, 40.0, "Conv", weight_us=30.0),
               LayerTerm("m1", "T/tensor", 5.0, 2.0, "MatMul", element_us=12.0),
               LayerTerm("t1", "M/move", 8.0, 3.0, "Transpose", layout=True),
               LayerTerm("s1", "M/zero_copy", 0.0, 0.0, "Reshape")), 300.0),
    _run("b", (LayerTerm("c1", "T/tensor", 7.0, 70.0, "Conv", weight_us=60.0),
               LayerTerm("k1", "M/move", 2.0, 9.0, "Concat")), 300.0),
    # a model deployed at int16: its accelerator layers take the int16 factor, its CPU fallback does not
    _run("c", (LayerTerm("c1", "T/tensor", 40.0, 10.0, "Conv", weight_us=5.0, dtype="int16"),
               LayerTerm("k1", "M/move", 2.0, 9.0, "Concat", dtype="int16"),
               LayerTerm("f1", "C/fallback", 30.0, 1.0, "Softmax")), 300.0),
)


@pytest.mark.parametrize(("layout", "int16"), [(1.0, 1.0), (0.25, 0.5)])
def test_the_stacked_prediction_is_the_profiles_prediction(layout: float, int16: float) -> None:
    factors = _Factors(scales={"T": 1.3, "M": 0.6, "C/fallback": 2.0}, memory=1.1,
                       overheads={"T": 1.0, "M": 2.5, "C/fallback": 100.0}, task=0.75, weight=1.7, element=0.8,
                       layout=layout, dtypes={"int16": int16})
    groups = {t.group for r in RUNS for t in r.layers}
    params = Params({g: factors.scales[fit_key(g)] for g in groups}, {g: factors.overheads[fit_key(g)] for g in groups},
                    factors.memory, task_scale=factors.task, weight_memory_scale=factors.weight,
                    element_scale=factors.element, layout_scale=factors.layout, dtype_scale=factors.dtypes)
    columns = _Columns.of(RUNS)
    assert columns.dtypes == ("int16",)
    stacked = columns.predict_us(factors)
    expected = [predict_us(r, params) for r in RUNS]
    assert stacked == pytest.approx(expected, rel=1e-12)
    # run b by hand: max(1.3 * 7, 1.1 * 10 + 1.7 * 60) + 1 + max(0.6 * 2, 1.1 * 9) + 2.5 + 0.75 * 300
    assert stacked[1] == pytest.approx(113.0 + 1.0 + 9.9 + 2.5 + 225.0)
    # run c by hand: max(1.3 * f * 40, 1.1 * 5 + 1.7 * 5) + 1 + max(0.6 * f * 2, 1.1 * 9) + 2.5
    # + max(2 * 30, 1.1 * 1) + 100 + 225, f the int16 factor
    assert stacked[2] == pytest.approx(max(52.0 * int16, 14.0) + 1.0 + 9.9 + 2.5 + 60.0 + 100.0 + 225.0)
    assert isinstance(stacked, np.ndarray) and stacked.shape == (3,)
