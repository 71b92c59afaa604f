"""The memory-contention experiment: measure a model with and without background processes streaming memory.

On an SoC the accelerator shares DDR with the CPU; on a PC the cores share the last-level cache and the memory
controller. Re-running under memory stress shows which layers suffer (the RDK forum's advice: measure, then
measure again under ``stressapptest``). Contract:

- :class:`MemoryStress` starts ``processes`` background processes (``multiprocessing``, *spawn*: a fresh
  interpreter that imports only numpy and this module, never a copy of a process running ONNX Runtime's
  threads; as with any spawn, a script using it guards its entry point with ``if __name__ == "__main__":``).
  Each allocates two arrays of ``buffer_bytes`` (by default 4x the last-level cache, at least 64 MiB, at most
  1 GiB) and copies one into the other. ``__enter__`` returns once every process is streaming (or raises
  ``BackendUnavailable`` when one dies or ``start_timeout_s`` passes); :meth:`~MemoryStress.pause` and
  :meth:`~MemoryStress.resume` return once every process has stopped / started copying; ``__exit__`` stops
  them, on an exception or Ctrl-C as well: stop flag, then ``terminate``, then ``kill``, each after a short
  wait. The processes ignore Ctrl-C themselves (the parent stops them) and are bounded in time on their own:
  each exits after ``max_duration_s`` or as soon as its parent is gone, so none outlives a killed parent by
  more than one copy;
- :func:`paired_rounds` measures in ``rounds`` pairs (baseline, stressed) with the same processes, paused for
  the baselines, in the order A B | B A | A B ...: a change of the machine's load during the experiment (other
  processes on a shared machine) then shows as a spread between rounds instead of passing for a stress effect,
  and a steady drift cancels in the median of the paired ratios. Each measurement records how busy this
  process kept the CPU (:class:`Timed`): when that drops under stress by more than ``OFF_CPU_DROP``, the model
  was waiting for a core and the round is *contended* (the stress processes plus other load outnumbered the
  cores): its slowdown is not memory alone, and it is left out of the per-layer verdict;
- :class:`StressReport` says what ran: the memory traffic the processes generated while streaming (each copied
  byte is read once and written once: traffic = 2 x bytes copied / streaming time), the machine's 1-minute load
  average when the stress started (this process included) and whether a process stopped before it was told
  to (``expired``: the experiment outlasted ``max_duration_s``, or a process died);
- :func:`compare_layers` rates each layer measured in every round: ``ratio`` = the median over the rounds of
  stressed median / baseline median, ``min_ratio`` the smallest. A layer is **memory-sensitive** when it is
  large enough to measure (at least ``MIN_SHARE`` of the baseline layer total), is slower under stress in every
  round, slows down by at least ``MIN_GROWTH`` at the median, and more than the model as a whole (the median
  ratio of the layer totals); at most ``MAX_SENSITIVE`` layers, those with the highest ratios, are marked.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from layerscope.errors import BackendUnavailable, InputError
from layerscope.measure.cputime import CpuClock
from layerscope.stats import LatencyStats

if TYPE_CHECKING:
    from layerscope.measure.profile import Measurement
    from layerscope.runfile.models import RunFile, Stress

__all__ = ["MAX_SENSITIVE", "MIN_GROWTH", "MIN_SHARE", "OFF_CPU_DROP", "LayerComparison", "LayerStress",
           "MemoryStress", "PairedRounds", "StressReport", "StressSpec", "Timed", "add_layer_stress", "add_stress",
           "compare_layers", "contended", "default_buffer_bytes", "last_level_cache_bytes", "layer_medians",
           "paired_rounds", "parse_stress", "stress_section"]

T = TypeVar("T")

MIN_SHARE: Final = 0.005
MIN_GROWTH: Final = 0.10
MAX_SENSITIVE: Final = 10
#: A round in which this process keeps the CPU busy this much less under stress than without is contended.
OFF_CPU_DROP: Final = 0.10
DEFAULT_ROUNDS: Final = 3
DEFAULT_MAX_DURATION_S: Final = 900.0
_MIB: Final = 1 << 20
_POLL_S: Final = 0.005
_SWITCH_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class StressSpec:
    """``processes`` memory streamers of ``buffer_bytes`` each (None: the default), over ``rounds`` pairs."""

    processes: int = 1
    buffer_bytes: int | None = None
    rounds: int = DEFAULT_ROUNDS
    max_duration_s: float = DEFAULT_MAX_DURATION_S
    start_timeout_s: float = 60.0
    kind: str = "memory"

    def __post_init__(self) -> None:
        if self.processes < 1 or self.rounds < 1:
            raise ValueError(f"StressSpec: processes and rounds must be >= 1, got {self.processes}, {self.rounds}")
        if self.buffer_bytes is not None and self.buffer_bytes < 1:
            raise ValueError(f"StressSpec: buffer_bytes must be >= 1, got {self.buffer_bytes}")
        if not self.max_duration_s > 0:
            raise ValueError(f"StressSpec: max_duration_s must be > 0, got {self.max_duration_s}")


def parse_stress(text: str) -> StressSpec:
    """``memory`` or ``memory:N`` (N background processes, default 1); anything else is an ``InputError``."""
    kind, _, count = text.strip().partition(":")
    if kind != "memory":
        raise InputError(f"unknown stress {kind!r} in {text!r}; expected memory or memory:N")
    if not count:
        return StressSpec()
    if not count.isdigit() or int(count) < 1:
        raise InputError(f"N must be a whole number >= 1 in {text!r}, e.g. memory:2")
    return StressSpec(processes=int(count))


def last_level_cache_bytes() -> int | None:
    """Size of the largest CPU cache the OS reports (Linux sysfs), or ``None``."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = entry.read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": _MIB, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KkMmGg")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def default_buffer_bytes() -> int:
    """4x the last-level cache (32 MiB assumed when unknown), within [64 MiB, 1 GiB]."""
    return min(1 << 30, max(64 * _MIB, 4 * (last_level_cache_bytes() or 32 * _MIB)))


