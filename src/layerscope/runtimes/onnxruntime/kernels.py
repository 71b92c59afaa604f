"""ONNX Runtime's kernels for the latency predictor: how it groups a model's layers into kernels, and what times
a single-kernel model on it.

Contract: a kernel is a node of the graph ONNX Runtime runs (:func:`optimized_graph`, written with
``optimized_model_filepath`` under the session settings given); :func:`kernel_groups` maps those nodes to source
layers with the fusion map (:func:`~layerscope.measure.fusion.build_fusion_map`); :class:`OrtKernels` is the
:class:`~layerscope.measure.kernels.KernelRunner` that times each kernel model with an
:class:`~layerscope.runtimes.onnxruntime.runner.OrtRunner` (2 untimed runs before the first visit);
:func:`layout_kernels` lists the NCHWc reorders the optimized graph runs, which the prediction adds (a kernel is
timed without those at its own boundary).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from layerscope.errors import LayerscopeError
from layerscope.measure.fusion import LAYOUT_OPS, build_fusion_map
from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernels import OwnKernels, TimingConfig
from layerscope.measure.runners import Runner
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph, Node
from layerscope.runtimes.onnxruntime.runner import OrtRunner
from layerscope.runtimes.onnxruntime.session import make_session
from layerscope.tempdirs import scratch

__all__ = ["OrtKernels", "kernel_groups", "layout_kernels", "optimized_graph"]


def optimized_graph(model_path: Path, config: SessionConfig) -> onnx.GraphProto:
    """The graph ONNX Runtime runs for ``model_path`` (its optimized model, external data not loaded)."""
    with scratch("kernels") as tmp:
        out = Path(tmp) / "optimized.onnx"
        make_session(model_path, config, optimized_model_path=str(out))
        return onnx.load(str(out), load_external_data=False).graph


@functools.lru_cache(maxsize=2)
def _optimized_cached(path: str, mtime_ns: int, size: int, config: SessionConfig) -> bytes:
    """:func:`optimized_graph` of the file at ``path`` as it was at ``mtime_ns`` / ``size`` (serialized: one
    model's kernels and its layout kernels are read from one optimisation)."""
    return bytes(optimized_graph(Path(path), config).SerializeToString())


def _runtime_graph(graph: Graph, config: SessionConfig) -> onnx.ModelProto:
    """The optimized graph ONNX Runtime runs for ``graph``'s file, as a model (cached while the file is unchanged)."""
    stat = Path(graph.path).stat()
    proto = onnx.GraphProto()
    proto.ParseFromString(_optimized_cached(str(graph.path), stat.st_mtime_ns, stat.st_size, config))
    return onnx.ModelProto(graph=proto)


def kernel_groups(graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
    """ONNX Runtime's kernels for ``graph`` that do the work of source layers: ``(kernel name, layer ids)``,
    from the fusion map of its optimized graph (layout, constant and unmapped kernels left out). Kernels that do
    the work of the same layers (one source layer the runtime runs as several kernels: a HardSwish as HardSigmoid
    and Mul) are one group, named ``a+b``: extracted, the layer is timed as all of them, and predicted once."""
    fusion = build_fusion_map(graph, _runtime_graph(graph, config))
    merged: dict[tuple[str, ...], list[str]] = {}
    for k in fusion.kernels.values():
        if k.category == "layer" and k.layers:
            merged.setdefault(k.layers, []).append(k.kernel)
    return [("+".join(names), layers) for layers, names in merged.items()]


#: Bytes per element of the tensor a layout kernel converts (4 where the type is not listed).
_ELEM_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1}


def layout_kernels(graph: Graph, config: SessionConfig) -> list[tuple[str, int, tuple[str, ...]]]:
    """The layout kernels (:data:`~layerscope.measure.fusion.LAYOUT_OPS`: the NCHWc transformer's ReorderInput
    and ReorderOutput) ONNX Runtime runs for ``graph``, in its optimized graph's order: ``(kernel name, bytes of
    the source tensor it converts, the layers of the kernel it converts for)``. The tensor: its input's or
    output's source tensor, the first ``graph`` knows the shape of (bytes 0 when neither). The kernel it converts
    for: a ReorderOutput's producer, a ReorderInput's first consumer (the other side where that one covers no
    layer); no layers when neither covers any. Kernel names as :func:`kernel_groups` names kernels (an unnamed
    node: ``<op_type>_<position>``).

    Also, for a pool the model runs in plain NCHW that ONNX Runtime runs blocked when it reads a model input (as
    it does timed alone: :func:`_alone_reorders`), the layout kernels it paid alone, named ``<kernel>:alone<i>``:
    its prediction is its blocked time net of those (what it was timed as), and the model's unblocked pool is
    taken to cost what it cost alone, reorders included."""
    optimized = _runtime_graph(graph, config)
    fusion = build_fusion_map(graph, optimized)
    names = [node.name or f"{node.op_type}_{index}" for index, node in enumerate(optimized.graph.node)]
    producer: dict[str, str] = {}
    consumers: dict[str, list[str]] = {}
    for name, node in zip(names, optimized.graph.node, strict=True):
        for tensor in node.output:
            producer[tensor] = name
        for tensor in node.input:
            consumers.setdefault(tensor, []).append(name)
    out: list[tuple[str, int, tuple[str, ...]]] = []
    for name, node in zip(names, optimized.graph.node, strict=True):
        if node.op_type not in LAYOUT_OPS:
            continue
        before = [producer[i] for i in node.input[:1] if i in producer]
        after = [c for o in node.output[:1] for c in consumers.get(o, [])]
        sides = [*before, *after] if node.op_type == "ReorderOutput" else [*after, *before]
        mapped = [fusion.kernels[k] for k in sides if k in fusion.kernels]
        layers = next((m.layers for m in mapped if m.category == "layer" and m.layers), ())
        out.append((name, _tensor_bytes(graph, [*node.input[:1], *node.output[:1]]), layers))
    by_id = {n.id: n for n in graph.layers}
    for name, node in zip(names, optimized.graph.node, strict=True):
        mapping = fusion.kernels.get(name)
        if node.op_type not in _POOLS or node.domain == _NCHWC or mapping is None or mapping.category != "layer":
            continue
        pools = [by_id[i] for i in mapping.layers if i in by_id and by_id[i].op_type == node.op_type]
        if len(pools) == 1:
            out += [(f"{name}:alone{i}", nbytes, mapping.layers)
                    for i, nbytes in enumerate(_alone_reorders(graph, pools[0], config))]
    return out


#: Pools the NCHWc transformer may leave unblocked in a model (their producer runs NCHW) yet block alone; a
#: Conv's choice depends on its weights only, the same alone and in its model.
_POOLS = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
_NCHWC = "com.microsoft.nchwc"


def _alone_reorders(graph: Graph, node: Node, config: SessionConfig) -> list[int]:
    """The bytes of each layout kernel ONNX Runtime runs around ``node`` (a pool of ``graph``) as a model of its own
    reading a model input; none where it runs it unblocked, or where the model cannot be built or loaded."""
    first = graph.tensor(node.inputs[0]) if node.inputs else None
    out = graph.tensor(node.outputs[0]) if node.outputs else None
    if first is None or first.shape is None or out is None or out.shape is None or first.dtype != "float32":
        return []
    attrs = tuple(sorted((k, repr(v)) for k, v in node.attrs.items()))
    return list(_alone_layout(node.op_type, attrs, tuple(first.shape), tuple(out.shape), config))


@functools.lru_cache(maxsize=256)
def _alone_layout(op_type: str, attrs: tuple[tuple[str, str], ...], in_shape: tuple[int, ...],
                  out_shape: tuple[int, ...], config: SessionConfig) -> tuple[int, ...]:
    """:func:`_alone_reorders` for an ``op_type`` node with ``attrs`` (``repr`` of plain values) from ``in_shape``
    to ``out_shape`` (float32)."""
    import ast

    values = {k: ast.literal_eval(v) for k, v in attrs}
    node = onnx.helper.make_node(op_type, ["x"], ["y"], **values)
    model = onnx.helper.make_model(onnx.helper.make_graph(
        [node], "alone", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(in_shape))],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list(out_shape))]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    nbytes = {"x": int(np.prod(in_shape, dtype=np.int64)) * 4, "y": int(np.prod(out_shape, dtype=np.int64)) * 4}
    with scratch("kernels") as tmp:
        path = Path(tmp) / "alone.onnx"
        onnx.save(model, path)
        try:
            runs = optimized_graph(path, config)
        except LayerscopeError:  # ONNX Runtime refused it (an attribute this opset does not hold): nothing known
            return ()
    return tuple(nbytes[t] for n in runs.node if n.op_type in LAYOUT_OPS for t in (*n.input[:1], *n.output[:1])
                 if t in nbytes)


def _tensor_bytes(graph: Graph, names: list[str]) -> int:
    """The bytes of the first of ``names`` whose shape ``graph`` knows; 0 when none."""
    for name in names:
        tensor = graph.tensor(name) if name else None
        if tensor is not None and tensor.shape is not None:
            return int(np.prod(tensor.shape, dtype=np.int64)) * _ELEM_BYTES.get(tensor.dtype, 4)
    return 0


@dataclass(frozen=True)
class OrtKernels(OwnKernels):
    """ONNX Runtime's kernels: its optimized graph's nodes, each timed by an
    :class:`~layerscope.runtimes.onnxruntime.runner.OrtRunner` (2 untimed runs before the first visit)."""

    name: str = "onnxruntime"

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> Runner:
        return OrtRunner(config, make_inputs(graph), runs_per_visit=timing.runs_per_visit,
                         visit_warmup=timing.visit_warmup, warmup=2)

    def groups(self, graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
        return kernel_groups(graph, config)

    def reorders(self, graph: Graph, config: SessionConfig) -> list[tuple[str, int, tuple[str, ...]]]:
        return layout_kernels(graph, config)
