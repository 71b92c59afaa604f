"""Fusion rules learnt from a runtime's optimized graphs: how to group a model's layers into kernels where the
runtime is not installed (issue #18).

At calibration time, each calibration model's kernels as the runtime groups them (ONNX Runtime's optimized
graph through the fusion map, or OpenVINO's executed runtime nodes) are read as evidence: for every edge
``producer -> consumer`` between two top-level layers where the producer's output feeds that one layer only (a
runtime fuses nothing else: a value read twice must be written out), whether the two landed in the same kernel,
counted per ``(root, producer, consumer)`` (``root``: the op of the first layer of the producer's kernel, so that
a BatchNormalization -> Mul after a Conv, folded into it, is told apart from one after a Concat, which is not)
and per ``(producer, consumer)``; and for every layer, whether any kernel covers it (a runtime removes Identity,
folds shape arithmetic). Ops are described by their type, a Conv with groups as ``Conv/grouped``.

:meth:`FusionRules.group` replays them on a model, layers in topological order: a layer whose op was dropped in
at least half its sightings is left out; a layer joins the kernel of the first producer (single-consumer edge)
whose ``(root, producer, consumer)`` was fused in at least half its sightings (the pair's counts when that
triple was never seen; never when neither was), else starts a kernel of its own. Kernels are named after their
first layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.model.types import Graph, Node

#: ``--fusion``: the runtime's grouping where it is installed, else the learnt rules (``auto``); only one. Here,
#: not in :mod:`layerscope.analysis.predictor`, so that ``estimate``'s options need not import the predictor.
FUSION_SOURCES = ("auto", "runtime", "rules")
#: The share of sightings at or above which a pair is fused / an op type is dropped.
THRESHOLD = 0.5
_SEP = ">"


def _edges(graph: Graph) -> list[tuple[str, str]]:
    """``(producer id, consumer id)`` of top-level layers where the producer's output tensor(s) feed that one
    consumer layer only and no model output."""
    top = [n for n in graph.layers if not n.parent]
    producer = {t: n.id for n in top for t in n.outputs if t}
    readers: dict[str, set[str]] = {}
    for node in top:
        for tensor in node.inputs:
            if tensor in producer:
                readers.setdefault(producer[tensor], set()).add(node.id)
    outputs = {t.name for t in graph.outputs}
    by_id = {n.id: n for n in top}
    return [(p, next(iter(cs))) for p, cs in readers.items()
            if len(cs) == 1 and not any(t in outputs for t in by_id[p].outputs)]


def _describe(node: Node) -> str:
    if node.op_type == "Conv" and int(node.attr("group", 1) or 1) > 1:
        return "Conv/grouped"
    return node.op_type


@dataclass(frozen=True)
class FusionRules:
    """Counts learnt from a runtime's groupings: ``triples`` ``(root, producer, consumer)`` and ``pairs``
    ``(producer, consumer)`` -> (times fused, times seen on a single-consumer edge); ``dropped``: op -> (times no
    kernel covered it, times seen); ``runner``: the runtime they were read from; ``models``: how many models."""

    triples: Mapping[tuple[str, str, str], tuple[int, int]]
    pairs: Mapping[tuple[str, str], tuple[int, int]]
    dropped: Mapping[str, tuple[int, int]]
    runner: str
    models: int

    def fuses(self, root: str, producer: str, consumer: str) -> bool:
        """Whether ``consumer`` joins ``producer``'s kernel (whose first layer is a ``root``): by the triple's
        counts, else the pair's, else the same for the ops' base types (``Conv`` for ``Conv/grouped``)."""
        base = [x.split("/")[0] for x in (root, producer, consumer)]
        for fused, seen in (self.triples.get((root, producer, consumer), (0, 0)),
                            self.pairs.get((producer, consumer), (0, 0)),
                            self.triples.get((base[0], base[1], base[2]), (0, 0)),
                            self.pairs.get((base[1], base[2]), (0, 0))):
            if seen:
                return fused >= THRESHOLD * seen
        return False

    def drops(self, op: str) -> bool:
        gone, seen = self.dropped.get(op, (0, 0))
        return seen > 0 and gone >= THRESHOLD * seen

    def group(self, graph: Graph) -> list[tuple[str, tuple[str, ...]]]:
        """``graph``'s kernels by these rules: ``(name, layer ids)``, top-level layers only."""
        top = [n for n in graph.layers if not n.parent and not self.drops(_describe(n))]
        desc = {n.id: _describe(n) for n in top}
        producers: dict[str, list[str]] = {}
        for p, c in _edges(graph):
            producers.setdefault(c, []).append(p)
        kernel: dict[str, list[str]] = {}  # layer -> its kernel's layers (shared list)
        out: list[list[str]] = []
        for node in top:
            joined = None
            for p in producers.get(node.id, []):
                if p in kernel and self.fuses(desc[kernel[p][0]], desc[p], desc[node.id]):
                    joined = kernel[p]
                    break
            if joined is None:
                joined = []
                out.append(joined)
            joined.append(node.id)
            kernel[node.id] = joined
        return [(ids[0], tuple(ids)) for ids in out]

    def to_json(self) -> dict[str, Any]:
        return {"runner": self.runner, "models": self.models, "threshold": THRESHOLD,
                "triples": {_SEP.join(k): list(v) for k, v in sorted(self.triples.items())},
                "pairs": {_SEP.join(k): list(v) for k, v in sorted(self.pairs.items())},
                "dropped": {k: list(v) for k, v in sorted(self.dropped.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FusionRules:
        """``ValueError`` / ``KeyError`` / ``TypeError`` when malformed (the caller names the file)."""
        def counts(table: Any, parts: int) -> dict[tuple[str, ...], tuple[int, int]]:
            out = {}
            for key, value in dict(table).items():
                names = tuple(str(key).split(_SEP))
                done, seen = (int(v) for v in value)
                if len(names) != parts or not 0 <= done <= seen:
                    raise ValueError(f"fusion rule {key!r}: {value!r}")
                out[names] = (done, seen)
            return out

        triples = {(k[0], k[1], k[2]): v for k, v in counts(data["triples"], 3).items()}
        pairs = {(k[0], k[1]): v for k, v in counts(data["pairs"], 2).items()}
        dropped = {k[0]: v for k, v in counts(data["dropped"], 1).items()}
        return cls(triples, pairs, dropped, str(data["runner"]), int(data["models"]))


def learn_rules(examples: Sequence[tuple[Graph, Sequence[tuple[str, Sequence[str]]]]], runner: str) -> FusionRules:
    """Count, over ``examples`` (a model and its kernels as ``runner`` grouped them: name, layer ids), which
    single-consumer edges were fused (by root, producer and consumer, and by pair) and which ops no kernel
    covered."""
    triples: dict[tuple[str, str, str], list[int]] = {}
    pairs: dict[tuple[str, str], list[int]] = {}
    dropped: dict[str, list[int]] = {}
    for graph, groups in examples:
        order = {n.id: i for i, n in enumerate(graph.layers)}
        owner = {layer: index for index, (_, layers) in enumerate(groups) for layer in layers}
        roots = {index: min((i for i in layers if i in order), key=order.__getitem__, default="")
                 for index, (_, layers) in enumerate(groups)}
        desc = {n.id: _describe(n) for n in graph.layers if not n.parent}
        for layer, op in desc.items():
            count = dropped.setdefault(op, [0, 0])
            count[0] += layer not in owner
            count[1] += 1
        for p, c in _edges(graph):
            if p in owner and c in owner and roots[owner[p]] in desc:
                fused = owner[p] == owner[c]
                for count in (triples.setdefault((desc[roots[owner[p]]], desc[p], desc[c]), [0, 0]),
                              pairs.setdefault((desc[p], desc[c]), [0, 0])):
                    count[0] += fused
                    count[1] += 1
    return FusionRules({k: (v[0], v[1]) for k, v in triples.items()}, {k: (v[0], v[1]) for k, v in pairs.items()},
                       {k: (v[0], v[1]) for k, v in dropped.items()}, runner, len(examples))
