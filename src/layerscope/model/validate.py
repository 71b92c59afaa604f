"""Check a parsed ONNX model once, on load, for what ONNX Runtime would refuse or what would crash later.

Contract of :func:`validate_model` (called by ``load_model`` before any shape work): it raises
``ModelError`` (exit 2) with one line naming the file and the field when

- an opset is newer than the installed ``onnx`` package knows (``ai.onnx`` and ``ai.onnx.ml``);
- a name is defined twice: a graph input, an initializer, a node output (two nodes writing one tensor,
  or a node output that is also a graph input or initializer), or a graph output listed twice;
- a tensor's data does not match its dims: ``raw_data`` or a typed field shorter or longer than
  ``prod(dims) x element size``, values in more than one field, strings in ``raw_data``; external data whose
  ``offset``/``length`` are not non-negative
  integers, reach past the end of the data file, or disagree with the dims;
- local functions call each other recursively, or expand (each call replaced by the function's body,
  as shape inference and the runtime do) to more than :data:`MAX_EXPANDED_NODES` nodes and 4 times the
  nodes in the file: 18 levels of functions calling the level below twice (1.4 KB) are 131,072 nodes;
- ``onnx.checker.check_model(full_check=True)`` refuses the model (its first line is the reason); above
  :data:`FULL_CHECK_MAX_NODES` nodes, ``full_check=False`` (the structural check, without strict shape inference).

It reads no weight data (only file sizes) and is linear in the model's size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import NamedTuple

import onnx
from onnx import TensorProto, helper

from layerscope.errors import ModelError
from layerscope.model import wire

#: Bytes per element of the fixed-size ONNX types (``int4``/``uint4`` pack two in a byte: see
#: :func:`_expected_bytes`).
_ITEM_BYTES: dict[int, float] = {
    TensorProto.FLOAT: 4, TensorProto.DOUBLE: 8, TensorProto.FLOAT16: 2, TensorProto.BFLOAT16: 2,
    TensorProto.INT64: 8, TensorProto.UINT64: 8, TensorProto.INT32: 4, TensorProto.UINT32: 4,
    TensorProto.INT16: 2, TensorProto.UINT16: 2, TensorProto.INT8: 1, TensorProto.UINT8: 1,
    TensorProto.BOOL: 1, TensorProto.COMPLEX64: 8, TensorProto.COMPLEX128: 16,
    TensorProto.FLOAT8E4M3FN: 1, TensorProto.FLOAT8E4M3FNUZ: 1, TensorProto.FLOAT8E5M2: 1,
    TensorProto.FLOAT8E5M2FNUZ: 1, TensorProto.INT4: 0.5, TensorProto.UINT4: 0.5,
}

#: Typed data fields and how many of their values make one element.
_TYPED_FIELDS: dict[int, tuple[str, int]] = {
    TensorProto.FLOAT: ("float_data", 1), TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.DOUBLE: ("double_data", 1), TensorProto.COMPLEX128: ("double_data", 2),
    TensorProto.INT64: ("int64_data", 1), TensorProto.UINT32: ("uint64_data", 1),
    TensorProto.UINT64: ("uint64_data", 1), TensorProto.STRING: ("string_data", 1),
    TensorProto.INT32: ("int32_data", 1), TensorProto.INT16: ("int32_data", 1), TensorProto.UINT16: ("int32_data", 1),
    TensorProto.INT8: ("int32_data", 1), TensorProto.UINT8: ("int32_data", 1), TensorProto.BOOL: ("int32_data", 1),
    TensorProto.FLOAT16: ("int32_data", 1), TensorProto.BFLOAT16: ("int32_data", 1),
}

#: The typed value fields of ``TensorProto`` (with ``raw_data``, a tensor sets one of them at most).
_VALUE_FIELDS = tuple(dict.fromkeys(name for name, _ in _TYPED_FIELDS.values()))

_DATA_TYPES = frozenset(TensorProto.DataType.values())

#: Domains whose newest opset the installed onnx knows.
_KNOWN_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


#: A node's fields as :func:`node_fields` reads them: name, op_type, domain, inputs, outputs, attributes.
NodeFields = tuple[str, str, str, tuple[str, ...], tuple[str, ...], Sequence[onnx.AttributeProto]]


def node_fields(nodes: Iterable[onnx.NodeProto]) -> list[NodeFields]:
    """Each node's name, op_type, domain, inputs, outputs and attributes, read from protobuf once (every read of a
    field builds a new Python object: the checks below, and the loader, read them from these tuples instead).
    The attributes are the node's own container, not a copy (a row is valid while its node is), or ``()`` when it
    has none (most nodes: no container is kept for them)."""
    return [(n.name, n.op_type, n.domain, tuple(n.input), tuple(n.output), n.attribute or ()) for n in nodes]


def tensor_attributes(rows: Iterable[NodeFields]) -> Iterator[tuple[int, NodeFields, onnx.AttributeProto]]:
    """Every ``TENSOR`` attribute of the nodes whose fields are ``rows``: (node index, its row, the attribute)."""
    for k, row in enumerate(rows):
        if row[5]:  # most nodes have no attribute
            for attr in row[5]:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield k, row, attr


def reads_subgraph(attributes: Iterable[onnx.AttributeProto]) -> bool:
    """Whether one of a node's ``attributes`` is a subgraph (``If``, ``Loop``, ``Scan`` and the like)."""
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in attributes)


