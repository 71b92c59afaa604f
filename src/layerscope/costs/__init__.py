"""The per-op cost model: MACs, FLOPs, bytes and params of each layer, independent of hardware.

Public API:
- :func:`cost_layer` — the :class:`LayerCost` of one node of a resolved :class:`Graph`;
- :func:`cost_graph` — the costs of all of ``graph.layers``, in order;
- :func:`classify_costs` — the same, with the classes of alike layers (whose costs are equal but for the id);
- :func:`is_known` / :data:`KNOWN_OPS` — which ``(domain, op_type)`` pairs have a cost function.

An op without a cost function is never silently free: it gets a bytes-only cost with
``known=False``, unit ``scalar`` and one FLOP per output element. A cost function that cannot
cost a node (a tensor without a shape, a malformed attribute) gives the same fallback, with a
logged warning naming the layer.

A layer that runs more than once per inference (``Node.executions``: a Loop or Scan body's node) costs
every execution: MACs, FLOPs and bytes are multiplied by it (params are not).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from layerscope.costs._common import (
    CostFn,
    TensorSignature,
    constant_elements_read,
    is_tensor_only,
    tensor_signature,
    unknown_cost,
)
from layerscope.costs.registry import REGISTRY, canonical_domain, lookup
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node

__all__ = ["KNOWN_OPS", "ClassifiedCosts", "LayerCost", "UnitKind", "classify_costs", "constant_elements_read",
           "cost_graph", "cost_layer", "is_known"]

_log = logging.getLogger(__name__)

#: Every ``(domain, op_type)`` with a cost function; the ONNX domain is ``""``.
KNOWN_OPS: frozenset[tuple[str, str]] = frozenset(REGISTRY)


def is_known(domain: str, op_type: str) -> bool:
    """Whether ``op_type`` of ``domain`` has a cost function (``""`` and ``"ai.onnx"`` are the same)."""
    return (canonical_domain(domain), op_type) in REGISTRY


def cost_layer(node: Node, graph: Graph) -> LayerCost:
    """The cost of one layer. Never raises for a loaded graph; see the module docstring."""
    return _every_execution(_cost_once(node, graph, lookup(node.domain, node.op_type)), node.executions)


def _cost_once(node: Node, graph: Graph, fn: CostFn | None) -> LayerCost:
    """The cost of one execution of ``node`` by ``fn``, its op's cost function (``None``: it has none)."""
    cost = unknown_cost(node, graph) if fn is None else _cost_by(fn, node, graph)
    return cost if cost is not None else unknown_cost(node, graph)


def _cost_by(fn: CostFn, node: Node, graph: Graph) -> LayerCost | None:
    """``fn``'s cost of one execution of ``node``; ``None``, with a logged warning, when ``fn`` cannot cost it."""
    try:
        return fn(node, graph)
    except (LayerscopeError, ArithmeticError, LookupError, TypeError, ValueError) as exc:
        _log.warning("layer %r (%s): cost model failed (%s); counting its bytes only", node.id,
                     node.op_type, exc)
        return None


def _every_execution(cost: LayerCost, times: int) -> LayerCost:
    """``cost`` of one execution, counted ``times`` (params are not multiplied)."""
    if times == 1:
        return cost
    return replace(cost, macs=cost.macs * times, flops=cost.flops * times, bytes_read_act=cost.bytes_read_act * times,
                   bytes_read_weight=cost.bytes_read_weight * times, bytes_written=cost.bytes_written * times)


def cost_graph(graph: Graph) -> tuple[LayerCost, ...]:
    """The costs of ``graph.layers``, in the same order: each layer's :func:`cost_layer` (see :func:`classify_costs`
    for how they are computed)."""
    return classify_costs(graph).costs


@dataclass(frozen=True)
class ClassifiedCosts:
    """The costs of ``graph.layers`` and the classes of alike layers among them.

    ``classes[i]`` is the class of ``graph.layers[i]``: an int shared by the layers of one op type and one
    :func:`tensor_signature` whose op has a :func:`tensor_only` cost function (or none); every input of their cost
    is equal, and so are their costs but for ``layer_id``, before counting executions. ``None``: a layer of
    another op, whose inputs repeat a tensor, or whose cost function raised.
    """

    costs: tuple[LayerCost, ...]
    classes: tuple[int | None, ...]


def classify_costs(graph: Graph) -> ClassifiedCosts:
    """The costs of ``graph.layers`` (each layer's :func:`cost_layer`) and their classes.

    The cost of a class is computed once, for its first layer, and renamed for the others (a model repeats its
    blocks); the other layers are costed one by one.
    """
    functions = {op: lookup(*op) for op in {(node.domain, node.op_type) for node in graph.layers}}
    classed = {op for op, fn in functions.items() if fn is None or is_tensor_only(fn)}
    class_of: dict[_ClassKey, int] = {}
    class_costs: list[LayerCost] = []
    costs: list[LayerCost] = []
    classes: list[int | None] = []
    for node in graph.layers:
        op = node.domain, node.op_type
        fn = functions[op]
        signature = tensor_signature(node, graph) if op in classed else None
        layer_class = None
        if signature is None:
            cost = _cost_once(node, graph, fn)
        else:
            key = (fn, node.op_type, signature)
            layer_class = class_of.get(key)
            if layer_class is not None:
                cost = class_costs[layer_class].renamed(node.id)
            else:
                first = unknown_cost(node, graph) if fn is None else _cost_by(fn, node, graph)
                if first is None:  # no class: every layer whose cost function fails logs its warning
                    cost = unknown_cost(node, graph)
                else:
                    cost, layer_class = first, class_of.setdefault(key, len(class_costs))
                    class_costs.append(first)
        costs.append(cost if node.executions == 1 else _every_execution(cost, node.executions))
        classes.append(layer_class)
    return ClassifiedCosts(tuple(costs), tuple(classes))


#: What makes two layers alike: their cost function (``None``: their op has none), op type and tensor signature.
_ClassKey = tuple[CostFn | None, str, TensorSignature]
