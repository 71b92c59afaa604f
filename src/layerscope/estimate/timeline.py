"""A static performance model of one frame on an NPU: a timeline per unit and core, DDR bandwidth over
time, and the memory plan. Deterministic, an estimate, never a measurement.

What the model assumes (also in the README, "NPU timeline and memory plan"):

- **Per-layer costs come from the roofline** (:func:`layerscope.estimate.estimate_graph`, unchanged):
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType

from layerscope.costs import cost_graph
from layerscope.costs.types import LayerCost
from layerscope.estimate.memory import MemoryPlan, plan_memory
from layerscope.estimate.roofline import estimate_graph, resident_tensors
from layerscope.estimate.types import Bound, Estimate, LayerEstimate
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


@dataclass(frozen=True)
class Track:
    """One row of the timeline: a compute unit (or ``LOAD`` / ``STORE``) of one core, busy intervals in
    time order (they never overlap). A compute unit is busy with a layer from its active start (the
    overhead first) to its compute end; ``LOAD`` / ``STORE`` with its bursts."""

    name: str
    core: int
    busy: tuple[Busy, ...]

    @property
    def busy_us(self) -> float:
        return sum(b.end_us - b.start_us for b in self.busy)


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
    ``cores`` is 1), which the schedule takes its costs from; ``bandwidth_bytes_per_s`` (attainable)
    and ``sram_bytes`` are that share's.
    """

    profile_name: str
    dtype: str
    split: str
    cores: int
    layers: tuple[LayerSpan, ...]
    tracks: tuple[Track, ...]
    bins: TimeBins
    memory: MemoryPlan
    estimate: Estimate
    bandwidth_bytes_per_s: float
    sram_bytes: int

    @property
    def latency_us(self) -> float:
        """End of the frame: the latest active end."""
        return max((s.active.end_us for s in self.layers), default=0.0)

    @property
    def fps_per_core(self) -> float | None:
        return 1e6 / self.latency_us if self.latency_us > 0 else None

    @property
    def fps_total(self) -> float | None:
        fps = self.fps_per_core
        return None if fps is None else fps * self.cores

    @property
    def serial_latency_us(self) -> float:
        """The roofline's answer on the same share: every layer after the previous one."""
        return self.estimate.latency_us

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
    spans = _schedule(graph, estimate)
    latency_us = max((s.active.end_us for s in spans), default=0.0)
    tracks = _tracks(share, spans, cores)
    resident = estimate.resident
    if resident is None:
        on_cpu = [e.fallback_reason is not None for e in estimate.layers]
        resident = resident_tensors(graph, share, estimate.dtype, costs, on_cpu)
    memory = plan_memory(graph, estimate, [(s.active.start_us, s.active.end_us) for s in spans],
                         resident=resident, latency_us=latency_us, frames_in_flight=cores)
    return Timeline(profile_name=profile.name, dtype=estimate.dtype, split=SPLIT, cores=cores, layers=spans,
                    tracks=tracks, bins=_bins(spans, tracks, latency_us, intervals, cores), memory=memory,
                    estimate=estimate, bandwidth_bytes_per_s=share.attainable_ddr_bytes_per_s,
                    sram_bytes=share.sram_bytes)


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
        result.append(tuple(dict.fromkeys(made_by[name] for name in node.inputs if name in made_by)))
        for name in node.outputs:
            made_by[name] = idx
    return result


def _is_view(est: LayerEstimate) -> bool:
    return est.bound is Bound.NONE


def _reference_events(estimate: Estimate, producers: Sequence[tuple[int, ...]]) -> list[tuple[float, int, _Phase]]:
    """The events of every layer, ordered by a schedule with infinitely fast DDR (compute and overhead
    only), ties by graph order then phase. The real schedule evaluates them in this order, which fixes
    the order of the DDR bursts independently of any DDR time."""
    end: list[float] = []
    unit_free: dict[str, float] = {}
    events: list[tuple[float, int, _Phase]] = []
    for idx, est in enumerate(estimate.layers):
        ready = max((end[p] for p in producers[idx]), default=0.0)
        if _is_view(est):
            end.append(ready)
            events.append((ready, idx, _Phase.START))
            continue
        start = max(ready, unit_free.get(est.unit, 0.0))
        body = start + est.overhead_us
        end.append(body + est.compute_us)
        unit_free[est.unit] = end[-1]
        events.append((start, idx, _Phase.START))
        if est.ddr_read_bytes:
            events.append((body, idx, _Phase.LOAD))
        events.append((end[-1], idx, _Phase.FINISH))
    events.sort()
    return events


@dataclass
class _Open:
    """A layer being scheduled: times known so far."""

    start: float
    body: float
    load: Interval | None = None


