"""The kernel predictor's view of an estimated run: the layers it predicts slowest, beside the roofline that
explains them (bound, compute / load / store), and the model's predicted latency with its interval."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.report.views.common import Run
from layerscope.runfile.models import Layer, Predictor


def _predicted_us(layer: Layer) -> float:
    return (layer.predicted.latency_us if layer.predicted is not None else None) or 0.0


def predictor_report(run: Run, top: int) -> RenderableType:
    """Top ``top`` layers by predicted time (µs) with their roofline estimate and bound, then the total (0 for a
    figure the run does not hold)."""
    section = run.predictor or Predictor()
    layers = sorted((layer for layer in run.layers if layer.predicted is not None), key=lambda la: -_predicted_us(la))
    table = Table(title="Kernel predictor: slowest layers (roofline: why)", box=box.SIMPLE_HEAD,
                  title_justify="left", pad_edge=False)
    for header in ("layer", "op", "predicted us", "kernel", "roofline us", "bound"):
        table.add_column(header, justify="right" if header.endswith("us") else "left", no_wrap=True)
    for layer in layers[:top]:
        kernel = layer.predicted.kernel if layer.predicted is not None else None
        table.add_row(Text(layer.id), Text(layer.op_type or ""), f"{_predicted_us(layer):.1f}", Text(kernel or ""),
                      f"{layer.estimated_us or 0.0:.1f}", Text(layer.est.bound or ""))
    total = Text(f"predicted latency: {(section.latency_us or 0.0) / 1e3:.3f} ms "
                 f"[{(section.low_us or 0.0) / 1e3:.3f} .. {(section.high_us or 0.0) / 1e3:.3f}] "
                 f"(kernels {len(section.kernels)}, per-call overhead "
                 f"{section.overhead_us or 0.0:.1f} us, fusion: {section.fusion or '?'}" + _context(section) + ")")
    return Group(table, total) if top else total


def _context(section: Predictor) -> str:
    """``, in model: x1.50 + 4.0 us per kernel`` when the predictor applied an in-model context, ``, in-model
    context not applied: WHY`` when it fitted one that did not transfer, else nothing."""
    context = section.context
    if context is None or not context.models:
        return ""
    if context.applied is False:
        return f", in-model context not applied: {context.why or 'it did not transfer'}"
    return (f", in model: x{context.factor:.2f} + {context.per_kernel_us:.1f} us per kernel, from "
            f"{context.models} model(s)")
