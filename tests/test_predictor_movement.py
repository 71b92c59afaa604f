"""Data-movement and broadcasting kernels for the predictor (issue #39): gathers, scatters, expands, tiles, pads and
slices of 2-D / 3-D tensors, broadcasting binary ops, sequence transposes and feature concats in the sampled
space; the data runs (elements per inner run, how many runs, broadcast ratio) as features, checked by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from _predictors import CACHES, kernel_graph
from layerscope.analysis.predictor import (
    FEATURES,
    broadcast_ratio,
    broadcast_run,
    data_runs,
    kernel_features,
)
from layerscope.estimator import estimate_graph
from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernels import (
    BROADCAST_KINDS,
    CONCAT_KINDS,
    EXPAND_KINDS,
    GATHER_KINDS,
    SLICE_KINDS,
    TRANSPOSE_KINDS,
    WHERE_KINDS,
    KernelModel,
    broadcast_kernel,
    concat_nd_kernel,
    expand_kernel,
    family_configs,
    gather_kernel,
    kernel_family,
    pad_kernel,
    scatter_kernel,
    short_reduce_kernel,
    slice_kernel,
    tile_kernel,
    transpose_kernel,
    where_kernel,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runtimes.onnxruntime.kernels import kernel_groups
from layerscope.targets import load_profile


def _one_node(tmp_path: Path, op: str, inputs: Sequence[tuple[str, Sequence[int]]], *,
              consts: Sequence[onnx.TensorProto] = (), int_inputs: Sequence[tuple[str, Sequence[int]]] = (),
              **attrs: Any) -> Graph:
    """A model of one ``op`` node over float ``inputs``, int64 ``int_inputs`` and constant ``consts`` (in that
    order of the node's inputs), loaded."""
    names = [n for n, _ in inputs] + [n for n, _ in int_inputs] + [c.name for c in consts]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "one",
        [*(helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs),
         *(helper.make_tensor_value_info(n, TensorProto.INT64, list(s)) for n, s in int_inputs)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(consts))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = tmp_path / f"{op}-{len(list(tmp_path.iterdir()))}.onnx"
    onnx.save(model, path)
    return load_model(path)


def _i64(name: str, values: Sequence[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


# ------------------------------------------------------------------------------------------ data runs
def test_broadcast_runs_end_where_an_input_switches_between_whole_and_repeated() -> None:
    # [E, F, 1] x [E, F, 3]: along the last axis the first input repeats, the second is whole; along F both are
    # whole: the run is the last axis, 3 elements
    assert broadcast_run((2048, 128, 3), [(2048, 128, 1), (2048, 128, 3)]) == 3
    # [E, F] x [E, 1]: one run per row of F
    assert broadcast_run((2048, 384), [(2048, 384), (2048, 1)]) == 384
    # [N, C] + [C] (a bias): the bias is whole along C, repeated along N: runs of C
    assert broadcast_run((32, 6, 16), [(16,), (32, 6, 16)]) == 16
    # same shapes, or a scalar: one run over everything
    assert broadcast_run((2048, 128, 3), [(2048, 128, 3), (2048, 128, 3)]) == 2048 * 128 * 3
    assert broadcast_run((2048, 20), [(2048, 20), ()]) == 2048 * 20
    # the output's unit axes are skipped: [1, C, 1] x [1, C, 1] is one run
    assert broadcast_run((1, 64, 1), [(1, 64, 1), (1, 64, 1)]) == 64


def test_data_runs_of_broadcasting_ops_and_expand_by_hand(tmp_path: Path) -> None:
    g = _one_node(tmp_path, "Mul", [("a", (2048, 128, 1)), ("b", (2048, 1, 3))])
    # runs of 3 (both inputs switch at the last axis), 2048 * 128 of them; out 786432 over the larger input's
    # 262144: each element read is written 3 times
    assert data_runs(g, g.layers[0]) == (3, 2048 * 128)
    assert broadcast_ratio(g, g.layers[0]) == pytest.approx(3.0)
    g = _one_node(tmp_path, "Expand", [("x", (256, 1, 3))], consts=[_i64("s", (256, 128, 3))])
    assert data_runs(g, g.layers[0]) == (3, 256 * 128)  # the shape input is not a broadcast operand
    assert broadcast_ratio(g, g.layers[0]) == pytest.approx(128.0)
    g = _one_node(tmp_path, "Add", [("a", (64, 64)), ("b", (64, 64))])
    assert data_runs(g, g.layers[0]) == (4096, 1) and broadcast_ratio(g, g.layers[0]) == 1.0


def test_data_runs_of_the_three_transpose_paths_by_hand(tmp_path: Path) -> None:
    # [0, 3, 2, 1] of [1, 1, 100, 128]: two non-unit axes swapped past a unit one, not one axis moved and no
    # trailing axis kept: element by element, 12800 runs of 1
    g = _one_node(tmp_path, "Transpose", [("x", (1, 1, 100, 128))], perm=[0, 3, 2, 1])
    assert data_runs(g, g.layers[0]) == (1, 12800)
    # [0, 2, 1] of [8, 100, 128]: axis 2 moved to 1 (the single-axis path): one 100 x 128 block per batch
    g = _one_node(tmp_path, "Transpose", [("x", (8, 100, 128))], perm=[0, 2, 1])
    assert data_runs(g, g.layers[0]) == (12800, 8)
    # [2, 1, 0, 3] of [4, 8, 16, 32] (no single axis moved) keeps the last axis in place: rows of 32 copied
    # whole, 4 * 8 * 16 of them
    g = _one_node(tmp_path, "Transpose", [("x", (4, 8, 16, 32))], perm=[2, 1, 0, 3])
    assert data_runs(g, g.layers[0]) == (32, 4 * 8 * 16)
    # unit axes moved, the others in order: a copy, one run
    g = _one_node(tmp_path, "Transpose", [("x", (1, 100, 1, 128))], perm=[2, 1, 0, 3])
    assert data_runs(g, g.layers[0]) == (12800, 1)


def test_data_runs_of_gathers_scatters_slices_concats_and_reductions_by_hand(tmp_path: Path) -> None:
    # Gather axis 0 of [256, 128, 3] by 2048 indices: one 384-element row per index
    g = _one_node(tmp_path, "Gather", [("x", (256, 128, 3))], int_inputs=[("i", (2048,))], axis=0)
    assert data_runs(g, g.layers[0]) == (384, 2048)
    # axis 1 of [32, 4, 128] by 6 indices: 128 elements per index per leading row: 32 * 6 runs
    g = _one_node(tmp_path, "Gather", [("x", (32, 4, 128))], int_inputs=[("i", (6,))], axis=1)
    assert data_runs(g, g.layers[0]) == (128, 192)
    # Slice of the middle third of [2048, 384]'s last axis: runs of 128, one per row
    g = _one_node(tmp_path, "Slice", [("x", (2048, 384))],
                  consts=[_i64("st", [128]), _i64("en", [256]), _i64("ax", [1])])
    assert data_runs(g, g.layers[0]) == (128, 2048)
    # every other element of the last axis: runs of 1
    g = _one_node(tmp_path, "Slice", [("x", (64, 100))],
                  consts=[_i64("st", [0]), _i64("en", [100]), _i64("ax", [1]), _i64("sp", [2])])
    assert data_runs(g, g.layers[0]) == (1, 64 * 50)
    # Concat of [2048, 20], [2048, 16] and three [2048, 1] on the last axis: 5 blocks per row; 39 * 2048 / 10240
    g = _one_node(tmp_path, "Concat", [(f"x{i}", (2048, w)) for i, w in enumerate((20, 16, 1, 1, 1))], axis=-1)
    assert data_runs(g, g.layers[0]) == (39 * 2048 // 10240, 10240)
    # ReduceL2 over the last axis of [256, 128, 3]: a 3-element run per output
    g = _one_node(tmp_path, "ReduceL2", [("x", (256, 128, 3))], consts=[_i64("axes", [-1])], keepdims=0)
    assert data_runs(g, g.layers[0]) == (3, 256 * 128)
    # the same with its axes an attribute (opset 17's ReduceL2), as the norm space's short reductions write it
    g = kernel_graph(short_reduce_kernel(16, 16, 3, "ReduceL2"), tmp_path)
    assert data_runs(g, g.layers[0]) == (3, 256)
    # ReduceSum over axis 1 of [8, 64, 100]: the kept trailing 100 elements per run
    g = _one_node(tmp_path, "ReduceSum", [("x", (8, 64, 100))], consts=[_i64("axes", [1])])
    assert data_runs(g, g.layers[0]) == (100, 8 * 64)
    # any other op: one run over its output
    g = _one_node(tmp_path, "Relu", [("x", (7, 9))])
    assert data_runs(g, g.layers[0]) == (63, 1) and broadcast_ratio(g, g.layers[0]) == 1.0


def test_scatter_elements_data_runs_read_the_updates_input(tmp_path: Path) -> None:
    # the op's inputs are (data, indices, updates): updates [512, 3] scattered into [16, 3], one index per update
    # element, whatever the reduction
    graph = helper.make_graph(
        [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)], "s",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 3]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [512, 3]),
         helper.make_tensor_value_info("u", TensorProto.FLOAT, [512, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "s.onnx")
    g = load_model(tmp_path / "s.onnx")
    assert data_runs(g, g.layers[0]) == (1, 1536)


def test_a_where_over_a_broadcast_mask_runs_one_row_at_a_time(tmp_path: Path) -> None:
    # Where(mask [1, 128], x [64, 128], 0): the mask is whole along the last axis and repeated down the rows,
    # the scalar repeated everywhere: runs of 128, 64 of them; out 8192 over x's 8192: ratio 1
    graph = kernel_graph(where_kernel(64, 128, "mask"), tmp_path)
    node = graph.layers[0]
    assert node.op_type == "Where" and data_runs(graph, node) == (128, 64)
    assert broadcast_ratio(graph, node) == 1.0
    assert make_inputs(graph)["m"].dtype == np.bool_


def test_the_features_of_a_broadcasting_kernel_say_its_runs(tmp_path: Path) -> None:
    graph = kernel_graph(broadcast_kernel(2048, 128, "cross3"), tmp_path)
    est = estimate_graph(graph, load_profile("host"), "fp32")
    f = dict(zip(FEATURES, kernel_features(graph, est, [n.id for n in graph.layers], CACHES).tolist(), strict=True))
    assert f["log_inner_run"] == pytest.approx(math.log1p(3))
    assert f["log_runs"] == pytest.approx(math.log1p(2048 * 128))
    assert f["log_broadcast_ratio"] == pytest.approx(math.log(3))
    same = kernel_graph(broadcast_kernel(2048, 128, "same3"), tmp_path)
    est = estimate_graph(same, load_profile("host"), "fp32")
    g = dict(zip(FEATURES, kernel_features(same, est, [n.id for n in same.layers], CACHES).tolist(), strict=True))
    assert g["log_inner_run"] == pytest.approx(math.log1p(2048 * 128 * 3))
    assert g["log_runs"] == pytest.approx(math.log1p(1)) and g["log_broadcast_ratio"] == 0.0


# ------------------------------------------------------------------------------------------ the space
def _small_kernels() -> list[KernelModel]:
    """One small kernel of each new kind."""
    return [*(gather_kernel(64, 16, 32, k) for k in GATHER_KINDS),
            scatter_kernel(64, 3, 256, "add"), scatter_kernel(64, 3, 256, "none"),
            scatter_kernel(64, 16, 32, "add", nd=True),
            *(expand_kernel(32, 8, k) for k in EXPAND_KINDS), tile_kernel(16, 16, 2, 0), tile_kernel(16, 16, 2, 1),
            pad_kernel(14, 16, "spatial"), pad_kernel(14, 16, "seq"), *(slice_kernel(16, 16, k) for k in SLICE_KINDS),
            *(broadcast_kernel(16, 8, k) for k in BROADCAST_KINDS),
            *(transpose_kernel(2, 16, 64, k) for k in TRANSPOSE_KINDS),
            *(concat_nd_kernel(32, 16, p, k) for p in (2, 8) for k in CONCAT_KINDS),
            *(where_kernel(4, 16, k) for k in WHERE_KINDS), gather_kernel(8, 3, 1, "rows"),
            short_reduce_kernel(16, 16, 3, "ReduceL2"), short_reduce_kernel(16, 16, 8, "ReduceSum")]


def test_each_new_kind_builds_runs_in_onnx_runtime_as_one_kernel_of_its_family(tmp_path: Path) -> None:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    for kernel in _small_kernels():
        graph = kernel_graph(kernel, tmp_path)
        assert kernel_family([n.op_type for n in graph.layers]) == kernel.family, kernel.label
        assert kernel.label.startswith(kernel.family), kernel.label
        feeds = make_inputs(graph)  # the runner's feeds: indices drawn within the axis they index
        session = ort.InferenceSession(kernel.model_bytes, options, providers=["CPUExecutionProvider"])
        outputs = session.run(None, feeds)
        assert outputs[0].size > 0, kernel.label
        groups = kernel_groups(graph, SessionConfig(threads=1))
        assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}, kernel.label


def test_scatter_and_gather_indices_are_fed_within_the_axis_they_index(tmp_path: Path) -> None:
    graph = kernel_graph(scatter_kernel(64, 3, 2048, "add"), tmp_path)
    feeds = make_inputs(graph)
    assert feeds["i"].dtype == np.int64 and feeds["i"].shape == (2048, 3)
    assert feeds["i"].min() >= 0 and feeds["i"].max() < 64
    graph = kernel_graph(gather_kernel(1024, 16, 256, "last"), tmp_path)
    assert make_inputs(graph)["i"].max() < 16


def test_data_movement_ops_have_families() -> None:
    assert kernel_family(["ScatterElements"]) == "movement" and kernel_family(["GatherND"]) == "movement"
    assert kernel_family(["ReduceL2"]) == "norm" and kernel_family(["ReduceSumSquare"]) == "norm"
    assert kernel_family(["Unsqueeze", "Mul"]) == "elementwise"


def test_the_families_spaces_hold_the_new_kinds_within_their_size_bounds() -> None:
    def kinds(family: str, builder: object, position: str) -> set[object]:
        return {dict(c.params)[position] for c in family_configs(family) if c.builder is builder}

    assert kinds("elementwise", broadcast_kernel, "_2") == set(BROADCAST_KINDS)
    assert kinds("layout", transpose_kernel, "_3") == set(TRANSPOSE_KINDS)
    assert kinds("concat", concat_nd_kernel, "_3") == set(CONCAT_KINDS)
    assert kinds("movement", gather_kernel, "_3") == set(GATHER_KINDS)
    assert kinds("movement", expand_kernel, "_2") == set(EXPAND_KINDS)
    assert kinds("movement", scatter_kernel, "_3") == {"none", "add"}
    assert kinds("movement", where_kernel, "_2") == set(WHERE_KINDS)
    assert kinds("norm", short_reduce_kernel, "_3") == {"ReduceL2", "ReduceSum"}
    # outputs of the broadcast space stay within 16 M elements (64 MiB fp32)
    for config in family_configs("elementwise"):
        if config.builder is broadcast_kernel:
            rows, cols, kind = (dict(config.params)[k] for k in ("_0", "_1", "_2"))
            assert rows * cols * (3 if kind.endswith("3") else 1) <= 1 << 24
