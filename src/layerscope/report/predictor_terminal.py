"""The kernel predictor's view of an estimated run: the layers it predicts slowest, beside the roofline that
explains them (bound, compute / load / store), and the model's predicted latency with its interval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.views.common import Run


def predictor_report(run: Run, top: int) -> RenderableType:
    """Top ``top`` layers by predicted time (µs) with their roofline estimate and bound, then the total."""
    section = run.get("predictor") or {}
    layers = [layer for layer in run.get("layers", []) if isinstance(layer.get("predicted"), Mapping)]
    layers.sort(key=lambda layer: -float(layer["predicted"]["latency_us"]))
    table = Table(title="Kernel predictor: slowest layers (roofline: why)", box=box.SIMPLE_HEAD,
                  title_justify="left", pad_edge=False)
    for header in ("layer", "op", "predicted us", "kernel", "roofline us", "bound"):
        table.add_column(header, justify="right" if header.endswith("us") else "left", no_wrap=True)
    for layer in layers[:top]:
        est = layer.get("estimate") or {}
        table.add_row(Text(str(layer.get("id", ""))), Text(str(layer.get("op_type", ""))),
                      f"{float(layer['predicted']['latency_us']):.1f}", Text(str(layer["predicted"].get("kernel", ""))),
                      f"{float(est.get('latency_us', 0.0)):.1f}", Text(str(est.get("bound", ""))))
    total = Text(f"predicted latency: {float(section.get('latency_us', 0.0)) / 1e3:.3f} ms "
                 f"[{float(section.get('low_us', 0.0)) / 1e3:.3f} .. {float(section.get('high_us', 0.0)) / 1e3:.3f}] "
                 f"(kernels {len(section.get('kernels', []))}, per-call overhead "
                 f"{float(section.get('overhead_us', 0.0)):.1f} us, fusion: {section.get('fusion', '?')}"
                 + _context(section) + ")")
    return Group(table, total) if top else total


def _context(section: Mapping[str, Any]) -> str:
    """``, in model: x1.50 + 4.0 us per kernel`` when the predictor fitted an in-model context, else nothing."""
    context = section.get("context")
    if not isinstance(context, Mapping) or not context.get("models"):
        return ""
    return (f", in model: x{float(context.get('factor', 1.0)):.2f} + {float(context.get('per_kernel_us', 0.0)):.1f}"
            f" us per kernel, from {int(context['models'])} model(s)")
