"""Refresh the estimate inside an existing run without losing what was measured (``estimate --json RUN``).

Contract of :func:`merge_estimate` (``old``: the run already in the file, read by :func:`read_existing`; ``new``: a
fresh estimate run of the same model, as :func:`layerscope.run.estimate_run` makes it, with or without a
``timeline``):

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
  ``stress``, ``pipeline``, ``comparison``, ``imported``, ...) is kept as it was, and written as it was read. The
  notes say which of them were derived from the previous estimate (``reconcile``, ``findings``, ``comparison``)
  when its target or dtype changed, so the user knows to re-run them.

The old run is held as the merge needs it (:class:`ExistingRun`), not whole: a 100k-layer run's typed layers take
~500 MB, more than the estimate that replaces them, and an estimate's old layers hold nothing the new ones do not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.errors import RunFileError
from layerscope.run import ESTIMATE_LAYER_FIELDS
from layerscope.runfile.io import (
    check_apart,
    layers_of,
    parse_document,
    read_run_text,
    section_key,
    upgrade,
)
from layerscope.runfile.models import Layer, RunFile, Tool

# Top-level sections an estimate writes; everything else in a run belongs to another command.
ESTIMATE_SECTIONS = ("target", "estimate_info", "folded", "unknown_ops", "timeline", "predictor")
# Summary keys only an estimate with a kernel predictor writes: an estimate without one drops the old run's.
PREDICTION_SUMMARY_KEYS = ("est_source", "est_low_us", "est_high_us", "roofline_latency_us", "roofline_fps")
# Summary keys the roofline estimate writes only when not zero: an old run's are stale when the new estimate has none.
ESTIMATE_OPTIONAL_SUMMARY_KEYS = ("est_task_overhead_us", "est_output_handover_us")
# Sections computed from the estimate by later commands: stale when the estimate changes.
DERIVED_SECTIONS = ("reconcile", "findings", "comparison")
# Sections the new estimate run brings (``model``, ``summary`` and ``layers`` are merged key by key; ``tool`` keeps
# the command that made the run merged into: it stays that command's run, with a refreshed estimate).
OWN_SECTIONS = ("schema_version", "tool")
# Sections merged from both runs.
MERGED_SECTIONS = ("model", "summary", "layers")


@dataclass(frozen=True)
class OldLayers:
    """The layers of the run merged into, as the merge needs them: their ids in order, in full only the layers
    holding a key an estimate's layer does not set (:data:`~layerscope.run.ESTIMATE_LAYER_FIELDS`; a new layer sets
    every key of the others, which then add nothing to it), and a way to read the others again should they be
    needed (a layer the new estimate does not know is kept as it was).

    ``id_parts``: the ids as JSON lists of :data:`~layerscope.runfile.io.CHECK_CHUNK` ids: text, not 100k strings,
    which would keep the memory of the parsed file they come from (~250 MB at 100k layers) from being reused by
    the estimate; ``kept``: the layers in full by position; ``measured``: how many have a ``measured`` section;
    ``estimate_methods``: the ``method`` of their estimates (``""`` for none); ``read``: the run's layers as read
    (documents), in order."""

    id_parts: tuple[str, ...]
    kept: Mapping[int, Layer]
    measured: int
    estimate_methods: frozenset[str]
    read: Callable[[], Sequence[Any]]

    def ids(self) -> list[str]:
        """The layers' ids, in order."""
        return [layer_id for part in self.id_parts for layer_id in json.loads(part)]

    def at(self, positions: Iterable[int]) -> dict[int, Layer]:
        """The layers at ``positions``, in full: the kept ones as they are, the others read again and typed."""
        wanted = set(positions)
        missing = sorted(k for k in wanted if k not in self.kept)
        read = self.read() if missing else ()
        layers = dict(zip(missing, layers_of([read[k] for k in missing]), strict=True))
        return {k: self.kept[k] if k in self.kept else layers[k] for k in wanted}


@dataclass(frozen=True)
class ExistingRun:
    """A run to merge an estimate into (:func:`existing_run`, :func:`read_existing`): ``document``, its top-level
    sections but ``layers`` as read (migrated to version 2); ``run``, the same typed (checked), its ``layers``
    empty; ``layers``, its layers (:class:`OldLayers`)."""

    document: Mapping[str, Any]
    run: RunFile
    layers: OldLayers


