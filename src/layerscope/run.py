"""The run file: one JSON document that every command writes or extends and every reporter reads.

Schema (version 2; typed in :mod:`layerscope.runfile.models`, published by ``layerscope schema``). Sections are
optional unless marked; a run may hold an estimate, a measurement or both:
- ``schema_version`` (required), ``tool`` {name, version}
- ``model`` (required) {name, path, sha256, opset, producer, inputs[{name, shape, dtype}], outputs[...]}
- ``target`` {name, kind, description, source_path, dtype, clock_hz, ddr_effective_bytes_per_s (attainable),
  ddr_nominal_bytes_per_s (the vendor's figure, ``null`` when none)} -- the profile of the estimate, when there is one
- ``estimate_info`` {method, note}
- ``layers`` (required) [{id, name, op_type, domain, inputs, outputs, output_shapes, dtype, macs, flops,
  bytes_read, bytes_read_act, bytes_read_weight, bytes_written, weight_bytes, params, unit_kind, unit, known,
  ``estimate`` {latency_us, compute_us, load_us, store_us, overhead_us, bound, unit, dtype, ddr_read_bytes,
  ddr_write_bytes, weight_passes, fallback_reason, method?},
  ``measured`` {median_us, mean_us, p90_us, min_us, max_us, std_us, cv, samples, kernel, fused_group, split,
  method} }] -- ``measured.kernel`` names the runtime kernel the time came from; ``fused_group`` lists the
  ids of the layers that ran as that one kernel (``null`` when alone; for a group of more than
  ``FUSED_GROUP_INLINE_MAX`` layers it is ``null`` with ``fused_group_size`` set, and the list is the
  ``kernels[]`` row named by ``kernel``, stored once: read it with
  :func:`layerscope.runfile.derived.fused_group`); ``split`` is
  true when the kernel's time was divided over several layers; ``method`` is ``"kernel-profile"``, ``"differential"`` or
  ``"vendor:<tool>"``.
- ``kernels`` [{name, op_type, provider, median_us, mean_us, p90_us, min_us, max_us, std_us, cv, samples,
  layers, category}] -- runtime kernels; ``category`` is ``"layer"``, ``"layout"`` or ``"unmapped"``
- ``measurement`` {backend, backend_version, provider, threads, opt_level, runs, warmup, coverage, overhead,
  unmapped_kernels, steadiness {latency_cv, latency_drift, profiled_drift}, machine {hostname, cpu, cores, os,
  python}, created_utc, source, kind} -- ``kind`` (version 2) tags the shape: ``kernel-profile``, ``bench``,
  ``differential`` or ``vendor-import``; ``steadiness``: run-to-run CV of the uninstrumented runs and the drift
  (:func:`layerscope.stats.drift`) of the uninstrumented and of the profiled runs
- ``latency`` {mean_us, min_us, max_us, p50_us, p90_us, p99_us, p999_us, fps, samples, source} -- end to end,
  always from uninstrumented runs
- ``summary`` (required) {macs, est_latency_us, ...}, ``unknown_ops``, ``folded``
- ``timeline`` {method, note, split, cores, dtype, summary, memory, layers, units, temporal} -- one frame
  scheduled per unit and core, DDR bandwidth over time and the memory plan (``estimate --timeline``;
  fields in :func:`timeline_section`)
- ``reconcile`` {k, measured_us, estimated_us, scope, layers[{name, estimated_us, share, scaled_us, measured_us?,
  error?}], measured_on, device_mismatch, ...} -- k = measured / estimated for the same part of the model
  (:func:`layerscope.runfile.scale_factor` defines which part); ``measured_on`` says where the measurement came
  from, ``device_mismatch`` warns when that is not the estimate's target; ``layerscope import`` writes the
  first keys, ``layerscope reconcile`` adds end_to_end, spearman, top_overlap, median_abs_error, verdict,
  by_op_type, by_bound, by_unit_kind and, over several runs, spread
  (:func:`layerscope.analysis.reconcile.reconcile_section`)
- ``findings`` {source, count, by_severity, items[{rule, severity, layers, hazard, mitigation, evidence,
  expected_gain_us, help}], skipped_rules, diagnosis} -- ``layerscope advise``
  (:mod:`layerscope.analysis.findings`, :func:`layerscope.analysis.diagnose.diagnosis_section`)
- ``comparison`` {before, after, time_source, metrics[], layers[], renamed[], added[], removed[]} -- in the
  *after* run, ``layerscope compare --json`` (:func:`layerscope.analysis.compare.comparison_section`)
- ``pipeline`` {function, runs, warmup, interrupted, model_calls_per_run, end_to_end {stats}, breakdown {pre_us,
  model_us, post_us, other_us, end_to_end_us} (means), stages [{name, kind, depth, parent, calls_per_run, stats, self}],
  top [{name, kind, median_us, p90_us, share}], trace {phase, run}, spans [{name, kind, thread, thread_name,
  start_us, duration_us, depth, run}], kernels [{name, thread, start_us, duration_us, layers}] (µs from the traced
  run's start)} -- user trace points and model calls (``layerscope pipeline``;
  :mod:`layerscope.runtimes.onnxruntime.pipeline`)
- ``stress`` {processes, buffer_bytes, traffic_bytes_per_s, rounds [{baseline, stressed, ratio_p50}],
  latency_ratio_p50, layer_ratio, sensitive_layers, rule, ...} with ``layers[].measured.stress_baseline_us``,
  ``stress_median_us``, ``stress_ratio``, ``stress_ratio_min``, ``memory_sensitive`` (``bench`` / ``profile
  --stress``; :func:`layerscope.measure.stress.stress_section`)

Contract:
- top-level keys ``schema_version``, ``tool``, ``model``, ``target``, ``layers``, ``summary``,
  ``unknown_ops``, ``folded``; later commands add sections (e.g. ``measurement``) without renaming these;
- every layer has the stable ``id`` used to join estimate, measurement, findings and reports;
- :func:`save_run` writes atomically (temporary file in the same folder, then ``os.replace``) and
  deterministically (sorted keys, fixed float formatting) so the same run gives identical bytes; a path ending in
  ``.gz`` gets the same text gzip-compressed (about 10x smaller), which every reader opens as it is;
- :func:`load_run` migrates a version-1 file, checks the document against the schema (one line naming the file
  and the JSON path of the bad field, exit 2) and refuses files of another ``schema_version`` saying which;
- the producers build the typed run (:class:`~layerscope.runfile.models.RunFile`): :func:`estimate_run`, then
  :func:`add_measurement` / :func:`add_partial_latency` / :func:`add_timeline` return a new run (the input is
  not changed); :func:`save_run` dumps a typed run once, where it is written; :func:`load_run` reads one typed. A
  run's JSON document is typed once where it enters (:func:`layerscope.runfile.as_run`); other JSON records (the
  bisect cache's) are written by :func:`save_record`;
- these functions are thin wrappers over :mod:`layerscope.runfile`, which owns the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerscope.collector import collector_paused
from layerscope.costs.types import UnitKind
from layerscope.fileio import write_atomic
from layerscope.rounding import rounded, rounded_or_none
from layerscope.runfile.commands import RunKind, written_by
from layerscope.runfile.io import SCHEMA_VERSION as SCHEMA_VERSION  # noqa: PLC0414 (explicit re-export, PEP 484)
from layerscope.runfile.io import dump_text, encode, encode_parts, load, run_parts
from layerscope.runfile.models import (
    EstimateInfo,
    Event,
    Kernel,
    KernelProfileMeasurement,
    Latency,
    Layer,
    LayerEstimate,
    LayerMeasured,
    Machine,
    MeasuredMemory,
    ModelInfo,
    Rows,
    RunFile,
    SharedWeights,
    Steadiness,
    Summary,
    Target,
    TensorInfo,
    TimelineBusy,
    TimelineLayer,
    TimelineUnit,
    UnknownOp,
    latency_samples,
)
from layerscope.runfile.models import Timeline as TimelineSection

if TYPE_CHECKING:  # annotations only: reading and writing run files needs none of these modules
    from layerscope.costs.types import LayerCost
    from layerscope.estimator.timeline import Schedule, Timeline, Track
    from layerscope.estimator.types import Estimate
    from layerscope.measure.profile import Measurement, PartialProfile
    from layerscope.model.types import Graph, Node
    from layerscope.model.types import TensorInfo as GraphTensor
    from layerscope.stats import LatencyStats
    from layerscope.targets import Profile


def save_run(run: RunFile, path: str | os.PathLike[str], as_read: Mapping[str, Any] | None = None) -> Path:
    """Write ``run`` (dumped here once, as schema version 2) to ``path`` atomically, gzip-compressed when ``path``
    ends in ``.gz``; return the path written. ``as_read``: top-level sections written as these documents in place of
    the run's dump of them (sections carried unchanged from the file the run was read from:
    :func:`layerscope.runfile.io.run_parts`). A run's JSON document is typed once where it enters
    (:func:`layerscope.runfile.as_run`) before it is written here."""
    return write_atomic(path, encode_parts(run_parts(run, as_read), path))


def save_record(record: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``record``, a JSON object that is not a run (a bisect cache sample ...), to ``path`` atomically and
    deterministically (sorted keys, one-space indent, NaN refused), gzip-compressed when ``path`` ends in ``.gz``;
    return the path written. ``ValueError`` for a run's document (one with a ``schema_version``): a run is written
    typed, by :func:`save_run`."""
    if "schema_version" in record:
        raise ValueError("a run's document is written typed: save_run(as_run(document), path)")
    return write_atomic(path, encode(dump_text(record), path))


