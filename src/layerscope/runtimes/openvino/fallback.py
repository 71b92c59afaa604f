"""OpenVINO with ONNX Runtime running the layers OpenVINO cannot convert, as ONNX Runtime's OpenVINO execution
provider does (the nodes OpenVINO supports on OpenVINO, the others on ONNX Runtime's CPU provider) and as an NPU
toolchain falls back to the CPU.

Contract:

- :func:`unconvertible_layers`: the top-level layers OpenVINO's ONNX frontend leaves unconverted. Its
  ``FrontEnd.convert_partially`` keeps each such ONNX node as a framework node: ``ONNXFrameworkNode`` (or
  ``ONNXSubgraphFrameworkNode``) when it has no conversion for the op, ``NotSupportedONNXNode`` when the conversion
  failed. Each is tied to the layer that writes the tensors it writes (its friendly name is not always the node's
  name: an output's, for some), a subgraph layer to its top-level control-flow layer, with the reason. A model
  output of a non-tensor type (ZipMap's sequence of maps), which the frontend refuses to load, is declared a float
  tensor in the copy the probe reads. ``None`` when the frontend cannot load the model even so, or a framework node
  matches no layer: the caller's own error then stands;
- :func:`fallback_stages`: the top-level layers in topological order cut into maximal runs, each wholly
  convertible (run on OpenVINO) or wholly not (run on ONNX Runtime's CPU provider), each run saved as an ONNX model
  of its own (:meth:`~layerscope.measure.cuts.CutPlanner.segment_model`);
- :func:`profile_with_fallback`: one inference is the chain of segments, each fed by tensor name what the model's
  inputs and the earlier segments gave (numpy arrays: the hand-over between segments, in this process, is part of
  every end-to-end and profiled run's time). End-to-end latency: the chain without instrumentation (OpenVINO
  compiled without ``PERF_COUNT``, ONNX Runtime without its profiler), ``warmup`` then ``runs`` timed chains.
  The fallback segments run in ONNX Runtime sessions on its CPU provider, all graph optimizations, the intra-op
  threads the run asks of OpenVINO (``--threads``; 0: each runtime's default).
  Per layer: a second chain, OpenVINO segments compiled with ``PERF_COUNT`` (their nodes' time in each run from
  the counters' running means, :class:`~.counters.CounterRuns`, mapped by the compiler's fusion map, as
  :class:`~layerscope.runtimes.openvino.profile.OpenVinoBackend` does) and
  ONNX Runtime segments with its profiler on (kernels from its trace, its warm-up runs dropped, mapped by its
  optimized graph, as :func:`~layerscope.runtimes.onnxruntime.profile.profile_model` does). Kernels are listed in
  chain order; a kernel name two segments share gets ``#<segment>`` appended in the later one;
- the measurement's ``provider`` names both runtimes (``OpenVINO CPU + ONNX Runtime CPU fallback``); its
  ``machine["fallback"]`` holds the runtime each layer ran on, why each fallback layer did, the segments, and the
  median hand-over time per profiled run (the chain's time minus its segments' calls); its ``layer_runtimes`` and
  ``fallback_reasons`` the per-layer part (joined into ``layers[].measured`` by :func:`layerscope.run.add_measurement`),
  its ``warnings`` the one line that announces the fallback (:func:`fallback_line`).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from layerscope.errors import InputError, ModelError
from layerscope.measure.cuts import CutPlanner
from layerscope.measure.fusion import FusionMap, KernelMapping
from layerscope.measure.memory import measured_memory
from layerscope.measure.profile import (
    KernelResult,
    Measurement,
    ProfiledRuns,
    Progress,
    RunTimer,
    back_to_back,
    kernel_results,
    layer_results,
    profile_runs,
    run_times,
)
from layerscope.measure.session import SessionConfig
from layerscope.model.ml_domain import ML_DOMAIN
from layerscope.model.types import Graph, TensorInfo
from layerscope.runtimes.base import SyncBenchSession
from layerscope.runtimes.openvino.compile import (
    OpenVinoOptions,
    _core,
    _infer_failures,
    _reason,
    _require_openvino,
    compile_for,
    device_name,
    infer_shared,
    machine_record,
    run_precision,
)
from layerscope.runtimes.openvino.counters import CounterRuns, counter_kernels
from layerscope.runtimes.openvino.graph import runtime_nodes, source_layers_of_ops
from layerscope.stats import summarize
from layerscope.tempdirs import scratch

__all__ = [
    "FALLBACK_KEY",
    "FALLBACK_MEMORY_SOURCE",
    "FallbackStage",
    "bench_with_fallback",
    "fallback_line",
    "fallback_stages",
    "open_steps",
    "profile_with_fallback",
    "run_chain",
    "unconvertible_layers",
]

#: The key of ``measurement.machine`` that describes a run with a fallback.
FALLBACK_KEY = "fallback"
#: The runtime the fallback layers run on, as ``LayerMeasured.runtime`` names it.
FALLBACK_RUNTIME = "onnxruntime"
#: How the memory of a run with a fallback was read, as the run file states it.
FALLBACK_MEMORY_SOURCE = ("OpenVINO compiled model for the OpenVINO segments (each executed node's output shapes and "
                          "runtime precision), ONNX Runtime profiler for the fallback segments (per-kernel sizes); "
                          "peak = the largest sum of layer outputs live at one kernel in chain order (graph inputs "
                          "not included)")
#: How the chain's end-to-end runs were timed, as the run's ``latency`` section says.
CHAIN_LATENCY_SOURCE = ("uninstrumented chain of segments (OpenVINO InferRequest.infer, ONNX Runtime session.run), "
                        "outputs handed over by tensor name as numpy arrays; the hand-over counts in the time")
#: OpenVINO's framework node types for an ONNX node it did not convert -> what that says of the node.
_FRAMEWORK_NODES = {"ONNXFrameworkNode": "has no conversion for", "ONNXSubgraphFrameworkNode": "has no conversion for",
                    "NotSupportedONNXNode": "failed to convert"}
#: The ONNX Runtime session the fallback segments run in: its CPU provider, all graph optimizations.
_FALLBACK_PROVIDER = "cpu"


@dataclass(frozen=True)
class FallbackStage:
    """One segment of the chain: the runtime that runs it (``openvino`` or ``onnxruntime``), its top-level layers
    ``start .. end - 1``, and ``graph``: the segment as a model of its own (its layers, subgraph layers included;
    ``path`` its ONNX file; ``inputs``/``outputs`` the tensors it reads and gives)."""

    index: int
    runtime: str
    start: int
    end: int
    graph: Graph

    @property
    def layer_ids(self) -> tuple[str, ...]:
        return tuple(node.id for node in self.graph.layers)


def fallback_after(error: ModelError, graph: Graph, options: OpenVinoOptions) -> dict[str, str]:
    """After OpenVINO failed on the whole of ``graph`` with ``error``: the top-level layers to run on ONNX Runtime
    (:func:`unconvertible_layers`). Raises ``error`` itself when ``options`` refuse the fallback or when OpenVINO
    converts every layer (its error then stands)."""
    if not options.fallback:
        raise error
    fallback = unconvertible_layers(graph)
    if not fallback:
        raise error
    return fallback


def unconvertible_layers(graph: Graph) -> dict[str, str] | None:
    """Top-level layer id -> why OpenVINO cannot run it (see the module docstring); ``{}`` when its frontend
    converts every node; ``None`` when the frontend cannot load the model or a node it left matches no layer."""
    _require_openvino()
    from openvino.frontend import FrontEndManager

    frontend = FrontEndManager().load_by_framework("onnx")
    with scratch("openvino-probe") as folder:
        try:
            converted = frontend.convert_partially(frontend.load(_probe_path(graph.path, folder)))
        except Exception:  # OpenVINO raises RuntimeError with multi-line messages; the caller's error stands
            return None
        left = [(op.get_type_name(), op.get_friendly_name(), [t for out in op.outputs() for t in out.get_names()])
                for op in converted.get_ordered_ops() if op.get_type_name() in _FRAMEWORK_NODES]
    producer = {t: node for node in graph.layers for t in node.outputs if t}
    by_name = {key: node for node in graph.layers for key in (node.id, node.name) if key}
    top = _top_level_ids(graph)
    reasons: dict[str, str] = {}
    for kind, name, tensors in left:
        node = next((producer[t] for t in tensors if t in producer), None) or by_name.get(name)
        if node is None:
            return None
        op = f"{node.domain or 'ai.onnx'}.{node.op_type}"
        reasons.setdefault(top[node.id], f"OpenVINO's ONNX frontend {_FRAMEWORK_NODES[kind]} {op}" + (
            "" if top[node.id] == node.id else f" (layer {node.id})"))
    return reasons


def _probe_path(path: str, folder: str) -> str:
    """``path``, or a copy in ``folder`` whose non-tensor graph outputs are declared float tensors (the frontend
    refuses to load a model with a map or sequence output: "Unsupported value_info type")."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    odd = [vi for vi in (*model.graph.output, *model.graph.value_info) if not vi.type.HasField("tensor_type")]
    if not odd:
        return path
    model = onnx.load(path)
    for vi in (*model.graph.output, *model.graph.value_info):
        if not vi.type.HasField("tensor_type"):
            vi.CopyFrom(onnx.helper.make_tensor_value_info(vi.name, onnx.TensorProto.FLOAT, None))
    copy = str(Path(folder) / "probe.onnx")
    onnx.save(model, copy)
    return copy


