"""Typed run file: one frozen pydantic model per section, the published JSON Schema's source.

Contract:
- every model is frozen and validates strictly (no string-to-number coercion; NaN and infinity refused; times,
  counts and byte sizes non-negative and below :data:`MAX_US` / :data:`MAX_COUNT`, so a reader never overflows);
- keys the models do not name are kept (``extra="allow"``): commands add fields to their sections without a schema
  change, and a run written by a newer minor version still loads;
- the core sections (model, target, layers with their cost, estimate and measurement, kernels, measurement,
  latency, summary, reconcile, findings, import) are typed field by field; the experiment sections (timeline,
  comparison, pipeline, stress, bisect) are typed at their top level, with permissive inner parts;
- ``measurement`` is a tagged union on ``kind``: ``kernel-profile`` (``layerscope profile`` / ``pipeline``),
  ``bench``, ``differential`` (``layerscope bisect``) and ``vendor-import`` (``layerscope import``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from layerscope.runfile.derived import KFactor

#: Largest time in µs a run may hold (about 31 years): beyond it a file is garbage, not a measurement.
MAX_US = 1e15
#: Largest count or byte size (2^63 - 1).
MAX_COUNT = 2**63 - 1

Us = Annotated[float, Field(ge=0, le=MAX_US)]
SignedUs = Annotated[float, Field(ge=-MAX_US, le=MAX_US)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Ratio = Annotated[float, Field(ge=-1e12, le=1e12)]
Fraction = Annotated[float, Field(ge=0, le=1e6)]
#: A physical rate (Hz, bytes/s): non-negative, below 10^18.
Rate = Annotated[float, Field(ge=0, le=1e18)]
Dim = int | str | None


class Section(BaseModel):
    """Base of every section: frozen, strict, finite numbers, unknown keys kept."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True, allow_inf_nan=False)

    # Read access by JSON key, as on the document (``section["latency_us"]``, ``section.get("kind")``, ``"k" in
    # section``): the bridge that lets a reader written against the JSON document take the typed run unchanged
    # while it moves to attributes. A key reads as present when the document held it (set fields and unknown
    # keys); aliases (``import``) are JSON keys.

    def _json_field(self, key: str) -> str | None:
        fields = type(self).model_fields
        if key in fields:
            return key
        return next((name for name, info in fields.items() if info.alias == key), None)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        name = self._json_field(key)
        if name is not None:
            return name in self.model_fields_set
        return key in (self.model_extra or {})

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        name = self._json_field(key)
        return getattr(self, name) if name is not None else (self.model_extra or {})[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The value under JSON key ``key`` when the document held it, else ``default`` (as ``dict.get``)."""
        if key not in self:
            return default
        return self[key]

    def keys(self) -> list[str]:
        """The JSON keys the document held (set fields by their JSON name, then unknown keys)."""
        fields = type(self).model_fields
        return [fields[name].alias or name for name in fields if name in self.model_fields_set] + list(
            self.model_extra or {})

    def over(self, base: Self | None) -> Self:
        """This section's keys (the ones it holds, unknown ones too) over ``base``'s: every key of ``base`` this
        one does not hold is kept. ``self`` when ``base`` is ``None``."""
        if base is None:
            return self
        return base.model_copy(update={name: getattr(self, name) for name in self.model_fields_set})


Mapping.register(Section)  # the read-by-key bridge above: readers of the document take a section as it is


# --------------------------------------------------------------------------------------------------- model, target


class Tool(Section):
    name: str
    version: str | None = None


class TensorInfo(Section):
    name: str
    shape: list[Dim] | None = None
    dtype: str | None = None


class ModelInfo(Section):
    """What was analysed: enough to tell two models apart."""

    name: str | None = None
    path: str | None = None
    sha256: str | None = None
    opset: Count | None = None
    producer: str | None = None
    inputs: list[TensorInfo] = []
    outputs: list[TensorInfo] = []


class Target(Section):
    """The hardware profile the estimate was made for."""

    name: str | None = None
    kind: str | None = None
    description: str | None = None
    source_path: str | None = None
    dtype: str | None = None
    clock_hz: Rate | None = None
    ddr_effective_bytes_per_s: Rate | None = None
    ddr_nominal_bytes_per_s: Rate | None = None


class EstimateInfo(Section):
    method: str | None = None
    note: str | None = None


# --------------------------------------------------------------------------------------------------- layers


class LayerEstimate(Section):
    """A layer's estimated latency (roofline on the target, or a vendor's static report)."""

    latency_us: Us | None = None
    compute_us: Us | None = None
    load_us: Us | None = None
    store_us: Us | None = None
    overhead_us: Us | None = None
    bound: str | None = None
    unit: str | None = None
    dtype: str | None = None
    ddr_read_bytes: Count | None = None
    ddr_write_bytes: Count | None = None
    weight_passes: Annotated[float, Field(ge=0, le=MAX_COUNT)] | None = None
    fallback_reason: str | None = None
    method: str | None = None


class LayerMeasured(Section):
    """A layer's measured time. ``status``: ``measured``, ``fused`` (ran inside a kernel with others, time split),
    ``eliminated`` (the runtime removed it: 0 µs), ``segment`` (a bisect segment's share). Times are non-negative
    except a differential measurement's (an increment can come out below zero)."""

    median_us: SignedUs | None = None
    mean_us: SignedUs | None = None
    p90_us: SignedUs | None = None
    min_us: SignedUs | None = None
    max_us: SignedUs | None = None
    std_us: Us | None = None
    cv: Fraction | None = None
    samples: Count | None = None
    status: str | None = None
    kernel: str | None = None
    kernels: list[str] | None = None
    fused_group: list[str] | None = None
    fused_group_size: Count | None = None
    split: bool | None = None
    method: str | None = None
    ci_low_us: SignedUs | None = None
    ci_high_us: SignedUs | None = None
    stress_baseline_us: Us | None = None
    stress_median_us: Us | None = None
    stress_ratio: Annotated[float, Field(ge=0, le=1e12)] | None = None
    stress_ratio_min: Annotated[float, Field(ge=0, le=1e12)] | None = None
    memory_sensitive: bool | None = None

    @model_validator(mode="after")
    def _non_negative_unless_differential(self) -> LayerMeasured:
        if self.method != "differential":
            for key in ("median_us", "mean_us", "p90_us", "min_us", "max_us"):
                value = getattr(self, key)
                if value is not None and value < 0:
                    raise ValueError(f"{key}: a measured time cannot be negative, got {value}")
        return self


class LayerPredicted(Section):
    """A layer's time as the kernel predictor predicts it (``estimate --predictor``): its share of its kernel's
    predicted time (0 for a layer no kernel runs), that kernel and its family (``None`` then)."""

    latency_us: Us | None = None
    kernel: str | None = None
    family: str | None = None


class Layer(Section):
    """One layer: identity, tensors, hardware-independent cost, and its estimate and measurement when present."""

    id: str
    name: str | None = None
    op_type: str | None = None
    domain: str | None = None
    inputs: list[str] = []
    outputs: list[str] = []
    output_shapes: list[list[Dim] | None] = []
    dtype: str | None = None
    macs: Count | None = None
    flops: Count | None = None
    bytes_read: Count | None = None
    bytes_read_act: Count | None = None
    bytes_read_weight: Count | None = None
    bytes_written: Count | None = None
    weight_bytes: Count | None = None
    params: Count | None = None
    unit_kind: str | None = None
    unit: str | None = None
    known: bool | None = None
    kind: str | None = None
    status: str | None = None
    estimate: LayerEstimate | None = None
    measured: LayerMeasured | None = None
    predicted: LayerPredicted | None = None

    # Derived (the definitions of :mod:`layerscope.runfile.derived`, on the typed layer).

    @property
    def est(self) -> LayerEstimate:
        """The layer's estimate, an empty one (every field ``None``) when it has none."""
        return self.estimate if self.estimate is not None else _NO_ESTIMATE

    @property
    def eliminated(self) -> bool:
        """True when the runtime removed the layer (``measured.status == "eliminated"``)."""
        return self.measured is not None and self.measured.status == "eliminated"

    @property
    def measured_us(self) -> float | None:
        """The layer's measured time: ``None`` unmeasured, 0 when eliminated, else the median (else the mean)."""
        if self.measured is None:
            return None
        if self.measured.status == "eliminated":
            return 0.0
        value = self.measured.median_us if self.measured.median_us is not None else self.measured.mean_us
        return None if value is None else float(value)

    @property
    def estimated_us(self) -> float | None:
        """The layer's estimated latency, ``None`` without an estimate."""
        value = self.estimate.latency_us if self.estimate is not None else None
        return None if value is None else float(value)

    def time_us(self, *, prefer_measured: bool = True) -> float:
        """The measured time (0 when eliminated) when measured and ``prefer_measured``, else the estimate, else 0."""
        measured = self.measured_us if prefer_measured else None
        if measured is not None:
            return measured
        estimated = self.estimated_us
        return estimated if estimated is not None else 0.0

    @property
    def ops(self) -> float:
        """Arithmetic operations: FLOPs, or 2 x MACs when larger."""
        return float(max(self.flops or 0, 2 * (self.macs or 0)))

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus bytes written (0 for an unknown side)."""
        return (self.bytes_read or 0) + (self.bytes_written or 0)


_NO_ESTIMATE = LayerEstimate()


class Kernel(Section):
    """A runtime kernel (or a vendor's entry) and the layers it ran."""

    name: str
    op_type: str | None = None
    provider: str | None = None
    median_us: Us | None = None
    mean_us: Us | None = None
    p90_us: Us | None = None
    min_us: Us | None = None
    max_us: Us | None = None
    std_us: Us | None = None
    cv: Fraction | None = None
    samples: Count | None = None
    layers: list[str] = []
    category: str | None = None
    #: A compiling runtime's kernel implementation (OpenVINO ``jit_avx2_f32``) and the precision it ran at.
    exec_type: str | None = None
    precision: str | None = None


# --------------------------------------------------------------------------------------------------- measurement


class Steadiness(Section):
    latency_cv: Ratio
    latency_drift: Ratio
    profiled_drift: Ratio


class Event(Section):
    name: str
    thread: int | str | None = None
    start_us: Us
    duration_us: Us


class _MeasurementBase(Section):
    backend: str | None = None
    backend_version: str | None = None
    provider: str | None = None
    threads: Count | None = None
    opt_level: str | int | None = None
    runs: Count | None = None
    warmup: Count | None = None
    machine: dict[str, Any] | None = None
    created_utc: str | None = None
    interrupted: bool | None = None
    source: str | None = None


class KernelProfileMeasurement(_MeasurementBase):
    """``layerscope profile`` (and ``pipeline``): ONNX Runtime's kernel profiler, joined to layers."""

    kind: Literal["kernel-profile"]
    #: Compiling runtimes (OpenVINO): the device, the inference precision, performance hint and streams.
    device: str | None = None
    precision: str | None = None
    performance_hint: str | None = None
    streams: Count | None = None
    coverage: Fraction | None = None
    overhead: Ratio | None = None
    mapped_share: Fraction | None = None
    unmapped_kernels: list[str] = []
    eliminated_layers: list[str] = []
    instrumented: dict[str, Any] | None = None
    steadiness: Steadiness | None = None
    median_run: list[Event] = []


class BenchInput(Section):
    """One model input of a bench run: its name, where its values came from (``random``, a file) and the seed of
    random values."""

    name: str
    source: str | None = None
    seed: int | None = None


class StreamResult(Section):
    """One concurrent stream of a bench run: its runs, wall time, throughput and latency (``None`` when the stream
    finished no run)."""

    stream: Count
    runs: Count | None = None
    wall_s: Annotated[float, Field(ge=0, le=MAX_US)] | None = None
    fps: Annotated[float, Field(ge=0, le=1e12)] | None = None
    latency: Latency | None = None


class BenchMeasurement(_MeasurementBase):
    """``layerscope bench``: end-to-end latency only (no layer is measured)."""

    kind: Literal["bench"]
    streams: Count | None = None
    #: OpenVINO: the device, the compiler's inference precision, performance hint and NUM_STREAMS.
    device: str | None = None
    precision: str | None = None
    performance_hint: str | None = None
    num_streams: Count | None = None
    #: OpenVINO's throughput mode: ``throughput: AsyncInferQueue`` and the queue's requests.
    mode: str | None = None
    async_requests: Count | None = None
    #: The planned run count (``--runs``) or duration (``--duration``, s), and the ONNX Runtime inter-op threads.
    planned_runs: Count | None = None
    duration_s: Annotated[float, Field(ge=0, le=MAX_US)] | None = None
    inter_op_threads: Count | None = None
    #: The whole process while it ran: wall and CPU time (s), CPU time / (wall x cores), the cores it could use,
    #: its peak resident set size (``None`` where the OS does not say).
    wall_s: Annotated[float, Field(ge=0, le=MAX_US)] | None = None
    cpu_time_s: Annotated[float, Field(ge=0, le=MAX_US)] | None = None
    cpu_util: Fraction | None = None
    cores: Count | None = None
    peak_rss_bytes: Count | None = None
    inputs: list[BenchInput] = []
    stream_results: list[StreamResult] = []


class DifferentialMeasurement(_MeasurementBase):
    """``layerscope bisect``: per-segment time from truncated models."""

    kind: Literal["differential"]
    method: str | None = None
    run_cmd: str | list[str] | None = None


class VendorMeasurement(_MeasurementBase):
    """``layerscope import``: a vendor profiler's per-layer times (the board, TensorRT, OpenVINO, RKNN ...)."""

    kind: Literal["vendor-import"]
    coverage: Fraction | None = None
    overhead: Ratio | None = None
    unmapped_kernels: list[str] = []


Measurement = Annotated[
    KernelProfileMeasurement | BenchMeasurement | DifferentialMeasurement | VendorMeasurement,
    Field(discriminator="kind")]


class Latency(Section):
    """End-to-end latency from uninstrumented runs."""

    mean_us: Us | None = None
    min_us: Us | None = None
    max_us: Us | None = None
    median_us: Us | None = None
    p50_us: Us | None = None
    p90_us: Us | None = None
    p99_us: Us | None = None
    p999_us: Us | None = None
    std_us: Us | None = None
    cv: Fraction | None = None
    fps: Annotated[float, Field(ge=0, le=1e12)] | None = None
    samples: Count | None = None
    source: str | None = None


class Summary(Section):
    """Whole-model totals; commands add keys (all numbers here are optional)."""

    layer_count: Count | None = None
    folded_count: Count | None = None
    zero_copy_count: Count | None = None
    unknown_count: Count | None = None
    measured_layer_count: Count | None = None
    estimated_layer_count: Count | None = None
    macs: Count | None = None
    tensor_macs: Count | None = None
    flops: Count | None = None
    params: Count | None = None
    weight_bytes: Count | None = None
    ddr_bytes: Count | None = None
    est_latency_us: Us | None = None
    est_fps: Annotated[float, Field(ge=0, le=1e12)] | None = None
    cpu_fallback_count: Count | None = None
    meas_latency_us: Us | None = None
    measured_layer_sum_us: Us | None = None
    latency_us: Us | None = None
    latency_p50_us: Us | None = None
    accelerator_us: Us | None = None
    fps: Annotated[float, Field(ge=0, le=1e12)] | None = None


class UnknownOp(Section):
    domain: str
    op_type: str
    count: Count
    layers: list[str] = []


# --------------------------------------------------------------------------------------------------- analyses


class ReconcileLayer(Section):
    name: str
    op_type: str | None = None
    estimated_us: Us
    share: Annotated[float, Field(ge=0, le=1)]
    scaled_us: Us
    measured_us: SignedUs | None = None
    error: Ratio | None = None


class ScalePair(Section):
    k: Annotated[float, Field(gt=0, le=1e12)]
    measured_us: Annotated[float, Field(gt=0, le=MAX_US)]
    estimated_us: Annotated[float, Field(gt=0, le=MAX_US)]


class GroupK(Section):
    name: str
    layers: Count
    estimated_us: Us
    measured_us: SignedUs
    k: Ratio | None = None


class Verdict(Section):
    ranking: str
    absolute: str
    lines: list[str] = []


class SpreadRun(Section):
    """One run's k in ``reconcile.spread``."""

    model: str
    k: Ratio


class SpreadDriver(Section):
    """One layer group across the runs: its mean share of the estimate, pooled k, k range, and the correlation of
    its share with the run's k (``None`` with fewer than 3 runs)."""

    group: str
    mean_share: Ratio | None = None
    pooled_k: Ratio | None = None
    k_min: Ratio | None = None
    k_max: Ratio | None = None
    share_k_correlation: Ratio | None = None


class Spread(Section):
    """``reconcile.spread`` (``layerscope reconcile`` of several runs): k per run, its mean, range and CV, whether
    it is dispersed, the groups that drive it and the verdict's lines."""

    runs: list[SpreadRun] = []
    mean_k: Ratio | None = None
    min_k: Ratio | None = None
    max_k: Ratio | None = None
    cv: Ratio | None = None
    dispersed: bool | None = None
    drivers: list[SpreadDriver] = []
    lines: list[str] = []


class Reconcile(Section):
    """k = measured / estimated for the same part of the model (``layerscope import`` or ``reconcile``).

    ``measured_on``: where the measurement came from (:func:`layerscope.runfile.derived.measurement_origin`);
    ``device_mismatch``: the one-line warning when it is not the device the estimate is for (else ``null``).
    """

    k: Annotated[float, Field(gt=0, le=1e12)]
    measured_us: Annotated[float, Field(gt=0, le=MAX_US)]
    estimated_us: Annotated[float, Field(gt=0, le=MAX_US)]
    scope: str | None = None
    method: str | None = None
    measured_source: str | None = None
    estimated_source: str | None = None
    measured_on: str | None = None
    device_mismatch: str | None = None
    layers: list[ReconcileLayer] = []
    end_to_end: ScalePair | None = None
    spearman: Annotated[float, Field(ge=-1, le=1)] | None = None
    top_n: Count | None = None
    top_overlap: Annotated[float, Field(ge=0, le=1)] | None = None
    median_abs_error: Ratio | None = None
    verdict: Verdict | None = None
    excluded_layers: list[str] = []
    by_op_type: list[GroupK] = []
    by_bound: list[GroupK] = []
    by_unit_kind: list[GroupK] = []
    spread: Spread | None = None


class FindingItem(Section):
    """One finding as :meth:`layerscope.analysis.findings.Finding.to_dict` writes it."""

    rule: str
    severity: Literal["error", "warning", "info"]
    hazard: str
    mitigation: str
    layers: list[str] = []
    evidence: dict[str, Any] = {}
    expected_gain_us: SignedUs | None = None
    help: str = ""


class LayerDiagnosis(Section):
    """One layer in ``findings.diagnosis`` (``layerscope advise``): its time (measured, else estimated) and share,
    its roofline bound and, when measured, the bound and utilizations its achieved rates show."""

    id: str
    op_type: str | None = None
    time_us: SignedUs | None = None
    share: Ratio | None = None
    measured: bool | None = None
    roofline_bound: str | None = None
    measured_bound: str | None = None
    compute_utilization: Ratio | None = None
    bandwidth_utilization: Ratio | None = None
    unit: str | None = None
    fallback_reason: str | None = None


class Diagnosis(Section):
    """``findings.diagnosis``: the time basis, the total, the slowest 20% of the layers' share of it, the top
    hot spots (``advise --top``), the layers per roofline and measured bound, and every CPU-fallback layer."""

    time_source: str | None = None
    total_us: SignedUs | None = None
    top20_share: Ratio | None = None
    hotspots: list[LayerDiagnosis] = []
    roofline_bounds: dict[str, Count] = {}
    measured_bounds: dict[str, Count] = {}
    fallbacks: list[LayerDiagnosis] = []


class SkippedRule(Section):
    """A rule ``advise`` did not run, and why."""

    rule: str
    reason: str | None = None


class Findings(Section):
    source: str | None = None
    count: Count | None = None
    by_severity: dict[str, Count] = {}
    items: list[FindingItem] = []
    skipped_rules: list[SkippedRule] = []
    diagnosis: Diagnosis | None = None


class ImportFile(Section):
    name: str
    path: str | None = None
    format: str | None = None
    tool: str | None = None
    sha256: str | None = None
    entries: Count | None = None
    info: dict[str, Any] = {}
    warnings: list[str] = []


class Unmatched(Section):
    name: str
    file: str | None = None
    kind: str | None = None
    reason: str | None = None
    missing: list[str] = []


class ImportContext(Section):
    """``import.context``: where and how the model ran as the vendor's files say it (each from the first file that
    does, ``None`` when none does); ``samples_per_s`` = ``throughput_per_s`` (inferences/s) x ``batch``."""

    device: str | None = None
    compute_capability: str | None = None
    device_memory_bytes: Count | None = None
    precision: str | None = None
    batch: Count | None = None
    throughput_per_s: Rate | None = None
    samples_per_s: Rate | None = None


class ImportFusionMap(Section):
    """``import.fusion_map``: the level ONNX Runtime's optimized graph was re-created at, how many of the profile's
    kernels it names, and the share of their time placed on layers or layout (``None`` without timed kernels)."""

    opt_level: str | None = None
    kernels: Count | None = None
    kernels_named: Count | None = None
    mapped_share: Fraction | None = None


class ImportInfo(Section):
    files: list[ImportFile] = []
    joined_to_model: bool | None = None
    entries: Count | None = None
    joined: Count | None = None
    layout: Count | None = None
    unmatched: list[Unmatched] = []
    context: ImportContext | None = None
    fusion_map: ImportFusionMap | None = None


# --------------------------------------------------------------------------------------------------- experiments
# Typed at their top level; their inner rows are permissive (dicts) in this schema version.


class Timeline(Section):
    method: str | None = None
    note: str | None = None
    split: str | None = None
    cores: Count | None = None
    dtype: str | None = None
    ddr_effective_bytes_per_s: Rate | None = None
    ddr_nominal_bytes_per_s: Rate | None = None
    summary: dict[str, Any] = {}
    memory: dict[str, Any] = {}
    layers: list[dict[str, Any]] = []
    units: list[dict[str, Any]] = []
    temporal: dict[str, Any] = {}


class Comparison(Section):
    before: dict[str, Any] | str | None = None
    after: dict[str, Any] | str | None = None
    time_source: str | None = None
    metrics: list[dict[str, Any]] = []
    layers: list[dict[str, Any]] = []
    renamed: list[Any] = []
    added: list[Any] = []
    removed: list[Any] = []


class Pipeline(Section):
    function: str | None = None
    runs: Count | None = None
    warmup: Count | None = None
    interrupted: bool | None = None
    end_to_end: dict[str, Any] | None = None
    breakdown: dict[str, Any] | None = None
    stages: list[dict[str, Any]] = []
    top: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []


class Stress(Section):
    processes: Count | None = None
    buffer_bytes: Count | None = None
    rounds: list[dict[str, Any]] = []
    sensitive_layers: list[str] = []
    min_share: Fraction | None = None
    off_cpu_drop: Fraction | None = None


class Bisect(Section):
    method: str | None = None
    granularity: str | None = None
    runner: dict[str, Any] = {}
    segments: list[dict[str, Any]] = []
    prefixes: list[dict[str, Any]] = []
    suffixes: list[dict[str, Any]] = []


# --------------------------------------------------------------------------------------------------- the run


class PredictedKernel(Section):
    """One runtime kernel as the predictor predicts it: its time with the interval, the roofline beside it."""

    kernel: str
    family: str | None = None
    layers: list[str] = []
    latency_us: Us | None = None
    low_us: Us | None = None
    high_us: Us | None = None
    roofline_us: Us | None = None


class Predictor(Section):
    """``estimate --predictor``: the model's predicted latency with its interval (kernels' sum plus the per-call
    overhead), how kernels were formed (``fusion``: ``onnxruntime`` or ``none``), the predictor file, its runtime
    and profile."""

    file: str | None = None
    latency_us: Us | None = None
    low_us: Us | None = None
    high_us: Us | None = None
    overhead_us: Us | None = None
    fusion: str | None = None
    runtime: dict[str, Any] = {}
    profile: str | None = None
    kernels: list[PredictedKernel] = []


class RunFile(Section):
    """A whole run file (``schema_version`` 2). ``model``, ``layers`` and ``summary`` are required."""

    schema_version: Literal[2]
    tool: Tool | None = None
    model: ModelInfo
    target: Target | None = None
    estimate_info: EstimateInfo | None = None
    layers: list[Layer]
    folded: list[str] = []
    unknown_ops: list[UnknownOp] = []
    summary: Summary
    kernels: list[Kernel] = []
    measurement: Measurement | None = None
    latency: Latency | None = None
    timeline: Timeline | None = None
    reconcile: Reconcile | None = None
    findings: Findings | None = None
    comparison: Comparison | None = None
    pipeline: Pipeline | None = None
    stress: Stress | None = None
    bisect: Bisect | None = None
    import_: ImportInfo | None = Field(default=None, alias="import")
    predictor: Predictor | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunFile:
        """A typed run from its JSON document (already migrated to version 2); pydantic's ``ValidationError``
        when a field is wrong (:func:`layerscope.runfile.io.load` turns it into one line)."""
        return cls.model_validate(data, by_alias=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (unset optional sections left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    # Convenience for readers (:mod:`layerscope.analysis`): what several of them need, defined once.

    @property
    def layer_by_id(self) -> dict[str, Layer]:
        """Layers by id (the last one wins when ids repeat, as a dict built from the list would)."""
        return {layer.id: layer for layer in self.layers}

    def fused_group(self, layer: Layer) -> tuple[str, ...]:
        """The ids of the layers that ran as one kernel with ``layer`` (empty when it ran alone), whichever form
        the run stores: ``measured.fused_group`` inline, or ``fused_group_size`` with the list once in the
        kernel's ``layers`` (as :func:`layerscope.runfile.derived.fused_group` reads a document)."""
        measured = layer.measured
        if measured is None:
            return ()
        if measured.fused_group:
            return tuple(measured.fused_group)
        if not measured.fused_group_size:
            return ()
        return next((tuple(k.layers) for k in self.kernels if k.name == measured.kernel), ())

    @property
    def has_measurement(self) -> bool:
        """True when any layer has a ``measured`` section."""
        return any(layer.measured is not None for layer in self.layers)

    @property
    def k_factor(self) -> KFactor | None:
        """k of this run and what it covers (:func:`layerscope.runfile.derived.scale_factor`, the one
        definition); ``None`` when no part is both estimated and measured."""
        from layerscope.runfile.derived import scale_factor

        return scale_factor(self.to_json())

    @property
    def k(self) -> float | None:
        """k = measured / estimated (:attr:`k_factor`), ``None`` when the run has no k."""
        factor = self.k_factor
        return None if factor is None else factor.k

    @property
    def end_to_end_us(self) -> tuple[float, float] | None:
        """(measured latency P50, else mean; summed estimate) when both are positive
        (:func:`layerscope.runfile.derived.end_to_end_us`)."""
        from layerscope.runfile.derived import end_to_end_us

        return end_to_end_us(self.to_json())

    @property
    def target_or_empty(self) -> Target:
        """The ``target`` section, an empty one when the run has none."""
        return self.target if self.target is not None else Target()



#: What readers accept: the typed run, or its JSON document (converted once with
#: :func:`layerscope.runfile.io.as_run`).
RunLike = RunFile | Mapping[str, Any]
