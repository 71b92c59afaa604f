"""OpenVINO as a bisect runner: each prefix or suffix compiled by OpenVINO and timed end to end.

Contract of :class:`OpenVinoRunner` (a :class:`~layerscope.measure.runners.Runner`):

- the compiled model is a black box: a prefix (suffix) model file is read and compiled for the device with the
  backend's settings (:func:`~layerscope.runtimes.openvino.compile.compile_for`: device, precision hint,
  performance hint, threads, streams) *without* performance counters; one sample = the fastest of
  ``runs_per_visit`` timed ``InferRequest.infer`` calls, after the untimed calls
  :func:`~layerscope.measure.runners.warm_sequence` names for ``warm_with`` (the whole model, the model itself, or
  as the whole model's loop leaves it), and ``warmup`` calls when it is newly compiled; with ``recompile_every``
  a timed model is compiled afresh after every that many visits (:class:`~layerscope.measure.runners.Recompile`:
  each compilation runs at its own speed); at most ``max_models``
  compiled models stay open (least recently used released first; a suffix's feeding prefix counts as one);
  ``clock="cpu"`` times the calling thread's CPU time instead of elapsed time (needs ``threads == 1``: OpenVINO's
  CPU plugin then runs the whole inference on the calling thread -- on squeezenet its thread time equals the
  process's -- so the time other processes hold the core is not counted);
- a suffix is fed the values its feeding prefix (compiled the same way) computes from the model's inputs;
- the identity (part of the cache key) names the backend, OpenVINO's version, the device, the precision and
  performance hints, threads and streams: samples of another device or precision are never reused;
- :meth:`OpenVinoRunner.boundary` is the cut's own cost as OpenVINO's performance counters see it: the
  ``Reorder`` / ``Convert`` nodes of the model's runtime graph that write one of its outputs or read one of its
  inputs whose output (input) node the whole model's runtime graph does not have (the cut's tensors, converted
  out of the plugin's blocked layout or precision for the caller), summed per profiled run (the counters are
  elapsed time; on the CPU clock, scaled by the run's CPU time over its elapsed time);
- :func:`fused_groups`: the source layers of every node of the compiled whole model's runtime graph that runs
  more than one layer (the compiler's fusion), for the planner to never cut inside one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from layerscope.errors import InputError, LayerscopeError, ModelError, RuntimeFailure, condensed
from layerscope.measure.inputs import make_inputs
from layerscope.measure.runners import (
    NO_BOUNDARY_COST,
    BoundaryCost,
    Clock,
    Job,
    Lru,
    Recompile,
    WarmWith,
    feeds_sha256,
    warm_up,
    with_random_note,
)
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.openvino.compile import (
    OpenVinoOptions,
    _require_openvino,
    compile_for,
    compiled_settings,
    device_name,
    folded_reader,
    infer_failure,
    infer_shared,
    run_precision,
)
from layerscope.runtimes.openvino.counters import CounterRuns
from layerscope.runtimes.openvino.graph import runtime_nodes, source_layers_of_ops

__all__ = ["BOUNDARY_TYPES", "OpenVinoRunner", "boundary_cost", "fused_groups"]

#: Runtime-graph node types that convert a tensor crossing a cut (layout, precision) for the caller.
BOUNDARY_TYPES = frozenset({"Reorder", "Convert"})


class _Compiled:
    """One compiled model with its infer request and feeds keyed by its input ports: by name, else (OpenVINO
    renames an input when it removes the Dropout or Identity reading it) by position among the ONNX model's
    inputs (``path``), which OpenVINO keeps in order."""

    def __init__(self, compiled: Any, feeds: Mapping[str, np.ndarray], path: Path) -> None:
        self.compiled = compiled
        self.feeds = feeds
        self.request = compiled.create_infer_request()
        self.inputs: dict[Any, np.ndarray] = {}
        declared: list[str] | None = None
        for index, port in enumerate(compiled.inputs):
            name = next((n for n in port.get_names() if n in feeds), None)
            if name is None:
                if declared is None:
                    declared = _input_names(path)
                name = declared[index] if index < len(declared) and declared[index] in feeds else None
            if name is None:
                raise ModelError(f"OpenVINO input {port.get_any_name()!r} has no feed; feeds: {', '.join(feeds)}")
            self.inputs[port] = np.require(feeds[name], requirements="C")  # ascontiguousarray makes a scalar 1-D

    def infer(self, clock: Callable[[], int] = time.perf_counter_ns) -> int:
        """One :func:`~layerscope.runtimes.openvino.compile.infer_shared` call, timed in ns by ``clock``; OpenVINO's
        failure is :func:`~layerscope.runtimes.openvino.compile.infer_failure` (exit 2)."""
        try:
            start = clock()
            infer_shared(self.request, self.inputs)
            return clock() - start
        except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
            raise self._failure(exc) from exc

    def outputs(self) -> dict[str, np.ndarray]:
        """Every output of one run, under each of its tensor names."""
        try:
            result = self.request.infer(self.inputs)
        except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
            raise self._failure(exc) from exc
        values: dict[str, np.ndarray] = {}
        for port, value in result.items():
            for name in port.get_names():
                values[name] = np.asarray(value)
        return values

    def _failure(self, error: Exception) -> Exception:
        """``error`` as :func:`~layerscope.runtimes.openvino.compile.infer_failure`; layerscope's own as it is."""
        if isinstance(error, LayerscopeError):
            return error
        return infer_failure(error, self.feeds, run_precision(self.compiled), "a bisect model")