@dataclass(frozen=True)
class MergeResult:
    """The merged run and one line per thing the user should know (kept, stale, unmatched). ``run`` is typed;
    ``as_read`` holds the sections it keeps from the old run as they were read, which are written so
    (:func:`layerscope.run.save_run`'s ``as_read``)."""

    run: RunFile
    as_read: Mapping[str, Any]
    notes: tuple[str, ...]

    def document(self) -> dict[str, Any]:
        """The merged run's JSON document: what :func:`layerscope.run.save_run` writes of it."""
        return {**self.run.to_json(), **self.as_read}


def read_existing(path: str | os.PathLike[str]) -> ExistingRun:
    """The run file at ``path`` to merge into, read and checked as :func:`layerscope.run.load_run` does
    (``RunFileError`` when it is not a valid run). The layers the merge needs in full but does not hold
    (:class:`OldLayers`) are read from the file again: ``RunFileError`` (exit 2, nothing written) when its text is
    no longer the one read and checked (the file changed while the estimate ran)."""
    text = read_run_text(path)
    digest = hash(text)  # not the text: 62 MB of a 100k-layer run, needed again only for a layer the estimate lacks

    def read_again() -> Sequence[Any]:
        again = read_run_text(path)
        if hash(again) != digest:
            raise RunFileError(f"{path} changed while the estimate ran",
                               hint="run the estimate again; nothing was changed")
        layers: Sequence[Any] = parse_document(again, path)["layers"]
        return layers

    return existing_run(parse_document(text, path), path, read_again)


def existing_run(document: Mapping[str, Any], source: str | os.PathLike[str] = "run",
                 read: Callable[[], Sequence[Any]] | None = None) -> ExistingRun:
    """``document`` (a run, version 1 or 2) to merge into, checked (``RunFileError`` naming ``source`` and the bad
    field); ``read``: its layers as read, when needed again (default: ``document``'s own, kept)."""
    migrated = upgrade(document)
    raw = migrated["layers"]
    run, parts = check_apart(migrated, source)
    id_parts: list[str] = []
    kept: dict[int, Layer] = {}
    measured = 0
    methods: set[str] = set()
    position = 0
    for part in parts:
        id_parts.append(json.dumps([layer.id for layer in part], ensure_ascii=False))
        kept.update((position + k, layer) for k, layer in enumerate(part) if not _estimate_keys_only(layer))
        measured += _measured(part)
        methods |= _estimate_methods(part)
        position += len(part)
    layers = OldLayers(tuple(id_parts), kept, measured, frozenset(methods), read or (lambda: raw))
    return ExistingRun({key: value for key, value in migrated.items() if key != "layers"}, run, layers)


def _estimate_keys_only(layer: Layer) -> bool:
    """Whether ``layer`` holds only keys an estimate's layer sets (then a new layer of its id holds it all)."""
    return not layer.__pydantic_extra__ and layer.model_fields_set <= ESTIMATE_LAYER_FIELDS


def _measured(layers: Iterable[Layer]) -> int:
    """How many of ``layers`` have a ``measured`` section."""
    return sum(1 for layer in layers if layer.measured)


def _estimate_methods(layers: Iterable[Layer]) -> set[str]:
    """The ``method`` of the estimates of ``layers`` (``""`` for none)."""
    return {str(layer.est.method or "") for layer in layers}


def check_same_model(old: RunFile, new: RunFile, where: str) -> None:
    """``RunFileError`` (exit 2) unless ``old`` and ``new`` are runs of the same model with the same inputs."""
    old_model, new_model = old.model, new.model
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


def check_not_vendor_estimate(old: ExistingRun, where: str) -> None:
    """``RunFileError`` (exit 2) when ``old`` holds an imported vendor estimate: replacing it would lose it."""
    info = old.run.estimate_info
    methods = {str(info.method or "") if info is not None else "", *old.layers.estimate_methods}
    vendor = sorted(m for m in methods if m.startswith("vendor:"))
    if vendor:
        raise RunFileError(f"{where} holds the vendor compiler's own estimate ({', '.join(vendor)}); the roofline "
                           "estimate would replace it",
                           hint="write the estimate to another file and compare the two; nothing was changed")


