"""``weight_dtype``: an accelerator that runs int16 feature maps against int8 weights (the RDK X5 datasheet profile)
loads a model's weights at one byte at int16, its feature maps at two; the profile file reads and writes the field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest

from layerscope.analysis.board import weight_load_us
from layerscope.analysis.calibrate import Params, calibrated_profile, profile_toml
from layerscope.errors import ProfileError
from layerscope.estimator import estimate_graph
from layerscope.estimator.roofline import weight_float_bytes
from layerscope.model import load_model
from layerscope.samples._graph import GraphBuilder
from layerscope.targets import Profile
from layerscope.targets.schema import load_profile_file

DATASHEET_X5 = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles" / "rdk-x5.toml"


@pytest.fixture(scope="module")
def conv_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 3x3 conv, 64 -> 256 channels on a 1x64x14x14 map: 147,456 weights + 256 biases."""
    b = GraphBuilder("wd", seed=3)
    x = b.input("data", (1, 64, 14, 14))
    with b.scope("conv"):
        x = b.conv(x, 256, 3)
    b.output(x)
    path = tmp_path_factory.mktemp("wd") / "conv.onnx"
    onnx.save(b.build("one conv"), str(path))
    return path


def _bare(profile_path: Path, weight_dtype: str | None) -> Profile:
    # no on-chip plan: every byte goes through DDR, so the bytes are the model's own
    return dataclasses.replace(load_profile_file(profile_path), sram_bytes=0, weight_sram_bytes=None,
                               fuse_elementwise=False,
                               plan_sram=False, weight_dtype=weight_dtype)


def test_the_x5_datasheet_keeps_weights_at_int8() -> None:
    profile = load_profile_file(DATASHEET_X5)
    assert profile.weight_dtype == "int8"
    assert profile.source_for("weight_dtype")
    assert weight_float_bytes(profile, "int16") == 1
    assert weight_float_bytes(profile, "int8") == 1
    assert weight_float_bytes(dataclasses.replace(profile, weight_dtype=None), "int16") == 2
    # never wider than the deployed dtype
    assert weight_float_bytes(dataclasses.replace(profile, weight_dtype="fp32"), "int8") == 1


def test_int16_doubles_the_feature_maps_not_the_weights(conv_path: Path) -> None:
    graph = load_model(conv_path)
    weights, feature_in, feature_out = 256 * 64 * 9 + 256, 64 * 14 * 14, 256 * 14 * 14
    narrow = _bare(DATASHEET_X5, "int8")
    wide = _bare(DATASHEET_X5, None)
    conv = next(i for i, node in enumerate(graph.layers) if node.op_type == "Conv")
    at8 = estimate_graph(graph, narrow, "int8").layers[conv]
    at16 = estimate_graph(graph, narrow, "int16").layers[conv]
    at16_wide = estimate_graph(graph, wide, "int16").layers[conv]
    assert at8.ddr_read_bytes == feature_in + weights
    assert at16.ddr_read_bytes == 2 * feature_in + weights
    assert at16_wide.ddr_read_bytes == 2 * feature_in + 2 * weights
    assert at16.ddr_write_bytes == at16_wide.ddr_write_bytes == 2 * feature_out
    # the board fit's weight-load split counts the same bytes
    layer = graph.layers[conv].id
    assert weight_load_us(graph, narrow, "int16")[layer] == pytest.approx(
        weights / narrow.attainable_weight_ddr_bytes_per_s * 1e6)
    doubled = 2 * weight_load_us(graph, narrow, "int16")[layer]
    assert weight_load_us(graph, wide, "int16")[layer] == pytest.approx(doubled)


def test_a_calibrated_profile_keeps_the_field(tmp_path: Path) -> None:
    profile = load_profile_file(DATASHEET_X5)
    path = tmp_path / "fitted.toml"
    path.write_text(profile_toml(calibrated_profile(profile, Params({}, {}, 1.0), name="fitted", models=["m"])),
                    encoding="utf-8")
    assert load_profile_file(path).weight_dtype == "int8"


def test_an_unknown_weight_dtype_is_refused(tmp_path: Path) -> None:
    text = DATASHEET_X5.read_text(encoding="utf-8").replace('weight_dtype = "int8"', 'weight_dtype = "int7"')
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError, match="weight_dtype"):
        load_profile_file(path)


def test_the_memory_plan_holds_the_weights_as_the_profile_stores_them(conv_path: Path) -> None:
    from layerscope.estimator.memory import static_bytes
    from layerscope.estimator.timeline import simulate_timeline

    graph = load_model(conv_path)
    weights = 256 * 64 * 9 + 256  # the conv's weights and biases: one byte each at int8
    profile = load_profile_file(DATASHEET_X5)
    # deployed at int16: the feature maps take 2 bytes, the weights stay at the profile's int8
    assert simulate_timeline(graph, profile, "int16").memory.static_bytes == weights
    assert static_bytes(graph, estimate_graph(graph, profile, "int16"), profile) == weights
    # a profile that stores weights at the deployed dtype holds them at 2 bytes
    wide = dataclasses.replace(profile, weight_dtype=None)
    assert simulate_timeline(graph, wide, "int16").memory.static_bytes == 2 * weights
    assert static_bytes(graph, estimate_graph(graph, wide, "int16")) == 2 * weights
