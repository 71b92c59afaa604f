"""Bisect view: the segments of a ``layerscope bisect`` run, their context and validation.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.report.units import human_us
from layerscope.report.views.common import Row, Run, _int, _layer_index, _map, _maps, num
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


def _bisect_note(seg: Mapping[str, Any]) -> str:
    negative, significant = bool(seg.get("negative")), bool(seg.get("significant", True))
    notes = ["negative" + ("" if significant else ", not significant") if negative else
             "" if significant else "not significant"]
    boundary, increment = num(seg.get("boundary_us")), num(seg.get("increment_us"))
    if boundary and increment is not None and abs(boundary) >= BISECT_BOUNDARY_NOTE * abs(increment + boundary):
        notes.append(f"{-boundary:+.0f} µs cut costs")
    return ", ".join(n for n in notes if n)


def _runner_text(runner: Mapping[str, Any]) -> str:
    if runner.get("runner") in ("onnxruntime", "openvino"):
        threads = runner.get("threads") or "default"
        per_visit = runner.get("runs_per_visit") or 1
        visit = "1 run" if per_visit == 1 else f"best of {per_visit} runs"
        warm = runner.get("visit_warmup") or 0
        what = "of the whole model" if runner.get("warm_with") == "whole" else "of the model itself"
        visit = f"{warm} untimed {what} + {visit}" if warm else visit
        if runner.get("runner") == "openvino":
            return (f"openvino {runner.get('version', '?')} {runner.get('device', '?')}, precision "
                    f"{runner.get('precision') or 'default'}, {runner.get('performance_hint', '?')}, threads "
                    f"{threads}, each model compiled and timed end to end, {visit} per visit")
        return (f"onnxruntime {runner.get('version', '?')} {runner.get('provider', '?')}, threads {threads}, "
                f"opt {runner.get('opt_level', '?')}, {runner.get('clock', 'wall')} clock, {visit} per visit")
    command = runner.get("run_cmd")
    if not command:
        return "device command"
    return f"{command}  [{runner['latency']}]" if runner.get("latency") else str(command)


def bisect_view(run: Run) -> BisectView | None:
    """The run's ``bisect`` section as a table and context lines; ``None`` without one."""
    section = run.get("bisect")
    if not isinstance(section, Mapping):
        return None
    segments = _maps(section.get("segments"))
    confidence = num(_map(section.get("bootstrap")).get("confidence"))
    level = round(100 * (confidence if confidence is not None else 0.95))
    increments = [v for s in segments if (v := num(s.get("increment_us"))) is not None]
    total_us = num(section.get("sum_segments_us"))
    if total_us is None:
        total_us = sum(increments)
    validation = _map(section.get("validation"))
    validated = bool(validation) or any("profile_us" in s for s in segments)
    index = _layer_index(run)
    rows: list[SegmentRow] = []
    for seg in segments:
        layers = [str(x) for x in seg.get("layers") or []]
        first = str(seg.get("first_layer", layers[0] if layers else "?"))
        last = str(seg.get("last_layer", layers[-1] if layers else first))
        increment = num(seg.get("increment_us"))
        share = num(seg.get("share"))
        if share is None and increment is not None:
            share = increment / (total_us or 1.0)
        error = num(seg.get("error"))
        judged = validated and "profile_us" in seg and (share or 0.0) >= BISECT_LARGE_SHARE
        number = num(seg.get("index"))
        rows.append(SegmentRow(
            index=int(number) if number is not None else len(rows), start=_int(seg.get("start")),
            end=_int(seg.get("end")), first_layer=first, last_layer=last,
            first_layer_index=index.get(first), layer_count=len(layers) or 1, est_us=num(seg.get("est_us")),
            increment_us=increment, ci_low_us=num(seg.get("ci_low_us")), ci_high_us=num(seg.get("ci_high_us")),
            share=share, significant=bool(seg.get("significant", True)), negative=bool(seg.get("negative")),
            note=_bisect_note(seg), profile_us=num(seg.get("profile_us")), error=error,
            flagged=judged and (error is None or abs(error) > BISECT_GOAL_ERROR),
            random_low_us=num(seg.get("random_ci_low_us")), random_high_us=num(seg.get("random_ci_high_us")),
            systematic_us=num(seg.get("systematic_us")), gap_us=num(seg.get("gap_us"))))
    statistic = str(section.get("statistic") or "median")
    title = (f"{len(rows)} segments by differential timing, {section.get('repeats', '?')} rounds ({statistic})")
    return BisectView(title, level, tuple(rows), validated, _bisect_context(section, rows, level, total_us),
                      _bisect_validation(section, rows, validation))


