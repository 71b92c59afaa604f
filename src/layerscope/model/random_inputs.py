"""Seeded random input values: what every command feeds a model when no ``--input`` file is given.

They live with the model because the loader runs the model once on them when it must observe shapes (see
:mod:`layerscope.model.shapes`), and ``profile``/``bench`` feed the very same values
(:mod:`layerscope.measure.inputs`, whose docstring lists the ranges per dtype and input name).

An integer input takes its meaning from the ops that read it (:func:`consumer_hints`), followed through ops that
pass its values on (``Cast``, ``Unsqueeze``, ``Reshape``, ``Flatten``, ``Squeeze``, ``Concat``, ..., ``Where``,
and ``Add``, ``Sub``, ``Mul``, ``Max``, ``Min`` with no constant operand: a mask computed at run time selects among
the values, a constant offset or scale would change them):

- indices (``Gather``, ``GatherElements``, ``ScatterElements``: the data's length along the axis;
  ``GatherND``/``ScatterND``: the shortest data axis they index; ``OneHot``: its depth;
  ``EmbedLayerNormalization``: the rows of its embedding tables) are drawn in ``[0, length)``;
- shape-like inputs get values that are valid whatever the data: ``Reshape``'s shape the data's own shape
  (``1, ..., 1, -1`` when the ranks differ), ``Expand``'s shape and ``Tile``'s repeats ones, ``Slice``'s starts 0,
  ends the data's length, steps 1, ``Pad``'s pads 0, ``TopK``'s k in ``[1, length]``, ``Range``'s start 0, delta
  1, limit in ``[1, INT_HIGH)``;
- a one-element input compared with a constant by ``Equal`` takes that constant (a sample rate that picks an
  ``If`` branch; token ids compared with a padding id are not taken as padding);
- by name (:func:`name_hint`): a sample rate (``sr``, ``sample_rate``) is 16000 unless an ``Equal`` says
  otherwise; a length (``length``, ``lengths``, ``seq_len``) the longest non-batch dim of the other inputs.

Random ops (``RandomNormal(Like)``, ``RandomUniform(Like)``, ``Bernoulli``, ``Multinomial``) draw from the
runtime's own generator, seeded afresh each session unless their ``seed`` attribute is set: :func:`seeded_node`
sets it (:func:`random_op_seed`, a function of the node's first output) wherever layerscope runs a model whose
values must repeat.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from layerscope.errors import InputError, RuntimeFailure, condensed
from layerscope.model.types import TensorInfo

if TYPE_CHECKING:
    import onnx

__all__ = [
    "INT_HIGH",
    "RANDOM_OPS",
    "SAMPLE_RATE",
    "SUPPORTED_DTYPES",
    "IntHint",
    "OpLike",
    "c_contiguous",
    "consumer_hints",
    "hints_in_use",
    "mark_seeded",
    "merged_hints",
    "name_hint",
    "numpy_dtype",
    "random_array",
    "random_kind",
    "random_op_seed",
    "random_ops_note",
    "runtime_failure",
    "seed_in_place",
    "seeded_description",
    "seeded_node",
    "using_hints",
]

#: Model dtypes layerscope can make arrays for (numpy names, as :class:`TensorInfo` carries them).
SUPPORTED_DTYPES = frozenset({"float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
                              "uint32", "int64", "uint64", "bool"})
#: Upper bound (exclusive) of random values for integer inputs that are not masks, types or positions.
INT_HIGH = 100
#: What a sample-rate input is given when no op says otherwise (Hz: the rate of most speech models).
SAMPLE_RATE = 16000
#: ONNX ops that draw random values (their output is not a function of their inputs).
RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                        "Multinomial"})
#: How :func:`random_array` fills an input: what :func:`_fill_kind` returns.
_Fill = Literal["uniform", "ones", "zeros", "positions", "bool", "integers"]

_SAMPLE_RATE_NAME = re.compile(r"(^|[^a-z])(sr|sample_?rate|sampling_?rate|samplerate)$", re.IGNORECASE)
_LENGTH_NAME = re.compile(r"(^|[^a-z])(len|lens|length|lengths|seq_?len|seq_?lens)$", re.IGNORECASE)


@dataclass(frozen=True)
class IntHint:
    """What an integer input means, read from the ops that consume it or from its name.

    Either a range (``low`` inclusive, ``high`` exclusive) to draw from, or fixed ``values`` (one value filling
    the whole input, or one per element in C order); ``why`` says where it comes from, for the user."""

    low: int = 0
    high: int = INT_HIGH
    values: tuple[int, ...] | None = None
    why: str = ""

    def fits(self, info: TensorInfo) -> bool:
        """Whether the fixed values fill ``info`` (one value, or one per element); a range always does."""
        return self.values is None or len(self.values) in (1, info.elements)

    def holds(self, value: int) -> bool:
        """Whether ``value`` is allowed: one of the fixed values, or inside the range."""
        return value in self.values if self.values is not None else self.low <= value < self.high

    def text(self) -> str:
        """``integers in [0, 4) (indices into ...)`` / ``16000 (a sample rate, from its name)``."""
        if self.values is not None:
            shown = ", ".join(map(str, self.values[:8])) + (", ..." if len(self.values) > 8 else "")
            what = shown if len(self.values) == 1 else f"[{shown}]"
        else:
            what = f"integers in [{self.low}, {self.high})"
        return f"{what} ({self.why})" if self.why else what


class OpLike(Protocol):
    """A node as :func:`consumer_hints` reads it: a :class:`~layerscope.model.types.Node`, or an ONNX node seen
    through the loader's adapter (``attrs``: the plain values of its int/float attributes)."""

    @property
    def name(self) -> str: ...

    @property
    def op_type(self) -> str: ...

    @property
    def inputs(self) -> tuple[str, ...]: ...

    @property
    def outputs(self) -> tuple[str, ...]: ...

    @property
    def attrs(self) -> Mapping[str, Any]: ...


