"""Shapes that static inference cannot resolve, control flow, and dynamic input dims (issue #14, items 1-3)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import F32, I64, ModelWriter, zoo
from layerscope.cli.main import main
from layerscope.costs import cost_graph
from layerscope.errors import ShapeError
from layerscope.estimator import estimate_graph
from layerscope.measure.inputs import feeder, make_inputs, random_array
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph, TensorInfo
from layerscope.runfile import load_document
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.targets import load_profile

BOOL = TensorProto.BOOL


def _save(tmp_path: Path, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
          outputs: list[onnx.ValueInfoProto], *, initializers: dict[str, np.ndarray] | None = None,
          name: str = "m.onnx") -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save_model(model, str(path))
    return path


def _profiled(graph: Graph) -> tuple[float, dict[str, str]]:
    """Profile ``graph`` briefly: the mapped share of kernel time and each layer's status."""
    estimate = estimate_graph(graph, load_profile("host"))
    measurement = profile_model(graph, make_inputs(graph), SessionConfig(threads=1), runs=3, warmup=1,
                                weights={e.layer_id: e.latency_us for e in estimate.layers})
    return measurement.mapped_share, {lid: r.status for lid, r in measurement.layers.items()}


def _selected_count() -> int:
    """How many of the seeded random values of input ``x`` [2, 3] exceed 0.5 (what NonZero keeps)."""
    x = random_array(TensorInfo("x", (2, 3), "float32"), 0, 0)
    return int((x > 0.5).sum())


def _data_dependent_reshape(tmp_path: Path) -> Path:
    """NonZero -> Cast -> Transpose -> Shape -> Reshape(target computed at run time) -> MatMul -> Identity."""
    nodes = [
        helper.make_node("Greater", ["x", "half"], ["mask"], name="gt"),
        helper.make_node("NonZero", ["mask"], ["nz"], name="nonzero"),
        helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Transpose", ["nzf"], ["t"], name="transpose"),
        helper.make_node("Shape", ["t"], ["target"], name="shape"),
        helper.make_node("Reshape", ["nzf", "target"], ["r"], name="reshape"),
        helper.make_node("MatMul", ["r", "w"], ["mm"], name="matmul"),
        helper.make_node("Identity", ["mm"], ["y"], name="last_identity"),
    ]
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [2, 3])],
                 [helper.make_tensor_value_info("y", F32, None)],
                 initializers={"half": np.array(0.5, np.float32), "w": np.ones((2, 4), np.float32)})


def test_data_dependent_reshape_is_resolved_by_execution(tmp_path: Path) -> None:
    graph = load_model(_data_dependent_reshape(tmp_path))
    k = _selected_count()
    assert 0 < k < 6  # the seeded values select some, not all: the shape really depends on them
    assert graph.tensors["r"].shape == (k, 2)
    assert graph.tensors["y"].shape == (k, 4)
    sources = {n.id: n.shape_source for n in graph.layers}
    assert sources["gt"] == "static"
    assert sources["nonzero"] == sources["reshape"] == sources["matmul"] == sources["last_identity"] == "executed"
    costs = {c.layer_id: c for c in cost_graph(graph)}
    assert costs["matmul"].macs == k * 2 * 4  # [k,2] x [2,4]
    mapped, status = _profiled(graph)
    assert mapped >= 0.99
    assert set(status) == {n.id for n in graph.layers}


