"""Two per-inference facts of the RDK boards' toolchain, on small graphs: a chain of element-wise layers that is a
function of one activation runs as one lookup table (:func:`layerscope.estimator.roofline.lut_chains`), and the runtime
hands the model's outputs over as float32 at the profile's ``output_bytes_per_s``
(:func:`layerscope.estimator.roofline.output_conversion_us`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from conftest import F32, ModelWriter
from layerscope.analysis.board import derive_profile
from layerscope.analysis.calibrate import Params, calibrated_profile, profile_toml
from layerscope.costs import cost_graph
from layerscope.estimator import estimate_graph
from layerscope.estimator.roofline import lut_chains, output_conversion_us
from layerscope.model import Graph, load_model
from layerscope.targets import load_profile
from layerscope.targets.schema import load_profile_file
from test_estimate import toy_profile

FUSED = dataclasses.replace(toy_profile(), fuse_elementwise=True, fuse_lut_chains=True)
C_BYTES = 16 * 16 * 16 * 4  # the first conv's output, 1x16x16x16 fp32: 16,384 B


def _gelu_then_conv(write_model: ModelWriter) -> Graph:
    """Conv -> GELU as torch exports it (Div by sqrt 2, Erf, Add 1, Mul by the conv's output, Mul by 0.5) -> Conv:
    the conv's output is read by the Div and again four layers later by the Mul."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Div", ["c", "sqrt2"], ["d"], name="div"),
        helper.make_node("Erf", ["d"], ["e"], name="erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="add"),
        helper.make_node("Mul", ["c", "a"], ["m"], name="mul"),
        helper.make_node("Mul", ["m", "half"], ["g"], name="half"),
        helper.make_node("Conv", ["g", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1]),
    ]
    weights = {"w1": np.zeros((16, 8, 3, 3), np.float32), "w2": np.zeros((8, 16, 3, 3), np.float32),
               "sqrt2": np.array(1.4142135, np.float32), "one": np.array(1.0, np.float32),
               "half": np.array(0.5, np.float32)}
    return load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], weights))


def _chains(graph: Graph) -> list[tuple[str, tuple[str, ...], str, set[str]]]:
    costs = cost_graph(graph)
    return [(c.root, c.folded, c.last, set(c.inner)) for c in lut_chains(graph, [False] * len(costs), costs)]


def test_a_gelu_chain_is_one_lookup_table_that_keeps_its_input_on_chip(write_model: ModelWriter) -> None:
    graph = _gelu_then_conv(write_model)
    assert _chains(graph) == [("c", ("div", "erf", "add", "mul"), "half", {"c", "d", "e", "a", "m"})]
    conv1, div, erf, add, mul, half, conv2 = estimate_graph(graph, FUSED).layers
    # the four folded layers cost nothing; c, read four layers on (beyond FUSION_WINDOW), is never written
    assert [e.latency_us for e in (div, erf, add, mul)] == [0.0] * 4 and conv1.ddr_write_bytes == 0
    # the table: one element-wise pass over its 4,096 outputs at 1e12 ops/s, reading only its 0.5 (4 B), writing g
    assert half.compute_us == pytest.approx(4_096 / 1e12 * 1e6) and half.ddr_read_bytes == 4
    assert half.ddr_write_bytes == C_BYTES and conv2.ddr_read_bytes == C_BYTES + 8 * 16 * 9 * 4
    # a compiler that fuses nothing: every layer priced, c written once and read by the Div and by the Mul
    plain = estimate_graph(graph, toy_profile()).layers
    assert all(e.latency_us > 0 for e in plain) and plain[0].ddr_write_bytes == C_BYTES
    assert plain[1].ddr_read_bytes == C_BYTES + 4 and plain[4].ddr_read_bytes == 2 * C_BYTES  # Div: c and sqrt 2


def test_a_product_of_two_activations_or_a_chain_read_midway_is_no_table(write_model: ModelWriter) -> None:
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
        helper.make_node("Mul", ["s", "z"], ["m"], name="gate"),  # s times another activation: two variables
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Neg", ["r"], ["n"], name="neg"),  # r is read here and is a model output: it escapes
    ]
    graph = load_model(write_model(nodes, [("x", F32, [1, 4, 8, 8]), ("z", F32, [1, 4, 8, 8])],
                                   [("m", F32, None), ("r", F32, None), ("n", F32, None)]))
    assert _chains(graph) == []
    assert all(e.latency_us > 0 for e in estimate_graph(graph, FUSED).layers)


