"""Load an ONNX file into a resolved :class:`~layerscope.model.types.Graph`.

Contract of :func:`load_model`:
- the file is parsed without reading external weight data (so models over 2 GB work and load fast);
  every external-data reference must resolve inside the model's folder, else ``ModelError``;
- symbolic input dims are set from ``shapes`` (``--shape NAME=1x3x640x640``), then from ``dims``
  (``--dim NAME=V``, every input dim called NAME), then batch-like dims default to 1 (``Graph.assumptions``
  says so; see :mod:`layerscope.model.shapes`); an input left with an unresolved dim, or a ``shapes`` entry
  for an unknown input, is a ``ShapeError`` that names them all and suggests ``--dim``/``--shape``;
- constant subgraphs (Constant, ConstantOfShape, Shape of a static tensor, and every node computed only
  from constants) are folded: their outputs become weights in ``Graph.constants``, not layers;
- every tensor a layer reads or writes gets a static shape and a dtype: from ONNX shape inference, else
  ONNX Runtime's symbolic inference, else by running the model once on ONNX Runtime (each layer's
  ``shape_source`` says which); only a model ONNX Runtime cannot run is refused (``ShapeError``). A tensor
  that has no shape even then (a sequence or map, an output the runtime did not report) leaves its layers
  with ``shape_source`` ``"unknown"``: they are layers all the same, their cost unknown;
- control-flow subgraphs (``If``/``Loop``/``Scan``) are expanded into layers for what ran
  (:mod:`layerscope.model.control_flow`).

Where :mod:`layerscope.offload` forks (a process the command line owns, a second CPU), the shape inference of a
model of :data:`OFFLOAD_MIN_NODES` nodes or more is made in a child process while the loader checks the model, and
read back once the checks pass; the same result as made here, which the loader makes itself when the child gives
none.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from layerscope import limits, offload
from layerscope.digest import Sha256, changed, changed_error
from layerscope.errors import ModelError, ShapeError
from layerscope.model import control_flow, wire
from layerscope.model.random_inputs import random_ops_note
from layerscope.model.shapes import Feeds, apply_dims, complete, declared_dims, input_hint, layer_source
from layerscope.model.sparse_read import read_sparse
from layerscope.model.types import Graph, Node, TensorInfo, made_node
from layerscope.model.validate import (
    GRAPH_INPUT,
    GRAPH_NAME,
    GRAPH_NODE,
    GRAPH_OUTPUT,
    GRAPH_VALUE_INFO,
    MODEL_FUNCTIONS,
    MODEL_GRAPH,
    MODEL_IR_VERSION,
    MODEL_OPSET_IMPORT,
    SMALL_CONST_ELEMENTS,
    Layout,
    NodeFields,
    bytes_layout,
    checker_bytes,
    file_layout,
    guard_inference,
    is_shape_data_dims,
    node_fields,
    raw_data_bytes,
    raw_data_span,
    reads_subgraph,
    tensors,
    typed_input,
    validate_model,
    without_large_raw_data,
)
from layerscope.model.validate import topological as _topological

#: Ops whose output is not a function of their inputs: never folded.
_NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                               "Multinomial", "Bernoulli"})
#: Ops whose output depends only on the (static) shape of their input, not its values.
_SHAPE_ONLY = frozenset({"Shape", "Size"})

_ONNX_TO_NUMPY: Mapping[int, str] = {
    TensorProto.FLOAT: "float32",
    TensorProto.DOUBLE: "float64",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.INT64: "int64",
    TensorProto.UINT64: "uint64",
    TensorProto.INT32: "int32",
    TensorProto.UINT32: "uint32",
    TensorProto.INT16: "int16",
    TensorProto.UINT16: "uint16",
    TensorProto.INT8: "int8",
    TensorProto.UINT8: "uint8",
    TensorProto.BOOL: "bool",
    TensorProto.STRING: "string",
    TensorProto.COMPLEX64: "complex64",
    TensorProto.COMPLEX128: "complex128",
}


def onnx_dtype_name(elem_type: int) -> str:
    """numpy-style name of an ONNX element type (``float8*`` types map to ``"float8"``)."""
    if elem_type in _ONNX_TO_NUMPY:
        return _ONNX_TO_NUMPY[elem_type]
    name = TensorProto.DataType.Name(elem_type).lower() if elem_type in TensorProto.DataType.values() else ""
    if name.startswith("float8"):
        return "float8"
    if name in ("int4", "uint4"):
        return name
    return name or "float32"


#: Names ``onnx_dtype_name`` gives that are not 1:1 with an ONNX type -> the type layerscope writes back.
_NAME_TO_ONNX: Mapping[str, int] = {
    **{name: elem for elem, name in _ONNX_TO_NUMPY.items()},
    "float8": TensorProto.FLOAT8E4M3FN,
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
}


def onnx_elem_type(dtype: str) -> int:
    """The ONNX element type of a ``TensorInfo.dtype`` name (inverse of :func:`onnx_dtype_name`).

    ``float8`` maps to FLOAT8E4M3FN (the variants are not told apart); other names that
    :func:`onnx_dtype_name` passes through are ONNX's own type names, lower-cased.
    """
    if dtype in _NAME_TO_ONNX:
        return _NAME_TO_ONNX[dtype]
    return int(TensorProto.DataType.Value(dtype.upper()))


def parse_shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse ``NAME=1x3x640x640`` (``,`` also separates dims). ``ShapeError`` when malformed."""
    name, sep, dims = text.rpartition("=")
    if not sep or not name or not dims:
        raise ShapeError(f"--shape {text!r}: expected NAME=DIMS, e.g. images=1x3x640x640")
    parts = dims.replace(",", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise ShapeError(f"--shape {text!r}: dims must be positive integers separated by 'x'") from None
    if any(d <= 0 for d in shape):
        raise ShapeError(f"--shape {text!r}: dims must be positive integers")
    return name, shape


#: Protobuf cannot parse a message of 2 GiB or more: a bigger .onnx must keep its weights as external data.
PROTOBUF_LIMIT_BYTES = 2**31


class _Read(NamedTuple):
    """A model file as :func:`_read_model` read it."""

    #: The model, its large weights' values left out when ``stripped`` names any.
    model: onnx.ModelProto
    #: The SHA-256 of the file, being computed.
    sha256: Sha256
    #: The file's bytes when it is binary protobuf (``None``: another format); those of the large weights' values
    #: zero when they were not read (:mod:`layerscope.model.sparse_read`).
    data: wire.ReadBuffer | None
    #: The fields' spans in ``data`` (:func:`bytes_layout`; ``None``: not read).
    layout: Layout | None
    #: The initializers whose ``raw_data`` the model was parsed without (:func:`without_large_raw_data`).
    stripped: tuple[int, ...]


def _read_model(path: Path, started: Sha256 | None = None) -> _Read:
    """The model at ``path`` (its weights' external data not read; its large weights' values, which loading never
    reads, left out when the file is laid out as :mod:`layerscope.model.wire` reads it), the SHA-256 of the file
    (being computed), and the file's bytes when it is binary protobuf (the format ``onnx.load_model`` reads from its
    extension), which the validator's checker reads instead of serializing the model again.

    A big binary file is read without those values (:mod:`layerscope.model.sparse_read`: they stay zero in the bytes
    returned) and hashed from the file on a thread; ``ModelError`` when the file is written or replaced meanwhile
    (:func:`layerscope.digest.changed`: the hash would not be of the bytes parsed). Any other file is read whole
    into one buffer and hashed from it. ``started``: the file's hash as :func:`layerscope.digest.prefetch`
    started it, used in place of either when the file opened is the one it hashes. The file is read, never mapped: a
    mapped file truncated by another process while it is read (a model exported again over the one being estimated)
    kills the reader with SIGBUS, where a read gives bytes that fail to parse with one line."""
    if not path.exists():
        raise ModelError(f"{path}: no such file")
    if not path.is_file():
        raise ModelError(f"{path}: not a file")
    size = path.stat().st_size
    if size >= PROTOBUF_LIMIT_BYTES:
        raise ModelError(f"{path}: {size / 1e9:.2f} GB in one file is over protobuf's 2 GiB limit for an ONNX model",
                         hint="save the weights as external data: onnx.save_model(model, path, "
                              "save_as_external_data=True)")
    # read as onnx.load_model reads the path: the format from its extension, protobuf when it names none
    extension = os.path.splitext(path)[1]
    binary = (onnx.serialization.registry.get_format_from_file_extension(extension) or "protobuf") == "protobuf"
    layout: Layout | None = None
    stripped: tuple[int, ...] = ()
    try:
        with path.open("rb", buffering=0) as f:
            opened = os.fstat(f.fileno())
            # the hash started before the file was opened (prefetch) when it is of this file; else a big model read
            # without its large weights' values is hashed from the file on a thread from the first value it leaves
            # unread
            hashing: list[Sha256] = [started] if started is not None and started.stat is not None and \
                not changed(opened, started.stat) else []

            def skipping() -> None:
                if not hashing:
                    hashing.append(Sha256(path=path, stat=opened))

            whole = b""
            sparse = read_sparse(f, opened.st_size, skipping=skipping) if binary else None
            if sparse is None:
                f.seek(0)  # where the walk left off
                whole = f.readall()
            file_hash = hashing[0] if hashing else None
            if file_hash is not None and changed(os.fstat(f.fileno()), opened):
                raise changed_error(path)
        data: wire.ReadBuffer
        light: tuple[bytes, tuple[int, ...]] | None = None
        if sparse is not None:
            assert file_hash is not None
            data, layout, sha256, light = sparse.data, sparse.layout, file_hash, (sparse.light, sparse.stripped)
            del sparse
        else:
            data = whole
            sha256 = file_hash if file_hash is not None else Sha256(whole)
            layout = bytes_layout(whole) if binary else None
            light = without_large_raw_data(whole, layout) if layout is not None else None
        if layout is not None:  # counted in the file: a model of millions of nodes is refused before parsing
            _check_node_count(path, sum(span.number == GRAPH_NODE for span in layout.graph))
        if light is not None:
            (light_data, stripped), light = light, None  # the bytes parsed are not held through the checks
            model = _parse_model(light_data)
            del light_data
        elif binary:
            model = _parse_model(whole)
        else:
            named = io.BytesIO(whole)
            named.name = str(path)
            model = onnx.load_model(named, load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: not a readable ONNX model ({first})",
                         hint="is the file complete? a truncated download fails this way") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.graph.node:
        raise ModelError(f"{path}: not an ONNX model (no graph or no nodes)",
                         hint="is the file complete? a truncated download fails this way")
    if not model.opset_import:
        raise ModelError(f"{path}: the model declares no opset (the file may be truncated)")
    _check_node_count(path, len(model.graph.node))
    return _Read(model, sha256, data if binary else None, layout, stripped)


def _check_node_count(path: Path, nodes: int) -> None:
    """``OverBudget`` (exit 2) when the main graph of the model at ``path`` has more nodes than the ``nodes``
    budget of :mod:`layerscope.limits`."""
    limits.check("nodes", nodes, f"{path}: the main graph has {nodes:,} nodes")


def _check_tensor_sizes(path: Path, infos: Mapping[str, TensorInfo]) -> None:
    """``OverBudget`` (exit 2) naming the first tensor of ``infos`` whose declared or inferred shape has more
    elements than the ``elements`` budget (dims such as 2**31 x 2**31 overflow the 64-bit sizes of the estimate)."""
    budget = limits.limit("elements")
    for info in infos.values():
        if info.elements > budget:
            dims = " x ".join(f"{d:,}" for d in info.shape)
            limits.check("elements", info.elements, f"{path}: tensor {info.name!r} is {dims} "
                                                     f"({info.elements:,} elements)")


def _check_loop_trips(path: Path, protos: Iterable[onnx.NodeProto], values: Mapping[str, np.ndarray]) -> None:
    """``OverBudget`` (exit 2) for a ``Loop`` node whose trip count is a constant over the ``loop_trips`` budget:
    executing it (to observe shapes, or to measure) would run for days. A trip count known only at run time is
    bounded by the ``run_s`` budget instead."""
    for node in protos:
        if node.op_type != "Loop" or not node.input or not node.input[0] or node.input[0] not in values:
            continue
        trips = values[node.input[0]]
        if trips.size == 1 and np.issubdtype(trips.dtype, np.integer):
            count = int(trips.reshape(()))
            limits.check("loop_trips", count, f"{path}: Loop {(node.name or node.output[0])!r} "
                                              f"runs {count:,} iterations")


def _with_weights(model: onnx.ModelProto, path: Path, sha256: Sha256, stripped: tuple[int, ...], layout: Layout,
                  ) -> onnx.ModelProto:
    """``model`` with the values of the weights :func:`_read_model` left out (the initializers ``stripped``) put
    back, read again from ``path`` (``sha256``: the file's as first read, ``layout``: its spans); for executing it.
    ``ModelError`` when the file changed since it was read."""
    data = path.read_bytes() if path.is_file() else b""
    if hashlib.sha256(data).hexdigest() != sha256.hexdigest():
        raise ModelError(f"{path}: the file changed while it was being read",
                         hint="run again once the model is written")
    initializers = model.graph.initializer
    for index in stripped:
        raw = raw_data_span(data, layout.initializers[index])
        assert raw is not None  # the bytes first read (the hash above), where every weight left out had one
        initializers[index].raw_data = data[raw.value:raw.end]
    return model


def _parse_model(data: bytes) -> onnx.ModelProto:
    """The binary protobuf ``data`` parsed as ``onnx.load_model`` parses it (``deserialize_proto``: the same
    ``DecodeError`` when protobuf reads fewer bytes than given)."""
    model = onnx.ModelProto()
    decoded = model.ParseFromString(data)
    if decoded is not None and decoded != len(data):
        raise DecodeError(f"Protobuf decoding consumed too few bytes: {decoded} out of {len(data)}")
    return model


def _check_external_data(model: onnx.ModelProto, base_dir: Path, rows: list[NodeFields]) -> None:
    """Every external-data location must be a relative path that stays inside ``base_dir`` (``rows``:
    :func:`node_fields` of the graph's nodes)."""
    root = base_dir.resolve()
    for tensor in tensors(model, rows):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        if "\x00" in location:
            raise ModelError(f"tensor {tensor.name!r}: external data location {location!r} (in {root}) holds a NUL "
                             "byte; refusing to read it")
        shown = location if len(location) <= 120 else f"{location[:100]}... ({len(location):,} characters)"
        try:
            target = (root / location).resolve()
            if not location or Path(location).is_absolute() or not target.is_relative_to(root):
                raise ModelError(
                    f"tensor {tensor.name!r}: external data location {shown!r} is outside the model's folder "
                    f"{root}; refusing to read it")
            if not target.is_file():
                raise ModelError(f"tensor {tensor.name!r}: external data file {shown!r} not found in {root}")
        except OSError as exc:  # a name too long for the file system, a loop of links
            raise ModelError(f"tensor {tensor.name!r}: external data location {shown!r} (in {root}) cannot be "
                             f"read: {exc.strerror or exc}") from None


def _tensor_value(tensor: TensorProto, base_dir: Path) -> np.ndarray:
    if tensor.data_location == TensorProto.EXTERNAL:
        copy = TensorProto()
        copy.CopyFrom(tensor)
        onnx.external_data_helper.load_external_data_for_tensor(copy, str(base_dir))
        return numpy_helper.to_array(copy)
    return numpy_helper.to_array(tensor)


def _dims(value_info: onnx.ValueInfoProto) -> list[int | str | None]:
    dims: list[int | str | None] = []
    for d in value_info.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def _apply_input_shapes(model: onnx.ModelProto, runtime_inputs: list[onnx.ValueInfoProto],
                        shapes: Mapping[str, tuple[int, ...]]) -> None:
    by_name = {vi.name: vi for vi in runtime_inputs}
    unknown = [name for name in shapes if name not in by_name]
    if unknown:
        known = ", ".join(f"{vi.name}{_fmt_dims(_dims(vi))}" for vi in runtime_inputs)
        raise ShapeError(f"--shape names unknown input(s) {', '.join(unknown)}; the model's inputs: {known}")
    for name, shape in shapes.items():
        vi = by_name[name]
        old = _dims(vi)
        if old and len(old) != len(shape):
            raise ShapeError(f"--shape {name}: {len(shape)} dims given, the model's input "
                             f"{name}{_fmt_dims(old)} has {len(old)}")
        for i, (was, new) in enumerate(zip(old, shape, strict=False)):
            if isinstance(was, int) and was != new:
                raise ShapeError(f"--shape {name}: dim {i} is fixed to {was} in the model, {new} given")
        vi.type.tensor_type.shape.Clear()
        for d in shape:
            vi.type.tensor_type.shape.dim.add().dim_value = d


def _fmt_dims(dims: list[int | str | None]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _check_static_inputs(path: Path, runtime_inputs: list[onnx.ValueInfoProto],
                         declared: Mapping[str, list[int | str | None]]) -> None:
    """``ShapeError`` naming every input still not static, with its dims as the model ``declared`` them."""
    unresolved = [vi for vi in runtime_inputs
                  if not vi.type.tensor_type.HasField("shape") or any(not isinstance(d, int) for d in _dims(vi))]
    if unresolved:
        listed = "; ".join(f"{vi.name}{_fmt_dims(declared.get(vi.name, _dims(vi)))}" for vi in unresolved)
        first = unresolved[0]
        raise ShapeError(f"{path.name}: input dims not fixed: {listed}",
                         hint=input_hint(first.name, declared.get(first.name, _dims(first)),
                                         onnx_dtype_name(first.type.tensor_type.elem_type)))


#: An initializer's fields as :func:`_initializer_fields` reads them: name, data type, dims.
_InitializerFields = tuple[str, int, tuple[int, ...]]


def _initializer_fields(model: onnx.ModelProto) -> list[_InitializerFields]:
    """Each initializer's name, data type and dims, in order, read from protobuf once (the loader's steps read
    them from these tuples). Equal dims are one tuple: a big model's weights are of a few shapes."""
    shapes: dict[tuple[int, ...], tuple[int, ...]] = {}
    return [(t.name, t.data_type, shapes.setdefault(dims := tuple(t.dims), dims)) for t in model.graph.initializer]


def _shape_data(initializers: list[_InitializerFields]) -> list[bool]:
    """Whether shape inference is given each initializer's values (:func:`is_shape_data_dims`), in order
    (``initializers``: :func:`_initializer_fields` of the model)."""
    return [is_shape_data_dims(dims) for _, _, dims in initializers]


def _left_out(model: onnx.ModelProto, shape_data: list[bool]) -> bool:
    """Whether the model for shape inference (:func:`_without_large_weights`) is not ``model`` itself."""
    return not all(shape_data) or model.ir_version < 4


class _TypedWeight(NamedTuple):
    """A weight shape inference sees as a typed graph input (:func:`_typed_weights`)."""

    name: str
    dims: tuple[int, ...]
    #: The graph's ``input`` field standing for it, serialized.
    field: bytes


def _typed_weights(model: onnx.ModelProto, initializers: list[_InitializerFields], shape_data: list[bool],
                   ) -> list[_TypedWeight]:
    """The initializers (``initializers``: :func:`_initializer_fields` of ``model``) whose values shape inference is
    not given (not ``shape_data``, :func:`_shape_data`) and that are not listed as graph inputs already, in order,
    each as the graph input standing for it."""
    listed = {vi.name for vi in model.graph.input}
    types: dict[tuple[int, tuple[int, ...]], bytes] = {}
    return [_TypedWeight(name, dims, wire.length_delimited(GRAPH_INPUT, typed_input(name, data_type, dims, types)))
            for (name, data_type, dims), keep in zip(initializers, shape_data, strict=True)
            if not keep and name not in listed]


def _without_large_weights(model: onnx.ModelProto, shape_data: list[bool] | None = None,
                           typed: list[_TypedWeight] | None = None) -> onnx.ModelProto:
    """A copy for shape inference where weights are typed graph inputs, not data.

    Shape inference needs only their dims; serialising tens of MB of weights for it (and parsing them back
    from its result) would dominate the load time and memory. Initializers that may hold shape data keep their
    values, which data propagation may need: scalars and vectors (every shape-like input of an ONNX op --
    Reshape's shape, Resize's scales, Range's bounds, axes, pads -- is one) of at most
    :data:`SMALL_CONST_ELEMENTS`. A model with nothing to leave out (IR version 4 or later) is returned as it
    is, not copied: never change the result. ``shape_data`` and ``typed``: :func:`_shape_data` and
    :func:`_typed_weights` of ``model``, when the caller has them.
    """
    initializers = _initializer_fields(model) if shape_data is None or typed is None else []
    if shape_data is None:
        shape_data = _shape_data(initializers)
    if not _left_out(model, shape_data):
        return model  # nothing to leave out: the model itself (its readers, shape inference included, copy it)
    if typed is None:
        typed = _typed_weights(model, initializers, shape_data)
    graph = model.graph
    # helper.make_model(helper.make_graph(...)) built in place: the nodes are copied once, not twice (make_model
    # copies the graph make_graph made); the same message
    light = onnx.ModelProto(ir_version=max(model.ir_version, 4))
    copy = light.graph
    copy.node.extend(graph.node)
    copy.name = graph.name or "g"
    copy.input.extend(graph.input)
    copy.MergeFromString(b"".join(weight.field for weight in typed))  # appended to the inputs, in order
    copy.output.extend(graph.output)
    copy.initializer.extend(t for t, keep in zip(graph.initializer, shape_data, strict=True) if keep)
    copy.value_info.extend(graph.value_info)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    return light


class _Cut(NamedTuple):
    """The fields of a model that :func:`_without_large_weights` copies as they are, cut from the file's bytes
    (:func:`_inference_cut`)."""

    #: Of the ``ModelProto``: opset_import and functions.
    top: bytes
    #: Of the ``GraphProto``: node, output, value_info and the initializers that may hold shape data.
    graph: bytes


def _inference_cut(data: wire.ReadBuffer, layout: Layout, shape_data: list[bool]) -> _Cut:
    """The fields :func:`_without_large_weights` copies from the model as they are, cut from ``data`` (the bytes the
    model was parsed from, its :func:`file_layout` ``layout``), each in its order: with the fields it writes anew
    (:func:`_light_bytes`), the same message, without copying the nodes through Python objects."""
    view = memoryview(data)
    graph = [view[span.start:span.end] for span in layout.graph if span.number in _CUT_GRAPH_FIELDS]
    graph.extend(view[span.start:span.end] for span, keep in zip(layout.initializers, shape_data, strict=True) if keep)
    top = [view[span.start:span.end] for span in layout.top if span.number in _CUT_MODEL_FIELDS]
    return _Cut(b"".join(top), b"".join(graph))


#: What :func:`_inference_cut` keeps of a model's and its graph's fields (onnx.proto field numbers).
_CUT_MODEL_FIELDS = frozenset({MODEL_OPSET_IMPORT, MODEL_FUNCTIONS})
_CUT_GRAPH_FIELDS = frozenset({GRAPH_NODE, GRAPH_OUTPUT, GRAPH_VALUE_INFO})


def _light_bytes(model: onnx.ModelProto, cut: _Cut, typed: list[_TypedWeight]) -> bytes:
    """:func:`_without_large_weights` of ``model``, serialized, from its :func:`_inference_cut` and
    :func:`_typed_weights`: the fields it writes anew (IR version, graph name, the graph's inputs as they are now)
    added to those cut from the file."""
    graph = [cut.graph, wire.length_delimited(GRAPH_NAME, (model.graph.name or "g").encode()),
             *(wire.length_delimited(GRAPH_INPUT, vi.SerializeToString()) for vi in model.graph.input),
             *(weight.field for weight in typed)]
    return b"".join([wire.varint_field(MODEL_IR_VERSION, max(model.ir_version, 4)), cut.top,
                     wire.header(MODEL_GRAPH, sum(len(part) for part in graph)), *graph])


#: ONNX's data propagation holds the values of rank-0/1 tensors it follows; a graph input of rank <= 1 with
#: more elements than this (a 750 M-element vector: std::bad_alloc after GBs) turns it off.
DATA_PROP_MAX_ELEMENTS = 1 << 20


def _unbounded_data_prop(model: onnx.ModelProto) -> tuple[str, int] | None:
    """The first graph input of rank <= 1 over :data:`DATA_PROP_MAX_ELEMENTS` (name, elements), which makes
    data propagation unsafe; ``None`` when it is safe."""
    for vi in model.graph.input:
        if len(vi.type.tensor_type.shape.dim) > 1:  # most inputs (weights typed as inputs) stop here
            continue
        elements = _over_data_prop(_dims(vi))
        if elements is not None:
            return vi.name, elements
    return None


def _over_data_prop(dims: list[int | str | None]) -> int | None:
    """The elements of a graph input of ``dims`` (as :func:`_dims` reads them) that makes data propagation
    unsafe: of rank <= 1, static, over :data:`DATA_PROP_MAX_ELEMENTS`; ``None`` for any other."""
    if len(dims) <= 1 and all(isinstance(d, int) for d in dims):
        elements = math.prod(d for d in dims if isinstance(d, int))
        if elements > DATA_PROP_MAX_ELEMENTS:
            return elements
    return None


def _data_prop_is_bounded(model: onnx.ModelProto) -> bool:
    """Whether data propagation is safe: no graph input of rank <= 1 over :data:`DATA_PROP_MAX_ELEMENTS`."""
    return _unbounded_data_prop(model) is None


def _light_data_prop_is_bounded(model: onnx.ModelProto, typed: list[_TypedWeight]) -> bool:
    """:func:`_data_prop_is_bounded` of :func:`_without_large_weights` of ``model`` (``typed``: its
    :func:`_typed_weights`): its graph inputs are ``model``'s and the typed weights, each dim a value."""
    return _data_prop_is_bounded(model) and not any(
        _over_data_prop([d if d > 0 else None for d in weight.dims]) for weight in typed if len(weight.dims) <= 1)


def _limit_notes(model: onnx.ModelProto, unfolded: Iterable[onnx.NodeProto]) -> tuple[str, ...]:
    """One line per load-time limit that changed how shapes were found (printed with the other assumptions):
    data propagation turned off for a huge vector input, constant nodes left as layers because their values
    were not computed at load."""
    notes: list[str] = []
    unbounded = _unbounded_data_prop(model)
    if unbounded is not None:
        name, elements = unbounded
        notes.append(f"ONNX data propagation off: input {name!r} has {elements:,} elements (over "
                     f"{DATA_PROP_MAX_ELEMENTS:,}); shapes that depend on its values come from execution")
    kept = [n.name or n.output[0] for n in unfolded if n.output]
    if kept:
        more = f" and {len(kept) - 3} more" if len(kept) > 3 else ""
        notes.append(f"{len(kept)} constant node(s) not folded ({', '.join(map(repr, kept[:3]))}{more}): their "
                     f"values were not computed at load (inputs or outputs over {SMALL_CONST_ELEMENTS:,} elements, "
                     "or an op ONNX's reference evaluator cannot run) and their shapes depend on them, so they "
                     "stay layers, measured as usual")
    return tuple(notes)


#: Nodes from which a model's shape inference is made in a child process beside the loader's checks
#: (:mod:`layerscope.offload`: a second core's time; ``benchmarks/README.md`` gives what it buys): below, the fork
#: costs more than the inference it moves.
OFFLOAD_MIN_NODES = 10_000


def _runtime_inputs(model: onnx.ModelProto, path: Path, initializers: list[_InitializerFields],
                    shapes: Mapping[str, tuple[int, ...]] | None, dims: Mapping[str, int] | None,
                    ) -> tuple[set[str], list[onnx.ValueInfoProto], tuple[str, ...]]:
    """The initializers' names, the graph's inputs that are not initializers, with ``shapes`` then ``dims`` applied
    to them in ``model`` (:func:`_apply_input_shapes`, :func:`apply_dims`), and the assumptions the dims made;
    ``ShapeError`` for an unknown input in ``shapes`` or an input left with a dim not fixed."""
    init_names = {name for name, _, _ in initializers}
    runtime_inputs = [vi for vi in model.graph.input if vi.name not in init_names]
    _apply_input_shapes(model, runtime_inputs, shapes or {})
    declared = {vi.name: declared_dims(vi) for vi in runtime_inputs}
    assumptions = apply_dims(runtime_inputs, dims or {})
    _check_static_inputs(path, runtime_inputs, declared)
    return init_names, runtime_inputs, assumptions


def _inference_input(model: onnx.ModelProto, cut: _Cut | None, initializers: list[_InitializerFields],
                     shape_data: list[bool], weights: Mapping[str, TensorInfo],
                     ) -> tuple[onnx.ModelProto | bytes, bool, list[TensorInfo]]:
    """What :func:`_infer` is given for ``model`` (its inputs as :func:`_runtime_inputs` left them): the model with
    its weights typed as inputs (:func:`_light_bytes` from ``cut``, else :func:`_without_large_weights`), whether
    data propagation is safe on it, and the typed weights' infos (``weights``: :func:`_initializer_infos`)."""
    typed = _typed_weights(model, initializers, shape_data)
    light = _light_bytes(model, cut, typed) if cut is not None else _without_large_weights(model, shape_data, typed)
    return light, _light_data_prop_is_bounded(model, typed), [weights[weight.name] for weight in typed]


def _inferred_in_child(model: onnx.ModelProto, path: Path, *, initializers: list[_InitializerFields],
                       shape_data: list[bool], cut: _Cut | None, shapes: Mapping[str, tuple[int, ...]] | None,
                       dims: Mapping[str, int] | None) -> bytes:
    """:func:`_infer`'s result for ``model``, as the loader asks for it once its checks pass, in a child process
    (:mod:`layerscope.offload`) while they run: :func:`_runtime_inputs` and :func:`_inference_input` made as the
    loader makes them, after the checks that keep shape inference from running away (:func:`guard_inference`),
    encoded by :func:`_infos_bytes`. Raises where the loader refuses the model (which it then does itself)."""
    guard_inference(model, path)
    _runtime_inputs(model, path, initializers, shapes, dims)
    light, data_prop, typed_infos = _inference_input(model, cut, initializers, shape_data,
                                                     _initializer_infos(initializers))
    return _infos_bytes(_inference_key(light, data_prop), _infer(light, data_prop=data_prop, typed=typed_infos))


def _inference_key(light: onnx.ModelProto | bytes, data_prop: bool) -> str:
    """What identifies one shape inference (:func:`_infer` of ``light`` with ``data_prop``): a BLAKE2 hash of the
    serialized model and the flag."""
    data = light if isinstance(light, bytes) else light.SerializeToString()
    return f"{hashlib.blake2b(data, digest_size=16).hexdigest()}:{int(data_prop)}"


def _infos_bytes(key: str, infos: Mapping[str, TensorInfo]) -> bytes:
    """``infos`` (each under its own name, as :func:`_infer` gives them) as JSON, with the ``key`` of the inference
    that gave them (:func:`_inference_key`): the names in order, each with the index of its (shape, dtype) among the
    few a model has."""
    kinds: dict[tuple[tuple[int, ...], str], int] = {}
    of = [kinds.setdefault((info.shape, info.dtype), len(kinds)) for info in infos.values()]
    return json.dumps({"key": key, "kinds": list(kinds), "names": list(infos), "of": of}).encode()


def _infos_from(data: bytes | None, light: onnx.ModelProto | bytes, data_prop: bool,
                ) -> dict[str, TensorInfo] | None:
    """The infos :func:`_infos_bytes` encoded in ``data``, when they are of the inference of ``light`` with
    ``data_prop`` (else ``None``: the caller infers them itself)."""
    if data is None:
        return None
    document = json.loads(data)
    if document["key"] != _inference_key(light, data_prop):
        return None
    kinds = [TensorInfo("", tuple(shape), dtype) for shape, dtype in document["kinds"]]
    return {name: kinds[k].renamed(name) for name, k in zip(document["names"], document["of"], strict=True)}


#: A type :func:`_infer` has not read yet (``None`` is a type read, of no static shape).
_UNSEEN = TensorInfo("", (), "")


def _infer(model: onnx.ModelProto | bytes, *, data_prop: bool, typed: Sequence[TensorInfo] = (),
           ) -> dict[str, TensorInfo]:
    """Run ONNX shape inference on ``model`` (a message or serialized), with data propagation when ``data_prop``
    (:func:`_data_prop_is_bounded` of the model); return every tensor whose shape came out fully static.

    ``typed``: the infos of the model's last ``len(typed)`` graph inputs, in order (the weights typed as inputs,
    :func:`_typed_weights`). Shape inference does not change a graph input's type, so they are taken as given, not
    read back from its result; one with a dim 0 is left out, as for any input (:func:`_is_static`)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                                     data_prop=data_prop)
    except Exception as exc:  # onnx raises several internal error types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ShapeError(f"ONNX shape inference failed: {first}") from None
    infos: dict[str, TensorInfo] = {}
    graph = inferred.graph
    inputs = graph.input
    # in the order of the graph's fields, as a later one (value_info, output) of a name overrides an earlier
    _read_types(inputs[: len(inputs) - len(typed)], infos)
    infos.update((info.name, info) for info in typed if _is_static(info.shape))
    _read_types(chain(graph.value_info, graph.output), infos)
    infos.update(_initializer_infos(_initializer_fields(inferred)))
    return infos


def _read_types(value_infos: Iterable[onnx.ValueInfoProto], infos: dict[str, TensorInfo]) -> None:
    """Add the tensor of each of ``value_infos`` whose shape is fully static (:func:`_static_shape`) to ``infos``,
    in order (a later one of a name overrides an earlier)."""
    # tensors of one type (shape and dtype) are read once: a 100k-layer model has 100k tensors of a few types
    types: dict[bytes, TensorInfo | None] = {}
    for vi in value_infos:
        key = vi.type.SerializeToString()
        known = types.get(key, _UNSEEN)
        if known is _UNSEEN:
            shape = _static_shape(vi)
            dtype = onnx_dtype_name(vi.type.tensor_type.elem_type)
            known = types[key] = None if shape is None else TensorInfo("", shape, dtype)
        if known is not None:
            name = vi.name
            infos[name] = known.renamed(name)


def _initializer_infos(initializers: list[_InitializerFields]) -> dict[str, TensorInfo]:
    """``TensorInfo(name, dims, dtype)`` of each initializer (``initializers``: :func:`_initializer_fields`), by
    name, in order."""
    kinds: dict[tuple[int, tuple[int, ...]], TensorInfo] = {}
    return {name: _initializer_info(name, data_type, dims, kinds) for name, data_type, dims in initializers}


def _initializer_info(name: str, data_type: int, dims: tuple[int, ...],
                      kinds: dict[tuple[int, tuple[int, ...]], TensorInfo]) -> TensorInfo:
    """``TensorInfo(name, dims, dtype)`` of an initializer; ``kinds`` holds one per (data type, dims) met so far,
    which the others copy with their sizes (a big model's weights are of a few kinds)."""
    key = (data_type, dims)
    known = kinds.get(key)
    if known is None:
        known = kinds[key] = TensorInfo(name, dims, onnx_dtype_name(data_type))
    return known.renamed(name)


def _static_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    """The dims of a tensor whose every dim is a positive value (what :func:`_dims` gives as ints), else ``None``
    (not a tensor, no shape, a symbolic or unknown dim). The one loop every inferred tensor goes through."""
    if vi.type.WhichOneof("value") != "tensor_type":
        return None
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    dims = tuple([d.dim_value for d in tt.shape.dim])  # 0 when unset or a dim_param
    return dims if _is_static(dims) else None


def _is_static(dims: tuple[int, ...]) -> bool:
    """Whether a tensor of ``dims`` (as shape inference writes them, 0 for an unknown dim) has a static shape, which
    the loader's tensors must have: every dim a positive value."""
    return min(dims, default=1) > 0


_INT = onnx.AttributeProto.INT
_INTS = onnx.AttributeProto.INTS
_FLOAT = onnx.AttributeProto.FLOAT
_FLOATS = onnx.AttributeProto.FLOATS


def _attrs(attributes: Iterable[onnx.AttributeProto]) -> dict[str, Any]:
    """A node's ``attributes`` as plain Python values (:class:`Node`'s ``attrs``)."""
    out: dict[str, Any] = {}
    for attr in attributes:
        kind = attr.type
        if kind == _INT:  # the common kinds first, as helper.get_attribute_value reads them
            out[attr.name] = attr.i
        elif kind == _INTS:
            out[attr.name] = list(attr.ints)
        elif kind == _FLOAT:
            out[attr.name] = attr.f
        elif kind == _FLOATS:
            out[attr.name] = list(attr.floats)
        elif kind == onnx.AttributeProto.TENSOR:
            out[attr.name] = numpy_helper.to_array(attr.t) if attr.t.data_location != TensorProto.EXTERNAL else None
        elif attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            out[attr.name] = f"<subgraph {attr.name}>"
        else:
            value = helper.get_attribute_value(attr)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif isinstance(value, list):
                value = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
            out[attr.name] = value
    return out


def layer_ids_of(nodes: list[onnx.NodeProto]) -> list[str]:
    """Stable ids: the node name when unique, else ``op(first output)``; ``~N`` on any collision."""
    return _ids(node_fields(nodes))


def _ids(rows: list[NodeFields]) -> list[str]:
    """:func:`layer_ids_of` of the nodes whose fields are ``rows``."""
    names = [row[0] for row in rows]
    name_counts = Counter(names)
    if len(name_counts) == len(names) and "" not in name_counts:
        return names  # every name given and unique: each its node's id (what the loop below gives them)
    ids: list[str] = []
    seen: set[str] = set()
    for name, op_type, _, _, outputs, _ in rows:
        base = name if name and name_counts[name] == 1 else f"{op_type}({outputs[0] if outputs else ''})"
        candidate, k = base, 1
        while candidate in seen:
            k += 1
            candidate = f"{base}~{k}"
        seen.add(candidate)
        ids.append(candidate)
    return ids


def _evaluate(node: onnx.NodeProto, values: Mapping[str, np.ndarray], opset: list[onnx.OperatorSetIdProto],
              ) -> list[np.ndarray] | None:
    """Evaluate one constant node with ONNX's reference implementation; ``None`` when it cannot."""
    from onnx.reference import ReferenceEvaluator

    inputs = [i for i in node.input if i]
    try:
        graph = helper.make_graph(
            [node], "fold",
            [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(values[i].dtype), values[i].shape)
             for i in inputs],
            [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output if o])
        model = helper.make_model(graph, opset_imports=list(opset))
        results = ReferenceEvaluator(model).run(None, {i: values[i] for i in inputs})
    except Exception:
        return None
    return [np.asarray(r) for r in results]


#: Ops whose output is never larger than their inputs together (inputs with values are small): evaluated
#: even when shape inference cannot tell their output's shape (NonZero, Unique ... are data-dependent).
_NEVER_GROWS = frozenset({"Constant", "Identity", "Cast", "CastLike", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                          "Transpose", "Slice", "Concat", "Split", "NonZero", "Unique", "Compress", "TopK",
                          "ArgMax", "ArgMin", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                          "Neg", "Abs", "Floor", "Ceil", "Round", "Sqrt", "Exp", "Log", "Relu", "Sigmoid", "Tanh",
                          "Not", "Sign", "Reciprocal", "Shape", "Size"})


def _predict(node: onnx.NodeProto, values: Mapping[str, np.ndarray], infos: Mapping[str, TensorInfo],
             opset: list[onnx.OperatorSetIdProto]) -> dict[str, TensorInfo]:
    """The static output shapes of one constant node, by ONNX shape inference with its input values as
    initializers (which sees through Range, Expand, ConstantOfShape, Tile ...) and the other inputs as
    typed inputs of their known shapes, computing nothing."""
    names = [i for i in dict.fromkeys(node.input) if i]
    inputs = [i for i in names if i in values]
    typed = [helper.make_tensor_value_info(i, onnx_elem_type(infos[i].dtype), infos[i].shape)
             for i in names if i not in values and i in infos]
    try:
        graph = helper.make_graph(
            [node], "predict", typed,
            [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output if o],
            initializer=[numpy_helper.from_array(values[i], i) for i in inputs])
        model = helper.make_model(graph, opset_imports=opset)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # onnx raises several internal error types: nothing is predicted
        return {}
    out: dict[str, TensorInfo] = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        tt = vi.type.tensor_type
        dims = _dims(vi) if vi.type.HasField("tensor_type") and tt.HasField("shape") else [None]
        if all(isinstance(d, int) for d in dims) and tt.elem_type:
            out[vi.name] = TensorInfo(vi.name, tuple(d for d in dims if isinstance(d, int)),
                                      onnx_dtype_name(tt.elem_type))
    return out


class ConstValues(Mapping[str, np.ndarray]):
    """The values of the small constants: initializers are read into arrays when first looked up (most of a
    big model's weights never are), computed values are kept as given. Iterates in insertion order."""

    def __init__(self, base_dir: Path) -> None:
        self._base_dir = base_dir
        self._data: dict[str, np.ndarray | TensorProto] = {}

    def add_tensors(self, named: Iterable[tuple[str, TensorProto]]) -> None:
        """Record initializers (name, tensor), each read on first lookup."""
        self._data.update(named)

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        self._data[name] = value

    def update_values(self, values: Mapping[str, np.ndarray]) -> None:
        self._data.update(values)

    def __getitem__(self, name: str) -> np.ndarray:
        value = self._data[name]
        if isinstance(value, TensorProto):
            value = self._data[name] = _tensor_value(value, self._base_dir)
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class _Folder:
    """Finds the constant nodes of a graph and the values of its small constants."""

    def __init__(self, model: onnx.ModelProto, infos: dict[str, TensorInfo], base_dir: Path,
                 initializers: list[_InitializerFields], weights: dict[str, TensorInfo]) -> None:
        """``initializers``: :func:`_initializer_fields` of ``model``; ``weights``: their
        :func:`_initializer_infos`, which become :attr:`constants` (the folder adds to that dict, not a copy)."""
        self.model = model
        self.infos = infos
        self.base_dir = base_dir
        self.constants = weights
        self.values = ConstValues(base_dir)
        #: Output names of constant nodes :meth:`fold` could not record (neither a value nor a shape).
        self.unfolded: set[str] = set()
        # initializer names are unique (the validator refuses a repeat): each is its own entry of ``weights``
        small = [k for k, (name, data_type, _) in enumerate(initializers)
                 if weights[name].elements <= SMALL_CONST_ELEMENTS and data_type != TensorProto.STRING]
        # the small initializers, read on first lookup, copied out of the model: a message keeps the whole model
        # it was parsed with alive (its nodes and every weight), which the graph would hold to its end
        own = onnx.GraphProto()
        every = model.graph.initializer
        own.initializer.extend(every[k] for k in small)
        self.values.add_tensors(zip((initializers[k][0] for k in small), own.initializer, strict=True))

    def fold_all(self, nodes: list[onnx.NodeProto], rows: list[NodeFields], folded: list[onnx.NodeProto],
                 folded_rows: list[NodeFields]) -> tuple[list[onnx.NodeProto], list[NodeFields]]:
        """Fold every node of ``nodes`` (whose fields are ``rows``) that is constant and folds (:meth:`fold`), in
        order, appending it and its row to ``folded`` and ``folded_rows``; return the others and their rows."""
        kept: list[onnx.NodeProto] = []
        kept_rows: list[NodeFields] = []
        for n, row in zip(nodes, rows, strict=True):
            if self.is_constant_node(row) and self.fold(n):
                folded.append(n)
                folded_rows.append(row)
            else:
                kept.append(n)
                kept_rows.append(row)
        return kept, kept_rows

    def is_constant_node(self, row: NodeFields) -> bool:
        """Whether the node whose fields are ``row`` (:func:`node_fields`) computes only from constants: a
        deterministic ``ai.onnx`` op, without subgraphs, reading only constants; ``Shape``/``Size`` of a tensor
        with a known shape."""
        _, op_type, domain, inputs, _, attributes = row
        if op_type in _NONDETERMINISTIC:
            return False
        if op_type in _SHAPE_ONLY and domain in ("", "ai.onnx"):
            return bool(inputs) and inputs[0] in self.infos
        if domain not in ("", "ai.onnx"):
            return False
        constants = self.constants
        for i in inputs:  # the inputs first: most nodes read an activation
            if i and i not in constants:
                return False
        return not reads_subgraph(attributes)

    def fold(self, node: onnx.NodeProto) -> bool:
        """Record the outputs of a constant node as constants, with values where they are small.

        ``False``, recording nothing, when an output has neither a computed value nor an inferred shape: the
        node then stays a layer, its shapes resolved like any layer's (symbolic inference, execution).
        """
        results = self._compute(node)
        recorded: list[tuple[str, TensorInfo, np.ndarray | None]] = []
        for k, out in enumerate(o for o in node.output if o):
            value = results[k] if results is not None and k < len(results) else None
            if value is not None:
                info = TensorInfo(out, tuple(int(d) for d in value.shape), str(value.dtype))
            elif out in self.infos:
                info = self.infos[out]
            else:
                self.unfolded.update(o for o in node.output if o)
                return False
            recorded.append((out, info, value))
        for out, info, value in recorded:
            if value is not None and value.size <= SMALL_CONST_ELEMENTS:
                self.values[out] = value
            self.constants[out] = info
            self.infos[out] = info
        return True

    def _compute(self, node: onnx.NodeProto) -> list[np.ndarray] | None:
        if node.op_type == "Shape":
            shape = np.array(self.infos[node.input[0]].shape, dtype=np.int64)
            start = next((a.i for a in node.attribute if a.name == "start"), 0)
            end = next((a.i for a in node.attribute if a.name == "end"), None)
            return [shape[start:end]]
        if node.op_type == "Size":
            return [np.array(self.infos[node.input[0]].elements, dtype=np.int64)]
        known = [o for o in node.output if o]
        if not (known and all(o in self.infos for o in known)):
            predicted = _predict(node, self.values, self.infos, list(self.model.opset_import))
            self.infos.update({name: info for name, info in predicted.items() if name not in self.infos})
        if not all((not i) or i in self.values for i in node.input):
            return None
        if not (known and all(o in self.infos for o in known)) and node.op_type not in _NEVER_GROWS:
            return None  # its output could be any size: not computed (fold() reports the unknown shape)
        if known and all(o in self.infos for o in known) and \
                sum(self.infos[o].elements for o in known) > SMALL_CONST_ELEMENTS:
            return None  # a large weight: its shape is enough, its value is not needed (nor computed)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = _constant_value(node)
            if value is not None:
                return [value]
        return _evaluate(node, self.values, list(self.model.opset_import))


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value of a ``Constant`` node read from its one attribute, as ONNX's reference implementation gives it
    (``value`` held in the file, ``value_float(s)``, ``value_int(s)``); ``None`` for the other forms (sparse,
    strings, external data), which the reference evaluator computes. Setting up that evaluator costs a
    tenth of a second: most models' constant nodes are these."""
    if len(node.attribute) != 1:
        return None
    attr = node.attribute[0]
    if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and \
            attr.t.data_location != TensorProto.EXTERNAL:
        return numpy_helper.to_array(attr.t)
    if attr.name == "value_float" and attr.type == onnx.AttributeProto.FLOAT:
        return np.array(attr.f, dtype=np.float32)
    if attr.name == "value_floats" and attr.type == onnx.AttributeProto.FLOATS:
        return np.array(list(attr.floats), dtype=np.float32)
    if attr.name == "value_int" and attr.type == onnx.AttributeProto.INT:
        return np.array(attr.i, dtype=np.int64)
    if attr.name == "value_ints" and attr.type == onnx.AttributeProto.INTS:
        return np.array(list(attr.ints), dtype=np.int64)
    return None


def load_model(path: str | os.PathLike[str], shapes: Mapping[str, tuple[int, ...]] | None = None,
               dims: Mapping[str, int] | None = None, feeds: Feeds | None = None, *,
               digest: Sha256 | None = None) -> Graph:
    """Load, shape-resolve and constant-fold an ONNX model. See the module docstring for the contract.

    ``feeds``: the input values to run the model on when shapes must be observed (see
    :func:`layerscope.model.shapes.observe`; ``layerscope.measure.inputs.feeder`` makes one from ``--input``).
    ``digest``: the file's hash, started by the caller (:func:`layerscope.digest.prefetch`) before it imported
    this module; hashed here when it is ``None`` or of another file.
    """
    graph = _load(Path(path), shapes, dims, feeds, digest)
    return graph


def _load(path: Path, shapes: Mapping[str, tuple[int, ...]] | None, dims: Mapping[str, int] | None,
          feeds: Feeds | None, digest: Sha256 | None) -> Graph:
    """:func:`load_model`."""
    model, sha256, data, spans, stripped = _read_model(path, digest)
    model_bytes = len(data) if data is not None else None
    # what ONNX's checker and shape inference read, cut from the file's bytes now, so that they are not held
    # through the check
    layout = file_layout(model, data, spans) if data is not None and spans is not None else None
    del spans
    checked = checker_bytes(model, data, layout=layout) if data is not None else None
    raw_bytes = raw_data_bytes(data, layout) if data is not None and layout is not None else None
    initializers = _initializer_fields(model)  # read before the checks: only their dims are read until then
    shape_data = _shape_data(initializers)
    cut = _inference_cut(data, layout, shape_data) if data is not None and layout is not None and \
        _left_out(model, shape_data) else None
    del data
    base_dir = path.resolve().parent
    # shape inference of a big model made in a child process while the checks run here (module docstring)
    beside = functools.partial(_inferred_in_child, model, path, initializers=initializers, shape_data=shape_data,
                               cut=cut, shapes=shapes, dims=dims)
    with offload.started(beside, when=cut is not None and len(model.graph.node) >= OFFLOAD_MIN_NODES) as child:
        protos = list(model.graph.node)
        rows = node_fields(protos)  # each node's fields read once, for the checks and the layers made below
        _check_external_data(model, base_dir, rows)
        ordered = validate_model(model, path, base_dir, rows=rows, checked=checked, model_bytes=model_bytes,
                                 encoded_bytes=[span.end - span.value for span in layout.initializers] if layout
                                 else None, raw_bytes=raw_bytes)
        del checked

        init_names, runtime_inputs, assumptions = _runtime_inputs(model, path, initializers, shapes, dims)
        weights = _initializer_infos(initializers)  # the folder's constants and shape inference's typed inputs
        light, data_prop, typed_infos = _inference_input(model, cut, initializers, shape_data, weights)
        del cut  # not held through shape inference, the peak of the load's memory
        infos = _infos_from(child.result(), light, data_prop) if child is not None else None
    if infos is None:
        infos = _infer(light, data_prop=data_prop, typed=typed_infos)
    _check_tensor_sizes(path, infos)
    available = {vi.name for vi in runtime_inputs} | init_names
    nodes = _topological(protos, available, known_in_order=ordered)
    # each node's fields in the order of ``nodes`` (the rows read above, themselves when the file's order is kept)
    node_rows = rows if nodes is protos else _rows_in(nodes, protos, rows)

    folder = _Folder(model, infos, base_dir, initializers, weights)
    folded_protos: list[onnx.NodeProto] = []
    folded_rows: list[NodeFields] = []
    layer_protos, layer_rows = folder.fold_all(nodes, node_rows, folded_protos, folded_rows)

    needed = _needed_tensors(layer_rows, model.graph.output)
    if not all(map(infos.__contains__, needed)):
        infos = _reinfer(model, runtime_inputs, layer_protos, folder)
        infos.update(folder.constants)
        if any(folder.is_constant_node(row) for row in layer_rows):
            # a constant node whose output shape was unknown before reinference is folded now
            folder.infos = infos
            layer_protos, layer_rows = folder.fold_all(layer_protos, layer_rows, folded_protos, folded_rows)
            needed = _needed_tensors(layer_rows, model.graph.output)
    # a folded node never reads a subgraph (:meth:`_Folder.is_constant_node`): the layers read one if any node does
    control_flow_read = any(reads_subgraph(row[5]) for row in rows if row[5])
    if control_flow_read:
        _check_loop_trips(path, layer_protos, folder.values)
    whole = functools.partial(_with_weights, model, path, sha256, stripped, layout) if stripped and layout else \
        lambda: model
    sources, observation = complete(whole, functools.partial(_parsed, light), base_dir,
                                    inputs=[infos[vi.name] for vi in runtime_inputs], control_flow=control_flow_read,
                                    infos=infos, needed=needed, feeds=feeds)
    # ONNX Runtime ran the model and still left these without a tensor shape (sequences, maps, outputs it
    # did not report): their layers are kept, measured and marked, their cost unknown; never a refusal
    sources.update({t: "unknown" for t in needed if t not in infos})

    def make_node(n: onnx.NodeProto, node_id: str, source: str, parent: str = "", executions: int = 1) -> Node:
        """A subgraph's node (control flow), its fields read here."""
        return _node(node_fields((n,))[0], node_id, source, parent, executions)

    all_protos = layer_protos + folded_protos
    ids = _ids(layer_rows + folded_rows)
    all_nodes = [_node(row, i, layer_source(n, sources) if sources else "static")
                 for i, n, row in zip(ids, all_protos, layer_rows + folded_rows, strict=True)]
    layers = all_nodes[: len(layer_protos)]
    folded = all_nodes[len(layer_protos):]
    if observation is not None and control_flow_read:
        expansion = control_flow.Expansion()
        for node, proto in zip(layers, layer_protos, strict=True):
            if control_flow.subgraphs(proto):
                control_flow.expand(node, proto, observation, make_node=make_node, layer_ids=layer_ids_of,
                                        out=expansion)
            else:
                expansion.layers.append(node)
        layers = expansion.layers
        folded += expansion.folded
        infos.update({k: v for k, v in expansion.tensors.items() if k not in infos})
        folder.constants.update(expansion.constants)
        folder.values.update_values(expansion.values)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return Graph(
        name=model.graph.name or path.stem,
        path=str(path),
        sha256=sha256.hexdigest(),
        opset=opset,
        inputs=tuple(infos[vi.name] for vi in runtime_inputs),
        outputs=tuple(infos[o.name] for o in model.graph.output if o.name in infos),
        layers=tuple(layers),
        folded=tuple(folded),
        tensors=infos,  # this call's own dicts, not copied: nothing changes them once the graph is made
        constants=folder.constants,
        const_values=folder.values,
        producer=f"{model.producer_name} {model.producer_version}".strip(),
        assumptions=assumptions + random_ops_note(layers, observed=observation is not None)
        + _limit_notes(model, _unfolded_layers(layer_protos, layer_rows, folder.unfolded)),
    )


def _needed_tensors(layers: list[NodeFields], outputs: Iterable[onnx.ValueInfoProto]) -> list[str]:
    """Tensors that must have a shape: every input of the layers (whose fields are ``layers``), and every output
    something reads.

    An optional output nobody consumes (e.g. Dropout's mask at inference) may stay without a shape;
    ``Graph.tensor`` returns ``None`` for it.
    """
    read = chain.from_iterable(row[3] for row in layers)
    written = chain.from_iterable(row[4] for row in layers)
    needed = dict.fromkeys(read)  # the inputs in order of first reading, then the outputs read
    needed.pop("", None)
    consumed = needed.keys() | {o.name for o in outputs}
    needed.update(dict.fromkeys(filter(consumed.__contains__, written)))
    needed.pop("", None)
    return list(needed)


def _unfolded_layers(layers: list[onnx.NodeProto], rows: list[NodeFields], unfolded: set[str],
                     ) -> list[onnx.NodeProto]:
    """The ``layers`` (whose fields are ``rows``) that write a tensor of ``unfolded``: constant nodes left layers."""
    if not unfolded:
        return []
    return [n for n, row in zip(layers, rows, strict=True) if any(o in unfolded for o in row[4])]


def _parsed(model: onnx.ModelProto | bytes) -> onnx.ModelProto:
    """``model``, parsed when serialized."""
    return onnx.ModelProto.FromString(model) if isinstance(model, bytes) else model


def _rows_in(nodes: list[onnx.NodeProto], protos: list[onnx.NodeProto], rows: list[NodeFields]) -> list[NodeFields]:
    """The fields of ``nodes`` (``protos`` reordered), where ``rows`` are those of ``protos``: matched by the
    identity of each node's message (``protos`` keeps every one of them alive)."""
    fields_of = {id(p): row for p, row in zip(protos, rows, strict=True)}
    return [fields_of[id(n)] for n in nodes]


def _node(row: NodeFields, node_id: str, source: str, parent: str = "", executions: int = 1) -> Node:
    """The :class:`Node` of the node whose fields are ``row`` (:func:`node_fields`)."""
    name, op_type, domain, inputs, outputs, attributes = row
    return made_node(node_id, name, op_type, domain or "", inputs, outputs, _attrs(attributes) if attributes else {},
                     source, parent, executions)


def _reinfer(model: onnx.ModelProto, runtime_inputs: list[onnx.ValueInfoProto],
             layers: list[onnx.NodeProto], folder: _Folder) -> dict[str, TensorInfo]:
    """Shape inference again on the runtime graph, constants given as values (small) or shapes (large).

    ONNX's data propagation does not see through every constant subgraph (e.g. a Reshape target built by
    Gather/Concat of folded shapes); with the folded values as initializers it does.
    """
    used = {i for n in layers for i in n.input if i}
    initializers = [numpy_helper.from_array(folder.values[name], name) for name in folder.values if name in used]
    with_value = {t.name for t in initializers}
    const_inputs = [helper.make_tensor_value_info(name, onnx_elem_type(info.dtype), info.shape)
                    for name, info in folder.constants.items() if name in used and name not in with_value]
    graph = helper.make_graph(layers, model.graph.name or "g", [*runtime_inputs, *const_inputs],
                              list(model.graph.output), initializer=initializers)
    runtime = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=max(model.ir_version, 4))
    return _infer(runtime, data_prop=_data_prop_is_bounded(runtime))
