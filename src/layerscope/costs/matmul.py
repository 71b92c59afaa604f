"""Matrix products: Gemm, MatMul (batched, broadcast), QLinearMatMul, MatMulInteger, Einsum,
com.microsoft FusedMatMul and FusedGemm.

``MACs = output elements × K`` for every product: the output shape already carries the batch
broadcast (``2×1×4×8 @ 3×8×5 -> 2×3×4×5``, K = 8). FLOPs = 2 × MACs plus the per-element
epilogue (bias, alpha/beta scaling, requantization, fused activation).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from layerscope.costs._common import (
    MS,
    CostFn,
    CostTable,
    attr_str,
    has_input,
    in_shape,
    layer_cost,
    out_elements,
    table,
    tensor_only,
)
from layerscope.costs.elementwise import REQUANT, activation_flops
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node


def matmul_k(a_shape: tuple[int, ...]) -> int:
    """K of numpy-style ``matmul(A, B)``: A's last dim (a 1-D A is a row vector of length K)."""
    if not a_shape:
        raise ValueError("MatMul of a scalar")
    return a_shape[-1]


def _gemm_epilogue(node: Node, graph: Graph) -> int:
    """Gemm's ``alpha·A·B + beta·C``: a multiply per output for alpha ≠ 1, an add (and a multiply
    for beta ≠ 1) per output when C is given."""
    outputs = out_elements(node, graph)
    flops = outputs if float(node.attr("alpha", 1.0)) != 1.0 else 0
    if has_input(node, 2):
        flops += outputs * (2 if float(node.attr("beta", 1.0)) != 1.0 else 1)
    return flops


def _gemm_macs(node: Node, graph: Graph) -> int:
    """Gemm(A, B, C?): A is (M, K), or (K, M) with transA; MACs = M·N·K = output elements × K."""
    a = in_shape(node, graph, 0)
    if len(a) != 2:
        raise LayerscopeError(f"layer {node.id!r}: Gemm input A of rank {len(a)}, expected 2")
    k = a[0] if node.attr("transA", 0) else a[1]
    return out_elements(node, graph) * k


def _gemm(node: Node, graph: Graph) -> LayerCost:
    macs = _gemm_macs(node, graph)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs + _gemm_epilogue(node, graph))


def _ms_fused_gemm(node: Node, graph: Graph) -> LayerCost:
    """com.microsoft FusedGemm: Gemm + ``activation``."""
    macs = _gemm_macs(node, graph)
    act = activation_flops(attr_str(node, "activation", "")) * out_elements(node, graph)
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs,
                      flops=2 * macs + _gemm_epilogue(node, graph) + act)


def _matmul(*, requant: bool, params_from: tuple[int, ...] | None) -> CostFn:
    """A MatMul-family cost function (A at input 0); ``requant`` adds QLinear's requantization."""
    @tensor_only
    def cost(node: Node, graph: Graph) -> LayerCost:
        outputs = out_elements(node, graph)
        macs = outputs * matmul_k(in_shape(node, graph, 0))
        flops = 2 * macs + (REQUANT * outputs if requant else 0)
        return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops, params_from=params_from)

    return cost


def fused_matmul_k(a_shape: tuple[int, ...], *, trans_a: bool, trans_batch_a: bool) -> int:
    """K of com.microsoft FusedMatMul.

    ``transBatchA`` moves A's first dim behind its batch dims, ``(d0, d1, ..., dn-2, dn-1) ->
    (d1, ..., dn-2, d0, dn-1)``; ``transA`` then swaps the last two dims.
    """
    dims = list(a_shape)
    if trans_batch_a and len(dims) > 2:
        dims = [*dims[1:-1], dims[0], dims[-1]]
    if trans_a and len(dims) >= 2:
        return dims[-2]
    return matmul_k(tuple(dims))


def _ms_fused_matmul(node: Node, graph: Graph) -> LayerCost:
    """com.microsoft FusedMatMul(A, B): alpha·op(A)·op(B); an alpha ≠ 1 costs a multiply per output."""
    k = fused_matmul_k(in_shape(node, graph, 0), trans_a=bool(node.attr("transA", 0)),
                       trans_batch_a=bool(node.attr("transBatchA", 0)))
    outputs = out_elements(node, graph)
    macs = outputs * k
    alpha = outputs if float(node.attr("alpha", 1.0)) != 1.0 else 0
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs + alpha)


