"""Quantities derived from a run, defined once: a layer's measured time, k, shares, where a measurement came from,
steadiness. Every reader (terminal and HTML reports, ``reconcile``, ``advise``, ``import``) uses these.

Inputs: every function reads the typed run (:class:`~layerscope.runfile.models.RunFile`, its
:class:`~layerscope.runfile.models.Layer` and sections) by attribute. A caller holding the JSON document may pass
it instead: a run is converted once with :func:`layerscope.runfile.io.as_run`, a layer (or a ``measured`` section,
a ``steadiness``) is validated as its model; a malformed one is a ``RunFileError`` (exit 2), as on load.

Definitions (the contract):
- **a layer's measured time** (:func:`layer_measured_us`, :attr:`Layer.measured_us`): ``None`` when the layer has
  no ``measured`` section; ``0.0`` when the runtime eliminated it (``measured.status == "eliminated"``: it costs
  nothing at run time); else ``measured.median_us``, or ``measured.mean_us`` when the tool reported only a mean;
  ``None`` when neither.
- **k** (:func:`scale_factor`) = Σ measured / Σ estimated over the *same* part of the model, first of:
  1. ``layers``: the layers with both an estimate and a measured time, eliminated layers left out of *both* sums
     (their estimate describes work the runtime never does); used when both sums are positive;
  2. ``accelerator``: a vendor import's board time of the accelerator block over the static report's estimate of
     it (the ``reconcile`` section ``layerscope import`` writes);
  3. ``end-to-end``: latency P50 (else mean) over the summary's estimated latency.
  k is labelled by where the measurement came from (:func:`measurement_origin`), never "board time" unless a
  vendor's tool measured it; :attr:`KFactor.mismatch` says when the measurement ran on another device than the
  estimate's target (then k compares two devices, not the estimate's error).
- **shares** (:func:`layer_shares`): a layer's time over the sum of all layers' times on one basis: measured when
  any layer has a measured time, else estimated; ``None`` for a layer without a time on that basis.
- **k of one pair** (:func:`k_between`): measured over estimated for one part of a model, both in µs; a
  non-positive or non-finite time is an ``InputError`` (the numbers come from the user's files).
  :func:`scale_layers` keeps the input order. With ``total_us`` (the vendor's estimate of the whole block, of which
  the listed layers may be only a part): ``share = estimated_us / total_us`` and ``scaled_us = k * estimated_us``
  (the scaled column follows the k printed). Without it: shares of the listed layers' sum (they add up to 1) and
  ``scaled_us = share * measured_us`` (adding up to the measured time).
- **steadiness** (:func:`unsteady`): the largest |CV| or |drift| of ``measurement.steadiness`` when it exceeds
  :data:`layerscope.stats.DRIFT_WARNING`, else ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from layerscope.errors import InputError, RunFileError
from layerscope.runfile.io import as_run, describe
from layerscope.runfile.models import (
    BenchMeasurement,
    DifferentialMeasurement,
    Kernel,
    KernelProfileMeasurement,
    Layer,
    LayerMeasured,
    Machine,
    RunFile,
    RunLike,
    Section,
    Steadiness,
)
from layerscope.stats import DRIFT_WARNING

#: A run as readers get it: typed, or its JSON document (converted with :func:`as_run`).
Document = RunLike
#: A layer as readers get it: typed, or a layer of the JSON document (validated as a :class:`Layer`).
LayerLike = Layer | Mapping[str, Any]

_M = TypeVar("_M", bound=Section)


def _typed(model: type[_M], value: _M | Mapping[str, Any], what: str) -> _M:
    """``value`` as ``model``: as it is when typed, else validated (``RunFileError`` naming ``what``)."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(dict(value), by_alias=True)
    except ValidationError as exc:
        raise RunFileError(f"{what}: {describe(exc)}", hint="see `layerscope schema`") from None


