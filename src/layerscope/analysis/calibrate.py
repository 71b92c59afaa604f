"""Calibrate a hardware profile from measured runs: efficiency per unit and layer kind, a compute factor per op
type where the runs hold enough evidence, per-layer overhead and DDR bandwidth, fitted by non-negative least
squares.

The roofline (:mod:`layerscope.estimator.roofline`) gives each layer ``max(compute, load + store) + overhead``.
A run estimated on a base profile stores, per layer, ``compute_us`` (C) and ``load_us + store_us`` (M). With
the profile's efficiency of a unit scaled by ``1 / s``, its ``op_efficiency`` for an op type by ``1 / k`` and
its attainable DDR bandwidth by ``1 / d``, the same roofline gives ``t = max(s_g * k_op * C, d * M) + o_g`` for
a layer of group ``g`` (a unit and the layer kind it runs; CPU-fallback layers form one group per CPU and take
no op factor, as the profile's ``op_efficiency`` does not apply to them) and op type ``op``. The fit has two
stages, both on the same rows and by the same solver:

1. **Unit kind** (as before op factors existed): ``s_g >= S_MIN``, ``d >= S_MIN`` and ``o_g >= 0`` with every
   ``k_op = 1``. ``s_g`` is the pooled efficiency of everything the unit kind runs; an op type without a factor
   of its own (too little evidence, or absent from the calibration set -- an LSTM or attention MatMul when
   calibrating on CNNs) keeps it.
2. **Op type**: a factor ``k_op >= K_MIN`` for each op type with enough evidence (:class:`Evidence`: at least
   :data:`MIN_OP_LAYERS` measured layers, in at least :data:`MIN_OP_MODELS` models -- an op only one model has
   is confounded with that model's tensor sizes and fusions --, and :data:`MIN_OP_SHARE` of a run's measured
   kernel time, averaged over runs) whose measured time is mostly (:data:`COMPUTE_SHARE`) in layers that
   stage 1 leaves compute-bound. ``d`` and ``o_g`` are refitted with the factors; ``s_g`` stays as stage 1 set
   it, so a factor is relative to its unit kind. Conv and MatMul/Gemm get separate factors whenever each
   qualifies.

   *Bandwidth, not compute, where the data say so.* An op whose time stage 1 puts under the bandwidth line (on
   the model-zoo runs of ``host``: Gemm at batch 1, which streams its weights; BatchNormalization, Relu, Concat)
   gets no factor and is fitted by ``d``: a compute factor fitted to a bandwidth-bound layer would mispredict
   the same op at a compute-bound shape (Gemm at batch 32). The profile has no per-op bandwidth, so an op
   running faster than the bandwidth line cannot be expressed.

   *Shrinkage* toward the unit kind (``k = 1``), in log space: the posterior mean of a normal prior ``log k ~
   N(0, PRIOR_SD**2)`` given ``n`` observations of spread ``sigma``, ``k = k_raw ** w`` with ``w = n *
   PRIOR_SD**2 / (n * PRIOR_SD**2 + sigma**2)``. ``n`` counts the kernels the op dominates (at least
   :data:`DOMINANT` of the kernel's prediction), ``sigma`` is the robust standard deviation (1.4826 x MAD) of
   their log(measured / predicted) under ``k_raw``, at least :data:`SIGMA_FLOOR` (:data:`UNKNOWN_SPREAD` below
   two kernels). An op whose kernels agree (ONNX Runtime's LRN on the zoo: 6 kernels, ~14x its unit kind's
   time, sigma at the floor) keeps its factor; one whose kernels scatter is pulled toward its unit kind. ``d``
   and ``o_g`` are then refitted once more with the shrunk factors. :class:`OpFit` records each op's evidence,
   raw factor and weight.

Both stages:

- rows: every runtime kernel measured (the layers a fused kernel covers are one row, so the split of its time
  over them does not matter), and every run's end-to-end latency (P50, uninstrumented) against the sum over
  all its layers -- what a user is promised is the end-to-end figure, and time outside kernels lands in the
  per-layer overhead; errors count relative to the run's latency, so every model weighs alike;
- Huber reweighting (IRLS) keeps a few kernels the profile cannot express from setting a whole group's
  efficiency (in stage 1, an op with its own factor later, such as LRN); :func:`outliers` names the op types
  the final fit still gets far wrong, and models rich in them are mispredicted (reported, not hidden);
- the ``max`` is handled by alternating: assign each layer to compute or memory with the current parameters,
  solve the linear NNLS problem (Lawson-Hanson, numpy), reassign, until the assignment stops changing;
- zero-copy layers are views in the roofline (no time) and are not fitted; their measured time, if any, is
  part of the end-to-end rows only.

:func:`calibrated_profile` turns the fit into a profile that :func:`layerscope.targets.load_profile` accepts:
each fitted (unit, kind) becomes its own unit (``<unit>-<kind>`` when the base unit runs several kinds) with
the base peaks and ``efficiency = base efficiency / s_g``; an efficiency that would exceed 1 is written as 1
with the peaks raised instead (the source says so). Each op factor becomes ``[op_efficiency] <op> = base
multiplier / k_op``. Estimating a model with that profile gives exactly :func:`predict_us` (tested).

:func:`leave_one_model_out` refits without each model in turn (choosing the op types on the remaining runs)
and predicts it: the honest error figure.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from layerscope.costs.types import UnitKind
from layerscope.errors import InputError
from layerscope.fileio import write_atomic
from layerscope.runfile.models import Layer, RunFile
from layerscope.targets.profile import ComputeUnit, Profile
from layerscope.textsafe import terminal_text

#: Lower bound of the compute and memory scales: a unit at most 20x faster than its base profile says.
S_MIN = 0.05
#: Weight of a run's end-to-end row relative to a kernel row of the same size of error (both relative to the
#: run's latency).
E2E_WEIGHT = 1.0
#: Alternating fits stop after this many rounds even if some layer keeps flipping between bounds.
MAX_ROUNDS = 30
#: Huber reweighting: rounds, and the threshold in robust standard deviations (1.345: 95% efficiency).
IRLS_ROUNDS = 8
HUBER_C = 1.345
FALLBACK_KIND = "fallback"
LATENCY_KEY = "p50_us"
#: An op type gets a compute factor of its own with at least this many measured layers in the calibration runs,
#: in at least this many models, and at least this share of a run's measured kernel time (averaged over the runs).
MIN_OP_LAYERS = 4
MIN_OP_MODELS = 2
MIN_OP_SHARE = 0.005
#: Lower bound of an op-type factor (the op at most 20x faster than its unit kind's fit says).
K_MIN = 0.05
#: Prior standard deviation of log(op factor) around 0 (factor 1: the unit kind's efficiency), and the floor of
#: an op's measured spread, so that a handful of agreeing kernels cannot claim certainty.
PRIOR_SD = 0.5
SIGMA_FLOOR = 0.05
#: A kernel counts toward an op's spread when that op's layer takes at least this share of its prediction; with
#: fewer than two such kernels the spread is unknown and taken as UNKNOWN_SPREAD.
DOMINANT = 0.5
UNKNOWN_SPREAD = 1.0
#: An op with evidence gets a factor when at least this share of its measured time is in layers the unit-kind
#: fit leaves compute-bound (else it is fitted against bandwidth).
COMPUTE_SHARE = 0.5


@dataclass(frozen=True)
class LayerTerm:
    """One layer of a run as the fit sees it: its group, base compute and memory µs, its op type and its own
    measured µs (its share of its kernel's median; 0 when not measured)."""

    layer_id: str
    group: str
    compute_us: float
    memory_us: float
    op_type: str = ""
    measured_us: float = 0.0
    #: the part of ``memory_us`` that loads the layer's weights (0 when not known: a run file's layer)
    weight_us: float = 0.0
    #: µs the base profile adds beside the roofline for a matrix product of two activations
    #: (:func:`layerscope.estimator.roofline.activation_matmul_us`; 0 when not known: a run file's layer)
    element_us: float = 0.0
    #: whether the layer is a layout Transpose the base profile prices apart
    #: (:func:`layerscope.estimator.roofline.layout_transposes_priced`; False when not known: a run file's layer)
    layout: bool = False
    #: the dtype an accelerator layer runs at when the model was deployed at another than the profile's default
    #: (``"int16"``: :attr:`Params.dtype_scale` applies); empty: the default, or not known
    dtype: str = ""

    @property
    def fallback(self) -> bool:
        """Whether the layer falls back to the CPU (op-type factors never apply to it)."""
        return self.group.endswith("/" + FALLBACK_KIND)


@dataclass(frozen=True)
class KernelRow:
    """One measured kernel: the layers (indices into :attr:`RunData.layers`) it covers and its median µs."""

    layers: tuple[int, ...]
    measured_us: float


@dataclass(frozen=True)
class RunData:
    """What calibration takes from one run: its layers, its kernels and its end-to-end latency. A board
    measurement (one whole-model latency per model, :func:`board_run_data`) has no kernels. ``family``: the
    architecture family, the unit a leave-one-family-out fit holds out (empty: the model is its own family)."""

    model: str
    model_key: str
    target: str
    latency_us: float
    base_estimate_us: float
    layers: tuple[LayerTerm, ...]
    rows: tuple[KernelRow, ...]
    family: str = ""
    #: the base profile's per-inference task overhead in the run's estimate (outside every layer)
    task_us: float = 0.0

    @property
    def family_key(self) -> str:
        """The family, else the model file: what a leave-one-family-out fold holds out together."""
        return self.family or self.model_key


@dataclass(frozen=True)
class Params:
    """A fit: compute scale and overhead per group, one memory scale, and a compute factor per op type.

    A layer of group ``g`` and op type ``op`` takes ``max(scale(g) * op_factor(op) * C, memory_us) +
    overhead(g)`` (:meth:`layer_us`); CPU-fallback layers take no op factor. Groups not listed keep the base
    values (scale 1, the base overhead); op types not listed have factor 1.
    """

    compute_scale: Mapping[str, float]
    overhead_us: Mapping[str, float]
    memory_scale: float
    base_overhead_us: Mapping[str, float] = field(default_factory=dict)
    op_scale: Mapping[str, float] = field(default_factory=dict)
    #: the per-inference task overhead relative to the base profile's
    task_scale: float = 1.0
    #: the weight-load part of a layer's memory time (:attr:`LayerTerm.weight_us`) relative to the base
    #: profile's; ``None``: ``memory_scale``, as every other transfer
    weight_memory_scale: float | None = None
    #: the activation-matrix-product time (:attr:`LayerTerm.element_us`) relative to the base profile's
    element_scale: float = 1.0
    #: the compute time of a layout Transpose (:attr:`LayerTerm.layout`) relative to its unit's fitted time, in
    #: place of its op type's factor
    layout_scale: float = 1.0
    #: per non-default dtype, the compute time of an accelerator layer at it (:attr:`LayerTerm.dtype`) relative to
    #: the base profile's rate for that dtype (its ratio to the default dtype's, which no default-dtype model shows)
    dtype_scale: Mapping[str, float] = field(default_factory=dict)

    def memory_us(self, term: LayerTerm) -> float:
        """``term``'s DDR µs under this fit: its feature-map traffic times ``memory_scale``, its weight loads times
        ``weight_memory_scale`` (when set)."""
        if self.weight_memory_scale is None:
            return self.memory_scale * term.memory_us
        return self.memory_scale * (term.memory_us - term.weight_us) + self.weight_memory_scale * term.weight_us

    def scale(self, group: str) -> float:
        return self.compute_scale.get(group, 1.0)

    def overhead(self, group: str) -> float:
        return self.overhead_us.get(group, self.base_overhead_us.get(group, 0.0))

    def op_factor(self, op_type: str) -> float:
        """The compute-time factor of ``op_type`` relative to its group's scale (1 when not fitted)."""
        return self.op_scale.get(op_type, 1.0)

    def compute_us(self, term: LayerTerm) -> float:
        """``term``'s compute µs under this fit: its group's scale times its op type's factor, or times
        :attr:`layout_scale` for a layout Transpose; times its dtype's :attr:`dtype_scale` at a non-default dtype."""
        if term.fallback:
            return self.scale(term.group) * term.compute_us
        factor = self.layout_scale if term.layout else self.op_factor(term.op_type)
        if term.dtype:
            factor *= self.dtype_scale.get(term.dtype, 1.0)
        return self.scale(term.group) * factor * term.compute_us

    def layer_us(self, term: LayerTerm) -> float:
        """``term``'s roofline µs under this fit: max(compute, memory) + overhead + its activation-matrix-product
        time."""
        return (max(self.compute_us(term), self.memory_us(term)) + self.overhead(term.group)
                + self.element_scale * term.element_us)


@dataclass(frozen=True)
class ModelError:
    """One model's end-to-end latency: measured, predicted by a fit, and by the base profile; and the sum of its
    measured kernels against the fit's prediction of the same kernels (0 when not computed). The kernel error
    separates the cost model's error from the run's own gap between its kernels and its end-to-end P50, which
    is measured separately and moves with the machine's load."""

    model: str
    measured_us: float
    predicted_us: float
    base_estimate_us: float
    kernels_measured_us: float = 0.0
    kernels_predicted_us: float = 0.0

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_us - self.measured_us) / self.measured_us

    @property
    def kernel_error(self) -> float | None:
        """(predicted - measured) / measured over the measured kernels; ``None`` without them."""
        if self.kernels_measured_us <= 0:
            return None
        return (self.kernels_predicted_us - self.kernels_measured_us) / self.kernels_measured_us


