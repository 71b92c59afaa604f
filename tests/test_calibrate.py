"""Calibration: NNLS, recovering known parameters (per unit kind and per op type, with shrinkage), the written
profile loads and estimates what the fit predicts, leave-one-model-out, the command."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from tests.conftest import F32, ModelWriter

from layerscope.analysis import calibrate as C
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.run import estimate_run, save_run
from layerscope.runfile import RunFile, as_run
from layerscope.targets import load_profile

N = helper.make_node


def test_nnls_matches_the_unconstrained_solution_when_it_is_positive_and_clips_otherwise() -> None:
    rng = np.random.default_rng(0)
    a = rng.random((40, 3))
    x = np.array([1.5, 0.2, 3.0])
    assert C.nnls(a, a @ x) == pytest.approx(x, rel=1e-9)
    b = a @ np.array([1.0, -2.0, 1.0])
    solution = C.nnls(a, b)
    assert (solution >= 0).all() and solution[1] == 0.0


def _model(write_model: ModelWriter, name: str, channels: int, size: int) -> Path:
    w = np.full((channels, channels, 3, 3), 0.01, np.float32)
    # a SiLU (Sigmoid, Mul), which an NPU runs in the convolution, and a Sigmoid of the pooled map: a vector layer
    return write_model([N("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                        N("Sigmoid", ["c"], ["s"], name="sig"), N("Mul", ["c", "s"], ["m"], name="mul"),
                        N("MaxPool", ["m"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                        N("Sigmoid", ["p"], ["y"], name="gate")],
                       [("x", F32, [1, channels, size, size])], [("y", F32, [1, channels, size // 2, size // 2])],
                       {"w": w}, name=name)


#: The RDK S100's datasheet profile (benchmarks/data/profiles): a base that stays put when the shipped profile is
#: recalibrated on board latencies.
S100 = str(Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles" / "rdk-s100.toml")


def _measured_run(path: Path, truth: C.Params, profile_name: str = S100) -> RunFile:
    """A run whose 'measurements' are exactly the roofline under ``truth`` (plus a gap-free end to end), built as
    its document and typed."""
    profile = load_profile(profile_name)
    graph = load_model(path)
    run = estimate_run(graph, estimate_graph(graph, profile), profile).to_json()
    total = 0.0
    for layer in run["layers"]:
        group = C.group_of(layer)
        if group is None:
            continue
        e = layer["estimate"]
        t = truth.layer_us(C.LayerTerm(layer["id"], group, e["compute_us"], e["load_us"] + e["store_us"],
                                       layer["op_type"]))
        layer["measured"] = {"status": "measured", "median_us": t, "samples": 5, "fused_group": None}
        total += t
    total += run["summary"].get("est_task_overhead_us", 0.0)  # end to end: the profile's per-inference task too
    run["latency"] = {"p50_us": total, "mean_us": total}
    return as_run(run)


TRUTH = C.Params({"TAE/tensor": 2.0, "VAE/vector": 3.0, "AAE/aux": 1.5}, {"TAE/tensor": 4.0, "VAE/vector": 2.0,
                                                                          "AAE/aux": 1.0}, 1.7)


def _runs(write_model: ModelWriter) -> list[RunFile]:
    shapes = [(16, 32), (32, 64), (64, 32), (128, 16), (8, 128)]
    return [_measured_run(_model(write_model, f"m{c}_{s}.onnx", c, s), TRUTH) for c, s in shapes]


def test_the_fit_recovers_known_parameters_and_predicts_exactly(write_model: ModelWriter) -> None:
    data = [C.run_data(run) for run in _runs(write_model)]
    cal = C.calibrate(data, load_profile(S100))
    for e in (*cal.in_sample, *cal.leave_one_out):
        assert abs(e.error) < 0.02, e
    assert C.summarize(cal.leave_one_out) is not None


def test_the_written_profile_loads_and_estimates_what_the_fit_predicts(write_model: ModelWriter,
                                                                       tmp_path: Path) -> None:
    runs = _runs(write_model)
    base = load_profile(S100)
    data = [C.run_data(run) for run in runs]
    cal = C.calibrate(data, base)
    mapping = C.calibrated_profile(base, cal.params, name="s100-cal", models=cal.models, when="2026-01-01")
    path = C.write_profile(tmp_path / "s100-cal.toml", C.profile_toml(mapping, "test"))
    profile = load_profile(str(path))
    assert profile.name == "s100-cal" and profile.source_for("units.TAE.efficiency").startswith("calibrated:")
    for run, d in zip(runs, data, strict=True):
        graph = load_model(str(run.model.path))
        # rel 1e-3: the run file rounds µs to ns
        assert estimate_graph(graph, profile).latency_us == pytest.approx(C.predict_us(d, cal.params), rel=1e-3)


def test_efficiency_above_one_is_written_as_a_raised_peak(tmp_path: Path) -> None:
    base = load_profile("rdk-s100")
    efficiency = base.unit("TAE").efficiency
    params = C.Params({"TAE/tensor": efficiency / 7}, {"TAE/tensor": 0.5}, 1.0)  # 7x the unit's peak
    mapping = C.calibrated_profile(base, params, name="fast", models=["m"])
    tae = next(u for u in mapping["units"] if u["name"] == "TAE")
    assert tae["efficiency"] == 1.0
    assert tae["peak_ops_per_s"]["int8"] == pytest.approx(80e12 * 7)
    path = C.write_profile(tmp_path / "fast.toml", C.profile_toml(mapping))
    assert load_profile(str(path)).unit("TAE").attainable_ops_per_s("int8") == pytest.approx(80e12 * 7)


def test_runs_without_measurements_or_of_another_profile_are_refused(write_model: ModelWriter) -> None:
    path = _model(write_model, "m.onnx", 16, 32)
    profile = load_profile(S100)
    graph = load_model(path)
    plain = estimate_run(graph, estimate_graph(graph, profile), profile)
    with pytest.raises(InputError, match="no end-to-end latency"):
        C.run_data(plain)
    data = C.run_data(_measured_run(path, TRUTH))
    with pytest.raises(InputError, match="not 'rdk-x5'"):
        C.calibrate([data], load_profile("rdk-x5"))


def test_calibrate_command_writes_a_profile_and_reports_the_errors(write_model: ModelWriter, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    files = [str(save_run(run, tmp_path / f"run{i}.json")) for i, run in enumerate(_runs(write_model))]
    out = tmp_path / "cal" / "my-s100.toml"
    assert main(["calibrate", *files[:4], "--check", files[4], "-o", str(out), "--base", S100, "--fit-json",
                 str(tmp_path / "cal.json")]) == 0
    text = capsys.readouterr().out
    assert "leave-one-model-out: mean |error|" in text and "held-out: mean |error|" in text
    assert load_profile(str(out)).name == "my-s100"
    summary = json.loads((tmp_path / "cal.json").read_text())
    assert summary["leave_one_out_summary"]["count"] == 4 and summary["checks_summary"]["count"] == 1
    assert summary["leave_one_out_kernels_summary"]["max_abs_error"] < 0.02
    assert isinstance(summary["op_efficiency"], list)
    assert main(["calibrate", *files[:4], "--no-op-efficiency", "-o", str(tmp_path / "unit.toml"), "--base",
                 S100]) == 0
    assert "op-type factors: none" in capsys.readouterr().out
    assert main(["calibrate", files[0], "-o", str(tmp_path / "x.txt")]) == 2


# ------------------------------------------------------------------------------------------ op-type factors
TOY = """\
schema = 1
name = "toy-cpu"
kind = "cpu"
description = "calibration test target: compute-bound elementwise ops, a bandwidth-bound Transpose"
default_dtype = "fp32"
dtypes = ["fp32"]
lane_width = 8
cores = 1
clock_hz = 1.0e9
sram_bytes = 0
ddr_bandwidth_bytes_per_s = 1.0e10
ddr_efficiency = 1.0
cpu_ddr_bandwidth_bytes_per_s = 1.0e10
transfer_overhead_us = 0.0

