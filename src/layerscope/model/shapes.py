"""Shape resolution beyond ONNX's static inference: dynamic input dims, symbolic inference, execution.

Contract:
- :func:`apply_dims` fixes the model's symbolic input dims: a named dim given with ``--dim NAME=V`` takes
  ``V`` everywhere it appears; a batch-like dim (:func:`is_batch_like`: ``batch``, ``N``, ``unk__*``, ``?``,
  an empty or missing name, ...) left unset defaults to 1 (except the height and width axes of a 4-D float
  input: an image is never silently 1 pixel high), and each such default is returned as one line of
  text (an assumption, shown to the user and recorded in the run file). A ``--dim`` naming no input dim is a
  ``ShapeError``. Any other named dim stays unresolved (the loader then refuses with :func:`input_hint`).
- :func:`symbolic_shapes` runs ONNX Runtime's symbolic shape inference (needs ``sympy``; skipped, returning
  nothing, when it is missing or fails) and returns the tensors it resolved to fully static shapes.
- :func:`observe` runs the model once on ONNX Runtime (no graph optimisation, profiler on, one thread) with
  seeded random inputs (the same values ``profile`` feeds by default, integer inputs within what the model's
  ops allow: :func:`model_hints`) and returns, for every node at every depth (control-flow subgraphs included),
  the shapes and dtypes it read and wrote and how often it ran. Nodes are renamed on the fly to tell them apart
  in the profile, and random ops without a seed are given one
  (:func:`~layerscope.model.random_inputs.seed_in_place`: the same shapes every time), both undone before
  returning; the model's weights are not copied beyond the one serialisation ONNX Runtime needs. A model ONNX
  Runtime cannot load is a ``ShapeError`` quoting its message; one it fails to run is a
  :class:`~layerscope.errors.RuntimeFailure` naming the seeded inputs and ``--input``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import filterfalse
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from layerscope.errors import ShapeError, condensed
from layerscope.model.random_inputs import IntHint, consumer_hints, seed_in_place
from layerscope.model.types import TensorInfo
from layerscope.tempdirs import scratch

#: Dim names that mean "how many samples": defaulted to 1 when not given.
_BATCH_LIKE = re.compile(r"^(\?|-1|n|b|bs|none|null|dynamic|unk__\d+|.*batch.*|num_images|dyn_\d*)$", re.IGNORECASE)

#: ONNX Runtime's profiler type names -> numpy dtype names.
_ORT_TYPES: Mapping[str, str] = {"float": "float32", "double": "float64"}

_TAG = "__layerscope_node_"
_FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})


#: Exporters' generated names (``p2o.DynamicDimension.0``, ``dim_0``, ``unk_3``): a batch on axis 0.
_GENERATED = re.compile(r"(dynamic|unk|^dim_?\d+$|^d\d+$)", re.IGNORECASE)


def is_batch_like(dim: str | None, axis: int = 0) -> bool:
    """Whether a symbolic dim name means a batch (or has no name at all): it defaults to 1.

    An exporter-generated name (``p2o.DynamicDimension.0``, ``dim_0``) counts as a batch on axis 0 only.
    """
    if dim is None or not dim.strip():
        return True
    return bool(_BATCH_LIKE.match(dim.strip())) or (axis == 0 and bool(_GENERATED.search(dim)))


def _dim_names(vi: onnx.ValueInfoProto) -> list[int | str | None]:
    out: list[int | str | None] = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            out.append(d.dim_value)
        elif d.HasField("dim_param") and d.dim_param.strip():
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def apply_dims(runtime_inputs: Sequence[onnx.ValueInfoProto], dims: Mapping[str, int]) -> tuple[str, ...]:
    """Set named dims from ``dims`` and batch-like dims to 1 on ``runtime_inputs`` (in place).

    Returns the assumptions made: one line per batch-like dim name (with every input axis it is on), one per
    unnamed dim. See the module docstring.
    """
    seen = {d for vi in runtime_inputs for d in _dim_names(vi) if isinstance(d, str)}
    unknown = [name for name in dims if name not in seen]
    if unknown:
        listed = ", ".join(sorted(seen)) or "none"
        raise ShapeError(f"--dim names unknown dim(s) {', '.join(unknown)}; the model's named input dims: {listed}")
    named: dict[str, list[str]] = {}  # batch-like dim name -> "input axis N" it was assumed 1 at
    unnamed: list[str] = []
    for vi in runtime_inputs:
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        names = _dim_names(vi)
        image = len(names) == 4 and vi.type.tensor_type.elem_type in _FLOAT_TYPES
        for axis, (dim, proto) in enumerate(zip(names, vi.type.tensor_type.shape.dim, strict=True)):
            if isinstance(dim, int):
                continue
            if dim is not None and dim in dims:
                value = dims[dim]
            elif is_batch_like(dim, axis) and not (image and axis >= 2):  # an image's height/width: ask
                value = 1
                if dim is None:
                    unnamed.append(f"input {vi.name} axis {axis} (an unnamed dim) assumed 1; "
                                   f"set it with --shape {vi.name}=...")
                else:
                    named.setdefault(dim, []).append(f"{vi.name} axis {axis}")
            else:
                continue
            proto.Clear()
            proto.dim_value = value
    lines = [f"dim {dim!r} ({', '.join(where)}) assumed 1; set it with --dim {dim}=N" for dim, where in named.items()]
    return (*lines, *unnamed)


def declared_dims(vi: onnx.ValueInfoProto) -> list[int | str | None]:
    """An input's dims as the model declares them (ints, names, ``None``): read before :func:`apply_dims`."""
    return _dim_names(vi)