def validate_model(model: onnx.ModelProto, path: Path, base_dir: Path, *,
                   rows: list[NodeFields] | None = None, checked: bytes | None = None,
                   model_bytes: int | None = None, encoded_bytes: Sequence[int] | None = None,
                   raw_bytes: Mapping[int, int] | None = None) -> bool:
    """Refuse a model ONNX Runtime would refuse or whose data does not fit its dims (module docstring).

    ``rows``: :func:`node_fields` of the graph's nodes, when the caller has read them. ``checked``: the model ONNX's
    checker reads, cut from the file's bytes (:func:`checker_bytes`), when the caller made it: the checker is given
    it when the nodes are in order, not a copy serialized again. ``model_bytes`` and ``encoded_bytes``: the sizes of
    the file it was parsed from and of each initializer's encoding in it (``None``: their ``ByteSize``), which
    :func:`checker_reads_values` reads; a file's sizes are never below protobuf's (minimal) ``ByteSize``, so every
    initializer the checker may be given as a typed input, from the file's cut or from the copy, has its value
    fields checked here. ``raw_bytes``: the lengths of initializers' ``raw_data`` read from the file
    (:func:`raw_data_bytes`), by index. Returns whether the nodes are
    already in an execution order (:func:`in_order` of the graph's inputs and initializers), which the loader
    would otherwise compute again."""
    if rows is None:
        rows = node_fields(model.graph.node)
    _check_text(model, path, rows)
    guard_inference(model, path)
    _check_unique_names(model.graph, path, rows)
    model_bytes = model.ByteSize() if model_bytes is None else model_bytes
    initializers = len(model.graph.initializer)
    raw = raw_bytes or {}
    for index, tensor in enumerate(tensors(model, rows)):
        fields = index < initializers and not checker_reads_values(
            tensor, tensor.ByteSize() if encoded_bytes is None else encoded_bytes[index], model_bytes)
        problem = _tensor_data_problem(tensor, base_dir, fields=fields, raw_bytes=raw.get(index))
        if problem is not None:
            raise ModelError(f"{path}: {_where(model, rows, index)}: {problem}")
    graph = model.graph
    ordered = _rows_in_order(rows, {vi.name for vi in graph.input} | {t.name for t in graph.initializer})
    _check_with_onnx(model, path, ordered=ordered, checked=checked, sizes=(model_bytes, encoded_bytes))
    return ordered


#: Most nodes a model may expand to through its local functions (see the module docstring).
MAX_EXPANDED_NODES = 50_000


def expanded_nodes(model: onnx.ModelProto) -> int | None:
    """Nodes of the model with every local-function call replaced by the function's body, recursively
    (subgraphs of If/Loop/Scan included); ``None`` when functions call each other in a cycle.
    Linear in the model's size: each function's expanded size is computed once."""
    bodies = {(f.domain, f.name): f for f in model.functions}
    sizes: dict[tuple[str, str], int] = {}
    visiting: set[tuple[str, str]] = set()

    def count(nodes: Iterable[onnx.NodeProto]) -> int:
        total = 0
        for node in nodes:
            key = (node.domain, node.op_type)
            if key in bodies:
                if key not in sizes:
                    if key in visiting:
                        raise _CycleError(key)
                    visiting.add(key)
                    sizes[key] = count(bodies[key].node)
                    visiting.discard(key)
                total += sizes[key]
            else:
                total += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    total += count(attr.g.node)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    total += sum(count(g.node) for g in attr.graphs)
        return total

    try:
        return count(model.graph.node)
    except _CycleError:
        return None


class _CycleError(Exception):
    """A local function that calls itself, directly or through others."""


def guard_inference(model: onnx.ModelProto, path: Path) -> None:
    """The checks of :func:`validate_model` on what ONNX's shape inference does not know or would follow without
    bound: an opset newer than the installed onnx, local functions that call each other or expand past
    :data:`MAX_EXPANDED_NODES`. ``ModelError`` as :func:`validate_model` raises it."""
    _check_opsets(model, path)
    _check_function_expansion(model, path)


def _check_function_expansion(model: onnx.ModelProto, path: Path) -> None:
    if not model.functions:
        return
    try:
        expanded = expanded_nodes(model)
    except RecursionError:
        raise ModelError(f"{path}: functions: local functions nested too deeply") from None
    if expanded is None:
        raise ModelError(f"{path}: functions: local functions call each other recursively")
    literal = len(model.graph.node) + sum(len(f.node) for f in model.functions)
    if expanded > MAX_EXPANDED_NODES and expanded > 4 * literal:
        raise ModelError(f"{path}: functions: the {len(model.functions)} local functions expand to {expanded:,} nodes "
                         f"(at most {MAX_EXPANDED_NODES:,} are read) from {literal:,} in the file")


def newest_opset(domain: str) -> int:
    """The newest opset version of ``domain`` the installed onnx package has schemas for."""
    if domain in ("", "ai.onnx"):
        return int(onnx.defs.onnx_opset_version())
    versions = [s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain]
    return max(versions, default=0)


def _check_text(model: onnx.ModelProto, path: Path, rows: list[NodeFields]) -> None:
    """Every name is text: protobuf hands over a string field that is not valid UTF-8 as ``bytes``."""
    graph = model.graph
    fields: list[tuple[str, Iterable[object]]] = [
        ("graph.input", (vi.name for vi in graph.input)), ("graph.output", (vi.name for vi in graph.output)),
        ("graph.initializer", (t.name for t in graph.initializer)),
        ("opset_import", (o.domain for o in model.opset_import))]
    for field, values in fields:
        if any(not isinstance(v, str) for v in values):
            raise ModelError(f"{path}: {field}: a name that is not valid UTF-8 (a corrupt file?)")
    # the types of every node's names; the node is looked for only when one is not text
    types = {type(v) for row in rows for v in row[:3]} | {type(v) for row in rows for v in row[3]} | \
        {type(v) for row in rows for v in row[4]}
    if types <= {str}:
        return
    for k, node in enumerate(graph.node):
        if any(not isinstance(v, str) for v in (node.name, node.op_type, node.domain, *node.input, *node.output)):
            raise ModelError(f"{path}: graph.node[{k}]: a name that is not valid UTF-8 (a corrupt file?)")


