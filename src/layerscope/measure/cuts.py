"""Cut planner for differential profiling: prefix submodels of a model, and where to cut it.

A *cut* ``k`` (0 <= k <= N, N = ``len(graph.layers)``) keeps the first ``k`` layers of the
:class:`~layerscope.model.types.Graph` in its topological order. A prefix of a topological order is closed
under producers, so every prefix is a runnable model. Timing prefix ``b`` and prefix ``a < b`` and taking the
difference gives the time of the *segment* ``graph.layers[a:b]`` on a device that only times whole models.

Contract of :meth:`CutPlanner.prefix_model`:

- **inputs**: every runtime input of the model, at the Graph's static shapes (``--shape`` applied), in the
  model's order (unused ones included, so the same feeds run every prefix); initializers the prefix reads
  and that the model lists as inputs (IR < 4 models) stay listed;
- **nodes**: the prefix's layers, in the Graph's order, preceded by exactly the folded constant nodes
  (``Graph.folded``) they need; initializers: exactly those the kept nodes read (subgraphs of ``If`` /
  ``Loop`` / ``Scan`` included);
- **outputs**: every tensor produced in the prefix that a later layer reads (directly or from inside a
  subgraph) or that is a model output: the tensors *crossing* the cut, in production order, typed and
  shaped; nothing is left dangling. Cut ``N`` is the whole model with its own outputs, in its order;
- cut ``0`` is the *baseline*: the runtime inputs, each cut to its first element (``Slice``), which times
  the runtime's fixed cost per call (feeding inputs, a run, returning outputs) with no data moved;
- opsets, IR version, local functions and the producer are the model's; the result passes
  ``onnx.checker.check_model`` when the source model does;
- random ops (``RandomNormalLike`` ...) without a ``seed`` get one, a function of the node
  (:func:`~layerscope.model.random_inputs.seeded_node`): a node draws the same values in every prefix, suffix
  and feeding prefix, so the tensors a suffix is fed match the shapes its own layers draw (a TTS model's
  durations). The source model is not changed.

:meth:`CutPlanner.suffix_model` is the other side of cut ``k``: the layers from ``k`` on (with the folded
constants and initializers they need), fed first the model inputs they read (in the model's order), then the
tensors crossing the cut that they read (prefix ``k``'s outputs, in production order); outputs: the model
outputs those layers produce, in the model's order. Suffix ``0`` is the whole model, suffix ``N`` the *suffix
baseline* (the model's outputs fed as inputs, each cut to its first element).

Where to cut (:meth:`CutPlanner.coarse_cuts`, :meth:`CutPlanner.split_cut`): boundaries are placed so
that segments hold roughly equal *estimated* time (``weights_us``, one per layer; equal weights when all
are zero). Near each target position the planner prefers, in this order, a cut that does not split a group
runtimes fuse into one kernel (a Conv/Gemm/MatMul/BatchNorm and the activations, bias adds or norms that
follow it, each reading the previous one's output, e.g. Conv -> Add -> Relu: timing them apart measures them
unfused), a cut with few crossing tensors and bytes (every crossing tensor is an extra output the device must
write back and convert out of its own layout: on OpenVINO, a cut just before one of SqueezeNet's Fire-module
Concats, two tensors, cost a median 0.2-0.4 ms more than the cut just after it, one tensor of the same bytes, in
a 10 ms model), and a cut close to the target.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from layerscope.errors import ModelError
from layerscope.model.control_flow import rolled_up, top_level
from layerscope.model.load import onnx_elem_type
from layerscope.model.random_inputs import seeded_node
from layerscope.model.types import Graph, TensorInfo

__all__ = [
    "BOUNDARY_SHARE", "FUSION_HEADS", "FUSION_TAILS", "TENSOR_WEIGHT", "Cut", "CutPlanner", "Segment", "segments_of",
]

#: Ops that runtimes and NPU compilers fuse the following op into (its output is the fused op's input).
FUSION_HEADS = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "Gemm", "MatMul",
                          "MatMulInteger", "QLinearMatMul", "BatchNormalization"})
#: Ops fused into the head that produces their input: activations, bias/scale adds, normalisation.
FUSION_TAILS = frozenset({"Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu",
                          "Selu", "Softplus", "Gelu", "Mish", "Erf", "PRelu", "BatchNormalization", "Add", "Sub",
                          "Mul", "Div", "Sum", "QuantizeLinear", "DequantizeLinear"})

#: What each crossing tensor past the first adds to a cut's badness, in units of the window's largest crossing bytes.
TENSOR_WEIGHT = 0.5
#: Refinement refuses a split whose extra outputs would cost more than this share of a half's estimated time.
BOUNDARY_SHARE = 0.1
_BASELINE_SUFFIX = "__layerscope_baseline"
#: The ONNX opset of a baseline model's Slice nodes when the model imports none of the default domain (a model of
#: ``ai.onnx.ml`` ops only).
BASELINE_OPSET = 13
@dataclass(frozen=True)
class Cut:
    """Cut ``layers`` (the prefix length): the tensors crossing it and how clean a boundary it is."""

    layers: int
    outputs: tuple[str, ...]
    crossing_bytes: int
    breaks_fusion: bool


@dataclass(frozen=True)
class Segment:
    """``graph.layers[start:end]``: what prefix ``end`` adds to prefix ``start``; ``est_us`` its estimate."""

    index: int
    start: int
    end: int
    layer_ids: tuple[str, ...]
    est_us: float


@dataclass(frozen=True)
class CutPlanner:
    """Prefix submodels of one model and the choice of cut positions. Build with :meth:`for_model`.

    ``cum_us[k]`` is the estimated time of the first ``k`` layers; ``crossing[k]`` the tensors crossing cut
    ``k`` (``crossing[N]`` = the model's outputs); ``breaks[k]`` whether cut ``k`` splits a fused group;
    ``bandwidth_bytes_per_s`` (0: unknown) prices a cut's extra outputs (:meth:`boundary_us`).
    """

    graph: Graph
    model: onnx.ModelProto
    cum_us: tuple[float, ...]
    crossing: tuple[tuple[str, ...], ...]
    crossing_bytes: tuple[int, ...]
    breaks: tuple[bool, ...]
    layer_nodes: tuple[onnx.NodeProto, ...]
    bandwidth_bytes_per_s: float = 0.0
    #: Cuts never chosen: inside a group the runtime compiled into one node (:meth:`with_fused_groups`).
    locked: frozenset[int] = frozenset()

    @classmethod
    def for_model(cls, graph: Graph, weights_us: Sequence[float] | None = None,
                  model: onnx.ModelProto | None = None, *, bandwidth_bytes_per_s: float = 0.0) -> CutPlanner:
        """The planner for ``graph``; ``model`` defaults to ``graph.path`` loaded with its weights.

        Subgraph layers (control flow) cannot be cut out: the planner's graph is the top-level one
        (:func:`~layerscope.model.control_flow.top_level`), each control-flow layer weighing its subgraphs too.
        ``weights_us`` (estimated time per layer, in ``graph.layers`` order; negative values count as 0)
        places the boundaries; ``None`` or all zeros: every layer weighs the same. ``bandwidth_bytes_per_s``
        (the target's DDR bandwidth) lets refinement refuse splits whose extra outputs would cost more than
        :data:`BOUNDARY_SHARE` of a half's estimated time.
        """
        if model is None:
            model = _load_full(graph.path)
        if weights_us is not None and len(weights_us) != len(graph.layers):
            raise ValueError(f"{len(weights_us)} weights for {len(graph.layers)} layers")
        if any(n.parent for n in graph.layers):  # cuts are top-level: a control-flow layer carries its subgraphs
            top = top_level(graph)
            if weights_us is not None:
                weights_us = rolled_up(graph, dict(zip((n.id for n in graph.layers), weights_us, strict=True)), top)
            graph = top
        weights = np.maximum(np.asarray(weights_us if weights_us is not None else [], dtype=np.float64), 0.0)
        if weights.size == 0 or not weights.sum() > 0:
            weights = np.ones(len(graph.layers))
        cum = np.concatenate([[0.0], np.cumsum(weights)])
        nodes = _layer_protos(graph, model)
        crossing, breaks = _crossings(graph, nodes)
        sizes = [sum(_nbytes(graph.tensor(t)) for t in names) for names in crossing]
        return cls(graph=graph, model=model, cum_us=tuple(float(c) for c in cum), crossing=crossing,
                   crossing_bytes=tuple(sizes), breaks=breaks, layer_nodes=nodes,
                   bandwidth_bytes_per_s=max(0.0, bandwidth_bytes_per_s))

    @property
    def layer_count(self) -> int:
        return len(self.graph.layers)

    def with_fused_groups(self, inside: Iterable[int]) -> CutPlanner:
        """This planner, never cutting at the cuts ``inside`` (inner cuts of groups the runtime fused into one
        node, from its execution graph): no plan chooses them (layer granularity skips them: a fused group is
        one segment). The runtime's own fusion replaces the op-type heuristic: the fusion-breaking cuts
        (:attr:`breaks`) are exactly the locked ones. Cuts 0 and N cannot be locked."""
        locked = frozenset(k for k in inside if 0 < k < self.layer_count)
        breaks = tuple(k in locked for k in range(self.layer_count + 1))
        return dataclasses.replace(self, locked=locked, breaks=breaks)

    def boundary_us(self, layers: int) -> float:
        """Estimated cost of cut ``layers``'s extra outputs: its crossing bytes written out and read back once
        at ``bandwidth_bytes_per_s`` (0 when the bandwidth is unknown, and for the whole model's own outputs)."""
        if self.bandwidth_bytes_per_s <= 0 or layers == self.layer_count:
            return 0.0
        return 2 * self.crossing_bytes[layers] / self.bandwidth_bytes_per_s * 1e6

    def cut(self, layers: int) -> Cut:
        """Cut ``layers`` (0..N) as data."""
        self._check(layers)
        return Cut(layers=layers, outputs=self.crossing[layers], crossing_bytes=self.crossing_bytes[layers],
                   breaks_fusion=self.breaks[layers])

    def layer_cuts(self, baseline: bool = True) -> tuple[int, ...]:
        """Every cut: one segment per layer (cut 0 first when ``baseline``)."""
        return tuple(k for k in range(0 if baseline else 1, self.layer_count + 1) if k not in self.locked)

    def coarse_cuts(self, segments: int, baseline: bool = True) -> tuple[int, ...]:
        """Increasing cuts ending at N that split the model into at most ``segments`` segments of roughly
        equal estimated time (each boundary within half a segment's share of its equal-time position, chosen
        as :meth:`_best_cut` prefers); fewer when the model has fewer layers or when a layer holds the time of
        several segments (no segment gets less than a quarter of its share), and when no cut near a boundary's
        position is cheap (:meth:`boundary_us` at most :data:`BOUNDARY_SHARE` of a segment's share: on OpenVINO
        SqueezeNet's 1.5 MB cuts cost 0.3-0.5 ms of 0.8 ms segments, and the correction leaves them 10-20% off);
        cut 0 first when ``baseline``."""
        if segments < 1:
            raise ValueError("segments must be >= 1")
        n = self.layer_count
        total = self.cum_us[-1]
        count = min(segments, n)
        chosen: list[int] = []
        share = total / count

        def cheap(k: int) -> bool:  # the cut's extra outputs cost at most BOUNDARY_SHARE of a segment
            return self.boundary_us(k) <= BOUNDARY_SHARE * share

        for j in range(1, count):
            target = total * j / count
            low = chosen[-1] + 1 if chosen else 1
            # the window reaches half a segment either side: room to find a boundary with few crossing bytes
            best = self._best_cut(target, low, n - 1, 1.5 * share, acceptable=cheap)
            # a layer that spans targets gives one cut, not near-empty segments beside it
            floor = share / 4
            if best is not None and self.cum_us[best] - self.cum_us[low - 1] >= floor \
                    and total - self.cum_us[best] >= floor:
                chosen.append(best)
        return (*((0,) if baseline else ()), *chosen, n)

    def split_cut(self, start: int, end: int, measured_us: float | None = None) -> int | None:
        """The best cut strictly inside segment ``(start, end)`` in the middle two thirds of its estimated
        time (preferring few crossing bytes over closeness to the middle), else the clean cut nearest the
        middle. ``None`` for a single layer; when every inner cut splits a fused group (the segment runs as
        one kernel: splitting it would time the group unfused); or when the cut's :meth:`boundary_us` exceeds
        :data:`BOUNDARY_SHARE` of either half's time (the split would mostly time its own outputs). A half's
        time is its share of the estimate, scaled to ``measured_us`` (the segment's measured time) when given."""
        if end - start < 2:
            return None
        span = self.cum_us[end] - self.cum_us[start]
        if span <= 0:  # nothing estimated inside: split by layer count
            position: Callable[[int], float] = float
            target, width = (start + end) / 2, 3.0
        else:
            position, target, width = self.cum_us.__getitem__, self.cum_us[start] + span / 2, span
        best = self._best_cut(target, start + 1, end - 1, width, position)
        if best is not None and self.breaks[best]:
            clean = [k for k in range(start + 1, end) if not self.breaks[k]]
            best = min(clean, key=lambda k: (abs(position(k) - target), k)) if clean else None
        if best is not None and span > 0:
            scale = measured_us / span if measured_us is not None and measured_us > 0 else 1.0
            smaller = scale * min(self.cum_us[best] - self.cum_us[start], self.cum_us[end] - self.cum_us[best])
            if self.boundary_us(best) > BOUNDARY_SHARE * smaller:
                return None
        return best

    def _best_cut(self, target: float, low: int, high: int, width: float,
                  position: Callable[[int], float] | None = None, *,
                  acceptable: Callable[[int], bool] | None = None) -> int | None:
        """The best cut in ``[low, high]`` whose ``position`` (default: estimated time before it) is within
        ``width / 3`` of ``target``, or ``width / 2`` when that finds only fusion-breaking cuts (the nearest
        cut when none is). With ``acceptable``, only cuts it accepts: ``None`` when the window has none."""
        if low > high:
            return None
        position = position or self.cum_us.__getitem__
        window = max(width / 3, 1e-12)
        allowed = [k for k in range(low, high + 1) if k not in self.locked]
        candidates = [k for k in allowed if abs(position(k) - target) <= window]
        if acceptable is not None:
            allowed = [k for k in allowed if acceptable(k) and abs(position(k) - target) <= 1.5 * window]
            candidates = [k for k in candidates if acceptable(k)]
        if not allowed:
            return None
        if all(self.breaks[k] for k in candidates):
            wider = [k for k in allowed if abs(position(k) - target) <= 1.5 * window]
            candidates = [k for k in wider if not self.breaks[k]] or candidates
        if not candidates:  # one layer spans the window: the nearest clean cut, else the nearest cut
            candidates = [min(allowed, key=lambda k: (self.breaks[k], abs(position(k) - target), k))]
        biggest = max(self.crossing_bytes[k] for k in candidates) or 1

        def badness(k: int) -> tuple[bool, float, int]:
            # crossing bytes weigh 4x the distance: each one is written back by the prefix, not by the model; each
            # crossing tensor past the first weighs half the window's most bytes (one more output to convert and
            # write back: a cut between a Concat and its branches costs more than the one after it)
            extra = TENSOR_WEIGHT * max(0, len(self.crossing[k]) - 1)
            distance = 0.25 * abs(position(k) - target) / window
            return (self.breaks[k], extra + self.crossing_bytes[k] / biggest + distance, k)

        return min(candidates, key=badness)

    def segments(self, cuts: Sequence[int]) -> tuple[Segment, ...]:
        """The segments between consecutive ``cuts`` (increasing; the first segment starts at layer 0 even
        when the first cut is not 0: without a baseline it also holds the runtime's fixed cost)."""
        return segments_of(self.graph, self.cum_us, cuts)

    def prefix_model(self, layers: int) -> onnx.ModelProto:
        """The model of cut ``layers`` (see the module docstring); 0 is the baseline model."""
        self._check(layers)
        if layers == 0:
            return self._baseline_model()
        kept, initializers, inputs, _ = self._part(self.layer_nodes[:layers], every_input=True)
        source = self.model.graph
        if layers == self.layer_count:
            outputs = list(source.output)
        else:
            outputs = [self._output_info(name) for name in self.crossing[layers]]
        produced = {o for node in kept for o in node.output}
        value_info = [vi for vi in source.value_info if vi.name in produced and vi.name not in self.crossing[layers]]
        graph = helper.make_graph(kept, f"{source.name or 'model'}_prefix{layers}", inputs, outputs,
                                  initializer=initializers, value_info=value_info)
        return self._wrap(graph)

    def suffix_model(self, layers: int) -> onnx.ModelProto:
        """The model of the layers after cut ``layers`` (see the module docstring); 0 is the whole model, N the
        suffix baseline."""
        self._check(layers)
        if layers == 0:
            return self.prefix_model(self.layer_count)
        if layers == self.layer_count:
            return self._suffix_baseline_model()
        kept, initializers, inputs, read = self._part(self.layer_nodes[layers:], every_input=False)
        source = self.model.graph
        inputs += [self._output_info(name) for name in self.crossing[layers] if name in read]
        produced = {o for node in kept for o in node.output}
        outputs = [vi for vi in source.output if vi.name in produced]
        if not outputs:
            raise ModelError(f"the layers after cut {layers} produce none of the model's outputs")
        value_info = [vi for vi in source.value_info if vi.name in produced]
        graph = helper.make_graph(kept, f"{source.name or 'model'}_suffix{layers}", inputs, outputs,
                                  initializer=initializers, value_info=value_info)
        return self._wrap(graph)

    def segment_model(self, start: int, end: int) -> onnx.ModelProto:
        """The model of layers ``start .. end - 1`` alone (``0 <= start < end <= N``), with the folded constants and
        initializers they need: fed first the model inputs they read (in the model's order), then the tensors
        crossing cut ``start`` that they read (production order); outputs: the tensors crossing cut ``end`` that
        they produce, then the model outputs they produce that the crossings lack (a model output keeps its declared
        type: a ZipMap's sequence of maps). Running the segments
        of consecutive cuts one after another, each fed what the earlier ones produced, runs the whole model."""
        self._check(start)
        self._check(end)
        if start >= end:
            raise ValueError(f"segment {start}..{end} holds no layer")
        kept, initializers, inputs, read = self._part(self.layer_nodes[start:end], every_input=False)
        source = self.model.graph
        inputs += [self._output_info(name) for name in self.crossing[start] if name in read]
        produced = {o for node in kept for o in node.output}
        declared = {vi.name: vi for vi in source.output}
        names = [name for name in self.crossing[end] if name in produced]  # a map or sequence output has no shape:
        names += [name for name in declared if name in produced and name not in names]  # not in the crossings
        outputs = [declared[name] if name in declared else self._output_info(name) for name in names]
        if not outputs:
            raise ModelError(f"layers {start}..{end - 1} produce nothing that later layers or the outputs read")
        value_info = [vi for vi in source.value_info if vi.name in produced and vi.name not in self.crossing[end]]
        graph = helper.make_graph(kept, f"{source.name or 'model'}_segment{start}_{end}", inputs, outputs,
                                  initializer=initializers, value_info=value_info)
        return self._wrap(graph)

    def _part(self, nodes: Sequence[onnx.NodeProto], *, every_input: bool) -> tuple[
            list[onnx.NodeProto], list[onnx.TensorProto], list[onnx.ValueInfoProto], set[str]]:
        """``nodes`` preceded by the folded constants they need; the initializers they read; the model's inputs
        (its runtime inputs, all of them when ``every_input`` else those read, and the initializers read that
        it lists as inputs), in its order; and every name they read."""
        folded, values = _folded_as_values(self.graph, _needed_folded(self.model, self.graph, nodes))
        kept = [seeded_node(node) for node in (*folded, *nodes)]
        read = {name for node in kept for name in _reads(node)}
        source = self.model.graph
        initializers = [t for t in source.initializer if t.name in read] + values
        init_names = {t.name for t in initializers}
        runtime = {t.name: t for t in self.graph.inputs}
        # The model's inputs get the shapes this run gives them, so a part is as static as the whole model ran;
        # not with control flow: ONNX Runtime type-checks every branch against the declared shapes, and a branch
        # these inputs never take may not check with them (silero-vad's 8 kHz branch with a 16 kHz frame).
        declared = _has_subgraphs(source)
        inputs = [_value_info(runtime[vi.name]) if vi.name in runtime and not declared else vi for vi in source.input
                  if (vi.name in runtime and (every_input or vi.name in read)) or vi.name in init_names]
        return kept, initializers, inputs, read

    def _suffix_baseline_model(self) -> onnx.ModelProto:
        """The model's outputs fed as inputs, each cut to its first element: the fixed cost per call of a suffix."""
        return self._first_elements(self.graph.outputs, "layerscope_suffix_baseline")

    def _baseline_model(self) -> onnx.ModelProto:
        return self._first_elements(self.graph.inputs, "layerscope_baseline")

    def _first_elements(self, tensors: Sequence[TensorInfo], name: str) -> onnx.ModelProto:
        """A model fed ``tensors`` that returns the first element of each (a ``Slice`` to 1 along every axis;
        ``Identity`` for a scalar): a call like any other that moves no data, whatever the tensors' size (an
        ``Identity`` would copy them, cold after the whole model has run: 300 µs for YOLOv5s-320's outputs)."""
        opset = next((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), None)
        extra = [] if opset is not None else [helper.make_opsetid("", BASELINE_OPSET)]  # e.g. an ai.onnx.ml model
        opset = opset if opset is not None else BASELINE_OPSET
        nodes, outputs, constants = [], [], []
        for i, tensor in enumerate(tensors):
            out, rank = tensor.name + _BASELINE_SUFFIX, len(tensor.shape)
            node_name = f"{name}_{i}"
            if rank == 0:
                nodes.append(helper.make_node("Identity", [tensor.name], [out], name=node_name))
            elif opset < 10:  # Slice took attributes before opset 10
                nodes.append(helper.make_node("Slice", [tensor.name], [out], name=node_name, starts=[0] * rank,
                                              ends=[1] * rank, axes=list(range(rank))))
            else:
                bounds = [f"{node_name}_{part}" for part in ("starts", "ends", "axes")]
                for bound, values in zip(bounds, ([0] * rank, [1] * rank, list(range(rank))), strict=True):
                    constants.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), bound))
                nodes.append(helper.make_node("Slice", [tensor.name, *bounds], [out], name=node_name))
            outputs.append(_value_info(TensorInfo(out, tuple(min(1, d) for d in tensor.shape), tensor.dtype)))
        return self._wrap(helper.make_graph(nodes, name, [_value_info(t) for t in tensors], outputs,
                                            initializer=constants), extra)

    def _wrap(self, graph: onnx.GraphProto, extra_opsets: Sequence[onnx.OperatorSetIdProto] = ()) -> onnx.ModelProto:
        model = helper.make_model(graph, opset_imports=[*self.model.opset_import, *extra_opsets],
                                  functions=list(self.model.functions))
        model.ir_version = self.model.ir_version
        model.producer_name = "layerscope bisect"
        model.producer_version = self.model.producer_version
        return model

    def _output_info(self, name: str) -> onnx.ValueInfoProto:
        info = self.graph.tensor(name)
        if info is None:  # not expected: every tensor a later layer reads has a shape
            raise ModelError(f"cannot cut the model at tensor {name!r}: its shape is unknown")
        return _value_info(info)

    def _check(self, layers: int) -> None:
        if not 0 <= layers <= self.layer_count:
            raise ValueError(f"cut {layers} is outside 0..{self.layer_count}")