#: Ops that pass (some of) an input's values on to their outputs, by the input positions that do (``None``:
#: every input); the second item: whether element order and count are kept (fixed values still fit after them).
_PASS_ON: Mapping[str, tuple[tuple[int, ...] | None, bool]] = {
    "Cast": ((0,), True), "CastLike": ((0,), True), "Identity": ((0,), True), "Unsqueeze": ((0,), True),
    "Squeeze": ((0,), True), "Reshape": ((0,), True), "Flatten": ((0,), True), "Transpose": ((0,), False),
    "Expand": ((0,), False), "Tile": ((0,), False), "Slice": ((0,), False), "Concat": (None, False),
    "Split": ((0,), False), "Gather": ((0,), False), "GatherElements": ((0,), False), "GatherND": ((0,), False),
    # arithmetic with values computed at run time (masks, other indices; see _ARITHMETIC), and a select
    "Add": (None, False), "Sub": (None, False), "Mul": (None, False), "Max": (None, False), "Min": (None, False),
    "Where": ((1, 2), False),
}
#: The arithmetic of :data:`_PASS_ON`: it passes an input's values on only when none of its other operands is a
#: constant (an offset or a scale changes the values; a mask computed from the input selects among them). tf2onnx
#: lowers Keras' negative-index wrap ``where(ids < 0, ids + rows, ids)`` to ``Add(Mul(Add(ids, rows), ids < 0),
#: Mul(ids, ids >= 0))``: the values reaching the Gather are the input's own through the second path.
_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Max", "Min"})
#: ``EmbedLayerNormalization`` (ONNX Runtime contrib): an ids input position -> the embedding table it indexes.
_EMBED_TABLES: Mapping[int, int] = {0: 2, 1: 4, 8: 3}
#: How many ops deep :func:`consumer_hints` follows an input's values.
_MAX_DEPTH = 12

ShapeOf = Callable[[str], "tuple[int, ...] | None"]
ValueOf = Callable[[str], "np.ndarray | None"]


def consumer_hints(inputs: Sequence[TensorInfo], nodes: Iterable[OpLike], shape_of: ShapeOf,
                   value_of: ValueOf) -> dict[str, IntHint]:
    """What the ops reading each integer input (through the ops that pass its values on, :data:`_PASS_ON`) say
    about its values: see the module docstring. ``shape_of`` / ``value_of``: a tensor's static shape / constant
    value, ``None`` when unknown. Inputs no rule speaks of are absent."""
    readers: dict[str, list[tuple[OpLike, int]]] = {}
    for node in nodes:
        for index, name in enumerate(node.inputs):
            if name:
                readers.setdefault(name, []).append((node, index))
    hints: dict[str, IntHint] = {}
    for info in inputs:
        if info.dtype not in SUPPORTED_DTYPES or np.dtype(info.dtype).kind not in "iu":
            continue
        found = list(_hints_for(info.name, readers, shape_of, value_of))
        merged = _merge(found)
        if merged is not None:
            hints[info.name] = merged
    return hints


