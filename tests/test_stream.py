"""Two facts of the RDK X5 compiler's own figures, on small graphs: a feature map too large for the SRAM whose one
reader is the next layer is streamed through on-chip memory in tiles (``stream_bytes_per_s``: no DDR bytes, its bytes
at that rate), and a head's permute to NHWC that is a model output is no BPU layer where the profile prices the
outputs' hand-over (``output_bytes_per_s``; :func:`layerscope.estimator.layout.output_transposes`). Also the
``zoo_head`` of the ``yolov5`` sample, whose outputs that hand-over prices, and the SRAM's weight share
(``weight_sram_bytes``) that sets a wide layer's weight passes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from conftest import F32, ModelWriter
from layerscope.analysis.board import derive_profile
from layerscope.analysis.calibrate import Params, calibrated_profile, profile_toml
from layerscope.estimator import estimate_graph
from layerscope.estimator.layout import output_transposes
from layerscope.model import Graph, load_model
from layerscope.samples.yolo import yolov5
from layerscope.targets import load_profile
from layerscope.targets.schema import load_profile_file
from test_estimate import toy_profile

#: 16 KiB of SRAM: 8 KiB for activations, less than one 1x16x16x16 fp32 feature map (16,384 B)
PLANNED = dataclasses.replace(toy_profile(sram_bytes=16_384), plan_sram=True)
STREAMED = dataclasses.replace(PLANNED, stream_bytes_per_s=2e9)
FMAP = 16 * 16 * 16 * 4


def _chain(write_model: ModelWriter, *, skip: bool = False) -> Graph:
    """x (1, 8, 16, 16) -> 1x1 Conv to 16 (c1) -> 1x1 Conv (c2) -> 1x1 Conv (y); with ``skip``, y = c3 + c1."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1"),
             helper.make_node("Conv", ["c1", "w2"], ["c2"], name="conv2"),
             helper.make_node("Conv", ["c2", "w3"], ["c3" if skip else "y"], name="conv3")]
    if skip:
        nodes.append(helper.make_node("Add", ["c3", "c1"], ["y"], name="add"))
    weights = {"w1": np.zeros((16, 8, 1, 1), np.float32), "w2": np.zeros((16, 16, 1, 1), np.float32),
               "w3": np.zeros((16, 16, 1, 1), np.float32)}
    return load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], weights))


def test_a_feature_map_read_by_the_next_layer_only_streams_through_on_chip_memory(write_model: ModelWriter) -> None:
    graph = _chain(write_model)
    conv1, conv2, conv3 = estimate_graph(graph, STREAMED).layers
    # c1 and c2 (16,384 B each) exceed the 8 KiB plan but are never written to DDR: each moves at 2e9 B/s, 8.192 us
    # written by its producer and 8.192 us read by its reader
    assert conv1.ddr_write_bytes == 0 and conv2.ddr_write_bytes == 0 and conv3.ddr_write_bytes == FMAP
    assert conv1.ddr_read_bytes == 8 * 16 * 16 * 4 + 16 * 8 * 4  # x and w1 from DDR
    assert conv1.load_us == pytest.approx((8_192 + 512) / 1e9 * 1e6 + FMAP / 2e9 * 1e6)
    assert conv2.ddr_read_bytes == 16 * 16 * 4 and conv2.load_us == pytest.approx(1.024 + 2 * 8.192)
    assert conv3.load_us == pytest.approx(1.024 + 8.192) and conv3.store_us == pytest.approx(16.384)
    # without a stream rate the plan spills both: written at 1e9 B/s and read back
    plain = estimate_graph(graph, PLANNED).layers
    assert [e.ddr_write_bytes for e in plain] == [FMAP, FMAP, FMAP]
    assert plain[1].ddr_read_bytes == FMAP + 1_024 and plain[0].store_us == pytest.approx(16.384)


def test_a_feature_map_read_again_layers_later_spills_to_ddr(write_model: ModelWriter) -> None:
    conv1, conv2, _, add = estimate_graph(_chain(write_model, skip=True), STREAMED).layers
    # c1 is read by conv2 and by the Add three layers on: too large to hold, so it goes to DDR once, read twice
    assert conv1.ddr_write_bytes == FMAP and conv2.ddr_read_bytes == FMAP + 1_024
    assert add.ddr_read_bytes == FMAP  # c3 (the next layer's input) streams; c1 comes back from DDR
    # the stream rate needs a planned SRAM: without plan_sram nothing streams
    unplanned = dataclasses.replace(STREAMED, plan_sram=False)
    assert estimate_graph(_chain(write_model), unplanned).layers[0].ddr_write_bytes == FMAP


