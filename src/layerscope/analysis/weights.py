"""The values of a model's weights, read once: subnormal counts and largest magnitudes per tensor; a copy of the
model with subnormal weights flushed to zero, and the measured gain of that copy on ONNX Runtime.

Why: a conv whose fp32 weights are mostly subnormal (0 < |w| < 1.1754944e-38) computes subnormal products; x86
cores without FTZ/DAZ (Intel: a microcode assist per operation) and many ARM cores run them 10-100x slower,
while the estimate, which counts operations, sees nothing wrong.

Contract:
- :func:`scan_weights` reads every initializer and every Constant node's tensor of the model file once (external
  data included; :func:`layerscope.model.load_model` has already checked where it lives) and returns one
  :class:`WeightStats` per float tensor; non-float tensors are left out;
- subnormal: ``0 < |x| < tiny`` with ``tiny`` the smallest normal number of the tensor's dtype
  (:data:`TINY`: 1.1754944e-38 for fp32, 6.1035156e-05 for fp16);
- :func:`flushed_copy` writes the model with every subnormal weight set to 0 (``w[np.abs(w) < tiny] = 0``) and
  changes nothing else; :func:`measure_flush_gain` times the model and that copy in alternating rounds with
  :class:`layerscope.runtimes.onnxruntime.runner.OrtRunner` and profiles each once with
  :func:`layerscope.runtimes.onnxruntime.profile.profile_model`, under one session config: the gain is a measurement on
  this machine, never an estimate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from layerscope.measure.cuts import Cut
from layerscope.measure.inputs import make_inputs
from layerscope.measure.profile import Measurement
from layerscope.measure.runners import Job
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.runtimes.onnxruntime.runner import OrtRunner
from layerscope.tempdirs import scratch

#: Smallest normal number per float dtype: below it (and above 0) a value is subnormal.
TINY: Mapping[str, float] = {"float32": float(np.finfo(np.float32).tiny), "float16": float(np.finfo(np.float16).tiny),
                             "float64": float(np.finfo(np.float64).tiny)}
_FLOAT_TYPES: dict[int, str] = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16",
                                TensorProto.DOUBLE: "float64"}
#: (exponent mask, mantissa mask) of the IEEE formats counted bitwise: no temporary float arrays.
_BITS = {"float32": (np.uint32, 0x7F800000, 0x007FFFFF), "float16": (np.uint16, 0x7C00, 0x03FF),
         "float64": (np.uint64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}
_CHUNK = 1 << 22


@dataclass(frozen=True)
class WeightStats:
    """One float weight tensor: its dtype (numpy name), element count, subnormal count, largest finite |x|
    (``None`` when it has no finite value) and the layers that read it (directly or through folded nodes)."""

    name: str
    dtype: str
    elements: int
    subnormal: int
    max_abs: float | None
    layers: tuple[str, ...] = ()

    @property
    def subnormal_fraction(self) -> float:
        return self.subnormal / self.elements if self.elements else 0.0


def count_subnormal(values: np.ndarray) -> int:
    """How many elements of a float array are subnormal (see :data:`TINY`), counted on the bits in chunks."""
    dtype = str(values.dtype)
    flat = np.ascontiguousarray(values).reshape(-1)
    if dtype not in _BITS:
        tiny = np.finfo(values.dtype).tiny
        return int(np.count_nonzero((flat != 0) & (np.abs(flat) < tiny)))
    uint, exponent, mantissa = _BITS[dtype]
    bits = flat.view(uint)
    total = 0
    for start in range(0, bits.size, _CHUNK):
        part = bits[start:start + _CHUNK]
        total += int(np.count_nonzero(((part & uint(exponent)) == 0) & ((part & uint(mantissa)) != 0)))
    return total


def _largest_finite(values: np.ndarray) -> float | None:
    flat = values.reshape(-1)
    finite = flat[np.isfinite(flat)]
    return float(np.abs(finite).max()) if finite.size else None


def _tensors(model: onnx.ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """(tensor name in the graph, tensor) for the initializers and the Constant nodes' ``value``."""
    for init in model.graph.initializer:
        yield init.name, init
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    yield node.output[0], attr.t


def _load(path: Path) -> onnx.ModelProto:
    return onnx.load_model(str(path), load_external_data=True)


def _readers(graph: Graph, names: Iterable[str], parameter_slots: Mapping[str, frozenset[int]]
             ) -> dict[str, tuple[str, ...]]:
    """For each tensor name: the layers reading it as data, directly or through nodes layerscope folded (Cast,
    Transpose, DequantizeLinear of a weight); a read in one of ``parameter_slots[op_type]`` does not count."""
    wanted = set(names)
    derived: dict[str, set[str]] = {name: {name} for name in wanted}  # folded tensor -> source weights
    for node in graph.folded:  # topological order: a folded node's inputs are known before its outputs
        sources = set().union(*(derived.get(i, set()) for i in node.inputs if i))
        for out in node.outputs:
            if out and sources:
                derived.setdefault(out, set()).update(sources)
    readers: dict[str, list[str]] = {}
    for layer in graph.layers:
        skip = parameter_slots.get(layer.op_type, frozenset())
        for slot, name in enumerate(layer.inputs):
            if slot in skip:
                continue
            for source in derived.get(name, ()):
                readers.setdefault(source, [])
                if layer.id not in readers[source]:
                    readers[source].append(layer.id)
    return {name: tuple(readers.get(name, ())) for name in wanted}


