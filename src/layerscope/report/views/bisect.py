"""Bisect view: the segments of a ``layerscope bisect`` run, their context and validation.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from layerscope.report.units import human_us
from layerscope.report.views.common import Row, Run, _layer_index
from layerscope.runfile.models import Bisect, BisectRunner, BisectSegment, BisectValidation
from layerscope.stats import summarize

#: A bisect's statistic -> (what it takes of a set of runs, how an increment is made of it).
BISECT_STATISTICS: Mapping[str, tuple[str, str]] = {
    "median": ("median", "median of the paired differences of neighbouring models"),
    "p10": ("10th percentile", "p10: difference of the neighbouring models' 10th-percentile rounds"),
    "min": ("minimum", "min: difference of the neighbouring models' fastest rounds"),
}
#: Validation of a bisect: segments with at least this share of the time are judged.
BISECT_LARGE_SHARE = 0.05
#: ... and should be within this relative error of the kernel profile.
BISECT_GOAL_ERROR = 0.15
#: A segment's note names the boundary correction when it is at least this share of the increment as timed.
BISECT_BOUNDARY_NOTE = 0.05


# ------------------------------------------------------------------------------------------- bisect


@dataclass(frozen=True)
class SegmentRow:
    """One bisect segment: its layers, estimate, increment with interval, share of the increments, and (with
    ``--validate``) the kernel profile's time and the relative error; ``flagged``: judged and off the goal."""

    index: int
    start: int | None
    end: int | None
    first_layer: str
    last_layer: str
    first_layer_index: int | None
    layer_count: int
    est_us: float | None
    increment_us: float | None
    ci_low_us: float | None
    ci_high_us: float | None
    share: float | None
    significant: bool
    negative: bool
    note: str
    profile_us: float | None
    error: float | None
    flagged: bool
    #: The interval's parts: the bootstrap's (round to round) and the systematic half-width and gap between
    #: kernels (``ci_low_us`` / ``ci_high_us`` are both together; ``None``: the run states no systematic part).
    random_low_us: float | None = None
    random_high_us: float | None = None
    systematic_us: float | None = None
    gap_us: float | None = None

    @property
    def layer_span(self) -> str:
        """Layer positions ``start-last`` (``start`` alone for one layer; ``?`` when the run lacks them)."""
        if self.start is None or self.end is None:
            return "?"
        return str(self.start) if self.end - self.start <= 1 else f"{self.start}-{self.end - 1}"


@dataclass(frozen=True)
class BisectView:
    """The ``bisect`` section: the segment table and its context (the terminal's ``segment_table``,
    ``bisect_context`` and ``validation_report``)."""

    title: str
    confidence_pct: int
    segments: tuple[SegmentRow, ...]
    validated: bool
    context: tuple[Row, ...]
    validation: tuple[Row, ...]


def _bisect_note(seg: BisectSegment) -> str:
    negative, significant = bool(seg.negative), seg.significant is not False
    notes = ["negative" + ("" if significant else ", not significant") if negative else
             "" if significant else "not significant"]
    boundary, increment = seg.boundary_us, seg.increment_us
    if boundary and increment is not None and abs(boundary) >= BISECT_BOUNDARY_NOTE * abs(increment + boundary):
        notes.append(f"{-boundary:+.0f} µs cut costs")
    return ", ".join(n for n in notes if n)


#: What a bisect runner's untimed runs at a visit run, by its ``warm_with`` (else: the model itself).
_WARMED_BY = {"whole": "of the whole model",
              "loop": "of the model itself (a suffix's then 1 of the layers before it)"}


