"""The ``ai.onnx.ml`` domain: tree ensembles, linear models, SVMs, scalers and the map/label utilities that
scikit-learn, XGBoost and LightGBM converters emit.

Sources: the ONNX-ML operator specs (onnx/docs/Operators-ml.md) for every attribute and input. N is the
number of samples (rows of input X, a 1-D X is one sample); E the number of classes or targets (the last
dim of the scores output).

- Tree ensembles (TreeEnsembleClassifier, TreeEnsembleRegressor, TreeEnsemble): per sample, each tree is
  walked from its root to one leaf (Operators-ml.md: a branch node compares one feature with its value and the
  walk goes on to its true or its false child; the leaf's weights are added to the scores), so a sample visits
  one root-to-leaf path per tree, not the tree's nodes. The cost is the expected walk: Σ over trees of the
  branch nodes on a path, each branch taken either way with probability 1/2 (a full tree's depth; a LightGBM
  tree grown leaf-wise, depth 10: ~3.6, its deep leaves are few; a set-membership branch counts 1, assumption)
  + the weights on its leaf (one add each into the scores), then the ``post_transform`` on N·E scores and, for
  a classifier, an argmax over E. Bytes read: each visited node's entries in the node arrays (the bytes one
  entry of each array takes in the model), at most the whole arrays. Unit: scalar (a data-dependent walk).
  Each visit (a branch node of the walk, and the leaf it ends on) is a chained load
  (:attr:`LayerCost.chained_loads`: the next node's index is in the node just read) over the cache lines the
  walk touches (:attr:`LayerCost.chained_bytes`, at most the arrays: a benchmark repeats its input, and with
  it the walk): the estimate times the walk by the latency of those loads. (A LightGBM classifier of 9,988
  trees, 141 MB of node arrays: 45 k expected visits over 2.9 MB of lines, 0.68 ms at the cached latency;
  measured 0.64-0.71 ms by ``profile``, ONNX Runtime 1.32, one thread. With a new random row every call its walks
  range over far more of the arrays: 1.5-1.8 ms median on the same machine, what this estimate does not model.)
- Linear models: N·|coefficients| MACs (+ the intercepts, the post-transform, a classifier's argmax); SVMs:
  N·(|support_vectors| + |coefficients|) MACs, i.e. kernel evaluations × support vectors × features, plus the
  kernel's own per-evaluation work and, for a one-vs-one classifier, E·(E-1)/2 votes per sample. The
  coefficient and support-vector arrays are read every inference: their bytes count as weight bytes.
- Attribute arrays are not initializers: they count as weight bytes read, never as params.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from layerscope.costs._common import (
    CostFn,
    CostTable,
    attr_str,
    in_elements,
    in_shape,
    layer_cost,
    out_elements,
    out_shape,
    per_output_cost,
    table,
    tensor_only,
)
from layerscope.costs.elementwise import SIGMOID
from layerscope.costs.norm import SOFTMAX
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.model.types import Graph, Node

ML = "ai.onnx.ml"

#: FLOPs per score of each ``post_transform``: SOFTMAX_ZERO also tests for zero (1, assumption); PROBIT
#: is an inverse-erf approximation counted as 3 (assumption).
POST_TRANSFORM_FLOPS: Mapping[str, int] = MappingProxyType({
    "NONE": 0, "SOFTMAX": SOFTMAX, "LOGISTIC": SIGMOID, "SOFTMAX_ZERO": SOFTMAX + 1, "PROBIT": 3,
})

#: Per kernel evaluation on top of its dot product: POLY (γ·d + c)^degree: mul + add + pow = 3; RBF
#: exp(-γ·|x-y|²): a subtract per feature (counted apart) + mul + exp = 2; SIGMOID tanh(γ·d + c) = 3.
KERNEL_FLOPS: Mapping[str, int] = MappingProxyType({"LINEAR": 0, "POLY": 3, "RBF": 2, "SIGMOID": 3})

#: Bytes one node entry of a tree's ``nodes_modes`` takes when read: a mode is an enum (assumption: 1 byte).
_MODE_BYTES = 1
#: Bytes a node visit brings into the cache (one cache line): what a walk's chained loads range over is the lines
#: it touches, since a latency benchmark repeats one input and so one walk per tree (``layerscope profile``: the
#: same feeds every run), not the whole node arrays.
_LINE_BYTES = 64
#: Bytes of one entry of an INTS attribute (int64 in the model).
_INT_BYTES = 8
#: Bytes of one entry of a FLOATS attribute (float32 in the model).
_FLOAT_BYTES = 4


def _array(value: Any, dtype: type | None = None) -> np.ndarray:
    """An attribute's value as a 1-D numpy array of ``dtype`` (lists and tensors alike; ``None``: empty).
    Naming the dtype spares numpy finding it element by element (a 190 MB tree ensemble holds millions)."""
    return np.asarray([] if value is None else value, dtype=dtype).reshape(-1)


def _count(value: Any) -> int:
    """How many entries an attribute's value holds (``None``: 0)."""
    if value is None:
        return 0
    return int(value.size) if isinstance(value, np.ndarray) else len(value)