def _hints_for(name: str, readers: Mapping[str, list[tuple[OpLike, int]]], shape_of: ShapeOf,
               value_of: ValueOf) -> Iterator[IntHint]:
    """Every rule's hint for the values of tensor ``name``, following them through :data:`_PASS_ON` ops."""
    frontier: list[tuple[str, bool]] = [(name, True)]
    seen = {name}
    for _ in range(_MAX_DEPTH):
        following: list[tuple[str, bool]] = []
        for tensor, ordered in frontier:
            for node, index in readers.get(tensor, ()):
                hint = _rule(node, index, tensor, shape_of, value_of)
                if hint is not None:
                    yield hint if ordered or hint.values is None else IntHint(hint.low, hint.high, None, hint.why)
                passes = _PASS_ON.get(node.op_type)
                if passes is None or (passes[0] is not None and index not in passes[0]):
                    continue
                if node.op_type in _ARITHMETIC and any(
                        value_of(other) is not None for other in node.inputs if other and other != tensor):
                    continue
                for out in node.outputs:
                    if out and out not in seen:
                        seen.add(out)
                        following.append((out, ordered and passes[1]))
        if not following:
            return
        frontier = following


def _label(node: OpLike) -> str:
    return f"{node.op_type} {node.name or (node.outputs[0] if node.outputs else '')!r}"


def _axis_length(shape: tuple[int, ...] | None, axis: object) -> int | None:
    """``shape[axis]`` (a negative axis counts from the end); ``None`` when unknown or out of range."""
    if shape is None or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        return None
    length = shape[axis]
    return length if length > 0 else None


def _length_of(shape: tuple[int, ...] | None) -> int | None:
    """The element count of a vector input (a shape, starts, repeats ...); ``None`` when not a known vector."""
    if shape is None or len(shape) > 1:
        return None
    return shape[0] if shape else 1


def _rule(node: OpLike, index: int, tensor: str, shape_of: ShapeOf, value_of: ValueOf) -> IntHint | None:
    """The hint ``node`` gives the values of ``tensor``, its input ``index``; ``None`` when it gives none."""
    op, attrs, label = node.op_type, node.attrs, _label(node)
    data = node.inputs[0] if node.inputs else ""
    if index == 1 and op in ("Gather", "GatherElements", "ScatterElements", "Scatter"):
        axis = attrs.get("axis", 0)
        length = _axis_length(shape_of(data), axis)
        return None if length is None else IntHint(0, length, why=f"indices into axis {axis} of {data!r}, "
                                                                  f"{length} long, by {label}")
    if index == 1 and op in ("GatherND", "ScatterND"):
        return _nd_hint(node, tensor, shape_of)
    if index == 0 and op == "OneHot" and len(node.inputs) > 1:
        depth = value_of(node.inputs[1])
        if depth is not None and depth.size == 1 and int(depth.reshape(-1)[0]) > 0:
            return IntHint(0, int(depth.reshape(-1)[0]), why=f"indices of {label}, depth {int(depth.reshape(-1)[0])}")
        return None
    if op == "EmbedLayerNormalization" and index in _EMBED_TABLES and len(node.inputs) > _EMBED_TABLES[index]:
        table = node.inputs[_EMBED_TABLES[index]]
        rows = _axis_length(shape_of(table), 0)
        return None if rows is None else IntHint(0, rows, why=f"rows of {table!r} ({rows}) read by {label}")
    if op == "Equal":  # a scalar selecting a branch (a sample rate); ids compared with a pad id are not one
        shape = shape_of(tensor)
        if shape is None or math.prod(shape) != 1:
            return None
        other = value_of(node.inputs[1 - index]) if len(node.inputs) == 2 else None
        if other is not None and other.size == 1 and np.issubdtype(other.dtype, np.number):
            value = int(other.reshape(-1)[0])
            return IntHint(values=(value,), why=f"compared with {value} by {label}")
        return None
    return _shape_like(node, index, tensor, shape_of, value_of)


