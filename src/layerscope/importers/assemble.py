"""Vendor import results -> one run (the JSON document of :mod:`layerscope.run`).

Contract of :func:`build_run`:
- entries of the same name from several files are one entry (trtexec's profile and layer info); when
  two files both measure it the first is kept, with a warning;
- with a graph, the run's ``layers`` are the model's, in graph order, with the model's costs;
  measured and estimated times land on the layers their entries join to (:mod:`.join`); a fused
  entry's time is split over its layers in proportion to their work (2 x MACs + FLOPs, evenly when
  none has any) and says so (``split``, ``fused_group``). Without a graph the run's layers are the
  vendor's entries, ids = vendor names, and the ``model`` section says only what the files say;
- every measured entry is a ``kernels`` row whose ``category`` is ``layer``, ``layout`` or
  ``unmapped``, with the precision, tensor formats and tactic the vendor states for it; layout entries (TensorRT's
  reformats) keep their time as ``layout`` kernels, never added to the layers they serve; unmapped entries are
  listed in ``measurement.unmapped_kernels`` and, with estimates that joined nothing, in ``import.unmatched``
  with the reason;
- ``measured.method`` / ``estimate.method`` are ``"vendor:<tool>"``;
- when one import measures the accelerator as a whole (Horizon's ``BPU_inference_time_cost``) and
  another estimates it (the static report's latency), ``reconcile`` holds k and the per-layer static
  shares scaled by k (:mod:`layerscope.analysis.reconcile`);
- the output is deterministic: no clock, no host; the same files give the same bytes -- except that an
  ONNX Runtime profile joined to a model goes through the optimized graph ONNX Runtime builds here
  (:mod:`~layerscope.importers.ort_join`), which can depend on this CPU's instruction set.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from layerscope.costs import LayerCost, cost_graph
from layerscope.errors import RunFileError
from layerscope.importers import ort
from layerscope.importers.join import LAYER, LAYOUT, UNMAPPED, LayerIndex, Resolution, resolve, self_resolution
from layerscope.importers.ort_join import FusionJoin, fusion_resolutions
from layerscope.importers.types import ImportResult, StaticCost, TimeStats, Totals, VendorEntry, sum_stats
from layerscope.model.types import Graph
from layerscope.run import SCHEMA_VERSION, layer_record, model_section
from layerscope.runfile.commands import written_by
from layerscope.runfile.derived import FUSED_GROUP_INLINE_MAX, ScaledLayer, ScaleFactor, k_between, scale_layers
from layerscope.runfile.io import describe
from layerscope.runfile.models import (
    EstimateInfo,
    ImportContext,
    ImportFile,
    ImportFusionMap,
    ImportInfo,
    Kernel,
    Latency,
    Layer,
    LayerEstimate,
    LayerMeasured,
    ModelInfo,
    Reconcile,
    ReconcileLayer,
    RunFile,
    Summary,
    UnknownOp,
    Unmatched,
    VendorMeasurement,
)


@dataclass(frozen=True)
class Sourced:
    """An entry with the file and tool its measurement and its estimate came from."""

    entry: VendorEntry
    path: str
    stats_tool: str = ""
    estimate_tool: str = ""


@dataclass(frozen=True)
class Reconciled:
    """k between an accelerator measurement and its static estimate, and the scaled static layers."""

    factor: ScaleFactor
    layers: tuple[ScaledLayer, ...]
    measured_from: str
    estimated_from: str


@dataclass(frozen=True)
class ImportedRun:
    """The run, and what the terminal summary shows about how it was made."""

    run: RunFile
    results: tuple[ImportResult, ...]
    resolutions: tuple[Resolution, ...]
    reconciled: Reconciled | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)


def build_run(results: Sequence[ImportResult], graph: Graph | None = None) -> ImportedRun:
    """One run from the imported files, joined to ``graph`` when given (see the module docstring).
    ``RunFileError`` (exit 2) naming the files when what they say makes no valid run (a negative time ...)."""
    try:
        return _build_run(results, graph)
    except ValidationError as exc:
        files = ", ".join(r.path for r in results) or "the imported files"
        raise RunFileError(f"{files}: the imported values make no valid run: {describe(exc)}",
                           hint="see `layerscope schema` for what a run holds") from None


def _build_run(results: Sequence[ImportResult], graph: Graph | None) -> ImportedRun:
    sourced, warnings = merge_entries(results)
    totals = _merge_totals(results)
    index = LayerIndex(graph) if graph is not None else None
    ort_paths = {r.path for r in results if r.format == ort.FORMAT}
    placed, join, join_warning = ({}, None, None) if graph is None or not ort_paths else fusion_resolutions(
        graph, [s.entry for s in sourced if s.path in ort_paths])
    if join_warning:
        warnings.append(join_warning)
    resolutions = tuple(_resolution(s, index, placed if s.path in ort_paths else {}) for s in sourced)
    tools = {s.entry.name: s for s in sourced}
    costs = cost_graph(graph) if graph is not None else ()
    layers = (_model_layers(graph, costs, resolutions, tools) if graph is not None
              else _vendor_layers(resolutions, tools))
    reconciled = _reconcile(results)
    kernels = [_kernel(r, joined=graph is not None) for r in resolutions if r.entry.stats is not None]
    estimate_tools = sorted({s.estimate_tool for s in sourced if s.estimate_tool})
    fusion_map = _fusion_section(join, resolutions, ort_paths, tools) if join is not None else None
    # "import" (a Python keyword: the JSON name of RunFile.import_), then the optional sections, present in the
    # file only when there is something to say
    optional: dict[str, Any] = {"import": _import_section(results, resolutions, tools, graph is not None, fusion_map)}
    if kernels:
        optional.update(kernels=kernels, measurement=_measurement(
            results, resolutions, tools, opt_level=join.opt_level if join is not None else None))
    if totals.latency is not None:
        optional.update(latency=_latency(totals, results))
    if estimate_tools:
        optional.update(estimate_info=EstimateInfo(method=",".join(f"vendor:{t}" for t in estimate_tools),
                                                   note="the vendor compiler's static estimate, not a measurement"))
    if reconciled is not None:
        optional.update(reconcile=_reconcile_section(reconciled))
    run = RunFile(
        schema_version=SCHEMA_VERSION,
        tool=written_by("import"),
        model=model_section(graph) if graph is not None else _vendor_model(results),
        layers=layers,
        folded=[n.id for n in graph.folded] if graph is not None else [],
        unknown_ops=_unknown_ops(graph, costs) if graph is not None else [],
        summary=_summary(layers, costs, totals),
        **optional)
    return ImportedRun(run=run, results=tuple(results), resolutions=resolutions, reconciled=reconciled,
                       warnings=tuple(w for r in results for w in r.warnings) + tuple(warnings))


def merge_entries(results: Iterable[ImportResult]) -> tuple[list[Sourced], list[str]]:
    """One :class:`Sourced` per entry name over all files, in first-seen order; warnings on conflicts."""
    merged: dict[str, Sourced] = {}
    warnings: list[str] = []
    for result in results:
        for entry in result.entries:
            incoming = Sourced(entry, result.path, result.tool if entry.stats else "",
                               result.tool if entry.estimate else "")
            known = merged.get(entry.name)
            if known is None:
                merged[entry.name] = incoming
                continue
            if known.entry.stats is not None and entry.stats is not None:
                warnings.append(f"{result.path}: {entry.name!r} is also measured in {known.path}; kept that one")
            merged[entry.name] = Sourced(known.entry.merged(entry), known.path,
                                         known.stats_tool or incoming.stats_tool,
                                         known.estimate_tool or incoming.estimate_tool)
    return list(merged.values()), warnings


def _resolution(sourced: Sourced, index: LayerIndex | None, placed: dict[str, Resolution]) -> Resolution:
    """Where one entry lands: as the fusion map placed it, else joined by name (or itself, with no model)."""
    if sourced.entry.name in placed:
        return placed[sourced.entry.name]
    return resolve(sourced.entry, index) if index is not None else self_resolution(sourced.entry)


def _fusion_section(join: FusionJoin, resolutions: Sequence[Resolution], ort_paths: set[str],
                    tools: dict[str, Sourced]) -> dict[str, Any]:
    """``import.fusion_map``: the level ONNX Runtime's optimized graph was re-created at, how many of the
    profile's kernels it names, and the share of their time placed on layers or layout (``mapped_share``,
    as ``layerscope profile`` reports it)."""
    timed = [r for r in resolutions if tools[r.entry.name].path in ort_paths and r.entry.stats is not None]
    total = sum(r.entry.stats.typical_us for r in timed if r.entry.stats)
    unmapped = sum(r.entry.stats.typical_us for r in timed if r.entry.stats and r.category == UNMAPPED)
    return {"opt_level": join.opt_level, "kernels": join.kernels, "kernels_named": join.named,
            "mapped_share": round(1.0 - unmapped / total, 6) if total > 0 else None}


def _merge_totals(results: Iterable[ImportResult]) -> Totals:
    totals = Totals()
    for result in results:
        totals = totals.merged(result.totals)
    return totals


# --- layers -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timed:
    """One kernel's (share of) time on a layer: the kernel, the layers it ran, whether it was split."""

    stats: TimeStats
    kernel: str
    group: tuple[str, ...]
    split: bool
    tool: str


