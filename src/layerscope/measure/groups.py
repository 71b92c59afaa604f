"""Cuts that would split a runtime's fused layer group (:meth:`~layerscope.runtimes.base.OpenRuntime.fused_groups`):
a bisect never cuts there."""

from __future__ import annotations

from collections.abc import Sequence

from layerscope.model.types import Graph

__all__ = ["group_cuts"]


def group_cuts(graph: Graph, groups: Sequence[Sequence[str]]) -> frozenset[int]:
    """The cuts (prefix lengths in ``graph.layers`` order) that fall inside a group: for a group whose layers sit
    at positions p..q, the cuts p+1..q (layers of the group that ``graph`` lacks are ignored)."""
    position = {layer.id: i for i, layer in enumerate(graph.layers)}
    inside: set[int] = set()
    for group in groups:
        places = [position[i] for i in group if i in position]
        if len(places) > 1:
            inside.update(range(min(places) + 1, max(places) + 1))
    return frozenset(inside)
