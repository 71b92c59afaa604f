"""Roofline estimate: hand-computed numbers on small graphs, and properties on real networks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import F32, ZOO_MODELS, ModelWriter
from layerscope.costs import cost_graph
from layerscope.costs.types import UnitKind
from layerscope.estimator import Bound, estimate_graph
from layerscope.model import Graph, load_model
from layerscope.targets import load_profile
from layerscope.targets.profile import ComputeUnit, FallbackRule, Profile

ALL_KINDS = tuple(UnitKind)


def toy_profile(sram_bytes: int = 0, rules: tuple[FallbackRule, ...] = ()) -> Profile:
    """1 Tops on every kind, 1 GB/s DDR, no overheads: numbers a test can compute by hand."""
    unit = ComputeUnit("U", ALL_KINDS, {"fp32": 1e12, "int8": 4e12}, efficiency=1.0, overhead_us=0.0)
    cpu = ComputeUnit("CPU", ALL_KINDS, {"fp32": 1e10}, efficiency=1.0, overhead_us=5.0)
    return Profile(
        name="toy", description="toy", kind="npu", source_path="<test>", units=(unit,), cpu=cpu,
        ddr_bandwidth_bytes_per_s=1e9, ddr_efficiency=1.0, cpu_ddr_bandwidth_bytes_per_s=5e8,
        transfer_overhead_us=10.0, sram_bytes=sram_bytes, cores=1, clock_hz=1e9, default_dtype="fp32",
        dtypes=("fp32", "int8"), lane_width=8, fallback_rules=rules)


def three_layers(write_model: ModelWriter) -> Graph:
    """Conv(8->16, 3x3, pad 1) on 1x8x16x16 -> Relu -> MaxPool(2x2, stride 2): all fp32."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    w = np.zeros((16, 8, 3, 3), np.float32)
    return load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], {"w": w}))


def test_three_layer_graph_by_hand_all_through_ddr(write_model: ModelWriter) -> None:
    est = estimate_graph(three_layers(write_model), toy_profile())
    conv, relu, pool = est.layers
    # conv: MACs = 16 out ch x 16 x 16 x (8 x 3 x 3) = 294,912 -> 589,824 ops at 1e12/s = 0.589824 us
    assert conv.compute_us == pytest.approx(0.589824)
    # reads x (8x16x16x4 = 8,192 B) + w (16x8x9x4 = 4,608 B) = 12,800 B at 1e9 B/s = 12.8 us
    assert conv.ddr_read_bytes == 12_800 and conv.load_us == pytest.approx(12.8)
    # writes c (16x16x16x4 = 16,384 B) = 16.384 us
    assert conv.ddr_write_bytes == 16_384 and conv.store_us == pytest.approx(16.384)
    assert conv.latency_us == pytest.approx(12.8 + 16.384)
    assert conv.bound is Bound.BANDWIDTH
    # relu: reads and writes 16,384 B each
    assert relu.latency_us == pytest.approx(2 * 16.384)
    # pool: reads 16,384 B, writes 16x8x8x4 = 4,096 B
    assert pool.latency_us == pytest.approx(16.384 + 4.096)
    assert est.latency_us == pytest.approx(29.184 + 32.768 + 20.48)
    assert est.ddr_bytes == 12_800 + 16_384 + 2 * 16_384 + 16_384 + 4_096


def test_activations_stay_on_chip_when_they_fit(write_model: ModelWriter) -> None:
    est = estimate_graph(three_layers(write_model), toy_profile(sram_bytes=1 << 20))
    conv, relu, pool = est.layers
    assert conv.ddr_write_bytes == 0  # c is consumed by the next layer only and fits
    assert relu.ddr_read_bytes == 0 and relu.ddr_write_bytes == 0
    assert pool.ddr_read_bytes == 0 and pool.ddr_write_bytes == 4_096  # y is a model output
    assert relu.bound is Bound.COMPUTE


