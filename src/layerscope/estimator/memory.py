"""The memory plan of one model: what it needs in DDR, by the categories of Horizon's compiler report.

A liveness analysis along a schedule (each layer's active window ``[start_us, end_us]``, e.g. from
:func:`layerscope.estimator.timeline.simulate_timeline`). Every activation tensor gets a *buffer*:

- a zero-copy view (Reshape, Flatten, ...) shares the buffer of its input, so a chain of views is one
  buffer that lives until the last consumer of any of them;
- a buffer is stored at its producer's dtype (the deployed dtype on the accelerator, fp32 on the CPU);
  graph inputs at the deployed dtype;
- it is live from its producer's active start (``0`` for a graph input) to the latest active end of
  its consumers; a graph output stays live to the end of the frame; an output nobody reads lives
  while its producer runs;
- a layer reading a float buffer stored at another dtype (the CPU reading int8, the accelerator
  reading the CPU's fp32) needs a converted copy at its own dtype, live while that layer runs: a
  *temporary*.

The categories (bytes; "peak" is the most live at one instant, frees before allocations at the
same instant):

- ``static_bytes``: the weights (constants read by layers that compute), at their readers' dtype, each tensor of
  the model once (a constant and its folded transpose or reshape are one: :mod:`layerscope.costs.weights`);
- ``input_bytes`` / ``output_bytes``: the graph's input and output buffers;
- ``shared_temporary_bytes``: peak of the temporaries; no layer's state survives them, so one
  allocation serves every frame and every model on the device;
- ``exclusive_intermediate_bytes``: peak of the intermediate buffers held in DDR (not resident on
  chip): needed once per frame in flight;
- ``on_chip_peak_bytes``: peak of the intermediates the residency policy keeps in SRAM (not DDR);
- ``peak_live_bytes``: peak of every buffer at once, wherever it lives (what a layer's inputs plus
  outputs can never exceed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from layerscope.costs.weights import weight_identities
from layerscope.estimator.roofline import (
    deployed_bytes,
    element_bytes,
    float_element_bytes,
    is_float,
    weight_dtype,
    weight_float_bytes,
)
from layerscope.estimator.types import Bound, Estimate
from layerscope.model.types import Graph
from layerscope.targets import Profile


class BufferKind(StrEnum):
    """Where a buffer lives and which category of the plan it counts toward."""

    INPUT = "input"
    OUTPUT = "output"
    DDR = "ddr"  # an intermediate activation in DDR
    ON_CHIP = "on_chip"  # an intermediate activation the residency policy keeps in SRAM
    TEMPORARY = "temporary"  # a dtype-converted copy, live while its reader runs


@dataclass(frozen=True)
class Buffer:
    """One allocation: ``nbytes`` live over ``[start_us, end_us]``; ``name`` is its root tensor."""

    name: str
    kind: BufferKind
    nbytes: int
    start_us: float
    end_us: float


@dataclass(frozen=True)
class MemoryPlan:
    """DDR memory of one model on one profile, in bytes (see the module docstring for each field).

    ``frames_in_flight``: frames the device holds at once (one per core in a batch split); each needs
    its own input, output and exclusive intermediate buffers, while weights and temporaries are shared.
    """

    static_bytes: int
    input_bytes: int
    output_bytes: int
    shared_temporary_bytes: int
    exclusive_intermediate_bytes: int
    on_chip_peak_bytes: int
    peak_live_bytes: int
    frames_in_flight: int = 1

    @property
    def dynamic_bytes(self) -> int:
        """Horizon's dynamic memory of one frame: input + output + shared temporary + exclusive intermediate."""
        return self.input_bytes + self.output_bytes + self.shared_temporary_bytes + self.exclusive_intermediate_bytes

    @property
    def minimum_requirement_bytes(self) -> int:
        """Static + shared temporary + frames in flight x (input + output + exclusive intermediate)."""
        per_frame = self.input_bytes + self.output_bytes + self.exclusive_intermediate_bytes
        return self.static_bytes + self.shared_temporary_bytes + self.frames_in_flight * per_frame


