"""Elementwise ops: arithmetic with broadcasting, activations, logic, Cast, Quantize/Dequantize.

Counting convention (all families share it): every elementary operation counts 1 FLOP: an add, a
multiply, a divide, a compare, a select, a rounding, and each transcendental (exp, log, sqrt, erf,
tanh, sin ...). onnx-tool instead weights transcendentals by an x86 instruction cost (EXP = 32,
DIV = 4, ...); layerscope leaves such hardware weighting to the target profiles. The per-element
constants below decompose each op into elementary operations; the cost of a layer is
``output elements × constant`` (the output shape carries the broadcast).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from layerscope.costs._common import (
    MS,
    CostFn,
    CostTable,
    has_input,
    layer_cost,
    out_elements,
    per_output_cost,
    present_inputs,
    table,
    tensor_only,
)
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

#: Sigmoid 1/(1+exp(-x)): exp + add + div = 3 (the negation folds into exp's argument; assumption).
SIGMOID = 3
#: Gelu, exact form x·0.5·(1+erf(x/√2)): scale + erf + add + mul + mul = 5.
GELU_ERF = 5
#: Gelu, tanh form x·0.5·(1+tanh(√(2/π)·(x+0.044715·x³))): x³ (2 mul) + mul + add + mul + tanh
#: + add + mul + mul = 9.
GELU_TANH = 9
#: com.microsoft QuickGelu x·sigmoid(α·x): mul + sigmoid + mul.
QUICK_GELU = SIGMOID + 2
#: QuantizeLinear: x/scale + round + add zero point + saturate (min, max) = 5.
QUANTIZE = 5
#: Requantization of an int32 accumulator (QLinearConv, QLinearMatMul), per output element: multiply
#: by the combined scale + round + add the output zero point + saturate = 5, as QuantizeLinear. Input
#: zero-point corrections are assumed folded into the bias (assumption).
REQUANT = QUANTIZE

#: FLOPs per output element of the unary activations and math functions.
UNARY_FLOPS: Mapping[str, int] = MappingProxyType({
    "Relu": 1,  # max(x, 0)
    "LeakyRelu": 2,  # compare + multiply (onnx-tool: MUL + CMP)
    "ThresholdedRelu": 1,  # compare-select, like Relu
    "Elu": 4,  # compare + exp + sub + mul (onnx-tool: CMP + EXP + ADD + MUL)
    "Selu": 5,  # Elu's 4 + the gamma multiply
    "Celu": 7,  # max(0,x) + min(0, α·(exp(x/α)-1)): div, exp, sub, mul, min, max, add
    "Sigmoid": SIGMOID,
    "HardSigmoid": 4,  # max(0, min(1, αx+β)): mul + add + 2 compares (onnx-tool: MUL + ADD + 2 CMP)
    "HardSwish": 5,  # x·HardSigmoid(x): HardSigmoid's 4 + mul (onnx-tool: 2 MUL + ADD + 2 CMP)
    "Swish": SIGMOID + 1,  # x·sigmoid(x) (ONNX opset 24; also SiLU)
    "Tanh": 1,  # a transcendental counts 1 (see the module docstring)
    "Softplus": 3,  # log(exp(x) + 1): exp + add + log (onnx-tool: EXP + ADD + LOG)
    "Softsign": 3,  # x / (1 + |x|): abs + add + div
    "Mish": 5,  # x·tanh(softplus(x)): exp + add + log + tanh + mul
    "Gelu": GELU_ERF,  # ONNX opset 20; approximate="tanh" is handled in _gelu
    "Shrink": 3,  # two compares + one add/sub (assumption)
    "Clip": 2,  # max + min (onnx-tool: 2 CMP)
    "Exp": 1, "Log": 1, "Sqrt": 1, "Erf": 1, "Reciprocal": 1,
    "Sin": 1, "Cos": 1, "Tan": 1, "Asin": 1, "Acos": 1, "Atan": 1,
    "Sinh": 1, "Cosh": 1, "Asinh": 1, "Acosh": 1, "Atanh": 1,
    "Abs": 1, "Neg": 1, "Floor": 1, "Ceil": 1, "Round": 1, "Sign": 1,
    "IsNaN": 1, "IsInf": 1, "Not": 1, "BitwiseNot": 1,
    # Cast: one conversion per element (assumption).
    "Cast": 1, "CastLike": 1,
    "QuantizeLinear": QUANTIZE,
    # DequantizeLinear: (x - zero point)·scale = 2.
    "DequantizeLinear": 2,
    # DynamicQuantizeLinear: a global min and max (2 compares) + QuantizeLinear's (assumption).
    "DynamicQuantizeLinear": 2 + QUANTIZE,
})

#: FLOPs per output element of the binary ops (one op, whatever the broadcast).
BINARY_FLOPS: Mapping[str, int] = MappingProxyType({
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Mod": 1, "BitShift": 1,
    "PRelu": 2,  # compare + multiply (onnx-tool: CMP + MUL)
    "And": 1, "Or": 1, "Xor": 1, "BitwiseAnd": 1, "BitwiseOr": 1, "BitwiseXor": 1,
    "Equal": 1, "Less": 1, "Greater": 1, "LessOrEqual": 1, "GreaterOrEqual": 1,
})

#: Pow's generic cost: x^y = exp(y·log(x)): log + mul + exp = 3. Exponents 1, 2, 0.5 are cheaper.
POW_GENERIC = 3
_POW_SPECIAL: Mapping[float, int] = MappingProxyType({1.0: 0, 2.0: 1, 0.5: 1, -1.0: 1, 3.0: 2})

#: Activation names of fused ops (com.microsoft FusedConv/FusedGemm ``activation`` attribute).
ACTIVATION_FLOPS: Mapping[str, int] = MappingProxyType(
    {name: UNARY_FLOPS[name] for name in
     ("Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Clip", "Elu", "Selu", "Softplus",
      "Softsign", "HardSwish", "ThresholdedRelu")}
)


def activation_flops(name: str) -> int:
    """FLOPs per element of a fused activation named as in ONNX (``""``: none; unknown: 1, assumption)."""
    if not name:
        return 0
    return ACTIVATION_FLOPS.get(name, 1)


def _variadic(extra_per_element: int) -> CostFn:
    """Sum/Max/Min/Mean of n inputs: n-1 ops per output element (+ a divide for Mean)."""
    @tensor_only
    def cost(node: Node, graph: Graph) -> LayerCost:
        per_element = max(present_inputs(node) - 1, 0) + extra_per_element
        return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * per_element)

    return cost


def _pow(node: Node, graph: Graph) -> LayerCost:
    """Pow: :data:`POW_GENERIC` per element, fewer for a known constant exponent (x², √x, 1/x)."""
    per_element = POW_GENERIC
    exponent = graph.value(node.inputs[1]) if has_input(node, 1) else None
    if exponent is not None and exponent.size == 1:
        per_element = _POW_SPECIAL.get(float(exponent.reshape(())), POW_GENERIC)
    return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * per_element,
                      params_from=())


def _gelu(node: Node, graph: Graph) -> LayerCost:
    """ONNX Gelu (opset 20): erf form unless ``approximate="tanh"``."""
    per_element = GELU_TANH if node.attr("approximate", "none") == "tanh" else GELU_ERF
    return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * per_element)


@tensor_only
def _ms_fast_gelu(node: Node, graph: Graph) -> LayerCost:
    """com.microsoft FastGelu(X, bias?): tanh-form Gelu, plus an add when the bias is given."""
    per_element = GELU_TANH + (1 if has_input(node, 1) else 0)
    return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * per_element)


#: Unary ops whose constant inputs are settings (Clip's min/max, quantization scales), not learned.
_NOT_LEARNED = frozenset({"Clip", "QuantizeLinear", "DynamicQuantizeLinear", "Shrink"})

COSTS: CostTable = {
    # Gelu reads its ``approximate`` attribute; DequantizeLinear's input 0 may be a weight.
    **{("", op): per_output_cost(f, params_from=() if op in _NOT_LEARNED else None)
       for op, f in UNARY_FLOPS.items() if op not in ("Gelu", "DequantizeLinear")},
    **{("", op): per_output_cost(f) for op, f in BINARY_FLOPS.items()},
    **table(("Sum", "Max", "Min"), _variadic(0)),
    **table(("Mean",), _variadic(1)),
    **table(("Pow",), _pow),
    **table(("Gelu",), _gelu),
    # Where: one select per output; constant fill values are settings, not learned.
    **table(("Where",), per_output_cost(1, params_from=())),
    # DequantizeLinear: 2/element; a constant (int8 weight) input 0 is a learned tensor.
    **table(("DequantizeLinear",), per_output_cost(2, params_from=(0,))),
    **table(("Gelu",), per_output_cost(GELU_ERF), MS),
    **table(("QuickGelu",), per_output_cost(QUICK_GELU), MS),
    # com.microsoft BiasGelu(A, bias) = Gelu(A + bias): add + erf-form Gelu.
    **table(("BiasGelu",), per_output_cost(1 + GELU_ERF), MS),
    **table(("FastGelu",), _ms_fast_gelu, MS),
}