[[units]]
name = "T"
kinds = ["tensor"]
efficiency = 1.0
overhead_us = 1.0
[units.peak_ops_per_s]
fp32 = 1.0e11

[[units]]
name = "V"
kinds = ["vector", "aux"]
efficiency = 0.5
overhead_us = 0.5
[units.peak_ops_per_s]
fp32 = 2.0e9

[[units]]
name = "M"
kinds = ["move"]
efficiency = 1.0
overhead_us = 0.5
[units.peak_ops_per_s]
fp32 = 1.0e12

[cpu]
name = "C"
efficiency = 1.0
overhead_us = 0.0
[cpu.peak_ops_per_s]
fp32 = 1.0e9
"""

#: (channels, size, elementwise chain): every op in 6 layers, a different mix in each model.
CHAINS = [(16, 32, ("Sigmoid", "Relu", "Tanh")), (32, 64, ("Tanh", "Relu", "Sigmoid")),
          (64, 32, ("Sigmoid", "Tanh", "Tanh")), (128, 16, ("Relu", "Relu", "Sigmoid")),
          (8, 128, ("Tanh", "Sigmoid", "Relu")), (24, 48, ("Sigmoid", "Relu", "Tanh"))]
#: Sigmoid 4x and Tanh 0.5x the vector unit's time; Transpose is bandwidth-bound whatever its factor.
OP_TRUTH = C.Params({"T/tensor": 2.0, "V/vector": 3.0, "V/aux": 1.5, "M/move": 1.0},
                    {"T/tensor": 4.0, "V/vector": 2.0, "V/aux": 1.0, "M/move": 0.5}, 1.7,
                    op_scale={"Sigmoid": 4.0, "Tanh": 0.5, "Transpose": 3.0})


def _chain_model(write_model: ModelWriter, name: str, channels: int, size: int, chain: tuple[str, ...]) -> Path:
    """Conv -> the elementwise ``chain`` -> Transpose -> MaxPool."""
    nodes = [N("Conv", ["x", "w"], ["a0"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    nodes += [N(op, [f"a{i}"], [f"a{i + 1}"], name=f"{op.lower()}{i}") for i, op in enumerate(chain)]
    nodes += [N("Transpose", [f"a{len(chain)}"], ["t"], name="tr", perm=[0, 1, 3, 2]),
              N("MaxPool", ["t"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])]
    w = np.full((channels, channels, 3, 3), 0.01, np.float32)
    return write_model(nodes, [("x", F32, [1, channels, size, size])],
                       [("y", F32, [1, channels, size // 2, size // 2])], {"w": w}, name=name)


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    path = tmp_path / "toy-cpu.toml"
    path.write_text(TOY, encoding="utf-8")
    return path


def _toy_runs(write_model: ModelWriter, toy: Path, truths: list[C.Params] | None = None) -> list[RunFile]:
    truths = truths or [OP_TRUTH] * len(CHAINS)
    return [_measured_run(_chain_model(write_model, f"c{i}.onnx", c, s, chain), truth, str(toy))
            for i, ((c, s, chain), truth) in enumerate(zip(CHAINS, truths, strict=True))]


def test_the_fit_recovers_known_op_factors(write_model: ModelWriter, toy: Path) -> None:
    data = [C.run_data(run) for run in _toy_runs(write_model, toy)]
    cal = C.calibrate(data, load_profile(str(toy)))
    p, fits = cal.params, {f.op_type: f for f in cal.op_fits}
    for op in ("Sigmoid", "Tanh", "Relu"):
        # the factor is relative to the unit kind's pooled scale; their product is the truth, exactly before
        # shrinkage and within the shrinkage (kernels that agree: weight ~0.998) after it
        truth = OP_TRUTH.scale("V/vector") * OP_TRUTH.op_factor(op)
        assert p.scale("V/vector") * fits[op].raw_scale == pytest.approx(truth, rel=1e-6)
        assert fits[op].weight > 0.99 and fits[op].scale == pytest.approx(fits[op].raw_scale ** fits[op].weight)
        assert p.scale("V/vector") * p.op_factor(op) == pytest.approx(truth, rel=0.01)
    assert "Transpose" not in p.op_scale  # bandwidth-bound: fitted by the memory scale, not a compute factor
    assert p.memory_scale == pytest.approx(1.7, rel=0.01)
    for e in (*cal.in_sample, *cal.leave_one_out):
        assert abs(e.error) < 0.01, e


def test_one_efficiency_per_unit_kind_cannot_express_them(write_model: ModelWriter, toy: Path) -> None:
    data = [C.run_data(run) for run in _toy_runs(write_model, toy)]
    cal = C.calibrate(data, load_profile(str(toy)), per_op=False)
    assert cal.op_fits == () and cal.params.op_scale == {}
    for op, far_off in (("Sigmoid", lambda r: r < 0.8), ("Tanh", lambda r: r > 2.0)):
        # one pooled vector efficiency: Sigmoid predicted too fast, Tanh far too slow
        ratios = [cal.params.layer_us(t) / t.measured_us for d in data for t in d.layers if t.op_type == op]
        assert ratios and all(far_off(r) for r in ratios), (op, ratios)
    worse, better = C.summarize(cal.leave_one_out), C.summarize(C.calibrate(data, load_profile(str(toy))).leave_one_out)
    assert worse is not None and better is not None and worse.max_abs > 2 * better.max_abs


def test_ops_with_too_little_evidence_keep_their_unit_kinds_efficiency(write_model: ModelWriter,
                                                                       toy: Path) -> None:
    runs = _toy_runs(write_model, toy)[:3]
    # one more model whose four Sin layers are all the Sin there is: enough layers, but a single model
    runs.append(_measured_run(_chain_model(write_model, "sin.onnx", 32, 32, ("Sin",) * 4), OP_TRUTH, str(toy)))
    data = [C.run_data(run) for run in runs]
    evidence = C.op_evidence(data)
    # Tanh 4 layers in 3 models; Sigmoid 3 layers, Relu 2 (MIN_OP_LAYERS = 4); Sin 4 layers in 1 model
    assert (evidence["Tanh"].layers, evidence["Tanh"].models, evidence["Sigmoid"].layers) == (4, 3, 3)
    assert (evidence["Sin"].layers, evidence["Sin"].models) == (4, 1) and not evidence["Sin"].enough
    assert evidence["Tanh"].enough and not evidence["Sigmoid"].enough and not evidence["Relu"].enough
    params = C.fit(data, C.base_overheads(load_profile(str(toy)), C._groups(data)))
    assert {"Tanh", "Conv", "MaxPool"} >= set(params.op_scale) >= {"Tanh"}


def test_an_op_whose_kernels_disagree_is_shrunk_toward_its_unit_kind(write_model: ModelWriter, toy: Path) -> None:
    slow, fast = (replace(OP_TRUTH, op_scale={"Sigmoid": k}) for k in (8.0, 2.0))
    data = [C.run_data(run) for run in _toy_runs(write_model, toy, [slow, fast] * 3)]
    fit = next(f for f in C.calibrate(data, load_profile(str(toy))).op_fits if f.op_type == "Sigmoid")
    # log(8 / 2) apart: a spread near 0.7 against the prior's 0.5, over 6 kernels -> weight ~0.75
    assert fit.spread > 0.3 and 0.5 < fit.weight < 0.95
    assert fit.scale == pytest.approx(fit.raw_scale ** fit.weight)
    assert 1.0 < fit.scale < fit.raw_scale or fit.raw_scale < fit.scale < 1.0


def test_the_written_op_efficiency_loads_and_estimates_what_the_fit_predicts(write_model: ModelWriter, toy: Path,
                                                                             tmp_path: Path) -> None:
    runs = _toy_runs(write_model, toy)
    base = load_profile(str(toy))
    data = [C.run_data(run) for run in runs]
    cal = C.calibrate(data, base)
    mapping = C.calibrated_profile(base, cal.params, name="toy-cal", models=cal.models, when="2026-01-01")
    profile = load_profile(str(C.write_profile(tmp_path / "toy-cal.toml", C.profile_toml(mapping, "test"))))
    assert set(profile.op_efficiency) == set(cal.params.op_scale) >= {"Sigmoid", "Tanh", "Relu"}
    assert profile.efficiency_for("Sigmoid") == pytest.approx(1 / cal.params.op_factor("Sigmoid"))
    assert profile.source_for("op_efficiency.Sigmoid").startswith("calibrated:")
    for run, d in zip(runs, data, strict=True):
        graph = load_model(str(run.model.path))
        assert estimate_graph(graph, profile).latency_us == pytest.approx(C.predict_us(d, cal.params), rel=1e-3)
