"""Seeded inputs that respect what the model does with them, runtime failures on them, random ops, OpenVINO's
precision in failure messages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from conftest import F32, I64, ModelWriter
from layerscope.cli.main import main
from layerscope.errors import RuntimeFailure, condensed
from layerscope.measure.cuts import CutPlanner
from layerscope.measure.inputs import make_inputs, resolve_inputs
from layerscope.model import load_model
from layerscope.model.random_inputs import RANDOM_OPS, random_op_seed
from layerscope.model.types import Graph, TensorInfo
from layerscope.runtimes.openvino.compile import compile_failure, infer_failure

I32 = TensorProto.INT32


def _embedding(write_model: ModelWriter) -> Path:
    """int64 token ids -> Cast to int32 -> Gather from a 4-row table (a tiny vocabulary)."""
    nodes = [helper.make_node("Cast", ["ids"], ["ids32"], to=I32, name="cast"),
             helper.make_node("Gather", ["table", "ids32"], ["emb"], name="gather")]
    table = np.arange(32, dtype=np.float32).reshape(4, 8)
    return write_model(nodes, [("ids", I64, [1, 64])], [("emb", F32, [1, 64, 8])], {"table": table})


def test_indices_through_a_cast_are_drawn_inside_the_table(write_model: ModelWriter,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _embedding(write_model)
    resolved = resolve_inputs(load_model(path))
    ids = resolved.arrays["ids"]
    assert ids.dtype == np.int64 and set(ids.reshape(-1).tolist()) == {0, 1, 2, 3}  # every row, none past it
    assert "integers in [0, 4) (indices into axis 0 of 'table', 4 long, by Gather 'gather')" in resolved.sources["ids"]
    assert main(["profile", str(path), "--runs", "2", "--warmup", "1", "--top", "0"]) == 0
    assert "internal error" not in capsys.readouterr().err


def test_shape_like_and_named_inputs_get_values_valid_for_the_model(write_model: ModelWriter) -> None:
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape"),
             helper.make_node("Slice", ["x", "starts", "ends"], ["z"], name="slice"),
             helper.make_node("TopK", ["x", "k"], ["vals", "idx"], name="topk", axis=-1)]
    path = write_model(nodes, [("x", F32, [2, 6]), ("shape", I64, [2]), ("starts", I64, [2]), ("ends", I64, [2]),
                               ("k", I64, [1]), ("sr", I64, []), ("x_lengths", I64, [1])],
                       [("y", F32, None), ("z", F32, None), ("vals", F32, None), ("idx", I64, None)])
    feeds = make_inputs(load_model(path))
    assert feeds["shape"].tolist() == [2, 6]  # the data's own shape: the reshape is valid whatever x holds
    assert feeds["starts"].tolist() == [0, 0] and feeds["ends"].tolist() == [2, 6]
    assert 1 <= int(feeds["k"][0]) <= 6
    assert int(feeds["sr"]) == 16000  # a sample rate, by its name
    assert feeds["x_lengths"].tolist() == [6]  # a length: the longest non-batch dim of the other inputs
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    y, z, vals, _ = session.run(None, feeds)
    assert y.shape == z.shape == (2, 6) and vals.shape == (2, int(feeds["k"][0]))


def test_ids_compared_with_a_padding_id_are_not_all_padding(write_model: ModelWriter) -> None:
    nodes = [helper.make_node("Equal", ["ids", "pad"], ["is_pad"], name="pad_mask"),
             helper.make_node("Gather", ["table", "ids"], ["emb"], name="gather")]
    path = write_model(nodes, [("ids", I64, [1, 32])], [("is_pad", TensorProto.BOOL, None), ("emb", F32, None)],
                       {"pad": np.array(0, np.int64), "table": np.zeros((50, 4), np.float32)})
    ids = make_inputs(load_model(path))["ids"]
    assert ids.min() >= 0 and ids.max() < 50 and len(set(ids.reshape(-1).tolist())) > 1


def _bad_index(write_model: ModelWriter) -> Path:
    """Indices computed by an Add (no rule follows it): seeded [0, 100) + 1 is out of a 4-row table."""
    nodes = [helper.make_node("Add", ["ids", "one"], ["ids1"], name="add"),
             helper.make_node("Gather", ["table", "ids1"], ["emb"], name="gather")]
    return write_model(nodes, [("ids", I64, [1, 6])], [("emb", F32, [1, 6, 8])],
                       {"table": np.zeros((4, 8), np.float32), "one": np.array(1, np.int64)})


@pytest.mark.parametrize("command", [["profile", "--runs", "2", "--warmup", "1"], ["bench", "--runs", "3"],
                                     ["bisect", "--repeats", "2", "--no-cache"]])
def test_a_runtime_failure_on_seeded_inputs_is_exit_2_naming_them(write_model: ModelWriter, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  command: list[str]) -> None:
    path = _bad_index(write_model)
    assert main([command[0], str(path), *command[1:]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "internal error" not in err
    assert "on seeded random input(s) ids (integers in [0, 100))" in err
    assert "idx=" in err and "give real ones with --input ids=FILE.npy" in err
    np.save(tmp_path / "ids.npy", np.zeros((1, 6), np.int64))  # real values: the same command runs
    assert main([command[0], str(path), *command[1:], "--input", f"ids={tmp_path / 'ids.npy'}"]) == 0


def test_a_shape_the_loader_must_observe_fails_naming_the_input(write_model: ModelWriter,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [helper.make_node("Add", ["shape", "one"], ["shape1"], name="add"),
             helper.make_node("Reshape", ["x", "shape1"], ["y"], name="reshape")]
    path = write_model(nodes, [("x", F32, [2, 6]), ("shape", I64, [2])], [("y", F32, None)],
                       {"one": np.array([1, 1], np.int64)})
    assert main(["estimate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "to observe its shapes" in err and "shape (integers in [0, 100))" in err
    assert "--input shape=FILE.npy" in err and "cannot be reshaped" in err
    with pytest.raises(RuntimeFailure) as failure:
        load_model(path)
    assert failure.value.exit_code == 2 and "shape" in failure.value.inputs


def _random_lengths(write_model: ModelWriter) -> Path:
    """A TTS-like model: noise decides a length (Range), which decides a MatMul's rows."""
    nodes = [helper.make_node("RandomNormalLike", ["x"], ["noise"], name="noise"),
             helper.make_node("Add", ["x", "noise"], ["xn"], name="add"),
             helper.make_node("ReduceSum", ["xn"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Abs", ["s"], ["a"], name="abs"),
             helper.make_node("Mul", ["a", "scale"], ["m"], name="mul"),
             helper.make_node("Cast", ["m"], ["n"], to=I64, name="cast"),
             helper.make_node("Range", ["zero", "n", "step"], ["r"], name="range"),
             helper.make_node("Cast", ["r"], ["rf"], to=F32, name="castf"),
             helper.make_node("Unsqueeze", ["rf", "axis"], ["rows"], name="unsqueeze"),
             helper.make_node("Transpose", ["rows"], ["col"], name="transpose"),
             helper.make_node("MatMul", ["col", "w"], ["out"], name="matmul")]
    return write_model(nodes, [("x", F32, [1, 16])], [("out", F32, None)],
                       {"scale": np.array(100.0, np.float32), "zero": np.array(0, np.int64),
                        "step": np.array(1, np.int64), "axis": np.array([0], np.int64),
                        "w": np.ones((1, 64), np.float32)})


def test_estimates_of_a_model_drawing_random_values_repeat_and_say_so(write_model: ModelWriter, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _random_lengths(write_model)
    macs = []
    for k in range(2):
        out = tmp_path / f"run{k}.json"
        assert main(["estimate", str(path), "-o", str(out), "--top", "0"]) == 0
        layers = json.loads(out.read_text())["layers"]
        macs.append([(layer["id"], layer["macs"], layer["output_shapes"]) for layer in layers])
        err = capsys.readouterr().err
        assert "the model draws random values (RandomNormalLike 'noise')" in err
        assert "seed fixed" in err
    assert macs[0] == macs[1]
    assert {layer: count for layer, count, _ in macs[0]}["matmul"] > 0
    graph = load_model(path)
    assert any("draws random values" in line for line in graph.assumptions)
    # the model itself is not changed: its random op still has no seed
    assert not any(attr.name == "seed" for node in CutPlanner.for_model(graph).model.graph.node
                   for attr in node.attribute)


def test_cut_models_fix_each_random_ops_seed(write_model: ModelWriter) -> None:
    graph = load_model(_random_lengths(write_model))
    planner = CutPlanner.for_model(graph)
    seeds = set()
    for k in range(1, planner.layer_count + 1):
        for part in (planner.prefix_model(k), *([planner.suffix_model(k)] if k < planner.layer_count else [])):
            for node in part.graph.node:
                if node.op_type in RANDOM_OPS:
                    seeds.update(attr.f for attr in node.attribute if attr.name == "seed")
                    assert [attr.name for attr in node.attribute].count("seed") == 1
    assert seeds == {random_op_seed("noise")}
    # the same draw in two sessions: what a suffix is fed matches what its feeding prefix drew
    data = planner.prefix_model(1).SerializeToString()
    x = {"x": np.zeros((1, 16), np.float32)}
    first, second = (ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, x)[0] for _ in range(2))
    assert np.array_equal(first, second) and np.abs(first).sum() > 0


OPENVINO_FAILURE = """Exception from src/inference/src/cpp/core.cpp:121:
Exception from src/inference/src/dev/plugin.cpp:58:

Check 'data_range > 0' failed at src/core/shape_inference/include/range_shape_inference.hpp:89:
While validating node 'opset4::Range Range_1234 (start, stop, step) -> (f32[?])' with friendly_name 'range':
Overflow in the number of elements

"""


def test_a_multi_line_failure_is_kept_whole_on_one_line() -> None:
    text = condensed(OPENVINO_FAILURE)
    assert "\n" not in text and "Exception from" not in text and ".cpp" not in text
    assert text == ("Check 'data_range > 0' failed; While validating node 'opset4::Range Range_1234 (start, stop, "
                    "step) -> (f32[?])' with friendly_name 'range'; Overflow in the number of elements")
    assert len(condensed("x" * 5000, limit=100)) == 100


def test_a_failure_at_bf16_suggests_f32() -> None:
    compiled = compile_failure("tts", "CPU", RuntimeError(OPENVINO_FAILURE), "bf16")
    assert compiled.exit_code == 2
    assert "OpenVINO cannot compile the model for CPU at bf16" in str(compiled)
    assert "Overflow in the number of elements" in str(compiled)  # the cause, not only the first line
    assert "retry with --precision f32" in str(compiled)
    assert "--precision" not in str(compile_failure("tts", "CPU", OPENVINO_FAILURE, "f32"))
    feeds = make_inputs(_one_input_graph())
    ran = infer_failure(RuntimeError(OPENVINO_FAILURE), feeds, "bf16")
    assert isinstance(ran, RuntimeFailure) and ran.inputs == ("x",)
    assert "OpenVINO failed running the model at bf16 on seeded random input(s) x" in str(ran)
    assert "retry with --precision f32" in str(ran) and "--input x=FILE.npy" in str(ran)


def _one_input_graph() -> Graph:
    """A one-input graph (``x``, 1x4 float) as the loader gives it."""
    info = TensorInfo("x", (1, 4), "float32")
    return Graph(name="g", path="g.onnx", sha256="", opset=17, inputs=(info,), outputs=(info,), layers=(),
                 folded=(), tensors={"x": info}, constants={}, const_values={})