@dataclass
class _Parts:
    """What the entries joined to one layer contribute to it."""

    stats: list[_Timed] = field(default_factory=list)
    estimates: list[tuple[StaticCost, str]] = field(default_factory=list)


def _model_layers(graph: Graph, costs: Sequence[LayerCost], resolutions: Sequence[Resolution],
                  tools: dict[str, Sourced]) -> list[Layer]:
    weights = {c.layer_id: 2 * c.macs + c.flops for c in costs}
    parts: dict[str, _Parts] = {node.id: _Parts() for node in graph.layers}
    for res in resolutions:
        if res.category != LAYER or not res.layer_ids:
            continue
        fractions = _fractions(res.layer_ids, weights)
        split = len(res.layer_ids) > 1
        source = tools[res.entry.name]
        for layer_id, fraction in fractions.items():
            if res.entry.stats is not None:
                parts[layer_id].stats.append(_Timed(res.entry.stats.scaled(fraction), res.entry.name, res.layer_ids,
                                                    split, source.stats_tool))
            if res.entry.estimate is not None:
                parts[layer_id].estimates.append((res.entry.estimate.scaled(fraction), source.estimate_tool))
    order = {node.id: i for i, node in enumerate(graph.layers)}
    return [layer_record(graph, node, cost, **_attached(parts[node.id], order, None))
            for node, cost in zip(graph.layers, costs, strict=True)]


