"""What the static model says of each layer on one hardware profile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from layerscope.costs.types import LayerCost


class Bound(StrEnum):
    """What limits a layer in the roofline model."""

    COMPUTE = "compute"
    BANDWIDTH = "bandwidth"
    OVERHEAD = "overhead"
    NONE = "none"  # zero-copy: a view, no work


@dataclass(frozen=True, slots=True)
class LayerEstimate:
    """Estimated time of one layer on one profile. An estimate, never a measurement.

    ``compute_us`` on ``unit``; ``load_us``/``store_us`` for the DDR traffic ``ddr_read_bytes`` /
    ``ddr_write_bytes`` at the deployed ``dtype``; ``latency_us`` = max(compute, load + store)
    + ``overhead_us`` (DMA overlaps compute, load and store share DDR). ``fallback_reason`` is set
    when the profile runs the layer on the CPU; ``weight_passes`` > 1 when its weights exceed the
    on-chip SRAM and are streamed in that many passes, each reloading the input activations.
    """

    layer_id: str
    unit: str
    dtype: str
    compute_us: float
    load_us: float
    store_us: float
    overhead_us: float
    latency_us: float
    bound: Bound
    ddr_read_bytes: int
    ddr_write_bytes: int
    weight_passes: int = 1
    fallback_reason: str | None = None


@dataclass(frozen=True)
class SharedWeight:
    """One tensor of the model that several accelerator layers read, and how the estimate loads it.

    ``identity``: the tensor (:func:`layerscope.costs.weights.weight_identities`); ``layer_ids``: its readers, in
    order; ``nbytes``: its whole size at the deployed dtype; ``resident``: loaded from DDR once per inference (kept
    on chip from its first reader to its last), else by every reader; ``per_use_bytes``: what its readers read of it
    (each read counted), ``ddr_read_bytes``: what the estimate loads of it from DDR (``per_use_bytes`` unless
    resident).
    """

    identity: str
    layer_ids: tuple[str, ...]
    nbytes: int
    resident: bool
    per_use_bytes: int
    ddr_read_bytes: int


@dataclass(frozen=True)
class SharedWeightPlan:
    """How the estimate loads the weights several accelerator layers read (:func:`plan_shared_weights`).

    ``budget_bytes``: the on-chip bytes for weights (:attr:`Profile.weight_budget_bytes`: by default half the
    profile's ``sram_bytes``); ``loads``: for each layer
    reading a resident weight, by constant name, the bytes it loads from DDR (what it reads of the tensor that its
    earlier readers did not load: 0 once the whole tensor is on chip).
    """

    weights: tuple[SharedWeight, ...] = ()
    budget_bytes: int = 0
    loads: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def resident(self) -> tuple[SharedWeight, ...]:
        return tuple(w for w in self.weights if w.resident)

    @property
    def reader_count(self) -> int:
        """Layers that read at least one shared weight."""
        return len({layer for w in self.weights for layer in w.layer_ids})

    @property
    def ddr_bytes_saved(self) -> int:
        """The DDR reads the resident weights save against loading every shared weight at every use."""
        return sum(w.per_use_bytes - w.ddr_read_bytes for w in self.weights)


@dataclass(frozen=True)
class Estimate:
    """A whole model's estimate on one profile: per layer, in graph order, and the totals.

    ``resident``: the activations the residency policy kept on chip (``None`` when not recorded), so that the
    timeline's memory plan does not work them out again; ``fused``: those of them never written anywhere, because
    the compiler fuses their readers into their producer (``fuse_elementwise``): the memory plan holds no buffer for
    them; ``absorbed``: the ids of the activation layers another layer runs (:func:`layerscope.estimator.roofline.
    absorbed_activations`), estimated as no time: the layer that runs one writes its outputs, so the memory plan
    holds them as it holds any layer's. ``task_overhead_us``: the cost of one inference outside every layer, part of
    :attr:`latency_us`: the profile's fixed ``task_overhead_us`` and the runtime's hand-over of the model's outputs
    (:func:`layerscope.estimator.roofline.output_conversion_us`), the latter also alone in ``output_handover_us``
    (0 with ``quantized_outputs``: the model deployed without its output Dequantize nodes, estimated so).
    ``shared_weights``: how the estimate loaded the weights several accelerator layers read
    (:func:`layerscope.estimator.roofline.plan_shared_weights`; ``None`` when not recorded).
    """

    profile_name: str
    dtype: str
    layers: tuple[LayerEstimate, ...]
    costs: tuple[LayerCost, ...]
    resident: frozenset[str] | None = field(default=None, repr=False, compare=False)
    task_overhead_us: float = 0.0
    fused: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    output_handover_us: float = 0.0
    quantized_outputs: bool = False
    absorbed: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    shared_weights: SharedWeightPlan | None = field(default=None, repr=False, compare=False)

    @property
    def layers_us(self) -> float:
        """Layers run one after another in this model (no inter-layer overlap)."""
        return sum(e.latency_us for e in self.layers)

    @property
    def latency_us(self) -> float:
        """The layers' time and the profile's per-inference ``task_overhead_us``."""
        return self.layers_us + self.task_overhead_us

    @property
    def ddr_bytes(self) -> int:
        return sum(e.ddr_read_bytes + e.ddr_write_bytes for e in self.layers)

    @property
    def fallback_count(self) -> int:
        return sum(1 for e in self.layers if e.fallback_reason)
