"""Per-layer view: one row per layer (cost, estimate, measurement), the scale factor, op-type totals, the graph layout.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layerscope.report.views.common import Run, shape_text
from layerscope.report.views.engine import kernel_us
from layerscope.runfile.derived import (
    fused_group,
    layer_shares,
    time_basis,
)
from layerscope.runfile.derived import scale_factor as runfile_scale_factor
from layerscope.runfile.models import (
    Kernel,
    KernelProfileMeasurement,
    Layer,
    LayerEstimate,
    LayerMeasured,
    TimelineLayer,
)

# --------------------------------------------------------------------------------------------------- layers


@dataclass(frozen=True)
class LayerRow:
    """One layer as the reports show it. ``share`` is of the total on ``basis`` (measured, else estimated).
    ``layer``: the run's typed layer the row was drawn from; ``timeline``: its row of the run's ``timeline.layers``
    (empty when the run has no timeline or did not schedule it); ``detail``: the groups its detail view shows."""

    index: int
    id: str
    name: str
    op_type: str
    domain: str
    input_shapes: tuple[str, ...]
    output_shapes: tuple[str, ...]
    macs: float | None
    flops: float | None
    est_us: float | None
    meas_us: float | None
    ratio: float | None
    share: float | None
    bound: str | None
    unit: str | None
    core: int | None
    status: str | None
    fused_group: tuple[str, ...]
    split: bool
    kernel: str | None
    fallback_reason: str | None
    layer: Layer
    timeline: TimelineLayer | None = None
    detail: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def share_basis(run: Run) -> str | None:
    """``"measured"`` when any layer has a measured time, ``"estimated"`` when any has an estimate, else ``None``
    (:func:`layerscope.runfile.time_basis`)."""
    return time_basis(run)


def tensor_shapes(run: Run) -> dict[str, list[Any]]:
    """Tensor name -> shape for the model inputs and every layer output the run knows."""
    shapes: dict[str, list[Any]] = {}
    for tensor in run.model.inputs:
        if tensor.shape is not None:
            shapes[tensor.name] = tensor.shape
    for layer in run.layers:
        for name, shape in zip(layer.outputs, layer.output_shapes, strict=False):
            if shape is not None:
                shapes[name] = shape
    return shapes


def _timeline_layers(run: Run) -> dict[str, TimelineLayer]:
    """Layer id -> its row of ``timeline.layers``."""
    if run.timeline is None:
        return {}
    return {row.id: row for row in run.timeline.layers}


_NO_MEASUREMENT = LayerMeasured.model_construct()  # not validated: importing this view needs no pydantic


def layer_rows(run: Run) -> list[LayerRow]:
    """Every layer of the run, in the run's (graph) order, with estimate and measurement side by side."""
    layers = run.layers
    shares = layer_shares(layers, share_basis(run))
    groups: dict[str, tuple[str, ...]] = {}
    shapes = tensor_shapes(run)
    placed = _timeline_layers(run)
    kernels = {k.name: k for k in run.kernels}
    reformats = _layout_kernels_by_layer(run.kernels)
    memory = run.measurement.memory if isinstance(run.measurement, KernelProfileMeasurement) else None
    holders = set(memory.peak_layers) if memory is not None else None
    rows = []
    for index, layer in enumerate(layers):
        est, meas = layer.estimated_us, layer.measured_us
        estimate = layer.est
        measured = layer.measured
        slot = placed.get(layer.id)
        core = slot.core if slot is not None else None
        rows.append(LayerRow(
            index=index,
            id=layer.id,
            name=layer.name or layer.id,
            op_type=layer.op_type or "?",
            domain=layer.domain or "",
            input_shapes=tuple(shape_text(shapes[i]) for i in layer.inputs if i in shapes),
            output_shapes=tuple(shape_text(s) for s in layer.output_shapes),
            macs=None if layer.macs is None else float(layer.macs),
            flops=None if layer.flops is None else float(layer.flops),
            est_us=est,
            meas_us=meas,
            ratio=meas / est if meas is not None and est else None,
            share=shares[index],
            bound=estimate.bound,
            unit=estimate.unit or layer.unit,
            core=core if isinstance(core, int) and not isinstance(core, bool) else None,
            status=None if measured is None else (measured.status or "measured"),
            fused_group=fused_group(run, measured if measured is not None else _NO_MEASUREMENT, groups),
            split=bool(measured is not None and measured.split),
            kernel=None if measured is None else measured.kernel,
            fallback_reason=estimate.fallback_reason,
            layer=layer,
            timeline=slot,
            detail=_layer_detail(layer, slot, kernels.get(measured.kernel) if measured and measured.kernel else None,
                                 reformats.get(layer.id, ()), holders),
        ))
    return rows