def test_stream_rate_reads_calibrates_with_the_memory_factor_and_derives_by_bpu_clock(tmp_path: Path) -> None:
    s100 = load_profile("rdk-s100")
    base = dataclasses.replace(s100, stream_bytes_per_s=2e10, sources={**s100.sources, "stream_bytes_per_s": "x"})
    # a fit that makes feature-map memory time 1.25x slower streams at 1 / 1.25 the rate
    mapping = calibrated_profile(base, Params({}, {}, 1.25), name="fit", models=("m",), note="n")
    assert mapping["stream_bytes_per_s"] == pytest.approx(1.6e10)
    path = tmp_path / "fit.toml"
    path.write_text(profile_toml(mapping, "fit"), encoding="utf-8")
    assert load_profile_file(path).stream_bytes_per_s == pytest.approx(1.6e10)
    # S100P's BPU at 1.5 GHz against S100's 1.0 GHz: on-chip moves 1.5x as fast
    derived = tmp_path / "rdk-s100p.toml"
    derived.write_text(derive_profile(base, "rdk-s100p"), encoding="utf-8")
    assert load_profile_file(derived).stream_bytes_per_s == pytest.approx(3e10)
    assert load_profile("rdk-s100").stream_bytes_per_s is None


def _head(write_model: ModelWriter) -> Graph:
    """A detection head: 1x1 Conv (1, 8, 4, 4) -> permute(0, 2, 3, 1) to the model output (1, 4, 4, 8); and a
    second permute of the same kind whose output a Relu reads before it leaves."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Transpose", ["c"], ["y"], name="head", perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["c"], ["t"], name="inner", perm=[0, 2, 3, 1]),
             helper.make_node("Relu", ["t"], ["z"], name="relu")]
    return load_model(write_model(nodes, [("x", F32, [1, 8, 4, 4])], [("y", F32, None), ("z", F32, None)],
                                  {"w": np.zeros((8, 8, 1, 1), np.float32)}))


def test_a_head_permute_to_nhwc_is_dropped_where_the_output_hand_over_is_priced(write_model: ModelWriter) -> None:
    graph = _head(write_model)
    assert output_transposes(graph) == {"head"}
    npu = dataclasses.replace(toy_profile(), layout_transpose_efficiency=1.0)
    kept = {e.layer_id: e for e in estimate_graph(graph, npu).layers}
    assert kept["head"].latency_us > 0 and kept["inner"].latency_us > 0
    handed = {e.layer_id: e for e in estimate_graph(graph, dataclasses.replace(npu, output_bytes_per_s=1e9)).layers}
    # the output's 128 floats are handed over as float32 (512 B) instead: the permute itself costs nothing
    assert handed["head"].latency_us == 0.0 and handed["inner"].latency_us == kept["inner"].latency_us
    assert estimate_graph(graph, dataclasses.replace(npu, output_bytes_per_s=1e9)).task_overhead_us == \
        pytest.approx(2 * 128 * 4 / 1e9 * 1e6)


def test_the_rdk_x5_datasheet_streams_and_prices_the_output_hand_over() -> None:
    datasheet = load_profile_file(Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles"
                                  / "rdk-x5.toml")
    assert datasheet.stream_bytes_per_s == 2.0e10 and datasheet.output_bytes_per_s == 1.8e9 and datasheet.plan_sram
    assert datasheet.weight_budget_bytes == datasheet.sram_bytes // 4
    assert {"stream_bytes_per_s", "output_bytes_per_s", "weight_sram_bytes"} <= set(datasheet.sources)


def test_yolov5_zoo_head_hands_three_nhwc_maps_over() -> None:
    model = yolov5(size=64, depth_multiple=0.33, width_multiple=0.25, zoo_head=True)
    outs = [(o.name, tuple(d.dim_value for d in o.type.tensor_type.shape.dim)) for o in model.graph.output]
    assert outs == [("output0", (1, 8, 8, 255)), ("output1", (1, 4, 4, 255)), ("output2", (1, 2, 2, 255))]
    ops = [n.op_type for n in model.graph.node]
    # the zoo's Detect: three 1x1 convs and their permutes, no reshape, sigmoid or decode after the backbone's SiLUs
    assert ops.count("Transpose") == 3 and "Reshape" not in ops and "Pow" not in ops
    full = yolov5(size=64, depth_multiple=0.33, width_multiple=0.25)
    assert ops.count("Conv") == [n.op_type for n in full.graph.node].count("Conv")
    assert len(model.graph.initializer) <= len(full.graph.initializer)


def test_a_weight_share_of_the_sram_sets_the_weight_passes(write_model: ModelWriter, tmp_path: Path) -> None:
    # conv2's weights: 16 x 16 fp32 = 1,024 B; with 256 B for weights they load in 4 passes, each reloading c1
    graph = _chain(write_model)
    small = dataclasses.replace(PLANNED, weight_sram_bytes=256)
    assert small.weight_budget_bytes == 256 and PLANNED.weight_budget_bytes == 8_192
    conv2 = estimate_graph(graph, small).layers[1]
    assert conv2.weight_passes == 4 and conv2.ddr_read_bytes == 4 * FMAP + 1_024
    assert estimate_graph(graph, PLANNED).layers[1].weight_passes == 1
    # with 64 KiB of SRAM c1 (16,384 B) is held on chip (32 KiB half): the 4 passes read it there, not from DDR
    held = dataclasses.replace(small, sram_bytes=65_536)
    conv1, conv2, _ = estimate_graph(graph, held).layers
    assert conv1.ddr_write_bytes == 0 and conv2.weight_passes == 4 and conv2.ddr_read_bytes == 1_024
    # read from a profile file and kept by a calibration
    s100 = load_profile("rdk-s100")
    mapping = calibrated_profile(dataclasses.replace(s100, weight_sram_bytes=4_096), Params({}, {}, 1.0), name="fit",
                                 models=("m",), note="n")
    path = tmp_path / "fit.toml"
    path.write_text(profile_toml(mapping, "fit"), encoding="utf-8")
    assert load_profile_file(path).weight_budget_bytes == 4_096
    assert s100.weight_sram_bytes is None and s100.weight_budget_bytes == s100.sram_bytes // 2


def _chunked(write_model: ModelWriter, *, as_split: bool) -> Graph:
    """x (1, 8, 16, 16) -> 1x1 Conv to 16 (c) -> chunk in two along the channels (one Split, or two Slices as
    ultralytics' YOLOv9 exports it) -> Add of the halves (y)."""
    conv = helper.make_node("Conv", ["x", "w"], ["c"], name="conv")
    consts: dict[str, np.ndarray] = {"w": np.zeros((16, 8, 1, 1), np.float32)}
    if as_split:
        chunk = [helper.make_node("Split", ["c", "sizes"], ["lo", "hi"], name="split", axis=1)]
        consts["sizes"] = np.array([8, 8], np.int64)
    else:
        chunk = [helper.make_node("Slice", ["c", "s0", "e0", "axes"], ["lo"], name="slice_lo"),
                 helper.make_node("Slice", ["c", "s1", "e1", "axes"], ["hi"], name="slice_hi")]
        consts |= {"s0": np.array([0], np.int64), "e0": np.array([8], np.int64), "s1": np.array([8], np.int64),
                   "e1": np.array([16], np.int64), "axes": np.array([1], np.int64)}
    nodes = [conv, *chunk, helper.make_node("Add", ["lo", "hi"], ["y"], name="add")]
    return load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], consts))