def _not_leaf(modes: Any) -> np.ndarray:
    """Which of the legacy ``nodes_modes`` (strings) are branches (not ``"LEAF"``)."""
    if isinstance(modes, np.ndarray):
        branches: np.ndarray = modes.reshape(-1).astype(str) != "LEAF"
        return branches
    return np.fromiter((mode != "LEAF" for mode in modes), dtype=bool, count=len(modes))


def _samples(node: Node, graph: Graph) -> int:
    """N: the rows of input X ((N, F) or (N,); a 0-/1-D X of features is one sample for the 2-D models)."""
    x = in_shape(node, graph, 0)
    return x[0] if len(x) >= 2 else 1


def _scores(node: Node, graph: Graph, index: int) -> int:
    """E: the last dim of the scores output at ``index`` (1 when it is 1-D or absent)."""
    if index >= len(node.outputs) or not node.outputs[index] or graph.tensor(node.outputs[index]) is None:
        return 1
    shape = out_shape(node, graph, index)
    return shape[-1] if len(shape) >= 2 else 1


def _post_transform(node: Node) -> int:
    return POST_TRANSFORM_FLOPS.get(attr_str(node, "post_transform", "NONE").upper(), 0)


def _plus_weight_bytes(cost: LayerCost, weight_bytes: int) -> LayerCost:
    return replace(cost, bytes_read_weight=cost.bytes_read_weight + int(weight_bytes))


# ------------------------------------------------------------------------------------------- trees
@dataclass(frozen=True)
class TreeWalk:
    """The expected walk of a tree ensemble per sample: ``compares`` = Σ over trees of the branch nodes on a
    root-to-leaf path, each branch taken either way with probability 1/2 (:func:`_depths`); ``leaf_adds`` = Σ
    over trees of the most weights on one of its leaves; ``node_bytes``: the bytes one node's entries take in
    the node arrays; ``array_bytes``: all of them."""

    trees: int
    compares: float
    leaf_adds: int
    node_bytes: int
    array_bytes: int


