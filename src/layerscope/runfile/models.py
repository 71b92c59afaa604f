"""Typed run file: one frozen pydantic model per section, the published JSON Schema's source.

Contract:
- every section is a pydantic model (:class:`Section`): frozen, strict (no string-to-number coercion), NaN and
  infinity refused; times, counts and byte sizes non-negative and below :data:`MAX_US` / :data:`MAX_COUNT`, so a
  reader never overflows;
- keys the sections do not name are kept (``extra="allow"``): commands add fields to their sections without a schema
  change, and a run written by a newer minor version still loads;
- the core sections (model, target, layers with their cost, estimate and measurement, kernels, measurement,
  latency, summary, reconcile, findings, import) are typed field by field; the experiment sections (timeline,
  comparison, pipeline, stress, bisect) are typed at their top level, with permissive inner parts;
- ``measurement`` is a tagged union on ``kind``: ``kernel-profile`` (``layerscope profile`` / ``pipeline``),
  ``bench``, ``differential`` (``layerscope bisect``) and ``vendor-import`` (``layerscope import``);
- sections layerscope makes of its own values are made without validation (:meth:`Section.trusted`, pydantic's
  ``model_construct`` contract); the tests check each of them against validation (:data:`CHECK_TRUSTED`).

This module does without ``from __future__ import annotations``: its field annotations are objects when the classes
are made. Names not defined yet are quoted.
"""

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, Self, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, WrapSerializer, model_validator

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
    """Base of every section: frozen, strict, finite numbers, unknown keys kept. Each class's validator and
    serializer are built when first used (``defer_build``): most commands only make and write sections."""

    model_config = ConfigDict(frozen=True, strict=True, extra="allow", allow_inf_nan=False, defer_build=True)

    @classmethod
    def trusted(cls, fields: dict[str, Any]) -> Self:
        """A section of ``fields`` (field names, not aliases; no unknown keys) built without validation: for
        values layerscope computed itself, where pydantic's per-object validation was most of the cost of a
        100k-layer estimate. The caller gives every value as validation would leave it (a float field a
        ``float``, never an ``int``; lists as lists; nested sections built); the values are taken as they are
        (not copied) and the fields named are the ones set; unset fields take their defaults. Readers still
        validate every file they load; the tests check that such a section, written, gives the bytes of the
        validated one. Sections built from the same field names (in the same order) share one set of the names
        set (``model_fields_set``: pydantic never changes a frozen model's in place, ``model_copy`` copies it):
        100k layers, one set, not 100k (~1 KB each)."""
        (section,) = cls.trusted_rows(tuple(fields), (fields.values(),))
        return section

    @classmethod
    def trusted_rows(cls, names: tuple[str, ...], rows: Iterable[Iterable[Any]]) -> list[Self]:
        """``[cls.trusted(dict(zip(names, row))) for row in rows]`` (each row's values in the order of ``names``):
        a big model's layers are made as rows, not as one dict each first. Each section is what pydantic's
        ``model_construct(fields_set, **values)`` makes (its documented state: ``__dict__`` holding every field,
        ``__pydantic_fields_set__``, ``__pydantic_extra__`` empty, ``__pydantic_private__`` ``None``), the defaults
        looked up once for all rows."""
        constant, fresh = _defaults(cls, names)
        fields_set = _fields_set(names)
        new, put = cls.__new__, object.__setattr__
        sections = []
        for row in rows:
            section = new(cls)
            state = constant.copy()
            for name, default in fresh:  # a fresh copy of a list or dict default each, as pydantic gives
                state[name] = default.copy()
            state.update(zip(names, row, strict=True))
            put(section, "__dict__", state)
            put(section, "__pydantic_fields_set__", fields_set)
            put(section, "__pydantic_extra__", {})
            put(section, "__pydantic_private__", None)
            sections.append(section)
        if CHECK_TRUSTED:
            check_trusted(sections[:CHECK_TRUSTED_ROWS])
        return sections

    @classmethod
    def trusted_columns(cls, names: tuple[str, ...], columns: Sequence[Sequence[Any]]) -> "Rows[Self]":
        """The sections :meth:`trusted_rows` would make of the rows ``zip(*columns)``, held as these columns (one
        per name, all of one length, values as :meth:`trusted` takes them, none a section): made only when read
        (:class:`Rows`), written from the columns as they are."""
        return Rows(cls, names, columns)

    def over(self, base: Self | None) -> Self:
        """This section's keys (the ones it holds, unknown ones too) over ``base``'s: every key of ``base`` this
        one does not hold is kept. ``self`` when ``base`` is ``None``."""
        if base is None:
            return self
        return base.model_copy(update={name: getattr(self, name) for name in self.model_fields_set})

    def without(self, names: Iterable[str]) -> Self:
        """A copy of this section whose fields ``names`` are unset (their defaults, and not written)."""
        dropped = set(names) & self.model_fields_set
        if not dropped:
            return self
        fields = type(self).model_fields
        kept = {name: getattr(self, name) for name in self.model_fields_set - dropped}
        return type(self).model_construct(_fields_set=set(kept), **kept, **{
            name: fields[name].default for name in dropped if name in fields})


_S = TypeVar("_S", bound=Section)


