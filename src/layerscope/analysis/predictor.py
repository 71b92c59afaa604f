"""The kernel-level latency predictor (issue #18): per-family regressors on timed kernels, and their prediction.

Each kernel (:mod:`layerscope.measure.kernels`) is described by :data:`FEATURES`, computed from layerscope's own
costs and roofline estimate of the source layers it covers (MACs, FLOPs, bytes, the roofline time and the
compute share of it, kernel / stride / groups / channels of its main node). The regressor of the kernel's family
learns ``log((measured_us + c) / (roofline_us + c))`` (``c`` = :data:`FLOOR_US`, a kernel's fixed
cost): the roofline carries the scaling with size, the trees learn how far
this runtime on this machine is from it, so that a kernel larger than any sampled one is still predicted in
proportion (trees alone cannot extrapolate). A kernel of ``other`` ops (LSTM, GRU, contrib ops: no family) is
predicted by its roofline time, with the ``all`` model's interval. Families with fewer than
:data:`MIN_FAMILY_SAMPLES` kernels use the
``all`` model (every family, the family as one-hot features).

The fit: scikit-learn's ``GradientBoostingRegressor``; its error is estimated by k-fold cross-validation per
family (median absolute error and share within ±10%, on the kernel's time); the 10th and 90th percentile of the
cross-validated log residuals give each kernel's interval. Saved as JSON (:mod:`layerscope.analysis.trees`):
loads without pickle and without scikit-learn; refused (exit 2) when its format version differs, and when it
was trained for another runtime, version, provider or thread count than the one it is asked to predict for.

A model's prediction: the sum of its kernels' predictions (kernels from ONNX Runtime's optimized graph through
the fusion map, or OpenVINO's executed runtime nodes; where that runtime is not installed, or with
``fusion="rules"``, from the fusion rules learnt from the calibration models' groupings:
:mod:`layerscope.analysis.fusion_rules`), each taken into its model's context (:class:`Context`: ``factor`` x
its time alone + ``per_kernel_us``, fitted at calibration time to the calibration models' whole P50), plus the
per-call overhead measured with the kernels. Each kernel's time is spread over the
source layers it covers in proportion to their roofline times; layers no kernel covers (folded, eliminated)
get 0. The interval of the sum adds the kernels' interval ends (it assumes their errors move together: wide).
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from layerscope.analysis.fusion_rules import FUSION_SOURCES, FusionRules
from layerscope.analysis.trees import Ensemble, dump_gbr
from layerscope.errors import BackendUnavailable, InputError
from layerscope.estimator import estimate_graph
from layerscope.estimator.types import Bound, Estimate
from layerscope.fileio import write_atomic
from layerscope.measure.kernels import FAMILIES, KernelRunner, KernelTiming, OrtKernels, kernel_family
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes import registry
from layerscope.targets.profile import Profile

if TYPE_CHECKING:
    from layerscope.runtimes.base import Runtime

FORMAT = "layerscope-predictor"
#: 2: kernels timed as a P50, the in-model ``context``, learnt ``fusion_rules``, the ``elem_bytes`` feature;
#: 3: the context says whether it is applied (leave-one-model-out transfer check) and why.
VERSION = 3
FEATURES = ("log_macs", "log_flops", "log_act_read_bytes", "log_weight_bytes", "log_written_bytes",
            "log_roofline_us", "compute_share", "compute_bound", "layers", "kernel_area", "stride", "log_groups",
            "depthwise", "log_in_channels", "log_out_channels", "log_out_elements", "elem_bytes")
#: The numeric element types the ``elem_bytes`` feature reads (indices, shapes and masks are left out).
_VALUE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1}
MIN_FAMILY_SAMPLES = 12
#: Added to the measured and the roofline time before their ratio is learnt (µs): a kernel's fixed cost. Without
#: it, a kernel whose roofline is ~0 (a Reshape, a small Add) has a ratio in the hundreds, and a tree leaf
#: holding such kernels multiplies a larger kernel that lands in it by as much.
FLOOR_US = 2.0
#: The identity fields a predictor must share with the runtime it predicts for.
RUNTIME_KEYS = ("runner", "version", "provider", "threads", "opt_level")
_MAIN_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize",
             "Concat", "Softmax", "LayerNormalization")


# ------------------------------------------------------------------------------------------ features
def kernel_features(graph: Graph, estimate: Estimate, layers: Sequence[str]) -> np.ndarray:
    """The :data:`FEATURES` of the kernel covering source ``layers`` of ``graph`` (costs and roofline from
    ``estimate``, which must be ``graph``'s)."""
    index = {n.id: i for i, n in enumerate(graph.layers)}
    rows = [index[i] for i in layers if i in index]
    costs = [estimate.costs[i] for i in rows]
    ests = [estimate.layers[i] for i in rows]
    nodes = [graph.layers[i] for i in rows]
    roof = sum(e.latency_us for e in ests)
    compute = sum(e.compute_us for e in ests)
    main = next((n for n in nodes if n.op_type in _MAIN_OPS), nodes[0] if nodes else None)
    kernel = stride = groups = 1.0
    in_ch = out_ch = out_el = 1.0
    if main is not None:
        kernel = float(np.prod(main.attr("kernel_shape", [1]) or [1]))
        stride = float(max(main.attr("strides", [1]) or [1]))
        groups = float(main.attr("group", 1) or 1)
        first = graph.tensor(main.inputs[0]) if main.inputs else None
        out = graph.tensor(main.outputs[0]) if main.outputs else None
        if first is not None and first.shape:
            in_ch = float(first.shape[1] if len(first.shape) > 1 else first.shape[-1])
            in_ch = float(first.shape[-1]) if main.op_type in ("MatMul", "Gemm") else in_ch
        if out is not None and out.shape:
            out_ch = float(out.shape[-1] if main.op_type in ("MatMul", "Gemm") or len(out.shape) < 2
                           else out.shape[1])
            out_el = float(np.prod(out.shape))
    bound = sum(1 for e in ests if e.bound is Bound.COMPUTE) / max(1, len(ests))
    # the dtype: the narrowest numeric element the kernel reads or writes (fp16 2, an int8 QDQ kernel 1)
    sizes = [_VALUE_BYTES[t.dtype] for n in nodes for name in (*n.inputs, *n.outputs)
             if (t := graph.tensor(name)) is not None and t.dtype in _VALUE_BYTES]
    elem_bytes = float(min(sizes, default=4))
    values = [math.log1p(sum(c.macs for c in costs)), math.log1p(sum(c.flops for c in costs)),
              math.log1p(sum(c.bytes_read_act for c in costs)), math.log1p(sum(c.bytes_read_weight for c in costs)),
              math.log1p(sum(c.bytes_written for c in costs)), math.log1p(roof), compute / roof if roof else 0.0,
              bound, float(len(rows)), kernel, stride, math.log(groups),
              float(groups > 1 and groups == in_ch), math.log(max(in_ch, 1.0)), math.log(max(out_ch, 1.0)),
              math.log1p(out_el), elem_bytes]
    return np.asarray(values, dtype=np.float64)


def roofline_us(graph: Graph, estimate: Estimate, layers: Sequence[str]) -> float:
    """The roofline time of ``layers`` (µs, at least 0.01 so that a ratio to it is defined)."""
    index = {n.id: i for i, n in enumerate(graph.layers)}
    return max(0.01, sum(estimate.layers[index[i]].latency_us for i in layers if i in index))


# ------------------------------------------------------------------------------------------ samples
@dataclass(frozen=True)
class KernelSample:
    """One timed kernel: its family, features, roofline time and measured time (µs, overhead removed)."""

    family: str
    label: str
    features: tuple[float, ...]
    roofline_us: float
    measured_us: float


@dataclass(frozen=True)
class FamilyFit:
    """A family's fitted model: how many samples, its cross-validated error (``cv_median_abs_error``: median
    of |predicted/measured - 1|; ``cv_within_10``: the share within ±10%; ``cv_folds``), and the 10th / 90th
    percentile of the cross-validated log residuals (the interval)."""

    family: str
    samples: int
    cv_median_abs_error: float
    cv_within_10: float
    cv_folds: int
    residual_low: float
    residual_high: float
    model: Ensemble

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "cv_median_abs_error": self.cv_median_abs_error,
                "cv_within_10": self.cv_within_10, "cv_folds": self.cv_folds,
                "residual_low": self.residual_low, "residual_high": self.residual_high, "model": self.model.to_json()}

    @classmethod
    def from_json(cls, family: str, data: Mapping[str, Any]) -> FamilyFit:
        try:
            return cls(family, int(data["samples"]), float(data["cv_median_abs_error"]), float(data["cv_within_10"]),
                       int(data["cv_folds"]), float(data["residual_low"]), float(data["residual_high"]),
                       Ensemble.from_json(data["model"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"predictor file: family {family!r} is malformed ({exc})") from None


@dataclass(frozen=True)
class Context:
    """What a kernel costs inside a whole model beyond its time alone: ``factor`` x its time alone +
    ``per_kernel_us`` (caches its neighbours evict, the runtime's work between kernels), fitted to ``models``
    calibration models' whole P50; ``errors``: each model's |predicted / measured - 1| under the fit (in
    sample). The identity (1, 0) when no calibration model was timed.

    ``applied``: whether predictions use it. It is applied only when it transfers: fitted on all calibration
    models but one, it predicts the one left out better than the kernels summed as timed (median over the
    models of ``held_out_errors``, with it, against ``held_out_errors_alone``, without; leave-one-model-out);
    ``why`` says what the check found. With one calibration model nothing can be held out: not applied."""

    factor: float = 1.0
    per_kernel_us: float = 0.0
    models: int = 0
    errors: tuple[float, ...] = ()
    applied: bool = True
    why: str = ""
    held_out_errors: tuple[float, ...] = ()
    held_out_errors_alone: tuple[float, ...] = ()

    def apply(self, isolated_us: float) -> float:
        """A kernel's time in its model (µs) from its time alone: the fit when :attr:`applied`, else as it is."""
        return self.factor * isolated_us + self.per_kernel_us if self.applied else isolated_us

    def describe(self) -> str:
        """One line: the fit, whether it is applied, and why."""
        if not self.models:
            return "in-model context: none (no calibration MODEL was timed whole); kernels are summed as timed"
        fit = f"x{self.factor:.3f} + {self.per_kernel_us:.2f} us per kernel from {self.models} calibration model(s)"
        if self.applied:
            return f"in-model context applied: {fit}; {self.why}"
        return f"in-model context NOT applied (kernels are summed as timed): {fit}; {self.why}"

    def to_json(self) -> dict[str, Any]:
        return {"factor": self.factor, "per_kernel_us": self.per_kernel_us, "models": self.models,
                "errors": list(self.errors), "applied": self.applied, "why": self.why,
                "held_out_errors": list(self.held_out_errors),
                "held_out_errors_alone": list(self.held_out_errors_alone)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Context:
        factor, gap = float(data["factor"]), float(data["per_kernel_us"])
        if not (math.isfinite(factor) and factor > 0 and math.isfinite(gap) and gap >= 0):
            raise ValueError(f"context factor {factor!r}, per_kernel_us {gap!r}")
        applied = data["applied"]
        if not isinstance(applied, bool):
            raise ValueError(f"context applied {applied!r}")
        return cls(factor, gap, int(data["models"]), tuple(float(e) for e in data.get("errors", ())), applied,
                   str(data.get("why", "")), tuple(float(e) for e in data.get("held_out_errors", ())),
                   tuple(float(e) for e in data.get("held_out_errors_alone", ())))


def _fit_rows(rows: Sequence[tuple[float, float, int]], overhead_us: float, with_gap: bool) -> tuple[float, float]:
    """(factor, per-kernel gap) by least squares on the relative error; the factor alone when ``with_gap`` is
    false or the gap would come out negative."""
    target = np.asarray([(m - overhead_us) / m for m, _, _ in rows])
    iso = np.asarray([p / m for m, p, _ in rows])
    count = np.asarray([n / m for m, _, n in rows], dtype=np.float64)
    factor, gap = float(np.dot(iso, target) / np.dot(iso, iso)), 0.0
    if with_gap:
        (f2, g2), *_ = np.linalg.lstsq(np.stack([iso, count], axis=1), target, rcond=None)
        if g2 >= 0 and f2 > 0:
            factor, gap = float(f2), float(g2)
    return max(factor, 1e-3), gap


def _held_out(rows: Sequence[tuple[float, float, int]], overhead_us: float, with_gap: bool) -> list[float]:
    """Each row's |predicted / measured - 1| under the context fitted to the other rows (leave-one-model-out)."""
    errors = []
    for i, (m, p, n) in enumerate(rows):
        factor, gap = _fit_rows([*rows[:i], *rows[i + 1:]], overhead_us, with_gap)
        errors.append(abs((factor * p + gap * n + overhead_us) / m - 1))
    return errors


def fit_context(rows: Sequence[tuple[float, float, int]], overhead_us: float) -> Context:
    """The :class:`Context` that best turns each calibration model's (``measured_us`` P50, ``isolated_us``: the
    sum of its kernels' predictions alone, ``kernels``: their count) into its measured P50:
    ``measured - overhead = factor * isolated + per_kernel_us * kernels``, least squares on the relative error
    (each row divided by its measured time, so that a large model does not decide alone).

    The gap is kept only where it predicts better: with at least 4 models, when its median leave-one-model-out
    relative error is below the factor alone's (a gap fitted to a few large models under a loaded machine's
    noise can be hundreds of µs, which a small model then pays hundreds of times); and never negative.

    The context is applied only when it transfers (:attr:`Context.applied`): its median leave-one-model-out
    error must be below that of the kernels summed as timed (plus the overhead) on the same models; with one
    model it is not applied. The identity with no model."""
    usable = [(m, p, n) for m, p, n in rows if m > 0 and p > 0]
    if not usable:
        return Context()
    with_gap = False
    if len(usable) >= 4:
        with_gap = float(np.median(_held_out(usable, overhead_us, True))) < float(
            np.median(_held_out(usable, overhead_us, False)))
    factor, gap = _fit_rows(usable, overhead_us, with_gap)
    fitted = tuple(abs((factor * p + gap * n + overhead_us) / m - 1) for m, p, n in usable)
    if len(usable) < 2:
        return Context(factor, gap, 1, fitted, False, "one calibration model: none is left to hold out, so nothing "
                       "shows that the context transfers to other models")
    held = tuple(_held_out(usable, overhead_us, with_gap))
    alone = tuple(abs((p + overhead_us) / m - 1) for m, p, _ in usable)
    with_it, without = float(np.median(held)), float(np.median(alone))
    applied = with_it < without
    why = (f"leave-one-model-out over {len(usable)} models: median held-out error {100 * with_it:.1f}% with it, "
           f"{100 * without:.1f}% with the kernels summed as timed" + ("" if applied else ": it does not transfer"))
    return Context(factor, gap, len(usable), fitted, applied, why, held, alone)


@dataclass(frozen=True)
class Predictor:
    """Fitted per-family models for one runtime (``runtime``: the runner's identity), the profile the roofline
    features were computed on, the per-call ``overhead_us`` a model's prediction adds once, and the in-model
    ``context`` each kernel's prediction is taken into."""

    runtime: Mapping[str, Any]
    profile: str
    overhead_us: float
    families: Mapping[str, FamilyFit]
    context: Context = Context()
    #: How the runtime grouped the calibration models' layers into kernels: used where it is not installed.
    fusion_rules: FusionRules | None = None
    #: The SHA-256 of the file it was loaded from (hex; empty for one fitted in this process): not saved.
    sha256: str = ""

    def fit_for(self, family: str) -> FamilyFit:
        """``family``'s fit, else the ``all`` fit."""
        return self.families.get(family) or self.families["all"]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "runtime": dict(self.runtime), "profile": self.profile,
                "features": list(FEATURES), "target": f"log((measured_us + {FLOOR_US}) / (roofline_us + {FLOOR_US}))",
                "overhead_us": self.overhead_us, "context": self.context.to_json(),
                "fusion_rules": self.fusion_rules.to_json() if self.fusion_rules is not None else None,
                "families": {k: v.to_json() for k, v in sorted(self.families.items())}}

    def save(self, path: Path) -> Path:
        return write_atomic(path, json.dumps(self.to_json(), sort_keys=True) + "\n")

    def check_runtime(self, runtime: Mapping[str, Any]) -> None:
        """``InputError`` (exit 2) when ``runtime`` differs from the one the predictor was trained for in any of
        :data:`RUNTIME_KEYS`."""
        diffs = [f"{k} {self.runtime.get(k)!r} (here {runtime.get(k)!r})" for k in RUNTIME_KEYS
                 if self.runtime.get(k) != runtime.get(k)]
        if diffs:
            raise InputError(f"the predictor was trained for another runtime: {'; '.join(diffs)}",
                             hint="sample and fit again on this runtime: layerscope calibrate --kernels")


def load_predictor(path: Path) -> Predictor:
    """Read a predictor file (JSON, no pickle); ``InputError`` (exit 2) when it is not one, or of another format
    version."""
    try:
        raw = Path(path).read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the predictor file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise InputError(f"{path}: not a predictor file (not JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{path}: not a layerscope predictor file")
    if data.get("version") != VERSION:
        raise InputError(f"{path}: predictor file version {data.get('version')!r}; this layerscope reads version "
                         f"{VERSION}", hint="fit it again with this layerscope: layerscope calibrate --kernels")
    if list(data.get("features", [])) != list(FEATURES):
        raise InputError(f"{path}: the predictor's features differ from this layerscope's")
    try:
        families = {str(k): FamilyFit.from_json(str(k), v) for k, v in dict(data["families"]).items()}
        runtime = dict(data["runtime"])
        rules = data.get("fusion_rules")
        predictor = Predictor(runtime, str(data["profile"]), float(data["overhead_us"]), families,
                              Context.from_json(data["context"]),
                              FusionRules.from_json(rules) if rules is not None else None,
                              hashlib.sha256(raw).hexdigest())
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: predictor file is malformed ({exc})") from None
    if "all" not in families or any(f.model.features != _width(k) for k, f in families.items()):
        raise InputError(f"{path}: predictor file is malformed (no 'all' model, or a model of the wrong width)")
    return predictor


def _width(family: str) -> int:
    return len(FEATURES) + (len(FAMILIES) if family == "all" else 0)


# ---------------------------------------------------------------------------------------------- fit
def _design(samples: Sequence[KernelSample], with_family: bool) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray([s.features for s in samples], dtype=np.float64)
    if with_family:
        onehot = np.asarray([[float(s.family == f) for f in FAMILIES] for s in samples])
        x = np.hstack([x, onehot])
    y = np.log(np.asarray([(max(s.measured_us, 0.0) + FLOOR_US) / (s.roofline_us + FLOOR_US) for s in samples]))
    return x, y


def _regressor(seed: int) -> Any:
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=150, max_depth=3, learning_rate=0.08, subsample=0.8,
                                     min_samples_leaf=2, random_state=seed)


def cross_validated(family: str, samples: Sequence[KernelSample], *, folds: int = 5, seed: int = 0,
                    ) -> tuple[np.ndarray, np.ndarray, int]:
    """``family``'s model (``"all"``: every family, with the family as features) cross-validated on
    ``samples`` (``min(folds, len(samples))`` folds, at least 2): each sample's log residual, its
    |predicted / measured - 1|, and the fold count."""
    from sklearn.model_selection import KFold

    x, y = _design(samples, family == "all")
    k = max(2, min(folds, len(samples)))
    residuals = np.zeros(len(y))
    for train, test in KFold(k, shuffle=True, random_state=seed).split(x):
        model = _regressor(seed).fit(x[train], y[train])
        residuals[test] = y[test] - model.predict(x[test])
    measured = np.asarray([s.measured_us for s in samples])
    roof = np.asarray([s.roofline_us for s in samples])
    predicted = np.maximum(0.0, (roof + FLOOR_US) * np.exp(y - residuals) - FLOOR_US)
    return residuals, np.abs(predicted / np.maximum(measured, 0.05) - 1.0), k


def fit_family(family: str, samples: Sequence[KernelSample], *, folds: int = 5, seed: int = 0) -> FamilyFit:
    """Fit ``family``'s model on ``samples`` (``"all"``: every family, with the family as features) and
    cross-validate it (:func:`cross_validated`)."""
    residuals, ratio_err, k = cross_validated(family, samples, folds=folds, seed=seed)
    x, y = _design(samples, family == "all")
    final = _regressor(seed).fit(x, y)
    return FamilyFit(family, len(samples), float(np.median(ratio_err)), float(np.mean(ratio_err <= 0.10)), k,
                     float(np.quantile(residuals, 0.1)), float(np.quantile(residuals, 0.9)), dump_gbr(final))


def fit_predictor(samples: Sequence[KernelSample], runtime: Mapping[str, Any], profile: str, overhead_us: float,
                  context: Context = Context()) -> Predictor:
    """Per-family fits for families with at least :data:`MIN_FAMILY_SAMPLES` samples, and the ``all`` fit;
    ``InputError`` when there are fewer than 4 samples in all."""
    if len(samples) < 4:
        raise InputError(f"only {len(samples)} kernel(s) were timed; a predictor needs at least 4",
                         hint="raise --budget")
    fits = {"all": fit_family("all", samples)}
    for family in FAMILIES:
        chosen = [s for s in samples if s.family == family]
        if len(chosen) >= MIN_FAMILY_SAMPLES:
            fits[family] = fit_family(family, chosen)
    return Predictor(dict(runtime), profile, overhead_us, fits, context)


# ------------------------------------------------------------------------------------------ predict
@dataclass(frozen=True)
class KernelPrediction:
    """One kernel's prediction inside its model (µs) and interval, the family model used, the source layers it
    covers, and its predicted time alone (``isolated_us``: what the kernel was timed as)."""

    kernel: str
    family: str
    layers: tuple[str, ...]
    latency_us: float
    low_us: float
    high_us: float
    roofline_us: float
    isolated_us: float = 0.0


@dataclass(frozen=True)
class ModelPrediction:
    """A model's predicted latency: kernels' sum plus ``overhead_us``, its interval, each kernel, and per layer
    (µs; a kernel's time spread over its layers by roofline share)."""

    latency_us: float
    low_us: float
    high_us: float
    overhead_us: float
    kernels: tuple[KernelPrediction, ...]
    layers_us: Mapping[str, float]
    fusion: str


def predict_kernel(predictor: Predictor, family: str, graph: Graph, estimate: Estimate,
                   layers: Sequence[str], *, name: str) -> KernelPrediction:
    """The prediction for the kernel covering ``layers`` of ``graph``."""
    fit = predictor.fit_for(family)
    x = kernel_features(graph, estimate, layers)
    if fit.family == "all":
        x = np.concatenate([x, [float(family == f) for f in FAMILIES]])
    roof = roofline_us(graph, estimate, layers)
    # an op no family holds (LSTM, contrib ops): nothing like it was timed, the roofline gives the number
    value = float(fit.model.predict(x[None, :])[0]) if family != "other" else 0.0

    def us(log_ratio: float) -> float:
        return max(0.0, (roof + FLOOR_US) * math.exp(log_ratio) - FLOOR_US)

    used = fit.family if family != "other" else "other"
    ctx = predictor.context
    return KernelPrediction(name, used, tuple(layers), ctx.apply(us(value)), ctx.apply(us(value + fit.residual_low)),
                            ctx.apply(us(value + fit.residual_high)), roof, us(value))


def predict_model(predictor: Predictor, graph: Graph, estimate: Estimate,
                  kernels: Sequence[tuple[str, str, tuple[str, ...]]], fusion: str) -> ModelPrediction:
    """Predict ``graph`` from its ``kernels`` (name, family, source layers); ``fusion`` says where the kernels
    came from (``"onnxruntime"``: its optimized graph; ``"none"``: one kernel per layer)."""
    preds = tuple(predict_kernel(predictor, fam, graph, estimate, layers, name=name) for name, fam, layers in kernels)
    index = {n.id: i for i, n in enumerate(graph.layers)}
    per_layer = {n.id: 0.0 for n in graph.layers}
    for p in preds:
        weights = [max(estimate.layers[index[i]].latency_us, 1e-9) for i in p.layers if i in index]
        total = sum(weights)
        for layer, w in zip([i for i in p.layers if i in index], weights, strict=True):
            per_layer[layer] += p.latency_us * w / total
    overhead = predictor.overhead_us
    return ModelPrediction(sum(p.latency_us for p in preds) + overhead, sum(p.low_us for p in preds) + overhead,
                           sum(p.high_us for p in preds) + overhead, overhead, preds, per_layer, fusion)


def prediction_section(pred: ModelPrediction, path: str, predictor: Predictor) -> dict[str, Any]:
    """The run file's ``predictor`` section."""
    return {"file": path, "latency_us": round(pred.latency_us, 3), "low_us": round(pred.low_us, 3),
            "high_us": round(pred.high_us, 3), "overhead_us": round(pred.overhead_us, 3), "fusion": pred.fusion,
            "runtime": dict(predictor.runtime), "profile": predictor.profile,
            "kernels": [{"kernel": k.kernel, "family": k.family, "layers": list(k.layers),
                         "latency_us": round(k.latency_us, 3), "low_us": round(k.low_us, 3),
                         "high_us": round(k.high_us, 3), "roofline_us": round(k.roofline_us, 3),
                         "isolated_us": round(k.isolated_us, 3)}
                        for k in pred.kernels],
            "context": predictor.context.to_json()}


# ------------------------------------------------------------------------------------------- glue
def samples_from_timings(timings: Sequence[KernelTiming], profile: Profile) -> list[KernelSample]:
    """Features and roofline (on ``profile``) for each timed kernel: a generated kernel's from its own model, a
    model's kernel's from the source model it came from (as it will be predicted)."""
    sources: dict[str, tuple[Graph, Estimate]] = {}
    out: list[KernelSample] = []
    with tempfile.TemporaryDirectory(prefix="layerscope-predictor-") as tmp:
        for timing in timings:
            kernel = timing.kernel
            if kernel.source:
                if kernel.source not in sources:
                    graph = load_model(kernel.source, dict(kernel.shapes))
                    sources[kernel.source] = (graph, estimate_graph(graph, profile, "fp32"))
                graph, est = sources[kernel.source]
                layers: Sequence[str] = kernel.layers
            else:
                path = Path(tmp) / f"{kernel.digest}.onnx"
                path.write_bytes(kernel.model_bytes)
                graph = load_model(path)
                est = estimate_graph(graph, profile, "fp32")
                layers = [n.id for n in graph.layers]
            features = kernel_features(graph, est, layers)
            out.append(KernelSample(kernel.family, kernel.label, tuple(float(v) for v in features),
                                    roofline_us(graph, est, layers), timing.latency_us))
    return out


def runtime_kernels(graph: Graph, config: SessionConfig, runner: KernelRunner | None = None,
                    ) -> tuple[list[tuple[str, str, tuple[str, ...]]], str]:
    """``graph``'s kernels as ``runner``'s grouping runtime (default ONNX Runtime) runs them (name, family, source
    layers) and that runtime's name; one kernel per top-level layer and ``"none"`` when it is not installed."""
    by_id = {n.id: n for n in graph.layers}
    runner = runner or OrtKernels()
    if not runner.installed():
        return [(n.id, kernel_family([n.op_type]), (n.id,)) for n in graph.layers if not n.parent], "none"
    groups = runner.groups(graph, config)
    return [(name, kernel_family([by_id[i].op_type for i in layers if i in by_id]), layers)
            for name, layers in groups], runner.grouping


def _kernel_runtime(predictor: Predictor) -> Runtime:
    """The runtime that timed the predictor's kernels (its recorded ``runner``; the default runtime for a record
    that names none able to time kernels)."""
    name = str(predictor.runtime.get("runner") or "")
    return registry.get_runtime(name if name in registry.with_capability("kernel-timing") else registry.DEFAULT)


def runtime_here(predictor: Predictor) -> tuple[dict[str, Any] | None, KernelRunner]:
    """The :data:`RUNTIME_KEYS` of the runtime installed here of the kind the predictor was trained on (``None``
    when it is not installed, or for a device command: nothing here to compare), and the runner whose grouping
    of layers into kernels the prediction uses (ONNX Runtime's for a device command): the runtime's
    :meth:`~layerscope.runtimes.base.Runtime.runtime_record`."""
    return _kernel_runtime(predictor).runtime_record(predictor.runtime)


def predict_path(predictor: Predictor, graph: Graph, estimate: Estimate, fusion: str = "auto") -> ModelPrediction:
    """Predict ``graph`` (its ``estimate`` on the predictor's profile) with kernels grouped as the predictor's
    runtime (ONNX Runtime, OpenVINO; ONNX Runtime for a device command) would run them at the predictor's thread
    count (``fusion="runtime"``; exit 3 when it is not installed), or by the fusion rules learnt at calibration
    time (``"rules"``; exit 2 when the predictor has none), or the first of these that is available (``"auto"``;
    one kernel per layer when neither is). ``InputError`` (exit 2) when the runtime of that kind here is not
    the predictor's (another version, device, thread count or optimisation level)."""
    if fusion not in FUSION_SOURCES:
        raise InputError(f"fusion source {fusion!r}: choose from {', '.join(FUSION_SOURCES)}")
    threads = int(predictor.runtime.get("threads", 1) or 1)
    config = SessionConfig(threads=threads, opt_level=str(predictor.runtime.get("opt_level") or "all"))
    here, runner = runtime_here(predictor)
    if here is not None:
        predictor.check_runtime(here)
    if fusion == "rules" or (fusion == "auto" and here is None and predictor.fusion_rules is not None
                             and not _kernel_runtime(predictor).spec.can("device-command")):
        rules = predictor.fusion_rules
        if rules is None:
            raise InputError("the predictor has no fusion rules: it was fitted without calibration models",
                             hint="calibrate --kernels MODEL... learns them from the models' runtime graphs")
        by_id = {n.id: n for n in graph.layers}
        groups = [(name, kernel_family([by_id[i].op_type for i in layers]), layers)
                  for name, layers in rules.group(graph)]
        return predict_model(predictor, graph, estimate, groups, "rules")
    kernels, source = runtime_kernels(graph, config, runner)
    if fusion == "runtime" and source == "none":
        raise BackendUnavailable(f"{runner.grouping} is not installed here: its grouping of layers into kernels "
                                 "cannot be read", hint="--fusion rules uses the rules learnt at calibration time")
    return predict_model(predictor, graph, estimate, kernels, source)


def add_prediction(run: dict[str, Any], pred: ModelPrediction, path: str, predictor: Predictor) -> None:
    """Write ``pred`` into ``run``: the ``predictor`` section, each layer's ``predicted`` {latency_us, kernel,
    family} (layers of no kernel: 0, kernel ``null``), and the ``summary``'s estimate (:func:`summary_fields`)."""
    run["predictor"] = prediction_section(pred, path, predictor)
    owner = {layer: k for k in pred.kernels for layer in k.layers}
    for layer in run.get("layers", []):
        kernel = owner.get(layer["id"])
        layer["predicted"] = {"latency_us": round(pred.layers_us.get(layer["id"], 0.0), 3),
                              "kernel": kernel.kernel if kernel else None,
                              "family": kernel.family if kernel else None}
    run["summary"] = {**run.get("summary", {}), **summary_fields(run.get("summary", {}), pred, path, predictor)}


def estimate_source(path: str, predictor: Predictor) -> str:
    """How a run names the predictor that gave its estimate: ``predictor FILE sha256:<first 12 hex>``."""
    return f"predictor {path}" + (f" sha256:{predictor.sha256[:12]}" if predictor.sha256 else "")


def summary_fields(summary: Mapping[str, Any], pred: ModelPrediction, path: str,
                   predictor: Predictor) -> dict[str, Any]:
    """The ``summary`` keys a prediction sets on a freshly estimated run (``summary``: its roofline estimate):
    ``est_latency_us`` and ``est_fps`` become the prediction's, ``est_low_us`` / ``est_high_us`` its interval,
    ``est_source`` names the predictor (:func:`estimate_source`), and the roofline's total moves to
    ``roofline_latency_us`` / ``roofline_fps``."""
    roofline = summary.get("est_latency_us")
    latency = round(pred.latency_us, 3)
    return {"est_latency_us": latency, "est_fps": round(1e6 / latency, 3) if latency > 0 else None,
            "est_low_us": round(pred.low_us, 3), "est_high_us": round(pred.high_us, 3),
            "est_source": estimate_source(path, predictor), "roofline_latency_us": roofline,
            "roofline_fps": round(1e6 / roofline, 3) if isinstance(roofline, int | float) and roofline > 0 else None}
