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
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from layerscope.errors import InputError
from layerscope.runfile.derived import ScaleFactor, k_between
from layerscope.runfile.io import as_run
from layerscope.runfile.models import RunFile

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
    runtime, or measured without an estimate).
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


def _verdict(factor: ScaleFactor, rho: float | None, overlap: float | None, median_err: float | None,
             n_layers: int) -> Verdict:
    lines: list[str] = []
    if rho is None or overlap is None:
        ranking = "unknown"
        lines.append("ranking: unknown -- no per-layer measurement to compare the estimate's order with; the "
                     "scaled shares rank hot spots only as well as the static model does")
    elif rho >= RANK_TRUSTED_RHO and overlap >= RANK_TRUSTED_OVERLAP:
        ranking = "yes"
        lines.append(f"ranking: trust it -- rank correlation {rho:.2f} over {n_layers} layers, "
                     f"{overlap:.0%} of the measured top {TOP_N} are in the estimate's top {TOP_N}")
    elif rho >= RANK_ROUGH_RHO or overlap >= RANK_ROUGH_OVERLAP:
        ranking = "roughly"
        lines.append(f"ranking: roughly -- rank correlation {rho:.2f}, top-{TOP_N} overlap {overlap:.0%}; use "
                     "the estimate to find the hot spots, measure to order them")
    else:
        ranking = "no"
        lines.append(f"ranking: do not trust it -- rank correlation {rho:.2f}, top-{TOP_N} overlap "
                     f"{overlap:.0%}; the static model misses what dominates on this device")
    k = factor.k
    if abs(k - 1) <= ABSOLUTE_RAW_TOLERANCE:
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


def reconcile_run(run: RunFile | Mapping[str, Any]) -> Reconciliation:
    """Reconcile one run, typed or its document (see :class:`Reconciliation`).

    k and the layers it counts are :func:`layerscope.runfile.scale_factor`'s (one definition for every output):
    per layer when layers carry both an estimate and a measured time (eliminated layers left out of both sums);
    else the accelerator block of a vendor import (board time over static estimate); else end to end (latency
    P50 over the summed estimate). ``InputError`` when the run has neither an estimate and a measurement of the
    same part. ``measured_on`` / ``device_mismatch`` say where the measurement came from and whether it is the
    device the estimate is for.
    """
    typed = as_run(run)
    model_name = str(typed.model.name or typed.model.path or "?")
    target_name = str(typed.target_or_empty.name or "?")
    e2e = typed.end_to_end_us
    end_to_end = None if e2e is None else ScaleFactor(*e2e)
    kf = typed.k_factor
    if kf is None:
        raise InputError(f"run of {model_name!r} has no measurement and estimate of the same part to reconcile "
                         "(profile it with `layerscope profile`, or import the board's log with the static report)")
    factor = k_between(kf.measured_us, kf.estimated_us)
    measured_on = kf.origin.label if kf.origin is not None else None
    if kf.scope == "layers":
        by_id = typed.layer_by_id
        pairs = [by_id[layer_id] for layer_id in kf.layer_ids]
        scope = f"{len(pairs)} layers both estimated and measured (sum of per-layer medians over sum of estimates)"
        comparisons = tuple(
            LayerComparison(layer.id, _or(layer.op_type), _or(layer.unit_kind), _or(layer.est.bound), est,
                            est * factor.k, meas)
            for layer in pairs
            if (est := layer.estimated_us) is not None and (meas := layer.measured_us) is not None)
        rec = _with_layers((model_name, target_name, scope), factor, end_to_end, comparisons, kf.excluded_ids)
        return replace(rec, measured_on=measured_on, device_mismatch=kf.mismatch)
    if kf.scope == "accelerator":
        existing = typed.reconcile
        scope = (existing.scope if existing is not None and existing.scope else
                 "accelerator block measured on the board over its static estimate")
    else:
        task = typed.summary.est_task_overhead_us
        scope = "end to end: latency P50 over the sum of the per-layer estimates" + (
            f" and the profile's {task / 1e3:.2f} ms per-inference task overhead" if task else "")
    verdict = _verdict(factor, None, None, None, 0)
    return Reconciliation(model_name, target_name, scope, factor, end_to_end, (), (), (), (), None, None, TOP_N,
                          None, kf.excluded_ids, verdict, measured_on, kf.mismatch)


def _with_layers(names: tuple[str, str, str], factor: ScaleFactor, end_to_end: ScaleFactor | None,
                 comparisons: tuple[LayerComparison, ...], excluded: tuple[str, ...]) -> Reconciliation:
    """A reconciliation from per-layer comparisons; ``names`` = (model, target, scope)."""
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
    verdict = _verdict(factor, rho, overlap, median_err, len(comparisons))
    return Reconciliation(model_name, target_name, scope, factor, end_to_end, comparisons,
                          _groups(comparisons, "op_type"), _groups(comparisons, "bound"),
                          _groups(comparisons, "unit_kind"), rho, overlap, TOP_N, median_err, excluded, verdict)


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