def _check_opsets(model: onnx.ModelProto, path: Path) -> None:
    for opset in model.opset_import:
        domain = opset.domain or ""
        if domain not in _KNOWN_DOMAINS:
            continue
        newest = newest_opset(domain)
        if opset.version > newest:
            raise ModelError(f"{path}: opset_import {domain or 'ai.onnx'} version {opset.version} is newer than "
                             f"this onnx {onnx.__version__} supports ({newest})",
                             hint="export with an older opset or upgrade onnx and onnxruntime")
        if opset.version <= 0:
            raise ModelError(f"{path}: opset_import {domain or 'ai.onnx'} version {opset.version} is not a version")


def _check_unique_names(graph: onnx.GraphProto, path: Path, rows: list[NodeFields]) -> None:
    """Every tensor name defined once; graph outputs listed once (``rows``: :func:`node_fields` of ``graph``)."""
    input_names = [vi.name for vi in graph.input]
    initializer_names = [t.name for t in graph.initializer]
    _first_repeat(input_names, path, "graph.input")
    _first_repeat(initializer_names, path, "graph.initializer")
    _first_repeat([o.name for o in graph.output], path, "graph.output")
    defined = {*input_names, *initializer_names}
    outputs_written = list(filter(None, chain.from_iterable(row[4] for row in rows)))
    distinct = set(outputs_written)
    if len(distinct) == len(outputs_written) and distinct.isdisjoint(defined):
        return  # no name written twice: the loop below, which names the first one, finds none
    written: set[str] = set()
    for k, (name, op_type, _, _, outputs, _) in enumerate(rows):
        for out in outputs:
            if not out:
                continue
            if out in written:
                raise ModelError(f"{path}: graph.node[{k}] ({op_type} {name!r}) writes {out!r}, which "
                                 "another node already writes (duplicate output name)")
            if out in defined:
                raise ModelError(f"{path}: graph.node[{k}] ({op_type} {name!r}) writes {out!r}, which is "
                                 "a graph input or initializer (duplicate name)")
            written.add(out)


def _first_repeat(names: list[str], path: Path, field: str) -> None:
    if len(set(names)) == len(names):
        return  # no repeat: the loop below, which names the first one, finds none
    seen: set[str] = set()
    for k, name in enumerate(names):
        if name in seen:
            raise ModelError(f"{path}: {field}[{k}] repeats the name {name!r}")
        seen.add(name)


def tensors(model: onnx.ModelProto, rows: list[NodeFields]) -> Iterator[TensorProto]:
    """The initializers, then the nodes' tensor attributes (``rows``: :func:`node_fields` of the graph)."""
    yield from model.graph.initializer
    for _, _, attr in tensor_attributes(rows):
        yield attr.t


def _where(model: onnx.ModelProto, rows: list[NodeFields], index: int) -> str:
    """Where the ``index``-th tensor of :func:`tensors` is, as the refusals name it (read again: only a refusal
    names it)."""
    initializers = model.graph.initializer
    if index < len(initializers):
        return f"graph.initializer[{index}] {initializers[index].name!r}"
    k, (name, op_type, *_), attr = next(islice(tensor_attributes(rows), index - len(initializers), None))
    return f"graph.node[{k}] ({op_type} {name!r}).{attr.name}"


def _expected_bytes(data_type: int, dims: tuple[int, ...]) -> int | None:
    """Bytes of a tensor of ``data_type`` and ``dims`` (``None`` for a type of no fixed size)."""
    item = _ITEM_BYTES.get(data_type)
    if item is None:
        return None
    return math.ceil(math.prod(dims) * item)


def _tensor_data_problem(tensor: TensorProto, base_dir: Path, *, fields: bool = False, raw_bytes: int | None = None,
                         ) -> str | None:
    """What is wrong with ``tensor``'s type, dims or data (its size against its dims; external data: see
    :func:`_external_problem`), as a refusal says it after naming the tensor; ``None`` when nothing is.
    ``fields``: also whether its values are in one field (none for external data) and strings not in ``raw_data``,
    which ONNX's checker checks of the tensors whose values it is given (:func:`checker_reads_values`).
    ``raw_bytes``: the length of its ``raw_data`` when it was read from the file (:func:`raw_data_bytes`), else it
    is asked of the tensor."""
    data_type = tensor.data_type
    if data_type not in _DATA_TYPES or data_type == TensorProto.UNDEFINED:
        return f"data_type {data_type} is not an ONNX element type"
    dims = tuple(tensor.dims)
    if dims and min(dims) < 0:
        return f"negative dim in {list(dims)}"
    expected = _expected_bytes(data_type, dims)
    external = tensor.data_location == TensorProto.EXTERNAL
    if fields:
        problem = _value_fields_problem(tensor, external, raw_bytes is not None or tensor.HasField("raw_data"))
        if problem is not None:
            return problem
    if external:
        return _external_problem(tensor, base_dir, expected)
    if raw_bytes is not None or tensor.HasField("raw_data"):
        length = len(tensor.raw_data) if raw_bytes is None else raw_bytes
        if expected is not None and length != expected:
            return f"raw_data holds {length} bytes, its dims {list(dims)} need {expected}"
        return None
    field = _TYPED_FIELDS.get(data_type)
    if field is None:
        return None
    name, per_element = field
    count = len(getattr(tensor, name))
    elements = math.prod(dims)
    if count == 0 and elements == 0:
        return None
    if count != elements * per_element:
        return f"{name} holds {count} values, its dims {list(dims)} need {elements * per_element}"
    return None


