"""``layerscope targets``: list the hardware targets, or show one in full.

``layerscope targets`` lists every target without measuring anything (the host shows "measured
on first use" until its first probe). ``layerscope targets --show NAME`` prints one profile's units,
memory, fallback rules and sources (``host`` measures this machine if it has not been measured;
``--reprobe`` measures it again). Errors are raised as ``LayerscopeError`` for the main wrapper.
"""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from layerscope.cli.console import SafeConsole
from layerscope.targets import host
from layerscope.targets.loader import list_profiles, load_profile
from layerscope.targets.profile import ComputeUnit, Profile, ProfileSummary

_DASH = "-"


def _tera(value: float | None) -> str:
    """ops/s -> T(FL)OPS with 3 significant digits; ``-`` when unknown."""
    if value is None:
        return _DASH
    tera = value / 1e12
    return f"{tera:.3g}" if tera >= 0.01 else f"{tera:.2g}"


def _gbps(value: float | None) -> str:
    return _DASH if value is None else f"{value / 1e9:.4g}"


def _bytes(value: int | None) -> str:
    if value is None:
        return _DASH
    if value == 0:
        return "0"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value} B"


def _rate(value: float) -> str:
    """ops/s in the largest unit that keeps the number readable (T/G/M)."""
    for suffix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def summary_table(rows: list[ProfileSummary]) -> Table:
    """The listing: one row per target."""
    table = Table(title="layerscope targets", show_lines=False)
    table.add_column("target", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    for header in ("int8 TOPS", "fp16 TFLOPS", "fp32 TFLOPS", "DDR GB/s", "SRAM", "cores"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("description", ratio=1)
    for row in rows:
        table.add_row(
            row.name,
            row.kind,
            _tera(row.peak_int8_ops_per_s),
            _tera(row.peak_fp16_ops_per_s),
            _tera(row.peak_fp32_ops_per_s),
            _gbps(row.ddr_bandwidth_bytes_per_s),
            _bytes(row.sram_bytes),
            _DASH if row.cores is None else str(row.cores),
            row.description,
        )
    return table


def _unit_row(table: Table, unit: ComputeUnit, role: str) -> None:
    peaks = ", ".join(f"{dtype} {_rate(rate)}" for dtype, rate in unit.peak_ops_per_s.items())
    kinds = ", ".join(kind.value for kind in unit.kinds)
    table.add_row(unit.name, role, kinds, peaks, f"{unit.efficiency:.2f}", f"{unit.overhead_us:g}")


def units_table(profile: Profile) -> Table:
    """Compute units (the CPU last), with peaks in ops/s per dtype."""
    table = Table(title="compute units (peak ops/s, 1 MAC = 2 ops)")
    for header in ("unit", "role", "kinds", "peak per dtype", "efficiency", "overhead us"):
        table.add_column(header)
    for unit in profile.units:
        _unit_row(table, unit, "accelerator")
    if profile.cpu not in profile.units:
        _unit_row(table, profile.cpu, "fallback CPU")
    return table


def memory_table(profile: Profile) -> Table:
    """DDR, SRAM, hand-off cost and the other scalar facts."""
    table = Table(title="memory and system", show_header=False)
    table.add_column("field")
    table.add_column("value")
    rows = (
        ("DDR peak", f"{_gbps(profile.ddr_bandwidth_bytes_per_s)} GB/s"),
        ("DDR nominal", f"{_gbps(profile.ddr_nominal_bytes_per_s)} GB/s (the vendor's figure; reports only)"
         if profile.ddr_nominal_bytes_per_s else "- (no vendor figure)"),
        ("DDR efficiency", f"{profile.ddr_efficiency:.2f}"),
        ("CPU-side DDR", f"{_gbps(profile.cpu_ddr_bandwidth_bytes_per_s)} GB/s"),
        ("hand-off to CPU", f"{profile.transfer_overhead_us:g} us"),
        ("on-chip SRAM", _bytes(profile.sram_bytes)),
        ("cores", str(profile.cores)),
        ("clock", f"{profile.clock_hz / 1e9:.3g} GHz"),
        ("dtypes", ", ".join(profile.dtypes) + f" (default {profile.default_dtype})"),
        ("lane width", str(profile.lane_width)),
    )
    for field, value in rows:
        table.add_row(field, value)
    return table


def rules_table(profile: Profile) -> Table:
    """Fallback rules in match order."""
    table = Table(title="CPU fallback rules (first match wins)")
    table.add_column("op", no_wrap=True)
    table.add_column("condition", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for rule in profile.fallback_rules:
        table.add_row(rule.op_type, rule.condition or "always", rule.reason)
    return table


def sources_table(profile: Profile) -> Table:
    table = Table(title="sources")
    table.add_column("field", no_wrap=True)
    table.add_column("source", overflow="fold")  # fold, never cut: URLs must stay copyable
    for key, source in profile.sources.items():
        table.add_row(key, source)
    return table


def show(console: Console, profile: Profile) -> None:
    """Print one profile in full."""
    console.print(Text.assemble((profile.name, "bold"), f" ({profile.kind}): {profile.description}"))
    console.print(f"file: {profile.source_path}")
    console.print(units_table(profile))
    console.print(memory_table(profile))
    if profile.fallback_rules:
        console.print(rules_table(profile))
    else:
        console.print("CPU fallback rules: none")
    console.print(sources_table(profile))


@click.command("targets")
@click.option("--show", "show_name", metavar="NAME", help="Show one target (name or profile file) in full.")
@click.option("--reprobe", is_flag=True, help="Measure this machine again (the 'host' target).")
def command(show_name: str | None, reprobe: bool) -> None:
    """List hardware targets, or show one target's units, rules and sources."""
    console = SafeConsole()
    if reprobe:
        host.host_measurement(refresh=True)
        show_name = show_name or host.HOST_NAME
    if show_name is not None:
        show(console, load_profile(show_name))
        return
    console.print(summary_table(list_profiles()))