def _top_level_ids(graph: Graph) -> dict[str, str]:
    """Each layer's id -> the id of its top-level layer (itself, or the control-flow layer it runs under)."""
    parent = {node.id: node.parent for node in graph.layers}
    top: dict[str, str] = {}
    for node in graph.layers:
        root = node.id
        while parent.get(root):
            root = str(parent[root])
        top[node.id] = root
    return top


def fallback_stages(graph: Graph, fallback: Mapping[str, str], folder: str) -> tuple[FallbackStage, ...]:
    """``graph``'s top-level layers cut into maximal runs of layers in ``fallback`` (top-level ids) or not, each
    saved as ``folder/segment<i>.onnx``, in chain order."""
    import onnx

    planner = CutPlanner.for_model(graph)
    layers = planner.graph.layers
    flags = [node.id in fallback for node in layers]
    bounds = [0, *(k for k in range(1, len(layers)) if flags[k] != flags[k - 1]), len(layers)]
    top = _top_level_ids(graph)
    stages = []
    for index, (start, end) in enumerate(itertools.pairwise(bounds)):
        model = planner.segment_model(start, end)
        path = str(Path(folder) / f"segment{index}.onnx")
        onnx.save(model, path)
        ids = {node.id for node in layers[start:end]}
        sub = dataclasses.replace(
            graph, name=f"{graph.name} segment {index}", path=path,
            layers=tuple(node for node in graph.layers if top[node.id] in ids),
            inputs=_infos(graph, (vi.name for vi in model.graph.input)),
            outputs=_infos(graph, (vi.name for vi in model.graph.output)))
        stages.append(FallbackStage(index, FALLBACK_RUNTIME if flags[start] else "openvino", start, end, sub))
    return tuple(stages)


