"""The fallback line: the layers a runtime could not run and handed to another (OpenVINO to ONNX Runtime's CPU
provider), and their share of the layers' measured time.

Read from the run alone: ``layers[].measured.runtime`` and ``fallback_reason`` (set by a profile that fell back),
and the measurement's ``machine["fallback"]`` for the hand-over time between segments.
"""

from __future__ import annotations

from collections.abc import Mapping

from layerscope.report.units import human_us
from layerscope.report.views.common import Run
from layerscope.runfile.derived import runtime_name

#: Layers named in the line before "and N more".
SHOWN = 4


def fallback_text(run: Run) -> str | None:
    """``"Scaler (ai.onnx.ml.Scaler) ran on ONNX Runtime (OpenVINO cannot convert it): 24.5% of the layers' measured
    time; ..."``; ``None`` when no layer of the run fell back."""
    fell_back = [layer for layer in run.layers if layer.measured is not None and layer.measured.fallback_reason]
    if not fell_back:
        return None
    measured = [layer.measured.median_us or 0.0 for layer in run.layers if layer.measured is not None]
    total = sum(measured)
    share = sum(layer.measured.median_us or 0.0 for layer in fell_back if layer.measured is not None)
    names = ", ".join(layer.id for layer in fell_back[:SHOWN]) + (
        f" and {len(fell_back) - SHOWN} more" if len(fell_back) > SHOWN else "")
    ops = ", ".join(sorted({f"{layer.domain or 'ai.onnx'}.{layer.op_type}" for layer in fell_back}))
    runtime = runtime_name(next((layer.measured.runtime for layer in fell_back if layer.measured is not None), None))
    percent = f"{100 * share / total:.1f}%" if total > 0 else "-"
    text = (f"{len(fell_back)} layer(s) ran on {runtime} ({names}: {ops}), the runtime could not convert them: "
            f"{percent} of the layers' measured time")
    handover = _handover_us(run)
    if handover is not None:
        text += f"; hand-over between segments {human_us(handover)} per run, inside the latency"
    return text


def _handover_us(run: Run) -> float | None:
    """The median hand-over time per profiled run (µs) the measurement recorded, if any."""
    machine = run.measurement.machine if run.measurement is not None else None
    extra = machine.model_extra if machine is not None else None
    record = extra.get("fallback") if extra else None
    value = record.get("handover_median_us") if isinstance(record, Mapping) else None
    return float(value) if isinstance(value, int | float) else None