def load_run(path: str | os.PathLike[str]) -> RunFile:
    """The run file at ``path``, typed (:func:`layerscope.runfile.load`): a version-1 file migrated. ``RunFileError``
    (exit 2) when missing, not JSON, of another schema, or with a field of the wrong type (the message names the JSON
    path). The checked JSON document, for a reader of the file as written, is
    :func:`layerscope.runfile.load_document`'s."""
    return load(path)


def model_section(graph: Graph) -> ModelInfo:
    """The ``model`` section: what was analysed, enough to tell two models apart."""
    return ModelInfo.trusted({
        "name": graph.name, "path": graph.path, "sha256": graph.sha256, "opset": graph.opset,
        "producer": graph.producer, "inputs": [_tensor(t) for t in graph.inputs],
        "outputs": [_tensor(t) for t in graph.outputs], "assumptions": list(graph.assumptions),
        "shape_sources": graph.shape_source_counts()})


def _tensor(t: GraphTensor) -> TensorInfo:
    return TensorInfo.trusted({"name": t.name, "shape": list(t.shape), "dtype": t.dtype})


def layer_record(graph: Graph, node: Node, cost: LayerCost, *, unit: str | None = None,
                 estimate: LayerEstimate | None = None, measured: LayerMeasured | None = None,
                 **extra: Any) -> Layer:
    """A run's layer: identity, tensors and cost (hardware-independent), ``unit`` (``None`` when not known), and
    the ``estimate`` / ``measured`` sections when given (absent from the file otherwise); ``extra``: further keys
    of the layer (a vendor's ``status`` ...)."""
    sections: dict[str, Any] = {
        name: value for name, value in (("estimate", estimate), ("measured", measured)) if value is not None}
    return Layer(**_layer_fields(graph, node, cost, unit), **sections, **extra)