def segments_of(graph: Graph, cum_us: Sequence[float], cuts: Sequence[int]) -> tuple[Segment, ...]:
    """Segments between consecutive ``cuts`` (see :meth:`CutPlanner.segments`)."""
    if list(cuts) != sorted(set(cuts)) or not cuts:
        raise ValueError(f"cuts must be increasing and unique: {list(cuts)}")
    bounds = [0, *cuts] if cuts[0] != 0 else list(cuts)
    return tuple(Segment(index=i, start=a, end=b, layer_ids=tuple(n.id for n in graph.layers[a:b]),
                         est_us=cum_us[b] - cum_us[a])
                 for i, (a, b) in enumerate(itertools.pairwise(bounds)))


def _load_full(path: str) -> onnx.ModelProto:
    """The model with its weights (external data read from the model's folder)."""
    try:
        return onnx.load_model(path, load_external_data=True)
    except Exception as exc:  # onnx raises several types for unreadable files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{Path(path).name}: cannot read the model with its weights: {first}") from None


def _first_output(node: onnx.NodeProto) -> str:
    return next((o for o in node.output if o), "")


def _layer_protos(graph: Graph, model: onnx.ModelProto) -> tuple[onnx.NodeProto, ...]:
    """The NodeProto of every layer, matched by its first output (unique in a valid model)."""
    by_output = {_first_output(n): n for n in model.graph.node if _first_output(n)}
    protos = []
    for layer in graph.layers:
        key = next((o for o in layer.outputs if o), "")
        if key not in by_output:
            raise ModelError(f"layer {layer.id!r} is not in {graph.path}: was the file changed since loading?")
        protos.append(by_output[key])
    return tuple(protos)


