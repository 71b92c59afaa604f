"""Op-support rules: which layers an accelerator hands to the CPU, and why.

A profile's ``fallback_rules`` name predicates from ``PREDICATES`` (name -> ``f(node, graph) ->
bool``). ``fallback_reason`` returns the first matching rule's reason, prefixed by the predicate's
detail (what exactly about this layer triggers it) when the predicate has one. Predicates read only
the ``Graph`` contract: tensor shapes/dtypes, small constant values and the layer list; a value
layerscope does not know makes a predicate answer False (no fallback is claimed without evidence).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from layerscope.costs.random import RANDOM_OPS
from layerscope.model.types import Graph, Node, TensorInfo
from layerscope.targets.profile import FallbackRule, Profile

Predicate = Callable[[Node, Graph], bool]
Detail = Callable[[Node, Graph], str]

_RESIZE_OPS = frozenset({"Resize", "Upsample"})
_INT64_INDEX_OPS = frozenset({"TopK", "ArgMax", "ArgMin"})
_INDEX_OPS = frozenset({"Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements"})
_CHW_LIMIT = 8192


# ---------------------------------------------------------------------------------------- helpers
def _text(value: Any, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _fmt(factor: float) -> str:
    """``3.0`` -> ``"3.0"``, ``0.75`` -> ``"0.75"``: a resize factor as a person writes it."""
    return f"{factor:.1f}" if float(factor).is_integer() else f"{factor:.4g}"


def _is_pow2(factor: float) -> bool:
    """True for 1, 2, 4, ... and 1/2, 1/4, ...: an integer power of two, up or down."""
    if not math.isfinite(factor) or factor <= 0:
        return False
    exponent = math.log2(factor)
    return abs(exponent - round(exponent)) < 1e-6


def _tensors(node: Node, graph: Graph) -> list[TensorInfo]:
    """The layer's input and output tensors that have a shape (:meth:`Graph.tensor`), inputs first."""
    tensors = graph.tensors
    return [t for name in node.inputs + node.outputs if name and (t := tensors.get(name)) is not None]


def consumers(graph: Graph) -> Mapping[str, tuple[Node, ...]]:
    """Tensor name -> the layers that read it, in layer order, each once (:attr:`Graph.reader_indices`' layers;
    made once per graph: :meth:`Graph.derived`)."""
    return graph.derived(_consumers)


def _consumers(graph: Graph) -> Mapping[str, tuple[Node, ...]]:
    """:func:`consumers`, made."""
    layers = graph.layers
    return MappingProxyType(
        {name: tuple(layers[k] for k in dict.fromkeys(indices)) for name, indices in graph.reader_indices.items()})


# ----------------------------------------------------------------------------- resize predicates
def _resize_mode(node: Node) -> str:
    return _text(node.attr("mode"), "nearest").lower()


def _scales_from_values(node: Node, graph: Graph, rank: int) -> list[float] | None:
    """Per-axis factors from the constant ``scales`` (attribute or input), else constant ``sizes``.

    ``None`` when neither is a known constant (the caller then uses the resolved output shape).
    """
    x = graph.tensor(node.inputs[0]) if node.inputs else None
    if node.op_type == "Upsample":
        raw = node.attr("scales")
        if raw is None and len(node.inputs) > 1:
            raw = graph.value(node.inputs[1])
        return [float(s) for s in raw] if raw is not None and len(raw) else None
    # Resize-10: (X, scales); Resize-11+: (X, roi, scales, sizes), optional ones omitted as "".
    scale_at = 1 if graph.opset < 11 else 2
    scale_name = node.inputs[scale_at] if len(node.inputs) > scale_at else ""
    scales = graph.value(scale_name) if scale_name else None
    if scales is not None and scales.size:
        return [float(s) for s in scales.reshape(-1)]
    has_sizes = graph.opset >= 11 and len(node.inputs) > 3 and node.inputs[3]
    sizes = graph.value(node.inputs[3]) if has_sizes else None
    if sizes is not None and sizes.size and x is not None:
        axes = _axes(node, rank, len(sizes))
        full = [1.0] * rank
        for axis, size in zip(axes, sizes.reshape(-1), strict=True):
            full[axis] = float(size) / x.shape[axis] if x.shape[axis] else math.nan
        return full
    return None


def _axes(node: Node, rank: int, count: int) -> list[int]:
    axes = node.attr("axes")
    if axes is None or len(axes) != count:
        return list(range(rank - count, rank))
    return [int(a) % rank for a in axes]


