"""Timeline and memory plan: hand-computed schedules on three-layer graphs, and properties on real networks."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from conftest import F32, ZOO_MODELS, ModelWriter, zoo
from layerscope.cli.main import main
from layerscope.estimator import Timeline, core_share, deployed_bytes, estimate_graph, simulate_timeline
from layerscope.estimator.memory import Buffer, BufferKind, peak_bytes
from layerscope.estimator.timeline import LOAD, STORE, default_cores
from layerscope.model import Graph, load_model
from layerscope.run import timeline_section
from layerscope.runfile import load_document
from layerscope.samples import sample_path
from layerscope.targets import load_profile
from layerscope.targets.profile import ComputeUnit, FallbackRule, Profile
from test_estimate import ALL_KINDS, three_layers, toy_profile

SAMPLES = ("yolov5s", "yolov8s", "crnn", "dbnet")


def two_unit_profile() -> Profile:
    """The toy profile with a slow tensor unit T (10 Gops/s) beside a vector unit V for everything else."""
    tensor = ComputeUnit("T", (ALL_KINDS[0],), {"fp32": 1e10}, efficiency=1.0, overhead_us=0.0)
    other = ComputeUnit("V", ALL_KINDS[1:], {"fp32": 1e12}, efficiency=1.0, overhead_us=0.0)
    return dataclasses.replace(toy_profile(), units=(tensor, other))


def branch(write_model: ModelWriter) -> Graph:
    """x (1x8x16x16) -> Conv(8->8, 3x3, pad 1) and x -> Relu, both -> Add: all fp32."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Add", ["c", "r"], ["y"], name="add"),
    ]
    w = np.zeros((8, 8, 3, 3), np.float32)
    return load_model(write_model(nodes, [("x", F32, [1, 8, 16, 16])], [("y", F32, None)], {"w": w}))


def windows(timeline: Timeline, name: str) -> tuple[float, ...]:
    """Start and end of the active window, the load and the store of layer ``name`` (it has both bursts)."""
    span = next(s for s in timeline.layers if s.layer_id == name)
    assert span.load is not None and span.store is not None
    return tuple(t for i in (span.active, span.load, span.store) for t in (i.start_us, i.end_us))


def approx(*pairs: tuple[float, float]) -> object:
    return pytest.approx(tuple(t for pair in pairs for t in pair))


# --- hand-computed schedules -------------------------------------------------------------------------


def test_chain_through_ddr_takes_the_roofline_sum(write_model: ModelWriter) -> None:
    # Costs as in test_estimate: conv loads 12,800 B (12.8 us), stores 16,384 B (16.384 us), computes
    # 0.589824 us; relu loads and stores 16,384 B; pool loads 16,384 B and stores 4,096 B.
    tl = simulate_timeline(three_layers(write_model), toy_profile(), intervals=4)
    assert windows(tl, "conv") == approx((0.0, 29.184), (0.0, 12.8), (12.8, 29.184))
    assert windows(tl, "relu") == approx((29.184, 61.952), (29.184, 45.568), (45.568, 61.952))
    assert windows(tl, "pool") == approx((61.952, 82.432), (61.952, 78.336), (78.336, 82.432))
    assert tl.latency_us == pytest.approx(82.432) == pytest.approx(tl.serial_latency_us)
    assert tl.ddr_busy_us == pytest.approx(82.432)  # the channel never rests: DDR bound
    assert tl.bound == "DDR"
    assert tl.fps_per_core == pytest.approx(1e6 / 82.432) and tl.fps_total == tl.fps_per_core
    # conv's compute (0.589824 us) stretches over its load: the unit is held until 12.8 us.
    assert (tl.layers[0].compute.start_us, tl.layers[0].compute.end_us) == pytest.approx((0.0, 12.8))
    unit = next(t for t in tl.tracks if t.name == "U")
    assert [b.layer_id for b in unit.busy] == ["conv", "relu", "pool"]
    assert [b.start_us for b in unit.busy] == pytest.approx([0.0, 29.184, 61.952])