def test_int8_deployment_quarters_float_traffic(write_model: ModelWriter) -> None:
    est = estimate_graph(three_layers(write_model), toy_profile(), dtype="int8")
    assert est.layers[0].ddr_read_bytes == 12_800 // 4
    assert est.layers[0].compute_us == pytest.approx(589_824 / 4e12 * 1e6)


def test_weights_larger_than_sram_are_streamed_in_passes(write_model: ModelWriter) -> None:
    # weights 4,608 B; SRAM 4,096 B -> 2,048 B for weights -> ceil(4608 / 2048) = 3 passes,
    # so the input (8,192 B) is read 3 times; c (16,384 B) does not fit the 2,048 B activation half.
    est = estimate_graph(three_layers(write_model), toy_profile(sram_bytes=4_096))
    conv = est.layers[0]
    assert conv.weight_passes == 3
    assert conv.ddr_read_bytes == 3 * 8_192 + 4_608


def test_cpu_fallback_layer_runs_on_the_cpu_with_hand_off(write_model: ModelWriter) -> None:
    rule = FallbackRule("Relu", None, "no Relu here")
    est = estimate_graph(three_layers(write_model), toy_profile(sram_bytes=1 << 20, rules=(rule,)))
    conv, relu, _ = est.layers
    assert relu.fallback_reason == "no Relu here" and relu.unit == "CPU"
    # 4,096 elements x 1 op at 1e10/s = 0.4096 us; 32,768 B at 5e8 B/s = 65.536 us; + 5 + 10 us
    assert relu.latency_us == pytest.approx(65.536 + 15.0)
    assert conv.ddr_write_bytes == 16_384  # its consumer is on the CPU: c must go to DDR
    assert est.fallback_count == 1


def test_an_op_efficiency_of_one_half_doubles_that_ops_compute_time(write_model: ModelWriter) -> None:
    graph = three_layers(write_model)
    plain = toy_profile(rules=(FallbackRule("MaxPool", None, "no pooling here"),))
    slow_conv = dataclasses.replace(plain, op_efficiency={"Conv": 0.5, "MaxPool": 0.25})
    assert slow_conv.efficiency_for("Conv") == 0.5 and slow_conv.efficiency_for("Relu") == 1.0
    before, after = estimate_graph(graph, plain), estimate_graph(graph, slow_conv)
    # conv: 589,824 ops at 1e12/s x 0.5 = 1.179648 us, twice the 0.589824 us of the hand-checked case
    assert after.layers[0].compute_us == pytest.approx(2 * 0.589824)
    assert before.layers[0].compute_us == pytest.approx(0.589824)
    # traffic and overhead are untouched, and so are ops not listed and CPU-fallback layers (MaxPool)
    for b, a in zip(before.layers, after.layers, strict=True):
        assert (a.load_us, a.store_us, a.overhead_us) == (b.load_us, b.store_us, b.overhead_us)
    assert after.layers[1:] == before.layers[1:]


def test_op_efficiency_can_make_a_layer_compute_bound(write_model: ModelWriter) -> None:
    graph = three_layers(write_model)
    slow = dataclasses.replace(toy_profile(), op_efficiency={"Conv": 0.01})
    conv = estimate_graph(graph, slow).layers[0]
    assert conv.compute_us == pytest.approx(58.9824) and conv.bound is Bound.COMPUTE
    assert conv.latency_us == pytest.approx(58.9824)


def test_zero_copy_layers_take_no_time(write_model: ModelWriter) -> None:
    nodes = [helper.make_node("Flatten", ["x"], ["y"], axis=1)]
    est = estimate_graph(load_model(write_model(nodes, [("x", F32, [2, 3, 4])], [("y", F32, None)])), toy_profile())
    assert est.layers[0].latency_us == 0.0 and est.layers[0].bound is Bound.NONE


