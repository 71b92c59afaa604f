"""Timeline view: estimated and measured tracks (units, cores, threads) and the per-interval temporal series.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from layerscope.report.views.common import Run, estimated_us, num

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
    timeline = run.get("timeline")
    index = {layer["id"]: i for i, layer in enumerate(run.get("layers") or [])}
    if timeline and timeline.get("units"):
        tracks = []
        for unit in timeline["units"]:
            slices = tuple(Slice(b["start_us"], b["end_us"], str(b["layer"]), index.get(b["layer"]))
                           for b in unit.get("busy") or [])
            if slices:
                tracks.append(Track(f"core {unit.get('core', 0)} · {unit['name']}", slices))
        return Tracks("timeline", f"ESTIMATE: {timeline.get('note') or 'static schedule'}", tuple(tracks))
    return _serial_tracks(run, index)


def _serial_tracks(run: Run, index: Mapping[str, int]) -> Tracks | None:
    layers = run.get("layers") or []
    if not any(estimated_us(layer) is not None for layer in layers):
        return None
    per_unit: dict[str, list[Slice]] = {}
    clock = 0.0
    for layer in layers:
        est = estimated_us(layer)
        if est is None:
            continue
        unit = str((layer.get("estimate") or {}).get("unit") or layer.get("unit") or "?")
        per_unit.setdefault(unit, []).append(Slice(clock, clock + est, str(layer["id"]), index.get(layer["id"])))
        clock += est
    tracks = tuple(Track(unit, tuple(slices)) for unit, slices in per_unit.items())
    return Tracks("serial", "ESTIMATE: layers one after another (the roofline's sum); estimate --timeline "
                            "schedules them over units and cores", tracks)


def measured_tracks(run: Run) -> Tracks | None:
    """Measured kernels per thread from the median run's events; ``None`` when the run has no kernel events."""
    m = run.get("measurement") or {}
    events = m.get("median_run") or []
    if not events:
        return None
    kernels = {k["name"]: k for k in run.get("kernels") or []}
    index = {layer["id"]: i for i, layer in enumerate(run.get("layers") or [])}
    threads: dict[Any, list[Slice]] = {}
    for event in events:
        kernel = kernels.get(event["name"], {})
        mapped = [str(x) for x in kernel.get("layers") or []]
        args = tuple((k, v) for k, v in (("op_type", kernel.get("op_type")), ("category", kernel.get("category")),
                                         ("layers", ", ".join(mapped) or None),
                                         ("fused_group", ", ".join(mapped) if len(mapped) > 1 else None),
                                         ("precision", kernel.get("precision") or m.get("precision")),
                                         ("exec_type", kernel.get("exec_type"))) if v)
        start = float(event["start_us"])
        threads.setdefault(event.get("thread", 0), []).append(
            Slice(start, start + float(event["duration_us"]), str(event["name"]),
                  index.get(mapped[0]) if mapped else None, args))
    tracks = tuple(Track(f"thread {tid}", tuple(sorted(slices, key=lambda s: (s.start_us, -s.end_us, s.name))))
                   for tid, slices in sorted(threads.items(), key=lambda kv: str(kv[0])))
    device = m.get("device") if m.get("device") != m.get("provider") else None
    source = " ".join(str(v) for v in (m.get("backend"), m.get("backend_version"), m.get("provider"), device,
                                       m.get("precision")) if v)
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
    timeline = run.get("timeline") or {}
    t = timeline.get("temporal")
    if not t or not t.get("intervals"):
        return None
    step = float(t["interval_us"])
    count = int(t["intervals"])
    return Temporal(
        interval_us=step,
        starts_us=tuple(round(i * step, 3) for i in range(count)),
        ddr_load_mb_per_s=tuple(t.get("ddr_load_mb_per_s") or ()),
        ddr_store_mb_per_s=tuple(t.get("ddr_store_mb_per_s") or ()),
        ddr_utilization=tuple(t.get("ddr_utilization") or ()),
        utilization=tuple((unit, tuple(values)) for unit, values in sorted((t.get("utilization") or {}).items())
                          if any(values)),
        ddr_nominal_utilization=tuple(t.get("ddr_nominal_utilization") or ()),
        ddr_nominal_bytes_per_s=num(timeline.get("ddr_nominal_bytes_per_s")),
        ddr_effective_bytes_per_s=num(timeline.get("ddr_effective_bytes_per_s")),
    )