def input_hint(name: str, dims: Sequence[int | str | None], elem_dtype: str) -> str:
    """What to pass for an input with unresolved dims: ``--dim`` for named dims, ``--shape`` of its rank.

    The example shape keeps fixed dims, uses 1 for batch-like ones and a plausible size for the others
    (640 for the spatial dims of a 4-D float input, 128 otherwise).
    """
    example: list[str] = []
    for axis, d in enumerate(dims):
        if isinstance(d, int):
            example.append(str(d))
        elif is_batch_like(d, axis) and not (elem_dtype.startswith(("float", "bfloat")) and len(dims) == 4
                                             and axis >= 2):
            example.append("1")
        elif elem_dtype.startswith(("float", "bfloat")) and len(dims) == 4 and axis >= 2:
            example.append("640")
        else:
            example.append("128")
    named = [d for axis, d in enumerate(dims) if isinstance(d, str) and not is_batch_like(d, axis)]
    shape = f"--shape {name}={'x'.join(example)}"
    if named:
        dim_text = " ".join(f"--dim {d}={example[dims.index(d)]}" for d in dict.fromkeys(named))
        return f"set the named dims once for the whole model, e.g. {dim_text}, or the input's shape, e.g. {shape}"
    return f"set it with --shape, e.g. {shape}"


