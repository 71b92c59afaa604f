"""The per-layer execution trace users already script against (``hb_trace``-style JSON).

A pure function of a measured run: ``{model_info, execution_trace[...], summary}``, the layout of Horizon's
``hb_trace --trace-level`` output (shared/seeds/002: ``timing {bpu_cycles, total_us, start_time, end_time}``,
``memory {...}``, ``core_id``, ``pipeline_stage``; summary ``total_bpu_cycles``, ``total_time_us``,
``bpu_utilization``, ``memory_peak_mb``). ``level`` chooses the detail: ``basic`` (id, name, op, total),
``full`` (everything), ``memory`` (id, name, op, total, bytes), ``pipeline`` (id, name, op, times, core,
stage, unit).

Per layer:
- ``timing.total_us``: the measured median; ``start_us``/``end_us`` (also under hb_trace's names
  ``start_time``/``end_time``, µs) place it inside the run whose total was the median: a kernel's interval is
  divided among the layers it covers in proportion to their share of its time;
- ``timing.cycles``: ``total_us`` x the clock, only when the run's target is ``host`` (the machine that was
  measured, whose clock the host profile reads); ``timing.est_us``/``est_cycles``: the estimate on the run's
  target and its cycles at that profile's clock (hb_trace's ``bpu_cycles`` on an NPU target);
- ``core_id`` and ``pipeline_stage`` come from the estimate on the target, not from the measurement:
  ``core_id`` is the core the timeline schedules the layer on (0 without a timeline), ``-1`` when the layer
  falls back to the CPU (as hb_trace marks CPU layers); ``pipeline_stage`` numbers the runs of consecutive
  layers on one processor (accelerator subgraph or CPU) in execution order, as the vendor runtime splits a
  model into subgraph nodes (zero-copy layers join the stage they sit in). Both ``null`` when the run holds
  no estimate.

Summary: ``total_time_us`` and ``fps`` are the same statistic (the median of the uninstrumented runs,
``fps = 1e6 / total_time_us``; ``statistic`` says so); ``utilization_pct``: the share of each profiled run
spent inside kernels (hb_trace's ``bpu_utilization``, for the device that ran it); ``est_utilization_pct``:
each unit's busy share of the estimated frame (with a timeline); ``memory_peak_mb`` (MB = 10^6 bytes) /
``memory_peak_bytes``: weights plus the largest set of activations alive at once when the layers run in
order, each layer's outputs alive from it to their last reader, a view's (zero bytes written) inputs as long as
its outputs (no other in-place reuse: an upper bound of what a runtime allocates); ``total_cycles`` and
``total_est_cycles`` as per layer.
"""

from __future__ import annotations

import shlex
from typing import Any

import numpy as np

from layerscope.errors import InputError
from layerscope.report.views.common import Run
from layerscope.runfile.models import (
    Dim,
    KernelProfileMeasurement,
    Latency,
    Layer,
    Measurement,
    RunFile,
    TensorInfo,
    VendorMeasurement,
)

LEVELS = ("basic", "full", "memory", "pipeline")