@pytest.mark.parametrize("path", ZOO_MODELS, ids=lambda p: p.stem)
def test_properties_on_the_zoo(path: Path) -> None:
    graph = load_model(path)
    s100 = load_profile("rdk-s100")
    base = estimate_graph(graph, s100)
    assert base.latency_us > 0
    for e, c in zip(base.layers, base.costs, strict=True):
        assert e.latency_us >= 0
        if c.unit_kind is not UnitKind.ZERO_COPY:
            # latency is at least the DDR time of what it moves and at least its compute
            assert e.latency_us >= max(e.compute_us, e.load_us + e.store_us)
    faster_ddr = dataclasses.replace(s100, ddr_bandwidth_bytes_per_s=2 * s100.ddr_bandwidth_bytes_per_s)
    more_sram = dataclasses.replace(s100, sram_bytes=4 * s100.sram_bytes)
    assert estimate_graph(graph, faster_ddr).latency_us <= base.latency_us
    assert estimate_graph(graph, more_sram).latency_us <= base.latency_us * (1 + 1e-12)


def test_gather_reads_only_the_gathered_rows_of_an_embedding(write_model: ModelWriter) -> None:
    # Gather(table 1000x64 fp32, ids 1x8) -> 1x8x64: reads 8 rows x 64 x 4 B = 2,048 B of the 256,000 B table.
    table = np.zeros((1000, 64), np.float32)
    ids = helper.make_tensor_value_info("ids", 7, [1, 8])
    node = helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)
    path = write_model([node], [], [("y", F32, None)], {"table": table})
    model = onnx.load(str(path))
    model.graph.input.append(ids)
    onnx.save(model, str(path))
    graph = load_model(path)
    cost = cost_graph(graph)[0]
    assert cost.bytes_read_weight == 2_048
    est = estimate_graph(graph, toy_profile())
    # + the 8 int64 ids (64 B) read, 2,048 B written
    assert est.layers[0].ddr_read_bytes == 2_048 + 64 and est.layers[0].ddr_write_bytes == 2_048


def _silu_then_conv(write_model: ModelWriter) -> Graph:
    """Conv -> SiLU as exported (Sigmoid, then Mul of the conv's output by it) -> Conv: the conv's output is read
    two layers after it, by an element-wise layer each time."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["s"], name="sigmoid"),
        helper.make_node("Mul", ["c", "s"], ["m"], name="mul"),
        helper.make_node("Conv", ["m", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    weights = {"w1": np.zeros((16, 8, 3, 3), np.float32), "w2": np.zeros((8, 16, 3, 3), np.float32)}
    return load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], weights))


def test_fused_elementwise_layers_keep_their_producer_output_on_chip(write_model: ModelWriter) -> None:
    graph = _silu_then_conv(write_model)
    conv1, sigmoid, mul, conv2 = estimate_graph(graph, toy_profile()).layers
    # no SRAM, no fusion: c (16x16x16x4 = 16,384 B) is stored once and read by the Sigmoid and by the Mul
    assert conv1.ddr_write_bytes == 16_384 and sigmoid.ddr_read_bytes == 16_384 and mul.ddr_read_bytes == 2 * 16_384
    fused = dataclasses.replace(toy_profile(), fuse_elementwise=True)
    conv1, sigmoid, mul, conv2 = estimate_graph(graph, fused).layers
    # fused: c and s never leave the chip; the SiLU runs in conv1's output stage, which stores its output m, read by a
    # Conv (not element-wise)
    assert sigmoid.ddr_read_bytes == sigmoid.ddr_write_bytes == mul.ddr_read_bytes == mul.ddr_write_bytes == 0
    assert conv1.ddr_write_bytes == 16_384 and conv2.ddr_read_bytes == 16_384 + 4_608


def _overhead_profile(fuse: bool = True) -> Profile:
    """:func:`toy_profile` with 2 µs per layer, fusing element-wise layers or not."""
    unit = dataclasses.replace(toy_profile().units[0], overhead_us=2.0)
    return dataclasses.replace(toy_profile(), units=(unit,), fuse_elementwise=fuse)


def test_a_fusing_compiler_runs_a_convolutions_activation_in_the_convolution(write_model: ModelWriter) -> None:
    """The RDK X5's node lists: a Relu after a Conv compiles to no node of its own, and a SiLU's lookup after a Conv
    costs no pass of its own (hbdk: YOLOv9t's 190 convolutions and 179 SiLUs take what YOLOv8n's 63 and 57 do). The
    activation costs nothing apart, not even a layer's overhead; the Conv writes its output."""
    conv, relu, pool = estimate_graph(three_layers(write_model), _overhead_profile()).layers
    assert relu.unit == "-" and relu.latency_us == 0.0 and relu.overhead_us == 0.0 and relu.ddr_write_bytes == 0
    # the Conv writes the Relu's output r (16x16x16x4 = 16,384 B), which the MaxPool reads
    assert conv.ddr_write_bytes == 16_384 and pool.ddr_read_bytes == 16_384
    assert conv.latency_us == pytest.approx(12.8 + 16.384 + 2.0)
    conv1, sigmoid, mul, _ = estimate_graph(_silu_then_conv(write_model), _overhead_profile()).layers
    assert conv1.overhead_us == 2.0 and sigmoid.unit == mul.unit == "-" and sigmoid.latency_us == mul.latency_us == 0.0
    # without fusion each is a layer, its overhead included
    plain = estimate_graph(_silu_then_conv(write_model), _overhead_profile(fuse=False)).layers
    assert all(e.overhead_us == 2.0 and e.latency_us > 2.0 for e in plain)