def _value_fields_problem(tensor: TensorProto, external: bool, raw: bool) -> str | None:
    """Values held in more than one field of ``tensor``, in any field when its data is ``external``, or strings in
    ``raw_data``, as :func:`_tensor_data_problem` says it; ``None`` when none of these. ``raw``: whether it has
    ``raw_data`` (in the file: a loader may have parsed it without)."""
    held = ["raw_data"] * raw + [name for name in _VALUE_FIELDS if len(getattr(tensor, name))]
    if external and held:
        return f"external data and values in {', '.join(held)}: a tensor's values are in one place"
    if len(held) > 1:
        return f"values in {', '.join(held)}: a tensor holds them in one field"
    if raw and tensor.data_type == TensorProto.STRING:
        return "STRING values in raw_data: strings are held in string_data"
    return None


def _external_problem(tensor: TensorProto, base_dir: Path, expected: int | None) -> str | None:
    """What is wrong with the external data of ``tensor`` (``expected``: its bytes by its dims), as
    :func:`_tensor_data_problem` says it: ``offset``/``length`` not non-negative integers, past the end of the
    data file or disagreeing with the dims. ``None`` when nothing is, or the file is missing (load.py's
    external-data check reports that)."""
    entries = {e.key: e.value for e in tensor.external_data}
    numbers: dict[str, int] = {}
    for key in ("offset", "length"):
        if key not in entries:
            continue
        text = entries[key]
        if not text.isdigit() or len(text) > 20:
            return f"external data {key} {text[:40]!r} is not a non-negative integer"
        numbers[key] = int(text)
    location = entries.get("location", "")
    target = base_dir / location
    try:
        file_bytes = target.stat().st_size
    except (OSError, ValueError):  # ValueError: a NUL in the location
        return None  # the location is checked (and reported) by load.py's external-data check
    offset = numbers.get("offset", 0)
    length = numbers.get("length", file_bytes - offset if expected is None else expected)
    if offset > file_bytes:
        return f"external data offset {offset} is past the end of {location!r} ({file_bytes} bytes)"
    if offset + length > file_bytes:
        return f"external data offset {offset} + length {length} reaches past the end of {location!r} " \
            f"({file_bytes} bytes)"
    if expected is not None and length != expected:
        return f"external data length {length} bytes, its dims {list(tensor.dims)} need {expected}"
    return None