def test_identity_after_a_dynamic_op_is_resolved(tmp_path: Path) -> None:
    """The classifier case: everything static but the last Identity, which follows NonZero."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
             helper.make_node("Identity", ["nz"], ["y"], name="out")]
    path = _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [2, 3])],
                 [helper.make_tensor_value_info("y", I64, None)])
    graph = load_model(path)
    # uniform [0, 1) values are all non-zero: NonZero lists all 6 coordinates of the rank-2 input
    assert graph.tensors["y"].shape == (2, 6)
    assert [n.shape_source for n in graph.layers] == ["static", "executed", "executed"]
    mapped, status = _profiled(graph)
    assert mapped >= 0.99
    assert set(status) == {"relu", "nonzero", "out"}


def _if_model(tmp_path: Path) -> Path:
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t_out"], name="then_add")], "then", [],
                               [helper.make_tensor_value_info("t_out", F32, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e_mul"], name="else_mul"),
                                helper.make_node("Neg", ["e_mul"], ["e_out"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e_out", F32, [2, 3])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="rsum"),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="If_0"),
             helper.make_node("Relu", ["y"], ["out"], name="relu")]
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [2, 3])],
                 [helper.make_tensor_value_info("out", F32, None)], initializers={"zero": np.array(0.0, np.float32)})


def test_if_layers_are_the_branch_taken(tmp_path: Path) -> None:
    graph = load_model(_if_model(tmp_path))
    ids = [n.id for n in graph.layers]
    # seeded inputs are in [0, 1): their sum is > 0, the then branch runs
    assert ids == ["rsum", "gt", "If_0", "If_0/then_branch/then_add", "relu"]
    by_id = {n.id: n for n in graph.layers}
    assert by_id["If_0"].observed == {"source": "executed", "branch_taken": "then_branch"}
    assert by_id["If_0/then_branch/then_add"].parent == "If_0"
    costs = {c.layer_id: c for c in cost_graph(graph)}
    assert costs["If_0/then_branch/then_add"].flops == 6
    assert costs["If_0"].flops == 0  # the branch's layers do the work
    mapped, status = _profiled(graph)
    assert mapped >= 0.99
    assert status["If_0/then_branch/then_add"] == "measured"
    assert set(status) == set(ids)


def _loop_model(tmp_path: Path, trips: int) -> Path:
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="body_add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")], "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", BOOL, []),
         helper.make_tensor_value_info("acc_in", F32, [2, 3])],
        [helper.make_tensor_value_info("cond_out", BOOL, []), helper.make_tensor_value_info("acc_out", F32, [2, 3])])
    nodes = [helper.make_node("Loop", ["trip", "", "x"], ["z"], body=body, name="Loop_0"),
             helper.make_node("Relu", ["z"], ["out"], name="relu")]
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [2, 3])],
                 [helper.make_tensor_value_info("out", F32, None)], initializers={"trip": np.array(trips, np.int64)})


def test_loop_body_costs_every_iteration(tmp_path: Path) -> None:
    graph = load_model(_loop_model(tmp_path, 3))
    by_id = {n.id: n for n in graph.layers}
    assert list(by_id) == ["Loop_0", "Loop_0/body/body_add", "Loop_0/body/body_cond", "relu"]
    assert by_id["Loop_0"].observed == {"source": "executed", "trip_count": 3}
    assert by_id["Loop_0/body/body_add"].executions == 3
    costs = {c.layer_id: c for c in cost_graph(graph)}
    assert costs["Loop_0/body/body_add"].flops == 3 * 6  # 3 iterations of a [2,3] Add
    assert costs["Loop_0/body/body_add"].bytes_written == 3 * 24
    single = {e.layer_id: e for e in estimate_graph(load_model(_loop_model(tmp_path, 1)), load_profile("host")).layers}
    triple = {e.layer_id: e for e in estimate_graph(graph, load_profile("host")).layers}
    once, thrice = single["Loop_0/body/body_add"], triple["Loop_0/body/body_add"]
    # every part of the time three times, compute included (the cost already counts the 3 iterations: not 9 times)
    for part in ("latency_us", "compute_us", "load_us", "store_us", "overhead_us"):
        assert getattr(thrice, part) == pytest.approx(3 * getattr(once, part)), part
    assert once.compute_us > 0
    mapped, status = _profiled(graph)
    assert mapped >= 0.99
    assert set(status) == set(by_id)
    assert status["Loop_0/body/body_add"] == "measured"


def test_scan_rows_are_the_trip_count(tmp_path: Path) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "row"], ["sum_out"], name="scan_add"),
         helper.make_node("Identity", ["sum_out"], ["row_out"], name="scan_copy")], "scan_body",
        [helper.make_tensor_value_info("sum_in", F32, [3]), helper.make_tensor_value_info("row", F32, [3])],
        [helper.make_tensor_value_info("sum_out", F32, [3]), helper.make_tensor_value_info("row_out", F32, [3])])
    nodes = [helper.make_node("Scan", ["init", "x"], ["total", "rows"], body=body, num_scan_inputs=1,
                              name="Scan_0")]
    path = _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [4, 3])],
                 [helper.make_tensor_value_info("total", F32, None), helper.make_tensor_value_info("rows", F32, None)],
                 initializers={"init": np.zeros(3, np.float32)})
    graph = load_model(path)
    by_id = {n.id: n for n in graph.layers}
    assert list(by_id) == ["Scan_0", "Scan_0/body/scan_add", "Scan_0/body/scan_copy"]
    assert by_id["Scan_0"].observed["trip_count"] == 4  # one iteration per row of x [4, 3]
    assert graph.tensors["rows"].shape == (4, 3)
    assert {c.layer_id: c.flops for c in cost_graph(graph)}["Scan_0/body/scan_add"] == 4 * 3
    mapped, status = _profiled(graph)
    assert mapped >= 0.99
    assert set(status) == set(by_id)


def test_control_flow_estimate_cli_records_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    html = tmp_path / "report.html"
    assert main(["estimate", str(_if_model(tmp_path)), "-o", str(out), "--top", "0", "--html", str(html)]) == 0
    run = load_document(out)
    page = html.read_text(encoding="utf-8")
    packed = re.search(r'id="report-data" data-encoding="gzip\+base64">([^<]*)<', page)
    assert packed, "no data island"
    data = json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    layer_detail = dict(dict(data["details"])["layer"])
    assert "observed branch_taken" in layer_detail  # a key of the layer's detail view
    assert "4 static, 1 executed" in page  # the model section
    layer = {entry["id"]: entry for entry in run["layers"]}
    assert layer["If_0"]["observed"]["branch_taken"] == "then_branch"
    assert layer["If_0/then_branch/then_add"]["parent"] == "If_0"
    assert layer["If_0/then_branch/then_add"]["shape_source"] == "executed"
    assert run["model"]["shape_sources"] == {"static": 4, "executed": 1}  # the branches declare static outputs
    assert "1 resolved by execution" in capsys.readouterr().err


@pytest.mark.parametrize("dim", ["N", "batch", "batch_size", "unk__42", "?", ""])
def test_batch_like_dims_default_to_one(dim: str, write_model: ModelWriter) -> None:
    node = helper.make_node("Relu", ["x"], ["y"])
    path = write_model([node], [("x", F32, [dim, 2048])], [("y", F32, None)])
    graph = load_model(path)
    assert graph.inputs[0].shape == (1, 2048)
    assert len(graph.assumptions) == 1
    assert "x axis 0" in graph.assumptions[0]
    assert "assumed 1" in graph.assumptions[0]
    assert all(n.shape_source == "static" for n in graph.layers)


def test_named_dims_are_set_once_for_the_whole_model(write_model: ModelWriter, tmp_path: Path) -> None:
    node = helper.make_node("Add", ["ids", "mask"], ["y"])
    path = write_model([node], [("ids", F32, ["batch", "sequence"]), ("mask", F32, ["batch", "sequence"])],
                       [("y", F32, None)])
    with pytest.raises(ShapeError, match=r"--dim sequence=128.*--shape ids=1x128"):
        load_model(path)
    graph = load_model(path, dims={"sequence": 512})
    assert [t.shape for t in graph.inputs] == [(1, 512), (1, 512)]
    graph = load_model(path, dims={"sequence": 16, "batch": 2})
    assert [t.shape for t in graph.inputs] == [(2, 16), (2, 16)]
    assert graph.assumptions == ()
    with pytest.raises(ShapeError, match=r"unknown dim\(s\) seq; the model's named input dims: batch, sequence"):
        load_model(path, dims={"seq": 4})
    out = tmp_path / "run.json"
    assert main(["estimate", str(path), "--dim", "sequence=8", "-o", str(out), "--top", "0"]) == 0
    assert load_document(out)["model"]["inputs"][0]["shape"] == [1, 8]
    # one line per dim, wherever it appears
    assert load_document(out)["model"]["assumptions"] == [
        "dim 'batch' (ids axis 0, mask axis 0) assumed 1; set it with --dim batch=N"]
    assert main(["estimate", str(path), "--dim", "sequence=0"]) == 2


def test_the_hint_matches_rank_and_dtype(write_model: ModelWriter) -> None:
    node = helper.make_node("Relu", ["feats"], ["y"])
    path = write_model([node], [("feats", F32, ["frames", 2048])], [("y", F32, None)])
    with pytest.raises(ShapeError) as err:
        load_model(path)
    assert "--shape feats=128x2048" in str(err.value)
    assert "--dim frames=128" in str(err.value)
    assert "640x640" not in str(err.value)


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v1"])
def test_zoo_models_stay_static(name: str) -> None:
    graph = load_model(zoo(name))
    assert graph.shape_source_counts() == {"static": len(graph.layers)}
    assert graph.assumptions == ()
    assert not any(n.parent for n in graph.layers)


def test_an_images_unnamed_height_and_width_are_not_assumed(write_model: ModelWriter) -> None:
    node = helper.make_node("Relu", ["x"], ["y"])
    path = write_model([node], [("x", F32, ["p2o.DynamicDimension.0", 3, "", "p2o.DynamicDimension.1"])],
                       [("y", F32, None)])
    with pytest.raises(ShapeError) as err:
        load_model(path)
    # axis 0's generated name is a batch (1); height (unnamed) and width (named) are asked for
    assert "--shape x=1x3x640x640" in str(err.value)
    assert "--dim p2o.DynamicDimension.1=640" in str(err.value)
    assert load_model(path, {"x": (1, 3, 48, 320)}).inputs[0].shape == (1, 3, 48, 320)


def test_bisect_cuts_the_top_level_with_subgraph_time_rolled_up(tmp_path: Path) -> None:
    from layerscope.model.control_flow import rolled_up, top_level

    graph = load_model(_loop_model(tmp_path, 3))
    top = top_level(graph)
    assert [n.id for n in top.layers] == ["Loop_0", "relu"]
    per_layer = {"Loop_0": 0.0, "Loop_0/body/body_add": 3.0, "Loop_0/body/body_cond": 0.5, "relu": 1.0}
    assert rolled_up(graph, per_layer, top) == [3.5, 1.0]
    out = tmp_path / "bisect.json"
    assert main(["bisect", str(_loop_model(tmp_path, 3)), "--segments", "2", "--repeats", "3", "--no-cache",
                 "--threads", "1", "-o", str(out)]) == 0
    assert out.exists()


def test_a_contrib_op_is_resolved_by_symbolic_inference(tmp_path: Path) -> None:
    """ONNX has no schema for com.microsoft ops: static inference stops there, ONNX Runtime's symbolic one does not."""
    pytest.importorskip("sympy")
    nodes = [helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft", name="gelu"),
             helper.make_node("MatMul", ["g", "w"], ["y"], name="matmul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [2, 5])],
                              [helper.make_tensor_value_info("y", F32, None)],
                              initializer=[numpy_helper.from_array(np.ones((5, 3), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    path = tmp_path / "contrib.onnx"
    onnx.save_model(model, str(path))
    loaded = load_model(path)
    assert [(n.id, n.shape_source) for n in loaded.layers] == [("gelu", "symbolic"), ("matmul", "symbolic")]
    assert loaded.tensors["y"].shape == (2, 3)
    assert {c.layer_id: c.macs for c in cost_graph(loaded)}["matmul"] == 2 * 5 * 3


def _rate_switch(tmp_path: Path) -> Path:
    """silero-vad's pattern: an If on the value of an int64 scalar input (the sample rate)."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t_out"], name="r16k")], "then", [],
                               [helper.make_tensor_value_info("t_out", F32, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="r8k")], "else", [],
                               [helper.make_tensor_value_info("e_out", F32, [1, 4])])
    nodes = [helper.make_node("Equal", ["sr", "k16"], ["is16"], name="eq"),
             helper.make_node("If", ["is16"], ["y"], then_branch=then_g, else_branch=else_g, name="rate")]
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [1, 4]),
                                   helper.make_tensor_value_info("sr", I64, [])],
                 [helper.make_tensor_value_info("y", F32, None)], initializers={"k16": np.array(16000, np.int64)})


def test_the_users_input_files_decide_the_branch_observed(tmp_path: Path) -> None:
    path = _rate_switch(tmp_path)
    # the seeded sample rate is the value the model compares it with (16000): the then branch runs
    assert [n.id for n in load_model(path).layers] == ["eq", "rate", "rate/then_branch/r16k"]
    np.save(tmp_path / "sr.npy", np.array(8000, np.int64))
    graph = load_model(path, feeds=feeder([f"sr={tmp_path / 'sr.npy'}"]))
    assert [n.id for n in graph.layers] == ["eq", "rate", "rate/else_branch/r8k"]
    out = tmp_path / "run.json"
    assert main(["estimate", str(path), "--input", f"sr={tmp_path / 'sr.npy'}", "-o", str(out), "--top", "0"]) == 0
    assert [entry["id"] for entry in load_document(out)["layers"]][-1] == "rate/else_branch/r8k"


def test_a_loop_kernel_keeps_only_its_own_time(tmp_path: Path) -> None:
    """ONNX Runtime times a Loop kernel with its body's kernels inside: those are subtracted, once each."""
    from layerscope.measure.subgraphs import exclusive_events

    model = onnx.load(str(_loop_model(tmp_path, 2)))

    def event(name: str, ts: float, dur: float) -> dict[str, object]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "args": {}}

    events = [event("body_add", 10, 20), event("body_cond", 32, 3), event("body_add", 40, 30),
              event("body_cond", 71, 4), event("Loop_0", 5, 100), event("relu", 110, 7),
              event("body_add", 300, 90), event("Loop_0", 290, 80)]
    out = {(e["name"], e["ts"]): e["dur"] for e in exclusive_events(events, model)}
    assert out[("Loop_0_kernel_time", 5)] == 100 - (20 + 3 + 30 + 4)
    assert out[("Loop_0_kernel_time", 290)] == 0  # clamped: the body's event outlasts the Loop's
    assert out[("relu_kernel_time", 110)] == 7
    assert out[("body_add_kernel_time", 40)] == 30


def test_a_sequence_tensor_leaves_its_layers_cost_unknown_not_refused(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("SequenceConstruct", ["r", "r"], ["seq"], name="pack"),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, name="unpack")]
    path = _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [2, 3])],
                 [helper.make_tensor_value_info("y", F32, None)])
    graph = load_model(path)
    assert [(n.id, n.shape_source) for n in graph.layers] == [
        ("relu", "static"), ("pack", "unknown"), ("unpack", "unknown")]
    assert graph.tensor("seq") is None
    estimate = estimate_graph(graph, load_profile("host"))
    assert [e.layer_id for e in estimate.layers] == ["relu", "pack", "unpack"]
    mapped, status = _profiled(graph)
    assert mapped >= 0.99
    assert set(status) == {"relu", "pack", "unpack"}