def _infos(graph: Graph, names: Iterable[str]) -> tuple[TensorInfo, ...]:
    return tuple(info for name in names if (info := graph.tensor(name)) is not None)


# ------------------------------------------------------------------------------------------------ the chain


@dataclass
class _OpenVinoStep:
    """An OpenVINO segment compiled and ready: one synchronous inference per call, its outputs put in ``tensors``."""

    stage: FallbackStage
    compiled: Any
    request: Any
    read: Any = None
    inputs: list[tuple[Any, str]] = field(default_factory=list)
    outputs: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        wanted = {t.name for t in self.stage.graph.inputs}
        given = {t.name for t in self.stage.graph.outputs}
        for port in self.compiled.inputs:
            name = next((n for n in port.get_names() if n in wanted), None)
            if name is None:
                raise ModelError(f"{self.stage.graph.name}: OpenVINO input {port.get_any_name()!r} is none of the "
                                 f"tensors the segment is fed")
            self.inputs.append((port, name))
        for i, port in enumerate(self.compiled.outputs):
            self.outputs.append((i, tuple(n for n in port.get_names() if n in given)))

    def __call__(self, tensors: dict[str, Any]) -> None:
        infer_shared(self.request, {port: _plain_array(tensors[name]) for port, name in self.inputs})
        for i, names in self.outputs:
            data = self.request.get_output_tensor(i).data
            for name in names:
                tensors[name] = data


def _plain_array(value: Any) -> np.ndarray:
    """``value`` C-contiguous, its dtype numpy's canonical one for its kind and size: ONNX Runtime hands int64 out as
    ``longlong`` (``q``), which OpenVINO's Python binding refuses ("Unsupported data type: int64"); a view, no copy."""
    array: np.ndarray = np.require(value, requirements="C")
    canonical = np.dtype(array.dtype.str)
    return array if array.dtype.char == canonical.char else array.view(canonical)