def _fractions(layer_ids: Sequence[str], weights: dict[str, int]) -> dict[str, float]:
    """Each layer's part of a fused entry: its work over the group's, evenly when none has work."""
    total = sum(weights.get(i, 0) for i in layer_ids)
    if total <= 0:
        return {i: 1.0 / len(layer_ids) for i in layer_ids}
    return {i: weights.get(i, 0) / total for i in layer_ids}


def _vendor_layers(resolutions: Sequence[Resolution], tools: dict[str, Sourced]) -> list[Layer]:
    layers = []
    for res in resolutions:
        if res.category != LAYER:
            continue
        entry = res.entry
        source = tools[entry.name]
        parts = _Parts()
        if entry.stats is not None:
            parts.stats.append(_Timed(entry.stats, entry.name, (entry.name,), False, source.stats_tool))
        if entry.estimate is not None:
            parts.estimates.append((entry.estimate, source.estimate_tool))
        layers.append(Layer(id=entry.name, name=entry.name, op_type=entry.op_type, domain="", inputs=[], outputs=[],
                            output_shapes=[], kind=entry.kind.value, **_present(status=entry.status),
                            **_attached(parts, {}, entry.provider or None)))
    return layers


def _present(**values: Any) -> dict[str, Any]:
    """The keyword arguments that have a value (not ``None``, empty or zero): keys a section holds only then."""
    return {key: value for key, value in values.items() if value}


def _attached(parts: _Parts, order: dict[str, int], unit: str | None) -> dict[str, Any]:
    """A layer's ``unit`` (``unit``, else its estimate's) and its ``measured`` / ``estimate`` sections when it has
    them, as keyword arguments of :class:`~layerscope.runfile.models.Layer`."""
    estimate = _estimate(parts.estimates) if parts.estimates else None
    return {"unit": unit if unit is not None or estimate is None else estimate.unit,
            **({"measured": _measured(parts.stats, order)} if parts.stats else {}),
            **({"estimate": estimate} if estimate is not None else {})}


