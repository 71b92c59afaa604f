"""The host-CPU estimate: views are kernels, caches are no free scratchpad, element-wise ops at their measured rate."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.estimator.roofline import estimate_graph
from layerscope.estimator.types import Bound
from layerscope.model.load import load_model
from layerscope.targets import host
from layerscope.targets.host import HostMeasurement

MEASURED = HostMeasurement(
    probe_version=host.PROBE_VERSION,
    measured_at="2025-01-01T00:00:00+00:00",
    cpu_model="Test CPU 9000",
    cores=4,
    onnxruntime_version="1.0",
    numpy_version="2.0",
    machine="x86_64",
    fp32_ops_per_s=100e9,
    int8_ops_per_s=None,
    fp16_ops_per_s=None,
    copy_bytes_per_s=20e9,
    dispatch_overhead_us=0.5,
    llc_bytes=32 * 1024 * 1024,
    clock_hz=None,
    lane_width=8,
    on_chip_bytes=16 * 1024 * 1024,
    on_chip_source="test",
    cache_knee_bytes=None,
    op_ops_per_s={"Div": 2e9, "Erf": 0.5e9},
)


def _save(tmp_path: Path, nodes: list[onnx.NodeProto], shape: list[int], outputs: list[str],
          inits: list[onnx.TensorProto] | None = None) -> Path:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs], inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return path


def _by_id(path: Path, measurement: HostMeasurement = MEASURED) -> dict[str, object]:
    est = estimate_graph(load_model(path), host.profile_from_measurement(measurement))
    return {layer.layer_id: layer for layer in est.layers}


def test_a_view_on_the_cpu_costs_the_kernel_dispatch_not_zero(tmp_path: Path) -> None:
    # ONNX Runtime runs a Reshape as a kernel like any other: one dispatch (the probe's per-node overhead)
    shape = numpy_helper.from_array(np.array([16, 64], np.int64), "shape")
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["a"], name="relu"),
                            helper.make_node("Reshape", ["a", "shape"], ["y"], name="view")],
                 [1, 1024], ["y"], [shape])
    layers = _by_id(path)
    view = layers["view"]
    assert view.latency_us == pytest.approx(MEASURED.dispatch_overhead_us)  # type: ignore[attr-defined]
    assert view.bound is Bound.OVERHEAD and view.ddr_read_bytes == 0  # type: ignore[attr-defined]


def test_an_activation_handed_to_the_next_cpu_layer_is_still_read_and_written(tmp_path: Path) -> None:
    # Two identical Divs of 1 MiB: the first's output goes to the next layer only (an NPU keeps it on chip), the
    # second's is the model's output. On a CPU both load and store their activations.
    size = 1 << 18
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    path = _save(tmp_path, [helper.make_node("Div", ["x", "half"], ["a"], name="first"),
                            helper.make_node("Div", ["a", "half"], ["y"], name="second")],
                 [1, size], ["y"], [half])
    first, second = (_by_id(path)[name] for name in ("first", "second"))
    nbytes = 4 * size
    assert first.ddr_write_bytes == nbytes and second.ddr_read_bytes >= nbytes  # type: ignore[attr-defined]
    assert first.latency_us == pytest.approx(second.latency_us)  # type: ignore[attr-defined]


def test_probed_op_rates_set_the_compute_time_of_their_layers(tmp_path: Path) -> None:
    # Erf counts 1 op per element; measured at 0.5 G ops/s it takes 2 ns per element, not the GEMM peak's 0.01 ns
    size = 1 << 16
    path = _save(tmp_path, [helper.make_node("Erf", ["x"], ["y"], name="erf")], [1, size], ["y"])
    profile = host.profile_from_measurement(MEASURED)
    assert profile.efficiency_for("Erf") == pytest.approx(0.5e9 / 100e9)
    assert profile.efficiency_for("Add") == 1.0  # not probed: the unit's rate
    erf = _by_id(path)["erf"]
    assert erf.compute_us == pytest.approx(size / 0.5e9 * 1e6)  # type: ignore[attr-defined]
    assert erf.bound is Bound.COMPUTE  # type: ignore[attr-defined]
    unprobed = _by_id(path, replace(MEASURED, op_ops_per_s={}))["erf"]
    assert unprobed.compute_us == pytest.approx(size / 100e9 * 1e6)  # type: ignore[attr-defined]


def test_the_real_op_probe_rates_each_op_it_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "PROBE_OPS", ("Add", "Erf", "Transpose"))
    rates = host._op_ops_per_s()
    assert set(rates) == {"Add", "Erf", "Transpose"}
    assert all(0 < rate < 1e13 for rate in rates.values())


def test_a_cached_measurement_round_trips_its_op_rates() -> None:
    again = HostMeasurement.from_json(MEASURED.to_json())
    assert again == MEASURED and again is not None and again.op_ops_per_s == {"Div": 2e9, "Erf": 0.5e9}
    broken = MEASURED.to_json().replace('"Erf": 500000000.0', '"Erf": -1')
    assert HostMeasurement.from_json(broken) is None