def _nd_hint(node: OpLike, tensor: str, shape_of: ShapeOf) -> IntHint | None:
    """``GatherND``/``ScatterND`` indices: below the shortest data axis they index."""
    data = node.inputs[0]
    batch = node.attrs.get("batch_dims", 0) if node.op_type == "GatherND" else 0
    indices, shape = shape_of(tensor), shape_of(data)
    if not indices or shape is None or not isinstance(batch, int):
        return None
    dims = shape[batch: batch + indices[-1]]
    if not dims or min(dims) <= 0:
        return None
    return IntHint(0, min(dims), why=f"indices into {data!r} (axes of {', '.join(map(str, dims))}) by "
                                     f"{_label(node)}")


def _shape_like(node: OpLike, index: int, tensor: str, shape_of: ShapeOf,
                value_of: ValueOf) -> IntHint | None:
    """Hints for the shape-like inputs of ``node``: values valid whatever the data (see the module docstring)."""
    op, label = node.op_type, _label(node)
    data = node.inputs[0] if node.inputs else ""
    count = _length_of(shape_of(tensor))
    if op == "Reshape" and index == 1 and count:
        shape = shape_of(data)
        if shape is not None and len(shape) == count:
            return IntHint(values=tuple(shape), why=f"the shape of {data!r}, which {label} reshapes")
        return IntHint(values=(1,) * (count - 1) + (-1,), why=f"a shape valid for any data, for {label}")
    if ((op in ("Expand", "Tile") and index == 1) or (op == "Slice" and index == 4)) and count:
        return IntHint(values=(1,) * count, why=f"ones, valid for any data, for {label}")
    if ((op == "Slice" and index == 1) or (op == "Pad" and index == 1)) and count:
        return IntHint(values=(0,) * count, why=f"zeros, valid for any data, for {label}")
    if op == "Slice" and index == 2 and count:
        return _slice_ends(node, count, shape_of, value_of)
    if op == "TopK" and index == 1:
        length = _axis_length(shape_of(data), node.attrs.get("axis", -1))
        return None if length is None else IntHint(1, length + 1, why=f"k of {label}, at most {length}")
    if op == "Range":
        if index == 1:
            return IntHint(1, INT_HIGH, why=f"the limit of {label}")
        return IntHint(values=(0,) if index == 0 else (1,), why=f"the {'start' if index == 0 else 'delta'} of {label}")
    return None