def topological(nodes: list[onnx.NodeProto], available: set[str], *, known_in_order: bool | None = None,
                ) -> list[onnx.NodeProto]:
    """The nodes in a valid execution order (stable: the file order when it already is one).

    Kahn's algorithm with a heap of file positions: linear in nodes and edges (times log n), so a
    graph stored in reverse order costs what one in order does. ``known_in_order``: :func:`in_order` of
    ``nodes`` and ``available`` when the caller knows it (``None``: computed here).
    """
    import heapq

    if known_in_order if known_in_order is not None else in_order(nodes, available):
        return nodes
    producer: dict[str, int] = {}
    for k, n in enumerate(nodes):
        for o in n.output:
            if o and o not in available:
                producer.setdefault(o, k)
    waiting = [0] * len(nodes)
    consumers: dict[int, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in dict.fromkeys(x for x in n.input if x and x not in available):
            p = producer.get(i)
            if p is not None:
                waiting[k] += 1  # a node reading its own output (p == k) is never released: a cycle
                if p != k:
                    consumers.setdefault(p, []).append(k)
    missing = {i for n in nodes for i in n.input if i and i not in available and i not in producer}
    ready = [k for k in range(len(nodes)) if waiting[k] == 0 and not _reads_any(nodes[k], missing)]
    heapq.heapify(ready)
    ordered: list[onnx.NodeProto] = []
    while ready:
        k = heapq.heappop(ready)
        ordered.append(nodes[k])
        for c in consumers.get(k, ()):
            waiting[c] -= 1
            if waiting[c] == 0 and not _reads_any(nodes[c], missing):
                heapq.heappush(ready, c)
    if len(ordered) < len(nodes):
        done = {o for n in ordered for o in n.output}
        listed = sorted(missing or {i for n in nodes for i in n.input if i in producer and i not in done})
        raise ModelError(f"graph is not a DAG or reads undefined tensors: {', '.join(listed[:5])}"
                         + (" ..." if len(listed) > 5 else ""))
    return ordered


def in_order(nodes: Iterable[onnx.NodeProto], available: set[str]) -> bool:
    """Whether ``nodes`` already are an execution order: each reads only ``available`` tensors and those an
    earlier node wrote (never its own output). One pass, linear: the common case needs no sort."""
    return _ordered(((n.input, n.output) for n in nodes), available)


def _rows_in_order(rows: list[NodeFields], available: set[str]) -> bool:
    """:func:`in_order` of the nodes :func:`node_fields` read."""
    return _ordered(((row[3], row[4]) for row in rows), available)


def _ordered(reads_writes: Iterable[tuple[Iterable[str], Iterable[str]]], available: set[str]) -> bool:
    """:func:`in_order` of nodes given as (inputs, outputs)."""
    defined = set(available)
    defined.add("")  # an omitted optional input reads nothing
    for inputs, outputs in reads_writes:
        if not defined.issuperset(inputs):
            return False
        defined.update(outputs)
    return True


def _reads_any(node: onnx.NodeProto, names: set[str]) -> bool:
    return bool(names) and any(i in names for i in node.input)


#: Constants with at most this many elements keep their values (shapes, axes, scales, small tables).
SMALL_CONST_ELEMENTS = 1 << 16

#: A model of at most this many bytes is given to the checker with all its initializers' values
#: (:func:`checker_reads_values`).
_CHECKER_WHOLE_MAX_BYTES = 1 << 20

#: In a bigger model, an initializer encoded in at most this many bytes is given to the checker with its values
#: (:func:`checker_reads_values`): above it, checking its value fields here costs less than ONNX's C++ parsing and
#: checking its data.
_CHECKER_MAX_INITIALIZER_BYTES = 16 << 10


def is_shape_data_dims(dims: tuple[int, ...]) -> bool:
    """Whether shape inference may read the values of a tensor of ``dims``: a scalar or vector of at most
    :data:`SMALL_CONST_ELEMENTS` elements (weights, of rank 2 and more, are only ever read for their dims)."""
    return len(dims) <= 1 and math.prod(dims) <= SMALL_CONST_ELEMENTS


def checker_reads_values(tensor: TensorProto, encoded_bytes: int, model_bytes: int) -> bool:
    """Whether ONNX's checker is given the values of the initializer ``tensor`` (encoded in ``encoded_bytes``, in a
    model of ``model_bytes``), not only its type as a graph input: its data is in the file, and the model is small
    (:data:`_CHECKER_WHOLE_MAX_BYTES`), or the tensor is (:data:`_CHECKER_MAX_INITIALIZER_BYTES`), or its values may
    be shape data (:func:`is_shape_data_dims`), which the checker's strict shape inference may read. The others'
    fields are checked by :func:`_tensor_data_problem` (``fields=True``) instead of the checker."""
    return tensor.data_location != TensorProto.EXTERNAL and (
        model_bytes <= _CHECKER_WHOLE_MAX_BYTES or encoded_bytes <= _CHECKER_MAX_INITIALIZER_BYTES
        or is_shape_data_dims(tuple(tensor.dims)))


def _check_with_onnx(model: onnx.ModelProto, path: Path, *, ordered: bool | None = None,
                     checked: bytes | None = None, sizes: _Sizes | None = None) -> None:
    """ONNX's own checker on a light copy of the model: with ``full_check`` (strict shape inference) up to
    :data:`FULL_CHECK_MAX_NODES` nodes; above, the structural check only (the loader's shape inference
    still runs, non-strict: strict inference of a 100k-node graph costs seconds and refuses only type
    errors that leave shapes the loader resolves anyway).

    The copy keeps the initializers whose values the checker reads (:func:`checker_reads_values`) and makes the
    others typed inputs. ONNX Runtime accepts graph
    outputs declared without a shape, the checker does not: such outputs get the shape ONNX's
    inference gives them, or are left out of the checked copy when it gives none. Nodes are checked
    in a topological order (the runtime sorts them; the checker wants them sorted). ``ordered``: whether they
    already are (:func:`in_order`), when the caller knows. ``checked``: :func:`checker_bytes` of the model, when
    the caller made it. ``sizes``: the sizes :func:`checker_reads_values` reads (:data:`_Sizes`).
    """
    try:
        _run_checker(model, full_check=len(model.graph.node) <= FULL_CHECK_MAX_NODES, ordered=ordered,
                     checked=checked, sizes=sizes)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError) as exc:
        # ValueError: onnx's Python side on an unknown data type; UnicodeDecodeError (a ValueError) on a
        # string field that is not UTF-8
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{path}: refused by onnx.checker (ONNX Runtime refuses it too): {first}") from None


#: Models with more nodes are checked without ``full_check`` (see :func:`_check_with_onnx`).
FULL_CHECK_MAX_NODES = 20_000

#: Graph fields :func:`_light_copy` leaves out (as ``helper.make_graph`` would), where this onnx has them.
_UNCHECKED_GRAPH_FIELDS = ("doc_string", "sparse_initializer", "quantization_annotation", "metadata_props")


#: The sizes :func:`checker_reads_values` reads: of the file the model was parsed from, and of each initializer's
#: encoding in it (``None``: their ``ByteSize``); a model parsed without its large weights' values
#: (:func:`without_large_raw_data`) is smaller than its file.
_Sizes = tuple[int, Sequence[int] | None]