@dataclass
class _OnnxRuntimeStep:
    """A fallback segment in an ONNX Runtime session: one ``run`` per call, its outputs put in ``tensors``."""

    stage: FallbackStage
    session: Any
    #: Where ONNX Runtime saved the optimized graph (a profiled session), else "".
    optimized_path: str = ""
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.inputs = tuple(i.name for i in self.session.get_inputs())
        self.outputs = tuple(o.name for o in self.session.get_outputs())

    def __call__(self, tensors: dict[str, Any]) -> None:
        from layerscope.runtimes.onnxruntime.session import run_checked

        values = run_checked(self.session, {name: tensors[name] for name in self.inputs},
                             what=f"fallback segment {self.stage.index}")
        tensors.update(zip(self.outputs, values, strict=True))


Step = _OpenVinoStep | _OnnxRuntimeStep


def run_chain(steps: Sequence[Step], feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], float]:
    """One inference: every step in order on the tensors so far. Returns every tensor by name (the feeds, each
    segment's outputs) and the sum of the steps' own call times (µs)."""
    tensors: dict[str, Any] = dict(feeds)
    inside = 0.0
    for step in steps:
        start = time.perf_counter()
        step(tensors)
        inside += time.perf_counter() - start
    return tensors, inside * 1e6


def open_steps(stages: Sequence[FallbackStage], config: SessionConfig, options: OpenVinoOptions, *,
                profiling: bool, folder: str) -> list[Step]:
    """Each stage compiled (OpenVINO, ``PERF_COUNT`` when ``profiling``) or opened in ONNX Runtime (its profiler on,
    and its optimized graph saved in ``folder``, when ``profiling``)."""
    from layerscope.runtimes.onnxruntime.session import make_session

    steps: list[Step] = []
    ort_config = SessionConfig(provider=_FALLBACK_PROVIDER, threads=config.threads, opt_level="all")
    for stage in stages:
        if stage.runtime == "openvino":
            read = _read_segment(stage)
            compiled = compile_for(stage.graph, config, options, profiling=profiling, model=read)
            steps.append(_OpenVinoStep(stage, compiled, compiled.create_infer_request(), read))
        else:
            where = Path(folder) / f"ort{stage.index}"
            optimized = f"{where}-optimized.onnx" if profiling else ""
            steps.append(_OnnxRuntimeStep(stage, make_session(
                stage.graph.path, ort_config, profile_prefix=str(where) if profiling else None,
                optimized_model_path=optimized or None), optimized))
    return steps


def _read_segment(stage: FallbackStage) -> Any:
    try:
        return _core().read_model(stage.graph.path)
    except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
        raise ModelError(f"{stage.graph.name}: OpenVINO cannot read the segment of layers "
                         f"{stage.layer_ids[0]} .. {stage.layer_ids[-1]}: {_reason(exc)}") from None


