"""The per-op cost model: MACs, FLOPs, bytes and params of each layer, independent of hardware.

Public API:
- :func:`cost_layer` — the :class:`LayerCost` of one node of a resolved :class:`Graph`;
- :func:`cost_graph` — the costs of all of ``graph.layers``, in order;
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
from dataclasses import replace

from layerscope.costs._common import constant_elements_read, unknown_cost
from layerscope.costs.registry import REGISTRY, canonical_domain, lookup
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node

__all__ = ["KNOWN_OPS", "LayerCost", "UnitKind", "constant_elements_read", "cost_graph", "cost_layer", "is_known"]

_log = logging.getLogger(__name__)

#: Every ``(domain, op_type)`` with a cost function; the ONNX domain is ``""``.
KNOWN_OPS: frozenset[tuple[str, str]] = frozenset(REGISTRY)


def is_known(domain: str, op_type: str) -> bool:
    """Whether ``op_type`` of ``domain`` has a cost function (``""`` and ``"ai.onnx"`` are the same)."""
    return (canonical_domain(domain), op_type) in REGISTRY


def cost_layer(node: Node, graph: Graph) -> LayerCost:
    """The cost of one layer. Never raises for a loaded graph; see the module docstring."""
    cost = _cost_once(node, graph)
    if node.executions == 1:
        return cost
    times = node.executions
    return replace(cost, macs=cost.macs * times, flops=cost.flops * times, bytes_read_act=cost.bytes_read_act * times,
                   bytes_read_weight=cost.bytes_read_weight * times, bytes_written=cost.bytes_written * times)


def _cost_once(node: Node, graph: Graph) -> LayerCost:
    fn = lookup(node.domain, node.op_type)
    if fn is None:
        return unknown_cost(node, graph)
    try:
        return fn(node, graph)
    except (LayerscopeError, ArithmeticError, LookupError, TypeError, ValueError) as exc:
        _log.warning("layer %r (%s): cost model failed (%s); counting its bytes only", node.id,
                     node.op_type, exc)
        return unknown_cost(node, graph)


def cost_graph(graph: Graph) -> tuple[LayerCost, ...]:
    """The costs of ``graph.layers``, in the same order."""
    return tuple(cost_layer(node, graph) for node in graph.layers)
