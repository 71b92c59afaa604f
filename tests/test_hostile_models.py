"""Hostile ONNX models: each class is refused on load (exit 2, one line naming the file and the field)
or gives a correct result, within the subprocess limits of tests/_limits.py (10 s, ~1.5 GB).

Classes: external data with bad offsets or lengths; tensor data shorter or longer than its dims;
opsets newer than the installed onnx; names defined twice (what ONNX Runtime refuses); graphs stored
in reverse order (the topological sort is linear).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from _limits import assert_one_line_error, run_limited

F32 = TensorProto.FLOAT
TARGET = ["--target", "rdk-x5", "--top", "0"]


def _save(path: Path, nodes: list[onnx.NodeProto], inits: list[TensorProto], *, opset: int = 17,
          outputs: list[str] | None = None, inputs: list[str] | None = None) -> Path:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F32, [1, 4]) for n in inputs or ["x"]],
                              [helper.make_tensor_value_info(n, F32, [1, 4]) for n in outputs or ["y"]],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path.write_bytes(model.SerializeToString())
    return path


def _external(tmp: Path, offset: str | None, length: str | None, data_bytes: int = 16) -> Path:
    """``y = x + w``, ``w`` (1x4 float) stored in ``w.bin`` at ``offset``/``length`` as given."""
    (tmp / "w.bin").write_bytes(np.arange(data_bytes // 4, dtype=np.float32).tobytes())
    w = TensorProto(name="w", data_type=F32, dims=[1, 4], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "w.bin"), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, value
    return _save(tmp / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [w])


EXTERNAL = {
    "negative-offset": (("-1", "16"), "offset"),
    "text-offset": (("abc", "16"), "offset"),
    "offset-past-end": (("4096", None), "offset 4096"),
    "length-past-end": (("0", "4096"), "length 4096"),
    "offset-plus-length-past-end": (("8", "16"), "offset 8 + length 16"),
    "length-not-dims": (("0", "8"), "length 8"),
}


@pytest.mark.parametrize("kind", sorted(EXTERNAL))
def test_bad_external_data_is_refused(kind: str, tmp_path: Path) -> None:
    (offset, length), words = EXTERNAL[kind]
    path = _external(tmp_path, offset, length)
    line = assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(path), "'w'", words)
    assert "external data" in line


def test_a_nul_byte_in_an_external_data_location_is_bad_input(tmp_path: Path) -> None:
    path = _external(tmp_path, "0", "16")
    model = onnx.load_model(str(path), load_external_data=False)
    model.graph.initializer[0].external_data[0].value = "w\x00.bin"
    path.write_bytes(model.SerializeToString())
    line = assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(tmp_path), "'w'", "NUL byte")
    assert "external data location" in line


def test_good_external_data_loads(tmp_path: Path) -> None:
    path = _external(tmp_path, "0", "16")
    result = run_limited(["estimate", str(path), *TARGET])
    assert result.returncode == 0, result.stderr


def _short_raw(tmp: Path) -> Path:
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    w.raw_data = w.raw_data[:8]
    return _save(tmp / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [w])


def _short_typed(tmp: Path) -> Path:
    w = TensorProto(name="w", data_type=F32, dims=[1, 4], float_data=[1.0, 2.0])
    return _save(tmp / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [w])


def _new_opset(tmp: Path) -> Path:
    return _save(tmp / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])], [], opset=onnx.defs.onnx_opset_version() + 5)


def _two_writers(tmp: Path) -> Path:
    return _save(tmp / "m.onnx", [helper.make_node("Relu", ["x"], ["y"], name="a"),
                                  helper.make_node("Sigmoid", ["x"], ["y"], name="b")], [])


def _output_twice(tmp: Path) -> Path:
    return _save(tmp / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])], [], outputs=["y", "y"])


def _writes_input(tmp: Path) -> Path:
    return _save(tmp / "m.onnx", [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["x"])],
                 [])


def _input_twice(tmp: Path) -> Path:
    return _save(tmp / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])], [], inputs=["x", "x"])


def _initializer_twice(tmp: Path) -> Path:
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    return _save(tmp / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [w, w])


def _checker_refuses(tmp: Path) -> Path:
    # Conv on a 2-D input: the checker's strict shape inference refuses it, as ONNX Runtime does.
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    return _save(tmp / "m.onnx", [helper.make_node("Conv", ["x", "w"], ["y"])], [w])


MODELS: dict[str, tuple[Callable[[Path], Path], tuple[str, ...]]] = {
    "raw-data-short": (_short_raw, ("graph.initializer[0] 'w'", "raw_data holds 8 bytes", "need 16")),
    "typed-data-short": (_short_typed, ("graph.initializer[0] 'w'", "float_data holds 2 values", "need 4")),
    "opset-newer": (_new_opset, ("opset_import ai.onnx version", "newer")),
    "two-nodes-one-output": (_two_writers, ("graph.node[1]", "'y'", "duplicate")),
    "output-listed-twice": (_output_twice, ("graph.output[1]", "'y'")),
    "node-writes-an-input": (_writes_input, ("graph.node[1]", "'x'", "graph input")),
    "input-listed-twice": (_input_twice, ("graph.input[1]", "'x'")),
    "initializer-twice": (_initializer_twice, ("graph.initializer[1]", "'w'")),
    "checker-refuses": (_checker_refuses, ("onnx.checker",)),
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_malformed_model_is_refused_with_the_field(kind: str, tmp_path: Path) -> None:
    make, words = MODELS[kind]
    path = make(tmp_path)
    assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(path), *words)


def test_reverse_ordered_graph_is_sorted_in_linear_time(tmp_path: Path) -> None:
    """10,000 Relu nodes stored last-first: the old quadratic sort took ~28 s; the result is a chain."""
    n = 10_000
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"r{i}") for i in range(n)]
    graph = helper.make_graph(nodes[::-1], "g", [helper.make_tensor_value_info("t0", F32, [1, 8])],
                              [helper.make_tensor_value_info(f"t{n}", F32, [1, 8])])
    path = tmp_path / "reverse.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    from layerscope.model import load_model

    order = [layer.name for layer in load_model(path).layers]
    assert order == [f"r{i}" for i in range(n)]
    result = run_limited(["estimate", str(path), *TARGET])
    assert result.returncode == 0, result.stderr[-500:]


@pytest.mark.parametrize(("command", "shape", "needed"), [
    ("profile", "x=1x3x100000x100000", "360,000,000,000 bytes"),   # 3e10 float32 + their float64 draw
    ("bench", "x=1x3x2147483648x1", "77,309,411,328 bytes"),       # 3 x 2^31 x 12 bytes
])
def test_inputs_too_large_to_allocate_are_refused_before_allocating(command: str, shape: str, needed: str,
                                                                     tmp_path: Path) -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", F32, ["n", 3, "h", "w"])],
                              [helper.make_tensor_value_info("y", F32, None)])
    path = tmp_path / "dynamic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    line = assert_one_line_error(run_limited([command, str(path), "--shape", shape]), "input 'x'", needed, "budget")
    assert "smaller --shape" in line


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value), name=f"c_{name}")


def _folding_model(path: Path, nodes: list[onnx.NodeProto]) -> Path:
    """``z = x + y`` where ``y`` (a scalar) is computed from constants only: it all folds."""
    nodes = [*nodes, helper.make_node("ReduceSum", ["r"], ["y"], keepdims=0, name="sum"),
             helper.make_node("Add", ["x", "y"], ["z"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [1])],
                              [helper.make_tensor_value_info("z", F32, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


FOLDING = {
    # a few hundred bytes whose constant subgraph is GBs: 3e8 floats; 40,000^2 floats; 60,000^2 floats
    "range": [_const("a", np.float32(0)), _const("b", np.float32(3e8)), _const("d", np.float32(1)),
              helper.make_node("Range", ["a", "b", "d"], ["r"])],
    "expand": [_const("u", np.ones((1,), np.float32)), _const("s", np.array([40_000, 40_000], np.int64)),
               helper.make_node("Expand", ["u", "s"], ["r"])],
    "gather-outer": [_const("u", np.ones((60_000, 1), np.float32)), _const("i", np.zeros((60_000,), np.int64)),
                     helper.make_node("Gather", ["u", "i"], ["g"], axis=1),
                     helper.make_node("Gather", ["g", "i"], ["r"], axis=1)],
}


@pytest.mark.parametrize("case", sorted(FOLDING))
def test_huge_constant_subgraphs_are_folded_by_shape_not_computed(case: str, tmp_path: Path) -> None:
    path = _folding_model(tmp_path / f"{case}.onnx", FOLDING[case])
    result = run_limited(["estimate", str(path), *TARGET])
    assert result.returncode == 0, result.stderr[-500:]
    from layerscope.model import load_model

    graph = load_model(path)
    assert [layer.op_type for layer in graph.layers] == ["Add"]
    assert "r" in graph.constants and "r" not in graph.const_values  # its shape, not its value


def test_a_single_file_over_protobufs_2_gib_is_refused_before_reading(tmp_path: Path) -> None:
    """A 2 GiB + 1 byte .onnx (sparse: nothing is written or read) is refused by its size, with the fix."""
    path = tmp_path / "huge.onnx"
    with path.open("wb") as fh:
        fh.truncate(2**31 + 1)
    result = run_limited(["estimate", str(path), *TARGET])
    assert result.returncode == 2, result.stderr[-500:]
    (line,) = result.stderr.strip().splitlines()
    assert f"{path}: 2.15 GB in one file is over protobuf's 2 GiB limit" in line and "save_as_external_data" in line


def test_a_constant_node_left_unfolded_for_size_is_said(tmp_path: Path) -> None:
    """NonZero of a 70,000-element constant: its input is over the 65,536 elements whose values are kept and its
    output shape depends on the values, so it stays a layer; the estimate says so and why."""
    big = numpy_helper.from_array(np.ones((70_000,), np.float32), "big")
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["big"], ["nz"], name="nonzero"),
         helper.make_node("Shape", ["nz"], ["s"], name="shape"),
         helper.make_node("Cast", ["s"], ["sf"], to=F32, name="cast"),
         helper.make_node("Add", ["x", "sf"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", F32, [2])], [helper.make_tensor_value_info("y", F32, None)],
        initializer=[big])
    path = tmp_path / "nonzero.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    result = run_limited(["estimate", str(path), *TARGET])
    assert result.returncode == 0, result.stderr[-500:]
    assert "1 constant node(s) not folded ('nonzero'): their values were not computed at load (inputs or outputs " \
           "over 65,536 elements" in " ".join(result.stderr.split())
    from layerscope.model import load_model

    graph_ = load_model(path)
    assert "nonzero" in [layer.id for layer in graph_.layers]
    assert any("not folded ('nonzero')" in a for a in graph_.assumptions)


def _functions(path: Path, depth: int, *, cycle: bool = False) -> Path:
    """Local functions f0..f{depth-1}, each calling the one below twice (f0 is a Relu): 2^(depth-1) nodes."""
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    funcs = [helper.make_function("local", "f0", ["a"], ["b"],
                                  [helper.make_node("f1" if cycle else "Relu", ["a"], ["b"],
                                                    domain="local" if cycle else "")], opsets)]
    for k in range(1, depth):
        funcs.append(helper.make_function("local", f"f{k}", ["a"], ["b"], [
            helper.make_node(f"f{k - 1}", ["a"], ["t"], domain="local"),
            helper.make_node(f"f{k - 1}", ["t"], ["b"], domain="local")], opsets))
    graph = helper.make_graph([helper.make_node(f"f{depth - 1}", ["x"], ["y"], domain="local", name="call")], "g",
                              [helper.make_tensor_value_info("x", F32, [1, 4])],
                              [helper.make_tensor_value_info("y", F32, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=opsets, functions=funcs), str(path))
    return path


def test_nested_functions_expanding_past_the_cap_are_refused(tmp_path: Path) -> None:
    """18 levels (1.4 KB) expand to 131,072 nodes: shape inference alone took over 10 s; 40 levels never end."""
    for depth, nodes in ((18, "131,072"), (40, "549,755,813,888")):
        path = _functions(tmp_path / f"f{depth}.onnx", depth)
        assert path.stat().st_size < 4000
        assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(path), "functions",
                              f"expand to {nodes} nodes")


def test_recursive_functions_are_refused(tmp_path: Path) -> None:
    path = _functions(tmp_path / "cycle.onnx", 3, cycle=True)
    assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(path), "recursively")


def test_functions_within_the_cap_still_load(tmp_path: Path) -> None:
    path = _functions(tmp_path / "f10.onnx", 10)  # 512 nodes once expanded
    result = run_limited(["estimate", str(path), *TARGET])
    assert result.returncode == 0, result.stderr[-500:]


def test_names_that_are_not_utf8_are_refused(tmp_path: Path) -> None:
    """Found by benchmarks/fuzz_inputs.py: protobuf hands a string field that is not UTF-8 over as bytes,
    which crashed the topological sort (TypeError, exit 1)."""
    path = _save(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"], name="NODENAME")], [])
    path.write_bytes(path.read_bytes().replace(b"NODENAME", b"NODE\xe7\x80\xffE"))
    assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(path), "graph.node[0]", "UTF-8")


def test_a_large_weight_whose_name_is_not_utf8_is_refused(tmp_path: Path) -> None:
    """A file over 1 MB, whose large weight (given to the checker as a typed input) has a name that is not UTF-8:
    the checker's cut of the file crashed (UnicodeDecodeError, exit 1) before the names were checked."""
    w = numpy_helper.from_array(np.ones((512, 1024), np.float32), "WEIGHTNAME")  # 2 MB
    path = _save(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "WEIGHTNAME"], ["y"])], [w])
    assert path.stat().st_size > 2_000_000
    path.write_bytes(path.read_bytes().replace(b"WEIGHTNAME", b"WEIGHT\xe7\x80\xffE"))
    assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(path), "UTF-8")


