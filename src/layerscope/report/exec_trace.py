"""The per-layer execution trace users already script against (``hb_trace``-style JSON).

A pure function of a measured run: ``{model_info, execution_trace[...], summary}``. Each layer's
``timing.start_us``/``end_us`` place it inside the run whose total was the median: a kernel's interval is
divided among the layers it covers in proportion to their share of its time. ``level`` chooses the detail:
``basic`` (id, name, op, total), ``full`` (everything), ``memory`` (id, name, op, total, bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from layerscope.run import fused_group

LEVELS = ("basic", "full", "memory")


def execution_trace(run: Mapping[str, Any], level: str = "full") -> dict[str, Any]:
    """The trace document of a run that holds a measurement. ``ValueError`` for an unknown level."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    model, m, lat = run["model"], run["measurement"], run["latency"]
    shapes = {t["name"]: t["shape"] for t in model["inputs"]}
    for layer in run["layers"]:
        for name, shape in zip(layer["outputs"], layer.get("output_shapes", []), strict=False):
            if shape is not None:
                shapes[name] = shape
    placed = _placement(run)
    entries = []
    groups: dict[str, tuple[str, ...]] = {}
    for index, layer in enumerate(run["layers"]):
        meas = layer.get("measured") or {}
        entry: dict[str, Any] = {"layer_id": index, "layer_name": layer["id"], "op_type": layer["op_type"],
                                 "timing": {"total_us": meas.get("median_us", 0.0)}}
        if level in ("full", "memory"):
            entry["memory"] = {"input_size_bytes": layer["bytes_read_act"],
                               "output_size_bytes": layer["bytes_written"],
                               "weight_size_bytes": layer["bytes_read_weight"]}
        if level == "full":
            start, end, thread = placed.get(layer["id"], (None, None, None))
            entry["timing"].update({"start_us": start, "end_us": end})
            entry["input_shape"] = next((shapes[i] for i in layer["inputs"] if i in shapes), None)
            entry["output_shape"] = next((s for s in layer.get("output_shapes", []) if s is not None), None)
            entry["thread"] = thread
            entry["status"] = meas.get("status")
            entry["kernel"] = meas.get("kernel")
            entry["fused_group"] = list(fused_group(run, meas, groups)) or None
        entries.append(entry)
    return {
        "model_info": {"model_name": model["name"], "path": model["path"], "sha256": model["sha256"],
                       "input_shape": [t["shape"] for t in model["inputs"]],
                       "output_shape": [t["shape"] for t in model.get("outputs", [])],
                       "total_layers": len(run["layers"])},
        "execution_trace": entries,
        "summary": {"total_time_us": lat["p50_us"], "fps": lat["fps"], "runs": lat["samples"],
                    "runtime": f"{m['backend']} {m['backend_version']}", "provider": m["provider"],
                    "threads": m["threads"], "opt_level": m["opt_level"], "machine": m["machine"],
                    "level": level, "measured": True},
    }


def _placement(run: Mapping[str, Any]) -> dict[str, tuple[float, float, int]]:
    """Layer id -> (start µs, end µs, thread) inside the median run, from its kernel events."""
    members: dict[str, list[tuple[str, float]]] = {}
    for layer in run["layers"]:
        meas = layer.get("measured") or {}
        for kernel in meas.get("kernels", []):
            members.setdefault(kernel, []).append((layer["id"], float(meas.get("median_us", 0.0))))
    placed: dict[str, tuple[float, float, int]] = {}
    for event in run["measurement"].get("median_run", []):
        group = members.get(event["name"], [])
        total = sum(t for _, t in group)
        start = float(event["start_us"])
        for layer_id, t in group:
            length = event["duration_us"] * (t / total if total > 0 else 1 / len(group))
            if layer_id not in placed:
                placed[layer_id] = (round(start, 3), round(start + length, 3), int(event["thread"]))
            start += length
    return placed
