"""Control-flow kernels in ONNX Runtime's profile: subgraph kernels mapped to subgraph layers, exclusive times.

ONNX Runtime's profiler times an ``If``/``Loop``/``Scan`` kernel from start to end, the kernels of the
subgraph it runs included, and times each subgraph kernel on its own as well, under the subgraph node's
name (``then_add_kernel_time``; a Loop body's kernels once per iteration). So:

- :func:`exclusive_events` subtracts, event by event, the time of each control-flow kernel's direct
  subgraph kernels from its own (clamped at 0): every µs is then counted once, by the kernel that spent it;
- :func:`with_subgraph_kernels` adds to a :class:`FusionMap` a mapping for every kernel of the optimized
  model's subgraphs: each optimized subgraph is mapped to the source layers of that subgraph under that
  control-flow layer (see :mod:`layerscope.model.control_flow` for the ids) by the top level's rules
  (:func:`~layerscope.measure.fusion.build_fusion_map`: equivalent tensors, fused groups); a kernel those
  rules leave without layers goes to the source layer of its name (or the name ONNX Runtime's fusions derive,
  ``<source node>/<Fusion>/``), else to its control-flow layer (category ``layer``): never unmapped. Source
  layers a kernel covers are no longer ``eliminated``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import onnx

from layerscope.measure.fusion import FusionMap, KernelMapping, build_fusion_map
from layerscope.model.types import Graph, Node

_KERNEL_SUFFIX = "_kernel_time"


def _subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for i, g in enumerate(attr.graphs):
                yield f"{attr.name}[{i}]", g


def _control_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        subs = list(_subgraphs(node))
        if subs:
            yield node
            for _, sub in subs:
                yield from _control_nodes(sub)


def exclusive_events(events: Sequence[dict[str, Any]], optimized: onnx.ModelProto) -> list[dict[str, Any]]:
    """``events`` (ONNX Runtime's profile) with each control-flow kernel's ``dur`` less the time of its direct
    subgraph kernels' events inside its span (clamped at 0); other events unchanged (see the module docstring)."""
    children: dict[str, set[str]] = {}
    for node in _control_nodes(optimized.graph):
        names = {n.name for _, sub in _subgraphs(node) for n in sub.node} - {node.name}
        children.setdefault(node.name, set()).update(names)
    if not children:
        return list(events)
    spans: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") == "Node" and name.endswith(_KERNEL_SUFFIX) and "ts" in e:
            spans.setdefault(name[: -len(_KERNEL_SUFFIX)], []).append((float(e["ts"]), float(e.get("dur", 0.0))))
    for series in spans.values():
        series.sort()
    out: list[dict[str, Any]] = []
    for e in events:
        name = str(e.get("name", ""))
        kernel = name[: -len(_KERNEL_SUFFIX)] if name.endswith(_KERNEL_SUFFIX) else ""
        if e.get("cat") != "Node" or kernel not in children or "ts" not in e:
            out.append(e)
            continue
        start, duration = float(e["ts"]), float(e.get("dur", 0.0))
        inner = 0.0
        for child in children[kernel]:
            series = spans.get(child, [])
            i = bisect.bisect_left(series, (start, -1.0))
            while i < len(series) and series[i][0] <= start + duration:
                inner += series[i][1]
                i += 1
        out.append({**e, "dur": max(0.0, duration - inner)})
    return out


def with_subgraph_kernels(fusion: FusionMap, graph: Graph, optimized: onnx.ModelProto) -> FusionMap:
    """``fusion`` plus the mappings of the optimized model's subgraph kernels (see the module docstring)."""
    parents = {n.parent for n in graph.layers if n.parent}
    if not parents:
        return fusion
    by_name = {n.name: n.id for n in graph.layers if n.name and n.id in parents}
    kernels = dict(fusion.kernels)

    def visit(node: onnx.NodeProto, parent_id: str) -> None:
        for attr_name, sub in _subgraphs(node):
            prefix = f"{parent_id}/{attr_name}/"
            local = {n.name: n.id for n in graph.layers if n.parent == parent_id and n.id.startswith(prefix)
                     and n.name}
            inner = _inner_map(graph, sub, [n for n in graph.layers if n.parent == parent_id
                                            and n.id.startswith(prefix)])
            for child in sub.node:
                mapped = inner.kernels.get(child.name)
                if mapped is not None and (mapped.layers or mapped.category in ("layout", "constant")):
                    kernels[child.name] = mapped
                else:
                    layer = _source_layer(child.name, local) or parent_id
                    kernels[child.name] = KernelMapping(kernel=child.name, op_type=child.op_type,
                                                        domain=child.domain, layers=(layer,), category="layer")
                if any(True for _ in _subgraphs(child)):
                    layer = _source_layer(child.name, local) or parent_id
                    visit(child, layer if layer in parents else parent_id)

    for node in optimized.graph.node:
        if not any(True for _ in _subgraphs(node)):
            continue
        parent_id = by_name.get(node.name)
        if parent_id is None:
            mapped = fusion.kernels.get(node.name)
            candidates = [lid for lid in (mapped.layers if mapped else ()) if lid in parents]
            parent_id = candidates[0] if len(candidates) == 1 else None
        if parent_id is not None:
            visit(node, parent_id)
    covered = {lid for m in kernels.values() for lid in m.layers}
    return FusionMap(kernels=kernels, eliminated=tuple(lid for lid in fusion.eliminated if lid not in covered))


def _inner_map(graph: Graph, sub: onnx.GraphProto, layers: list[Node]) -> FusionMap:
    """The fusion map of one optimized subgraph against the source layers of that subgraph (same rules as the
    top level: equivalent tensors, covers, merged kernels)."""
    model = onnx.ModelProto()
    model.graph.CopyFrom(sub)
    return build_fusion_map(replace(graph, layers=tuple(layers)), model)


def _source_layer(kernel: str, local: dict[str, str]) -> str | None:
    """The source layer a subgraph kernel computes: same name, or the name a fusion ``a/b/Fusion/`` derives."""
    name = kernel
    while name:
        if name in local:
            return local[name]
        name = name.rstrip("/").rsplit("/", 1)[0] if "/" in name.rstrip("/") else ""
    return None
