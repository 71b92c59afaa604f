"""Calibration from whole-model board latencies (``layerscope calibrate --board``): the table, the fit, k across
families, the derived sibling chip."""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path

import pytest

from _stacks import conv_stack
from layerscope.analysis.board import (
    BoardEntry,
    board_runs,
    calibrate_board,
    derive_profile,
    fit_board,
    k_analysis,
    read_board_table,
)
from layerscope.analysis.calibrate import Params, base_overheads, calibrated_profile, errors, predict_us
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.samples import parse_spec
from layerscope.targets import load_profile
from layerscope.targets.schema import load_profile_file

#: The uncalibrated S100 profile (the base the shipped one is fitted from): the synthetic fits below start from it.
DATASHEET = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles"


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> list[BoardEntry]:
    """Eight compute-bound conv stacks of two families (latencies filled later)."""
    folder = tmp_path_factory.mktemp("stacks")
    shapes = [(56, (256, 256)), (112, (128, 128, 128)), (28, (512, 512)), (80, (192, 192, 192, 192)),
              (28, (512, 512, 512)), (40, (384, 384)), (80, (128, 128, 128)), (56, (320, 320))]
    return [BoardEntry(str(conv_stack(folder / f"m{i}.onnx", size, widths, i, channels=8)), 1.0, family=f"f{i % 2}")
            for i, (size, widths) in enumerate(shapes)]


def test_the_fit_recovers_known_efficiencies_from_whole_model_latencies(stacks: list[BoardEntry]) -> None:
    import dataclasses

    # the layers' time alone: no per-inference task, no output hand-over
    profile = dataclasses.replace(load_profile_file(DATASHEET / "rdk-s100.toml"), task_overhead_us=0.0,
                                  output_bytes_per_s=None)
    runs = board_runs(stacks, profile)
    groups = sorted({t.group for r in runs for t in r.layers})
    base = base_overheads(profile, groups)
    # a board whose tensor unit runs at 40% of the profile's attainable rate (compute x2.5), the rest as profiled
    truth = Params({g: 2.5 if g.startswith("TAE") else 1.0 for g in groups}, base, 1.0, base)
    board = [type(r)(**{**r.__dict__, "latency_us": predict_us(r, truth)}) for r in runs]
    fitted = fit_board(board, base)
    # the prior (PRIOR_SD) pulls each factor toward the base profile as far as the models let it: eight whole-model
    # latencies recover 2.5 as ~2.4 and leave the models within ~3% (the base profile is 59-60% low)
    assert fitted.scale("TAE/tensor") == pytest.approx(2.5, rel=0.1)
    assert fitted.memory_scale == pytest.approx(1.0, rel=0.1)
    assert max(abs(e.error) for e in errors(board, fitted)) < 0.05
    cal = calibrate_board(board, profile)
    assert cal.holdout == "family" and {e.model for e in cal.leave_one_out} == {r.model for r in board}
    assert max(abs(e.error) for e in cal.leave_one_out) < 0.10  # each family predicted by a fit without it


def test_the_calibrated_profile_estimates_what_the_fit_predicts(stacks: list[BoardEntry], tmp_path: Path) -> None:
    profile = load_profile("rdk-s100")
    runs = board_runs(stacks, profile)
    base = base_overheads(profile, sorted({t.group for r in runs for t in r.layers}))
    board = [type(r)(**{**r.__dict__, "latency_us": 1.7 * r.base_estimate_us}) for r in runs]
    params = fit_board(board, base)
    from layerscope.analysis.calibrate import profile_toml

    path = tmp_path / "fitted.toml"
    path.write_text(profile_toml(calibrated_profile(profile, params, name="fitted", models=["m"])), encoding="utf-8")
    fitted = load_profile_file(path)
    again = board_runs(stacks, fitted)
    for run, new in zip(board, again, strict=True):
        assert new.base_estimate_us == pytest.approx(predict_us(run, params), rel=1e-4)  # runs keep 3 decimals


def test_k_across_families_and_the_verdict(stacks: list[BoardEntry]) -> None:
    profile = load_profile("rdk-s100")
    runs = board_runs(stacks, profile)
    steady = [type(r)(**{**r.__dict__, "latency_us": 1.3 * r.base_estimate_us}) for r in runs]
    analysis = k_analysis(steady)
    assert analysis.k_mean == pytest.approx(1.3) and analysis.family_cv == pytest.approx(0.0, abs=1e-9)
    assert analysis.steady and "scale the per-layer estimate by k = 1.30" in analysis.verdict
    assert analysis.spearman == pytest.approx(1.0)
    # family f1 measured twice as slow as f0: k scattered, the verdict says rank only
    scattered = [type(r)(**{**r.__dict__, "latency_us": (2.0 if r.family == "f1" else 1.0) * r.base_estimate_us})
                 for r in runs]
    analysis = k_analysis(scattered)
    assert not analysis.steady and analysis.family_cv == pytest.approx(1 / 3)
    assert "rank hot spots" in analysis.verdict and "not trustworthy" in analysis.verdict


