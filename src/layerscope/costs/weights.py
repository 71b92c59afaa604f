"""Learned tensors and weights by identity: what the model's params count, and which constants the layers read
are one tensor of the model.

**Learned tensor** (the one definition the summary's ``params``, each layer's ``params`` and the realworld
benchmark's count of the file share): a tensor stored in the model (an initializer or a ``Constant`` node's value)
that

- has a dtype of :data:`LEARNED_DTYPES` (a float, or the 8- and 4-bit integers quantized weights are stored in), or
  any integer dtype where a quantized op reads it as data (:data:`QUANTIZED_INPUTS`: a dequantize's input, an int32
  quantized bias);
- holds more than one element: a scalar operand (a Clip bound, a Pow exponent, an epsilon, a per-tensor
  quantization scale or zero point) is a setting, not a learned value (so is the bias of a one-output layer);
- is read by some node, of the main graph or of a folded constant computation, at a position that is not a
  setting (:data:`SETTING_INPUTS`: shapes, axes, sizes, Resize scales, bounds, fill values, recurrent initial
  states, quantization scales and zero points). A tensor that no node of the graph reads (a weight of an ``If``
  branch that did not run) is judged on its dtype and size alone.

A light copy of a model (``onnx.tools.replace_constants``: each large initializer ``W`` replaced by
``ConstantOfShape(W__SHAPE)``, as onnx's own model-zoo test files are) keeps its weights' places: such a node's output
is the stored tensor it stands in for (:func:`stands_in`). Any other constant the loader computed (a folded
``Transpose``, ``Slice``, ``Concat``, ``DequantizeLinear``, ``ConstantOfShape``...) is not stored in the model: it
is *made of* the learned tensors its computation reads (:func:`learned_tensors`), none for a ``ConstantOfShape`` of
zeros or an anchor grid made by ``Range``.

Contracts:
- :func:`is_learned`: the rule above for one tensor, given its dtype, element count and readers (``(op_type, input
  position)``); :func:`learned_by_reads` the same without the element count; :func:`reads_learned` for one read;
- :func:`learned_tensors`: per constant of a loaded graph, the learned tensors of the model it is made of (a
  layer's ``params``: those behind its constant inputs, :func:`layerscope.costs._common.io_bytes`);
- :func:`unique_params`: the model's params, each learned tensor once (shared, sliced and re-laid-out tensors
  included);
- :func:`weight_identities` maps every constant a layer reads to its identity: an initializer or a Constant node's
  value is its own identity; a folded node that only lays out or converts one constant (:data:`SAME_ELEMENTS_OPS`:
  a Transpose of a tied embedding, a Reshape, a Cast, a DequantizeLinear of an int8 weight) gives its output the
  identity of that constant; any other folded node (a Concat, an Add of two constants, an Expand) makes a new
  tensor, its own identity. :func:`shared_weights` lists the identities that more than one layer reads, with their
  readers;
- :func:`unique_weight_bytes`: bytes of the constants the layers read, each identity once at the size of its
  largest member: :attr:`Graph.weight_bytes` when no two read constants share an identity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from layerscope.model.types import Graph, Node

#: dtypes of the tensors that may be learned (``TensorInfo.dtype`` names): floats, and the integers quantized
#: weights are stored in.
LEARNED_DTYPES = frozenset({"float64", "float32", "float16", "bfloat16", "float8", "int8", "uint8", "int4", "uint4"})

#: Reads where a tensor of any integer dtype is a learned tensor: the data of a dequantize (ONNX Runtime's quantizer
#: stores a bias as int32), the int32 bias of QLinearConv and QGemm, the int16 operands of MatMulInteger16.
QUANTIZED_INPUTS = frozenset({("DequantizeLinear", 0), ("QLinearConv", 8), ("QGemm", 6), ("MatMulInteger16", 0),
                              ("MatMulInteger16", 1)})

#: Per op type (any domain), the input positions that hold settings, not learned values (``None``: every input),
#: from the ONNX operator specs and ONNX Runtime's contrib-op docs (docs/ContribOperators.md): sizes, scales and
#: bounds (Resize roi/scales/sizes, Upsample scales, Clip min/max, Pad pads/value/axes, OneHot depth/values, Where's
#: fill values, Dropout ratio), ops that read only a shape or make a sequence (Shape, Size, ConstantOfShape,
#: EyeLike, Range), recurrent sequence lengths and initial states, and the scales and zero points of quantized ops.
#: Integer shape and axes operands (Reshape, Slice, Expand...) are int64: never learned by their dtype.
SETTING_INPUTS: Mapping[str, frozenset[int] | None] = MappingProxyType({
    "Resize": frozenset({1, 2, 3}), "Upsample": frozenset({1}), "Clip": frozenset({1, 2}),
    "Pad": frozenset({1, 2, 3}), "OneHot": frozenset({1, 2}), "Where": frozenset({1, 2}),
    "Dropout": frozenset({1, 2}), "Shape": None, "Size": None, "ConstantOfShape": None, "EyeLike": None,
    "Range": None,
    "LSTM": frozenset({4, 5, 6}), "GRU": frozenset({4, 5}), "RNN": frozenset({4, 5}),
    "QuantizeLinear": frozenset({1, 2}), "DequantizeLinear": frozenset({1, 2}),
    "QLinearConv": frozenset({1, 2, 4, 5, 6, 7}), "QLinearMatMul": frozenset({1, 2, 4, 5, 6, 7}),
    "MatMulInteger": frozenset({2, 3}), "ConvInteger": frozenset({2, 3}),
    "DynamicQuantizeLSTM": frozenset({4, 5, 6, 8, 9, 10, 11}), "DynamicQuantizeMatMul": frozenset({2, 3}),
    "MatMulIntegerToFloat": frozenset({2, 3, 4, 5}), "QGemm": frozenset({1, 2, 4, 5, 7, 8}),
    "QLinearAdd": frozenset({1, 2, 4, 5, 6, 7}), "QLinearMul": frozenset({1, 2, 4, 5, 6, 7}),
    "QAttention": frozenset({3, 4, 5, 6, 7, 8}), "Attention": frozenset({3, 4, 5, 6}),
    "QLinearSigmoid": frozenset({1, 2, 3, 4}), "QLinearLeakyRelu": frozenset({1, 2, 3, 4}),
    "QLinearSoftmax": frozenset({1, 2, 3, 4}), "QLinearAveragePool": frozenset({1, 2, 3, 4}),
    "QLinearGlobalAveragePool": frozenset({1, 2, 3, 4}), "QLinearReduceMean": frozenset({1, 2, 3, 4}),
    "QLinearConcat": None, "MulInteger": frozenset({1, 3}),
})


def reads_learned(op_type: str, position: int, dtype: str) -> bool:
    """Whether a tensor of ``dtype`` read by an ``op_type`` node at input ``position`` is read as a learned value
    (see the module docstring): the position is not a setting and the dtype may be learned there."""
    settings = SETTING_INPUTS.get(op_type, frozenset())
    if settings is None or position in settings:
        return False
    return dtype in LEARNED_DTYPES or ((op_type, position) in QUANTIZED_INPUTS and dtype.startswith(("int", "uint")))


def is_learned(dtype: str, elements: int, reads: Iterable[tuple[str, int]]) -> bool:
    """Whether a tensor stored in the model is a learned tensor (see the module docstring): ``dtype`` its
    ``TensorInfo.dtype`` name, ``elements`` its element count, ``reads`` the ``(op_type, input position)`` of every
    node that reads it (none: judged on its dtype alone)."""
    return elements > 1 and learned_by_reads(dtype, reads)


def learned_by_reads(dtype: str, reads: Iterable[tuple[str, int]]) -> bool:
    """:func:`is_learned` of a tensor of more than one element: judged on its ``dtype`` and ``reads`` alone."""
    reads = list(reads)
    if not reads:
        return dtype in LEARNED_DTYPES
    return any(reads_learned(op_type, position, dtype) for op_type, position in reads)


#: The suffix ``onnx.tools.replace_constants`` gives the shape input of the ``ConstantOfShape`` that stands in for an
#: initializer it took out.
LIGHT_SHAPE_SUFFIX = "__SHAPE"


def stands_in(op_type: str, inputs: Iterable[str], output: str) -> bool:
    """Whether a node of ``op_type`` reading ``inputs`` stands in, in a light copy of a model, for the stored tensor
    ``output`` (see the module docstring): a ``ConstantOfShape`` of ``output + "__SHAPE"``."""
    return op_type == "ConstantOfShape" and list(inputs)[:1] == [output + LIGHT_SHAPE_SUFFIX]


class LearnedTensors:
    """The learned tensors of one loaded graph (:func:`learned_tensors`): ``elements`` of each learned tensor stored
    in the model, by name; ``sources`` of every constant of the graph, the learned tensors it is made of (itself,
    for a stored one that is learned; none for a stored one that is not)."""

    def __init__(self, elements: Mapping[str, int], sources: Mapping[str, frozenset[str]]) -> None:
        self.elements = elements
        self.sources = sources
        self._behind_one: dict[str, int] = {}

    def elements_behind(self, name: str) -> int:
        """:meth:`behind` of the one constant ``name`` (kept: a signature per layer asks for each weight)."""
        found = self._behind_one.get(name)
        if found is None:
            found = self._behind_one[name] = sum(self.elements[source] for source in self.sources.get(name, ()))
        return found

    def behind(self, names: Iterable[str]) -> int:
        """Elements of the learned tensors the constants ``names`` are made of, each tensor once."""
        found: set[str] = set()
        for name in names:
            found.update(self.sources.get(name, ()))
        return sum(self.elements[name] for name in found)


def learned_tensors(graph: Graph) -> LearnedTensors:
    """The learned tensors of ``graph`` (see the module docstring); computed once per graph."""
    return graph.derived(_learned_tensors)


def _learned_tensors(graph: Graph) -> LearnedTensors:
    """:func:`learned_tensors`, computed: the stored tensors judged by their readers among the layers and the folded
    nodes, then each folded output's sources, in the folded nodes' order (a producer before its readers)."""
    constants = graph.constants
    producer = {name: node for node in graph.folded if node.op_type != "Constant" for name in node.outputs
                if not stands_in(node.op_type, node.inputs, name)}
    layers, readers = graph.layers, graph.reader_indices
    folded_reads: dict[str, list[tuple[str, int]]] = {}
    for node in graph.folded:
        for position, name in enumerate(node.inputs):
            if name in constants and name not in producer:
                folded_reads.setdefault(name, []).append((node.op_type, position))
    judged: dict[tuple[str, tuple[tuple[str, int], ...]], bool] = {}  # learned_by_reads, by its arguments
    elements: dict[str, int] = {}
    for name, info in constants.items():
        if name in producer or info.elements <= 1:  # not learned (is_learned), whatever reads it
            continue
        reads = [(layers[k].op_type, position) for k in dict.fromkeys(readers.get(name, ()))
                 for position, read in enumerate(layers[k].inputs) if read == name]
        key = (info.dtype, (*reads, *folded_reads.get(name, ())))
        learned = judged.get(key)
        if learned is None:
            learned = judged[key] = learned_by_reads(*key)
        if learned:
            elements[name] = info.elements
    sources: dict[str, frozenset[str]] = {name: frozenset((name,)) if name in elements else frozenset()
                                          for name in constants if name not in producer}
    for name in constants:
        if name not in sources:
            _resolve(name, producer, sources)
    return LearnedTensors(MappingProxyType(elements), MappingProxyType(sources))


def _resolve(name: str, producer: Mapping[str, Node], sources: dict[str, frozenset[str]]) -> frozenset[str]:
    """The sources of folded output ``name`` (recorded in ``sources``, with those of the folded outputs it reads);
    an input that is neither stored nor folded (a graph input, which a folded node never reads) adds none."""
    stack = [name]
    while stack:
        top = stack[-1]
        node = producer.get(top)
        inputs = [i for i in node.inputs if i] if node is not None else []
        pending = [i for i in inputs if i not in sources and i in producer]
        if pending:
            if any(i in stack for i in pending):  # a cycle in a malformed graph: no sources through it
                sources[top] = frozenset()
                stack.pop()
                continue
            stack.extend(pending)
            continue
        found: set[str] = set()
        for i in inputs:
            found.update(sources.get(i, ()))
        sources[top] = frozenset(found)
        stack.pop()
    return sources[name]

#: Folded ops whose output holds the elements of their input 0, laid out or converted: the output is the same
#: tensor of the model file (its identity).
SAME_ELEMENTS_OPS = frozenset({"Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast",
                               "CastLike", "DequantizeLinear", "QuantizeLinear"})


def weight_identities(graph: Graph) -> Mapping[str, str]:
    """The identity (see the module docstring) of every constant a layer of ``graph`` reads, by constant name;
    computed once per graph."""
    return graph.derived(_weight_identities)


def _weight_identities(graph: Graph) -> Mapping[str, str]:
    """:func:`weight_identities`, computed."""
    constants = graph.constants
    source: dict[str, str] = {}  # a folded same-elements output -> the constant it lays out
    for node in graph.folded:
        if node.op_type in SAME_ELEMENTS_OPS and node.inputs and node.outputs and node.inputs[0] in constants:
            source[node.outputs[0]] = node.inputs[0]
    readers = graph.reader_indices
    return MappingProxyType({name: _root(name, source) if name in source else name
                             for name in constants if name in readers})


def _root(name: str, source: Mapping[str, str]) -> str:
    """The end of ``name``'s chain in ``source`` (a chain that loops ends where it would repeat)."""
    seen = {name}
    while (parent := source.get(name)) is not None and parent not in seen:
        seen.add(parent)
        name = parent
    return name


