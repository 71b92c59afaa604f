"""A predictor for tests whose trees predict every kernel alone at its roofline time (log ratio 0 in every leaf)."""

from __future__ import annotations

from typing import Any

import numpy as np

from layerscope.analysis.predictor import FEATURES, FamilyFit, Predictor
from layerscope.analysis.trees import Ensemble, Tree
from layerscope.measure.kernels import FAMILIES


def roofline_predictor(overhead_us: float, *, residuals: tuple[float, float] = (-0.1, 0.1),
                       **fields: Any) -> Predictor:
    """A :class:`Predictor` with one ``all`` fit that predicts each kernel alone at its roofline time (its 10th /
    90th percentile log ``residuals``: the interval), ``overhead_us`` per call, and the other :class:`Predictor`
    ``fields`` given (``calls``, ``reorders``...)."""
    leaf = Tree(np.array([0]), np.array([0.0]), np.array([-1]), np.array([-1]), np.array([0.0]))
    model = Ensemble(0.0, 1.0, "sum", len(FEATURES) + len(FAMILIES), (leaf,))
    return Predictor({"runner": "test"}, "host", overhead_us,
                     {"all": FamilyFit("all", 50, 0.0, 1.0, 5, *residuals, model)}, **fields)
