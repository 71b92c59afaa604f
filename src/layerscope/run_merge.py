"""Refresh the estimate inside an existing run without losing what was measured (``estimate --json RUN``).

Contract of :func:`merge_estimate` (``old``: the run already in the file, ``new``: a fresh estimate run of
the same model, as :func:`layerscope.run.run_from_estimate` makes it, with or without a ``timeline``):

- the model must be the same: ``model.sha256`` and the input shapes equal, else :class:`RunFileError`
  (exit 2) saying what differs -- the file is never touched then; a run holding an imported vendor estimate
  (``method`` ``"vendor:..."``) is refused the same way, as the roofline would replace it;
- the estimate-owned sections are replaced by the new ones: ``target``, ``estimate_info``, ``folded``,
  ``unknown_ops``, ``timeline`` (removed when the new run has none: a schedule on the old estimate would
  disagree with the new one), and the summary keys the estimate writes;
- per layer (joined by ``id``): cost and estimate fields come from the new run; every other key of the old
  layer (``measured``, vendor fields, ...) stays. Old layers the new estimate does not know stay, after the
  known ones, and are counted in the returned notes; new layers are added;
- every other top-level section (``measurement``, ``latency``, ``kernels``, ``findings``, ``reconcile``,
  ``stress``, ``pipeline``, ``comparison``, ``imported``, ...) is kept as it was. The notes say which of them
  were derived from the previous estimate (``reconcile``, ``findings``, ``comparison``) when its target or
  dtype changed, so the user knows to re-run them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from layerscope.errors import RunFileError
from layerscope.runfile.io import as_run, upgrade
from layerscope.runfile.models import Layer, RunFile, Section

# Top-level sections an estimate writes; everything else in a run belongs to another command.
ESTIMATE_SECTIONS = ("target", "estimate_info", "folded", "unknown_ops", "timeline")
# Sections computed from the estimate by later commands: stale when the estimate changes.
DERIVED_SECTIONS = ("reconcile", "findings", "comparison")
# Sections the new estimate run brings as they are (``model``, ``summary`` and ``layers`` are merged key by key).
OWN_SECTIONS = ("schema_version", "tool")


@dataclass(frozen=True)
class MergeResult:
    """The merged run and one line per thing the user should know (kept, stale, unmatched)."""

    run: dict[str, Any]
    notes: tuple[str, ...]


def check_same_model(old: RunFile | Mapping[str, Any], new: RunFile | Mapping[str, Any], where: str) -> None:
    """``RunFileError`` (exit 2) unless ``old`` and ``new`` are runs of the same model with the same inputs."""
    old_model, new_model = as_run(old, where).model, as_run(new).model
    old_sha, new_sha = old_model.sha256, new_model.sha256
    if not old_sha:
        raise RunFileError(f"{where} holds a run with no model file behind it (an import without --model?), so "
                           "this estimate cannot be joined to it",
                           hint="write the estimate to another file; nothing was changed")
    if old_sha != new_sha:
        raise RunFileError(
            f"{where} holds a run of another model (sha256 {str(old_sha)[:12]}..., "
            f"{old_model.name or old_model.path or 'unnamed'}; this one is {str(new_sha)[:12]}...)",
            hint="write the estimate to another file; nothing was changed")
    old_inputs = {t.name: t.shape for t in old_model.inputs}
    new_inputs = {t.name: t.shape for t in new_model.inputs}
    if old_inputs != new_inputs:
        shown = ", ".join(f"{n}={'x'.join(map(str, s or []))}" for n, s in old_inputs.items())
        raise RunFileError(f"{where} was made with other input shapes ({shown})",
                           hint="pass the same --shape, or write the estimate to another file; nothing was changed")


def check_not_vendor_estimate(old: RunFile | Mapping[str, Any], where: str) -> None:
    """``RunFileError`` (exit 2) when ``old`` holds an imported vendor estimate: replacing it would lose it."""
    typed = as_run(old, where)
    methods = {str(typed.estimate_info.method or "") if typed.estimate_info is not None else ""}
    methods.update(str(layer.est.method or "") for layer in typed.layers)
    vendor = sorted(m for m in methods if m.startswith("vendor:"))
    if vendor:
        raise RunFileError(f"{where} holds the vendor compiler's own estimate ({', '.join(vendor)}); the roofline "
                           "estimate would replace it",
                           hint="write the estimate to another file and compare the two; nothing was changed")


def _document(run: RunFile | Mapping[str, Any]) -> dict[str, Any]:
    """The run's JSON document (a document as given, migrated; a typed run dumped)."""
    return run.to_json() if isinstance(run, RunFile) else upgrade(run)