def shared_weights(graph: Graph) -> dict[str, tuple[int, ...]]:
    """The identities that more than one layer of ``graph`` reads, each with the indices (into ``graph.layers``, in
    order) of the layers reading it."""
    identities = weight_identities(graph)
    # the identities read more than once in all (a shared identity's reads are; a layer reading one twice too),
    # then the readers of those identities alone
    reads: Counter[str] = Counter()
    reader_indices = graph.reader_indices
    for name, identity in identities.items():
        reads[identity] += len(reader_indices[name])
    candidates = {identity for identity, count in reads.items() if count > 1}
    if not candidates:
        return {}
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.layers):
        for name in node.inputs:
            found = identities.get(name) if name else None
            if found in candidates:
                at = readers.setdefault(found, [])
                if not at or at[-1] != i:
                    at.append(i)
    return {identity: tuple(at) for identity, at in readers.items() if len(at) > 1}


def unique_params(graph: Graph) -> int:
    """The model's learned parameters (see the module docstring): the elements of every learned tensor stored in the
    model, each once, whichever layers read it, whole or in part."""
    return sum(learned_tensors(graph).elements.values())


def unique_weight_bytes(graph: Graph) -> int:
    """Bytes of the constants the layers read as stored in the model, each identity once (its largest member)."""
    sizes: dict[str, int] = {}
    constants = graph.constants
    for name, identity in weight_identities(graph).items():
        sizes[identity] = max(sizes.get(identity, 0), constants[name].nbytes)
    return sum(sizes.values())
