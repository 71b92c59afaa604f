"""Terminal reporter of the ``timeline`` section: the NPU summary, unit occupancy and the memory plan.

Pure functions from a saved run (typed) to rich renderables, like :mod:`layerscope.report.terminal`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import key_value_grid
from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Run
from layerscope.report.views.summary import HORIZON_MEMORY_ROWS
from layerscope.runfile.models import Timeline, TimelineMemory, TimelineSummary


def _or_dash(value: float | None, text: Callable[[float], str]) -> str:
    """``text(value)``, or ``"-"`` for a value the run does not hold."""
    return "-" if value is None else text(value)


def timeline_report(run: Run) -> RenderableType:
    """The summary, the unit occupancy table and the memory breakdown of the run's ``timeline`` section (a
    one-line note when the run has none)."""
    timeline = run.timeline
    if timeline is None:
        model = shlex.quote(str(run.model.path).replace("`", "'")) if run.model.path else "MODEL"
        return Text(f"No timeline in this run: `layerscope estimate {model} --target T --timeline` makes one on an "
                    "NPU profile T (`layerscope targets` lists them).", style="yellow")
    note = Text(f"ESTIMATE: {timeline.note or 'static schedule'}. Units, DDR and memory follow the model in the "
                "documentation (Estimate and NPU timeline: \"What the timeline assumes\").", style="yellow")
    frames = _or_dash((timeline.memory or TimelineMemory()).frames_in_flight, str)
    formula = Text(f"minimum requirement = static + shared temporary + {frames} frame(s) in flight x (input + output "
                   "+ exclusive intermediate)")
    return Group(timeline_summary(timeline), units_table(timeline), memory_table(timeline), formula, note)


def timeline_summary(timeline: Timeline) -> Table:
    """Latency and FPS per core and in total, conv MACs, DDR per run, what bounds the frame (``-`` for a number
    the run does not hold)."""
    s = timeline.summary or TimelineSummary()
    cores = timeline.cores if timeline.cores is not None else 1
    latency, serial = s.latency_us, s.serial_latency_us
    hidden = (f"; {100 * (serial - latency) / serial:.1f}% hidden by overlap"
              if latency is not None and serial is not None and serial > 0 and serial > latency else "")
    fps = (f"{s.fps_per_core:.1f} per core, {_or_dash(s.fps_total, lambda v: f'{v:.1f}')} total ({cores} "
           f"core{'s' if cores > 1 else ''}, {timeline.split} split)" if s.fps_per_core else "-")
    share = (f" ({100 * s.ddr_busy_us / latency:.0f}% of the frame)"
             if s.ddr_busy_us is not None and latency is not None and latency > 0 else "")
    grid = key_value_grid()
    rows: list[tuple[str, str | Text]] = [
        ("timeline", "one frame, units in parallel, one shared DDR channel"),
        ("latency", f"{_or_dash(latency, human_us)}  (layers one after another: {_or_dash(serial, human_us)}"
                    f"{hidden})"),
        ("FPS", fps),
        ("conv MACs", f"{_or_dash(s.conv_macs, human_count)} per run  ({_or_dash(s.macs, human_count)} MACs in all)"),
        ("DDR", f"{_or_dash(s.ddr_mb_per_run, lambda v: f'{v:.2f}')} MB ({_or_dash(s.ddr_bytes, human_bytes)}) per "
                f"run, channel busy {_or_dash(s.ddr_busy_us, human_us)}{share}"),
        *([("DDR rate", rate)] if (rate := ddr_rate_text(timeline)) else []),
        ("bound by", Text(s.bound or "-")),
        ("cross-core", f"{_or_dash(s.cross_core_bytes, human_bytes)} (a {timeline.split} split keeps a frame on one "
                       "core)"),
    ]
    for key, value in rows:
        grid.add_row(key, value)
    return grid


def ddr_rate_text(timeline: Timeline) -> str | None:
    """Peak and mean DDR rate of the frame against the effective (attainable) and the nominal bandwidth.

    ``None`` for a run whose timeline predates these fields.
    """
    temporal = timeline.temporal
    peak = temporal.ddr_peak_mb_per_s if temporal is not None else None
    mean = temporal.ddr_mean_mb_per_s if temporal is not None else None
    effective = timeline.ddr_effective_bytes_per_s
    if peak is None or mean is None or not effective:
        return None

    def against(limit: float) -> str:
        return f"{100 * peak * 1e6 / limit:.0f}% / {100 * mean * 1e6 / limit:.0f}%"

    text = (f"peak {peak / 1e3:.2f} GB/s, mean {mean / 1e3:.2f} GB/s: {against(effective)} of the profile's "
            f"effective {effective / 1e9:.4g} GB/s")
    nominal = timeline.ddr_nominal_bytes_per_s
    if nominal:
        text += f", {against(nominal)} of the part's nominal {nominal / 1e9:.4g} GB/s"
    return text


def units_table(timeline: Timeline) -> Table:
    """Per track of core 0: layers, busy time and its share of the frame (LOAD and STORE included)."""
    latency = (timeline.summary or TimelineSummary()).latency_us
    table = Table(title="Units (core 0)", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  collapse_padding=True, pad_edge=False)
    table.add_column("unit", no_wrap=True)
    for header in ("layers", "busy", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    for track in timeline.units:
        if (track.core or 0) != 0 or not track.busy:
            continue
        busy = track.busy_us
        share = f"{100 * busy / latency:.1f}%" if busy is not None and latency is not None and latency > 0 else "-"
        table.add_row(Text(track.name), str(len(track.busy)), _or_dash(busy, human_us), share)
    return table


def memory_table(timeline: Timeline) -> Table:
    """Horizon's memory categories, plus the on-chip peak (``-`` for a category the run does not hold)."""
    memory = timeline.memory or TimelineMemory()
    table = Table(title="Memory", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  collapse_padding=True, pad_edge=False)
    table.add_column("memory", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    for key, label in HORIZON_MEMORY_ROWS:  # the on-chip peak follows, beside the SRAM size
        table.add_row(label, _or_dash(getattr(memory, key), human_bytes))
    sram = timeline.sram_bytes
    of_sram = f" of {human_bytes(sram)}" if sram else ""
    table.add_row("on-chip peak (SRAM)", f"{_or_dash(memory.on_chip_peak_bytes, human_bytes)}{of_sram}")
    return table