def _runner_text(runner: BisectRunner) -> str:
    if runner.runner is not None and runner.run_cmd is None:  # a runtime in this process
        threads = runner.threads or "default"
        per_visit = runner.runs_per_visit or 1
        visit = "1 run" if per_visit == 1 else f"best of {per_visit} runs"
        warm = runner.visit_warmup or 0
        what = _WARMED_BY.get(runner.warm_with or "", "of the model itself")
        visit = f"{warm} untimed {what} + {visit}" if warm else visit
        every = runner.recompile_every
        if runner.device is not None:  # a compiling runtime: the device, precision and hint it compiled for
            fresh = f", compiled afresh every {every} visits" if every else ""
            return (f"{runner.runner} {_or(runner.version)} {_or(runner.device)}, precision "
                    f"{runner.precision or 'default'}, {_or(runner.performance_hint)}, threads "
                    f"{threads}, each model compiled and timed end to end{fresh}, {visit} per visit")
        fresh = f", a fresh session every {every} visits" if every else ""
        return (f"{runner.runner} {_or(runner.version)} {_or(runner.provider)}, threads {threads}, "
                f"opt {_or(runner.opt_level)}, {runner.clock or 'wall'} clock{fresh}, {visit} per visit")
    command = runner.run_cmd
    if not command:
        return "device command"
    return f"{command}  [{runner.latency}]" if runner.latency else command


def _or(value: object, missing: str = "?") -> str:
    """``value`` as text, ``missing`` when the run does not hold it."""
    return missing if value is None else str(value)


def bisect_view(run: Run) -> BisectView | None:
    """The run's ``bisect`` section as a table and context lines; ``None`` without one."""
    section = run.bisect
    if section is None:
        return None
    segments = section.segments
    confidence = section.bootstrap.confidence if section.bootstrap is not None else None
    level = round(100 * (confidence if confidence is not None else 0.95))
    increments = [s.increment_us for s in segments if s.increment_us is not None]
    total_us = section.sum_segments_us
    if total_us is None:
        total_us = sum(increments)
    validation = section.validation
    validated = validation is not None or any(s.profile_us is not None for s in segments)
    index = _layer_index(run)
    rows: list[SegmentRow] = []
    for seg in segments:
        layers = seg.layers
        first = seg.first_layer if seg.first_layer is not None else layers[0] if layers else "?"
        last = seg.last_layer if seg.last_layer is not None else layers[-1] if layers else first
        increment = seg.increment_us
        share = seg.share
        if share is None and increment is not None:
            share = increment / (total_us or 1.0)
        error = seg.error
        judged = validated and seg.profile_us is not None and (share or 0.0) >= BISECT_LARGE_SHARE
        rows.append(SegmentRow(
            index=seg.index if seg.index is not None else len(rows), start=seg.start, end=seg.end,
            first_layer=first, last_layer=last, first_layer_index=index.get(first), layer_count=len(layers) or 1,
            est_us=seg.est_us, increment_us=increment, ci_low_us=seg.ci_low_us, ci_high_us=seg.ci_high_us,
            share=share, significant=seg.significant is not False, negative=bool(seg.negative),
            note=_bisect_note(seg), profile_us=seg.profile_us, error=error,
            flagged=judged and (error is None or abs(error) > BISECT_GOAL_ERROR),
            random_low_us=seg.random_ci_low_us, random_high_us=seg.random_ci_high_us,
            systematic_us=seg.systematic_us, gap_us=seg.gap_us))
    statistic = section.statistic or "median"
    title = f"{len(rows)} segments by differential timing, {_or(section.repeats)} rounds ({statistic})"
    return BisectView(title, level, tuple(rows), validated, _bisect_context(section, rows, level, total_us),
                      _bisect_validation(section, rows, validation))


def more_rounds(section: Bisect) -> str:
    """Why the bisect took more rounds than ``repeats_min``: a fast model, segments' intervals too wide, or both."""
    rounds, least, start = section.repeats, section.repeats_min, section.resolve_from
    if rounds is None or least is None or rounds <= least:
        return ""
    reasons = []
    if start is None or start > least:
        reasons.append("a fast model")
    first, last = section.resolve_from_widest, section.resolve_widest
    if start is not None and start < rounds and first is not None and last is not None:
        share = f"{section.resolve_share:.0%}" if section.resolve_share else "a large share"
        wanted = f" (--max-ci {section.max_ci:g})" if section.max_ci else ""
        reasons.append(f"at {start} rounds a segment of {share} of the time or more had a 95% interval of "
                       f"±{first:.0%}{wanted}, the widest ±{last:.0%} now")
    return f" (more than {least}: {'; '.join(reasons)})"


