"""Reconcile a static estimate with a board measurement of the same part of a model: the scale factor k.

The board tool measures an accelerator subgraph as one block; the compiler's static report estimates
every layer of it. The workflow Horizon's engineers give (see the forum thread in the design notes):
take ``k = board time / static estimate`` for the same part of the model (e.g. the BPU subgraph:
``processor_latency.BPU_inference_time_cost`` over the static report's ``latency``), keep the static
report's per-layer *shares*, and scale them once by k, so that the per-layer figures add up to the
board's time. The result ranks hot spots; per-layer absolute values are an estimate, not a measurement.

Pure functions, no I/O; k and the scaled layers are :mod:`layerscope.runfile.derived`'s (:func:`k_between`,
:func:`scale_layers`), so an import and ``reconcile`` compute them the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from layerscope.errors import InputError
from layerscope.runfile.derived import ScaleFactor, k_between
from layerscope.runfile.models import Layer, RunFile

# ------------------------------------------------------------------------------------------------------------
# Reconciling a whole run: k for the measured part, per-layer error, rank agreement, verdict; several runs: spread.

#: Spearman rho and top-10 overlap at or above which the estimate ranks hot spots well / roughly.
RANK_TRUSTED_RHO = 0.8
RANK_TRUSTED_OVERLAP = 0.7
RANK_ROUGH_RHO = 0.5
RANK_ROUGH_OVERLAP = 0.5
#: |k - 1| within which absolute estimates are usable as they are.
ABSOLUTE_RAW_TOLERANCE = 0.10
#: Median |error| of the k-scaled per-layer estimates within which scaled absolute values are usable.
ABSOLUTE_SCALED_TOLERANCE = 0.25
#: Across runs: coefficient of variation of k (std / mean) or max/min ratio beyond which k is dispersed.
SPREAD_CV_LIMIT = 0.15
SPREAD_RATIO_LIMIT = 1.3
TOP_N = 10
#: Share of the measured time in layers whose cost the estimate does not know (``known`` false) above which the
#: ranking is at most "roughly" and absolute values are not trusted; above :data:`UNKNOWN_MOST` the estimate
#: explains less than most of the measured time and neither is trusted.
UNKNOWN_TRUST_LIMIT = 0.05
UNKNOWN_MOST = 0.5
#: Outlier layers: log(measured / estimated) above the run's median by more than this robust z (MAD-based,
#: scaled by 1.4826 to a normal's sigma), at least :data:`OUTLIER_MIN_FACTOR` times the median ratio, holding at
#: least :data:`OUTLIER_MIN_SHARE` of the measured time; needs :data:`OUTLIER_MIN_LAYERS` comparable layers.
OUTLIER_Z = 3.5
OUTLIER_MIN_FACTOR = 3.0
OUTLIER_MIN_SHARE = 0.05
OUTLIER_MIN_LAYERS = 5
#: Outlier layers holding at least this share of the measured time keep the ranking from "trust it".
OUTLIER_TRUST_LIMIT = 0.10


@dataclass(frozen=True)
class LayerComparison:
    """One layer measured and estimated: the estimate, the estimate scaled by the run's k, the measurement.

    ``error`` = (scaled - measured) / measured (``None`` when nothing was measured), so ``+0.5`` means the
    scaled estimate is 50% too high for this layer.
    """

    layer_id: str
    op_type: str
    unit_kind: str
    bound: str
    estimated_us: float
    scaled_us: float
    measured_us: float

    @property
    def error(self) -> float | None:
        return (self.scaled_us - self.measured_us) / self.measured_us if self.measured_us > 0 else None


@dataclass(frozen=True)
class Outlier:
    """A layer whose measured / estimated ratio is an outlier among the run's layers (see :data:`OUTLIER_Z`).

    ``ratio``: measured / estimated; ``median_ratio``: the run's median of that ratio; ``z``: the robust z of
    its log; ``share``: its share of the measured time of the compared layers; ``known``: whether the estimate
    has a cost for its op (``False``: it charges only a fixed overhead)."""

    layer_id: str
    op_type: str
    estimated_us: float
    measured_us: float
    ratio: float
    median_ratio: float
    z: float
    share: float
    known: bool


@dataclass(frozen=True)
class UnknownCost:
    """Measured time in layers whose cost the estimate does not know (``known`` false).

    ``share``: their measured time over the measured time of every measured layer; ``layer_ids`` slowest first;
    ``op_types``: their op types; ``k_known``: measured / estimated over the compared layers whose cost is known
    (``None`` when none is)."""

    share: float
    measured_us: float
    layer_ids: tuple[str, ...]
    op_types: tuple[str, ...]
    k_known: float | None


@dataclass(frozen=True)
class GroupK:
    """k for the layers of one group (an op type, a bound, a unit kind): measured over estimated sums."""

    name: str
    layer_count: int
    estimated_us: float
    measured_us: float

    @property
    def k(self) -> float | None:
        return self.measured_us / self.estimated_us if self.estimated_us > 0 else None


@dataclass(frozen=True)
class Verdict:
    """Whether the estimates can be trusted: ``ranking`` and ``absolute`` are ``"yes"``, ``"roughly"``,
    ``"after scaling"`` (absolute only), ``"no"`` or ``"unknown"``; ``lines`` say why, in plain words."""

    ranking: str
    absolute: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Reconciliation:
    """One run reconciled: k over the part both sides cover, and how well the estimate matches it.

    ``factor``: k for ``scope`` (the layers both estimated and measured, or the accelerator block a board tool
    timed). ``end_to_end``: end-to-end latency (P50) over the whole estimate, when the run has both. Per-layer
    figures exist only when layers were measured one by one (``layers`` empty otherwise; ``spearman`` and
    ``top_overlap`` then ``None``). ``excluded_layer_ids``: layers left out of the scope (eliminated by the
    runtime, or measured without an estimate). ``unknown_cost``: the measured time in layers whose cost the
    estimate does not know (``None`` without per-layer measurements); ``outliers``: layers whose measured /
    estimated ratio is an outlier among the run's (:func:`find_outliers`).
    """

    model_name: str
    target_name: str
    scope: str
    factor: ScaleFactor
    end_to_end: ScaleFactor | None
    layers: tuple[LayerComparison, ...]
    by_op_type: tuple[GroupK, ...]
    by_bound: tuple[GroupK, ...]
    by_unit_kind: tuple[GroupK, ...]
    spearman: float | None
    top_overlap: float | None
    top_n: int
    median_abs_error: float | None
    excluded_layer_ids: tuple[str, ...]
    verdict: Verdict
    measured_on: str | None = None
    device_mismatch: str | None = None
    unknown_cost: UnknownCost | None = None
    outliers: tuple[Outlier, ...] = ()
    #: What the estimate k divides by came from: the run's ``summary.est_source`` (the kernel predictor) when it
    #: has a prediction, else ``None`` (the roofline on the run's profile).
    estimated_source: str | None = None

    @property
    def k(self) -> float:
        return self.factor.k


@dataclass(frozen=True)
class KDriver:
    """One layer group across runs: its mean share of estimated time, its pooled k, its k in each run, and the
    Pearson correlation between its share and the run's k (``None`` with fewer than 3 runs)."""

    group: str
    mean_share: float
    pooled_k: float | None
    k_min: float | None
    k_max: float | None
    share_k_correlation: float | None