def execution_trace(run: RunFile, level: str = "full") -> dict[str, Any]:
    """The trace document of a run that holds a measurement and its latency. ``ValueError`` for an unknown level;
    ``InputError`` for a run without a measurement or without a latency P50."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    if run.measurement is None or run.latency is None or run.latency.p50_us is None:
        model_arg = shlex.quote(str(run.model.path).replace("`", "'")) if run.model.path else "MODEL"
        raise InputError("the execution trace needs a measured run (measurement and latency P50)",
                         hint=f"make one with `layerscope profile {model_arg} -o RUN.json`")
    model = run.model
    shapes: dict[str, list[Dim] | None] = {t.name: t.shape for t in model.inputs}
    for layer in run.layers:
        for name, shape in zip(layer.outputs, layer.output_shapes, strict=False):
            if shape is not None:
                shapes[name] = shape
    placed = _placement(run)
    cores, stages = placement_on_target(run)
    target = run.target_or_empty
    clock = target.clock_hz
    measured_clock = clock if target.name == "host" else None
    entries = []
    for index, layer in enumerate(run.layers):
        meas = layer.measured
        total = meas.median_us if meas is not None and meas.median_us is not None else 0.0
        start, end, thread = placed.get(layer.id, (None, None, None))
        placement = level in ("full", "pipeline")
        full = level == "full"
        entries.append({
            "layer_id": index, "layer_name": layer.id, "op_type": layer.op_type,
            "timing": {"total_us": total,
                       **({"start_us": start, "end_us": end, "start_time": start, "end_time": end} if placement
                          else {}),
                       **(_cycles(total, layer.est.latency_us, measured_clock, clock) if full else {})},
            **({"memory": {"input_size_bytes": layer.bytes_read_act, "output_size_bytes": layer.bytes_written,
                           "weight_size_bytes": layer.bytes_read_weight}} if level in ("full", "memory") else {}),
            **({"core_id": cores.get(layer.id), "pipeline_stage": stages.get(layer.id), "unit": layer.est.unit}
               if placement else {}),
            **({"input_shape": next((shapes[i] for i in layer.inputs if i in shapes), None),
                "output_shape": next((s for s in layer.output_shapes if s is not None), None),
                "thread": thread,
                "status": meas.status if meas is not None else None,
                "kernel": meas.kernel if meas is not None else None,
                "fused_group": list(run.fused_group(layer)) or None} if full else {}),
        })
    return {
        "model_info": {"model_name": model.name, "path": model.path, "sha256": model.sha256,
                       "input_shape": [t.shape for t in model.inputs],
                       "output_shape": [t.shape for t in model.outputs],
                       "total_layers": len(run.layers)},
        "execution_trace": entries,
        "summary": _summary(run, level, measurement=run.measurement, latency=run.latency, total_us=run.latency.p50_us,
                            measured_clock=measured_clock, clock=clock),
    }


def _cycles(total_us: float, est_us: float | None, measured_clock: float | None,
            clock: float | None) -> dict[str, Any]:
    return {**({"cycles": round(total_us * measured_clock / 1e6)} if measured_clock else {}),
            **({"est_us": est_us} if est_us is not None else {}),
            **({"est_cycles": round(est_us * clock / 1e6)} if est_us is not None and clock else {})}


def _summary(run: Run, level: str, *, measurement: Measurement, latency: Latency, total_us: float,
             measured_clock: float | None, clock: float | None) -> dict[str, Any]:
    m, lat = measurement, latency
    coverage = m.coverage if isinstance(m, KernelProfileMeasurement | VendorMeasurement) else None
    peak = memory_peak_bytes(run)
    est_total = run.summary.est_latency_us
    timeline = run.timeline
    frame_us = timeline.summary.latency_us if timeline is not None and timeline.summary is not None else None
    target = run.target_or_empty
    return {
        "total_time_us": total_us,
        "fps": round(1e6 / total_us, 3) if total_us > 0 else None,
        "statistic": f"median of {lat.samples} uninstrumented runs (fps = 1e6 / total_time_us)",
        "runs": lat.samples, "runtime": f"{m.backend} {m.backend_version}", "provider": m.provider,
        "threads": m.threads, "opt_level": m.opt_level,
        "machine": None if m.machine is None else m.machine.model_dump(mode="json", exclude_unset=True),
        "level": level,
        "measured": True,
        **({"utilization_pct": round(100 * coverage, 2)} if coverage is not None else {}),
        "memory_peak_bytes": peak,
        "memory_peak_mb": round(peak / 1e6, 3),
        **({"total_cycles": round(total_us * measured_clock / 1e6)} if measured_clock else {}),
        **({"total_est_cycles": round(est_total * clock / 1e6)} if clock and est_total is not None else {}),
        **({"est_utilization_pct": {t.name: round(100 * t.busy_us / frame_us, 2) for t in timeline.units
                                    if t.core == 0 and t.busy and t.busy_us is not None}}
           if timeline is not None and frame_us else {}),
        **({"placement": f"core_id, pipeline_stage, unit and est_* from the estimate on {target.name!r} "
                         f"({target.kind}); timing.total_us, start/end from the measurement"} if target.name else {}),
    }


def placement_on_target(run: Run) -> tuple[dict[str, int], dict[str, int]]:
    """Layer id -> ``core_id`` and -> ``pipeline_stage`` on the run's target (see the module docstring).

    Layers without an estimate are left out (their fields are ``null``).
    """
    scheduled = {s.id: s.core or 0 for s in run.timeline.layers} if run.timeline is not None else {}
    cores: dict[str, int] = {}
    stages: dict[str, int] = {}
    stage, previous = -1, None
    for layer in run.layers:
        est = layer.estimate
        if est is None:
            continue
        on_cpu = bool(est.fallback_reason)
        cores[layer.id] = -1 if on_cpu else scheduled.get(layer.id, 0)
        zero_copy = est.unit == "-" and not on_cpu
        if previous is None or (not zero_copy and on_cpu != previous):
            stage += 1
            previous = on_cpu
        stages[layer.id] = max(stage, 0)
    return cores, stages


def memory_peak_bytes(run: Run) -> int:
    """Weights plus the peak of activations alive at once, layers in run order (see the module docstring)."""
    layers = run.layers
    last_read: dict[str, int] = {}
    for index, layer in enumerate(layers):
        for name in layer.inputs:
            if name:
                last_read[name] = index
    end = len(layers)
    outputs = {t.name for t in run.model.outputs}

    def alive_until(layer: Layer, index: int) -> int:
        return max([end if o in outputs else last_read.get(o, index) for o in layer.outputs] or [index])

    for index in reversed(range(end)):  # a layer writing nothing (a view) keeps its inputs alive through its outputs
        layer = layers[index]
        if not layer.bytes_written:
            until = alive_until(layer, index)
            for name in layer.inputs:
                if name:
                    last_read[name] = max(last_read.get(name, index), until)
    # (first step alive, last step alive, bytes): model inputs from step 0, each layer's outputs from the layer on
    blocks = [(0, end if t.name in outputs else last_read.get(t.name, 0), _tensor_bytes(t)) for t in run.model.inputs]
    for index, layer in enumerate(layers):
        blocks.append((index, max(alive_until(layer, index), index), layer.bytes_written or 0))
    change = [0] * (end + 2)  # a sweep over the steps: +size where a block starts, -size after it ends
    for first, last, size in blocks:
        change[first] += size
        change[last + 1] -= size
    peak = live = 0
    for delta in change:
        live += delta
        peak = max(peak, live)
    return (run.summary.weight_bytes or 0) + peak


def _tensor_bytes(tensor: TensorInfo) -> int:
    """Bytes of a model input from its shape and dtype name (4 per element when the dtype is unknown)."""
    try:
        itemsize = np.dtype(str(tensor.dtype)).itemsize
    except TypeError:
        itemsize = 4
    count = 1
    for dim in tensor.shape or []:
        count *= dim if isinstance(dim, int) and dim > 0 else 1
    return count * itemsize


def _placement(run: Run) -> dict[str, tuple[float, float, int | None]]:
    """Layer id -> (start µs, end µs, thread) inside the median run, from its kernel events (the thread ``None``
    when the runtime named it other than by a number)."""
    members: dict[str, list[tuple[str, float]]] = {}
    for layer in run.layers:
        meas = layer.measured
        if meas is None:
            continue
        for kernel in meas.kernels or []:
            members.setdefault(kernel, []).append((layer.id, meas.median_us if meas.median_us is not None else 0.0))
    placed: dict[str, tuple[float, float, int | None]] = {}
    m = run.measurement
    for event in m.median_run if isinstance(m, KernelProfileMeasurement) else []:
        group = members.get(event.name, [])
        total = sum(t for _, t in group)
        start = event.start_us
        for layer_id, t in group:
            length = event.duration_us * (t / total if total > 0 else 1 / len(group))
            if layer_id not in placed:
                thread = event.thread if isinstance(event.thread, int) else None
                placed[layer_id] = (round(start, 3), round(start + length, 3), thread)
            start += length
    return placed
