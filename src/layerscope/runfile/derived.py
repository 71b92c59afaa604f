"""Quantities derived from a run, defined once: a layer's measured time, k, shares, where a measurement came from,
steadiness. Every reader (terminal and HTML reports, ``reconcile``, ``advise``, ``import``) uses these.

Definitions (the contract):
- **a layer's measured time** (:func:`layer_measured_us`): ``None`` when the layer has no ``measured`` section;
  ``0.0`` when the runtime eliminated it (``measured.status == "eliminated"``: it costs nothing at run time);
  else ``measured.median_us``, or ``measured.mean_us`` when the tool reported only a mean; ``None`` when neither.
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
from typing import Any

from layerscope.errors import InputError
from layerscope.runfile.models import RunLike
from layerscope.stats import DRIFT_WARNING

#: A run as readers get it: typed, or its JSON document (sections read by key either way).
Document = RunLike


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _layers(run: Document) -> list[Mapping[str, Any]]:
    layers = run.get("layers")
    return [layer for layer in layers if isinstance(layer, Mapping)] if isinstance(layers, list) else []


# --------------------------------------------------------------------------------------------------- per layer


def is_eliminated(layer: Mapping[str, Any]) -> bool:
    """True when the runtime removed the layer (it ran as nothing)."""
    return _map(layer.get("measured")).get("status") == "eliminated"


def layer_measured_us(layer: Mapping[str, Any]) -> float | None:
    """The layer's measured time (see the module's definitions)."""
    measured = layer.get("measured")
    if not isinstance(measured, Mapping):
        return None
    if measured.get("status") == "eliminated":
        return 0.0
    value = _num(measured.get("median_us"))
    return value if value is not None else _num(measured.get("mean_us"))


def layer_estimated_us(layer: Mapping[str, Any]) -> float | None:
    """The layer's estimated latency, ``None`` without an estimate."""
    return _num(_map(layer.get("estimate")).get("latency_us"))


def time_basis(run: Document) -> str | None:
    """``"measured"`` when any layer has a measured time, ``"estimated"`` when any has an estimate, else ``None``."""
    layers = _layers(run)
    if any(layer_measured_us(layer) is not None for layer in layers):
        return "measured"
    if any(layer_estimated_us(layer) is not None for layer in layers):
        return "estimated"
    return None


def layer_time_us(layer: Mapping[str, Any], basis: str | None) -> float | None:
    """The layer's time on ``basis`` (``"measured"`` or ``"estimated"``)."""
    if basis == "measured":
        return layer_measured_us(layer)
    if basis == "estimated":
        return layer_estimated_us(layer)
    return None


def layer_shares(layers: Sequence[Mapping[str, Any]], basis: str | None) -> list[float | None]:
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


def measurement_origin(run: Document) -> Origin | None:
    """Where ``run``'s measurement came from; ``None`` when the run holds none."""
    measurement = run.get("measurement")
    if not isinstance(measurement, Mapping):
        return None
    from layerscope.runfile.io import measurement_kind

    kind = measurement_kind(measurement)
    source = str(measurement.get("source") or "")
    if kind == "vendor-import":
        return Origin(kind, "vendor", f"the vendor's profiler ({source or 'imported files'})")
    if measurement.get("backend") == "openvino" and kind == "kernel-profile":
        machine = _map(measurement.get("machine"))
        device = str(measurement.get("device") or measurement.get("provider") or "")
        where = str(machine.get("cpu") or machine.get("hostname") or "this host")
        return Origin(kind, "host-cpu" if device.upper().startswith("CPU") else "device",
                      f"OpenVINO performance counters, {device} ({measurement.get('precision') or '?'}) on {where}")
    if measurement.get("backend") not in (None, "onnxruntime"):
        return Origin(kind, "device", f"a device command ({source or measurement.get('backend')})")
    provider = str(measurement.get("provider") or "CPUExecutionProvider")
    machine = _map(measurement.get("machine"))
    where = str(machine.get("cpu") or machine.get("hostname") or "this host")
    device = "host-gpu" if any(p in provider for p in _GPU_PROVIDERS) else "host-cpu"
    what = {"kernel-profile": "ONNX Runtime kernel profile", "bench": "ONNX Runtime benchmark",
            "differential": "differential (bisect) timing on ONNX Runtime"}.get(kind, "ONNX Runtime")
    return Origin(kind, device, f"{what}, {provider} on {where}")


def device_mismatch(run: Document) -> str | None:
    """One line when the measurement ran on another device than the one the estimate is for, else ``None``."""
    origin = measurement_origin(run)
    target = _map(run.get("target"))
    name, kind = target.get("name"), target.get("kind")
    if origin is None or not name:
        return None
    host_target = str(name) == "host" or str(name).startswith("host-")
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