def _walk(roots: np.ndarray, true_child: np.ndarray, false_child: np.ndarray,
          is_branch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node, how many branch nodes lie above it on its path from its root and which root (its position in
    ``roots``) reaches it; ``-1`` for both when no root does.

    ``true_child``/``false_child``: the node index of each branch node's children (``-1``: a leaf outside the
    node arrays). ``ValueError`` on a cycle (a malformed model).
    """
    above = np.full(len(is_branch), -1, dtype=np.int64)
    owner = np.full(len(is_branch), -1, dtype=np.int64)
    frontier, tree, level = roots, np.arange(len(roots), dtype=np.int64), 0
    while frontier.size:
        if level > len(is_branch):
            raise ValueError("tree ensemble has a cycle in its node arrays")
        above[frontier], owner[frontier] = level, tree
        branch = is_branch[frontier]
        frontier, tree = frontier[branch], tree[branch]
        children = np.concatenate([true_child[frontier], false_child[frontier]])
        trees = np.concatenate([tree, tree])
        kept = children >= 0
        frontier, tree, level = children[kept], trees[kept], level + 1
    return above, owner


def _depths(trees: int, above: np.ndarray, owner: np.ndarray, is_branch: np.ndarray,
            leaves_below: np.ndarray) -> np.ndarray:
    """Per tree, the compares of its expected walk: Σ over its leaves of (branch nodes above the leaf) x 2^-that,
    each branch taken either way with probability 1/2 (a full tree of depth d: d; a leaf-wise grown tree, whose
    deepest leaves are few: far below its depth). A branch node with ``leaves_below`` children outside the node
    arrays ends that many paths one compare deeper than itself."""
    reached = owner >= 0
    leaf = reached & ~is_branch
    outside = reached & is_branch & (leaves_below > 0)
    expected = np.zeros(trees, dtype=np.float64)
    np.add.at(expected, owner[leaf], above[leaf] * np.exp2(-above[leaf].astype(np.float64)))
    deeper = (above[outside] + 1).astype(np.float64)
    np.add.at(expected, owner[outside], leaves_below[outside] * deeper * np.exp2(-deeper))
    return expected


def _legacy_walk(node: Node, weights_prefix: str) -> TreeWalk:
    """The walk of TreeEnsembleClassifier (``class_*`` leaf weights) / TreeEnsembleRegressor (``target_*``): nodes
    are ``(nodes_treeids, nodes_nodeids)``; children are node ids in the same tree; roots are the nodes no
    branch of their tree points to."""
    tree_ids = _array(node.attr("nodes_treeids"), np.int64)
    node_ids = _array(node.attr("nodes_nodeids"), np.int64)
    is_branch = _not_leaf(node.attr("nodes_modes", []))
    if not (len(tree_ids) == len(node_ids) == len(is_branch)) or not len(tree_ids):
        raise ValueError("nodes_treeids, nodes_nodeids and nodes_modes must be non-empty and of one length")
    trees, tree_of = np.unique(tree_ids, return_inverse=True)
    stride = int(node_ids.max()) + 1
    keys = tree_of * stride + node_ids
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]

    def index_of(ids: np.ndarray) -> np.ndarray:
        wanted = tree_of * stride + ids
        at = np.clip(np.searchsorted(sorted_keys, wanted), 0, len(sorted_keys) - 1)
        found = (sorted_keys[at] == wanted) & (ids >= 0) & (ids < stride)
        return np.where(found, order[at], -1)

    true_child = index_of(_array(node.attr("nodes_truenodeids"), np.int64))
    false_child = index_of(_array(node.attr("nodes_falsenodeids"), np.int64))
    if np.any(is_branch & ((true_child < 0) | (false_child < 0))):
        raise ValueError("a branch node's child is not among its tree's nodes")
    pointed = np.zeros(len(is_branch), dtype=bool)
    pointed[true_child[is_branch]] = True
    pointed[false_child[is_branch]] = True
    roots = np.flatnonzero(~pointed)
    above, owner = _walk(roots, true_child, false_child, is_branch)
    depth = _depths(len(roots), above, owner, is_branch, np.zeros(len(is_branch), dtype=np.int64))
    weight_keys = _array(node.attr(f"{weights_prefix}_treeids"), np.int64) * (stride + 1) + \
        _array(node.attr(f"{weights_prefix}_nodeids"), np.int64)
    per_tree = np.zeros(len(trees), dtype=np.int64)
    if weight_keys.size:
        leaf_keys, counts = np.unique(weight_keys, return_counts=True)
        leaf_trees = np.searchsorted(trees, leaf_keys // (stride + 1))
        np.maximum.at(per_tree, np.clip(leaf_trees, 0, len(trees) - 1), counts)
    values = node.attr("nodes_values_as_tensor")
    value_bytes = np.asarray(values).itemsize if values is not None else _FLOAT_BYTES
    node_bytes = 3 * _INT_BYTES + value_bytes + _MODE_BYTES  # feature id, true and false ids, threshold, mode
    return TreeWalk(trees=len(trees), compares=float(depth.sum()), leaf_adds=int(per_tree.sum()),
                    node_bytes=node_bytes, array_bytes=node_bytes * len(is_branch))


def _tree_ensemble_walk(node: Node) -> TreeWalk:
    """The walk of ai.onnx.ml TreeEnsemble (opset 5): ``tree_roots`` index the node arrays; a child is a node
    index, or a leaf index when its ``nodes_trueleafs``/``nodes_falseleafs`` flag is 1; each leaf holds one
    (target, weight)."""
    roots = _array(node.attr("tree_roots"), np.int64)
    count = len(node.attr("nodes_featureids", []))
    if not len(roots) or not count:
        raise ValueError("tree_roots and nodes_featureids must be non-empty")
    true_leaf = _array(node.attr("nodes_trueleafs"), np.int64).astype(bool)
    false_leaf = _array(node.attr("nodes_falseleafs"), np.int64).astype(bool)
    true_ids = _array(node.attr("nodes_truenodeids"), np.int64)
    false_ids = _array(node.attr("nodes_falsenodeids"), np.int64)
    if not (len(true_leaf) == len(false_leaf) == len(true_ids) == len(false_ids) == count):
        raise ValueError("the nodes_* arrays must be of one length")
    if np.any(((~true_leaf) & ((true_ids < 0) | (true_ids >= count))) |
              ((~false_leaf) & ((false_ids < 0) | (false_ids >= count)))) or np.any((roots < 0) | (roots >= count)):
        raise ValueError("a child or root index is outside the node arrays")
    true_child = np.where(true_leaf, -1, true_ids)
    false_child = np.where(false_leaf, -1, false_ids)
    is_branch = np.ones(count, dtype=bool)
    above, owner = _walk(roots, true_child, false_child, is_branch)
    depth = _depths(len(roots), above, owner, is_branch, true_leaf.astype(np.int64) + false_leaf.astype(np.int64))
    splits = node.attr("nodes_splits")
    split_bytes = np.asarray(splits).itemsize if splits is not None else _FLOAT_BYTES
    node_bytes = 5 * _INT_BYTES + split_bytes + _MODE_BYTES  # feature, 2 ids, 2 leaf flags, split, mode
    return TreeWalk(trees=len(roots), compares=float(depth.sum()), leaf_adds=len(roots),
                    node_bytes=node_bytes,
                    array_bytes=node_bytes * count)


def _tree_cost(node: Node, graph: Graph, walk: TreeWalk, *, scores_index: int, classifier: bool) -> LayerCost:
    """The cost of a tree ensemble of ``walk`` (see the module docstring)."""
    samples = _samples(node, graph)
    scores = samples * _scores(node, graph, scores_index)
    flops = math.ceil(samples * (walk.compares + walk.leaf_adds)) + scores * (
        _post_transform(node) + (1 if classifier else 0))
    cost = layer_cost(node, graph, UnitKind.SCALAR, flops=flops, params_from=())
    visits = math.ceil(samples * (walk.compares + walk.trees))
    read = min(walk.array_bytes, visits * walk.node_bytes)
    touched = min(walk.array_bytes, visits * _LINE_BYTES)
    return replace(_plus_weight_bytes(cost, read), chained_loads=visits, chained_bytes=touched)


def _tree_classifier(node: Node, graph: Graph) -> LayerCost:
    """TreeEnsembleClassifier(X) -> Y labels, Z scores (N, E)."""
    return _tree_cost(node, graph, _legacy_walk(node, "class"), scores_index=1, classifier=True)


def _tree_regressor(node: Node, graph: Graph) -> LayerCost:
    """TreeEnsembleRegressor(X) -> Y (N, E)."""
    return _tree_cost(node, graph, _legacy_walk(node, "target"), scores_index=0, classifier=False)


def _tree_ensemble(node: Node, graph: Graph) -> LayerCost:
    """TreeEnsemble (opset 5)(X) -> Y (N, n_targets)."""
    return _tree_cost(node, graph, _tree_ensemble_walk(node), scores_index=0, classifier=False)


# ---------------------------------------------------------------------------------- linear, SVM
def _linear(node: Node, graph: Graph, *, classifier: bool) -> LayerCost:
    """LinearClassifier(X) -> Y, Z (N, E) / LinearRegressor(X) -> Y (N, E): N·|coefficients| MACs, + N·E
    intercept adds, the post-transform and a classifier's argmax (1 per score)."""
    samples = _samples(node, graph)
    coefficients = _count(node.attr("coefficients"))
    scores = samples * _scores(node, graph, 1 if classifier else 0)
    macs = samples * coefficients
    per_score = (1 if _count(node.attr("intercepts")) else 0) + _post_transform(node) + (1 if classifier else 0)
    cost = layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=2 * macs + scores * per_score, params_from=())
    return _plus_weight_bytes(cost, (coefficients + _count(node.attr("intercepts"))) * _FLOAT_BYTES)


