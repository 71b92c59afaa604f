"""A synthetic graph of any number of layers, for scale tests and benchmarks (not an architecture sample)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: Layers per block of :func:`block_chain`.
LAYERS_PER_BLOCK = 5


def block_chain(layers: int, channels: int = 32, size: int = 40) -> onnx.ModelProto:
    """``layers`` // 5 blocks (at least one) of Conv3x3 -> Sigmoid -> Mul, beside a Conv1x1, joined by Add, on
    ``channels`` x ``size`` x ``size`` activations; node names ``b<i>/conv3`` ... ``b<i>/add``; zero weights;
    opset 17."""
    nodes: list[onnx.NodeProto] = []
    inits = []
    w3 = np.zeros((channels, channels, 3, 3), np.float32)
    w1 = np.zeros((channels, channels, 1, 1), np.float32)
    x = "x"
    for b in range(max(1, layers // LAYERS_PER_BLOCK)):
        p = f"b{b}"
        inits += [numpy_helper.from_array(w3, f"{p}.w3"), numpy_helper.from_array(w1, f"{p}.w1")]
        nodes += [
            helper.make_node("Conv", [x, f"{p}.w3"], [f"{p}.c"], name=f"{p}/conv3", pads=[1, 1, 1, 1]),
            helper.make_node("Sigmoid", [f"{p}.c"], [f"{p}.s"], name=f"{p}/sigmoid"),
            helper.make_node("Mul", [f"{p}.c", f"{p}.s"], [f"{p}.m"], name=f"{p}/mul"),
            helper.make_node("Conv", [x, f"{p}.w1"], [f"{p}.k"], name=f"{p}/conv1"),
            helper.make_node("Add", [f"{p}.m", f"{p}.k"], [f"{p}.y"], name=f"{p}/add"),
        ]
        x = f"{p}.y"
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "synthetic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
