"""``feature_map_alignment``: the layouts an accelerator pads a 4-D feature map to (the D-Robotics op list's 8W4C and
32C), the elements a tensor takes in them, the per-element costs that count them, the profile file's key, and the
calibrated and derived profiles keeping it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest

from layerscope.analysis.calibrate import profile_mapping, profile_toml
from layerscope.errors import ProfileError
from layerscope.estimator import estimate_graph
from layerscope.estimator.roofline import activation_matmul_us
from layerscope.model import load_model
from layerscope.samples._graph import GraphBuilder
from layerscope.targets import load_profile
from layerscope.targets.schema import load_profile_file

DATASHEET = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles"
BPU = ((8, 4), (1, 32))


def test_a_tensor_takes_its_cheapest_layout() -> None:
    profile = dataclasses.replace(load_profile("rdk-s100"), feature_map_alignment=BPU)
    # 2 heads on the C axis: 8W4C pads C to 4 (W = 400 is a multiple of 8), 32C pads it to 32 -> 2x
    assert profile.laid_out_elements((4, 2, 400, 400)) == 4 * 4 * 400 * 400
    # 16 heads, 49 tokens: 8W4C pads W to 56 (16 x 49 x 56 = 43904), 32C pads C to 32 (32 x 49 x 49 = 76832)
    assert profile.laid_out_elements((1, 16, 49, 49)) == 16 * 49 * 56
    # a CNN map with C a multiple of 32 is laid out as it is, whatever its W
    assert profile.laid_out_elements((1, 64, 7, 7)) == 64 * 7 * 7
    # an RGB image: C 3 -> 4 in 8W4C
    assert profile.laid_out_elements((1, 3, 640, 640)) == 4 * 640 * 640
    # not 4-D, or a profile without layouts: the elements as they are
    assert profile.laid_out_elements((1, 1600, 192)) == 1600 * 192
    assert load_profile("rdk-s100").laid_out_elements((4, 2, 400, 400)) == 4 * 2 * 400 * 400


def _two_head_attention(path: Path) -> Path:
    """Two heads of 64 tokens x 32 channels: Q x K^T (1, 2, 64, 64) and a Transpose of the scores."""
    b = GraphBuilder("heads2", seed=7)
    q = b.input("q", (1, 2, 64, 32))
    k = b.input("k", (1, 2, 32, 64))
    scores = b.op("MatMul", [q, k], (1, 2, 64, 64))
    b.output(b.transpose(scores, (0, 1, 3, 2)))
    onnx.save(b.build("two-head scores"), str(path))
    return path


def test_the_per_element_costs_count_the_padded_elements(tmp_path: Path) -> None:
    graph = load_model(_two_head_attention(tmp_path / "h2.onnx"))
    plain = dataclasses.replace(load_profile("rdk-s100"), activation_matmul_ns_per_element=1.0)
    padded = dataclasses.replace(plain, feature_map_alignment=BPU)
    matmul = next(n for n in graph.layers if n.op_type == "MatMul")
    # 2 x 64 x 64 scores at 1 ns: 8.192 µs; laid out with C 2 -> 4: twice that
    assert activation_matmul_us(matmul, graph, plain) == pytest.approx(8.192)
    assert activation_matmul_us(matmul, graph, padded) == pytest.approx(16.384)
    before, after = estimate_graph(graph, plain), estimate_graph(graph, padded)
    by_op = {n.id: n.op_type for n in graph.layers}
    for old, new in zip(before.layers, after.layers, strict=True):
        if by_op[old.layer_id] == "Transpose":
            # one op per output element on the move unit: twice the elements, twice the compute
            assert new.compute_us == pytest.approx(2 * old.compute_us)
        # what DDR moves is the tensor's bytes either way
        assert (new.load_us, new.store_us) == (old.load_us, old.store_us)


def _profile_text(value: str) -> str:
    text = (DATASHEET / "rdk-x5.toml").read_text(encoding="utf-8")
    return text.replace("feature_map_alignment = [[8, 4], [1, 32]]", f"feature_map_alignment = {value}")


def test_the_datasheet_x5_profile_reads_the_op_lists_layouts(tmp_path: Path) -> None:
    profile = load_profile_file(DATASHEET / "rdk-x5.toml")
    assert profile.feature_map_alignment == BPU
    assert "8W4C" in profile.sources["feature_map_alignment"]
    for bad in ("[[8]]", "[[0, 4]]", '"8W4C"', "[[8, 4.5]]"):
        path = tmp_path / "bad.toml"
        path.write_text(_profile_text(bad), encoding="utf-8")
        with pytest.raises(ProfileError, match="feature_map_alignment"):
            load_profile_file(path)


def test_a_written_profile_keeps_the_layouts(tmp_path: Path) -> None:
    profile = load_profile_file(DATASHEET / "rdk-x5.toml")
    path = tmp_path / "rdk-x5.toml"
    path.write_text(profile_toml(profile_mapping(profile)), encoding="utf-8")
    assert load_profile_file(path).feature_map_alignment == BPU
