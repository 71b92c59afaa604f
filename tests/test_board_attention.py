"""The activation-matrix-product class (``activation_matmul_ns_per_element``): which layers it prices, how the NPU
roofline adds it, the board fit recovering a known per-element cost, the int16 board rows, and the derived
sibling chip's transfer rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest

from layerscope.analysis.board import BoardEntry, board_runs, derive_profile, fit_board
from layerscope.analysis.calibrate import Params, base_overheads, calibrated_profile, predict_us, profile_toml
from layerscope.errors import InputError
from layerscope.estimator import estimate_graph
from layerscope.estimator.roofline import activation_matmul_elements, activation_matmul_us
from layerscope.model import load_model
from layerscope.samples._graph import GraphBuilder
from layerscope.targets import load_profile
from layerscope.targets.schema import load_profile_file

DATASHEET = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles"


def _attention(path: Path, tokens: int, dim: int, blocks: int, seed: int) -> Path:
    """``blocks`` single-head attentions over ``tokens`` tokens of ``dim`` channels, each between two linear layers:
    Q, K, V and the output are weight MatMuls, Q x K^T and A x V products of two activations."""
    b = GraphBuilder(f"attn{seed}", seed=seed)
    x = b.input("data", (1, tokens, dim))
    for i in range(blocks):
        with b.scope(f"block{i}"):
            with b.scope("q"):
                q = b.linear(x, dim, bias=False)
            with b.scope("k"):
                k = b.linear(x, dim, bias=False)
            with b.scope("v"):
                v = b.linear(x, dim, bias=False)
            kt = b.transpose(k, (0, 2, 1))
            scores = b.op("MatMul", [q, kt], (1, tokens, tokens))
            weights = b.softmax(scores, -1)
            mixed = b.op("MatMul", [weights, v], (1, tokens, dim))
            with b.scope("proj"):
                x = b.linear(mixed, dim, bias=False)
    b.output(x)
    onnx.save(b.build("attention blocks"), str(path))
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[BoardEntry]:
    """Attention stacks from score-heavy (1024 tokens of 32 channels) to weight-heavy (64 tokens of 512), and two
    families without attention (the same linear layers, no products of activations)."""
    folder = tmp_path_factory.mktemp("attn")
    shapes = [(1024, 32, 1), (256, 64, 2), (64, 512, 1), (512, 64, 2), (128, 256, 1), (2048, 16, 1)]
    return [BoardEntry(str(_attention(folder / f"a{i}.onnx", t, d, n, i)), 1.0, family=f"f{i % 3}")
            for i, (t, d, n) in enumerate(shapes)]


def test_an_activation_product_is_classed_apart_from_a_weight_product(models: list[BoardEntry]) -> None:
    graph = load_model(Path(models[0].model))
    found = {node.id: activation_matmul_elements(node, graph) for node in graph.layers if node.op_type == "MatMul"}
    # 1024 tokens, 32 channels: Q x K^T is 1024 x 1024, A x V 1024 x 32; the four linear layers are weight products
    assert sorted(found.values()) == [0, 0, 0, 0, 1024 * 32, 1024 * 1024]
    assert all(activation_matmul_elements(node, graph) == 0 for node in graph.layers if node.op_type != "MatMul")


def test_the_npu_roofline_adds_the_per_element_time_outside_the_max(models: list[BoardEntry]) -> None:
    graph = load_model(Path(models[0].model))
    plain = dataclasses.replace(load_profile("rdk-s100"), activation_matmul_ns_per_element=0.0)
    priced = dataclasses.replace(plain, activation_matmul_ns_per_element=2.5)
    before, after = estimate_graph(graph, plain), estimate_graph(graph, priced)
    for node, old, new in zip(graph.layers, before.layers, after.layers, strict=True):
        extra_us = activation_matmul_elements(node, graph) * 2.5 / 1e3  # 2.62 ms for the 1024 x 1024 scores
        assert new.overhead_us - old.overhead_us == pytest.approx(extra_us)
        assert new.latency_us - old.latency_us == pytest.approx(extra_us)
        assert (new.compute_us, new.load_us, new.store_us) == (old.compute_us, old.load_us, old.store_us)
    assert after.latency_us - before.latency_us == pytest.approx((1024 * 1024 + 1024 * 32) * 2.5 / 1e3)
    # a CPU profile runs its MatMuls as kernels of its runtime: never priced so
    host = dataclasses.replace(load_profile("host"), activation_matmul_ns_per_element=2.5)
    assert all(activation_matmul_us(node, graph, host) == 0.0 for node in graph.layers)


def test_the_board_fit_recovers_a_known_per_element_cost(models: list[BoardEntry], tmp_path: Path) -> None:
    profile = dataclasses.replace(load_profile("rdk-s100"), task_overhead_us=0.0, activation_matmul_ns_per_element=1.0)
    runs = board_runs(models, profile)
    assert all((t.element_us > 0) == (t.op_type == "MatMul" and t.weight_us == 0) for r in runs for t in r.layers
               if not t.fallback)
    groups = sorted({t.group for r in runs for t in r.layers})
    base = base_overheads(profile, groups)
    # a board that spends 4 ns per element of a product of two activations, everything else as profiled
    truth = Params(dict.fromkeys(groups, 1.0), base, 1.0, base, element_scale=4.0)
    board = [dataclasses.replace(r, latency_us=predict_us(r, truth)) for r in runs]
    assert max(r.latency_us / r.base_estimate_us for r in board) > 2.0  # the score-heavy stacks
    fitted = fit_board(board, base)
    assert fitted.element_scale == pytest.approx(4.0, rel=0.1)
    assert fitted.memory_scale == pytest.approx(1.0, rel=0.1)
    # the calibrated profile writes it as ns per element and estimates what the fit predicts
    path = tmp_path / "fitted.toml"
    path.write_text(profile_toml(calibrated_profile(profile, fitted, name="fitted", models=["m"])), encoding="utf-8")
    written = load_profile_file(path)
    assert written.activation_matmul_ns_per_element == pytest.approx(fitted.element_scale)
    for run, again in zip(board, board_runs(models, written), strict=True):
        assert again.base_estimate_us == pytest.approx(predict_us(run, fitted), rel=1e-4)


def test_a_profile_that_does_not_price_them_fits_no_factor(models: list[BoardEntry]) -> None:
    profile = dataclasses.replace(load_profile_file(DATASHEET / "rdk-s100.toml"), task_overhead_us=0.0)
    assert profile.activation_matmul_ns_per_element == 0.0
    runs = board_runs(models[:3], profile)
    assert all(t.element_us == 0 for r in runs for t in r.layers)
    groups = sorted({t.group for r in runs for t in r.layers})
    assert fit_board(runs, base_overheads(profile, groups)).element_scale == 1.0


def test_a_board_row_compiled_at_int16_is_estimated_at_int16(models: list[BoardEntry]) -> None:
    profile = load_profile_file(DATASHEET / "rdk-x5.toml")
    eight, sixteen = board_runs([models[2], dataclasses.replace(models[2], dtype="int16")], profile)
    graph = load_model(Path(models[2].model))
    assert sixteen.base_estimate_us == pytest.approx(estimate_graph(graph, profile, "int16").latency_us, rel=1e-5)
    assert sixteen.base_estimate_us > eight.base_estimate_us
    with pytest.raises(InputError, match="fp8"):
        board_runs([dataclasses.replace(models[2], dtype="fp8")], profile)


def test_the_derived_chip_speeds_feature_map_transfers_by_the_clock_ratio_up_to_the_ddr(tmp_path: Path) -> None:
    parent = load_profile("rdk-s100")
    path = tmp_path / "rdk-s100p.toml"
    path.write_text(derive_profile(parent, "rdk-s100p"), encoding="utf-8")
    child = load_profile_file(path)
    # Nash-m at 1.5 GHz against Nash-e at 1.0 GHz, the same LPDDR5-6400
    assert child.ddr_efficiency == pytest.approx(min(1.0, parent.ddr_efficiency * 1.5))
    assert child.attainable_weight_ddr_bytes_per_s == pytest.approx(parent.attainable_weight_ddr_bytes_per_s)
    assert child.ddr_bandwidth_bytes_per_s == parent.ddr_bandwidth_bytes_per_s
    fast = dataclasses.replace(parent, ddr_efficiency=0.9)
    (tmp_path / "fast.toml").write_text(derive_profile(fast, "rdk-s100p"), encoding="utf-8")
    assert load_profile_file(tmp_path / "fast.toml").ddr_efficiency == 1.0  # never above the DDR's rate