@dataclass(frozen=True)
class KSpread:
    """k over several runs or models (the forum's check: does k stay in one range across models?).

    ``dispersed`` when the coefficient of variation exceeds :data:`SPREAD_CV_LIMIT` or max/min exceeds
    :data:`SPREAD_RATIO_LIMIT`; ``drivers``: layer groups (bound, unit kind) ordered by how strongly their share
    of the estimate tracks k, then by how far their pooled k is from the overall one.
    """

    runs: tuple[tuple[str, float], ...]
    mean_k: float
    min_k: float
    max_k: float
    cv: float
    dispersed: bool
    drivers: tuple[KDriver, ...]
    lines: tuple[str, ...]


def rank(values: list[float] | tuple[float, ...]) -> list[float]:
    """1-based ranks, ties given the average of the ranks they span (as Spearman's rho needs)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def pearson(x: list[float] | tuple[float, ...], y: list[float] | tuple[float, ...]) -> float | None:
    """Pearson's r; ``None`` with fewer than 3 points or when either side is constant."""
    if len(x) != len(y) or len(x) < 3:
        return None
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(x: list[float] | tuple[float, ...], y: list[float] | tuple[float, ...]) -> float | None:
    """Spearman's rank correlation (Pearson's r of the average ranks); ``None`` below 3 points or for a
    constant side."""
    if len(x) != len(y):
        raise ValueError("spearman needs two sequences of the same length")
    return pearson(rank(list(x)), rank(list(y)))


