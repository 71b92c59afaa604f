"""Test doubles of the predictor: one whose trees predict every kernel alone at its roofline time (log ratio 0 in every
leaf), and a kernel runner's fixed parts; a one-Relu kernel; a generated kernel loaded as a graph, and its features
by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from layerscope.analysis.predictor import FEATURES, Caches, FamilyFit, Predictor, kernel_features
from layerscope.analysis.trees import Ensemble, Tree
from layerscope.estimator import estimate_graph
from layerscope.measure.kernels import FAMILIES, KernelModel
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.targets import load_profile

MIB = 1 << 20
#: The caches the feature tests compare a kernel's working set with: a 1 MiB L2 and a 32 MiB last level.
CACHES = Caches(MIB, 32 * MIB, "test")


def relu_kernel() -> KernelModel:
    """A kernel model of one Relu on [1, 64, 8, 8] floats: a kernel no runtime converts a layout for."""
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 8, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return KernelModel("elementwise", "relu", model.SerializeToString())


def kernel_graph(kernel: KernelModel, folder: Path) -> Graph:
    """``kernel``'s single-kernel model written under ``folder`` and loaded."""
    path = folder / f"{kernel.digest[:12]}.onnx"
    path.write_bytes(kernel.model_bytes)
    return load_model(path)


def feature_map(graph: Graph) -> dict[str, float]:
    """The predictor's :data:`FEATURES` of the kernel covering every layer of ``graph`` (its fp32 estimate on the
    host profile, working sets against :data:`CACHES`), by name."""
    est = estimate_graph(graph, load_profile("host"), "fp32")
    values = kernel_features(graph, est, [n.id for n in graph.layers], CACHES).tolist()
    return dict(zip(FEATURES, values, strict=True))


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


def features_of(kernel: KernelModel, folder: Path) -> dict[str, float]:
    """:func:`feature_map` of ``kernel`` loaded from under ``folder`` (:func:`kernel_graph`)."""
    return feature_map(kernel_graph(kernel, folder))
