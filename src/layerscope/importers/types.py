"""What a vendor's profiling output says, in layerscope's own types, before it is joined to a model.

Contract:
- every time is in microseconds and every field that carries one says so (``mean_us``); a value the
  vendor does not report is ``None``, never a made-up zero;
- a :class:`VendorEntry` is one row of the vendor's per-layer (or per-kernel, per-subgraph) table,
  named as the vendor names it; it holds a measurement (``stats``), a static estimate (``estimate``)
  or both, never neither unless ``status`` says why (e.g. OpenVINO's ``OPTIMIZED_OUT``);
- an :class:`ImportResult` is everything one file holds, plus the warnings about what could not be
  read (a truncated log): the parsers keep what parses and say what they skipped.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeVar


class EntryKind(StrEnum):
    """What a vendor entry stands for.

    - ``layer``: one model layer, or several fused into one kernel / compiled layer
    - ``layout``: data layout or copy work the runtime inserted (reformat, reorder, layout convert)
    - ``subgraph``: an accelerator block the board measures as one (Horizon's BPU subgraph)
    - ``other``: anything else the vendor times (input/output operators, synchronisation)
    """

    LAYER = "layer"
    LAYOUT = "layout"
    SUBGRAPH = "subgraph"
    OTHER = "other"


@dataclass(frozen=True)
class TimeStats:
    """Times of one entry over the runs the vendor measured, in microseconds.

    ``values_us`` holds the per-run times when the vendor reports them (ONNX Runtime, OpenVINO's
    detailed report, trtexec's per-inference times); the summary fields are then computed from
    them by :meth:`from_values`. ``samples`` is how many runs the figures summarise, ``None`` when
    the vendor does not say.
    """

    mean_us: float | None
    median_us: float | None = None
    p90_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    std_us: float | None = None
    samples: int | None = None
    values_us: tuple[float, ...] = ()

    @classmethod
    def from_values(cls, values_us: Sequence[float]) -> TimeStats:
        """Summary of per-run times (at least one). p90 is the nearest-rank 90th percentile."""
        ordered = sorted(values_us)
        n = len(ordered)
        rank = max(0, math.ceil(0.9 * n) - 1)
        return cls(
            mean_us=statistics.fmean(ordered),
            median_us=statistics.median(ordered),
            p90_us=ordered[rank],
            min_us=ordered[0],
            max_us=ordered[-1],
            std_us=statistics.pstdev(ordered) if n > 1 else 0.0,
            samples=n,
            values_us=tuple(values_us),
        )

    @property
    def cv(self) -> float | None:
        """Coefficient of variation (std / mean); ``None`` when either is unknown or the mean is 0."""
        if self.std_us is None or not self.mean_us:
            return None
        return self.std_us / self.mean_us

    @property
    def typical_us(self) -> float:
        """The figure to rank and share by: the median when known, else the mean, else 0."""
        for value in (self.median_us, self.mean_us):
            if value is not None:
                return value
        return 0.0

    def scaled(self, fraction: float) -> TimeStats:
        """These times multiplied by ``fraction`` (a fused kernel's time split over its layers)."""

        def mul(value: float | None) -> float | None:
            return None if value is None else value * fraction

        return replace(self, mean_us=mul(self.mean_us), median_us=mul(self.median_us), p90_us=mul(self.p90_us),
                       min_us=mul(self.min_us), max_us=mul(self.max_us), std_us=mul(self.std_us),
                       values_us=tuple(v * fraction for v in self.values_us))

    def plus(self, other: TimeStats) -> TimeStats:
        """The time of two kernels that one layer ran as, run by run.

        With per-run values of the same length on both sides the sums are exact; otherwise means
        add, the order statistics add as an approximation, and the spread becomes unknown.
        """
        if self.values_us and len(self.values_us) == len(other.values_us):
            return TimeStats.from_values([a + b for a, b in zip(self.values_us, other.values_us, strict=True)])

        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        samples = self.samples if self.samples == other.samples else None
        return TimeStats(mean_us=add(self.mean_us, other.mean_us), median_us=add(self.median_us, other.median_us),
                         p90_us=add(self.p90_us, other.p90_us), min_us=add(self.min_us, other.min_us),
                         max_us=add(self.max_us, other.max_us), std_us=None, samples=samples)


_Num = TypeVar("_Num", int, float)


def _add(a: _Num | None, b: _Num | None) -> _Num | None:
    """``a + b`` where a missing side counts as nothing; ``None`` when both are missing."""
    if a is None:
        return b
    return a if b is None else a + b


def sum_stats(parts: Iterable[TimeStats]) -> TimeStats | None:
    """The sum of several kernels' times (see :meth:`TimeStats.plus`); ``None`` for no parts."""
    total: TimeStats | None = None
    for part in parts:
        total = part if total is None else total.plus(part)
    return total


@dataclass(frozen=True)
class StaticCost:
    """A compiler's static estimate of one layer, in microseconds (Horizon's Layer Details).

    ``latency_us`` is what layerscope ranks and shares by: max(compute, load + store), the same
    rule as its own roofline (DMA overlaps compute; load and store share DDR). ``bound`` is
    ``"compute"`` or ``"bandwidth"`` accordingly. ``store_us`` is ``None`` when the report gives
    load and store as one figure (older Bayes reports), which then sits in ``load_us``.
    """

    latency_us: float
    compute_us: float | None
    load_us: float | None
    store_us: float | None
    bound: str
    unit: str | None = None
    ops: int | None = None
    active_start_us: float | None = None
    active_end_us: float | None = None

    @classmethod
    def from_parts(cls, compute_us: float | None, load_us: float | None, store_us: float | None, **extra: Any
                   ) -> StaticCost:
        """Apply the latency / bound rule above to the report's three costs."""
        compute = compute_us or 0.0
        traffic = (load_us or 0.0) + (store_us or 0.0)
        bound = "compute" if compute >= traffic else "bandwidth"
        return cls(latency_us=max(compute, traffic), compute_us=compute_us, load_us=load_us, store_us=store_us,
                   bound=bound, **extra)

    def plus(self, other: StaticCost) -> StaticCost:
        """Two estimates of one layer added part by part (a layer listed twice, or joined from two entries);
        the latency and bound follow from the sums."""
        return StaticCost.from_parts(_add(self.compute_us, other.compute_us), _add(self.load_us, other.load_us),
                                     _add(self.store_us, other.store_us), unit=self.unit or other.unit,
                                     ops=_add(self.ops, other.ops))

    def scaled(self, fraction: float) -> StaticCost:
        """This estimate multiplied by ``fraction`` (a compiled layer split over its source layers)."""

        def mul(value: float | None) -> float | None:
            return None if value is None else value * fraction

        return replace(self, latency_us=self.latency_us * fraction, compute_us=mul(self.compute_us),
                       load_us=mul(self.load_us), store_us=mul(self.store_us))


@dataclass(frozen=True)
class VendorEntry:
    """One row of a vendor's table.

    ``name`` is the vendor's own (engine layer, node, kernel, compiled layer); ``source_names`` the
    model layers the vendor says the entry covers, when it says so (TensorRT's ``[ONNX Layer: …]``
    metadata, RKNN's ``FullName``). ``provider`` is where it ran (``BPU``, ``CPU``, ``NPU``, an ONNX
    Runtime provider, an OpenVINO exec type). ``status`` is the vendor's word for an entry that did
    not run (``OPTIMIZED_OUT``, ``NOT_RUN``); such an entry has no ``stats``. ``tensor`` names the
    tensor a copy entry moves (TensorRT's ``<tensor> copy``).

    What the runtime chose for it, when the vendor says (TensorRT's layer information): ``precision`` (the data
    type it reads, ``FP16``; ``FP32->FP16`` when it writes another, as a reformat that casts does),
    ``input_formats`` / ``output_formats`` (one per tensor, data type and memory layout: ``FP16 NHWC8``) and
    ``tactic`` (the kernel implementation the builder picked).
    """

    name: str
    kind: EntryKind
    op_type: str = ""
    stats: TimeStats | None = None
    estimate: StaticCost | None = None
    provider: str = ""
    source_names: tuple[str, ...] = ()
    status: str = ""
    tensor: str = ""
    precision: str = ""
    input_formats: tuple[str, ...] = ()
    output_formats: tuple[str, ...] = ()
    tactic: str = ""

    def merged(self, other: VendorEntry) -> VendorEntry:
        """This entry completed by another of the same name (e.g. trtexec's profile and layer info)."""
        return replace(
            self,
            op_type=self.op_type or other.op_type,
            stats=self.stats or other.stats,
            estimate=self.estimate or other.estimate,
            provider=self.provider or other.provider,
            source_names=self.source_names or other.source_names,
            status=self.status or other.status,
            tensor=self.tensor or other.tensor,
            precision=self.precision or other.precision,
            input_formats=self.input_formats or other.input_formats,
            output_formats=self.output_formats or other.output_formats,
            tactic=self.tactic or other.tactic,
        )


@dataclass(frozen=True)
class Totals:
    """Whole-model figures a vendor reports, next to its per-entry table.

    ``latency``: one inference end to end. ``accelerator``: the accelerator's part alone (Horizon's
    ``BPU_inference_time_cost``, trtexec's GPU compute time); ``cpu``: the CPU's part. ``estimated_us``
    and ``estimated_fps``: a static report's whole-model estimate.
    """

    latency: TimeStats | None = None
    fps: float | None = None
    accelerator: TimeStats | None = None
    cpu: TimeStats | None = None
    estimated_us: float | None = None
    estimated_fps: float | None = None

    def merged(self, other: Totals) -> Totals:
        """Field by field, this one's value when it has one, else the other's; for the time distributions,
        the one with per-run values first."""
        return Totals(
            latency=_richer(self.latency, other.latency),
            fps=self.fps if self.fps is not None else other.fps,
            accelerator=_richer(self.accelerator, other.accelerator),
            cpu=self.cpu or other.cpu,
            estimated_us=self.estimated_us if self.estimated_us is not None else other.estimated_us,
            estimated_fps=self.estimated_fps if self.estimated_fps is not None else other.estimated_fps,
        )


def _richer(first: TimeStats | None, second: TimeStats | None) -> TimeStats | None:
    """``first`` unless only ``second`` has per-run values (trtexec's ``--exportTimes`` over the summary line
    its profile metadata repeats)."""
    if first is None or (second is not None and second.values_us and not first.values_us):
        return second
    return first


def _frozen(mapping: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class ImportResult:
    """Everything one vendor file holds.

    ``format`` is the ``import --from`` name that read it; ``tool`` the vendor tool that wrote it (it
    becomes ``method="vendor:<tool>"``). ``info`` carries what the file says of the run (model name,
    threads, frame count, tool version) as strings; ``warnings`` what was skipped and why.
    """

    path: str
    format: str
    tool: str
    entries: tuple[VendorEntry, ...] = ()
    totals: Totals = field(default_factory=Totals)
    info: Mapping[str, str] = field(default_factory=_frozen)
    warnings: tuple[str, ...] = ()

    @property
    def measured(self) -> tuple[VendorEntry, ...]:
        """The entries that carry a measurement."""
        return tuple(e for e in self.entries if e.stats is not None)

    @property
    def estimated(self) -> tuple[VendorEntry, ...]:
        """The entries that carry a static estimate."""
        return tuple(e for e in self.entries if e.estimate is not None)


def make_info(pairs: Mapping[str, Any]) -> Mapping[str, str]:
    """Read-only ``info`` from key/value pairs; ``None`` values are left out, others become strings."""
    return _frozen({str(k): str(v) for k, v in pairs.items() if v is not None})