@dataclass(frozen=True)
class ErrorSummary:
    """Mean and max |error| of a set of models, and how many are within ``tolerance``."""

    count: int
    mean_abs: float
    max_abs: float
    within: int
    tolerance: float


@dataclass(frozen=True)
class Outlier:
    """An op type whose kernels the fitted profile gets far wrong: measured over predicted µs, summed over the
    kernels that are that op alone, and their share of all measured kernel time."""

    op_type: str
    kernels: int
    measured_us: float
    predicted_us: float
    share: float

    @property
    def ratio(self) -> float:
        return self.measured_us / self.predicted_us if self.predicted_us > 0 else math.inf


@dataclass(frozen=True)
class OpFit:
    """The evidence for one op type's compute factor and how far it was shrunk toward its unit kind's.

    ``layers``: measured layers of the op in the calibration runs, of ``models`` models; ``share``: the op's share
    of a run's measured kernel time, averaged over the runs (each run weighs alike); ``raw_scale``: the factor
    fitted without
    shrinkage; ``rows`` and ``spread``: the kernels dominated by the op and the robust standard deviation of
    their log(measured / predicted); ``weight``: ``rows * PRIOR_SD**2 / (rows * PRIOR_SD**2 + spread**2)``.
    """

    op_type: str
    layers: int
    models: int
    share: float
    raw_scale: float
    rows: int
    spread: float
    weight: float

    @property
    def scale(self) -> float:
        """The shrunk factor: ``raw_scale ** weight`` (geometric shrinkage toward 1, the unit kind's)."""
        return math.exp(self.weight * math.log(self.raw_scale))


