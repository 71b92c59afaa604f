"""The kernel-level latency predictor (issue #18): sampling, timing with the cache and a budget, the fit, the
JSON predictor file (no pickle) and prediction, end to end with real timings on small kernel spaces."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from conftest import zoo
from layerscope.analysis.fusion_rules import learn_rules
from layerscope.analysis.predictor import (
    FEATURES,
    REORDER_FAMILY,
    VERSION,
    Context,
    Predictor,
    fit_context,
    fit_predictor,
    kernel_io,
    load_predictor,
    predict_path,
    samples_from_timings,
)
from layerscope.analysis.trees import Ensemble, Tree, dump_forest, dump_gbr
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.estimator import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import (
    FAMILIES,
    Config,
    KernelModel,
    KernelTiming,
    TimingConfig,
    adaptive_sample,
    conv_kernel,
    empty_model,
    family_configs,
    kernel_family,
    kernel_space,
    model_kernels,
    plan_batch,
    qdq_conv_kernel,
    time_kernels,
    time_models,
)
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runfile import load_document
from layerscope.runtimes.onnxruntime.kernels import OrtKernels, kernel_groups, layout_kernels, optimized_graph
from layerscope.runtimes.openvino.kernels import openvino_kernel_groups
from layerscope.targets import load_profile

FAST = TimingConfig(visits=3, runs_per_visit=2, visit_warmup=0)


# ------------------------------------------------------------------------------------------ trees
def test_tree_dump_predicts_what_scikit_learn_predicts() -> None:
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 5))
    y = x[:, 0] * 2 + np.sin(x[:, 1]) + (x[:, 2] > 0)
    gbr = GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(x, y)
    forest = RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0).fit(x, y)
    test = rng.standard_normal((50, 5))
    for fitted, dumped in ((gbr, dump_gbr(gbr)), (forest, dump_forest(forest))):
        loaded = Ensemble.from_json(json.loads(json.dumps(dumped.to_json())))
        np.testing.assert_allclose(loaded.predict(test), fitted.predict(test), rtol=1e-9, atol=1e-9)


def test_a_tree_whose_children_point_back_is_refused() -> None:
    # node 0 splits; its left child 1 is a leaf, its right child points back to 0: a walk would never end
    bad = {"feature": [0, -2], "threshold": [0.0, -2.0], "left": [1, -1], "right": [0, -1], "value": [0.0, 1.0]}
    with pytest.raises(InputError, match="point forward"):
        Tree.from_json(bad)
    good = dict(bad, right=[1, -1])
    assert Tree.from_json(good).predict(np.array([[5.0]])).tolist() == [1.0]


# ------------------------------------------------------------------------------------------ sampling
def test_kernel_space_interleaves_families_and_is_deterministic() -> None:
    first = list(kernel_space(limit=2 * len(FAMILIES)))
    assert [k.family for k in first] == list(FAMILIES) * 2
    assert [k.label for k in first] == [k.label for k in kernel_space(limit=2 * len(FAMILIES))]
    only = list(kernel_space(("pool", "resize"), limit=5))
    assert [k.family for k in only] == ["pool", "resize", "pool", "resize", "pool"]
    assert len({k.digest for k in kernel_space(("conv",), limit=50)}) == 50  # distinct models
    for kernel in first:
        onnx.checker.check_model(onnx.load_from_string(kernel.model_bytes))


def test_kernel_family_by_the_ops_a_kernel_covers() -> None:
    assert kernel_family(["Conv", "BatchNormalization", "Relu"]) == "conv"
    assert kernel_family(["MatMul", "Add"]) == "matmul"
    assert kernel_family(["Sigmoid", "Mul"]) == "elementwise"
    assert kernel_family(["LSTM"]) == "recurrent" and kernel_family(["FusedMatMul"]) == "matmul"
    assert kernel_family(["TreeEnsembleClassifier"]) == "other"
    assert kernel_family(["Softmax"]) == "norm"
    assert kernel_family(["MaxPool"]) == "pool"


def test_a_generated_conv_bn_relu_is_one_runtime_kernel(tmp_path: Path) -> None:
    kernel = conv_kernel(14, 16, 32, k=3, stride=1, depthwise=False, bn=True, act="relu")
    path = tmp_path / "k.onnx"
    path.write_bytes(kernel.model_bytes)
    graph = load_model(path)
    assert [n.op_type for n in graph.layers] == ["Conv", "BatchNormalization", "Relu"]
    groups = kernel_groups(graph, SessionConfig(threads=1))
    assert len(groups) == 1 and set(groups[0][1]) == {n.id for n in graph.layers}


def test_kernels_of_squeezenet_cover_its_layers_once() -> None:
    graph, kernels, notes = model_kernels(zoo("squeezenet"), None, SessionConfig(threads=1), OrtKernels())
    assert notes == []
    covered = [layer for k in kernels for layer in k.layers]
    assert len(covered) == len(set(covered))  # distinct kernels never share a layer here
    assert set(covered) <= {n.id for n in graph.layers}
    by_id = {n.id: n.op_type for n in graph.layers}
    convs = [k for k in kernels if k.family == "conv"]
    assert len(convs) == sum(1 for t in by_id.values() if t == "Conv")  # 26 convs, each fused with its Relu
    # each Conv fused with its Relu (the Dropout before the last one, removed by ORT, goes with it)
    assert all([by_id[i] for i in k.layers][-2:] == ["Conv", "Relu"] for k in convs)
    for kernel in kernels:
        onnx.checker.check_model(onnx.load_from_string(kernel.model_bytes))


# ------------------------------------------------------------------------------------------ timing
@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[KernelTiming], float, dict[str, object], Path]:
    cache = tmp_path_factory.mktemp("kernel-cache")
    kernels = list(kernel_space(("conv", "pool", "elementwise"), limit=42))
    timings, overhead, identity = time_kernels(kernels, SampleStore(cache), FAST, runner=OrtKernels())
    return timings, overhead, identity, cache


def test_timing_fills_the_cache_and_resumes_from_it(timed: tuple[list[KernelTiming], float, dict[str, object],
                                                                 Path]) -> None:
    timings, overhead, _, cache = timed
    assert len(timings) >= 40  # a kernel ORT cannot run is skipped; these all run
    assert overhead > 0 and all(len(t.samples_us) == FAST.visits for t in timings)
    assert not any(t.cached for t in timings)
    again, overhead2, _ = time_kernels([t.kernel for t in timings], SampleStore(cache), FAST, runner=OrtKernels(),
                                          budget_s=0.0)
    assert all(t.cached for t in again) and len(again) == len(timings)  # a spent budget still reads the cache
    assert [t.samples_us for t in again] == [t.samples_us for t in timings]
    assert overhead2 == overhead
    fresh = list(kernel_space(("resize",), limit=3))
    none, _, _ = time_kernels(fresh, SampleStore(cache), FAST, runner=OrtKernels(), budget_s=0.0)
    assert none == []  # nothing cached, no budget: nothing new is timed
    # uncached kernels ahead of cached ones (a space grown since the cache was filled): the spent budget skips
    # them and still reads every cached one after them
    mixed, _, _ = time_kernels([*fresh, *(t.kernel for t in timings)], SampleStore(cache), FAST,
                               runner=OrtKernels(), budget_s=0.0)
    assert [t.kernel.label for t in mixed] == [t.kernel.label for t in timings] and all(t.cached for t in mixed)


def test_a_thousand_times_the_macs_takes_longer(tmp_path: Path) -> None:
    small = conv_kernel(14, 16, 16, k=1, stride=1, depthwise=False, bn=False, act="none")
    large = conv_kernel(56, 64, 64, k=3, stride=1, depthwise=False, bn=False, act="none")  # 1152x the MACs
    timings, _, _ = time_kernels([small, large], SampleStore(tmp_path), FAST, runner=OrtKernels())
    assert timings[1].latency_us > 5 * timings[0].latency_us


# ------------------------------------------------------------------------------------------ fit, file, predict
@pytest.fixture(scope="module")
def fitted(timed: tuple[list[KernelTiming], float, dict[str, object], Path],
           tmp_path_factory: pytest.TempPathFactory) -> tuple[Predictor, Path]:
    timings, overhead, identity, _ = timed
    samples = samples_from_timings(timings, load_profile("host"))
    predictor = fit_predictor(samples, identity, "host", overhead)
    return predictor, predictor.save(tmp_path_factory.mktemp("predictor") / "p.json")


def test_fit_has_a_model_per_sampled_family_and_cross_validated_errors(fitted: tuple[Predictor, Path]) -> None:
    predictor, _ = fitted
    assert set(predictor.families) == {"all", "conv", "pool", "elementwise"}
    for fit in predictor.families.values():
        assert 0.0 <= fit.cv_within_10 <= 1.0 and fit.cv_median_abs_error >= 0.0
        assert fit.residual_low <= fit.residual_high
        assert fit.model.features == len(FEATURES) + (len(FAMILIES) if fit.family == "all" else 0)


def test_predictor_file_round_trips_as_json_without_pickle(fitted: tuple[Predictor, Path]) -> None:
    predictor, path = fitted
    assert path.read_bytes().startswith(b"{")
    data = json.loads(path.read_text())
    assert data["format"] == "layerscope-predictor" and data["version"] == VERSION
    loaded = load_predictor(path)
    assert loaded.to_json() == json.loads(json.dumps(predictor.to_json()))
    graph = load_model(zoo("squeezenet"))
    est = estimate_graph(graph, load_profile("host"), "fp32")
    a, b = predict_path(predictor, graph, est), predict_path(loaded, graph, est)
    assert a.latency_us == b.latency_us


def test_prediction_sums_kernels_and_overhead(fitted: tuple[Predictor, Path]) -> None:
    predictor, _ = fitted
    graph = load_model(zoo("squeezenet"))
    est = estimate_graph(graph, load_profile("host"), "fp32")
    pred = predict_path(predictor, graph, est)
    # its 39 kernels and the NCHWc reorders ONNX Runtime runs around them (none on a CPU without blocked convs)
    reorders = layout_kernels(graph, SessionConfig(threads=1))
    assert pred.fusion == "onnxruntime" and len(pred.kernels) == 39 + len(reorders)
    assert [k.kernel for k in pred.kernels if k.family == REORDER_FAMILY] == [name for name, _, _ in reorders]
    assert math.isclose(pred.latency_us, sum(k.latency_us for k in pred.kernels) + predictor.overhead_us)
    assert math.isclose(sum(pred.layers_us.values()) + pred.overhead_us, pred.latency_us, rel_tol=1e-9)
    assert pred.low_us <= pred.latency_us <= pred.high_us
    assert all(k.low_us <= k.latency_us <= k.high_us for k in pred.kernels)
    # a 1000-class 1x1 conv over 13x13x512 outweighs the 16-channel squeeze convs
    by_layer = pred.layers_us
    assert by_layer["n62"] > by_layer["n3"]


def test_refused_for_another_runtime_or_version(fitted: tuple[Predictor, Path], tmp_path: Path) -> None:
    _, path = fitted
    data = json.loads(path.read_text())
    other = tmp_path / "other-runtime.json"
    other.write_text(json.dumps(dict(data, runtime=dict(data["runtime"], version="0.1.0"))))
    graph = load_model(zoo("squeezenet"))
    est = estimate_graph(graph, load_profile("host"), "fp32")
    with pytest.raises(InputError, match=r"another runtime: version '0\.1\.0'") as info:
        predict_path(load_predictor(other), graph, est)
    assert info.value.exit_code == 2
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(dict(data, version=VERSION + 1)))
    with pytest.raises(InputError, match=f"version {VERSION + 1}"):
        load_predictor(newer)
    older = tmp_path / "older.json"  # version 3: its features did not hold the working set
    older.write_text(json.dumps(dict(data, version=3)))
    with pytest.raises(InputError, match=f"version 3; this layerscope reads version {VERSION}"):
        load_predictor(older)
    pickled = tmp_path / "pickled.json"
    pickled.write_bytes(b"\x80\x04\x95")
    with pytest.raises(InputError, match="not JSON"):
        load_predictor(pickled)


def test_estimate_with_predictor_writes_per_layer_predictions(fitted: tuple[Predictor, Path], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _, path = fitted
    out = tmp_path / "run.json"
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "--predictor", str(path), "-o", str(out),
                 "--top", "3"]) == 0
    assert "predicted latency:" in capsys.readouterr().out
    run = load_document(out)
    section = run["predictor"]
    assert section["low_us"] <= section["latency_us"] <= section["high_us"]
    layers = {layer["id"]: layer for layer in run["layers"]}
    assert sum(layer["predicted"]["latency_us"] for layer in layers.values()) == pytest.approx(
        section["latency_us"] - section["overhead_us"], rel=1e-4)
    assert layers["n0"]["predicted"]["family"] == "conv" and layers["n0"]["estimate"]["bound"]  # roofline kept
    data = json.loads(path.read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(data, runtime=dict(data["runtime"], threads=1, provider="cuda"))))
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "--predictor", str(bad)]) == 2
    # this predictor was fitted without calibration models: no rules to group by
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "--predictor", str(path), "--fusion",
                 "rules"]) == 2


def test_calibrate_kernels_cli_writes_a_predictor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    model = tmp_path / "calibration.onnx"
    model.write_bytes(conv_kernel(28, 16, 32, k=3, stride=1, depthwise=False, bn=True, act="relu").model_bytes)
    assert main(["calibrate", "--kernels", str(model), "--budget", "4s", "--families", "pool,concat", "--visits", "2",
                 "--cache", str(tmp_path / "cache"), "-o", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())  # as read, whatever width the console wrapped it at
    assert "cross-validated error per family" in text and "predictor:" in text
    assert "in-model context NOT applied (kernels are summed as timed)" in text and "one calibration model" in text
    predictor = load_predictor(out)
    assert predictor.runtime["threads"] == 1 and predictor.profile == "host"
    assert predictor.context.models == 1 and predictor.context.per_kernel_us == 0.0
    assert not predictor.context.applied and "none is left to hold out" in predictor.context.why
    assert predictor.fusion_rules is not None and predictor.fusion_rules.models == 1
    assert predictor.fusion_rules.pairs[("Conv", "BatchNormalization")] == (1, 1)
    assert "fusion rules from 1 model(s): " in text
    assert main(["calibrate", "--kernels", "--families", "nope", "-o", str(out)]) == 2
    assert main(["calibrate", "-o", str(tmp_path / "x.toml")]) == 2


def test_estimate_into_an_existing_run_replaces_its_prediction(fitted: tuple[Predictor, Path], tmp_path: Path) -> None:
    _, path = fitted
    copy = tmp_path / "second.json"
    copy.write_bytes(path.read_bytes())
    out = tmp_path / "run.json"
    for predictor in (path, copy):
        assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "--predictor", str(predictor), "-o",
                     str(out), "--top", "0"]) == 0
    assert load_document(out)["predictor"]["file"] == str(copy)


# ------------------------------------------------------------------------------------------ in-model context
def test_context_fit_recovers_a_factor_and_a_per_kernel_gap() -> None:
    # measured = 20 (overhead) + 1.5 x isolated + 10 us per kernel, exactly
    rows = [(20 + 1.5 * p + 10 * n, p, n) for p, n in ((1000.0, 10), (5000.0, 200), (200.0, 50), (8000.0, 30))]
    ctx = fit_context(rows, 20.0)
    assert ctx.factor == pytest.approx(1.5) and ctx.per_kernel_us == pytest.approx(10.0)
    assert ctx.models == 4 and max(ctx.errors) < 1e-9
    # two models: the factor alone, least squares on relative error: rows (p/m, (m-o)/m) = (0.5, 1.0), (0.25, 1.0)
    # -> factor = (0.5 + 0.25) / (0.25 + 0.0625) = 2.4
    two = fit_context([(100.0, 50.0, 5), (400.0, 100.0, 9)], 0.0)
    assert two.factor == pytest.approx(2.4) and two.per_kernel_us == 0.0
    assert two.errors == pytest.approx((0.2, 0.4))  # 2.4 x 50 = 120 (+20%), 2.4 x 100 = 240 (-40%)
    # held out, each is fitted on the other alone: x4 -> 200 (+100%), x2 -> 200 (-50%): median 75%; summed as
    # timed: 50 (-50%), 100 (-75%): median 62.5%: the context does not transfer
    assert two.held_out_errors == pytest.approx((1.0, 0.5)) and two.held_out_errors_alone == pytest.approx((0.5, 0.75))
    assert not two.applied and "62.5%" in two.why and "75.0%" in two.why
    assert ctx.applied and ctx.held_out_errors == pytest.approx((0.0,) * 4, abs=1e-9)
    assert fit_context([], 5.0) == Context()
    # the model of fewest kernels is the furthest under: a negative gap, so the factor alone,
    # iso = p/m = (1, 0.5, 1), target 1: (1 + 0.5 + 1) / (1 + 0.25 + 1)
    neg = fit_context([(100.0, 100.0, 50), (1000.0, 500.0, 10), (300.0, 300.0, 100)], 0.0)
    assert neg.per_kernel_us == 0.0 and neg.factor == pytest.approx(2.5 / 2.25)
    # measured = 1.5 x isolated, but the small model of many kernels reads 1.6x: a gap would explain it and miss
    # the others when it is left out; leave-one-model-out keeps the factor alone
    noisy = [(1500.0, 1000.0, 10), (7500.0, 5000.0, 200), (480.0, 200.0, 50), (12000.0, 8000.0, 30),
             (3000.0, 2000.0, 300)]
    alone = fit_context(noisy, 0.0)
    assert alone.per_kernel_us == 0.0 and 1.5 < alone.factor < 1.6


def test_prediction_takes_each_kernel_into_its_model_context(fitted: tuple[Predictor, Path], tmp_path: Path) -> None:
    predictor, _ = fitted
    graph = load_model(zoo("squeezenet"))
    est = estimate_graph(graph, load_profile("host"), "fp32")
    alone = predict_path(predictor, graph, est)
    # a range that holds squeezenet's 39 kernels (no range: applied to no model, tests/test_predictor_context.py)
    ctx = Context(factor=1.5, per_kernel_us=4.0, models=3, errors=(0.1, 0.2, 0.05),
                  support=(("kernels", 10.0, 100.0), ("median_kernel_us", 0.0, 1e6), ("kernels_us", 0.0, 1e9)))
    inside = predict_path(dataclasses.replace(predictor, context=ctx), graph, est)
    assert inside.context_applied and not alone.context_applied
    assert [k.isolated_us for k in inside.kernels] == [k.isolated_us for k in alone.kernels]
    assert all(k.latency_us == pytest.approx(1.5 * k.isolated_us + 4.0) for k in inside.kernels)
    assert inside.latency_us == pytest.approx(1.5 * (alone.latency_us - alone.overhead_us)
                                              + 4.0 * len(alone.kernels) + predictor.overhead_us)
    assert math.isclose(sum(inside.layers_us.values()) + inside.overhead_us, inside.latency_us, rel_tol=1e-9)
    path = dataclasses.replace(predictor, context=ctx).save(tmp_path / "ctx.json")
    assert load_predictor(path).context == ctx
    data = json.loads(path.read_text())
    bad = tmp_path / "bad-ctx.json"
    bad.write_text(json.dumps(dict(data, context=dict(data["context"], factor=-1))))
    with pytest.raises(InputError, match="malformed"):
        load_predictor(bad)


def test_a_whole_model_is_timed_as_its_kernels_are(tmp_path: Path) -> None:
    kernel = conv_kernel(28, 16, 32, k=3, stride=1, depthwise=False, bn=True, act="relu")
    model = tmp_path / "m.onnx"
    model.write_bytes(kernel.model_bytes)
    store = SampleStore(tmp_path / "cache")
    [(path, p50)] = time_models([model], None, store, FAST, visits=4, runner=OrtKernels())
    assert path == model and p50 > 0
    again = time_models([model], None, store, FAST, visits=4, runner=OrtKernels())
    assert again == [(model, p50)]  # the cache answers again


# ------------------------------------------------------------------------------------------ adaptive sampling
def test_family_configs_build_the_kernels_kernel_space_yields() -> None:
    configs = family_configs("pool")
    assert [c.build().label for c in configs[:3]] == [k.label for k in kernel_space(("pool",), limit=3)]
    built = configs[0].build()
    assert built.config == configs[0].params and dict(built.config)["_2"] in ("max", "avg", "global")


def _errors(configs: list[Config], bad: Callable[[Config], bool], high: float, low: float) -> list[tuple[Any, float]]:
    return [(c.params, high if bad(c) else low) for c in configs]


def test_plan_gives_the_worse_family_the_larger_share_and_its_worst_region() -> None:
    pool, concat = family_configs("pool"), family_configs("concat")
    timed_pool, timed_concat = pool[:30], concat[:30]
    # pool: large maps (hw >= 56, params _0) are badly predicted; concat is predicted well everywhere
    errors = {"pool": (0.30, _errors(timed_pool, lambda c: dict(c.params)["_0"] >= 56, 0.6, 0.05)),
              "concat": (0.03, _errors(timed_concat, lambda c: True, 0.03, 0.03))}
    plan = plan_batch({"pool": pool[30:], "concat": concat[30:]}, errors, 22)
    families = [c.family for c in plan]
    # shares 0.30 : 0.03 of 22 -> 20 and 2
    assert families.count("pool") == 20 and families.count("concat") == 2
    assert len({c.params for c in plan}) == 22 and not {c.params for c in plan} & {c.params for c in timed_pool}
    large = sum(1 for c in pool[30:] if dict(c.params)["_0"] >= 56)
    picked_large = sum(1 for c in plan if c.family == "pool" and dict(c.params)["_0"] >= 56)
    assert large >= 20 and picked_large == 20  # every pool pick lies in the badly predicted region
    # a family nothing is known about yet counts as the worst one; an exhausted family gets nothing
    plan = plan_batch({"pool": pool[30:], "resize": family_configs("resize"), "concat": []}, errors, 10)
    assert [c.family for c in plan].count("resize") == 5 and "concat" not in [c.family for c in plan]


def _fake_timer(timed: list[KernelModel]) -> Callable[[Sequence[KernelModel], float | None], list[KernelTiming]]:
    def timer(kernels: Sequence[KernelModel], budget_s: float | None) -> list[KernelTiming]:
        out = []
        for kernel in kernels[:12]:  # a "budget" of 12 kernels per call
            timed.append(kernel)
            out.append(KernelTiming(kernel, 10.0, (10.0,), 1.0, False))
        return out
    return timer


def test_adaptive_sampling_spends_the_rest_of_the_budget_on_the_worse_family() -> None:
    timed: list[KernelModel] = []
    ticks = iter(range(100))

    def evaluate(timings: Sequence[KernelTiming]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for family, err in (("pool", 0.4), ("concat", 0.02)):
            known = [t.kernel.config for t in timings if t.kernel.family == family]
            out[family] = (err, [(c, err) for c in known])
        return out

    timings, rounds = adaptive_sample([], ("pool", "concat"), _fake_timer(timed), evaluate, budget_s=50.0,
                                      batch=12, max_rounds=2, clock=lambda: float(next(ticks)))
    assert rounds[0].timed == {"pool": 6, "concat": 6}  # the first pass: round-robin
    assert rounds[1].timed == {"pool": 11, "concat": 1} and rounds[2].timed == {"pool": 11, "concat": 1}
    assert rounds[1].planned_from == {"pool": 0.4, "concat": 0.02}
    assert len({k.config for k in timed}) == len(timed) == len(timings) == 36  # never the same config twice
    # no budget left after the first pass: no adaptive pass
    ticks = iter([0.0, 0.0, 100.0])
    _, rounds = adaptive_sample([], ("pool",), _fake_timer([]), evaluate, budget_s=50.0, clock=lambda: next(ticks))
    assert len(rounds) == 1
    # the calibration models' kernels come first, whatever the first share of the budget
    first = [conv_kernel(7, 16, 16, k=1, stride=1, depthwise=False, bn=False, act="none")]
    timed = []
    adaptive_sample(first, ("pool",), _fake_timer(timed), evaluate, budget_s=50.0, first_share=0.0, max_rounds=0)
    assert timed[0] is first[0] and len(timed) == 1


# ------------------------------------------------------------------------------------------ runners
def test_kernels_timed_through_device_commands_record_the_runner(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    # a deterministic "device": 1 us per byte of the compiled model
    args = ["calibrate", "--kernels", "--budget", "4s", "--families", "pool", "--visits", "2", "--cache",
            str(tmp_path / "cache"), "--compile-cmd", "cp {model} {compiled}",
            "--run-cmd", "echo latency: $(wc -c < {compiled})", "--latency-regex", r"latency:\s*([0-9]+)",
            "--latency-unit", "us"]
    assert main([*args, "-o", str(out)]) == 0
    predictor = load_predictor(out)
    assert predictor.runtime["runner"] == "command" and predictor.runtime["compile_cmd"] == "cp {model} {compiled}"
    # the per-call overhead is what the device command read for the one-element Relu model: its size in us
    assert predictor.overhead_us == pytest.approx(len(empty_model()))
    run = tmp_path / "run.json"
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "--predictor", str(out), "-o", str(run),
                 "--top", "0"]) == 0
    assert load_document(run)["predictor"]["fusion"] == "onnxruntime"  # a board's grouping is not visible: ORT's
    failing = [*args[:-6], "--run-cmd", "exit 7", "--latency-regex", "x(1)", "-o", str(tmp_path / "q.json")]
    assert main(failing) == 3
    assert main([*args, "--backend", "openvino", "-o", str(out)]) == 2  # one runner at a time


def test_openvino_groups_conv_and_relu_into_one_kernel() -> None:
    pytest.importorskip("openvino")
    graph = load_model(zoo("squeezenet"))
    ops = {n.id: n.op_type for n in graph.layers}
    groups = openvino_kernel_groups(graph, SessionConfig(threads=1))
    kinds = [tuple(ops[i] for i in layers) for _, layers in groups]
    assert kinds.count(("Conv", "Relu")) == 26 and kinds.count(("Concat",)) == 7
    covered = [i for _, layers in groups for i in layers]
    assert len(covered) == len(set(covered))
    # the eighth Concat, before the Dropout, OpenVINO does in place: no executed node runs it
    assert set(ops) - set(covered) == {"n60"} and ops["n60"] == "Concat"


def test_kernels_timed_on_openvino_predict_with_openvino_and_refuse_another_version(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    out = tmp_path / "p.json"
    assert main(["calibrate", "--kernels", "--backend", "openvino", "--budget", "8s", "--families", "pool",
                 "--visits", "2", "--cache", str(tmp_path / "cache"), "-o", str(out)]) == 0
    predictor = load_predictor(out)
    assert predictor.runtime["runner"] == "openvino" and predictor.runtime["provider"] == "CPU"
    run = tmp_path / "run.json"
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "--predictor", str(out), "-o", str(run),
                 "--top", "0"]) == 0
    section = load_document(run)["predictor"]
    assert section["fusion"] == "openvino" and len(section["kernels"]) == 39
    data = json.loads(out.read_text())
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(data, runtime=dict(data["runtime"], version="2020.1"))))
    with pytest.raises(InputError, match=r"another runtime: version '2020\.1'"):
        graph = load_model(zoo("squeezenet"))
        predict_path(load_predictor(other), graph, estimate_graph(graph, load_profile("host"), "fp32"))


# ------------------------------------------------------------------------------------------ learnt fusion
def test_prediction_groups_by_learnt_rules_where_the_runtime_is_absent(fitted: tuple[Predictor, Path],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import layerscope.analysis.predictor as module

    predictor, _ = fitted
    graph = load_model(zoo("squeezenet"))
    est = estimate_graph(graph, load_profile("host"), "fp32")
    with pytest.raises(InputError, match="no fusion rules"):
        predict_path(predictor, graph, est, "rules")
    rules = learn_rules([(graph, kernel_groups(graph, SessionConfig(threads=1)))], "onnxruntime")
    with_rules = load_predictor(dataclasses.replace(predictor, fusion_rules=rules).save(tmp_path / "r.json"))
    assert with_rules.fusion_rules == rules
    runtime = predict_path(with_rules, graph, est)
    by_rules = predict_path(with_rules, graph, est, "rules")
    assert runtime.fusion == "onnxruntime" and by_rules.fusion == "rules"
    # learnt from squeezenet itself, the rules replay its 39 kernels: the same prediction, less the NCHWc reorders
    # the runtime's optimized graph shows (the rules do not hold them)
    layer_kernels = [k for k in runtime.kernels if k.family != REORDER_FAMILY]
    assert {frozenset(k.layers) for k in by_rules.kernels} == {frozenset(k.layers) for k in layer_kernels}
    assert by_rules.latency_us == pytest.approx(runtime.latency_us - sum(k.latency_us for k in runtime.kernels
                                                                         if k.family == REORDER_FAMILY), rel=1e-9)
    monkeypatch.setattr(module, "runtime_here", lambda p: (None, OrtKernels()))  # no runtime installed here
    assert predict_path(with_rules, graph, est).fusion == "rules"
    assert predict_path(predictor, graph, est).fusion == "onnxruntime"  # no rules: the runtime after all


# ------------------------------------------------------------------------------------------ dtype axis
def test_the_space_holds_fp16_and_int8_kernels_and_their_dtype_is_a_feature(tmp_path: Path) -> None:
    conv = family_configs("conv")
    dtypes = [c.build().label.rsplit(" ", 1)[-1] for c in conv[:400]]
    assert "dtype=fp16" in dtypes and "dtype=int8" in dtypes
    assert any("dtype=fp16" in c.build().label for c in family_configs("matmul")[:200])
    kernels = [conv_kernel(14, 16, 32, k=3, stride=1, depthwise=False, bn=False, act="none", dtype=dtype)
               for dtype in ("fp32", "fp16")] + [qdq_conv_kernel(14, 16, 32, k=3, stride=1)]
    fp16 = onnx.load_from_string(kernels[1].model_bytes)
    assert fp16.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert kernels[0].label + " dtype=fp16" == kernels[1].label  # fp32 labels (and cached models) unchanged
    path = tmp_path / "qdq.onnx"
    path.write_bytes(kernels[2].model_bytes)
    assert "QLinearConv" in [n.op_type for n in optimized_graph(path, SessionConfig(threads=1)).node]
    timings = [KernelTiming(k, 10.0, (10.0,), 1.0, False) for k in kernels]  # features need no timing
    samples = samples_from_timings(timings, load_profile("host"))
    column = FEATURES.index("elem_bytes")
    assert [s.features[column] for s in samples] == [4.0, 2.0, 1.0]
    assert all(s.family == "conv" for s in samples)
    timed, _, _ = time_kernels(kernels, SampleStore(tmp_path / "cache"), FAST, runner=OrtKernels())
    assert len(timed) == 3  # ONNX Runtime runs all three


def test_the_terminal_report_states_the_in_model_context() -> None:
    from rich.console import Console

    from layerscope.report.predictor_terminal import predictor_report

    section = {"latency_us": 2000.0, "low_us": 1500.0, "high_us": 2500.0, "overhead_us": 20.0, "fusion": "rules",
               "kernels": [{"kernel": "a"}, {"kernel": "b"}],
               "context": {"factor": 1.5, "per_kernel_us": 4.0, "models": 3}}
    console = Console(width=200, record=True)
    from layerscope.runfile import as_run

    def run(predictor: dict[str, Any]) -> Any:
        return as_run({"schema_version": 2, "model": {}, "summary": {}, "layers": [], "predictor": predictor})

    console.print(predictor_report(run(section), 0))
    text = console.export_text()
    assert "fusion: rules, in model: x1.50 + 4.0 us per kernel, from 3 model(s))" in text
    console.print(predictor_report(run(dict(section, context={"models": 0})), 0))
    assert "in model" not in console.export_text()


def test_a_context_from_an_unlike_calibration_model_is_not_applied() -> None:
    # two CNNs whose kernels, summed as timed, give their P50 exactly, and a transformer whose P50 is 2x its kernels
    # (overhead 0). Held out, a CNN gets the factor fitted to the other CNN and the transformer: iso = p/m = (1,
    # 0.5), target 1 -> (1 + 0.5) / (1 + 0.25) = 1.2, so +20%; the transformer, from the two CNNs: x1, -50%.
    # Median held-out 20% against 0% summed as timed: not applied, although it lowers the in-sample error.
    rows = [(1000.0, 1000.0, 50), (2000.0, 2000.0, 80), (600.0, 300.0, 10)]
    ctx = fit_context(rows, 0.0)
    assert ctx.factor == pytest.approx(2.5 / 2.25)  # the fit itself: iso (1, 1, 0.5)
    assert ctx.held_out_errors == pytest.approx((0.2, 0.2, 0.5))
    assert ctx.held_out_errors_alone == pytest.approx((0.0, 0.0, 0.5))
    assert not ctx.applied and "does not transfer" in ctx.why
    assert ctx.apply(123.0) == 123.0
    # the same CNNs beside a third CNN that runs 10% slower in its model: the context transfers and is applied
    like = fit_context([(1100.0, 1000.0, 50), (2200.0, 2000.0, 80), (660.0, 600.0, 10)], 0.0)
    assert like.applied and like.factor == pytest.approx(1.1) and like.apply(100.0) == pytest.approx(110.0)


def test_a_matmul_calibration_model_leaves_a_cnn_prediction_as_its_kernels_summed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layerscope.measure.kernels import matmul_kernel

    model = tmp_path / "transformer-like.onnx"  # a pure MatMul+Add model: nothing like a CNN's kernels
    model.write_bytes(matmul_kernel(1, 64, 256, 256, bias=True, weights=True).model_bytes)
    out = tmp_path / "p.json"
    assert main(["calibrate", "--kernels", str(model), "--budget", "3s", "--families", "conv,matmul", "--visits", "2",
                 "--cache", str(tmp_path / "cache"), "-o", str(out)]) == 0
    capsys.readouterr()
    context = json.loads(out.read_text())["context"]
    assert context["models"] == 1 and context["applied"] is False and "hold out" in context["why"]
    predictor = load_predictor(out)
    graph = load_model(zoo("squeezenet"))
    pred = predict_path(predictor, graph, estimate_graph(graph, load_profile("host"), "fp32"))
    # no context: each kernel alone, taken into its model by the call costs alone (one input, one output each
    # here: as the empty model, + a dispatch), + the model's call (squeezenet: one input, one output)
    assert not pred.context_applied and predictor.calls.empty_us > 0
    calls = predictor.calls
    assert [k.latency_us for k in pred.kernels] == pytest.approx(
        [calls.in_model(k.isolated_us, *kernel_io(graph, k.layers)) for k in pred.kernels])
    assert pred.overhead_us == pytest.approx(calls.model_us(1, 1))
    assert pred.latency_us == pytest.approx(sum(k.latency_us for k in pred.kernels) + pred.overhead_us)


def test_the_run_summary_carries_the_prediction(fitted: tuple[Predictor, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    from layerscope.analysis.reconcile import reconcile_run
    from layerscope.report.tables import layers_csv, markdown_summary
    from layerscope.runfile import as_run

    _, path = fitted
    roofline, predicted = tmp_path / "roofline.json", tmp_path / "predicted.json"
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "-o", str(roofline), "--top", "0"]) == 0
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "--predictor", str(path), "-o",
                 str(predicted), "--top", "0"]) == 0
    terminal = capsys.readouterr().out
    run, base = load_document(predicted), load_document(roofline)
    summary, section = run["summary"], run["predictor"]
    assert summary["est_latency_us"] == section["latency_us"] != base["summary"]["est_latency_us"]
    assert (summary["est_low_us"], summary["est_high_us"]) == (section["low_us"], section["high_us"])
    assert summary["est_fps"] == pytest.approx(1e6 / section["latency_us"], rel=1e-5)
    assert summary["roofline_latency_us"] == base["summary"]["est_latency_us"]
    sha = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert summary["est_source"] == f"predictor {path} sha256:{sha}"
    assert "est_source" not in base["summary"] and "roofline_latency_us" not in base["summary"]
    assert "kernel predictor" in terminal and sha in terminal
    markdown = markdown_summary(as_run(run))
    assert "estimated, kernel predictor" in markdown and "estimated, roofline" in markdown and sha in markdown
    rows = layers_csv(as_run(run)).splitlines()
    column = rows[0].split(",").index("pred.latency_us")
    by_csv = sum(float(r.split(",")[column]) for r in rows[1:] if r.split(",")[column])
    assert by_csv == pytest.approx(section["latency_us"] - section["overhead_us"], rel=1e-4)
    # measured end to end: k divides the P50 by the prediction, not the roofline
    timed = dict(run, latency={"p50_us": 2 * section["latency_us"], "samples": 5})
    rec = reconcile_run(as_run(timed))
    assert rec.k == pytest.approx(2.0) and rec.estimated_source == summary["est_source"]
    assert "kernel predictor" in rec.scope
    assert reconcile_run(as_run(dict(base, latency={"p50_us": 2 * section["latency_us"]}))).k == pytest.approx(
        2 * section["latency_us"] / base["summary"]["est_latency_us"])
    # the roofline estimated again into the predicted run: the prediction's summary keys and section go with it
    assert main(["estimate", str(zoo("squeezenet")), "-t", "host", "-o", str(predicted), "--top", "0"]) == 0
    refreshed = load_document(predicted)
    assert "predictor" not in refreshed and refreshed["summary"]["est_latency_us"] == base["summary"]["est_latency_us"]
    assert not {"est_source", "est_low_us", "est_high_us", "roofline_latency_us"} & refreshed["summary"].keys()