def profile_with_fallback(graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig,
                          options: OpenVinoOptions, fallback: Mapping[str, str], *, runs: int, warmup: int,
                          weights: Mapping[str, float] | None = None, progress: Progress | None = None) -> Measurement:
    """Measure ``graph`` on OpenVINO with the top-level layers of ``fallback`` (id -> reason) on ONNX Runtime's CPU
    provider. See the module docstring."""
    openvino = _require_openvino()
    device = device_name(config.provider)
    with scratch("openvino-fallback") as folder:
        stages = fallback_stages(graph, fallback, folder)
        precision = ""

        def plain(timer: RunTimer) -> tuple[list[float], bool]:
            nonlocal precision
            steps = open_steps(stages, config, options, profiling=False, folder=folder)
            precision = next((run_precision(s.compiled) for s in steps if isinstance(s, _OpenVinoStep)), "")
            with _infer_failures(feeds, precision, "the model's OpenVINO segments"):
                return timer(lambda: run_chain(steps, feeds))

        def profiled(timer: RunTimer) -> ProfiledRuns[tuple[list[Step], list[list[dict[str, float]]], list[float],
                                                            list[float]]]:
            steps = open_steps(stages, config, options, profiling=True, folder=folder)
            node_runs = {i: CounterRuns(step.request, warmup) for i, step in enumerate(steps)
                         if isinstance(step, _OpenVinoStep)}
            calls_us: list[float] = []
            last_us = [0.0]

            def run_once() -> None:
                last_us[0] = run_chain(steps, feeds)[1]
                for segment in node_runs.values():
                    segment.inferred()

            def after() -> None:
                calls_us.append(last_us[0])
                for segment in node_runs.values():
                    segment.record()

            with _infer_failures(feeds, precision, "the model's OpenVINO segments"):
                run_us, interrupted = timer(run_once, after=after)
            counters = [node_runs[i].per_run if i in node_runs else [] for i in range(len(steps))]
            return ProfiledRuns((steps, counters, run_us, calls_us), bool(run_us), interrupted)

        latency_samples, result = profile_runs(plain, profiled, config=config, runs=runs, warmup=warmup,
                                               progress=progress)
        steps, counters, run_us, calls_us = result.data
        kernels, fusion = _chain_kernels(steps, counters, len(run_us), warmup, device)
    layers = layer_results(graph, kernels, weights or {})
    first_ov = next((s.compiled for s in steps if isinstance(s, _OpenVinoStep)), None)
    handover = [max(0.0, total - inside) for total, inside in zip(run_us, calls_us, strict=False)]
    record = _fallback_record(graph, stages, fallback, handover, config.threads)
    machine = {**machine_record(device), FALLBACK_KEY: record}
    return Measurement(
        config=config, backend_version=openvino.get_version(),
        provider=f"OpenVINO {device} + ONNX Runtime CPU fallback", warmup=warmup, kernels=kernels, layers=layers,
        fusion=fusion, machine=machine, median_run=back_to_back(kernels), interrupted=result.interrupted,
        **run_times(latency_samples, run_us, kernels), backend="openvino", device=device, precision=precision,
        memory=measured_memory(graph, kernels, FALLBACK_MEMORY_SOURCE),
        performance_hint=str(first_ov.get_property("PERFORMANCE_HINT")) if first_ov is not None else "",
        streams=int(first_ov.get_property("NUM_STREAMS")) if first_ov is not None else 0,
        latency_source=CHAIN_LATENCY_SOURCE, layer_runtimes=record["layers"], fallback_reasons=record["reasons"],
        warnings=(fallback_line(record, device),))


def _chain_kernels(steps: Sequence[Step], counters: Sequence[Sequence[Mapping[str, float]]], runs: int, warmup: int,
                   device: str) -> tuple[tuple[KernelResult, ...], FusionMap]:
    """Every segment's kernels in chain order (each series cut to the ``runs`` chains timed whole) and the fusion
    map they make together; eliminated: the layers no executed kernel covers."""
    kernels: list[KernelResult] = []
    mappings: dict[str, KernelMapping] = {}
    for i, step in enumerate(steps):
        if isinstance(step, _OpenVinoStep):
            sub = step.stage.graph
            nodes = runtime_nodes(step.compiled, sub, source_layers_of_ops(sub, step.read))
            found = list(counter_kernels(nodes, counters[i][:runs], device))
            maps = {n.name: KernelMapping(n.name, n.layer_type, "", n.layers, n.category) for n in nodes.values()}
        else:
            found, maps = _onnxruntime_kernels(step, runs, warmup)
        for kernel in found:
            name = kernel.samples.name
            unique = name if name not in mappings else f"{name}#{i}"
            mapping = maps.get(name, KernelMapping(name, kernel.samples.op_type, "", kernel.layers, kernel.category))
            mappings[unique] = dataclasses.replace(mapping, kernel=unique)
            kernels.append(kernel if unique == name else dataclasses.replace(
                kernel, samples=dataclasses.replace(kernel.samples, name=unique)))
    covered = {lid for k in kernels if k.category == "layer" for lid in k.layers}
    layers = [lid for step in steps for lid in step.stage.layer_ids]
    return tuple(kernels), FusionMap(mappings, tuple(lid for lid in layers if lid not in covered))


def _onnxruntime_kernels(step: _OnnxRuntimeStep, runs: int, warmup: int) -> tuple[list[KernelResult],
                                                                                  dict[str, KernelMapping]]:
    """The kernels ONNX Runtime's profiler recorded for a fallback segment (warm-up runs dropped, ``runs`` kept),
    mapped to the segment's layers through its optimized graph."""
    from layerscope.runtimes.onnxruntime.profile import read_profiled_session

    data, fusion = read_profiled_session(step.session, step.optimized_path, step.stage.graph, warmup)
    found = []
    for kernel in kernel_results(data, fusion):
        series = kernel.samples.durations_us[:runs]
        found.append(dataclasses.replace(kernel, samples=dataclasses.replace(kernel.samples, durations_us=series),
                                         stats=summarize(series)))
    return found, dict(fusion.kernels)


