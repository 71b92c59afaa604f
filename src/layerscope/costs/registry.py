"""The registry: ``(domain, op_type) -> cost function``, merged from the family modules' tables.

Domains ``""`` and ``"ai.onnx"`` are the same (the ONNX domain); every other domain is kept as
written (``"com.microsoft"``). Each family module exports a ``COSTS`` table; an op claimed by two
families is a programming error, caught at import.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from layerscope.costs import (
    attention,
    conv,
    elementwise,
    extra,
    llm,
    matmul,
    misc,
    ml,
    movement,
    norm,
    pool,
    quantized,
    random,
    reduce,
    rnn,
    sequence,
    spatial,
    spectral,
)
from layerscope.costs._common import CostFn, CostTable

_FAMILIES = (conv, matmul, elementwise, norm, pool, reduce, movement, misc, rnn, quantized, attention, random, ml,
             spatial, spectral, llm, sequence, extra)


def canonical_domain(domain: str) -> str:
    """``""`` for the ONNX domain (``""`` or ``"ai.onnx"``), else the domain unchanged."""
    return "" if domain in ("", "ai.onnx") else domain


def _merge(tables: list[CostTable]) -> dict[tuple[str, str], CostFn]:
    merged: dict[tuple[str, str], CostFn] = {}
    for costs in tables:
        for (domain, op_type), fn in costs.items():
            key = (canonical_domain(domain), op_type)
            if key in merged:
                raise RuntimeError(f"cost function for {key} registered twice")
            merged[key] = fn
    return merged


REGISTRY: Mapping[tuple[str, str], CostFn] = MappingProxyType(_merge([f.COSTS for f in _FAMILIES]))


def lookup(domain: str, op_type: str) -> CostFn | None:
    """The cost function of ``op_type`` in ``domain``; ``None`` when there is none."""
    return REGISTRY.get((canonical_domain(domain), op_type))
