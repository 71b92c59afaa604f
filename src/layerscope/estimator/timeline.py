"""A static performance model of one frame on an NPU: a timeline per unit and core, DDR bandwidth over
time, and the memory plan. Deterministic, an estimate, never a measurement.

What the model assumes (also in the README, "NPU timeline and memory plan"):

- **Per-layer costs come from the roofline** (:func:`layerscope.estimator.estimate_graph`, unchanged):
  the compute time on the layer's unit, the overhead, and the DDR time of its loads (weights and
  inputs not resident on chip, weight passes included) and stores (outputs not resident), with the
  same on-chip residency policy and the same CPU fallback.
- **A layer is a tile pipeline**: it takes its unit at ``active_start``, spends its overhead, then
  computes while its LOAD burst streams in; its compute cannot finish before its last input arrived;
  its STORE burst starts after its last load and ends no earlier than its compute (at that end when
  the channel allows). Alone, a layer therefore takes exactly its roofline latency,
  ``overhead + max(compute, load + store)``; a chain of layers, their sum.
- **Units run in parallel where dependencies allow**. Each compute unit (and the CPU that fallback
  layers run on, hand-off included in their overhead) runs its layers one at a time in graph order,
  and is free again when the layer's compute ends (its store drains meanwhile). A layer starts after
  every layer it reads from has ended (stored its outputs).
- **DDR is one channel**: LOAD and STORE bursts of all layers (the CPU's at the CPU's bandwidth) go
  one at a time, at full bandwidth, so they share it. Their order on the channel is fixed by a
  reference schedule in which DDR is infinitely fast (compute and overheads only), ties broken by
  graph order; every start time is then a max-plus function of the durations. So shorter durations
  (more bandwidth, more SRAM, faster units) never make any time later, and the result is identical
  for identical inputs.
- **Multi-core profiles split by batch**: with ``cores = k`` (NPU profiles; a GPU's SMs and a CPU's
  cores act as one device, as in the roofline), each core runs the whole model on its own frame, with
  ``1/k`` of every rate, of the DDR bandwidth, of the CPU and of the SRAM (profiles give aggregates).
  All cores run the same schedule, so one frame is simulated; the per-core tracks are copies of it,
  DDR rates over time are summed over the cores, and a frame never crosses cores: cross-core transfer
  bytes are 0 by construction.
- Meant for NPUs, whose engines run side by side: on a GPU or CPU profile, where one stream runs
  kernels in order, the overlap between units is optimistic.
- Not modelled: prefetching a layer's weights before it starts, splitting one layer over several
  units, DDR bank or page effects, the CPU's own caches.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from layerscope.costs import cost_graph
from layerscope.costs.types import LayerCost
from layerscope.estimator.memory import MemoryPlan, plan_memory
from layerscope.estimator.roofline import estimate_graph, resident_tensors
from layerscope.estimator.types import Bound, Estimate, LayerEstimate
from layerscope.model.types import Graph
from layerscope.targets import Profile
from layerscope.targets.profile import ComputeUnit

#: Names of the two DDR tracks, as Horizon's Timeline calls them.
LOAD = "LOAD"
STORE = "STORE"
#: How one frame's work is split over the cores of a multi-core profile.
SPLIT = "batch"
#: Op types whose MACs count as "conv MACs" (Horizon's "BPU conv original OPs").
CONV_OPS = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"})
DEFAULT_INTERVALS = 100

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Interval:
    """``[start_us, end_us]`` in microseconds from the start of the frame."""

    start_us: float
    end_us: float

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True, slots=True)
class LayerSpan:
    """One layer in the schedule of one frame (times in µs from the frame's start).

    ``active``: from taking its unit to its last output stored (Horizon's "active period": layers
    overlap, so it is not the layer's own time). ``compute``: after the overhead, until its compute
    ended, which is no earlier than its last load. ``load`` / ``store``: its DDR bursts, ``None``
    without DDR traffic. ``compute_us``, ``overhead_us``, ``load_us``, ``store_us``,
    ``bytes_loaded``, ``bytes_stored``: its costs (the roofline's). ``core``: the core running this
    frame, 0 (in a batch split every other core runs its own frame the same way). A zero-copy view has
    unit ``"-"`` and an empty ``active`` interval at the moment its input is ready.
    """

    layer_id: str
    unit: str
    core: int
    active: Interval
    compute: Interval
    load: Interval | None
    store: Interval | None
    compute_us: float
    overhead_us: float
    load_us: float
    store_us: float
    bytes_loaded: int
    bytes_stored: int


@dataclass(frozen=True, slots=True)
class Busy:
    """One layer occupying a track over ``[start_us, end_us]``."""

    layer_id: str
    start_us: float
    end_us: float


@dataclass(frozen=True, eq=False)
class Track:
    """One row of the timeline: a compute unit (or ``LOAD`` / ``STORE``) of one core, busy intervals in
    time order (they never overlap). A compute unit is busy with a layer from its active start (the
    overhead first) to its compute end; ``LOAD`` / ``STORE`` with its bursts.

    Held as columns, one entry per busy interval: ``layer_ids``, ``start_us``, ``end_us`` (the cores of a batch
    split share them); :attr:`busy` is the same intervals as :class:`Busy` records, built on first use."""

    name: str
    core: int
    layer_ids: tuple[str, ...]
    start_us: FloatArray
    end_us: FloatArray

    @cached_property
    def busy(self) -> tuple[Busy, ...]:
        return tuple(map(Busy, self.layer_ids, self.start_us.tolist(), self.end_us.tolist()))

    @cached_property
    def busy_us(self) -> float:
        """The busy intervals' lengths added in time order (``0`` when idle)."""
        lengths_us: list[float] = (self.end_us - self.start_us).tolist()
        return sum(lengths_us)


@dataclass(frozen=True, eq=False)
class Schedule:
    """One frame's schedule as columns: entry ``i`` of each is layer ``i``'s (graph order), the fields of its
    :class:`LayerSpan` (:meth:`span` builds it). Times in µs from the frame's start; ``load_*`` / ``store_*`` are
    NaN where ``has_load`` / ``has_store`` is false (no burst); a view's costs are 0."""

    layer_ids: tuple[str, ...]
    units: tuple[str, ...]
    active_start_us: FloatArray
    active_end_us: FloatArray
    compute_start_us: FloatArray
    compute_end_us: FloatArray
    load_start_us: FloatArray
    load_end_us: FloatArray
    store_start_us: FloatArray
    store_end_us: FloatArray
    has_load: npt.NDArray[np.bool_]
    has_store: npt.NDArray[np.bool_]
    compute_us: FloatArray
    overhead_us: FloatArray
    load_us: FloatArray
    store_us: FloatArray
    bytes_loaded: tuple[int, ...]
    bytes_stored: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.layer_ids)

    def spans(self) -> tuple[LayerSpan, ...]:
        """Every layer's :class:`LayerSpan`, graph order."""
        cols = [c.tolist() for c in (self.active_start_us, self.active_end_us, self.compute_start_us,
                                     self.compute_end_us, self.load_start_us, self.load_end_us, self.store_start_us,
                                     self.store_end_us, self.compute_us, self.overhead_us, self.load_us,
                                     self.store_us)]
        loads, stores = self.has_load.tolist(), self.has_store.tolist()
        return tuple(
            LayerSpan(lid, unit, 0, Interval(a0, a1), Interval(c0, c1), Interval(l0, l1) if has_l else None,
                      Interval(s0, s1) if has_s else None, cu, ou, lu, su, bl, bs)
            for lid, unit, a0, a1, c0, c1, l0, l1, s0, s1, cu, ou, lu, su, has_l, has_s, bl, bs in zip(
                self.layer_ids, self.units, *cols, loads, stores, self.bytes_loaded, self.bytes_stored, strict=True))


@dataclass(frozen=True)
class TimeBins:
    """The frame cut into equal intervals of ``interval_us`` (Horizon's "Temporal Statistics").

    Per interval: DDR load and store rates in MB/s (10^6 bytes per second; bytes per µs), summed over
    the cores; ``ddr_utilization`` the fraction of it the channel of one core is busy; and per
    compute unit the fraction of it the unit computes (a layer's compute time spread evenly over its
    ``compute`` interval; overheads excluded).
    """

    interval_us: float
    load_mb_per_s: tuple[float, ...]
    store_mb_per_s: tuple[float, ...]
    ddr_utilization: tuple[float, ...]
    utilization: Mapping[str, tuple[float, ...]]


@dataclass(frozen=True)
class Timeline:
    """One frame scheduled on a profile: spans per layer (graph order), tracks, bins and memory.

    ``estimate`` is the roofline of one core's share of the profile (the whole profile when
    ``cores`` is 1), which the schedule takes its costs from; ``bandwidth_bytes_per_s`` (attainable: the fastest
    rate bytes move at on the channel, a profile's ``weight_ddr_efficiency`` included) and ``sram_bytes`` are that
    share's. ``schedule``: the spans as columns (:attr:`layers` builds the
    :class:`LayerSpan` records from it on first use).
    """

    profile_name: str
    dtype: str
    split: str
    cores: int
    schedule: Schedule
    tracks: tuple[Track, ...]
    bins: TimeBins
    memory: MemoryPlan
    estimate: Estimate
    bandwidth_bytes_per_s: float
    sram_bytes: int

    @cached_property
    def layers(self) -> tuple[LayerSpan, ...]:
        """One span per layer, graph order."""
        return self.schedule.spans()

    @property
    def latency_us(self) -> float:
        """End of the frame: the latest active end."""
        ends = self.schedule.active_end_us
        return float(ends.max()) if len(ends) else 0.0

    @property
    def fps_per_core(self) -> float | None:
        return 1e6 / self.latency_us if self.latency_us > 0 else None

    @property
    def fps_total(self) -> float | None:
        fps = self.fps_per_core
        return None if fps is None else fps * self.cores

    @property
    def serial_latency_us(self) -> float:
        """The roofline's answer on the same share: every layer after the previous one. Like the schedule, it leaves
        out the profile's per-inference task overhead (:attr:`Estimate.task_overhead_us`), so the two compare."""
        return self.estimate.layers_us

    @property
    def ddr_bytes(self) -> int:
        """DDR bytes of one frame (loads and stores)."""
        return self.estimate.ddr_bytes

    @property
    def ddr_busy_us(self) -> float:
        """Time the DDR channel of one core is busy in one frame: a lower bound of the latency."""
        return sum(t.busy_us for t in self.tracks if t.core == 0 and t.name in (LOAD, STORE))

    @property
    def macs(self) -> int:
        return sum(c.macs for c in self.estimate.costs)

    @property
    def conv_macs(self) -> int:
        return sum(c.macs for c in self.estimate.costs if c.op_type in CONV_OPS)

    @property
    def cross_core_bytes(self) -> int:
        """Bytes moved between cores: 0, as a batch split keeps each frame on one core."""
        return 0

    @property
    def busiest_unit(self) -> Track | None:
        """The compute-unit track of core 0 busy longest (the first in profile order on a tie)."""
        return max(self.unit_tracks(), key=lambda t: t.busy_us, default=None)

    @property
    def bound(self) -> str:
        """What bounds the latency from below: ``"DDR"`` or the busiest unit's name."""
        busiest = self.busiest_unit
        if busiest is None or self.ddr_busy_us >= busiest.busy_us:
            return "DDR"
        return busiest.name

    def unit_tracks(self, core: int = 0) -> tuple[Track, ...]:
        """The compute-unit tracks of ``core`` (``LOAD`` and ``STORE`` left out)."""
        return tuple(t for t in self.tracks if t.core == core and t.name not in (LOAD, STORE))


def simulate_timeline(graph: Graph, profile: Profile, dtype: str | None = None, *,
                      costs: Sequence[LayerCost] | None = None, intervals: int = DEFAULT_INTERVALS,
                      cores: int | None = None, estimate: Estimate | None = None) -> Timeline:
    """Schedule one frame of ``graph`` on ``profile`` (see the module docstring for the model).

    ``dtype``: the deployed dtype (default: the profile's). ``costs``: the layers' costs when already
    computed. ``intervals``: how many equal intervals the bandwidth statistics cut the frame into.
    ``cores``: how many cores split the work by batch (default: the profile's for an NPU, else 1).
    ``estimate``: the roofline of ``graph`` on ``profile`` at ``dtype`` when already computed; reused when one
    core runs the frame (the schedule's share is then the whole profile), else computed on the share.
    """
    if intervals < 1:
        raise ValueError(f"intervals must be at least 1, not {intervals}")
    cores = default_cores(profile) if cores is None else cores
    if cores < 1:
        raise ValueError(f"cores must be at least 1, not {cores}")
    share = core_share(profile, cores)
    reuse = (estimate is not None and share is profile and estimate.profile_name == profile.name
             and estimate.dtype == (dtype or profile.default_dtype) and len(estimate.layers) == len(graph.layers))
    if estimate is None or not reuse:
        costs = tuple(costs) if costs is not None else cost_graph(graph)
        estimate = estimate_graph(graph, share, dtype, costs)
    costs = estimate.costs
    schedule = _schedule(graph, estimate)
    ends = schedule.active_end_us
    latency_us = float(ends.max()) if len(ends) else 0.0
    tracks = _tracks(share, schedule, cores)
    resident = estimate.resident
    if resident is None:
        on_cpu = [e.fallback_reason is not None for e in estimate.layers]
        resident = resident_tensors(graph, share, estimate.dtype, costs, on_cpu)
    windows = list(zip(schedule.active_start_us.tolist(), ends.tolist(), strict=True))
    memory = plan_memory(graph, estimate, windows, resident=resident, latency_us=latency_us, frames_in_flight=cores,
                         profile=share)
    fastest = max(share.attainable_ddr_bytes_per_s, share.attainable_weight_ddr_bytes_per_s)
    return Timeline(profile_name=profile.name, dtype=estimate.dtype, split=SPLIT, cores=cores, schedule=schedule,
                    tracks=tracks, bins=_bins(schedule, tracks, latency_us, intervals, cores), memory=memory,
                    estimate=estimate, bandwidth_bytes_per_s=fastest, sram_bytes=share.sram_bytes)


def default_cores(profile: Profile) -> int:
    """How many cores a batch split uses: the profile's cores on an NPU; 1 elsewhere (the roofline's
    view of a GPU's SMs or a CPU's cores: one device that every layer uses whole)."""
    return profile.cores if profile.kind == "npu" else 1


def core_share(profile: Profile, cores: int) -> Profile:
    """One core's share of ``profile`` when ``cores`` cores each run their own frame.

    Every rate (units and CPU), both DDR bandwidths and the SRAM are divided by ``cores``; overheads
    stay. ``cores == 1`` returns ``profile`` itself.
    """
    if cores == 1:
        return profile

    def scaled(unit: ComputeUnit) -> ComputeUnit:
        peaks = MappingProxyType({k: v / cores for k, v in unit.peak_ops_per_s.items()})
        return dataclasses.replace(unit, peak_ops_per_s=peaks)

    return dataclasses.replace(
        profile, units=tuple(scaled(u) for u in profile.units), cpu=scaled(profile.cpu),
        ddr_bandwidth_bytes_per_s=profile.ddr_bandwidth_bytes_per_s / cores,
        cpu_ddr_bandwidth_bytes_per_s=profile.cpu_ddr_bandwidth_bytes_per_s / cores,
        sram_bytes=profile.sram_bytes // cores, cores=1)


class _Phase(IntEnum):
    """The events of one layer, in the order the schedule evaluates them at equal reference times."""

    START = 0
    LOAD = 1
    FINISH = 2


def _producers(graph: Graph) -> list[tuple[int, ...]]:
    """For each layer, the indices of the layers whose outputs it reads."""
    made_by: dict[str, int] = {}
    result: list[tuple[int, ...]] = []
    for idx, node in enumerate(graph.layers):
        found = [made_by[name] for name in node.inputs if name in made_by]
        result.append(tuple(dict.fromkeys(found)) if len(found) > 1 else tuple(found))
        for name in node.outputs:
            made_by[name] = idx
    return result


def _is_view(est: LayerEstimate) -> bool:
    return est.bound is Bound.NONE


@dataclass(frozen=True)
class _Costs:
    """The roofline's costs the schedule reads, one list entry per layer (graph order); a view's are 0."""

    views: list[bool]
    units: list[str]
    overhead_us: list[float]
    compute_us: list[float]
    load_us: list[float]
    store_us: list[float]
    bytes_loaded: list[int]
    bytes_stored: list[int]

    @classmethod
    def of(cls, estimate: Estimate) -> _Costs:
        layers = estimate.layers
        views = [_is_view(e) for e in layers]
        return cls(views, [e.unit for e in layers],
                   [0.0 if v else e.overhead_us for v, e in zip(views, layers, strict=True)],
                   [0.0 if v else e.compute_us for v, e in zip(views, layers, strict=True)],
                   [0.0 if v else e.load_us for v, e in zip(views, layers, strict=True)],
                   [0.0 if v else e.store_us for v, e in zip(views, layers, strict=True)],
                   [0 if v else e.ddr_read_bytes for v, e in zip(views, layers, strict=True)],
                   [0 if v else e.ddr_write_bytes for v, e in zip(views, layers, strict=True)])


def _reference_order(costs: _Costs, producers: Sequence[tuple[int, ...]]) -> tuple[list[int], list[int]]:
    """The events of every layer (layer index, :class:`_Phase`), ordered by a schedule with infinitely fast DDR
    (compute and overhead only), ties by graph order then phase. The real schedule evaluates them in this order,
    which fixes the order of the DDR bursts independently of any DDR time."""
    end = [0.0] * len(costs.views)
    unit_free: dict[str, float] = {}
    times: list[float] = []
    layer: list[int] = []
    phase: list[int] = []
    overhead, compute, reads = costs.overhead_us, costs.compute_us, costs.bytes_loaded
    # the phases as plain ints (numpy reads an enum member a slow way)
    started, loads, finished = int(_Phase.START), int(_Phase.LOAD), int(_Phase.FINISH)
    with_load, without_load = (started, loads, finished), (started, finished)
    for idx, (view, unit) in enumerate(zip(costs.views, costs.units, strict=True)):
        ready = 0.0
        for p in producers[idx]:
            if end[p] > ready:  # noqa: PLR1730  # max() without its call, for every input of 100k layers
                ready = end[p]
        if view:
            end[idx] = ready
            times.append(ready)
            layer.append(idx)
            phase.append(started)
            continue
        free = unit_free.get(unit, 0.0)
        start = ready if ready >= free else free
        body = start + overhead[idx]
        end[idx] = unit_free[unit] = body + compute[idx]
        if reads[idx]:
            times += (start, body, end[idx])
            layer += (idx, idx, idx)
            phase += with_load
        else:
            times += (start, end[idx])
            layer += (idx, idx)
            phase += without_load
    # the events were made in (layer, phase) order: a stable sort by time alone orders them by all three
    order = np.argsort(np.asarray(times, dtype=np.float64), kind="stable")
    return np.asarray(layer, dtype=np.int64)[order].tolist(), np.asarray(phase, dtype=np.int8)[order].tolist()


def _schedule(graph: Graph, estimate: Estimate) -> Schedule:
    """The earliest start of every event given the unit orders (graph order) and the DDR order of
    :func:`_reference_order`: every time is a max of sums of durations (see the module docstring)."""
    producers = _producers(graph)
    costs = _Costs.of(estimate)
    n = len(costs.views)
    views, units = costs.views, costs.units
    overhead, compute, load, store = costs.overhead_us, costs.compute_us, costs.load_us, costs.store_us
    reads, writes = costs.bytes_loaded, costs.bytes_stored
    nan = math.nan
    start = [0.0] * n
    body = [0.0] * n
    end = [0.0] * n
    compute_end = [0.0] * n
    load_start, load_end, store_start, store_end = [nan] * n, [nan] * n, [nan] * n, [nan] * n
    unit_free: dict[str, float] = {}
    ddr_free = 0.0
    start_phase, load_phase = int(_Phase.START), int(_Phase.LOAD)  # plain ints: an enum's == is a call
    for idx, phase in zip(*_reference_order(costs, producers), strict=True):
        if phase == start_phase:
            ready = 0.0
            for p in producers[idx]:
                if end[p] > ready:  # noqa: PLR1730  # as in _reference_order
                    ready = end[p]
            if views[idx]:  # a view: an empty window the moment its input is ready
                start[idx] = body[idx] = compute_end[idx] = end[idx] = ready
                continue
            free = unit_free.get(units[idx], 0.0)
            start[idx] = begin = ready if ready >= free else free
            body[idx] = begin + overhead[idx]
        elif phase == load_phase:
            begin = body[idx] if body[idx] >= ddr_free else ddr_free
            load_start[idx] = begin
            load_end[idx] = ddr_free = begin + load[idx]
        else:
            loaded = load_end[idx] if reads[idx] else body[idx]
            done = max(body[idx] + compute[idx], loaded)
            compute_end[idx] = done
            if writes[idx]:
                finish = max(done, max(ddr_free, loaded) + store[idx])
                store_start[idx] = finish - store[idx]
                store_end[idx] = ddr_free = finish
                end[idx] = finish
            else:
                end[idx] = done
            unit_free[units[idx]] = done

    def column(values: list[float]) -> FloatArray:
        return np.asarray(values, dtype=np.float64)

    return Schedule(
        layer_ids=tuple(e.layer_id for e in estimate.layers), units=tuple(units),
        active_start_us=column(start), active_end_us=column(end), compute_start_us=column(body),
        compute_end_us=column(compute_end), load_start_us=column(load_start), load_end_us=column(load_end),
        store_start_us=column(store_start), store_end_us=column(store_end),
        has_load=np.asarray([bool(b) for b in reads], dtype=bool),
        has_store=np.asarray([bool(b) for b in writes], dtype=bool),
        compute_us=column(compute), overhead_us=column(overhead), load_us=column(load), store_us=column(store),
        bytes_loaded=tuple(reads), bytes_stored=tuple(writes))


def _tracks(profile: Profile, schedule: Schedule, cores: int) -> tuple[Track, ...]:
    """Every unit of the profile (idle ones included), the CPU, then LOAD and STORE (then any other unit a layer
    ran on), for each core; the busy intervals of each in order of start (graph order on a tie)."""
    names = list(dict.fromkeys([*(u.name for u in profile.units), profile.cpu.name]))
    members: dict[str, list[int]] = {name: [] for name in (*names, LOAD, STORE)}
    for idx, unit in enumerate(schedule.units):
        if unit != "-":
            members.setdefault(unit, []).append(idx)
    ids = schedule.layer_ids
    lanes: list[tuple[str, tuple[str, ...], FloatArray, FloatArray]] = []
    for name, rows in members.items():
        if name == LOAD:
            picked = np.flatnonzero(schedule.has_load)
            starts, ends = schedule.load_start_us[picked], schedule.load_end_us[picked]
        elif name == STORE:
            picked = np.flatnonzero(schedule.has_store)
            starts, ends = schedule.store_start_us[picked], schedule.store_end_us[picked]
        else:
            picked = np.asarray(rows, dtype=np.int64)
            starts, ends = schedule.active_start_us[picked], schedule.compute_end_us[picked]
        order = np.argsort(starts, kind="stable")
        lanes.append((name, tuple(ids[i] for i in picked[order].tolist()), starts[order], ends[order]))
    return tuple(Track(name, core, layer_ids, starts, ends)
                 for core in range(cores) for name, layer_ids, starts, ends in lanes)


def _bins(schedule: Schedule, tracks: Sequence[Track], latency_us: float, count: int, cores: int) -> TimeBins:
    """Per-interval DDR rates and unit utilization (see :class:`TimeBins`).

    Every span's amount is spread over the intervals it overlaps, and each interval adds its shares in graph order
    (a layer's load before its store): the sums are those of adding them one layer at a time."""
    width = latency_us / count
    units = [t.name for t in tracks if t.core == 0 and t.name not in (LOAD, STORE)]
    if not width > 0:
        zeros = (0.0,) * count
        return TimeBins(width, zeros, zeros, zeros, MappingProxyType(dict.fromkeys(units, zeros)))
    s = schedule
    loads, stores = np.flatnonzero(s.has_load), np.flatnonzero(s.has_store)
    bytes_loaded = np.asarray(s.bytes_loaded, dtype=np.int64)[loads] * cores
    bytes_stored = np.asarray(s.bytes_stored, dtype=np.int64)[stores] * cores
    load = _Shares(s.load_start_us[loads], s.load_end_us[loads], width, count)
    store = _Shares(s.store_start_us[stores], s.store_end_us[stores], width, count)
    ddr_order = np.argsort(np.concatenate([2 * loads[load.span], 2 * stores[store.span] + 1]), kind="stable")
    ddr = np.concatenate([load.of(load.duration_us), store.of(store.duration_us)])[ddr_order]
    ddr_bins = np.concatenate([load.bins, store.bins])[ddr_order]
    utilization: dict[str, tuple[float, ...]] = {}
    unit_of = np.asarray(s.units, dtype=object)
    for name in units:
        rows = np.flatnonzero((unit_of == name) & (s.compute_us > 0))
        compute = _Shares(s.compute_start_us[rows], s.compute_end_us[rows], width, count)
        utilization[name] = _per_us(compute.add(s.compute_us[rows]), width)
    return TimeBins(width, _per_us(load.add(bytes_loaded), width), _per_us(store.add(bytes_stored), width),
                    _per_us(_accumulate(ddr_bins, ddr, count), width), MappingProxyType(utilization))


def _per_us(values: FloatArray, width: float) -> tuple[float, ...]:
    return tuple((values / width).tolist())


def _accumulate(bins: IntArray, amounts: FloatArray, count: int) -> FloatArray:
    """``count`` sums, ``amounts[i]`` added to sum ``bins[i]`` one after another in order."""
    total = np.zeros(count, dtype=np.float64)
    np.add.at(total, bins, amounts)
    return total


class _Shares:
    """How spans ``[start_us, end_us]`` cut over ``count`` intervals of ``width`` µs: one piece per span and interval
    it overlaps (in span order), as a span of zero length is one piece in the interval it falls in. The last
    interval runs to the span's end (a frame's last end may round past ``count * width``)."""

    def __init__(self, start_us: FloatArray, end_us: FloatArray, width: float, count: int) -> None:
        last_bin = count - 1
        first = np.minimum((start_us / width).astype(np.int64), last_bin)
        last = np.minimum((end_us / width).astype(np.int64), last_bin)
        self.duration_us = end_us - start_us
        moment = ~(self.duration_us > 0)
        pieces = np.where(moment, 1, last - first + 1)
        span = np.repeat(np.arange(len(start_us)), pieces)
        offset = np.arange(len(span)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        k = first[span] + offset
        lo = np.maximum(start_us[span], k * width)
        hi = np.where(k < last_bin, np.minimum(end_us[span], (k + 1) * width), end_us[span])
        instant = moment[span]
        keep = instant | (hi > lo)
        self.span = span[keep]
        self.bins = k[keep]
        self._overlap_us = np.where(instant, np.nan, hi - lo)[keep]
        self._instant = instant[keep]
        self._count = count

    def of(self, amount: FloatArray | IntArray) -> FloatArray:
        """Each piece's share of its span's ``amount`` (spread evenly over the span; all of it for an empty one)."""
        amount = np.asarray(amount)[self.span]
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = amount / self.duration_us[self.span]
        return np.where(self._instant, amount, rate * self._overlap_us).astype(np.float64)

    def add(self, amount: FloatArray | IntArray) -> FloatArray:
        """Per interval, the sum of the shares of ``amount`` (one entry per span) that fall in it."""
        return _accumulate(self.bins, self.of(amount), self._count)


__all__ = [
    "CONV_OPS",
    "DEFAULT_INTERVALS",
    "LOAD",
    "SPLIT",
    "STORE",
    "Busy",
    "Interval",
    "LayerSpan",
    "Schedule",
    "TimeBins",
    "Timeline",
    "Track",
    "core_share",
    "default_cores",
    "simulate_timeline",
]