def _light_copy(model: onnx.ModelProto, *, ordered: bool | None = None, sizes: _Sizes | None = None,
                ) -> onnx.ModelProto:
    """The model the checker sees: graph name (``"g"`` when empty), inputs (the initializers whose values it is
    not given, :func:`checker_reads_values`, added as typed inputs), outputs, the other initializers, value_info
    and the nodes in a topological order; opsets, IR version and local functions. When every initializer's values
    are given, the graph is copied in one call (protobuf's own copy), else field by field so that the weights' data
    is never copied. ``sizes``: see :data:`_Sizes` (``None``: the model's own)."""
    graph = model.graph
    model_bytes, encoded = sizes if sizes is not None else (model.ByteSize(), None)
    small = [t for k, t in enumerate(graph.initializer)
             if checker_reads_values(t, t.ByteSize() if encoded is None else encoded[k], model_bytes)]
    available = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    if ordered is None:
        ordered = in_order(graph.node, available)
    if len(small) == len(graph.initializer) and ordered and graph.name and not _extra_fields(model):
        return model  # the copy would be the model itself: the checker reads it as it is (it never changes it)
    copy = onnx.ModelProto(ir_version=model.ir_version)
    copy.opset_import.extend(model.opset_import)
    copy.functions.extend(model.functions)
    light = copy.graph
    if len(small) == len(graph.initializer):
        light.CopyFrom(graph)
        for name in _UNCHECKED_GRAPH_FIELDS:
            if name in light.DESCRIPTOR.fields_by_name:
                light.ClearField(name)
        light.name = graph.name or "g"
        if not ordered:
            del light.node[:]
            light.node.extend(topological(list(graph.node), available))
        return copy
    kept = {t.name for t in small}
    listed = {vi.name for vi in graph.input}
    typed = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
             for t in graph.initializer if t.name not in kept and t.name not in listed]
    nodes = graph.node if ordered else topological(list(graph.node), available)
    light.CopyFrom(helper.make_graph(nodes, graph.name or "g", [*graph.input, *typed], list(graph.output),
                                     initializer=small, value_info=list(graph.value_info)))
    return copy


#: Field numbers (onnx.proto) of what :func:`_light_copy` keeps: of ``ModelProto`` ir_version, opset_import and
#: functions (the graph is written anew); of ``GraphProto`` node, input, output and value_info (the name and
#: the initializers kept are written as :func:`_light_copy` chooses them).
MODEL_IR_VERSION, MODEL_GRAPH, MODEL_OPSET_IMPORT, MODEL_FUNCTIONS = 1, 7, 8, 25
_MODEL_KEPT = frozenset({MODEL_IR_VERSION, MODEL_OPSET_IMPORT, MODEL_FUNCTIONS})
GRAPH_NODE, GRAPH_NAME, GRAPH_INITIALIZER, GRAPH_OUTPUT, GRAPH_INPUT, GRAPH_VALUE_INFO = 1, 2, 5, 12, 11, 13
_GRAPH_KEPT = frozenset({GRAPH_NODE, GRAPH_INPUT, GRAPH_OUTPUT, GRAPH_VALUE_INFO})


class Layout(NamedTuple):
    """Where a model's fields are in the bytes it was parsed from (:func:`file_layout`)."""

    #: The ``ModelProto``'s fields, in written order.
    top: list[wire.Span]
    #: The ``GraphProto``'s fields, in written order.
    graph: list[wire.Span]
    #: The ``initializer`` fields of the graph: one per initializer of the model, in its order.
    initializers: list[wire.Span]


def bytes_layout(data: wire.ReadBuffer) -> Layout | None:
    """The spans of the fields of the model serialized in ``data`` (:func:`wire.fields`), read without parsing it;
    ``None`` when the graph is not written once or a level :func:`wire.fields` does not read."""
    top = wire.fields(data)
    graphs = [] if top is None else [span for span in top if span.number == MODEL_GRAPH]
    if top is None or len(graphs) != 1 or graphs[0].wire_type != wire.LENGTH_DELIMITED:
        return None
    inner = wire.fields(data, graphs[0].value, graphs[0].end)
    return None if inner is None else spans_layout(top, inner)


def spans_layout(top: list[wire.Span], inner: list[wire.Span]) -> Layout | None:
    """The :class:`Layout` of a model whose ``ModelProto`` fields are ``top`` (one graph field, written as a
    message) and whose graph's fields are ``inner``; ``None`` when a node, initializer or input is not written as a
    message."""
    if any(span.wire_type != wire.LENGTH_DELIMITED for span in inner
           if span.number in (GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_INPUT)):
        return None
    return Layout(top, inner, [span for span in inner if span.number == GRAPH_INITIALIZER])


def file_layout(model: onnx.ModelProto, data: wire.ReadBuffer, layout: Layout | None = None) -> Layout | None:
    """The spans of ``model``'s fields in ``data``, the bytes it was parsed from (``layout``: their
    :func:`bytes_layout` when read already); ``None`` when ``data`` is not laid out as ``model``: the graph not
    written once, counts of nodes, initializers or inputs that differ, anything :func:`wire.fields` does not read."""
    layout = bytes_layout(data) if layout is None else layout
    if layout is None:
        return None
    counts = {GRAPH_NODE: 0, GRAPH_INITIALIZER: 0, GRAPH_INPUT: 0}
    for span in layout.graph:
        if span.number in counts:
            counts[span.number] += 1
    graph = model.graph
    if (counts[GRAPH_NODE], counts[GRAPH_INITIALIZER], counts[GRAPH_INPUT]) != (
            len(graph.node), len(graph.initializer), len(graph.input)):
        return None
    return layout


#: ``TensorProto``'s field numbers (onnx.proto): dims, data_type, raw_data and data_location.
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_RAW_DATA, TENSOR_DATA_LOCATION = 1, 2, 9, 14


def raw_data_bytes(data: wire.ReadBuffer, layout: Layout) -> dict[int, int]:
    """The length of the ``raw_data`` of each initializer encoded in over :data:`_CHECKER_MAX_INITIALIZER_BYTES`,
    by its index, read from ``data`` (the bytes the model was parsed from, ``layout`` its :func:`file_layout`):
    asking the parsed tensor for it copies its data. An initializer whose encoding :func:`wire.fields` does not
    read, or that has no ``raw_data``, has none (the last one written is the one protobuf keeps). Every weight
    :func:`without_large_raw_data` leaves out has its length here."""
    lengths: dict[int, int] = {}
    for index, span in enumerate(layout.initializers):
        if span.end - span.value <= _CHECKER_MAX_INITIALIZER_BYTES:
            continue
        raw = raw_data_span(data, span)
        if raw is not None:
            lengths[index] = raw.end - raw.value
    return lengths