def test_the_slices_of_one_chunk_read_their_input_as_one_split(write_model: ModelWriter) -> None:
    # c (16,384 B) exceeds the 8 KiB plan; its one reader, the Split, is the next layer: c streams, no DDR bytes
    split = estimate_graph(_chunked(write_model, as_split=True), STREAMED).layers
    assert split[0].ddr_write_bytes == 0
    # the same chunk as two Slices, the second two layers after the Conv: they take c in one pass too
    conv, lo, hi, _ = estimate_graph(_chunked(write_model, as_split=False), STREAMED).layers
    assert conv.ddr_write_bytes == 0
    assert lo.ddr_read_bytes == hi.ddr_read_bytes == 3 * 8  # the int64 starts, ends and axes only
    # Slices of different inputs are two layers: a Slice of x then one of c leave c's reader a layer further on
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Slice", ["x", "s0", "e0", "axes"], ["xs"], name="slice_x"),
             helper.make_node("Slice", ["c", "s0", "e0", "axes"], ["cs"], name="slice_c"),
             helper.make_node("Add", ["xs", "cs"], ["y"], name="add")]
    consts = {"w": np.zeros((16, 8, 1, 1), np.float32), "s0": np.array([0], np.int64),
              "e0": np.array([8], np.int64), "axes": np.array([1], np.int64)}
    graph = load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], consts))
    assert estimate_graph(graph, STREAMED).layers[0].ddr_write_bytes == FMAP