def _fallback_record(graph: Graph, stages: Sequence[FallbackStage], fallback: Mapping[str, str],
                     handover_us: Sequence[float], threads: int) -> dict[str, Any]:
    """``machine["fallback"]``: the fallback runtime and its session, each layer's runtime, each fallback layer's
    reason (subgraph layers under their control-flow layer's), the segments, and the median hand-over per profiled
    run (µs)."""
    top = _top_level_ids(graph)
    runtime = {lid: stage.runtime for stage in stages for lid in stage.layer_ids}
    return {
        "runtime": f"ONNX Runtime {_ort_version()} CPUExecutionProvider, graph optimization all, intra-op threads "
                   f"{threads or 'default'}",
        "layers": runtime,
        "reasons": {node.id: fallback[top[node.id]] for node in graph.layers if top[node.id] in fallback},
        "segments": [{"runtime": s.runtime, "layers": [s.layer_ids[0], s.layer_ids[-1]], "count": len(s.layer_ids)}
                     for s in stages],
        "handover_median_us": round(float(np.median(handover_us)), 3) if handover_us else None,
    }


def _ort_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


# ------------------------------------------------------------------------------------------------ the run


def fallback_line(record: Mapping[str, Any], device: str) -> str:
    """The line that announces a run with a fallback (:func:`_fallback_record` ``record``: which layers ran on ONNX
    Runtime and why, how to refuse), the rest on OpenVINO ``device``."""
    reasons: Mapping[str, str] = record.get("reasons", {})
    ops = sorted({reason.rsplit(" ", 1)[-1].split(" (")[0] for reason in reasons.values()})
    shown = ", ".join(list(reasons)[:4]) + (f" and {len(reasons) - 4} more" if len(reasons) > 4 else "")
    ml = ", classical-ML ops" if any(op.startswith(ML_DOMAIN + ".") for op in ops) else ""
    runtimes = set(record.get("layers", {}).values())
    if "openvino" not in runtimes:
        return (f"OpenVINO cannot convert any layer of the model ({shown}: {', '.join(ops)}{ml}): it ran on ONNX "
                f"Runtime's CPU provider (--no-ov-fallback refuses)")
    return (f"OpenVINO cannot convert {len(reasons)} layer(s) ({shown}: {', '.join(ops)}{ml}): they ran on ONNX "
            f"Runtime's CPU provider, the rest on OpenVINO {device}, chained per inference "
            f"(--no-ov-fallback refuses)")


@dataclass(frozen=True)
class _ChainSession:
    """The chain of segments as a session with ``run(output_names, feeds)`` (what ``bench`` times)."""

    steps: Sequence[Step]

    def run(self, _outputs: object, feeds: Mapping[str, np.ndarray]) -> None:
        run_chain(self.steps, feeds)


def bench_with_fallback(graph: Graph, config: SessionConfig, options: OpenVinoOptions, fallback: Mapping[str, str],
                        streams: int) -> SyncBenchSession:
    """``bench``'s session for ``graph`` with the top-level layers of ``fallback`` (id -> reason) on ONNX Runtime:
    the chain of segments, compiled and opened once, timed end to end (the hand-over between segments included) in
    one stream; more streams are refused (exit 2: one chain of requests is not safe to call concurrently)."""
    if streams > 1:
        raise InputError(f"{graph.name}: --streams {streams}: a model OpenVINO runs with an ONNX Runtime fallback "
                         "is one chain of segments, measured in one stream (use --streams 1, or "
                         "--backend onnxruntime for concurrent requests)")
    device = device_name(config.provider)
    with scratch("openvino-fallback") as folder:  # the segments' files are read when they are opened
        stages = fallback_stages(graph, fallback, folder)
        steps = open_steps(stages, config, options, profiling=False, folder=folder)
    record = _fallback_record(graph, stages, fallback, (), config.threads)
    precision = next((run_precision(s.compiled) for s in steps if isinstance(s, _OpenVinoStep)), "")
    settings = {"device": device, **({"precision": precision} if precision else {}),
                "fallback": {key: record[key] for key in ("runtime", "reasons", "segments")}}
    return SyncBenchSession(_ChainSession(steps), f"OpenVINO {device} + ONNX Runtime CPU fallback", settings,
                            warnings=(fallback_line(record, device),))