def as_layer(layer: LayerLike) -> Layer:
    """``layer`` typed: a :class:`Layer` as it is, a document's layer validated (``RunFileError`` when malformed)."""
    return _typed(Layer, layer, "layer")


# --------------------------------------------------------------------------------------------------- per layer


def is_eliminated(layer: LayerLike) -> bool:
    """True when the runtime removed the layer (it ran as nothing)."""
    return as_layer(layer).eliminated


def layer_measured_us(layer: LayerLike) -> float | None:
    """The layer's measured time (see the module's definitions; :attr:`Layer.measured_us` computes it)."""
    return as_layer(layer).measured_us


def layer_estimated_us(layer: LayerLike) -> float | None:
    """The layer's estimated latency, ``None`` without an estimate."""
    return as_layer(layer).estimated_us


def time_basis(run: Document) -> str | None:
    """``"measured"`` when any layer has a measured time, ``"estimated"`` when any has an estimate, else ``None``."""
    layers = as_run(run).layers
    if any(layer.measured_us is not None for layer in layers):
        return "measured"
    if any(layer.estimated_us is not None for layer in layers):
        return "estimated"
    return None


def layer_time_us(layer: LayerLike, basis: str | None) -> float | None:
    """The layer's time on ``basis`` (``"measured"`` or ``"estimated"``)."""
    if basis == "measured":
        return layer_measured_us(layer)
    if basis == "estimated":
        return layer_estimated_us(layer)
    return None


def layer_shares(layers: Sequence[LayerLike], basis: str | None) -> list[float | None]:
    """Each layer's share of the total over ``layers`` on ``basis`` (``None`` without a time; 0 when the total
    is 0)."""
    times = [layer_time_us(layer, basis) for layer in layers]
    total = sum(t for t in times if t is not None and t > 0)
    return [None if t is None else (t / total if total > 0 else 0.0) for t in times]


# --------------------------------------------------------------------------------------------------- origin


@dataclass(frozen=True)
class Origin:
    """Where a run's measurement came from. ``device``: ``"host-cpu"``, ``"host-gpu"``, ``"vendor"`` (a vendor's
    profiler, on its own device) or ``"device"`` (a device command); ``label`` says it in words."""

    kind: str
    device: str
    label: str


_GPU_PROVIDERS = ("CUDA", "Tensorrt", "TensorRT", "ROCM", "MIGraphX", "Dml", "CoreML", "OpenVINO")


def _where(machine: Machine | None) -> str:
    """The measuring machine's CPU, else its host name, else ``"this host"``."""
    return (machine.cpu or machine.hostname if machine is not None else None) or "this host"


#: The runtimes' names as a sentence gives them, by a measurement's ``backend``.
RUNTIME_NAMES = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}


def runtime_name(backend: str | None) -> str:
    """``backend`` (a measurement's) as a sentence names it; ``"the runtime"`` when the run names none."""
    return RUNTIME_NAMES.get(backend or "", backend or "the runtime")


def measurement_origin(run: Document) -> Origin | None:
    """Where ``run``'s measurement came from; ``None`` when the run holds none."""
    m = as_run(run).measurement
    if m is None:
        return None
    source = m.source or ""
    if m.kind == "vendor-import":
        return Origin(m.kind, "vendor", f"the vendor's profiler ({source or 'imported files'})")
    compiled = isinstance(m, KernelProfileMeasurement | BenchMeasurement | DifferentialMeasurement) and m.device
    if compiled:  # a compiling runtime (OpenVINO) records the device it compiled for
        device = str(m.device or m.provider or "")
        runtime = runtime_name(m.backend)
        what = {"kernel-profile": f"{runtime} performance counters", "bench": f"{runtime} benchmark",
                "differential": f"differential (bisect) timing on {runtime}"}[m.kind]
        fell_back = sorted({layer.measured.runtime for layer in as_run(run).layers if layer.measured is not None
                            and layer.measured.fallback_reason and layer.measured.runtime})
        if fell_back:  # some layers ran on another runtime, timed by its own profiler
            names = " and ".join(runtime_name(name) for name in fell_back)
            what += f" and {names}'s profiler for the layers that fell back to it"
        return Origin(m.kind, "host-cpu" if device.upper().startswith("CPU") else "device",
                      f"{what}, {device} ({m.precision or '?'}) on {_where(m.machine)}")
    if m.backend is not None and m.backend not in RUNTIME_NAMES:  # neither runtime of this process
        return Origin(m.kind, "device", f"a device command ({source or m.backend})")
    provider = m.provider or "CPUExecutionProvider"
    device = "host-gpu" if any(p in provider for p in _GPU_PROVIDERS) else "host-cpu"
    what = {"kernel-profile": "ONNX Runtime kernel profile", "bench": "ONNX Runtime benchmark",
            "differential": "differential (bisect) timing on ONNX Runtime"}.get(m.kind, "ONNX Runtime")
    return Origin(m.kind, device, f"{what}, {provider} on {_where(m.machine)}")