def _linear_classifier(node: Node, graph: Graph) -> LayerCost:
    return _linear(node, graph, classifier=True)


def _linear_regressor(node: Node, graph: Graph) -> LayerCost:
    return _linear(node, graph, classifier=False)


def _svm(node: Node, graph: Graph, *, classifier: bool) -> LayerCost:
    """SVMClassifier(X) -> Y, Z / SVMRegressor(X) -> Y: per sample, one kernel evaluation per support vector
    (F MACs each, + :data:`KERNEL_FLOPS`, + F subtracts for RBF) and the weighted sum of the evaluations
    (|coefficients| MACs); without support vectors (a linear SVM) the coefficients are the weights. A classifier
    with support vectors votes one-vs-one: E·(E-1)/2 compares per sample; + the post-transform per score."""
    samples = _samples(node, graph)
    features = in_shape(node, graph, 0)[-1]
    vectors = _count(node.attr("support_vectors"))
    coefficients = _count(node.attr("coefficients"))
    evaluations = vectors // features if features else 0
    kernel = attr_str(node, "kernel_type", "LINEAR").upper()
    per_evaluation = KERNEL_FLOPS.get(kernel, 0) + (features if kernel == "RBF" else 0)
    macs = samples * (vectors + coefficients)
    classes = _scores(node, graph, 1 if classifier else 0)
    votes = classes * (classes - 1) // 2 if classifier and vectors else 0
    flops = 2 * macs + samples * (evaluations * per_evaluation + votes + classes * (_post_transform(node) + 1))
    cost = layer_cost(node, graph, UnitKind.TENSOR, macs=macs, flops=flops, params_from=())
    return _plus_weight_bytes(cost, (vectors + coefficients) * _FLOAT_BYTES)