def k_pairs(layers: Iterable[Mapping[str, Any]]
            ) -> tuple[list[tuple[Mapping[str, Any], float, float]], list[str]]:
    """(layer, estimated µs, measured µs) of the layers k counts, and the ids of the measured layers it leaves
    out (eliminated, or no estimate)."""
    pairs, excluded = [], []
    for layer in layers:
        est, meas = layer_estimated_us(layer), layer_measured_us(layer)
        if est is not None and meas is not None and not is_eliminated(layer):
            pairs.append((layer, est, meas))
        elif isinstance(layer.get("measured"), Mapping):
            excluded.append(str(layer.get("id")))
    return pairs, excluded


def end_to_end_us(run: Document) -> tuple[float, float] | None:
    """(measured latency P50, else mean; summed estimate) when both are positive."""
    latency, summary = _map(run.get("latency")), _map(run.get("summary"))
    measured = _num(latency.get("p50_us"))
    if measured is None:
        measured = _num(latency.get("mean_us"))
    estimated = _num(summary.get("est_latency_us"))
    if measured is None or estimated is None or measured <= 0 or estimated <= 0:
        return None
    return measured, estimated


def _vendor_block(run: Document) -> tuple[float, float, str] | None:
    """A vendor import's accelerator block (not a ``reconcile`` section layerscope recomputes)."""
    rec = _map(run.get("reconcile"))
    if rec.get("method") == "layerscope reconcile":
        return None
    measured, estimated = _num(rec.get("measured_us")), _num(rec.get("estimated_us"))
    if measured is None or estimated is None or measured <= 0 or estimated <= 0:
        return None
    return measured, estimated, str(rec.get("scope") or "accelerator block measured on the board")


def scale_factor(run: Document) -> KFactor | None:
    """k of ``run`` (see the module's definition); ``None`` when no part is both estimated and measured."""
    origin = measurement_origin(run)
    mismatch = device_mismatch(run)
    by = origin.label if origin is not None else "an unknown measurement"
    pairs, excluded = k_pairs(_layers(run))
    est_total = sum(e for _, e, _ in pairs)
    meas_total = sum(m for _, _, m in pairs)
    if pairs and est_total > 0 and meas_total > 0:
        return KFactor(meas_total, est_total, "layers",
                       f"Σ measured / Σ estimated over {len(pairs)} layers both measured and estimated; "
                       f"measured by {by}",
                       tuple(str(layer.get("id")) for layer, _, _ in pairs), tuple(excluded), origin, mismatch)
    block = _vendor_block(run)
    if block is not None:
        measured, estimated, scope = block
        rec = _map(run.get("reconcile"))
        source = (f"board time / static estimate, from the vendor's files ({rec.get('measured_source') or '?'} / "
                  f"{rec.get('estimated_source') or '?'})" if origin is None or origin.device == "vendor"
                  else f"{scope}; measured by {by}")
        return KFactor(measured, estimated, "accelerator", source, (), tuple(excluded), origin, mismatch)
    e2e = end_to_end_us(run)
    if e2e is not None:
        return KFactor(e2e[0], e2e[1], "end-to-end",
                       f"end to end: latency P50 over the summed per-layer estimate; measured by {by}",
                       (), tuple(excluded), origin, mismatch)
    return None


# --------------------------------------------------------------------------------------------------- steadiness


def steadiness_text(steadiness: Mapping[str, Any]) -> str:
    """One line on how steady the machine was while it was measured (``measurement.steadiness``)."""
    cv, drift, profiled = (_num(steadiness.get(k)) or 0.0 for k in ("latency_cv", "latency_drift", "profiled_drift"))
    return (f"run-to-run CV {100 * cv:.1f}%; median moved {100 * drift:+.1f}% from the first to the second half of "
            f"the runs ({100 * profiled:+.1f}% in the profiled runs)")


def unsteady(steadiness: Mapping[str, Any] | None) -> float | None:
    """The largest |CV| or |drift| when it exceeds :data:`DRIFT_WARNING`, else ``None``."""
    if not isinstance(steadiness, Mapping) or not steadiness:
        return None
    worst = max(abs(_num(steadiness.get(key)) or 0.0) for key in ("latency_cv", "latency_drift", "profiled_drift"))
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


def fused_group(run: Document, measured: Mapping[str, Any],
                cache: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """The layer ids of a layer's fused group (empty when it ran alone), whichever form the run stores:
    ``measured.fused_group`` inline, or ``fused_group_size`` with the list in the kernel's ``layers``.

    Callers looping over layers pass one ``cache`` dict: a stored group is then built once and shared
    by its layers (not copied into each)."""
    inline = measured.get("fused_group")
    if inline:
        return tuple(str(i) for i in inline)
    if not measured.get("fused_group_size"):
        return ()
    kernel = str(measured.get("kernel"))
    if cache is not None and kernel in cache:
        return cache[kernel]
    group: tuple[str, ...] = ()
    for row in run.get("kernels") or ():
        if isinstance(row, Mapping) and row.get("name") == kernel:
            group = tuple(str(i) for i in row.get("layers") or ())
            break
    if cache is not None:
        cache[kernel] = group
    return group
