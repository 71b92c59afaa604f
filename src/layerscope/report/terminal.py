"""Terminal reporters: pure functions from a saved run (a dict) to rich renderables."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.units import human_bytes, human_count, human_us
from layerscope.report.views.common import Run
from layerscope.runfile.derived import (
    fused_group,
    layer_estimated_us,
    layer_measured_us,
    layer_shares,
    scale_factor,
    steadiness_text,
    unsteady,
)


def key_value_grid() -> Table:
    """An empty two-column grid: bold keys on the left, values on the right."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    return grid


def top_layers_table(run: Run, top: int) -> Table:
    """The ``top`` layers by estimated latency: id, op, output shape, MACs, est. µs, share, bound, unit."""
    layers = run["layers"]
    total = sum(layer["estimate"]["latency_us"] for layer in layers) or 1.0
    ranked = sorted(layers, key=lambda layer: -layer["estimate"]["latency_us"])[:top]
    table = Table(title=f"Top {len(ranked)} of {len(layers)} layers by estimated latency", title_justify="left",
                  caption="* runs on the CPU (fallback): see the reasons below"
                  if any(layer["estimate"].get("fallback_reason") for layer in ranked) else None,
                  caption_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layer", overflow="fold", min_width=10)
    table.add_column("op", no_wrap=True)
    table.add_column("output shape", overflow="fold", min_width=9)
    for header in ("MACs", "est. µs", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("bound", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    for rank, layer in enumerate(ranked, 1):
        est = layer["estimate"]
        shapes = [s for s in layer.get("output_shapes", []) if s is not None]
        unit = est["unit"] + (" *" if est.get("fallback_reason") else "")
        table.add_row(
            str(rank),
            Text(layer["id"]),
            Text(layer["op_type"]),
            "x".join(map(str, shapes[0])) if shapes else "-",
            human_count(layer["macs"]) if layer["macs"] else "-",
            f"{est['latency_us']:.1f}",
            f"{100 * est['latency_us'] / total:.1f}%",
            est["bound"],
            Text(unit),
        )
    return table


def estimate_summary(run: Run) -> RenderableType:
    """Summary lines of an estimate: totals, latency and FPS, fallbacks, unknown ops."""
    s = run["summary"]
    target = run["target"]
    model = run["model"]
    inputs = ", ".join(f"{t['name']} {'x'.join(map(str, t['shape']))} {t['dtype']}" for t in model["inputs"])
    grid = key_value_grid()
    rows: list[tuple[str, str | Text]] = [
        ("model", Text(f"{model['name']}  ({model['path']})")),
        ("inputs", Text(inputs)),
        ("target", Text(f"{target['name']}: {target['description']}  [dtype {target['dtype']}]")),
        ("layers", f"{s['layer_count']} runtime layers, {s['folded_count']} constant nodes folded, "
                   f"{s['zero_copy_count']} zero-copy"),
        ("MACs", f"{human_count(s['macs'])} total, {human_count(s['tensor_macs'])} conv/matmul"),
        ("params", f"{human_count(s['params'])}  ({human_bytes(s['weight_bytes'])} of weights as stored in the model)"),
        ("DDR traffic", f"{human_bytes(s['ddr_bytes'])} per run"),
        ("est. latency", f"{human_us(s['est_latency_us'])}  ({s['est_fps']:.1f} FPS)" if s["est_fps"]
         else human_us(s["est_latency_us"])),
        ("CPU fallback", f"{s['cpu_fallback_count']} layer(s)"),
        ("unknown ops", Text(", ".join(f"{u['op_type']} x{u['count']}" for u in run.get("unknown_ops", []))
                             or "none")),
    ]
    for key, value in rows:
        grid.add_row(key, value)
    note = Text(f"ESTIMATE: {run['estimate_info']['note']}. Measure with a runtime to get real numbers.",
                style="yellow")
    fallbacks = [(layer["id"], layer["estimate"]["fallback_reason"]) for layer in run["layers"]
                 if layer["estimate"].get("fallback_reason")]
    parts: list[RenderableType] = [grid]
    if fallbacks:
        parts.append(Text("CPU fallback:", style="bold"))
        parts.extend(Text(f"  {lid}: {reason}") for lid, reason in fallbacks[:10])
        if len(fallbacks) > 10:
            parts.append(Text(f"  ... and {len(fallbacks) - 10} more (see the run file)"))
    parts.append(note)
    return Group(*parts)


def measured_layers_table(run: Run, top: int) -> Table:
    """The ``top`` layers by measured median: measured µs, share, P90, CV, est. µs, ratio, fused group."""
    measured = [layer for layer in run["layers"] if layer_measured_us(layer) is not None]
    shares = {id(layer): share for layer, share in zip(measured, layer_shares(measured, "measured"), strict=True)}
    ranked = sorted(measured, key=lambda layer: -(layer_measured_us(layer) or 0.0))[:top]
    m = run["measurement"]
    table = Table(title=f"Top {len(ranked)} of {len(run['layers'])} layers by measured time "
                        f"({m['backend']} {m['backend_version']}, {m['provider']}, opt level {m['opt_level']})",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False,
                  caption="runtime kernel: the op ONNX Runtime ran; 'N layers': they ran as one kernel, its time split "
                          "by estimated cost (see the run file for the group)",
                  caption_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layer", overflow="fold", min_width=10)
    table.add_column("op", no_wrap=True)
    for header in ("meas. µs", "share", "P90 µs", "CV", "est. µs", "meas/est"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("runtime kernel", overflow="fold")
    kernel_ops = {k["name"]: k["op_type"] for k in run.get("kernels", [])}
    groups: dict[str, tuple[str, ...]] = {}
    for rank, layer in enumerate(ranked, 1):
        meas = layer["measured"]
        meas_us = layer_measured_us(layer) or 0.0
        est = layer_estimated_us(layer)
        ratio = f"{meas_us / est:.2f}" if est else "-"
        group = fused_group(run, meas, groups)
        kernel = kernel_ops.get(meas.get("kernel") or "", "-")
        table.add_row(
            str(rank), Text(layer["id"]), Text(layer["op_type"]), f"{meas_us:.1f}",
            f"{100 * (shares[id(layer)] or 0.0):.1f}%", f"{meas.get('p90_us') or 0.0:.1f}",
            f"{meas.get('cv') or 0.0:.2f}",
            f"{est:.1f}" if est is not None else "-", ratio,
            Text(f"{kernel}, {len(group)} layers" if group else kernel))
    return table


def measurement_summary(run: Run) -> RenderableType:
    """What was measured, on what, and how far the instrument can be trusted."""
    m, lat = run["measurement"], run["latency"]
    machine = m["machine"]
    grid = key_value_grid()
    model = run["model"]
    statuses = [layer.get("measured", {}).get("status") for layer in run["layers"]]
    rows: list[tuple[str, str | Text]] = [
        ("model", Text(f"{model['name']}  ({model['path']})")),
        ("latency", f"P50 {human_us(lat['p50_us'])}  P90 {human_us(lat['p90_us'])}  P99 {human_us(lat['p99_us'])}  "
                    f"mean {human_us(lat['mean_us'])}  ({lat['fps']:.1f} FPS, {lat['samples']} uninstrumented runs)"),
        ("layers", f"{statuses.count('measured')} measured alone, {statuses.count('fused')} fused into shared "
                   f"kernels, {statuses.count('eliminated')} eliminated by the runtime"),
        ("kernels", f"{len(run['kernels'])} runtime kernels; {100 * m['mapped_share']:.1f}% of kernel time mapped "
                    f"to source layers; unmapped: {', '.join(m['unmapped_kernels']) or 'none'}"),
        ("coverage", f"{100 * m['coverage']:.1f}% of each profiled run is inside kernels"),
        ("overhead", f"{100 * m['overhead']:+.1f}% run time with the profiler on (percentiles above are without it)"),
        *([("steadiness", steadiness_text(m["steadiness"]))] if m.get("steadiness") else []),
        ("runtime", f"{m['backend']} {m['backend_version']}, {m['provider']}, opt level {m['opt_level']}, "
                    f"intra-op threads {m['threads'] or 'default'}"),
        ("machine", Text(f"{machine.get('hostname')}: {machine.get('cpu')}, {machine.get('cores')} cores, "
                         f"{machine.get('os')}")),
    ]
    if "summary" in run and run["summary"].get("est_latency_us"):
        target = run.get("target", {})
        rows.append(("estimate", f"{human_us(run['summary']['est_latency_us'])} on profile {target.get('name')}"))
    k = scale_factor(run)
    if k is not None:
        rows.append(("k", f"measured / estimated = {k.k:.3f}  ({k.source})"))
    for key, value in rows:
        grid.add_row(key, value)
    parts: list[RenderableType] = [grid]
    if m.get("interrupted"):
        parts.append(Text("INTERRUPTED: fewer runs than asked were measured.", style="red"))
    if k is not None and k.mismatch:
        parts.append(Text(f"WARNING: {k.mismatch}.", style="yellow"))
    noise = unsteady(m.get("steadiness"))
    if noise is not None:
        parts.append(Text(f"UNSTEADY MACHINE: its speed moved {100 * noise:.0f}% during this measurement; differences "
                          f"below that between this run and another are noise here (use a quiet machine, --threads "
                          "1, more --runs, or compare in one process: `layerscope bench --stress`, `profile "
                          "--stress` and `bisect` pair their runs).",
                          style="yellow"))
    return Group(*parts)
