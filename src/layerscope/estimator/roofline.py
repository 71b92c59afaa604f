"""Roofline estimate of every layer on a hardware profile.

The model, per layer (documented in the README, "What the estimate assumes"):
- compute: the layer's operations on the unit its kind maps to, at the deployed dtype's peak times the
  unit's efficiency times the profile's ``op_efficiency`` multiplier for the layer's op type (1 when the
  profile lists none; CPU-fallback layers never take it). Tensor layers count 2 ops per MAC (their
  ``flops``); data-movement and auxiliary layers count one op per output element on top of their arithmetic.
- DDR traffic at the deployed dtype (float tensors take the deployed dtype's size, integer tensors keep theirs); a Slice
  loads only the part of its input it keeps (:func:`layerscope.costs.movement.slice_read_bytes`, the cost's own count),
  as its DMA copies only those rows and channels. An activation stays on chip, costing no store and no load, when the
  profile has SRAM, the tensor fits half of it, it is not a model output, and every consumer is the next non-zero-copy
  layer (the accelerator Slices that take one input apart one after another count as one layer, a Split:
  :func:`_positions`) and runs on the accelerator (a profile with ``plan_sram``: it fits half the SRAM beside the
  activations kept on chip over its lifetime, or, with ``stream_bytes_per_s``, it does not fit but every reader is among
  the next :data:`STREAM_WINDOW` layers: streamed in tiles, no DDR traffic, its bytes written and read at that rate in
  the layers' load time; with ``fuse_elementwise``: every reader is an element-wise accelerator layer within
  :data:`FUSION_WINDOW` layers, whatever its size). Weights are loaded by every layer that reads them; when they exceed
  the SRAM's weight share (``weight_sram_bytes``, else the other half) they are streamed in ``weight_passes`` passes,
  each reloading the layer's input activations (from DDR, but those held whole on chip, which it reads there). A weight
  several accelerator layers read (one tensor of the model by :func:`layerscope.costs.weights.weight_identities`: tied
  embeddings, an unrolled recurrence's matrix) is loaded from DDR once per inference when it stays on chip from its
  first reader to its last, else by every reader: :func:`plan_shared_weights` says which.
- with ``fuse_elementwise``, the activations the NPU compiler runs inside another layer are no layers of their own
  (:func:`absorbed_activations`: no time, no per-layer overhead): an activation of a convolution's output that
  nothing else reads (its output stage runs it and writes the activation's output), and the gate of a gated
  activation ``x * gate(x)`` elsewhere (its ``Mul`` runs it as one table lookup).
- latency = max(compute, load + store) + the unit's per-layer overhead (DMA overlaps compute); the model's is the
  layers' sum plus the profile's per-inference ``task_overhead_us`` and, on a profile with ``output_bytes_per_s``,
  the runtime's hand-over of the model's outputs as float32 (:func:`output_conversion_us`; none with
  ``quantized_outputs``: the model's output Dequantize nodes removed, its outputs handed over as the accelerator
  wrote them). On an NPU profile with
  ``activation_matmul_ns_per_element``, a matrix product of two activations (:func:`activation_matmul_elements`)
  adds that many ns per output element to its overhead (:func:`activation_matmul_us`).
  On an NPU profile with ``layout_transpose_efficiency``, a layout Transpose
  (:func:`layerscope.estimator.layout.layout_transposes`) takes that multiplier in place of its op type's, and a
  Transpose its compiler does not run (:func:`layerscope.estimator.layout.dropped_transposes`) costs nothing.
  On a profile with ``feature_map_alignment``, a data-movement or auxiliary layer's one op per output element and
  the activation-matrix-product time count the output's elements as the accelerator pads them
  (:meth:`layerscope.targets.profile.Profile.laid_out_elements`); DDR traffic stays the tensor's bytes.
- a layer the profile's op-support rules send to the CPU runs in fp32 on the profile's CPU unit, all its
  traffic through DDR at the CPU's bandwidth, plus the hand-off overhead.
- zero-copy layers (reshape and friends) are views: no time (on a CPU profile: one kernel dispatch, :func:`_cpu_view`).
- a CPU profile (``kind = "cpu"``) has no scratchpad: an activation is written and read by its layers unless its
  runtime hands it inside one fused kernel (:func:`_cpu_epilogues`: a convolution's or matrix product's element-wise
  epilogue; :func:`cpu_fused_chains`: GELU and LayerNorm chains, a scalar scale of a matrix product), and those
  activations its caches hold (:func:`cpu_cached_bytes`) move at its ``cache_bytes_per_s``, the rest at the DRAM
  bandwidth.
- chained loads (:attr:`LayerCost.chained_loads`: a tree ensemble's node visits, each needing the node read before
  it) are latency-bound, not rate-bound: their compute time is at least :func:`chained_load_us`, one load latency per
  load, a cache hit's or a DRAM access's by the share of the arrays they range over that the cache holds.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from itertools import pairwise

import numpy as np

from layerscope.costs import classify_costs, constant_elements_read
from layerscope.costs.movement import slice_read_bytes
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.costs.weights import shared_weights, weight_identities
from layerscope.estimator.layout import dropped_transposes, layout_transposes, output_transposes
from layerscope.estimator.types import Bound, Estimate, LayerEstimate, SharedWeight, SharedWeightPlan
from layerscope.model.types import DTYPE_BYTES, Graph, Node, TensorInfo
from layerscope.targets import Profile
from layerscope.targets.profile import ComputeUnit
from layerscope.targets.rules import fallback_reasons

_FLOAT_DTYPES = frozenset({"float64", "float32", "float16", "bfloat16", "float8"})

#: ns per chained load that hits the cache: a tree-node visit of ONNX Runtime's TreeEnsemble kernel with its node
#: arrays in cache (an L2 hit, ~4 ns, + the compare's mispredicted branch, ~15 cycles, + the leaf's score add).
#: Measured on an AMD EPYC VM shared with other jobs (ONNX Runtime 1.32, one thread; benchmarks/tree_walk.py): 100
#: full trees of depth 6 (0.4 MB of node arrays) 10-16 ns per visit (fastest to median call, the call included),
#: 300 of depth 8 (4.4 MB) 9-31 ns.
CACHED_LOAD_NS = 15.0
#: ns per chained load that misses the cache and waits for DRAM. Measured on the same host: 300 full trees of depth
#: 12 (71 MB of node arrays) 26-52 ns per visit; a LightGBM classifier of 9,988 trees (4.85 M nodes, 141 MB; the
#: realworld corpus' luscinia-lgbm) 5.1-12.5 ms over three `layerscope profile` runs for its 110 k worst-case visits
#: (46-113 ns each); a server's DRAM load-to-use latency is 80-110 ns, less the visits near the roots that stay cached.
DRAM_LOAD_NS = 70.0
#: The cache a CPU-fallback layer's chained loads may hit (assumption: the L2/L3 of an embedded Cortex-A cluster,
#: 1 MiB); the profile's ``sram_bytes`` is the accelerator's own memory.
CPU_FALLBACK_CACHE_BYTES = 1 << 20
_DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int8": "int8", "int16": "int16",
                  "fp8": "float8", "int4": "int4", "tf32": "float32"}
_FALLBACK_DTYPE = "fp32"


def is_float(info: TensorInfo) -> bool:
    """Whether ``info`` is a float tensor, i.e. one stored at the deployed dtype rather than its own."""
    return info.dtype in _FLOAT_DTYPES


def deployed_bytes(info: TensorInfo, dtype: str, elements: int | None = None) -> int:
    """Bytes of ``info`` (or of ``elements`` of it) when float tensors are stored as ``dtype`` (``"int8"``...)."""
    return (info.elements if elements is None else elements) * element_bytes(info, float_element_bytes(dtype))


def float_element_bytes(dtype: str) -> int:
    """Bytes of one float element stored as ``dtype``."""
    return DTYPE_BYTES.get(_DTYPE_ALIASES.get(dtype, dtype), 4)


def weight_dtype(profile: Profile, dtype: str) -> str:
    """The dtype ``profile`` stores the float weights of a model deployed at ``dtype`` at: ``dtype``, or the profile's
    ``weight_dtype`` where that is narrower (an accelerator that runs int16 feature maps against int8 weights)."""
    if profile.weight_dtype is None or float_element_bytes(profile.weight_dtype) >= float_element_bytes(dtype):
        return dtype
    return profile.weight_dtype


def weight_float_bytes(profile: Profile, dtype: str) -> int:
    """Bytes of one float weight element of a model deployed at ``dtype`` on ``profile`` (:func:`weight_dtype`)."""
    return float_element_bytes(weight_dtype(profile, dtype))


def element_bytes(info: TensorInfo, float_size: int) -> int:
    """Bytes of one element of ``info`` when float tensors take ``float_size`` bytes each (:func:`deployed_bytes`'
    rule, for the loops over every layer that look the dtype's size up once: :func:`float_element_bytes`)."""
    return float_size if is_float(info) else info.itemsize


def chained_load_us(cost: LayerCost, cache_bytes: int, times: int = 1) -> float:
    """µs the chained loads of one execution of a layer take (``cost`` counts ``times`` executions): each load waits
    :data:`CACHED_LOAD_NS` when it hits the cache, :data:`DRAM_LOAD_NS` when it misses, and a load over arrays of
    ``chained_bytes`` hits a cache of ``cache_bytes`` with the chance ``cache_bytes / chained_bytes`` (random
    accesses over a working set larger than the cache; all hit when it fits). 0 without chained loads."""
    loads = cost.chained_loads // times if times > 1 else cost.chained_loads
    if loads <= 0:
        return 0.0
    span = cost.chained_bytes
    hit = 1.0 if span <= cache_bytes else max(cache_bytes, 0) / span
    return loads * (hit * CACHED_LOAD_NS + (1.0 - hit) * DRAM_LOAD_NS) / 1e3


def _ops(cost: LayerCost, graph: Graph, node: Node, profile: Profile | None = None) -> float:
    """The operations of one execution of ``node`` (``cost`` counts every execution: a Loop body's layer's is
    ``executions`` times one's; the estimate of one execution is repeated by :func:`_repeated`). A data-movement or
    auxiliary layer's one op per output element counts the elements as ``profile`` lays them out
    (:meth:`Profile.laid_out_elements`; as they are without a profile)."""
    times = node.executions
    flops, macs = (cost.flops, cost.macs) if times == 1 else (cost.flops // times, cost.macs // times)
    if cost.unit_kind in (UnitKind.MOVE, UnitKind.AUX):
        outs = [t for t in (graph.tensor(o) for o in node.outputs) if t]
        out_elements = sum(t.elements if profile is None else profile.laid_out_elements(t.shape) for t in outs)
        return float(flops + out_elements)
    return float(max(flops, 2 * macs))


class _Residency:
    """Which activation tensors stay on chip (see the module docstring for the policy)."""

    def __init__(self, graph: Graph, profile: Profile, dtype: str, on_cpu: Sequence[bool],
                 costs: Sequence[LayerCost]) -> None:
        self.resident: set[str] = set()
        #: The resident activations that are never written: fused into their readers.
        self.fused: frozenset[str] = frozenset()
        #: The resident activations too large for the SRAM that move through it in tiles (``stream_bytes_per_s``).
        self.streamed: set[str] = set()
        budget = profile.sram_bytes // 2
        if is_cpu_profile(profile):
            self.resident = _cpu_epilogues(graph, costs) | cpu_fused_chains(graph, costs)
            return
        if budget <= 0 and not profile.fuse_elementwise:
            return
        layers = graph.layers
        position = _positions(layers, on_cpu, costs)
        # the position of the last layer reading each tensor (positions never decrease along the layers), and the
        # tensors a CPU layer reads
        last_read = {name: position[reading[-1]] for name, reading in graph.reader_indices.items()}
        read_on_cpu = {name for node, cpu in zip(layers, on_cpu, strict=True) if cpu for name in node.inputs}
        outputs = {t.name for t in graph.outputs}
        tensors = graph.tensors
        float_bytes = float_element_bytes(dtype)
        fused = _fused_tensors(graph, on_cpu, costs, position) if profile.fuse_elementwise else set()
        self.fused = frozenset(fused - outputs - read_on_cpu)
        if profile.plan_sram:
            self._planned(graph, on_cpu, position, last_read=last_read, excluded=outputs | read_on_cpu, fused=fused,
                          budget=budget, float_bytes=float_bytes, stream=bool(profile.stream_bytes_per_s))
            return
        for node, cpu, at in zip(layers, on_cpu, position, strict=True):
            if cpu:
                continue
            for name in node.outputs:
                last = last_read.get(name)
                if last is None or name in outputs or name in read_on_cpu:
                    continue
                if name in fused:
                    self.resident.add(name)
                    continue
                if last > at + 1:
                    continue
                info = tensors.get(name) if name else None
                if info is not None and info.elements * element_bytes(info, float_bytes) <= budget:
                    self.resident.add(name)

    def _planned(self, graph: Graph, on_cpu: Sequence[bool], position: Sequence[int], *, last_read: dict[str, int],
                 excluded: set[str], fused: set[str], budget: int, float_bytes: int, stream: bool) -> None:
        """``plan_sram``: in the order they are produced, an accelerator activation stays on chip when, at every
        layer from its producer to its last reader, it fits beside the activations already kept there; with
        ``stream`` (the profile's ``stream_bytes_per_s``), one that does not fit but whose readers are all within
        :data:`STREAM_WINDOW` layers is kept too, as streamed (:attr:`streamed`)."""
        live = [0] * (max(position, default=0) + 2)  # on-chip bytes at each layer position
        tensors = graph.tensors
        for node, cpu, at in zip(graph.layers, on_cpu, position, strict=True):
            if cpu:
                continue
            for name in node.outputs:
                last = last_read.get(name)
                if last is None or name in excluded:
                    continue
                if name in fused:
                    self.resident.add(name)
                    continue
                info = tensors.get(name)
                size = info.elements * element_bytes(info, float_bytes) if info is not None else budget + 1
                if size + max(live[at:last + 1]) <= budget:
                    for i in range(at, last + 1):
                        live[i] += size
                    self.resident.add(name)
                elif stream and last <= at + STREAM_WINDOW and info is not None:
                    self.resident.add(name)
                    self.streamed.add(name)


def _positions(layers: Sequence[Node], on_cpu: Sequence[bool], costs: Sequence[LayerCost]) -> list[int]:
    """Per layer, its index among the layers that run (not zero-copy), where the accelerator Slices that follow one
    another over the same input share one index: together they are one Split, its pieces taken in one pass over
    the input (the exporter writes ``torch.chunk`` as one Split or as a Slice per piece: YOLOv8's C2f exports a
    Split, YOLOv9's RepNCSPELAN4 two Slices), so that the input's readers are the next layer either way."""
    position: list[int] = []
    k = 0
    previous: Node | None = None  # the last layer that runs
    for node, cpu, cost in zip(layers, on_cpu, costs, strict=True):
        if cpu or cost.unit_kind is not UnitKind.ZERO_COPY:
            sibling = (not cpu and previous is not None and node.op_type == previous.op_type == "Slice"
                       and node.inputs[:1] == previous.inputs[:1])
            if not sibling:
                k += 1
            previous = None if cpu else node
        position.append(k)
    return position


def _cpu_epilogues(graph: Graph, costs: Sequence[LayerCost]) -> set[str]:
    """The activations a CPU runtime never writes out (:func:`is_cpu_profile`): the output of a convolution or matrix
    product, or of an element-wise layer that continues one, read by one layer only, the next computing one, which is
    element-wise. ONNX Runtime's CPU provider runs such a chain as one kernel (Conv + BatchNormalization folded into
    the weights, Conv + Add + Relu as FusedConv, MatMul + Add as Gemm, activations fused into Conv). Every other
    activation is read and written by its layers, at the DDR bandwidth: a cache is no scratchpad the runtime hands
    tensors through."""
    layers = graph.layers
    readers = graph.reader_indices
    computing = [i for i, cost in enumerate(costs) if cost.unit_kind is not UnitKind.ZERO_COPY]
    following = dict(pairwise(computing))
    outputs = {t.name for t in graph.outputs}
    resident: set[str] = set()
    chained = [cost.unit_kind is UnitKind.TENSOR for cost in costs]  # layers a fused epilogue may continue
    for i in computing:
        if not chained[i]:
            continue
        for name in layers[i].outputs:
            reading = readers.get(name, ())
            nxt = following.get(i)
            if (name in outputs or len(reading) != 1 or reading[0] != nxt or nxt is None
                    or costs[nxt].unit_kind is not UnitKind.VECTOR):
                continue
            resident.add(name)
            chained[nxt] = True
    return resident


#: Op types ONNX Runtime's CPU graph optimizer (level "extended" and up) merges into one kernel when they form a GELU
#: (Erf or Tanh form: GeluFusion, FastGeluFusion, BiasGeluFusion), a LayerNorm or an RMSNorm (LayerNormFusion,
#: SimplifiedLayerNormFusion) from elementary layers.
CPU_CHAIN_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Erf", "Tanh", "ReduceMean"})
#: A chain is fused only around one of these (the Erf of a GELU, the Tanh of its approximation, the mean of a norm),
#: and only with at least :data:`CPU_CHAIN_MIN_LAYERS` layers: a lone Add + Mul is two kernels.
CPU_CHAIN_ANCHORS = frozenset({"Erf", "Tanh", "ReduceMean"})
CPU_CHAIN_MIN_LAYERS = 4
#: How many computing layers after its producer a chain member may run (a LayerNorm's nine layers).
CPU_CHAIN_WINDOW = 12
#: Matrix products that absorb a scalar multiplier of an input (ONNX Runtime's MatMulScaleFusion).
_SCALED_PRODUCTS = frozenset({"MatMul", "Gemm", "FusedMatMul"})


def cpu_fused_chains(graph: Graph, costs: Sequence[LayerCost]) -> set[str]:
    """The activations a CPU runtime passes inside one fused kernel (:func:`is_cpu_profile`), beyond
    :func:`_cpu_epilogues`: no store and no load.

    - a chain of :data:`CPU_CHAIN_OPS` layers, each tensor of which is read only by chain members among the next
      :data:`CPU_CHAIN_WINDOW` computing layers with no other layer between, holding one of
      :data:`CPU_CHAIN_ANCHORS` and at least :data:`CPU_CHAIN_MIN_LAYERS` layers (a GELU of Div, Erf, Add, Mul,
      Mul; its bias Add; a LayerNorm's ReduceMean to its final Add): ONNX Runtime runs it as one Gelu / FastGelu /
      BiasGelu / LayerNormalization kernel that reads the chain's inputs and writes its outputs, the tensors inside
      never leave the kernel;
    - a Mul or Div by a scalar constant whose one reader is a matrix product (MatMulScaleFusion: the scale becomes
      the product's alpha).
    """
    layers = graph.layers
    readers = graph.reader_indices
    position: list[int] = []
    k = 0
    for cost in costs:
        k += cost.unit_kind is not UnitKind.ZERO_COPY
        position.append(k)
    outputs = {t.name for t in graph.outputs}
    member = [node.op_type in CPU_CHAIN_OPS and node.domain in ("", "ai.onnx") and not node.parent for node in layers]
    breaks = [0]  # breaks[i]: the layers before layer i that are no chain member
    for is_member in member:
        breaks.append(breaks[-1] + (not is_member))
    root = list(range(len(layers)))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    joined: list[str] = []
    resident: set[str] = set()
    for i, node in enumerate(layers):
        for name in node.outputs:
            reading = readers.get(name, ())
            if not name or name in outputs or not reading:
                continue
            if member[i] and all(member[j] and 0 < position[j] - position[i] <= CPU_CHAIN_WINDOW
                                 and breaks[j] == breaks[i] for j in reading):
                for j in reading:
                    root[find(j)] = find(i)
                joined.append(name)
            elif (node.op_type in ("Mul", "Div") and len(reading) == 1 and layers[reading[0]].op_type in
                  _SCALED_PRODUCTS and _scalar_constant_operand(node, graph)):
                resident.add(name)
    groups: dict[int, list[int]] = {}
    for i in range(len(layers)):
        if member[i]:
            groups.setdefault(find(i), []).append(i)
    fused = {r for r, group in groups.items()
             if len(group) >= CPU_CHAIN_MIN_LAYERS and any(layers[i].op_type in CPU_CHAIN_ANCHORS for i in group)}
    producer = {name: i for i, node in enumerate(layers) for name in node.outputs if name}
    resident.update(name for name in joined if find(producer[name]) in fused)
    return resident


def _scalar_constant_operand(node: Node, graph: Graph) -> bool:
    """Whether ``node`` multiplies by (either input of a Mul) or divides by (a Div's second input) a constant of one
    element."""
    operands = node.inputs[:2] if node.op_type == "Mul" else node.inputs[1:2]
    for name in operands:
        info = graph.tensor(name) if name in graph.constants else None
        if info is not None and info.elements == 1:
            return True
    return False


#: How many computing layers after its producer the readers of a streamed feature map may run (``stream_bytes_per_s``):
#: 1, the next layer only, which consumes the tiles as the producer writes them.
STREAM_WINDOW = 1


#: How many layers after its producer an element-wise reader of a fused tensor may run (SiLU's Mul reads the
#: convolution's output two layers later, after the Sigmoid).
FUSION_WINDOW = 3


def _fused_tensors(graph: Graph, on_cpu: Sequence[bool], costs: Sequence[LayerCost], position: Sequence[int]
                   ) -> set[str]:
    """Outputs of accelerator layers that the compiler keeps on chip by fusing their readers (``fuse_elementwise``):
    every reader is an element-wise (vector) accelerator layer within :data:`FUSION_WINDOW` layers."""
    readers = graph.reader_indices
    vector, zero_copy = UnitKind.VECTOR, UnitKind.ZERO_COPY
    # each layer's position where it is an element-wise accelerator layer, else past every window
    vector_at = [at if not cpu and cost.unit_kind is vector else math.inf
                 for at, cpu, cost in zip(position, on_cpu, costs, strict=True)]
    fused: set[str] = set()
    for node, cpu, cost, at in zip(graph.layers, on_cpu, costs, position, strict=True):
        if cpu or cost.unit_kind is zero_copy:
            continue
        window_end = at + FUSION_WINDOW
        for name in node.outputs:
            reading = readers.get(name)
            if reading and max(map(vector_at.__getitem__, reading)) <= window_end:
                fused.add(name)
    return fused


#: Element-wise ops a lookup table computes when each operand is one and the same tensor ``x`` or a scalar constant
#: (:func:`lookup_chains`): an activation function of ``x`` alone, element by element.
LOOKUP_OPS = frozenset({"Relu", "LeakyRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
                        "Softplus", "Softsign", "Mish", "Gelu", "Clip", "Exp", "Log", "Sqrt", "Erf", "Reciprocal",
                        "Abs", "Neg", "Add", "Sub", "Mul", "Div", "Pow"})
#: The gates of a gated activation ``x * gate(x)`` (SiLU: ``Sigmoid``; hard-swish: ``HardSigmoid``), as torch exports
#: them: the gate, then a ``Mul`` of ``x`` by it. The RDK X5's compiler runs each as one lookup table named after its
#: ``Mul``: its compiled YOLOv8n-CLS and YOLOv9t list one ``HzLut`` per SiLU and no ``Sigmoid`` node (57 for 57, 179
#: for 179; hb_mapper_log_yolov8n_cls.txt, hb_mapper_log_yolov9t.txt in D-Robotics/rdk_model_zoo@be4f89bd178ffe9b668bd
#: 3d431e0499df6b37fb1:samples/vision/ultralytics_yolo/source/reference_logs/).
GATES = frozenset({"Sigmoid", "HardSigmoid"})
#: The layers whose output stage runs an activation of their output (:func:`absorbed_activations`): a convolution,
#: and a Gemm, which the RDK X5 compiles to one (``HzSQuantizedConv`` in the same node lists).
_ACTIVATED_PRODUCERS = frozenset({"Conv", "ConvTranspose", "Gemm"})


@dataclass(frozen=True)
class LookupChain:
    """Accelerator layers of :data:`LOOKUP_OPS` that compute a function of one tensor ``x`` element by element
    (:func:`lookup_chains`): ``layers``, their indices in graph order, the last of which, ``last``, is the only one
    whose output anything else reads."""

    x: str
    layers: tuple[int, ...]
    last: int


def lookup_chains(graph: Graph, on_cpu: Sequence[bool], costs: Sequence[LayerCost],
                  outputs: Collection[str]) -> list[LookupChain]:
    """The element-wise chains of a model that compute a function of one tensor alone (``outputs``: the names of the
    model's outputs).

    A chain: the accelerator layers of :data:`LOOKUP_OPS` whose every operand is one tensor ``x`` (the chain's input),
    a scalar constant or the output of another such layer on the same ``x`` (a lone ``Relu``; SiLU ``x * Sigmoid(x)``;
    GELU ``x * 0.5 * (1 + Erf(x / sqrt 2))``), with exactly one layer whose output anything else reads (or that is a
    model output): the chain's last layer. Layers on one ``x`` with several such ends are no chain."""
    layers = graph.layers
    constants = graph.constants
    readers = graph.reader_indices
    vector = UnitKind.VECTOR
    root: dict[str, str] = {}  # a chain member's output -> the chain's input x
    members: dict[str, list[int]] = {}  # x -> the members on it, in graph order
    for i, node in enumerate(layers):
        if (node.op_type not in LOOKUP_OPS or on_cpu[i] or costs[i].unit_kind is not vector
                or len(node.outputs) != 1 or node.executions != 1):
            continue
        x: str | None = None  # the one tensor the layer's operands are functions of
        for name in node.inputs:
            if not name:
                continue
            if name in constants:
                info = graph.tensor(name)
                if info is None or info.elements != 1:
                    break  # a tensor of constants: not a function of x alone
                continue
            source = root.get(name, name)
            if x is None:
                x = source
            elif source != x:
                break
        else:
            if x is not None:
                root[node.outputs[0]] = x
                members.setdefault(x, []).append(i)
    chains: list[LookupChain] = []
    for x, chain in members.items():
        if len(chain) == 1:  # a layer alone: its output is read elsewhere (no layer reads its own), or by nothing
            chains.append(LookupChain(x, (chain[0],), chain[0]))
            continue
        inside = set(chain)
        ends = [i for i in chain if (out := layers[i].outputs[0]) in outputs
                or not (reading := readers.get(out)) or not inside.issuperset(reading)]
        if len(ends) == 1:
            chains.append(LookupChain(x, tuple(chain), ends[0]))
    return chains


def _is_activation(graph: Graph, chain: LookupChain) -> bool:
    """Whether ``chain`` is one activation layer or a gated activation (a :data:`GATES` gate of ``x``, then the
    ``Mul`` of ``x`` by it)."""
    if len(chain.layers) == 1:
        return True
    ops = [graph.layers[i].op_type for i in chain.layers]
    return len(ops) == 2 and ops[0] in GATES and ops[1] == "Mul"


def absorbed_activations(graph: Graph, on_cpu: Sequence[bool], costs: Sequence[LayerCost]) -> dict[str, str]:
    """The activation layers an NPU compiler (``fuse_elementwise``) runs inside another layer, by id, each mapped to
    the id of the layer that runs it:

    - an activation (one layer of :data:`LOOKUP_OPS` on one tensor, or a gated activation ``x * gate(x)``:
      :func:`lookup_chains`) of an accelerator convolution's output that nothing else reads: the convolution's output
      stage runs it, and the convolution writes the activation's output. The RDK X5's compiled RepVGG-A2 lists its 22
      convolutions and no Relu node (``hb_mapper`` node list, D-Robotics/rdk_model_zoo@be4f89bd178ffe9b668bd3d431e0499
      df6b37fb1:samples/vision/classification/Model quantization deployment.md); its compiled YOLOv9t (190
      convolutions, 179 SiLU lookups, 487 nodes) takes hbdk's 4.01 ms where YOLOv8n (63, 57, 175 nodes) takes
      3.96 ms, at 8.2 against 8.7 GFLOPs and less DDR traffic (benchmarks/data/compiler_static.csv): its lookups
      are no passes of their own;
    - elsewhere, the gate of a gated activation (:data:`GATES`): its ``Mul`` runs ``x * gate(x)`` as one lookup.

    Longer chains on one tensor (an exported GELU's Div, Erf, Add, Mul, Mul) stay layers."""
    layers = graph.layers
    readers, writers, positions = graph.reader_indices, graph.writers, graph.positions
    outputs = {t.name for t in graph.outputs}
    found: dict[str, str] = {}
    for chain in lookup_chains(graph, on_cpu, costs, outputs):
        if not _is_activation(graph, chain):
            continue
        runner = layers[chain.last].id
        producer = writers.get(chain.x)
        j = positions[producer.id] if producer is not None else None
        if (j is not None and not on_cpu[j] and layers[j].op_type in _ACTIVATED_PRODUCERS and chain.x not in outputs
                and all(map(chain.layers.__contains__, readers.get(chain.x, ()))) and layers[j].executions == 1):
            runner = layers[j].id
        for i in chain.layers:
            if (layer_id := layers[i].id) != runner:
                found[layer_id] = runner
    return found


def resident_tensors(graph: Graph, profile: Profile, dtype: str, costs: Sequence[LayerCost],
                     on_cpu: Sequence[bool]) -> frozenset[str]:
    """Names of the activations that stay on chip (no store, no load) under the residency policy.

    The policy of the module docstring, exactly as :func:`estimate_graph` applies it; ``on_cpu[i]``
    says whether ``graph.layers[i]`` falls back to the CPU.
    """
    return frozenset(_Residency(graph, profile, dtype, on_cpu, costs).resident)


#: The smallest tensor (bytes at the deployed dtype) :func:`plan_shared_weights` plans: one DDR burst (64 B on
#: LPDDR4/5 and a CPU's cache line). Smaller constants cost a burst whichever layer loads them, and compilers fold
#: scalars into the instructions that read them.
SHARED_MIN_BYTES = 64


def plan_shared_weights(graph: Graph, profile: Profile, dtype: str, costs: Sequence[LayerCost],
                        on_cpu: Sequence[bool]) -> SharedWeightPlan:
    """Which weights read by several accelerator layers are loaded from DDR once per inference.

    The readers are the layers on the profile's units (``on_cpu[i]``: ``graph.layers[i]`` falls back to the CPU,
    whose reads all go through DDR; zero-copy layers read nothing). Taken in the order of their first reader, a
    shared tensor is *resident* when, at every layer from its first reader to its last, its whole size at ``dtype``
    fits the SRAM's weight share (:attr:`Profile.weight_budget_bytes`) beside the resident tensors live there and
    that layer's other weights (so no layer's own weights take more passes for it); a resident tensor is read from
    DDR once in all (each reader loads what it reads that the earlier ones did not), any other by every reader, as
    an unshared weight is. The same rule
    holds on every kind of profile: on a CPU the ``sram_bytes`` are the cache the cores hold (the host probe's
    on-chip bytes, L2 and the cores' share of the last-level cache), so a reused weight that fits half of it is not
    read from DDR again; a profile with no on-chip memory (``sram_bytes`` 0) loads every shared weight per use.
    A tensor of fewer than :data:`SHARED_MIN_BYTES` at ``dtype`` (a scalar, a shape or axes operand) is not planned:
    it keeps its per-use charge of a few bytes.
    """
    budget = profile.weight_budget_bytes
    candidates = shared_weights(graph)
    if not candidates:  # no tensor of the model has two readers
        return SharedWeightPlan(budget_bytes=budget)
    identities = weight_identities(graph)
    computing = [not cpu and cost.unit_kind is not UnitKind.ZERO_COPY
                 for cpu, cost in zip(on_cpu, costs, strict=True)]
    shared = {identity: on_chip for identity, readers in candidates.items()
              if len(on_chip := [i for i in readers if computing[i]]) > 1}
    if not shared:
        return SharedWeightPlan(budget_bytes=budget)
    reads = _SharedReads(graph, identities, computing, shared, weight_float_bytes(profile, dtype))
    layers = graph.layers
    weights: list[SharedWeight] = []
    loads: dict[str, dict[str, int]] = {}
    live = np.zeros(len(layers), dtype=np.int64)  # bytes of resident shared weights on chip at each layer
    for identity, readers in sorted(shared.items(), key=lambda item: item[1][0]):
        size, by_reader = reads.sizes[identity], reads.by_reader[identity]
        if size < SHARED_MIN_BYTES:
            continue
        first, last = readers[0], readers[-1]
        read = np.array([sum(n for _, n in by_reader.get(i, ())) for i in readers], dtype=np.int64)
        beside = live[first:last + 1] + reads.own[first:last + 1]
        beside[np.asarray(readers) - first] -= read
        resident = budget > 0 and size + int(beside.max()) <= budget
        loaded = int(read.sum())
        if resident:
            live[first:last + 1] += size
            reads.own[list(readers)] -= read
            loaded = _load_once(loads, layers, readers, by_reader)
        weights.append(SharedWeight(identity, tuple(layers[i].id for i in readers), size, resident,
                                    int(read.sum()), loaded))
    return SharedWeightPlan(tuple(weights), budget, loads)


class _SharedReads:
    """What the accelerator layers read of the weights (:func:`plan_shared_weights`): ``own``, per layer, the weight
    bytes it loads (0 off the accelerator); ``by_reader``, per shared identity and reading layer, the constant names
    it reads and the bytes of each; ``sizes``, per shared identity, its largest member's whole size, all at the
    deployed dtype (``float_bytes`` a float element)."""

    def __init__(self, graph: Graph, identities: Mapping[str, str], computing: Sequence[bool],
                 shared: Mapping[str, Sequence[int]], float_bytes: int) -> None:
        tensors = graph.tensors
        self.own = np.zeros(len(graph.layers), dtype=np.int64)
        self.by_reader: dict[str, dict[int, list[tuple[str, int]]]] = {identity: {} for identity in shared}
        self.sizes: dict[str, int] = dict.fromkeys(shared, 0)
        for i, node in enumerate(graph.layers):
            if not computing[i]:
                continue
            for name in node.inputs:
                identity = identities.get(name) if name else None
                if identity is None or (t := tensors.get(name)) is None:
                    continue
                size = element_bytes(t, float_bytes)
                read = constant_elements_read(node, graph, t) * size
                self.own[i] += read
                if identity in self.sizes:
                    self.by_reader[identity].setdefault(i, []).append((name, read))
                    self.sizes[identity] = max(self.sizes[identity], t.elements * size)


def _load_once(loads: dict[str, dict[str, int]], layers: Sequence[Node], readers: Sequence[int],
               reads: Mapping[int, Sequence[tuple[str, int]]]) -> int:
    """Record in ``loads`` what each of ``readers`` loads of a resident tensor it reads as ``reads`` (by reader: the
    constant names and the bytes read): what it reads beyond the most an earlier reader read. Returns the bytes
    loaded in all (the most any reader reads)."""
    loaded = 0
    for i in readers:
        layer = loads.setdefault(layers[i].id, {})
        for name, read in reads.get(i, ()):
            layer[name] = layer.get(name, 0) + max(0, read - loaded)
            loaded = max(loaded, read)
    return loaded


def estimate_graph(graph: Graph, profile: Profile, dtype: str | None = None,
                   costs: Sequence[LayerCost] | None = None, *, quantized_outputs: bool = False) -> Estimate:
    """Estimate every layer of ``graph`` on ``profile`` at ``dtype`` (default: the profile's).

    ``quantized_outputs``: the model is deployed without the Dequantize nodes at its outputs (hb_mapper's
    ``remove_node_type: "Dequantize"``), so the runtime hands the outputs over as the accelerator wrote them: no
    float32 hand-over (:func:`output_conversion_us`) is added to the per-inference task.

    Without ``costs``, the layers of one class of :func:`layerscope.costs.classify_costs` (alike in every input of
    their cost) that run as often, fall back for the same reason and keep the same inputs and outputs on chip are
    estimated once: their estimates are equal but for ``layer_id``.
    """
    dtype = dtype or profile.default_dtype
    if costs is None:
        classified = classify_costs(graph)
        costs, classes = classified.costs, classified.classes
    else:
        costs, classes = tuple(costs), (None,) * len(costs)
    reasons = fallback_reasons(profile, graph)
    on_cpu = [r is not None for r in reasons]
    residency = _Residency(graph, profile, dtype, on_cpu, costs)
    shared = plan_shared_weights(graph, profile, dtype, costs, on_cpu)
    absorbed = absorbed_activations_priced(graph, profile, on_cpu, costs)
    estimate_layer = _LayerEstimator(graph, profile, dtype, residency.resident, shared.loads,
                                     streamed=residency.streamed, absorbed=absorbed)
    layers = estimate_layer.every_layer(costs, reasons, classes)
    handover_us = 0.0 if quantized_outputs else output_conversion_us(graph, profile)
    return Estimate(profile_name=profile.name, dtype=dtype, layers=layers, costs=costs,
                    resident=frozenset(residency.resident),
                    task_overhead_us=profile.task_overhead_us + handover_us,
                    fused=residency.fused & residency.resident, output_handover_us=handover_us,
                    quantized_outputs=quantized_outputs, absorbed=frozenset(absorbed), shared_weights=shared)


#: Bytes of one float element of a model output the runtime hands to the caller (float32).
OUTPUT_FLOAT_BYTES = 4


def output_handover_bytes(graph: Graph) -> dict[str, int]:
    """The bytes of each of ``graph``'s outputs (by name, in the graph's order) as the device runtime hands them to
    the caller: float outputs as float32 (4 bytes an element), integer outputs at their own size."""
    return {t.name: t.elements * element_bytes(t, OUTPUT_FLOAT_BYTES) for t in graph.outputs}


def output_conversion_us(graph: Graph, profile: Profile) -> float:
    """µs the device runtime spends per inference handing ``graph``'s outputs to the caller after the accelerator
    finishes: their bytes (:func:`output_handover_bytes`) at the profile's ``output_bytes_per_s``; 0 for a profile
    without it."""
    rate = profile.output_bytes_per_s
    if not rate:
        return 0.0
    return sum(output_handover_bytes(graph).values()) / rate * 1e6


def _repeated(est: LayerEstimate, times: int) -> LayerEstimate:
    """A layer that runs ``times`` per inference (a Loop body's node): every time, traffic included."""
    if times == 1:
        return est
    return replace(est, compute_us=est.compute_us * times, load_us=est.load_us * times,
                   store_us=est.store_us * times, overhead_us=est.overhead_us * times,
                   latency_us=est.latency_us * times, ddr_read_bytes=est.ddr_read_bytes * times,
                   ddr_write_bytes=est.ddr_write_bytes * times)


class _LayerEstimator:
    """One layer's estimate (a call) or every layer's (:meth:`every_layer`), with what every layer of the graph shares
    read once: the unit of each kind and its attainable rate, each op type's efficiency, the deployed dtype's size,
    the SRAM budget and the bandwidth. ``loads``: :attr:`SharedWeightPlan.loads`, what the readers of resident
    shared weights load of them (in place of the whole constant each)."""

    def __init__(self, graph: Graph, profile: Profile, dtype: str, resident: set[str],
                 loads: Mapping[str, Mapping[str, int]] | None = None, *,
                 streamed: set[str] | None = None, absorbed: Mapping[str, str] | None = None) -> None:
        self.graph, self.profile, self.dtype, self.resident = graph, profile, dtype, resident
        #: the activation layers another layer runs (:func:`absorbed_activations`): no time of their own; the layer
        #: that runs them writes their outputs (``carried``: by its id, the tensors it writes for them)
        self.absorbed = frozenset(absorbed or ())
        self.carried: dict[str, list[str]] = {}
        for layer_id, runner in (absorbed or {}).items():
            self.carried.setdefault(runner, []).extend(graph.layers[graph.positions[layer_id]].outputs)
        #: the resident activations that move through on-chip memory in tiles, and their rate (bytes/s)
        self.streamed = streamed or set()
        self.stream_rate = profile.stream_bytes_per_s or 0.0
        self.loads = loads or {}
        self.units: dict[UnitKind, tuple[ComputeUnit, float]] = {}
        self.efficiency: dict[str, float] = {}
        self.float_bytes = float_element_bytes(dtype)
        self.weight_bytes = weight_float_bytes(profile, dtype)
        self.weight_budget = profile.weight_budget_bytes
        self.bandwidth = profile.attainable_ddr_bytes_per_s
        self.weight_bandwidth = profile.attainable_weight_ddr_bytes_per_s
        #: A CPU profile runs every layer as a kernel of its runtime, views included (:func:`_cpu_view`).
        self.cpu_kernels = is_cpu_profile(profile)
        #: A CPU profile's activations of at most this many bytes move at ``cache_bandwidth`` (0: none do).
        self.cached_bytes = cpu_cached_bytes(profile)
        self.cache_bandwidth = profile.cache_bytes_per_s or self.bandwidth
        #: the ids of the graph's layout Transposes where the profile prices them apart (:func:`layout_transposes`)
        self.layout = layout_transposes_priced(graph, profile)
        #: the ids of the graph's Transposes the compiler does not run, where the profile prices layout apart: they
        #: cost nothing
        self.dropped = dropped_transposes_priced(graph, profile)

    def every_layer(self, costs: Sequence[LayerCost], reasons: Sequence[str | None],
                    classes: Sequence[int | None]) -> tuple[LayerEstimate, ...]:
        """The estimate of each of the graph's layers, every execution counted, given its cost, fallback reason and
        class (:func:`layerscope.costs.classify_costs`). Computed once per key ``(class, executions, reason, which
        of the layer's inputs and outputs stay on chip, which inputs are resident shared weights and what it loads
        of them, whether it is a layout Transpose the profile prices apart)`` and renamed for the other layers with
        that key; computed for every layer of class ``None``."""
        resident, loads, streamed, carried = self.resident, self.loads, self.streamed, self.carried
        # how a layer runs apart from its class: 1 a layout Transpose priced apart, 2 a dropped Transpose, 3 an
        # absorbed activation, 0 none of them (the first that holds, in that order)
        apart = dict.fromkeys(self.absorbed, 3) | dict.fromkeys(self.dropped, 2) | dict.fromkeys(self.layout, 1)
        by_key: dict[tuple[int, int, str | None, tuple[bool, ...], tuple[bool, ...], tuple[bool, ...], int, int,
                           tuple[tuple[bool, bool], ...]], LayerEstimate] = {}
        estimates: list[LayerEstimate] = []
        for node, cost, reason, layer_class in zip(self.graph.layers, costs, reasons, classes, strict=True):
            if layer_class is None:
                estimates.append(_repeated(self(node, cost, reason), node.executions))
                continue
            layer_id = node.id
            shared = loads.get(layer_id)
            tensors = node.inputs + node.outputs
            carries = carried.get(layer_id)
            key = (layer_class, node.executions, reason,
                   tuple(map(resident.__contains__, tensors)) if resident else (),
                   tuple(map(streamed.__contains__, tensors)) if streamed else (),
                   tuple(map(shared.__contains__, node.inputs)) if shared else (),
                   sum(shared.values()) if shared else 0,
                   apart.get(layer_id, 0),
                   tuple([(name in resident, name in streamed) for name in carries]) if carries else ())
            known = by_key.get(key)
            if known is None:
                by_key[key] = known = _repeated(self(node, cost, reason), node.executions)
                estimates.append(known)
            else:
                estimates.append(_renamed(known, layer_id))
        return tuple(estimates)

    def __call__(self, node: Node, cost: LayerCost, reason: str | None) -> LayerEstimate:
        graph, profile, dtype = self.graph, self.profile, self.dtype
        if reason is not None:
            return _on_cpu(graph, profile, node, cost, reason)
        if cost.unit_kind is UnitKind.ZERO_COPY or node.id in self.dropped or node.id in self.absorbed:
            if self.cpu_kernels:
                return _cpu_view(node.id, profile.unit_for(UnitKind.ZERO_COPY, dtype), dtype)
            return LayerEstimate(node.id, "-", dtype, 0.0, 0.0, 0.0, 0.0, 0.0, Bound.NONE, 0, 0)
        units = self.units
        if cost.unit_kind not in units:
            chosen = profile.unit_for(cost.unit_kind, dtype)
            units[cost.unit_kind] = (chosen, chosen.attainable_ops_per_s(dtype))
        unit, rate = units[cost.unit_kind]
        efficiency = self.efficiency.get(node.op_type)
        if efficiency is None:
            efficiency = self.efficiency[node.op_type] = profile.efficiency_for(node.op_type)
        if node.id in self.layout:
            efficiency = profile.layout_transpose_efficiency or efficiency
        compute_us = _ops(cost, graph, node, profile) / (rate * efficiency) * 1e6
        if cost.chained_loads:
            compute_us = max(compute_us, chained_load_us(cost, profile.sram_bytes, node.executions))
        float_bytes, resident, cached_bytes = self.float_bytes, self.resident, self.cached_bytes
        tensors, constants = graph.tensors, graph.constants
        weight_bytes = act_in = act_all = cached_in = cached_out = tiled = held = 0
        streamed = self.streamed
        shared = self.loads.get(node.id)
        for name in node.inputs:
            t = tensors.get(name) if name else None
            if t is None:
                continue
            if t.name in constants:
                if shared is None or name not in shared:
                    weight_bytes += constant_elements_read(node, graph, t) * element_bytes(t, self.weight_bytes)
            else:
                size = t.elements * element_bytes(t, float_bytes)
                if node.op_type == "Slice" and name == node.inputs[0]:
                    size = _slice_read(node, graph, t, size)
                act_all += size
                if t.name not in resident:
                    act_in += size
                    if size <= cached_bytes:
                        cached_in += size
                elif t.name in streamed:
                    tiled += size
                else:
                    held += size
        passes = 1
        weight_budget = self.weight_budget
        if weight_budget > 0 and weight_bytes > weight_budget:
            passes = -(-weight_bytes // weight_budget)
            # every pass reads the inputs again: from DDR, but for those held whole on chip, which it reads there
            act_in += (passes - 1) * (act_all - held)
        weight_read = weight_bytes + (sum(shared.values()) if shared else 0)
        written = 0
        for name in (*node.outputs, *self.carried.get(node.id, ())):
            t = tensors.get(name) if name else None
            if t is not None and t.name not in resident:
                size = t.elements * element_bytes(t, float_bytes)
                written += size
                if size <= cached_bytes:
                    cached_out += size
            elif t is not None and t.name in streamed:
                tiled += t.elements * element_bytes(t, float_bytes)
        overhead_us = unit.overhead_us + activation_matmul_us(node, graph, profile)
        return _finish(node.id, unit.name, dtype, compute_us=compute_us, read=act_in + weight_read, written=written,
                       bandwidth=self.bandwidth, overhead_us=overhead_us, passes=passes, reason=None,
                       weight_read=weight_read, weight_bandwidth=self.weight_bandwidth,
                       cached=(cached_in, cached_out, self.cache_bandwidth) if cached_in or cached_out else None,
                       streamed_us=tiled / self.stream_rate * 1e6 if tiled else 0.0)


def _slice_read(node: Node, graph: Graph, data: TensorInfo, size: int) -> int:
    """The bytes a Slice ``node`` reads of its ``data`` input held at ``size`` bytes when deployed: the part it keeps
    (:func:`layerscope.costs.movement.slice_read_bytes`, at the deployed dtype), as a DMA reads only the rows and
    channel ranges it copies; ``size`` when that part is not known."""
    kept = slice_read_bytes(node, graph)
    if kept is None or not data.nbytes:
        return size
    return min(size, -(-kept * size // data.nbytes))


#: Op types that are a matrix product of their first two inputs.
_MATRIX_PRODUCTS = frozenset({"MatMul", "Gemm"})


def activation_matmul_elements(node: Node, graph: Graph) -> int:
    """Output elements of one execution of ``node`` when it is a matrix product of two activations (MatMul or Gemm
    neither of whose first two inputs is a constant: an attention's scores Q x K^T and their weighted sum A x V);
    0 for any other layer (a weight MatMul, a Conv)."""
    if node.op_type not in _MATRIX_PRODUCTS or len(node.inputs) < 2:
        return 0
    if any(not name or name in graph.constants for name in node.inputs[:2]):
        return 0
    out = graph.tensor(node.outputs[0]) if node.outputs and node.outputs[0] else None
    return out.elements if out is not None else 0


def activation_matmul_us(node: Node, graph: Graph, profile: Profile) -> float:
    """µs an accelerator layer adds beside its roofline time as a matrix product of two activations (NPU profiles):
    ``activation_matmul_ns_per_element`` per output element (:func:`activation_matmul_elements`), as the profile
    lays the output out (:meth:`Profile.laid_out_elements`); 0 for a CPU profile, a profile without the field, or
    any other layer."""
    ns = profile.activation_matmul_ns_per_element
    if ns <= 0 or is_cpu_profile(profile) or not activation_matmul_elements(node, graph):
        return 0.0
    out = graph.tensor(node.outputs[0])
    return (profile.laid_out_elements(out.shape) if out is not None else 0) * ns / 1e3


def layout_transposes_priced(graph: Graph, profile: Profile) -> frozenset[str]:
    """The ids of ``graph``'s layout Transposes (:func:`layerscope.estimator.layout.layout_transposes`) where
    ``profile`` prices them apart (an accelerator profile with ``layout_transpose_efficiency``); empty elsewhere."""
    if profile.layout_transpose_efficiency is None or is_cpu_profile(profile):
        return frozenset()
    return layout_transposes(graph)


def absorbed_activations_priced(graph: Graph, profile: Profile, on_cpu: Sequence[bool],
                                costs: Sequence[LayerCost]) -> dict[str, str]:
    """:func:`absorbed_activations` where ``profile``'s compiler fuses element-wise layers into their producer (an
    accelerator profile with ``fuse_elementwise``); empty elsewhere."""
    if not profile.fuse_elementwise or is_cpu_profile(profile):
        return {}
    return absorbed_activations(graph, on_cpu, costs)


def dropped_transposes_priced(graph: Graph, profile: Profile) -> frozenset[str]:
    """The ids of ``graph``'s Transposes the NPU compiler does not run
    (:func:`layerscope.estimator.layout.dropped_transposes`), estimated as zero-copy layers where ``profile`` prices
    layout Transposes apart (an accelerator profile with ``layout_transpose_efficiency``), and, where it also prices
    the outputs' hand-over (``output_bytes_per_s``), its output permutes to NHWC
    (:func:`layerscope.estimator.layout.output_transposes`); empty elsewhere."""
    if profile.layout_transpose_efficiency is None or is_cpu_profile(profile):
        return frozenset()
    if profile.output_bytes_per_s:
        return dropped_transposes(graph) | output_transposes(graph)
    return dropped_transposes(graph)


def is_cpu_profile(profile: Profile) -> bool:
    """Whether ``profile`` is a CPU target (``kind = "cpu"``: the host, a CPU board): its runtime runs every layer as a
    kernel of its own, and its caches are no scratchpad that layers hand activations through for free."""
    return profile.kind == "cpu"


def cpu_cached_bytes(profile: Profile) -> int:
    """The largest activation (bytes at the deployed dtype) a CPU profile's caches hold between the layer that writes it
    and the next that reads it: half its ``sram_bytes`` (the cache its cores may use), when it states a
    ``cache_bytes_per_s``; 0 for every other profile (all traffic at the DRAM bandwidth)."""
    if not is_cpu_profile(profile) or not profile.cache_bytes_per_s:
        return 0
    return profile.sram_bytes // 2


def _cpu_view(layer_id: str, unit: ComputeUnit, dtype: str) -> LayerEstimate:
    """A zero-copy layer (Reshape, Squeeze, Identity...) on a CPU target: no arithmetic and no traffic (the runtime
    aliases or copies a few bytes), but the runtime still dispatches it as a kernel: the unit's per-layer overhead.
    ONNX Runtime's CPU provider, one thread, a 50-node chain of Reshape or Identity on 8 to 65,536 floats:
    0.21-0.29 µs per node, as an Add of 8 floats (0.27 µs), the overhead the host probe measures."""
    overhead = unit.overhead_us
    return LayerEstimate(layer_id, unit.name, dtype, 0.0, 0.0, 0.0, overhead, overhead,
                         Bound.OVERHEAD if overhead > 0 else Bound.NONE, 0, 0)


def _on_cpu(graph: Graph, profile: Profile, node: Node, cost: LayerCost, reason: str) -> LayerEstimate:
    unit = profile.cpu
    compute_us = _compute_us(_ops(cost, graph, node), unit, _FALLBACK_DTYPE)
    if cost.chained_loads:
        compute_us = max(compute_us, chained_load_us(cost, CPU_FALLBACK_CACHE_BYTES, node.executions))
    read = sum(deployed_bytes(t, _FALLBACK_DTYPE) for t in (graph.tensor(i) for i in node.inputs) if t)
    written = sum(deployed_bytes(t, _FALLBACK_DTYPE) for t in (graph.tensor(o) for o in node.outputs) if t)
    overhead = unit.overhead_us + profile.transfer_overhead_us
    return _finish(node.id, unit.name, _FALLBACK_DTYPE, compute_us=compute_us, read=read, written=written,
                   bandwidth=profile.cpu_ddr_bandwidth_bytes_per_s, overhead_us=overhead, passes=1, reason=reason)


def _compute_us(ops: float, unit: ComputeUnit, dtype: str, op_efficiency: float = 1.0) -> float:
    """µs to run ``ops`` on ``unit`` at ``dtype``'s attainable rate times ``op_efficiency``."""
    return ops / (unit.attainable_ops_per_s(dtype) * op_efficiency) * 1e6


def _finish(layer_id: str, unit: str, dtype: str, *, compute_us: float, read: int, written: int,
            bandwidth: float, overhead_us: float, passes: int, reason: str | None, weight_read: int = 0,
            weight_bandwidth: float | None = None, cached: tuple[int, int, float] | None = None,
            streamed_us: float = 0.0) -> LayerEstimate:
    """The layer's estimate from its compute µs and memory bytes: ``read`` (``weight_read`` of them weights, which
    load at ``weight_bandwidth`` when given, the rest at ``bandwidth``) and ``written``. ``cached``: (bytes read,
    bytes written, bytes/s) of those activations a CPU's cache holds (:func:`cpu_cached_bytes`), which move at that
    rate instead of ``bandwidth``; they stay counted in ``read`` and ``written``. ``streamed_us``: the µs the layer's
    streamed feature maps (``stream_bytes_per_s``) take through on-chip memory, in its load time, no DDR bytes."""
    cached_read, cached_written, cache_bandwidth = cached or (0, 0, bandwidth)
    if weight_bandwidth is None or weight_bandwidth == bandwidth:
        load_us = (read - cached_read) / bandwidth * 1e6
    else:
        load_us = ((read - weight_read - cached_read) / bandwidth + weight_read / weight_bandwidth) * 1e6
    load_us += streamed_us
    store_us = (written - cached_written) / bandwidth * 1e6
    if cached is not None:
        load_us += cached_read / cache_bandwidth * 1e6
        store_us += cached_written / cache_bandwidth * 1e6
    memory_us = load_us + store_us
    body = max(compute_us, memory_us)
    if overhead_us > body:
        bound = Bound.OVERHEAD
    elif compute_us >= memory_us:
        bound = Bound.COMPUTE
    else:
        bound = Bound.BANDWIDTH
    return LayerEstimate(layer_id, unit, dtype, compute_us, load_us, store_us, overhead_us,
                         body + overhead_us, bound, read, written, passes, reason)


def _renamed(estimate: LayerEstimate, layer_id: str) -> LayerEstimate:
    """``estimate`` under ``layer_id`` (equal to ``dataclasses.replace(estimate, layer_id=layer_id)``), built without
    ``__init__``: a big model has 100k layers of a few kinds."""
    renamed = _new(LayerEstimate)
    _set_layer_id(renamed, layer_id)
    _set_unit(renamed, estimate.unit)
    _set_dtype(renamed, estimate.dtype)
    _set_compute_us(renamed, estimate.compute_us)
    _set_load_us(renamed, estimate.load_us)
    _set_store_us(renamed, estimate.store_us)
    _set_overhead_us(renamed, estimate.overhead_us)
    _set_latency_us(renamed, estimate.latency_us)
    _set_bound(renamed, estimate.bound)
    _set_ddr_read_bytes(renamed, estimate.ddr_read_bytes)
    _set_ddr_write_bytes(renamed, estimate.ddr_write_bytes)
    _set_weight_passes(renamed, estimate.weight_passes)
    _set_fallback_reason(renamed, estimate.fallback_reason)
    return renamed


_new = object.__new__
#: The setters of LayerEstimate's slots, in field order: a frozen instance's fields are set through them, as
#: ``object.__setattr__`` does after looking each up by name.
(_set_layer_id, _set_unit, _set_dtype, _set_compute_us, _set_load_us, _set_store_us, _set_overhead_us, _set_latency_us,
 _set_bound, _set_ddr_read_bytes, _set_ddr_write_bytes, _set_weight_passes,
 _set_fallback_reason) = (getattr(LayerEstimate, f.name).__set__ for f in fields(LayerEstimate))
