"""Stress view: the ``stress`` section of ``bench --stress`` / ``profile --stress``.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.report.units import human_bytes
from layerscope.report.views.common import Row, Run, _map, _maps, _text, num
from layerscope.runfile.io import stress_thresholds

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
    stress = run.get("stress")
    if not isinstance(stress, Mapping):
        return None
    rounds = tuple(StressRound(i + 1, "A B" if i % 2 == 0 else "B A",
                               num(_map(r.get("baseline")).get("median_us")),
                               num(_map(r.get("stressed")).get("median_us")), _change(num(r.get("ratio_p50"))),
                               num(r.get("baseline_cores_busy")), num(r.get("stressed_cores_busy")))
                   for i, r in enumerate(_maps(stress.get("rounds"))))
    compared = stress_compared(run)
    eligible = stress_eligible(compared, min_share=stress_thresholds(run)[0], keep_sensitive=True)
    shown = eligible[:STRESS_TOP]  # and, further down the ranking, the memory-sensitive ones
    shown += [il for il in eligible[STRESS_TOP:] if _map(il[1].get("measured")).get("memory_sensitive")]
    layers = []
    for i, layer in shown:
        m = _map(layer.get("measured"))
        layers.append(StressLayer(_text(layer.get("id")), i, str(layer.get("op_type") or ""),
                                  num(m.get("stress_baseline_us")), num(m.get("stress_median_us")),
                                  num(m.get("stress_ratio")), num(m.get("stress_ratio_min")),
                                  bool(m.get("memory_sensitive"))))
    span = stress.get("latency_ratio_p50_range")
    low, high = (num(span[0]), num(span[1])) if isinstance(span, list) and len(span) == 2 else (None, None)
    return StressView(
        processes=int(p) if (p := num(stress.get("processes"))) is not None else None,
        latency_change=_change(num(stress.get("latency_ratio_p50"))), change_low=_change(low),
        change_high=_change(high), rounds=rounds, layers=tuple(layers), layers_compared=len(compared),
        layers_eligible=len(eligible), sensitive=tuple(str(x) for x in stress.get("sensitive_layers") or []),
        context=_stress_context(stress), rule=_text_or_none(stress.get("rule")),
        order=_text_or_none(stress.get("order")), warnings=_stress_warnings(stress, rounds, low, high))


def stress_compared(run: Run) -> list[tuple[int, Mapping[str, Any]]]:
    """(index, layer) of the layers the stress experiment compared (``measured.stress_ratio`` set)."""
    return [(i, layer) for i, layer in enumerate(run.get("layers") or [])
            if isinstance(layer, Mapping) and num(_map(layer.get("measured")).get("stress_ratio")) is not None]


def stress_eligible(compared: Sequence[tuple[int, Mapping[str, Any]]], *, min_share: float,
                    keep_sensitive: bool) -> list[tuple[int, Mapping[str, Any]]]:
    """Of :func:`stress_compared`'s layers, those holding at least ``min_share`` (the run's ``stress.min_share``)
    of their baseline total (and with ``keep_sensitive`` the memory-sensitive ones too), highest ratio first,
    then by id."""
    total = sum(num(_map(layer.get("measured")).get("stress_baseline_us")) or 0.0 for _, layer in compared)
    eligible = [(i, layer) for i, layer in compared
                if (num(_map(layer.get("measured")).get("stress_baseline_us")) or 0.0) >= min_share * total
                or (keep_sensitive and _map(layer.get("measured")).get("memory_sensitive"))]
    return sorted(eligible, key=lambda item: (-(num(_map(item[1].get("measured")).get("stress_ratio")) or 0.0),
                                              str(item[1].get("id"))))


def _text_or_none(value: Any) -> str | None:
    return str(value) if value else None


def _stress_context(stress: Mapping[str, Any]) -> tuple[Row, ...]:
    buffer, llc = num(stress.get("buffer_bytes")), num(stress.get("llc_bytes"))
    traffic, streaming = num(stress.get("traffic_bytes_per_s")), num(stress.get("streaming_s"))
    what = None
    if buffer is not None:
        cache = f" ({buffer / llc:g}x the {human_bytes(llc)} last-level cache)" if llc else ""
        what = f"{stress.get('processes', '?')} process(es) copying 2 x {human_bytes(buffer)}{cache}"
        if traffic is not None:
            what += f": {traffic / 1e9:.1f} GB/s memory traffic while streaming"
            what += f" ({streaming:.1f} s)" if streaming is not None else ""
    layer_ratio = num(stress.get("layer_ratio"))
    layers = None
    if layer_ratio is not None:
        span = stress.get("layer_ratio_range")
        rounds = (f" (rounds x{span[0]:.2f} to x{span[1]:.2f})"
                  if isinstance(span, list) and len(span) == 2 and all(num(v) is not None for v in span) else "")
        sensitive = [str(x) for x in stress.get("sensitive_layers") or []]
        layers = (f"layer total x{layer_ratio:.2f} under stress{rounds}; memory-sensitive: "
                  f"{', '.join(sensitive) if sensitive else 'none'}")
    threads, load, cores = stress.get("model_threads"), num(stress.get("load_average_1min")), stress.get("cores")
    cores_text = None
    if cores is not None:
        cores_text = (f"{cores} cores; model intra-op threads {threads or 'default (one per core)'}"
                      + (f"; load average {load:.2f} when the stress started (this process included)"
                         if load is not None else ""))
    lines = [("stress", what), ("layers", layers), ("cores", cores_text)]
    return tuple(Row(label, str(value)) for label, value in lines if value)


def _stress_warnings(stress: Mapping[str, Any], rounds: Sequence[StressRound], low: float | None,
                     high: float | None) -> tuple[Notice, ...]:
    warnings = []
    contended = [str(x) for x in stress.get("contended_rounds") or []]
    if contended:
        every = len(contended) == len(rounds)
        drop = stress_thresholds({"stress": stress})[1]
        warnings.append(Notice("warning", f"contended round(s) {', '.join(contended)}: under stress this process "
                               f"kept the CPU busy over {drop:.0%} less (the stress processes and other load "
                               "outnumbered the cores), so their slowdown is partly waiting for a core, not memory; "
                               + ("no layer is marked memory-sensitive" if every
                                  else "the layer verdict uses the other rounds")))
    if low is not None and high is not None and high - low > STRESS_ROUND_SPREAD:
        warnings.append(Notice("note", f"the rounds disagree by {100 * (high - low):.0f} points: the machine's load "
                               "changed during the experiment; read the median with that spread, or rerun on a quiet "
                               "machine"))
    threads, processes, cores = stress.get("model_threads"), num(stress.get("processes")), num(stress.get("cores"))
    if processes is not None and cores is not None and (not threads or threads + processes > cores):
        warnings.append(Notice("note", "the model's threads and the stress processes outnumber the cores: the "
                               "slowdown mixes CPU and memory contention (keep model threads + N <= cores: profile "
                               "--threads, bench --intra-threads)"))
    if stress.get("expired"):
        warnings.append(Notice("warning", "a stress process stopped on its own or did not follow pause / resume: "
                               "some stressed runs may have run without stress"))
    return tuple(warnings)


#: Per-round end-to-end changes further apart than this (ratio points) get a note: the machine's load moved.
STRESS_ROUND_SPREAD = 0.10
