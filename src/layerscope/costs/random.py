"""Random generators: RandomNormal, RandomNormalLike, RandomUniform, RandomUniformLike, Bernoulli, Multinomial.

Sources: the ONNX operator specs (onnx/docs/Operators.md). The ``*Like`` ops and Bernoulli take only their
input's shape and dtype, or its probabilities; RandomNormal and RandomUniform have no input (their ``shape``
attribute fixes the output, which the loader resolved). Per output element (counting convention of
:mod:`layerscope.costs.elementwise`, one elementary operation = 1 FLOP):

- one draw of the generator's state = 1 (a counter-based generator step; assumption);
- uniform in [low, high): draw + convert to float + scale + shift = :data:`UNIFORM` = 4;
- normal by Box-Muller, two normals from two uniforms: per element one uniform (4) + half of log, sqrt,
  multiply by -2, cos/sin (4 / 2 = 2) + scale and mean (2) = :data:`NORMAL` = 8 (assumption: the
  implementation's transform; a ziggurat sampler is cheaper on average);
- Bernoulli: a uniform draw compared with the probability: :data:`BERNOULLI` = UNIFORM + 1.

The work is the same every run; the values are not (see the model's ``seed`` attributes).
"""

from __future__ import annotations

import math

from layerscope.costs._common import CostFn, CostTable, in_shape, layer_cost, out_elements, table, tensor_only
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

#: One uniform variate: generator step + int-to-float + scale + shift.
UNIFORM = 4
#: One normal variate (Box-Muller, see the module docstring).
NORMAL = UNIFORM + 2 + 2
#: One Bernoulli variate: a uniform compared with its probability.
BERNOULLI = UNIFORM + 1

#: The ONNX random generators (domain ``""``): every op of this family.
RANDOM_OPS: frozenset[str] = frozenset({
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial",
})


def _draw(per_element: int, *, reads_data: bool) -> CostFn:
    """A generator of ``per_element`` FLOPs per output element; ``reads_data=False``: the ``*Like`` ops read only
    their input's shape, never its values."""
    @tensor_only
    def cost(node: Node, graph: Graph) -> LayerCost:
        return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * per_element,
                          params_from=(), reads_data=reads_data)

    return cost


@tensor_only
def _multinomial(node: Node, graph: Graph) -> LayerCost:
    """Multinomial(input (batch, classes) unnormalized log-probabilities) -> (batch, sample_size).

    Per batch row: exp of every class score and their running sum (2 per class); per sample: a uniform draw
    (:data:`UNIFORM`) and a binary search of the running sum (⌈log2 classes⌉ compares).
    """
    batch, classes = in_shape(node, graph, 0)[-2:]
    samples = out_elements(node, graph)
    flops = batch * classes * 2 + samples * (UNIFORM + max(1, math.ceil(math.log2(max(classes, 2)))))
    return layer_cost(node, graph, UnitKind.VECTOR, flops=flops, params_from=())


COSTS: CostTable = {
    **table(("RandomNormal",), _draw(NORMAL, reads_data=True)),
    **table(("RandomUniform",), _draw(UNIFORM, reads_data=True)),
    **table(("RandomNormalLike",), _draw(NORMAL, reads_data=False)),
    **table(("RandomUniformLike",), _draw(UNIFORM, reads_data=False)),
    # Bernoulli reads its probabilities.
    **table(("Bernoulli",), _draw(BERNOULLI, reads_data=True)),
    **table(("Multinomial",), _multinomial),
}
