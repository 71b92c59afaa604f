"""Weight loads at their own DDR efficiency (``weight_ddr_efficiency``): the roofline prices them apart from
feature maps, the board fit recovers a known weight-load factor, and the calibrated profile writes it back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from _stacks import conv_stack
from layerscope.analysis.board import BoardEntry, board_runs, fit_board, weight_load_us
from layerscope.analysis.calibrate import Params, base_overheads, calibrated_profile, predict_us, profile_toml
from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.targets.schema import load_profile_file

#: The S100 datasheet profile (no weight_ddr_efficiency of its own; the shipped one is fitted with one).
DATASHEET_S100 = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles" / "rdk-s100.toml"


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> list[BoardEntry]:
    """Six stacks from weight-bound (7x7 maps, 512 channels) to feature-map-bound (112x112, 64 channels)."""
    folder = tmp_path_factory.mktemp("wstacks")
    shapes = [(7, (512, 512)), (14, (384, 384, 384)), (112, (64, 64)), (56, (96, 96, 96)), (7, (256, 512, 256)),
              (80, (64, 128))]
    return [BoardEntry(str(conv_stack(folder / f"w{i}.onnx", size, widths, i)), 1.0, family=f"f{i % 3}")
            for i, (size, widths) in enumerate(shapes)]


def test_the_roofline_loads_weights_at_their_own_efficiency(stacks: list[BoardEntry]) -> None:
    base = dataclasses.replace(load_profile_file(DATASHEET_S100), sram_bytes=0, fuse_elementwise=False, plan_sram=False)
    slow = dataclasses.replace(base, weight_ddr_efficiency=base.ddr_efficiency / 4)
    graph = load_model(Path(stacks[0].model))
    before, after = estimate_graph(graph, base), estimate_graph(graph, slow)
    conv = next(i for i, node in enumerate(graph.layers) if node.op_type == "Conv")
    # layer 0 reads a 1x64x7x7 int8 map (3136 B) and 512x64x3x3 int8 weights + 512 biases (295,424 B)
    weight_bytes = 512 * 64 * 9 + 512
    assert after.layers[conv].ddr_read_bytes == before.layers[conv].ddr_read_bytes == 3136 + weight_bytes
    assert weight_load_us(graph, base)[graph.layers[conv].id] == pytest.approx(
        weight_bytes / base.attainable_ddr_bytes_per_s * 1e6)
    extra_us = 3 * weight_bytes / base.attainable_ddr_bytes_per_s * 1e6  # 4x the time: 3x more
    assert after.layers[conv].load_us - before.layers[conv].load_us == pytest.approx(extra_us)
    assert after.layers[conv].store_us == before.layers[conv].store_us


def test_the_board_fit_recovers_a_weight_load_factor(stacks: list[BoardEntry], tmp_path: Path) -> None:
    profile = dataclasses.replace(load_profile_file(DATASHEET_S100), task_overhead_us=0.0)
    runs = board_runs(stacks, profile)
    assert all(t.weight_us > 0 for r in runs for t in r.layers if t.group.startswith("TAE"))
    groups = sorted({t.group for r in runs for t in r.layers})
    base = base_overheads(profile, groups)
    # a board whose weights load 3x slower than the profile says, its feature maps as profiled
    truth = Params(dict.fromkeys(groups, 1.0), base, 1.0, base, weight_memory_scale=3.0)
    board = [dataclasses.replace(r, latency_us=predict_us(r, truth)) for r in runs]
    assert max(r.latency_us / r.base_estimate_us for r in board) > 2.0  # the weight-bound stacks
    fitted = fit_board(board, base)
    assert fitted.weight_memory_scale == pytest.approx(3.0, rel=0.1)
    assert fitted.memory_scale == pytest.approx(1.0, rel=0.1)
    # the calibrated profile writes the factor as its weight_ddr_efficiency and estimates what the fit predicts
    path = tmp_path / "fitted.toml"
    path.write_text(profile_toml(calibrated_profile(profile, fitted, name="fitted", models=["m"])), encoding="utf-8")
    written = load_profile_file(path)
    assert written.attainable_weight_ddr_bytes_per_s == pytest.approx(
        profile.attainable_ddr_bytes_per_s / fitted.weight_memory_scale)
    for run, again in zip(board, board_runs(stacks, written), strict=True):
        assert again.base_estimate_us == pytest.approx(predict_us(run, fitted), rel=1e-4)


def test_a_profile_without_the_field_loads_weights_as_feature_maps() -> None:
    profile = load_profile_file(DATASHEET_S100)
    assert profile.weight_ddr_efficiency is None
    assert profile.attainable_weight_ddr_bytes_per_s == profile.attainable_ddr_bytes_per_s