def test_a_gated_activation_off_a_convolution_is_one_lookup_and_a_gelu_stays_layers(write_model: ModelWriter) -> None:
    """A SiLU of an Add (no convolution's output stage to run it) is one lookup, run by its Mul: its Sigmoid costs
    nothing apart. An exported GELU (Div, Erf, Add, Mul by its input, Mul by 0.5) stays five layers, and so does a
    Relu of a convolution's output that another layer also reads."""
    scalar = {name: np.array(value, np.float32) for name, value in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["c", "x2"], ["o2"], name="add_c"),
        helper.make_node("Add", ["r", "x2"], ["a0"], name="add_r"),
        helper.make_node("Sigmoid", ["a0"], ["s"], name="sigmoid"),
        helper.make_node("Mul", ["a0", "s"], ["z"], name="silu"),
        helper.make_node("Div", ["x2", "sqrt2"], ["d"], name="div"),
        helper.make_node("Erf", ["d"], ["e"], name="erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="add"),
        helper.make_node("Mul", ["x2", "a"], ["m"], name="mul"),
        helper.make_node("Mul", ["m", "half"], ["g"], name="mul_1"),
        helper.make_node("Add", ["z", "g"], ["y"], name="sum"),
    ]
    weights = {"w": np.zeros((16, 8, 3, 3), np.float32), **scalar}
    path = write_model(nodes, [("x", F32, [1, 8, 16, 16]), ("x2", F32, [1, 16, 16, 16])],
                       [("y", F32, None), ("o2", F32, None)], weights)
    by_id = {e.layer_id: e for e in estimate_graph(load_model(path), _overhead_profile()).layers}
    assert by_id["sigmoid"].unit == "-" and by_id["sigmoid"].latency_us == 0.0 and by_id["silu"].overhead_us == 2.0
    assert all(by_id[k].overhead_us == 2.0 for k in ("relu", "div", "erf", "add", "mul", "mul_1"))