def _measured(timed: list[_Timed], order: dict[str, int]) -> LayerMeasured:
    """The ``measured`` section of one layer from the kernels (or kernel shares) that ran it.

    A group of more than :data:`~layerscope.run.FUSED_GROUP_INLINE_MAX` layers from one kernel is not
    copied into each of its layers (a TensorRT ForeignNode range over 5,000 layers made a 348 MB run):
    ``fused_group`` is then ``None``, ``fused_group_size`` its size, and the list is the kernel's
    ``layers`` row, once (:func:`layerscope.runfile.derived.fused_group` reads either form).
    """
    total = sum_stats(t.stats for t in timed)
    assert total is not None
    main = max(timed, key=lambda t: t.stats.typical_us)
    if len(timed) == 1:
        group: Sequence[str] = timed[0].group  # already in graph order (join sorts it)
    else:
        group = sorted({layer for t in timed for layer in t.group}, key=lambda layer: order.get(layer, 0))
    by_reference = len(timed) == 1 and len(group) > FUSED_GROUP_INLINE_MAX
    return LayerMeasured(
        **_time_fields(total),
        kernel=main.kernel,
        fused_group=list(group) if len(group) > 1 and not by_reference else None,
        **_present(fused_group_size=len(group) if by_reference else None),
        split=any(t.split for t in timed),
        method=",".join(f"vendor:{tool}" for tool in sorted({t.tool for t in timed if t.tool})),
    )


def _estimate(estimates: list[tuple[StaticCost, str]]) -> LayerEstimate:
    cost = estimates[0][0]
    for other, _ in estimates[1:]:
        cost = cost.plus(other)
    tools = sorted({t for _, t in estimates if t})
    return LayerEstimate(
        latency_us=_us(cost.latency_us),
        compute_us=_us(cost.compute_us),
        load_us=_us(cost.load_us),
        store_us=_us(cost.store_us),
        overhead_us=None,
        bound=cost.bound,
        unit=cost.unit,
        dtype=None,
        ddr_read_bytes=None,
        ddr_write_bytes=None,
        weight_passes=None,
        fallback_reason=None,
        method=",".join(f"vendor:{t}" for t in tools),
    )


def _us(value: float | None) -> float | None:
    """Microseconds rounded to nanoseconds (stable bytes), ``None`` kept."""
    return None if value is None else round(value, 3)


def _time_fields(stats: TimeStats) -> dict[str, Any]:
    """A vendor time's statistics as a layer's ``measured`` and a kernel write them (µs to the nanosecond, cv to
    4 digits, what the vendor did not report ``None``)."""
    return {"median_us": _us(stats.median_us), "mean_us": _us(stats.mean_us), "p90_us": _us(stats.p90_us),
            "min_us": _us(stats.min_us), "max_us": _us(stats.max_us), "std_us": _us(stats.std_us),
            "cv": None if stats.cv is None else round(stats.cv, 4), "samples": stats.samples}


# --- other sections ---------------------------------------------------------------------------------


def _kernel(res: Resolution, *, joined: bool) -> Kernel:
    """The ``kernels`` row of a measured entry. A layout entry of a run without a model (``joined`` false) that
    names the engine layer it works for (TensorRT's ``Reformatting CopyNode ... to <layer>``) ``serves`` that
    layer, a layer of the run; joined to a model, its ``layers`` are that layer's model layers."""
    entry = res.entry
    stats = entry.stats
    assert stats is not None
    serves = list(entry.source_names) if res.category == LAYOUT and not joined and not res.layer_ids else None
    return Kernel(
        name=entry.name,
        op_type=entry.op_type,
        provider=entry.provider,
        **_time_fields(stats),
        layers=list(res.layer_ids),
        category=res.category,
        **_present(serves=serves, precision=entry.precision, tactic=entry.tactic,
                   input_formats=list(entry.input_formats), output_formats=list(entry.output_formats)),
    )


