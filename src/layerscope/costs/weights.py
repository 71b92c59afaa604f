"""Weights by identity: which constants the layers read are one tensor of the model, and the model's params and
weight bytes with each such tensor counted once.

A constant's *identity* is the tensor of the model file it holds: an initializer or a Constant node's value is its
own identity; a folded node that only lays out or converts one constant (:data:`SAME_ELEMENTS_OPS`: a Transpose of a
tied embedding, a Reshape, a Cast, a DequantizeLinear of an int8 weight) gives its output the identity of that
constant. Any other folded node (a Concat, an Add of two constants, an Expand) makes a new tensor, its own identity.

Contracts:
- :func:`weight_identities` maps every constant a layer reads to its identity; :func:`shared_weights` lists the
  identities that more than one layer reads, with their readers;
- :func:`unique_params`: the layers' learned parameters (:attr:`LayerCost.params`, counted per layer by
  :func:`layerscope.costs._common.io_bytes`) with each identity counted once: the sum of the layers' counts
  less, for each shared identity, every reading layer's count of it but the largest. A layer's learned tensors are
  recovered from its count (:func:`layerscope.costs._common.learned_inputs`); a layer whose count does not resolve
  to one set of its constant inputs keeps its own count whole (never fewer params than the model has);
- :func:`unique_weight_bytes`: bytes of the constants the layers read, each identity once at the size of its
  largest member: :attr:`Graph.weight_bytes` when no two read constants share an identity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from layerscope.costs._common import learned_inputs
from layerscope.costs.types import LayerCost
from layerscope.model.types import Graph

#: Folded ops whose output holds the elements of their input 0, laid out or converted: the output is the same
#: tensor of the model file (its identity).
SAME_ELEMENTS_OPS = frozenset({"Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast",
                               "CastLike", "DequantizeLinear", "QuantizeLinear"})


def weight_identities(graph: Graph) -> dict[str, str]:
    """The identity (see the module docstring) of every constant a layer of ``graph`` reads, by constant name."""
    constants = graph.constants
    source: dict[str, str] = {}  # a folded same-elements output -> the constant it lays out
    for node in graph.folded:
        if node.op_type in SAME_ELEMENTS_OPS and node.inputs and node.outputs and node.inputs[0] in constants:
            source[node.outputs[0]] = node.inputs[0]
    read = {name for node in graph.layers for name in node.inputs}
    read.intersection_update(constants.keys())
    return {name: _root(name, source) if name in source else name for name in read}


def _root(name: str, source: Mapping[str, str]) -> str:
    """The end of ``name``'s chain in ``source`` (a chain that loops ends where it would repeat)."""
    seen = {name}
    while (parent := source.get(name)) is not None and parent not in seen:
        seen.add(parent)
        name = parent
    return name


def shared_weights(graph: Graph, identities: Mapping[str, str] | None = None) -> dict[str, tuple[int, ...]]:
    """The identities that more than one layer of ``graph`` reads, each with the indices (into ``graph.layers``, in
    order) of the layers reading it; ``identities``: :func:`weight_identities`'s, when already known."""
    if identities is None:
        identities = weight_identities(graph)
    # the names read more than once in all (a shared identity's reads are; a layer reading one twice too), then
    # the readers of those names' identities alone
    uses = Counter(name for node in graph.layers for name in node.inputs if name in identities)
    by_identity = Counter(identities[name] for name in uses.elements())
    candidates = {identity for identity, count in by_identity.items() if count > 1}
    if not candidates:
        return {}
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.layers):
        for name in node.inputs:
            identity = identities.get(name) if name else None
            if identity in candidates:
                at = readers.setdefault(identity, [])
                if not at or at[-1] != i:
                    at.append(i)
    return {identity: tuple(at) for identity, at in readers.items() if len(at) > 1}


def unique_params(graph: Graph, costs: Sequence[LayerCost], identities: Mapping[str, str] | None = None) -> int:
    """The model's learned parameters, each tensor once (see the module docstring); ``costs``: the layers';
    ``identities``: :func:`weight_identities`'s, when already known."""
    total = sum(cost.params for cost in costs)
    if identities is None:
        identities = weight_identities(graph)
    shared = shared_weights(graph, identities)
    if not shared:
        return total
    layers = graph.layers
    counted: dict[str, list[int]] = {}  # identity -> the elements each reading layer counted of it
    for i in sorted({i for readers in shared.values() for i in readers}):
        node, params = layers[i], costs[i].params
        learned = learned_inputs(node, graph, params) if params else ()
        for name in learned or ():
            identity = identities[name]
            if identity in shared:
                counted.setdefault(identity, []).append(graph.constants[name].elements)
    return total - sum(sum(elements) - max(elements) for elements in counted.values())


def unique_weight_bytes(graph: Graph, identities: Mapping[str, str] | None = None) -> int:
    """Bytes of the constants the layers read as stored in the model, each identity once (its largest member);
    ``identities``: :func:`weight_identities`'s, when already known."""
    sizes: dict[str, int] = {}
    constants = graph.constants
    for name, identity in (weight_identities(graph) if identities is None else identities).items():
        sizes[identity] = max(sizes.get(identity, 0), constants[name].nbytes)
    return sum(sizes.values())