def symbolic_shapes(model: onnx.ModelProto) -> dict[str, TensorInfo]:
    """Tensors ONNX Runtime's symbolic shape inference resolves to static shapes (``{}`` when unavailable)."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError:  # sympy missing: execution resolves what static inference could not
        return {}
    from layerscope.model.load import onnx_dtype_name

    # Its infer_shapes() discards everything and writes sym_shape_infer_temp.onnx (and its weights) into the
    # current folder when a single tensor stays symbolic: run its steps here and keep what it resolved.
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints; stdout may be a JSON trace
            inference = SymbolicShapeInference(2**31 - 1, True, False, 0)
            inference._preprocess(model)
            while inference.run_:
                inference._infer_impl()
            inference._update_output_from_vi()
            inferred = inference.out_mp_
    except Exception:  # its failures are many and untyped; execution takes over
        return {}
    infos: dict[str, TensorInfo] = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = _dim_names(vi)
        if all(isinstance(d, int) for d in dims):
            infos[vi.name] = TensorInfo(vi.name, tuple(int(d) for d in dims if isinstance(d, int)),
                                        onnx_dtype_name(vi.type.tensor_type.elem_type))
    return infos


@dataclass(frozen=True)
class NodeRun:
    """What one node did in the observed inference: how often it ran, what it read and wrote (last run)."""

    executions: int
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]


@dataclass(frozen=True)
class Observation:
    """The observed inference: per node (keyed by its output names, unique in a model) and per tensor name."""

    nodes: Mapping[tuple[str, ...], NodeRun]
    tensors: Mapping[str, TensorInfo]

    def of(self, node: onnx.NodeProto) -> NodeRun | None:
        return self.nodes.get(tuple(node.output))


def walk(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph``, subgraphs' nodes included (pre-order, file order)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from walk(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from walk(sub)


#: The arrays to run the model on, given its (static) inputs: ``layerscope.measure.inputs.feeder``.
Feeds = Callable[[Sequence[TensorInfo]], Mapping[str, Any]]


def observe(model: onnx.ModelProto, base_dir: Path, inputs: Sequence[TensorInfo], feeds: Feeds | None = None,
            shapes: Mapping[str, TensorInfo] | None = None) -> Observation:
    """Run ``model`` once on ONNX Runtime and record every node's shapes. See the module docstring.

    ``feeds`` gives the input values (default: the seeded random values ``profile`` feeds by default);
    ``shapes``: the tensors' static shapes known so far (what :func:`model_hints` reads besides the weights).
    """
    hints = model_hints(model, inputs, shapes or {})
    nodes = list(walk(model.graph))
    names = [n.name for n in nodes]
    seeded: list[onnx.NodeProto] = []
    for k, node in enumerate(nodes):
        node.name = f"{_TAG}{k}"
        seeded.extend(seed_in_place(node))
    try:
        data = model.SerializeToString()
    finally:
        for node, name in zip(nodes, names, strict=True):
            node.name = name
        for node in seeded:
            del node.attribute[-1]
    events = _profile_once(data, model, base_dir, inputs, names, feeds, hints)
    # ONNX Runtime's profile events, read here and not by the trace reader
    # (layerscope.runtimes.onnxruntime.trace), which sits above model/ in the data flow
    runs: dict[int, list[dict[str, object]]] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.startswith(_TAG) or not name.endswith("_kernel_time"):
            continue
        try:
            k = int(name[len(_TAG): -len("_kernel_time")])
        except ValueError:
            continue
        args = event.get("args")
        runs.setdefault(k, []).append(args if isinstance(args, dict) else {})
    by_node: dict[tuple[str, ...], NodeRun] = {}
    tensors: dict[str, TensorInfo] = {}
    unlisted = _sequence_values(model, nodes)
    for k, node in enumerate(nodes):
        seen = runs.get(k)
        if not seen:
            continue
        last = seen[-1]
        ins = _infos([i for i in node.input if i and i not in unlisted], last.get("input_type_shape"))
        outs = _infos([o for o in node.output if o and o not in unlisted], last.get("output_type_shape"))
        by_node[tuple(node.output)] = NodeRun(len(seen), ins, outs)
        for info in (*ins, *outs):
            tensors[info.name] = info
    return Observation(by_node, tensors)


#: Ops whose outputs are all sequences (ONNX, ai.onnx.ml's ZipMap: a sequence of maps).
_SEQUENCE_MAKERS = frozenset({"SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
                              "SplitToSequence", "SequenceMap", "ZipMap"})


def _sequence_values(model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto]) -> frozenset[str]:
    """The values of ``model`` that are sequences or maps: ONNX Runtime's profiler leaves them out of a node's
    ``input_type_shape``/``output_type_shape``, so they are not paired with its entries. The outputs of
    :data:`_SEQUENCE_MAKERS` and the graph's inputs, outputs and value_info declared of such a type."""
    names = {out for node in nodes if node.op_type in _SEQUENCE_MAKERS for out in node.output}
    declared = (*model.graph.input, *model.graph.output, *model.graph.value_info)
    names.update(v.name for v in declared if v.type.WhichOneof("value") in ("sequence_type", "map_type"))
    return frozenset(names)


