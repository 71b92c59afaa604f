"""Noise where numbers are read: the profiler's overhead, which reads as drift when it is negative.

A profiler only adds work, so profiled runs slower than uninstrumented ones measure its overhead; profiled runs
*faster* than them (a negative ``measurement.overhead``) measure that the machine's speed moved between the two
sets of runs, and say nothing of the profiler: that is drift, and is printed as such.

A run whose machine moved more than the warning threshold while it was measured carries the UNSTEADY MACHINE
verdict into every report format (:func:`unsteady_text`, :func:`steadiness_verdict`)."""

from __future__ import annotations

from layerscope.runfile.derived import SteadinessLike, unsteady
from layerscope.runfile.models import Steadiness


def overhead_row(overhead: float | None, *, percentiles: str = "percentiles above") -> tuple[str, str]:
    """(label, text) of a measurement's ``overhead`` ((profiled - uninstrumented) / uninstrumented): ``overhead``
    when it is not negative, ``drift`` when it is; ``percentiles`` names the latency figures taken without the
    profiler."""
    if overhead is None:
        return "overhead", f"- run time with the profiler on ({percentiles} are without it)"
    if overhead < 0:
        return "drift", (f"the profiled runs took {100 * -overhead:.1f}% less time than the runs without the "
                         "profiler: the machine's speed moved between them (a profiler only adds time), so this is "
                         "drift, not the profiler's overhead")
    return "overhead", f"{100 * overhead:+.1f}% run time with the profiler on ({percentiles} are without it)"


def unsteady_text(steadiness: SteadinessLike | None) -> str | None:
    """The UNSTEADY MACHINE verdict of a measurement's ``steadiness`` record (:func:`unsteady`: its largest CV or
    drift past the warning threshold), ``None`` for a steady run or one without the record."""
    noise = unsteady(steadiness)
    if noise is None:
        return None
    return (f"UNSTEADY MACHINE: its speed moved {100 * noise:.0f}% during this measurement; differences below that "
            "between this run and another are noise here (use a quiet machine, --threads 1, more --runs, or compare "
            "in one process: `layerscope bench --stress`, `profile --stress` and `bisect` pair their runs).")


def steadiness_verdict(steadiness: SteadinessLike | None) -> str | None:
    """One cell for a table: ``UNSTEADY (moved 33%)`` or ``steady``; ``None`` without the record."""
    if steadiness is None or (not isinstance(steadiness, Steadiness) and not steadiness):
        return None
    noise = unsteady(steadiness)
    return f"UNSTEADY (moved {100 * noise:.0f}%)" if noise is not None else "steady"
