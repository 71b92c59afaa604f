"""Terminal reporter of the ``timeline`` section: the NPU summary, unit occupancy and the memory plan.

Pure functions from a saved run (a dict) to rich renderables, like :mod:`layerscope.report.terminal`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.terminal import key_value_grid
from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Run
from layerscope.report.views.summary import HORIZON_MEMORY_ROWS


def timeline_report(run: Run) -> RenderableType:
    """The summary, the unit occupancy table and the memory breakdown of ``run["timeline"]``."""
    timeline = run["timeline"]
    note = Text(f"ESTIMATE: {timeline['note']}. Units, DDR and memory follow the model in the README "
                "(\"NPU timeline and memory plan\").", style="yellow")
    frames = timeline["memory"]["frames_in_flight"]
    formula = Text(f"minimum requirement = static + shared temporary + {frames} frame(s) in flight x (input + output "
                   "+ exclusive intermediate)")
    return Group(timeline_summary(timeline), units_table(timeline), memory_table(timeline), formula, note)


def timeline_summary(timeline: Mapping[str, Any]) -> Table:
    """Latency and FPS per core and in total, conv MACs, DDR per run, what bounds the frame."""
    s = timeline["summary"]
    cores = timeline["cores"]
    latency = s["latency_us"]
    serial = s["serial_latency_us"]
    hidden = f"; {100 * (serial - latency) / serial:.1f}% hidden by overlap" if serial > 0 and serial > latency else ""
    fps = (f"{s['fps_per_core']:.1f} per core, {s['fps_total']:.1f} total ({cores} core{'s' if cores > 1 else ''}, "
           f"{timeline['split']} split)" if s["fps_per_core"] else "-")
    share = f" ({100 * s['ddr_busy_us'] / latency:.0f}% of the frame)" if latency > 0 else ""
    grid = key_value_grid()
    rows: list[tuple[str, str | Text]] = [
        ("timeline", "one frame, units in parallel, one shared DDR channel"),
        ("latency", f"{human_us(latency)}  (layers one after another: {human_us(serial)}{hidden})"),
        ("FPS", fps),
        ("conv MACs", f"{human_count(s['conv_macs'])} per run  ({human_count(s['macs'])} MACs in all)"),
        ("DDR", f"{s['ddr_mb_per_run']:.2f} MB ({human_bytes(s['ddr_bytes'])}) per run, channel busy "
                f"{human_us(s['ddr_busy_us'])}{share}"),
        *([("DDR rate", rate)] if (rate := ddr_rate_text(timeline)) else []),
        ("bound by", Text(s["bound"])),
        ("cross-core", f"{human_bytes(s['cross_core_bytes'])} (a {timeline['split']} split keeps a frame on one core)"),
    ]
    for key, value in rows:
        grid.add_row(key, value)
    return grid


def ddr_rate_text(timeline: Mapping[str, Any]) -> str | None:
    """Peak and mean DDR rate of the frame against the effective (attainable) and the nominal bandwidth.

    ``None`` for a run whose timeline predates these fields.
    """
    temporal = timeline.get("temporal") or {}
    peak, mean = temporal.get("ddr_peak_mb_per_s"), temporal.get("ddr_mean_mb_per_s")
    effective = timeline.get("ddr_effective_bytes_per_s")
    if peak is None or mean is None or not effective:
        return None

    def against(limit: float) -> str:
        return f"{100 * peak * 1e6 / limit:.0f}% / {100 * mean * 1e6 / limit:.0f}%"

    text = (f"peak {peak / 1e3:.2f} GB/s, mean {mean / 1e3:.2f} GB/s: {against(effective)} of the profile's "
            f"effective {effective / 1e9:.4g} GB/s")
    nominal = timeline.get("ddr_nominal_bytes_per_s")
    if nominal:
        text += f", {against(nominal)} of the part's nominal {nominal / 1e9:.4g} GB/s"
    return text


def units_table(timeline: Mapping[str, Any]) -> Table:
    """Per track of core 0: layers, busy time and its share of the frame (LOAD and STORE included)."""
    latency = timeline["summary"]["latency_us"]
    table = Table(title="Units (core 0)", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  collapse_padding=True, pad_edge=False)
    table.add_column("unit", no_wrap=True)
    for header in ("layers", "busy", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    for track in timeline["units"]:
        if track["core"] != 0 or not track["busy"]:
            continue
        share = f"{100 * track['busy_us'] / latency:.1f}%" if latency > 0 else "-"
        table.add_row(Text(track["name"]), str(len(track["busy"])), human_us(track["busy_us"]), share)
    return table


def memory_table(timeline: Mapping[str, Any]) -> Table:
    """Horizon's memory categories, plus the on-chip peak."""
    memory = timeline["memory"]
    table = Table(title="Memory", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  collapse_padding=True, pad_edge=False)
    table.add_column("memory", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    for key, label in HORIZON_MEMORY_ROWS:  # the on-chip peak follows, beside the SRAM size
        table.add_row(label, human_bytes(memory[key]))
    sram = timeline.get("sram_bytes")
    of_sram = f" of {human_bytes(sram)}" if sram else ""
    table.add_row("on-chip peak (SRAM)", f"{human_bytes(memory['on_chip_peak_bytes'])}{of_sram}")
    return table