def resize_factors(node: Node, graph: Graph) -> tuple[float, float] | None:
    """The (H, W) resize factors of a Resize/Upsample layer (output size / input size).

    From the scales (attribute or constant input), else the constant sizes, else the resolved
    output shape divided by the input shape. H and W are the last two axes. ``None`` when the
    layer is not a resize or the factors are not known.
    """
    if node.op_type not in _RESIZE_OPS or not node.inputs:
        return None
    x = graph.tensor(node.inputs[0])
    y = graph.tensor(node.outputs[0]) if node.outputs else None
    rank = len(x.shape) if x is not None else 0
    if rank < 2:
        return None
    scales = _scales_from_values(node, graph, rank)
    if scales is not None and len(scales) != rank:
        full = [1.0] * rank
        for axis, scale in zip(_axes(node, rank, len(scales)), scales, strict=True):
            full[axis] = scale
        scales = full
    if scales is None and x is not None and y is not None and len(y.shape) == rank:
        if not x.shape[-2] or not x.shape[-1]:
            return None
        scales = [y.shape[i] / x.shape[i] if x.shape[i] else 1.0 for i in range(rank)]
    if scales is None:
        return None
    return scales[-2], scales[-1]


def _nearest_factors(node: Node, graph: Graph) -> tuple[float, float] | None:
    if node.op_type not in _RESIZE_OPS or _resize_mode(node) != "nearest":
        return None
    return resize_factors(node, graph)


def resize_not_pow2(node: Node, graph: Graph) -> bool:
    """A nearest-mode Resize/Upsample whose H or W factor is not an integer power of two."""
    factors = _nearest_factors(node, graph)
    return factors is not None and not all(_is_pow2(f) for f in factors)


def _resize_not_pow2_detail(node: Node, graph: Graph) -> str:
    factors = _nearest_factors(node, graph)
    if factors is None:
        return ""
    h, w = factors
    if math.isclose(h, w):
        return f"{node.op_type} by {_fmt(h)}x is not a power of 2"
    return f"{node.op_type} by {_fmt(h)}x (H) and {_fmt(w)}x (W) is not a power of 2 on both axes"


def resize_non_nearest(node: Node, graph: Graph) -> bool:
    """A Resize/Upsample whose mode is not ``nearest`` (linear, cubic)."""
    return node.op_type in _RESIZE_OPS and _resize_mode(node) != "nearest"


def _resize_non_nearest_detail(node: Node, graph: Graph) -> str:
    return f"{node.op_type} mode is '{_resize_mode(node)}'"


def resize_h_gt_w(node: Node, graph: Graph) -> bool:
    """A nearest-mode Resize/Upsample whose H factor is larger than its W factor."""
    factors = _nearest_factors(node, graph)
    return factors is not None and factors[0] > factors[1] + 1e-9


def _resize_h_gt_w_detail(node: Node, graph: Graph) -> str:
    factors = _nearest_factors(node, graph)
    if factors is None:
        return ""
    return f"{node.op_type} scales H by {_fmt(factors[0])}x but W by only {_fmt(factors[1])}x"


# ------------------------------------------------------------------------------- int64 predicates
def _int64_outputs(node: Node, graph: Graph) -> list[str]:
    return [n for n in node.outputs if (t := graph.tensor(n)) is not None and t.dtype == "int64"]


def int64_output(node: Node, graph: Graph) -> bool:
    """Any output of the layer is int64."""
    return bool(_int64_outputs(node, graph))


def _int64_output_detail(node: Node, graph: Graph) -> str:
    names = _int64_outputs(node, graph)
    return f"output '{names[0]}' is int64" if names else ""


def _int64_cast_pair(node: Node, graph: Graph) -> tuple[str, Node] | None:
    if node.op_type not in _INT64_INDEX_OPS:
        return None
    readers = consumers(graph)
    for name in _int64_outputs(node, graph):
        for reader in readers.get(name, ()):
            if reader.op_type == "Cast":
                return name, reader
    return None


def feeds_cast_from_int64(node: Node, graph: Graph) -> bool:
    """A TopK/ArgMax/ArgMin whose int64 output is read by a Cast."""
    return _int64_cast_pair(node, graph) is not None


def _feeds_cast_detail(node: Node, graph: Graph) -> str:
    pair = _int64_cast_pair(node, graph)
    if pair is None:
        return ""
    name, cast = pair
    return f"{node.op_type} output '{name}' is int64 and is converted by Cast '{cast.id}'"