class Rows(Sequence[_S], Generic[_S]):
    """Sections of one class and one set of fields that layerscope computed itself (:meth:`Section.trusted_columns`),
    held as one column of values per field (a field of sections: a :class:`Rows` of its own): the list of them is
    made on first iteration or slice, one section when indexed by an integer; the run file writer writes them from
    the columns without making them, and :func:`field_values` reads a field of every row from its column (a
    100k-layer estimate's layers, a timeline's 360k spans and busy intervals). A read-only sequence, equal to the
    list of its sections, held where the typed run has a list of sections: an estimate's ``layers``, a timeline's
    ``layers`` and ``busy``."""

    __slots__ = ("_made", "columns", "names", "section")

    def __init__(self, section: type[_S], names: tuple[str, ...], columns: Sequence[Sequence[Any]]) -> None:
        if len(names) != len(columns) or len({len(column) for column in columns}) > 1:
            raise ValueError(f"{section.__name__} rows: {len(names)} names, columns of lengths "
                             f"{sorted({len(column) for column in columns})}")
        self.section, self.names, self.columns = section, names, tuple(columns)
        self._made: list[_S] | None = None
        if CHECK_TRUSTED:  # a few rows made now, checked (trusted_rows); a column of sections indexed, not made
            head = range(min(CHECK_TRUSTED_ROWS, len(self)))
            section.trusted_rows(names, zip(*([column[k] for k in head] for column in self.columns), strict=True))

    def made(self) -> list[_S]:
        """The sections, made once (:meth:`Section.trusted_rows`); a copy of the list, the sections themselves."""
        return list(self._sections())

    def _sections(self) -> list[_S]:
        """The list of the sections, made on first use and kept (never handed out: :meth:`made` copies it)."""
        if self._made is None:
            self._made = self.section.trusted_rows(self.names, zip(*self.columns, strict=True))
        return self._made

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied and pickled through :meth:`__init__`."""
        return (Rows, (self.section, self.names, self.columns))

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    @overload
    def __getitem__(self, index: int) -> _S: ...

    @overload
    def __getitem__(self, index: slice) -> list[_S]: ...

    def __getitem__(self, index: int | slice) -> _S | list[_S]:
        if self._made is not None or isinstance(index, slice):
            return self._sections()[index]
        # one row made (the top layers of a table): a column of sections gives its own row
        (section,) = self.section.trusted_rows(self.names, (tuple(column[index] for column in self.columns),))
        return section

    def column(self, name: str) -> Sequence[Any]:
        """The values of the field ``name``, one per row (a field of sections: their :class:`Rows`)."""
        return self.columns[self.names.index(name)]

    def __iter__(self) -> Iterator[_S]:
        return iter(self._sections())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows | list | tuple):
            return self._sections() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._sections())


def _rows_as_list(value: Any, handler: SerializerFunctionWrapHandler) -> Any:
    """pydantic's dump of a list of sections, one held as :class:`Rows` first read into its list (pydantic's list
    serializer takes lists only; the section holding it is not changed)."""
    return handler(value.made() if type(value) is Rows else value)


#: A list of sections that layerscope may hold as :class:`Rows` (validated as the list it is, dumped as a list).
RowList = Annotated[list[_S], WrapSerializer(_rows_as_list)]


def field_values(sections: Sequence[Section], *path: str) -> list[Any]:
    """The value at ``path`` (a field name, then the names into the sections it holds) of each of ``sections``,
    ``None`` where a section on the path is ``None``; read from the columns of :class:`Rows` without making them
    (a 100k-layer estimate's table ranks its layers by their estimates' latency)."""
    values: Sequence[Any] = sections
    for depth, name in enumerate(path):
        if type(values) is Rows and name in values.names:
            values = values.column(name)
        else:
            rest = path[depth:]
            return [_value_at(value, rest) for value in values]
    return list(values)


def _value_at(section: Any, path: Sequence[str]) -> Any:
    for name in path:
        if section is None:
            return None
        section = getattr(section, name)
    return section



#: ``LAYERSCOPE_CHECK_TRUSTED=1`` (the tests set it): every section :meth:`Section.trusted` makes (the first
#: :data:`CHECK_TRUSTED_ROWS` of a call) is checked against pydantic's validation of its values
#: (:func:`check_trusted`), so the whole suite tests the contract trusted sections rely on.
CHECK_TRUSTED = os.environ.get("LAYERSCOPE_CHECK_TRUSTED") == "1"
CHECK_TRUSTED_ROWS = 8


def check_trusted(sections: Iterable[Section]) -> None:
    """Raise ``TypeError`` naming the field when a section :meth:`Section.trusted` made differs from what validating
    its values gives: a value of another type (an ``int`` where validation gives a ``float``), one validation
    changes or refuses, unknown keys, or another set of fields."""
    for section in sections:
        cls = type(section)
        if section.model_extra:
            raise TypeError(f"trusted {cls.__name__}: unknown keys {sorted(section.model_extra)}")
        # a Rows was checked when it was made (its first rows); read it here, and a big run's layers would be made
        given = {name: [] if type(value) is Rows else value
                 for name in section.model_fields_set for value in (getattr(section, name),)}
        try:
            validated = cls.model_validate(given, by_alias=False, by_name=True)
        except ValueError as exc:  # pydantic's ValidationError
            raise TypeError(f"trusted {cls.__name__}: validation refuses its values: {exc}") from None
        if validated.model_fields_set != section.model_fields_set:
            raise TypeError(f"trusted {cls.__name__}: fields set {sorted(section.model_fields_set)}, "
                            f"validated {sorted(validated.model_fields_set)}")
        for name in cls.model_fields:
            value, expected = getattr(section, name), getattr(validated, name)
            where = None if type(value) is Rows else _differs(value, expected)
            if where is not None:
                raise TypeError(f"trusted {cls.__name__}.{name}{where}: {value!r} is not what validation gives "
                                f"({expected!r})")


def _differs(trusted: Any, validated: Any) -> str | None:
    """Where ``trusted`` differs from ``validated`` in type or value (``""`` at the top, ``[k]`` inside), ``None``
    when nowhere; sections are compared as they are (each was checked when it was made)."""
    if isinstance(trusted, Section) and isinstance(validated, Section):
        return None if trusted is validated or trusted == validated else ""
    if type(trusted) is not type(validated):
        return ""
    if type(trusted) in (list, tuple):
        if len(trusted) != len(validated):
            return ""
        return next((f"[{k}]{where}" for k, (a, b) in enumerate(zip(trusted, validated, strict=True))
                     if (where := _differs(a, b)) is not None), None)
    if type(trusted) is dict:
        if trusted.keys() != validated.keys():
            return ""
        return next((f"[{key!r}]{where}" for key in trusted
                     if (where := _differs(trusted[key], validated[key])) is not None), None)
    return None if trusted == validated else ""


#: Each section class's field defaults by the names given (:func:`_defaults`).
_DEFAULTS: dict[tuple[type[Section], tuple[str, ...]], tuple[dict[str, Any], tuple[tuple[str, Any], ...]]] = {}


def _defaults(cls: type[Section], names: tuple[str, ...]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """The defaults of ``cls``'s fields not in ``names``, as pydantic's ``FieldInfo.default``: the immutable ones
    by name, and the list or dict ones (copied for each section) apart; read once per class and names."""
    key = (cls, names)
    made = _DEFAULTS.get(key)
    if made is None:
        unset = [(name, info.default) for name, info in cls.model_fields.items() if name not in names]
        made = _DEFAULTS[key] = ({name: default for name, default in unset if type(default) not in (list, dict)},
                                 tuple((name, default) for name, default in unset if type(default) in (list, dict)))
    return made


#: The sets of names :meth:`Section.trusted` gave its sections, by the names in order (at most
#: :data:`_FIELDS_SETS_MAX` kept).
_FIELDS_SETS: dict[tuple[str, ...], set[str]] = {}
_FIELDS_SETS_MAX = 1024


def _fields_set(key: tuple[str, ...]) -> set[str]:
    """The set of the names ``key``, shared by every trusted section of those names in that order."""
    names = _FIELDS_SETS.get(key)
    if names is None:
        names = set(key)
        if len(_FIELDS_SETS) < _FIELDS_SETS_MAX:
            _FIELDS_SETS[key] = names
    return names


# --------------------------------------------------------------------------------------------------- model, target


class Tool(Section):
    """What last wrote the run: the tool's ``name`` and ``version``, and ``command``, the layerscope command
    (``estimate``, ``profile``, ``bench``, ``bisect``, ``pipeline``, ``import``, ``reconcile``, ``advise`` or
    ``compare``; ``None`` in runs written before it was recorded, or by another tool)."""

    name: str
    version: str | None = None
    command: str | None = None


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
    #: One line per default layerscope chose (a batch-like input dim set to 1).
    assumptions: list[str] = []
    #: How many layers got their shapes from each source (``static``, ``symbolic``, ``executed``, ``unknown``).
    shape_sources: dict[str, Count] = {}
    #: What the layers are when there is no model (a vendor import without ``--model``).
    note: str | None = None


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
    """How the estimate was made: ``method`` (``roofline``), a ``note``, and what it assumed of the deployment
    where an option says so: ``quantized_outputs`` (``estimate --quantized-outputs``): the model is deployed without
    the Dequantize nodes at its outputs, which the runtime hands over as the accelerator wrote them (no float32
    hand-over in ``summary.est_task_overhead_us``)."""

    method: str | None = None
    note: str | None = None
    quantized_outputs: bool | None = None


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
    #: Sizes the runtime's profiler reported for the kernel that wrote the layer's output (bytes): what it wrote,
    #: the activations and the parameters it read (:mod:`layerscope.measure.memory`).
    output_bytes: Count | None = None
    activation_bytes: Count | None = None
    parameter_bytes: Count | None = None
    #: A run whose runtime fell back to another for some layers (OpenVINO to ONNX Runtime): the runtime that ran
    #: this layer (``openvino``, ``onnxruntime``), and for a layer that fell back, why (the op the first cannot run).
    runtime: str | None = None
    fallback_reason: str | None = None

    @model_validator(mode="after")
    def _non_negative_unless_differential(self) -> "LayerMeasured":
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
    #: Where its shapes came from (``static``, ``symbolic``, ``executed``, ``unknown``); a subgraph's layer: the
    #: control-flow layer it runs under (``parent``) and how often it ran in one inference (``executions``);
    #: an If/Loop/Scan layer: what execution observed (``branch_taken``, ``trip_count``, ``source``).
    shape_source: str | None = None
    parent: str | None = None
    executions: Count | None = None
    observed: dict[str, Any] | None = None
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

    @staticmethod
    def estimated_us_of(layers: Sequence["Layer"]) -> list[float | None]:
        """:attr:`estimated_us` of each of ``layers``."""
        return [None if value is None else float(value) for value in field_values(layers, "estimate", "latency_us")]

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


_NO_ESTIMATE = LayerEstimate.model_construct()


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
    #: A layout kernel's (no ``layers``): the layers whose data it converts (OpenVINO's reorders).
    serves: list[str] | None = None
    #: What a compiling builder chose for it (TensorRT's layer information): the kernel implementation (``tactic``:
    #: its name, else its ``0x`` value) and each input's and output's format, data type and memory layout in
    #: TensorRT's names (``FP16 NHWC8``, ``FP32 Linear``).
    tactic: str | None = None
    input_formats: list[str] | None = None
    output_formats: list[str] | None = None


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


class Machine(Section):
    """Where a measurement ran (:func:`layerscope.runtimes.machine.machine_info`; a backend may add keys, e.g.
    OpenVINO's version and device, kept as unknown keys)."""

    hostname: str | None = None
    cpu: str | None = None
    cores: Count | None = None
    os: str | None = None
    python: str | None = None
    onnxruntime: str | None = None

    def describe(self, *, python: bool = False) -> str:
        """``host: CPU, 8 cores, Linux 6.1`` (and ``, Python 3.12`` with ``python``); a part it lacks reads
        ``None``, as the record is."""
        text = f"{self.hostname}: {self.cpu}, {self.cores} cores, {self.os}"
        return text + (f", Python {self.python}" if python else "")


class _MeasurementBase(Section):
    backend: str | None = None
    backend_version: str | None = None
    provider: str | None = None
    threads: Count | None = None
    opt_level: str | int | None = None
    runs: Count | None = None
    warmup: Count | None = None
    machine: Machine | None = None
    created_utc: str | None = None
    interrupted: bool | None = None
    source: str | None = None


class MeasuredMemory(Section):
    """The peak of the layer outputs live at once along the kernels' execution order (bytes), the layers whose
    outputs are live then (largest first), the layers of the kernel running then, and the runtime allocator's own
    peak where it reports one; ``source`` says how they were read (:mod:`layerscope.measure.memory`)."""

    peak_bytes: Count | None = None
    peak_layers: list[str] = []
    peak_at: list[str] = []
    arena_peak_bytes: Count | None = None
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
    memory: MeasuredMemory | None = None
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
    latency: "Latency | None" = None


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


class BenchSweepPoint(Section):
    """One point of ``bench --sweep``: ``streams`` concurrent requests of ``batch`` samples (``None``: the model's
    static batch, not swept) on ``threads`` intra-op threads (0: the runtime's default); per request the latency
    percentiles (µs) and inferences/s; per sample a request's latency / batch and samples/s; its own steadiness
    (run-to-run ``cv``, ``drift`` where the runs' order is known; ``steady``: both within the warning level);
    ``settings``: what a compiling runtime chose for this point."""

    streams: Count
    batch: Count | None = None
    threads: Count | None = None
    runs: Count | None = None
    wall_s: Annotated[float, Field(ge=0, le=MAX_US)] | None = None
    interrupted: bool | None = None
    requests_per_s: Rate | None = None
    samples_per_s: Rate | None = None
    p50_us: Us | None = None
    p90_us: Us | None = None
    p99_us: Us | None = None
    sample_p50_us: Us | None = None
    sample_p90_us: Us | None = None
    sample_p99_us: Us | None = None
    cv: Fraction | None = None
    drift: Ratio | None = None
    steady: bool | None = None
    cpu_util: Fraction | None = None
    settings: dict[str, Any] = {}


class BenchSweep(Section):
    """``bench --sweep``: the axes swept (``streams``, ``batch``, ``threads``), the model's batch dim (``None``:
    static, with ``batch_note`` saying so), what a stream is on the runtime (``concurrency``), each point's
    warm-up and budget, the points in order of growing load, the knee of each thread count's series (indices
    into ``points``, by ``knee_rule``) and the best point under ``latency_budget_us`` (``best``, by
    ``budget_rule``; ``None`` when no point meets it)."""

    axes: dict[str, list[Count]] = {}
    batch_dim: str | None = None
    batch_note: str | None = None
    concurrency: str | None = None
    warmup: Count | None = None
    runs_per_point: Count | None = None
    duration_s_per_point: Annotated[float, Field(ge=0, le=MAX_US)] | None = None
    points: list[BenchSweepPoint] = []
    knees: list[Count] = []
    knee_rule: str | None = None
    latency_budget_us: Us | None = None
    best: Count | None = None
    budget_rule: str | None = None


class DifferentialMeasurement(_MeasurementBase):
    """``layerscope bisect``: per-segment time from truncated models."""

    kind: Literal["differential"]
    method: str | None = None
    run_cmd: str | list[str] | None = None
    #: OpenVINO: the device, the compiler's inference precision and performance hint.
    device: str | None = None
    precision: str | None = None
    performance_hint: str | None = None


class VendorMeasurement(_MeasurementBase):
    """``layerscope import``: a vendor profiler's per-layer times (the board, TensorRT, OpenVINO, RKNN ...)."""

    kind: Literal["vendor-import"]
    coverage: Fraction | None = None
    overhead: Ratio | None = None
    unmapped_kernels: list[str] = []


Measurement = Annotated[
    KernelProfileMeasurement | BenchMeasurement | DifferentialMeasurement | VendorMeasurement,
    Field(discriminator="kind")]


#: Most per-run latencies a ``latency`` section keeps (evenly spaced over the runs beyond).
MAX_LATENCY_SAMPLES = 10_000


def latency_samples(samples_us: Sequence[float]) -> list[float] | None:
    """A ``Latency`` section's ``samples_us``: the runs rounded to ns, thinned evenly to at most
    :data:`MAX_LATENCY_SAMPLES`; ``None`` when there are none."""
    if not samples_us:
        return None
    step = max(1, -(-len(samples_us) // MAX_LATENCY_SAMPLES))
    return [round(float(v), 3) for v in samples_us[::step]]


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
    #: The runs' latencies (µs) in the order they were timed, at most :data:`MAX_LATENCY_SAMPLES` (evenly thinned
    #: beyond): what ``compare`` bootstraps its intervals from.
    samples_us: list[Us] | None = None


class SharedWeights(Section):
    """The weights several accelerator layers read, in the estimate (the summary's ``shared_weights``):
    ``tensors`` such tensors of the model, read by ``layers`` layers; ``resident`` of them loaded from DDR once per
    inference (they fit the on-chip weight budget, ``budget_bytes``: half the profile's SRAM, a CPU's cache), the
    others by every reader; ``ddr_bytes_saved``: the DDR reads this saves against loading them at every use."""

    tensors: Count
    layers: Count
    resident: Count
    budget_bytes: Count
    ddr_bytes_saved: Count = 0


class Summary(Section):
    """Whole-model totals; commands add keys (all numbers here are optional). ``params`` and ``weight_bytes`` count
    each tensor of the model once (:mod:`layerscope.costs.weights`); ``params_per_use``, set only when it differs,
    is the layers' counts summed (a tensor counted by each layer that reads it)."""

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
    params_per_use: Count | None = None
    weight_bytes: Count | None = None
    shared_weights: SharedWeights | None = None
    ddr_bytes: Count | None = None
    est_latency_us: Us | None = None
    est_fps: Annotated[float, Field(ge=0, le=1e12)] | None = None
    cpu_fallback_count: Count | None = None
    #: the profile's fixed cost of one inference outside every layer, part of the roofline's total
    #: (``roofline_latency_us`` when set, else ``est_latency_us``)
    est_task_overhead_us: Us | None = None
    #: the part of ``est_task_overhead_us`` that is the runtime's hand-over of the model's outputs as float32 (the
    #: Dequantize at the outputs, CPU work: :func:`layerscope.estimator.roofline.output_conversion_us`); absent
    #: when the profile prices none or the outputs are handed over quantized (``estimate_info.quantized_outputs``)
    est_output_handover_us: Us | None = None
    #: what produced ``est_latency_us`` / ``est_fps``: absent for the roofline; ``predictor FILE sha256:...`` for
    #: the kernel predictor (``estimate --predictor``), whose interval is ``est_low_us`` .. ``est_high_us`` and
    #: beside which the roofline's own total is kept in ``roofline_latency_us`` / ``roofline_fps``
    est_source: str | None = None
    est_low_us: Us | None = None
    est_high_us: Us | None = None
    roofline_latency_us: Us | None = None
    roofline_fps: Annotated[float, Field(ge=0, le=1e12)] | None = None
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


class UnknownCostShare(Section):
    """The measured time in layers whose op has no cost function: its ``share`` of the measured sum, the
    ``layers`` and their ``op_types``, and k over the known-cost layers alone (``k_known``)."""

    share: Annotated[float, Field(ge=0, le=1)]
    measured_us: SignedUs
    layers: list[str] = []
    op_types: list[str] = []
    k_known: Ratio | None = None


class OutlierLayer(Section):
    """A layer whose measured/estimated ``ratio`` stands out among the run's layers (``median_ratio``: the run's
    median, ``z``: the robust z-score of the log ratio), holding ``share`` of the measured time."""

    name: str
    op_type: str | None = None
    estimated_us: Us
    measured_us: SignedUs
    ratio: Ratio
    median_ratio: Ratio
    z: float
    share: Annotated[float, Field(ge=0, le=1)]
    known: bool = True


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
    unknown_cost: UnknownCostShare | None = None
    outliers: list[OutlierLayer] = []


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
    does, ``None`` when none does). ``throughput_per_s`` is inferences (trtexec's queries: one enqueue of the whole
    ``batch``) per second of host walltime; ``samples_per_s`` = ``throughput_per_s`` x ``batch``."""

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


class TimelineSummary(Section):
    """One estimated frame of the timeline (:func:`layerscope.run.timeline_section`): latency with units in
    parallel and layers one after another (``serial_latency_us``), FPS (``None`` for a frame of 0 µs), MACs,
    DDR traffic (MB = 10^6 bytes) and how long the channel is busy, the busiest unit and what bounds the frame."""

    latency_us: Us | None = None
    fps_per_core: Annotated[float, Field(ge=0, le=1e12)] | None = None
    fps_total: Annotated[float, Field(ge=0, le=1e12)] | None = None
    serial_latency_us: Us | None = None
    macs: Count | None = None
    conv_macs: Count | None = None
    ddr_bytes: Count | None = None
    ddr_mb_per_run: Annotated[float, Field(ge=0, le=1e18)] | None = None
    ddr_busy_us: Us | None = None
    busiest_unit: str | None = None
    busiest_unit_busy_us: Us | None = None
    bound: str | None = None
    cross_core_bytes: Count | None = None


class TimelineMemory(Section):
    """The memory plan of one frame, in Horizon's categories (bytes); ``dynamic_bytes`` = input + output + shared
    temporary + exclusive intermediate; ``minimum_requirement_bytes`` = static + shared temporary +
    ``frames_in_flight`` x (input + output + exclusive intermediate)."""

    static_bytes: Count | None = None
    input_bytes: Count | None = None
    output_bytes: Count | None = None
    shared_temporary_bytes: Count | None = None
    exclusive_intermediate_bytes: Count | None = None
    dynamic_bytes: Count | None = None
    minimum_requirement_bytes: Count | None = None
    on_chip_peak_bytes: Count | None = None
    peak_live_bytes: Count | None = None
    frames_in_flight: Count | None = None


class TimelineLayer(Section):
    """Where one layer is scheduled: its unit and core, the intervals it is active, computes, loads and stores
    (µs from the frame's start; a burst is ``None`` when the layer moves no DDR bytes that way), the times the
    roofline gives each part and the bytes it loads and stores."""

    id: str
    unit: str | None = None
    core: Count | None = None
    active_start_us: Us | None = None
    active_end_us: Us | None = None
    compute_start_us: Us | None = None
    compute_end_us: Us | None = None
    load_start_us: Us | None = None
    load_end_us: Us | None = None
    store_start_us: Us | None = None
    store_end_us: Us | None = None
    compute_us: Us | None = None
    overhead_us: Us | None = None
    load_us: Us | None = None
    store_us: Us | None = None
    load_bytes: Count | None = None
    store_bytes: Count | None = None


class TimelineBusy(Section):
    """One busy interval of a unit: the layer it runs, µs from the frame's start."""

    layer: str
    start_us: Us
    end_us: Us


class TimelineUnit(Section):
    """A track of the timeline: a compute unit of one core, the CPU, or the DDR channel's ``LOAD`` / ``STORE``."""

    name: str
    core: Count | None = None
    busy_us: Us | None = None
    busy: RowList[TimelineBusy] = []


class TimelineTemporal(Section):
    """The frame cut into ``intervals`` of ``interval_us``: one value per interval in each series. DDR rates in
    MB/s (10^6 bytes, summed over the cores); ``ddr_utilization``: busy share of the effective bandwidth;
    ``ddr_nominal_utilization``: load + store over the part's nominal bandwidth (``None`` without one);
    ``utilization``: each unit's busy share, by unit name."""

    interval_us: Us | None = None
    intervals: Count | None = None
    ddr_load_mb_per_s: list[Rate] = []
    ddr_store_mb_per_s: list[Rate] = []
    ddr_utilization: list[Fraction] = []
    ddr_nominal_utilization: list[Fraction] | None = None
    ddr_peak_mb_per_s: Rate | None = None
    ddr_mean_mb_per_s: Rate | None = None
    utilization: dict[str, list[Fraction]] = {}


class Timeline(Section):
    """``layerscope estimate --timeline``: a static schedule of one frame over the target's units and cores
    (:func:`layerscope.run.timeline_section` writes it). ``bandwidth_bytes_per_s`` and ``sram_bytes``: one core's
    share; ``ddr_effective_bytes_per_s``: the attainable rate of the whole part; ``ddr_nominal_bytes_per_s``: the
    vendor's figure (``None`` when the profile has none)."""

    method: str | None = None
    note: str | None = None
    split: str | None = None
    cores: Count | None = None
    dtype: str | None = None
    bandwidth_bytes_per_s: Rate | None = None
    sram_bytes: Count | None = None
    ddr_effective_bytes_per_s: Rate | None = None
    ddr_nominal_bytes_per_s: Rate | None = None
    summary: TimelineSummary | None = None
    memory: TimelineMemory | None = None
    layers: RowList[TimelineLayer] = []
    units: list[TimelineUnit] = []
    temporal: TimelineTemporal | None = None


# What ``layerscope compare --json`` writes (:func:`layerscope.analysis.compare.comparison_section`).

#: A metric's value in its unit (µs, bytes, a count, a fraction, FPS).
MetricValue = Annotated[float, Field(ge=-MAX_COUNT, le=MAX_COUNT)]


class ComparisonSide(Section):
    """One of the two runs compared: its label (``--labels``), model, path, model digest and target."""

    label: str | None = None
    model: str | None = None
    path: str | None = None
    sha256: str | None = None
    target: str | None = None


class ComparisonMetric(Section):
    """A row of the before/after table. ``unit``: ``us``, ``fps``, ``fraction``, ``bytes`` or ``count``;
    ``change``: (after - before) / before (``null`` when a side is missing or before is 0); ``better``:
    ``lower`` or ``higher``; ``source_*``: where each side's value came from (``measured``, ``estimate``, ...)."""

    name: str | None = None
    unit: str | None = None
    before: MetricValue | None = None
    after: MetricValue | None = None
    change: Ratio | None = None
    better: str | None = None
    source_before: str | None = None
    source_after: str | None = None


class ComparisonLayer(Section):
    """A layer in both runs (same id, or ``renamed``): its time on the comparison's ``time_source`` basis (a
    differential measurement's time can be below zero)."""

    before_id: str | None = None
    after_id: str | None = None
    op_type: str | None = None
    before_us: SignedUs | None = None
    after_us: SignedUs | None = None
    delta_us: SignedUs | None = None
    renamed: bool | None = None


class ComparisonRename(Section):
    """A layer matched under another id (same op type, output shapes, MACs and weight bytes)."""

    before_id: str | None = None
    after_id: str | None = None


class ComparisonOnly(Section):
    """A layer in one run only (``added``: after only; ``removed``: before only) and its time there."""

    id: str | None = None
    op_type: str | None = None
    time_us: SignedUs | None = None


class Comparison(Section):
    """Before vs after (stored in the *after* run): the sides, the metrics, the matched layers (largest change
    first) and the renamed, added and removed ones; ``time_source``: ``measured`` or ``estimated``."""

    before: ComparisonSide | None = None
    after: ComparisonSide | None = None
    time_source: str | None = None
    metrics: list[ComparisonMetric] = []
    layers: list[ComparisonLayer] = []
    renamed: list[ComparisonRename] = []
    added: list[ComparisonOnly] = []
    removed: list[ComparisonOnly] = []


class PipelineStats(Section):
    """Statistics of one time over the pipeline's runs (:class:`layerscope.stats.LatencyStats`), µs except ``cv``
    (a ratio) and ``samples``."""

    median_us: Us | None = None
    mean_us: Us | None = None
    p90_us: Us | None = None
    p99_us: Us | None = None
    p999_us: Us | None = None
    min_us: Us | None = None
    max_us: Us | None = None
    std_us: Us | None = None
    cv: Fraction | None = None
    samples: Count | None = None


class PipelineBreakdown(Section):
    """Time per run before the first model call, in model calls, after the last and the rest; ``statistic``
    says which (``mean``: then the four add up to ``end_to_end_us``)."""

    pre_us: Us | None = None
    model_us: Us | None = None
    post_us: Us | None = None
    other_us: Us | None = None
    end_to_end_us: Us | None = None
    statistic: str | None = None


class PipelineStage(Section):
    """A trace point (or the model) over the runs: ``kind`` pre / between / post / other / model, nesting
    ``depth`` and ``parent`` stage, calls per run, the time it covers (``stats``) and its self time (``self``
    in the file: without the trace points nested in it)."""

    name: str
    kind: str | None = None
    depth: Count | None = None
    parent: str | None = None
    calls_per_run: Annotated[float, Field(ge=0, le=1e12)] | None = None
    stats: PipelineStats | None = None
    self_time: PipelineStats | None = Field(default=None, alias="self")


class PipelineTopItem(Section):
    """A user stage (by self time) or a model layer (``kind == "layer"``, by measured median) in the ranking;
    ``share``: of the median end to end."""

    name: str
    kind: str | None = None
    median_us: Us | None = None
    p90_us: Us | None = None
    share: Fraction | None = None


class PipelineTrace(Section):
    """Which run the spans and kernels are of: run ``run`` of the ``phase`` (``timed`` or ``profiled``)."""

    phase: str | None = None
    run: Count | None = None


class PipelineSpan(Section):
    """A trace point of the traced run on one Python thread: µs from the start of the run."""

    name: str
    kind: str | None = None
    thread: Count
    thread_name: str | None = None
    start_us: SignedUs
    duration_us: Us
    depth: Count | None = None
    run: Count | None = None


class PipelineKernel(Section):
    """A model kernel of the traced run on the pipeline's clock, and the layers it ran."""

    name: str
    thread: Count
    start_us: SignedUs
    duration_us: Us
    layers: list[str] = []


class Pipeline(Section):
    """``layerscope pipeline``: a user function around the model, traced
    (``runtimes.onnxruntime.pipeline.pipeline_section`` writes it). ``spans`` and ``kernels`` are those of the one
    traced run (``trace``)."""

    function: str | None = None
    runs: Count | None = None
    warmup: Count | None = None
    interrupted: bool | None = None
    model_calls_per_run: Annotated[float, Field(ge=0, le=1e12)] | None = None
    end_to_end: PipelineStats | None = None
    breakdown: PipelineBreakdown | None = None
    stages: list[PipelineStage] = []
    top: list[PipelineTopItem] = []
    trace: PipelineTrace | None = None
    spans: list[PipelineSpan] = []
    kernels: list[PipelineKernel] = []
    source: str | None = None


# What ``bench --stress`` / ``profile --stress`` write (:func:`layerscope.measure.stress.stress_section`).

#: A ratio of two times (stressed / baseline): non-negative.
TimeRatio = Annotated[float, Field(ge=0, le=1e12)]
#: A (low, high) pair of such ratios, as the rounds range.
TimeRatioRange = Annotated[list[TimeRatio], Field(min_length=2, max_length=2)]
#: Seconds (a duration), non-negative.
Seconds = Annotated[float, Field(ge=0, le=MAX_US / 1e6)]
#: Cores a process kept busy (its CPU time / wall time), or a load average: non-negative.
Cores = Annotated[float, Field(ge=0, le=1e9)]


class StressPair(Section):
    """One round: end-to-end latency without (``baseline``) and with (``stressed``) the stress, the ratio of
    their medians, and the cores this process kept busy in each."""

    baseline: Latency | None = None
    stressed: Latency | None = None
    ratio_p50: TimeRatio | None = None
    baseline_cores_busy: Cores | None = None
    stressed_cores_busy: Cores | None = None


class Stress(Section):
    """The memory-contention experiment: what ran (``processes`` copying 2 x ``buffer_bytes``), the paired
    rounds, the end-to-end and layer-total ratios (medians over the rounds, and their range), the
    memory-sensitive layers and the thresholds and rule that judged them."""

    kind: str | None = None
    processes: Count | None = None
    buffer_bytes: Count | None = None
    llc_bytes: Count | None = None
    streaming_s: Seconds | None = None
    traffic_bytes_per_s: Rate | None = None
    expired: bool | None = None
    load_average_1min: Cores | None = None
    model_threads: Count | None = None
    cores: Count | None = None
    contended_rounds: list[Count] = []
    rounds: list[StressPair] = []
    latency_ratio_p50: TimeRatio | None = None
    latency_ratio_p50_range: TimeRatioRange | None = None
    layer_ratio: TimeRatio | None = None
    layer_ratio_range: TimeRatioRange | None = None
    sensitive_layers: list[str] = []
    min_share: Fraction | None = None
    off_cpu_drop: Fraction | None = None
    rule: str | None = None
    order: str | None = None


# What ``layerscope bisect`` writes (:func:`layerscope.measure.differential.add_bisect`).


class BisectRunner(Section):
    """What timed the models (part of every sample's cache key): ``runner`` ``onnxruntime`` (its version,
    provider, session settings, how a visit is timed, the inputs' digest and the host), ``openvino`` (the same
    with the device, precision and performance hints and streams in place of the provider and opt level) or
    ``command`` (the device command templates and how the latency is read from their output)."""

    runner: str | None = None
    version: str | None = None
    provider: str | None = None
    device: str | None = None
    precision: str | None = None
    performance_hint: str | None = None
    streams: Count | None = None
    threads: Count | None = None
    inter_op_threads: Count | None = None
    opt_level: str | int | None = None
    runs_per_visit: Count | None = None
    visit_statistic: str | None = None
    visit_warmup: Count | None = None
    warm_with: str | None = None
    warmup: Count | None = None
    clock: str | None = None
    #: Visits between fresh compilations (sessions) of a timed model; absent: one per model.
    recompile_every: Count | None = None
    inputs_sha256: str | None = None
    hostname: str | None = None
    cpu: str | None = None
    run_cmd: str | None = None
    compile_cmd: str | None = None
    latency: str | None = None


class BisectBootstrap(Section):
    """How the confidence intervals were drawn (percentile bootstrap over the rounds)."""

    resamples: Count | None = None
    confidence: Fraction | None = None
    seed: int | None = None
    method: str | None = None


class BisectCache(Section):
    """The sample cache: its folder (``null``: ``--no-cache``), samples reused (``hits``) and measured now."""

    dir: str | None = None
    hits: Count | None = None
    misses: Count | None = None


class BisectModel(Section):
    """A timed model: the prefix up to cut ``layers`` (``side`` ``prefix``) or the suffix after it (``suffix``),
    the tensors crossing the cut, its time under the bisect's statistic (``value_us``), its final and pilot
    samples, how many were measured now, and its cut cost (``boundary_*``; ``boundary_us`` ``null``: not
    measured)."""

    layers: Count | None = None
    side: str | None = None
    label: str | None = None
    key: str | None = None
    outputs: list[str] = []
    crossing_bytes: Count | None = None
    breaks_fusion: bool | None = None
    value_us: Us | None = None
    samples_us: list[Us] = []
    pilot_us: list[Us] = []
    measured_now: Count | None = None
    boundary_us: Us | None = None
    boundary_kernels: list[str] = []
    boundary_samples_us: list[Us] = []


class BisectDroppedCut(BisectModel):
    """A cut timed but not reported: its model, its measured cost (``cost_us``), the smaller corrected segment
    beside it when it was dropped (``segment_us``) and the cost's share of it (``null``: that segment was not
    positive)."""

    cost_us: Us | None = None
    segment_us: SignedUs | None = None
    share: Ratio | None = None


class BisectBoundary(Section):
    """How the cuts' own cost was handled: ``corrected`` (measured and subtracted: over ``runs`` profiled runs,
    ``models_with_cost`` of ``models``, the largest and the total) or not, and ``why``; the cuts dropped because
    their cost was more than ``max_share`` of a segment beside them (``dropped``, their models counted in
    ``models``)."""

    corrected: bool | None = None
    why: str | None = None
    method: str | None = None
    runs: Count | None = None
    models: Count | None = None
    models_with_cost: Count | None = None
    max_us: Us | None = None
    total_us: Us | None = None
    max_share: Fraction | None = None
    dropped: list[BisectDroppedCut] = []


class BisectSystematic(Section):
    """A segment's systematic error parts (µs, what more rounds do not shrink): the gap between kernels it
    holds, the cuts at its ends, the cut-cost correction's uncertainty, and the share of the increment set
    for what none of those sees."""

    gap_us: Us | None = None
    cut_us: Us | None = None
    correction_us: Us | None = None
    relative_us: Us | None = None


class BisectSegment(Section):
    """A segment: layer positions ``start`` to ``end`` (exclusive), its layers, estimate, increment with its
    interval (below zero when measured so), whether the interval excludes 0, the rounds it comes from and its
    share of the boundary correction; with ``--validate``, the kernel profile's time (``profile_us``), the
    relative error and its share of the increments. With a systematic part (``intervals.systematic``), the
    interval is both parts together; ``random_ci_*`` is the bootstrap's alone, ``systematic_us`` the systematic
    half-width, ``gap_us`` the time between kernels below it, ``systematic`` the parts."""

    index: Count | None = None
    start: Count | None = None
    end: Count | None = None
    first_layer: str | None = None
    last_layer: str | None = None
    layers: list[str] = []
    est_us: Us | None = None
    increment_us: SignedUs | None = None
    ci_low_us: SignedUs | None = None
    ci_high_us: SignedUs | None = None
    significant: bool | None = None
    negative: bool | None = None
    samples: Count | None = None
    boundary_us: SignedUs | None = None
    random_ci_low_us: SignedUs | None = None
    random_ci_high_us: SignedUs | None = None
    systematic_us: Us | None = None
    gap_us: Us | None = None
    systematic: BisectSystematic | None = None
    profile_us: Us | None = None
    error: Ratio | None = None
    share: Ratio | None = None


class BisectValidation(Section):
    """``--validate``: the kernel profile the segments were checked against (``runs`` profiled runs in
    ``profiles`` parts), its whole-model latency, and the segments' sum plus the baseline against it."""

    method: str | None = None
    runs: Count | None = None
    profiles: Count | None = None
    statistic: str | None = None
    profile_latency_us: Us | None = None
    profile_latency_p50_us: Us | None = None
    sum_vs_profile_latency: Ratio | None = None


class BisectIntervals(Section):
    """How a segment's stated interval is made: the bootstrap's alone (``systematic`` false) or widened by a
    systematic part (the share ``relative`` of the increment, half the prefixes' and suffixes' ``closure_us`` per
    cut, ``correction_uncertainty`` of the cut-cost correction, and below, the gap between kernels: its total,
    share of a run, kernels and per-kernel time)."""

    method: str | None = None
    confidence: Fraction | None = None
    systematic: bool | None = None
    relative: Ratio | None = None
    correction_uncertainty: Ratio | None = None
    closure_us: SignedUs | None = None
    per_cut_us: Us | None = None
    gap_us: Us | None = None
    gap_share: Fraction | None = None
    gap_kernels: Count | None = None
    gap_per_kernel_us: Us | None = None


class Bisect(Section):
    """Differential timing: the plan (granularity, rounds, pilot, budget, refinements), the statistic and
    bootstrap, the runs and cache, the whole model and baseline times, the segments and their sum with its
    interval, every timed model (prefixes, suffixes from cut ``meet`` on), the cut-cost correction and, with
    ``--validate``, the check against a kernel profile."""

    method: str | None = None
    granularity: str | None = None
    runner: BisectRunner | None = None
    repeats: Count | None = None
    repeats_min: Count | None = None
    rounds_s: Seconds | None = None
    max_ci: Fraction | None = None
    resolve_share: Fraction | None = None
    resolve_from: Count | None = None
    resolve_from_widest: Ratio | None = None
    resolve_widest: Ratio | None = None
    pilot: Count | None = None
    budget_runs: Count | None = None
    refinements: Count | None = None
    baseline: bool | None = None
    statistic: str | None = None
    bootstrap: BisectBootstrap | None = None
    pilot_runs: Count | None = None
    runs: Count | None = None
    runs_measured: Count | None = None
    runs_cached: Count | None = None
    cache: BisectCache | None = None
    full_us: Us | None = None
    baseline_us: Us | None = None
    sum_segments_us: SignedUs | None = None
    sum_ci_low_us: SignedUs | None = None
    sum_ci_high_us: SignedUs | None = None
    prefixes: list[BisectModel] = []
    suffixes: list[BisectModel] = []
    meet: Count | None = None
    suffix_baseline_us: Us | None = None
    boundary: BisectBoundary | None = None
    intervals: BisectIntervals | None = None
    segments: list[BisectSegment] = []
    validation: BisectValidation | None = None


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


class PredictorContext(Section):
    """The in-model context the predictor fitted to whole calibration models: predicted = ``factor`` x a kernel's
    time alone + ``per_kernel_us``, from ``models`` models, when ``applied`` (absent: applied)."""

    factor: Annotated[float, Field(ge=0, le=1e6)] = 1.0
    per_kernel_us: SignedUs = 0.0
    models: Count = 0
    #: whether this model's prediction used it: the fit transfers and the model lies inside the calibration models'
    #: range (kernel count, median kernel time alone, kernels' summed time alone)
    applied: bool | None = None
    #: why it was or was not applied to this model
    why: str | None = None
    #: whether the fit passed its leave-one-model-out check over the calibration models
    transfers: bool | None = None


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
    context: PredictorContext | None = None


class RunFile(Section):
    """A whole run file (``schema_version`` 2). ``model``, ``layers`` and ``summary`` are required."""

    schema_version: Literal[2]
    tool: Tool | None = None
    model: ModelInfo
    target: Target | None = None
    estimate_info: EstimateInfo | None = None
    layers: RowList[Layer]
    folded: list[str] = []
    unknown_ops: list[UnknownOp] = []
    summary: Summary
    kernels: list[Kernel] = []
    measurement: Measurement | None = None
    latency: Latency | None = None
    bench_sweep: BenchSweep | None = None
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
    def from_json(cls, data: dict[str, Any]) -> "RunFile":
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
    def k_factor(self) -> "KFactor | None":
        """k of this run and what it covers (:func:`layerscope.runfile.derived.scale_factor`, the one
        definition); ``None`` when no part is both estimated and measured."""
        from layerscope.runfile.derived import scale_factor

        return scale_factor(self)

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

        return end_to_end_us(self)

    @property
    def target_or_empty(self) -> Target:
        """The ``target`` section, an empty one when the run has none."""
        return self.target if self.target is not None else Target()



#: What readers accept: the typed run, or its JSON document (converted once with
#: :func:`layerscope.runfile.io.as_run`).
RunLike = RunFile | Mapping[str, Any]