def _layer_fields(graph: Graph, node: Node, cost: LayerCost, unit: str | None) -> dict[str, Any]:
    """The fields of :func:`layer_record`'s layer that the graph and the cost give, as validation leaves them
    (Python ints, lists), so that :meth:`Layer.trusted` may take them as they are."""
    return {**dict(zip(_LAYER_NAMES, _layer_values(graph.tensors, node, cost, unit), strict=True)),
            **control_record(node)}


#: The names of :func:`_layer_values`, in order.
_LAYER_NAMES = ("id", "name", "op_type", "domain", "inputs", "outputs", "output_shapes", "dtype", "macs", "flops",
                "bytes_read", "bytes_read_act", "bytes_read_weight", "bytes_written", "weight_bytes", "params",
                "unit_kind", "unit", "known")
#: The fields of a layer of :func:`estimate_run`, in the order of its rows: every such layer sets them (a
#: control-flow layer sets more: :func:`control_record`).
_ESTIMATE_LAYER_NAMES = (*_LAYER_NAMES, "shape_source", "estimate")
ESTIMATE_LAYER_FIELDS = frozenset(_ESTIMATE_LAYER_NAMES)


def _layer_values(tensors: Mapping[str, GraphTensor], node: Node, cost: LayerCost, unit: str | None) -> tuple[Any, ...]:
    """The values of the fields :data:`_LAYER_NAMES` of ``node``'s layer (``tensors``: the graph's)."""
    return tuple(column[0] for column in _layer_columns(tensors, (node,), (cost,), (unit,)))


def _layer_columns(tensors: Mapping[str, GraphTensor], nodes: Sequence[Node], costs: Sequence[LayerCost],
                   units: Sequence[str | None]) -> tuple[list[Any], ...]:
    """The values of the fields :data:`_LAYER_NAMES` of the layers of ``nodes`` (whose costs and units are
    ``costs`` and ``units``; ``tensors``: the graph's), a column per field."""
    shapes = [[list(t.shape) if (t := tensors.get(o) if o else None) else None for o in node.outputs]
              for node in nodes]
    weights = [cost.bytes_read_weight for cost in costs]
    return ([node.id for node in nodes], [node.name for node in nodes], [node.op_type for node in nodes],
            [node.domain for node in nodes], [list(node.inputs) for node in nodes],
            [list(node.outputs) for node in nodes], shapes, [cost.dtype for cost in costs],
            [cost.macs for cost in costs], [cost.flops for cost in costs], [cost.bytes_read for cost in costs],
            [cost.bytes_read_act for cost in costs], weights, [cost.bytes_written for cost in costs], weights,
            [cost.params for cost in costs], [cost.unit_kind._value_ for cost in costs], list(units),
            [cost.known for cost in costs])