def cast_from_int64(node: Node, graph: Graph) -> bool:
    """A Cast whose input is int64."""
    if node.op_type != "Cast" or not node.inputs:
        return False
    source = graph.tensor(node.inputs[0])
    return source is not None and source.dtype == "int64"


def _cast_from_int64_detail(node: Node, graph: Graph) -> str:
    return f"Cast reads int64 tensor '{node.inputs[0]}'"


# ------------------------------------------------------------------------------ shape predicates
def _widest(node: Node, graph: Graph) -> TensorInfo | None:
    tensors = _tensors(node, graph)
    return max(tensors, key=lambda t: len(t.shape)) if tensors else None


def rank_gt_4(node: Node, graph: Graph) -> bool:
    """Any input or output tensor of the layer has rank above 4."""
    return any(len(t.shape) > 4 for t in _tensors(node, graph))


def _rank_gt_4_detail(node: Node, graph: Graph) -> str:
    widest = _widest(node, graph)
    return f"tensor '{widest.name}' has rank {len(widest.shape)}" if widest is not None else ""


def _chw(node: Node, graph: Graph) -> tuple[int, ...] | None:
    x = graph.tensor(node.inputs[0]) if node.inputs else None
    if x is None or len(x.shape) != 4:
        return None
    return x.shape[1:]


def chw_gt_8192(node: Node, graph: Graph) -> bool:
    """The layer's first input is 4-D and C*H*W (one batch item) exceeds 8192 elements."""
    chw = _chw(node, graph)
    return chw is not None and math.prod(chw) > _CHW_LIMIT


def _chw_detail(node: Node, graph: Graph) -> str:
    chw = _chw(node, graph)
    if chw is None:
        return ""
    c, h, w = chw
    return f"input is {c}x{h}x{w} = {c * h * w} elements per batch item, above {_CHW_LIMIT}"


def dynamic_index(node: Node, graph: Graph) -> bool:
    """A Gather/Scatter-family layer whose indices are computed at run time (not a constant)."""
    if node.op_type not in _INDEX_OPS or len(node.inputs) < 2 or not node.inputs[1]:
        return False
    return not graph.is_constant(node.inputs[1])


def _dynamic_index_detail(node: Node, graph: Graph) -> str:
    return f"{node.op_type} indices '{node.inputs[1]}' are computed at run time"


# ------------------------------------------------------------------------------ domain predicates
_ML_DOMAIN = "ai.onnx.ml"
_ORT_CONTRIB_DOMAIN = "com.microsoft"


def ml_domain(node: Node, graph: Graph) -> bool:
    """An ``ai.onnx.ml`` op (tree ensembles, linear models, SVMs, scalers, ZipMap ...)."""
    return node.domain == _ML_DOMAIN


def _ml_domain_detail(node: Node, graph: Graph) -> str:
    return f"{node.op_type} is a classical-ML op of the ai.onnx.ml domain"


def random_generator(node: Node, graph: Graph) -> bool:
    """An ONNX random generator (RandomNormal(Like), RandomUniform(Like), Bernoulli, Multinomial)."""
    return node.op_type in RANDOM_OPS and node.domain in ("", "ai.onnx")


def _random_generator_detail(node: Node, graph: Graph) -> str:
    return f"{node.op_type} draws random numbers"


def onnxruntime_contrib(node: Node, graph: Graph) -> bool:
    """An ONNX Runtime contrib op (domain ``com.microsoft``: its quantizer's and optimizer's quantized and fused
    ops, e.g. DynamicQuantizeLSTM, QAttention, FusedConv)."""
    return node.domain == _ORT_CONTRIB_DOMAIN


def _onnxruntime_contrib_detail(node: Node, graph: Graph) -> str:
    return f"{node.op_type} is an ONNX Runtime contrib op (com.microsoft domain)"


def always(node: Node, graph: Graph) -> bool:
    """Every layer of the rule's op type."""
    return True


# ------------------------------------------------------------------------------------- registry
PREDICATES: dict[str, Predicate] = {
    "always": always,
    "resize_not_pow2": resize_not_pow2,
    "resize_non_nearest": resize_non_nearest,
    "resize_h_gt_w": resize_h_gt_w,
    "int64_output": int64_output,
    "feeds_cast_from_int64": feeds_cast_from_int64,
    "cast_from_int64": cast_from_int64,
    "rank_gt_4": rank_gt_4,
    "chw_gt_8192": chw_gt_8192,
    "dynamic_index": dynamic_index,
    "ml_domain": ml_domain,
    "random_generator": random_generator,
    "onnxruntime_contrib": onnxruntime_contrib,
}