def test_chain_bins_by_hand(write_model: ModelWriter) -> None:
    tl = simulate_timeline(three_layers(write_model), toy_profile(), intervals=4)
    bins = tl.bins
    assert bins.interval_us == pytest.approx(82.432 / 4)
    # interval 0 = [0, 20.608]: conv's whole load (12,800 B) and 7.808 us of its store at 1,000 B/us
    assert bins.load_mb_per_s[0] == pytest.approx(12_800 / 20.608)
    assert bins.store_mb_per_s[0] == pytest.approx(7_808 / 20.608)
    assert bins.ddr_utilization == pytest.approx((1.0, 1.0, 1.0, 1.0))
    assert bins.utilization["U"][0] == pytest.approx(0.589824 / 20.608)
    total_loaded = sum(s.bytes_loaded for s in tl.layers)
    assert sum(bins.load_mb_per_s) * bins.interval_us == pytest.approx(total_loaded)


def test_chain_memory_plan_by_hand(write_model: ModelWriter) -> None:
    memory = simulate_timeline(three_layers(write_model), toy_profile()).memory
    assert memory.static_bytes == 16 * 8 * 9 * 4  # w, fp32
    assert memory.input_bytes == 8_192 and memory.output_bytes == 4_096  # x; y
    # c lives [0, 61.952] (conv starts .. relu ends), r lives [29.184, 82.432]: both in DDR at once
    assert memory.exclusive_intermediate_bytes == 2 * 16_384
    assert memory.shared_temporary_bytes == 0 and memory.on_chip_peak_bytes == 0
    assert memory.peak_live_bytes == 2 * 16_384  # x is freed when conv ends, as r is allocated
    assert memory.minimum_requirement_bytes == 4_608 + 8_192 + 4_096 + 32_768


def test_chain_on_chip_skips_ddr(write_model: ModelWriter) -> None:
    tl = simulate_timeline(three_layers(write_model), toy_profile(sram_bytes=1 << 20))
    conv, relu, pool = tl.layers
    assert conv.store is None and relu.load is None and relu.store is None and pool.load is None
    assert conv.active.end_us == pytest.approx(12.8)  # load-bound: 12,800 B at 1 GB/s
    assert relu.active.start_us == conv.active.end_us and relu.active.end_us == pytest.approx(12.8 + 0.004096)
    assert tl.memory.on_chip_peak_bytes == 2 * 16_384 and tl.memory.exclusive_intermediate_bytes == 0
    assert tl.latency_us == pytest.approx(tl.serial_latency_us)


def test_branches_overlap_on_two_units(write_model: ModelWriter) -> None:
    # conv (T): 147,456 MACs -> 294,912 ops at 1e10/s = 29.4912 us; loads x + w = 8,192 + 2,304 B, stores c.
    # relu (V): 2,048 ops = 0.002048 us; loads x, stores r (8,192 B each). add (V): loads c + r, stores y.
    # DDR order from the reference (compute-only) schedule: load conv, load relu, store relu, store conv,
    # load add, store add.
    tl = simulate_timeline(branch(write_model), two_unit_profile())
    assert windows(tl, "relu") == approx((0.0, 26.88), (10.496, 18.688), (18.688, 26.88))
    # conv computes until 29.4912; its store waits for relu's, so it ends at 26.88 + 8.192
    assert tl.layers[0].compute.end_us == pytest.approx(29.4912)
    assert windows(tl, "conv") == approx((0.0, 35.072), (0.0, 10.496), (26.88, 35.072))
    assert windows(tl, "add") == approx((35.072, 59.648), (35.072, 51.456), (51.456, 59.648))
    assert tl.latency_us == pytest.approx(59.648)
    assert tl.serial_latency_us == pytest.approx(29.4912 + 16.384 + 24.576)  # overlap hides 10.8 us
    assert tl.ddr_busy_us == pytest.approx(59.648) and tl.bound == "DDR"
    memory = tl.memory
    assert memory.input_bytes == 8_192 and memory.output_bytes == 8_192
    assert memory.exclusive_intermediate_bytes == 16_384  # c and r, until add ends
    assert memory.peak_live_bytes == 24_576


def test_cpu_fallback_runs_on_the_cpu_track_with_conversion_buffers(write_model: ModelWriter) -> None:
    rule = FallbackRule("Relu", None, "no Relu here")
    graph = three_layers(write_model)
    tl = simulate_timeline(graph, toy_profile(rules=(rule,)), dtype="int8")
    relu = tl.layers[1]
    assert relu.unit == "CPU" and relu.overhead_us == 15.0  # CPU dispatch 5 us + hand-off 10 us
    cpu = next(t for t in tl.tracks if t.name == "CPU")
    assert [b.layer_id for b in cpu.busy] == ["relu"]
    # relu reads c (int8, 4,096 B) as fp32 (16,384 B); pool reads relu's fp32 r as int8 (4,096 B)
    assert tl.memory.shared_temporary_bytes == 16_384


