"""The hardware profile types: what a target can compute, how fast, and what it cannot run.

Contract:
- Every rate is an aggregate over the whole device (all of ``Profile.cores`` together), in
  operations per second where one multiply-accumulate counts as 2 operations.
- Bandwidths are bytes per second; overheads are microseconds; sizes are bytes.
- ``efficiency`` fields are the attainable fraction of the peak in (0, 1]; they are documented
  assumptions (or measurements) recorded in ``Profile.sources``.
- Instances are immutable and always valid: ``targets.schema`` validates every field before one is
  built, so code that receives a ``Profile`` never re-checks it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from layerscope.costs.types import UnitKind

#: The target name of this machine's CPU, measured on first use (:mod:`layerscope.targets.host`).
HOST_NAME = "host"

#: dtype names a profile may use as keys of ``peak_ops_per_s`` and in ``dtypes``.
KNOWN_DTYPES: tuple[str, ...] = (
    "int4",
    "int8",
    "uint8",
    "int16",
    "int32",
    "fp8",
    "fp16",
    "bf16",
    "tf32",
    "fp32",
    "fp64",
)

#: numpy dtype names (as ``TensorInfo.dtype`` and ``LayerCost.dtype`` carry them) -> profile names.
_NUMPY_TO_PROFILE: Mapping[str, str] = MappingProxyType(
    {
        "float64": "fp64",
        "float32": "fp32",
        "float16": "fp16",
        "bfloat16": "bf16",
        "float8": "fp8",
        "uint4": "int4",
    }
)

#: The documented fallback when a unit lists no rate for a dtype: try these, in order; if none is
#: listed either, use the slowest rate the unit lists (a pessimistic but never-zero answer).
#: Why each: a 16-bit integer path usually shares the half-precision datapath (or runs the int8
#: array at half rate, which the fp16 rate approximates); sub-byte and unsigned integers run on the
#: int8 path; bf16 shares the fp16 datapath; tf32 is an fp32 input format; int32 arithmetic runs at
#: roughly the fp32 rate on CPUs and GPUs; fp16 without native support is computed in fp32.
DTYPE_FALLBACKS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "int16": ("fp16", "int8"),
        "uint8": ("int8",),
        "int4": ("int8",),
        "fp8": ("fp16", "int8"),
        "bf16": ("fp16",),
        "tf32": ("fp32",),
        "int32": ("fp32",),
        "fp16": ("fp32",),
        "fp64": ("fp32",),
    }
)

#: Kinds that compute (as opposed to moving data); only units with one count toward peak figures.
COMPUTE_KINDS: frozenset[UnitKind] = frozenset(
    {UnitKind.TENSOR, UnitKind.VECTOR, UnitKind.AUX, UnitKind.SCALAR}
)

#: The values of ``Profile.kind``.
PROFILE_KINDS: tuple[str, ...] = ("npu", "gpu", "cpu")


def normalize_dtype(dtype: str) -> str:
    """Map a numpy dtype name (``"float16"``) or a profile dtype name (``"fp16"``) to the latter."""
    name = dtype.strip().lower()
    return _NUMPY_TO_PROFILE.get(name, name)


@dataclass(frozen=True)
class ComputeUnit:
    """One compute engine of a target (e.g. Horizon's TAE, an NVIDIA tensor core, a CPU's SIMD).

    ``kinds``: the layer kinds it runs. ``peak_ops_per_s``: dtype -> aggregate peak (1 MAC = 2 ops),
    every value positive, at least one entry. ``efficiency``: attainable fraction of the peak.
    ``overhead_us``: fixed cost per layer (dispatch, instruction setup).
    """

    name: str
    kinds: tuple[UnitKind, ...]
    peak_ops_per_s: Mapping[str, float]
    efficiency: float
    overhead_us: float

    def __hash__(self) -> int:
        # Explicit because the rate mapping is not hashable; consistent with the generated __eq__.
        peaks = tuple(sorted(self.peak_ops_per_s.items()))
        return hash((self.name, self.kinds, peaks, self.efficiency, self.overhead_us))

    def ops_per_s(self, dtype: str) -> float:
        """Peak ops/s for ``dtype`` (numpy or profile spelling); never 0.

        The exact dtype if listed; else the first listed entry of ``DTYPE_FALLBACKS[dtype]``; else
        the slowest rate the unit lists.
        """
        name = normalize_dtype(dtype)
        if name in self.peak_ops_per_s:
            return self.peak_ops_per_s[name]
        for alias in DTYPE_FALLBACKS.get(name, ()):
            if alias in self.peak_ops_per_s:
                return self.peak_ops_per_s[alias]
        return min(self.peak_ops_per_s.values())

    def supports(self, dtype: str) -> bool:
        """Whether the unit lists a rate for exactly this dtype (no fallback)."""
        return normalize_dtype(dtype) in self.peak_ops_per_s

    def attainable_ops_per_s(self, dtype: str) -> float:
        """``ops_per_s(dtype) * efficiency``: what a well-shaped layer can expect."""
        return self.ops_per_s(dtype) * self.efficiency


@dataclass(frozen=True)
class FallbackRule:
    """A layer the accelerator does not run: it falls back to ``Profile.cpu``.

    ``op_type`` is an ONNX op type, or ``"*"`` for any op. ``condition`` names a predicate
    registered in ``targets.rules.PREDICATES``; ``None`` means always. ``reason`` is plain text for a
    deployment engineer (what the hardware cannot do and where the layer runs instead).
    """

    op_type: str
    condition: str | None
    reason: str

    def matches_op(self, op_type: str) -> bool:
        return self.op_type in ("*", op_type)


@dataclass(frozen=True)
class Profile:
    """A hardware target as data. See the module docstring for units and invariants.

    ``cpu``: the host CPU that fallback layers run on (for a ``cpu`` profile, its own unit).
    ``sources``: dotted field name (``"units.TAE.peak_ops_per_s.int8"``,
    ``"ddr_bandwidth_bytes_per_s"``) -> a source URL/document, ``"measured: ..."`` or
    ``"assumption: why"``; a parent key (``"cpu.peak_ops_per_s"``) covers its children.
    ``op_efficiency``: ONNX op type (``"LRN"``, exactly as ``Node.op_type`` spells it, domain left
    out) -> a positive, finite multiplier on the attainable rate of whichever unit runs a layer of
    that op type. A layer's compute time is
    ``ops / (unit.ops_per_s(dtype) * unit.efficiency * efficiency_for(op_type))``: ``0.5`` doubles
    it, ``2.0`` halves it (values above 1 are allowed: an op the runtime implements better than the
    unit's typical layer; the product may then exceed the unit's peak). It scales compute only,
    never DDR traffic or overheads, and applies to layers on the profile's units -- not to layers
    a fallback rule sends to ``cpu``, whose efficiency for an op is another machine's. Op types
    not listed have multiplier 1 (the default, empty table: the unit's efficiency alone).
    ``ddr_nominal_bytes_per_s``: the DDR bandwidth the vendor states for the part (its theoretical peak, e.g.
    6400 MT/s x 96 bit = 76.8 GB/s on the RDK S100), which its own tools scale bandwidth charts to; ``None``
    where no vendor states one. Reports only: estimates use ``attainable_ddr_bytes_per_s``. A profile that
    gives it also gives its source.
    ``fuse_elementwise``: the target's compiler fuses element-wise layers into the layer that produces their
    input (an NPU compiler runs a convolution's activation, its SiLU's Sigmoid and Mul, a residual Add in the
    convolution's pipeline): an accelerator tensor whose every reader is an element-wise accelerator layer among
    the next :data:`layerscope.estimator.roofline.FUSION_WINDOW` layers stays on chip whatever its size.
    ``plan_sram``: the compiler plans on-chip memory over the whole graph: an activation stays on chip, from its
    producer to its last reader, whenever it fits half the SRAM beside the activations kept there already (else
    only an activation whose one reader is the next layer, and that fits half the SRAM alone, stays on chip).
    ``stream_bytes_per_s`` (with ``plan_sram``): the compiler streams a feature map too large for its half of the
    SRAM from its producer to its reader in tiles when every reader is the next layer
    (:data:`layerscope.estimator.roofline.STREAM_WINDOW`): it never goes to DDR, and its bytes, written and read,
    move through on-chip memory at this rate (tiling, halo and re-layout), in the layers' memory time; ``None``: such
    a feature map spills to DDR.
    ``weight_sram_bytes``: the on-chip bytes one layer's weights may take (:attr:`weight_budget_bytes`); a layer
    whose weights exceed them loads them in passes, each reloading its input activations; ``None``: the half of
    ``sram_bytes`` that the activations do not take.
    ``weight_ddr_efficiency``: the share of ``ddr_bandwidth_bytes_per_s`` that loading a layer's weights attains
    (an NPU streams weights through its own DMA path, at another efficiency than feature maps); ``None``: the
    ``ddr_efficiency`` of every other transfer.
    ``task_overhead_us``: the fixed cost of one inference outside every layer (the device runtime submits the
    accelerator's task and collects its result), added once to a model's estimate; 0 where it is negligible.
    ``output_bytes_per_s``: the rate, in bytes/s of the model's outputs as float32, at which the device runtime
    hands the outputs to the caller after the accelerator finishes (it dequantizes them to float32 on the CPU): each
    inference adds the outputs' float32 bytes / this rate to ``task_overhead_us``
    (:func:`layerscope.estimator.roofline.output_conversion_us`); ``None``: no such per-inference cost.
    ``activation_matmul_ns_per_element``: ns an accelerator adds per output element of a matrix product of two
    activations (an attention's scores and their weighted sum: a MatMul none of whose inputs is a weight,
    :func:`layerscope.estimator.roofline.activation_matmul_elements`), beside its roofline time (both operands
    arrive as feature maps in the accelerator's layout and one of them is re-laid out for the product); 0: none.
    ``layout_transpose_efficiency``: the multiplier a layout Transpose (a 4-D Transpose that moves the channel axis
    to or from the last position for a normalisation over that axis,
    :func:`layerscope.estimator.layout.layout_transposes`) takes on its unit's attainable rate, in place of
    ``op_efficiency["Transpose"]`` (an accelerator that stores channels innermost holds both layouts in the same
    order); ``None``: such a Transpose is priced as any other. Accelerator profiles only.
    ``weight_dtype``: the widest dtype the accelerator stores a float weight at: a model deployed at a wider dtype
    (int16 feature maps) still loads and holds its weights at this one
    (:func:`layerscope.estimator.roofline.weight_float_bytes`); ``None``:
    weights at the deployed dtype, as the feature maps.
    ``feature_map_alignment`` (accelerator profiles): the layouts the accelerator may store a 4-D (N, C, H, W) feature
    map in, each as (W multiple, C multiple) its W and C axes are padded to; a tensor takes the layout with the fewest
    padded elements (:meth:`laid_out_elements`), and the per-element costs priced beside the roofline (a
    data-movement or auxiliary layer's one op per output element, ``activation_matmul_ns_per_element``) count those
    padded elements; empty: every tensor as its elements.
    ``cache_bytes_per_s`` (CPU profiles): the bytes/s at which a CPU moves an activation that its caches hold (at
    most half of ``sram_bytes``, the cache the cores may use), read and written bytes counted; ``None``: such an
    activation moves at the DRAM bandwidth like every other (:func:`layerscope.estimator.roofline.cpu_cached_bytes`).
    """

    name: str
    description: str
    kind: str
    source_path: str
    units: tuple[ComputeUnit, ...]
    cpu: ComputeUnit
    ddr_bandwidth_bytes_per_s: float
    ddr_efficiency: float
    cpu_ddr_bandwidth_bytes_per_s: float
    transfer_overhead_us: float
    sram_bytes: int
    cores: int
    clock_hz: float
    default_dtype: str
    dtypes: tuple[str, ...]
    lane_width: int
    fallback_rules: tuple[FallbackRule, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)
    op_efficiency: Mapping[str, float] = field(default_factory=dict)
    ddr_nominal_bytes_per_s: float | None = None
    fuse_elementwise: bool = False
    plan_sram: bool = False
    stream_bytes_per_s: float | None = None
    weight_sram_bytes: int | None = None
    task_overhead_us: float = 0.0
    output_bytes_per_s: float | None = None
    weight_ddr_efficiency: float | None = None
    activation_matmul_ns_per_element: float = 0.0
    layout_transpose_efficiency: float | None = None
    weight_dtype: str | None = None
    feature_map_alignment: tuple[tuple[int, int], ...] = ()
    # host (CPU) profiles
    cache_bytes_per_s: float | None = None

    def __hash__(self) -> int:
        # Explicit because ``sources`` is a mapping; equal profiles agree on these fields.
        return hash((self.name, self.kind, self.source_path, self.description, self.units, self.cpu))

    @property
    def weight_budget_bytes(self) -> int:
        """The on-chip bytes for weights: ``weight_sram_bytes`` (never more than ``sram_bytes``: a profile without
        on-chip memory keeps no weight there), else half of ``sram_bytes``."""
        return self.sram_bytes // 2 if self.weight_sram_bytes is None else min(self.weight_sram_bytes, self.sram_bytes)

    def laid_out_elements(self, shape: Sequence[int]) -> int:
        """Elements a feature map of ``shape`` takes as the accelerator lays it out: for a 4-D (N, C, H, W) shape
        and a profile with ``feature_map_alignment``, the fewest over its layouts of N x C and W rounded up to the
        layout's multiples x H; otherwise the product of ``shape``."""
        elements = math.prod(shape)
        if len(shape) != 4 or not self.feature_map_alignment or elements == 0:
            return elements
        n, c, h, w = shape
        return min(n * -(-c // c_mult) * c_mult * h * -(-w // w_mult) * w_mult
                   for w_mult, c_mult in self.feature_map_alignment)

    def efficiency_for(self, op_type: str) -> float:
        """The multiplier ``op_efficiency`` gives ``op_type``'s attainable rate; 1.0 when not listed."""
        return self.op_efficiency.get(op_type, 1.0)

    def unit_for(self, kind: UnitKind, dtype: str | None = None) -> ComputeUnit:
        """The unit that runs layers of ``kind``.

        Without ``dtype``: the first unit listing ``kind``. With ``dtype``: the first unit listing
        ``kind`` that has an exact rate for ``dtype`` (so fp32 vector work on a BPU goes to the
        unit that actually does fp32), else the first unit listing ``kind``. No unit lists it:
        ``cpu``.
        """
        candidates = [u for u in self.units if kind in u.kinds]
        if dtype is not None:
            for unit in candidates:
                if unit.supports(dtype):
                    return unit
        return candidates[0] if candidates else self.cpu

    def unit(self, name: str) -> ComputeUnit:
        """The unit called ``name`` (the CPU included); ``KeyError`` if there is none."""
        for unit in (*self.units, self.cpu):
            if unit.name == name:
                return unit
        raise KeyError(name)

    def peak_ops_per_s(self, dtype: str) -> float | None:
        """The fastest exact rate a computing accelerator unit lists for ``dtype``; ``None`` if none.

        Units that only move data (``move``/``zero_copy``) do not count. For a ``cpu`` profile the
        CPU unit counts as the accelerator.
        """
        name = normalize_dtype(dtype)
        units = self.units if self.kind != "cpu" else (*self.units, self.cpu)
        rates = [
            u.peak_ops_per_s[name]
            for u in units
            if name in u.peak_ops_per_s and COMPUTE_KINDS.intersection(u.kinds)
        ]
        return max(rates) if rates else None

    @property
    def attainable_ddr_bytes_per_s(self) -> float:
        return self.ddr_bandwidth_bytes_per_s * self.ddr_efficiency

    @property
    def attainable_weight_ddr_bytes_per_s(self) -> float:
        """The DDR bandwidth, in bytes/s, at which a layer's weights load (``weight_ddr_efficiency``, else
        ``ddr_efficiency``)."""
        efficiency = self.ddr_efficiency if self.weight_ddr_efficiency is None else self.weight_ddr_efficiency
        return self.ddr_bandwidth_bytes_per_s * efficiency

    def source_for(self, dotted: str) -> str | None:
        """The source of a field, looking up parent keys (``a.b.c``, then ``a.b``, then ``a``)."""
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            key = ".".join(parts[:end])
            if key in self.sources:
                return self.sources[key]
        return None


@dataclass(frozen=True)
class ProfileSummary:
    """One row of ``list_profiles()``: enough to choose a target without loading its rules.

    Peaks are the fastest exact rate for that dtype (``None``: no unit lists it). For the host
    target before its first measurement, ``measured_on_first_use`` is True and the numbers are
    ``None``.
    """

    name: str
    kind: str
    description: str
    peak_int8_ops_per_s: float | None
    peak_fp16_ops_per_s: float | None
    peak_fp32_ops_per_s: float | None
    ddr_bandwidth_bytes_per_s: float | None
    sram_bytes: int | None
    cores: int | None
    source_path: str
    measured_on_first_use: bool = False

    @classmethod
    def of(cls, profile: Profile) -> ProfileSummary:
        return cls(
            name=profile.name,
            kind=profile.kind,
            description=profile.description,
            peak_int8_ops_per_s=profile.peak_ops_per_s("int8"),
            peak_fp16_ops_per_s=profile.peak_ops_per_s("fp16"),
            peak_fp32_ops_per_s=profile.peak_ops_per_s("fp32"),
            ddr_bandwidth_bytes_per_s=profile.ddr_bandwidth_bytes_per_s,
            sram_bytes=profile.sram_bytes,
            cores=profile.cores,
            source_path=profile.source_path,
        )
