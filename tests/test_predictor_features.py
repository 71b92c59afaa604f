"""The predictor's features for what held-out models need (issue #39): the working set against the host's caches,
depthwise and large-kernel convolutions as sub-families, activation chains as ONNX Runtime fuses them, the layout
family, and adaptive sampling planned from the error of calibration models' kernels held out model by model."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from _predictors import CACHES, MIB, features_of, kernel_graph
from layerscope.analysis.predictor import (
    FEATURES,
    VERSION,
    Caches,
    KernelSample,
    family_errors,
    fit_predictor,
    held_out_errors,
    load_predictor,
    refine_family,
    working_set_bytes,
)
from layerscope.errors import InputError
from layerscope.measure.kernels import (
    ACTIVATION_CHAINS,
    CONV_ACTIVATIONS,
    KernelModel,
    KernelTiming,
    activation_kernel,
    adaptive_sample,
    conv_kernel,
    elementwise_kernel,
    family_configs,
    kernel_family,
    kernel_space,
    layout_kernel,
    plan_batch,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runtimes.onnxruntime.kernels import kernel_groups


# ------------------------------------------------------------------------------------ working set
def test_the_working_set_of_a_fused_conv_bn_relu_counts_what_leaves_the_kernel(tmp_path: Path) -> None:
    # Conv 4 -> 8 channels, 3x3, on 8x8, + BatchNormalization + Relu, fp32. By hand: input 4*8*8*4 = 1024 B,
    # weight 8*4*3*3*4 = 1152, bias 8*4 = 32, the four BN vectors 4*32 = 128, the Relu's output 8*8*8*4 = 2048;
    # the Conv's and the BN's outputs stay inside the kernel: 4384 bytes.
    kernel = conv_kernel(8, 4, 8, k=3, stride=1, depthwise=False, bn=True, act="relu")
    graph = kernel_graph(kernel, tmp_path)
    assert working_set_bytes(graph, [n.id for n in graph.layers]) == 4384
    # the Conv alone: its output leaves it (the BN reads it): 1024 + 1152 + 32 + 2048
    assert working_set_bytes(graph, [graph.layers[0].id]) == 4256
    # the kernel's features: the Conv ONNX Runtime runs, the BN folded into its weights and the Relu on its output
    # (:func:`working_layers`): input, weight, bias and the kernel's output, 1024 + 1152 + 32 + 2048
    f = features_of(kernel, tmp_path)
    assert f["log_working_set_bytes"] == pytest.approx(math.log1p(4256))
    assert f["log2_ws_over_l2"] == pytest.approx(math.log2(4256 / MIB))
    assert f["log2_ws_over_llc"] == pytest.approx(math.log2(4256 / (32 * MIB)))


def test_the_working_set_crosses_l2_and_the_last_level_cache_within_the_sampled_space(tmp_path: Path) -> None:
    # the elementwise space's element counts: its binary ops' working sets (two inputs and an output, fp32) run
    # from below a 1 MiB L2 to past a 32 MiB last-level cache
    counts = sorted({dict(c.params)["_0"] for c in family_configs("elementwise")})
    small = kernel_graph(elementwise_kernel(counts[0], "Add", True), tmp_path)
    large = kernel_graph(elementwise_kernel(counts[-1], "Add", True), tmp_path)
    assert working_set_bytes(small, [n.id for n in small.layers]) == 3 * 4 * counts[0] < MIB
    assert working_set_bytes(large, [n.id for n in large.layers]) == 3 * 4 * counts[-1] > 32 * MIB
    assert features_of(elementwise_kernel(counts[-1], "Relu", False), tmp_path)["log2_ws_over_l2"] == pytest.approx(
        math.log2(2 * 4 * counts[-1] / MIB))
    assert sum(1 for c in counts if MIB < 2 * 4 * c < 32 * MIB) >= 3  # sizes between the two caches too


def test_caches_are_read_from_sysfs_and_recorded_in_the_predictor_file(tmp_path: Path) -> None:
    host = Caches.host()
    assert 0 < host.l2_bytes <= host.llc_bytes
    samples = [KernelSample("pool", f"p{i}", (float(i), 1.0), 10.0, 10.0 + i) for i in range(6)]
    predictor = fit_predictor(samples, {"runner": "onnxruntime"}, "host", 1.0, caches=CACHES)
    data = predictor.to_json()
    assert data["version"] == VERSION and data["caches"] == {"l2_bytes": MIB, "llc_bytes": 32 * MIB, "source": "test"}


def test_a_predictor_file_of_the_previous_version_is_refused_with_one_line_to_refit(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "layerscope-predictor", "version": VERSION - 1, "features": []}))
    with pytest.raises(InputError, match=rf"version {VERSION - 1}; this layerscope reads version {VERSION}") as info:
        load_predictor(old)
    assert "calibrate --kernels" in (info.value.hint or "") and "\n" not in str(info.value)


# ------------------------------------------------------------------------------ depthwise, large kernels
def test_a_depthwise_conv_is_classed_in_its_sub_family_with_its_features_by_hand(tmp_path: Path) -> None:
    # depthwise 3x3 on 16 channels of 14x14: group 16 = channels; working set: input and output 16*14*14*4 =
    # 12544 B each, weight 16*1*3*3*4 = 576, bias 64: 25728 bytes
    kernel = conv_kernel(14, 16, 16, k=3, stride=1, depthwise=True, bn=False, act="none")
    f = features_of(kernel, tmp_path)
    assert kernel_family(["Conv"]) == kernel.family == "conv"
    assert f["depthwise"] == 1.0 and f["log_groups"] == pytest.approx(math.log(16)) and f["kernel_area"] == 9.0
    assert f["large_kernel"] == 0.0 and f["activation"] == 0.0
    assert f["log_working_set_bytes"] == pytest.approx(math.log1p(25728))
    assert refine_family("conv", list(f.values())) == "conv_dw"
    large = features_of(conv_kernel(14, 16, 32, k=5, stride=1, depthwise=False, bn=False, act="relu"), tmp_path)
    assert large["kernel_area"] == 25.0 and large["large_kernel"] == 1.0 and large["depthwise"] == 0.0
    assert large["activation"] == 1.0
    assert refine_family("conv", list(large.values())) == "conv_large"
    plain = features_of(conv_kernel(14, 16, 32, k=3, stride=1, depthwise=False, bn=False, act="none"), tmp_path)
    assert refine_family("conv", list(plain.values())) == "conv"
    assert refine_family("pool", list(large.values())) == "pool"  # only convolutions have sub-families


def test_sub_families_get_their_own_fit_and_predictions_use_it() -> None:
    dw, large, plain = ([0.0] * len(FEATURES) for _ in range(3))
    dw[FEATURES.index("depthwise")] = 1.0
    large[FEATURES.index("large_kernel")] = 1.0
    samples = ([KernelSample("conv", f"d{i}", (*dw[:-1], float(i)), 10.0, 30.0) for i in range(12)]
               + [KernelSample("conv", f"p{i}", (*plain[:-1], float(i)), 10.0, 10.0) for i in range(12)]
               + [KernelSample("conv", f"l{i}", (*large[:-1], float(i)), 10.0, 12.0) for i in range(6)])
    predictor = fit_predictor(samples, {"runner": "onnxruntime"}, "host", 0.0, caches=CACHES)
    assert set(predictor.families) == {"all", "conv", "conv_dw"}  # 6 large-kernel samples: too few of their own
    assert predictor.fit_for("conv", dw).family == "conv_dw" and predictor.fit_for("conv", dw).samples == 12
    assert predictor.fit_for("conv", large).family == "conv" and predictor.fit_for("conv", large).samples == 30


def test_the_conv_space_samples_depthwise_and_large_kernels() -> None:
    params = [dict(c.params) for c in family_configs("conv")[:300]]
    assert sum(1 for p in params if p.get("depthwise")) >= 30
    assert sum(1 for p in params if p.get("k", 0) >= 5 and not p.get("depthwise")) >= 30


# ------------------------------------------------------------------------------ activations, layout
def test_conv_activations_of_the_space_are_fused_into_the_conv_by_onnx_runtime(tmp_path: Path) -> None:
    for act in CONV_ACTIVATIONS:
        graph = kernel_graph(conv_kernel(14, 16, 16, k=3, stride=1, depthwise=False, bn=False, act=act), tmp_path)
        groups = kernel_groups(graph, SessionConfig(threads=1))
        assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}, act


def test_activation_chains_are_one_group_each_as_onnx_runtime_runs_them(tmp_path: Path) -> None:
    classes = {}
    for chain in ACTIVATION_CHAINS:
        kernel = activation_kernel(4096, chain)
        assert kernel.family == "elementwise" and f"chain={chain}" in kernel.label
        graph = kernel_graph(kernel, tmp_path)
        groups = kernel_groups(graph, SessionConfig(threads=1))
        # SiLU runs as one QuickGelu, GELU's Erf form as one Gelu; a HardSwish as HardSigmoid and Mul, both doing
        # the one layer's work: one group, predicted once
        assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}, chain
        classes[chain] = features_of(kernel, tmp_path)["activation"]
    assert classes == {"silu": 3.0, "gelu": 4.0, "hardswish": 2.0}
    # x * HardSigmoid(x) written out stays two layers run as two kernels: not a chain of the space
    nodes = [helper.make_node("HardSigmoid", ["x"], ["s"], alpha=1.0 / 6, beta=0.5),
             helper.make_node("Mul", ["x", "s"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "hs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])]),
        opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "hardswish-mul.onnx"
    onnx.save(model, path)
    assert len(kernel_groups(load_model(path), SessionConfig(threads=1))) == 2
    graph = kernel_graph(conv_kernel(14, 16, 16, k=3, stride=1, depthwise=False, bn=False, act="hardswish"), tmp_path)
    assert [len(layers) for _, layers in kernel_groups(graph, SessionConfig(threads=1))] == [1, 1]


def test_layout_conversions_are_a_family_of_their_own(tmp_path: Path) -> None:
    assert kernel_family(["Transpose"]) == "layout" and kernel_family(["DepthToSpace"]) == "layout"
    assert kernel_family(["Transpose", "MatMul"]) == "matmul" and kernel_family(["Slice"]) == "movement"
    # Inception's LRN: a normalisation, not an op no family holds (those get their roofline time)
    assert kernel_family(["LRN"]) == "norm"
    kinds = {dict(c.params)["_2"] for c in family_configs("layout") if c.builder is layout_kernel}
    assert kinds == {"nchw2nhwc", "nhwc2nchw", "heads", "d2s"}
    for kind in sorted(kinds):
        graph = kernel_graph(layout_kernel(28, 32, kind), tmp_path)
        assert working_set_bytes(graph, [n.id for n in graph.layers]) == 2 * 4 * 28 * 28 * 32, kind
    assert "layout" in {k.family for k in kernel_space(limit=20)}


# ------------------------------------------------------------------------------ adaptive sampling
def _sample(family: str, x: float, ratio: float, source: str = "", config: tuple[Any, ...] = ()) -> KernelSample:
    return KernelSample(family, f"{family}{x}{source}", (x, 1.0), 100.0, (100.0 + 2.0) * ratio - 2.0, source, config)


def test_held_out_by_model_shows_what_cross_validation_over_all_kernels_hides() -> None:
    # pool: generated kernels (x in 0..2) at the roofline; three calibration models, each unlike the others
    # (x = 5, 6, 7 at 3x, 0.3x, 3x the roofline, 100 us). Held out model by model, the middle one is predicted
    # from its neighbours at 3x: the ratio is learnt with the 2 us floor, (102 * 3 - 2) / (102 * 0.3 - 2) - 1 =
    # 304 / 28.6 - 1 = 9.63; the others from one neighbour at 3x and one at 0.3x.
    generated = [_sample("pool", i / 10, 1.0, config=(("_0", i),)) for i in range(20)]
    models = [_sample("pool", x, r, source=f"m{x}") for x, r in ((5, 3.0), (6, 0.3), (7, 3.0)) for _ in range(3)]
    errors = held_out_errors("pool", generated + models)
    by_model = errors[len(generated):]
    assert float(np.median(errors[:len(generated)])) < 0.05  # the generated ones, cross-validated, are fine
    assert by_model[3:6] == pytest.approx([304 / 28.6 - 1] * 3, rel=0.02)  # 0.3x predicted as 3x
    # concat: its calibration models' kernels run as the generated ones do: low error held out
    concat = ([_sample("concat", i / 10, 1.0, config=(("_0", i),)) for i in range(20)]
              + [_sample("concat", 1.0, 1.0, source=f"m{k}") for k in range(3)])
    table = family_errors(generated + models + concat)
    assert table["pool"][0] > 0.5 and table["concat"][0] < 0.05
    assert len(table["pool"][1]) == 20  # each generated kernel's own error, by configuration


def test_adaptive_sampling_spends_more_where_the_held_out_model_error_is_worst() -> None:
    pool, concat = family_configs("pool"), family_configs("concat")
    ticks = iter(range(1000))

    def timer(kernels: Sequence[KernelModel], budget_s: float | None) -> list[KernelTiming]:
        return [KernelTiming(k, 10.0, (10.0,), 1.0, False) for k in kernels[:12]]  # 12 kernels per call

    def evaluate(timings: Sequence[KernelTiming]) -> dict[str, Any]:
        # a fake runtime: every generated kernel at its roofline; pool's calibration models unlike each other
        samples = [_sample(t.kernel.family, float(i % 7), 1.0, config=t.kernel.config) for i, t in enumerate(timings)]
        samples += [_sample("pool", x, r, source=f"m{x}") for x, r in ((20, 3.0), (21, 0.3), (22, 3.0))]
        samples += [_sample("concat", 3.0, 1.0, source=f"m{k}") for k in range(3)]
        return family_errors(samples)

    timings, rounds = adaptive_sample([], ("pool", "concat"), timer, evaluate, budget_s=50.0, batch=12, max_rounds=1,
                                      clock=lambda: float(next(ticks)))
    assert rounds[0].timed == {"pool": 6, "concat": 6}
    assert rounds[1].planned_from["pool"] > 0.5 and rounds[1].planned_from["concat"] < 0.05
    assert rounds[1].timed["pool"] >= 11 and rounds[1].timed.get("concat", 0) <= 1
    assert len(timings) == 24 and all(t.kernel.config in {c.params for c in pool + concat} for t in timings)
    assert plan_batch({"pool": pool[6:], "concat": concat[6:]}, evaluate(timings), 12)[0].family == "pool"
