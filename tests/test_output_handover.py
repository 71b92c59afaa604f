"""The RDK boards' runtime hands the model's outputs over as float32 at the profile's ``output_bytes_per_s``, once per
inference (:func:`layerscope.estimator.roofline.output_conversion_us`), on small graphs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from onnx import helper

from conftest import F32, ModelWriter
from layerscope.analysis.board import derive_profile
from layerscope.analysis.calibrate import Params, calibrated_profile, profile_toml
from layerscope.estimator import estimate_graph
from layerscope.estimator.roofline import output_conversion_us
from layerscope.model import Graph, load_model
from layerscope.targets import load_profile
from layerscope.targets.schema import load_profile_file
from test_estimate import toy_profile


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
    mapping = calibrated_profile(base, Params({}, {}, 1.0, task_scale=2.0), name="fit", models=("m",), note="n")
    assert mapping["output_bytes_per_s"] == pytest.approx(1.0e9)
    path = tmp_path / "fit.toml"
    path.write_text(profile_toml(mapping, "fit"), encoding="utf-8")
    written = load_profile_file(path)
    assert written.output_bytes_per_s == pytest.approx(1.0e9)
    # S100P's A78AE at 2.0 GHz against S100's 1.5 GHz: the CPU-side hand-over is 4/3 as fast
    derived = tmp_path / "rdk-s100p.toml"
    derived.write_text(derive_profile(base, "rdk-s100p"), encoding="utf-8")
    assert load_profile_file(derived).output_bytes_per_s == pytest.approx(2.0e9 * 2.0 / 1.5)
    # a profile without the rate keeps none
    plain = tmp_path / "plain.toml"
    plain.write_text(derive_profile(dataclasses.replace(s100, output_bytes_per_s=None), "rdk-s100p"), encoding="utf-8")
    assert load_profile_file(plain).output_bytes_per_s is None


def test_the_run_records_the_hand_over_alone_and_an_estimate_with_quantized_outputs_skips_it(
        write_model: ModelWriter) -> None:
    from layerscope.report.views.estimate import task_text
    from layerscope.run import estimate_run

    graph = _two_outputs(write_model)
    profile = dataclasses.replace(toy_profile(), task_overhead_us=100.0, output_bytes_per_s=1e9)
    run = estimate_run(graph, estimate_graph(graph, profile), profile)
    assert run.summary.est_task_overhead_us == pytest.approx(116.448)
    assert run.summary.est_output_handover_us == pytest.approx(16.448)
    assert run.estimate_info is not None and not run.estimate_info.quantized_outputs
    assert "16.4 µs of it the outputs' float32 hand-over" in task_text(run.summary, run.estimate_info)
    quantized = estimate_graph(graph, profile, quantized_outputs=True)
    assert quantized.task_overhead_us == 100.0 and quantized.output_handover_us == 0.0
    assert quantized.layers == estimate_graph(graph, profile).layers
    kept = estimate_run(graph, quantized, profile)
    assert kept.summary.est_task_overhead_us == 100.0 and kept.summary.est_output_handover_us is None
    assert kept.estimate_info is not None and kept.estimate_info.quantized_outputs is True
    assert "outputs handed over quantized" in task_text(kept.summary, kept.estimate_info)
    assert kept.to_json()["estimate_info"]["quantized_outputs"] is True
