"""A tiny ONNX graph builder for the sample models: scoped names, tracked shapes, layer helpers.

Contract: every helper appends the ONNX nodes a PyTorch exporter (``torch.onnx.export``, eval mode,
BatchNorm folded into the preceding Conv) would emit for the same layer, names nodes the way the
exporter does (``/model.2/cv1/conv/Conv``), and returns the name of the output tensor. Static shapes
of every tensor are tracked in :attr:`GraphBuilder.shapes` so helpers can size weights and
constants; the final graph still goes through ONNX shape inference in the tests. Random weights
come from one seeded :class:`numpy.random.Generator`, so a builder called twice with the same
arguments produces byte-identical models.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: ONNX default-domain opset every sample uses (LayerNormalization needs >= 17).
OPSET = 17
#: IR version matching opset 17 (onnx 1.12), readable by every runtime that reads opset 17.
IR_VERSION = 8

#: The values of a builder's ``layernorm`` parameter (:meth:`GraphBuilder.layernorm_form`).
LAYERNORM_FORMS = ("fused", "decomposed")

Shape = tuple[int, ...]
IntOrPair = int | tuple[int, int]
#: ONNX ``pads`` of a 2-D op: top, left, bottom, right.
Pads = tuple[int, int, int, int]


def _pair(v: IntOrPair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


class GraphBuilder:
    """Accumulates nodes, initializers and I/O of one ONNX graph.

    ``seed`` fixes the random weights. :attr:`params` counts the elements of the trainable weights
    created with :meth:`weight` and :meth:`bias` (not fixed buffers such as grids or shapes), so a
    builder can be checked against a published parameter count.
    """

    def __init__(self, name: str, *, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.shapes: dict[str, Shape] = {}
        self.params = 0
        self._scope: list[str] = []
        self._node_names: Counter[str] = Counter()
        self._init_names: Counter[str] = Counter()
        #: :meth:`layernorm` emits the primitive ops of an export below opset 17, not ``LayerNormalization``
        self.decomposed_layernorm = False

    # ----------------------------------------------------------------------------------- naming
    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Nest node and weight names under ``name`` (like a torch submodule attribute)."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def _node_name(self, op_type: str) -> str:
        base = "/" + "/".join([*self._scope, op_type]) if self._scope else f"/{op_type}"
        n = self._node_names[base]
        self._node_names[base] += 1
        return base if n == 0 else f"{base}_{n}"

    def _init_name(self, leaf: str) -> str:
        base = ".".join([*self._scope, leaf])
        n = self._init_names[base]
        self._init_names[base] += 1
        return base if n == 0 else f"{base}_{n}"

    # ------------------------------------------------------------------------------ tensors, I/O
    def shape(self, x: str) -> Shape:
        """The static shape of tensor ``x``."""
        return self.shapes[x]

    def input(self, name: str, shape: Sequence[int], elem_type: int = TensorProto.FLOAT) -> str:
        """Declare a graph input of static ``shape``."""
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        self.shapes[name] = tuple(shape)
        return name

    def output(self, x: str, elem_type: int = TensorProto.FLOAT) -> None:
        """Declare tensor ``x`` a graph output, with its tracked shape."""
        self.outputs.append(helper.make_tensor_value_info(x, elem_type, list(self.shapes[x])))

    def rename(self, tensor: str, name: str) -> str:
        """Rename the output ``tensor`` of its producing node to ``name`` (a graph output's name); returns ``name``."""
        for node in self.nodes:
            for k, out in enumerate(node.output):
                if out == tensor:
                    node.output[k] = name
                    self.shapes[name] = self.shapes[tensor]
                    return name
        raise KeyError(tensor)

    def const(self, leaf: str, value: np.ndarray) -> str:
        """A fixed initializer (shape tensors, grids, buffers): not counted in :attr:`params`."""
        name = self._init_name(leaf)
        self.initializers.append(numpy_helper.from_array(np.array(value, order="C", copy=True), name))
        self.shapes[name] = tuple(value.shape)
        return name

    def weight(self, leaf: str, shape: Sequence[int], fan_in: int, gain: float = 1.0) -> str:
        """A trainable float32 initializer ~ N(0, gain / fan_in), counted in :attr:`params`."""
        std = np.float32(gain / math.sqrt(max(fan_in, 1)))
        value = self.rng.standard_normal(tuple(shape), dtype=np.float32) * std
        self.params += value.size
        return self.const(leaf, value)

    def bias(self, leaf: str, n: int | Sequence[int]) -> str:
        """A small trainable float32 bias, counted in :attr:`params`."""
        shape = (n,) if isinstance(n, int) else tuple(n)
        value = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(0.01)
        self.params += value.size
        return self.const(leaf, value)

    def int64s(self, leaf: str, values: Sequence[int]) -> str:
        """A 1-D int64 initializer (shapes, axes, starts/ends)."""
        return self.const(leaf, np.asarray(list(values), dtype=np.int64))

    def scalar(self, leaf: str, value: float) -> str:
        """A float32 scalar initializer (what torch exports for ``x * 2``)."""
        return self.const(leaf, np.asarray(value, dtype=np.float32))

    def constant_node(self, value: np.ndarray) -> str:
        """A ``Constant`` node holding ``value`` (torch emits these for e.g. Resize scales)."""
        name = self._node_name("Constant")
        out = f"{name}_output_0"
        self.nodes.append(
            helper.make_node(
                "Constant", [], [out], name=name, value=numpy_helper.from_array(np.asarray(value), out)
            )
        )
        self.shapes[out] = tuple(np.asarray(value).shape)
        return out

    # ------------------------------------------------------------------------------- generic ops
    def ops(
        self, op_type: str, inputs: Sequence[str], shapes: Sequence[Shape], **attrs: Any
    ) -> list[str]:
        """Append one ``op_type`` node with ``len(shapes)`` outputs of the given static shapes."""
        name = self._node_name(op_type)
        outs = [f"{name}_output_{i}" for i in range(len(shapes))]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        for out, shp in zip(outs, shapes, strict=True):
            self.shapes[out] = tuple(int(d) for d in shp)
        return outs

    def op(self, op_type: str, inputs: Sequence[str], shape: Shape, **attrs: Any) -> str:
        """Append one single-output ``op_type`` node; return its output name."""
        return self.ops(op_type, inputs, [shape], **attrs)[0]

    def unary(self, op_type: str, x: str, **attrs: Any) -> str:
        """An elementwise op whose output has the shape of ``x`` (Sigmoid, Relu, Erf, ...)."""
        return self.op(op_type, [x], self.shape(x), **attrs)

    def binary(self, op_type: str, a: str, b: str) -> str:
        """A broadcasting elementwise op (Add, Mul, Sub, Div, Pow)."""
        return self.op(op_type, [a, b], tuple(np.broadcast_shapes(self.shape(a), self.shape(b))))

    def add(self, a: str, b: str) -> str:
        return self.binary("Add", a, b)

    def mul(self, a: str, b: str) -> str:
        return self.binary("Mul", a, b)

    def concat(self, xs: Sequence[str], axis: int) -> str:
        """``Concat`` along ``axis`` (non-negative axes only)."""
        first = self.shape(xs[0])
        shape = list(first)
        shape[axis] = sum(self.shape(x)[axis] for x in xs)
        return self.op("Concat", xs, tuple(shape), axis=axis)

    def reshape(self, x: str, shape: Sequence[int]) -> str:
        """``Reshape`` to ``shape`` (one ``-1`` allowed), shape given as an int64 initializer."""
        target = list(shape)
        total = math.prod(self.shape(x))
        if -1 in target:
            known = math.prod(d for d in target if d != -1)
            target[target.index(-1)] = total // known
        if math.prod(target) != total:
            raise ValueError(f"cannot reshape {self.shape(x)} to {tuple(shape)}")
        return self.op("Reshape", [x, self.int64s("shape", shape)], tuple(target))

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        src = self.shape(x)
        return self.op("Transpose", [x], tuple(src[p] for p in perm), perm=list(perm))

    def slice(self, x: str, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int],
              steps: Sequence[int] | None = None) -> str:
        """``Slice`` with constant starts/ends/axes/steps (non-negative axes and starts)."""
        steps = list(steps) if steps is not None else [1] * len(axes)
        shape = list(self.shape(x))
        for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
            shape[a] = max(0, -(-(min(e, shape[a]) - s) // st))
        ins = [x, self.int64s("starts", starts), self.int64s("ends", ends), self.int64s("axes", axes),
               self.int64s("steps", steps)]
        return self.op("Slice", ins, tuple(shape))

    def split(self, x: str, sizes: Sequence[int], axis: int) -> list[str]:
        """``Split`` into ``sizes`` along ``axis`` (opset 13+: sizes as an input)."""
        src = self.shape(x)
        shapes = [tuple(s if i == axis else d for i, d in enumerate(src)) for s in sizes]
        return self.ops("Split", [x, self.int64s("split", sizes)], shapes, axis=axis)

    def gather(self, data: str, index: int, axis: int) -> str:
        """``Gather`` of one scalar index along ``axis`` (drops that axis), like ``x[:, 0]``."""
        idx = self.const("index", np.asarray(index, dtype=np.int64))
        shape = tuple(d for i, d in enumerate(self.shape(data)) if i != axis)
        return self.op("Gather", [data, idx], shape, axis=axis)

    def softmax(self, x: str, axis: int) -> str:
        return self.unary("Softmax", x, axis=axis)

    # ---------------------------------------------------------------------------------- CNN ops
    def conv(self, x: str, cout: int, k: IntOrPair, s: IntOrPair = 1, p: IntOrPair | Pads | None = None,
             *, g: int = 1, bias: bool = True) -> str:
        """``Conv`` (BatchNorm folded into weight and bias, as the exporter does in eval mode).

        ``p=None`` pads ``k // 2`` ("same" for odd kernels, like ultralytics ``autopad``); four values are ONNX's
        ``pads`` (top, left, bottom, right: TensorFlow's asymmetric "same" padding).
        Weights are created under the current scope as ``<scope>.weight`` / ``<scope>.bias``.
        """
        n, cin, h, w = self.shape(x)
        kh, kw = _pair(k)
        sh, sw = _pair(s)
        if isinstance(p, tuple) and len(p) == 4:
            top, left, bottom, right = p
        else:
            ph, pw = _pair(p) if p is not None else (kh // 2, kw // 2)
            top, left, bottom, right = ph, pw, ph, pw
        if cin % g or cout % g:
            raise ValueError(f"groups {g} must divide channels {cin}->{cout}")
        fan_in = cin // g * kh * kw
        ins = [x, self.weight("weight", (cout, cin // g, kh, kw), fan_in, gain=1.0)]
        if bias:
            ins.append(self.bias("bias", cout))
        oh = (h + top + bottom - kh) // sh + 1
        ow = (w + left + right - kw) // sw + 1
        return self.op("Conv", ins, (n, cout, oh, ow), dilations=[1, 1], group=g,
                       kernel_shape=[kh, kw], pads=[top, left, bottom, right], strides=[sh, sw])

    def conv_transpose(self, x: str, cout: int, k: int, s: int, bias: bool = True) -> str:
        """``ConvTranspose`` with no padding (output = (in - 1) * s + k), as in DBNet's head."""
        n, cin, h, w = self.shape(x)
        ins = [x, self.weight("weight", (cin, cout, k, k), cin * k * k // (s * s), gain=2.0)]
        if bias:
            ins.append(self.bias("bias", cout))
        shape = (n, cout, (h - 1) * s + k, (w - 1) * s + k)
        return self.op("ConvTranspose", ins, shape, dilations=[1, 1], group=1, kernel_shape=[k, k],
                       pads=[0, 0, 0, 0], strides=[s, s])

    def batchnorm(self, x: str, eps: float = 1e-5) -> str:
        """An unfolded ``BatchNormalization`` (inference form: scale, bias, mean, var)."""
        c = self.shape(x)[1]
        scale = self.const("weight", (1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        bias = self.const("bias", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        mean = self.const("running_mean", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        var = self.const("running_var", (1.0 + 0.1 * self.rng.random(c)).astype(np.float32))
        self.params += 2 * c
        return self.op("BatchNormalization", [x, scale, bias, mean, var], self.shape(x), epsilon=eps,
                       momentum=0.9)

    def silu(self, x: str) -> str:
        """SiLU as torch exports it below opset 22: ``Mul(x, Sigmoid(x))``."""
        return self.mul(x, self.unary("Sigmoid", x))

    def relu(self, x: str) -> str:
        return self.unary("Relu", x)

    def global_avg_pool(self, x: str) -> str:
        """``nn.AdaptiveAvgPool2d(1)`` as exported: ``GlobalAveragePool`` to (N, C, 1, 1)."""
        n, c, _, _ = self.shape(x)
        return self.op("GlobalAveragePool", [x], (n, c, 1, 1))

    def flatten(self, x: str) -> str:
        """``torch.flatten(x, 1)`` as exported: ``Flatten`` (axis 1)."""
        shape = self.shape(x)
        return self.op("Flatten", [x], (shape[0], int(np.prod(shape[1:]))), axis=1)

    def maxpool(self, x: str, k: IntOrPair, s: IntOrPair,
                pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> str:
        """``MaxPool`` (floor mode); ``pads`` are ONNX order (top, left, bottom, right)."""
        n, c, h, w = self.shape(x)
        kh, kw = _pair(k)
        sh, sw = _pair(s)
        oh = (h + pads[0] + pads[2] - kh) // sh + 1
        ow = (w + pads[1] + pads[3] - kw) // sw + 1
        return self.op("MaxPool", [x], (n, c, oh, ow), ceil_mode=0, dilations=[1, 1],
                       kernel_shape=[kh, kw], pads=list(pads), strides=[sh, sw])

    def upsample_nearest(self, x: str, scale: int) -> str:
        """``nn.Upsample(scale_factor, 'nearest')`` as exported: ``Resize`` with a ``scales`` Constant."""
        n, c, h, w = self.shape(x)
        scales = self.constant_node(np.asarray([1.0, 1.0, scale, scale], dtype=np.float32))
        return self.op("Resize", [x, "", scales], (n, c, h * scale, w * scale),
                       coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.75, mode="nearest",
                       nearest_mode="floor")

    # -------------------------------------------------------------------------- sequence layers
    def linear(self, x: str, out: int, bias: bool = True) -> str:
        """``nn.Linear`` on an N-D input as exported: ``MatMul`` by the transposed weight, ``Add`` bias."""
        shape = self.shape(x)
        w = self.weight("weight", (shape[-1], out), shape[-1])
        y = self.op("MatMul", [x, w], (*shape[:-1], out))
        return self.add(self.bias("bias", out), y) if bias else y

    def gemm(self, x: str, out: int) -> str:
        """``nn.Linear`` on a 2-D input as exported: ``Gemm`` with ``transB=1``."""
        m, k = self.shape(x)
        w = self.weight("weight", (out, k), k)
        return self.op("Gemm", [x, w, self.bias("bias", out)], (m, out), alpha=1.0, beta=1.0, transB=1)

    def layernorm_form(self, family: str, layernorm: str) -> None:
        """Set :attr:`decomposed_layernorm` from a builder's ``layernorm`` parameter: ``"fused"`` (one
        ``LayerNormalization``, torch's export at opset 17 and above) or ``"decomposed"`` (an export at opset
        11-16, as the RDK X5 model zoo exports the timm classifiers: ``opset_version=11``). ``ValueError`` for any
        other value."""
        if layernorm not in LAYERNORM_FORMS:
            raise ValueError(f"{family}: layernorm must be one of {', '.join(LAYERNORM_FORMS)}, got {layernorm!r}")
        self.decomposed_layernorm = layernorm == "decomposed"

    def layernorm(self, x: str, eps: float) -> str:
        """``nn.LayerNorm`` over the last axis: opset-17 ``LayerNormalization``, or with
        :attr:`decomposed_layernorm` the primitive ops torch exports below opset 17 (its ``native_layer_norm``
        symbolic: ``ReduceMean``, ``Sub``, ``Pow`` by 2, ``ReduceMean``, ``Add`` eps, ``Sqrt``, ``Div``, ``Mul`` by
        the weight, ``Add`` the bias; the reductions over the last axis, keeping it)."""
        c = self.shape(x)[-1]
        scale = self.const("weight", (1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        bias = self.const("bias", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        self.params += 2 * c
        if not self.decomposed_layernorm:
            return self.op("LayerNormalization", [x, scale, bias], self.shape(x), axis=-1, epsilon=eps)
        reduced = (*self.shape(x)[:-1], 1)
        mean = self.op("ReduceMean", [x], reduced, axes=[-1], keepdims=1)
        centred = self.binary("Sub", x, mean)
        square = self.binary("Pow", centred, self.scalar("two", 2.0))
        variance = self.op("ReduceMean", [square], reduced, axes=[-1], keepdims=1)
        std = self.unary("Sqrt", self.binary("Add", variance, self.scalar("eps", eps)))
        normed = self.binary("Div", centred, std)
        return self.binary("Add", self.binary("Mul", normed, scale), bias)

    def gelu_erf(self, x: str) -> str:
        """Exact GELU as torch exports it below opset 20: ``x * 0.5 * (1 + erf(x / sqrt(2)))``."""
        e = self.unary("Erf", self.binary("Div", x, self.scalar("sqrt2", math.sqrt(2.0))))
        y = self.mul(x, self.add(e, self.scalar("one", 1.0)))
        return self.mul(y, self.scalar("half", 0.5))

    def lstm(self, x: str, hidden: int, bidirectional: bool = True) -> str:
        """``LSTM`` over ``x`` (seq, batch, input); returns ``Y`` of shape (seq, dirs, batch, hidden).

        Weights are in ONNX gate order (i, o, f, c): W (dirs, 4H, I), R (dirs, 4H, H), B (dirs, 8H).
        """
        t, n, i = self.shape(x)
        dirs = 2 if bidirectional else 1
        w = self.weight("weight_ih", (dirs, 4 * hidden, i), i)
        r = self.weight("weight_hh", (dirs, 4 * hidden, hidden), hidden)
        b = self.bias("bias", (dirs, 8 * hidden))
        direction = "bidirectional" if bidirectional else "forward"
        return self.op("LSTM", [x, w, r, b], (t, dirs, n, hidden), direction=direction,
                       hidden_size=hidden)

    # ------------------------------------------------------------------------------------ model
    def finish(self, y: str, doc: str, metadata: dict[str, str], name: str = "output") -> onnx.ModelProto:
        """:meth:`build` with tensor ``y`` renamed to ``name`` and declared the graph's output."""
        self.output(self.rename(y, name))
        return self.build(doc, metadata)

    def build(self, doc: str, metadata: dict[str, str] | None = None) -> onnx.ModelProto:
        """The finished :class:`onnx.ModelProto` (opset :data:`OPSET`, IR :data:`IR_VERSION`)."""
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                  initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  ir_version=IR_VERSION, producer_name="layerscope.samples",
                                  doc_string=doc)
        props = {"params": str(self.params), **(metadata or {})}
        helper.set_model_props(model, props)
        return model
