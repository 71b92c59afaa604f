"""Stress view: the ``stress`` section of ``bench --stress`` / ``profile --stress``.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from layerscope.report.units import human_bytes
from layerscope.report.views.common import Row, Run
from layerscope.runfile.io import stress_thresholds
from layerscope.runfile.models import Layer, LayerMeasured, Stress

#: Layers the stress table shows (highest ratio first; memory-sensitive ones always).
STRESS_TOP = 30


# ------------------------------------------------------------------------------------------- stress


@dataclass(frozen=True)
class StressRound:
    """One pair of measurements, without and with the stress: P50s, change (stressed / baseline - 1) and the
    cores this process kept busy."""

    number: int
    order: str
    baseline_p50_us: float | None
    stressed_p50_us: float | None
    change: float | None
    baseline_cores_busy: float | None
    stressed_cores_busy: float | None


@dataclass(frozen=True)
class StressLayer:
    """A layer without and with the stress: medians over the rounds, median and smallest paired ratio."""

    id: str
    index: int
    op_type: str
    baseline_us: float | None
    stressed_us: float | None
    ratio: float | None
    ratio_min: float | None
    memory_sensitive: bool


@dataclass(frozen=True)
class StressView:
    """The ``stress`` section with the per-layer changes it added to ``layers[].measured``."""

    processes: int | None
    latency_change: float | None
    change_low: float | None
    change_high: float | None
    rounds: tuple[StressRound, ...]
    layers: tuple[StressLayer, ...]
    layers_compared: int
    layers_eligible: int
    sensitive: tuple[str, ...]
    context: tuple[Row, ...]
    rule: str | None
    order: str | None
    warnings: tuple[Notice, ...]

    @property
    def context_rows(self) -> tuple[Row, ...]:
        """The context, then the rule that marks a layer memory-sensitive and the order the rounds ran in."""
        return (*self.context, *(Row(label, value) for label, value in (("rule", self.rule), ("MEASURED", self.order))
                                 if value))


@dataclass(frozen=True)
class Notice:
    """Something to read the figures with: ``level`` ``"warning"`` (they are partly something else) or
    ``"note"`` (read them with care)."""

    level: str
    text: str


def _change(ratio: float | None) -> float | None:
    return None if ratio is None else ratio - 1


def stress_view(run: Run) -> StressView | None:
    """The run's ``stress`` section; ``None`` without one. Layers: those with at least ``stress.min_share`` of the
    baseline layer total (as the terminal ranks them), highest ratio first, the memory-sensitive ones always."""
    stress = run.stress
    if stress is None:
        return None
    rounds = tuple(StressRound(i + 1, "A B" if i % 2 == 0 else "B A",
                               r.baseline.median_us if r.baseline is not None else None,
                               r.stressed.median_us if r.stressed is not None else None, _change(r.ratio_p50),
                               r.baseline_cores_busy, r.stressed_cores_busy)
                   for i, r in enumerate(stress.rounds))
    min_share, off_cpu_drop = stress_thresholds(run)
    compared = stress_compared(run)
    eligible = stress_eligible(compared, min_share=min_share, keep_sensitive=True)
    shown = eligible[:STRESS_TOP]  # and, further down the ranking, the memory-sensitive ones
    shown += [il for il in eligible[STRESS_TOP:] if stress_measured(il[1]).memory_sensitive]
    layers = []
    for i, layer in shown:
        m = stress_measured(layer)
        layers.append(StressLayer(layer.id, i, layer.op_type or "", m.stress_baseline_us, m.stress_median_us,
                                  m.stress_ratio, m.stress_ratio_min, bool(m.memory_sensitive)))
    low, high = stress.latency_ratio_p50_range or (None, None)
    return StressView(
        processes=stress.processes, latency_change=_change(stress.latency_ratio_p50), change_low=_change(low),
        change_high=_change(high), rounds=rounds, layers=tuple(layers), layers_compared=len(compared),
        layers_eligible=len(eligible), sensitive=tuple(stress.sensitive_layers), context=_stress_context(stress),
        rule=stress.rule or None, order=stress.order or None,
        warnings=_stress_warnings(stress, rounds, low, high, off_cpu_drop=off_cpu_drop))


def stress_measured(layer: Layer) -> LayerMeasured:
    """The layer's ``measured`` section, an empty one (every field ``None``) when it has none."""
    return layer.measured if layer.measured is not None else _NOT_MEASURED


_NOT_MEASURED = LayerMeasured()