class OpenVinoRunner:
    """Times prefix and suffix models compiled by OpenVINO (see the module docstring)."""

    def __init__(self, config: SessionConfig, options: OpenVinoOptions, feeds: Mapping[str, np.ndarray], *,
                 runs_per_visit: int = 1, visit_warmup: int = 1, warm_with: WarmWith = "whole", warmup: int = 2,
                 max_models: int = 48, clock: Clock = "wall", recompile_every: int = 0) -> None:
        if runs_per_visit < 1 or visit_warmup < 0 or warmup < 0 or max_models < 2:
            raise ValueError("OpenVinoRunner: runs_per_visit >= 1, visit_warmup >= 0, warmup >= 0, max_models >= 2")
        if clock == "cpu" and config.threads != 1:
            raise InputError(f"--clock cpu needs --threads 1 (got {config.threads}): with more threads OpenVINO runs "
                             "the work on its own threads, whose CPU time the calling thread does not see")
        self._clock = time.thread_time_ns if clock == "cpu" else time.perf_counter_ns
        openvino = _require_openvino()
        self.config, self.options = config, options
        self.device = device_name(config.provider)
        self.feeds = dict(feeds)
        self.runs_per_visit, self.visit_warmup, self.warm_with = runs_per_visit, visit_warmup, warm_with
        self.warmup = warmup
        self._models: Lru[_Compiled] = Lru(max_models)
        self._recompile = Recompile(recompile_every)
        self._suffix_feeds: dict[str, dict[str, np.ndarray]] = {}
        self._whole_io: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self.settings: dict[str, Any] = {}
        machine = machine_info()
        self._identity = {
            "runner": "openvino", "version": openvino.get_version(), "device": self.device,
            "precision": options.precision, "performance_hint": options.performance_hint,
            "streams": options.streams, "threads": config.threads, "runs_per_visit": runs_per_visit,
            "visit_statistic": "min", "visit_warmup": visit_warmup, "warm_with": warm_with, "warmup": warmup,
            "clock": clock, "inputs_sha256": feeds_sha256(self.feeds), "hostname": machine["hostname"],
            "cpu": machine["cpu"], **({"recompile_every": recompile_every} if recompile_every else {}),
        }

    @property
    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def measure(self, job: Job) -> float:
        try:
            return self._measure(job)
        except RuntimeFailure as exc:
            raise with_random_note(exc, job) from exc.__cause__

    def _measure(self, job: Job) -> float:
        if self._recompile.due(job.key):
            self._models.drop(job.key)
        model, new = self._model(job.key, job.model_path, self.feeds_for(job))
        for _ in range(self.warmup if new else 0):
            model.infer()
        warm_up(job, self.warm_with, self.visit_warmup, itself=model.infer,
                whole=lambda path: self._model(f"whole:{path}", path, self.feeds)[0].infer(),
                feeding=lambda _: self._feeding(job).infer(), inputs=model.inputs.values())
        return min(model.infer(self._clock) for _ in range(self.runs_per_visit)) / 1e3

    def feeds_for(self, job: Job) -> Mapping[str, np.ndarray]:
        """The model's inputs for a prefix; for a suffix, what its feeding prefix computes (once per suffix)
        and the model inputs."""
        if job.feeds_model is None:
            return self.feeds
        if job.key not in self._suffix_feeds:
            self._suffix_feeds[job.key] = {**self._feeding(job).outputs(), **self.feeds}
        return self._suffix_feeds[job.key]

    def _feeding(self, job: Job) -> _Compiled:
        """A suffix's feeding prefix, compiled (kept open like the timed models)."""
        assert job.feeds_model is not None
        return self._model(f"feeds:{job.key}", job.feeds_model, self.feeds)[0]

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost:
        """The cut's conversion nodes' time per profiled run (:func:`boundary_cost`, ``warmup`` untimed runs
        first)."""
        if whole.key not in self._whole_io:
            compiled = self._compile(whole.model_path, profiling=False)
            self._whole_io[whole.key] = _io_nodes(compiled.get_runtime_model())
        compiled = self._compile(job.model_path, profiling=True)
        return boundary_cost(compiled, self.feeds_for(job), job.model_path, self._whole_io[whole.key],
                             warmup=self.warmup, runs=runs, clock=self._clock)

    def _compile(self, path: Path, *, profiling: bool) -> Any:
        core = _require_openvino().Core()
        try:
            read = core.read_model(str(path))
        except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
            reason = condensed(str(exc)) or type(exc).__name__
            raise ModelError(f"{path.name}: OpenVINO cannot read a bisect model: {reason}") from None
        model_file = _PathGraph(path.parent.name or path.name, str(path))
        compiled = compile_for(model_file, self.config, self.options, profiling=profiling, model=read)
        if not self.settings:
            self.settings = compiled_settings(compiled)
        return compiled

    def _model(self, key: str, path: Path, feeds: Mapping[str, np.ndarray]) -> tuple[_Compiled, bool]:
        return self._models.get(key, lambda: _Compiled(self._compile(path, profiling=False), feeds, path))

    def close(self) -> None:
        self._models.clear()
        self._suffix_feeds.clear()


