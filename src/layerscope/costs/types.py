"""What the cost model says of one layer, independent of any hardware."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum


class UnitKind(StrEnum):
    """The kind of hardware unit a layer runs on. Profiles map each kind to a concrete unit.

    - ``tensor``: conv / matrix engines (Conv, Gemm, MatMul, ConvTranspose, Einsum, RNNs)
    - ``vector``: elementwise arithmetic and activations, normalization, softmax, reductions
    - ``aux``: pooling, resize, warp (Horizon's AAE does these)
    - ``move``: data movement: transpose, concat, split, slice, pad, gather, scatter, tile
    - ``zero_copy``: reshape, flatten, squeeze, unsqueeze, identity, dropout at inference
    - ``scalar``: control-like or irregular ops: TopK, NMS, ArgMax, NonZero, shape arithmetic
    """

    TENSOR = "tensor"
    VECTOR = "vector"
    AUX = "aux"
    MOVE = "move"
    ZERO_COPY = "zero_copy"
    SCALAR = "scalar"


@dataclass(frozen=True, slots=True)
class LayerCost:
    """Hardware-independent cost of one layer.

    Counts are per inference of the whole model. ``macs`` counts multiply-accumulates of the
    tensor engine kind (Conv, Gemm, MatMul, ...); ``flops`` counts every floating/integer
    arithmetic operation (2 per MAC, plus elementwise work). Bytes are in the model's own
    dtypes: ``bytes_read_act`` activations read (graph inputs and other layers' outputs),
    ``bytes_read_weight`` constants read (initializers and folded constants),
    ``bytes_written`` outputs written. ``known`` is False when no cost function exists for the
    op: then only bytes are counted and ``flops`` is an elementwise guess (one per output element).
    ``chained_loads``: loads each of which needs the value the previous one brought (a tree ensemble's node visits:
    the next node's index is in the node just read), per inference; their latency, not the unit's rate, bounds the
    layer (:mod:`layerscope.estimator.roofline`); ``chained_bytes``: the bytes those loads range over (the node
    arrays), which decide how many of them hit a cache.
    """

    layer_id: str
    op_type: str
    unit_kind: UnitKind
    macs: int
    flops: int
    bytes_read_act: int
    bytes_read_weight: int
    bytes_written: int
    params: int
    dtype: str
    known: bool = True
    chained_loads: int = 0
    chained_bytes: int = 0

    def renamed(self, layer_id: str) -> LayerCost:
        """This cost under ``layer_id`` (equal to ``dataclasses.replace(self, layer_id=layer_id)``), built without
        ``__init__``: a big model has 100k layers of a few kinds."""
        cost = _new(LayerCost)
        _set_layer_id(cost, layer_id)
        _set_op_type(cost, self.op_type)
        _set_unit_kind(cost, self.unit_kind)
        _set_macs(cost, self.macs)
        _set_flops(cost, self.flops)
        _set_bytes_read_act(cost, self.bytes_read_act)
        _set_bytes_read_weight(cost, self.bytes_read_weight)
        _set_bytes_written(cost, self.bytes_written)
        _set_params(cost, self.params)
        _set_dtype(cost, self.dtype)
        _set_known(cost, self.known)
        _set_chained_loads(cost, self.chained_loads)
        _set_chained_bytes(cost, self.chained_bytes)
        return cost

    @property
    def bytes_read(self) -> int:
        return self.bytes_read_act + self.bytes_read_weight

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (model dtypes); 0 when nothing is moved."""
        return self.flops / self.bytes_total if self.bytes_total else 0.0


_new = object.__new__
#: The setters of LayerCost's slots, in field order: a frozen instance's fields are set through them, as
#: ``object.__setattr__`` does after looking each up by name.
(_set_layer_id, _set_op_type, _set_unit_kind, _set_macs, _set_flops, _set_bytes_read_act, _set_bytes_read_weight,
 _set_bytes_written, _set_params, _set_dtype,
 _set_known, _set_chained_loads, _set_chained_bytes) = (getattr(LayerCost, f.name).__set__ for f in fields(LayerCost))