@dataclass(frozen=True)
class EinsumCount:
    """What an Einsum computes: every index's size, the contracted indices, the operand count."""

    sizes: dict[str, int]
    contracted: frozenset[str]
    operands: int

    @property
    def iterations(self) -> int:
        """The size of the full index space (the product of all distinct index sizes)."""
        return math.prod(self.sizes.values())


def _expand_term(term: str, ellipsis_rank: int) -> list[str]:
    """Labels of one term; the dims of ``...`` get labels ``.1 ... .n`` counted from its right end,
    so that ellipsis dims of different ranks broadcast right-aligned."""
    if "..." not in term:
        return list(term)
    left, _, right = term.partition("...")
    return [*left, *(f".{ellipsis_rank - j}" for j in range(ellipsis_rank)), *right]


def parse_einsum(equation: str, shapes: list[tuple[int, ...]]) -> EinsumCount:
    """Parse an ONNX Einsum equation against its operand shapes.

    Explicit form ``ab,bc->ac``; implicit form (no ``->``): the output is the alphabetically sorted
    indices that appear exactly once, after the ellipsis dims (ONNX/numpy rule). Sizes broadcast (1
    stretches). ``ValueError`` on a malformed equation.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"Einsum {equation!r}: {len(terms)} terms for {len(shapes)} operands")
    sizes: dict[str, int] = {}
    counts: Counter[str] = Counter()
    max_ellipsis = 0
    for term, shape in zip(terms, shapes, strict=True):
        ellipsis_rank = len(shape) - len(term.replace("...", "")) if "..." in term else 0
        labels = _expand_term(term, ellipsis_rank)
        if len(labels) != len(shape) or ellipsis_rank < 0:
            raise ValueError(f"Einsum {equation!r}: term {term!r} does not fit shape {shape}")
        max_ellipsis = max(max_ellipsis, ellipsis_rank)
        for label, dim in zip(labels, shape, strict=True):
            sizes[label] = max(sizes.get(label, 1), dim)
        counts.update(label for label in labels if not label.startswith("."))
    ellipsis_labels = [f".{max_ellipsis - j}" for j in range(max_ellipsis)]
    if arrow:
        output = set(_expand_term(rhs, max_ellipsis))
    else:
        output = set(ellipsis_labels) | {label for label, n in counts.items() if n == 1}
    return EinsumCount(sizes=sizes, contracted=frozenset(set(sizes) - output), operands=len(terms))


def _einsum(node: Node, graph: Graph) -> LayerCost:
    """Einsum, evaluated as the naive nested loop over the full index space.

    - a contraction over two operands: MACs = product of all distinct index sizes (``bij,bjk->bik``:
      b·i·j·k); with n > 2 operands each point of the space costs n-1 MACs (assumption: no
      contraction-order optimisation);
    - no contraction, several operands (outer/Hadamard product): (n-1) multiplies per point, no MACs;
    - one operand: a pure reduction (``ij->i``, trace) costs one add per point; a permutation or
      diagonal view costs nothing.
    """
    shapes = [in_shape(node, graph, i) for i in range(len(node.inputs)) if has_input(node, i)]
    count = parse_einsum(attr_str(node, "equation", ""), shapes)
    macs = flops = 0
    if count.operands >= 2 and count.contracted:
        macs = count.iterations * (count.operands - 1)
        flops = 2 * macs
    elif count.operands >= 2:
        flops = count.iterations * (count.operands - 1)
    elif count.contracted:
        flops = count.iterations
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops)


COSTS: CostTable = {
    **table(("Gemm",), _gemm),
    **table(("MatMul",), _matmul(requant=False, params_from=None)),
    # QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): learned tensors at 0 and 3.
    **table(("QLinearMatMul",), _matmul(requant=True, params_from=(0, 3))),
    # MatMulInteger(A, B, a_zp?, b_zp?): int32 output, no requantization.
    **table(("MatMulInteger",), _matmul(requant=False, params_from=(0, 1))),
    **table(("Einsum",), _einsum),
    **table(("FusedMatMul",), _ms_fused_matmul, MS),
    **table(("FusedGemm",), _ms_fused_gemm, MS),
}
