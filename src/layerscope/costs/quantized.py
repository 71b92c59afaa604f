"""ONNX Runtime's quantized contrib ops (domain ``com.microsoft``), as its quantizers emit them.

Sources: ONNX Runtime's ContribOperators.md and the op schemas it registers (``onnxruntime.capi.
onnxruntime_pybind11_state.get_all_operator_schema()``) for every input's position and shape.

- Products (DynamicQuantizeMatMul, MatMulIntegerToFloat, MatMulInteger16, QGemm): ``MACs = output elements × K``
  as :mod:`layerscope.costs.matmul`; FLOPs = 2 × MACs + the per-element epilogue: the int32 accumulator times
  the combined scale (1), a bias (1), a requantized output (:data:`REQUANT`); DynamicQuantizeMatMul also
  quantizes its float input A (:data:`DYNAMIC_QUANTIZE` per element of A).
- DynamicQuantizeLSTM: an LSTM (:func:`layerscope.costs.rnn.recurrent_counts`: per step 4·H·(I+H) MACs per
  direction per batch element) whose W is ``(directions, I, 4·H)`` and R ``(directions, H, 4·H)`` (int8, the
  transpose of ONNX LSTM's), plus per step the dynamic quantization of x_t and h_{t-1} and the dequantization
  of the two 4·H gate accumulators (assumption: ONNX Runtime quantizes X once for all steps; counted per step).
- QLinear element-wise ops: the op's float definition between a dequantization of each input
  (:data:`DEQUANTIZE`) and a quantization of the output (:data:`QUANTIZE`); ONNX Runtime runs 8-bit unary
  ones through a 256-entry lookup table, so these are upper bounds of its arithmetic.

Scales and zero points are settings, never params; the int8 weights and int32 biases are.
"""

from __future__ import annotations

import math

from layerscope.costs._common import (
    MS,
    CostFn,
    CostTable,
    attr_ints,
    has_input,
    in_elements,
    in_shape,
    layer_cost,
    out_elements,
    per_output_cost,
    scan_cost,
    table,
    tensor_only,
)
from layerscope.costs.elementwise import QUANTIZE, REQUANT, SIGMOID, UNARY_FLOPS
from layerscope.costs.matmul import matmul_k
from layerscope.costs.norm import SOFTMAX
from layerscope.costs.rnn import LEARNED, LSTM, RecurrentDims, recurrent_counts
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node

#: DequantizeLinear: (x - zero point)·scale = 2.
DEQUANTIZE = 2
#: DynamicQuantizeLinear, per element: a global min and max (2 compares) + QuantizeLinear's 5.
DYNAMIC_QUANTIZE = UNARY_FLOPS["DynamicQuantizeLinear"]
#: QLinearAdd/QLinearMul per output element: dequantize both inputs + the op + quantize.
QLINEAR_BINARY = 2 * DEQUANTIZE + 1 + QUANTIZE
#: QLinearSigmoid: dequantize + sigmoid + quantize.
QLINEAR_SIGMOID = DEQUANTIZE + SIGMOID + QUANTIZE
#: QLinearLeakyRelu: dequantize + compare and multiply + quantize.
QLINEAR_LEAKY_RELU = DEQUANTIZE + UNARY_FLOPS["LeakyRelu"] + QUANTIZE
#: QLinearSoftmax: dequantize + softmax + quantize.
QLINEAR_SOFTMAX = DEQUANTIZE + SOFTMAX + QUANTIZE
#: QLinearWhere: a select + requantization of the chosen value.
QLINEAR_WHERE = 1 + REQUANT


def _product(node: Node, graph: Graph, k: int, *, epilogue_per_output: int, quantized_inputs: int = 0,
             params_from: tuple[int, ...]) -> LayerCost:
    """A matrix product of ``output elements × k`` MACs, ``epilogue_per_output`` FLOPs per output element and
    :data:`DYNAMIC_QUANTIZE` per element of ``quantized_inputs`` (the elements quantized at run time)."""
    outputs = out_elements(node, graph)
    macs = outputs * k
    flops = 2 * macs + epilogue_per_output * outputs + DYNAMIC_QUANTIZE * quantized_inputs
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops, params_from=params_from)


