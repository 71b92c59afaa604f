"""Kernel sampling for the latency predictor (issue #18): single-kernel ONNX models, timed on a runtime.

A *kernel* is what the runtime runs as one node of its optimized graph (Conv+BatchNormalization+Relu become
one ``FusedConv``; MatMul+Add one ``Gemm``; elementwise chains stay separate nodes). Two sources of kernels:

- :func:`kernel_space`: generated models, one fusable group of source nodes each, per kernel family
  (:data:`FAMILIES`) over a configuration space (sizes, channels, kernel, stride, groups, dtype: fp32, fp16 for
  conv, matmul, elementwise, norm and layout, int8 QDQ convolutions, int8 matrix products in the forms
  quantization tools write, :data:`QUANT_MATMUL_FORMS`; recurrent layers over sequence length, input and hidden
  size and direction, fp32 LSTM / GRU / RNN and the int8 DynamicQuantizeLSTM; working sets from below L2 to past the
  last-level cache; depthwise and 5x5 / 7x7 convolutions, 1-D and transposed ones, channel counts off the NCHWc
  block; the activations ONNX Runtime fuses into a Conv, and the
  activation chains it runs as kernels of their own, :data:`ACTIVATION_CHAINS`; layout conversions), in a seeded
  random order interleaved across families so that any budget covers every family.
- :func:`model_kernels`: every distinct kernel of a user's model: the source layers each kernel of the runtime's
  graph covers (as the :class:`KernelRunner` given groups them: ONNX Runtime's optimized graph through
  :mod:`layerscope.measure.fusion`, OpenVINO's compiled model), extracted as a model of its own.

:func:`time_kernels` times them with a :class:`KernelRunner`'s bisect runner (a runtime package's, from
:meth:`layerscope.runtimes.base.OpenRuntime.kernel_runner` or :meth:`layerscope.runtimes.base.Runtime.runtime_record`;
by default one sample = one run after an untimed one) and the bisect cache (:class:`~layerscope.measure.differential
.SampleStore`, keyed by the model's bytes and the runner's identity), so that an interrupted sampling resumes
where it stopped, and stops starting new kernels when its ``budget_s`` is spent. A kernel's time is the
median of its samples (the P50 ``profile`` reports for a whole model) minus the runner's per-call overhead (the
same statistic for an empty model). :func:`time_models` times whole calibration models the same way: what a
kernel costs inside its model beyond its time alone is fitted to them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from layerscope.errors import LayerscopeError
from layerscope.measure.cuts import Cut
from layerscope.measure.differential import SampleStore
from layerscope.measure.runners import CommandRunner, DeviceCommandError, Job, Runner
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.tempdirs import scratch

#: The cut of a model timed whole (a kernel model, a call model, the overhead model): no prefix, nothing crossing.
_WHOLE = Cut(layers=0, outputs=(), crossing_bytes=0, breaks_fusion=False)
#: Kernel families, each with its own regressor; :func:`kernel_family` classifies a kernel's source ops.
FAMILIES = ("conv", "matmul", "pool", "elementwise", "concat", "resize", "norm", "movement", "layout", "recurrent")
#: Each family's ops, in precedence order: a kernel holding a recurrent layer is ``recurrent`` whatever else
#: ONNX Runtime ran inside it (the Concat / ConstantOfShape of its initial state).
_FAMILY_OPS: tuple[tuple[str, frozenset[str]], ...] = (
    ("recurrent", frozenset({"LSTM", "GRU", "RNN", "DynamicQuantizeLSTM"})),
    ("conv", frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"})),
    ("matmul", frozenset({"MatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "Einsum", "FusedMatMul",
                          "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm", "MatMulInteger16"})),
    ("pool", frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"})),
    ("norm", frozenset({"Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization",
                        "InstanceNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
                        "GroupNormalization", "LRN", "LpNormalization", "SkipLayerNormalization",
                        "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"})),
    ("resize", frozenset({"Resize", "Upsample"})),
    ("concat", frozenset({"Concat"})),
    ("layout", frozenset({"Transpose", "DepthToSpace", "SpaceToDepth"})),
    ("movement", frozenset({"Gather", "Slice", "Split", "Pad", "Tile", "Expand", "GatherElements", "ScatterND",
                            "Where", "ScatterElements", "Scatter", "GatherND"})),
)
#: Ops of the ``elementwise`` family (activations, arithmetic, casts, comparisons); a kernel of none of the
#: families' ops is ``other`` (ML ops, most contrib ops): no regressor was trained on anything like it.
ELEMENTWISE_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal", "Relu", "LeakyRelu", "PRelu",
    "Elu", "Selu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf", "Gelu", "FastGelu", "BiasGelu", "Clip",
    "Min", "Max", "Cast", "Equal", "Less", "Greater", "Not", "And", "Or", "Floor", "Ceil", "Round", "Sin", "Cos",
    "Softplus", "Mish", "QuickGelu", "Sign", "Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
    "DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "Shape", "Size"})
_OPSET = 17
#: Per-family seeds of the configuration space's shuffle (so a family's order does not depend on the others).
_SEED = 18


def kernel_family(op_types: Sequence[str]) -> str:
    """The family of a kernel whose source layers have ``op_types``: the first family (in :data:`_FAMILY_OPS`
    order) one of them belongs to; ``"elementwise"`` when all are :data:`ELEMENTWISE_OPS`; else ``"other"``
    (predicted by the roofline alone)."""
    present = set(op_types)
    for family, ops in _FAMILY_OPS:
        if present & ops:
            return family
    return "elementwise" if present <= ELEMENTWISE_OPS else "other"


@dataclass(frozen=True)
class KernelModel:
    """One kernel to time: its family, a label (configuration or source layers), the single-kernel model's
    bytes, and where its features come from: ``source`` (a model path) and ``layers`` (the source layer ids it
    covers) for a kernel of a user's model, loaded with ``shapes``; empty for a generated one (its features come
    from the model)."""

    family: str
    label: str
    model_bytes: bytes
    source: str = ""
    layers: tuple[str, ...] = ()
    #: The ``--shape`` overrides the source model was loaded with.
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    #: A generated kernel's place in its family's configuration space (:attr:`Config.params`); empty otherwise.
    config: tuple[tuple[str, Any], ...] = ()

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.model_bytes).hexdigest()


@dataclass(frozen=True)
class KernelTiming:
    """A kernel's measured time: the median of its samples (µs) minus the per-call ``overhead_us`` and minus
    ``boundary_us``; its samples; and whether they came from the cache.

    ``boundary_us``: the median time per run of the layout kernels the runtime ran at the kernel model's own
    boundary (ONNX Runtime's ReorderInput / ReorderOutput around a blocked NCHWc kernel: the runner's
    :meth:`~layerscope.measure.runners.Runner.boundary` against a model with none), 0 where the runner cannot
    see inside a run. Alone, a kernel pays them at every call; in its model a chain of blocked kernels shares
    one pair, which the prediction adds as kernels of their own. ``boundary_kernels`` and ``boundary_bytes``:
    how many there were and the bytes of the tensors they convert (0 when not known)."""

    kernel: KernelModel
    latency_us: float
    samples_us: tuple[float, ...]
    overhead_us: float
    cached: bool
    boundary_us: float = 0.0
    boundary_kernels: int = 0
    boundary_bytes: int = 0


# --------------------------------------------------------------------------------- generated kernels
#: The element types generated kernels come in (the ``dtype`` axis of the configuration space).
DTYPES: Mapping[str, tuple[int, type[np.floating[Any]]]] = {"fp32": (TensorProto.FLOAT, np.float32),
                                                            "fp16": (TensorProto.FLOAT16, np.float16)}


def _model(nodes: list[onnx.NodeProto], inputs: Sequence[tuple[str, Sequence[int]]], outputs: Sequence[str],
           inits: Mapping[str, np.ndarray], name: str, *, dtype: str = "fp32",
           typed_inits: Sequence[onnx.TensorProto] = (),
           index_inputs: Sequence[tuple[str, Sequence[int]]] = (),
           mask_inputs: Sequence[tuple[str, Sequence[int]]] = ()) -> onnx.ModelProto:
    """A one-kernel model: float ``inits`` cast to ``dtype``'s type, ``typed_inits`` as they are; after the float
    inputs, ``index_inputs`` (int64: indices, which the runner feeds in range, as the ops reading them say) and
    ``mask_inputs`` (bool)."""
    elem, np_type = DTYPES[dtype]
    graph = helper.make_graph(
        nodes, name,
        [*(helper.make_tensor_value_info(n, elem, list(s)) for n, s in inputs),
         *(helper.make_tensor_value_info(n, TensorProto.INT64, list(s)) for n, s in index_inputs),
         *(helper.make_tensor_value_info(n, TensorProto.BOOL, list(s)) for n, s in mask_inputs)],
        [helper.make_tensor_value_info(o, elem, None) for o in outputs],
        [*(numpy_helper.from_array(v.astype(np_type), k) for k, v in sorted(inits.items())), *typed_inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="layerscope")
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model).graph.output  # outputs declared with their shapes
    for out, full in zip(model.graph.output, inferred, strict=True):
        out.CopyFrom(full)
    return model


def _rng(label: str) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256(label.encode()).hexdigest()[:8], 16))


#: The activations ONNX Runtime's CPU provider fuses into the Conv before it (its ``FusedConv`` / NCHWc ``Conv``
#: ``activation`` attribute; checked on 1.32 by the tests): the conv space's ``act`` axis. SiLU after a Conv stays
#: a kernel of its own (QuickGelu): :data:`ACTIVATION_CHAINS` samples it. A HardSwish after a Conv is fused into
#: the NCHWc Conv inside a model, but not where its output is the model's output (a kernel timed alone): there it
#: runs as Conv, HardSigmoid and Mul; :data:`FUSED_HARDSIGMOID` samples its class.
CONV_ACTIVATIONS = ("relu", "none", "clip", "sigmoid")
#: The activation the conv space adds (:func:`_added_configs`) for the class of HardSwish (PP-LCNet's, MobileNetV3's),
#: which a kernel alone cannot run fused (:data:`CONV_ACTIVATIONS`): a HardSigmoid as MobileNetV3 writes it (alpha
#: 1/6, beta 0.5), fused into the Conv alone too. On ONNX Runtime 1.32 a depthwise NCHWc Conv with either fused
#: costs the same to within 5%: 1.4-1.6x one with a Relu or none at 56x56x64 and up, a few % over one with a Clip.
FUSED_HARDSIGMOID = "hardsigmoid"
#: Activation chains as models write them that ONNX Runtime runs as the work of one group of layers: ``silu``
#: x·sigmoid(x) (one QuickGelu), ``gelu`` the Erf form x·(1 + erf(x/√2))/2 (one Gelu), ``hardswish`` the op (two
#: kernels, HardSigmoid and Mul, both the one layer's). x·HardSigmoid(x) written out stays two layers and two
#: kernels (1.32): the elementwise space's single HardSigmoid and Mul sample it.
ACTIVATION_CHAINS = ("silu", "gelu", "hardswish")


def _act(nodes: list[onnx.NodeProto], x: str, act: str, inits: dict[str, np.ndarray] | None = None) -> str:
    """Append activation ``act`` (a :data:`CONV_ACTIVATIONS` or :data:`ACTIVATION_CHAINS` name, or
    :data:`FUSED_HARDSIGMOID`) on ``x``; its output's name (``x`` for ``none``). ``inits`` receives the chain's
    constants (GELU's)."""
    if act == "none":
        return x
    if act == "hardswish":
        nodes.append(helper.make_node("HardSwish", [x], ["a"]))
    elif act == FUSED_HARDSIGMOID:
        nodes.append(helper.make_node("HardSigmoid", [x], ["a"], alpha=1.0 / 6, beta=0.5))
    elif act == "silu":
        nodes.append(helper.make_node("Sigmoid", [x], ["s"]))
        nodes.append(helper.make_node("Mul", [x, "s"], ["a"]))
    elif act == "gelu":
        if inits is None:
            raise ValueError("the gelu chain needs its constants")
        inits.update({"sqrt2": np.array(math.sqrt(2.0)), "one": np.array(1.0), "half": np.array(0.5)})
        nodes += [helper.make_node("Div", [x, "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", [x, "p"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["a"])]
    else:
        nodes.append(helper.make_node("Relu" if act == "relu" else "Clip" if act == "clip" else "Sigmoid", [x], ["a"]))
    return "a"


def _tag(dtype: str) -> str:
    """The label suffix of a dtype (none for fp32: the labels, seeds and models of fp32 kernels predate it)."""
    if dtype not in DTYPES:
        raise ValueError(f"kernel dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    return "" if dtype == "fp32" else f" dtype={dtype}"


def conv_kernel(hw: int, cin: int, cout: int, *, k: int, stride: int, depthwise: bool, bn: bool,
                act: str, dtype: str = "fp32") -> KernelModel:
    """Conv (depthwise when ``depthwise``: groups = channels = ``cin``) [+BatchNormalization] [+activation], in
    ``dtype`` (:data:`DTYPES`)."""
    if depthwise:
        cout = cin
    groups = cin if depthwise else 1
    label = f"conv hw={hw} cin={cin} cout={cout} k={k} s={stride} g={groups} bn={int(bn)} act={act}{_tag(dtype)}"
    rng = _rng(label)
    inits = {"w": rng.standard_normal((cout, cin // groups, k, k)) * 0.1, "b": rng.standard_normal(cout)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[stride, stride],
                              pads=[k // 2] * 4, group=groups)]
    out = _bn_act(nodes, inits, "c", cout, bn=bn, act=act, rng=rng)
    return KernelModel("conv", label, _model(nodes, [("x", (1, cin, hw, hw))], [out], inits, "conv", dtype=dtype)
                       .SerializeToString())


def _bn_act(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], x: str, channels: int, *, bn: bool,
            act: str, rng: np.random.Generator) -> str:
    """Append [BatchNormalization over ``channels``] [+ activation ``act``] on ``x``; the output's name."""
    if bn:
        for n, v in (("scale", rng.random(channels) + 0.5), ("bias", rng.standard_normal(channels)),
                     ("mean", rng.standard_normal(channels) * 0.1), ("var", rng.random(channels) + 0.5)):
            inits[n] = v
        nodes.append(helper.make_node("BatchNormalization", [x, "scale", "bias", "mean", "var"], ["n"]))
        x = "n"
    return _act(nodes, x, act)


def conv1d_kernel(steps: int, cin: int, cout: int, *, k: int, stride: int, dilation: int, bn: bool,
                  act: str) -> KernelModel:
    """A 1-D Conv over ``steps`` (input [1, ``cin``, ``steps``]) [+BatchNormalization] [+activation], fp32: as audio,
    EEG and sequence models write it (ONNX Runtime runs it as im2col + GEMM, never as an NCHWc kernel). Stride 1:
    padded to keep the length ("same"); a stride > 1 (a learnt downsampling, ``k`` = ``stride`` as a rule):
    unpadded."""
    label = f"conv1d t={steps} cin={cin} cout={cout} k={k} s={stride} d={dilation} bn={int(bn)} act={act}"
    rng = _rng(label)
    inits = {"w": rng.standard_normal((cout, cin, k)) * 0.1, "b": rng.standard_normal(cout)}
    span = dilation * (k - 1)
    pads = [span // 2, span - span // 2] if stride == 1 else [0, 0]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k], strides=[stride],
                              dilations=[dilation], pads=pads)]
    out = _bn_act(nodes, inits, "c", cout, bn=bn, act=act, rng=rng)
    return KernelModel("conv", label, _model(nodes, [("x", (1, cin, steps))], [out], inits, "conv1d")
                       .SerializeToString())


def conv_transpose_kernel(size: int, cin: int, cout: int, *, k: int, stride: int, rank: int) -> KernelModel:
    """A ConvTranspose (a learnt upsampling by ``stride``) over ``rank`` (1 or 2) spatial dimensions of ``size``
    each (input [1, ``cin``, ``size``] or [1, ``cin``, ``size``, ``size``]), fp32, pads (``k`` - ``stride``) / 2 a
    side: the output is ``stride`` x ``size`` long (ONNX Runtime: a GEMM, then col2im)."""
    if rank not in (1, 2):
        raise ValueError(f"conv transpose rank {rank}: 1 or 2")
    label = f"convT{rank}d size={size} cin={cin} cout={cout} k={k} s={stride}"
    rng = _rng(label)
    inits = {"w": rng.standard_normal((cin, cout, *[k] * rank)) * 0.1, "b": rng.standard_normal(cout)}
    pad = (k - stride) // 2
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[k] * rank,
                              strides=[stride] * rank, pads=[pad] * (2 * rank))]
    return KernelModel("conv", label, _model(nodes, [("x", (1, cin, *[size] * rank))], ["y"], inits, "conv_transpose")
                       .SerializeToString())


def qdq_conv_kernel(hw: int, cin: int, cout: int, *, k: int, stride: int) -> KernelModel:
    """An int8 Conv in QDQ form, as quantization tools write it: QuantizeLinear -> DequantizeLinear on the
    activation, DequantizeLinear on int8 weights (int32 bias), Conv, QuantizeLinear -> DequantizeLinear on its
    output (ONNX Runtime runs a QLinearConv)."""
    label = f"conv hw={hw} cin={cin} cout={cout} k={k} s={stride} g=1 bn=0 act=none dtype=int8"
    rng = _rng(label)
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[k, k], strides=[stride, stride],
                              pads=[k // 2] * 4),
             helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    scale_x, scale_w = 0.02, 0.01
    inits = [
        numpy_helper.from_array(np.array(scale_x, dtype=np.float32), "sx"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "zx"),
        numpy_helper.from_array(rng.integers(-127, 128, (cout, cin, k, k)).astype(np.int8), "wq"),
        numpy_helper.from_array(np.array(scale_w, dtype=np.float32), "sw"),
        numpy_helper.from_array(np.array(0, dtype=np.int8), "zw"),
        numpy_helper.from_array(rng.integers(-1000, 1000, cout).astype(np.int32), "bq"),
        numpy_helper.from_array(np.array(scale_x * scale_w, dtype=np.float32), "sb"),
        numpy_helper.from_array(np.array(0, dtype=np.int32), "zb"),
        numpy_helper.from_array(np.array(0.05, dtype=np.float32), "sy"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "zy")]
    model = _model(nodes, [("x", (1, cin, hw, hw))], ["y"], {}, "qdq_conv", typed_inits=inits)
    return KernelModel("conv", label, model.SerializeToString())


def matmul_kernel(batch: int, m: int, k: int, n: int, *, bias: bool, weights: bool,
                  dtype: str = "fp32") -> KernelModel:
    """MatMul of ``[batch, m, k]`` by a ``[k, n]`` weight [+Add bias] (a Gemm / FusedMatMul in ORT), or by a
    second activation ``[batch, k, n]`` (attention's QK^T and AV) when not ``weights``; in ``dtype``."""
    label = f"matmul b={batch} m={m} k={k} n={n} bias={int(bias)} w={int(weights)}{_tag(dtype)}"
    rng = _rng(label)
    inits: dict[str, np.ndarray] = {}
    inputs: list[tuple[str, Sequence[int]]] = [("x", (batch, m, k))]
    if weights:
        inits["w"] = rng.standard_normal((k, n)) * 0.1
    else:
        inputs.append(("w", (batch, k, n)))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    out = "y"
    if bias:
        inits["b"] = rng.standard_normal(n)
        nodes.append(helper.make_node("Add", ["y", "b"], ["z"]))
        out = "z"
    return KernelModel("matmul", label, _model(nodes, inputs, [out], inits, "matmul", dtype=dtype).SerializeToString())


def pool_kernel(hw: int, c: int, kind: str, k: int, stride: int) -> KernelModel:
    """MaxPool / AveragePool (``k``, ``stride``) or GlobalAveragePool over ``[1, c, hw, hw]``."""
    label = f"pool hw={hw} c={c} {kind} k={k} s={stride}"
    if kind == "global":
        node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    else:
        node = helper.make_node("MaxPool" if kind == "max" else "AveragePool", ["x"], ["y"], kernel_shape=[k, k],
                                strides=[stride, stride], pads=[k // 2] * 4)
    return KernelModel("pool", label, _model([node], [("x", (1, c, hw, hw))], ["y"], {}, "pool").SerializeToString())


#: The element counts of the element-wise space's float kernels: 1 KiB to 64 MiB per fp32 tensor, working sets
#: below L1 to past the last-level cache.
ELEMENTWISE_COUNTS = (256, 1024, 4096, 16384, 65536, 262144, 1048576, 2097152, 4194304, 16777216)

#: A binary float op's second operand (:func:`elementwise_kernel`): ``tensor`` a second activation of the same
#: shape; ``scalar`` a constant of one value; ``channel`` a constant of one value per channel (``[1, C, 1, 1]``: a
#: folded scale or bias). Models add a scalar weight onto a feature map as often as a second map (a HardSwish
#: written out with Add/Mul constants, a re-parameterised block's scale): the constant is read once, not a second
#: map.
FLOAT_OPERANDS = ("tensor", "scalar", "channel")


def elementwise_kernel(elements: int, op: str, binary: bool, dtype: str = "fp32", operand: str = "tensor",
                       ) -> KernelModel:
    """One elementwise op over ``elements`` values shaped ``[1, c, h, w]``-like, in ``dtype``; a binary op's
    second operand per :data:`FLOAT_OPERANDS` (label suffix `` operand=scalar`` / `` operand=channel``)."""
    if operand not in FLOAT_OPERANDS or (operand != "tensor" and not binary):
        raise ValueError(f"element-wise operand {operand!r}: choose from {FLOAT_OPERANDS} (a binary op's)")
    shape = (1, max(1, elements // 256), 16, 16) if elements >= 256 else (1, elements)
    label = f"elementwise n={int(np.prod(shape))} {op}{_tag(dtype)}" + (
        f" operand={operand}" if operand != "tensor" else "")
    inputs: list[tuple[str, Sequence[int]]] = [("x", shape)]
    inits: dict[str, np.ndarray] = {}
    if binary:
        if operand == "tensor":
            inputs.append(("y", shape))
        else:
            inits["y"] = _rng(label).standard_normal(() if operand == "scalar" else (1, shape[1], 1, 1)[:len(shape)])
        node = helper.make_node(op, ["x", "y"], ["z"])
    else:
        node = helper.make_node(op, ["x"], ["z"])
    return KernelModel("elementwise", label, _model([node], inputs, ["z"], inits, "ew", dtype=dtype)
                       .SerializeToString())


def activation_kernel(elements: int, chain: str, dtype: str = "fp32") -> KernelModel:
    """An activation chain (:data:`ACTIVATION_CHAINS`) over ``elements`` values shaped as
    :func:`elementwise_kernel` shapes them, in ``dtype``: the ``elementwise`` family."""
    shape = (1, max(1, elements // 256), 16, 16) if elements >= 256 else (1, elements)
    label = f"elementwise n={int(np.prod(shape))} chain={chain}{_tag(dtype)}"
    nodes: list[onnx.NodeProto] = []
    inits: dict[str, np.ndarray] = {}
    out = _act(nodes, "x", chain, inits)
    return KernelModel("elementwise", label, _model(nodes, [("x", shape)], [out], inits, "act", dtype=dtype)
                       .SerializeToString())


def concat_kernel(hw: int, c: int, parts: int) -> KernelModel:
    """Concat of ``parts`` tensors ``[1, c, hw, hw]`` on the channel axis."""
    label = f"concat hw={hw} c={c} parts={parts}"
    names = [f"x{i}" for i in range(parts)]
    node = helper.make_node("Concat", names, ["y"], axis=1)
    return KernelModel("concat", label, _model([node], [(n, (1, c, hw, hw)) for n in names], ["y"], {},
                                                "concat").SerializeToString())


def resize_kernel(hw: int, c: int, mode: str) -> KernelModel:
    """Resize ``[1, c, hw, hw]`` by 2 (``nearest`` or ``linear``)."""
    label = f"resize hw={hw} c={c} {mode}"
    inits = {"scales": np.array([1, 1, 2, 2], dtype=np.float32)}
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)
    return KernelModel("resize", label, _model([node], [("x", (1, c, hw, hw))], ["y"], inits,
                                                "resize").SerializeToString())


#: What :func:`norm_kernel` normalises or reduces over the last axis of ``[1, rows, cols]``: ``softmax``,
#: ``layernorm``; ``skiplayernorm``: Add of a second activation then LayerNormalization (the residual pattern ONNX
#: Runtime fuses into one SkipLayerNormalization); ``reducemean``: ReduceMean keeping the axis (a decomposed
#: LayerNorm's mean, which the runtime runs as a kernel of its own when it does not fuse the chain).
NORM_KINDS = ("softmax", "layernorm", "skiplayernorm", "reducemean")


def norm_kernel(rows: int, cols: int, kind: str, dtype: str = "fp32") -> KernelModel:
    """A :data:`NORM_KINDS` kernel over the last axis of ``[1, rows, cols]``, in ``dtype`` (``int8``: a softmax in
    QDQ form, :func:`qdq_softmax_kernel`)."""
    if dtype == "int8":
        if kind != "softmax":
            raise ValueError(f"norm kind {kind!r} in int8: only softmax")
        return qdq_softmax_kernel(rows, cols)
    label = f"norm rows={rows} cols={cols} {kind}{_tag(dtype)}"
    inits: dict[str, np.ndarray] = {}
    inputs: list[tuple[str, Sequence[int]]] = [("x", (1, rows, cols))]
    nodes: list[onnx.NodeProto] = []
    if kind == "softmax":
        nodes.append(helper.make_node("Softmax", ["x"], ["y"], axis=-1))
    elif kind in ("layernorm", "skiplayernorm"):
        inits = {"g": np.ones(cols), "b": np.zeros(cols)}
        x = "x"
        if kind == "skiplayernorm":
            inputs.append(("skip", (1, rows, cols)))
            nodes.append(helper.make_node("Add", ["x", "skip"], ["s"]))
            x = "s"
        nodes.append(helper.make_node("LayerNormalization", [x, "g", "b"], ["y"], axis=-1))
    elif kind == "reducemean":
        nodes.append(helper.make_node("ReduceMean", ["x"], ["y"], axes=[-1], keepdims=1))
    else:
        raise ValueError(f"norm kind {kind!r}: choose from {', '.join(NORM_KINDS)}")
    return KernelModel("norm", label, _model(nodes, inputs, ["y"], inits, "norm", dtype=dtype).SerializeToString())


def attention_softmax_kernel(heads: int, tokens: int, dtype: str = "fp32") -> KernelModel:
    """Softmax over the last axis of attention scores ``[1, heads, tokens, tokens]``, in ``dtype``."""
    label = f"norm heads={heads} tokens={tokens} attention-softmax{_tag(dtype)}"
    node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
    return KernelModel("norm", label, _model([node], [("x", (1, heads, tokens, tokens))], ["y"], {}, "norm",
                                              dtype=dtype).SerializeToString())


def spatial_reduce_kernel(hw: int, c: int, op: str) -> KernelModel:
    """``op`` (ReduceMean, ReduceSum, ReduceMax) over the spatial axes of ``[1, c, hw, hw]``, keeping them: the
    squeeze of a squeeze-and-excitation block written as a reduction."""
    label = f"norm hw={hw} c={c} {op} axes=hw"
    node = helper.make_node(op, ["x"], ["y"], axes=[2, 3], keepdims=1)
    return KernelModel("norm", label, _model([node], [("x", (1, c, hw, hw))], ["y"], {}, "norm").SerializeToString())


def layout_kernel(hw: int, c: int, kind: str, dtype: str = "fp32") -> KernelModel:
    """A layout conversion of an activation: ``nchw2nhwc`` (Transpose [0, 2, 3, 1] of ``[1, c, hw, hw]``),
    ``nhwc2nchw`` (Transpose [0, 3, 1, 2] of ``[1, hw, hw, c]``), ``heads`` (attention's tokens-by-heads
    Transpose [0, 2, 1, 3] of ``[1, hw*hw // 16 tokens, 16 heads, c]``) or ``d2s`` (DepthToSpace by 2 of
    ``[1, 4c, hw/2, hw/2]``); in ``dtype``."""
    label = f"layout hw={hw} c={c} {kind}{_tag(dtype)}"
    if kind == "nchw2nhwc":
        shape: tuple[int, ...] = (1, c, hw, hw)
        node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])
    elif kind == "nhwc2nchw":
        shape = (1, hw, hw, c)
        node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 3, 1, 2])
    elif kind == "heads":
        shape = (1, max(1, hw * hw // 16), 16, c)
        node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])
    elif kind == "d2s":
        shape = (1, 4 * c, max(1, hw // 2), max(1, hw // 2))
        node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="DCR")
    else:
        raise ValueError(f"layout kind {kind!r}")
    return KernelModel("layout", label, _model([node], [("x", shape)], ["y"], {}, "layout", dtype=dtype)
                       .SerializeToString())


def movement_kernel(hw: int, c: int, kind: str) -> KernelModel:
    """Transpose (NCHW to NHWC) or a channel Slice (half the channels) of ``[1, c, hw, hw]`` (the Transpose is
    ``layout``'s now: :func:`layout_kernel`; kept for the kernels timed before)."""
    label = f"movement hw={hw} c={c} {kind}"
    inits: dict[str, np.ndarray] = {}
    if kind == "transpose":
        node = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])
    else:
        inits = {"st": np.array([0]), "en": np.array([c // 2]), "ax": np.array([1])}
        node = helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])
    model = _model([node], [("x", (1, c, hw, hw))], ["y"], {}, "movement")
    model.graph.initializer.extend(numpy_helper.from_array(v.astype(np.int64), k) for k, v in inits.items())
    return KernelModel("movement", label, model.SerializeToString())


#: The recurrent cells of the ``recurrent`` family: gates per hidden unit (the rows of W and R per direction).
RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
#: The ``recurrent`` space's largest kernel (MACs: gates·H·(I + H) per step and direction): past it one kernel
#: would take tens of ms per run, a second or more of the budget for one sample of 11.
_MAX_RECURRENT_MACS = 400_000_000


def recurrent_macs(seq: int, input_size: int, hidden: int, *, cell: str, bidirectional: bool) -> int:
    """A recurrent layer's multiply-accumulates at batch 1: gates·H·(I + H) per step, × seq × directions (as
    :func:`layerscope.costs.rnn.recurrent_counts` counts them, without peepholes)."""
    return RECURRENT_GATES[cell] * hidden * (input_size + hidden) * seq * (2 if bidirectional else 1)


def _io_model(nodes: list[onnx.NodeProto], inputs: Sequence[tuple[str, int, Sequence[int]]],
              outputs: Sequence[tuple[str, int, Sequence[int]]], inits: Sequence[onnx.TensorProto], name: str,
              *, contrib: bool = False) -> onnx.ModelProto:
    """A one-kernel model whose inputs and outputs are ``(name, element type, shape)`` as given (integer and
    float alike, output shapes declared: ONNX's shape inference does not know contrib ops); ``contrib`` imports
    the ``com.microsoft`` domain (ONNX Runtime's contrib ops)."""
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in outputs], list(inits))
    opsets = [helper.make_opsetid("", _OPSET), *([helper.make_opsetid("com.microsoft", 1)] if contrib else [])]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="layerscope")
    model.ir_version = 8
    return model


def recurrent_kernel(seq: int, input_size: int, hidden: int, *, cell: str, bidirectional: bool,
                     dtype: str = "fp32") -> KernelModel:
    """One recurrent layer over ``[seq, 1, input_size]`` (batch 1), ``hidden`` units, forward or
    ``bidirectional``, with a bias and zero initial states as PyTorch exports it (GRU ``linear_before_reset=1``):
    ``cell`` LSTM, GRU or RNN (:data:`RECURRENT_GATES`) in fp32; ``dtype="int8"`` (LSTM only) the
    ``com.microsoft`` DynamicQuantizeLSTM that ``onnxruntime.quantization.quantize_dynamic`` writes for an LSTM:
    int8 W ``[D, I, 4H]`` and R ``[D, H, 4H]`` (the transpose of ONNX LSTM's), a scale and int8 zero point per
    direction, float bias and states. Output: Y ``[seq, D, 1, hidden]``."""
    if cell not in RECURRENT_GATES:
        raise ValueError(f"recurrent cell {cell!r}: choose from {', '.join(RECURRENT_GATES)}")
    if dtype not in ("fp32", "int8") or (dtype == "int8" and cell != "LSTM"):
        raise ValueError(f"recurrent {cell} in {dtype}: fp32 cells, or an int8 LSTM (DynamicQuantizeLSTM)")
    dirs = 2 if bidirectional else 1
    gates = RECURRENT_GATES[cell]
    label = (f"recurrent {cell} seq={seq} in={input_size} h={hidden} dir={'bi' if bidirectional else 'fwd'}"
             + ("" if dtype == "fp32" else f" dtype={dtype}"))
    rng = _rng(label)
    attrs: dict[str, Any] = {"hidden_size": hidden, "direction": "bidirectional" if bidirectional else "forward"}
    state = np.zeros((dirs, 1, hidden), dtype=np.float32)
    bias = (rng.standard_normal((dirs, 2 * gates * hidden)) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(bias, "b"), numpy_helper.from_array(state, "h0")]
    if dtype == "int8":
        inits += [numpy_helper.from_array(rng.integers(-127, 128, (dirs, input_size, gates * hidden)).astype(np.int8),
                                          "w"),
                  numpy_helper.from_array(rng.integers(-127, 128, (dirs, hidden, gates * hidden)).astype(np.int8),
                                          "r"),
                  numpy_helper.from_array(state, "c0"),
                  numpy_helper.from_array(np.full(dirs, 0.002, dtype=np.float32), "ws"),
                  numpy_helper.from_array(np.zeros(dirs, dtype=np.int8), "wz"),
                  numpy_helper.from_array(np.full(dirs, 0.002, dtype=np.float32), "rs"),
                  numpy_helper.from_array(np.zeros(dirs, dtype=np.int8), "rz")]
        node = helper.make_node("DynamicQuantizeLSTM", ["x", "w", "r", "b", "", "h0", "c0", "", "ws", "wz", "rs", "rz"],
                                ["y"], domain="com.microsoft", **attrs)
    else:
        inits += [numpy_helper.from_array((rng.standard_normal((dirs, gates * hidden, input_size)) * 0.1)
                                          .astype(np.float32), "w"),
                  numpy_helper.from_array((rng.standard_normal((dirs, gates * hidden, hidden)) * 0.1)
                                          .astype(np.float32), "r")]
        states = ["h0"]
        if cell == "LSTM":
            inits.append(numpy_helper.from_array(state, "c0"))
            states.append("c0")
        if cell == "GRU":
            attrs["linear_before_reset"] = 1
        node = helper.make_node(cell, ["x", "w", "r", "b", "", *states], ["y"], **attrs)
    model = _io_model([node], [("x", TensorProto.FLOAT, (seq, 1, input_size))],
                      [("y", TensorProto.FLOAT, (seq, dirs, 1, hidden))], inits, "recurrent", contrib=dtype == "int8")
    return KernelModel("recurrent", label, model.SerializeToString())


#: The weight types of the integer products quantizers write: ``int8`` (``quantize_dynamic``'s default now) and
#: ``uint8`` (its former default, zero point 128: older int8 models). ONNX Runtime's kernels for the two differ by
#: up to 5x on one CPU (1.32: a ConvInteger with int8 weights 5x slower than with uint8 ones on AVX-512 VNNI).
INT8_WEIGHTS = ("int8", "uint8")


def _int8_weights(rng: np.random.Generator, shape: Sequence[int], weights: str, name: str, zero_name: str,
                  ) -> list[onnx.TensorProto]:
    """Random quantized weights of ``shape`` in ``weights`` (:data:`INT8_WEIGHTS`) named ``name``, and their zero
    point named ``zero_name`` (0 for int8, 128 for uint8)."""
    if weights not in INT8_WEIGHTS:
        raise ValueError(f"int8 weight type {weights!r}: choose from {', '.join(INT8_WEIGHTS)}")
    if weights == "uint8":
        values, zero = rng.integers(0, 256, tuple(shape)).astype(np.uint8), np.array(128, dtype=np.uint8)
    else:
        values, zero = rng.integers(-127, 128, tuple(shape)).astype(np.int8), np.array(0, dtype=np.int8)
    return [numpy_helper.from_array(values, name), numpy_helper.from_array(zero, zero_name)]


#: The int8 matrix products of the ``matmul`` space, as quantization tools write them (ONNX Runtime's kernel):
#: ``dynamic`` DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul by the scales (``quantize_dynamic``;
#: DynamicQuantizeMatMul), ``integer`` the same fed an activation quantized elsewhere (a DynamicQuantizeLinear
#: shared by several products: MatMulIntegerToFloat), ``qdq`` DequantizeLinear on uint8 activation and int8
#: weights -> MatMul -> QuantizeLinear (``quantize_static``'s QDQ format: QLinearMatMul).
QUANT_MATMUL_FORMS = ("dynamic", "integer", "qdq")


def quant_matmul_kernel(m: int, k: int, n: int, *, form: str, bias: bool, weights: str = "int8") -> KernelModel:
    """An int8 product of ``[1, m, k]`` by a ``[k, n]`` weight in ``weights`` (:data:`INT8_WEIGHTS`) [+ a bias] in
    ``form`` (:data:`QUANT_MATMUL_FORMS`): the ``matmul`` family, label ``... dtype=int8 form=FORM`` (`` wtype=uint8``
    after it for uint8 weights). The ``integer`` form's inputs are the quantized activation (uint8), its scale and
    zero point; ``qdq``'s a uint8 activation, its output uint8, and with a bias it is a Gemm of ``[m, k]`` whose
    int32 bias is dequantized (QGemm)."""
    if form not in QUANT_MATMUL_FORMS:
        raise ValueError(f"int8 matmul form {form!r}: choose from {', '.join(QUANT_MATMUL_FORMS)}")
    label = f"matmul b=1 m={m} k={k} n={n} bias={int(bias)} w=1 dtype=int8 form={form}"
    rng = _rng(label)
    if weights != "int8":  # int8 weights' labels, seeds and models predate the choice
        label += f" wtype={weights}"
        rng = _rng(label)
    scale_x, scale_w = 0.02, 0.01
    quantized = _int8_weights(rng, (k, n), weights, "wq", "zw")  # int8: the draw of the kernels timed before
    inits = [quantized[0], numpy_helper.from_array(np.array(scale_w, dtype=np.float32), "sw"), quantized[1]]
    x_shape: tuple[int, ...] = (1, m, k)
    out_shape: tuple[int, ...] = (1, m, n)
    nodes: list[onnx.NodeProto] = []
    if form == "qdq":
        inits += [numpy_helper.from_array(np.array(scale_x, dtype=np.float32), "sx"),
                  numpy_helper.from_array(np.array(128, dtype=np.uint8), "zx"),
                  numpy_helper.from_array(np.array(0.05, dtype=np.float32), "sy"),
                  numpy_helper.from_array(np.array(128, dtype=np.uint8), "zy")]
        nodes += [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
                  helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"])]
        if bias:  # a Gemm on [m, k], its int32 bias dequantized (QGemm)
            x_shape, out_shape = (m, k), (m, n)
            inits += [numpy_helper.from_array(rng.integers(-1000, 1000, n).astype(np.int32), "bq"),
                      numpy_helper.from_array(np.array(scale_x * scale_w, dtype=np.float32), "sb"),
                      numpy_helper.from_array(np.array(0, dtype=np.int32), "zb")]
            nodes += [helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
                      helper.make_node("Gemm", ["xd", "wd", "bd"], ["y"])]
        else:
            nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["y"]))
        nodes.append(helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["q"]))
        model = _io_model(nodes, [("xq", TensorProto.UINT8, x_shape)], [("q", TensorProto.UINT8, out_shape)],
                          inits, "qdq_matmul")
        return KernelModel("matmul", label, model.SerializeToString())
    inputs: list[tuple[str, int, Sequence[int]]]
    if form == "dynamic":
        nodes.append(helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "sx", "zx"]))
        inputs = [("x", TensorProto.FLOAT, x_shape)]
    else:
        inputs = [("xq", TensorProto.UINT8, x_shape), ("sx", TensorProto.FLOAT, ()), ("zx", TensorProto.UINT8, ())]
    nodes += [helper.make_node("MatMulInteger", ["xq", "wq", "zx", "zw"], ["acc"]),
              helper.make_node("Mul", ["sx", "sw"], ["scale"]),
              helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
              helper.make_node("Mul", ["accf", "scale"], ["y"])]
    out = "y"
    if bias:
        inits.append(numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), "b"))
        nodes.append(helper.make_node("Add", ["y", "b"], ["z"]))
        out = "z"
    model = _io_model(nodes, inputs, [(out, TensorProto.FLOAT, out_shape)], inits, "int8_matmul")
    return KernelModel("matmul", label, model.SerializeToString())


