"""The lines that say how a run counts its weights: params counted per use beside the model's own, and how the
estimate loads the weights several layers read. Pure functions of the run's summary, shared by the terminal and the
HTML summary (light: no view of the layers, so that printing an estimate imports none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from layerscope.report.units import human_bytes, human_count

if TYPE_CHECKING:
    from layerscope.runfile.models import Summary


def params_per_use_text(summary: Summary) -> str | None:
    """``"160.80 M counted per use by the layers"`` when the layers' own params add up to more than the model's,
    each tensor once (a shared weight), by enough to show; ``None`` otherwise (a few shared scalars)."""
    per_use, params = summary.params_per_use, summary.params
    if per_use is None or params is None or human_count(per_use) == human_count(params):
        return None
    return f"{human_count(per_use)} counted per use by the layers"


def shared_weights_text(summary: Summary) -> str | None:
    """How the estimate loads the weights several layers read: ``"2 tensors read by 8 layers: 1 loaded once per
    inference (resident: fits the 512.00 KiB on-chip weight budget), 1 loaded by every reader (does not fit); saves
    1.00 MiB of DDR reads"``; ``None`` when no layers share a weight."""
    shared = summary.shared_weights
    if shared is None:
        return None
    budget = human_bytes(shared.budget_bytes)
    once, per_use = shared.resident, shared.tensors - shared.resident
    both = once and per_use
    parts = []
    if once:
        parts.append(f"{f'{once} ' if both else ''}loaded once per inference (resident: fit{'s' if once == 1 else ''} "
                     f"the {budget} on-chip weight budget)")
    if per_use:
        where = "" if both else f" the {budget} on-chip weight budget"
        parts.append(f"{f'{per_use} ' if both else ''}loaded by every reader "
                     f"(do{'es' if per_use == 1 else ''} not fit{where})")
    saved = f"; saves {human_bytes(shared.ddr_bytes_saved)} of DDR reads" if shared.ddr_bytes_saved else ""
    tensors = f"{shared.tensors} tensor{'s' if shared.tensors != 1 else ''}"
    return f"{tensors} read by {shared.layers} layers: {', '.join(parts)}{saved}"