def test_views_share_their_input_buffer(write_model: ModelWriter) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        helper.make_node("Flatten", ["a"], ["f"], name="view", axis=1),
        helper.make_node("Relu", ["f"], ["y"], name="b"),
    ]
    graph = load_model(write_model(nodes, [("x", F32, [1, 4, 8])], [("y", F32, None)]))
    tl = simulate_timeline(graph, toy_profile())
    view = tl.layers[1]
    assert view.unit == "-" and view.active.duration_us == 0.0 and view.active.start_us == tl.layers[0].active.end_us
    assert tl.memory.exclusive_intermediate_bytes == 128  # a and f are one buffer of 32 floats
    assert tl.layers[2].active.start_us == tl.layers[0].active.end_us


def test_peak_frees_before_allocating_at_the_same_instant() -> None:
    a = Buffer("a", BufferKind.DDR, 10, 0.0, 5.0)
    b = Buffer("b", BufferKind.DDR, 20, 5.0, 9.0)
    empty = Buffer("e", BufferKind.TEMPORARY, 7, 5.0, 5.0)
    assert peak_bytes([a, b])[None] == 20
    assert peak_bytes([a, b, empty])[None] == 27


def test_batch_split_over_two_cores(write_model: ModelWriter) -> None:
    two = dataclasses.replace(toy_profile(), cores=2)
    share = core_share(two, 2)
    assert share.units[0].peak_ops_per_s["fp32"] == 0.5e12 and share.ddr_bandwidth_bytes_per_s == 0.5e9
    assert share.cpu.peak_ops_per_s["fp32"] == 0.5e10 and share.cores == 1
    tl = simulate_timeline(three_layers(write_model), two)
    assert tl.cores == 2 and tl.split == "batch" and tl.cross_core_bytes == 0
    assert tl.latency_us == pytest.approx(2 * 82.432)  # each core: half the DDR bandwidth, all DDR-bound
    assert tl.fps_per_core is not None and tl.fps_total == pytest.approx(2 * tl.fps_per_core)
    assert {t.core for t in tl.tracks} == {0, 1}
    assert tl.bins.load_mb_per_s[0] == pytest.approx(2 * 500.0)  # both cores load at 0.5 GB/s each
    assert tl.memory.frames_in_flight == 2


def test_cores_default_to_one_off_npus() -> None:
    assert default_cores(load_profile("a100-sxm")) == 1
    assert default_cores(load_profile("rdk-x3")) == 2


def test_bad_arguments(write_model: ModelWriter) -> None:
    graph = three_layers(write_model)
    with pytest.raises(ValueError, match="intervals"):
        simulate_timeline(graph, toy_profile(), intervals=0)
    with pytest.raises(ValueError, match="cores"):
        simulate_timeline(graph, toy_profile(), cores=0)


# --- properties on real networks ---------------------------------------------------------------------


def check_properties(graph: Graph, profile: Profile) -> Timeline:
    """Everything the model promises, on one network and profile; returns the base timeline."""
    tl = simulate_timeline(graph, profile)
    latency = tl.latency_us
    slack = 1e-9 * latency
    assert latency > 0
    # latency >= the busiest unit's compute (and overheads), and >= the DDR time of every byte
    for track in tl.unit_tracks():
        work = sum(s.compute_us + s.overhead_us for s in tl.layers if s.unit == track.name)
        assert track.busy_us >= work - slack
        assert latency >= work - slack
    share = core_share(profile, tl.cores)
    # weights may load at their own rate (``weight_ddr_efficiency``): no byte moves faster than the fastest rate
    fastest = max(share.attainable_ddr_bytes_per_s, share.attainable_weight_ddr_bytes_per_s,
                  share.cpu_ddr_bandwidth_bytes_per_s)
    assert latency >= tl.ddr_bytes / fastest * 1e6 - slack
    assert latency >= sum(s.load_us + s.store_us for s in tl.layers) - slack
    # spans are ordered, tracks never overlap, the bins keep every byte
    for s in tl.layers:
        assert s.active.start_us <= s.compute.start_us <= s.compute.end_us <= s.active.end_us
    for track in tl.tracks:
        for before, after in itertools.pairwise(track.busy):
            assert after.start_us >= before.end_us - slack
    loaded = sum(s.bytes_loaded for s in tl.layers) * tl.cores
    assert sum(tl.bins.load_mb_per_s) * tl.bins.interval_us == pytest.approx(loaded, rel=1e-9)
    assert all(0.0 <= u <= 1.0 + 1e-9 for values in tl.bins.utilization.values() for u in values)
    # more bandwidth or more SRAM never slower
    faster = dataclasses.replace(profile, ddr_bandwidth_bytes_per_s=2 * profile.ddr_bandwidth_bytes_per_s)
    bigger = dataclasses.replace(profile, sram_bytes=4 * profile.sram_bytes)
    assert simulate_timeline(graph, faster).latency_us <= latency
    assert simulate_timeline(graph, bigger).latency_us <= latency
    # peak memory >= the largest layer's activations in plus out (weights are static memory; an activation fused
    # into its readers is never written, so no buffer holds it)
    est = tl.estimate
    for node, layer in zip(graph.layers, est.layers, strict=True):
        if layer.unit == "-":
            continue
        names = dict.fromkeys(n for n in (*node.inputs, *node.outputs)
                              if n and not graph.is_constant(n) and n not in est.fused)
        live = sum(deployed_bytes(info, layer.dtype) for n in names if (info := graph.tensor(n)))
        assert tl.memory.peak_live_bytes >= live, node.id
    assert tl.memory.minimum_requirement_bytes >= tl.memory.static_bytes + tl.memory.input_bytes
    return tl


