"""Seeded random input values: what every command feeds a model when no ``--input`` file is given.

They live with the model because the loader runs the model once on them when it must observe shapes (see
:mod:`layerscope.model.shapes`), and ``profile``/``bench`` feed the very same values
(:mod:`layerscope.measure.inputs`, whose docstring lists the ranges per dtype and input name).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from layerscope.errors import InputError
from layerscope.model.types import TensorInfo

__all__ = ["INT_HIGH", "SUPPORTED_DTYPES", "numpy_dtype", "random_array", "random_kind"]

#: Model dtypes layerscope can make arrays for (numpy names, as :class:`TensorInfo` carries them).
SUPPORTED_DTYPES = frozenset({"float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
                              "uint32", "int64", "uint64", "bool"})
#: Upper bound (exclusive) of random values for integer inputs that are not masks, types or positions.
INT_HIGH = 100
#: How :func:`random_array` fills an input: what :func:`_fill_kind` returns.
_Fill = Literal["uniform", "ones", "zeros", "positions", "bool", "integers"]


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


def random_kind(info: TensorInfo) -> str:
    """How :func:`random_array` fills ``info``, in words (``"uniform [0, 1)"``, ``"ones"``, ...)."""
    dtype = numpy_dtype(info)
    kind = _fill_kind(info, dtype)
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


def random_array(info: TensorInfo, seed: int, index: int = 0) -> np.ndarray:
    """Seeded random values for input ``info`` (see the module docstring).

    The generator is seeded with ``(seed, index)``: ``index`` (the input's position) keeps each input's
    values the same whichever other inputs come from files.
    """
    dtype = numpy_dtype(info)
    rng = np.random.default_rng([seed, index])
    kind = _fill_kind(info, dtype)
    array: np.ndarray
    if kind == "uniform":
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
    return np.ascontiguousarray(array, dtype=dtype)


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