def scan_weights(graph: Graph, parameter_slots: Mapping[str, frozenset[int]] | None = None
                 ) -> dict[str, WeightStats]:
    """Per float weight tensor of ``graph``'s model file: subnormal count, largest |x| and the layers that read
    it as data (reads in ``parameter_slots``, by op type, e.g. BatchNormalization's statistics, do not count)."""
    model = _load(Path(graph.path))
    raw: list[tuple[str, str, int, int, float | None]] = []
    for name, tensor in _tensors(model):
        dtype = _FLOAT_TYPES.get(tensor.data_type)
        if dtype is None:
            continue
        values = numpy_helper.to_array(tensor)
        raw.append((name, dtype, int(values.size), count_subnormal(values),
                    _largest_finite(values) if values.size else None))
    readers = _readers(graph, (r[0] for r in raw), parameter_slots or {})
    return {name: WeightStats(name, dtype, size, sub, big, readers[name]) for name, dtype, size, sub, big in raw}


def flush_array(values: np.ndarray) -> np.ndarray:
    """A copy of ``values`` with its subnormal elements set to 0 (``w[np.abs(w) < tiny] = 0``)."""
    out = np.array(values, copy=True)
    out[(out != 0) & (np.abs(out) < np.finfo(out.dtype).tiny)] = 0
    return out


def flushed_copy(path: Path, out: Path, names: Iterable[str] | None = None) -> int:
    """Write the model at ``path`` to ``out`` with the subnormal values of its float weights (those in ``names``
    when given) set to 0; the number of values flushed. Models over 1 GiB keep their weights in one external
    data file next to ``out``."""
    model = _load(path)
    wanted = None if names is None else set(names)
    flushed = 0
    for name, tensor in _tensors(model):
        if tensor.data_type not in _FLOAT_TYPES or (wanted is not None and name not in wanted):
            continue
        values = numpy_helper.to_array(tensor)
        count = count_subnormal(values)
        if count:
            tensor.CopyFrom(numpy_helper.from_array(flush_array(values), tensor.name))
            flushed += count
    large = model.ByteSize() > (1 << 30) if flushed else False
    onnx.save_model(model, str(out), save_as_external_data=large, location=f"{out.name}.data" if large else None)
    return flushed


@dataclass(frozen=True)
class FlushGain:
    """The model and its flushed copy measured on ONNX Runtime (µs).

    ``model_us`` / ``flushed_us``: one sample per round each, in the order A B | B A | A B ... (a drift of the
    machine's load then cancels in the paired differences); ``layer_us`` / ``flushed_layer_us``: per-layer
    medians from one :func:`~layerscope.runtimes.onnxruntime.profile.profile_model` of each."""

    model_us: tuple[float, ...]
    flushed_us: tuple[float, ...]
    layer_us: Mapping[str, float]
    flushed_layer_us: Mapping[str, float]
    flushed_values: int
    provider: str
    cpu: str

    @property
    def latency_us(self) -> float:
        return float(np.median(self.model_us))

    @property
    def flushed_latency_us(self) -> float:
        return float(np.median(self.flushed_us))

    @property
    def gain_us(self) -> float:
        """Measured: the median over the rounds of (model - flushed copy)."""
        return float(np.median(np.subtract(self.model_us, self.flushed_us)))

    @property
    def faster_rounds(self) -> int:
        """Rounds in which the flushed copy ran faster."""
        return int(np.count_nonzero(np.subtract(self.model_us, self.flushed_us) > 0))

    @property
    def rounds(self) -> int:
        return len(self.model_us)


def measure_flush_gain(graph: Graph, names: Iterable[str], config: SessionConfig, *, rounds: int = 20,
                       warmup: int = 3, weights_us: Mapping[str, float] | None = None, seed: int = 0,
                       input_specs: Sequence[str] = ()) -> FlushGain:
    """Time ``graph`` and its copy with the subnormal values of ``names`` flushed, with the same random inputs
    (the ``--input`` files of ``input_specs`` where given) and session ``config``: ``rounds`` paired visits of
    :class:`~layerscope.runtimes.onnxruntime.runner.OrtRunner` (each the fastest of 3 runs), then one
    :func:`~layerscope.runtimes.onnxruntime.profile.profile_model` of each (``rounds // 2`` runs, at least 5) for
    the layers.
    See the module docstring."""
    feeds = make_inputs(graph, input_specs, seed)
    shapes = {t.name: t.shape for t in graph.inputs}
    with scratch("flush") as folder:
        path = Path(folder) / "flushed.onnx"
        flushed_values = flushed_copy(Path(graph.path), path, names)
        flushed_graph = load_model(path, shapes)
        whole = Cut(len(graph.layers), (), 0, False)
        jobs = (Job(whole, "model", Path(graph.path), "model"), Job(whole, "flushed", path, "flushed"))
        runner = OrtRunner(config, feeds, runs_per_visit=3, warmup=warmup)
        model_us: list[float] = []
        flushed_us: list[float] = []
        samples = {"model": model_us, "flushed": flushed_us}  # by job key
        try:
            for index in range(rounds):
                for job in jobs if index % 2 == 0 else jobs[::-1]:
                    samples[job.key].append(runner.measure(job))
        finally:
            runner.close()
        profiled = max(5, rounds // 2)
        before = profile_model(graph, feeds, config, runs=profiled, warmup=warmup, weights=weights_us)
        after = profile_model(flushed_graph, feeds, config, runs=profiled, warmup=warmup, weights=weights_us)

    def medians(m: Measurement) -> dict[str, float]:
        return {i: r.stats.median_us for i, r in m.layers.items() if r.stats is not None}

    return FlushGain(tuple(model_us), tuple(flushed_us), medians(before), medians(after),
                     flushed_values, before.provider, str(before.machine.get("cpu", "")))