def _bisect_context(section: Bisect, rows: Sequence[SegmentRow], level: int, total_us: float) -> tuple[Row, ...]:
    runner = section.runner
    statistic = section.statistic or "median"
    lines: list[tuple[str, str | None]] = [("runner", _runner_text(runner) if runner is not None else None)]
    if runner is not None and runner.compile_cmd:
        lines.append(("compile", runner.compile_cmd))
    refined = f", refined in {section.refinements} step(s)" if section.refinements else ""
    prefixes, suffixes = len(section.prefixes), len(section.suffixes)
    models = f"{prefixes} prefixes + {suffixes} suffixes" if suffixes else f"{prefixes} prefixes"
    lines.append(("plan", f"{len(rows)} {section.granularity or 'segment'}s{refined}: {models} x "
                          f"{_or(section.repeats)} rounds{more_rounds(section)} + {section.pilot_runs or 0} pilot "
                          "runs = "
                          f"{_or(section.runs)} runs (budget {_or(section.budget_runs)})"))
    meet = section.meet
    if suffixes and meet is not None:
        after = next((r.last_layer for r in rows if r.end == meet), None)
        where = f"after {after}" if after else f"at cut {meet}"
        lines.append(("halves", f"prefixes up to the cut {where}, suffixes (the layers after a cut, fed what "
                                "crosses it) from there on: each segment is the difference of two models of at "
                                "most about half the model"))
    intervals = section.intervals
    if intervals is not None and intervals.systematic:
        closure, gap = intervals.per_cut_us, intervals.gap_per_kernel_us
        parts = [f"{100 * (intervals.relative or 0.0):.0f}% of the increment"]
        if closure is not None:
            parts.append(f"{human_us(closure)} per cut (half the prefixes' and suffixes' closure)")
        parts.append("half the cut-cost correction")
        if gap is not None:
            parts.append(f"below, {human_us(gap)} between kernels per kernel (a kernel profile does not count it)")
        how = (f"; {level}% intervals: the bootstrap over the rounds (random) widened by a systematic part: "
               + ", ".join(parts))
    else:
        how = f"; {level}% bootstrap intervals over the rounds"
    lines.append(("statistic", BISECT_STATISTICS.get(statistic, (statistic, statistic))[1] + how))
    cache = section.cache
    if cache is not None:
        lines.append(("cache", f"{_or(cache.misses)} runs measured now, {_or(cache.hits)} reused; "
                               f"{cache.dir or 'off (--no-cache)'}"))
    full, baseline = section.full_us, section.baseline_us
    if full is not None:
        samples = list(section.prefixes[-1].samples_us) if section.prefixes else []
        spread = ""
        if samples:
            whole = summarize(samples)
            spread = f"; run-to-run CV {100 * whole.cv:.1f}%, min {human_us(whole.min_us)}"
        lines.append(("whole model", f"{human_us(full)} ({statistic} of the last prefix, the model itself{spread})"))
    if baseline is not None:
        other = section.suffix_baseline_us
        suffix = f"; suffixes' {human_us(other)}, fed the outputs" if other is not None else ""
        lines.append(("baseline", f"{human_us(baseline)} (a model that returns one element of each input: the fixed "
                                  f"cost per call{suffix})"))
    if full is not None:
        reference = full - (baseline or 0.0)
        if statistic in ("min", "p10") and not suffixes:
            ratio = " = whole - baseline (differences of per-prefix levels add up exactly)"
        else:
            ratio = f" = {100 * total_us / reference:.1f}% of whole - baseline" if reference > 0 else ""
        low, high = section.sum_ci_low_us, section.sum_ci_high_us
        interval = f"  ({level}% CI {human_us(low)} - {human_us(high)})" if low is not None and high is not None else ""
        lines.append(("sum", f"{human_us(total_us)}{ratio}{interval}"))
    flagged = sum(1 for r in rows if r.negative or not r.significant)
    if flagged:
        lines.append(("noise", f"{flagged} segment(s) negative or not significant: add --repeats, or merge them "
                               "(fewer --segments)"))
    boundary = section.boundary
    corrected = boundary is not None and bool(boundary.corrected)
    if boundary is not None and corrected:
        with_cost = boundary.models_with_cost or 0
        lines.append(("cut costs", f"{with_cost} of {_or(boundary.models)} models convert crossing tensors out of "
                                   "or into the runtime's own layout, which the whole model does not; up to "
                                   f"{human_us(boundary.max_us or 0.0)}, timed by its profiler over "
                                   f"{_or(boundary.runs)} runs and subtracted" if with_cost else
                                   "no prefix runs layout conversions the whole model does not (checked with "
                                   "the runtime's optimized graphs)"))
    elif boundary is not None and boundary.why:
        lines.append(("cut costs", f"not corrected: {boundary.why}"))
    if boundary is not None and boundary.dropped:
        cuts = ", ".join(f"cut {_or(d.layers)} ({human_us(d.cost_us or 0.0)}"
                         + (f", {100 * d.share:.0f}%)" if d.share is not None else ")") for d in boundary.dropped)
        lines.append(("cuts dropped", f"{len(boundary.dropped)} cut(s) each cost more than "
                                      f"{100 * (boundary.max_share or 0.0):.0f}% of the smaller segment beside it, so "
                                      f"the two segments beside each are reported as one: {cuts} (cut k is after "
                                      "the first k layers)"))
    how = "; its layout conversions are subtracted: see cut costs" if corrected else ""
    lines.append(("MEASURED", "differences of whole-model timings (prefixes, suffixes): a segment's time includes "
                              "what its cut changes "
                              f"(extra outputs written back, fusions across the cut{how})"))
    return tuple(Row(label, value) for label, value in lines if value)