def _svm_classifier(node: Node, graph: Graph) -> LayerCost:
    return _svm(node, graph, classifier=True)


def _svm_regressor(node: Node, graph: Graph) -> LayerCost:
    return _svm(node, graph, classifier=False)


# ------------------------------------------------------------------------------- per element
#: Normalizer per element: MAX compare + divide = 2; L1 |x| + add + divide = 3; L2 square + add + divide = 3
#: (+ a sqrt per row, ignored).
NORMALIZER_FLOPS: Mapping[str, int] = MappingProxyType({"MAX": 2, "L1": 3, "L2": 3})


def _normalizer(node: Node, graph: Graph) -> LayerCost:
    per_element = NORMALIZER_FLOPS.get(attr_str(node, "norm", "MAX").upper(), 3)
    return layer_cost(node, graph, UnitKind.VECTOR, flops=out_elements(node, graph) * per_element, params_from=())


@tensor_only
def _zip_map(node: Node, graph: Graph) -> LayerCost:
    """ZipMap(X (N, C)) -> a sequence of N maps of C entries: one insert per element (1 FLOP, assumption), on
    the scalar unit. The output has no tensor shape: written = C·N entries of a float value and a key of 8
    bytes (an int64 label or a string reference; assumption)."""
    entries = in_elements(node, graph, 0)
    cost = layer_cost(node, graph, UnitKind.SCALAR, flops=entries, params_from=())
    value_bytes = cost.bytes_read_act // entries if entries else _FLOAT_BYTES
    return replace(cost, bytes_written=cost.bytes_written + entries * (value_bytes + _INT_BYTES))


@tensor_only
def _gather_move(node: Node, graph: Graph) -> LayerCost:
    """A copy of selected or concatenated elements (ArrayFeatureExtractor, FeatureVectorizer): no arithmetic."""
    return layer_cost(node, graph, UnitKind.MOVE, params_from=())


def _per_element(flops: int, unit: UnitKind = UnitKind.VECTOR) -> CostFn:
    return per_output_cost(flops, unit, params_from=())


def _scaler(node: Node, graph: Graph) -> LayerCost:
    """Scaler: (x - offset)·scale = 2 per element; the offset and scale arrays are read once."""
    cost = layer_cost(node, graph, UnitKind.VECTOR, flops=2 * out_elements(node, graph), params_from=())
    arrays = _count(node.attr("offset")) + _count(node.attr("scale"))
    return _plus_weight_bytes(cost, arrays * _FLOAT_BYTES)


COSTS: CostTable = {
    **table(("TreeEnsembleClassifier",), _tree_classifier, ML),
    **table(("TreeEnsembleRegressor",), _tree_regressor, ML),
    **table(("TreeEnsemble",), _tree_ensemble, ML),
    **table(("LinearClassifier",), _linear_classifier, ML),
    **table(("LinearRegressor",), _linear_regressor, ML),
    **table(("SVMClassifier",), _svm_classifier, ML),
    **table(("SVMRegressor",), _svm_regressor, ML),
    **table(("Scaler",), _scaler, ML),
    **table(("Normalizer",), _normalizer, ML),
    # Binarizer: one compare-select per element.
    **table(("Binarizer",), _per_element(1), ML),
    # Imputer: a test for the missing value + a select = 2.
    **table(("Imputer",), _per_element(2), ML),
    **table(("ZipMap",), _zip_map, ML),
    **table(("ArrayFeatureExtractor", "FeatureVectorizer"), _gather_move, ML),
    # Map and label lookups, one hash probe or table write per output element (assumption), scalar unit:
    # CastMap and DictVectorizer (map -> dense tensor), LabelEncoder and CategoryMapper (label <-> index),
    # OneHotEncoder (a compare-select per output element, as ONNX OneHot).
    **table(("CastMap", "DictVectorizer", "LabelEncoder", "CategoryMapper", "OneHotEncoder"),
            _per_element(1, UnitKind.SCALAR), ML),
}

#: Every op of the ai.onnx.ml domain with a cost function.
ML_OPS: frozenset[str] = frozenset(op for _, op in COSTS)