def test_unknown_element_types_are_refused(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    w.data_type = 65
    path = _save(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [w])
    assert_one_line_error(run_limited(["estimate", str(path), *TARGET]), str(path), "graph.initializer[0] 'w'",
                          "data_type 65")


def test_a_model_with_3_gb_of_external_data_is_estimated_without_reading_it(tmp_path: Path) -> None:
    """A 750 M-element weight in a (sparse) 3 GB file beside a 750 M-element 1-D input: ONNX's data
    propagation used to allocate GBs and fail with std::bad_alloc; the data is never read."""
    n = 750_000_000
    with (tmp_path / "w.bin").open("wb") as fh:
        fh.truncate(4 * n)
    w = TensorProto(name="w", data_type=F32, dims=[n], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(4 * n))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                              [helper.make_tensor_value_info("x", F32, [n])],
                              [helper.make_tensor_value_info("y", F32, [n])], initializer=[w])
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    json_out = tmp_path / "run.json"
    result = run_limited(["estimate", str(path), *TARGET, "-o", str(json_out)])
    assert result.returncode == 0, result.stderr[-500:]
    import json

    run = json.loads(json_out.read_text())
    (layer,) = run["layers"]
    assert layer["id"] == "add" and layer["bytes_read_weight"] == 4 * n
    said = "ONNX data propagation off: input 'x' has 750,000,000 elements (over 1,048,576)"
    assert said in " ".join(result.stderr.split())
    assert any(a.startswith(said) for a in run["model"]["assumptions"])