def _bisect_validation(section: Bisect, rows: Sequence[SegmentRow],
                       validation: BisectValidation | None) -> tuple[Row, ...]:
    if validation is None:
        return ()
    stat = BISECT_STATISTICS.get(section.statistic or "median", ("median", ""))[0]
    judged = [r for r in rows if r.profile_us is not None and (r.share or 0.0) >= BISECT_LARGE_SHARE]
    errors = [abs(r.error) for r in judged if r.error is not None]
    within = sum(1 for e in errors if e <= BISECT_GOAL_ERROR)
    worst = f"; worst {100 * max(errors):.1f}%" if errors else ""
    whole = validation.profile_latency_us
    if whole is None:
        whole = validation.profile_latency_p50_us
    total = validation.sum_vs_profile_latency
    parts = validation.profiles if validation.profiles is not None else 1
    lines: list[tuple[str, str | None]] = [
        ("reference", f"layerscope profile: {stat} over {_or(validation.runs)} profiled runs, taken in {parts} parts "
                      "between the rounds, of each segment's kernel time in a run"),
        ("segments", f"segments >= {100 * BISECT_LARGE_SHARE:.0f}% of the time: {within} of {len(errors)} within "
                     f"{100 * BISECT_GOAL_ERROR:.0f}% of the profile{worst}"),
        ("whole model", None if whole is None else f"{human_us(whole)} ({stat} of the profile's uninstrumented runs)"),
        ("sum vs profile", None if total is None else f"{100 * total:+.1f}% (sum of segments + baseline vs the whole "
                                                      "model timed apart)"),
    ]
    return tuple(Row(label, value) for label, value in lines if value)
