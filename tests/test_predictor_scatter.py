"""Data movement at scale for the predictor (issue #39): scatters into a constant table (an exported
``zeros(...).scatter_add_``, whose folded table the roofline counts as weight bytes), scatters over 3-vectors, gathers
from weight tables, GatherElements, and sequence concats in the sampled space; their forms and features checked by
hand, and the space's constant-table scatter against a graph network's message sum as the predictor sees it."""

from __future__ import annotations

import math
import random
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from _predictors import CACHES, feature_map, kernel_graph
from layerscope.analysis.predictor import (
    FEATURES,
    data_runs,
    kernel_features,
)
from layerscope.estimator import estimate_graph
from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernels import (
    _SEED,
    CONCAT_SEQ_KINDS,
    TABLE_KINDS,
    Config,
    KernelModel,
    _configs,
    concat_seq_kernel,
    family_configs,
    gather_elements_kernel,
    gather_kernel,
    kernel_family,
    plan_batch,
    scatter_kernel,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.kernels import kernel_groups
from layerscope.targets import load_profile


def _run(kernel: KernelModel, graph: Graph) -> tuple[dict[str, np.ndarray], np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    feeds = make_inputs(graph)  # the runner's feeds: indices drawn within the axis they index
    session = ort.InferenceSession(kernel.model_bytes, options, providers=["CPUExecutionProvider"])
    return feeds, np.asarray(session.run(None, feeds)[0])


# ------------------------------------------------------------------------------------------ the forms
def test_a_scatter_into_a_constant_table_sums_into_zeros_that_the_roofline_counts_as_weights(tmp_path: Path) -> None:
    kernel = scatter_kernel(16, 4, 64, "add", table="const", inner=3)
    graph = kernel_graph(kernel, tmp_path)
    assert [i.name for i in graph.inputs] == ["u", "i"]  # the table is no input
    feeds, out = _run(kernel, graph)
    assert feeds["i"].shape == (64, 4, 3) and feeds["i"].min() >= 0 and feeds["i"].max() < 16
    expected = np.zeros((16, 4, 3), dtype=np.float32)
    for e, c, k in np.ndindex(64, 4, 3):  # ScatterElements axis 0, add: out[i[e, c, k], c, k] += u[e, c, k]
        expected[feeds["i"][e, c, k], c, k] += feeds["u"][e, c, k]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    # one index per updated element: 64 * 4 * 3 runs of 1
    assert data_runs(graph, graph.layers[0]) == (1, 768)
    const = feature_map(graph)
    assert const["log_weight_bytes"] == pytest.approx(math.log1p(16 * 4 * 3 * 4))  # the fp32 zeros
    # the same scatter with the table an input reads no weight bytes: the two forms differ in the features
    same = feature_map(kernel_graph(scatter_kernel(16, 4, 64, "add", inner=3), tmp_path))
    assert same["log_weight_bytes"] == 0.0 and same["log_runs"] == const["log_runs"] == pytest.approx(math.log1p(768))


def test_an_embedding_lookup_gathers_rows_of_a_seeded_weight_table(tmp_path: Path) -> None:
    kernel = gather_kernel(50, 8, 20, "rows", table="const")
    graph = kernel_graph(kernel, tmp_path)
    table = numpy_helper.to_array(onnx.load_from_string(kernel.model_bytes).graph.initializer[0])
    assert table.shape == (50, 8) and np.abs(table).sum() > 0  # not zeros: values a lookup copies
    feeds, out = _run(kernel, graph)
    np.testing.assert_array_equal(out, table[feeds["i"]])
    assert data_runs(graph, graph.layers[0]) == (8, 20)  # one 8-element row per index
    # the roofline reads the rows looked up, not the whole table: 20 rows of 8 fp32
    assert feature_map(graph)["log_weight_bytes"] == pytest.approx(math.log1p(20 * 8 * 4))
    # same bytes, same label without the table argument: kernels timed before keep their cache keys
    assert gather_kernel(50, 8, 20, "rows").model_bytes == gather_kernel(50, 8, 20, "rows", table="input").model_bytes
    assert gather_kernel(50, 8, 20, "rows").label == "movement gather rows=50 cols=8 n=20 rows"
    with pytest.raises(ValueError, match="table kind"):
        gather_kernel(50, 8, 20, "rows", table="weights")


def test_gather_elements_takes_one_element_per_index(tmp_path: Path) -> None:
    kernel = gather_elements_kernel(10, 4, 30, inner=3)
    graph = kernel_graph(kernel, tmp_path)
    feeds, out = _run(kernel, graph)
    assert out.shape == (30, 4, 3)
    np.testing.assert_array_equal(out, np.take_along_axis(feeds["x"], feeds["i"], axis=0))
    assert data_runs(graph, graph.layers[0]) == (1, 360)


def test_sequence_concats_join_padding_steps_or_skip_channels(tmp_path: Path) -> None:
    pad = kernel_graph(concat_seq_kernel(8, 100, "pad", 3), tmp_path)
    # three blocks per channel along the last axis: 8 * 3 runs of (100 + 6) / 3 elements (their mean)
    assert [tuple(t.shape or ()) for t in pad.inputs] == [(1, 8, 3), (1, 8, 100), (1, 8, 3)]
    assert data_runs(pad, pad.layers[0]) == (8 * 106 // 24, 24)
    skip = kernel_graph(concat_seq_kernel(8, 100, "skip"), tmp_path)
    out = skip.tensor(skip.layers[0].outputs[0])
    assert out is not None and tuple(out.shape or ()) == (1, 16, 100)
    assert data_runs(skip, skip.layers[0]) == (800, 2)  # two whole [8, 100] blocks
    with pytest.raises(ValueError, match="concat seq kind"):
        concat_seq_kernel(8, 100, "time")


def test_each_added_form_runs_in_onnx_runtime_as_one_kernel_of_its_family(tmp_path: Path) -> None:
    kernels = [*(scatter_kernel(32, 3, 64, red, table=t, inner=inner) for red in ("add", "none")
                 for t in TABLE_KINDS for inner in (1, 3)),
               *(gather_kernel(32, 3, 16, "rows", table=t) for t in TABLE_KINDS),
               gather_elements_kernel(32, 3, 16), gather_elements_kernel(32, 3, 16, inner=3),
               *(concat_seq_kernel(4, 50, kind, 2) for kind in CONCAT_SEQ_KINDS)]
    assert len({k.label for k in kernels}) == len(kernels)  # labels tell every form apart
    for kernel in kernels:
        graph = kernel_graph(kernel, tmp_path)
        assert kernel_family([n.op_type for n in graph.layers]) == kernel.family, kernel.label
        assert kernel.label.startswith(kernel.family), kernel.label
        _, out = _run(kernel, graph)
        assert out.size > 0, kernel.label
        groups = kernel_groups(graph, SessionConfig(threads=1))
        assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}, kernel.label


# ------------------------------------------------------------------------------------------ the space
def _params(family: str, builder: object) -> list[dict[str, Any]]:
    return [dict(c.params) for c in family_configs(family) if c.builder is builder]


def test_the_movement_space_holds_a_graph_networks_scatters_and_embedding_tables_within_bounds() -> None:
    scatters = _params("movement", scatter_kernel)
    const = [p for p in scatters if p.get("table") == "const"]
    # PaiNN-like message sums: 2048 edges into 256 atoms, 128 features, plain and as 3-vectors, into zeros
    assert {(p["_0"], p["_1"], p["_2"], p["_3"], p.get("inner", 1)) for p in const} >= {
        (256, 128, 2048, "add", 1), (256, 128, 2048, "add", 3)}
    assert {p.get("inner", 1) for p in scatters if p.get("table", "input") == "input"} == {1, 3}
    for p in scatters:  # updates within 4 M elements
        assert p["_2"] * p["_1"] * p.get("inner", 1) <= 1 << 22
    lookups = [p for p in _params("movement", gather_kernel) if p.get("table") == "const"]
    # weight tables from 64 KiB (1024 x 16 fp32) to 64 MiB (262144 x 64): past a 32 MiB last-level cache
    sizes = {p["_0"] * p["_1"] * 4 for p in lookups}
    assert min(sizes) == 1024 * 16 * 4 and max(sizes) == 64 << 20
    assert {p["_2"] for p in lookups} == {1, 16, 256, 2048, 16384}
    assert _params("movement", gather_elements_kernel)
    seqs = _params("concat", concat_seq_kernel)
    assert {p["_2"] for p in seqs} == set(CONCAT_SEQ_KINDS)
    assert max(p["_1"] for p in seqs) >= 8000 and all(p["_0"] * p["_1"] <= 1 << 22 for p in seqs)


def test_the_added_forms_leave_the_earlier_configurations_in_their_order() -> None:
    added = ("table", "inner")
    for family, builders in (("movement", {gather_elements_kernel}), ("concat", {concat_seq_kernel})):
        earlier = [c.params for c in family_configs(family)
                   if c.builder not in builders and not any(k in dict(c.params) for k in added)]
        # the earlier ones, in the order a cache was walked in before: the seeded shuffle of the first space
        first = _configs(family)
        random.Random(f"{_SEED}:{family}").shuffle(first)
        assert all(isinstance(p, partial) for p in first)
        assert earlier == [tuple((f"_{i}", v) for i, v in enumerate(p.args)) + tuple(sorted(p.keywords.items()))
                           for p in first if isinstance(p, partial)]
        assert len(earlier) == len(first) > 0


def test_the_plan_ranks_configurations_of_a_builder_with_fewer_numeric_parameters() -> None:
    # timed: two concats of three numeric parameters; candidates: a skip concat (chans, steps: two) and a pad one
    # (three). The distance runs over the leading parameters both have; the candidate nearest the badly
    # predicted timed one comes first
    def config(builder: Any, *args: Any) -> Config:
        return Config("concat", tuple((f"_{i}", v) for i, v in enumerate(args)), builder)

    bad, good = config(concat_seq_kernel, 256, 16000, "pad", 1024), config(concat_seq_kernel, 16, 1000, "pad", 2)
    errors = {"concat": (0.3, [(bad.params, 0.9), (good.params, 0.01)])}
    near_good = Config("concat", (("_0", 16), ("_1", 1000), ("_2", "skip")), concat_seq_kernel)
    near_bad = Config("concat", (("_0", 256), ("_1", 16000), ("_2", "skip")), concat_seq_kernel)
    plan = plan_batch({"concat": [near_good, near_bad]}, errors, 2, neighbours=1)
    assert [c.params for c in plan] == [near_bad.params, near_good.params]


# ------------------------------------------------------------------------------------------ the model's form
def _message_sum_model(tmp_path: Path, atoms: int, edges: int, feats: int) -> Graph:
    """A graph network's message sum as PyTorch exports it: ConstantOfShape zeros [atoms, feats, 3], each edge's
    target index expanded over [edges, feats, 3], ScatterElements(add) of the messages into the zeros."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["zeros"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
             helper.make_node("Expand", ["dst", "full"], ["idx"]),
             helper.make_node("ScatterElements", ["zeros", "idx", "msg"], ["y"], axis=0, reduction="add")]
    graph = helper.make_graph(
        nodes, "painn",
        [helper.make_tensor_value_info("dst", TensorProto.INT64, [edges, 1, 1]),
         helper.make_tensor_value_info("msg", TensorProto.FLOAT, [edges, feats, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray([atoms, feats, 3], dtype=np.int64), "shape"),
         numpy_helper.from_array(np.asarray([edges, feats, 3], dtype=np.int64), "full")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "painn.onnx")
    return load_model(tmp_path / "painn.onnx")


def test_the_spaces_constant_table_scatter_is_a_graph_networks_message_sum_as_the_predictor_sees_it(
        tmp_path: Path) -> None:
    # the exported model's scatter (ConstantOfShape folded to a weight, indices from an Expand) and the space's
    # kernel of the same sizes have the same features: a fit on the space meets the model's form, not only the
    # input-table one, whose weight bytes (0) sit far from the model's (its miss on caustic-painn: predicted at
    # the ratio of the only movement kernels with weights timed before, pads and slices with a few constants)
    graph = _message_sum_model(tmp_path, 128, 1024, 32)
    scatter = next(n for n in graph.layers if n.op_type == "ScatterElements")
    est = estimate_graph(graph, load_profile("host"), "fp32")
    model = dict(zip(FEATURES, kernel_features(graph, est, [scatter.id], CACHES).tolist(), strict=True))
    assert model["log_weight_bytes"] == pytest.approx(math.log1p(128 * 32 * 3 * 4))  # the folded zeros
    space = feature_map(kernel_graph(scatter_kernel(128, 32, 1024, "add", table="const", inner=3), tmp_path))
    for name in FEATURES:
        assert space[name] == pytest.approx(model[name], rel=1e-6, abs=1e-9), name
    plain = feature_map(kernel_graph(scatter_kernel(128, 32, 1024, "add", inner=3), tmp_path))
    assert plain["log_weight_bytes"] == 0.0 and plain["log_runs"] == model["log_runs"]