def control_record(node: Node) -> dict[str, Any]:
    """Where a layer's shapes came from, and for control flow what execution observed (keys of the layer that
    the typed :class:`~layerscope.runfile.models.Layer` keeps as they are).

    ``shape_source`` always; ``parent`` and ``executions`` for a subgraph's layer; ``observed``
    (``branch_taken`` / ``trip_count``, ``source: "executed"``) for an If/Loop/Scan layer.
    """
    if not node.parent and not node.observed:  # a plain layer (nearly all of a big model's): one small dict
        return {"shape_source": node.shape_source}
    return {"shape_source": node.shape_source,
            **({"parent": node.parent, "executions": node.executions} if node.parent else {}),
            **({"observed": dict(node.observed)} if node.observed else {})}


#: The names of a layer's estimate in :func:`estimate_run`, in order.
_ESTIMATE_NAMES = ("latency_us", "compute_us", "load_us", "store_us", "overhead_us", "bound", "unit", "dtype",
                   "ddr_read_bytes", "ddr_write_bytes", "weight_passes", "fallback_reason")


def _estimate_layers(graph: Graph, estimate: Estimate) -> Sequence[Layer]:
    """The layers of :func:`estimate_run`: our own values, built without validation in the types validation gives
    (:meth:`Section.trusted_columns`), as columns (:class:`Rows`, the estimates a column of their own), or as rows
    when a layer is of control flow (its further keys: :func:`control_record`). The five times of every layer are
    rounded a column at a time (:func:`rounded`: what :func:`_us` gives, bit for bit)."""
    ests = estimate.layers
    units = [est.unit for est in ests]
    times = [rounded(list(map(attrgetter(name), ests)), 3) for name in _ESTIMATE_NAMES[:5]]
    estimates = LayerEstimate.trusted_columns(_ESTIMATE_NAMES, (
        *times, [est.bound._value_ for est in ests], units, [est.dtype for est in ests],
        [est.ddr_read_bytes for est in ests], [est.ddr_write_bytes for est in ests],
        [float(est.weight_passes) for est in ests], [est.fallback_reason for est in ests]))
    nodes = graph.layers
    columns = (*_layer_columns(graph.tensors, nodes, estimate.costs, units), [node.shape_source for node in nodes],
               estimates)
    if not any(node.parent or node.observed for node in nodes):
        return Layer.trusted_columns(_ESTIMATE_LAYER_NAMES, columns)
    rows = list(zip(*columns, strict=True))
    layers = Layer.trusted_rows(_ESTIMATE_LAYER_NAMES, rows)
    for k, node in enumerate(nodes):
        if node.parent or node.observed:  # a control-flow layer or a subgraph's: its further keys
            layers[k] = Layer.trusted({**dict(zip(_ESTIMATE_LAYER_NAMES, rows[k], strict=True)),
                                       **control_record(node)})
    return layers


