"""Test doubles of the predictor: one whose trees predict every kernel alone at its roofline time (log ratio 0 in every
leaf), and a kernel runner's fixed parts."""

from __future__ import annotations

from typing import Any

import numpy as np

from layerscope.analysis.predictor import FEATURES, FamilyFit, Predictor
from layerscope.analysis.trees import Ensemble, Tree
from layerscope.measure.kernels import FAMILIES
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph


def roofline_predictor(overhead_us: float, *, residuals: tuple[float, float] = (-0.1, 0.1),
                       **fields: Any) -> Predictor:
    """A :class:`Predictor` with one ``all`` fit that predicts each kernel alone at its roofline time (its 10th /
    90th percentile log ``residuals``: the interval), ``overhead_us`` per call, and the other :class:`Predictor`
    ``fields`` given (``calls``, ``reorders``...)."""
    leaf = Tree(np.array([0]), np.array([0.0]), np.array([-1]), np.array([-1]), np.array([0.0]))
    model = Ensemble(0.0, 1.0, "sum", len(FEATURES) + len(FAMILIES), (leaf,))
    return Predictor({"runner": "test"}, "host", overhead_us,
                     {"all": FamilyFit("all", 50, 0.0, 1.0, 5, *residuals, model)}, **fields)


class FakeKernels:
    """A kernel runner (:class:`~layerscope.measure.kernels.KernelRunner`) for tests, named ``fake``, installed,
    grouping one kernel per layer and inserting no layout kernels; a test's subclass says what :meth:`make` times
    with."""

    name = "fake"
    grouping = "fake"
    own_grouping = True

    def installed(self) -> bool:
        return True

    def groups(self, graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
        return [(n.id, (n.id,)) for n in graph.layers]

    def reorders(self, graph: Graph, config: SessionConfig) -> list[tuple[str, int, tuple[str, ...]]]:
        return []