def raw_data_span(data: wire.ReadBuffer, initializer: wire.Span) -> wire.Span | None:
    """The ``raw_data`` field of the tensor encoded in ``initializer`` (a span of ``data``): the last one written,
    the one protobuf keeps; ``None`` when it has none or :func:`wire.fields` does not read it."""
    raw = [field for field in wire.fields(data, initializer.value, initializer.end) or ()
           if field.number == TENSOR_RAW_DATA and field.wire_type == wire.LENGTH_DELIMITED]
    return raw[-1] if raw else None


def without_large_raw_data(data: wire.ReadBuffer, layout: Layout) -> tuple[bytes, tuple[int, ...]] | None:
    """``data`` (a model's bytes, ``layout`` their :func:`bytes_layout`) with the ``raw_data`` of its large weights
    left out, and their indices among the initializers; ``None`` when it leaves out none. Parsed, it is the model but
    for those values, which the loader never reads: a weight is left out when the file is over
    :data:`_CHECKER_WHOLE_MAX_BYTES`, its encoding over :data:`_CHECKER_MAX_INITIALIZER_BYTES` and it holds over
    :data:`SMALL_CONST_ELEMENTS` elements in ``raw_data`` in the file, not external nor text: ONNX's checker is given
    its type only (:func:`checker_reads_values`), the constant folder never reads it, and its data's length is
    checked from the file (:func:`raw_data_bytes`). Protobuf copies every byte it parses: a detector's 84 MB of
    weights were its loader's largest part."""
    if len(data) <= _CHECKER_WHOLE_MAX_BYTES:
        return None
    kept: dict[int, bytes] = {}
    for index, span in enumerate(layout.initializers):
        if span.end - span.value > _CHECKER_MAX_INITIALIZER_BYTES:
            tensor = wire.fields(data, span.value, span.end)
            if tensor is not None and _large_raw_weight(data, tensor):
                kept[index] = b"".join(data[f.start:f.end] for f in tensor if f.number != TENSOR_RAW_DATA)
    if not kept:
        return None
    by_start = {layout.initializers[index].start: index for index in kept}
    view = memoryview(data)
    inner = [wire.length_delimited(GRAPH_INITIALIZER, kept[by_start[s.start]]) if s.start in by_start
             else view[s.start:s.end] for s in layout.graph]
    graph = wire.header(MODEL_GRAPH, sum(map(len, inner)))
    parts = [part for s in layout.top for part in ([graph, *inner] if s.number == MODEL_GRAPH
                                                   else [view[s.start:s.end]])]
    return b"".join(parts), tuple(kept)


def _large_raw_weight(data: wire.ReadBuffer, tensor: list[wire.Span]) -> bool:
    """Whether the tensor whose fields are ``tensor`` holds over :data:`SMALL_CONST_ELEMENTS` elements in
    ``raw_data``, its data in the file (not external), not text, every dim read and not negative."""
    dims: list[int] = []
    raw = False
    for field in tensor:
        number, kind = field.number, field.wire_type
        if number == TENSOR_RAW_DATA:
            if kind != wire.LENGTH_DELIMITED:  # protobuf refuses the file: left to it
                return False
            raw = True
        elif number == TENSOR_DIMS:
            read = wire.varints(data, field.value, field.end) if kind == wire.LENGTH_DELIMITED else \
                [wire.varint_at(data, field.value, field.end)] if kind == wire.VARINT else [None]
            if read is None or any(d is None or d >= 1 << 63 for d in read):
                return False
            dims.extend(d for d in read if d is not None)
        elif number in (TENSOR_DATA_TYPE, TENSOR_DATA_LOCATION):
            value = wire.varint_at(data, field.value, field.end) if kind == wire.VARINT else None
            if value is None or value == (TensorProto.STRING if number == TENSOR_DATA_TYPE else TensorProto.EXTERNAL):
                return False
    return raw and math.prod(dims) > SMALL_CONST_ELEMENTS