def estimate_run(graph: Graph, estimate: Estimate, profile: Profile, command: RunKind = "estimate") -> RunFile:
    """The typed run holding the model, its per-layer costs and the estimate on ``profile``; its ``tool`` section
    names ``command``, the command whose run it becomes (``profile``, ``bisect`` and ``pipeline`` add to it)."""
    layers = _estimate_layers(graph, estimate)
    unknown: dict[tuple[str, str], list[str]] = {}
    for node, cost in zip(graph.layers, estimate.costs, strict=True):
        if not cost.known:
            unknown.setdefault((node.domain, node.op_type), []).append(node.id)
    latency_us = estimate.latency_us
    tensor_macs = sum(c.macs for c in estimate.costs if c.unit_kind is UnitKind.TENSOR)
    # every section made of our own values without validation (Section.trusted): validating would import pydantic
    # and build a validator for each section, a fifth of a small model's estimate; readers validate what they load
    return RunFile.trusted({
        "schema_version": SCHEMA_VERSION,
        "tool": written_by(command),
        "model": model_section(graph),
        "target": Target.trusted({
            "name": profile.name, "kind": profile.kind, "description": profile.description,
            "source_path": profile.source_path, "dtype": estimate.dtype, "clock_hz": float(profile.clock_hz),
            "ddr_effective_bytes_per_s": float(profile.attainable_ddr_bytes_per_s),
            "ddr_nominal_bytes_per_s": _float_or_none(profile.ddr_nominal_bytes_per_s)}),
        "estimate_info": EstimateInfo.trusted({
            "method": "roofline", "note": f"static estimate on profile {profile.name!r}, not a measurement",
            **({"quantized_outputs": True} if estimate.quantized_outputs else {})}),
        "layers": layers,
        "folded": [n.id for n in graph.folded],
        "unknown_ops": [UnknownOp.trusted({"domain": d, "op_type": op, "count": len(ids), "layers": ids})
                        for (d, op), ids in sorted(unknown.items())],
        "summary": Summary.trusted({
            "layer_count": len(graph.layers),
            "folded_count": len(graph.folded),
            "zero_copy_count": sum(1 for c in estimate.costs if c.unit_kind is UnitKind.ZERO_COPY),
            "unknown_count": sum(len(ids) for ids in unknown.values()),
            "macs": sum(c.macs for c in estimate.costs),
            "tensor_macs": tensor_macs,
            "flops": sum(c.flops for c in estimate.costs),
            **_weights_summary(graph, estimate, profile),
            "ddr_bytes": estimate.ddr_bytes,
            "est_latency_us": _us(latency_us),
            "est_fps": round(1e6 / latency_us, 3) if latency_us > 0 else None,
            "cpu_fallback_count": estimate.fallback_count,
            **({"est_task_overhead_us": _us(estimate.task_overhead_us)} if estimate.task_overhead_us else {}),
            **({"est_output_handover_us": _us(estimate.output_handover_us)} if estimate.output_handover_us else {}),
        }),
    })


def _weights_summary(graph: Graph, estimate: Estimate, profile: Profile) -> dict[str, Any]:
    """The summary's ``params`` and ``weight_bytes``, each tensor of the model counted once
    (:mod:`layerscope.costs.weights`); ``params_per_use`` when the layers' own counts add up to more; and
    ``shared_weights`` when several accelerator layers read one tensor (:func:`plan_shared_weights`, as the
    estimate applied it: the one it carries, else made again)."""
    from layerscope.costs.weights import unique_params, unique_weight_bytes
    from layerscope.estimator.roofline import plan_shared_weights

    per_use = sum(c.params for c in estimate.costs)
    params = unique_params(graph)
    fields: dict[str, Any] = {"params": params, "weight_bytes": unique_weight_bytes(graph)}
    if per_use != params:
        fields["params_per_use"] = per_use
    plan = estimate.shared_weights
    if plan is None:
        plan = plan_shared_weights(graph, profile, estimate.dtype, estimate.costs,
                                   [e.fallback_reason is not None for e in estimate.layers])
    if plan.weights:
        fields["shared_weights"] = SharedWeights.trusted({
            "tensors": len(plan.weights), "layers": plan.reader_count, "resident": len(plan.resident),
            "budget_bytes": plan.budget_bytes, "ddr_bytes_saved": plan.ddr_bytes_saved})
    return fields


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def _us(value: float) -> float:
    """Microseconds rounded to nanoseconds: stable bytes across platforms' float printing (a ``float``)."""
    return round(float(value), 3)


def _stats(stats: LatencyStats) -> dict[str, Any]:
    """The fields of ``stats`` as the run file writes them (:meth:`LatencyStats.to_dict`)."""
    return dict(stats.to_dict())