def _infos(names: Sequence[str], listed: object) -> tuple[TensorInfo, ...]:
    """``[{"float": [1, 3]}, ...]`` (ONNX Runtime's profiler) paired with the node's tensor names."""
    if not isinstance(listed, list):
        return ()
    out = []
    for name, item in zip(names, listed, strict=False):
        if not isinstance(item, dict) or len(item) != 1:
            continue
        ((kind, shape),) = item.items()
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            continue
        out.append(TensorInfo(name, tuple(shape), _ORT_TYPES.get(str(kind), str(kind))))
    return tuple(out)


@dataclass(frozen=True)
class _Op:
    """An ONNX node as :func:`~layerscope.model.random_inputs.consumer_hints` reads it."""

    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]


#: Constants up to this many elements are read for :func:`model_hints` (shapes, depths, axes, compared values).
_HINT_VALUE_ELEMENTS = 64


def model_hints(model: onnx.ModelProto, inputs: Sequence[TensorInfo], shapes: Mapping[str, TensorInfo],
                ) -> dict[str, IntHint]:
    """What the nodes of ``model`` (subgraphs included) reading each integer input say about its values
    (:func:`~layerscope.model.random_inputs.consumer_hints`): shapes from ``shapes``, the graph's inputs and its
    initializers; values from its small initializers and ``Constant`` nodes."""
    known = {name: info.shape for name, info in shapes.items()}
    known.update((info.name, info.shape) for info in inputs)
    values: dict[str, np.ndarray] = {}
    for tensor in model.graph.initializer:
        known.setdefault(tensor.name, tuple(tensor.dims))
        if tensor.data_location != TensorProto.EXTERNAL and np.prod(tensor.dims) <= _HINT_VALUE_ELEMENTS:
            with contextlib.suppress(Exception):  # a tensor numpy cannot hold (strings of another coding ...)
                values[tensor.name] = numpy_helper.to_array(tensor)
    ops: list[_Op] = []
    for node in walk(model.graph):
        attrs = {a.name: (a.i if a.type == onnx.AttributeProto.INT else list(a.ints)) for a in node.attribute
                 if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)}
        ops.append(_Op(node.name, node.op_type, tuple(node.input), tuple(node.output), attrs))
        if node.op_type == "Constant" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR),
                         None)
            if value is not None and value.data_location != TensorProto.EXTERNAL and \
                    np.prod(value.dims) <= _HINT_VALUE_ELEMENTS:
                with contextlib.suppress(Exception):
                    values[node.output[0]] = numpy_helper.to_array(value)
                    known.setdefault(node.output[0], tuple(value.dims))
    return consumer_hints(inputs, ops, known.get, values.get)


def _profile_once(data: bytes, model: onnx.ModelProto, base_dir: Path, inputs: Sequence[TensorInfo],  # noqa: PLR0917
                  names: Sequence[str], feeds: Feeds | None, hints: Mapping[str, IntHint],
                  ) -> list[dict[str, object]]:
    import onnxruntime as ort

    from layerscope.limits import OverBudget
    from layerscope.model.bounded import run_bounded
    from layerscope.model.random_inputs import (
        mark_seeded,
        merged_hints,
        random_array,
        random_kind,
        runtime_failure,
        using_hints,
    )

    def real_names(text: str) -> str:
        return re.sub(rf"{_TAG}(\d+)", lambda m: names[int(m.group(1))] if int(m.group(1)) < len(names)
                      else m.group(0), text)

    if feeds is not None:
        with using_hints(hints):
            arrays = dict(feeds(inputs))
    else:
        chosen = merged_hints(inputs, hints)
        arrays = {}
        for index, info in enumerate(inputs):
            arrays[info.name] = random_array(info, 0, index, chosen.get(info.name))
            mark_seeded(arrays[info.name], random_kind(info, chosen.get(info.name)))

    with scratch("shapes") as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "shapes")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4  # its errors come back as the exception, once
        source: bytes | str = data
        if _has_external_data(model):
            source = str(Path(tmp) / "model.onnx")
            Path(source).write_bytes(data)
            for entry in base_dir.iterdir():  # external data locations are checked to stay inside base_dir
                if not (Path(tmp) / entry.name).exists():
                    os.symlink(entry, Path(tmp) / entry.name)
        try:
            session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ONNX Runtime raises its own untyped errors
            reason = condensed(real_names(str(exc))) or type(exc).__name__
            raise ShapeError(f"shapes not resolved statically, and ONNX Runtime could not load the model to "
                             f"observe them: {reason}") from None
        try:  # within the ``run_s`` budget, stoppable by a signal (a Loop whose trip count is set at run time)
            run_bounded(session, arrays, what="ONNX Runtime, running the model to observe its shapes,")
        except Exception as exc:  # ONNX Runtime raises its own untyped errors
            if isinstance(exc, OverBudget):
                raise
            raise runtime_failure("ONNX Runtime", real_names(str(exc)), arrays,
                                  what="the model to observe its shapes (not resolved statically)") from None
        path = session.end_profiling()
        try:
            events = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            events = []
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _has_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)


