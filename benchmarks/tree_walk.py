"""Tree-walk latency: ONNX Runtime's TreeEnsembleClassifier per node visit against layerscope's estimate.

The figures behind :data:`layerscope.estimator.roofline.CACHED_LOAD_NS` and ``DRAM_LOAD_NS``: full binary trees (every
walk visits ``depth`` branch nodes and one leaf), node arrays from ~0.4 MB (in cache) to ~70 MB (in DRAM), timed on
ONNX Runtime with one thread; per size, the median and fastest call, ns per visit, and the estimate on ``host``.

Usage (from the repository root): ``PYTHONPATH=src python benchmarks/tree_walk.py [TREESxDEPTH ...]``
(default ``100x6 300x8 100x12 300x12``; the largest takes ~20 s to build).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

FEATURES = 32


def full_trees(trees: int, depth: int) -> onnx.ModelProto:
    """A TreeEnsembleClassifier of ``trees`` full binary trees of ``depth`` compares, random splits."""
    rng = np.random.default_rng(0)
    per, branches = 2 ** (depth + 1) - 1, 2 ** depth - 1
    node_ids = np.tile(np.arange(per), trees)
    tree_ids = np.repeat(np.arange(trees), per)
    branch = node_ids < branches
    leaf = ~branch
    node = helper.make_node(
        "TreeEnsembleClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml",
        classlabels_int64s=[0, 1], nodes_treeids=tree_ids.tolist(), nodes_nodeids=node_ids.tolist(),
        nodes_featureids=rng.integers(0, FEATURES, node_ids.size).tolist(),
        nodes_modes=np.where(branch, "BRANCH_LEQ", "LEAF").tolist(),
        nodes_values=rng.random(node_ids.size).astype(np.float32).tolist(),
        nodes_truenodeids=np.where(branch, 2 * node_ids + 1, 0).tolist(),
        nodes_falsenodeids=np.where(branch, 2 * node_ids + 2, 0).tolist(),
        class_treeids=tree_ids[leaf].tolist(), class_nodeids=node_ids[leaf].tolist(),
        class_ids=[1] * int(leaf.sum()), class_weights=rng.random(int(leaf.sum())).astype(np.float32).tolist(),
        post_transform="LOGISTIC")
    graph = helper.make_graph([node], "trees", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, FEATURES])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [1]),
                               helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])


def time_ort(model: onnx.ModelProto, runs: int = 200) -> tuple[float, float]:
    """Median and fastest µs of ``runs`` one-thread calls on random rows."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rows = np.random.default_rng(1).random((runs + 10, 1, FEATURES)).astype(np.float32)
    for row in rows[:10]:
        session.run(None, {"X": row})
    times = []
    for row in rows[10:]:
        start = time.perf_counter()
        session.run(None, {"X": row})
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times), min(times)


def estimate_us(model: onnx.ModelProto) -> tuple[int, int, float]:
    """layerscope's chained loads, node-array bytes and estimated µs of the ensemble on ``host``."""
    from layerscope.costs import cost_graph
    from layerscope.estimator import estimate_graph
    from layerscope.model import load_model
    from layerscope.targets import load_profile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trees.onnx"
        onnx.save_model(model, str(path))
        graph = load_model(path)
        (cost,) = cost_graph(graph)
        (layer,) = estimate_graph(graph, load_profile("host")).layers
    return cost.chained_loads, cost.chained_bytes, layer.latency_us


def main(argv: Sequence[str]) -> int:
    for spec in argv or ("100x6", "300x8", "100x12", "300x12"):
        trees, depth = (int(part) for part in spec.split("x"))
        model = full_trees(trees, depth)
        median_us, fastest_us = time_ort(model)
        visits, array_bytes, est_us = estimate_us(model)
        print(f"{trees} trees x depth {depth}: {array_bytes / 1e6:.1f} MB of node arrays, {visits} visits; ORT median "
              f"{median_us:.1f} µs (fastest {fastest_us:.1f}) = {median_us * 1e3 / visits:.1f} ns/visit; estimate "
              f"{est_us:.1f} µs (measured/estimated {median_us / est_us:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