def add_measurement(run: RunFile, measurement: Measurement, *, source: str = "layerscope profile",
                    latency_source: str | None = None) -> RunFile:
    """``run`` with the measured sections added: ``layers[].measured``, ``kernels``, ``measurement`` (``source``
    as given) and ``latency`` (``latency_source``, by default the uninstrumented call of the backend)."""
    layers = []
    for layer in run.layers:
        result = measurement.layers.get(layer.id)
        if result is None:
            layers.append(layer)
            continue
        stats = _stats(result.stats) if result.stats is not None else {"median_us": 0.0, "samples": 0}
        layers.append(layer.model_copy(update={"measured": LayerMeasured(
            status=result.status, kernel=result.kernels[0] if result.kernels else None,
            kernels=list(result.kernels), fused_group=list(result.fused_group) or None, split=result.split,
            method="kernel-profile", **stats, **_layer_memory(measurement, layer.id), **_set(
                runtime=measurement.layer_runtimes.get(layer.id),
                fallback_reason=measurement.fallback_reasons.get(layer.id)))}))
    kernels = [Kernel(name=k.samples.name, op_type=k.samples.op_type, provider=k.samples.provider,
                      layers=list(k.layers), category=k.category, **_stats(k.stats), **_set(
                          exec_type=k.samples.exec_type, precision=k.samples.precision,
                          serves=list(k.serves)))
               for k in measurement.kernels]
    config = measurement.config
    measured = KernelProfileMeasurement(
        **_set(device=measurement.device, precision=measurement.precision,
               performance_hint=measurement.performance_hint, streams=measurement.streams),
        backend=measurement.backend,
        backend_version=measurement.backend_version,
        provider=measurement.provider,
        threads=config.threads,
        opt_level=config.opt_level,
        runs=measurement.runs,
        warmup=measurement.warmup,
        coverage=round(measurement.coverage, 6),
        overhead=round(measurement.overhead, 6),
        mapped_share=round(measurement.mapped_share, 6),
        unmapped_kernels=list(measurement.unmapped_kernels),
        eliminated_layers=list(measurement.fusion.eliminated),
        instrumented=_stats(measurement.instrumented),
        **_set(memory=_memory(measurement)),
        steadiness=Steadiness(latency_cv=round(measurement.latency.cv, 6),
                              latency_drift=round(measurement.latency_drift, 6),
                              profiled_drift=round(measurement.profiled_drift, 6)),
        machine=Machine.model_validate(measurement.machine),
        created_utc=measurement.created_utc,
        interrupted=measurement.interrupted,
        median_run=[Event(name=e.name, thread=e.thread, start_us=_us(e.start_us), duration_us=_us(e.duration_us))
                    for e in measurement.median_run],
        source=source,
        kind="kernel-profile",
    )
    if latency_source is None:
        latency_source = measurement.latency_source
    return run.model_copy(update={
        "layers": layers, "kernels": kernels, "measurement": measured,
        "latency": _latency(measurement.latency, latency_source, measurement.latency_samples_us),
        "summary": run.summary.model_copy(update={"meas_latency_us": _us(measurement.latency.median_us)})})


def _layer_memory(measurement: Measurement, layer_id: str) -> dict[str, Any]:
    """A layer's measured sizes as ``LayerMeasured`` fields (those the runtime reported)."""
    sizes = measurement.memory.layers.get(layer_id) if measurement.memory is not None else None
    if sizes is None:
        return {}
    return {k: v for k, v in (("output_bytes", sizes.output_bytes), ("activation_bytes", sizes.activation_bytes),
                              ("parameter_bytes", sizes.parameter_bytes)) if v is not None}


def _memory(measurement: Measurement) -> MeasuredMemory | None:
    """The measurement's ``memory`` section (``None`` when the runtime reported no sizes)."""
    memory = measurement.memory
    if memory is None:
        return None
    return MeasuredMemory(peak_bytes=memory.peak_bytes, peak_layers=list(memory.peak_layers),
                          peak_at=list(memory.peak_at), arena_peak_bytes=memory.arena_peak_bytes,
                          source=memory.source)


def _set(**values: Any) -> dict[str, Any]:
    """The keyword arguments whose value is set (not empty, zero or ``None``): keys a section holds only then."""
    return {key: value for key, value in values.items() if value}


def _extra(**values: Any) -> dict[str, Any]:
    """Keys a section keeps beside its typed fields (``extra="allow"``), as keyword arguments."""
    return values


def _latency(latency: LatencyStats, source: str, samples_us: Sequence[float] = ()) -> Latency:
    """The ``latency`` section of uninstrumented runs summarized as ``latency`` (``samples_us``: the runs, kept
    for ``compare``'s intervals)."""
    return Latency(p50_us=_us(latency.median_us), fps=round(latency.fps, 3), source=source, **_stats(latency),
                   samples_us=latency_samples(samples_us))


def add_partial_latency(run: RunFile, partial: PartialProfile, *, backend_version: str,
                        machine: Mapping[str, Any], backend: str = "onnxruntime") -> RunFile:
    """``run`` with what a ``profile`` interrupted before its profiled runs measured: the ``latency`` section of
    its end-to-end (uninstrumented) runs and a ``measurement`` section marked ``interrupted`` and ``partial``
    (no kernels, no per-layer times, ``runs`` = the end-to-end runs done of ``planned_runs``)."""
    from layerscope.stats import summarize

    latency = summarize(partial.latency_samples_us)
    config = partial.config
    measured = KernelProfileMeasurement(
        kind="kernel-profile", backend=backend, backend_version=backend_version,
        provider=config.provider, threads=config.threads, opt_level=config.opt_level, runs=latency.samples,
        warmup=partial.warmup, machine=Machine.model_validate(machine), interrupted=True, source="layerscope profile",
        **_extra(planned_runs=partial.planned_runs,
                 partial="end-to-end runs only: interrupted before the profiled runs"))
    return run.model_copy(update={
        "measurement": measured, "latency": _latency(latency, "uninstrumented session.run",
                                                     partial.latency_samples_us),
        "summary": run.summary.model_copy(update={"meas_latency_us": _us(latency.median_us)})})