def stress_compared(run: Run) -> list[tuple[int, Layer]]:
    """(index, layer) of the layers the stress experiment compared (``measured.stress_ratio`` set)."""
    return [(i, layer) for i, layer in enumerate(run.layers) if stress_measured(layer).stress_ratio is not None]


def stress_eligible(compared: Sequence[tuple[int, Layer]], *, min_share: float,
                    keep_sensitive: bool) -> list[tuple[int, Layer]]:
    """Of :func:`stress_compared`'s layers, those holding at least ``min_share`` (the run's ``stress.min_share``)
    of their baseline total (and with ``keep_sensitive`` the memory-sensitive ones too), highest ratio first,
    then by id."""
    total = sum(stress_measured(layer).stress_baseline_us or 0.0 for _, layer in compared)
    eligible = [(i, layer) for i, layer in compared
                if (stress_measured(layer).stress_baseline_us or 0.0) >= min_share * total
                or (keep_sensitive and stress_measured(layer).memory_sensitive)]
    return sorted(eligible, key=lambda item: (-(stress_measured(item[1]).stress_ratio or 0.0), item[1].id))


def _stress_context(stress: Stress) -> tuple[Row, ...]:
    buffer, llc = stress.buffer_bytes, stress.llc_bytes
    traffic, streaming = stress.traffic_bytes_per_s, stress.streaming_s
    what = None
    if buffer is not None:
        cache = f" ({buffer / llc:.1f}x the {human_bytes(llc)} last-level cache)" if llc else ""
        processes = stress.processes if stress.processes is not None else "?"
        what = f"{processes} process(es) copying 2 x {human_bytes(buffer)}{cache}"
        if traffic is not None:
            what += f": {traffic / 1e9:.1f} GB/s memory traffic while streaming"
            what += f" ({streaming:.1f} s)" if streaming is not None else ""
    layer_ratio = stress.layer_ratio
    layers = None
    if layer_ratio is not None:
        span = stress.layer_ratio_range
        rounds = f" (rounds x{span[0]:.2f} to x{span[1]:.2f})" if span is not None else ""
        sensitive = stress.sensitive_layers
        layers = (f"layer total x{layer_ratio:.2f} under stress{rounds}; memory-sensitive: "
                  f"{', '.join(sensitive) if sensitive else 'none'}")
    threads, load, cores = stress.model_threads, stress.load_average_1min, stress.cores
    cores_text = None
    if cores is not None:
        cores_text = (f"{cores} cores; model intra-op threads {threads or 'default (one per core)'}"
                      + (f"; load average {load:.2f} when the stress started (this process included)"
                         if load is not None else ""))
    lines = [("stress", what), ("layers", layers), ("cores", cores_text)]
    return tuple(Row(label, str(value)) for label, value in lines if value)


def _stress_warnings(stress: Stress, rounds: Sequence[StressRound], low: float | None, high: float | None, *,
                     off_cpu_drop: float) -> tuple[Notice, ...]:
    warnings = []
    contended = [str(x) for x in stress.contended_rounds]
    if contended:
        every = len(contended) == len(rounds)
        warnings.append(Notice("warning", f"contended round(s) {', '.join(contended)}: under stress this process "
                               f"kept the CPU busy over {off_cpu_drop:.0%} less (the stress processes and other load "
                               "outnumbered the cores), so their slowdown is partly waiting for a core, not memory; "
                               + ("no layer is marked memory-sensitive" if every
                                  else "the layer verdict uses the other rounds")))
    if low is not None and high is not None and high - low > STRESS_ROUND_SPREAD:
        warnings.append(Notice("note", f"the rounds disagree by {100 * (high - low):.0f} points: the machine's load "
                               "changed during the experiment; read the median with that spread, or rerun on a quiet "
                               "machine"))
    threads, processes, cores = stress.model_threads, stress.processes, stress.cores
    if processes is not None and cores is not None and (not threads or threads + processes > cores):
        warnings.append(Notice("note", "the model's threads and the stress processes outnumber the cores: the "
                               "slowdown mixes CPU and memory contention (keep model threads + N <= cores: profile "
                               "--threads, bench --intra-threads)"))
    if stress.expired:
        warnings.append(Notice("warning", "a stress process stopped on its own or did not follow pause / resume: "
                               "some stressed runs may have run without stress"))
    return tuple(warnings)


#: Per-round end-to-end changes further apart than this (ratio points) get a note: the machine's load moved.
STRESS_ROUND_SPREAD = 0.10