def _reads(node: onnx.NodeProto) -> list[str]:
    """Every tensor ``node`` reads: its inputs and the outer-scope names its subgraphs use."""
    names = [i for i in node.input if i]
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for sub in graphs:
            names.extend(sorted(_outer_names(sub)))
    return names


def _outer_names(graph: onnx.GraphProto) -> set[str]:
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    local |= {o for n in graph.node for o in n.output}
    return {name for n in graph.node for name in _reads(n) if name not in local}


def _needed_folded(model: onnx.ModelProto, graph: Graph, nodes: Iterable[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """The folded constant nodes ``nodes`` need, transitively, in the model's order."""
    folded_outputs = {o for n in graph.folded for o in n.outputs if o}
    producers = {o: n for n in model.graph.node for o in n.output if o in folded_outputs}
    needed: dict[int, onnx.NodeProto] = {}
    stack = [name for node in nodes for name in _reads(node)]
    while stack:
        name = stack.pop()
        producer = producers.get(name)
        if producer is None or id(producer) in needed:
            continue
        needed[id(producer)] = producer
        stack.extend(_reads(producer))
    return [n for n in model.graph.node if id(n) in needed]


def _folded_as_values(graph: Graph, folded: Sequence[onnx.NodeProto]) -> tuple[
        list[onnx.NodeProto], list[onnx.TensorProto]]:
    """``folded`` split into the nodes a part keeps and the initializers that stand for the others: a folded node
    that reads a runtime tensor (``Shape`` of an activation whose shape is static) would read it before the part
    computes it, or from the other side of the cut; its folded value is given instead."""
    constant = set(graph.constants) | {o for n in graph.folded for o in n.outputs if o}
    nodes: list[onnx.NodeProto] = []
    values: list[onnx.TensorProto] = []
    for node in folded:
        outputs = [o for o in node.output if o]
        known = [graph.value(o) for o in outputs]
        if all(name in constant for name in _reads(node)) or any(v is None for v in known):
            nodes.append(node)
        else:
            values.extend(numpy_helper.from_array(np.asarray(v), o)
                          for o, v in zip(outputs, known, strict=True) if v is not None)
    return nodes, values


def _crossings(graph: Graph, nodes: Sequence[onnx.NodeProto]) -> tuple[tuple[tuple[str, ...], ...], tuple[bool, ...]]:
    """For every cut 0..N: the tensors crossing it (production order) and whether it splits a fusable pair."""
    n = len(nodes)
    producer_at = {o: i for i, node in enumerate(nodes) for o in node.output if o}
    readers: dict[str, int] = {}
    for node in nodes:
        for name in set(_reads(node)):
            readers[name] = readers.get(name, 0) + 1
    last_reader: dict[str, int] = {}
    fused = [False] * n  # a tail fused into the head before it (directly or through single-reader tails)
    fusable_until: dict[int, int] = {}  # producer position -> last position whose cut splits a fused group
    for j, node in enumerate(nodes):
        for name in _reads(node):
            i = producer_at.get(name)
            if i is None:
                continue
            last_reader[name] = max(last_reader.get(name, 0), j)
            head = nodes[i].op_type in FUSION_HEADS or (fused[i] and readers[name] == 1)
            if head and node.op_type in FUSION_TAILS:
                fused[j] = True
                fusable_until[i] = max(fusable_until.get(i, 0), j)
    for out in graph.outputs:
        if out.name in producer_at:
            last_reader[out.name] = n
    # a tensor produced at i and last read at q crosses cuts i+1 .. q: sweep the cuts once
    ending: dict[int, list[str]] = {}
    for name, q in last_reader.items():
        ending.setdefault(q + 1, []).append(name)
    produced_by = [[o for o in node.output if o in last_reader] for node in nodes]
    live: dict[str, None] = {}  # insertion order = production order
    crossing: list[tuple[str, ...]] = [()]
    for k in range(1, n + 1):
        live.update(dict.fromkeys(produced_by[k - 1]))
        for name in ending.get(k, ()):
            live.pop(name, None)
        crossing.append(tuple(live))
    crossing[n] = tuple(o.name for o in graph.outputs)
    breaks = [False] * (n + 1)
    for i, q in fusable_until.items():
        for k in range(i + 1, q + 1):
            breaks[k] = True
    return tuple(crossing), tuple(breaks)


def _nbytes(info: TensorInfo | None) -> int:
    return info.nbytes if info is not None else 0


def _has_subgraphs(graph: onnx.GraphProto) -> bool:
    """Whether a node of ``graph`` holds a subgraph (If, Loop, Scan)."""
    kinds = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return any(attr.type in kinds for node in graph.node for attr in node.attribute)


def _value_info(info: TensorInfo) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(info.name, onnx_elem_type(info.dtype), list(info.shape))