def _schedule(graph: Graph, estimate: Estimate) -> tuple[LayerSpan, ...]:
    """The earliest start of every event given the unit orders (graph order) and the DDR order of
    :func:`_reference_events`: every time is a max of sums of durations (see the module docstring)."""
    producers = _producers(graph)
    layers = estimate.layers
    end: dict[int, float] = {}
    unit_free: dict[str, float] = {}
    ddr_free = 0.0
    open_: dict[int, _Open] = {}
    spans: dict[int, LayerSpan] = {}
    for _, idx, phase in _reference_events(estimate, producers):
        est = layers[idx]
        if phase is _Phase.START:
            ready = max((end[p] for p in producers[idx]), default=0.0)
            if _is_view(est):
                end[idx] = ready
                spans[idx] = _view_span(est, ready)
                continue
            start = max(ready, unit_free.get(est.unit, 0.0))
            open_[idx] = _Open(start, start + est.overhead_us)
        elif phase is _Phase.LOAD:
            layer = open_[idx]
            begin = max(layer.body, ddr_free)
            layer.load = Interval(begin, begin + est.load_us)
            ddr_free = layer.load.end_us
        else:
            layer = open_.pop(idx)
            loaded = layer.load.end_us if layer.load else layer.body
            compute_end = max(layer.body + est.compute_us, loaded)
            store = None
            if est.ddr_write_bytes:
                finish = max(compute_end, max(ddr_free, loaded) + est.store_us)
                store = Interval(finish - est.store_us, finish)
                ddr_free = finish
            end[idx] = store.end_us if store else compute_end
            unit_free[est.unit] = compute_end
            spans[idx] = _span(est, layer, compute_end, store, end[idx])
    return tuple(spans[idx] for idx in range(len(layers)))


def _span(est: LayerEstimate, layer: _Open, compute_end: float, store: Interval | None, end: float) -> LayerSpan:
    return LayerSpan(est.layer_id, est.unit, 0, Interval(layer.start, end), Interval(layer.body, compute_end),
                     layer.load, store, est.compute_us, est.overhead_us, est.load_us, est.store_us,
                     est.ddr_read_bytes, est.ddr_write_bytes)


def _view_span(est: LayerEstimate, at: float) -> LayerSpan:
    moment = Interval(at, at)
    return LayerSpan(est.layer_id, est.unit, 0, moment, moment, None, None, 0.0, 0.0, 0.0, 0.0, 0, 0)


def _tracks(profile: Profile, spans: Sequence[LayerSpan], cores: int) -> tuple[Track, ...]:
    """Every unit of the profile (idle ones included), the CPU, then LOAD and STORE, for each core."""
    names = list(dict.fromkeys([*(u.name for u in profile.units), profile.cpu.name]))
    busy: dict[str, list[Busy]] = {name: [] for name in (*names, LOAD, STORE)}
    for s in spans:
        if s.unit != "-":
            busy.setdefault(s.unit, []).append(Busy(s.layer_id, s.active.start_us, s.compute.end_us))
        if s.load:
            busy[LOAD].append(Busy(s.layer_id, s.load.start_us, s.load.end_us))
        if s.store:
            busy[STORE].append(Busy(s.layer_id, s.store.start_us, s.store.end_us))
    ordered = {name: tuple(sorted(items, key=lambda b: b.start_us)) for name, items in busy.items()}
    return tuple(Track(name, core, items) for core in range(cores) for name, items in ordered.items())


def _bins(spans: Sequence[LayerSpan], tracks: Sequence[Track], latency_us: float, count: int,
          cores: int) -> TimeBins:
    """Per-interval DDR rates and unit utilization (see :class:`TimeBins`)."""
    width = latency_us / count
    load = [0.0] * count
    store = [0.0] * count
    ddr = [0.0] * count
    units = {t.name: [0.0] * count for t in tracks if t.core == 0 and t.name not in (LOAD, STORE)}
    for s in spans:
        if s.load:
            _spread(load, s.load, s.bytes_loaded * cores, width)
            _spread(ddr, s.load, s.load.duration_us, width)
        if s.store:
            _spread(store, s.store, s.bytes_stored * cores, width)
            _spread(ddr, s.store, s.store.duration_us, width)
        if s.unit in units and s.compute_us > 0:
            _spread(units[s.unit], s.compute, s.compute_us, width)

    def per_us(values: list[float]) -> tuple[float, ...]:
        return tuple(v / width if width > 0 else 0.0 for v in values)

    return TimeBins(width, per_us(load), per_us(store), per_us(ddr),
                    MappingProxyType({name: per_us(values) for name, values in units.items()}))


def _spread(bins: list[float], span: Interval, amount: float, width: float) -> None:
    """Add ``amount``, spread evenly over ``span``, to the bins of ``width`` µs it overlaps."""
    if width <= 0:
        return
    if span.duration_us <= 0:
        bins[min(int(span.start_us / width), len(bins) - 1)] += amount
        return
    rate = amount / span.duration_us
    first = min(int(span.start_us / width), len(bins) - 1)
    last = min(int(span.end_us / width), len(bins) - 1)
    for k in range(first, last + 1):
        lo = max(span.start_us, k * width)
        hi = min(span.end_us, (k + 1) * width) if k < len(bins) - 1 else span.end_us
        if hi > lo:
            bins[k] += rate * (hi - lo)


__all__ = [
    "CONV_OPS",
    "DEFAULT_INTERVALS",
    "LOAD",
    "SPLIT",
    "STORE",
    "Busy",
    "Interval",
    "LayerSpan",
    "TimeBins",
    "Timeline",
    "Track",
    "core_share",
    "default_cores",
    "simulate_timeline",
]