def test_the_board_table_is_read_and_bad_rows_are_named(tmp_path: Path) -> None:
    table = tmp_path / "board.csv"
    table.write_text("model,latency_ms,family,board\nsample:yolov8:size=64,2.0,v8,rdk-s100\n"
                     "m.onnx,1.5,other,rdk-s100\nsample:yolov8:size=64,9.0,v8,rdk-x5\n", encoding="utf-8")
    read = read_board_table(table, board="rdk-s100")
    assert [(e.model, e.latency_us, e.family) for e in read.entries] == [
        ("sample:yolov8:size=64", 2000.0, "v8"), (str(tmp_path / "m.onnx"), 1500.0, "other")]
    assert read.other_boards == 1 and read.entries[0].label == "yolov8:size=64"
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"fifo\.csv: not a file"):  # refused before it is opened: no hang
        read_board_table(fifo)
    bad = tmp_path / "bad.csv"
    for text, message in (("model,latency_ms\nm.onnx,-1\n", "bad.csv:2: latency_ms must be a positive"),
                          ("model,latency_ms\nm.onnx,fast\n", "bad.csv:2: latency_ms 'fast' is not a number"),
                          ("model,family\nm.onnx,x\n", "needs a 'model' column and a 'latency_ms' or 'perf'"),
                          ("model,latency_ms\n", "no rows")):
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=message):
            read_board_table(bad)


def test_a_perf_cell_reads_the_board_tool_output(tmp_path: Path) -> None:
    perf = Path(__file__).parent / "fixtures" / "hrt_perf" / "s100_lanenet_1thread.txt"
    table = tmp_path / "board.csv"
    table.write_text(f"model,perf\nm.onnx,{perf}\n", encoding="utf-8")
    (entry,) = read_board_table(table).entries
    assert entry.latency_us == pytest.approx(14245.0)  # "Average latency is: 14.245 ms" in the published output


def test_sample_specs() -> None:
    assert parse_spec("yolov8:size=64;width_multiple=0.25") == ("yolov8", {"size": 64, "width_multiple": 0.25})
    assert parse_spec("yolov5s") == ("yolov5s", {})
    with pytest.raises(ValueError, match="expected key=value"):
        parse_spec("yolov8:size")
    with pytest.raises(KeyError):
        parse_spec("nosuch:size=1")


def test_s100p_is_derived_from_s100_by_its_published_differences(tmp_path: Path) -> None:
    s100 = load_profile("rdk-s100")
    path = tmp_path / "rdk-s100p.toml"
    path.write_text(derive_profile(s100, "rdk-s100p"), encoding="utf-8")
    derived = load_profile_file(path)
    assert derived.name == "rdk-s100p" and derived.clock_hz == 1.5e9
    tae, tae_parent = derived.unit("TAE"), s100.unit("TAE")
    assert tae.peak_ops_per_s["int8"] == pytest.approx(128e12)  # 80 TOPS x 128/80
    assert tae.efficiency == tae_parent.efficiency
    assert derived.unit("VAE").peak_ops_per_s["int8"] == pytest.approx(1.5 * s100.unit("VAE").peak_ops_per_s["int8"])
    assert derived.unit("VAE").overhead_us == pytest.approx(s100.unit("VAE").overhead_us / 1.5)
    assert derived.cpu.peak_ops_per_s["fp32"] == pytest.approx(s100.cpu.peak_ops_per_s["fp32"] * 2.0 / 1.5)
    # feature maps move at the S100's attainable rate x the BPU clock ratio (at most the DDR's), weights at its rate
    assert derived.attainable_ddr_bytes_per_s == pytest.approx(
        min(1.5 * s100.attainable_ddr_bytes_per_s, s100.ddr_bandwidth_bytes_per_s))
    assert derived.attainable_weight_ddr_bytes_per_s == pytest.approx(s100.attainable_weight_ddr_bytes_per_s)
    assert "derived from rdk-s100" in tomllib.loads(path.read_text())["sources"]["units.TAE.peak_ops_per_s"]
    with pytest.raises(InputError, match="derived from rdk-s100"):
        derive_profile(load_profile("rdk-x5"), "rdk-s100p")