def add_timeline(run: RunFile, timeline: Timeline, ddr_nominal_bytes_per_s: float | None = None) -> RunFile:
    """``run`` with the ``timeline`` section of ``timeline`` (:func:`timeline_section`) in place of any it had."""
    with collector_paused():  # a row per layer and per busy interval: no cycle among them to collect
        section = timeline_record(timeline, ddr_nominal_bytes_per_s)
    return run.model_copy(update={"timeline": section})


def timeline_record(timeline: Timeline, ddr_nominal_bytes_per_s: float | None = None) -> TimelineSection:
    """The typed ``timeline`` section of :func:`timeline_section`: validated, but for its rows (a span per layer, a
    busy interval per layer and unit) and the units holding them, which are built without validation
    (:meth:`Section.trusted_columns`) from values made here in the types validation gives."""
    fields = _timeline_fields(timeline, ddr_nominal_bytes_per_s)
    rows = {"layers": fields["layers"], "units": [TimelineUnit.trusted(unit) for unit in fields["units"]]}
    return TimelineSection(**{**fields, "layers": [], "units": []}).model_copy(update=rows)


def timeline_section(timeline: Timeline, ddr_nominal_bytes_per_s: float | None = None) -> dict[str, Any]:
    """The ``timeline`` section (``layerscope estimate --timeline``) as a document: :func:`timeline_record`'s dump.

    - ``method``, ``note``, ``split`` (``"batch"``), ``cores``, ``dtype``, ``bandwidth_bytes_per_s`` and
      ``sram_bytes`` (one core's share); ``ddr_effective_bytes_per_s`` (the attainable DDR rate of the whole
      part: the share's times the cores) and ``ddr_nominal_bytes_per_s`` (the vendor's figure, ``null`` when
      the profile has none);
    - ``summary`` {latency_us, fps_per_core, fps_total, serial_latency_us, macs, conv_macs, ddr_bytes,
      ddr_mb_per_run, ddr_busy_us, busiest_unit, busiest_unit_busy_us, bound, cross_core_bytes};
    - ``memory`` {static_bytes, input_bytes, output_bytes, shared_temporary_bytes,
      exclusive_intermediate_bytes, dynamic_bytes, minimum_requirement_bytes, on_chip_peak_bytes,
      peak_live_bytes, frames_in_flight};
    - ``layers`` [{id, unit, core, active_start_us, active_end_us, compute_start_us, compute_end_us,
      load_start_us, load_end_us, store_start_us, store_end_us, compute_us, overhead_us, load_us, store_us,
      load_bytes, store_bytes}] in graph order (``null`` bursts: no DDR traffic);
    - ``units`` [{name, core, busy_us, busy [{layer, start_us, end_us}]}]: every unit, the CPU, LOAD, STORE;
    - ``temporal`` {interval_us, intervals, ddr_load_mb_per_s, ddr_store_mb_per_s, ddr_utilization,
      ddr_nominal_utilization, ddr_peak_mb_per_s, ddr_mean_mb_per_s, utilization {unit: [...]}}: one value per
      interval (MB = 10^6 bytes; rates summed over the cores); ``ddr_nominal_utilization``: load + store over
      the nominal rate (``null`` without one), beside ``ddr_utilization``, the busy share of the effective one.
    """
    return timeline_record(timeline, ddr_nominal_bytes_per_s).model_dump(mode="json", by_alias=True,
                                                                        exclude_unset=True)