# --- the background processes -----------------------------------------------------------------------------------

#: Slots of each process's shared state: bytes copied so far, 1 while it is copying.
_COPIED, _STREAMING = 0, 1


def _stream_memory(*, buffer_bytes: int, stop: Any, go: Any, ready: Any, state: Any, max_duration_s: float,
                   parent: int) -> None:
    """A background process: copy one large array into another while ``go`` is set, until stopped, expired or
    orphaned."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us; Ctrl-C must not print a traceback here
    import numpy as np

    source = np.ones(max(1, buffer_bytes // 8), dtype=np.float64)
    target = np.zeros_like(source)  # both arrays are touched now, not during the measurement
    deadline = time.monotonic() + max_duration_s
    ready.release()
    while not stop.is_set() and time.monotonic() < deadline and os.getppid() == parent:
        if not go.is_set():
            state[_STREAMING] = 0
            go.wait(0.05)
            continue
        state[_STREAMING] = 1
        np.copyto(target, source)
        state[_COPIED] += source.nbytes
    state[_STREAMING] = 0


@dataclass(frozen=True)
class StressReport:
    """What the background processes did: copies while streaming, and whether one stopped on its own."""

    processes: int
    buffer_bytes: int
    streaming_s: float
    copied_bytes: int
    expired: bool
    load_average_1min: float | None = None

    @property
    def traffic_bytes_per_s(self) -> float:
        """Memory traffic generated while streaming: every copied byte read once and written once."""
        return 2 * self.copied_bytes / self.streaming_s if self.streaming_s > 0 else 0.0


class MemoryStress:
    """Background memory streamers for the length of a ``with`` block. See the module docstring."""

    def __init__(self, spec: StressSpec | None = None) -> None:
        self.spec = spec or StressSpec()
        self.buffer_bytes = self.spec.buffer_bytes or default_buffer_bytes()
        self._context = multiprocessing.get_context("spawn")
        self._stop = self._context.Event()
        self._go = self._context.Event()
        self._processes: list[Any] = []
        self._states: list[Any] = []
        self._load: float | None = None
        self._streaming_s = 0.0
        self._since: float | None = None
        self._expired = False
        self.report: StressReport | None = None

    def __enter__(self) -> MemoryStress:
        self._load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        ready = self._context.Semaphore(0)
        self._go.set()
        try:
            for index in range(self.spec.processes):
                state = self._context.Array("Q", 2, lock=False)
                process = self._context.Process(
                    target=_stream_memory, name=f"layerscope-stress-{index}", daemon=True,
                    kwargs={"buffer_bytes": self.buffer_bytes, "stop": self._stop, "go": self._go, "ready": ready,
                            "state": state, "max_duration_s": self.spec.max_duration_s, "parent": os.getpid()})
                process.start()
                self._processes.append(process)
                self._states.append(state)
            self._wait_ready(ready)
            self._wait_streaming(1)
        except BaseException:
            self.stop()
            raise
        self._since = time.perf_counter()
        return self

    def _wait_ready(self, ready: Any) -> None:
        deadline = time.monotonic() + self.spec.start_timeout_s
        for _ in self._processes:
            while not ready.acquire(timeout=0.1):
                dead = [p for p in self._processes if not p.is_alive()]
                if dead:
                    raise BackendUnavailable(
                        f"memory stress: a background process exited with code {dead[0].exitcode} while starting",
                        hint="a script that uses MemoryStress must guard its entry point with "
                             "`if __name__ == '__main__':` (multiprocessing spawn); or free memory")
                if time.monotonic() > deadline:
                    raise BackendUnavailable(
                        f"memory stress: {self.spec.processes} background process(es) did not start streaming "
                        f"within {self.spec.start_timeout_s:g} s (buffer {self.buffer_bytes / _MIB:.0f} MiB each)",
                        hint="free memory or use fewer processes")

    def _wait_streaming(self, flag: int) -> None:
        """Until every live process has its streaming flag at ``flag`` (a process that died counts as expired)."""
        deadline = time.monotonic() + _SWITCH_TIMEOUT_S
        while time.monotonic() < deadline:
            alive = [(p, s) for p, s in zip(self._processes, self._states, strict=True) if p.is_alive()]
            self._expired = self._expired or len(alive) < len(self._processes)
            if all(s[_STREAMING] == flag for _, s in alive):
                return
            time.sleep(_POLL_S)
        self._expired = True  # a process that neither starts nor stops copying is not doing what we report

    def pause(self) -> None:
        """Stop copying (the processes stay, their arrays allocated); returns when every process is idle."""
        self._go.clear()
        self._wait_streaming(0)
        if self._since is not None:
            self._streaming_s += time.perf_counter() - self._since
            self._since = None

    def resume(self) -> None:
        """Copy again; returns when every process is copying."""
        self._go.set()
        self._wait_streaming(1)
        if self._since is None:
            self._since = time.perf_counter()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def running(self) -> int:
        """Background processes alive now."""
        return sum(1 for p in self._processes if p.is_alive())

    def stop(self) -> StressReport:
        """Stop every process (idempotent) and return the :class:`StressReport`."""
        if self.report is not None:
            return self.report
        if self._since is not None:
            self._streaming_s += time.perf_counter() - self._since
            self._since = None
        expired = self._expired or (self._streaming_s > 0 and self.running < len(self._processes))
        self._stop.set()
        self._go.set()  # wake idle processes so they see the stop flag
        for process in self._processes:
            process.join(timeout=5.0)
            if process.is_alive():
                process.terminate()
                process.join(timeout=2.0)
            if process.is_alive():
                process.kill()
                process.join()
        self.report = StressReport(processes=len(self._processes), buffer_bytes=self.buffer_bytes,
                                   streaming_s=self._streaming_s,
                                   copied_bytes=sum(int(s[_COPIED]) for s in self._states),
                                   expired=expired, load_average_1min=self._load)
        return self.report


@dataclass(frozen=True)
class Timed(Generic[T]):
    """One measurement of the experiment and how busy this process kept the CPU meanwhile.

    ``cores_busy`` = this process's CPU time / wall time over the measurement (:mod:`~layerscope.measure.cputime`):
    a model on one intra-op thread that is never pre-empted keeps it near 1. Waiting for memory still counts as
    CPU time, so a drop under stress means the model was off the CPU -- contention for cores, not for memory.
    """

    result: T
    cores_busy: float


@dataclass(frozen=True)
class PairedRounds(Generic[T]):
    """The (baseline, stressed) pairs of :func:`paired_rounds` and what the stress processes did."""

    pairs: tuple[tuple[Timed[T], Timed[T]], ...]
    report: StressReport

    def results(self) -> list[tuple[T, T]]:
        """The pairs without the CPU figures."""
        return [(before.result, after.result) for before, after in self.pairs]

    def cut_short(self, spec: StressSpec, interrupted: Callable[[T], bool]) -> bool:
        """Whether fewer rounds than planned completed, or a measurement of them was interrupted."""
        return len(self.pairs) < spec.rounds or any(interrupted(m) for pair in self.results() for m in pair)


def _timed(measure: Callable[[bool, int], T], stressed: bool, index: int) -> Timed[T]:
    clock = CpuClock()
    result = measure(stressed, index)
    return Timed(result, clock.stop().cores_busy)


def contended(baseline: Timed[Any], stressed: Timed[Any]) -> bool:
    """Whether this process kept the CPU busy markedly less (by more than ``OFF_CPU_DROP``) under stress: the
    model waited for a core, and the slowdown of that round is not memory contention alone."""
    return stressed.cores_busy < (1.0 - OFF_CPU_DROP) * baseline.cores_busy


def paired_rounds(measure: Callable[[bool, int], T], spec: StressSpec, *,
                  interrupted: Callable[[T], bool] = lambda _: False) -> PairedRounds[T]:
    """``spec.rounds`` pairs (baseline, stressed), each made by ``measure(stressed, round)`` in the order
    A B | B A | A B ... (see the module docstring). A result that is ``interrupted`` ends the experiment: the
    rounds complete by then are kept, that one's included when it completes its pair; Ctrl-C inside
    ``measure`` ends it the same way, without that measurement. Fewer pairs than ``spec.rounds`` means the
    experiment was cut short."""
    pairs: list[tuple[Timed[T], Timed[T]]] = []
    with MemoryStress(spec) as stress:
        for index in range(spec.rounds):
            got: dict[bool, Timed[T]] = {}
            for stressed in (True, False) if index % 2 else (False, True):
                if stressed:
                    stress.resume()
                else:
                    stress.pause()
                try:
                    got[stressed] = timed = _timed(measure, stressed, index)
                except KeyboardInterrupt:
                    return PairedRounds(tuple(pairs), stress.stop())
                if interrupted(timed.result):
                    if len(got) == 2:
                        pairs.append((got[False], got[True]))
                    return PairedRounds(tuple(pairs), stress.stop())
            pairs.append((got[False], got[True]))
    return PairedRounds(tuple(pairs), stress.stop())


# --- the comparison ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerStress:
    """One layer over the rounds: median baseline and stressed times (µs) and the paired ratios."""

    layer_id: str
    baseline_us: float
    stressed_us: float
    ratio: float
    min_ratio: float
    sensitive: bool

    @property
    def added_us(self) -> float:
        """Stressed minus baseline (medians over the rounds)."""
        return self.stressed_us - self.baseline_us


@dataclass(frozen=True)
class LayerComparison:
    """Every layer measured in every round, and the ratio of the layer totals per round."""

    layers: tuple[LayerStress, ...]
    total_ratios: tuple[float, ...]

    @property
    def total_ratio(self) -> float:
        """Median over the rounds of (stressed layer total / baseline layer total)."""
        return statistics.median(self.total_ratios) if self.total_ratios else 1.0


def layer_medians(measurement: Measurement) -> dict[str, float]:
    """Median µs of every layer a measurement timed (eliminated layers left out)."""
    return {lid: r.stats.median_us for lid, r in measurement.layers.items() if r.stats is not None}


def _ratio(after: float, before: float) -> float:
    return after / before if before > 0 else 1.0


def compare_layers(rounds: Sequence[tuple[Mapping[str, float], Mapping[str, float]]], *,
                   mark: bool = True) -> LayerComparison:
    """Per round (baseline µs, stressed µs) by layer -> the comparison, in the first baseline's layer order;
    without ``mark`` no layer is marked memory-sensitive."""
    if not rounds:
        return LayerComparison((), ())
    common = [lid for lid in rounds[0][0] if all(lid in before and lid in after for before, after in rounds)]
    totals = tuple(_ratio(sum(after[lid] for lid in common), sum(before[lid] for lid in common))
                   for before, after in rounds)
    model_ratio = statistics.median(totals)
    base = {lid: statistics.median(before[lid] for before, _ in rounds) for lid in common}
    ratios = {lid: [_ratio(after[lid], before[lid]) for before, after in rounds] for lid in common}
    floor = MIN_SHARE * sum(base.values())
    candidates = [lid for lid in common if base[lid] > 0 and base[lid] >= floor
                  and min(ratios[lid]) > 1.0 and statistics.median(ratios[lid]) >= 1.0 + MIN_GROWTH
                  and statistics.median(ratios[lid]) > model_ratio]
    ranked = sorted(candidates, key=lambda lid: -statistics.median(ratios[lid]))
    marked = set(ranked[:MAX_SENSITIVE] if mark else ())
    layers = tuple(LayerStress(lid, base[lid], statistics.median(after[lid] for _, after in rounds),
                               statistics.median(ratios[lid]), min(ratios[lid]), lid in marked) for lid in common)
    return LayerComparison(layers, totals)


def add_layer_stress(run: RunFile, comparison: LayerComparison) -> RunFile:
    """``run`` with its measured layers marked: ``measured.stress_baseline_us`` / ``stress_median_us`` (medians
    over the rounds), ``stress_ratio`` / ``stress_ratio_min`` (median and smallest paired ratio),
    ``memory_sensitive``."""
    by_id = {c.layer_id: c for c in comparison.layers}
    layers = []
    for layer in run.layers:
        result = by_id.get(layer.id)
        if result is None or layer.measured is None:
            layers.append(layer)
            continue
        layers.append(layer.model_copy(update={"measured": layer.measured.model_copy(update={
            "stress_baseline_us": round(result.baseline_us, 3), "stress_median_us": round(result.stressed_us, 3),
            "stress_ratio": round(result.ratio, 6), "stress_ratio_min": round(result.min_ratio, 6),
            "memory_sensitive": result.sensitive})}))
    return run.model_copy(update={"layers": layers})


def stress_section(report: StressReport, rounds: Sequence[tuple[Timed[LatencyStats], Timed[LatencyStats]]], *,
                   model_threads: int, layers: LayerComparison | None = None) -> Stress:
    """The run file's ``stress`` section: what ran, end to end per round without and with it (latency and the
    cores this process kept busy), the layer ratio and the sensitive layers. ``model_threads``: threads running
    the model (0: onnxruntime's default)."""
    p50_ratios = [_ratio(after.result.median_us, before.result.median_us) for before, after in rounds]
    totals = layers.total_ratios if layers is not None else ()
    ranked = sorted((c for c in layers.layers if c.sensitive), key=lambda c: -c.ratio) if layers else []
    from layerscope.runfile.models import Stress  # here: the stress processes import only numpy and this module

    return Stress.model_validate({
        "kind": "memory",
        "processes": report.processes,
        "buffer_bytes": report.buffer_bytes,
        "llc_bytes": last_level_cache_bytes(),
        "streaming_s": round(report.streaming_s, 3),
        "traffic_bytes_per_s": round(report.traffic_bytes_per_s, 1),
        "expired": report.expired,
        "load_average_1min": report.load_average_1min,
        "model_threads": model_threads,
        "cores": os.cpu_count() or 0,
        "contended_rounds": [index + 1 for index, pair in enumerate(rounds) if contended(*pair)],
        "rounds": [{"baseline": before.result.to_dict(), "stressed": after.result.to_dict(),
                    "ratio_p50": round(ratio, 6), "baseline_cores_busy": round(before.cores_busy, 4),
                    "stressed_cores_busy": round(after.cores_busy, 4)}
                   for (before, after), ratio in zip(rounds, p50_ratios, strict=True)],
        "latency_ratio_p50": round(statistics.median(p50_ratios), 6) if p50_ratios else None,
        "latency_ratio_p50_range": [round(min(p50_ratios), 6), round(max(p50_ratios), 6)] if p50_ratios else None,
        "layer_ratio": round(statistics.median(totals), 6) if totals else None,
        "layer_ratio_range": [round(min(totals), 6), round(max(totals), 6)] if totals else None,
        "sensitive_layers": [c.layer_id for c in ranked],
        "min_share": MIN_SHARE,
        "off_cpu_drop": OFF_CPU_DROP,
        "rule": f"memory_sensitive: baseline >= {MIN_SHARE:.1%} of the layer total, slower in every uncontended "
                f"round, median ratio >= {1 + MIN_GROWTH:.2f} and above the layer total's; at most {MAX_SENSITIVE}, "
                "highest first; none when every round was contended (this process lost the CPU under stress)",
        "order": "paired rounds A B | B A | A B ... with the same stress processes, paused for each baseline; "
                 "same session settings; ratios are medians over the rounds of stressed / baseline",
    })


def add_stress(run: RunFile, experiment: PairedRounds[T], latency: Callable[[T], LatencyStats], *,
               model_threads: int, layer_times: Callable[[T], Mapping[str, float]] | None = None) -> RunFile:
    """``run`` with ``experiment`` added: the ``stress`` section (end to end from ``latency(result)``) and, with
    ``layer_times(result)`` (µs by layer), the per-layer fields of :func:`add_layer_stress`.

    The layers are compared over the rounds in which the model kept the CPU under stress (not
    :func:`contended`); when every round was contended they are compared over all rounds and none is marked
    memory-sensitive: the slowdown cannot be told apart from waiting for a core.
    """
    comparison = None
    if layer_times is not None:
        clean = [(a.result, b.result) for a, b in experiment.pairs if not contended(a, b)]
        pairs = clean or experiment.results()
        comparison = compare_layers([(layer_times(a), layer_times(b)) for a, b in pairs], mark=bool(clean))
        run = add_layer_stress(run, comparison)
    rounds = [(Timed(latency(a.result), a.cores_busy), Timed(latency(b.result), b.cores_busy))
              for a, b in experiment.pairs]
    return run.model_copy(update={"stress": stress_section(experiment.report, rounds, model_threads=model_threads,
                                                           layers=comparison)})
