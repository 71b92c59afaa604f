"""What a compiled engine's kernels say beyond their times (TensorRT's layer information): the time by precision,
the layout (reformat) kernels' time and the throughput per inference and per sample.

Pure functions of the run's ``kernels`` and ``import.context`` (the contract of :mod:`layerscope.report.views.common`);
a kernel's time is its median, else its mean (µs), as everywhere in the reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from layerscope.runfile.models import ImportContext, Kernel


@dataclass(frozen=True)
class PrecisionShare:
    """One precision of :func:`precision_mix`: its share of the time and how many kernels ran at it."""

    precision: str
    share: float
    kernels: int


@dataclass(frozen=True)
class LayoutTime:
    """The layout kernels' time (µs), its share of all measured kernels' time, how many layout kernels there are and
    how many of them took any time (``timed``)."""

    time_us: float
    share: float
    kernels: int
    timed: int


def kernel_us(kernel: Kernel) -> float:
    """A kernel's time: its median, else its mean (µs), 0 when neither is known."""
    value = kernel.median_us if kernel.median_us is not None else kernel.mean_us
    return float(value or 0.0)


def precision_mix(kernels: Sequence[Kernel]) -> list[PrecisionShare]:
    """The measured time of the kernels that state a precision, layout kernels left out, by precision, largest share
    first (ties by name); empty when none of them has time."""
    times: dict[str, float] = {}
    counts: dict[str, int] = {}
    for kernel in kernels:
        if kernel.category != "layout" and kernel.precision:
            times[kernel.precision] = times.get(kernel.precision, 0.0) + kernel_us(kernel)
            counts[kernel.precision] = counts.get(kernel.precision, 0) + 1
    total = sum(times.values())
    if total <= 0:
        return []
    return [PrecisionShare(p, times[p] / total, counts[p]) for p in sorted(times, key=lambda p: (-times[p], p))]


def precision_mix_text(kernels: Sequence[Kernel]) -> str | None:
    """:func:`precision_mix` in words: ``FP16 91.0% (22 kernels), FP32 9.0% (1 kernel) of the layers' measured
    time``, saying so when only some of the non-layout kernels state a precision (``of the measured time of the 4 of
    10 layer kernels that state one``); ``None`` when the mix is empty."""
    mix = precision_mix(kernels)
    if not mix:
        return None
    parts = ", ".join(f"{p.precision} {100 * p.share:.1f}% ({p.kernels} kernel{'s' if p.kernels > 1 else ''})"
                      for p in mix)
    stated = sum(p.kernels for p in mix)
    layer_kernels = sum(1 for k in kernels if k.category != "layout")
    if stated == layer_kernels:
        return f"{parts} of the layers' measured time"
    return f"{parts} of the measured time of the {stated} of {layer_kernels} layer kernels that state one"


def layout_time(kernels: Sequence[Kernel]) -> LayoutTime | None:
    """The time of the ``layout`` kernels (TensorRT's reformats and copies, OpenVINO's reorders) and its share of all
    measured kernels' time; ``None`` when there is no layout kernel or no measured time."""
    layout = [k for k in kernels if k.category == "layout"]
    total = sum(kernel_us(k) for k in kernels)
    if not layout or total <= 0:
        return None
    time_us = sum(kernel_us(k) for k in layout)
    return LayoutTime(time_us, time_us / total, len(layout), sum(1 for k in layout if kernel_us(k) > 0))


def throughput_text(context: ImportContext) -> str | None:
    """The vendor's throughput with its unit made explicit: inferences per second (trtexec's queries: one enqueue
    of the whole batch) and, with the batch known, samples per second; ``None`` without a throughput."""
    if context.throughput_per_s is None:
        return None
    per_sample = (f" x batch {context.batch} = {context.samples_per_s:,.1f} samples/s"
                  if context.samples_per_s is not None else "")
    return f"{context.throughput_per_s:,.1f} inferences/s{per_sample}"


def rate_label(batch: int | None) -> str:
    """What a run's ``latency.fps`` counts: ``FPS`` at batch 1 (or unknown), ``inferences/s (batch N)`` above."""
    return f"inferences/s (batch {batch})" if batch and batch > 1 else "FPS"