@dataclass(frozen=True)
class Calibration:
    """The fit on all runs, its in-sample errors, the leave-one-model-out errors and any held-out checks."""

    base_profile: str
    params: Params
    models: tuple[str, ...]
    in_sample: tuple[ModelError, ...]
    leave_one_out: tuple[ModelError, ...]
    checks: tuple[ModelError, ...]
    group_rows: Mapping[str, int]
    outliers: tuple[Outlier, ...] = ()
    op_fits: tuple[OpFit, ...] = ()
    #: What ``leave_one_out`` holds out at a time: ``"model"``, or ``"family"`` (an architecture family).
    holdout: str = "model"
    #: The |error| counted as within tolerance in the reports.
    tolerance: float = 0.10
    #: Where the measurements were taken, as the reports say it.
    measured_on: str = "on this machine"


# ------------------------------------------------------------------------------------------- from run files
def group_of(layer: Layer | Mapping[str, Any]) -> str | None:
    """The fit group of a run layer, typed or its JSON (``"<unit>/<kind>"``, ``"<cpu>/fallback"``); ``None`` for
    a view or a layer without an estimate."""
    typed = layer if isinstance(layer, Layer) else Layer.model_validate(dict(layer))
    estimate = typed.estimate
    if estimate is None:
        return None
    kind = typed.unit_kind or ""
    unit = estimate.unit or ""
    if estimate.fallback_reason:
        return f"{unit}/{FALLBACK_KIND}"
    if kind == "zero_copy" or unit in ("", "-"):
        return None
    return f"{unit}/{kind}"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_data(run: RunFile, label: str = "") -> RunData:
    """The fit's view of a run from ``layerscope profile`` (per-layer estimate and measurement, end-to-end P50).

    ``InputError`` when the run lacks the estimate, the measurement or the end-to-end latency.
    """
    name = str(run.model.name or label or "?")
    where = label or name
    latency = run.latency
    latency_us = (_number(getattr(latency, LATENCY_KEY)) or _number(latency.p50_us) or _number(latency.mean_us)
                  if latency is not None else None)
    if not latency_us or latency_us <= 0:
        raise InputError(f"{where}: run has no end-to-end latency (measure it with `layerscope profile`)")
    layers, index = _layer_terms(run, where)
    rows = _kernel_rows(run, index)
    if not rows:
        raise InputError(f"{where}: run has no per-layer measurement (make it with `layerscope profile`)")
    return _run_data(run, name, latency_us, layers, tuple(rows))


def board_run_data(run: RunFile, latency_us: float, label: str = "", family: str = "") -> RunData:
    """The fit's view of an estimated run whose model was timed whole on a device (``hrt_model_exec perf``'s
    average latency, or a published board figure): ``latency_us`` is its end-to-end latency; no kernel rows.

    ``InputError`` when the run has no per-layer estimate or the latency is not a positive finite number.
    """
    name = str(run.model.name or label or "?")
    where = label or name
    if not math.isfinite(latency_us) or latency_us <= 0:
        raise InputError(f"{where}: board latency must be a positive number of µs, got {latency_us!r}")
    layers, _ = _layer_terms(run, where)
    if not layers:
        raise InputError(f"{where}: run has no estimated layer to calibrate (estimate it with `layerscope estimate`)")
    return replace(_run_data(run, label or name, latency_us, layers, ()), family=family)


def _run_data(typed: RunFile, name: str, latency_us: float, layers: list[LayerTerm], rows: tuple[KernelRow, ...]
              ) -> RunData:
    # the roofline's total: beside a kernel predictor's estimate it is kept in roofline_latency_us
    base = _number(typed.summary.roofline_latency_us) or _number(typed.summary.est_latency_us) or 0.0
    key = str(typed.model.sha256 or typed.model.path or name)
    task = _number(typed.summary.est_task_overhead_us) or 0.0
    return RunData(name, key, typed.target_or_empty.name or "", latency_us, base, tuple(layers), rows, task_us=task)


def _layer_terms(typed: RunFile, where: str) -> tuple[list[LayerTerm], dict[str, int]]:
    """Every estimated, non-view layer as a :class:`LayerTerm`, and each one's index by layer id."""
    layers: list[LayerTerm] = []
    index: dict[str, int] = {}
    for layer in typed.layers:
        group = group_of(layer)
        if group is None:
            continue
        est = layer.est
        compute, load, store = (_number(v) for v in (est.compute_us, est.load_us, est.store_us))
        if compute is None or load is None or store is None:
            raise InputError(f"{where}: layer {layer.id!r} has no compute/load/store estimate "
                             "(calibration needs runs estimated by layerscope)")
        index[layer.id] = len(layers)
        own = _number(layer.measured.median_us) if layer.measured is not None else None
        layers.append(LayerTerm(layer.id, group, compute, load + store, layer.op_type or "", own or 0.0))
    return layers, index


def _kernel_rows(run: RunFile, index: Mapping[str, int]) -> list[KernelRow]:
    """One row per kernel: a fused group's layers together with the sum of their shares of its time."""
    rows: list[KernelRow] = []
    seen: set[tuple[str, ...]] = set()
    by_id = run.layer_by_id
    for layer in run.layers:
        measured = layer.measured
        if measured is None or measured.status == "eliminated":
            continue
        group = run.fused_group(layer) or (layer.id,)
        if group in seen:
            continue
        seen.add(group)
        members = [member.measured for i in group if (member := by_id.get(i)) is not None]
        total = sum(_number(m.median_us) or 0.0 for m in members if m is not None)
        fitted = tuple(index[i] for i in group if i in index)
        if fitted and total > 0:
            rows.append(KernelRow(fitted, total))
    return rows