@dataclass(frozen=True)
class _PathGraph:
    """A model file as :func:`compile_for` reads it: a name (its folder, the cache key's head) and a path."""

    name: str
    path: str


def _input_names(path: Path) -> list[str]:
    """The ONNX model's runtime inputs in order (initializers listed as inputs left out)."""
    graph = onnx.load(str(path), load_external_data=False).graph
    constant = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name not in constant]


def _layer_type(op: Any) -> str:
    info = op.get_rt_info()
    try:
        return str(info["layerType"].astype(str)) if "layerType" in info else ""
    except Exception:  # an rt_info entry of another type
        return ""


def _io_nodes(runtime: Any) -> tuple[frozenset[str], frozenset[str]]:
    """Names of the runtime graph's output nodes and input nodes."""
    ops = list(runtime.get_ordered_ops())
    return (frozenset(op.get_friendly_name() for op in ops if _layer_type(op) == "Output"),
            frozenset(op.get_friendly_name() for op in ops if _layer_type(op) == "Input"))


def boundary_cost(compiled: Any, feeds: Mapping[str, np.ndarray], path: Path,
                  whole_io: tuple[frozenset[str], frozenset[str]], *, warmup: int, runs: int,
                  clock: Callable[[], int] = time.perf_counter_ns) -> BoundaryCost:
    """What ``compiled`` (a model compiled with profiling, read from ``path``, fed ``feeds``) spends converting
    the tensors it takes in or hands out that a model whose runtime graph has the input and output nodes
    ``whole_io`` (:func:`_io_nodes`) does not: its :func:`_boundary_nodes`' time per profiled run, after ``warmup``
    untimed runs (each run's from the counters' running means, :class:`~.counters.CounterRuns`; the counters are
    elapsed time: on the CPU clock, ``clock`` = ``thread_time_ns``, scaled by the run's CPU time over its elapsed
    time), with the model input or output each converts. A model whose runtime graph has none is not run:
    :data:`~layerscope.measure.runners.NO_BOUNDARY_COST`."""
    nodes = _boundary_nodes(compiled.get_runtime_model(), *whole_io)
    if not nodes:
        return NO_BOUNDARY_COST
    model = _Compiled(compiled, feeds, path)
    node_runs = CounterRuns(model.request, warmup)
    for _ in range(warmup):
        model.infer()
        node_runs.inferred()
    sums = []
    for _ in range(runs):
        start_ns, clock_ns = time.perf_counter_ns(), clock()
        model.infer()
        elapsed_ns = max(1, time.perf_counter_ns() - start_ns)
        scale = 1.0 if clock is time.perf_counter_ns else (clock() - clock_ns) / elapsed_ns
        node_runs.inferred()
        node_runs.record()
        sums.append(scale * sum(us for name, us in node_runs.per_run[-1].items() if name in nodes))
    kernels = tuple(sorted(nodes))
    return BoundaryCost(samples_us=tuple(float(v) for v in sums), kernels=kernels,
                        tensors=tuple(nodes[name] for name in kernels))