def _timeline_fields(timeline: Timeline, ddr_nominal_bytes_per_s: float | None) -> dict[str, Any]:
    """The fields of :func:`timeline_record`'s section, its rows built."""
    busiest = timeline.busiest_unit
    memory = timeline.memory
    bins = timeline.bins
    totals = [load + store for load, store in zip(bins.load_mb_per_s, bins.store_mb_per_s, strict=True)]
    busy = {t.name: _busy_rows(t) for t in timeline.tracks if t.core == 0}  # every core's track is the same
    nominal_mb_per_s = ddr_nominal_bytes_per_s / 1e6 if ddr_nominal_bytes_per_s else None
    return {
        "method": "timeline",
        "note": f"static schedule on profile {timeline.profile_name!r}, not a measurement",
        "split": timeline.split,
        "cores": timeline.cores,
        "dtype": timeline.dtype,
        "bandwidth_bytes_per_s": timeline.bandwidth_bytes_per_s,
        "sram_bytes": timeline.sram_bytes,
        "ddr_effective_bytes_per_s": timeline.bandwidth_bytes_per_s * timeline.cores,
        "ddr_nominal_bytes_per_s": ddr_nominal_bytes_per_s,
        "summary": {
            "latency_us": _us(timeline.latency_us),
            "fps_per_core": _rate(timeline.fps_per_core),
            "fps_total": _rate(timeline.fps_total),
            "serial_latency_us": _us(timeline.serial_latency_us),
            "macs": timeline.macs,
            "conv_macs": timeline.conv_macs,
            "ddr_bytes": timeline.ddr_bytes,
            "ddr_mb_per_run": _rate(timeline.ddr_bytes / 1e6),
            "ddr_busy_us": _us(timeline.ddr_busy_us),
            "busiest_unit": busiest.name if busiest else None,
            "busiest_unit_busy_us": _us(busiest.busy_us) if busiest else 0.0,
            "bound": timeline.bound,
            "cross_core_bytes": timeline.cross_core_bytes,
        },
        "memory": {
            "static_bytes": memory.static_bytes,
            "input_bytes": memory.input_bytes,
            "output_bytes": memory.output_bytes,
            "shared_temporary_bytes": memory.shared_temporary_bytes,
            "exclusive_intermediate_bytes": memory.exclusive_intermediate_bytes,
            "dynamic_bytes": memory.dynamic_bytes,
            "minimum_requirement_bytes": memory.minimum_requirement_bytes,
            "on_chip_peak_bytes": memory.on_chip_peak_bytes,
            "peak_live_bytes": memory.peak_live_bytes,
            "frames_in_flight": memory.frames_in_flight,
        },
        "layers": _timeline_layers(timeline.schedule),
        "units": [{"name": t.name, "core": t.core, "busy_us": _us(t.busy_us), "busy": busy[t.name]}
                  for t in timeline.tracks],
        "temporal": {
            "interval_us": _us(bins.interval_us),
            "intervals": len(bins.load_mb_per_s),
            "ddr_load_mb_per_s": [_rate(v) for v in bins.load_mb_per_s],
            "ddr_store_mb_per_s": [_rate(v) for v in bins.store_mb_per_s],
            "ddr_utilization": [_fraction(v) for v in bins.ddr_utilization],
            "ddr_nominal_utilization": [_fraction(v / nominal_mb_per_s) for v in totals] if nominal_mb_per_s else None,
            "ddr_peak_mb_per_s": _rate(max(totals, default=0.0)),
            "ddr_mean_mb_per_s": _rate(sum(totals) / len(totals) if totals else 0.0),
            "utilization": {name: [_fraction(v) for v in values] for name, values in bins.utilization.items()},
        },
    }


def _timeline_layers(schedule: Schedule) -> Rows[TimelineLayer]:
    """The ``layers`` rows of the timeline section, one per span, as columns (:meth:`Section.trusted_columns`);
    times rounded as :func:`_us` rounds them."""
    loads, stores = schedule.has_load.tolist(), schedule.has_store.tolist()
    times = [rounded(column, 3) for column in (
        schedule.active_start_us, schedule.active_end_us, schedule.compute_start_us, schedule.compute_end_us,
        schedule.compute_us, schedule.overhead_us, schedule.load_us, schedule.store_us)]
    bursts = [rounded_or_none(column, present, 3) for column, present in (
        (schedule.load_start_us, loads), (schedule.load_end_us, loads), (schedule.store_start_us, stores),
        (schedule.store_end_us, stores))]
    return TimelineLayer.trusted_columns(_TIMELINE_LAYER_NAMES, (
        schedule.layer_ids, schedule.units, [0] * len(schedule.layer_ids), *times, *bursts,
        schedule.bytes_loaded, schedule.bytes_stored))


#: The fields of a timeline span (:func:`_timeline_layers`), in order.
_TIMELINE_LAYER_NAMES = ("id", "unit", "core", "active_start_us", "active_end_us", "compute_start_us",
                         "compute_end_us", "compute_us", "overhead_us", "load_us", "store_us", "load_start_us",
                         "load_end_us", "store_start_us", "store_end_us", "load_bytes", "store_bytes")


def _busy_rows(track: Track) -> Rows[TimelineBusy]:
    """A track's ``busy`` rows, as columns: the layer and its interval, rounded as :func:`_us` rounds."""
    return TimelineBusy.trusted_columns(("layer", "start_us", "end_us"), (
        track.layer_ids, rounded(track.start_us, 3), rounded(track.end_us, 3)))


def _rate(value: float | None) -> float | None:
    """Rates (FPS, MB/s) to three decimals; ``None`` stays."""
    return None if value is None else round(value, 3)


def _fraction(value: float) -> float:
    """Utilizations in [0, 1] to six decimals."""
    return round(value, 6)
