"""Bisect on OpenVINO (each prefix and suffix compiled and timed end to end), the planner that never cuts inside a
node the compiler fused, the intervals' random and systematic parts, and `compare` of two runtimes."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import helper

from _openvino import PRECISION_HINTS, chosen_precision
from conftest import F32, ModelWriter, zoo
from layerscope.analysis.compare import compare_runs
from layerscope.measure.cuts import CutPlanner
from layerscope.measure.differential import (
    SYSTEMATIC_REL,
    BisectConfig,
    SampleStore,
    closure_us,
    kernel_gaps,
    run_bisect,
    with_systematic,
)
from layerscope.measure.inputs import make_inputs
from layerscope.measure.kernel_trace import KernelSamples
from layerscope.measure.profile import KernelResult
from layerscope.measure.runners import Job
from layerscope.model import load_model
from layerscope.report.perfetto import trace_document
from layerscope.report.tables import layers_csv
from layerscope.report.views.bisect import bisect_view
from layerscope.report.views.layers import layer_rows
from layerscope.report.views.summary import summary_sections
from layerscope.runfile import as_run
from layerscope.runfile.derived import measurement_origin
from layerscope.stats import summarize

RNG = np.random.default_rng(0)


def _conv_relu_chain(write_model: ModelWriter) -> Path:
    """conv0 -> relu0 -> conv1 -> relu1 -> pool: OpenVINO runs each Conv with its Relu as one node."""
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"], name="relu0"),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r1"], ["y"], name="pool"),
    ]
    weights = {"w0": RNG.standard_normal((8, 3, 3, 3)).astype(np.float32),
               "w1": RNG.standard_normal((8, 8, 3, 3)).astype(np.float32)}
    return write_model(nodes, [("x", F32, [1, 3, 16, 16])], [("y", F32, [1, 8, 1, 1])], weights)


# --- the planner on the compiler's fusion -------------------------------------------------------------------------

def test_the_planner_never_cuts_inside_a_node_openvino_fused(write_model: ModelWriter) -> None:
    pytest.importorskip("openvino")
    from layerscope.measure.groups import group_cuts
    from layerscope.measure.session import SessionConfig
    from layerscope.runtimes.openvino.compile import OpenVinoOptions
    from layerscope.runtimes.openvino.runner import fused_groups

    graph = load_model(_conv_relu_chain(write_model))
    groups = fused_groups(graph, SessionConfig(provider="CPU", threads=1), OpenVinoOptions())
    ids = {layer.name: layer.id for layer in graph.layers}
    assert {frozenset(g) for g in groups} == {frozenset({ids["conv0"], ids["relu0"]}),
                                               frozenset({ids["conv1"], ids["relu1"]})}
    # layers in order conv0 relu0 conv1 relu1 pool: the cuts between a Conv and its Relu are 1 and 3
    inside = group_cuts(graph, groups)
    assert inside == {1, 3}
    naive = CutPlanner.for_model(graph)
    planner = naive.with_fused_groups(inside)
    assert planner.layer_cuts() == (0, 2, 4, 5) and naive.layer_cuts() == (0, 1, 2, 3, 4, 5)
    assert [s.layer_ids for s in planner.segments(planner.layer_cuts())][1:] == [
        (ids["conv1"], ids["relu1"]), (ids["pool"],)] and planner.breaks == (False, True, False, True, False, False)
    for segments in range(1, 6):
        assert not set(planner.coarse_cuts(segments)) & inside
    for start, end in ((0, 2), (0, 4), (2, 4), (1, 5)):
        assert planner.split_cut(start, end) not in inside
    assert planner.split_cut(0, 2) is None  # the only inner cut is inside conv0+relu0


def test_group_cuts_span_a_group_whose_layers_are_not_adjacent(write_model: ModelWriter) -> None:
    graph = load_model(_conv_relu_chain(write_model))
    first, _, _, fourth, _ = (layer.id for layer in graph.layers)
    assert _group_cuts(graph, [(first, fourth)]) == {1, 2, 3}
    assert _group_cuts(graph, [(first,), ("not-a-layer", fourth)]) == set()


def _group_cuts(graph: Any, groups: list[tuple[str, ...]]) -> set[int]:
    from layerscope.measure.groups import group_cuts

    return set(group_cuts(graph, groups))


# --- the intervals' two parts ----------------------------------------------------------------------------------

class ExactRunner:
    """A noiseless device: prefix k takes 50 + the first k layers' times, suffix k 50 + the rest, and the suffix at
    ``extra_cut`` ``extra_us`` more (what that cut costs, which no correction sees)."""

    def __init__(self, times: Mapping[int, float], extra_cut: int, extra_us: float, layers: int) -> None:
        self.times, self.extra_cut, self.extra_us, self.layers = times, extra_cut, extra_us, layers

    @property
    def identity(self) -> Mapping[str, Any]:
        return {"runner": "exact"}

    def measure(self, job: Job) -> float:
        k = job.cut.layers
        if job.side == "prefix":
            return 50.0 + sum(self.times[i] for i in range(k))
        return 50.0 + sum(self.times[i] for i in range(k, self.layers)) + (self.extra_us if k == self.extra_cut else 0)

    def boundary(self, job: Job, whole: Job, runs: int) -> None:
        return None

    def close(self) -> None:
        pass


def test_the_systematic_part_widens_the_bootstrap_interval(write_model: ModelWriter, tmp_path: Path) -> None:
    graph = load_model(_conv_relu_chain(write_model))
    planner = CutPlanner.for_model(graph)
    times = {i: 10.0 * (i + 1) for i in range(5)}
    config = BisectConfig(granularity="layer", repeats=3, statistic="p10", suffixes=True)
    meet_probe = run_bisect(planner, ExactRunner(times, -1, 0.0, 5), config, SampleStore(None), workdir=tmp_path / "a")
    meet = meet_probe.meet
    assert meet is not None and closure_us(meet_probe) == pytest.approx(0.0)
    result = run_bisect(planner, ExactRunner(times, meet, 30.0, 5), config, SampleStore(None), workdir=tmp_path / "b")
    # the suffix at the meeting cut is 30 µs slow: the segments add up to 30 µs more than whole - baseline
    assert closure_us(result) == pytest.approx(30.0)
    segment = next(s for s in result.segments if s.segment.start == meet)
    assert segment.increment_us == pytest.approx(times[meet] + 30.0)
    assert segment.ci_low_us == segment.ci_high_us == segment.low_us == segment.high_us  # no noise, no estimate
    stated = with_systematic(result, None)
    for seg in stated.segments:
        part = seg.systematic
        assert part is not None and part.gap_us == 0.0 and part.correction_us == 0.0
        inner_ends = (seg.segment.start > 0) + (seg.segment.end < 5)
        assert part.cut_us == pytest.approx(15.0 * math.sqrt(inner_ends))
        assert part.relative_us == pytest.approx(SYSTEMATIC_REL * abs(seg.increment_us))
        assert seg.low_us == pytest.approx(seg.increment_us - part.spread_us)
        assert seg.high_us == pytest.approx(seg.increment_us + part.spread_us)
        assert seg.low_us <= seg.ci_low_us <= seg.increment_us <= seg.ci_high_us <= seg.high_us
    # the segment after the meeting cut, 40 + 30 µs: two inner ends, 15 * sqrt(2) and 5% of 70 in quadrature
    seg = next(s for s in stated.segments if s.segment.start == meet)
    assert seg.high_us - seg.increment_us == pytest.approx(math.hypot(15 * math.sqrt(2), 0.05 * (times[meet] + 30)))


def _kernel(name: str, layers: tuple[str, ...], median_us: float) -> KernelResult:
    durations = (median_us,) * 3
    return KernelResult(KernelSamples(name, "Op", "cpu", durations), summarize(durations), layers,
                        "layer" if layers else "layout")


def test_the_gap_between_kernels_is_spread_over_the_segments_kernels(write_model: ModelWriter,
                                                                      tmp_path: Path) -> None:
    graph = load_model(_conv_relu_chain(write_model))
    a, b, c, d, e = (layer.id for layer in graph.layers)
    planner = CutPlanner.for_model(graph)
    segments = planner.segments((0, 2, 5))
    # fastest profiled run 1000 µs, baseline 100, kernels 700 a run: 2/9 of a run less its fixed cost is between
    # kernels; the bisect's whole model 1900 µs: 400 µs between 4 kernels, 100 each; the kernel running b and c
    # counts half in each segment; the layout kernel in none
    profile = type("Profiled", (), {"instrumented": summarize([1000.0, 1010.0, 1100.0]), "kernels": (
        _kernel("k1", (a,), 300.0), _kernel("k2", (b, c), 200.0), _kernel("k3", (d, e), 150.0),
        _kernel("reorder", (), 50.0))})()
    gaps = kernel_gaps(segments, profile, baseline_us=100.0, whole_us=1900.0)  # type: ignore[arg-type]
    assert gaps.share == pytest.approx(2 / 9) and gaps.gap_us == pytest.approx(400.0) and gaps.kernels == 4
    assert gaps.per_kernel_us == pytest.approx(100.0) and gaps.per_segment == pytest.approx((150.0, 150.0))
    # without the bisect's whole model: the profile's fastest run
    alone = kernel_gaps(segments, profile, baseline_us=100.0)  # type: ignore[arg-type]
    assert alone.gap_us == pytest.approx(200.0)


def test_openvino_loop_mode_runs_a_suffix_then_its_feeding_prefix_before_timing_it(
        write_model: ModelWriter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openvino")
    from layerscope.measure.session import SessionConfig
    from layerscope.runtimes.openvino import runner as openvino_runner
    from layerscope.runtimes.openvino.compile import OpenVinoOptions
    from test_bisect import _suffix_job, write_residual

    graph = load_model(write_residual(write_model))
    job = _suffix_job(CutPlanner.for_model(graph), tmp_path, 3)
    ran: list[str] = []
    real_init, real_infer = openvino_runner._Compiled.__init__, openvino_runner._Compiled.infer

    def init(self: Any, compiled: Any, feeds: Mapping[str, np.ndarray], path: Path) -> None:
        real_init(self, compiled, feeds, path)
        self.tag = path.stem

    def infer(self: Any, *args: Any) -> int:
        ran.append(self.tag)
        return real_infer(self, *args)

    monkeypatch.setattr(openvino_runner._Compiled, "__init__", init)
    monkeypatch.setattr(openvino_runner._Compiled, "infer", infer)
    runner = openvino_runner.OpenVinoRunner(SessionConfig(provider="CPU", threads=1), OpenVinoOptions(),
                                            make_inputs(graph, (), 0), visit_warmup=4, warm_with="loop")
    assert runner.measure(job) > 0
    ran.clear()
    runner.measure(job)
    # runs of the suffix itself, one of the layers before its cut (the compiled feeding prefix, kept open), timed
    assert ran == ["suffix3"] * 4 + ["prefix3", "suffix3"]
    assert runner.identity["warm_with"] == "loop"


def test_openvino_compiles_a_timed_model_afresh_every_n_visits(write_model: ModelWriter, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openvino")
    from layerscope.measure.session import SessionConfig
    from layerscope.runtimes.openvino import runner as openvino_runner
    from layerscope.runtimes.openvino.compile import OpenVinoOptions
    from test_bisect import _jobs, write_residual

    graph = load_model(write_residual(write_model))
    (job,) = _jobs(CutPlanner.for_model(graph), tmp_path, 3)
    compiled: list[str] = []
    real = openvino_runner.OpenVinoRunner._compile

    def compile_(self: Any, path: Path, *, profiling: bool) -> Any:
        compiled.append(path.stem)
        return real(self, path, profiling=profiling)

    monkeypatch.setattr(openvino_runner.OpenVinoRunner, "_compile", compile_)
    runner = openvino_runner.OpenVinoRunner(SessionConfig(provider="CPU", threads=1), OpenVinoOptions(),
                                            make_inputs(graph, (), 0), warm_with="self", recompile_every=3)
    samples = [runner.measure(job) for _ in range(7)]
    assert all(s > 0 for s in samples)
    assert compiled == ["prefix3"] * 3  # visits 1-3, 4-6, 7
    assert runner.identity["recompile_every"] == 3


# --- end to end on OpenVINO ------------------------------------------------------------------------------------

def test_bisect_on_openvino_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    from tests._cli_subprocess import run_cli

    out = tmp_path / "run.json"
    # in a child process: OpenVINO compiled many times in this one, then a SIGINT to it (test_bisect_cli's
    # Ctrl-C test) crashed the interpreter in native code; one command per process, as a user runs it
    result = run_cli([
        "bisect", str(zoo("squeezenet")), "--target", "host", "--backend", "openvino", "--threads", "1",
        "--clock", "cpu", "--segments", "3", "--repeats", "3", "--pilot", "1", "--boundary-runs", "2", "--gap-runs",
        "3", "--validate", "--validate-runs", "5", "--no-cache", "-o", str(out)], timeout_s=600)
    assert result.returncode == 0, result.describe()
    run = json.loads(out.read_text())
    measurement, section = run["measurement"], run["bisect"]
    assert measurement["backend"] == "openvino" and measurement["device"] == "CPU"
    precision = chosen_precision()  # what the compiler chooses on this CPU with no hint: f32, or bf16 (AMX ...)
    assert measurement["precision"] == precision
    assert section["runner"]["runner"] == "openvino" and section["cuts"]["rule"] == "exec-graph"
    assert section["runner"]["clock"] == "cpu"
    # the defaults on OpenVINO: a prefix warmed by 4 runs of itself, a suffix as the whole model's loop leaves it
    assert section["runner"]["visit_warmup"] == 4 and section["runner"]["warm_with"] == "loop"
    assert section["runner"]["recompile_every"] == 20  # and each timed model compiled afresh every 20 visits
    assert section.get("max_ci") is None  # no rounds added for the intervals' width unless --max-ci says
    context = {row.label: row.value for row in bisect_view(as_run(run)).context}  # what the terminal prints
    assert "4 untimed of the model itself (a suffix's then 1 of the layers before it) + 1 run" in context["runner"]
    assert "compiled afresh every 20 visits" in context["runner"]
    # squeezenet: OpenVINO runs every Conv with its Relu: no segment starts at a Relu
    layers = {layer["id"]: layer for layer in run["layers"]}
    assert all(layers[s["first_layer"]]["op_type"] != "Relu" for s in section["segments"])
    # the prefixes hand their crossing tensors out of OpenVINO's blocked layout: a Reorder it times
    boundary = section["boundary"]
    assert boundary["corrected"] and boundary["models_with_cost"] > 0
    # a cut costing over 10% of a segment beside it is not reported; its model was timed and is counted
    assert boundary["max_share"] == 0.1 and all(d["share"] is None or d["share"] > 0.1 for d in boundary["dropped"])
    cuts = {p["layers"] for p in section["prefixes"] + section["suffixes"]}
    assert not cuts & {d["layers"] for d in boundary["dropped"]}
    assert boundary["models"] == len(section["prefixes"]) + len(section["suffixes"]) + len(boundary["dropped"])
    origin = measurement_origin(run)  # what every reader says the numbers are
    assert origin is not None and origin.device == "host-cpu"
    assert origin.label.startswith(f"differential (bisect) timing on OpenVINO, CPU ({precision}) on ")
    intervals = section["intervals"]
    assert intervals["systematic"] and intervals["gap_kernels"] > 0
    for seg in section["segments"]:
        assert {"random_ci_low_us", "random_ci_high_us", "systematic_us", "gap_us", "systematic"} <= seg.keys()
        assert seg["ci_low_us"] <= seg["random_ci_low_us"] <= seg["increment_us"] <= seg["random_ci_high_us"] \
            <= seg["ci_high_us"]
        assert seg["profile_us"] > 0  # the reference: OpenVINO's performance counters
    assert section["validation"]["profile_latency_us"] > 0


@pytest.mark.parametrize("hint", PRECISION_HINTS, ids=lambda h: h or "default")
def test_compare_lines_up_an_onnxruntime_and_an_openvino_run(tmp_path: Path, hint: str | None) -> None:
    pytest.importorskip("openvino")
    precision = chosen_precision(hint)  # what OpenVINO runs at under this hint on this CPU
    from click.testing import CliRunner

    from layerscope.cli.main import cli

    runs = {}
    for backend in ("onnxruntime", "openvino"):
        out = tmp_path / f"{backend}.json"
        forced = ["--precision", hint] if hint and backend == "openvino" else []
        result = CliRunner().invoke(cli, ["profile", str(zoo("squeezenet")), "--target", "host", "--backend", backend,
                                          "--runs", "2", "--warmup", "1", "--threads", "1", *forced, "-o", str(out)],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        runs[backend] = json.loads(out.read_text())
    typed = {backend: as_run(run) for backend, run in runs.items()}
    cmp = compare_runs(typed["onnxruntime"], typed["openvino"], before_label="ort", after_label="ov")
    rt = cmp.runtimes
    assert rt is not None and rt.before.backend == "onnxruntime" and rt.after.text == f"openvino CPU {precision}"
    assert [x.layer_id for x in rt.layers] == [layer["id"] for layer in runs["onnxruntime"]["layers"]]
    by_id = {x.layer_id: x for x in rt.layers}
    ops = {layer["id"]: layer["op_type"] for layer in runs["openvino"]["layers"]}
    first_relu = next(i for i, op in ops.items() if op == "Relu")
    # both runtimes run the first Conv with its Relu; ONNX Runtime at f32
    assert set(by_id["n0"].before_group) == set(by_id["n0"].after_group) == {"n0", first_relu}
    assert {x.before_precision for x in rt.layers if x.before_group} == {"f32"}
    # per op type: each side's layer times added up
    for op, before_us, after_us in rt.by_op:
        assert before_us == pytest.approx(sum(x.before_us for x in rt.layers if x.op_type == op))
        assert after_us == pytest.approx(sum(x.after_us for x in rt.layers if x.op_type == op))
    assert not compare_runs(typed["openvino"], typed["openvino"]).runtimes  # one runtime: nothing to line up
    # the Markdown carries the same comparison: per op type, then the layers fused differently
    from layerscope.report.analysis_markdown import compare_markdown

    text = compare_markdown(cmp)
    conv_before, conv_after = next((b, a) for op, b, a in rt.by_op if op == "Conv")
    assert "### Where each runtime spends its time" in text and f"ov = openvino CPU {precision}" in text
    assert f"| Conv | {conv_before:.1f} | {conv_after:.1f} | {conv_after - conv_before:+.1f} |" in text
    assert (f"Fused differently: {len(rt.fused_differently)} layers" in text) == bool(rt.differing)
    section = CliRunner().invoke(cli, ["compare", str(tmp_path / "onnxruntime.json"), str(tmp_path / "openvino.json"),
                                       "-o", str(tmp_path / "cmp.json")], catch_exceptions=False)
    assert section.exit_code == 0 and "Where each runtime spends its time" in section.output
    stored = json.loads((tmp_path / "cmp.json").read_text())["comparison"]["runtimes"]
    assert stored["after"]["backend"] == "openvino" and len(stored["layers"]) == len(rt.layers)
    # the CSV names the runtime, device, precision and kernel implementation of each measured layer
    # (a kernel's own precision is the runtime's per node: the plugin may keep a layer at f32 under a bf16 hint)
    rows = {row["layer.id"]: row for row in csv.DictReader(io.StringIO(layers_csv(typed["openvino"])))}
    kernel_precision = rows["n0"]["meas.precision"]
    assert kernel_precision in {precision, "f32"}
    assert (rows["n0"]["meas.backend"], rows["n0"]["meas.device"]) == ("openvino", "CPU")
    assert rows["n0"]["meas.exec_type"].endswith(f"_{kernel_precision}")
    assert rows["n0"]["meas.fused_group"] == f"n0 {first_relu}"
    # the trace's kernel slices too, and the summary's runtime section names the device and precision
    slices = [e for e in trace_document(typed["openvino"])["traceEvents"] if e.get("ph") == "X"]
    conv = next(e["args"] for e in slices if "n0" in e["args"].get("layers", "").split(", "))
    assert conv["fused_group"] == f"n0, {first_relu}" and conv["precision"] == kernel_precision and conv["exec_type"]
    kernel = next(r for r in layer_rows(typed["openvino"]) if r.id == "n0").detail["kernel"]  # the HTML's details
    assert kernel["precision"] == kernel_precision and kernel["device"] == "CPU"
    assert kernel["fused_group"] == ["n0", first_relu]
    runtime = next(s for s in summary_sections(typed["openvino"]) if s.title.startswith("Runtime"))
    assert {(r.label, r.value) for r in runtime.rows} >= {("precision", precision), ("performance hint", "LATENCY")}
