"""OpenVINO with ONNX Runtime running the layers it cannot convert (ai.onnx.ml ops): which layers fall back, the chain
of segments, the profile of each layer on the runtime that ran it, and the option that refuses the fallback."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rich.console import Console

from layerscope.cli.main import main
from layerscope.errors import InputError, ModelError
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.report.tables import layers_csv
from layerscope.report.terminal import measured_layers_table
from layerscope.runfile.derived import measurement_origin
from layerscope.runfile.models import BenchMeasurement, KernelProfileMeasurement
from layerscope.runtimes.openvino.compile import OpenVinoOptions
from layerscope.runtimes.openvino.fallback import fallback_stages, open_steps, run_chain, unconvertible_layers
from layerscope.tempdirs import scratch
from layerscope.workflows.bench import BenchRequest, bench
from layerscope.workflows.common import Hooks
from layerscope.workflows.profile import ProfileRequest, profile

pytest.importorskip("openvino")
ort = pytest.importorskip("onnxruntime")

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
ML = "ai.onnx.ml"


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           initializers: list[onnx.TensorProto] = ()) -> onnx.ModelProto:  # type: ignore[assignment]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers)),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _scaler_matmul_relu(tmp_path: Path) -> Path:
    """X[64,256] -> Scaler (ai.onnx.ml) -> MatMul W[256,256] -> Relu -> Y[64,256]: each kernel takes microseconds
    (the profilers count whole microseconds)."""
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32), "W")
    model = _model([helper.make_node("Scaler", ["X"], ["scaled"], name="scaler", domain=ML, offset=[0.5] * 256,
                                     scale=[2.0] * 256),
                    helper.make_node("MatMul", ["scaled", "W"], ["mm"], name="matmul"),
                    helper.make_node("Relu", ["mm"], ["Y"], name="relu")],
                   [helper.make_tensor_value_info("X", F32, [64, 256])],
                   [helper.make_tensor_value_info("Y", F32, [64, 256])], [weight])
    path = tmp_path / "scaler_mlp.onnx"
    onnx.save(model, str(path))
    return path


def test_only_the_ml_op_falls_back_and_a_convertible_model_has_none(tmp_path: Path) -> None:
    reasons = unconvertible_layers(load_model(_scaler_matmul_relu(tmp_path)))
    assert reasons == {"scaler": "OpenVINO's ONNX frontend has no conversion for ai.onnx.ml.Scaler"}
    plain = _model([helper.make_node("Relu", ["X"], ["Y"], name="relu")],
                   [helper.make_tensor_value_info("X", F32, [1, 8])], [helper.make_tensor_value_info("Y", F32, [1, 8])])
    onnx.save(plain, str(tmp_path / "relu.onnx"))
    assert unconvertible_layers(load_model(tmp_path / "relu.onnx")) == {}


def test_the_chain_computes_what_onnx_runtime_computes_across_int64_and_map_outputs(tmp_path: Path) -> None:
    """LinearClassifier (ONNX Runtime) -> its int64 label cast and its scores scaled (OpenVINO) -> ZipMap (ONNX Runtime,
    a sequence-of-maps model output, which OpenVINO's frontend cannot even load): three segments, and the chain gives
    the values ONNX Runtime gives for the whole model."""
    classes = 3
    rng = np.random.default_rng(1)
    seq_of_maps = helper.make_sequence_type_proto(helper.make_map_type_proto(I64, helper.make_tensor_type_proto(
        F32, [])))
    model = _model(
        [helper.make_node("LinearClassifier", ["X"], ["label", "scores"], name="linear", domain=ML,
                          classlabels_ints=list(range(classes)), coefficients=rng.standard_normal(4 * classes).tolist(),
                          intercepts=[0.1, -0.2, 0.3]),
         helper.make_node("Cast", ["label"], ["label_f"], name="cast", to=F32),
         helper.make_node("Mul", ["scores", "two"], ["scaled"], name="mul"),
         helper.make_node("ZipMap", ["scaled"], ["probabilities"], name="zipmap", domain=ML,
                          classlabels_int64s=list(range(classes)))],
        [helper.make_tensor_value_info("X", F32, [2, 4])],
        [helper.make_tensor_value_info("label_f", F32, [2]), helper.make_value_info("probabilities", seq_of_maps)],
        [numpy_helper.from_array(np.array([2.0], dtype=np.float32), "two")])
    path = tmp_path / "classifier.onnx"
    onnx.save(model, str(path))
    graph = load_model(path)
    reasons = unconvertible_layers(graph)
    assert set(reasons or {}) == {"linear", "zipmap"}
    feeds = {"X": rng.standard_normal((2, 4)).astype(np.float32)}
    expected = dict(zip(["label_f", "probabilities"],
                        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds),
                        strict=True))
    with scratch("test-fallback") as folder:
        stages = fallback_stages(graph, reasons or {}, folder)
        assert [(s.runtime, s.layer_ids) for s in stages] == [
            ("onnxruntime", ("linear",)), ("openvino", ("cast", "mul")), ("onnxruntime", ("zipmap",))]
        steps = open_steps(stages, SessionConfig(provider="CPU"), OpenVinoOptions(precision="f32"), profiling=False,
                           folder=folder)
        tensors, inside_us = run_chain(steps, feeds)
    assert inside_us > 0
    np.testing.assert_array_equal(tensors["label_f"], expected["label_f"])
    assert len(tensors["probabilities"]) == 2
    for got, want in zip(tensors["probabilities"], expected["probabilities"], strict=True):
        assert got.keys() == want.keys()
        assert got == pytest.approx(want, rel=1e-6)


def test_profile_runs_the_scaler_on_onnx_runtime_and_the_rest_on_openvino(tmp_path: Path) -> None:
    warnings: list[str] = []
    result = profile(ProfileRequest(_scaler_matmul_relu(tmp_path), backend="openvino", precision="f32", runs=6,
                                    warmup=2, threads=1), Hooks(warning=warnings.append))
    run = result.run
    (line,) = [w for w in warnings if "OpenVINO cannot convert" in w]
    assert "1 layer(s) (scaler: ai.onnx.ml.Scaler" in line and "--no-ov-fallback" in line
    m = run.measurement
    assert isinstance(m, KernelProfileMeasurement) and m.backend == "openvino"
    assert m.provider == "OpenVINO CPU + ONNX Runtime CPU fallback"
    layers = {layer.id: layer.measured for layer in run.layers}
    assert all(lm is not None and lm.status in ("measured", "fused") and (lm.median_us or 0) > 0
               for lm in layers.values()), layers  # every layer measured on the runtime that ran it
    scaler = layers["scaler"]
    assert scaler is not None and scaler.runtime == "onnxruntime"
    assert scaler.fallback_reason == "OpenVINO's ONNX frontend has no conversion for ai.onnx.ml.Scaler"
    assert {lid: lm.runtime for lid, lm in layers.items() if lm is not None and lid != "scaler"} == {
        "matmul": "openvino", "relu": "openvino"}
    providers = {lid: k.provider for k in run.kernels for lid in k.layers}
    assert providers["scaler"] == "CPUExecutionProvider" and providers["matmul"] == providers["relu"] == "CPU"
    # each profiled chain holds its kernels one after another: the chain's mean is at least the kernels' means summed
    kernels_mean_us = sum(k.mean_us or 0.0 for k in run.kernels)
    assert m.instrumented is not None and m.instrumented["mean_us"] >= kernels_mean_us > 0
    assert m.machine is not None and (m.machine.model_extra or {})["fallback"]["handover_median_us"] >= 0
    assert run.latency is not None and "hand-over counts in the time" in (run.latency.source or "")
    # what the user reads names the runtime that timed each layer
    origin = measurement_origin(run)
    assert origin is not None and origin.label.startswith(
        "OpenVINO performance counters and ONNX Runtime's profiler for the layers that fell back to it, CPU (f32)")
    table = Console(width=200, record=True)
    table.print(measured_layers_table(run, top=3))
    rows = {line.split()[1]: line for line in table.export_text().splitlines() if line.split()[1:2]}
    assert rows["scaler"].rstrip().endswith("(fallback: ONNX Runtime)")
    assert "fallback" not in rows["matmul"] and "fallback" not in rows["relu"]
    cells = {row["layer.id"]: row for row in csv.DictReader(io.StringIO(layers_csv(run)))}
    assert (cells["scaler"]["meas.backend"], cells["scaler"]["meas.device"]) == ("onnxruntime", "CPUExecutionProvider")
    assert (cells["matmul"]["meas.backend"], cells["matmul"]["meas.device"]) == ("openvino", "CPU")


def test_a_model_of_one_ml_op_runs_whole_on_onnx_runtime(tmp_path: Path) -> None:
    model = _model([helper.make_node("Scaler", ["X"], ["Y"], name="only", domain=ML, offset=[1.0] * 4,
                                     scale=[3.0] * 4)],
                   [helper.make_tensor_value_info("X", F32, [2, 4])], [helper.make_tensor_value_info("Y", F32, [2, 4])])
    path = tmp_path / "scaler.onnx"
    onnx.save(model, str(path))
    warnings: list[str] = []
    run = profile(ProfileRequest(path, backend="openvino", runs=3, warmup=1, threads=1),
                  Hooks(warning=warnings.append)).run
    assert any("OpenVINO cannot convert any layer of the model (only: ai.onnx.ml.Scaler" in w for w in warnings)
    (layer,) = run.layers
    assert layer.measured is not None and layer.measured.runtime == "onnxruntime"
    assert (layer.measured.median_us or 0) > 0
    assert [k.provider for k in run.kernels] == ["CPUExecutionProvider"]


def test_no_ov_fallback_keeps_the_exit_2_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scaler_matmul_relu(tmp_path)
    with pytest.raises(ModelError, match=r"OpenVINO has no conversion for the ai\.onnx\.ml op Scaler"):
        profile(ProfileRequest(path, backend="openvino", runs=1, warmup=0, fallback=False))
    assert main(["profile", str(path), "--backend", "openvino", "--no-ov-fallback", "--runs", "1"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("layerscope:")]
    assert len(errors) == 1 and "OpenVINO has no conversion for the ai.onnx.ml op Scaler" in errors[0]


def test_bench_times_the_chain_in_one_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scaler_matmul_relu(tmp_path)
    warnings: list[str] = []
    run = bench(BenchRequest(path, backend="openvino", precision="f32", runs=20, warmup=2, threads=1),
                Hooks(warning=warnings.append)).run
    (line,) = [w for w in warnings if "OpenVINO cannot convert" in w]
    assert "1 layer(s) (scaler: ai.onnx.ml.Scaler" in line
    m = run.measurement
    assert isinstance(m, BenchMeasurement) and m.provider == "OpenVINO CPU + ONNX Runtime CPU fallback"
    assert (m.model_extra or {})["fallback"]["reasons"] == {
        "scaler": "OpenVINO's ONNX frontend has no conversion for ai.onnx.ml.Scaler"}
    assert run.latency is not None and run.latency.samples == 20 and (run.latency.p50_us or 0) > 0
    with pytest.raises(InputError, match="one chain of segments, measured in one stream"):
        bench(BenchRequest(path, backend="openvino", runs=2, warmup=0, streams=2))
    assert main(["bench", str(path), "--backend", "openvino", "--no-ov-fallback", "--runs", "1"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("layerscope:")]
    assert len(errors) == 1 and "OpenVINO has no conversion for the ai.onnx.ml op Scaler" in errors[0]
