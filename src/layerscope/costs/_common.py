"""Helpers shared by every cost family: tensor lookups, the one I/O byte count, LayerCost assembly.

Contracts:
- an omitted optional input or output (``""``) has size 0 and is never an error;
- a named output without a shape is an optional output nobody reads (the loader leaves those
  unresolved): it counts 0 bytes;
- a named *input* always has a shape (the loader guarantees it); a cost function that needs one
  that is missing gets :class:`MissingShapeError`, which :func:`layerscope.costs.cost_layer`
  turns into a bytes-only ``known=False`` cost with a logged warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from layerscope.costs.types import LayerCost, UnitKind
from layerscope.costs.weights import SETTING_INPUTS, LearnedTensors, learned_tensors
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node, TensorInfo

#: A cost function: one node of a resolved graph -> its hardware-independent cost.
CostFn = Callable[[Node, Graph], LayerCost]

#: A family's table: ``(domain, op_type) -> cost function``; domain ``""`` is the ONNX domain.
CostTable = Mapping[tuple[str, str], CostFn]

ONNX = ""
MS = "com.microsoft"

#: The cost functions declared with :func:`tensor_only`.
_TENSOR_ONLY: set[CostFn] = set()


def tensor_only(fn: CostFn) -> CostFn:
    """Declare that ``fn``'s cost of a node, but for its ``layer_id`` and the text of an exception it raises, is a
    function of the node's op type and :func:`tensor_signature` alone: it reads no attribute, no constant's value
    and no tensor or node name beyond telling present inputs from omitted ones. Such costs are computed once per
    class of alike layers (see :func:`layerscope.costs.classify_costs`). Returns ``fn``."""
    _TENSOR_ONLY.add(fn)
    return fn


def is_tensor_only(fn: CostFn) -> bool:
    """Whether ``fn`` was declared with :func:`tensor_only`."""
    return fn in _TENSOR_ONLY


#: One input or output position in a :func:`tensor_signature`: ``""`` omitted, ``None`` named but without a shape,
#: else ``(shape, dtype, learned)`` of an input (``learned``: ``None`` for an activation; for a constant, the elements
#: of the learned tensors it is made of, :func:`layerscope.costs.weights.learned_tensors`) or ``(shape, dtype)`` of an
#: output.
PositionSignature = tuple[tuple[int, ...], str, int | None] | tuple[tuple[int, ...], str] | str | None

#: A node's :func:`tensor_signature`: its inputs', then its outputs' position signatures.
TensorSignature = tuple[tuple[PositionSignature, ...], tuple[PositionSignature, ...]]


def tensor_signature(node: Node, graph: Graph) -> TensorSignature | None:
    """What a :func:`tensor_only` cost function may read of ``node``'s tensors, position by position: the inputs'
    shapes, dtypes, constant-ness and learned elements (a layer's params), and the outputs' shapes and dtypes (see
    :data:`PositionSignature`).

    ``None`` when two inputs name the same tensor: the cost then depends on which positions share it (it is
    read once), which the signature does not say.
    """
    tensors, constants = graph.tensors, graph.constants
    inputs = node.inputs
    if len(set(inputs)) != len(inputs) and _repeats_a_name(inputs):
        return None
    learned: LearnedTensors | None = None
    ins: list[PositionSignature] = []
    for name in inputs:
        info = tensors.get(name) if name else None
        if info is None:
            ins.append(None if name else "")
        elif name in constants:
            learned = learned or learned_tensors(graph)
            ins.append((info.shape, info.dtype, learned.elements_behind(name)))
        else:
            ins.append((info.shape, info.dtype, None))
    outs: list[PositionSignature] = []
    for name in node.outputs:
        info = tensors.get(name) if name else None
        outs.append((info.shape, info.dtype) if info is not None else None if name else "")
    return tuple(ins), tuple(outs)


def _repeats_a_name(names: tuple[str, ...]) -> bool:
    """Whether a name other than ``""`` (an omitted input) occurs twice."""
    present = [name for name in names if name]
    return len(set(present)) != len(present)


class MissingShapeError(LayerscopeError):
    """A tensor a cost function needs has no shape in the graph (a loader contract violation)."""


def has_input(node: Node, index: int) -> bool:
    """Whether input ``index`` is present (not beyond the list, not an omitted ``""``)."""
    return index < len(node.inputs) and bool(node.inputs[index])


def tensor_of(graph: Graph, name: str, node: Node) -> TensorInfo:
    """The tensor ``name`` read or written by ``node``; ``MissingShapeError`` when it has no shape."""
    info = graph.tensor(name)
    if info is None:
        raise MissingShapeError(f"layer {node.id!r} ({node.op_type}): tensor {name!r} has no shape")
    return info


def in_shape(node: Node, graph: Graph, index: int = 0) -> tuple[int, ...]:
    """Shape of input ``index``; ``MissingShapeError`` when it is absent or has no shape."""
    if not has_input(node, index):
        raise MissingShapeError(f"layer {node.id!r} ({node.op_type}): input {index} is absent")
    return tensor_of(graph, node.inputs[index], node).shape


def out_shape(node: Node, graph: Graph, index: int = 0) -> tuple[int, ...]:
    """Shape of output ``index``; ``MissingShapeError`` when it is absent or has no shape."""
    if index >= len(node.outputs) or not node.outputs[index]:
        raise MissingShapeError(f"layer {node.id!r} ({node.op_type}): output {index} is absent")
    return tensor_of(graph, node.outputs[index], node).shape


def in_elements(node: Node, graph: Graph, index: int = 0) -> int:
    return math.prod(in_shape(node, graph, index))


def out_elements(node: Node, graph: Graph, index: int = 0) -> int:
    return math.prod(out_shape(node, graph, index))


def present_inputs(node: Node) -> int:
    """How many inputs are present (omitted optional ones not counted)."""
    return sum(1 for name in node.inputs if name)


#: Ops that read only the rows their indices select from their data input (input 0).
GATHER_OPS = frozenset({"Gather", "GatherElements", "GatherND"})


def constant_elements_read(node: Node, graph: Graph, info: TensorInfo) -> int:
    """Elements of the constant ``info`` that ``node`` actually reads.

    All of them, except the table a Gather indexes (an embedding): only the gathered rows, i.e. as many
    elements as the output holds (at most the whole table).
    """
    if node.op_type in GATHER_OPS and node.inputs and node.inputs[0] == info.name:
        out = graph.tensor(node.outputs[0]) if node.outputs else None
        if out is not None:
            return min(info.elements, out.elements)
    return info.elements


@dataclass(frozen=True)
class IOBytes:
    """What a layer reads and writes. See :func:`io_bytes`."""

    act: int
    weight: int
    written: int
    params: int
    dtype: str


def io_bytes(node: Node, graph: Graph, *, params_from: Iterable[int] | None = None,
             reads_data: bool = True) -> IOBytes:
    """The bytes ``node`` moves, its learned parameter count and its dtype. Written once, used by all.

    - ``act``: Σ bytes of the non-constant inputs; ``weight``: Σ bytes of the constant inputs
      (:meth:`Graph.is_constant`); ``written``: Σ bytes of the outputs. A tensor named twice among
      the inputs (``Mul(x, x)``) is read once. ``reads_data=False`` (Shape, Size: they read only
      metadata) makes ``act`` and ``weight`` 0.
    - ``params``: the elements of the learned tensors of the model (:mod:`layerscope.costs.weights`: floats and
      quantized integers, not scalars, not settings) that its constant inputs are made of, each tensor once: a
      weight read directly, the whole table a folded Slice of it comes from, the int8 weight behind a folded
      DequantizeLinear, none for a folded ConstantOfShape. Inputs at a setting position of the op
      (:data:`~layerscope.costs.weights.SETTING_INPUTS`) never count; ``params_from``, when given, names the only
      positions that may (e.g. ``()`` for an op whose constant inputs are all settings).
    - ``dtype``: the dtype of the first non-constant input with a shape, else of the first output,
      else of the first input, else ``"float32"``.
    """
    tensors, constants = graph.tensors, graph.constants
    act = weight = 0
    act_dtype = input_dtype = None
    seen: set[str] = set()
    for name in node.inputs:
        info = tensors.get(name) if name else None
        if info is None or name in seen:
            continue
        seen.add(name)
        if input_dtype is None:
            input_dtype = info.dtype
        if name in constants:
            weight += constant_elements_read(node, graph, info) * info.itemsize
        else:
            act += info.nbytes
            if act_dtype is None:
                act_dtype = info.dtype
    if not reads_data:
        act = weight = 0
    outputs = _tensors(graph, node.outputs)
    written = sum(info.nbytes for info in outputs)
    params = _params(node, graph, params_from)
    dtype = act_dtype if act_dtype is not None else outputs[0].dtype if outputs else \
        input_dtype if input_dtype is not None else "float32"
    return IOBytes(act=act, weight=weight, written=written, params=params, dtype=dtype)


def _tensors(graph: Graph, names: Iterable[str]) -> list[TensorInfo]:
    return [info for info in (graph.tensor(n) for n in names) if info is not None]


def _params(node: Node, graph: Graph, params_from: Iterable[int] | None) -> int:
    """:func:`io_bytes`' ``params``: the learned tensors behind the constant inputs at ``params_from`` (``None``:
    every position) that are not settings of the op, each once."""
    constants = graph.constants
    inputs = node.inputs
    positions = range(len(inputs)) if params_from is None else params_from
    settings = SETTING_INPUTS.get(node.op_type, frozenset())
    if settings is None:
        return 0
    counted = [inputs[i] for i in positions
               if i < len(inputs) and inputs[i] in constants and i not in settings]
    return learned_tensors(graph).behind(counted) if counted else 0


def layer_cost(node: Node, graph: Graph, unit: UnitKind, *, macs: int = 0, flops: int = 0,
               params_from: Iterable[int] | None = None, reads_data: bool = True,
               known: bool = True) -> LayerCost:
    """Assemble a :class:`LayerCost` from the arithmetic counts and :func:`io_bytes`."""
    io = io_bytes(node, graph, params_from=params_from, reads_data=reads_data)
    return LayerCost(
        layer_id=node.id,
        op_type=node.op_type,
        unit_kind=unit,
        macs=int(macs),
        flops=int(flops),
        bytes_read_act=io.act,
        bytes_read_weight=io.weight,
        bytes_written=io.written,
        params=io.params,
        dtype=io.dtype,
        known=known,
    )


@tensor_only
def zero_copy_cost(node: Node, graph: Graph) -> LayerCost:
    """A view (Reshape, Squeeze, Identity, Dropout at inference ...): no arithmetic, no bytes, no params."""
    io = io_bytes(node, graph, params_from=())
    return LayerCost(layer_id=node.id, op_type=node.op_type, unit_kind=UnitKind.ZERO_COPY, macs=0,
                     flops=0, bytes_read_act=0, bytes_read_weight=0, bytes_written=0, params=0,
                     dtype=io.dtype)


def unknown_cost(node: Node, graph: Graph) -> LayerCost:
    """The cost of an op with no cost function: bytes only, one FLOP per output element, ``known=False``.

    Never raises: outputs without a shape count 0 elements.
    """
    flops = sum(info.elements for info in _tensors(graph, node.outputs))
    return layer_cost(node, graph, UnitKind.SCALAR, flops=flops, known=False)


def per_output_cost(flops_per_output: int, unit: UnitKind = UnitKind.VECTOR, *,
                    params_from: Iterable[int] | None = None) -> CostFn:
    """A cost function of ``output elements × flops_per_output`` FLOPs (output 0; broadcast included)."""
    positions = None if params_from is None else tuple(params_from)

    @tensor_only
    def cost(node: Node, graph: Graph) -> LayerCost:
        return layer_cost(node, graph, unit, flops=out_elements(node, graph) * flops_per_output,
                          params_from=positions)

    return cost


def scan_cost(per_input: int, per_output: int, unit: UnitKind, *,
              params_from: Iterable[int] | None = None) -> CostFn:
    """A cost function of ``input elements × per_input + output elements × per_output`` FLOPs:
    reductions, global pools, scans (input 0, output 0)."""
    positions = None if params_from is None else tuple(params_from)

    @tensor_only
    def cost(node: Node, graph: Graph) -> LayerCost:
        flops = in_elements(node, graph) * per_input + out_elements(node, graph) * per_output
        return layer_cost(node, graph, unit, flops=flops, params_from=positions)

    return cost


def table(ops: Iterable[str], fn: CostFn, domain: str = ONNX) -> dict[tuple[str, str], CostFn]:
    """``{(domain, op): fn}`` for each op: the building block of a family's ``COSTS`` table."""
    return {(domain, op): fn for op in ops}


def attr_ints(node: Node, key: str, default: Iterable[int] = ()) -> tuple[int, ...]:
    """An ints attribute as a tuple (``default`` when absent)."""
    value = node.attr(key)
    return tuple(int(v) for v in (default if value is None else value))


def attr_str(node: Node, key: str, default: str) -> str:
    value = node.attr(key)
    return default if value is None else str(value)