def top_overlap(estimated: dict[str, float], measured: dict[str, float], n: int = TOP_N) -> float | None:
    """Share of the top-``n`` layers by measured time that are also in the top ``n`` by estimate (ties by id)."""
    common = sorted(set(estimated) & set(measured))
    if not common:
        return None
    n = min(n, len(common))
    top_est = set(sorted(common, key=lambda i: (-estimated[i], i))[:n])
    top_meas = set(sorted(common, key=lambda i: (-measured[i], i))[:n])
    return len(top_est & top_meas) / n


def _groups(layers: tuple[LayerComparison, ...], key: str) -> tuple[GroupK, ...]:
    sums: dict[str, list[float]] = {}
    for layer in layers:
        name = str(getattr(layer, key))
        entry = sums.setdefault(name, [0.0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += layer.estimated_us
        entry[2] += layer.measured_us
    groups = [GroupK(name, int(v[0]), v[1], v[2]) for name, v in sums.items()]
    return tuple(sorted(groups, key=lambda g: (-g.measured_us, g.name)))


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def find_outliers(rows: Sequence[tuple[str, str, float, float, bool]]) -> tuple[Outlier, ...]:
    """The outlier layers of ``rows`` = (layer id, op type, estimated µs, measured µs, cost known), slowest first.

    A layer is an outlier when its log(measured / estimated) exceeds the median over the rows with both times
    positive by more than :data:`OUTLIER_Z` robust sigmas (1.4826 x the median absolute deviation) and by a
    factor of at least :data:`OUTLIER_MIN_FACTOR`, and its measured time is at least :data:`OUTLIER_MIN_SHARE`
    of the rows' measured total. Only layers slower than the estimate count; fewer than
    :data:`OUTLIER_MIN_LAYERS` comparable rows give none."""
    usable = [r for r in rows if r[2] > 0 and r[3] > 0]
    total = sum(max(0.0, r[3]) for r in rows)
    if len(usable) < OUTLIER_MIN_LAYERS or total <= 0:
        return ()
    logs = [math.log(r[3] / r[2]) for r in usable]
    center = _median(logs)
    assert center is not None
    mad = _median([abs(v - center) for v in logs]) or 0.0
    sigma = 1.4826 * mad
    found = []
    for row, value in zip(usable, logs, strict=True):
        excess = value - center
        share = row[3] / total
        if excess < math.log(OUTLIER_MIN_FACTOR) or share < OUTLIER_MIN_SHARE:
            continue
        z = excess / sigma if sigma > 0 else math.inf
        if z > OUTLIER_Z:
            found.append(Outlier(row[0], row[1], row[2], row[3], row[3] / row[2], math.exp(center),
                                 min(z, 1e9), share, row[4]))
    return tuple(sorted(found, key=lambda o: (-o.measured_us, o.layer_id)))


def unknown_cost_of(layers: Sequence[Layer], comparisons: Sequence[LayerComparison] = ()) -> UnknownCost | None:
    """Measured time in the layers (typed run layers) whose cost is unknown; ``None`` when no layer was
    measured. ``comparisons`` give ``k_known`` (their known-cost part's measured over estimated sum)."""
    measured = [(layer, float(meas)) for layer in layers
                if (meas := layer.measured_us) is not None and not layer.eliminated and meas > 0]
    total = sum(t for _, t in measured)
    if total <= 0:
        return None
    unknown = sorted(((layer, t) for layer, t in measured if layer.known is False), key=lambda p: (-p[1], p[0].id))
    unknown_ids = {str(layer.id) for layer, _ in unknown}
    known = [c for c in comparisons if c.layer_id not in unknown_ids]
    est = sum(c.estimated_us for c in known)
    k_known = sum(c.measured_us for c in known) / est if est > 0 else None
    return UnknownCost(sum(t for _, t in unknown) / total, sum(t for _, t in unknown),
                       tuple(str(layer.id) for layer, _ in unknown),
                       tuple(sorted({str(layer.op_type) for layer, _ in unknown})), k_known)


def _ranking(rho: float | None, overlap: float | None, n_layers: int) -> tuple[str, str]:
    """The ranking verdict from rank agreement alone, and its line."""
    if rho is None or overlap is None:
        return "unknown", ("ranking: unknown -- no per-layer measurement to compare the estimate's order with; the "
                           "scaled shares rank hot spots only as well as the static model does")
    if rho >= RANK_TRUSTED_RHO and overlap >= RANK_TRUSTED_OVERLAP:
        return "yes", (f"ranking: trust it -- rank correlation {rho:.2f} over {n_layers} layers, "
                       f"{overlap:.0%} of the measured top {TOP_N} are in the estimate's top {TOP_N}")
    if rho >= RANK_ROUGH_RHO or overlap >= RANK_ROUGH_OVERLAP:
        return "roughly", (f"ranking: roughly -- rank correlation {rho:.2f}, top-{TOP_N} overlap {overlap:.0%}; use "
                           "the estimate to find the hot spots, measure to order them")
    return "no", (f"ranking: do not trust it -- rank correlation {rho:.2f}, top-{TOP_N} overlap {overlap:.0%}; the "
                  "static model misses what dominates on this device")


def _names(ids: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(f"'{i}'" for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _verdict(factor: ScaleFactor, rho: float | None, overlap: float | None, median_err: float | None,
             n_layers: int, *, unknown: UnknownCost | None = None, outliers: Sequence[Outlier] = ()) -> Verdict:
    """The verdict. Ranking: "yes" (trust it) needs Spearman >= :data:`RANK_TRUSTED_RHO`, top-N overlap >=
    :data:`RANK_TRUSTED_OVERLAP`, at most :data:`UNKNOWN_TRUST_LIMIT` of the measured time in cost-unknown layers
    and less than :data:`OUTLIER_TRUST_LIMIT` in outlier layers, else it is at most "roughly"; more than
    :data:`UNKNOWN_MOST` in cost-unknown layers (the estimate explains less than most of the measured time), or in
    outlier layers, is "no". Absolute: more than :data:`UNKNOWN_TRUST_LIMIT` in cost-unknown layers is "no" (k then
    mostly measures what the estimate leaves out)."""
    ranking, line = _ranking(rho, overlap, n_layers)
    lines = [line]
    unknown_share = unknown.share if unknown is not None else 0.0
    if unknown is not None and unknown_share > UNKNOWN_TRUST_LIMIT:
        what = (f"{unknown_share:.0%} of the measured time is in {len(unknown.layer_ids)} layer(s) whose cost the "
                f"estimate does not know ({', '.join(unknown.op_types)}: {_names(unknown.layer_ids)})")
        if unknown_share > UNKNOWN_MOST:
            ranking = "no"
            lines = [f"ranking: do not trust it -- {what}: the estimate explains less than half of the measured "
                     "time" + (f" (rank correlation {rho:.2f} is over the rest)" if rho is not None else "")]
        elif ranking == "yes":
            ranking = "roughly"
            lines = [f"ranking: roughly -- rank correlation {rho:.2f}, but {what}"]
        else:
            lines.append(f"ranking: {what}")
    slow_share = sum(o.share for o in outliers)
    if outliers and slow_share >= OUTLIER_TRUST_LIMIT:
        what = (f"{_names([o.layer_id for o in outliers])} measured {outliers[0].ratio:.0f}x "
                f"{'their' if len(outliers) > 1 else 'its'} estimate (the run's median is "
                f"{outliers[0].median_ratio:.2f}x) and hold {slow_share:.0%} of the measured time (`advise` lists "
                "candidate causes)")
        if slow_share > UNKNOWN_MOST and ranking != "no":
            ranking = "no"
            lines = [f"ranking: do not trust it -- {what}: the estimate misses what dominates on this device"]
        elif ranking == "yes":
            ranking = "roughly"
            lines = [f"ranking: roughly -- rank correlation {rho:.2f}, but {what}"]
        else:
            lines.append(f"ranking: {what}")
    k = factor.k
    if unknown is not None and unknown_share > UNKNOWN_TRUST_LIMIT:
        absolute = "no"
        known_k = "-" if unknown.k_known is None else f"{unknown.k_known:.2f}"
        lines.append(f"absolute: do not trust it -- k = {k:.2f} mostly measures the {unknown_share:.0%} of the time "
                     f"in cost-unknown layers; over the layers whose cost is known k = {known_k}")
    elif abs(k - 1) <= ABSOLUTE_RAW_TOLERANCE:
        absolute = "yes"
        lines.append(f"absolute: usable as estimated -- k = {k:.2f}, within {ABSOLUTE_RAW_TOLERANCE:.0%} of 1")
    elif median_err is None:
        absolute = "after scaling"
        lines.append(f"absolute: only after scaling by k = {k:.2f} (the estimate is {_off(k)}); per-layer "
                     "absolute values cannot be checked without per-layer measurements")
    elif median_err <= ABSOLUTE_SCALED_TOLERANCE:
        absolute = "after scaling"
        lines.append(f"absolute: usable after scaling by k = {k:.2f} (the estimate is {_off(k)}); scaled "
                     f"per-layer values are off by {median_err:.0%} (median)")
    else:
        absolute = "no"
        lines.append(f"absolute: do not trust per-layer values -- even scaled by k = {k:.2f} they are off by "
                     f"{median_err:.0%} (median); the totals scale, the layers do not")
    return Verdict(ranking, absolute, tuple(lines))


def _off(k: float) -> str:
    return f"{k:.2f}x too optimistic" if k > 1 else f"{1 / k:.2f}x too pessimistic"


def _or(value: str | None) -> str:
    return "?" if value is None else str(value)


def reconcile_run(run: RunFile) -> Reconciliation:
    """Reconcile one run (see :class:`Reconciliation`).

    k and the layers it counts are :func:`layerscope.runfile.scale_factor`'s (one definition for every output):
    per layer when layers carry both an estimate and a measured time (eliminated layers left out of both sums);
    else the accelerator block of a vendor import (board time over static estimate); else end to end (latency
    P50 over the summed estimate). ``InputError`` when the run has neither an estimate and a measurement of the
    same part. ``measured_on`` / ``device_mismatch`` say where the measurement came from and whether it is the
    device the estimate is for.
    """
    model_name = str(run.model.name or run.model.path or "?")
    target_name = str(run.target_or_empty.name or "?")
    e2e = run.end_to_end_us
    end_to_end = None if e2e is None else ScaleFactor(*e2e)
    kf = run.k_factor
    if kf is None:
        raise InputError(f"run of {model_name!r} has no measurement and estimate of the same part to reconcile "
                         "(profile it with `layerscope profile`, or import the board's log with the static report)")
    factor = k_between(kf.measured_us, kf.estimated_us)
    measured_on = kf.origin.label if kf.origin is not None else None
    source = predictor_source(run)
    if kf.scope == "layers":
        by_id = run.layer_by_id
        pairs = [by_id[layer_id] for layer_id in kf.layer_ids]
        estimates = _predicted_layers(pairs) if source is not None else None
        if estimates is not None:
            factor = k_between(kf.measured_us, sum(estimates.values()))
        what = "the kernel predictor's per-layer predictions" if estimates is not None else "estimates"
        scope = f"{len(pairs)} layers both estimated and measured (sum of per-layer medians over sum of {what})"
        comparisons = tuple(
            LayerComparison(layer.id, _or(layer.op_type), _or(layer.unit_kind), _or(layer.est.bound), est,
                            est * factor.k, meas)
            for layer in pairs
            if (est := (layer.estimated_us if estimates is None else estimates[layer.id])) is not None
            and (meas := layer.measured_us) is not None)
        known = {layer.id: layer.known is not False for layer in pairs}
        unknown = unknown_cost_of(run.layers, comparisons)
        rec = _with_layers((model_name, target_name, scope), factor, end_to_end, comparisons, kf.excluded_ids,
                           known=known, unknown=unknown)
        return replace(rec, measured_on=measured_on, device_mismatch=kf.mismatch,
                       estimated_source=source if estimates is not None else None)
    if kf.scope == "accelerator":
        existing = run.reconcile
        scope = (existing.scope if existing is not None and existing.scope else
                 "accelerator block measured on the board over its static estimate")
    elif source is not None:  # the summary's estimate is the prediction (summary.est_latency_us)
        scope = f"end to end: latency P50 over the kernel predictor's prediction ({source})"
    else:
        task = run.summary.est_task_overhead_us
        scope = "end to end: latency P50 over the sum of the per-layer estimates" + (
            f" and the profile's {task / 1e3:.2f} ms per-inference task overhead" if task else "")
    verdict = _verdict(factor, None, None, None, 0)
    return Reconciliation(model_name, target_name, scope, factor, end_to_end, (), (), (), (), None, None, TOP_N,
                          None, kf.excluded_ids, verdict, measured_on, kf.mismatch,
                          estimated_source=source if kf.scope == "end-to-end" else None)


def predictor_source(run: RunFile) -> str | None:
    """``summary.est_source`` when the run's estimate is the kernel predictor's (``estimate --predictor``), else
    ``None`` (the roofline)."""
    source = run.summary.est_source
    return source if source and source.startswith("predictor ") and run.predictor is not None else None


def _predicted_layers(layers: Sequence[Layer]) -> dict[str, float] | None:
    """Each layer's predicted time (µs) when every one of ``layers`` has one and their sum is positive, else
    ``None`` (k then falls back to the roofline estimates)."""
    out = {layer.id: float(layer.predicted.latency_us) for layer in layers
           if layer.predicted is not None and layer.predicted.latency_us is not None}
    return out if len(out) == len(layers) and sum(out.values()) > 0 else None


def _with_layers(names: tuple[str, str, str], factor: ScaleFactor, end_to_end: ScaleFactor | None,
                 comparisons: tuple[LayerComparison, ...], excluded: tuple[str, ...], *,
                 known: Mapping[str, bool] | None = None, unknown: UnknownCost | None = None) -> Reconciliation:
    """A reconciliation from per-layer comparisons; ``names`` = (model, target, scope); ``known``: whether each
    layer's cost is known (default: all); ``unknown``: the measured time in cost-unknown layers."""
    model_name, target_name, scope = names
    est = {c.layer_id: c.estimated_us for c in comparisons}
    meas = {c.layer_id: c.measured_us for c in comparisons}
    rho = spearman([c.estimated_us for c in comparisons], [c.measured_us for c in comparisons])
    overlap = top_overlap(est, meas)
    errors = [abs(e) for c in comparisons if (e := c.error) is not None and c.measured_us > 0]
    # Layers too small to matter (under 0.1% of the measured time) do not decide the median error.
    floor = 1e-3 * sum(meas.values())
    big = [abs(e) for c in comparisons if (e := c.error) is not None and c.measured_us >= floor]
    median_err = _median(big or errors)
    outliers = find_outliers([(c.layer_id, c.op_type, c.estimated_us, c.measured_us,
                               (known or {}).get(c.layer_id, True)) for c in comparisons])
    verdict = _verdict(factor, rho, overlap, median_err, len(comparisons), unknown=unknown, outliers=outliers)
    return Reconciliation(model_name, target_name, scope, factor, end_to_end, comparisons,
                          _groups(comparisons, "op_type"), _groups(comparisons, "bound"),
                          _groups(comparisons, "unit_kind"), rho, overlap, TOP_N, median_err, excluded, verdict,
                          unknown_cost=unknown, outliers=outliers)


def k_spread(recs: list[Reconciliation] | tuple[Reconciliation, ...]) -> KSpread:
    """k across runs (``InputError`` with fewer than two): its range, dispersion and what drives it."""
    if len(recs) < 2:
        raise InputError("the spread of k needs at least two runs")
    ks = [r.k for r in recs]
    mean = sum(ks) / len(ks)
    std = math.sqrt(sum((k - mean) ** 2 for k in ks) / len(ks))
    cv = std / mean if mean > 0 else 0.0
    dispersed = cv > SPREAD_CV_LIMIT or max(ks) / min(ks) > SPREAD_RATIO_LIMIT
    drivers = _drivers(recs)
    lines = [f"k ranges {min(ks):.2f}-{max(ks):.2f} over {len(ks)} runs (mean {mean:.2f}, CV {cv:.0%})"]
    if dispersed:
        lines.append("WARNING: k is dispersed -- one k does not fit these models; scaled per-layer shares still "
                     "rank hot spots within a model, but absolute values are not trustworthy")
        top = next((d for d in drivers if d.share_k_correlation is not None and abs(d.share_k_correlation) >= 0.5),
                   None)
        if top is not None:
            more = "higher" if (top.share_k_correlation or 0) > 0 else "lower"
            lines.append(f"driven by {top.group}: k is {more} in runs with more {top.group} time "
                         f"(r = {top.share_k_correlation:.2f}); its pooled k is "
                         f"{_fmt_k(top.pooled_k)} against {mean:.2f} overall")
        elif drivers:
            top = drivers[0]
            lines.append(f"largest departure: {top.group} layers, pooled k {_fmt_k(top.pooled_k)} against "
                         f"{mean:.2f} overall (k {_fmt_k(top.k_min)}-{_fmt_k(top.k_max)} across runs)")
    else:
        lines.append("k is stable across these runs: scaling the estimate's shares by one k is reasonable")
    return KSpread(tuple((r.model_name, r.k) for r in recs), mean, min(ks), max(ks), cv, dispersed, drivers,
                   tuple(lines))


def _fmt_k(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _drivers(recs: list[Reconciliation] | tuple[Reconciliation, ...]) -> tuple[KDriver, ...]:
    per_run = [r for r in recs if r.layers]
    if not per_run:
        return ()
    mean_k = sum(r.k for r in recs) / len(recs)
    drivers = []
    for prefix, attr in (("bound=", "by_bound"), ("kind=", "by_unit_kind")):
        names = sorted({g.name for r in per_run for g in getattr(r, attr)})
        for name in names:
            shares, ks, group_ks = [], [], []
            est_sum = meas_sum = 0.0
            for r in per_run:
                total = sum(g.estimated_us for g in getattr(r, attr)) or 1.0
                group = next((g for g in getattr(r, attr) if g.name == name), None)
                shares.append(group.estimated_us / total if group else 0.0)
                ks.append(r.k)
                if group is not None and group.k is not None:
                    group_ks.append(group.k)
                    est_sum += group.estimated_us
                    meas_sum += group.measured_us
            pooled = meas_sum / est_sum if est_sum > 0 else None
            drivers.append(KDriver(f"{prefix}{name}", sum(shares) / len(shares), pooled,
                                   min(group_ks) if group_ks else None, max(group_ks) if group_ks else None,
                                   pearson(shares, ks)))
    relevant = [d for d in drivers if d.mean_share >= 0.01]

    def order(d: KDriver) -> tuple[float, int, float]:
        # A strong share-k correlation first (a group that raises k before one that lowers it); otherwise the
        # group whose k departs most from the mean, weighted by its share.
        r = d.share_k_correlation if d.share_k_correlation is not None else 0.0
        departure = abs((d.pooled_k or mean_k) - mean_k) * d.mean_share
        return (-(abs(r) if abs(r) >= 0.5 else 0.0), 0 if r > 0 else 1, -departure)

    return tuple(sorted(relevant, key=order))


def reconcile_section(rec: Reconciliation, *, spread: KSpread | None = None) -> dict[str, object]:
    """The run file's ``reconcile`` section for ``rec`` (a superset of what ``layerscope import`` writes)."""
    section: dict[str, object] = {
        "method": "layerscope reconcile",
        "k": round(rec.k, 6),
        "measured_us": round(rec.factor.measured_us, 3),
        "estimated_us": round(rec.factor.estimated_us, 3),
        "scope": rec.scope,
        **({"estimated_source": rec.estimated_source} if rec.estimated_source is not None else {}),
        "measured_on": rec.measured_on,
        "device_mismatch": rec.device_mismatch,
        "end_to_end": None if rec.end_to_end is None else {
            "k": round(rec.end_to_end.k, 6), "measured_us": round(rec.end_to_end.measured_us, 3),
            "estimated_us": round(rec.end_to_end.estimated_us, 3)},
        "spearman": None if rec.spearman is None else round(rec.spearman, 6),
        "top_n": rec.top_n,
        "top_overlap": None if rec.top_overlap is None else round(rec.top_overlap, 6),
        "median_abs_error": None if rec.median_abs_error is None else round(rec.median_abs_error, 6),
        "verdict": {"ranking": rec.verdict.ranking, "absolute": rec.verdict.absolute,
                    "lines": list(rec.verdict.lines)},
        "excluded_layers": list(rec.excluded_layer_ids),
        "layers": [{"name": c.layer_id, "op_type": c.op_type, "estimated_us": round(c.estimated_us, 3),
                    "share": round(c.estimated_us / rec.factor.estimated_us, 6) if rec.factor.estimated_us else 0.0,
                    "scaled_us": round(c.scaled_us, 3), "measured_us": round(c.measured_us, 3),
                    "error": None if (e := c.error) is None else round(e, 6)} for c in rec.layers],
    }
    for key, groups in (("by_op_type", rec.by_op_type), ("by_bound", rec.by_bound),
                        ("by_unit_kind", rec.by_unit_kind)):
        section[key] = [{"name": g.name, "layers": g.layer_count, "estimated_us": round(g.estimated_us, 3),
                         "measured_us": round(g.measured_us, 3), "k": None if g.k is None else round(g.k, 6)}
                        for g in groups]
    unknown = rec.unknown_cost
    section["unknown_cost"] = None if unknown is None else {
        "share": round(unknown.share, 6), "measured_us": round(unknown.measured_us, 3),
        "layers": list(unknown.layer_ids), "op_types": list(unknown.op_types),
        "k_known": None if unknown.k_known is None else round(unknown.k_known, 6)}
    section["outliers"] = [{"name": o.layer_id, "op_type": o.op_type, "estimated_us": round(o.estimated_us, 3),
                            "measured_us": round(o.measured_us, 3), "ratio": round(o.ratio, 6),
                            "median_ratio": round(o.median_ratio, 6), "z": round(o.z, 3), "share": round(o.share, 6),
                            "known": o.known} for o in rec.outliers]
    return {**section, **({"spread": spread_section(spread)} if spread is not None else {})}


def spread_section(spread: KSpread) -> dict[str, object]:
    """k across runs as stored under ``reconcile.spread``."""
    return {
        "runs": [{"model": name, "k": round(k, 6)} for name, k in spread.runs],
        "mean_k": round(spread.mean_k, 6), "min_k": round(spread.min_k, 6), "max_k": round(spread.max_k, 6),
        "cv": round(spread.cv, 6), "dispersed": spread.dispersed,
        "drivers": [{"group": d.group, "mean_share": round(d.mean_share, 6),
                     "pooled_k": None if d.pooled_k is None else round(d.pooled_k, 6),
                     "k_min": None if d.k_min is None else round(d.k_min, 6),
                     "k_max": None if d.k_max is None else round(d.k_max, 6),
                     "share_k_correlation": None if d.share_k_correlation is None
                     else round(d.share_k_correlation, 6)} for d in spread.drivers],
        "lines": list(spread.lines),
    }
