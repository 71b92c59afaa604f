"""Timeline view: estimated and measured tracks (units, cores, threads) and the per-interval temporal series.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from layerscope.report.views.common import Run
from layerscope.runfile.models import KernelProfileMeasurement

# --------------------------------------------------------------------------------------------------- timelines


@dataclass(frozen=True)
class Slice:
    """One busy interval on a track: what ran (``name``), the layer index it belongs to, extra labels."""

    start_us: float
    end_us: float
    name: str
    layer: int | None = None
    args: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Track:
    """A named row of slices: a unit of a core (estimated) or a thread (measured)."""

    name: str
    slices: tuple[Slice, ...]


@dataclass(frozen=True)
class Tracks:
    """Tracks of one kind with how they were made (``source``) and a sentence for the reader."""

    source: str
    note: str
    tracks: tuple[Track, ...]

    @property
    def end_us(self) -> float:
        """The end of the last slice (0 when empty)."""
        return max((s.end_us for t in self.tracks for s in t.slices), default=0.0)


def estimated_tracks(run: Run) -> Tracks | None:
    """Estimated layers per unit and core: the timeline's busy intervals, else the roofline's layers one after
    another on their units (``source == "serial"``); ``None`` when the run holds no estimate."""
    timeline = run.timeline
    index = _layer_index(run)
    if timeline is not None and timeline.units:
        tracks = []
        for unit in timeline.units:
            slices = tuple(Slice(b.start_us, b.end_us, b.layer, index.get(b.layer)) for b in unit.busy)
            if slices:
                tracks.append(Track(f"core {unit.core or 0} · {unit.name}", slices))
        return Tracks("timeline", f"ESTIMATE: {timeline.note or 'static schedule'}", tuple(tracks))
    return _serial_tracks(run, index)


def _layer_index(run: Run) -> dict[str, int]:
    """Layer id -> its index in the run (the last layer wins when ids repeat)."""
    return {layer.id: i for i, layer in enumerate(run.layers)}


def _serial_tracks(run: Run, index: Mapping[str, int]) -> Tracks | None:
    if not any(layer.estimated_us is not None for layer in run.layers):
        return None
    per_unit: dict[str, list[Slice]] = {}
    clock = 0.0
    for layer in run.layers:
        est = layer.estimated_us
        if est is None:
            continue
        unit = str(layer.est.unit or layer.unit or "?")
        per_unit.setdefault(unit, []).append(Slice(clock, clock + est, layer.id, index.get(layer.id)))
        clock += est
    tracks = tuple(Track(unit, tuple(slices)) for unit, slices in per_unit.items())
    return Tracks("serial", "ESTIMATE: layers one after another (the roofline's sum); estimate --timeline "
                            "schedules them over units and cores", tracks)


def measured_tracks(run: Run) -> Tracks | None:
    """Measured kernels per thread from the median run's events; ``None`` when the run has no kernel events."""
    m = run.measurement
    if not isinstance(m, KernelProfileMeasurement) or not m.median_run:
        return None
    events = m.median_run
    kernels = {k.name: k for k in run.kernels}
    index = _layer_index(run)
    threads: dict[int | str | None, list[Slice]] = {}
    for event in events:
        kernel = kernels.get(event.name)
        mapped = list(kernel.layers) if kernel is not None else []
        labels = (("op_type", kernel.op_type), ("category", kernel.category)) if kernel is not None else ()
        precision = (kernel.precision if kernel is not None else None) or m.precision
        args = tuple((k, v) for k, v in (*labels, ("layers", ", ".join(mapped) or None),
                                         ("fused_group", ", ".join(mapped) if len(mapped) > 1 else None),
                                         ("precision", precision),
                                         ("exec_type", kernel.exec_type if kernel is not None else None)) if v)
        threads.setdefault(event.thread if event.thread is not None else 0, []).append(
            Slice(event.start_us, event.start_us + event.duration_us, event.name,
                  index.get(mapped[0]) if mapped else None, args))
    tracks = tuple(Track(f"thread {tid}", tuple(sorted(slices, key=lambda s: (s.start_us, -s.end_us, s.name))))
                   for tid, slices in sorted(threads.items(), key=lambda kv: str(kv[0])))
    device = m.device if m.device != m.provider else None
    source = " ".join(str(v) for v in (m.backend, m.backend_version, m.provider, device, m.precision) if v)
    return Tracks("median_run", f"MEASURED: kernels of the median profiled run ({source})", tracks)


@dataclass(frozen=True)
class Temporal:
    """Per-interval series of one estimated frame: DDR MB/s, DDR utilization and each unit's utilization.

    ``ddr_utilization``: busy share of the effective (attainable) bandwidth; ``ddr_nominal_utilization``:
    load + store over the part's nominal bandwidth (empty when the profile states none).
    """

    interval_us: float
    starts_us: tuple[float, ...]
    ddr_load_mb_per_s: tuple[float, ...]
    ddr_store_mb_per_s: tuple[float, ...]
    ddr_utilization: tuple[float, ...]
    utilization: tuple[tuple[str, tuple[float, ...]], ...]
    ddr_nominal_utilization: tuple[float, ...] = ()
    ddr_nominal_bytes_per_s: float | None = None
    ddr_effective_bytes_per_s: float | None = None


def temporal(run: Run) -> Temporal | None:
    """The timeline's temporal statistics; units that are never busy are left out; ``None`` without a timeline."""
    timeline = run.timeline
    t = timeline.temporal if timeline is not None else None
    if timeline is None or t is None or not t.intervals or t.interval_us is None:
        return None
    step = t.interval_us
    return Temporal(
        interval_us=step,
        starts_us=tuple(round(i * step, 3) for i in range(t.intervals)),
        ddr_load_mb_per_s=tuple(t.ddr_load_mb_per_s),
        ddr_store_mb_per_s=tuple(t.ddr_store_mb_per_s),
        ddr_utilization=tuple(t.ddr_utilization),
        utilization=tuple((unit, tuple(values)) for unit, values in sorted(t.utilization.items()) if any(values)),
        ddr_nominal_utilization=tuple(t.ddr_nominal_utilization or ()),
        ddr_nominal_bytes_per_s=timeline.ddr_nominal_bytes_per_s,
        ddr_effective_bytes_per_s=timeline.ddr_effective_bytes_per_s,
    )