@tensor_only
def _dynamic_quantize_matmul(node: Node, graph: Graph) -> LayerCost:
    """DynamicQuantizeMatMul(A float, B int8, b_scale, b_zero_point?, bias?): A quantized at run time, the
    accumulator scaled back to float (1), + bias (1)."""
    epilogue = 1 + (1 if has_input(node, 4) else 0)
    return _product(node, graph, matmul_k(in_shape(node, graph, 0)), epilogue_per_output=epilogue,
                    quantized_inputs=in_elements(node, graph, 0), params_from=(1, 4))


@tensor_only
def _matmul_integer_to_float(node: Node, graph: Graph) -> LayerCost:
    """MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?): scale (1) + bias (1)."""
    epilogue = 1 + (1 if has_input(node, 6) else 0)
    return _product(node, graph, matmul_k(in_shape(node, graph, 0)), epilogue_per_output=epilogue,
                    params_from=(0, 1, 6))


@tensor_only
def _matmul_integer16(node: Node, graph: Graph) -> LayerCost:
    """MatMulInteger16(A int16, B int16) -> int32: the product alone."""
    return _product(node, graph, matmul_k(in_shape(node, graph, 0)), epilogue_per_output=0, params_from=(0, 1))


def _qgemm(node: Node, graph: Graph) -> LayerCost:
    """QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?): A is (M, K) or (K, M) with transA;
    the accumulator is scaled (1, alpha folded in), C added (1), and requantized when y_scale is given
    (:data:`REQUANT`), else left in float."""
    a = in_shape(node, graph, 0)
    if len(a) != 2:
        raise LayerscopeError(f"layer {node.id!r}: QGemm input A of rank {len(a)}, expected 2")
    k = a[0] if node.attr("transA", 0) else a[1]
    epilogue = 1 + (1 if has_input(node, 6) else 0) + (REQUANT if has_input(node, 7) else 0)
    return _product(node, graph, k, epilogue_per_output=epilogue, params_from=(0, 3, 6))


def lstm_int8_dims(node: Node, graph: Graph) -> RecurrentDims:
    """DynamicQuantizeLSTM's dims: X is (seq, batch, I); W (directions, I, 4·H); R (directions, H, 4·H);
    H is ``hidden_size``, else R's dim 1."""
    x = in_shape(node, graph, 0)
    w = in_shape(node, graph, 1)
    r = in_shape(node, graph, 2)
    if len(x) != 3 or len(w) != 3 or len(r) != 3:
        raise LayerscopeError(f"layer {node.id!r} (DynamicQuantizeLSTM): X, W, R of ranks {len(x)}, {len(w)}, "
                              f"{len(r)}, expected 3, 3, 3")
    hidden = int(node.attr("hidden_size", 0)) or r[1]
    return RecurrentDims(seq_len=x[0], batch=x[1], directions=w[0], input_size=x[2], hidden=hidden)


def _dynamic_quantize_lstm(node: Node, graph: Graph) -> LayerCost:
    """DynamicQuantizeLSTM(X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?, W_scale, W_zero_point,
    R_scale, R_zero_point): an LSTM's MACs and FLOPs, plus per step, direction and batch element
    (I + H)·:data:`DYNAMIC_QUANTIZE` (quantize x_t and h_{t-1}) + 2·4·H·:data:`DEQUANTIZE` (the two gate
    accumulators). Params: W, R (int8), B, P."""
    d = lstm_int8_dims(node, graph)
    macs, flops = recurrent_counts(LSTM, d, peepholes=has_input(node, 7), bias=has_input(node, 3))
    steps = d.seq_len * d.directions * d.batch
    per_step = (d.input_size + d.hidden) * DYNAMIC_QUANTIZE + 2 * LSTM.gates * d.hidden * DEQUANTIZE
    return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops + per_step * steps, params_from=LEARNED)