def test_silu_folds_its_sigmoid_into_the_mul(write_model: ModelWriter) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["s"], name="sigmoid"),
        helper.make_node("Mul", ["c", "s"], ["y"], name="mul"),
    ]
    graph = load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)],
                                   {"w": np.zeros((16, 8, 3, 3), np.float32)}))
    assert _chains(graph) == [("c", ("sigmoid",), "mul", {"c", "s"})]
    _, sigmoid, mul = estimate_graph(graph, FUSED).layers
    assert sigmoid.latency_us == 0.0 and sigmoid.unit == "-" and mul.ddr_write_bytes == C_BYTES
    # fuse_elementwise alone keeps c and s on chip but prices the Sigmoid (a compiler without tables)
    _, sigmoid, mul = estimate_graph(graph, dataclasses.replace(FUSED, fuse_lut_chains=False)).layers
    assert sigmoid.latency_us > 0 and sigmoid.ddr_read_bytes == 0 and mul.ddr_read_bytes == 0


def _two_outputs(write_model: ModelWriter) -> Graph:
    """x -> Relu -> y (1x16x16x16 fp32, 4,096 elements) and Relu -> k (int64 [8]): outputs of 16,384 + 64 B."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
             helper.make_node("Shape", ["x"], ["k0"], name="shape"),
             helper.make_node("Concat", ["k0", "k0"], ["k"], name="cat", axis=0)]
    from onnx import TensorProto
    return load_model(write_model(nodes, [("x", F32, [1, 16, 16, 16])],
                                  [("y", F32, None), ("k", TensorProto.INT64, None)]))


def test_the_runtime_hands_the_outputs_over_as_float32_once_per_inference(write_model: ModelWriter) -> None:
    graph = _two_outputs(write_model)
    # y: 4,096 floats x 4 B = 16,384 B; k: 8 int64 = 64 B, 16,448 B at 1e9 B/s = 16.448 us
    profile = dataclasses.replace(toy_profile(), task_overhead_us=100.0, output_bytes_per_s=1e9)
    assert output_conversion_us(graph, profile) == pytest.approx(16.448)
    assert output_conversion_us(graph, toy_profile()) == 0.0
    with_output = estimate_graph(graph, profile)
    plain = estimate_graph(graph, dataclasses.replace(profile, output_bytes_per_s=None))
    assert with_output.task_overhead_us == pytest.approx(116.448) and plain.task_overhead_us == 100.0
    assert with_output.layers == plain.layers  # no layer takes it
    # int8 deployment: the outputs are still handed over as float32
    assert estimate_graph(graph, profile, "int8").task_overhead_us == pytest.approx(116.448)


def test_output_rate_reads_calibrates_with_the_task_factor_and_derives_by_cpu_clock(tmp_path: Path) -> None:
    s100 = load_profile("rdk-s100")
    base = dataclasses.replace(s100, output_bytes_per_s=2.0e9, sources={**s100.sources, "output_bytes_per_s": "x"})
    # a fit that doubles the per-inference task halves the rate at which the runtime hands outputs over
    base = dataclasses.replace(base, fuse_lut_chains=True)
    mapping = calibrated_profile(base, Params({}, {}, 1.0, task_scale=2.0), name="fit", models=("m",), note="n")
    assert mapping["output_bytes_per_s"] == pytest.approx(1.0e9) and mapping["fuse_lut_chains"] is True
    path = tmp_path / "fit.toml"
    path.write_text(profile_toml(mapping, "fit"), encoding="utf-8")
    written = load_profile_file(path)
    assert written.output_bytes_per_s == pytest.approx(1.0e9) and written.fuse_lut_chains
    # S100P's A78AE at 2.0 GHz against S100's 1.5 GHz: the CPU-side hand-over is 4/3 as fast
    derived = tmp_path / "rdk-s100p.toml"
    derived.write_text(derive_profile(base, "rdk-s100p"), encoding="utf-8")
    assert load_profile_file(derived).output_bytes_per_s == pytest.approx(2.0e9 * 2.0 / 1.5)
    # a profile without the rate keeps none
    plain = tmp_path / "plain.toml"
    plain.write_text(derive_profile(s100, "rdk-s100p"), encoding="utf-8")
    assert load_profile_file(plain).output_bytes_per_s is None