def _residual(write_model: ModelWriter) -> Graph:
    """x -> Conv a -> Conv b -> Add(a, b): a is read by the next layer and again two layers later."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["a", "w2"], ["b"], name="conv_b", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    weights = {"w1": np.zeros((8, 8, 3, 3), np.float32), "w2": np.zeros((8, 8, 3, 3), np.float32)}
    return load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], weights))


def test_a_planned_sram_keeps_a_residual_branch_on_chip(write_model: ModelWriter) -> None:
    graph = _residual(write_model)
    a_bytes = 8 * 16 * 16 * 4  # 8,192 B
    # the next-layer rule: a has a reader two layers on, so it goes through DDR however large the SRAM
    conv_a, conv_b, add = estimate_graph(graph, toy_profile(sram_bytes=1 << 20)).layers
    assert conv_a.ddr_write_bytes == a_bytes and add.ddr_read_bytes == a_bytes
    # planned: a and b fit half the SRAM together, so both stay on chip until the Add
    planned = dataclasses.replace(toy_profile(sram_bytes=1 << 20), plan_sram=True)
    conv_a, conv_b, add = estimate_graph(graph, planned).layers
    assert conv_a.ddr_write_bytes == 0 and conv_b.ddr_write_bytes == 0 and add.ddr_read_bytes == 0
    # half the SRAM holds a but not a and b at once: a stays, b (produced while a is alive) goes through DDR
    tight = dataclasses.replace(planned, sram_bytes=2 * a_bytes + 2)
    conv_a, conv_b, add = estimate_graph(graph, tight).layers
    assert conv_a.ddr_write_bytes == 0 and conv_b.ddr_write_bytes == a_bytes and add.ddr_read_bytes == a_bytes


def test_a_per_inference_task_overhead_adds_once_outside_every_layer(write_model: ModelWriter,
                                                                     tmp_path: Path) -> None:
    from layerscope.run import estimate_run

    graph = three_layers(write_model)
    plain = estimate_graph(graph, toy_profile())
    tasked = estimate_graph(graph, dataclasses.replace(toy_profile(), task_overhead_us=250.0))
    assert [e.latency_us for e in tasked.layers] == [e.latency_us for e in plain.layers]  # no layer takes it
    assert tasked.layers_us == pytest.approx(plain.latency_us)
    assert tasked.latency_us == pytest.approx(plain.latency_us + 250.0)
    summary = estimate_run(graph, tasked, dataclasses.replace(toy_profile(), task_overhead_us=250.0)).summary
    assert summary.est_task_overhead_us == 250.0 and summary.est_latency_us == pytest.approx(tasked.latency_us)
    assert estimate_run(graph, plain, toy_profile()).summary.est_task_overhead_us is None  # absent when 0


def _channel_halves(write_model: ModelWriter) -> Graph:
    """x (1x16x8x8) -> two Slices of channels 0:8 and 8:16 (a chunk in two, as ultralytics' YOLOv9 exports it) ->
    Add of the halves."""
    nodes = [
        helper.make_node("Slice", ["x", "s0", "e0", "axes"], ["lo"], name="slice_lo"),
        helper.make_node("Slice", ["x", "s1", "e1", "axes"], ["hi"], name="slice_hi"),
        helper.make_node("Add", ["lo", "hi"], ["y"], name="add"),
    ]
    consts = {"s0": np.array([0], np.int64), "e0": np.array([8], np.int64), "s1": np.array([8], np.int64),
              "e1": np.array([16], np.int64), "axes": np.array([1], np.int64)}
    return load_model(write_model(nodes, [("x", F32, [1, 16, 8, 8])], [("y", F32, None)], consts))


def test_a_slice_loads_only_the_part_it_keeps(write_model: ModelWriter) -> None:
    graph = _channel_halves(write_model)
    lo, hi, _ = estimate_graph(graph, toy_profile()).layers
    half = 8 * 8 * 8 * 4  # 2,048 B: each Slice keeps half of x's 4,096 B
    # each reads its half of x (not all 4,096 B) + its 3 int64 operands (24 B), and writes its half
    assert lo.ddr_read_bytes == hi.ddr_read_bytes == half + 24
    assert lo.ddr_write_bytes == half and lo.load_us == pytest.approx((half + 24) / 1e3)
    # at int8 the kept part is a quarter as many bytes: 512 B (+ the operands, which keep their int64)
    lo8 = estimate_graph(graph, toy_profile(), dtype="int8").layers[0]
    assert lo8.ddr_read_bytes == 512 + 24
