"""The fusion map: which source layers each runtime kernel covers.

ONNX Runtime rewrites the graph before it runs it (Conv+BatchNormalization+Relu become one FusedConv,
the NCHWc transformer replaces convolutions by blocked-layout kernels and inserts Reorder nodes, Identity
and Dropout disappear). Its profiler names the kernels of that optimized graph. This module relates each
optimized-graph node to the source layers whose work it does, from tensor names and graph structure:

1. *Equivalent tensors.* An optimized-graph tensor whose name exists in the source graph is that tensor.
   A node of ``com.microsoft.nchwc`` called ``<t>_nchwc`` (``<t>_bn_nchwc``, ``<t>_mul_nchwc``) produces the
   blocked form of source tensor ``<t>`` (the NCHWc transformer names its nodes after the output they
   replace). Layout nodes (ReorderInput, ReorderOutput, Memcpy*) and shape-only nodes the runtime
   inserted (the Reshapes around MatMulAddFusion's Gemm) produce the same logical tensor as their input.
   A fused node named ``<source node>/<Fusion>/``, or a node that kept its source node's name, whose one
   output was renamed produces that source node's output, provided the source node lies downstream of
   everything it reads.
2. *Cover.* A kernel covers the source layers needed to compute its outputs' equivalents from its inputs'
   equivalents: ancestors(outputs) minus ancestors(inputs), over the source layers (bit sets).
3. *Inputs of identified kernels.* A kernel identified with one source node reads, at the same input
   positions, what that source node reads: ``<t>_nchwc`` (NCHWc transformer) or a node that kept its source
   node's name and op type, or the only source node of its op type in the region it would otherwise cover
   (``FusedConv`` for a ``Conv``). This resolves the outputs of kernels that were moved to blocked layout
   under new names (a ``Gelu`` fused on NCHWc tensors writes ``reorder_token_1``, which the next NCHWc Conv
   reads as its input 0: that is the source Conv's input 0, the GELU's output). Steps 1 and 3 repeat until
   nothing new resolves.
4. A kernel whose outputs still have no equivalent is merged with the kernels that consume them: together
   they cover the source region between their resolved inputs and outputs (``merged_with``), and the
   region is partitioned among them by op type (:func:`_partition`), so that no layer takes time from a
   kernel that does not do its work.

Kernel categories: ``layer`` (covers source layers), ``layout`` (layout/transfer nodes the runtime inserted,
shape-only nodes it inserted, or any node whose output holds the same source tensor as its input),
``constant`` (computes only from constants), ``unmapped`` (none of these: reported, never dropped).
Source layers no kernel covers are ``eliminated`` (folded or removed by the runtime). Unnamed nodes are
keyed ``<op_type>_<position>``; :meth:`FusionMap.profiled_names` pairs them with the profiler's names.
The attribution invariant the map serves is checked by :func:`map_violations` here and
:func:`~layerscope.measure.profile.attribution_violations` on measured times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import onnx

from layerscope.model.types import Graph, Node

#: Nodes the runtime inserts to change layout or move data between devices: same logical tensor out.
LAYOUT_OPS = frozenset({"ReorderInput", "ReorderOutput", "MemcpyFromHost", "MemcpyToHost"})
#: Shape-only ops: one the runtime inserts (its name is no source node's) holds its input's data.
_RESHAPES = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})
_NCHWC_DOMAIN = "com.microsoft.nchwc"
_NCHWC_SUFFIX = "_nchwc"


@dataclass(frozen=True)
class KernelMapping:
    """One optimized-graph node: the source layers (ids, topological order) whose work it does."""

    kernel: str
    op_type: str
    domain: str
    layers: tuple[str, ...]
    category: str
    merged_with: tuple[str, ...] = ()


@dataclass(frozen=True)
class FusionMap:
    """Every kernel's mapping, and the source layers no kernel covers."""

    kernels: Mapping[str, KernelMapping]
    eliminated: tuple[str, ...]
    #: The kernels of unnamed nodes, in graph order, under the names the map gave them (``<op>_<position>``).
    unnamed: tuple[str, ...] = ()

    def profiled_names(self, names: Iterable[str]) -> dict[str, str]:
        """Which kernel of the map each profiled kernel name is.

        A named node's kernel is profiled under its name. ONNX Runtime's profiler calls an unnamed node
        ``<op_type>_<node index>``, an index of its own that the saved graph does not keep: those names are
        paired, per op type, in index order with the map's unnamed kernels of that op in graph order, when
        both count the same (a profiled ``Mul_5`` is not the map's ``Mul_5``: that is a position). Names
        neither way finds are left out.
        """
        found: dict[str, str] = {}
        pending: dict[str, list[tuple[int, str]]] = {}
        unnamed = set(self.unnamed)
        for name in names:
            if name in self.kernels and name not in unnamed:
                found[name] = name
                continue
            op, _, index = name.rpartition("_")
            if op and index.isdigit():
                pending.setdefault(op, []).append((int(index), name))
        for op, profiled in pending.items():
            ours = [k for k in self.unnamed if self.kernels[k].op_type == op]
            if len(ours) == len(profiled):
                found.update((name, kernel) for (_, name), kernel in zip(sorted(profiled), ours, strict=True))
        return found

    def layer_status(self, layer_id: str) -> str:
        """``measured`` (a kernel of its own), ``fused`` (shares a kernel) or ``eliminated``."""
        groups = [k.layers for k in self.kernels.values() if layer_id in k.layers]
        if not groups:
            return "eliminated"
        return "measured" if all(len(g) == 1 for g in groups) else "fused"


