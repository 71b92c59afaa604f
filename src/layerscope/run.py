"""The run file: one JSON document that every command writes or extends and every reporter reads.

Contract:
- top-level keys ``schema_version``, ``tool``, ``model``, ``target``, ``layers``, ``summary``,
  ``unknown_ops``, ``folded``; later commands add sections (e.g. ``measurement``) without renaming these;
- every layer has the stable ``id`` used to join estimate, measurement, findings and reports;
- :func:`save_run` writes atomically (temporary file in the same folder, then ``os.replace``) and
  deterministically (sorted keys, fixed float formatting) so the same run gives identical bytes;
- :func:`load_run` refuses files of another ``schema_version`` with a message saying which.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from layerscope import __version__
from layerscope.costs.types import UnitKind
from layerscope.errors import RunFileError
from layerscope.estimate.types import Estimate
from layerscope.model.types import Graph, TensorInfo
from layerscope.targets import Profile

SCHEMA_VERSION = 1


def save_run(run: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``run`` to ``path`` atomically; return the path written."""
    target = Path(path)
    if target.parent and not target.parent.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(run, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_run(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a run file. ``RunFileError`` (exit 2) when missing, not JSON, or of another schema."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFileError(f"{source}: no such run file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFileError(f"{source}: not a layerscope run file ({exc})") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise RunFileError(f"{source}: not a layerscope run file (no schema_version)")
    version = data["schema_version"]
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise RunFileError(
            f"{source}: run file schema {version} is {'newer' if newer else 'older'} than this layerscope's "
            f"({SCHEMA_VERSION})",
            hint="upgrade layerscope" if newer else "re-create the run with this version")
    for key in ("model", "layers", "summary"):
        if key not in data:
            raise RunFileError(f"{source}: run file has no {key!r} section")
    return data


def model_section(graph: Graph) -> dict[str, Any]:
    """The ``model`` section: what was analysed, enough to tell two models apart."""
    return {
        "name": graph.name,
        "path": graph.path,
        "sha256": graph.sha256,
        "opset": graph.opset,
        "producer": graph.producer,
        "inputs": [_tensor_dict(t) for t in graph.inputs],
        "outputs": [_tensor_dict(t) for t in graph.outputs],
    }


def _tensor_dict(t: TensorInfo) -> dict[str, Any]:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype}


def run_from_estimate(graph: Graph, estimate: Estimate, profile: Profile) -> dict[str, Any]:
    """A run holding the model, its per-layer costs and the estimate on ``profile``."""
    layers = []
    for node, cost, est in zip(graph.layers, estimate.costs, estimate.layers, strict=True):
        layers.append({
            "id": node.id,
            "name": node.name,
            "op_type": node.op_type,
            "domain": node.domain,
            "inputs": list(node.inputs),
            "outputs": list(node.outputs),
            "output_shapes": [list(t.shape) if (t := graph.tensor(o)) else None for o in node.outputs],
            "dtype": cost.dtype,
            "macs": cost.macs,
            "flops": cost.flops,
            "bytes_read": cost.bytes_read,
            "bytes_read_act": cost.bytes_read_act,
            "bytes_read_weight": cost.bytes_read_weight,
            "bytes_written": cost.bytes_written,
            "weight_bytes": cost.bytes_read_weight,
            "params": cost.params,
            "unit_kind": cost.unit_kind.value,
            "unit": est.unit,
            "known": cost.known,
            "estimate": {
                "latency_us": _us(est.latency_us),
                "compute_us": _us(est.compute_us),
                "load_us": _us(est.load_us),
                "store_us": _us(est.store_us),
                "overhead_us": _us(est.overhead_us),
                "bound": est.bound.value,
                "unit": est.unit,
                "dtype": est.dtype,
                "ddr_read_bytes": est.ddr_read_bytes,
                "ddr_write_bytes": est.ddr_write_bytes,
                "weight_passes": est.weight_passes,
                "fallback_reason": est.fallback_reason,
            },
        })
    unknown: dict[tuple[str, str], list[str]] = {}
    for node, cost in zip(graph.layers, estimate.costs, strict=True):
        if not cost.known:
            unknown.setdefault((node.domain, node.op_type), []).append(node.id)
    latency_us = estimate.latency_us
    tensor_macs = sum(c.macs for c in estimate.costs if c.unit_kind is UnitKind.TENSOR)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "layerscope", "version": __version__},
        "model": model_section(graph),
        "target": {
            "name": profile.name,
            "kind": profile.kind,
            "description": profile.description,
            "source_path": profile.source_path,
            "dtype": estimate.dtype,
        },
        "estimate_info": {
            "method": "roofline",
            "note": f"static estimate on profile {profile.name!r}, not a measurement",
        },
        "layers": layers,
        "folded": [n.id for n in graph.folded],
        "unknown_ops": [{"domain": d, "op_type": op, "count": len(ids), "layers": ids}
                        for (d, op), ids in sorted(unknown.items())],
        "summary": {
            "layer_count": len(graph.layers),
            "folded_count": len(graph.folded),
            "zero_copy_count": sum(1 for c in estimate.costs if c.unit_kind is UnitKind.ZERO_COPY),
            "unknown_count": sum(len(ids) for ids in unknown.values()),
            "macs": sum(c.macs for c in estimate.costs),
            "tensor_macs": tensor_macs,
            "flops": sum(c.flops for c in estimate.costs),
            "params": sum(c.params for c in estimate.costs),
            "weight_bytes": graph.weight_bytes,
            "ddr_bytes": estimate.ddr_bytes,
            "est_latency_us": _us(latency_us),
            "est_fps": round(1e6 / latency_us, 3) if latency_us > 0 else None,
            "cpu_fallback_count": estimate.fallback_count,
        },
    }


def _us(value: float) -> float:
    """Microseconds rounded to nanoseconds: stable bytes across platforms' float printing."""
    return round(value, 3)