def _section_values(section: LayerEstimate | LayerMeasured | None) -> dict[str, Any]:
    """A layer's ``estimate`` or ``measured`` section as field -> value, the keys a later command added too."""
    return {} if section is None else section.model_dump()


def _layout_kernels_by_layer(kernels: Sequence[Kernel]) -> dict[str, list[Kernel]]:
    """Layer id -> the layout kernels (TensorRT's reformats) that work for it: those whose ``layers`` (joined to a
    model) or ``serves`` (a vendor run without one) name it."""
    by_layer: dict[str, list[Kernel]] = {}
    for kernel in kernels:
        if kernel.category == "layout":
            for layer_id in kernel.layers or kernel.serves or ():
                by_layer.setdefault(layer_id, []).append(kernel)
    return by_layer


def _layer_detail(layer: Layer, slot: TimelineLayer | None, kernel: Kernel | None = None,
                  reformats: Sequence[Kernel] = (), peak_holders: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """The groups a layer's detail view shows (``kernel``: the kernel that ran it, as the runtime names it: its
    type, implementation or tactic, precision, input and output formats, device and the layers it fused, and the
    layout kernels that reformat data for it, with their time, which is not part of the layer's; ``memory``: the
    output bytes the runtime measured beside the estimate's, and whether the output is live at the measured peak,
    ``peak_holders`` being the layers that hold it, ``None`` without measured memory); keys with ``null`` values
    (and empty lists) are left out."""
    measured = layer.measured
    groups = {
        "layer": {"id": layer.id, "name": layer.name, "op_type": layer.op_type, "domain": layer.domain or None,
                  "inputs": layer.inputs, "outputs": layer.outputs, "shape_source": layer.shape_source,
                  "parent": layer.parent, "executions": layer.executions,
                  **{f"observed {k}": v for k, v in (layer.observed or {}).items() if k != "source"}},
        "cost": {"macs": layer.macs, "flops": layer.flops, "params": layer.params, "bytes_read": layer.bytes_read,
                 "bytes_read_act": layer.bytes_read_act, "bytes_read_weight": layer.bytes_read_weight,
                 "bytes_written": layer.bytes_written, "weight_bytes": layer.weight_bytes, "dtype": layer.dtype,
                 "unit_kind": layer.unit_kind, "known": layer.known},
        "estimate": _section_values(layer.estimate),
        "timeline": {} if slot is None else {k: v for k, v in slot.model_dump().items() if k != "id"},
        "measured": _section_values(layer.measured),
        "memory": {} if measured is None or measured.output_bytes is None else {
            "measured output_bytes": measured.output_bytes, "estimated bytes_written": layer.bytes_written,
            "live at measured peak": None if peak_holders is None else layer.id in peak_holders},
        "kernel": {} if kernel is None else {
            "name": kernel.name, "op_type": kernel.op_type, "exec_type": kernel.exec_type,
            "precision": kernel.precision, "device": kernel.provider, "tactic": kernel.tactic,
            "input_formats": kernel.input_formats, "output_formats": kernel.output_formats,
            "fused_group": kernel.layers if len(kernel.layers) > 1 else None,
            "reformats": [k.name for k in reformats] or None,
            "reformat_us": round(sum(kernel_us(k) for k in reformats), 3) if reformats else None},
    }
    return {name: kept for name, values in groups.items()
            if (kept := {k: v for k, v in values.items() if v is not None and v != []})}


# --------------------------------------------------------------------------------------------------- charts


@dataclass(frozen=True)
class ScaleFactor:
    """k = measured / estimated, where it comes from, and the warning when the measurement ran on another device
    than the estimate's target."""

    value: float
    source: str
    warning: str | None = None


def scale_factor(run: Run) -> ScaleFactor | None:
    """k as :func:`layerscope.runfile.scale_factor` defines it (the same number ``reconcile`` prints)."""
    k = runfile_scale_factor(run)
    if k is None:
        return None
    return ScaleFactor(k.k, k.source, k.mismatch)


@dataclass(frozen=True)
class OpTotal:
    """Time of one op type, summed over its layers; ``share``: the sum of its layers' shares
    (:func:`layerscope.runfile.derived.layer_shares`, ``None`` when no layer has one)."""

    op_type: str
    count: int
    est_us: float | None
    meas_us: float | None
    share: float | None = None


def op_type_totals(rows: Sequence[LayerRow]) -> list[OpTotal]:
    """Time per op type, largest first (by measured time when there is one, else estimated); ties by name."""
    groups: dict[str, list[LayerRow]] = {}
    for row in rows:
        groups.setdefault(row.op_type, []).append(row)
    totals = [OpTotal(op, len(members), _sum(r.est_us for r in members), _sum(r.meas_us for r in members),
                      _sum(r.share for r in members)) for op, members in groups.items()]
    totals.sort(key=lambda t: (-(t.meas_us if t.meas_us is not None else t.est_us or 0.0), t.op_type))
    return totals


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def top_layers(rows: Sequence[LayerRow], n: int) -> list[LayerRow]:
    """The ``n`` slowest layers, by measured time when any layer has one, else by estimate; ties by index."""
    measured = any(r.meas_us is not None for r in rows)

    def key(row: LayerRow) -> tuple[float, int]:
        value = row.meas_us if measured else row.est_us
        return (-(value or 0.0), row.index)

    return sorted((r for r in rows if (r.meas_us if measured else r.est_us) is not None), key=key)[:n]


# --------------------------------------------------------------------------------------------------- graph


@dataclass(frozen=True)
class GraphLayout:
    """Layers placed in layers of a DAG: ``position[i] = (column, depth)``; ``edges`` are (producer, consumer)."""

    position: tuple[tuple[float, int], ...]
    edges: tuple[tuple[int, int], ...]


def graph_edges(run: Run) -> list[tuple[int, int]]:
    """(producer, consumer) layer indices through the tensors they share; each pair once, sorted."""
    layers = run.layers
    producer: dict[str, int] = {}
    for index, layer in enumerate(layers):
        for name in layer.outputs:
            producer.setdefault(name, index)
    edges = {(producer[name], index) for index, layer in enumerate(layers) for name in layer.inputs
             if name in producer and producer[name] != index}
    return sorted(edges)


def graph_layout(run: Run) -> GraphLayout:
    """A simple layered layout: depth = longest path from an input; in a depth, layers ordered by the mean
    column of their producers (one barycentre pass) and centred on 0. Deterministic."""
    return _layered(len(run.layers), graph_edges(run))


def _layered(count: int, edges: list[tuple[int, int]]) -> GraphLayout:
    """:func:`graph_layout` of ``count`` nodes in topological order joined by ``edges``."""
    preds: list[list[int]] = [[] for _ in range(count)]
    for src, dst in edges:
        preds[dst].append(src)
    depth = [0] * count
    for index in range(count):  # the run's layers are in topological order; a back edge is ignored
        depth[index] = max((depth[p] + 1 for p in preds[index] if p < index), default=0)
    by_depth: dict[int, list[int]] = {}
    for index in range(count):
        by_depth.setdefault(depth[index], []).append(index)
    column = [0.0] * count
    for level in sorted(by_depth):
        members = by_depth[level]
        members.sort(key=lambda i: (_mean([column[p] for p in preds[i] if p < i], default=0.0), i))
        offset = (len(members) - 1) / 2
        for rank, index in enumerate(members):
            column[index] = rank - offset
    return GraphLayout(tuple((column[i], depth[i]) for i in range(count)), tuple(edges))


def _mean(values: Sequence[float], default: float) -> float:
    return sum(values) / len(values) if values else default


# --------------------------------------------------------------------------------------------------- blocks

#: The most blocks a run is split into by name scope; above it (or when fewer than half the layers have a scope)
#: the blocks are fixed ranges of layers in graph order.
MAX_BLOCKS = 1000
#: How many blocks the fixed ranges aim at (each at least :data:`MIN_RANGE_LAYERS` layers).
RANGE_BLOCKS = 100
MIN_RANGE_LAYERS = 10
#: The deepest name scope tried.
MAX_SCOPE_DEPTH = 4
#: A name-scope split is taken at the first depth with at least this many blocks.
MIN_SCOPE_BLOCKS = 8


@dataclass(frozen=True)
class Blocks:
    """Layers grouped into blocks: ``of_layer[i]`` is layer ``i``'s block (an index into ``names``).

    ``rule`` is ``"scope"`` (the name-scope prefix of ``depth`` parts: ``/model.3/conv/Conv`` at depth 1 is
    ``/model.3``; a layer with a shallower name keeps its whole scope, a layer with no scope is ``(no scope)``) or
    ``"range"`` (``size`` consecutive layers in graph order: ``layers 0-99``); ``text`` says which, for the page."""

    names: tuple[str, ...]
    of_layer: tuple[int, ...]
    rule: str
    depth: int = 0
    size: int = 0

    @property
    def text(self) -> str:
        """How the layers were grouped, as a sentence part."""
        if self.rule == "scope":
            return f"name-scope prefix of {self.depth} part{'s' if self.depth != 1 else ''} of the node names"
        return f"runs of {self.size} consecutive layers (the node names have no usable name scope)"


NO_SCOPE = "(no scope)"


def _scope_parts(name: str) -> list[str]:
    """The scope parts of a node name (its last part is the node's own): ``/model.3/conv/Conv`` ->
    ``["model.3", "conv"]``; ``b7/conv3`` -> ``["b7"]``; ``conv`` -> ``[]``."""
    parts = [p for p in name.split("/") if p]
    return parts[:-1]


def _scope(parts: list[str], depth: int, lead: str) -> str:
    return lead + "/".join(parts[:depth]) if parts else NO_SCOPE


def layer_blocks(run: Run) -> Blocks:
    """The layers' blocks (see :class:`Blocks`): the name scope at the shallowest depth (1 to
    :data:`MAX_SCOPE_DEPTH`) that makes at least :data:`MIN_SCOPE_BLOCKS` blocks (else the deepest tried), when
    at least half the layers have a scope and it makes at most :data:`MAX_BLOCKS` blocks; else fixed ranges of
    ``max(MIN_RANGE_LAYERS, ceil(n / RANGE_BLOCKS))`` layers. Deterministic; block order is first appearance."""
    names = [layer.name or layer.id for layer in run.layers]
    count = len(names)
    parts = [_scope_parts(n) for n in names]
    leads = ["/" if n.startswith("/") else "" for n in names]
    if count and 2 * sum(1 for p in parts if p) >= count:
        chosen: list[str] | None = None
        deepest = max(len(p) for p in parts)
        for depth in range(1, min(MAX_SCOPE_DEPTH, deepest) + 1):
            scopes = [_scope(p, depth, lead) for p, lead in zip(parts, leads, strict=True)]
            distinct = len(set(scopes))
            if distinct > MAX_BLOCKS:
                break
            chosen, chosen_depth = scopes, depth
            if distinct >= MIN_SCOPE_BLOCKS:
                break
        if chosen is not None:
            index: dict[str, int] = {}
            of_layer = tuple(index.setdefault(s, len(index)) for s in chosen)
            return Blocks(tuple(index), of_layer, "scope", depth=chosen_depth)
    size = max(MIN_RANGE_LAYERS, -(-count // RANGE_BLOCKS))
    starts = range(0, count, size)
    block_names = tuple(f"layers {s}-{min(s + size, count) - 1}" for s in starts)
    return Blocks(block_names, tuple(i // size for i in range(count)), "range", size=size)


@dataclass(frozen=True)
class BlockTotal:
    """Time of one block, summed over its layers; ``first`` is its first layer's index; ``share`` as
    :attr:`OpTotal.share`."""

    name: str
    index: int
    count: int
    first: int
    est_us: float | None
    meas_us: float | None
    share: float | None = None


def block_totals(rows: Sequence[LayerRow], blocks: Blocks) -> list[BlockTotal]:
    """Time per block, in block order (see :func:`op_type_totals` for the sums: ``None`` when no layer has one)."""
    members: list[list[LayerRow]] = [[] for _ in blocks.names]
    for row in rows:
        members[blocks.of_layer[row.index]].append(row)
    return [BlockTotal(name, b, len(m), m[0].index if m else 0, _sum(r.est_us for r in m), _sum(r.meas_us for r in m),
                       _sum(r.share for r in m)) for b, (name, m) in enumerate(zip(blocks.names, members, strict=True))]


def block_graph(run: Run, blocks: Blocks) -> GraphLayout:
    """The blocks as a graph: an edge joins two blocks when a tensor flows between layers of each; laid out as
    :func:`graph_layout` lays out layers (blocks in order of first appearance; an edge back to an earlier block
    does not deepen it)."""
    edges = sorted({(blocks.of_layer[a], blocks.of_layer[b]) for a, b in graph_edges(run)
                    if blocks.of_layer[a] != blocks.of_layer[b]})
    return _layered(len(blocks.names), edges)
