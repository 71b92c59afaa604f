"""Recurrent layers: LSTM, GRU, RNN, over every time step, direction and batch element.

Shapes (ONNX): X is (seq, batch, I), or (batch, seq, I) with ``layout=1``; W is
(directions, gates·H, I); R is (directions, gates·H, H); B is (directions, 2·gates·H); LSTM's
peephole P is (directions, 3·H). Per step, direction and batch element:

- MACs = gates·H·(I + H): LSTM 4·H·(I+H) (+ 3·H peephole multiplies), GRU 3·H·(I+H), RNN H·(I+H);
- elementwise FLOPs, default activations (sigmoid, tanh) assumed:
  LSTM 3 sigmoid gates + tanh candidate + cell update c = f⊙c + i⊙g (3) + h = o⊙tanh(c) (2) = 15·H;
  GRU 2 sigmoid gates + r⊙(·) + tanh + h = (1-z)⊙h̃ + z⊙h (4) = 12·H; RNN tanh = H;
  plus, with B, the two bias vectors added to the gate pre-activations: 2·gates·H adds.

Totals are × seq_len × directions × batch (every sequence assumed full length: ``sequence_lens``
is a runtime input).
"""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.costs._common import CostFn, CostTable, has_input, in_shape, layer_cost, table
from layerscope.costs.elementwise import SIGMOID
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

TANH = 1


@dataclass(frozen=True)
class CellSpec:
    """One recurrent cell: gate count and elementwise FLOPs per hidden unit per step."""

    gates: int
    elementwise_per_hidden: int
    has_peepholes: bool


LSTM = CellSpec(gates=4, elementwise_per_hidden=3 * SIGMOID + TANH + 3 + (TANH + 1), has_peepholes=True)
GRU = CellSpec(gates=3, elementwise_per_hidden=2 * SIGMOID + 1 + TANH + 4, has_peepholes=False)
RNN = CellSpec(gates=1, elementwise_per_hidden=TANH, has_peepholes=False)

#: Learned inputs: W, R, B and LSTM's P (positions 1, 2, 3, 7); initial states are not learned.
LEARNED = (1, 2, 3, 7)


@dataclass(frozen=True)
class RecurrentDims:
    seq_len: int
    batch: int
    directions: int
    input_size: int
    hidden: int


def recurrent_dims(node: Node, graph: Graph) -> RecurrentDims:
    """Sequence length, batch, directions, input and hidden sizes from X, W and R."""
    x = in_shape(node, graph, 0)
    w = in_shape(node, graph, 1)
    r = in_shape(node, graph, 2)
    seq_len, batch = (x[1], x[0]) if int(node.attr("layout", 0)) == 1 else (x[0], x[1])
    hidden = int(node.attr("hidden_size", 0)) or r[-1]
    return RecurrentDims(seq_len=seq_len, batch=batch, directions=w[0], input_size=w[-1], hidden=hidden)


def recurrent_counts(spec: CellSpec, d: RecurrentDims, *, peepholes: bool, bias: bool) -> tuple[int, int]:
    """(MACs, FLOPs) of a recurrent layer over every step, direction and batch element (see the module
    docstring): ``peepholes`` adds LSTM's 3·H peephole multiplies per step, ``bias`` the 2·gates·H bias adds."""
    macs_per_step = spec.gates * d.hidden * (d.input_size + d.hidden)
    if spec.has_peepholes and peepholes:
        macs_per_step += 3 * d.hidden
    elementwise_per_step = spec.elementwise_per_hidden * d.hidden
    if bias:
        elementwise_per_step += 2 * spec.gates * d.hidden
    steps = d.seq_len * d.directions * d.batch
    macs = macs_per_step * steps
    return macs, 2 * macs + elementwise_per_step * steps


def _recurrent(spec: CellSpec) -> CostFn:
    def cost(node: Node, graph: Graph) -> LayerCost:
        macs, flops = recurrent_counts(spec, recurrent_dims(node, graph), peepholes=has_input(node, 7),
                                       bias=has_input(node, 3))
        return layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops, params_from=LEARNED)

    return cost


COSTS: CostTable = {
    **table(("LSTM",), _recurrent(LSTM)),
    **table(("GRU",), _recurrent(GRU)),
    **table(("RNN",), _recurrent(RNN)),
}