def _boundary_nodes(runtime: Any, whole_outputs: frozenset[str], whole_inputs: frozenset[str]) -> dict[str, str]:
    """The :data:`BOUNDARY_TYPES` nodes feeding an output node, or fed by an input node, that the whole
    model's runtime graph lacks (chains of them: a Reorder then a Convert), each with the model input or output
    it converts (an input node is named after its input; an output node after the tensor it hands out, with
    ``/sink_port_<n>`` added)."""
    ops = list(runtime.get_ordered_ops())
    kinds = {op.get_friendly_name(): _layer_type(op) for op in ops}
    feeds: dict[str, list[str]] = {}
    reads: dict[str, list[str]] = {}
    for op in ops:
        name = op.get_friendly_name()
        for port in op.inputs():
            source = port.get_source_output().get_node().get_friendly_name()
            feeds.setdefault(name, []).append(source)
            reads.setdefault(source, []).append(name)
    found: dict[str, str] = {}

    def walk(start: str, step: Mapping[str, list[str]], tensor: str) -> None:
        frontier = list(step.get(start, ()))
        while frontier:
            node = frontier.pop()
            if kinds.get(node) in BOUNDARY_TYPES and node not in found:
                found[node] = tensor
                frontier.extend(step.get(node, ()))

    for name, kind in kinds.items():
        if kind == "Output" and name not in whole_outputs:
            walk(name, feeds, _SINK_PORT.sub("", name))
        elif kind == "Input" and name not in whole_inputs:
            walk(name, reads, name)
    return found


#: The suffix OpenVINO gives an output node's name after the tensor it hands out.
_SINK_PORT = re.compile(r"/sink_port_\d+$")


def fused_groups(graph: Graph, config: SessionConfig, options: OpenVinoOptions) -> tuple[tuple[str, ...], ...]:
    """The source layers of each computing node of the compiled whole model (``graph.path``) that runs more than
    one layer, in runtime order (:func:`~layerscope.runtimes.openvino.graph.runtime_nodes`; constants, layout
    nodes and weight reshapes excluded), the model read as ``profile`` reads it
    (:func:`~layerscope.runtimes.openvino.compile.folded_reader`, on :func:`~layerscope.measure.inputs.make_inputs`);
    ``ModelError`` (exit 2) when OpenVINO cannot read it."""
    _require_openvino()
    read = folded_reader(graph, make_inputs(graph), device_name(config.provider))[0]()
    compiled = compile_for(graph, config, options, profiling=False, model=read)
    nodes = runtime_nodes(compiled, graph, source_layers_of_ops(graph, read))
    constant_inputs = _constant_fed(compiled.get_runtime_model())
    return tuple(node.layers for node in nodes.values()
                 if node.category == "layer" and len(node.layers) > 1 and node.layer_type not in ("Const", "Constant")
                 and node.name not in constant_inputs)


def _constant_fed(runtime: Any) -> set[str]:
    """Runtime nodes whose every input is a constant (weight reshapes: work done once, not a fusion)."""
    ops = list(runtime.get_ordered_ops())
    kinds = {op.get_friendly_name(): _layer_type(op) for op in ops}
    out = set()
    for op in ops:
        sources = [p.get_source_output().get_node().get_friendly_name() for p in op.inputs()]
        if sources and all(kinds.get(s) in ("Const", "Constant") or s in out for s in sources):
            out.add(op.get_friendly_name())
    return out