def _bisect_context(section: Mapping[str, Any], rows: Sequence[SegmentRow], level: int,
                    total_us: float) -> tuple[Row, ...]:
    runner = _map(section.get("runner"))
    statistic = str(section.get("statistic") or "median")
    lines: list[tuple[str, str | None]] = [("runner", _runner_text(runner) if runner else None)]
    if runner.get("compile_cmd"):
        lines.append(("compile", str(runner["compile_cmd"])))
    refined = f", refined in {section['refinements']} step(s)" if section.get("refinements") else ""
    prefixes = len(section.get("prefixes") or [])
    suffixes = len(section.get("suffixes") or [])
    models = f"{prefixes} prefixes + {suffixes} suffixes" if suffixes else f"{prefixes} prefixes"
    rounds, least = _int(section.get("repeats")), _int(section.get("repeats_min"))
    more = f" (more than {least}: a fast model)" if rounds is not None and least is not None and rounds > least else ""
    lines.append(("plan", f"{len(rows)} {section.get('granularity', 'segment')}s{refined}: {models} x "
                          f"{section.get('repeats', '?')} rounds{more} + {section.get('pilot_runs', 0)} pilot runs = "
                          f"{section.get('runs', '?')} runs (budget {section.get('budget_runs', '?')})"))
    meet = _int(section.get("meet"))
    if suffixes and meet is not None:
        after = next((r.last_layer for r in rows if r.end == meet), None)
        where = f"after {after}" if after else f"at cut {meet}"
        lines.append(("halves", f"prefixes up to the cut {where}, suffixes (the layers after a cut, fed what "
                                "crosses it) from there on: each segment is the difference of two models of at "
                                "most about half the model"))
    intervals = _map(section.get("intervals"))
    if intervals.get("systematic"):
        closure, gap = num(intervals.get("per_cut_us")), num(intervals.get("gap_per_kernel_us"))
        parts = [f"{100 * (num(intervals.get('relative')) or 0.0):.0f}% of the increment"]
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
    cache = _map(section.get("cache"))
    if cache:
        lines.append(("cache", f"{cache.get('misses', '?')} runs measured now, {cache.get('hits', '?')} reused; "
                               f"{cache.get('dir') or 'off (--no-cache)'}"))
    full, baseline = num(section.get("full_us")), num(section.get("baseline_us"))
    if full is not None:
        last = (_maps(section.get("prefixes")) or [{}])[-1]
        samples = [v for x in last.get("samples_us") or [] if (v := num(x)) is not None and v >= 0]
        spread = ""
        if samples:
            whole = summarize(samples)
            spread = f"; run-to-run CV {100 * whole.cv:.1f}%, min {human_us(whole.min_us)}"
        lines.append(("whole model", f"{human_us(full)} ({statistic} of the last prefix, the model itself{spread})"))
    if baseline is not None:
        other = num(section.get("suffix_baseline_us"))
        suffix = f"; suffixes' {human_us(other)}, fed the outputs" if other is not None else ""
        lines.append(("baseline", f"{human_us(baseline)} (a model that returns one element of each input: the fixed "
                                  f"cost per call{suffix})"))
    if full is not None:
        reference = full - (baseline or 0.0)
        if statistic in ("min", "p10") and not suffixes:
            ratio = " = whole - baseline (differences of per-prefix levels add up exactly)"
        else:
            ratio = f" = {100 * total_us / reference:.1f}% of whole - baseline" if reference > 0 else ""
        low, high = num(section.get("sum_ci_low_us")), num(section.get("sum_ci_high_us"))
        interval = f"  ({level}% CI {human_us(low)} - {human_us(high)})" if low is not None and high is not None else ""
        lines.append(("sum", f"{human_us(total_us)}{ratio}{interval}"))
    flagged = sum(1 for r in rows if r.negative or not r.significant)
    if flagged:
        lines.append(("noise", f"{flagged} segment(s) negative or not significant: add --repeats, or merge them "
                               "(fewer --segments)"))
    boundary = _map(section.get("boundary"))
    if boundary.get("corrected"):
        with_cost = boundary.get("models_with_cost", 0)
        lines.append(("cut costs", f"{with_cost} of {boundary.get('models', '?')} models convert crossing tensors out "
                                   "of or into the runtime's own layout, which the whole model does not; up to "
                                   f"{human_us(num(boundary.get('max_us')) or 0.0)}, timed by its profiler over "
                                   f"{boundary.get('runs', '?')} runs and subtracted" if with_cost else
                                   "no prefix runs layout conversions the whole model does not (checked with "
                                   "the runtime's optimized graphs)"))
    elif boundary.get("why"):
        lines.append(("cut costs", f"not corrected: {boundary['why']}"))
    corrected = "; its layout conversions are subtracted: see cut costs" if boundary.get("corrected") else ""
    lines.append(("MEASURED", "differences of whole-model timings (prefixes, suffixes): a segment's time includes "
                              "what its cut changes "
                              f"(extra outputs written back, fusions across the cut{corrected})"))
    return tuple(Row(label, value) for label, value in lines if value)


def _bisect_validation(section: Mapping[str, Any], rows: Sequence[SegmentRow],
                       validation: Mapping[str, Any]) -> tuple[Row, ...]:
    if not validation:
        return ()
    stat = BISECT_STATISTICS.get(str(section.get("statistic") or "median"), ("median", ""))[0]
    judged = [r for r in rows if r.profile_us is not None and (r.share or 0.0) >= BISECT_LARGE_SHARE]
    errors = [abs(r.error) for r in judged if r.error is not None]
    within = sum(1 for e in errors if e <= BISECT_GOAL_ERROR)
    worst = f"; worst {100 * max(errors):.1f}%" if errors else ""
    whole = num(validation.get("profile_latency_us"))
    if whole is None:
        whole = num(validation.get("profile_latency_p50_us"))
    total = num(validation.get("sum_vs_profile_latency"))
    lines: list[tuple[str, str | None]] = [
        ("reference", f"layerscope profile: {stat} over {validation.get('runs', '?')} profiled runs, taken in "
                      f"{validation.get('profiles', 1)} parts between the rounds, of each segment's kernel time in a "
                      "run"),
        ("segments", f"segments >= {100 * BISECT_LARGE_SHARE:.0f}% of the time: {within} of {len(errors)} within "
                     f"{100 * BISECT_GOAL_ERROR:.0f}% of the profile{worst}"),
        ("whole model", None if whole is None else f"{human_us(whole)} ({stat} of the profile's uninstrumented runs)"),
        ("sum vs profile", None if total is None else f"{100 * total:+.1f}% (sum of segments + baseline vs the whole "
                                                      "model timed apart)"),
    ]
    return tuple(Row(label, value) for label, value in lines if value)