def test_calibrate_board_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    rows = ["model,latency_ms,family,board"]
    for i, (size, widths, ms) in enumerate([(112, (32, 32), 0.6), (56, (128, 128, 128), 0.9), (224, (16,), 0.7),
                                             (28, (512, 512), 1.4)]):
        conv_stack(folder / f"m{i}.onnx", size, widths, i, channels=8)
        rows.append(f"models/m{i}.onnx,{ms},f{i % 2},rdk-s100")
    rows.append("models/m0.onnx,5.0,f0,rdk-x5")
    table = tmp_path / "board.csv"
    table.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "mine.toml"
    assert main(["calibrate", "--board", str(table), "--base", "rdk-s100", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 row(s) of other boards than rdk-s100 left out" in printed
    assert "Leave one family out" in printed and "within ±15%" in printed
    assert "k = board / the base profile's estimate: mean" in printed
    assert "k = board / the calibrated profile: mean" in printed
    fitted = load_profile_file(out)
    assert fitted.name == "mine" and math.isfinite(fitted.unit("TAE").efficiency)
    # --board without --base is a usage error
    assert main(["calibrate", "--board", str(table), "-o", str(out)]) == 2


def test_the_fit_moves_a_per_inference_task_overhead(stacks: list[BoardEntry], tmp_path: Path) -> None:
    import dataclasses

    profile = dataclasses.replace(load_profile_file(DATASHEET / "rdk-s100.toml"), task_overhead_us=100.0,
                                  output_bytes_per_s=None)
    runs = board_runs(stacks, profile)
    assert all(r.task_us == 100.0 for r in runs)  # read from the run's summary
    base = base_overheads(profile, sorted({t.group for r in runs for t in r.layers}))
    # a board with 0.4 ms outside every layer of each inference (4x the profile's): the fit raises the task overhead
    truth = Params({}, {}, 1.0, base, task_scale=4.0)
    board = [type(r)(**{**r.__dict__, "latency_us": predict_us(r, truth)}) for r in runs]
    before = max(abs(e.error) for e in errors(board, Params({}, {}, 1.0, base)))
    fitted = fit_board(board, base)
    # eight models that differ little in size cannot tell a per-inference constant from a slower tensor unit well,
    # and the prior holds both back: the fit moves the task overhead, and the error falls from 53% to under 20%
    assert before > 0.5 and fitted.task_scale > 1.5
    assert max(abs(e.error) for e in errors(board, fitted)) < 0.2
    path = tmp_path / "tasked.toml"
    from layerscope.analysis.calibrate import profile_toml

    path.write_text(profile_toml(calibrated_profile(profile, fitted, name="tasked", models=["m"])), encoding="utf-8")
    assert load_profile_file(path).task_overhead_us == pytest.approx(100.0 * fitted.task_scale)


def test_a_perf_cell_reads_a_profiler_log_too(tmp_path: Path) -> None:
    log = Path(__file__).parent / "fixtures" / "importers" / "horizon" / "s100_profiler.log"
    table = tmp_path / "board.csv"
    table.write_text(f"model,perf\nm.onnx,{log}\n", encoding="utf-8")
    (entry,) = read_board_table(table).entries
    from layerscope.importers.detect import parse_file

    expected = parse_file(log).totals.latency
    assert expected is not None and entry.latency_us == pytest.approx(expected.mean_us)


def test_board_runs_imported_estimated_and_reconciled(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeds' k procedure with the commands: import the board's console summary of each model, add the
    estimate to the same run, reconcile the runs together."""
    from layerscope.samples import sample_path

    monkeypatch.setenv("COLUMNS", "200")  # one line per statement: the checks below read whole phrases

    runs = []
    for scale, board_ms in (("n", 2.0), ("s", 3.1)):  # the RDK S100 zoo's single-thread YOLOv8 latencies
        perf = tmp_path / f"v8{scale}.txt"
        perf.write_text("Running condition:\n  Thread number is: 1\n  Frame count   is: 200\nPerf result:\n"
                        f"  Average    latency    is: {board_ms} ms\n", encoding="utf-8")
        model = str(sample_path("ultralytics_detect", version="v8", scale=scale, size=320))
        run = tmp_path / f"v8{scale}.json"
        assert main(["import", str(perf), "--model", model, "-o", str(run)]) == 0
        assert main(["estimate", model, "--target", "rdk-s100", "--top", "0", "-o", str(run)]) == 0
        runs.append(str(run))
    capsys.readouterr()
    assert main(["reconcile", *runs]) == 0
    printed = capsys.readouterr().out
    assert "k across runs" in printed and "over 2 runs" in printed and "per-inference task overhead" in printed


def test_an_outputs_column_estimates_a_model_without_its_output_dequantize(stacks: list[BoardEntry],
                                                                           tmp_path: Path) -> None:
    model = stacks[0].model
    table = tmp_path / "board.csv"
    table.write_text(f"model,latency_ms,outputs\n{model},1.0,quantized\n{model},1.0,\n{model},1.0,float32\n",
                     encoding="utf-8")
    quantized, plain, named = read_board_table(table).entries
    assert quantized.quantized_outputs and not plain.quantized_outputs and not named.quantized_outputs
    x5 = load_profile("rdk-x5")
    assert x5.output_bytes_per_s
    with_handover, without = board_runs([plain, quantized], x5)
    # the stack's one float output handed over as float32 at the profile's rate, in the task term alone
    from layerscope.estimator.roofline import output_conversion_us
    from layerscope.model import load_model

    handover = output_conversion_us(load_model(Path(model)), x5)
    assert handover > 0
    assert with_handover.task_us == pytest.approx(x5.task_overhead_us + handover, abs=2e-3)
    assert without.task_us == pytest.approx(x5.task_overhead_us, abs=2e-3)
    assert [t.memory_us for t in with_handover.layers] == [t.memory_us for t in without.layers]
    table.write_text(f"model,latency_ms,outputs\n{model},1.0,int8\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"board\.csv:2: outputs 'int8' is not one of"):
        read_board_table(table)