def device_mismatch(run: Document) -> str | None:
    """One line when the measurement ran on another device than the one the estimate is for, else ``None``."""
    typed = as_run(run)
    origin = measurement_origin(typed)
    target = typed.target_or_empty
    name, kind = target.name, target.kind
    if origin is None or not name:
        return None
    host_target = name == "host" or name.startswith("host-")
    if origin.device == "host-cpu" and (host_target or kind == "cpu"):  # the host, or a profile calibrated on it
        return None
    if origin.device == "host-gpu" and kind == "gpu":
        return None
    if origin.device in ("vendor", "device") and not host_target:
        return None
    return (f"measured by {origin.label}, estimated for target {name!r} ({kind or 'unknown kind'}): "
            "k compares two devices, not the estimate's error")


# --------------------------------------------------------------------------------------------------- k


@dataclass(frozen=True)
class KFactor:
    """k = ``measured_us / estimated_us`` over ``scope`` (``"layers"``, ``"accelerator"`` or ``"end-to-end"``).

    ``layer_ids``: the layers in both sums (scope ``"layers"``); ``excluded_ids``: measured layers left out
    (eliminated, or without an estimate); ``source``: where k comes from, in words (labelled by the measurement's
    origin); ``mismatch``: :func:`device_mismatch`.
    """

    measured_us: float
    estimated_us: float
    scope: str
    source: str
    layer_ids: tuple[str, ...]
    excluded_ids: tuple[str, ...]
    origin: Origin | None
    mismatch: str | None

    @property
    def k(self) -> float:
        return self.measured_us / self.estimated_us


def k_pairs(layers: Iterable[LayerLike]) -> tuple[list[tuple[Layer, float, float]], list[str]]:
    """(layer, estimated µs, measured µs) of the layers k counts, and the ids of the measured layers it leaves
    out (eliminated, or no estimate)."""
    pairs, excluded = [], []
    for layer in map(as_layer, layers):
        est, meas = layer.estimated_us, layer.measured_us
        if est is not None and meas is not None and not layer.eliminated:
            pairs.append((layer, est, meas))
        elif layer.measured is not None:
            excluded.append(layer.id)
    return pairs, excluded


def end_to_end_us(run: Document) -> tuple[float, float] | None:
    """(measured latency P50, else mean; summed estimate) when both are positive."""
    typed = as_run(run)
    latency = typed.latency
    measured = None if latency is None else (latency.p50_us if latency.p50_us is not None else latency.mean_us)
    estimated = typed.summary.est_latency_us
    if measured is None or estimated is None or measured <= 0 or estimated <= 0:
        return None
    return float(measured), float(estimated)


def _vendor_block(run: RunFile) -> tuple[float, float, str] | None:
    """A vendor import's accelerator block (not a ``reconcile`` section layerscope recomputes)."""
    rec = run.reconcile
    if rec is None or rec.method == "layerscope reconcile":
        return None
    return rec.measured_us, rec.estimated_us, rec.scope or "accelerator block measured on the board"