def complete(model: Callable[[], onnx.ModelProto], light: Callable[[], onnx.ModelProto], base_dir: Path, *,
             inputs: Sequence[TensorInfo],
             control_flow: bool, infos: dict[str, TensorInfo],
             needed: Sequence[str], feeds: Feeds | None = None) -> tuple[dict[str, str], Observation | None]:
    """Resolve the ``needed`` tensors static inference left out: symbolic inference on ``light`` (the model
    without its large weights), then execution of ``model()`` (the model with its weights); ``infos`` is updated in
    place.

    Returns each tensor resolved here with its source (``"symbolic"`` / ``"executed"``), and the
    observation when the model was executed: whenever a tensor is still missing after symbolic inference,
    or ``control_flow``: the layers hold control flow (whose subgraphs are costed as executed).
    """
    sources: dict[str, str] = {}
    missing = list(filterfalse(infos.__contains__, needed))
    if missing:
        resolved = symbolic_shapes(light())
        for name in missing:
            if name in resolved:
                infos[name] = resolved[name]
                sources[name] = "symbolic"
        missing = [t for t in missing if t not in infos]
    observation = None
    if missing or control_flow:
        observation = observe(model(), base_dir, inputs, feeds, infos)
        for name in missing:
            if name in observation.tensors:
                infos[name] = observation.tensors[name]
                sources[name] = "executed"
    return sources, observation


def layer_source(node: onnx.NodeProto, sources: Mapping[str, str]) -> str:
    """A layer's ``shape_source``: the least static source among its tensors (``unknown`` when one has none)."""
    if not sources:  # every tensor's shape came from ONNX's static inference
        return "static"
    found = {sources.get(t) for t in (*node.input, *node.output) if t}
    if "unknown" in found:
        return "unknown"
    if "executed" in found:
        return "executed"
    return "symbolic" if "symbolic" in found else "static"


def shape_notes(sources: Mapping[str, int], assumptions: Sequence[str]) -> list[str]:
    """Lines for the terminal: each assumption, and how many layers' shapes were not static."""
    lines = [f"note: {a}" for a in assumptions]
    executed, symbolic = sources.get("executed", 0), sources.get("symbolic", 0)
    if executed or symbolic:
        total = sum(sources.values())
        parts = [f"{sources.get('static', 0)} static"]
        if symbolic:
            parts.append(f"{symbolic} by symbolic inference")
        if executed:
            parts.append(f"{executed} resolved by execution (one ONNX Runtime run on the inputs this command feeds)")
        lines.append(f"shapes of {total} layers: {', '.join(parts)}")
    if sources.get("unknown"):
        lines.append(f"shapes: {sources['unknown']} layer(s) read or write tensors without a shape (sequences, "
                     "maps, or not reported by ONNX Runtime): measured as usual, their cost unknown")
    return lines
