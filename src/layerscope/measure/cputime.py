"""The CPU time of this process, for the CPU-use figures of ``bench`` and of the stress experiment.

``time.process_time`` (``CLOCK_PROCESS_CPUTIME_ID`` on Linux): user + system time of every thread, with the
clock's resolution (1 ns on Linux) instead of the 10 ms ticks of ``os.times``, which put a 50 ms measurement's
CPU use off by up to 20%. The kernel adds the time of *other* threads still running on a core when they are
next accounted (at the latest at the next scheduler tick), so a span's CPU time can exceed its true value by
up to one tick (at most 10 ms, HZ >= 100) per thread that was running when it began.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


def process_cpu_s() -> float:
    """User + system CPU time of this process, every thread, in seconds."""
    return time.process_time()


@dataclass(frozen=True)
class CpuSpan:
    """CPU time and wall time over one span; the wall span encloses the CPU readings."""

    cpu_s: float
    wall_s: float

    @property
    def cores_busy(self) -> float:
        """CPU time / wall time: how many cores were busy on average (0 for an empty span)."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


class CpuClock:
    """Start on creation, :meth:`stop` returns the :class:`CpuSpan`; wall readings enclose the CPU readings,
    so CPU time can exceed wall time x cores only by the kernel's accounting lag (see the module docstring)."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = process_cpu_s()

    def stop(self) -> CpuSpan:
        cpu = process_cpu_s() - self._cpu
        return CpuSpan(cpu_s=cpu, wall_s=time.perf_counter() - self._wall)
