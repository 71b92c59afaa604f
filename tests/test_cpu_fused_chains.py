"""The host-CPU estimate of the chains ONNX Runtime fuses into one kernel, and of activations its caches hold."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.test_host_cpu_estimate import MEASURED

from layerscope.costs import cost_layer
from layerscope.estimator.roofline import cpu_fused_chains, estimate_graph
from layerscope.estimator.types import LayerEstimate
from layerscope.model.load import load_model
from layerscope.targets import host
from layerscope.targets.schema import profile_from_mapping, read_toml

ROWS, COLS = 64, 1024  # 256 KiB of fp32 per activation


def _const(name: str, value: float) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.float32), name)


def _model(tmp_path: Path, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto],
           extra_inputs: tuple[tuple[str, list[int]], ...] = ()) -> Path:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, COLS])]
    inputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in extra_inputs]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def _gelu(tmp_path: Path) -> Path:
    """BERT's exported GELU: y = x * 0.5 * (1 + erf(x / sqrt(2))), after a bias Add."""
    nodes = [helper.make_node("Add", ["x", "bias"], ["h"], name="bias_add"),
             helper.make_node("Div", ["h", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add1"),
             helper.make_node("Mul", ["h", "a"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["y"], name="mul_half")]
    bias = numpy_helper.from_array(np.zeros(COLS, np.float32), "bias")
    return _model(tmp_path, nodes, [bias, _const("sqrt2", math.sqrt(2)), _const("one", 1.0), _const("half", 0.5)])


def _layers(path: Path, measurement: host.HostMeasurement = MEASURED) -> dict[str, LayerEstimate]:
    est = estimate_graph(load_model(path), host.profile_from_measurement(measurement))
    return {layer.layer_id: layer for layer in est.layers}


def test_a_gelu_chain_hands_its_intermediates_inside_one_kernel(tmp_path: Path) -> None:
    # ONNX Runtime runs bias Add + the five GELU layers as one BiasGelu kernel: it reads x, writes y
    layers = _layers(_gelu(tmp_path))
    nbytes = 4 * ROWS * COLS
    assert layers["bias_add"].ddr_read_bytes == nbytes + 4 * COLS and layers["bias_add"].ddr_write_bytes == 0
    for inner in ("div", "erf", "add1", "mul"):
        assert layers[inner].ddr_write_bytes == 0, inner
    # each reads its scalar constant at most: no activation
    assert [layers[name].ddr_read_bytes for name in ("div", "erf", "add1", "mul")] == [4, 0, 4, 0]
    assert layers["mul_half"].ddr_read_bytes == 4 and layers["mul_half"].ddr_write_bytes == nbytes


def test_a_layernorm_chain_is_one_kernel_and_its_input_stays_written(tmp_path: Path) -> None:
    # x + r (a residual Add whose sum a later layer also reads), then LayerNorm's nine elementary layers
    nodes = [helper.make_node("Add", ["x", "r"], ["s"], name="residual"),
             helper.make_node("ReduceMean", ["s"], ["mu"], axes=[-1], name="mean"),
             helper.make_node("Sub", ["s", "mu"], ["c"], name="sub"),
             helper.make_node("Pow", ["c", "two"], ["sq"], name="pow"),
             helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], name="var"),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
             helper.make_node("Div", ["c", "sd"], ["n"], name="div"),
             helper.make_node("Mul", ["n", "gamma"], ["g"], name="scale"),
             helper.make_node("Add", ["g", "beta"], ["ln"], name="shift"),
             helper.make_node("Relu", ["ln"], ["act"], name="act"),
             helper.make_node("Add", ["act", "s"], ["y"], name="later")]
    inits = [_const("two", 2.0), _const("eps", 1e-5), numpy_helper.from_array(np.ones(COLS, np.float32), "gamma"),
             numpy_helper.from_array(np.zeros(COLS, np.float32), "beta")]
    path = _model(tmp_path, nodes, inits, (("r", [ROWS, COLS]),))
    graph = load_model(path)
    inside = cpu_fused_chains(graph, [cost_layer(n, graph) for n in graph.layers])
    assert inside == {"mu", "c", "sq", "var", "ve", "sd", "n", "g"}
    layers = _layers(path)
    assert layers["residual"].ddr_write_bytes == 4 * ROWS * COLS  # the later Add reads it: written
    assert layers["shift"].ddr_write_bytes == 4 * ROWS * COLS  # the chain's output, read by a Relu: written


def test_a_short_elementwise_pair_without_an_anchor_is_two_kernels(tmp_path: Path) -> None:
    nodes = [helper.make_node("Div", ["x", "two"], ["d"], name="div"),
             helper.make_node("Add", ["d", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["a", "two"], ["m"], name="mul"),
             helper.make_node("Sub", ["m", "one"], ["y"], name="sub")]
    layers = _layers(_model(tmp_path, nodes, [_const("two", 2.0), _const("one", 1.0)]))
    assert all(layers[name].ddr_write_bytes == 4 * ROWS * COLS for name in ("div", "add", "mul", "sub"))


def test_a_scalar_scale_read_only_by_a_matmul_is_its_alpha(tmp_path: Path) -> None:
    # MatMulScaleFusion: Mul(x, 0.125) -> MatMul: the scaled x is never written
    weight = numpy_helper.from_array(np.ones((COLS, 16), np.float32), "w")
    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"], name="scale"),
             helper.make_node("MatMul", ["xs", "w"], ["y"], name="matmul")]
    layers = _layers(_model(tmp_path, nodes, [_const("scale", 0.125), weight]))
    assert layers["scale"].ddr_write_bytes == 0
    assert layers["matmul"].ddr_read_bytes == 4 * COLS * 16


def test_cached_activations_move_at_the_cache_bandwidth(tmp_path: Path) -> None:
    # An Add of 256 KiB: within half the 16 MiB on-chip bytes, so its traffic moves at 80 GB/s, not 20 GB/s
    path = _model(tmp_path, [helper.make_node("Add", ["x", "x"], ["y"], name="add")], [])
    nbytes = 4 * ROWS * COLS
    dram = _layers(path)["add"]
    cached = _layers(path, replace(MEASURED, cache_bytes_per_s=80e9))["add"]
    assert dram.load_us + dram.store_us == pytest.approx(3 * nbytes / 20e9 * 1e6)
    assert cached.load_us + cached.store_us == pytest.approx(3 * nbytes / 80e9 * 1e6)
    assert cached.ddr_read_bytes == dram.ddr_read_bytes == 2 * nbytes  # the bytes moved are the same
    # a cache of 256 KiB holds half of it at most: the same tensor moves at the DRAM rate
    small = _layers(path, replace(MEASURED, cache_bytes_per_s=80e9, on_chip_bytes=256 * 1024))["add"]
    assert small.load_us + small.store_us == pytest.approx(dram.load_us + dram.store_us)


def test_the_cache_bandwidth_is_the_curve_below_half_the_on_chip_bytes() -> None:
    curve = ((256 << 10, 90e9), (1 << 20, 100e9), (4 << 20, 95e9), (16 << 20, 40e9), (64 << 20, 20e9))
    assert host.cache_bandwidth(curve, 8 << 20) == pytest.approx(95e9)
    assert host.cache_bandwidth(curve, 128 << 10) is None
    profile = host.profile_from_measurement(replace(MEASURED, cache_bytes_per_s=95e9))
    assert profile.cache_bytes_per_s == 95e9 and str(profile.source_for("cache_bytes_per_s")).startswith("measured")
    assert host.profile_from_measurement(MEASURED).cache_bytes_per_s is None
    again = host.HostMeasurement.from_json(replace(MEASURED, cache_bytes_per_s=95e9).to_json())
    assert again is not None and again.cache_bytes_per_s == 95e9


def test_a_profile_with_a_bad_cache_bandwidth_is_refused() -> None:
    mapping = host.profile_mapping(read_toml(host.TEMPLATE_PATH), MEASURED)
    with pytest.raises(Exception, match="cache_bytes_per_s"):
        profile_from_mapping({**mapping, "cache_bytes_per_s": -5.0}, "test.toml")
