"""Join vendor entries to the layers of an ONNX model, by name.

Contract of :func:`resolve`: each entry maps to zero or more layer ids of the graph, with how it was
found, in this order of trust:

1. the names the vendor says the entry covers (``source_names``: TensorRT metadata, RKNN FullName),
   else the entry's own name, taken apart as a fused name (``a + PWN(b, c)``, ``{ForeignNode[x...y]}``);
2. each part by exact layer id or node name, then by :func:`~layerscope.importers.names.normalize`d
   name (only when that is unambiguous), then without a runtime suffix (``_nchwc``), then as the name
   of a tensor (its producer), e.g. ONNX Runtime's ``<tensor>_nchwc`` nodes;
3. a runtime op that fused a chain (``FusedConv`` found at a Relu) takes the producers up to the layer
   of its op type.

An entry that maps to nothing is ``unmapped`` with the reason; a part that maps to nothing is listed
in ``missing``: nothing is dropped silently. Layout work (reformat, reorder, copies) is its own
category; a tensor copy feeding a Concat is that Concat's work (TensorRT implements Concat as copies).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from layerscope.importers.names import normalize, split_fused, strip_runtime_suffix
from layerscope.importers.types import EntryKind, VendorEntry
from layerscope.model.types import Graph

LAYER, LAYOUT, UNMAPPED = "layer", "layout", "unmapped"
#: Longest chain of producers a fused runtime op is followed up.
_MAX_CHAIN = 4


@dataclass(frozen=True)
class Resolution:
    """Where one entry lands: ``category`` (``layer``, ``layout`` or ``unmapped``), ``layer_ids`` in
    graph order, ``how`` it was found, the ``missing`` parts, and the ``reason`` when unmapped."""

    entry: VendorEntry
    category: str
    layer_ids: tuple[str, ...] = ()
    how: str = ""
    missing: tuple[str, ...] = ()
    reason: str = ""


class LayerIndex:
    """Lookups from the names vendors use to the graph's layer ids."""

    def __init__(self, graph: Graph) -> None:
        self.order = {node.id: i for i, node in enumerate(graph.layers)}
        self.op_type = {node.id: node.op_type for node in graph.layers}
        self._exact: dict[str, str] = {}
        normalized: dict[str, set[str]] = defaultdict(set)
        self._producer: dict[str, str] = {}
        tensors: dict[str, set[str]] = defaultdict(set)
        self._consumers: dict[str, list[str]] = defaultdict(list)
        self._inputs = {node.id: [i for i in node.inputs if i and not graph.is_constant(i)] for node in graph.layers}
        for node in graph.layers:
            self._exact.setdefault(node.id, node.id)
            for key in (node.id, node.name):
                if key:
                    normalized[normalize(key)].add(node.id)
            for output in node.outputs:
                if output:
                    self._producer[output] = node.id
                    tensors[normalize(output)].add(node.id)
            for tensor in node.inputs:
                if tensor:
                    self._consumers[tensor].append(node.id)
        for node in graph.layers:
            if node.name:
                self._exact.setdefault(node.name, node.id)
        self._normalized = {k: next(iter(v)) for k, v in normalized.items() if len(v) == 1 and k}
        names: dict[str, set[str]] = defaultdict(set)
        for tensor in (*self._producer, *self._consumers):
            names[normalize(tensor)].add(tensor)
        self._tensor_names = {k: next(iter(v)) for k, v in names.items() if len(v) == 1 and k}
        self._tensor_normalized = {k: next(iter(v)) for k, v in tensors.items() if len(v) == 1 and k}

    def find(self, name: str) -> tuple[str, str] | None:
        """(layer id, how) for one vendor name, or ``None``."""
        for candidate, suffix in ((name, ""), (strip_runtime_suffix(name), "+suffix")):
            if not candidate:
                continue
            if candidate in self._exact:
                return self._exact[candidate], "exact" + suffix
            key = normalize(candidate)
            if key in self._normalized:
                return self._normalized[key], "normalized" + suffix
            if candidate in self._producer:
                return self._producer[candidate], "tensor" + suffix
            if key in self._tensor_normalized:
                return self._tensor_normalized[key], "tensor" + suffix
        return None

    def span(self, first: str, last: str) -> tuple[str, ...] | None:
        """The layers from ``first`` to ``last`` in graph order (a TensorRT Myelin range)."""
        a, b = self.find(first), self.find(last)
        if a is None or b is None:
            return None
        lo, hi = sorted((self.order[a[0]], self.order[b[0]]))
        return tuple(layer for layer, i in self.order.items() if lo <= i <= hi)

    def tensor(self, name: str) -> str:
        """The graph's name of tensor ``name`` (matched exactly, else by normalized name)."""
        if name in self._producer or name in self._consumers:
            return name
        return self._tensor_names.get(normalize(name), name)

    def producer(self, tensor: str) -> str | None:
        return self._producer.get(self.tensor(tensor))

    def concat_consumer(self, tensor: str) -> str | None:
        """The Concat that reads ``tensor``, if one does."""
        consumers = self._consumers.get(self.tensor(tensor), [])
        return next((c for c in consumers if self.op_type.get(c) == "Concat"), None)

    def chain_up(self, layer_id: str, op_type: str) -> tuple[str, ...]:
        """``layer_id`` and its producers up to the nearest of ``op_type`` (``FusedConv`` -> ``Conv``);
        just ``layer_id`` when there is none within a few steps."""
        wanted = op_type.removeprefix("Fused").removeprefix("QLinear")
        chain = [layer_id]
        current = layer_id
        for _ in range(_MAX_CHAIN):
            if self.op_type.get(current) == wanted:
                return tuple(reversed(chain))
            inputs = self._inputs.get(current, [])
            parent = self._producer.get(inputs[0]) if inputs else None
            if parent is None:
                break
            chain.append(parent)
            current = parent
        return (layer_id,)

    def sort(self, ids: set[str] | list[str]) -> tuple[str, ...]:
        return tuple(sorted(set(ids), key=self.order.__getitem__))


