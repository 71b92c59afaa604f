"""Noise where numbers are read: the profiler's overhead, which reads as drift when it is negative.

A profiler only adds work, so profiled runs slower than uninstrumented ones measure its overhead; profiled runs
*faster* than them (a negative ``measurement.overhead``) measure that the machine's speed moved between the two
sets of runs, and say nothing of the profiler: that is drift, and is printed as such."""

from __future__ import annotations


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
