"""1-D, transposed and channel-padded convolutions in the predictor (issue #39: the EEG models' convolutions were
under-predicted by 20-40%): ONNX Runtime runs a 1-D Conv and a ConvTranspose as im2col / col2im + GEMM, never as
the NCHWc kernels the 2-D space was timed on, and pads a 2-D Conv's channels to the NCHWc block (a 20 -> 200
Conv costs what a 32 -> 208 one does at block 16). The features that tell them apart (``conv_rank``,
``transposed``, ``log_nchwc_pad8`` / ``log_nchwc_pad16``), the conv space that samples them, and a fit on a fake
timing law that depends on nothing else."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from _predictors import CACHES, features_of, kernel_graph
from layerscope.analysis.predictor import (
    FEATURES,
    NCHWC_BLOCKS,
    KernelSample,
    fit_predictor,
    kernel_features,
    nchwc_pad_ratio,
    predict_kernel,
    samples_from_timings,
)
from layerscope.estimator import estimate_graph
from layerscope.measure.kernels import (
    _MAX_ADDED_CONV_MACS,
    _SEED,
    KernelModel,
    KernelTiming,
    _added_configs,
    _added_configs_6,
    _added_conv_configs,
    _configs,
    conv1d_kernel,
    conv_kernel,
    conv_transpose_kernel,
    family_configs,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runtimes.onnxruntime.kernels import optimized_graph
from layerscope.targets import load_profile


# ------------------------------------------------------------------------------------------ the padding rule
def test_nchwc_pad_ratio_pads_output_channels_always_and_input_channels_from_one_block() -> None:
    assert nchwc_pad_ratio(20, 200, 1, 16) == pytest.approx(32 / 20 * 208 / 200)  # the EEG seizure model's conv2
    assert nchwc_pad_ratio(20, 200, 1, 8) == pytest.approx(24 / 20)  # 200 is a multiple of 8
    assert nchwc_pad_ratio(1, 20, 1, 16) == pytest.approx(32 / 20)  # fewer inputs than a block: read as NCHW
    assert nchwc_pad_ratio(3, 24, 1, 8) == 1.0
    assert nchwc_pad_ratio(20, 20, 20, 16) == pytest.approx(32 / 20)  # depthwise: its channels
    assert nchwc_pad_ratio(64, 64, 2, 16) == 1.0  # other grouped convolutions: left as they are
    assert nchwc_pad_ratio(128, 256, 1, 16) == 1.0


def test_onnx_runtime_pads_a_2d_conv_to_its_block_and_runs_1d_and_transposed_ones_as_they_are(
        tmp_path: Path) -> None:
    """The installed ONNX Runtime's reordered filter holds the padded channels :func:`nchwc_pad_ratio` says, at
    one of :data:`NCHWC_BLOCKS` (whichever this host runs); 1-D and transposed convolutions get no reorder."""
    def ops_and_filter(kernel: KernelModel) -> tuple[list[str], list[int]]:
        path = tmp_path / f"{kernel.digest[:12]}.onnx"
        path.write_bytes(kernel.model_bytes)
        graph = optimized_graph(path, SessionConfig(threads=1))
        conv = next(n for n in graph.node if n.op_type in ("Conv", "FusedConv", "ConvTranspose"))
        dims = next(list(t.dims) for t in graph.initializer if t.name == conv.input[1])
        return [n.op_type for n in graph.node], dims

    ops, dims = ops_and_filter(conv_kernel(14, 20, 200, k=3, stride=1, depthwise=False, bn=False, act="none"))
    if "ReorderOutput" not in ops:
        pytest.skip("this host's ONNX Runtime runs no NCHWc kernels")
    grown = dims[0] * dims[1] / (200 * 20)
    assert any(grown == pytest.approx(nchwc_pad_ratio(20, 200, 1, b)) for b in NCHWC_BLOCKS), dims
    for kernel in (conv1d_kernel(256, 20, 200, k=3, stride=1, dilation=1, bn=False, act="none"),
                   conv_transpose_kernel(32, 20, 200, k=2, stride=2, rank=1),
                   conv_transpose_kernel(14, 20, 200, k=2, stride=2, rank=2)):
        ops, dims = ops_and_filter(kernel)
        assert not {"ReorderInput", "ReorderOutput"} & set(ops), (kernel.label, ops)
        assert sorted(dims[:2]) == [20, 200]  # nothing padded


# ------------------------------------------------------------------------------------------ the features
def test_conv_features_tell_1d_transposed_and_padded_convolutions_apart(tmp_path: Path) -> None:
    one_d = features_of(conv1d_kernel(1024, 128, 128, k=3, stride=1, dilation=4, bn=False, act="none"), tmp_path)
    transposed = features_of(conv_transpose_kernel(300, 51, 51, k=5, stride=5, rank=1), tmp_path)
    up2d = features_of(conv_transpose_kernel(14, 64, 32, k=2, stride=2, rank=2), tmp_path)
    padded = features_of(conv_kernel(14, 20, 200, k=5, stride=1, depthwise=False, bn=True, act="relu"), tmp_path)
    aligned = features_of(conv_kernel(14, 32, 208, k=5, stride=1, depthwise=False, bn=True, act="relu"), tmp_path)
    fp16 = features_of(conv_kernel(14, 20, 40, k=3, stride=1, depthwise=False, bn=False, act="none", dtype="fp16"),
                       tmp_path)
    assert [one_d["conv_rank"], transposed["conv_rank"], up2d["conv_rank"], padded["conv_rank"]] == [1, 1, 2, 2]
    assert [one_d["transposed"], transposed["transposed"], up2d["transposed"], padded["transposed"]] == [0, 1, 1, 0]
    assert one_d["kernel_area"] == 3 and transposed["kernel_area"] == 5
    # only a 2-D fp32 Conv is padded: 20 -> 32 inputs, 200 -> 208 outputs at 16; 20 -> 24 at 8
    assert padded["log_nchwc_pad16"] == pytest.approx(math.log(32 / 20 * 208 / 200))
    assert padded["log_nchwc_pad8"] == pytest.approx(math.log(24 / 20))
    for f in (one_d, transposed, up2d, aligned, fp16):
        assert f["log_nchwc_pad8"] == f["log_nchwc_pad16"] == 0.0


def test_a_qdq_conv_and_a_matmul_have_no_conv_shape(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"]),
             helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["c", "m"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(rng.standard_normal((200, 20, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "m")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("xq", TensorProto.INT8, [1, 20, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 200, 8, 8])], inits)
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    loaded = load_model(path)
    est = estimate_graph(loaded, load_profile("host"), "fp32")
    conv, matmul = (next(n.id for n in loaded.layers if n.op_type == op) for op in ("Conv", "MatMul"))
    f = dict(zip(FEATURES, kernel_features(loaded, est, [conv], CACHES).tolist(), strict=True))
    assert f["conv_rank"] == 2 and f["log_nchwc_pad16"] == 0.0  # ONNX Runtime runs it as a QLinearConv
    g = dict(zip(FEATURES, kernel_features(loaded, est, [matmul], CACHES).tolist(), strict=True))
    assert (g["conv_rank"], g["transposed"], g["log_nchwc_pad16"]) == (0.0, 0.0, 0.0)


# ------------------------------------------------------------------------------------------ the space
def test_the_conv_space_adds_1d_transposed_and_off_block_convolutions_without_moving_the_earlier_ones() -> None:
    added = [p for p in _added_conv_configs() if isinstance(p, partial)]
    assert len(added) == len(_added_conv_configs())
    names = {p.func.__name__ for p in added}
    assert names == {"conv1d_kernel", "conv_transpose_kernel", "conv_kernel"}
    one_d = [p for p in added if p.func is conv1d_kernel]
    assert {p.keywords["k"] for p in one_d} >= {1, 3, 31, 64} and max(p.args[0] for p in one_d) >= 8192
    stft = [p for p in one_d if p.args[1] == 1 and p.keywords["k"] >= 256]  # a raw signal's Fourier transform
    assert {(p.keywords["k"], p.args[2]) for p in stft} >= {(512, 257), (400, 201)}
    assert all(p.keywords["stride"] < p.keywords["k"] for p in stft)
    assert {p.keywords["dilation"] for p in one_d} >= {1, 1024}
    assert {p.keywords["rank"] for p in added if p.func is conv_transpose_kernel} == {1, 2}
    assert any(p.args[1] % 16 and p.args[2] % 16 for p in added if p.func is conv_kernel)
    for p in one_d:  # the cap on the 1-D ones' work
        steps, cin, cout = p.args
        assert steps // p.keywords["stride"] * cin * cout * p.keywords["k"] <= _MAX_ADDED_CONV_MACS
    # the earlier configurations keep their seeded order (a cache walked before is walked the same way)
    earlier = [p for p in _configs("conv") if isinstance(p, partial)]
    random.Random(f"{_SEED}:conv").shuffle(earlier)
    keys = {(p.func, p.args, tuple(sorted(p.keywords.items()))) for p in earlier}
    walked = [c for c in family_configs("conv")
              if (c.builder, tuple(v for k, v in c.params if k.startswith("_")),
                  tuple((k, v) for k, v in c.params if not k.startswith("_"))) in keys]
    assert [(c.builder, c.params) for c in walked[:50]] == [
        (p.func, tuple((f"_{i}", v) for i, v in enumerate(p.args)) + tuple(sorted(p.keywords.items())))
        for p in earlier[:50]]
    # they join with the other version-6 additions (the integer convolutions), nothing else added to conv
    assert _added_configs("conv") == []
    assert len(family_configs("conv")) == len(earlier) + len(_added_configs_6("conv"))
    assert sum(c.builder in (conv1d_kernel, conv_transpose_kernel) for c in family_configs("conv")) == sum(
        p.func in (conv1d_kernel, conv_transpose_kernel) for p in added)


# ------------------------------------------------------------------------------------------ a fit
def _law(kernel: KernelModel) -> float:
    """A fake runtime's time over twice the roofline, from what the kernel is (its label), not from its features:
    1-D and transposed convolutions 1.5x a 2-D one of the same roofline, a 2-D one its channels padded to 16."""
    if kernel.label.startswith(("conv1d", "convT")):
        return 1.5
    fields = dict(part.split("=") for part in kernel.label.split()[1:])
    return nchwc_pad_ratio(int(fields["cin"]), int(fields["cout"]), int(fields["g"]), 16)


def _samples(kernels: Sequence[KernelModel]) -> list[KernelSample]:
    timings = [KernelTiming(k, 1.0, (1.0,), 0.0, False) for k in kernels]  # features need no timing
    return [dataclasses.replace(s, measured_us=2.0 * s.roofline_us * _law(k))
            for k, s in zip(kernels, samples_from_timings(timings, load_profile("host"), CACHES), strict=True)]


def test_a_fit_on_the_space_predicts_1d_transposed_and_padded_convolutions_it_never_saw(tmp_path: Path) -> None:
    chans = (16, 32, 64)
    kernels = [conv_kernel(hw, cin, cout, k=3, stride=1, depthwise=False, bn=False, act="none")
               for hw in (7, 14, 28) for cin in chans for cout in chans]
    kernels += [conv_kernel(hw, cin, cout, k=3, stride=1, depthwise=False, bn=False, act="none")
                for hw in (7, 14, 28) for cin, cout in ((20, 20), (20, 40), (24, 40), (40, 24), (48, 20))]
    kernels += [conv1d_kernel(t, cin, cout, k=3, stride=1, dilation=1, bn=False, act="none")
                for t in (64, 256, 1024) for cin in chans for cout in chans]
    kernels += [conv_transpose_kernel(size, cin, cout, k=2, stride=2, rank=1)
                for size in (32, 128, 512) for cin in chans for cout in chans]
    predictor = fit_predictor(_samples(kernels), {"runner": "test"}, "host", 0.0, caches=CACHES)
    assert "conv" in predictor.families
    unseen = [conv1d_kernel(512, 48, 40, k=3, stride=1, dilation=2, bn=False, act="none"),
              conv_transpose_kernel(256, 40, 24, k=2, stride=2, rank=1),
              conv_kernel(20, 20, 48, k=3, stride=1, depthwise=False, bn=False, act="none"),
              conv_kernel(20, 32, 48, k=3, stride=1, depthwise=False, bn=False, act="none")]
    assert [_law(k) for k in unseen] == [1.5, 1.5, pytest.approx(1.6), 1.0]
    for kernel, truth in zip(unseen, _samples(unseen), strict=True):
        graph = kernel_graph(kernel, tmp_path)
        est = estimate_graph(graph, load_profile("host"), "fp32")
        pred = predict_kernel(predictor, "conv", graph, est, [n.id for n in graph.layers], name=kernel.label)
        assert pred.isolated_us == pytest.approx(truth.measured_us, rel=0.1), kernel.label