def conv_integer_kernel(hw: int, cin: int, cout: int, *, k: int, stride: int, weights: str) -> KernelModel:
    """A ConvInteger of a uint8 ``[1, cin, hw, hw]`` by ``[cout, cin, k, k]`` weights in ``weights``
    (:data:`INT8_WEIGHTS`), int32 out: ``quantize_dynamic``'s conv form, whose DynamicQuantizeLinear before it and
    Cast, Mul by the scale and bias Add after it ONNX Runtime runs as kernels of their own (so the activation and
    its zero point are the model's inputs here). The ``conv`` family, label ``... dtype=int8 form=integer
    wtype=WEIGHTS``."""
    label = (f"conv hw={hw} cin={cin} cout={cout} k={k} s={stride} g=1 bn=0 act=none dtype=int8 form=integer "
             f"wtype={weights}")
    rng = _rng(label)
    nodes = [helper.make_node("ConvInteger", ["xq", "w", "zx", "w_zp"], ["y"], kernel_shape=[k, k],
                              strides=[stride, stride], pads=[k // 2] * 4)]
    out_hw = (hw + 2 * (k // 2) - k) // stride + 1
    model = _io_model(nodes, [("xq", TensorProto.UINT8, (1, cin, hw, hw)), ("zx", TensorProto.UINT8, ())],
                      [("y", TensorProto.INT32, (1, cout, out_hw, out_hw))],
                      _int8_weights(rng, (cout, cin, k, k), weights, "w", "w_zp"), "conv_integer")
    return KernelModel("conv", label, model.SerializeToString())


#: The element-wise ops of the QDQ element-wise space (:func:`qdq_elementwise_kernel`): what ONNX Runtime runs on
#: the uint8 data as QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu (com.microsoft).
QDQ_ELEMENTWISE_OPS = ("Add", "Mul", "Sigmoid", "LeakyRelu")
#: A binary QDQ op's second operand: ``tensor`` a second activation of the same shape, ``const`` a constant over
#: the last two axes (a bias, a scale: 256 elements a run), both dequantized from uint8.
QDQ_OPERANDS = ("tensor", "const")


def qdq_elementwise_kernel(elements: int, op: str, *, operand: str = "tensor") -> KernelModel:
    """``op`` (:data:`QDQ_ELEMENTWISE_OPS`) in QDQ form, as ``quantize_static`` writes it: DequantizeLinear on each
    uint8 input -> ``op`` -> QuantizeLinear to uint8, over ``elements`` values shaped as :func:`elementwise_kernel`
    shapes them; a binary op's second operand per :data:`QDQ_OPERANDS`. The ``elementwise`` family, label
    ``elementwise n=N OP dtype=int8 form=qdq[ operand=const]``."""
    if op not in QDQ_ELEMENTWISE_OPS or operand not in QDQ_OPERANDS:
        raise ValueError(f"QDQ element-wise {op!r} / {operand!r}: choose from {QDQ_ELEMENTWISE_OPS}, {QDQ_OPERANDS}")
    shape = (1, max(1, elements // 256), 16, 16) if elements >= 256 else (1, elements)
    binary = op in ("Add", "Mul")
    label = (f"elementwise n={int(np.prod(shape))} {op} dtype=int8 form=qdq"
             + (" operand=const" if binary and operand == "const" else ""))
    rng = _rng(label)
    inits = [numpy_helper.from_array(np.array(0.02, dtype=np.float32), "sx"),
             numpy_helper.from_array(np.array(128, dtype=np.uint8), "zx"),
             numpy_helper.from_array(np.array(0.03, dtype=np.float32), "sy"),
             numpy_helper.from_array(np.array(128, dtype=np.uint8), "zy")]
    inputs: list[tuple[str, int, Sequence[int]]] = [("xq", TensorProto.UINT8, shape)]
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    args = ["xd"]
    if binary:
        if operand == "const":  # over the last two axes (256 elements: a hidden size's run)
            inits.append(numpy_helper.from_array(rng.integers(0, 256, shape[-2:]).astype(np.uint8), "bq"))
        else:
            inputs.append(("bq", TensorProto.UINT8, shape))
        inits += [numpy_helper.from_array(np.array(0.01, dtype=np.float32), "sb"),
                  numpy_helper.from_array(np.array(128, dtype=np.uint8), "zb")]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]))
        args.append("bd")
    main = helper.make_node(op, args, ["r"])
    if op == "LeakyRelu":
        main.attribute.append(helper.make_attribute("alpha", 0.1))
    nodes += [main, helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["y"])]
    model = _io_model(nodes, inputs, [("y", TensorProto.UINT8, shape)], inits, "qdq_ew")
    return KernelModel("elementwise", label, model.SerializeToString())


def qdq_softmax_kernel(rows: int, cols: int) -> KernelModel:
    """A Softmax over the last axis of a uint8 ``[1, rows, cols]`` in QDQ form: DequantizeLinear -> Softmax ->
    QuantizeLinear to uint8 of scale 1/256 (ONNX Runtime runs a QLinearSoftmax). The ``norm`` family, label
    ``norm rows=R cols=C softmax dtype=int8 form=qdq``."""
    label = f"norm rows={rows} cols={cols} softmax dtype=int8 form=qdq"
    inits = [numpy_helper.from_array(np.array(0.05, dtype=np.float32), "sx"),
             numpy_helper.from_array(np.array(128, dtype=np.uint8), "zx"),
             numpy_helper.from_array(np.array(1 / 256, dtype=np.float32), "sy"),
             numpy_helper.from_array(np.array(0, dtype=np.uint8), "zy")]
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("Softmax", ["xd"], ["r"], axis=-1),
             helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["y"])]
    shape = (1, rows, cols)
    model = _io_model(nodes, [("xq", TensorProto.UINT8, shape)], [("y", TensorProto.UINT8, shape)], inits,
                      "qdq_softmax")
    return KernelModel("norm", label, model.SerializeToString())


def qdq_batched_matmul_kernel(heads: int, m: int, k: int, n: int) -> KernelModel:
    """A product of two uint8 activations in QDQ form, ``[1, heads, m, k]`` by ``[1, heads, k, n]`` (attention's
    Q·Kᵀ and A·V; ``k`` or ``n`` 0: ``m``): DequantizeLinear on each -> MatMul -> QuantizeLinear (ONNX Runtime
    runs a QLinearMatMul). The ``matmul`` family, label ``matmul b=H m=M k=K n=N bias=0 w=0 dtype=int8
    form=qdq``."""
    k, n = k or m, n or m
    label = f"matmul b={heads} m={m} k={k} n={n} bias=0 w=0 dtype=int8 form=qdq"
    inits = [numpy_helper.from_array(np.array(0.05, dtype=np.float32), "sa"),
             numpy_helper.from_array(np.array(128, dtype=np.uint8), "za"),
             numpy_helper.from_array(np.array(0.04, dtype=np.float32), "sb"),
             numpy_helper.from_array(np.array(128, dtype=np.uint8), "zb"),
             numpy_helper.from_array(np.array(0.5, dtype=np.float32), "sy"),
             numpy_helper.from_array(np.array(128, dtype=np.uint8), "zy")]
    nodes = [helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["ad"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             helper.make_node("MatMul", ["ad", "bd"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["y"])]
    model = _io_model(nodes, [("aq", TensorProto.UINT8, (1, heads, m, k)), ("bq", TensorProto.UINT8, (1, heads, k, n))],
                      [("y", TensorProto.UINT8, (1, heads, m, n))], inits, "qdq_bmm")
    return KernelModel("matmul", label, model.SerializeToString())


def power_kernel(elements: int, exponent: float) -> KernelModel:
    """A float Pow of ``elements`` values (shaped as :func:`elementwise_kernel` shapes them) by a constant scalar
    ``exponent``: the ``elementwise`` family, label ``elementwise n=N Pow exponent=E``."""
    shape = (1, max(1, elements // 256), 16, 16) if elements >= 256 else (1, elements)
    label = f"elementwise n={int(np.prod(shape))} Pow exponent={exponent:g}"
    node = helper.make_node("Pow", ["x", "e"], ["z"])
    return KernelModel("elementwise", label, _model([node], [("x", shape)], ["z"], {"e": np.array(exponent)}, "pow")
                       .SerializeToString())


#: The QDQ Transposes of the ``layout`` space (:func:`qdq_transpose_kernel`): attention's ``heads`` ([0, 2, 1, 3] of
#: ``[1, tokens, heads, dim]``: tokens-by-heads to heads-by-tokens) and ``keys`` ([0, 1, 3, 2] of
#: ``[1, heads, tokens, dim]``: the keys transposed for Q·Kᵀ).
QDQ_TRANSPOSE_KINDS = ("heads", "keys")


def qdq_transpose_kernel(tokens: int, heads: int, dim: int, *, kind: str) -> KernelModel:
    """A Transpose (:data:`QDQ_TRANSPOSE_KINDS`) of uint8 data in QDQ form: DequantizeLinear -> Transpose ->
    QuantizeLinear, which ONNX Runtime runs as one uint8 Transpose (the pair dropped). The ``layout`` family, label
    ``layout tokens=T heads=H dim=D KIND dtype=int8 form=qdq``."""
    if kind not in QDQ_TRANSPOSE_KINDS:
        raise ValueError(f"QDQ transpose kind {kind!r}: choose from {', '.join(QDQ_TRANSPOSE_KINDS)}")
    shape, perm = ((1, tokens, heads, dim), [0, 2, 1, 3]) if kind == "heads" else ((1, heads, tokens, dim),
                                                                                  [0, 1, 3, 2])
    out_shape = tuple(shape[p] for p in perm)
    label = f"layout tokens={tokens} heads={heads} dim={dim} {kind} dtype=int8 form=qdq"
    inits = [numpy_helper.from_array(np.array(0.05, dtype=np.float32), "s"),
             numpy_helper.from_array(np.array(128, dtype=np.uint8), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Transpose", ["xd"], ["r"], perm=perm),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["y"])]
    model = _io_model(nodes, [("xq", TensorProto.UINT8, shape)], [("y", TensorProto.UINT8, out_shape)], inits,
                      "qdq_layout")
    return KernelModel("layout", label, model.SerializeToString())


def _int64(values: Sequence[int] | np.ndarray, name: str) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


#: Gathers of the ``movement`` space: ``rows`` (axis 0 of ``[rows, cols]``: embedding lookups, a graph network's
#: gather of node features by edge) and ``last`` (axis 1: an index select along the contiguous axis, one element
#: per index).
GATHER_KINDS = ("rows", "last")


#: Where a gather's or scatter's table comes from: ``input`` (an activation: a graph network's node features) or
#: ``const`` (an initializer, as exported models hold it: an embedding table a Gather looks rows up in; the zeros a
#: scatter sums into, ``torch.zeros(...).index_add_`` / ``scatter_add_`` exported as a ConstantOfShape that is
#: folded). The roofline counts a constant table as weight bytes, so the kernels' features differ by form.
TABLE_KINDS = ("input", "const")


def _table(rows: int, cols: int, table: str, label: str, *, zeros: bool,
           inner: tuple[int, ...] = ()) -> tuple[list[tuple[str, Sequence[int]]], dict[str, np.ndarray]]:
    """The ``x`` operand ``[rows, cols, *inner]`` of a gather or scatter (:data:`TABLE_KINDS`): a float input, or
    an initializer (zeros where ``zeros``, else seeded normal values)."""
    shape = (rows, cols, *inner)
    if table == "input":
        return [("x", shape)], {}
    if table != "const":
        raise ValueError(f"table kind {table!r}")
    return [], {"x": np.zeros(shape) if zeros else _rng(label).standard_normal(shape).astype(np.float32)}


def gather_kernel(rows: int, cols: int, n: int, kind: str, *, table: str = "input") -> KernelModel:
    """Gather ``n`` indices (an int64 input, fed in range) from ``[rows, cols]``: along axis 0 (``rows``: out
    ``[n, cols]``) or axis 1 (``last``: out ``[rows, n]``); the table an input or an initializer (``table``,
    :data:`TABLE_KINDS`: an embedding lookup). The ``movement`` family."""
    if kind not in GATHER_KINDS:
        raise ValueError(f"gather kind {kind!r}")
    label = f"movement gather rows={rows} cols={cols} n={n} {kind}{'' if table == 'input' else ' ' + table}"
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0 if kind == "rows" else 1)
    inputs, inits = _table(rows, cols, table, label, zeros=False)
    model = _model([node], inputs, ["y"], inits, "gather", index_inputs=[("i", (n,))])
    return KernelModel("movement", label, model.SerializeToString())


def gather_elements_kernel(rows: int, cols: int, n: int, *, inner: int = 1) -> KernelModel:
    """GatherElements along axis 0 of ``[rows, cols]`` (``inner`` > 1: ``[rows, cols, inner]``) with indices
    ``[n, cols(, inner)]`` (an int64 input fed in range: one index per element; ``torch.gather`` of node
    features by edge). The ``movement`` family."""
    tail = (inner,) if inner > 1 else ()
    label = f"movement gatherelements rows={rows} cols={cols} n={n}{f' inner={inner}' if tail else ''}"
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)
    model = _model([node], [("x", (rows, cols, *tail))], ["y"], {}, "gatherelements",
                   index_inputs=[("i", (n, cols, *tail))])
    return KernelModel("movement", label, model.SerializeToString())


def scatter_kernel(rows: int, cols: int, n: int, reduction: str, *, nd: bool = False, table: str = "input",
                   inner: int = 1) -> KernelModel:
    """Scatter ``n`` rows of updates ``[n, cols]`` into ``[rows, cols]``, indices an int64 input fed in range:
    ScatterElements along axis 0 (indices ``[n, cols]``: one index per element; a graph network's message sum
    with ``reduction`` ``add``) or, with ``nd``, ScatterND (indices ``[n, 1]``: one per row). ``inner`` > 1 adds a
    last axis to the table, updates and ScatterElements' indices (``[rows, cols, inner]``: an equivariant network's
    3-vectors per feature); ``table`` (:data:`TABLE_KINDS`) ``const``: the table a zero initializer (the form an
    exported ``zeros(...).scatter_add_`` runs in). The ``movement`` family."""
    tail = (inner,) if inner > 1 else ()
    label = (f"movement scatter{'nd' if nd else ''} rows={rows} cols={cols} n={n} {reduction}"
             f"{f' inner={inner}' if tail else ''}{'' if table == 'input' else ' ' + table}")
    if nd:
        node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
        indices: tuple[int, ...] = (n, 1)
    else:
        node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction=reduction)
        indices = (n, cols, *tail)
    inputs, inits = _table(rows, cols, table, label, zeros=True, inner=tail)
    model = _model([node], [*inputs, ("u", (n, cols, *tail))], ["y"], inits, "scatter",
                   index_inputs=[("i", indices)])
    return KernelModel("movement", label, model.SerializeToString())


#: Expands of the ``movement`` space, input -> output: ``col`` ``[rows, 1]`` -> ``[rows, cols]``, ``row``
#: ``[1, cols]`` -> ``[rows, cols]``, ``col3`` ``[rows, 1, 1]`` -> ``[rows, cols, 3]``, ``mid3`` ``[rows, 1, 3]``
#: -> ``[rows, cols, 3]`` (a vector per row repeated: a graph network's equivariant features).
EXPAND_KINDS = ("col", "row", "col3", "mid3")


def expand_kernel(rows: int, cols: int, kind: str) -> KernelModel:
    """Expand (:data:`EXPAND_KINDS`); the ``movement`` family."""
    shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
        "col": ((rows, 1), (rows, cols)), "row": ((1, cols), (rows, cols)),
        "col3": ((rows, 1, 1), (rows, cols, 3)), "mid3": ((rows, 1, 3), (rows, cols, 3))}
    if kind not in shapes:
        raise ValueError(f"expand kind {kind!r}")
    src, dst = shapes[kind]
    label = f"movement expand rows={rows} cols={cols} {kind}"
    node = helper.make_node("Expand", ["x", "shape"], ["y"])
    model = _model([node], [("x", src)], ["y"], {}, "expand", typed_inits=[_int64(dst, "shape")])
    return KernelModel("movement", label, model.SerializeToString())


def tile_kernel(rows: int, cols: int, reps: int, axis: int) -> KernelModel:
    """Tile ``[rows, cols]`` ``reps`` times along ``axis`` (0 or 1); the ``movement`` family."""
    label = f"movement tile rows={rows} cols={cols} reps={reps} axis={axis}"
    repeats = [reps, 1] if axis == 0 else [1, reps]
    node = helper.make_node("Tile", ["x", "r"], ["y"])
    model = _model([node], [("x", (rows, cols))], ["y"], {}, "tile", typed_inits=[_int64(repeats, "r")])
    return KernelModel("movement", label, model.SerializeToString())


def pad_kernel(rows: int, cols: int, kind: str) -> KernelModel:
    """Pad with zeros: ``spatial`` a ``[1, cols, rows, rows]`` map by 1 on each side of H and W (a convolution's
    explicit padding), ``seq`` a ``[1, rows, cols]`` sequence by ``rows // 8 + 1`` steps before its first (a
    causal convolution's left context); the ``movement`` family."""
    label = f"movement pad rows={rows} cols={cols} {kind}"
    if kind == "spatial":
        shape: tuple[int, ...] = (1, cols, rows, rows)
        pads = [0, 0, 1, 1, 0, 0, 1, 1]
    elif kind == "seq":
        shape = (1, rows, cols)
        pads = [0, rows // 8 + 1, 0, 0, 0, 0]
    else:
        raise ValueError(f"pad kind {kind!r}")
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode="constant")
    model = _model([node], [("x", shape)], ["y"], {}, "pad", typed_inits=[_int64(pads, "p")])
    return KernelModel("movement", label, model.SerializeToString())


#: Slices of the ``movement`` space: ``third`` the middle third of ``[rows, 3 * cols]``'s last axis (a fused
#: projection split three ways), ``mid`` the first half of axis 1 of ``[rows, cols, 3]``, ``step2`` every other
#: element of ``[rows, cols]``'s last axis.
SLICE_KINDS = ("third", "mid", "step2")


def slice_kernel(rows: int, cols: int, kind: str) -> KernelModel:
    """Slice (:data:`SLICE_KINDS`); the ``movement`` family."""
    if kind == "third":
        shape: tuple[int, ...] = (rows, 3 * cols)
        starts, ends, axes, steps = [cols], [2 * cols], [1], [1]
    elif kind == "mid":
        shape = (rows, cols, 3)
        starts, ends, axes, steps = [0], [max(1, cols // 2)], [1], [1]
    elif kind == "step2":
        shape = (rows, cols)
        starts, ends, axes, steps = [0], [cols], [1], [2]
    else:
        raise ValueError(f"slice kind {kind!r}")
    label = f"movement slice rows={rows} cols={cols} {kind}"
    node = helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])
    consts = [_int64(starts, "st"), _int64(ends, "en"), _int64(axes, "ax"), _int64(steps, "sp")]
    model = _model([node], [("x", shape)], ["y"], {}, "slice", typed_inits=consts)
    return KernelModel("movement", label, model.SerializeToString())


#: Where of the ``movement`` space: ``same`` a ``[rows, cols]`` mask choosing between ``[rows, cols]`` and a scalar,
#: ``mask`` a ``[1, cols]`` mask broadcast over ``[rows, cols]`` (attention's padding mask over its scores).
WHERE_KINDS = ("same", "mask")


def where_kernel(rows: int, cols: int, kind: str) -> KernelModel:
    """Where(mask, x, 0) (:data:`WHERE_KINDS`; the mask a bool input); the ``movement`` family."""
    if kind not in WHERE_KINDS:
        raise ValueError(f"where kind {kind!r}")
    label = f"movement where rows={rows} cols={cols} {kind}"
    node = helper.make_node("Where", ["m", "x", "zero"], ["y"])
    model = _model([node], [("x", (rows, cols))], ["y"], {"zero": np.array(0.0)}, "where",
                   mask_inputs=[("m", (rows, cols) if kind == "same" else (1, cols))])
    return KernelModel("movement", label, model.SerializeToString())


def short_reduce_kernel(rows: int, cols: int, inner: int, op: str) -> KernelModel:
    """``op`` (ReduceL2, ReduceSum) over the short last axis of ``[rows, cols, inner]`` (the norm of a 3-vector
    per feature: an equivariant graph network's), keepdims 0; the ``norm`` family."""
    label = f"norm reduce rows={rows} cols={cols} inner={inner} {op}"
    if op == "ReduceSum":  # its axes an input from opset 13, the others' from 18 (the space's opset is 17)
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
        consts = [_int64([-1], "axes")]
    else:
        node = helper.make_node(op, ["x"], ["y"], keepdims=0, axes=[-1])
        consts = []
    model = _model([node], [("x", (rows, cols, inner))], ["y"], {}, "reduce", typed_inits=consts)
    return KernelModel("norm", label, model.SerializeToString())


#: Broadcasting binary ops of the ``elementwise`` space, ``a`` op ``b`` -> out: ``col`` ``[rows, cols]`` x
#: ``[rows, 1]``, ``row`` ``[rows, cols]`` + ``[cols]`` (a bias), ``outer`` ``[rows, 1]`` x ``[1, cols]``,
#: ``inner3`` ``[rows, cols, 1]`` x ``[rows, cols, 3]``, ``cross3`` ``[rows, cols, 1]`` x ``[rows, 1, 3]``,
#: ``vec3`` ``[rows, cols, 3]`` x ``[3]``, ``same3`` ``[rows, cols, 3]`` + ``[rows, cols, 3]`` (3-D, no
#: broadcast), ``scalar`` ``[rows, cols]`` x a scalar input.
BROADCAST_KINDS = ("col", "row", "outer", "inner3", "cross3", "vec3", "same3", "scalar")


def broadcast_kernel(rows: int, cols: int, kind: str, dtype: str = "fp32") -> KernelModel:
    """A binary op whose inputs broadcast (:data:`BROADCAST_KINDS`; Mul, Add for ``row`` and ``same3``), both
    inputs activations, in ``dtype``; the ``elementwise`` family."""
    shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
        "col": ((rows, cols), (rows, 1)), "row": ((rows, cols), (cols,)), "outer": ((rows, 1), (1, cols)),
        "inner3": ((rows, cols, 1), (rows, cols, 3)), "cross3": ((rows, cols, 1), (rows, 1, 3)),
        "vec3": ((rows, cols, 3), (3,)), "same3": ((rows, cols, 3), (rows, cols, 3)), "scalar": ((rows, cols), ())}
    if kind not in shapes:
        raise ValueError(f"broadcast kind {kind!r}")
    op = "Add" if kind in ("row", "same3") else "Mul"
    a, b = shapes[kind]
    label = f"elementwise broadcast rows={rows} cols={cols} {kind} {op}{_tag(dtype)}"
    node = helper.make_node(op, ["x", "y"], ["z"])
    model = _model([node], [("x", a), ("y", b)], ["z"], {}, "bcast", dtype=dtype)
    return KernelModel("elementwise", label, model.SerializeToString())


#: Transposes of sequence tensors in the ``layout`` space: of ``[batch, steps, chans]`` ``swap12`` perm
#: [0, 2, 1] (one axis moved: ONNX Runtime's single-axis path), ``swap01`` [1, 0, 2] (rows of ``chans`` copied
#: whole), ``rev`` [2, 1, 0] (element by element); ``unit4`` perm [0, 3, 2, 1] of ``[1, 1, steps, chans]`` (a
#: 1-D convolution written over 4-D maps: two axes swapped past a unit one, element by element).
TRANSPOSE_KINDS = ("swap12", "swap01", "rev", "unit4")


def transpose_kernel(batch: int, steps: int, chans: int, kind: str, dtype: str = "fp32") -> KernelModel:
    """A Transpose of a sequence tensor (:data:`TRANSPOSE_KINDS`; ``unit4`` ignores ``batch``), in ``dtype``; the
    ``layout`` family."""
    perms = {"swap12": [0, 2, 1], "swap01": [1, 0, 2], "rev": [2, 1, 0], "unit4": [0, 3, 2, 1]}
    if kind not in perms:
        raise ValueError(f"transpose kind {kind!r}")
    shape = (1, 1, steps, chans) if kind == "unit4" else (batch, steps, chans)
    label = f"layout transpose b={batch} t={steps} c={chans} {kind}{_tag(dtype)}"
    node = helper.make_node("Transpose", ["x"], ["y"], perm=perms[kind])
    return KernelModel("layout", label, _model([node], [("x", shape)], ["y"], {}, "transpose", dtype=dtype)
                       .SerializeToString())


#: Concats of the ``concat`` space beyond 4-D channel ones: ``feat`` ``parts`` feature blocks of ``[rows, w]``
#: along the last axis, widths cycling ``cols``, ``cols // 4``, 1 (a graph network's or tabular model's
#: feature vector); ``time`` ``[1, rows_i, cols]`` along axis 1 (a sequence's context frames: rows split
#: unevenly); ``chan`` ``[1, rows, cols]`` along the last axis (heads or branches joined).
CONCAT_KINDS = ("feat", "time", "chan")


def concat_nd_kernel(rows: int, cols: int, parts: int, kind: str) -> KernelModel:
    """Concat of ``parts`` 2-D / 3-D inputs (:data:`CONCAT_KINDS`); the ``concat`` family."""
    if kind == "feat":
        widths = [(cols, max(1, cols // 4), 1)[i % 3] for i in range(parts)]
        shapes: list[tuple[int, ...]] = [(rows, w) for w in widths]
        axis = -1
    elif kind == "time":
        shapes = [(1, max(1, rows // (2 ** min(i, 3))), cols) for i in range(parts)]
        axis = 1
    elif kind == "chan":
        shapes = [(1, rows, cols) for _ in range(parts)]
        axis = -1
    else:
        raise ValueError(f"concat kind {kind!r}")
    label = f"concat nd rows={rows} cols={cols} parts={parts} {kind}"
    names = [f"x{i}" for i in range(parts)]
    node = helper.make_node("Concat", names, ["y"], axis=axis)
    return KernelModel("concat", label, _model([node], list(zip(names, shapes, strict=True)), ["y"], {}, "concat")
                       .SerializeToString())


def _configs(family: str) -> list[Callable[[], KernelModel]]:
    """Every configuration of ``family``'s space (unordered), each a function that builds its model (building
    all of them up front would cost seconds and gigabytes of random weights)."""
    out: list[Callable[[], KernelModel]] = []
    sizes, chans = (7, 14, 28, 56, 112), (16, 32, 64, 128, 256)
    rows = (16, 256, 2048, 16384)  # 2-D / 3-D tensors' leading extent: tokens, nodes, edges
    if family == "conv":
        for hw, cin, k, s, act in itertools.product(sizes, chans, (1, 3, 5, 7), (1, 2), CONV_ACTIVATIONS):
            out.append(partial(conv_kernel, hw, cin, cin, k=k, stride=s, depthwise=True, bn=True, act=act))
            out += [partial(conv_kernel, hw, cin, cout, k=k, stride=s, depthwise=False, bn=act != "none", act=act)
                    for cout in chans]
            if act == "none":  # int8: the QDQ form quantization tools write
                out.append(partial(qdq_conv_kernel, hw, cin, cin, k=k, stride=s))
            # fp16: plain and depthwise, with no activation or a Relu
            if act in ("relu", "none"):
                out.append(partial(conv_kernel, hw, cin, cin, k=k, stride=s, depthwise=True, bn=True, act=act,
                                   dtype="fp16"))
                out.append(partial(conv_kernel, hw, cin, 2 * cin, k=k, stride=s, depthwise=False, bn=act != "none",
                                   act=act, dtype="fp16"))
        # large maps, few channels: working sets of 3 to 26 MB, between L2 and the last-level cache
        out += [partial(conv_kernel, 224, cin, cout, k=k, stride=s, depthwise=dw, bn=True, act="relu")
                for cin, cout, k, s, dw in itertools.product((16, 32, 64), (16, 32, 64), (1, 3, 5), (1, 2),
                                                             (False, True)) if not dw or cin == cout]
    elif family == "matmul":
        for b, m, k, n in itertools.product((1, 4, 8), (1, 16, 64, 128, 256, 512), (64, 128, 256, 512, 1024),
                                            (64, 128, 256, 512, 1024)):
            out += [partial(matmul_kernel, 1, b * m, k, n, bias=True, weights=True),
                    partial(matmul_kernel, b, m, k, n, bias=False, weights=False)]
            if n == k:
                out.append(partial(matmul_kernel, 1, b * m, k, n, bias=True, weights=True, dtype="fp16"))
        # weights past the last-level cache (8 to 64 MiB fp32)
        out += [partial(matmul_kernel, 1, m, k, n, bias=True, weights=True)
                for m, k, n in itertools.product((1, 16, 128), (2048, 4096), (1024, 2048, 4096))]
    elif family == "pool":
        out = [partial(pool_kernel, hw, c, kind, k, s) for hw, c, kind, k, s in
               itertools.product(sizes, chans, ("max", "avg", "global"), (2, 3, 5), (1, 2))
               if kind != "global" or (k, s) == (2, 1)]
    elif family == "elementwise":
        out = [partial(elementwise_kernel, n, op, op in ("Add", "Mul"), dtype) for n, op, dtype in
               itertools.product(ELEMENTWISE_COUNTS,
                                 ("Add", "Mul", "Relu", "Sigmoid", "HardSigmoid", "Tanh", "Erf", "Clip"), DTYPES)]
        out += [partial(activation_kernel, n, chain, dtype)
                for n, chain, dtype in itertools.product(ELEMENTWISE_COUNTS, ACTIVATION_CHAINS, DTYPES)]
        # broadcasting over 2-D / 3-D tensors, up to 16 M output elements
        out += [partial(broadcast_kernel, r, c, kind) for r, c, kind in
                itertools.product(rows, (8, 64, 128, 384, 1024), BROADCAST_KINDS)
                if r * c * (3 if kind.endswith("3") else 1) <= 1 << 24]
    elif family == "concat":
        out = [partial(concat_kernel, hw, c, p) for hw, c, p in itertools.product(sizes, chans, (2, 3, 4))]
        out += [partial(concat_nd_kernel, r, c, p, kind) for r, c, p, kind in
                itertools.product(rows, (16, 128, 384), (2, 4, 8), CONCAT_KINDS) if r * c * p <= 1 << 24]
    elif family == "resize":
        out = [partial(resize_kernel, hw, c, mode) for hw, c, mode in itertools.product(sizes, chans,
                                                                                         ("nearest", "linear"))]
    elif family == "norm":
        norm_rows, norm_cols = (1, 16, 64, 128, 256, 1024, 4096), (32, 64, 128, 256, 384, 768, 1024)
        out = [partial(norm_kernel, r, c, kind, dtype) for r, c, kind, dtype in
               itertools.product(norm_rows, norm_cols, ("softmax", "layernorm"), DTYPES)]
        # what real models run besides: the residual Add + LayerNorm, a decomposed LayerNorm's ReduceMean,
        # attention scores' softmax, a classifier's softmax over a vocabulary, and spatial reductions
        out += [partial(norm_kernel, r, c, kind) for r, c, kind in
                itertools.product(norm_rows, norm_cols, ("skiplayernorm", "reducemean"))]
        out += [partial(attention_softmax_kernel, h, t) for h, t in
                itertools.product((2, 4, 8, 12, 16), (16, 32, 64, 128, 256, 512))]
        out += [partial(norm_kernel, r, c, "softmax") for r, c in
                itertools.product((1, 16, 40, 128), (2048, 4096, 8192, 16384, 32768))]
        out += [partial(spatial_reduce_kernel, hw, c, op) for hw, c, op in
                itertools.product(sizes, (*chans, 512), ("ReduceMean", "ReduceMax"))]
        out += [partial(short_reduce_kernel, r, c, inner, op) for r, c, inner, op in
                itertools.product((16, 256, 2048), (16, 128), (3, 8), ("ReduceL2", "ReduceSum"))]
    elif family == "movement":
        out = [partial(movement_kernel, hw, c, "slice") for hw, c in itertools.product(sizes, chans)]
        out += _movement_configs(rows)
    elif family == "layout":
        out = [partial(layout_kernel, hw, c, kind, dtype) for hw, c, kind, dtype in
               itertools.product((*sizes, 224), chans, ("nchw2nhwc", "nhwc2nchw", "heads", "d2s"), DTYPES)]
        out += [partial(transpose_kernel, b, t, c, kind) for b, t, c, kind in
                itertools.product((1, 8, 64), (16, 100, 512), (64, 128, 512), TRANSPOSE_KINDS)
                if kind != "unit4" or b == 1]
    elif family == "recurrent":
        # one step (a streaming model's call) to 512; LSTM, GRU and the int8 LSTM both ways, RNN (rare) forward;
        # up to _MAX_RECURRENT_MACS
        for seq, size, hidden, bi, (cell, dtype) in itertools.product(
                (1, 16, 64, 256, 512), (32, 128, 512), (32, 128, 512), (False, True),
                (("LSTM", "fp32"), ("GRU", "fp32"), ("RNN", "fp32"), ("LSTM", "int8"))):
            if (cell != "RNN" or not bi) and recurrent_macs(seq, size, hidden, cell=cell,
                                                            bidirectional=bi) <= _MAX_RECURRENT_MACS:
                out.append(partial(recurrent_kernel, seq, size, hidden, cell=cell, bidirectional=bi, dtype=dtype))
    return out


def _added_configs(family: str) -> list[Callable[[], KernelModel]]:
    """Configurations added to ``family``'s space after kernels of it were timed and cached (predictor version
    5: the int8 matrix products of :data:`QUANT_MATMUL_FORMS`; then the movement and concat forms of
    :func:`_added_movement_configs`, :func:`_added_concat_configs`): :func:`family_configs` spreads them through
    the family's order without moving the earlier ones, so that a cache walked before is walked in the same
    order."""
    if family == "movement":
        return _added_movement_configs()
    if family == "concat":
        return _added_concat_configs()
    if family != "matmul":
        return []
    # with a bias, as quantizers write a linear layer; without one, square weights
    sizes = (64, 256, 512, 1024, 2048)
    out: list[Callable[[], KernelModel]] = [
        partial(quant_matmul_kernel, m, k, n, form=form, bias=bias) for m, k, n, form, bias in
        itertools.product((1, 16, 64, 256), sizes, sizes, QUANT_MATMUL_FORMS, (True, False)) if bias or k == n]
    # int8 weights of 4 to 32 MiB, up to past the last-level cache (a recogniser's vocabulary projection)
    out += [partial(quant_matmul_kernel, m, k, n, form=form, bias=True) for m, k, n, form in
            itertools.product((1, 16, 64), (1024, 4096), (4096, 8192), QUANT_MATMUL_FORMS)]
    return out


#: The added convolutions' (:func:`_added_conv_configs`) largest multiply-accumulates: a 1-D conv of 128 channels,
#: kernel 3, over 8 K steps (~10 ms on one core), as EEG / audio U-Nets run at full resolution.
_MAX_ADDED_CONV_MACS = 420_000_000


def _added_conv_configs() -> list[Callable[[], KernelModel]]:
    """The ``conv`` space's configurations of predictor version 6 (fp32, up to :data:`_MAX_ADDED_CONV_MACS`):

    - 1-D convolutions as audio, EEG and sequence models run them (ONNX Runtime: im2col + GEMM, where the 2-D ones
      above run as NCHWc kernels): 16 to 256 channels over 256 to 8 K steps, kernels 1 to 31; dilated ones
      (dilation 2 to 1024, a temporal-convolution stack); learnt downsamplings (kernel = stride 2 to 5); few input
      channels (a raw signal: 1 to 8) under kernels of 7 to 64; a short-time Fourier transform as audio front ends
      export it (one input channel, a window of 256 to 512 samples as the kernel, ``window / 2 + 1`` output
      channels, a hop of 64 to 160 as the stride);
    - ConvTranspose, 1-D and 2-D learnt upsamplings (kernel = stride, and kernel 4 stride 2);
    - 2-D convolutions and depthwise ones whose channel counts are not multiples of the NCHWc block (20, 24, 40,
      51, 100, 200; and 1 or 3 input channels): the NCHWc transformer pads them to the block (``log_nchwc_pad*``
      features: :func:`~layerscope.analysis.predictor.nchwc_pad_ratio`)."""
    steps = (256, 1024, 4096, 8192)
    one_d = [(t, cin, cout, k, 1, 1, act) for t, (cin, cout), k, act in
             itertools.product(steps, ((16, 16), (16, 128), (64, 64), (128, 128), (128, 64), (256, 256)),
                               (1, 3, 5, 9, 31), ("none", "relu")) if act == "none" or k <= 3]
    one_d += [(t, c, c, 3, 1, d, "none") for t, c, d in itertools.product((1024, 8192), (64, 128), (2, 16, 128, 1024))]
    one_d += [(t, cin, cout, s, s, 1, "relu") for t, (cin, cout), s in
              itertools.product((1024, 8192), ((16, 16), (64, 51), (128, 128)), (2, 4, 5))]
    one_d += [(t, cin, cout, k, 1, 1, "relu") for t, cin, cout, k in
              itertools.product((1024, 8192), (1, 2, 8), (16, 64), (7, 31, 64))]
    one_d += [(t, 1, k // 2 + 1, k, s, 1, "none") for t, k, s in itertools.product((1280, 16000), (256, 400, 512),
                                                                                     (64, 160))]
    out: list[Callable[[], KernelModel]] = [
        partial(conv1d_kernel, t, cin, cout, k=k, stride=s, dilation=d, bn=False, act=act)
        for t, cin, cout, k, s, d, act in one_d if t // s * cin * cout * k <= _MAX_ADDED_CONV_MACS]
    out += [partial(conv_transpose_kernel, size, cin, cout, k=k, stride=s, rank=1) for size, (cin, cout), (k, s) in
            itertools.product((32, 256, 1500), ((16, 16), (51, 64), (128, 128), (128, 64)), ((2, 2), (5, 5), (4, 2)))]
    out += [partial(conv_transpose_kernel, size, cin, cout, k=k, stride=s, rank=2) for size, (cin, cout), (k, s) in
            itertools.product((14, 28, 56), ((16, 16), (64, 32), (128, 64), (256, 128)), ((2, 2), (4, 2)))
            if (size * s) ** 2 * cin * cout * (k // s) ** 2 <= _MAX_ADDED_CONV_MACS]
    out += [partial(conv_kernel, hw, cin, cout, k=k, stride=1, depthwise=False, bn=True, act="relu")
            for hw, (cin, cout), k in
            itertools.product((14, 28, 56), ((1, 20), (3, 24), (20, 20), (24, 40), (40, 40), (51, 51), (100, 100),
                                             (20, 200)), (1, 3, 5))
            if hw * hw * cin * cout * k * k <= _MAX_ADDED_CONV_MACS]
    out += [partial(conv_kernel, hw, c, c, k=3, stride=s, depthwise=True, bn=True, act="relu")
            for hw, c, s in itertools.product((28, 56, 112), (20, 40, 72, 100), (1, 2))]
    return out


#: The most multiply-accumulates of a ConvInteger in the conv space (:func:`_added_configs_6`) by weight type: its
#: int8-weight kernel runs at ~7 GMAC/s on one core (ONNX Runtime 1.32, AVX-512 VNNI), its uint8 one at ~60: at
#: most ~30 ms a run either way.
_MAX_CONV_INTEGER_MACS = {"int8": 200_000_000, "uint8": 1_000_000_000}


def _added_configs_7(family: str) -> list[Callable[[], KernelModel]]:
    """Configurations added with predictor version 7: ``elementwise``: a float Add or Mul of a constant operand, one
    value or one per channel (:data:`FLOAT_OPERANDS`), over the element-wise counts; where the space held only
    a second full tensor (and a scalar activation input over 2-D shapes), ppocrv4-rec's 92 Adds of a scalar weight
    onto its feature maps were predicted 1.7x their profiled time."""
    if family != "elementwise":
        return []
    return [partial(elementwise_kernel, n, op, True, "fp32", operand) for n, op, operand in
            itertools.product(ELEMENTWISE_COUNTS, ("Add", "Mul"), FLOAT_OPERANDS[1:])]


def _added_configs_6(family: str) -> list[Callable[[], KernelModel]]:
    """Configurations added with predictor version 6: the integer (quantized) kernels as quantization tools write
    them, where the float ones do not predict them, and the convolutions the NCHWc-only space missed. ``conv``:
    :func:`_added_conv_configs`, Convs with :data:`FUSED_HARDSIGMOID`, and ConvInteger (``quantize_dynamic``'s conv
    form) with int8 and uint8 weights, 1x1 and 3x3, channels widening and narrowing 4x; ``matmul``: the ``dynamic``
    and ``integer`` products with uint8 weights (older ``quantize_dynamic`` models), attention's QDQ products of two
    activations (QLinearMatMul); ``elementwise``: QDQ element-wise ops (QLinearAdd / QLinearMul / ...) on the
    element counts of the float ones up to 4 M, and the float Pow a QDQ model runs on its own; ``norm``: the QDQ
    Softmax (QLinearSoftmax); ``layout``: attention's QDQ Transposes (uint8)."""
    out: list[Callable[[], KernelModel]] = []
    if family == "conv":
        out += _added_conv_configs()
        # Convs with FUSED_HARDSIGMOID: depthwise 3x3 to 7x7 (a depthwise 1x1 is rare) and plain 1x1 / 3x3, over the
        # space's maps and channels
        maps, chans = (7, 14, 28, 56, 112), (16, 32, 64, 128, 256)
        out += [partial(conv_kernel, hw, cin, cin, k=k, stride=s, depthwise=True, bn=True, act=FUSED_HARDSIGMOID)
                for hw, cin, k, s in itertools.product(maps, chans, (3, 5, 7), (1, 2))]
        out += [partial(conv_kernel, hw, cin, cin, k=k, stride=s, depthwise=False, bn=True, act=FUSED_HARDSIGMOID)
                for hw, cin, k, s in itertools.product(maps, chans, (1, 3), (1, 2))]
        for hw, cin, ratio, k, s, weights in itertools.product((7, 14, 28, 56, 112), (16, 32, 64, 128, 256),
                                                               (0.25, 1.0, 4.0), (1, 3), (1, 2), INT8_WEIGHTS):
            cout = max(8, int(cin * ratio))
            if (hw // s) ** 2 * cin * cout * k * k <= _MAX_CONV_INTEGER_MACS[weights]:
                out.append(partial(conv_integer_kernel, hw, cin, cout, k=k, stride=s, weights=weights))
    elif family == "matmul":
        sizes = (64, 256, 512, 1024, 2048)
        out += [partial(quant_matmul_kernel, m, k, n, form=form, bias=bias, weights="uint8")
                for m, k, n, form, bias in itertools.product((1, 16, 64, 256), sizes, sizes, ("dynamic", "integer"),
                                                             (True, False)) if bias or k == n]
        out += [partial(quant_matmul_kernel, m, k, n, form=form, bias=True, weights="uint8") for m, k, n, form in
                itertools.product((1, 16, 64), (1024, 4096), (4096, 8192), ("dynamic", "integer"))]
        # attention's products of two uint8 activations (QLinearMatMul): Q·Kᵀ (k = head dim, n = tokens), A·V
        out += [partial(qdq_batched_matmul_kernel, h, m, k, n) for h, m, (k, n) in
                itertools.product((4, 8, 12, 16), (16, 64, 128, 256), ((32, 0), (64, 0), (0, 32), (0, 64)))
                if (k, n) != (0, m)]  # m = 64: A·V is Q·Kᵀ's shape
    elif family == "elementwise":
        counts = ELEMENTWISE_COUNTS[:-1]  # up to 4 M
        out += [partial(qdq_elementwise_kernel, n, op, operand=operand) for n, op, operand in
                itertools.product(counts, QDQ_ELEMENTWISE_OPS, QDQ_OPERANDS)
                if operand == "tensor" or op in ("Add", "Mul")]
        # a float Pow by a constant exponent (the tanh GELU's x³, a LayerNorm written out's square): a QDQ model
        # runs it on its own, its GELU not fused
        out += [partial(power_kernel, n, p) for n, p in itertools.product(counts, (2.0, 3.0))]
    elif family == "norm":
        out += [partial(norm_kernel, r, c, "softmax", "int8") for r, c in
                itertools.product((1, 16, 64, 256, 768, 1024, 4096), (32, 64, 128, 384, 768, 1024))]
    elif family == "layout":
        out += [partial(qdq_transpose_kernel, t, h, d, kind=kind) for t, h, d, kind in
                itertools.product((16, 64, 128, 256, 512), (4, 8, 12, 16), (32, 64), QDQ_TRANSPOSE_KINDS)]
    return out


def _movement_configs(rows: Sequence[int]) -> list[Callable[[], KernelModel]]:
    """The ``movement`` space beyond 4-D channel slices: gathers, scatters, expands, tiles, pads and slices of
    2-D / 3-D tensors (indices from 16 to 16 K, copies of 1 to 1 K contiguous elements; tables up to 12 M
    elements, outputs up to 16 M)."""
    out: list[Callable[[], KernelModel]] = []
    out += [partial(gather_kernel, r, c, n, "rows") for r, c, n in
            itertools.product((64, 1024, 32768), (3, 16, 128, 384), (1, 16, 256, 2048, 16384)) if n * c <= 1 << 22]
    out += [partial(gather_kernel, r, c, n, "last") for r, c, n in
            itertools.product(rows, (16, 384), (16, 256, 2048)) if r * n <= 1 << 22]
    out += [partial(scatter_kernel, r, c, n, red) for r, c, n, red in
            itertools.product((256, 4096), (1, 3, 128, 384), (256, 2048, 16384), ("none", "add"))
            if n * c <= 1 << 22]
    out += [partial(scatter_kernel, r, c, n, red, nd=True) for r, c, n, red in
            itertools.product((256, 4096), (16, 384), (256, 2048), ("none", "add"))]
    out += [partial(expand_kernel, r, c, kind) for r, c, kind in
            itertools.product((32, *rows), (8, 128, 384), EXPAND_KINDS) if r * c * 3 <= 1 << 24]
    out += [partial(tile_kernel, r, c, reps, axis) for r, c, reps, axis in
            itertools.product(rows[:3], (16, 128), (2, 8), (0, 1))]
    out += [partial(pad_kernel, r, c, kind) for r, c, kind in
            itertools.product((14, 56, 112), (16, 64), ("spatial", "seq"))]
    out += [partial(slice_kernel, r, c, kind) for r, c, kind in
            itertools.product((1, *rows), (16, 128, 384), SLICE_KINDS)]
    out += [partial(where_kernel, r, c, kind) for r, c, kind in itertools.product((1, *rows), (16, 128), WHERE_KINDS)]
    return out


def _added_movement_configs() -> list[Callable[[], KernelModel]]:
    """The ``movement`` forms graph, point-cloud and recommender models run at scale, beyond
    :func:`_movement_configs`: scatters into a constant zero table (an exported ``scatter_add_``: the roofline
    counts the table as weight bytes, which no timed movement kernel had at this cost) and over 3-vectors per
    feature (``inner`` 3), embedding lookups from weight tables of 64 KiB to 64 MiB (past the last-level cache),
    and GatherElements (one index per element); indices 16 to 16 K, updates and outputs up to 4 M elements."""
    out: list[Callable[[], KernelModel]] = []
    out += [partial(scatter_kernel, r, c, n, red, table="const", inner=inner) for r, c, n, red, inner in
            itertools.product((256, 4096), (3, 16, 128), (2048, 16384), ("add", "none"), (1, 3))
            if n * c * inner <= 1 << 22]
    out += [partial(scatter_kernel, r, c, n, "add", inner=3) for r, c, n in
            itertools.product((256, 4096), (16, 128), (2048, 16384)) if n * c * 3 <= 1 << 22]
    out += [partial(gather_kernel, r, c, n, "rows", table="const") for r, c, n in
            itertools.product((1024, 32768, 262144), (16, 64, 384), (1, 16, 256, 2048, 16384))
            if r * c <= 1 << 24 and n * c <= 1 << 22]
    out += [partial(gather_elements_kernel, r, c, n, inner=inner) for r, c, n, inner in
            itertools.product((256, 4096), (16, 128), (2048, 16384), (1, 3)) if n * c * inner <= 1 << 22]
    return out


#: Concats of sequences ``[1, chans, steps]`` in the ``concat`` space (1-D U-Nets, temporal convolution stacks):
#: ``pad`` ``[1, C, p]``, ``[1, C, T]``, ``[1, C, p]`` along the last axis (a dilated convolution's replicate or
#: reflect padding written as Slice + Concat), ``skip`` two ``[1, C, T]`` along the channels (a U-Net's skip join).
CONCAT_SEQ_KINDS = ("pad", "skip")


def concat_seq_kernel(chans: int, steps: int, kind: str, pad: int = 0) -> KernelModel:
    """Concat of sequence tensors (:data:`CONCAT_SEQ_KINDS`; ``pad``: the steps added on each side); the
    ``concat`` family."""
    if kind == "pad":
        shapes = [(1, chans, pad), (1, chans, steps), (1, chans, pad)]
        axis = 2
    elif kind == "skip":
        shapes = [(1, chans, steps), (1, chans, steps)]
        axis = 1
    else:
        raise ValueError(f"concat seq kind {kind!r}")
    label = f"concat seq c={chans} t={steps} {kind}{f' pad={pad}' if kind == 'pad' else ''}"
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Concat", names, ["y"], axis=axis)
    return KernelModel("concat", label, _model([node], list(zip(names, shapes, strict=True)), ["y"], {}, "concat")
                       .SerializeToString())


def _added_concat_configs() -> list[Callable[[], KernelModel]]:
    """Sequence concats (:func:`concat_seq_kernel`) of 16 to 256 channels over 1 K to 16 K steps (up to 4 M
    elements out)."""
    out: list[Callable[[], KernelModel]] = []
    for c, t in itertools.product((16, 64, 128, 256), (1000, 4000, 8000, 16000)):
        if c * t > 1 << 22:
            continue
        out += [partial(concat_seq_kernel, c, t, "pad", p) for p in (2, 64, 1024)]
        out.append(partial(concat_seq_kernel, c, t, "skip", 0))
    return out


@dataclass(frozen=True)
class Config:
    """One configuration of a family's space: its builder's arguments (``params``: name, value) and the
    builder. :meth:`build` makes the model (its ``config`` set to ``params``)."""

    family: str
    params: tuple[tuple[str, Any], ...]
    builder: Callable[..., KernelModel]

    def build(self) -> KernelModel:
        args = dict(self.params)
        positional = [args.pop(f"_{i}") for i in range(sum(1 for k in args if k.startswith("_")))]
        return dataclasses.replace(self.builder(*positional, **args), config=self.params)


def _spread(configs: list[Callable[[], KernelModel]], added: list[Callable[[], KernelModel]],
            ) -> list[Callable[[], KernelModel]]:
    """``added`` spread evenly through ``configs``: the i-th of n at (i + 0.5) / n; ``configs`` keep their order
    between them, and so do ``added``."""
    slots = sorted([((i + 0.5) / len(configs), 0, i) for i in range(len(configs))]
                   + [((j + 0.5) / len(added), 1, j) for j in range(len(added))])
    return [configs[i] if later == 0 else added[i] for _, later, i in slots]


def family_configs(family: str) -> list[Config]:
    """``family``'s configurations in their seeded random order (the order :func:`kernel_space` takes them in):
    the first space shuffled, then each later addition (:func:`_added_configs`, :func:`_added_configs_6`,
    :func:`_added_configs_7`) shuffled on its own and spread through what came before, so that a cache walked before
    is walked in the same order."""
    configs = _configs(family)
    random.Random(f"{_SEED}:{family}").shuffle(configs)
    for tag, added in (("added", _added_configs(family)), ("added6", _added_configs_6(family)),
                       ("added7", _added_configs_7(family))):
        random.Random(f"{_SEED}:{family}:{tag}").shuffle(added)
        configs = _spread(configs, added)
    out = []
    for made in configs:
        assert isinstance(made, partial)
        params = tuple((f"_{i}", v) for i, v in enumerate(made.args)) + tuple(sorted(made.keywords.items()))
        out.append(Config(family, params, made.func))
    return out


def kernel_space(families: Sequence[str] = FAMILIES, limit: int | None = None) -> Iterator[KernelModel]:
    """The generated kernels of ``families``, each family's configurations in a seeded random order,
    interleaved round-robin across families (so any prefix of the sequence covers every family);
    at most ``limit`` in all."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown kernel families {unknown}")
    orders = [family_configs(family) for family in families]
    count = 0
    for round_ in range(max(len(o) for o in orders)):
        for order in orders:
            if round_ < len(order):
                if limit is not None and count >= limit:
                    return
                count += 1
                yield order[round_].build()


# ------------------------------------------------------------------------------------ adaptive sampling
#: What the adaptive sampler is told about a family after a pass: its cross-validated error (the weight of its
#: share of the next batch) and each generated kernel's own cross-validated |error| by its configuration.
FamilyErrors = tuple[float, Sequence[tuple[tuple[tuple[str, Any], ...], float]]]


def _coords(params: Sequence[tuple[str, Any]]) -> tuple[np.ndarray, tuple[str, ...]]:
    """A configuration as numbers (log2 of each numeric parameter: sizes scale by factors) and categories."""
    numbers = [math.log2(1.0 + float(v)) for _, v in params if isinstance(v, int | float) and not isinstance(v, bool)]
    cats = tuple(f"{k}={v}" for k, v in params if isinstance(v, str | bool))
    return np.asarray(numbers, dtype=np.float64), cats


def plan_batch(remaining: Mapping[str, Sequence[Config]], errors: Mapping[str, FamilyErrors], size: int, *,
               neighbours: int = 3, floor: float = 0.01) -> list[Config]:
    """The next ``size`` configurations to time: each family's share in proportion to its cross-validated
    error (at least ``floor``; a family with no error yet counts as the worst one), largest remainders first;
    within a family, the configurations whose ``neighbours`` nearest timed configurations (distance: log2 of
    the numeric parameters, plus 1 per differing categorical one; over the leading numeric parameters all of them
    have) had the highest mean |error| (the regions where the fit is worst), ties in the family's seeded order.
    Families are interleaved in the result."""
    live = [f for f, configs in remaining.items() if configs]
    if not live or size <= 0:
        return []
    worst = max((max(e[0], floor) for f, e in errors.items() if f in live), default=1.0)
    weights = {f: max(errors[f][0], floor) if f in errors else worst for f in live}
    total = sum(weights.values())
    quota = {f: min(len(remaining[f]), int(size * weights[f] / total)) for f in live}
    spare = size - sum(quota.values())
    for f in sorted(live, key=lambda f: -(size * weights[f] / total - int(size * weights[f] / total))):
        if spare <= 0:
            break
        if quota[f] < len(remaining[f]):
            quota[f] += 1
            spare -= 1
    picks: dict[str, list[Config]] = {}
    for family in live:
        configs = list(remaining[family])
        known = errors[family][1] if family in errors else ()
        if quota[family] <= 0:
            continue
        if not known:
            picks[family] = configs[:quota[family]]
            continue
        seen = [_coords(params) for params, _ in known]
        errs = np.asarray([err for _, err in known], dtype=np.float64)
        width = min(len(c[0]) for c in seen)
        seen_num = np.stack([c[0][:width] for c in seen])
        scores = []
        for config in configs:
            num, cats = _coords(config.params)
            shared = min(width, len(num))  # a builder with fewer numeric parameters: the leading ones
            dist = np.sqrt(((seen_num[:, :shared] - num[:shared]) ** 2).sum(axis=1))
            dist += np.asarray([sum(a != b for a, b in zip(cats, c[1], strict=False)) for c in seen])
            nearest = np.argsort(dist, kind="stable")[:neighbours]
            scores.append(float(errs[nearest].mean()))
        order = sorted(range(len(configs)), key=lambda i: -scores[i])
        picks[family] = [configs[i] for i in order[:quota[family]]]
    out: list[Config] = []
    for round_ in range(max((len(v) for v in picks.values()), default=0)):
        out += [v[round_] for v in picks.values() if round_ < len(v)]
    return out


Timer = Callable[[Sequence[KernelModel], float | None], Sequence[KernelTiming]]
Evaluate = Callable[[Sequence[KernelTiming]], Mapping[str, FamilyErrors]]


@dataclass(frozen=True)
class AdaptiveRound:
    """One pass of :func:`adaptive_sample`: how many kernels it timed per family, and the family errors it
    was planned from (none for the first, round-robin pass)."""

    timed: Mapping[str, int]
    planned_from: Mapping[str, float]


def adaptive_sample(first: Sequence[KernelModel], families: Sequence[str], timer: Timer, evaluate: Evaluate, *,
                    budget_s: float, first_share: float = 0.5, batch: int = 60, max_rounds: int = 4,
                    clock: Callable[[], float] = time.monotonic) -> tuple[list[KernelTiming], list[AdaptiveRound]]:
    """Time ``first`` (the calibration models' kernels: what the predictor will be asked about first, so they
    may take the whole budget), then ``families``' generated kernels round-robin until ``first_share`` of
    ``budget_s`` is spent; then, while budget is left (at most ``max_rounds`` more passes), ask ``evaluate`` for
    each family's cross-validated errors on what was timed so far and time the :func:`plan_batch` of ``batch``
    configurations not timed yet. ``timer(kernels, budget_s)`` times kernels in order until its budget is
    spent (cached kernels are free)."""
    start = clock()
    spaces = {f: family_configs(f) for f in families}
    interleaved = [c for r in range(max((len(v) for v in spaces.values()), default=0))
                   for c in (v[r] for v in spaces.values() if r < len(v))]
    timings = list(timer(first, budget_s)) if first else []
    kernels: list[KernelModel | _Lazy] = [_Lazy(c) for c in interleaved]
    share_left = budget_s * first_share - (clock() - start)
    if share_left > 0:
        timings += timer(_LazyList(kernels), share_left)
    done = {t.kernel.config for t in timings if t.kernel.config}
    rounds = [AdaptiveRound(_count(timings), {})]
    for _ in range(max_rounds):
        left = budget_s - (clock() - start)
        if left <= 0:
            break
        errors = evaluate(timings)
        remaining = {f: [c for c in v if c.params not in done] for f, v in spaces.items()}
        plan = plan_batch(remaining, errors, batch)
        if not plan:
            break
        new = list(timer([c.build() for c in plan], left))
        timings += new
        done |= {t.kernel.config for t in new}
        rounds.append(AdaptiveRound(_count(new), {f: e[0] for f, e in errors.items()}))
    return timings, rounds


def _count(timings: Sequence[KernelTiming]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in timings:
        out[t.kernel.family] = out.get(t.kernel.family, 0) + 1
    return out


class _Lazy:
    """A configuration not built yet (built when the timer reaches it)."""

    def __init__(self, config: Config) -> None:
        self.config = config


class _LazyList(Sequence[KernelModel]):
    """Kernels built as they are read: a budget ends the pass long before most of the space is built."""

    def __init__(self, items: list[KernelModel | _Lazy]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        item = self._items[index]
        if isinstance(item, _Lazy):
            item = self._items[index] = item.config.build()
        return item


# ------------------------------------------------------------------------------ kernels of a model
def model_kernels(path: Path, shapes: Mapping[str, tuple[int, ...]] | None, config: SessionConfig,
                  runner: KernelRunner, *,
                  groupings: list[tuple[Graph, list[tuple[str, tuple[str, ...]]]]] | None = None,
                  ) -> tuple[Graph, list[KernelModel], list[str]]:
    """Every distinct kernel of the model at ``path`` (distinct by the extracted model's bytes) as a model of its
    own, as ``runner``'s runtime groups the layers (:meth:`KernelRunner.groups`; appended to ``groupings`` with
    the graph when given), with notes on the kernels that could not be extracted. Top-level layers only: kernels
    inside control-flow subgraphs are left out (noted)."""
    graph = load_model(path, shapes)
    source = onnx.shape_inference.infer_shapes(onnx.load(str(path)), data_prop=True)
    _pin_inputs(source, graph)
    by_id = {n.id: n for n in graph.layers}
    kernels: dict[str, KernelModel] = {}
    notes: list[str] = []
    groups = runner.groups(graph, config)
    if groupings is not None:
        groupings.append((graph, groups))
    for name, layers in groups:
        nodes = [by_id[i] for i in layers if i in by_id]
        if not nodes or any(n.parent for n in nodes):
            notes.append(f"{name}: inside a control-flow subgraph, left out")
            continue
        try:
            data = _extract(source, graph, layers)
        except (LayerscopeError, ValueError, KeyError, onnx.checker.ValidationError) as exc:
            notes.append(f"{name}: not extracted ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
            continue
        kernel = KernelModel(kernel_family([n.op_type for n in nodes]), f"{graph.name}:{name}", data,
                             source=str(path), layers=tuple(layers), shapes=tuple(sorted((shapes or {}).items())))
        kernels.setdefault(kernel.digest, kernel)
    return graph, list(kernels.values()), notes


def _pin_inputs(model: onnx.ModelProto, graph: Graph) -> None:
    """Give ``model``'s inputs the shapes ``graph`` resolved (dynamic dims pinned) and re-infer its shapes."""
    for vi in model.graph.input:
        info = graph.tensors.get(vi.name)
        if info is not None and info.shape is not None:
            dims = vi.type.tensor_type.shape.dim
            for dim, size in zip(dims, info.shape, strict=False):
                dim.ClearField("dim_param")
                dim.dim_value = int(size)
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    model.CopyFrom(inferred)


def _extract(model: onnx.ModelProto, graph: Graph, layers: Sequence[str]) -> bytes:
    """The source nodes of ``layers`` as a model: inputs are the activations they read from outside (shapes from
    ``graph``), outputs those they produce for other layers or the model; constants become initializers."""
    by_id = {n.id: n for n in graph.layers}
    chosen = [by_id[i] for i in layers]
    produced = {o for n in chosen for o in n.outputs if o}
    consumers = {i for n in graph.layers if n.id not in set(layers) for i in n.inputs}
    model_outputs = {t.name for t in graph.outputs}
    outputs = [o for n in chosen for o in n.outputs if o and (o in consumers or o in model_outputs)]
    if not outputs:
        outputs = [o for o in chosen[-1].outputs if o]
    reads = [i for n in chosen for i in n.inputs if i and i not in produced]
    protos = {p.output[0] if p.output else "": p for p in model.graph.node}
    inits = {t.name: t for t in model.graph.initializer}
    new_inits: list[onnx.TensorProto] = []
    inputs: list[onnx.ValueInfoProto] = []
    seen: set[str] = set()
    for name in reads:
        if name in seen:
            continue
        seen.add(name)
        info = graph.tensors.get(name)
        if name in inits:
            new_inits.append(inits[name])
        elif name in graph.const_values:
            new_inits.append(numpy_helper.from_array(np.asarray(graph.const_values[name]), name))
        elif name in graph.constants:
            if info is None or info.shape is None:
                raise ValueError(f"constant {name} has no shape")
            dtype = helper.tensor_dtype_to_np_dtype(_elem(info.dtype))
            new_inits.append(numpy_helper.from_array(np.zeros(info.shape, dtype=dtype), name))
        else:
            if info is None or info.shape is None:
                raise ValueError(f"input {name} has no shape")
            inputs.append(helper.make_tensor_value_info(name, _elem(info.dtype), list(info.shape)))
    nodes = []
    for node in chosen:
        proto = protos.get(node.outputs[0] if node.outputs else "")
        if proto is None:
            raise ValueError(f"source node of {node.id} not found")
        nodes.append(proto)
    outs = []
    for name in outputs:
        info = graph.tensors.get(name)
        if info is None or info.shape is None:
            raise ValueError(f"output {name} has no shape")
        outs.append(helper.make_tensor_value_info(name, _elem(info.dtype), list(info.shape)))
    g = helper.make_graph(nodes, "kernel", inputs, outs, new_inits)
    out = helper.make_model(g, opset_imports=list(model.opset_import), producer_name="layerscope")
    out.ir_version = max(model.ir_version, 7)  # initializers need not be graph inputs from IR 4 on
    onnx.checker.check_model(out)
    return bytes(out.SerializeToString())


def _elem(dtype: str) -> int:
    from layerscope.model.load import onnx_elem_type

    return onnx_elem_type(dtype)


# ---------------------------------------------------------------------------------------- timing
Progress = Callable[[float, float], None]


@dataclass(frozen=True)
class TimingConfig:
    """How each kernel is timed: ``visits`` samples, each the fastest of ``runs_per_visit`` runs after
    ``visit_warmup`` untimed runs; ``threads`` ONNX Runtime intra-op threads.

    The default is the statistic ``layerscope profile`` reports for a whole model: one timed run per visit, the
    kernel's time the median of 11 (a P50 over runs). The fastest of several runs (``runs_per_visit`` > 1) reads
    a kernel as a quiet machine with warm caches runs it: on this project's loaded 2-core machine the summed
    kernels of a zoo network read 1.5-1.9x under its P50 that way."""

    visits: int = 11
    runs_per_visit: int = 1
    visit_warmup: int = 1
    threads: int = 1


class KernelRunner(Protocol):
    """What times single-kernel models for the predictor, and how a model's layers group into kernels: a runtime
    package's (:meth:`layerscope.runtimes.base.OpenRuntime.kernel_runner`). ``name``: the runtime that times (as
    fusion rules record it); ``grouping``: the runtime whose grouping :meth:`groups` gives; ``own_grouping``:
    whether that is the timing runtime's own (a device command's compiler grouping is not visible here)."""

    @property
    def name(self) -> str:
        """The timing runtime's name."""

    @property
    def grouping(self) -> str:
        """The name of the runtime whose grouping of layers into kernels :meth:`groups` gives."""

    @property
    def own_grouping(self) -> bool:
        """Whether :meth:`groups` is the timing runtime's own grouping."""

    def installed(self) -> bool:
        """Whether the grouping runtime is installed here (without it :meth:`groups` cannot run)."""

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> Runner:
        """The runner for one kernel model (``graph``), fed random inputs of its shapes where it runs here."""

    def groups(self, graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
        """``graph``'s kernels as the grouping runtime runs them: ``(kernel name, layer ids)``."""

    def reorders(self, graph: Graph, config: SessionConfig) -> list[tuple[str, int, tuple[str, ...]]]:
        """The layout kernels the timing runtime adds when it runs ``graph`` (ONNX Runtime's NCHWc
        ReorderInput / ReorderOutput; none for a runtime that adds none or does not say): ``(kernel name, bytes of
        the tensor it converts (0: unknown), the layer ids of the kernel it converts for)``. Kernels timed alone
        are timed without theirs (:attr:`KernelTiming.boundary_us`); a model's prediction adds these."""


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


class OwnKernels:
    """A runtime's own kernels: grouped as that runtime groups them (``grouping`` is its ``name``, the module it is
    imported as), installed where that module imports."""

    name: str

    @property
    def grouping(self) -> str:
        return self.name

    @property
    def own_grouping(self) -> bool:
        return True

    def installed(self) -> bool:
        return _importable(self.name)

    def reorders(self, graph: Graph, config: SessionConfig) -> list[tuple[str, int, tuple[str, ...]]]:
        """None unless the runtime's kernels say otherwise (:meth:`KernelRunner.reorders`)."""
        return []


@dataclass(frozen=True)
class CommandKernels:
    """A device command's kernels: every kernel model timed by ``command`` (the bisect command runner:
    ``--compile-cmd`` once per kernel, ``--run-cmd`` per sample); its compiler's grouping is not visible here, so
    ``grouped_by``'s is used (ONNX Runtime's, as :mod:`layerscope.runtimes.command` makes it)."""

    command: CommandRunner
    grouped_by: KernelRunner
    name: str = "command"

    @property
    def grouping(self) -> str:
        return self.grouped_by.name

    @property
    def own_grouping(self) -> bool:
        return False

    def installed(self) -> bool:
        return self.grouped_by.installed()

    def make(self, graph: Graph, timing: TimingConfig, config: SessionConfig) -> Runner:
        return self.command

    def groups(self, graph: Graph, config: SessionConfig) -> list[tuple[str, tuple[str, ...]]]:
        return self.grouped_by.groups(graph, config)

    def reorders(self, graph: Graph, config: SessionConfig) -> list[tuple[str, int, tuple[str, ...]]]:
        """None: the device's compiler is not the grouping runtime, whose layout kernels it does not run (and the
        command's kernels are timed whole, their boundary not seen)."""
        return []


def empty_model() -> bytes:
    node = helper.make_node("Relu", ["x"], ["y"])
    return _model([node], [("x", (1, 1))], ["y"], {}, "empty").SerializeToString()


#: The models :func:`call_costs` times, by (kind, n): ``fan`` n inputs each through its own Relu to its own output;
#: ``chain`` one input through n Relus to one output; ``sum`` n inputs summed to one output. Every tensor [1, 1].
CALL_MODELS = (("fan", 1), ("fan", 2), ("fan", 4), ("fan", 8), ("chain", 2), ("chain", 4), ("chain", 8),
               ("chain", 16), ("chain", 32), ("sum", 2), ("sum", 4), ("sum", 8))
#: :func:`call_costs` times its models in turns of this many back-to-back runs each, round-robin.
CALL_BLOCK_RUNS = 10


def call_model(kind: str, n: int) -> bytes:
    """One of :data:`CALL_MODELS`' models (``("fan", 1)`` is :func:`empty_model`'s graph)."""
    if n < 1 or kind not in ("fan", "chain", "sum"):
        raise ValueError(f"call model {kind!r} x{n}")
    if kind == "fan":
        nodes = [helper.make_node("Relu", [f"x{i}"], [f"y{i}"]) for i in range(n)]
        inputs, outputs = [f"x{i}" for i in range(n)], [f"y{i}" for i in range(n)]
    elif kind == "chain":
        names = ["x", *(f"h{i}" for i in range(n - 1)), "y"]
        nodes = [helper.make_node("Relu", [a], [b]) for a, b in itertools.pairwise(names)]
        inputs, outputs = ["x"], ["y"]
    else:
        inputs, outputs = [f"x{i}" for i in range(n)], ["y"]
        nodes = [helper.make_node("Sum", inputs, ["y"])]
    return _model(nodes, [(name, (1, 1)) for name in inputs], outputs, {}, f"{kind}{n}").SerializeToString()


@dataclass(frozen=True)
class CallCosts:
    """What a whole model's call costs besides its kernels, timed as ``layerscope profile`` times a model (the P50
    of back-to-back runs, no untimed run between them; :func:`call_costs`), in µs: ``empty_us`` the one-Relu
    model's P50 (one input, one output, one node); ``input_us`` each further input, ``output_us`` each further
    output, ``node_us`` each further node (the runtime's dispatch of a kernel that does ~nothing). A kernel timed
    alone pays its own inputs and outputs; in its model it pays none of them, but a dispatch (:meth:`in_model`).
    All zero (``source`` says so) where they were not measured: the prediction is then the kernels' sum plus
    the kernel runner's per-call overhead, as before."""

    empty_us: float = 0.0
    input_us: float = 0.0
    output_us: float = 0.0
    node_us: float = 0.0
    source: str = "not measured"

    def in_model(self, alone_us: float, inputs: int, outputs: int) -> float:
        """A kernel's time in its model (µs) from its time ``alone_us`` (the kernel runner's, its per-call overhead
        taken off: what is left of binding ``inputs`` inputs and fetching ``outputs`` outputs beyond the empty
        model's one each is taken off too) plus the dispatch the empty model's subtraction took off."""
        extra = max(0, inputs - 1) * self.input_us + max(0, outputs - 1) * self.output_us
        return max(0.0, alone_us - extra) + self.node_us

    def model_us(self, inputs: int, outputs: int) -> float:
        """A model's call cost besides its kernels (µs): the empty model's, less its one node's dispatch, plus
        its further inputs and outputs."""
        return max(0.0, self.empty_us - self.node_us + max(0, inputs - 1) * self.input_us
                   + max(0, outputs - 1) * self.output_us)

    def to_json(self) -> dict[str, Any]:
        return {"empty_us": self.empty_us, "input_us": self.input_us, "output_us": self.output_us,
                "node_us": self.node_us, "source": self.source}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallCosts:
        empty, bind, fetch, node = (float(data[k]) for k in ("empty_us", "input_us", "output_us", "node_us"))
        if not all(math.isfinite(v) and v >= 0 for v in (empty, bind, fetch, node)):
            raise ValueError(f"call costs {empty!r}, {bind!r}, {fetch!r}, {node!r}")
        return cls(empty, bind, fetch, node, str(data.get("source", "")))


#: No call costs measured (a device command, a predictor fitted without them).
NO_CALLS = CallCosts()


def fit_call_costs(p50_us: Mapping[tuple[str, int], float]) -> CallCosts:
    """:class:`CallCosts` from the P50 (µs) of :data:`CALL_MODELS`' models: ``node_us`` the least-squares slope of
    ``chain`` over its node count (with ``fan`` 1 as one node), ``input_us`` that of ``sum`` over its inputs (with
    ``fan`` 1 as one input), ``output_us`` that of ``fan`` (an input, an output and a node each) less the other
    two; each slope at least 0. ``ValueError`` without ``("fan", 1)``."""
    if ("fan", 1) not in p50_us:
        raise ValueError("the empty model (fan x1) was not timed")

    def slope(kind: str) -> float:
        points = [(1, p50_us[("fan", 1)])] + [(n, v) for (k, n), v in p50_us.items() if k == kind and n > 1]
        if len(points) < 2:
            return 0.0
        x = np.asarray([p[0] for p in points], dtype=np.float64)
        y = np.asarray([p[1] for p in points], dtype=np.float64)
        return max(0.0, float(np.polyfit(x, y, 1)[0]))

    node, bind = slope("chain"), slope("sum")
    return CallCosts(p50_us[("fan", 1)], bind, max(0.0, slope("fan") - bind - node), node,
                     f"P50 of back-to-back runs of {len(p50_us)} call models")


def call_costs(runner: KernelRunner, threads: int = 1, *, runs: int = 201) -> CallCosts:
    """Time :data:`CALL_MODELS` on ``runner`` as ``layerscope profile`` times a whole model (back-to-back runs of
    one session, P50 of at least ``runs``) and fit :class:`CallCosts`. The models take turns of
    :data:`CALL_BLOCK_RUNS` runs, in one order and then the reverse (a drift that grows steadily puts each model
    at the same mean time), so that each P50 is read over the same minutes: timed one after
    the other, a model caught in a slower phase of the machine than the next (the one-element model's P50 read
    5.1 to 9.9 us in four timings a minute apart) tilts the slopes (the per-node cost read 0.38 to 0.81 us).
    Models the runtime cannot run are left out; none run: all zero."""
    timing = TimingConfig(visits=runs, runs_per_visit=1, visit_warmup=0, threads=threads)
    config = SessionConfig(threads=threads)
    samples: dict[tuple[str, int], list[float]] = {}
    with scratch("calls") as tmp, contextlib.ExitStack() as stack:
        jobs: dict[tuple[str, int], tuple[Runner, Job]] = {}
        for kind, n in CALL_MODELS:
            path = Path(tmp) / f"{kind}{n}.onnx"
            path.write_bytes(call_model(kind, n))
            runner_ = runner.make(load_model(path), timing, config)
            stack.callback(runner_.close)
            jobs[(kind, n)] = runner_, Job(cut=_WHOLE, key=f"call:{kind}{n}", model_path=path,
                                           label=f"call {kind} x{n}")
        for turn in range(math.ceil(runs / CALL_BLOCK_RUNS)):
            order = list(jobs.items())
            for model, (runner_, job) in order if turn % 2 == 0 else order[::-1]:
                try:
                    samples.setdefault(model, []).extend(runner_.measure(job) for _ in range(CALL_BLOCK_RUNS))
                except DeviceCommandError:
                    raise
                except LayerscopeError:
                    del jobs[model]
                    samples.pop(model, None)
    p50 = {model: float(np.median(values)) for model, values in samples.items()}
    return fit_call_costs(p50) if ("fan", 1) in p50 else NO_CALLS


def time_kernels(kernels: Sequence[KernelModel], store: SampleStore, timing: TimingConfig = TimingConfig(), *,
                 runner: KernelRunner, budget_s: float | None = None, progress: Progress | None = None,
                 ) -> tuple[list[KernelTiming], float, dict[str, Any]]:
    """Time ``kernels`` on ``runner`` in order until ``budget_s`` (wall seconds, checked
    before each uncached kernel) is spent; after that, uncached kernels are skipped and cached ones still read.

    Returns the timings (cached kernels cost nothing and are never cut by the budget), the per-call overhead
    (µs: the median sample of a one-element Relu model, timed first) and the runner's identity. From each kernel
    the per-call overhead timed beside it is subtracted (:class:`_Paired`: one sample of the one-element Relu model
    before each of its visits, cached with it; the overhead timed first for a kernel cached without them): the
    per-call overhead drifts with the machine's state by more than a small kernel's own time. Each
    kernel's boundary layout kernels (:attr:`KernelTiming.boundary_us`: :data:`BOUNDARY_RUNS` profiled runs,
    cached with its samples; measured once for a kernel cached before they were; less the profiler's reading of
    a layout kernel that converts next to nothing, :func:`_profiler_floor`, each) are subtracted too. A kernel
    the runtime cannot load or run is skipped; a device command that fails stops the timing (exit 3)."""
    config = SessionConfig(threads=timing.threads)
    start = time.monotonic()
    with scratch("kernels") as tmp:
        empty = KernelModel("overhead", "empty", empty_model())
        overhead_samples, identity, _, _ = _time_one(empty, store, timing, config, Path(tmp), kernel_runner=runner)
        overhead_us = float(np.median(overhead_samples))
        nothing_around = Path(tmp) / "nothing-around.onnx"  # no layout kernel: every boundary one is alone-only
        nothing_around.write_bytes(empty.model_bytes)
        floor_us = _profiler_floor(store, timing, config, Path(tmp), kernel_runner=runner, alone_in=nothing_around)
        out: list[KernelTiming] = []
        with _Paired.open(nothing_around, store, timing, config, runner) as paired:
            for index, kernel in enumerate(kernels):
                key = _key(kernel, identity)
                cached = len(store.samples(key)) >= timing.visits
                if not cached and budget_s is not None and time.monotonic() - start > budget_s:
                    continue  # spent: the kernels after it are still read from the cache
                try:
                    samples, _, was_cached, boundary = _time_one(kernel, store, timing, config, Path(tmp),
                                                                 kernel_runner=runner, alone_in=nothing_around,
                                                                 paired=paired)
                except DeviceCommandError:
                    raise
                except LayerscopeError:
                    continue
                boundary_us, count, nbytes = boundary
                boundary_us = max(0.0, boundary_us - floor_us * count)
                beside_us = paired.overhead_us(key)
                kernel_overhead_us = overhead_us if beside_us is None else beside_us
                value = max(float(np.median(samples)) - kernel_overhead_us - boundary_us, 0.05)
                out.append(KernelTiming(kernel, value, tuple(samples), kernel_overhead_us, was_cached, boundary_us,
                                        count, nbytes))
                if progress is not None:
                    progress(index + 1, len(kernels))
    return out, overhead_us, dict(identity)


@dataclass
class _Paired:
    """The one-element Relu model's runner, open while kernels are timed: one of its samples is taken just before
    each visit of a kernel (:meth:`sample`) and cached under the kernel's key with :data:`PAIRED_SUFFIX`
    (:meth:`record`), so that the per-call overhead subtracted from the kernel (:meth:`overhead_us`) was timed in
    the same minutes as it."""

    runner: Runner
    job: Job
    store: SampleStore
    visits: int

    @classmethod
    @contextlib.contextmanager
    def open(cls, path: Path, store: SampleStore, timing: TimingConfig, config: SessionConfig,
             kernel_runner: KernelRunner) -> Iterator[_Paired]:
        """The runner of the model at ``path`` (the one-element Relu model), closed on exit."""
        runner = kernel_runner.make(load_model(path), timing, config)
        job = Job(cut=_WHOLE, key="paired-overhead", model_path=path, label="empty")
        try:
            yield cls(runner, job, store, timing.visits)
        finally:
            runner.close()

    def sample(self) -> float:
        """One sample of the overhead model (µs)."""
        return self.runner.measure(self.job)

    def record(self, key: str, samples_us: Sequence[float]) -> None:
        """Cache ``samples_us``, taken beside the visits of the kernel cached under ``key``, with it."""
        self.store.add_many(key + PAIRED_SUFFIX, "final", samples_us, job=self.job, runner=self.runner.identity)

    def overhead_us(self, key: str) -> float | None:
        """The median of the overhead samples timed beside the kernel cached under ``key`` (µs); ``None`` when
        fewer than a kernel's visits were (a kernel cached before they were taken)."""
        samples = self.store.samples(key + PAIRED_SUFFIX)
        return float(np.median(samples[:self.visits])) if len(samples) >= self.visits else None


#: What a kernel's cache key takes for the per-call overhead samples timed beside it (:class:`_Paired`).
PAIRED_SUFFIX = ":paired-overhead"


def time_models(paths: Sequence[Path], shapes: Mapping[str, tuple[int, ...]] | None, store: SampleStore,
                timing: TimingConfig = TimingConfig(), *, visits: int = 15,
                runner: KernelRunner) -> list[tuple[Path, float]]:
    """Each whole model's P50 (µs: the median of ``visits`` samples, each one run of the runner the kernels are
    timed with, back to back as ``profile`` runs a model: no untimed run between them; the same cache),
    per-call overhead included; a model the runtime cannot run is left out. What the predictor's in-model
    context (:func:`~layerscope.analysis.predictor.fit_context`) is fitted to."""
    config = SessionConfig(threads=timing.threads)
    whole = TimingConfig(visits=visits, runs_per_visit=timing.runs_per_visit, visit_warmup=0, threads=timing.threads)
    out: list[tuple[Path, float]] = []
    with scratch("kernels") as tmp:
        for path in paths:
            model = KernelModel("model", Path(path).name, Path(path).read_bytes(), source=str(path),
                                shapes=tuple(sorted((shapes or {}).items())))
            try:
                samples, _, _, _ = _time_one(model, store, whole, config, Path(tmp), kernel_runner=runner)
            except DeviceCommandError:
                raise
            except LayerscopeError:
                continue
            out.append((Path(path), float(np.median(samples))))
    return out


def _boundary(runner: Runner, store: SampleStore, job: Job, alone_in: Path, graph: Graph) -> tuple[float, int, int]:
    """The layout kernels at ``job``'s model boundary that a model without any (``alone_in``) does not run
    (:meth:`~layerscope.measure.runners.Runner.boundary`, :data:`BOUNDARY_RUNS` profiled runs, cached in
    ``store`` under the kernel's key): their median summed time per run (µs), how many, and the bytes of the
    model inputs and outputs they convert (``graph``: the kernel model; 0 when the runner does not name them).
    ``(0.0, 0, 0)`` when the runner cannot see inside a run."""
    cost = store.boundary(job.key)
    if cost is None:
        whole = Job(cut=job.cut, key=f"alone:{alone_in.name}", model_path=alone_in, label="nothing around")
        cost = runner.boundary(job, whole, BOUNDARY_RUNS)
        if cost is None:
            return 0.0, 0, 0
        store.set_boundary(job.key, cost, job=job, runner=runner.identity)
    if not cost.kernels:
        return 0.0, 0, 0
    nbytes = 0
    for name in cost.tensors:
        tensor = graph.tensor(name)
        if tensor is None or tensor.shape is None:
            nbytes = 0
            break
        nbytes += int(np.prod(tensor.shape, dtype=np.int64)) * _ELEM_SIZES.get(tensor.dtype, 4)
    return float(np.median(cost.samples_us)), len(cost.kernels), nbytes


def _profiler_floor(store: SampleStore, timing: TimingConfig, config: SessionConfig, workdir: Path, *,
                    kernel_runner: KernelRunner, alone_in: Path) -> float:
    """What the runner's profiler reads for a layout kernel that converts next to nothing (µs each): the boundary
    layout kernels (:func:`_boundary`) of a 1x1 convolution of 64 channels on one pixel (256 bytes in and out),
    per kernel; 0 where the runtime puts none around it. A profiled kernel's time carries this much of the
    profiler's own cost (and its whole-µs rounding), which an unprofiled run does not pay (~2 µs on ONNX Runtime
    1.32: a ReorderInput + ReorderOutput of 16x16x16 floats add 0.4 µs to a run, and read 2 µs each)."""
    probe = conv_kernel(1, 64, 64, k=1, stride=1, depthwise=False, bn=False, act="none")
    folder = workdir / f"floor-{probe.digest}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kernel.onnx"
    path.write_bytes(probe.model_bytes)
    graph = load_model(path)
    runner = kernel_runner.make(graph, timing, config)
    try:
        key = "profiler-floor:" + _key(probe, runner.identity)
        job = Job(cut=_WHOLE, key=key, model_path=path, label="profiler floor")
        us, count, _ = _boundary(runner, store, job, alone_in, graph)
    except LayerscopeError:
        return 0.0
    finally:
        runner.close()
        shutil.rmtree(folder, ignore_errors=True)
    return us / count if count else 0.0


#: Bytes per element of the tensor types a layout kernel converts (4 where the type is not listed).
_ELEM_SIZES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1}


def _key(kernel: KernelModel, identity: Mapping[str, Any]) -> str:
    stable = {k: v for k, v in identity.items() if k != "inputs_sha256"}
    text = json.dumps(stable, sort_keys=True, default=str)
    return hashlib.sha256(kernel.model_bytes + text.encode()).hexdigest()


#: Profiled runs that time a kernel model's boundary layout kernels (:attr:`KernelTiming.boundary_us`).
BOUNDARY_RUNS = 7


def _time_one(kernel: KernelModel, store: SampleStore, timing: TimingConfig, config: SessionConfig,
              workdir: Path, *, kernel_runner: KernelRunner, alone_in: Path | None = None,
              paired: _Paired | None = None) -> tuple[list[float], Mapping[str, Any], bool, tuple[float, int, int]]:
    """``kernel``'s first ``timing.visits`` samples (the missing ones timed and cached together; each visit after
    one sample of ``paired`` when given), the runner's identity, whether they were all cached; and its boundary
    layout cost (:func:`_boundary`) when ``alone_in`` names the model it is judged against (one without layout
    kernels), else ``(0.0, 0, 0)``."""
    folder = workdir / kernel.digest  # a device command's {dir}: its {compiled} and {out} are the kernel's own
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kernel.onnx"
    path.write_bytes(kernel.model_bytes)
    graph = load_model(path, dict(kernel.shapes) if not kernel.layers and kernel.shapes else None)
    runner = kernel_runner.make(graph, timing, config)
    try:
        key = _key(kernel, runner.identity)
        have = store.samples(key)
        cached = len(have) >= timing.visits
        job = Job(cut=_WHOLE, key=key, model_path=path, label=kernel.label)
        missing = timing.visits - len(store.samples(key))
        if missing > 0:  # the visits take milliseconds: their samples are written once, after the last
            beside: list[float] = []
            visits: list[float] = []
            for _ in range(missing):
                if paired is not None:
                    beside.append(paired.sample())
                visits.append(runner.measure(job))
            store.add_many(key, "final", visits, job=job, runner=runner.identity)
            if paired is not None:
                paired.record(key, beside)
        boundary = (0.0, 0, 0) if alone_in is None else _boundary(runner, store, job, alone_in, graph)
        return store.samples(key)[:timing.visits], runner.identity, cached, boundary
    finally:
        runner.close()
        shutil.rmtree(folder, ignore_errors=True)
