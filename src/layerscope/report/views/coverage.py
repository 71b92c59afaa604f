"""The coverage line: the kernels' summed median times over the median profiled run, said so that a sum above
100% reads as what it is.

A profiler's per-kernel times add up to more than the run's wall time when kernels overlap (independent nodes run
in parallel, several streams) or nest (a Loop/Scan/If or TensorIterator node is timed along with the kernels of
its body): the sum then counts those times twice, and per-layer shares are of the kernel sum, not of wall time.
"""

from __future__ import annotations

#: Above this ratio the kernel sum is said to exceed the run (below it: rounding and timer granularity).
OVER_ONE = 1.005


def coverage_text(coverage: float, streams: int | None = None) -> str:
    """The coverage row: ``"97.3% of each profiled run is inside kernels"``, or above :data:`OVER_ONE` a line
    saying what the sum counts (``streams``: the runtime's stream count, named when above 1)."""
    if coverage <= OVER_ONE:
        return f"{100 * coverage:.1f}% of each profiled run is inside kernels"
    parallel = f"{streams} streams, or independent nodes run in parallel" if streams and streams > 1 else \
        "independent nodes run in parallel"
    return (f"{100 * coverage:.1f}%: the kernel times summed exceed the profiled run's wall time -- they count "
            f"overlapping kernels ({parallel}) and nested ones (a Loop/Scan/If or TensorIterator node and its "
            "body) once each; per-layer shares are of that sum, not of wall time")


def coverage_metric(coverage: float) -> tuple[str, str]:
    """The headline's (value, note) for coverage: the note says when the sum exceeds the run (see
    :func:`coverage_text`)."""
    if coverage <= OVER_ONE:
        return f"{100 * coverage:.1f}%", "of each run in kernels"
    return f"{100 * coverage:.1f}%", "kernel times summed over wall time: overlapping or nested kernels"
