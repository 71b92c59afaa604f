"""The board fit's compute factor for models the vendor compiled at int16 (``LayerTerm.dtype``, ``Params.dtype_scale``):
the int16 layers are marked, a known int16 rate is recovered, the calibrated profile writes it as the int16 peaks,
and without an int16 model no factor is fitted (the base profile's int16 rates stand)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from _stacks import conv_stack
from layerscope.analysis.board import BoardEntry, board_runs, fit_board
from layerscope.analysis.calibrate import Params, base_overheads, calibrated_profile, predict_us, profile_toml
from layerscope.targets import Profile
from layerscope.targets.schema import load_profile_file

DATASHEET_X5 = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles" / "rdk-x5.toml"


@pytest.fixture(scope="module")
def entries(tmp_path_factory: pytest.TempPathFactory) -> list[BoardEntry]:
    """Four stacks at int8 and the same four at int16."""
    folder = tmp_path_factory.mktemp("i16")
    shapes = [(28, (256, 256)), (14, (384, 384, 384)), (56, (64, 128)), (28, (128, 256, 128))]
    paths = [conv_stack(folder / f"s{i}.onnx", size, widths, i) for i, (size, widths) in enumerate(shapes)]
    return ([BoardEntry(str(p), 1.0, family=f"f{i}") for i, p in enumerate(paths)]
            + [BoardEntry(str(p), 1.0, family=f"f{i}", dtype="int16") for i, p in enumerate(paths)])


@pytest.fixture(scope="module")
def profile() -> Profile:
    return dataclasses.replace(load_profile_file(DATASHEET_X5), task_overhead_us=0.0, output_bytes_per_s=None)


def test_only_the_int16_models_accelerator_layers_are_marked(entries: list[BoardEntry], profile: Profile) -> None:
    runs = board_runs(entries, profile)
    assert {t.dtype for r in runs[:4] for t in r.layers} == {""}
    assert {t.dtype for r in runs[4:] for t in r.layers} == {"int16"}
    # int16 compute at the datasheet's quarter rate: the same stack's compute takes 4x its int8 time
    conv8 = next(t for t in runs[0].layers if t.op_type == "Conv")
    conv16 = next(t for t in runs[4].layers if t.op_type == "Conv")
    assert conv16.compute_us == pytest.approx(4 * conv8.compute_us, rel=1e-3)  # run files keep 3 decimals


def test_the_fit_recovers_an_int16_rate_and_writes_it(entries: list[BoardEntry], profile: Profile,
                                                      tmp_path: Path) -> None:
    runs = board_runs(entries, profile)
    groups = sorted({t.group for r in runs for t in r.layers})
    base = base_overheads(profile, groups)
    # a board whose int16 convolutions run at half the int8 rate (the datasheet says a quarter): factor 0.5
    truth = Params(dict.fromkeys(groups, 1.0), base, 1.0, base, dtype_scale={"int16": 0.5})
    board = [dataclasses.replace(r, latency_us=predict_us(r, truth)) for r in runs]
    assert board[4].latency_us < 0.8 * board[4].base_estimate_us  # the int16 stacks are compute-bound
    # eight boards' worth of the same models: the data, not the prior around the datasheet's rate, decide
    fitted = fit_board(board * 8, base)
    assert fitted.dtype_scale["int16"] == pytest.approx(0.5, rel=0.05)
    assert all(predict_us(r, fitted) == pytest.approx(r.latency_us, rel=0.02) for r in board)
    # from one board's worth the prior holds it above the truth, still far from the datasheet's 1
    assert 0.5 < fit_board(board, base).dtype_scale["int16"] < 0.7
    path = tmp_path / "fitted.toml"
    path.write_text(profile_toml(calibrated_profile(profile, fitted, name="fitted", models=["m"])), encoding="utf-8")
    written = load_profile_file(path)
    tensor = next(u for u in written.units if u.name == "BPU-tensor")
    assert tensor.peak_ops_per_s["int16"] == pytest.approx(2.5e12 / fitted.dtype_scale["int16"])
    assert tensor.peak_ops_per_s["int8"] == pytest.approx(10.0e12)
    assert "int16 compute time" in (written.source_for("units.BPU-tensor.peak_ops_per_s.int16") or "")


def test_without_an_int16_model_no_factor_is_fitted(entries: list[BoardEntry], profile: Profile) -> None:
    runs = board_runs(entries[:4], profile)
    base = base_overheads(profile, sorted({t.group for r in runs for t in r.layers}))
    assert fit_board(runs, base).dtype_scale == {}