def _measurement(results: Sequence[ImportResult], resolutions: Sequence[Resolution],
                 tools: dict[str, Sourced], *, opt_level: str | None) -> VendorMeasurement:
    """The ``measurement`` section; ``opt_level``: the level ONNX Runtime's optimized graph was re-created at
    to join its profile (``None``: no ONNX Runtime profile was joined through it)."""
    measured = [r for r in resolutions if r.entry.stats is not None]
    total = sum(r.entry.stats.typical_us for r in measured if r.entry.stats)
    joined = sum(r.entry.stats.typical_us for r in measured if r.entry.stats and r.category == LAYER)
    stat_tools = sorted({tools[r.entry.name].stats_tool for r in measured})
    info = _first_info(results, "thread_num")
    runs = _first_info(results, "frame_count") or _first_info(results, "count") or _first_info(results, "runs")
    return VendorMeasurement(
        backend=",".join(stat_tools),
        backend_version=_first_info(results, "version"),
        provider=_first_info(results, "provider") or ",".join(
            sorted({r.entry.provider for r in measured if r.entry.provider})) or None,
        threads=int(info) if info and info.isdigit() else None,
        opt_level=opt_level,
        runs=int(runs) if runs and runs.isdigit() else None,
        warmup=None,
        coverage=round(joined / total, 4) if total > 0 else None,
        overhead=None,
        unmapped_kernels=[r.entry.name for r in measured if r.category == UNMAPPED],
        machine=None,
        created_utc=None,
        source="; ".join(f"vendor:{r.tool} {Path(r.path).name}" for r in results if r.measured),
        kind="vendor-import",
    )


def _first_info(results: Iterable[ImportResult], key: str) -> str | None:
    return next((r.info[key] for r in results if key in r.info), None)


def _latency(totals: Totals, results: Sequence[ImportResult]) -> Latency:
    latency = totals.latency
    assert latency is not None
    source = next((r for r in results if r.totals.latency is latency),
                  next(r for r in results if r.totals.latency is not None))
    return Latency(
        mean_us=_us(latency.mean_us),
        min_us=_us(latency.min_us),
        max_us=_us(latency.max_us),
        p50_us=_us(latency.median_us),
        p90_us=_us(latency.p90_us),
        p99_us=_us(_percentile(latency.values_us, 0.99)),
        p999_us=_us(_percentile(latency.values_us, 0.999)),
        fps=None if totals.fps is None else round(totals.fps, 3),
        samples=latency.samples,
        source=f"vendor:{source.tool} {Path(source.path).name}",
    )


def _percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of per-run values; ``None`` without them."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


def _reconcile(results: Sequence[ImportResult]) -> Reconciled | None:
    """k from the first file measuring the accelerator and the first estimating it, if both exist."""
    measured = next((r for r in results if r.totals.accelerator is not None and r.totals.accelerator.mean_us), None)
    estimated = next((r for r in results if r.totals.estimated_us), None)
    if measured is None or estimated is None or measured is estimated:
        return None
    assert measured.totals.accelerator is not None and measured.totals.accelerator.mean_us is not None
    assert estimated.totals.estimated_us is not None
    factor = k_between(measured.totals.accelerator.mean_us, estimated.totals.estimated_us)
    # shares of the vendor's total for the block (the report may list only some layers); scaled = k x static
    layers = scale_layers(((e.name, e.estimate.latency_us) for e in estimated.estimated if e.estimate), factor,
                          total_us=estimated.totals.estimated_us)
    return Reconciled(factor, layers, measured_from=measured.path, estimated_from=estimated.path)


def _reconcile_section(rec: Reconciled) -> Reconcile:
    return Reconcile(
        k=round(rec.factor.k, 6),
        measured_us=round(rec.factor.measured_us, 3),
        estimated_us=round(rec.factor.estimated_us, 3),
        measured_source=Path(rec.measured_from).name,
        estimated_source=Path(rec.estimated_from).name,
        scope="accelerator (BPU) time: board measurement over the static estimate",
        measured_on=f"the vendor's profiler on the board ({Path(rec.measured_from).name})",
        device_mismatch=None,
        layers=[ReconcileLayer(name=s.layer_id, estimated_us=round(s.estimated_us, 3), share=round(s.share, 6),
                               scaled_us=round(s.scaled_us, 3)) for s in rec.layers],
    )