@pytest.mark.parametrize("path", ZOO_MODELS, ids=lambda p: p.stem)
def test_properties_on_the_zoo(path: Path) -> None:
    check_properties(load_model(path), load_profile("rdk-s100"))


@pytest.mark.parametrize("name", SAMPLES)
def test_properties_on_detection_and_ocr_samples(name: str) -> None:
    tl = check_properties(load_model(sample_path(name)), load_profile("rdk-s100"))
    assert tl.conv_macs > 0


@pytest.mark.parametrize("name", ["yolov5s", "crnn"])
def test_properties_on_two_cores_with_cpu_fallback(name: str) -> None:
    tl = check_properties(load_model(sample_path(name)), load_profile("rdk-x3"))
    assert tl.cores == 2 and any(s.unit == "A53-x4" for s in tl.layers)


def test_same_inputs_give_the_same_section() -> None:
    graph = load_model(zoo("squeezenet"))
    profile = load_profile("rdk-x3")
    first, second = (json.dumps(timeline_section(simulate_timeline(graph, profile)), sort_keys=True) for _ in "ab")
    assert first == second


def test_serial_latency_is_the_roofline(write_model: ModelWriter) -> None:
    graph = branch(write_model)
    assert simulate_timeline(graph, two_unit_profile()).serial_latency_us == estimate_graph(
        graph, two_unit_profile()).latency_us


# --- the CLI -----------------------------------------------------------------------------------------


def test_cli_timeline_adds_a_section_and_keeps_the_rest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain, with_timeline, again = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    model = str(zoo("squeezenet"))
    assert main(["estimate", model, "-t", "rdk-s100", "--top", "0", "-o", str(plain)]) == 0
    capsys.readouterr()
    for out in (with_timeline, again):
        assert main(["estimate", model, "-t", "rdk-s100", "--top", "0", "--timeline", "-o", str(out)]) == 0
    assert with_timeline.read_bytes() == again.read_bytes()
    run = load_document(with_timeline)
    section = run.pop("timeline")
    assert run == load_document(plain)
    assert section.keys() >= {"summary", "memory", "layers", "units", "temporal"}
    assert section["summary"].keys() >= {"latency_us", "fps_per_core", "fps_total", "conv_macs", "ddr_mb_per_run"}
    assert section["memory"].keys() >= {"static_bytes", "input_bytes", "output_bytes", "shared_temporary_bytes",
                                        "exclusive_intermediate_bytes", "minimum_requirement_bytes"}
    assert len(section["layers"]) == len(run["layers"])
    layer_keys = {"active_start_us", "active_end_us", "compute_us", "load_us", "store_us", "core"}
    assert layer_keys <= section["layers"][0].keys()
    assert {t["name"] for t in section["units"]} >= {"TAE", "VAE", LOAD, STORE}
    assert len(section["temporal"]["ddr_load_mb_per_s"]) == 100
    assert set(section["temporal"]["utilization"]) >= {"TAE", "VAE"}
    printed = capsys.readouterr().out
    for text in ("per core", "exclusive intermediate", "minimum requirement", "shared temporary", "LOAD"):
        assert text in printed