def scale_factor(run: Document) -> KFactor | None:
    """k of ``run`` (see the module's definition); ``None`` when no part is both estimated and measured."""
    typed = as_run(run)
    origin = measurement_origin(typed)
    mismatch = device_mismatch(typed)
    by = origin.label if origin is not None else "an unknown measurement"
    pairs, excluded = k_pairs(typed.layers)
    est_total = sum(e for _, e, _ in pairs)
    meas_total = sum(m for _, _, m in pairs)
    if pairs and est_total > 0 and meas_total > 0:
        return KFactor(meas_total, est_total, "layers",
                       f"Σ measured / Σ estimated over {len(pairs)} layers both measured and estimated; "
                       f"measured by {by}",
                       tuple(layer.id for layer, _, _ in pairs), tuple(excluded), origin, mismatch)
    block = _vendor_block(typed)
    if block is not None and typed.reconcile is not None:
        measured, estimated, scope = block
        rec = typed.reconcile
        source = (f"board time / static estimate, from the vendor's files ({rec.measured_source or '?'} / "
                  f"{rec.estimated_source or '?'})" if origin is None or origin.device == "vendor"
                  else f"{scope}; measured by {by}")
        return KFactor(measured, estimated, "accelerator", source, (), tuple(excluded), origin, mismatch)
    e2e = end_to_end_us(typed)
    if e2e is not None:
        return KFactor(e2e[0], e2e[1], "end-to-end",
                       f"end to end: latency P50 over the summed per-layer estimate; measured by {by}",
                       (), tuple(excluded), origin, mismatch)
    return None


# --------------------------------------------------------------------------------------------------- steadiness

SteadinessLike = Steadiness | Mapping[str, Any]


def _steadiness(steadiness: SteadinessLike) -> tuple[float, float, float]:
    """(CV, drift, drift in the profiled runs) of ``measurement.steadiness``; a document's missing or non-number
    value reads 0 (as the text and the warning always read it)."""
    if isinstance(steadiness, Steadiness):
        return steadiness.latency_cv, steadiness.latency_drift, steadiness.profiled_drift
    cv, drift, profiled = (steadiness.get(key) for key in ("latency_cv", "latency_drift", "profiled_drift"))
    return _finite(cv), _finite(drift), _finite(profiled)


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return float(value)


def steadiness_text(steadiness: SteadinessLike) -> str:
    """One line on how steady the machine was while it was measured (``measurement.steadiness``)."""
    cv, drift, profiled = _steadiness(steadiness)
    return (f"run-to-run CV {100 * cv:.1f}%; median moved {100 * drift:+.1f}% from the first to the second half of "
            f"the runs ({100 * profiled:+.1f}% in the profiled runs)")


def unsteady(steadiness: SteadinessLike | None) -> float | None:
    """The largest |CV| or |drift| when it exceeds :data:`DRIFT_WARNING`, else ``None`` (also without one)."""
    if steadiness is None or (not isinstance(steadiness, Steadiness) and not steadiness):
        return None
    worst = max(abs(value) for value in _steadiness(steadiness))
    return worst if worst > DRIFT_WARNING else None


@dataclass(frozen=True)
class ScaleFactor:
    """``k = measured_us / estimated_us`` for one part of a model."""

    measured_us: float
    estimated_us: float

    @property
    def k(self) -> float:
        return self.measured_us / self.estimated_us


@dataclass(frozen=True)
class ScaledLayer:
    """One layer's static cost, its share of all the layers' cost, and that share of the measured time."""

    layer_id: str
    estimated_us: float
    share: float
    scaled_us: float


def k_between(measured_us: float, estimated_us: float) -> ScaleFactor:
    """The scale factor between a measurement and an estimate of the same part, both in µs."""
    for label, value in (("measured", measured_us), ("estimated", estimated_us)):
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"cannot scale: the {label} time is {value} µs (it must be a positive number)")
    return ScaleFactor(measured_us=measured_us, estimated_us=estimated_us)