def merge_estimate(old: RunFile | Mapping[str, Any], new: RunFile | Mapping[str, Any], where: str = "the run file"
                   ) -> MergeResult:
    """``old`` with its estimate replaced by ``new``'s (see the module docstring); neither input is changed.
    Both may be typed runs or their documents; the merged run is returned as a document."""
    old_run, new_run = as_run(old, where), as_run(new)
    check_same_model(old_run, new_run, where)
    check_not_vendor_estimate(old_run, where)
    old_doc, new_doc = _document(old), _document(new)
    replaced = (*ESTIMATE_SECTIONS, *OWN_SECTIONS)
    layers, unmatched = _merge_layers(old_run.layers, new_run.layers)
    merged: dict[str, Any] = {key: value for key, value in old_doc.items() if key not in replaced}
    merged.update((key, value) for key, value in new_doc.items() if key in replaced)
    merged.update(_dump({"model": new_run.model.over(old_run.model), "summary": new_run.summary.over(old_run.summary)}))
    merged.update(layers=[_dump(layer) for layer in layers])
    return MergeResult(merged, _notes(old_run, new_run, unmatched))


def _dump(value: Any) -> Any:
    if isinstance(value, Section):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, dict):
        return {key: _dump(item) for key, item in value.items()}
    return value


def _merge_layers(old_layers: list[Layer], new_layers: list[Layer]) -> tuple[list[Layer], list[str]]:
    """New layers in the new (graph) order, each over its old namesake's keys; unknown old layers last."""
    by_id = {layer.id: layer for layer in old_layers}
    new_ids = {layer.id for layer in new_layers}
    merged = [layer.over(by_id.get(layer.id)) for layer in new_layers]
    leftover = [layer for layer in old_layers if layer.id not in new_ids]
    return merged + leftover, [layer.id for layer in leftover]


def _keys(run: RunFile) -> set[str]:
    """The top-level keys of the run's document."""
    fields = type(run).model_fields
    return {(fields[name].alias or name) if name in fields else name for name in run.model_fields_set}


def _notes(old: RunFile, new: RunFile, unmatched: list[str]) -> tuple[str, ...]:
    notes = []
    present_old = _keys(old)
    kept = [key for key in sorted(present_old) if key not in ESTIMATE_SECTIONS
            and key not in ("schema_version", "tool", "model", "summary", "layers")]
    measured = sum(1 for layer in old.layers if layer.measured)
    if kept or measured:
        notes.append(f"kept: {', '.join(kept) or 'no other section'}"
                     + (f"; {measured} layers' measured times" if measured else ""))
    old_target, new_target = old.target_or_empty, new.target_or_empty
    changed = (old_target.name, old_target.dtype) != (new_target.name, new_target.dtype)
    stale = [key for key in DERIVED_SECTIONS if key in present_old]
    if stale and changed:
        notes.append(f"{', '.join(stale)} came from the estimate on {old_target.name!r} "
                     f"({old_target.dtype}); re-run them against the estimate on {new_target.name!r}")
    if old.timeline is not None and new.timeline is None:
        notes.append("timeline removed: it scheduled the previous estimate (add --timeline to refresh it)")
    if unmatched:
        notes.append(f"{len(unmatched)} layers of the run are not in this model's estimate and kept as they were: "
                     + ", ".join(unmatched[:5]) + (" ..." if len(unmatched) > 5 else ""))
    return tuple(notes)
