"""Which model produced a run's end-to-end estimate, in words every renderer shows the same way: the roofline on
the run's profile, or the kernel predictor (``summary.est_source``) with its interval and the roofline beside."""

from __future__ import annotations

from layerscope.report.units import human_us
from layerscope.runfile.models import EstimateInfo, Summary


def task_text(summary: Summary, info: EstimateInfo | None = None) -> str:
    """What the roofline's total holds beside its layers, without a leading separator (empty when nothing): the
    per-inference task overhead, the part of it that is the outputs' float32 hand-over
    (``summary.est_output_handover_us``), and, when the estimate assumed it (``estimate --quantized-outputs``),
    that the outputs are handed over quantized."""
    parts = []
    if summary.est_task_overhead_us:
        handover = (f" ({human_us(summary.est_output_handover_us)} of it the outputs' float32 hand-over)"
                    if summary.est_output_handover_us else "")
        parts.append(f"incl. {human_us(summary.est_task_overhead_us)} per-inference task overhead{handover}")
    if info is not None and info.quantized_outputs:
        parts.append("outputs handed over quantized (no float32 hand-over: --quantized-outputs)")
    return "; ".join(parts)


def predicted(summary: Summary) -> bool:
    """Whether ``summary``'s estimate is the kernel predictor's (``estimate --predictor``)."""
    return bool(summary.est_source) and str(summary.est_source).startswith("predictor ")


def estimate_source_text(summary: Summary, profile: str | None) -> str:
    """``kernel predictor (FILE sha256:...)`` or ``roofline on profile NAME``."""
    if predicted(summary):
        return f"kernel {summary.est_source}"
    return f"roofline on profile {profile or '?'}"


def predicted_text(summary: Summary) -> str:
    """The prediction, its interval and FPS, and the roofline beside it (empty unless :func:`predicted`)."""
    if not predicted(summary) or summary.est_latency_us is None:
        return ""
    interval = (f" [{human_us(summary.est_low_us)} .. {human_us(summary.est_high_us)}]"
                if summary.est_low_us is not None and summary.est_high_us is not None else "")
    fps = f"  ({summary.est_fps:.1f} FPS)" if summary.est_fps is not None else ""
    return f"{human_us(summary.est_latency_us)}{interval}{fps}, {estimate_source_text(summary, None)}"


def roofline_text(summary: Summary, info: EstimateInfo | None = None) -> str:
    """The roofline's total beside a prediction (with its FPS and :func:`task_text`), else empty."""
    if not predicted(summary) or summary.roofline_latency_us is None:
        return ""
    fps = f"  ({summary.roofline_fps:.1f} FPS)" if summary.roofline_fps is not None else ""
    task = f", {text}" if (text := task_text(summary, info)) else ""
    return f"{human_us(summary.roofline_latency_us)}{fps}{task}"