def plan_memory(graph: Graph, estimate: Estimate, windows: Sequence[tuple[float, float]], *,
                resident: frozenset[str], latency_us: float, frames_in_flight: int = 1,
                profile: Profile | None = None) -> MemoryPlan:
    """The memory plan of ``graph`` scheduled as ``windows`` (one ``(start_us, end_us)`` per layer).

    ``estimate`` gives each layer's dtype and whether it is a zero-copy view; ``resident`` the
    activations kept on chip; ``latency_us`` the end of the frame; ``profile``, when given, the dtype its weights
    are stored at (:func:`~layerscope.estimator.roofline.weight_dtype`; else the layer's). One pass over the layers
    (:func:`_liveness`), then the peaks over every buffer at once (:func:`_peaks`).
    """
    live = _liveness(graph, estimate, windows, resident=resident, latency_us=latency_us, profile=profile)
    peaks = _peaks(live.nbytes, live.start_us, live.end_us, live.kinds)
    kinds = np.asarray(live.kinds, dtype=object)
    nbytes = np.asarray(live.nbytes, dtype=object)  # Python ints: no overflow
    return MemoryPlan(
        static_bytes=live.static_bytes,
        input_bytes=sum(nbytes[kinds == BufferKind.INPUT].tolist()),
        output_bytes=sum(nbytes[kinds == BufferKind.OUTPUT].tolist()),
        shared_temporary_bytes=peaks[BufferKind.TEMPORARY],
        exclusive_intermediate_bytes=peaks[BufferKind.DDR],
        on_chip_peak_bytes=peaks[BufferKind.ON_CHIP],
        peak_live_bytes=peaks[None],
        frames_in_flight=frames_in_flight,
    )


def static_bytes(graph: Graph, estimate: Estimate, profile: Profile | None = None) -> int:
    """Bytes of the constants that computing layers read, each tensor of the model once
    (:func:`~layerscope.costs.weights.weight_identities`), at the largest reader's dtype (as ``profile``, when
    given, stores weights at it: :func:`~layerscope.estimator.roofline.weight_dtype`)."""
    sizes: dict[str, int] = {}
    identities = weight_identities(graph)
    for node, est in zip(graph.layers, estimate.layers, strict=True):
        if est.bound is not Bound.NONE:
            dtype = est.dtype if profile is None else weight_dtype(profile, est.dtype)
            _add_weights(sizes, graph, node.inputs, dtype, identities)
    return sum(sizes.values())


def _add_weights(sizes: dict[str, int], graph: Graph, inputs: Sequence[str], dtype: str,
                 identities: Mapping[str, str]) -> None:
    """Count the constants among ``inputs`` at ``dtype`` in ``sizes`` by identity (each at the largest size seen)."""
    for name in inputs:
        if graph.is_constant(name) and (info := graph.tensor(name)) is not None:
            identity = identities.get(name, name)
            sizes[identity] = max(sizes.get(identity, 0), deployed_bytes(info, dtype))


def live_buffers(graph: Graph, estimate: Estimate, windows: Sequence[tuple[float, float]], *,
                 resident: frozenset[str], latency_us: float, profile: Profile | None = None) -> tuple[Buffer, ...]:
    """Every buffer of the frame with its live range, in a deterministic order (see the module docstring;
    ``profile`` as :func:`plan_memory` reads it)."""
    live = _liveness(graph, estimate, windows, resident=resident, latency_us=latency_us, profile=profile)
    return tuple(map(Buffer, live.names, live.kinds, live.nbytes, live.start_us, live.end_us))


@dataclass(frozen=True)
class _Live:
    """The buffers of :func:`live_buffers` as columns (roots first, then temporaries), and the weights' bytes."""

    names: list[str]
    kinds: list[BufferKind]
    nbytes: list[int]
    start_us: list[float]
    end_us: list[float]
    static_bytes: int


