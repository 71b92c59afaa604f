"""Control flow (``If``, ``Loop``, ``Scan``): the nodes of their subgraphs become layers.

Contract of :func:`expand`: given a control-flow layer and the observed inference
(:func:`layerscope.model.shapes.observe`), every subgraph node that ran becomes a :class:`Node` with
- id ``<parent id>/<subgraph attribute>/<node id>`` (node ids as for the top level: the node's name when
  unique in its subgraph, else ``op(first output)``), ``parent`` = the control-flow layer's id;
- ``executions``: how often it ran in the inference (a Loop body node: the trip count), ``shape_source``
  ``"executed"`` (its shapes are those of its last execution);
nested control flow is expanded the same way, depth first, each child right after its parent. Nodes that did
not run (the branch not taken, a body with trip count 0) are not layers. ``Constant`` nodes of a subgraph are
folded (their values become constants). The control-flow layer itself gets ``observed``: ``branch_taken``
(``If``: the subgraph attribute whose nodes ran, ``None`` when neither had any node), ``trip_count``
(``Loop``/``Scan``: body executions per execution of the node), both marked ``"source": "executed"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import onnx
from onnx import numpy_helper

from layerscope.model.shapes import Observation
from layerscope.model.types import Graph, Node, TensorInfo

#: (proto, id, shape_source, parent, executions) -> Node; the loader's own conversion.
MakeNode = Callable[[onnx.NodeProto, str, str, str, int], Node]


@dataclass
class Expansion:
    """What the subgraphs add to the graph: layers (in order), folded nodes, tensors and constants."""

    layers: list[Node] = field(default_factory=list)
    folded: list[Node] = field(default_factory=list)
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    constants: dict[str, TensorInfo] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)


def subgraphs(proto: onnx.NodeProto) -> list[tuple[str, onnx.GraphProto]]:
    """The node's subgraphs as ``(attribute name, graph)``; a ``GRAPHS`` attribute's are ``name[i]``."""
    out: list[tuple[str, onnx.GraphProto]] = []
    for attr in proto.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            out.append((attr.name, attr.g))
        elif attr.type == onnx.AttributeProto.GRAPHS:
            out.extend((f"{attr.name}[{i}]", g) for i, g in enumerate(attr.graphs))
    return out


def expand(parent: Node, proto: onnx.NodeProto, observation: Observation, *, make_node: MakeNode,
           layer_ids: Callable[[list[onnx.NodeProto]], list[str]], out: Expansion) -> Node:
    """Append the layers under ``parent`` to ``out``; return ``parent`` with ``observed`` filled in."""
    from layerscope.model.load import _evaluate, onnx_dtype_name

    run = observation.of(proto)
    parent_runs = run.executions if run is not None else 0
    ran: dict[str, int] = {}
    children: list[tuple[Node, onnx.NodeProto]] = []
    for attr_name, graph in subgraphs(proto):
        nodes = list(graph.node)
        for sub_proto, sub_id in zip(nodes, layer_ids(nodes), strict=True):
            node_id = f"{parent.id}/{attr_name}/{sub_id}"
            if sub_proto.op_type == "Constant" and sub_proto.domain in ("", "ai.onnx"):
                values = _evaluate(sub_proto, {}, [onnx.helper.make_opsetid("", 21)])
                if values:
                    for name, value in zip(sub_proto.output, values, strict=False):
                        out.constants[name] = out.tensors[name] = TensorInfo(
                            name, tuple(int(d) for d in value.shape), str(value.dtype))
                        out.values[name] = value
                    out.folded.append(make_node(sub_proto, node_id, "executed", parent.id, 0))
                    continue
            sub_run = observation.of(sub_proto)
            if sub_run is None:
                continue
            ran[attr_name] = max(ran.get(attr_name, 0), sub_run.executions)
            for info in (*sub_run.inputs, *sub_run.outputs):
                out.tensors.setdefault(info.name, info)
            child = make_node(sub_proto, node_id, "executed", parent.id, sub_run.executions)
            children.append((child, sub_proto))
        for init in graph.initializer:
            info = TensorInfo(init.name, tuple(init.dims), onnx_dtype_name(init.data_type))
            out.constants[init.name] = out.tensors[init.name] = info
            if info.elements <= 1 << 16:
                out.values[init.name] = numpy_helper.to_array(init)
    observed: dict[str, object] = {"source": "executed"}
    if proto.op_type == "If":
        observed["branch_taken"] = next(iter(ran), None) if len(ran) == 1 else None
    elif proto.op_type in ("Loop", "Scan"):
        per_run = max(ran.values(), default=0)
        observed["trip_count"] = round(per_run / parent_runs) if parent_runs else 0
    parent = replace(parent, observed=observed)
    out.layers.append(parent)
    for child, child_proto in children:
        if subgraphs(child_proto):
            expand(child, child_proto, observation, make_node=make_node, layer_ids=layer_ids, out=out)
        else:
            out.layers.append(child)
    return parent


def top_level(graph: Graph) -> Graph:
    """``graph`` without its subgraph layers: for what can only cut or rewrite the top-level graph (bisect).

    A control-flow layer then stands for its whole subgraph; its own estimate is 0 (see ``costs``), so
    cost-weighted choices see it as cheap.
    """
    if not any(n.parent for n in graph.layers):
        return graph
    return replace(graph, layers=tuple(n for n in graph.layers if not n.parent))


def rolled_up(graph: Graph, per_layer: Mapping[str, float], top: Graph) -> list[float]:
    """``per_layer`` values summed onto ``top``'s layers: each subgraph layer's onto its top-level ancestor."""
    parent = {n.id: n.parent for n in graph.layers}
    totals: dict[str, float] = {}
    for layer_id, value in per_layer.items():
        root = layer_id
        while parent.get(root):
            root = parent[root]
        totals[root] = totals.get(root, 0.0) + value
    return [totals.get(n.id, 0.0) for n in top.layers]