# ------------------------------------------------------------------------------------------------------ NNLS
def nnls(a: np.ndarray, b: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """argmin ||a x - b|| subject to x >= 0 (Lawson and Hanson's active-set method)."""
    _, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * max(1.0, float(np.abs(a).sum(axis=0).max(initial=0.0))) * max(a.shape)
    limit = max_iter or 3 * n + 10
    w = a.T @ (b - a @ x)
    for _ in range(limit):
        if passive.all() or not (w[~passive] > tol).any():
            break
        candidates = np.where(~passive, w, -np.inf)
        passive[int(np.argmax(candidates))] = True
        for _ in range(limit):
            s = np.zeros(n)
            s[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (s[passive] > tol).all():
                break
            bad = passive & (s <= tol)
            alpha = float(np.min(x[bad] / np.maximum(x[bad] - s[bad], 1e-300)))
            x = x + alpha * (s - x)
            passive &= x > tol
            x[~passive] = 0.0
        x = s
        w = a.T @ (b - a @ x)
    return np.maximum(x, 0.0)


# ------------------------------------------------------------------------------------------------------- fit
def _groups(runs: Sequence[RunData]) -> list[str]:
    return sorted({layer.group for run in runs for layer in run.layers})


def predict_us(run: RunData, params: Params) -> float:
    """End-to-end latency of ``run``'s model under ``params``: the roofline's sum over its layers and the
    per-inference task overhead."""
    return sum(params.layer_us(t) for t in run.layers) + params.task_scale * run.task_us


@dataclass(frozen=True)
class _Stage:
    """One linear stage of the fit. Columns: the free compute factors ``keys`` -- group scales (unit-kind stage)
    or op-type factors relative to ``fixed``'s group scales (``by_op``) --, then the memory scale ``d``, then one
    overhead per group in ``groups``. A compute factor that is not free stays as in ``fixed``."""

    keys: tuple[str, ...]
    groups: tuple[str, ...]
    by_op: bool
    fixed: Params

    @cached_property
    def columns(self) -> dict[str, int]:
        return {k: i for i, k in enumerate(self.keys)}

    @property
    def width(self) -> int:
        return len(self.keys) + 1 + len(self.groups)

    @property
    def lower(self) -> np.ndarray:
        """Lower bound of every column: :data:`K_MIN` or :data:`S_MIN` for compute, ``S_MIN`` for ``d``, 0 for
        overheads."""
        bounds = np.zeros(self.width)
        bounds[: len(self.keys)] = K_MIN if self.by_op else S_MIN
        bounds[len(self.keys)] = S_MIN
        return bounds

    def compute(self, term: LayerTerm) -> tuple[int | None, float]:
        """The layer's free compute column and its coefficient (µs at factor 1), or ``None`` and its fixed µs."""
        key = (None if term.fallback else term.op_type) if self.by_op else term.group
        col = self.columns.get(key) if key is not None else None
        if col is None:
            return None, self.fixed.compute_us(term)
        return col, (self.fixed.scale(term.group) * term.compute_us if self.by_op else term.compute_us)

    def params(self, x: np.ndarray, used: np.ndarray, previous: Params) -> Params:
        """The parameters a solution ``x`` gives; a free column no layer used keeps ``previous``'s value."""
        n = len(self.keys)
        old = previous.op_scale if self.by_op else previous.compute_scale
        free = {k: float(x[i]) if used[i] else old.get(k, 1.0) for i, k in enumerate(self.keys)}
        overheads = {g: float(x[n + 1 + i]) for i, g in enumerate(self.groups)}
        memory = float(x[n]) if used[n] else previous.memory_scale
        if self.by_op:
            return replace(self.fixed, op_scale={**self.fixed.op_scale, **free}, overhead_us=overheads,
                           memory_scale=memory)
        return replace(self.fixed, compute_scale={**self.fixed.compute_scale, **free}, overhead_us=overheads,
                       memory_scale=memory)


def fit(runs: Sequence[RunData], base_overhead_us: Mapping[str, float], *, per_op: bool = True) -> Params:
    """Fit compute scales, op-type factors (unless ``per_op`` is false), overheads and the memory scale to
    ``runs`` (see the module docstring)."""
    return fit_with_evidence(runs, base_overhead_us, per_op=per_op)[0]


def fit_with_evidence(runs: Sequence[RunData], base_overhead_us: Mapping[str, float], *, per_op: bool = True
                      ) -> tuple[Params, tuple[OpFit, ...]]:
    """:func:`fit`, with the evidence and shrinkage of every op-type factor it kept."""
    if not runs:
        raise InputError("calibration needs at least one measured run")
    groups = tuple(_groups(runs))
    start = Params(dict.fromkeys(groups, 1.0), dict(base_overhead_us), 1.0, dict(base_overhead_us))
    params = _alternate(runs, _Stage(groups, groups, False, start))
    evidence = op_evidence(runs) if per_op else {}
    ops = {op: e for op, e in evidence.items() if e.enough and _compute_share(runs, params, op) >= COMPUTE_SHARE}
    if not ops:
        return params, ()
    raw = _alternate(runs, _Stage(tuple(sorted(ops)), groups, True, params))
    kept = {op: raw.op_factor(op) for op in ops if _compute_share(runs, raw, op) > 0}
    fits = _shrink(runs, replace(raw, op_scale=kept), ops)
    shrunk = replace(raw, op_scale={f.op_type: f.scale for f in fits})
    return _alternate(runs, _Stage((), groups, False, shrunk)), fits


def _alternate(runs: Sequence[RunData], stage: _Stage) -> Params:
    """Solve ``stage`` for a compute/memory assignment of every layer, reassign, until it stops changing."""
    params = stage.fixed
    assignment: list[np.ndarray] = []
    for _ in range(MAX_ROUNDS):
        new = [np.array([params.compute_us(t) >= params.memory_scale * t.memory_us for t in run.layers],
                        dtype=bool) for run in runs]
        if assignment and all(np.array_equal(a, b) for a, b in zip(assignment, new, strict=True)):
            break
        assignment = new
        params = _solve(runs, stage, assignment, params)
    return params


def _layer_rows(run: RunData, stage: _Stage, is_compute: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each layer's coefficients on the stage's columns, and its µs that no free column carries."""
    n = len(stage.keys)
    gcol = {g: n + 1 + i for i, g in enumerate(stage.groups)}
    coef = np.zeros((len(run.layers), stage.width))
    fixed = np.zeros(len(run.layers))
    for i, term in enumerate(run.layers):
        if is_compute[i]:
            col, value = stage.compute(term)
            if col is None:
                fixed[i] = value
            else:
                coef[i, col] = value
        else:
            coef[i, n] = term.memory_us
        coef[i, gcol[term.group]] = 1.0
    return coef, fixed


def _design(runs: Sequence[RunData], stage: _Stage, assignment: Sequence[np.ndarray]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (kernels, then each run's end to end), targets and base weights for one compute/memory assignment;
    the compute µs no free column carries moves to the target side.

    A kernel row is weighted by 1 / the run's latency (its error counts as a share of the run, so a model's many
    small kernels weigh what they cost) and an end-to-end row by :data:`E2E_WEIGHT` / the run's latency (every
    model counts alike, whatever its size).
    """
    rows: list[np.ndarray] = []
    targets: list[float] = []
    weights: list[float] = []
    for run, is_compute in zip(runs, assignment, strict=True):
        coef, fixed = _layer_rows(run, stage, is_compute)
        layers_us = run.latency_us - run.task_us  # the layers' part: the per-inference task is not fitted here
        scale = layers_us if layers_us > 0 else run.latency_us
        for row in run.rows:
            members = list(row.layers)
            rows.append(coef[members].sum(axis=0))
            targets.append(row.measured_us - float(fixed[members].sum()))
            weights.append(1.0 / scale)
        rows.append(coef.sum(axis=0))
        targets.append(layers_us - float(fixed.sum()))
        weights.append(E2E_WEIGHT / scale)
    return np.array(rows), np.array(targets), np.array(weights)


def _solve(runs: Sequence[RunData], stage: _Stage, assignment: Sequence[np.ndarray], previous: Params) -> Params:
    """One fit for a fixed compute/memory assignment of every layer: NNLS with Huber reweighting (IRLS), so
    that a few kernels the cost model gets badly wrong (an op the runtime implements poorly) do not set a whole
    group's efficiency.

    Unknowns: each free column minus its lower bound (:attr:`_Stage.lower`); all >= 0.
    """
    a, b, w = _design(runs, stage, assignment)
    lower = stage.lower
    b = b - a @ lower
    used = np.abs(a).sum(axis=0) > 0
    robust = np.ones(len(b))
    solution = np.zeros(a.shape[1])
    for _ in range(IRLS_ROUNDS):
        aw = a[:, used] * (w * robust)[:, None]
        norms = np.linalg.norm(aw, axis=0)
        norms[norms == 0] = 1.0
        solution = np.zeros(a.shape[1])
        if used.any():
            solution[used] = nnls(aw / norms, b * w * robust) / norms
        residual = (a @ solution - b) * w
        spread = 1.4826 * float(np.median(np.abs(residual))) or 1e-12
        robust = np.minimum(1.0, HUBER_C * spread / np.maximum(np.abs(residual), 1e-300))
    return stage.params(solution + lower, used, previous)


# ------------------------------------------------------------------------------------------ op-type factors
@dataclass(frozen=True)
class Evidence:
    """What the calibration runs hold of one op type (its layers on the profile's units; CPU-fallback layers are
    their own group and take no op factor): measured layers, distinct models, and its share of a run's measured
    kernel time averaged over the runs."""

    layers: int
    models: int
    share: float

    @property
    def enough(self) -> bool:
        """Whether it meets :data:`MIN_OP_LAYERS`, :data:`MIN_OP_MODELS` and :data:`MIN_OP_SHARE`."""
        return self.layers >= MIN_OP_LAYERS and self.models >= MIN_OP_MODELS and self.share >= MIN_OP_SHARE


def op_evidence(runs: Sequence[RunData]) -> dict[str, Evidence]:
    """Op type -> its :class:`Evidence` in ``runs``."""
    counts: dict[str, int] = {}
    models: dict[str, set[str]] = {}
    shares: dict[str, float] = {}
    for run in runs:
        total = sum(row.measured_us for row in run.rows)
        mine: dict[str, float] = {}
        for t in run.layers:
            if t.fallback or not t.op_type or t.measured_us <= 0:
                continue
            counts[t.op_type] = counts.get(t.op_type, 0) + 1
            models.setdefault(t.op_type, set()).add(run.model_key)
            mine[t.op_type] = mine.get(t.op_type, 0.0) + t.measured_us
        for op, us in mine.items():
            shares[op] = shares.get(op, 0.0) + (us / total if total > 0 else 0.0) / len(runs)
    return {op: Evidence(counts[op], len(models[op]), shares.get(op, 0.0)) for op in counts}


def _compute_share(runs: Sequence[RunData], params: Params, op: str) -> float:
    """The share of ``op``'s measured time (its layers on the profile's units) in layers that are compute-bound
    under ``params``: near 0, the op is fitted against bandwidth and a compute factor would change nothing."""
    compute = total = 0.0
    for run in runs:
        for t in run.layers:
            if t.op_type == op and not t.fallback:
                total += t.measured_us
                if params.compute_us(t) >= params.memory_scale * t.memory_us:
                    compute += t.measured_us
    return compute / total if total > 0 else 0.0


def _shrink(runs: Sequence[RunData], raw: Params, ops: Mapping[str, Evidence]) -> tuple[OpFit, ...]:
    """Each kept factor of ``raw`` with its shrinkage toward 1 (see the module docstring)."""
    logs: dict[str, list[float]] = {op: [] for op in raw.op_scale}
    for run in runs:
        for row in run.rows:
            terms = [run.layers[i] for i in row.layers]
            predicted = [raw.layer_us(t) for t in terms]
            total = sum(predicted)
            top = max(range(len(terms)), key=lambda i: predicted[i])
            op = terms[top].op_type
            if op in logs and not terms[top].fallback and total > 0 and predicted[top] >= DOMINANT * total:
                logs[op].append(math.log(row.measured_us / total))
    fits = []
    for op, values in sorted(logs.items()):
        spread = max(SIGMA_FLOOR, _robust_sd(values)) if len(values) >= 2 else UNKNOWN_SPREAD
        weight = len(values) * PRIOR_SD**2 / (len(values) * PRIOR_SD**2 + spread**2) if values else 0.0
        e = ops[op]
        fits.append(OpFit(op, e.layers, e.models, e.share, raw.op_factor(op), len(values), spread, weight))
    return tuple(fits)


def _robust_sd(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation from the median."""
    arr = np.asarray(values)
    return 1.4826 * float(np.median(np.abs(arr - np.median(arr))))


def base_overheads(profile: Profile, groups: Iterable[str]) -> dict[str, float]:
    """Each group's per-layer overhead on the base profile (a fallback group adds the hand-off cost)."""
    result: dict[str, float] = {}
    for group in groups:
        unit_name, _, kind = group.partition("/")
        if kind == FALLBACK_KIND:
            result[group] = profile.cpu.overhead_us + profile.transfer_overhead_us
        else:
            result[group] = _unit(profile, unit_name, group).overhead_us
    return result


def _unit(profile: Profile, name: str, group: str) -> ComputeUnit:
    try:
        return profile.unit(name)
    except KeyError:
        raise InputError(f"the runs were estimated with a unit {name!r} ({group}) that profile {profile.name!r} "
                         "does not have; pass the profile the runs were estimated on with --base") from None


def errors(runs: Sequence[RunData], params: Params) -> tuple[ModelError, ...]:
    """Each run's measured, predicted and base end-to-end latency, and its measured and predicted kernels."""
    return tuple(ModelError(r.model, r.latency_us, predict_us(r, params), r.base_estimate_us,
                            sum(row.measured_us for row in r.rows),
                            sum(params.layer_us(r.layers[i]) for row in r.rows for i in row.layers)) for r in runs)


def leave_one_model_out(runs: Sequence[RunData], base_overhead_us: Mapping[str, float], *, per_op: bool = True
                        ) -> tuple[ModelError, ...]:
    """For each model (runs grouped by model file), fit on the others and predict it. Empty below two models.

    The op types that get a factor are chosen on each fold's own runs: an op only the left-out model has
    keeps its unit kind's efficiency, as it would for a model outside the calibration set.
    """
    return leave_one_out(runs, lambda train: fit(train, base_overhead_us, per_op=per_op), lambda r: r.model_key)


def leave_one_out(runs: Sequence[RunData], fit_runs: Callable[[Sequence[RunData]], Params],
                  key: Callable[[RunData], str]) -> tuple[ModelError, ...]:
    """For each value of ``key`` (a model, an architecture family), ``fit_runs`` on the runs without it, then the
    errors of its runs under that fit. Empty below two values."""
    keys = list(dict.fromkeys(key(r) for r in runs))
    if len(keys) < 2:
        return ()
    result: list[ModelError] = []
    for held in keys:
        params = fit_runs([r for r in runs if key(r) != held])
        result.extend(errors([r for r in runs if key(r) == held], params))
    return tuple(result)


def summarize(errs: Sequence[ModelError], tolerance: float = 0.10, *, kernels: bool = False
              ) -> ErrorSummary | None:
    """Mean and max |error| (``kernels``: |kernel_error|, over the models that have one), and the count within
    ``tolerance``; ``None`` for no models."""
    picked = [e.kernel_error for e in errs] if kernels else [e.error for e in errs]
    values = [abs(v) for v in picked if v is not None]
    if not values:
        return None
    return ErrorSummary(len(values), sum(values) / len(values), max(values),
                        sum(1 for v in values if v <= tolerance), tolerance)


def require_profile(runs: Sequence[RunData], profile: Profile) -> None:
    """``InputError`` when a run was estimated on another profile than ``profile``."""
    for run in runs:
        if run.target and run.target != profile.name:
            raise InputError(f"run of {run.model!r} was estimated on profile {run.target!r}, not {profile.name!r}; "
                             "calibrate runs of one profile at a time (or pass it with --base)")


def calibrate(runs: Sequence[RunData], profile: Profile, checks: Sequence[RunData] = (), *,
              per_op: bool = True) -> Calibration:
    """Fit on ``runs``, with leave-one-model-out errors and errors on the held-out ``checks``. ``per_op=False``
    fits one efficiency per unit and layer kind only (no op-type factors).

    ``InputError`` when a run was estimated on another profile than ``profile``.
    """
    if not runs:
        raise InputError("calibration needs at least one measured run")
    require_profile([*runs, *checks], profile)
    groups = _groups([*runs, *checks])
    base = base_overheads(profile, groups)
    params, op_fits = fit_with_evidence(runs, base, per_op=per_op)
    rows = {g: sum(1 for r in runs for row in r.rows for i in row.layers[:1] if r.layers[i].group == g)
            for g in groups}
    return Calibration(profile.name, params, tuple(dict.fromkeys(r.model for r in runs)), errors(runs, params),
                       leave_one_model_out(runs, base, per_op=per_op), errors(checks, params), rows,
                       outliers(runs, params), op_fits)


#: An op type is an outlier when its kernels run this many times slower (or faster) than the fit predicts
#: and take at least :data:`OUTLIER_SHARE` of the measured kernel time.
OUTLIER_RATIO = 2.0
OUTLIER_SHARE = 0.005


def outliers(runs: Sequence[RunData], params: Params) -> tuple[Outlier, ...]:
    """Op types the fitted profile mispredicts by :data:`OUTLIER_RATIO` or more (single-layer kernels only)."""
    sums: dict[str, list[float]] = {}
    total = 0.0
    for run in runs:
        for row in run.rows:
            total += row.measured_us
            if len(row.layers) != 1:
                continue
            t = run.layers[row.layers[0]]
            predicted = params.layer_us(t)
            entry = sums.setdefault(t.op_type, [0.0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += row.measured_us
            entry[2] += predicted
    found = [Outlier(op, int(v[0]), v[1], v[2], v[1] / total) for op, v in sums.items() if total > 0]
    bad = [o for o in found if o.share >= OUTLIER_SHARE and (o.ratio >= OUTLIER_RATIO or o.ratio <= 1 / OUTLIER_RATIO)]
    return tuple(sorted(bad, key=lambda o: -o.share))


# ---------------------------------------------------------------------------------------- calibrated profile
#: Physical bounds of a fitted multiplier (a unit's compute time, the memory time, an op type's compute time, the
#: task overhead, each relative to the base profile's): a fit outside them says the runs do not fit the profile
#: (wrong base, a mis-mapped unit, a measurement of another device), not that the hardware is that fast or slow.
FACTOR_MIN = 0.01
FACTOR_MAX = 100.0


def out_of_bounds(base: Profile, params: Params) -> tuple[str, ...]:
    """One phrase per fitted value outside physical bounds, naming it: a unit's efficiency above 1 (base efficiency
    / its compute multiplier: faster than the unit's peak), or a multiplier outside [:data:`FACTOR_MIN`,
    :data:`FACTOR_MAX`]. Empty when the fit is within bounds."""
    efficiency = {f"{unit.name}/{kind.value}": unit.efficiency for unit in (*base.units, base.cpu)
                  for kind in unit.kinds}
    efficiency[f"{base.cpu.name}/{FALLBACK_KIND}"] = base.cpu.efficiency
    found: list[str] = []
    factors = [(f"{group} compute x", scale) for group, scale in sorted(params.compute_scale.items())]
    factors += [("memory time x", params.memory_scale), ("task overhead x", params.task_scale),
                ("layout Transpose compute x", params.layout_scale)]
    factors += [(f"op {op} compute x", scale) for op, scale in sorted(params.op_scale.items())]
    factors += [(f"{dtype} compute x", scale) for dtype, scale in sorted(params.dtype_scale.items())]
    for label, value in factors:
        if not FACTOR_MIN <= value <= FACTOR_MAX:
            found.append(f"{label}{value:.4g} (outside {FACTOR_MIN:g}-{FACTOR_MAX:g})")
    for group, scale in sorted(params.compute_scale.items()):
        base_efficiency = efficiency.get(group)
        if base_efficiency is not None and scale > 0 and base_efficiency / scale > 1.0:
            found.append(f"{group} efficiency {base_efficiency / scale:.4g} (above 1: faster than the unit's peak)")
    return tuple(found)


def calibrated_profile(base: Profile, params: Params, *, name: str, models: Sequence[str],
                       when: str | None = None, note: str | None = None) -> dict[str, Any]:
    """The schema-1 profile mapping of ``base`` with the fitted parameters (see the module docstring); ``note``
    (default: the models and the date) begins every fitted field's source. A unit all of whose kinds were fitted
    alike stays one unit."""
    when = when or dt.date.today().isoformat()
    note = note or f"calibrated: layerscope calibrate on {len(models)} model(s) ({', '.join(models)}), {when}"
    sources = dict(base.sources)
    units: list[dict[str, Any]] = []
    for unit in base.units:
        fitted = [k.value for k in unit.kinds if f"{unit.name}/{k.value}" in params.compute_scale]
        if not fitted:
            units.append(_unit_table(unit, unit.name, [k.value for k in unit.kinds]))
            continue
        fits = {(params.scale(f"{unit.name}/{k}"), params.overhead(f"{unit.name}/{k}")) for k in fitted}
        timed = [k.value for k in unit.kinds if k is not UnitKind.ZERO_COPY]  # views take no time: never fitted
        if set(timed) <= set(fitted) and len(fits) == 1:  # every timed kind fitted alike: the unit stays whole
            (scale, overhead), = fits
            table, source = _fitted_unit(unit, unit.name, None, scale=scale, overhead_us=overhead, note=note)
            units.append(table)
            sources.update({f"units.{unit.name}.{k}": v for k, v in source.items()})
            continue
        for kind in fitted:
            uname = unit.name if len(unit.kinds) == 1 else f"{unit.name}-{kind}"
            group = f"{unit.name}/{kind}"
            table, source = _fitted_unit(unit, uname, kind, scale=params.scale(group),
                                         overhead_us=params.overhead(group), note=note)
            units.append(table)
            sources.update({f"units.{uname}.{k}": v for k, v in source.items()})
        rest = [k.value for k in unit.kinds if k.value not in fitted]
        if rest:
            units.append(_unit_table(unit, unit.name, rest))
    _scale_dtype_peaks(units, params, note, sources)
    cpu = _unit_table(base.cpu, base.cpu.name, [k.value for k in base.cpu.kinds])
    fallback = f"{base.cpu.name}/{FALLBACK_KIND}"
    if fallback in params.compute_scale:
        overhead = max(0.0, params.overhead(fallback) - base.transfer_overhead_us)
        cpu, source = _fitted_unit(base.cpu, base.cpu.name, None, scale=params.scale(fallback), overhead_us=overhead,
                                   note=note)
        sources.update({f"cpu.{k}": v for k, v in source.items()})
    d = params.memory_scale
    ddr_eff = base.ddr_efficiency / d
    ddr_bw = base.ddr_bandwidth_bytes_per_s
    if ddr_eff > 1.0:
        ddr_bw, ddr_eff = ddr_bw * ddr_eff, 1.0
    sources["ddr_efficiency"] = f"{note}; memory time x{d:.4g} of the base profile's"
    sources["ddr_bandwidth_bytes_per_s"] = f"{note}; base {base.ddr_bandwidth_bytes_per_s:.6g} B/s, attainable " \
        f"{ddr_bw * ddr_eff:.6g} B/s"
    sources["cpu_ddr_bandwidth_bytes_per_s"] = f"{note}; base value / {d:.4g}"
    if base.task_overhead_us and params.task_scale != 1.0:
        sources["task_overhead_us"] = f"{note}; the base profile's x{params.task_scale:.4g}"
    output_rate = base.output_bytes_per_s / params.task_scale if base.output_bytes_per_s else None
    if output_rate is not None and params.task_scale != 1.0:
        sources["output_bytes_per_s"] = f"{note}; the base profile's / {params.task_scale:.4g} (the per-inference " \
            "task factor: the runtime's work)"
    stream_rate = base.stream_bytes_per_s / d if base.stream_bytes_per_s else None
    if stream_rate is not None and d != 1.0:
        sources["stream_bytes_per_s"] = f"{note}; the base profile's / {d:.4g} (the feature-map memory factor)"
    element_ns = base.activation_matmul_ns_per_element * params.element_scale
    if base.activation_matmul_ns_per_element and params.element_scale != 1.0:
        sources["activation_matmul_ns_per_element"] = f"{note}; the base profile's x{params.element_scale:.4g}"
    layout_eff = base.layout_transpose_efficiency
    if layout_eff is not None and params.layout_scale != 1.0:
        layout_eff /= params.layout_scale
        sources["layout_transpose_efficiency"] = f"{note}; layout Transpose compute time x{params.layout_scale:.4g} " \
            "of the base profile's"
    weight_eff = _weight_efficiency(base, params, ddr_bw)
    if weight_eff is not None and params.weight_memory_scale is not None:
        sources["weight_ddr_efficiency"] = f"{note}; weight-load time x{params.weight_memory_scale:.4g} of the " \
            "base profile's"
    op_efficiency = _op_efficiency(base, params, note, sources)
    return {
        "schema": 1,
        "name": name,
        "kind": base.kind,
        "description": f"{base.description} -- calibrated on {len(models)} model(s)",
        "default_dtype": base.default_dtype,
        "dtypes": list(base.dtypes),
        "lane_width": base.lane_width,
        "cores": base.cores,
        "clock_hz": base.clock_hz,
        "sram_bytes": base.sram_bytes,
        **({"weight_sram_bytes": base.weight_sram_bytes} if base.weight_sram_bytes is not None else {}),
        "ddr_bandwidth_bytes_per_s": ddr_bw,
        "ddr_efficiency": ddr_eff,
        "cpu_ddr_bandwidth_bytes_per_s": base.cpu_ddr_bandwidth_bytes_per_s / d,
        "transfer_overhead_us": base.transfer_overhead_us,
        **({"task_overhead_us": base.task_overhead_us * params.task_scale} if base.task_overhead_us else {}),
        **({"output_bytes_per_s": output_rate} if output_rate is not None else {}),
        **({"stream_bytes_per_s": stream_rate} if stream_rate is not None else {}),
        **({"weight_ddr_efficiency": weight_eff} if weight_eff is not None else {}),
        **({"activation_matmul_ns_per_element": element_ns} if element_ns else {}),
        **({"layout_transpose_efficiency": layout_eff} if layout_eff is not None else {}),
        **({"weight_dtype": base.weight_dtype} if base.weight_dtype is not None else {}),
        **({"feature_map_alignment": [list(p) for p in base.feature_map_alignment]}
           if base.feature_map_alignment else {}),
        "units": units,
        "cpu": cpu,
        "fallback_rules": [{"op_type": r.op_type, **({"condition": r.condition} if r.condition else {}),
                            "reason": r.reason} for r in base.fallback_rules],
        **({"op_efficiency": op_efficiency} if op_efficiency else {}),
        **({"ddr_nominal_bytes_per_s": base.ddr_nominal_bytes_per_s} if base.ddr_nominal_bytes_per_s else {}),
        **({"fuse_elementwise": True} if base.fuse_elementwise else {}),
        **({"plan_sram": True} if base.plan_sram else {}),
        "sources": sources,
    }


def _scale_dtype_peaks(units: list[dict[str, Any]], params: Params, note: str, sources: dict[str, str]) -> None:
    """Divide each accelerator unit table's peak for each fitted non-default dtype by its compute factor
    (:attr:`Params.dtype_scale`), in place, with the source of each peak it changes."""
    for dtype, factor in sorted(params.dtype_scale.items()):
        if factor == 1.0:
            continue
        for table in units:
            peaks = table["peak_ops_per_s"]
            if dtype in peaks:
                table["peak_ops_per_s"] = {**peaks, dtype: peaks[dtype] / factor}
                sources[f"units.{table['name']}.peak_ops_per_s.{dtype}"] = (
                    f"{note}; {dtype} compute time x{factor:.4g} of the base profile's {dtype} rate")


def _weight_efficiency(base: Profile, params: Params, ddr_bw: float) -> float | None:
    """The calibrated profile's ``weight_ddr_efficiency`` against its DDR bandwidth ``ddr_bw``: the base profile's
    weight-load rate divided by the fit's weight factor; ``None`` when neither sets one. ``InputError`` when the
    rate exceeds ``ddr_bw`` (the profile could not express it)."""
    if params.weight_memory_scale is None and base.weight_ddr_efficiency is None:
        return None
    scale = params.memory_scale if params.weight_memory_scale is None else params.weight_memory_scale
    efficiency = base.attainable_weight_ddr_bytes_per_s / scale / ddr_bw
    if efficiency > 1.0:
        raise InputError(f"the fitted weight-load bandwidth ({base.attainable_weight_ddr_bytes_per_s / scale:.4g} "
                         f"B/s) exceeds the DDR bandwidth ({ddr_bw:.4g} B/s): the runs do not fit {base.name}")
    return efficiency


def profile_mapping(profile: Profile) -> dict[str, Any]:
    """The schema-1 mapping of ``profile`` as it is (its own sources kept), for :func:`profile_toml`."""
    mapping = calibrated_profile(profile, Params({}, {}, 1.0), name=profile.name, models=())
    mapping.update(description=profile.description, sources=dict(profile.sources))
    return mapping


def _op_efficiency(base: Profile, params: Params, note: str, sources: dict[str, str]) -> dict[str, float]:
    """``[op_efficiency]`` of the calibrated profile: the base profile's, with each fitted op's multiplier
    divided by its compute factor; adds each fitted entry's source to ``sources``."""
    table = dict(base.op_efficiency)
    for op, k in sorted(params.op_scale.items()):
        table[op] = base.efficiency_for(op) / k
        sources[f"op_efficiency.{op}"] = f"{note}; {op} compute time x{k:.4g} of its unit kind's fitted efficiency"
    return table


def _unit_table(unit: ComputeUnit, name: str, kinds: list[str]) -> dict[str, Any]:
    return {"name": name, "kinds": kinds, "efficiency": unit.efficiency, "overhead_us": unit.overhead_us,
            "peak_ops_per_s": dict(unit.peak_ops_per_s)}


def _fitted_unit(unit: ComputeUnit, name: str, kind: str | None, *, scale: float, overhead_us: float,
                 note: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A unit with efficiency ``unit.efficiency / scale`` (peaks raised when that exceeds 1)."""
    efficiency = unit.efficiency / scale
    peaks = dict(unit.peak_ops_per_s)
    sources = {"efficiency": f"{note}; compute time x{scale:.4g} of the base profile's",
               "overhead_us": f"{note}; fitted per-layer overhead"}
    if efficiency > 1.0:
        peaks = {k: v * efficiency for k, v in peaks.items()}
        sources["peak_ops_per_s"] = f"{note}; attainable rate above the base peak, written as the peak " \
            f"(base x{efficiency:.4g}) with efficiency 1"
        efficiency = 1.0
    kinds = [kind] if kind is not None else [k.value for k in unit.kinds]
    return {"name": name, "kinds": kinds, "efficiency": efficiency, "overhead_us": max(0.0, overhead_us),
            "peak_ops_per_s": peaks}, sources


# ------------------------------------------------------------------------------------------------ TOML text
def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value} in a profile")
        return _float_text(value)
    if isinstance(value, str):  # JSON's escapes are TOML's; TOML also forbids a raw DEL, which JSON leaves
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _float_text(value: float) -> str:
    """The shortest text that reads back as ``value``; a whole number of a million or more with an exponent
    (``8.0e13``, not ``80000000000000.0``), as the hand-written profiles spell rates and bandwidths."""
    text = repr(value)
    if "e" in text or abs(value) < 1e6:
        return text
    mantissa, exponent = f"{value:.15e}".split("e")
    mantissa = mantissa.rstrip("0")
    short = f"{mantissa}0e{int(exponent)}" if mantissa.endswith(".") else f"{mantissa}e{int(exponent)}"
    return short if float(short) == value else text


def _table_lines(header: str, table: Mapping[str, Any]) -> list[str]:
    lines = [header] if header else []
    nested = []
    for key, value in table.items():
        if isinstance(value, Mapping):
            nested.append((key, value))
        else:
            lines.append(f"{json.dumps(key) if not key.replace('_', '').isalnum() else key} = {_toml_value(value)}")
    for key, value in nested:
        inner = header.strip("[]") + "." + key if header else key
        lines.append(f"[{inner}]")
        lines.extend(f"{json.dumps(k)} = {_toml_value(v)}" if not k.replace("_", "").isalnum()
                     else f"{k} = {_toml_value(v)}" for k, v in value.items())
    return lines


def profile_toml(mapping: Mapping[str, Any], header_comment: str = "") -> str:
    """A profile mapping as TOML text (schema 1: scalars, ``[[units]]``, ``[cpu]``, ``[[fallback_rules]]``,
    ``[op_efficiency]`` when not empty, ``[sources]``)."""
    lines = [f"# {terminal_text(line)}" for line in header_comment.splitlines()]  # TOML comments: no controls
    tables = ("units", "cpu", "fallback_rules", "op_efficiency", "sources")
    scalars = {k: v for k, v in mapping.items() if k not in tables}
    lines.extend(_table_lines("", scalars))
    for unit in mapping.get("units", []):
        lines.append("")
        lines.extend(_array_table("units", unit))
    lines.append("")
    lines.extend(_table_lines("[cpu]", mapping["cpu"]))
    for rule in mapping.get("fallback_rules", []):
        lines.append("")
        lines.extend(_table_lines("[[fallback_rules]]", rule))
    if mapping.get("op_efficiency"):
        lines.append("")
        lines.extend(_table_lines("[op_efficiency]", mapping["op_efficiency"]))
    lines.append("")
    lines.append("[sources]")
    lines.extend(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in mapping.get("sources", {}).items())
    return "\n".join(lines) + "\n"


def _array_table(name: str, table: Mapping[str, Any]) -> list[str]:
    lines = [f"[[{name}]]"]
    for key, value in table.items():
        if not isinstance(value, Mapping):
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, Mapping):
            lines.append(f"[{name}.{key}]")
            lines.extend(f"{k} = {_toml_value(v)}" for k, v in value.items())
    return lines


def write_profile(path: Path, text: str) -> Path:
    """Write ``text`` atomically to ``path`` (temporary file in the same folder, then rename)."""
    return write_atomic(path, text)


def calibration_section(cal: Calibration, profile_path: str | None) -> dict[str, Any]:
    """A JSON summary of a calibration (what ``calibrate --json`` writes)."""

    def rows(errs: Sequence[ModelError]) -> list[dict[str, Any]]:
        return [{"model": e.model, "measured_us": round(e.measured_us, 3), "predicted_us": round(e.predicted_us, 3),
                 "base_estimate_us": round(e.base_estimate_us, 3), "error": round(e.error, 6),
                 "kernels_measured_us": round(e.kernels_measured_us, 3),
                 "kernels_predicted_us": round(e.kernels_predicted_us, 3),
                 "kernel_error": None if e.kernel_error is None else round(e.kernel_error, 6)} for e in errs]

    def summary(errs: Sequence[ModelError], kernels: bool = False) -> dict[str, Any] | None:
        s = summarize(errs, kernels=kernels)
        return None if s is None else {"count": s.count, "mean_abs_error": round(s.mean_abs, 6),
                                       "max_abs_error": round(s.max_abs, 6), "within_10pct": s.within}

    p = cal.params
    return {
        "base_profile": cal.base_profile,
        "profile_path": profile_path,
        "models": list(cal.models),
        "memory_scale": round(p.memory_scale, 6),
        "groups": [{"group": g, "compute_scale": round(p.scale(g), 6), "overhead_us": round(p.overhead(g), 6),
                    "kernel_rows": cal.group_rows.get(g, 0)} for g in sorted(p.compute_scale)],
        "in_sample": rows(cal.in_sample), "in_sample_summary": summary(cal.in_sample),
        "leave_one_out": rows(cal.leave_one_out), "leave_one_out_summary": summary(cal.leave_one_out),
        "leave_one_out_kernels_summary": summary(cal.leave_one_out, kernels=True),
        "checks": rows(cal.checks), "checks_summary": summary(cal.checks),
        "checks_kernels_summary": summary(cal.checks, kernels=True),
        "op_efficiency": [{"op_type": f.op_type, "layers": f.layers, "models": f.models, "share": round(f.share, 6),
                           "raw_compute_scale": round(f.raw_scale, 6), "compute_scale": round(f.scale, 6),
                           "kernel_rows": f.rows, "spread": round(f.spread, 6), "weight": round(f.weight, 6)}
                          for f in cal.op_fits],
        "outliers": [{"op_type": o.op_type, "kernels": o.kernels, "measured_us": round(o.measured_us, 3),
                      "predicted_us": round(o.predicted_us, 3), "share": round(o.share, 6)} for o in cal.outliers],
    }