def _liveness(graph: Graph, estimate: Estimate, windows: Sequence[tuple[float, float]], *,
              resident: frozenset[str], latency_us: float, profile: Profile | None = None) -> _Live:
    """One pass over the layers: every buffer's live range (see the module docstring) and :func:`static_bytes`."""
    root: dict[str, str] = {}  # tensor -> the tensor whose buffer it shares
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    dtype: dict[str, str] = {}
    weights: dict[str, int] = {}
    for t in graph.inputs:
        root[t.name] = t.name
        start[t.name] = end[t.name] = 0.0
        dtype[t.name] = estimate.dtype
    temporaries: list[tuple[str, int, float, float]] = []
    tensors, constants = graph.tensors, graph.constants
    identities = weight_identities(graph)
    dtype_float_bytes = _FloatBytes()
    weight_float = _FloatBytes(profile)
    absorbed = estimate.absorbed  # run by another layer, which writes their outputs: no views
    for node, est, (begin, finish) in zip(graph.layers, estimate.layers, windows, strict=True):
        if est.bound is Bound.NONE and node.id not in absorbed:  # a view: its outputs share its data input's buffer
            acts = [name for name in node.inputs if name in root]
            for name in node.outputs:
                root[name] = root[acts[0]] if acts else name
                start.setdefault(root[name], begin)
                end[root[name]] = max(end.get(root[name], begin), finish)
            continue
        layer_dtype = est.dtype
        layer_float_bytes = dtype_float_bytes[layer_dtype]
        layer_weight_bytes = weight_float[layer_dtype]
        acts = []
        for name in node.inputs:
            if name in root:
                acts.append(name)
            if name in constants and name and (info := tensors.get(name)) is not None:  # a weight (static_bytes)
                size = info.elements * element_bytes(info, layer_weight_bytes)
                identity = identities.get(name, name)
                if size > weights.get(identity, -1):
                    weights[identity] = size
        for name in dict.fromkeys(acts) if len(acts) > 1 else acts:
            base = root[name]
            if finish > end[base]:  # noqa: PLR1730  # max() without its call: this runs for each input of 100k layers
                end[base] = finish
            if dtype[base] != layer_dtype and name and (info := tensors.get(name)) is not None and is_float(info):
                temporaries.append((f"{name}@{node.id}", info.elements * layer_float_bytes, begin, finish))
        for name in node.outputs:
            if name and name in tensors:
                root[name] = name
                start[name] = begin
                end[name] = finish
                dtype[name] = layer_dtype
    outputs = {t.name for t in graph.outputs}
    for name in outputs & root.keys():
        end[root[name]] = latency_us
    # the kind of each root buffer: input beats output beats on chip / DDR
    inputs = {t.name for t in graph.inputs}
    out_roots = {root[name] for name in outputs if name in root}
    live = _Live([], [], [], [], [], sum(weights.values()))
    fused = estimate.fused  # never written: no buffer holds them
    for name in dict.fromkeys(root.values()):
        if name in dtype and name and name not in fused and (info := tensors.get(name)) is not None:
            live.names.append(name)
            live.kinds.append(BufferKind.INPUT if name in inputs else BufferKind.OUTPUT if name in out_roots
                              else BufferKind.ON_CHIP if name in resident else BufferKind.DDR)
            live.nbytes.append(info.elements * element_bytes(info, dtype_float_bytes[dtype[name]]))
            live.start_us.append(start[name])
            live.end_us.append(end[name])
    for name, nbytes, begin, finish in temporaries:
        live.names.append(name)
        live.kinds.append(BufferKind.TEMPORARY)
        live.nbytes.append(nbytes)
        live.start_us.append(begin)
        live.end_us.append(finish)
    return live


class _FloatBytes(dict[str, int]):
    """Bytes of one float element at each dtype, looked up once: the feature maps'
    (:func:`~layerscope.estimator.roofline.float_element_bytes`), or, given a profile, the weights' as it stores them
    (:func:`~layerscope.estimator.roofline.weight_float_bytes`)."""

    def __init__(self, weights_on: Profile | None = None) -> None:
        super().__init__()
        self.weights_on = weights_on

    def __missing__(self, dtype: str) -> int:
        on = self.weights_on
        value = self[dtype] = float_element_bytes(dtype) if on is None else weight_float_bytes(on, dtype)
        return value


def peak_bytes(buffers: Sequence[Buffer]) -> dict[BufferKind | None, int]:
    """The peak live bytes of each kind, and of all buffers together under the key ``None``.

    At one instant, buffers whose range ends are freed before those that start are allocated, except
    that a buffer with an empty range (start = end) overlaps everything live at that instant.
    """
    return _peaks([b.nbytes for b in buffers], [b.start_us for b in buffers], [b.end_us for b in buffers],
                  [b.kind for b in buffers])


def _peaks(nbytes: Sequence[int], start_us: Sequence[float], end_us: Sequence[float],
           kinds: Sequence[BufferKind]) -> dict[BufferKind | None, int]:
    """:func:`peak_bytes` of the buffers given as columns: the allocations (+bytes at the start) and frees (-bytes at
    the end; after the allocations at that instant for an empty range, before them otherwise) in time order, each
    kind's running sum and the overall one, and their maxima (at least 0)."""
    peak: dict[BufferKind | None, int] = dict.fromkeys((*BufferKind, None), 0)
    if not nbytes:
        return peak
    size = np.asarray(nbytes, dtype=object)  # Python ints: no overflow
    begin = np.asarray(start_us, dtype=np.float64)
    finish = np.asarray(end_us, dtype=np.float64)
    kind = np.asarray(kinds, dtype=object)
    # events interleaved as buffer 0's allocation, its free, buffer 1's ...: a stable sort by (time, rank) keeps that
    # order on full ties
    times = np.stack([begin, finish], axis=1).ravel()
    ranks = np.stack([np.ones(len(begin), dtype=np.int8), np.where(finish > begin, 0, 2).astype(np.int8)],
                     axis=1).ravel()
    deltas = np.stack([size, -size], axis=1).ravel()
    order = np.lexsort((ranks, times))
    deltas, event_kind = deltas[order], np.repeat(kind, 2)[order]
    for key in (*BufferKind, None):
        picked = deltas if key is None else deltas[event_kind == key]
        if len(picked):
            peak[key] = max(0, np.cumsum(picked).max())
    return peak