@tensor_only
def _qlinear_binary(node: Node, graph: Graph) -> LayerCost:
    """QLinearAdd/QLinearMul(A, A_scale, A_zp?, B, B_scale, B_zp?, C_scale, C_zp?); a constant A or B is a
    learned tensor."""
    return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * QLINEAR_BINARY,
                      params_from=(0, 3))


def _qlinear_average_pool(node: Node, graph: Graph) -> LayerCost:
    """QLinearAveragePool(X, x_scale, x_zp, y_scale, y_zp?): per output, one add per window tap, a divide and a
    requantization (the integer sum is rescaled once)."""
    kernel = math.prod(attr_ints(node, "kernel_shape"))
    if not kernel:
        raise ValueError(f"layer {node.id!r} ({node.op_type}): no kernel_shape")
    return layer_cost(node, graph, UnitKind.AUX, flops=out_elements(node, graph) * (kernel + 1 + REQUANT),
                      params_from=())


@tensor_only
def _qlinear_concat(node: Node, graph: Graph) -> LayerCost:
    """QLinearConcat(Y_scale, Y_zp, X1, X1_scale, X1_zp, ...): a copy, each element requantized to Y's scale
    (assumption: ONNX Runtime copies an input whose scale and zero point equal Y's)."""
    return layer_cost(node, graph, UnitKind.MOVE, flops=out_elements(node, graph) * REQUANT, params_from=())


def _per_output(flops: int, unit: UnitKind = UnitKind.VECTOR, params_from: tuple[int, ...] = ()) -> CostFn:
    return per_output_cost(flops, unit, params_from=params_from)


COSTS: CostTable = {
    **table(("DynamicQuantizeMatMul",), _dynamic_quantize_matmul, MS),
    **table(("MatMulIntegerToFloat",), _matmul_integer_to_float, MS),
    **table(("MatMulInteger16",), _matmul_integer16, MS),
    **table(("QGemm",), _qgemm, MS),
    **table(("DynamicQuantizeLSTM",), _dynamic_quantize_lstm, MS),
    **table(("QLinearAdd", "QLinearMul"), _qlinear_binary, MS),
    **table(("QLinearSigmoid",), _per_output(QLINEAR_SIGMOID), MS),
    **table(("QLinearLeakyRelu",), _per_output(QLINEAR_LEAKY_RELU), MS),
    **table(("QLinearSoftmax",), _per_output(QLINEAR_SOFTMAX), MS),
    **table(("QLinearWhere",), _per_output(QLINEAR_WHERE), MS),
    # QLinearGlobalAveragePool: an add per input element; a divide and a requantization per output.
    **table(("QLinearGlobalAveragePool",), scan_cost(1, 1 + REQUANT, UnitKind.AUX, params_from=()), MS),
    # QLinearReduceMean: as QLinearGlobalAveragePool, over its axes.
    **table(("QLinearReduceMean",), scan_cost(1, 1 + REQUANT, UnitKind.VECTOR, params_from=()), MS),
    **table(("QLinearAveragePool",), _qlinear_average_pool, MS),
    **table(("QLinearConcat",), _qlinear_concat, MS),
    # com.microsoft QuantizeLinear/DequantizeLinear: the ONNX ops' arithmetic; a constant int8 input 0 of
    # DequantizeLinear is a learned weight.
    **table(("QuantizeLinear",), _per_output(QUANTIZE), MS),
    **table(("DequantizeLinear",), _per_output(DEQUANTIZE, params_from=(0,)), MS),
    # MulInteger(A, A_zp, B, B_zp?): subtract both zero points + multiply = 3.
    **table(("MulInteger",), _per_output(3, params_from=(0, 2)), MS),
    # ReduceSumInteger: one add per input element.
    **table(("ReduceSumInteger",), scan_cost(1, 0, UnitKind.VECTOR, params_from=()), MS),
}
