"""The typed graph every other package reads.

Contract: a ``Graph`` is fully resolved. Every tensor a runtime layer touches has a static shape
and a dtype, except the tensors of a layer whose ``shape_source`` is ``"unknown"`` (sequences, maps);
constant subgraphs are already folded away into ``Graph.constants``; ``Graph.layers``
is in topological order and every layer has a unique, stable ``id``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePath
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np

#: numpy dtype name -> bytes per element, for the ONNX tensor types layerscope costs.
DTYPE_BYTES: Mapping[str, int] = MappingProxyType(
    {
        "float64": 8,
        "float32": 4,
        "float16": 2,
        "bfloat16": 2,
        "float8": 1,
        "int64": 8,
        "uint64": 8,
        "int32": 4,
        "uint32": 4,
        "int16": 2,
        "uint16": 2,
        "int8": 1,
        "uint8": 1,
        "int4": 1,  # rounded up: layerscope does not model sub-byte packing
        "uint4": 1,
        "bool": 1,
        "complex64": 8,
        "complex128": 16,
        "string": 8,  # a pointer's worth: strings are not modelled
    }
)


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor: name, static shape and numpy dtype name (e.g. ``"float32"``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    #: Computed once (costs and the roofline read them for every layer): product of ``shape``, bytes per
    #: element of ``dtype`` (4 when unknown), and their product.
    elements: int = field(init=False, repr=False, compare=False)
    itemsize: int = field(init=False, repr=False, compare=False)
    nbytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        elements = math.prod(self.shape)
        itemsize = DTYPE_BYTES.get(self.dtype, 4)
        object.__setattr__(self, "elements", elements)
        object.__setattr__(self, "itemsize", itemsize)
        object.__setattr__(self, "nbytes", elements * itemsize)

    def renamed(self, name: str) -> TensorInfo:
        """This tensor's shape and dtype under ``name`` (equal to ``TensorInfo(name, shape, dtype)``), its sizes
        taken as computed: a big model has 100k tensors of a few types."""
        info = _new(TensorInfo)
        _set_name(info, name)
        _set_shape(info, self.shape)
        _set_dtype(info, self.dtype)
        _set_elements(info, self.elements)
        _set_itemsize(info, self.itemsize)
        _set_nbytes(info, self.nbytes)
        return info


_new = object.__new__
#: Each field's slot written directly (what ``object.__setattr__`` does after looking the slot up by name).
_set_name, _set_shape, _set_dtype, _set_elements, _set_itemsize, _set_nbytes = (
    TensorInfo.__dict__[name].__set__ for name in ("name", "shape", "dtype", "elements", "itemsize", "nbytes"))


@dataclass(frozen=True, slots=True)
class Node:
    """One ONNX node.

    ``id`` is the stable layer id: the node's name when it has a unique one, otherwise
    ``"<op_type>(<first output name>)"`` (with ``~N`` appended on collision). ``inputs`` keep
    ONNX's positions: an omitted optional input is ``""``. ``attrs`` hold plain Python values
    (ints, floats, strings, lists of them; tensors as numpy arrays).

    ``shape_source`` says where the shapes of its tensors came from: ``"static"`` (ONNX shape inference),
    ``"symbolic"`` (ONNX Runtime's symbolic shape inference), ``"executed"`` (observed running the model
    once on ONNX Runtime) or ``"unknown"`` (a tensor of it has no shape even then: its cost is unknown).
    A node of a control-flow subgraph (``If``/``Loop``/``Scan`` body) has
    ``parent``: the id of the control-flow layer it runs under, and its id is
    ``<parent id>/<subgraph attribute>/<node id>``. ``executions``: how often it ran in one inference
    (observed; 1 for top-level layers), its cost counts every execution. ``observed``: what execution said
    of a control-flow layer (``branch_taken``, ``trip_count``).
    """

    id: str
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    shape_source: str = "static"
    parent: str = ""
    executions: int = 1
    observed: Mapping[str, Any] = field(default_factory=dict)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)


def made_node(node_id: str, name: str, op_type: str, domain: str, inputs: tuple[str, ...],  # noqa: PLR0917
              outputs: tuple[str, ...], attrs: Mapping[str, Any], shape_source: str, parent: str, executions: int,
              ) -> Node:
    """``Node(node_id, name, ..., executions)`` (``observed`` empty), made by writing its slots, as
    :meth:`TensorInfo.renamed` does: the dataclass's frozen ``__init__`` sets each field through
    ``object.__setattr__`` (0.19 s against 0.09 s for a 100k-layer model's nodes). Positional: by keyword, a call
    costs half as much again."""
    node = _new(Node)
    _set_node_id(node, node_id)
    _set_node_name(node, name)
    _set_node_op_type(node, op_type)
    _set_node_domain(node, domain)
    _set_node_inputs(node, inputs)
    _set_node_outputs(node, outputs)
    _set_node_attrs(node, attrs)
    _set_node_shape_source(node, shape_source)
    _set_node_parent(node, parent)
    _set_node_executions(node, executions)
    _set_node_observed(node, {})
    return node


(_set_node_id, _set_node_name, _set_node_op_type, _set_node_domain, _set_node_inputs, _set_node_outputs,
 _set_node_attrs, _set_node_shape_source, _set_node_parent, _set_node_executions, _set_node_observed) = (
    Node.__dict__[name].__set__ for name in ("id", "name", "op_type", "domain", "inputs", "outputs", "attrs",
                                             "shape_source", "parent", "executions", "observed"))


#: What :meth:`Graph.derived` makes.
_Derived = TypeVar("_Derived")


@dataclass(frozen=True)
class Graph:
    """A loaded, shape-resolved, constant-folded model.

    ``layers``: the runtime layers, topological order. ``folded``: nodes computed only from
    constants (Constant, ConstantOfShape, ...) that layerscope folded into weights.
    ``tensors``: every tensor with a known shape, activations and constants alike.
    ``constants``: initializers and folded outputs (weights). ``const_values``: the values of the
    small constants that layers need to read (shapes, axes, scales); large weights are not kept.
    ``assumptions``: one line per default layerscope chose (a batch-like input dim set to 1).
    """

    name: str
    path: str
    sha256: str
    opset: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    layers: tuple[Node, ...]
    folded: tuple[Node, ...]
    tensors: Mapping[str, TensorInfo]
    constants: Mapping[str, TensorInfo]
    const_values: Mapping[str, np.ndarray]
    producer: str = ""
    assumptions: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The model as a message names it: its file's name (the ONNX graph's own name is often an exporter's
        hash), else :attr:`name`."""
        return PurePath(self.path).name if self.path else self.name

    def shape_source_counts(self) -> dict[str, int]:
        """How many layers got their shapes from each source (``static``/``symbolic``/``executed``)."""
        counts: dict[str, int] = {}
        for node in self.layers:
            counts[node.shape_source] = counts.get(node.shape_source, 0) + 1
        return counts

    @cached_property
    def positions(self) -> Mapping[str, int]:
        """Each layer's position in :attr:`layers` by its id (made once per graph and kept, read-only: a lookup per
        layer of a 100k-layer model, not a scan)."""
        return {n.id: i for i, n in enumerate(self.layers)}

    @cached_property
    def writers(self) -> Mapping[str, Node]:
        """The layer that writes each tensor, by the tensor's name (made once per graph)."""
        return {o: n for n in self.layers for o in n.outputs if o}

    @cached_property
    def reader_indices(self) -> Mapping[str, Sequence[int]]:
        """The indices in :attr:`layers` of the layers that read each tensor, in graph order, by the tensor's name
        (made once per graph, read-only; a layer reading a tensor at two of its inputs is listed twice)."""
        out: dict[str, list[int]] = {}
        for k, n in enumerate(self.layers):
            for i in n.inputs:
                if i:
                    out.setdefault(i, []).append(k)
        return out

    @cached_property
    def readers(self) -> Mapping[str, tuple[str, ...]]:
        """The ids of the layers that read each tensor, by the tensor's name (made once per graph; a layer reading a
        tensor at two of its inputs is listed twice)."""
        layers = self.layers
        return {name: tuple(layers[k].id for k in indices) for name, indices in self.reader_indices.items()}

    def derived(self, make: Callable[[Graph], _Derived]) -> _Derived:
        """``make(self)``, made once per graph and kept with it (by ``make``; like :attr:`positions`, what a later
        stage derives from a graph: the graph is frozen, so what is derived from it stays right, and goes with it).
        The result is shared by every caller: it is read, never changed."""
        made: dict[Callable[[Graph], Any], Any] = self.__dict__.setdefault("_derived", {})
        if make not in made:
            made[make] = make(self)
        result: _Derived = made[make]
        return result

    def tensor(self, name: str) -> TensorInfo | None:
        """The tensor called ``name``.

        ``None`` for an omitted optional input (``""``) and for an optional output that nothing
        consumes and whose shape ONNX could not infer (e.g. Dropout's mask); every other tensor of a
        layer has a shape.
        """
        if not name:
            return None
        return self.tensors.get(name)

    def is_constant(self, name: str) -> bool:
        return name in self.constants

    def value(self, name: str) -> np.ndarray | None:
        """The value of a small constant tensor, or ``None`` when it is not known."""
        return self.const_values.get(name)

    @property
    def weight_bytes(self) -> int:
        """Bytes of the constants the layers read: what a deployment stores (folded intermediates excluded)."""
        read = {i for n in self.layers for i in n.inputs if i in self.constants}
        return sum(self.constants[name].nbytes for name in read)