def test_a_constant_gather_whose_shape_needs_folded_values_is_folded(tmp_path: Path) -> None:
    """minilm-l6-int8w's position embeddings: Gather(large table, Slice of position ids by Constant nodes).

    ONNX's first inference cannot size the Slice (its bounds are Constant nodes), so the Gather's shape is
    unknown when it is folded; after the folded values are fed back it is known, and the Gather is folded.
    """
    def const(name: str, value: list[int]) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.int64)))

    nodes = [const("start", [0]), const("end", [128]), const("axis", [1]),
             helper.make_node("Slice", ["positions", "start", "end", "axis"], ["ids"], name="slice"),
             helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0, name="gather"),
             helper.make_node("Add", ["x", "emb"], ["y"], name="add")]
    path = _save(tmp_path, nodes, [helper.make_tensor_value_info("x", F32, [1, 128, 1])],
                 [helper.make_tensor_value_info("y", F32, None)],
                 initializers={"positions": np.arange(512, dtype=np.int64).reshape(1, 512),
                               "table": np.ones((70000, 1), np.float32)})
    graph = load_model(path)
    assert [n.id for n in graph.layers] == ["add"]
    assert graph.constants["emb"].shape == (1, 128, 1)
    assert graph.layers[0].shape_source == "static"


def test_loading_writes_nothing_into_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime's symbolic inference saves sym_shape_infer_temp.onnx where it runs when it cannot finish."""
    path = _data_dependent_reshape(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert load_model(path).tensors["y"].shape[1] == 4
    assert list(cwd.iterdir()) == []
