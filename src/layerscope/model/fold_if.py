"""Fold top-level ``If`` layers to the branch the given inputs take, for runtimes that cannot convert an ``If``.

Contract of :func:`fold_ifs`: given an ONNX model and values for every graph input, each top-level ``If`` is
replaced by the nodes of the branch its condition selects on those inputs (the condition computed by ONNX Runtime,
the reference runtime of this package), repeatedly, so that an ``If`` a folded branch brings to the top level is
folded too. The folded model computes the same outputs as the original **for those input values only** (a branch
taken on other values is gone). Inlined nodes are named with the layer ids of :mod:`layerscope.model.control_flow`
(``<If id>/<branch attribute>/<node id>``), so a runtime's per-operation names still join the graph's layers;
tensors a branch defines are renamed when their names clash with the outer graph's. ``If`` layers inside a
``Loop``/``Scan`` body are left as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from layerscope.model.load import layer_ids_of

#: At most this many rounds of folding (an ``If`` inside a folded branch is folded in the next round).
MAX_ROUNDS = 16


@dataclass(frozen=True)
class FoldedIf:
    """One folded ``If``: its layer id, the branch kept (``then_branch`` / ``else_branch``) and its nodes."""

    layer_id: str
    branch: str
    nodes: int


def fold_ifs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> tuple[onnx.ModelProto, list[FoldedIf]]:
    """``model`` with its top-level ``If`` layers replaced by the branch ``feeds`` select (see the module docstring),
    and what was folded (empty, and ``model`` itself, when it has no top-level ``If``)."""
    folded: list[FoldedIf] = []
    current = model
    for round_ in range(MAX_ROUNDS):
        nodes = list(current.graph.node)
        ifs = [n for n in nodes if _is_if(n)]
        if not ifs:
            break
        conditions = _conditions(current, [n.input[0] for n in ifs], feeds)
        # every node is named with its layer id from the first round on (inlined nodes by _inline)
        ids = layer_ids_of(nodes) if round_ == 0 else [n.name for n in nodes]
        result = onnx.ModelProto()
        result.CopyFrom(current)
        del result.graph.node[:]
        taken = _defined_names(current.graph)
        for node, node_id in zip(nodes, ids, strict=True):
            if _is_if(node):
                branch = "then_branch" if conditions[node.input[0]] else "else_branch"
                graph = next(a.g for a in node.attribute if a.name == branch)
                inlined = _inline(graph, node, f"{node_id}/{branch}", taken, result.graph)
                folded.append(FoldedIf(node_id, branch, inlined))
            else:
                copy = result.graph.node.add()
                copy.CopyFrom(node)
                copy.name = node_id
        current = result
    return current, folded


def _is_if(node: onnx.NodeProto) -> bool:
    return node.op_type == "If" and node.domain in ("", "ai.onnx")


def _conditions(model: onnx.ModelProto, names: list[str], feeds: Mapping[str, np.ndarray]) -> dict[str, bool]:
    """The value of each condition tensor in ``names`` on ``feeds``, computed by ONNX Runtime."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    for name in dict.fromkeys(names):
        probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.BOOL, None))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    values = session.run(None, {k: v for k, v in feeds.items() if k in wanted})
    return {name: bool(np.asarray(value).reshape(-1)[0]) for name, value in zip(dict.fromkeys(names), values,
                                                                                strict=True)}


def _defined_names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name ``graph`` and its subgraphs define (inputs, initializers, node outputs)."""
    out = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    for node in graph.node:
        out.update(node.output)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
                out |= _defined_names(sub)
    return out


def _inline(branch: onnx.GraphProto, node: onnx.NodeProto, prefix: str, taken: set[str], into: onnx.GraphProto
            ) -> int:
    """Append ``branch``'s initializers and nodes to ``into`` in place of the ``If`` ``node``: the branch's outputs
    become the ``If``'s outputs, names that clash with ``taken`` are renamed (and added to it), nodes are named
    ``<prefix>/<node id>``. Returns how many nodes were inlined."""
    defined = {i.name for i in branch.initializer} | {o for n in branch.node for o in n.output if o}
    rename: dict[str, str] = {}
    # (branch tensor, If output) pairs left to an Identity: those the branch does not define, and repeats
    passed: list[tuple[str, str]] = []
    for out, target in zip(branch.output, node.output, strict=False):
        if not target:
            continue
        if out.name in defined and out.name not in rename:
            rename[out.name] = target
        else:
            passed.append((out.name, target))
    for name in sorted(defined - rename.keys()):
        if name in taken:
            fresh, k = f"{name}__{prefix}", 0
            while fresh in taken:
                k += 1
                fresh = f"{name}__{prefix}~{k}"
            rename[name] = fresh
            taken.add(fresh)
    for init in branch.initializer:
        tensor = into.initializer.add()
        tensor.CopyFrom(init)
        tensor.name = rename.get(init.name, init.name)
    ids = layer_ids_of(list(branch.node))
    for sub, sub_id in zip(branch.node, ids, strict=True):
        copy = into.node.add()
        copy.CopyFrom(sub)
        copy.name = f"{prefix}/{sub_id}"
        _rename_inputs(copy, rename)
        copy.output[:] = [rename.get(o, o) for o in copy.output]
    # a branch output that is no tensor of the branch's own (an outer tensor, a passed-through one)
    for source, target in passed:
        into.node.append(helper.make_node("Identity", [rename.get(source, source)], [target],
                                          name=f"{prefix}/Identity({target})"))
    return len(branch.node)


def _rename_inputs(node: onnx.NodeProto, rename: Mapping[str, str]) -> None:
    """``node``'s inputs renamed, and those of the nodes of its subgraphs that read outer names (a nested ``If``'s
    branches read the enclosing branch's tensors by name)."""
    node.input[:] = [rename.get(i, i) for i in node.input]
    for attr in node.attribute:
        for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
            local = {i.name for i in sub.input} | {i.name for i in sub.initializer} | {
                o for n in sub.node for o in n.output}
            inner = {k: v for k, v in rename.items() if k not in local}
            for child in sub.node:
                _rename_inputs(child, inner)
            for out in sub.output:
                if out.name in inner:
                    out.name = inner[out.name]