def merge_estimate(old: ExistingRun, new: RunFile, where: str = "the run file") -> MergeResult:
    """``old`` (:func:`read_existing`, :func:`existing_run`) with its estimate replaced by ``new``'s (see the
    module docstring); neither input is changed. ``where``: how errors name the run merged into."""
    check_same_model(old.run, new, where)
    check_not_vendor_estimate(old, where)
    layers, unmatched = _merge_layers(old.layers, new.layers)
    old_run = old.run
    replaced = (*ESTIMATE_SECTIONS, *OWN_SECTIONS)
    as_read = {key: value for key, value in old.document.items()
               if key not in replaced and key not in MERGED_SECTIONS}
    sections = {key: _section(old_run, key) for key in as_read}
    sections.update((key, _section(new, key)) for key in _keys(new) if key in replaced)
    if new.tool is not None:  # the run stays what its command made, with a refreshed estimate: its report too
        sections["tool"] = _kept_command(new.tool, old_run.tool)
    sections.update(model=new.model.over(old_run.model),
                    summary=new.summary.over(None if old_run.summary is None else old_run.summary.without(
                        (*PREDICTION_SUMMARY_KEYS, *ESTIMATE_OPTIONAL_SUMMARY_KEYS))), layers=layers)
    names = {_name(key): value for key, value in sections.items()}
    merged = RunFile.model_construct(_fields_set=set(names), **names)
    return MergeResult(merged, as_read, _notes(old, new, unmatched))


def _kept_command(new: Tool, old: Tool | None) -> Tool:
    """The merged run's ``tool``: ``new``'s name and version, the ``command`` ``old`` recorded (none when ``old``
    recorded none or is not layerscope's: its report is then read from its sections, as before)."""
    fields: dict[str, Any] = {"name": new.name, "version": new.version}
    if old is not None and old.name == "layerscope" and old.command is not None:
        fields["command"] = old.command
    return Tool.trusted(fields)


def _merge_layers(old: OldLayers, new_layers: list[Layer]) -> tuple[list[Layer], list[str]]:
    """New layers in the new (graph) order, each over its old namesake's keys (``Layer.over``; the last old layer
    of an id, as a dict built from the list); unknown old layers last."""
    old_ids = old.ids()
    position = {layer_id: k for k, layer_id in enumerate(old_ids)}
    new_ids = {layer.id for layer in new_layers}
    leftover = [k for k, layer_id in enumerate(old_ids) if layer_id not in new_ids]
    # an old layer adds nothing to a new one that sets every key it holds (estimate keys only): not read again
    namesakes = {layer.id: k for layer in new_layers if (k := position.get(layer.id)) is not None
                 and (k in old.kept or not layer.model_fields_set.issuperset(ESTIMATE_LAYER_FIELDS))}
    full = old.at([*namesakes.values(), *leftover])
    merged = [layer.over(full[namesakes[layer.id]]) if layer.id in namesakes else layer for layer in new_layers]
    return merged + [full[k] for k in leftover], [old_ids[k] for k in leftover]


def _section(run: RunFile, key: str) -> Any:
    """The top-level section ``key`` (its key in the file) of ``run``."""
    name = _name(key)
    extra = run.__pydantic_extra__ or {}
    return getattr(run, name) if name in RunFile.model_fields else extra[name]


def _name(key: str) -> str:
    """The field of :class:`RunFile` of the key ``key`` in the file (an unknown key: itself)."""
    return next((name for name, info in RunFile.model_fields.items() if info.alias == key), key)


def _keys(run: RunFile) -> set[str]:
    """The top-level keys of the run's document."""
    return {section_key(name) for name in run.model_fields_set}


def _notes(old: ExistingRun, new: RunFile, unmatched: list[str]) -> tuple[str, ...]:
    notes = []
    present_old = _keys(old.run)
    kept = [key for key in sorted(present_old) if key not in ESTIMATE_SECTIONS
            and key not in ("schema_version", "tool", "model", "summary", "layers")]
    measured = old.layers.measured
    if kept or measured:
        notes.append(f"kept: {', '.join(kept) or 'no other section'}"
                     + (f"; {measured} layers' measured times" if measured else ""))
    old_target, new_target = old.run.target_or_empty, new.target_or_empty
    changed = (old_target.name, old_target.dtype) != (new_target.name, new_target.dtype)
    stale = [key for key in DERIVED_SECTIONS if key in present_old]
    if stale and changed:
        notes.append(f"{', '.join(stale)} came from the estimate on {old_target.name!r} "
                     f"({old_target.dtype}); re-run them against the estimate on {new_target.name!r}")
    if old.run.timeline is not None and new.timeline is None:
        notes.append("timeline removed: it scheduled the previous estimate (add --timeline to refresh it)")
    if unmatched:
        notes.append(f"{len(unmatched)} layers of the run are not in this model's estimate and kept as they were: "
                     + ", ".join(unmatched[:5]) + (" ..." if len(unmatched) > 5 else ""))
    return tuple(notes)
