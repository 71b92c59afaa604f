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

# Top-level sections an estimate writes; everything else in a run belongs to another command.
ESTIMATE_SECTIONS = ("target", "estimate_info", "folded", "unknown_ops", "timeline")
# Sections computed from the estimate by later commands: stale when the estimate changes.
DERIVED_SECTIONS = ("reconcile", "findings", "comparison")


@dataclass(frozen=True)
class MergeResult:
    """The merged run and one line per thing the user should know (kept, stale, unmatched)."""

    run: dict[str, Any]
    notes: tuple[str, ...]


def check_same_model(old: Mapping[str, Any], new: Mapping[str, Any], where: str) -> None:
    """``RunFileError`` (exit 2) unless ``old`` and ``new`` are runs of the same model with the same inputs."""
    old_model, new_model = old.get("model") or {}, new.get("model") or {}
    old_sha, new_sha = old_model.get("sha256"), new_model.get("sha256")
    if not old_sha:
        raise RunFileError(f"{where} holds a run with no model file behind it (an import without --model?), so "
                           "this estimate cannot be joined to it",
                           hint="write the estimate to another file; nothing was changed")
    if old_sha != new_sha:
        raise RunFileError(
            f"{where} holds a run of another model (sha256 {str(old_sha)[:12]}..., "
            f"{old_model.get('name') or old_model.get('path') or 'unnamed'}; this one is {str(new_sha)[:12]}...)",
            hint="write the estimate to another file; nothing was changed")
    old_inputs = {t.get("name"): t.get("shape") for t in old_model.get("inputs") or []}
    new_inputs = {t.get("name"): t.get("shape") for t in new_model.get("inputs") or []}
    if old_inputs != new_inputs:
        shown = ", ".join(f"{n}={'x'.join(map(str, s or []))}" for n, s in old_inputs.items())
        raise RunFileError(f"{where} was made with other input shapes ({shown})",
                           hint="pass the same --shape, or write the estimate to another file; nothing was changed")


def check_not_vendor_estimate(old: Mapping[str, Any], where: str) -> None:
    """``RunFileError`` (exit 2) when ``old`` holds an imported vendor estimate: replacing it would lose it."""
    methods = {str((old.get("estimate_info") or {}).get("method") or "")}
    methods.update(str((layer.get("estimate") or {}).get("method") or "") for layer in old.get("layers") or [])
    vendor = sorted(m for m in methods if m.startswith("vendor:"))
    if vendor:
        raise RunFileError(f"{where} holds the vendor compiler's own estimate ({', '.join(vendor)}); the roofline "
                           "estimate would replace it",
                           hint="write the estimate to another file and compare the two; nothing was changed")


def merge_estimate(old: Mapping[str, Any], new: Mapping[str, Any], where: str = "the run file") -> MergeResult:
    """``old`` with its estimate replaced by ``new``'s (see the module docstring); neither input is changed."""
    check_same_model(old, new, where)
    check_not_vendor_estimate(old, where)
    merged: dict[str, Any] = {key: value for key, value in old.items() if key not in ESTIMATE_SECTIONS}
    for key in ESTIMATE_SECTIONS:
        if key in new:
            merged[key] = new[key]
    merged["schema_version"] = new["schema_version"]
    merged["tool"] = new["tool"]
    merged["model"] = {**(old.get("model") or {}), **new["model"]}
    merged["summary"] = {**(old.get("summary") or {}), **new["summary"]}
    layers, unmatched = _merge_layers(old.get("layers") or [], new["layers"])
    merged["layers"] = layers
    return MergeResult(merged, _notes(old, new, unmatched))


def _merge_layers(old_layers: list[dict[str, Any]], new_layers: list[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """New layers in the new (graph) order, each over its old namesake's keys; unknown old layers last."""
    by_id = {layer.get("id"): layer for layer in old_layers}
    new_ids = {layer["id"] for layer in new_layers}
    merged = [{**by_id.get(layer["id"], {}), **layer} for layer in new_layers]
    leftover = [layer for layer in old_layers if layer.get("id") not in new_ids]
    return merged + leftover, [str(layer.get("id")) for layer in leftover]


def _notes(old: Mapping[str, Any], new: Mapping[str, Any], unmatched: list[str]) -> tuple[str, ...]:
    notes = []
    kept = [key for key in sorted(old) if key not in ESTIMATE_SECTIONS
            and key not in ("schema_version", "tool", "model", "summary", "layers")]
    measured = sum(1 for layer in old.get("layers") or [] if layer.get("measured"))
    if kept or measured:
        notes.append(f"kept: {', '.join(kept) or 'no other section'}"
                     + (f"; {measured} layers' measured times" if measured else ""))
    old_target, new_target = old.get("target") or {}, new.get("target") or {}
    changed = (old_target.get("name"), old_target.get("dtype")) != (new_target.get("name"), new_target.get("dtype"))
    stale = [key for key in DERIVED_SECTIONS if key in old]
    if stale and changed:
        notes.append(f"{', '.join(stale)} came from the estimate on {old_target.get('name')!r} "
                     f"({old_target.get('dtype')}); re-run them against the estimate on {new_target.get('name')!r}")
    if "timeline" in old and "timeline" not in new:
        notes.append("timeline removed: it scheduled the previous estimate (add --timeline to refresh it)")
    if unmatched:
        notes.append(f"{len(unmatched)} layers of the run are not in this model's estimate and kept as they were: "
                     + ", ".join(unmatched[:5]) + (" ..." if len(unmatched) > 5 else ""))
    return tuple(notes)