def scale_layers(layers: Iterable[tuple[str, float]], factor: ScaleFactor,
                 total_us: float | None = None) -> tuple[ScaledLayer, ...]:
    """Each ``(layer id, estimated µs)`` with its share of ``total_us`` (default: the listed layers' sum) and its
    estimate scaled by k. All shares are 0 when the total is 0."""
    items = [(layer_id, max(0.0, cost)) for layer_id, cost in layers]
    listed = sum(cost for _, cost in items)
    total = max(total_us, listed) if total_us is not None else listed
    scaled = []
    for layer_id, cost in items:
        share = cost / total if total > 0 else 0.0
        scaled.append(ScaledLayer(layer_id=layer_id, estimated_us=cost, share=share,
                                  scaled_us=cost * factor.k if total_us is not None else share * factor.measured_us))
    return tuple(scaled)


#: Largest fused group copied into each of its layers' ``measured.fused_group``; larger groups are stored
#: once, as their kernel's ``layers`` (see the module docstring and :func:`fused_group`).
FUSED_GROUP_INLINE_MAX = 64


def fused_group(run: Document, measured: LayerMeasured | Mapping[str, Any],
                cache: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """The layer ids of a layer's fused group (empty when it ran alone), whichever form the run stores:
    ``measured.fused_group`` inline, or ``fused_group_size`` with the list in the kernel's ``layers``.

    Callers looping over layers pass one ``cache`` dict: a stored group is then built once and shared
    by its layers (not copied into each). A document ``run`` is not converted whole (this is called once per
    layer): only the kernel row named is read, and validated as a :class:`Kernel`."""
    meas = _typed(LayerMeasured, measured, "measured")
    if meas.fused_group:
        return tuple(meas.fused_group)
    if not meas.fused_group_size:
        return ()
    kernel = str(meas.kernel)
    if cache is not None and kernel in cache:
        return cache[kernel]
    group: tuple[str, ...] = ()
    if isinstance(run, RunFile):
        row = next((k for k in run.kernels if k.name == kernel), None)
    else:
        rows = run.get("kernels") or ()
        found = next((r for r in rows if isinstance(r, Mapping) and r.get("name") == kernel), None)
        row = None if found is None else _typed(Kernel, found, "kernels")
    if row is not None:
        group = tuple(row.layers)
    if cache is not None:
        cache[kernel] = group
    return group


#: Layer fields that are the layer's identity, not a quantity.
_IDENTITY = ("id", "name", "op_type", "domain", "shape_source")
#: Layer fields that are lists of names or shapes: left out of the frame (the run file keeps them).
_STRUCTURE = ("inputs", "outputs", "output_shapes", "observed")


def layer_rows(run: RunFile) -> list[dict[str, Any]]:
    """One dict per layer of ``run``, with namespaced columns (scalars only; what a layer lacks is absent from its
    dict): the identity fields, ``cost.*`` (the layer's own fields), ``est.*`` and ``meas.*`` (its estimate and
    measurement), ``meas.time_us`` and ``share`` (of the run's time basis). The rows of ``Run.layers_frame`` and of
    a sweep's ``layers.parquet``."""
    dumped = [layer.model_dump(mode="json", exclude_unset=True) for layer in run.layers]
    shares = layer_shares(run.layers, time_basis(run))
    rows = []
    for layer, fields, share in zip(run.layers, dumped, shares, strict=True):
        row: dict[str, Any] = {key: fields.get(key) for key in _IDENTITY}
        for key, value in fields.items():
            if key in ("estimate", "measured") and isinstance(value, Mapping):
                prefix = "est" if key == "estimate" else "meas"
                row.update({f"{prefix}.{k}": v for k, v in value.items() if _scalar(v)})
            elif key not in _IDENTITY and key not in _STRUCTURE and _scalar(value):
                row[f"cost.{key}"] = value
        rows.append({**row, "meas.time_us": layer.measured_us, "share": share})
    return rows


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