class _SourceIndex:
    """Ancestor bit sets of the source graph's tensors (bit i = ``graph.layers[i]``)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.ancestors: dict[str, int] = {}
        self.producer: dict[str, Node] = {o: n for n in graph.layers for o in n.outputs if o}
        self.by_name: dict[str, Node] = {n.name: n for n in graph.layers if n.name}
        self.index: dict[str, int] = {n.id: i for i, n in enumerate(graph.layers)}
        self.consumers: dict[str, list[Node]] = {}
        for node in graph.layers:
            for name in dict.fromkeys(node.inputs):
                if name:
                    self.consumers.setdefault(name, []).append(node)
        for index, node in enumerate(graph.layers):
            bits = 1 << index
            for name in node.inputs:
                bits |= self.ancestors.get(name, 0)
            for name in node.outputs:
                if name:
                    self.ancestors[name] = bits

    def known(self, name: str) -> bool:
        return name in self.ancestors or name in self.graph.tensors

    def ids(self, bits: int) -> tuple[str, ...]:
        layers = self.graph.layers
        return tuple(layers[i].id for i in range(len(layers)) if bits >> i & 1)


def build_fusion_map(graph: Graph, optimized: onnx.ModelProto) -> FusionMap:
    """Map every node of ``optimized`` (the runtime's optimized graph) to the layers of ``graph``."""
    source = _SourceIndex(graph)
    nodes = _named_nodes(optimized.graph.node)
    constants = {t.name for t in optimized.graph.initializer}
    equivalent: dict[str, str] = {}
    for _ in range(len(nodes) + 1):  # each round resolves at least one more tensor, or stops
        _equivalents(nodes, source, equivalent)
        covers = _covers(nodes, source, equivalent, constants)
        learned = _identified_inputs(nodes, source, equivalent, constants, covers)
        if not learned:
            break
        equivalent.update(learned)

    mappings: dict[str, KernelMapping] = {}
    by_name = {n.name: n for n in nodes}
    claimed: dict[str, list[str]] = {}  # unresolved kernel -> the resolved kernels it was merged into
    shares: dict[str, int] = {}  # unresolved kernel -> the layers (bits) its partners' regions gave it
    for node in nodes:
        if node.name not in covers:
            continue  # handled through the consumers that merge it
        outs, ins, cover, merged = covers[node.name]
        merged = list(dict.fromkeys(merged))
        if merged:  # one region, several kernels: each layer to the kernel that does its kind of work
            parts = _partition(cover, node, [by_name[m] for m in merged], source)
            cover = parts[node.name]
            for m in merged:
                claimed.setdefault(m, []).append(node.name)
                shares[m] = shares.get(m, 0) | parts[m]
        layers = source.ids(cover)
        mappings[node.name] = KernelMapping(
            kernel=node.name, op_type=node.op_type, domain=node.domain, layers=layers,
            category=_category(node, layers, constants, graph, relayout=set(outs) <= set(ins),
                               inserted_shape=_inserted_shape(node, source)),
            merged_with=tuple(merged))
    for name, partners in claimed.items():
        if name in mappings:
            continue
        layers = source.ids(shares.get(name, 0))
        node = by_name[name]
        mappings[name] = KernelMapping(kernel=name, op_type=node.op_type, domain=node.domain, layers=layers,
                                       category=_category(node, layers, constants, graph,
                                                          inserted_shape=_inserted_shape(node, source)),
                                       merged_with=tuple(dict.fromkeys(partners)))
    for node in nodes:
        if node.name not in mappings:
            category = _category(node, (), constants, graph)
            mappings[node.name] = KernelMapping(node.name, node.op_type, node.domain, (), category)
    covered = {lid for m in mappings.values() for lid in m.layers}
    eliminated = tuple(n.id for n in graph.layers if n.id not in covered)
    unnamed = tuple(ours.name for ours, theirs in zip(nodes, optimized.graph.node, strict=True) if not theirs.name)
    return FusionMap(kernels=mappings, eliminated=eliminated, unnamed=unnamed)


def _inserted_shape(node: onnx.NodeProto, source: _SourceIndex) -> bool:
    """A shape-only node (Reshape, Squeeze, ...) the runtime inserted: no source node has its name."""
    return node.op_type in _RESHAPES and node.name not in source.by_name


def _affinity(node: onnx.NodeProto, source: _SourceIndex) -> set[str]:
    """The source op types whose work ``node`` does: its own, its base op (``FusedConv``: Conv), the op of
    the source node its name starts with (``/a/Gather_2/GatherSliceToSplitFusion``: Gather) or of the tensor
    an NCHWc node is named after."""
    ops = {node.op_type, _BASE_OP.get(node.op_type, node.op_type), *_DOES.get(node.op_type, ())}
    name = node.name
    while name:
        named = source.by_name.get(name)
        if named is not None:
            ops.add(named.op_type)
        name = name.rsplit("/", 1)[0] if "/" in name else ""
    base = _nchwc_base(node, source)
    if base is not None and base in source.producer:
        ops.add(source.producer[base].op_type)
    return ops


def _partition(cover: int, owner: onnx.NodeProto, merged: Sequence[onnx.NodeProto],
               source: _SourceIndex) -> dict[str, int]:
    """Split the region ``cover`` of a kernel and the unresolved kernels merged into it (step 4).

    Each layer goes to the one kernel whose :func:`_affinity` has its op type (to ``owner`` when several
    do); the layers no kernel claims go to every kernel left without layers -- together they ran them (a
    HardSwish function inlined as HardSigmoid and Mul kernels) --, else to ``owner``. Shape-only nodes the
    runtime inserted take no layers.
    """
    members = [owner, *merged]
    affinity = {m.name: (set() if _inserted_shape(m, source) else _affinity(m, source)) for m in members}
    parts = dict.fromkeys((m.name for m in members), 0)
    leftover = 0
    for i, layer in enumerate(source.graph.layers):
        if not cover >> i & 1:
            continue
        takers = [m.name for m in members if layer.op_type in affinity[m.name]]
        if not takers:
            leftover |= 1 << i
            continue
        parts[owner.name if owner.name in takers else takers[0]] |= 1 << i
    if leftover:
        empty = [m.name for m in members if not parts[m.name] and affinity[m.name]]
        for name in empty or [owner.name]:
            parts[name] |= leftover
    return parts


def _named_nodes(nodes: Sequence[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """The nodes, an unnamed one named ``<op_type>_<position>`` (see :meth:`FusionMap.profiled_names`)."""
    named = []
    for index, node in enumerate(nodes):
        if node.name:
            named.append(node)
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = f"{node.op_type}_{index}"
        named.append(copy)
    return named


_Cover = tuple[list[str], list[str], int, list[str]]


def _covers(nodes: Sequence[onnx.NodeProto], source: _SourceIndex, equivalent: Mapping[str, str],
            constants: set[str]) -> dict[str, _Cover]:
    """Per kernel with a resolved output: (output equivalents, resolved input equivalents, cover bits, the
    unresolved kernels walked through to reach those inputs)."""
    producer = {o: n for n in nodes for o in n.output if o}
    covers: dict[str, _Cover] = {}
    for node in nodes:
        outs = [equivalent[o] for o in node.output if o in equivalent]
        if not outs:
            continue
        merged: list[str] = []
        ins: list[str] = []
        stack = [i for i in node.input if i and i not in constants]
        seen: set[str] = set()
        while stack:  # source tensors feeding the node, through producers whose outputs have no equivalent
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in equivalent:
                ins.append(equivalent[name])
            elif name in producer:
                up = producer[name]
                merged.append(up.name)
                stack.extend(i for i in up.input if i and i not in constants)
        cover = 0
        for name in outs:
            cover |= source.ancestors.get(name, 0)
        for name in ins:
            cover &= ~source.ancestors.get(name, 0)
        covers[node.name] = (outs, ins, cover, merged)
    return covers


#: Runtime ops that do one source op's work under another name (fused activation, blocked layout).
_BASE_OP = {"FusedConv": "Conv", "FusedMatMul": "MatMul", "FusedGemm": "Gemm", "NhwcConv": "Conv",
            "QLinearConv": "Conv"}
#: Runtime ops that do source ops of another kind: ONNX Runtime runs YOLOv5's Focus (eight Slices and a
#: Concat) as SpaceToDepth and a channel Gather.
_DOES = {"SpaceToDepth": ("Slice",)}
#: Input positions that carry the same tensor as the source op's (other positions: weights the runtime
#: re-laid out, fused biases and summands).
_DATA_INPUTS = {"Conv": (0,), "ConvTranspose": (0,), "MatMul": (0, 1), "Gemm": (0,)}


def _identified_inputs(nodes: Sequence[onnx.NodeProto], source: _SourceIndex, equivalent: Mapping[str, str],
                       constants: set[str], covers: Mapping[str, _Cover]) -> dict[str, str]:
    """Unresolved tensors that an identified kernel reads at the position its source node reads a source
    tensor (module docstring, step 3)."""
    producer = {o: n for n in nodes for o in n.output if o}
    learned: dict[str, str] = {}
    for node in nodes:
        pending = [i for i in node.input if i and i not in equivalent and i not in constants]
        if not pending:
            continue
        found = _identify(node, source, covers)
        if found is None:
            continue
        twin, positions = found
        for j in positions:
            if j >= len(node.input) or j >= len(twin.inputs):
                continue
            name, target = node.input[j], twin.inputs[j]
            if (not name or name in equivalent or name in constants or name in learned or not target
                    or source.graph.is_constant(target) or not source.known(target)):
                continue
            up = producer.get(name)
            reach = source.ancestors.get(target, 0)
            if up is not None and not all(_downstream(source, equivalent[i], reach) or equivalent[i] == target
                                          for i in up.input if i in equivalent):
                continue  # the producer reads something the candidate does not depend on
            learned[name] = target
        if node.domain == _NCHWC_DOMAIN and node.op_type == "Conv" and len(node.input) > 3:
            summand = _nchwc_summand(node, twin, source)
            if summand is not None and node.input[3] not in equivalent and node.input[3] not in learned:
                learned[node.input[3]] = summand
    return learned


def _identify(node: onnx.NodeProto, source: _SourceIndex,
              covers: Mapping[str, _Cover]) -> tuple[Node, tuple[int, ...]] | None:
    """The source node ``node`` does the work of, and the input positions they share; ``None`` if unsure."""
    base = _BASE_OP.get(node.op_type, node.op_type)
    positions = _DATA_INPUTS.get(base)
    if (nchwc := _nchwc_base(node, source)) is not None:
        twin = source.producer.get(nchwc)
        if twin is not None and twin.op_type == base:
            return twin, positions or tuple(range(len(twin.inputs)))
    named = source.by_name.get(node.name)
    if named is not None and named.op_type == base and _same_attributes(node, named):
        return named, positions or tuple(range(len(named.inputs)))
    cover = covers.get(node.name)
    if cover is not None and cover[3] and positions is not None:  # merged: the only one of its kind there
        candidates = [n for n in source.graph.layers
                      if n.op_type == base and cover[2] >> source.index[n.id] & 1]
        if len(candidates) == 1:
            return candidates[0], positions
    return None


def _same_attributes(node: onnx.NodeProto, twin: Node) -> bool:
    """Whether the attributes both nodes set have the same values (a Transpose the runtime moved keeps its
    name but not its ``perm``: it no longer computes what its source node did)."""
    for attribute in node.attribute:
        if attribute.name not in twin.attrs or attribute.type not in _PLAIN_ATTRIBUTES:
            continue
        value = onnx.helper.get_attribute_value(attribute)
        value = value.decode() if isinstance(value, bytes) else value
        theirs = twin.attrs[attribute.name]
        if isinstance(value, list) or isinstance(theirs, (list, tuple)):
            if list(value) != list(theirs):
                return False
        elif value != theirs:
            return False
    return True


_PLAIN_ATTRIBUTES = frozenset({onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT, onnx.AttributeProto.STRING,
                               onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS})


def _nchwc_summand(node: onnx.NodeProto, twin: Node, source: _SourceIndex) -> str | None:
    """The source tensor an NCHWc Conv adds (its input 3): the other input of the Add/Sum after the Conv."""
    after = source.consumers.get(twin.outputs[0], []) if twin.outputs else []
    if len(after) == 1 and after[0].op_type in ("Add", "Sum") and len(after[0].inputs) == 2:
        other = [i for i in after[0].inputs if i != twin.outputs[0]]
        if len(other) == 1 and other[0] and not source.graph.is_constant(other[0]):
            return other[0]
    return None


def _equivalents(nodes: Sequence[onnx.NodeProto], source: _SourceIndex, equivalent: dict[str, str]) -> None:
    """Add to ``equivalent`` (optimized-graph tensor name -> the source tensor it holds) what step 1 of the
    module docstring resolves, given what it already holds."""
    for node in nodes:  # a shape-only node the runtime inserted holds its input's data under a new shape
        if node.op_type in _RESHAPES and node.name not in source.by_name and node.input and node.output:
            inner, outer = node.input[0], node.output[0]
            if outer and source.known(outer) and inner and not source.known(inner):
                equivalent.setdefault(inner, outer)  # e.g. MatMulAddFusion's Gemm between two Reshapes
    for node in nodes:  # ONNX Runtime writes its optimized graph in topological order
        for name in node.input:
            if name and name not in equivalent and source.known(name):
                equivalent[name] = name
        for index, out in enumerate(node.output):
            if not out or out in equivalent:
                continue
            if source.known(out):
                equivalent[out] = out
            elif ((node.op_type in LAYOUT_OPS or (node.op_type in _RESHAPES and node.name not in source.by_name))
                  and index == 0 and node.input and node.input[0] in equivalent):
                equivalent[out] = equivalent[node.input[0]]
            elif index == 0 and (base := _nchwc_base(node, source)) is not None:
                equivalent[out] = _nchwc_output(node, base, equivalent, source)
            elif index == 0 and (named := _named_output(node, equivalent, source)) is not None:
                equivalent[out] = named


def _named_output(node: onnx.NodeProto, equivalent: Mapping[str, str], source: _SourceIndex) -> str | None:
    """The source tensor a node computes, when its name says which source node it is or ends with.

    Nodes the layout transformer moves to blocked tensors keep their source name (``/model.2/Concat``)
    while their outputs are renamed; ONNX Runtime's fusions name the fused node ``<last source node's
    name>/<Fusion>/`` (``/model.0/act/Mul/QuickGeluFusion/``). The name alone is not trusted: the named
    source node must lie downstream of every tensor the node reads.
    """
    if sum(1 for o in node.output if o) != 1:
        return None  # a fused Split's outputs: which one the name stands for is not known
    names = [node.name]
    while "/" in names[-1]:
        names.append(names[-1].rsplit("/", 1)[0])
    for name in names:
        candidate = source.by_name.get(name)
        if candidate is None or not candidate.outputs or not candidate.outputs[0]:
            continue
        reach = source.ancestors.get(candidate.outputs[0], 0)
        inputs = [equivalent[i] for i in node.input if i in equivalent]
        if inputs and all(_downstream(source, name, reach) for name in inputs):
            return candidate.outputs[0]
    return None


def _downstream(source: _SourceIndex, tensor: str, reach: int) -> bool:
    """Whether ``tensor`` feeds the region ``reach`` (ancestor bits): it is a graph input or its producer is in it."""
    producer = source.producer.get(tensor)
    if producer is None:
        return True
    return bool(reach >> source.index[producer.id] & 1)


def _nchwc_base(node: onnx.NodeProto, source: _SourceIndex) -> str | None:
    """The source tensor an NCHWc node is named after: ``<t>_nchwc``, or ``<t>_bn_nchwc`` / ``<t>_mul_nchwc``
    (a BatchNormalization or a Mul by a constant the transformer turned into a depthwise Conv)."""
    if node.domain != _NCHWC_DOMAIN or not node.name.endswith(_NCHWC_SUFFIX):
        return None
    base = node.name[: -len(_NCHWC_SUFFIX)]
    if source.known(base):
        return base
    head, _, tail = base.rpartition("_")
    return head if head and tail.isalpha() and source.known(head) else None


def _nchwc_output(node: onnx.NodeProto, base: str, equivalent: Mapping[str, str], source: _SourceIndex) -> str:
    """The source tensor an NCHWc Conv really produces.

    The transformer names the node after the Conv's own output ``base``, then may fuse into it the Add/Sum
    that follows (the Conv's fourth input) and the activation after that (its ``activation`` attribute).
    Walk forward from ``base`` over exactly those nodes.
    """
    if node.op_type != "Conv":
        return base
    activation = next((a.s.decode() for a in node.attribute if a.name == "activation"), None)
    summand = equivalent.get(node.input[3]) if len(node.input) > 3 and node.input[3] else None
    current = base
    consumers = source.consumers
    if summand is not None:
        step = [n for n in consumers.get(current, []) if n.op_type in ("Add", "Sum")
                and set(n.inputs) == {current, summand}]
        if len(consumers.get(current, [])) == 1 and step:
            current = step[0].outputs[0]
    producer = source.producer.get(current)
    if activation and (producer is None or producer.op_type != activation):
        step = [n for n in consumers.get(current, []) if n.op_type == activation]
        if len(consumers.get(current, [])) == 1 and step:
            current = step[0].outputs[0]
    return current


def _category(node: onnx.NodeProto, layers: tuple[str, ...], constants: set[str], graph: Graph, *,
              relayout: bool = False, inserted_shape: bool = False) -> str:
    """``layout``, ``layer``, ``constant`` (only constants in, or only source constants out) or ``unmapped``.

    ``relayout``: the node's outputs hold the same source tensors as its inputs (a Transpose the runtime
    inserted around a node it moved to another layout): ``layout`` too, as is a shape-only node the runtime
    inserted (``inserted_shape``) that does no layer's work.
    """
    if node.op_type in LAYOUT_OPS or ((relayout or inserted_shape) and not layers):
        return "layout"
    if layers:
        return "layer"
    outputs = [o for o in node.output if o]
    if all((not i) or i in constants for i in node.input) or (outputs and all(graph.is_constant(o) for o in outputs)):
        return "constant"
    return "unmapped"


def map_violations(fusion: FusionMap) -> list[str]:
    """What breaks the map's half of the attribution invariant; empty when it holds.

    - two kernels merged with each other share no layer, unless both are mapped to that one layer alone
      (the runtime ran one source layer as several kernels); otherwise their joint time would be split over
      layers one of them does not run;
    - no two kernels are mapped to the same group of several layers (the signature of such a merge).

    Kernels that were not merged may share a layer: the runtime split its work (a Transpose pushed below
    three Gathers runs as three Transposes, each mapped to the Transpose and its own Gather).
    """
    problems: list[str] = []
    layer_kernels = [m for m in fusion.kernels.values() if m.category == "layer"]
    by_group: dict[tuple[str, ...], str] = {}
    for mapping in layer_kernels:
        for partner in mapping.merged_with:
            other = fusion.kernels.get(partner)
            if other is None or mapping.kernel > partner:
                continue
            shared = set(mapping.layers) & set(other.layers)
            if shared and not (len(mapping.layers) == 1 and mapping.layers == other.layers):
                problems.append(f"kernels {mapping.kernel!r} and {partner!r} (merged) both mapped to "
                                f"{sorted(shared)}")
        if len(mapping.layers) > 1:
            if mapping.layers in by_group:
                problems.append(f"kernels {by_group[mapping.layers]!r} and {mapping.kernel!r} mapped to the same "
                                f"{len(mapping.layers)} layers")
            by_group.setdefault(mapping.layers, mapping.kernel)
    return problems
