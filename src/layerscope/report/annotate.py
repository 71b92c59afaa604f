"""A copy of the run's model whose nodes carry the run's numbers, for Netron (``layerscope report --annotate``).

Contract:

- :func:`check_model` refuses (``InputError``, exit 2) a model file whose sha256 is not the run's: numbers of
  one model are never written onto another;
- :func:`annotate_model` is a pure function: it returns an annotated copy and leaves its input alone. A node is
  matched to a run layer by its first output (unique in an ONNX graph), else by its name; constant nodes the
  estimate folded, and nodes inside subgraphs, are left as they are;
- a matched node gets a ``doc_string`` (Netron's "description") that starts with one ``layerscope:`` line, e.g.
  ``layerscope: est 98.9 µs (bandwidth-bound, TAE) | measured 42.04 ms | 353.89 M MACs``, followed by the
  node's own doc string, and ``metadata_props`` ``layerscope.*`` (Netron's node metadata): estimated and
  measured µs, their ratio, share, MACs, bound, unit, fallback reason, kernel and fused group. Annotating an
  annotated model replaces the earlier ``layerscope`` entries instead of adding more;
- the model gets ``metadata_props`` ``layerscope.summary`` (target, estimated and measured latency).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import onnx

from layerscope.digest import sha256_file
from layerscope.errors import InputError
from layerscope.report.units import human_count, human_us
from layerscope.report.views.common import Run
from layerscope.report.views.layers import LayerRow, layer_rows
from layerscope.runfile.models import RunFile

PREFIX = "layerscope"


@dataclass(frozen=True)
class Annotated:
    """The annotated copy and how many graph nodes got numbers / did not match a layer of the run."""

    model: onnx.ModelProto
    annotated: int
    unmatched: int


def check_model(run: RunFile, path: str | Path | None = None) -> Path:
    """The model file to annotate: ``path``, else the run's ``model.path``; ``InputError`` when there is none,
    it is missing, or its sha256 differs from the run's ``model.sha256``."""
    model = run.model
    source = Path(path) if path is not None else (Path(model.path) if model.path else None)
    if source is None:
        raise InputError("the run names no model file to annotate",
                         hint="it was imported without --model; import again with --model MODEL")
    if not source.is_file():
        raise InputError(f"{source}: no such model file (the run's model)",
                         hint="move the model back or re-create the run")
    expected = model.sha256
    actual = sha256_file(source)
    if not expected or actual != expected:
        raise InputError(f"{source}: sha256 {actual[:12]}... differs from the run's {str(expected)[:12]}..., "
                         "refusing to put this run's numbers on another model",
                         hint="annotate the model the run was made from")
    return source


def node_note(row: LayerRow) -> str:
    """The one-line ``layerscope:`` summary of a layer, as the doc string starts."""
    parts = []
    if row.est_us is not None:
        how = ", ".join(p for p in (f"{row.bound}-bound" if row.bound else "", row.unit or "") if p)
        parts.append(f"est {human_us(row.est_us)}" + (f" ({how})" if how else ""))
    if row.meas_us is not None:
        fused = f", fused x{len(row.fused_group)} in {row.kernel}" if row.fused_group else ""
        parts.append(f"measured {human_us(row.meas_us)}{fused}")
    if row.ratio is not None:
        parts.append(f"meas/est {row.ratio:.2f}")
    if row.macs:
        parts.append(f"{human_count(row.macs)} MACs")
    if row.fallback_reason:
        parts.append(f"CPU fallback: {row.fallback_reason}")
    return f"{PREFIX}: " + (" | ".join(parts) if parts else "no numbers in the run")


def node_props(row: LayerRow) -> dict[str, str]:
    """The ``layerscope.*`` metadata of a layer; absent values are left out."""
    values: dict[str, object | None] = {
        "est_latency_us": row.est_us,
        "meas_median_us": row.meas_us,
        "meas_over_est": None if row.ratio is None else round(row.ratio, 4),
        "share": None if row.share is None else round(row.share, 6),
        "macs": None if row.macs is None else int(row.macs),
        "bound": row.bound,
        "unit": row.unit,
        "fallback_reason": row.fallback_reason,
        "status": row.status,
        "kernel": row.kernel,
        "fused_group": ", ".join(row.fused_group) or None,
        "layer_id": row.id,
    }
    return {f"{PREFIX}.{key}": str(value) for key, value in values.items() if value is not None}


def _set_props(props: onnx.NodeProto | onnx.ModelProto, entries: Mapping[str, str]) -> None:
    """Replace the ``layerscope.*`` entries of ``props.metadata_props`` with ``entries``; keep the others."""
    kept = [(p.key, p.value) for p in props.metadata_props if not p.key.startswith(PREFIX + ".")]
    del props.metadata_props[:]
    for key, value in [*kept, *sorted(entries.items())]:
        entry = props.metadata_props.add()
        entry.key, entry.value = key, value


def _doc(existing: str, note: str) -> str:
    """``note`` first, then the node's own doc string without an earlier ``layerscope:`` line."""
    own = existing.split("\n", 1)[1] if existing.startswith(PREFIX + ":") and "\n" in existing else (
        "" if existing.startswith(PREFIX + ":") else existing)
    return f"{note}\n{own}" if own else note


def _summary(run: Run) -> str:
    estimated = run.summary.est_latency_us
    p50 = run.latency.p50_us if run.latency is not None else None
    parts = [f"target {run.target.name}" if run.target is not None else ""]
    if estimated is not None:
        parts.append(f"estimated {human_us(estimated)}")
    if p50 is not None:
        parts.append(f"measured P50 {human_us(p50)}")
    return "; ".join(p for p in parts if p) or "no latency in the run"


def annotate_model(model: onnx.ModelProto, run: RunFile) -> Annotated:
    """An annotated copy of ``model`` (see the module docstring); ``model`` itself is not changed."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    rows = layer_rows(run)
    by_output = {row.layer.outputs[0]: row for row in rows if row.layer.outputs}
    by_name = {row.layer.name: row for row in rows if row.layer.name}
    annotated = unmatched = 0
    for node in copy.graph.node:
        row = (by_output.get(node.output[0]) if node.output else None) or by_name.get(node.name)
        if row is None:
            unmatched += 1
            continue
        node.doc_string = _doc(node.doc_string, node_note(row))
        _set_props(node, node_props(row))
        annotated += 1
    _set_props(copy, {f"{PREFIX}.summary": _summary(run)})
    return Annotated(copy, annotated, unmatched)