def checker_bytes(model: onnx.ModelProto, data: wire.ReadBuffer, *, ordered: bool = True, layout: Layout | None = None,
                  ) -> bytes | None:
    """The model :func:`_light_copy` gives the checker, serialized, cut from ``data`` (the bytes ``model`` was
    parsed from) instead of copied field by field and serialized again: the spans of the fields it keeps, in
    their order, the graph's name, and the large initializers as typed inputs after the graph's own inputs
    (:mod:`layerscope.model.wire`). ``data`` itself when the copy would be the model. The initializers whose
    values the checker is not given (:func:`checker_reads_values`, with the sizes of their spans and of ``data``,
    which are their ``ByteSize`` for every file an ONNX writer makes) are the typed inputs.

    ``None`` where the light copy is built as before: nodes not in a topological order (the copy sorts them),
    a graph output without a shape (the copy is given one), a file of at most
    :data:`_CHECKER_WHOLE_MAX_BYTES` that is not the copy (copied at little cost), or ``data`` not laid
    out as ``model`` (the graph not written once, counts of nodes, initializers or inputs that differ, anything
    :func:`wire.fields` does not read). ``ordered``: whether the nodes are in a topological order (the loader cuts
    the bytes before it knows, and drops the file's bytes: the validator uses the cut only for nodes in order).
    ``layout``: :func:`file_layout` of ``model`` and ``data`` when the caller has read it (``None``: read here)."""
    graph = model.graph
    if not ordered or any(not _has_shape(o) for o in graph.output):
        return None
    if len(data) <= _CHECKER_WHOLE_MAX_BYTES:  # every initializer's values are read: no need to read the spans
        itself = graph.name and not any(t.data_location == TensorProto.EXTERNAL for t in graph.initializer) and \
            not _extra_fields(model)
        return _whole(data) if itself else None  # a copy of a small model costs little
    if layout is None:
        layout = file_layout(model, data)
    if layout is None:
        return None
    top, inner = layout.top, layout.graph
    small = [(t, span) for t, span in zip(graph.initializer, layout.initializers, strict=True)
             if checker_reads_values(t, span.end - span.value, len(data))]
    if len(small) == len(graph.initializer) and graph.name and not _extra_fields(model):
        return _whole(data)  # the copy would be the model itself
    view = memoryview(data)
    kept = {t.name for t, _ in small}
    listed = {vi.name for vi in graph.input}
    types: dict[tuple[int, tuple[int, ...]], bytes] = {}
    try:
        typed = [wire.length_delimited(GRAPH_INPUT, typed_input(t.name, t.data_type, tuple(t.dims), types))
                 for t in graph.initializer if t.name not in kept and t.name not in listed]
    except ValueError:  # a name that is not UTF-8: the copy's check refuses it with one line
        return None
    light: list[bytes | memoryview] = [*(view[s.start:s.end] for s in inner if s.number in _GRAPH_KEPT),
                                       wire.length_delimited(GRAPH_NAME, (graph.name or "g").encode()),
                                       *(view[s.start:s.end] for _, s in small), *typed]
    # one copy of what is kept: the graph's parts written after its header, not joined first
    return b"".join([*(view[s.start:s.end] for s in top if s.number in _MODEL_KEPT),
                     wire.header(MODEL_GRAPH, sum(len(part) for part in light)), *light])


def _whole(data: wire.ReadBuffer) -> bytes:
    """``data`` as bytes: a buffer read whole (:mod:`layerscope.model.sparse_read` leaves out only weights the
    checker is not given, so such a buffer never reaches here with bytes left out)."""
    return data if isinstance(data, bytes) else bytes(data)


#: Field numbers (onnx.proto) of ``ValueInfoProto.name`` and ``type``.
_VALUE_INFO_NAME, _VALUE_INFO_TYPE = 1, 2


def typed_input(name: str, data_type: int, dims: tuple[int, ...], types: dict[tuple[int, tuple[int, ...]], bytes],
                ) -> bytes:
    """The graph input standing for a weight (for the checker and for shape inference), serialized: its name, data
    type and dims, the message ``helper.make_tensor_value_info(name, data_type, dims)`` makes. ``types`` holds the
    serialized ``type`` field of each (data type, dims) met so far: weights of a few shapes are typed once, not once
    each. ``ValueError`` when ``name`` is not text (protobuf hands over a name that is not UTF-8 as ``bytes``), as
    the helper raises it."""
    if not isinstance(name, str):
        raise ValueError(f"name {name!r} is not valid UTF-8")
    key = (data_type, dims)
    known = types.get(key)
    if known is None:
        known = types[key] = wire.length_delimited(
            _VALUE_INFO_TYPE, helper.make_tensor_type_proto(data_type, list(dims)).SerializeToString())
    return wire.length_delimited(_VALUE_INFO_NAME, name.encode()) + known


def _extra_fields(model: onnx.ModelProto) -> list[str]:
    """The fields of ``model`` (and its graph) :func:`_light_copy` would leave out, that are set."""
    names = [f"graph.{name}" for name in _UNCHECKED_GRAPH_FIELDS
             if name in model.graph.DESCRIPTOR.fields_by_name and _is_set(model.graph, name)]
    # text the checker does not read (the copy leaves it out too); anything else set (metadata, training info,
    # configuration) makes the checker see a copy
    kept = {"ir_version", "opset_import", "functions", "graph", "producer_name", "producer_version", "domain",
            "model_version", "doc_string"}
    return names + [field.name for field, _ in model.ListFields() if field.name not in kept]


def _is_set(message: onnx.GraphProto, name: str) -> bool:
    value = getattr(message, name)
    return bool(value) if isinstance(value, str) else len(value) > 0


def _run_checker(model: onnx.ModelProto, *, full_check: bool = True, ordered: bool | None = None,
                 checked: bytes | None = None, sizes: _Sizes | None = None) -> None:
    if checked is not None and ordered:
        onnx.checker.check_model(checked, full_check=full_check)
        return
    copy = _light_copy(model, ordered=ordered, sizes=sizes)
    if any(not _has_shape(o) for o in copy.graph.output):
        if copy is model:  # shapes are given to a copy, never to the caller's model
            copy = onnx.ModelProto()
            copy.CopyFrom(model)
        _give_outputs_shapes(copy)
    onnx.checker.check_model(copy, full_check=full_check)


def _has_shape(vi: onnx.ValueInfoProto) -> bool:
    return not vi.type.HasField("tensor_type") or vi.type.tensor_type.HasField("shape")


def _give_outputs_shapes(model: onnx.ModelProto) -> None:
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    except Exception:  # onnx raises several internal error types; the checker will report the model
        return
    known = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output] if _has_shape(vi)}
    outputs = [known.get(o.name, o) for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(o for o in outputs if _has_shape(o))