#: Optional per-predicate description of what triggered it on this layer (prefixed to the reason).
DETAILS: dict[str, Detail] = {
    "resize_not_pow2": _resize_not_pow2_detail,
    "resize_non_nearest": _resize_non_nearest_detail,
    "resize_h_gt_w": _resize_h_gt_w_detail,
    "int64_output": _int64_output_detail,
    "feeds_cast_from_int64": _feeds_cast_detail,
    "cast_from_int64": _cast_from_int64_detail,
    "rank_gt_4": _rank_gt_4_detail,
    "chw_gt_8192": _chw_detail,
    "dynamic_index": _dynamic_index_detail,
    "ml_domain": _ml_domain_detail,
    "random_generator": _random_generator_detail,
    "onnxruntime_contrib": _onnxruntime_contrib_detail,
}


def register_predicate(name: str, predicate: Predicate, detail: Detail | None = None) -> None:
    """Add a predicate that profiles may name in ``fallback_rules[].condition``.

    Register before loading a profile that uses it. Re-registering a name replaces it.
    """
    if not name.isidentifier():
        raise ValueError(f"predicate name must be an identifier, got {name!r}")
    PREDICATES[name] = predicate
    if detail is not None:
        DETAILS[name] = detail
    else:
        DETAILS.pop(name, None)


def rule_applies(rule: FallbackRule, node: Node, graph: Graph) -> bool:
    """Whether ``rule`` sends ``node`` to the CPU."""
    return rule.matches_op(node.op_type) and _condition_holds(rule, node, graph)


def _condition_holds(rule: FallbackRule, node: Node, graph: Graph) -> bool:
    """Whether ``rule``'s condition (``always`` when it names none) holds for ``node``, its op type not asked."""
    return PREDICATES[rule.condition or "always"](node, graph)


def explain(rule: FallbackRule, node: Node, graph: Graph) -> str:
    """The rule's reason for this layer, with the predicate's detail filled in.

    A reason containing ``{detail}`` gets the detail substituted there; otherwise a non-empty
    detail is prefixed as ``"<detail>: <reason>"``.
    """
    detail_fn = DETAILS.get(rule.condition or "always")
    detail = detail_fn(node, graph) if detail_fn is not None else ""
    if "{detail}" in rule.reason:
        return rule.reason.replace("{detail}", detail or node.op_type)
    return f"{detail}: {rule.reason}" if detail else rule.reason


def matching_rule(profile: Profile, node: Node, graph: Graph) -> FallbackRule | None:
    """The first of ``profile.fallback_rules`` that applies to ``node``; ``None`` if none does."""
    return _first_applying(_rules_of(profile, node.op_type), node, graph)


def _rules_of(profile: Profile, op_type: str) -> tuple[FallbackRule, ...]:
    """The rules of ``profile`` that name ``op_type`` or every op (``"*"``), in the profile's order."""
    return tuple(rule for rule in profile.fallback_rules if rule.matches_op(op_type))


def _first_applying(rules: tuple[FallbackRule, ...], node: Node, graph: Graph) -> FallbackRule | None:
    """The first of ``rules`` (each matching ``node``'s op type) whose condition holds for ``node``."""
    for rule in rules:
        if _condition_holds(rule, node, graph):
            return rule
    return None


def fallback_reason(profile: Profile, node: Node, graph: Graph) -> str | None:
    """Why ``node`` runs on the CPU instead of ``profile``'s accelerator; ``None`` if it does not.

    The first matching rule wins; its reason carries the layer-specific detail, e.g.
    ``"Resize by 3.0x is not a power of 2: the BPU resizes nearest by power-of-2 factors only;
    runs on the CPU"``.
    """
    rule = matching_rule(profile, node, graph)
    return explain(rule, node, graph) if rule is not None else None


def fallback_reasons(profile: Profile, graph: Graph) -> list[str | None]:
    """:func:`fallback_reason` of every layer of ``graph``, in order (each op type's rules picked once)."""
    rules_of = {op_type: _rules_of(profile, op_type) for op_type in {node.op_type for node in graph.layers}}
    reasons: list[str | None] = []
    for node in graph.layers:
        rules = rules_of[node.op_type]
        rule = _first_applying(rules, node, graph) if rules else None
        reasons.append(explain(rule, node, graph) if rule is not None else None)
    return reasons