def resolve(entry: VendorEntry, index: LayerIndex) -> Resolution:
    """Where ``entry`` lands in the graph (see the module docstring)."""
    if entry.kind is EntryKind.SUBGRAPH:
        return Resolution(entry, UNMAPPED, reason="an accelerator subgraph the board times as one block")
    if entry.kind is EntryKind.LAYOUT:
        return _layout(entry, index)
    if entry.kind is EntryKind.OTHER:
        return Resolution(entry, UNMAPPED, reason="runtime work (input/output, synchronisation), not a model layer")
    ids, how, missing = _lookup_names(entry.source_names or (entry.name,), index)
    if len(ids) == 1 and how.startswith("tensor") and entry.op_type:
        chain = index.chain_up(ids[0], entry.op_type)
        if len(chain) > 1:
            ids, how = chain, "fused-chain"
    if not ids:
        return Resolution(entry, UNMAPPED, missing=missing, reason="no model layer of that name")
    return Resolution(entry, LAYER, layer_ids=ids, how=how, missing=missing)


def _layout(entry: VendorEntry, index: LayerIndex) -> Resolution:
    if entry.tensor:
        concat = index.concat_consumer(entry.tensor)
        if concat is not None:
            return Resolution(entry, LAYER, layer_ids=(concat,), how="concat-copy")
        producer = index.producer(entry.tensor)
        return Resolution(entry, LAYOUT, layer_ids=(producer,) if producer else (), how="tensor-copy")
    ids, how, _ = _lookup_names(entry.source_names, index) if entry.source_names else ((), "", ())
    return Resolution(entry, LAYOUT, layer_ids=ids, how=how)


def _lookup_names(names: tuple[str, ...], index: LayerIndex) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """(layer ids in graph order, how, names that matched nothing) for the parts of ``names``."""
    found: list[str] = []
    hows: list[str] = []
    missing: list[str] = []
    fused = False
    for name in names:
        whole = index.find(name)
        if whole is not None:
            found.append(whole[0])
            hows.append(whole[1])
            continue
        parts = split_fused(name)
        fused = fused or parts.is_fused
        for part in parts.parts:
            hit = index.find(part)
            if hit is None:
                missing.append(part)
            else:
                found.append(hit[0])
                hows.append(hit[1])
        for first, last in parts.ranges:
            span = index.span(first, last)
            if span is None:
                missing.append(f"{first}...{last}")
            else:
                found.extend(span)
                hows.append("range")
    ids = index.sort(found)
    how = "fused" if (fused or len(names) > 1) and len(ids) > 1 else (hows[0] if hows else "")
    return ids, how, tuple(missing)


def self_resolution(entry: VendorEntry) -> Resolution:
    """Without a model, an entry is its own layer (layout work stays layout)."""
    if entry.kind is EntryKind.LAYOUT:
        return Resolution(entry, LAYOUT)
    return Resolution(entry, LAYER, layer_ids=(entry.name,), how="vendor")