def _summary(layers: Sequence[Layer], costs: Sequence[LayerCost], totals: Totals) -> Summary:
    measured = [layer.measured for layer in layers if layer.measured is not None]
    estimated = [layer.estimate.latency_us or 0.0 for layer in layers if layer.estimate is not None]
    est_total = totals.estimated_us if totals.estimated_us is not None else (sum(estimated) if estimated else None)
    return Summary(
        layer_count=len(layers),
        measured_layer_count=len(measured),
        estimated_layer_count=len(estimated),
        macs=sum(c.macs for c in costs) if costs else None,
        flops=sum(c.flops for c in costs) if costs else None,
        est_latency_us=_us(est_total),
        est_fps=None if totals.estimated_fps is None else round(totals.estimated_fps, 3),
        measured_layer_sum_us=_us(sum((m.median_us if m.median_us is not None else m.mean_us or 0.0)
                                      for m in measured)) if measured else None,
        latency_us=_us(totals.latency.mean_us) if totals.latency else None,
        accelerator_us=_us(totals.accelerator.mean_us) if totals.accelerator else None,
        fps=None if totals.fps is None else round(totals.fps, 3),
    )


def _unknown_ops(graph: Graph, costs: Sequence[LayerCost]) -> list[UnknownOp]:
    unknown: dict[tuple[str, str], list[str]] = {}
    for node, cost in zip(graph.layers, costs, strict=True):
        if not cost.known:
            unknown.setdefault((node.domain, node.op_type), []).append(node.id)
    return [UnknownOp(domain=d, op_type=op, count=len(ids), layers=ids) for (d, op), ids in sorted(unknown.items())]


def _vendor_model(results: Sequence[ImportResult]) -> ModelInfo:
    return ModelInfo(
        name=_first_info(results, "model_name"),
        path=None,
        sha256=None,
        opset=None,
        producer=",".join(sorted({r.tool for r in results})),
        inputs=[],
        outputs=[],
        note="no ONNX model given: layers are the vendor's entries (pass --model to join them)",
    )


def _import_section(results: Sequence[ImportResult], resolutions: Sequence[Resolution],
                    tools: dict[str, Sourced], joined_to_model: bool,
                    fusion_map: dict[str, Any] | None) -> ImportInfo:
    """The ``import`` section; ``fusion_map`` (:func:`_fusion_section`) when an ONNX Runtime profile was joined
    through the optimized graph."""
    unmatched = [Unmatched(name=res.entry.name, file=Path(tools[res.entry.name].path).name,
                           kind=res.entry.kind.value, reason=res.reason or "some parts not found",
                           missing=list(res.missing))
                 for res in resolutions if res.category == UNMAPPED or res.missing]
    info = ImportInfo(
        files=[ImportFile(path=r.path, name=Path(r.path).name, format=r.format, tool=r.tool,
                          sha256=_sha256(r.path), entries=len(r.entries), info=dict(r.info),
                          warnings=list(r.warnings)) for r in results],
        joined_to_model=joined_to_model,
        entries=len(resolutions),
        joined=sum(1 for r in resolutions if r.category == LAYER),
        layout=sum(1 for r in resolutions if r.category == LAYOUT),
        unmatched=unmatched,
        context=ImportContext.model_validate(_context(results)),
    )
    if fusion_map is None:
        return info
    return info.model_copy(update={"fusion_map": ImportFusionMap.model_validate(fusion_map)})


#: What the files say about where and how the model ran (``info`` keys the parsers fill), for the run's
#: ``import.context``.
CONTEXT_KEYS = ("device", "compute_capability", "device_memory_bytes", "precision", "batch", "throughput_per_s")


def _context(results: Sequence[ImportResult]) -> dict[str, Any]:
    """``import.context``: device, precision, batch, throughput (inferences/s) and ``samples_per_s``
    (throughput x batch), each from the first file that says it, ``None`` when none does."""
    throughput_text = _first_info(results, "throughput_per_s")
    throughput = float(throughput_text) if throughput_text is not None else None
    batch = _integer(_first_info(results, "batch"))
    return {**{key: _first_info(results, key) for key in CONTEXT_KEYS}, "batch": batch,
            "device_memory_bytes": _integer(_first_info(results, "device_memory_bytes")),
            "throughput_per_s": throughput,
            "samples_per_s": round(throughput * batch, 3) if throughput is not None and batch else None}


def _integer(text: str | None) -> int | None:
    """The whole number a file wrote as text, ``None`` when it wrote none."""
    return int(text) if text is not None and text.isdigit() else None


def _sha256(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