def _slice_ends(node: OpLike, count: int, shape_of: ShapeOf, value_of: ValueOf) -> IntHint | None:
    """``Slice``'s ends: the data's whole length along each sliced axis."""
    shape = shape_of(node.inputs[0])
    if shape is None:
        return None
    axes_value = value_of(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
    axes = [int(a) for a in axes_value.reshape(-1)] if axes_value is not None else list(range(count))
    lengths = [_axis_length(shape, axis) for axis in axes]
    if len(lengths) != count or any(n is None for n in lengths):
        return None
    return IntHint(values=tuple(n for n in lengths if n is not None),
                   why=f"the whole length of each axis {_label(node)} slices")


def _merge(hints: Sequence[IntHint]) -> IntHint | None:
    """One hint from several consumers': fixed values every range allows, else the ranges' intersection (the
    narrowest range when they do not meet), else the first fixed values."""
    if not hints:
        return None
    ranges = [h for h in hints if h.values is None]
    fixed = [h for h in hints if h.values is not None]
    for hint in fixed:
        assert hint.values is not None
        if all(r.holds(v) for r in ranges for v in hint.values):
            return hint
    if not ranges:
        return fixed[0]
    low, high = max(r.low for r in ranges), min(r.high for r in ranges)
    if low >= high:
        return min(ranges, key=lambda r: r.high - r.low)
    why = "; ".join(dict.fromkeys(r.why for r in ranges if r.low <= low and r.high >= high and r.why))
    narrowest = [r for r in ranges if (r.low, r.high) == (low, high)]
    return narrowest[0] if narrowest else IntHint(low, high, why=why)


def name_hint(info: TensorInfo, inputs: Sequence[TensorInfo]) -> IntHint | None:
    """What an integer input's name says: a sample rate is :data:`SAMPLE_RATE`; a length (``x_lengths``,
    ``seq_len``) of at most a few elements is the longest non-batch dim of the other inputs of rank >= 2."""
    if info.dtype not in SUPPORTED_DTYPES or np.dtype(info.dtype).kind not in "iu" or info.elements > 64:
        return None
    if _SAMPLE_RATE_NAME.search(info.name):
        return IntHint(values=(SAMPLE_RATE,), why="a sample rate, from its name")
    if _LENGTH_NAME.search(info.name):
        dims = [(d, other.name) for other in inputs if other.name != info.name and len(other.shape) >= 2
                for d in other.shape[1:]]
        if dims:
            longest, source = max(dims)
            return IntHint(values=(longest,), why=f"a length, from its name: the longest dim of {source!r}")
    return None


def merged_hints(inputs: Sequence[TensorInfo], consumers: Mapping[str, IntHint]) -> dict[str, IntHint]:
    """The hint each input is filled by: its consumers' (:func:`consumer_hints`), or its name's
    (:func:`name_hint`) when the consumers say nothing or allow it; hints whose fixed values do not fit the
    input's shape are dropped."""
    out: dict[str, IntHint] = {}
    for info in inputs:
        hint = consumers.get(info.name)
        named = name_hint(info, inputs)
        if named is not None and named.values is not None and (
                hint is None or (hint.values is None and all(hint.holds(v) for v in named.values))):
            hint = named
        if hint is not None and hint.fits(info):
            out[info.name] = hint
    return out


_HINTS: contextvars.ContextVar[Mapping[str, IntHint] | None] = contextvars.ContextVar("layerscope_hints",
                                                                                       default=None)


@contextlib.contextmanager
def using_hints(hints: Mapping[str, IntHint]) -> Iterator[None]:
    """Within the block, seeded inputs made without hints of their own use ``hints`` (by input name): how the
    loader's shape observation passes what it read of the model to the feeder it was given."""
    token = _HINTS.set(hints)
    try:
        yield
    finally:
        _HINTS.reset(token)


def hints_in_use() -> Mapping[str, IntHint]:
    """The hints of the enclosing :func:`using_hints` block (``{}`` outside one)."""
    return _HINTS.get() or {}


def _fill_kind(info: TensorInfo, dtype: np.dtype) -> _Fill:
    name = info.name.lower()
    if dtype.kind == "f":
        return "uniform"
    if "mask" in name:
        return "ones"
    if "type" in name or "segment" in name:
        return "zeros"
    if "position" in name and info.shape:
        return "positions"
    return "bool" if dtype.kind == "b" else "integers"


def _hint_applies(info: TensorInfo, kind: _Fill, hint: IntHint | None) -> bool:
    """Whether ``hint`` decides ``info``'s values: always for plain integers; for a mask, type or position input
    only when its usual values (ones, zeros, 0..n-1) break it."""
    if hint is None or not hint.fits(info):
        return False
    if kind == "integers":
        return True
    if kind == "ones":
        return not hint.holds(1)
    if kind == "zeros":
        return not hint.holds(0)
    if kind == "positions":
        return not all(hint.holds(v) for v in range(info.shape[-1]))
    return False


def random_kind(info: TensorInfo, hint: IntHint | None = None) -> str:
    """How :func:`random_array` fills ``info`` (with ``hint``), in words (``"uniform [0, 1)"``, ``"ones"``, ...)."""
    dtype = numpy_dtype(info)
    kind = _fill_kind(info, dtype)
    if _hint_applies(info, kind, hint):
        assert hint is not None
        return hint.text()
    if kind == "uniform":
        return "uniform [0, 1)"
    if kind == "positions":
        return "0, 1, 2, ... along the last axis"
    if kind == "bool":
        return "True/False"
    if kind == "integers":
        low, high = _int_range(dtype)
        return f"integers in [{low}, {high})"
    return kind


def random_array(info: TensorInfo, seed: int, index: int = 0, hint: IntHint | None = None) -> np.ndarray:
    """Seeded random values for input ``info`` (see the module docstring), within ``hint`` where it applies.

    The generator is seeded with ``(seed, index)``: ``index`` (the input's position) keeps each input's
    values the same whichever other inputs come from files.
    """
    dtype = numpy_dtype(info)
    rng = np.random.default_rng([seed, index])
    kind = _fill_kind(info, dtype)
    array: np.ndarray
    if _hint_applies(info, kind, hint):
        assert hint is not None
        array = _hinted(info, dtype, hint, rng)
    elif kind == "uniform":
        array = rng.random(info.shape, dtype=np.float64).astype(dtype)
    elif kind == "ones":
        array = np.ones(info.shape, dtype)
    elif kind == "zeros":
        array = np.zeros(info.shape, dtype)
    elif kind == "positions":
        array = np.broadcast_to(np.arange(info.shape[-1]).astype(dtype), info.shape)
    elif kind == "bool":
        array = rng.integers(0, 2, info.shape).astype(dtype)
    else:
        low, high = _int_range(dtype)
        array = rng.integers(low, high, info.shape, dtype=dtype)
    return c_contiguous(array, dtype)


def c_contiguous(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array`` as a C-contiguous array of ``dtype`` in native byte order, of its own shape (``ascontiguousarray``
    makes a scalar one-dimensional); not copied when it already is one."""
    out = np.asarray(array, dtype=dtype.newbyteorder("="))
    return out if out.flags.c_contiguous else np.array(out, order="C")


def _hinted(info: TensorInfo, dtype: np.dtype, hint: IntHint, rng: np.random.Generator) -> np.ndarray:
    """``info``'s values as ``hint`` says: its fixed values, or integers drawn in its range (within the dtype's)."""
    limits = np.iinfo(dtype)
    if hint.values is not None:
        values = np.clip(np.asarray(hint.values, dtype=np.int64), limits.min, limits.max).astype(dtype)
        return np.full(info.shape, values[0], dtype) if values.size == 1 else values.reshape(info.shape)
    low = max(hint.low, int(limits.min))
    high = min(hint.high, int(limits.max) + 1)
    return rng.integers(low, max(high, low + 1), info.shape, dtype=dtype)


def _int_range(dtype: np.dtype) -> tuple[int, int]:
    if dtype == np.uint8:
        return 0, 256
    if dtype == np.int8:
        return -128, 128
    return 0, INT_HIGH


def numpy_dtype(info: TensorInfo) -> np.dtype:
    """The numpy dtype of input ``info``; ``InputError`` for dtypes layerscope cannot make arrays of."""
    if info.dtype not in SUPPORTED_DTYPES:
        raise InputError(f"input {info.name!r} is {info.dtype}: layerscope cannot make or read arrays of that "
                         f"dtype (supported: {', '.join(sorted(SUPPORTED_DTYPES))})")
    return np.dtype(info.dtype)


def random_input_bytes(info: TensorInfo) -> int:
    """Peak bytes :func:`random_array` allocates for ``info``: the array, plus the float64 draw that
    uniform values are made from. Computed from shape x dtype, before anything is allocated."""
    dtype = numpy_dtype(info)
    elements = math.prod(info.shape)
    extra = 8 if _fill_kind(info, dtype) == "uniform" and dtype != np.float64 else 0
    return elements * (dtype.itemsize + extra)


#: Arrays :func:`mark_seeded` registered (by id, held weakly) and how each was filled.
_SEEDED: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
_DESCRIPTIONS: dict[int, str] = {}


def mark_seeded(array: np.ndarray, description: str) -> None:
    """Remember that ``array`` holds seeded random values, filled as ``description`` says: a runtime failure on
    it then names it as a seeded input (:func:`seeded_description`). Held weakly: nothing outlives the array."""
    key = id(array)
    _SEEDED[key] = array
    _DESCRIPTIONS[key] = description
    weakref.finalize(array, _DESCRIPTIONS.pop, key, None)


def seeded_description(array: object) -> str | None:
    """How ``array`` was filled when :func:`mark_seeded` registered it (the very object), else ``None``."""
    key = id(array)
    return _DESCRIPTIONS.get(key) if _SEEDED.get(key) is array else None


def runtime_failure(runtime: str, error: BaseException | str, feeds: Mapping[str, object], *,
                    what: str = "the model", hint: str | None = None) -> RuntimeFailure:
    """The error for ``runtime`` (``"ONNX Runtime"``, ``"OpenVINO"``) failing to run ``what`` on ``feeds``: one line
    with its reason :func:`~layerscope.errors.condensed`, naming the inputs that were seeded random values
    (:func:`seeded_description`) and telling how to give real ones; ``hint`` (e.g. another precision to try)
    comes first in the hint."""
    text = str(error)
    reason = condensed(text) or (type(error).__name__ if isinstance(error, BaseException) else "no reason given")
    seeded = {name: desc for name, array in feeds.items() if (desc := seeded_description(array)) is not None}
    # integer and bool inputs (ids, indices, shapes, lengths) are what seeded values break; floats rarely
    suspects = {name: desc for name, desc in seeded.items()
                if isinstance(array := feeds[name], np.ndarray) and array.dtype.kind != "f"} or seeded
    if seeded:
        listed = ", ".join(f"{name} ({desc})" for name, desc in suspects.items())
        others = [name for name in seeded if name not in suspects]
        if others:
            listed += f" (and the float input(s) {', '.join(others)}, uniform [0, 1))"
        message = f"{runtime} failed running {what} on seeded random input(s) {listed}: {reason}"
        give = " ".join(f"--input {name}=FILE.npy" for name in suspects)
        advice = f"seeded values may not suit this model: give real ones with {give}"
    else:
        message = f"{runtime} failed running {what} on the inputs given: {reason}"
        advice = "check the values in the --input files"
    return RuntimeFailure(message, hint=f"{hint}; {advice}" if hint else advice, inputs=tuple(suspects))


def random_op_seed(output: str) -> float:
    """The seed layerscope gives a random op without one: a function of its first output's name, so that the
    same node draws the same values in the whole model and in every part cut from it."""
    return float(zlib.crc32(output.encode("utf-8")) % 1_000_003)


def _is_unseeded_random(node: onnx.NodeProto) -> bool:
    return node.op_type in RANDOM_OPS and node.domain in ("", "ai.onnx") and \
        not any(attr.name == "seed" for attr in node.attribute)


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    from onnx import AttributeProto

    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def _needs_seed(node: onnx.NodeProto) -> bool:
    return _is_unseeded_random(node) or any(_needs_seed(n) for g in _subgraphs(node) for n in g.node)


def seed_in_place(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """Set the ``seed`` attribute (:func:`random_op_seed`) of ``node`` and of the nodes of its subgraphs that are
    random ops without one; returns the nodes changed (each got one attribute, appended last)."""
    from onnx import helper

    changed = []
    if _is_unseeded_random(node):
        node.attribute.append(helper.make_attribute("seed", random_op_seed(next((o for o in node.output if o),
                                                                                      node.name))))
        changed.append(node)
    for graph in _subgraphs(node):
        for inner in graph.node:
            changed.extend(seed_in_place(inner))
    return changed


def seeded_node(node: onnx.NodeProto) -> onnx.NodeProto:
    """``node`` itself when neither it nor its subgraphs hold a random op without a seed; else a copy whose
    random ops have one (:func:`seed_in_place`)."""
    from onnx import NodeProto

    if not _needs_seed(node):
        return node
    copy = NodeProto()
    copy.CopyFrom(node)
    seed_in_place(copy)
    return copy


def random_ops_note(nodes: Iterable[OpLike], *, observed: bool) -> tuple[str, ...]:
    """One line (an assumption) when ``nodes`` hold random ops: the model draws random values, and what was
    assumed of them (``observed``: its shapes came from one run with every random op's seed fixed)."""
    drawn = [node for node in nodes if node.op_type in RANDOM_OPS]
    if not drawn:
        return ()
    named = ", ".join(_label(node) for node in drawn[:3]) + (f" and {len(drawn) - 3} more" if len(drawn) > 3 else "")
    if observed:
        return (f"the model draws random values ({named}): shapes were observed in one run with each random op's "
                "seed fixed, so every estimate is the same (bisect's cut models keep those seeds); a measured run "
                "draws new values each run, and shapes that depend on them may differ from those estimated",)
    return (f"the model draws random values ({named}): its shapes do not depend on them (measured runs draw new "
            "values each run)",)
