"""Model loading: shapes, folding, ids, external data, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import F32, ZOO_MODELS, ModelWriter, zoo
from layerscope.errors import ModelError, ShapeError
from layerscope.model import load_model, parse_shape_arg
from layerscope.model.types import TensorInfo


@pytest.mark.parametrize("path", ZOO_MODELS, ids=lambda p: p.stem)
def test_zoo_every_node_is_a_layer_or_folded_and_every_layer_tensor_has_a_shape(path: Path) -> None:
    raw = onnx.load(str(path), load_external_data=False)
    graph = load_model(path)
    assert len(graph.layers) + len(graph.folded) == len(raw.graph.node)
    assert {n.id for n in graph.layers}.isdisjoint({n.id for n in graph.folded})
    for node in graph.layers:
        for name in node.inputs:
            assert not name or graph.tensor(name) is not None, (node.id, name)
    # ConstantOfShape builds every weight of these networks: all of them fold, none is a layer.
    assert not any(n.op_type == "ConstantOfShape" for n in graph.layers)
    assert [t.shape for t in graph.inputs] == [(1, 3, 224, 224)]


def test_resnet50_weights_are_folded_constants_of_the_right_size() -> None:
    graph = load_model(zoo("resnet50"))
    conv1 = next(n for n in graph.layers if n.op_type == "Conv")
    weight = graph.tensor(conv1.inputs[1])
    assert weight is not None and weight.shape == (64, 3, 7, 7)
    assert graph.is_constant(weight.name)
    # ResNet-50 has 25.56 M parameters (He et al. 2016; torchvision: 25,557,032), fp32 = 102.2 MB;
    # the caffe2 export also stores BN running mean/var (2 x 53 vectors), hence "about".
    assert 100e6 < graph.weight_bytes < 105e6


def _dynamic_model(write_model: ModelWriter) -> Path:
    w = np.ones((8, 3, 3, 3), np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    return write_model([node], [("x", F32, ["batch", 3, "h", "w"])], [("y", F32, None)], {"w": w})


def test_dynamic_dims_without_shape_name_each_input(write_model: ModelWriter) -> None:
    with pytest.raises(ShapeError, match=r"x\[batch,3,h,w\].*--shape x=") as err:
        load_model(_dynamic_model(write_model))
    assert err.value.exit_code == 2


def test_shape_override_resolves_everything(write_model: ModelWriter) -> None:
    graph = load_model(_dynamic_model(write_model), {"x": (2, 3, 64, 48)})
    assert graph.inputs[0].shape == (2, 3, 64, 48)
    y = graph.tensor("y")
    assert y is not None and y.shape == (2, 8, 64, 48)


def test_shape_for_unknown_input_lists_known_inputs(write_model: ModelWriter) -> None:
    with pytest.raises(ShapeError, match=r"unknown input\(s\) images; the model's inputs: x\[batch,3,h,w\]"):
        load_model(_dynamic_model(write_model), {"images": (1, 3, 8, 8)})


def test_shape_conflicting_with_fixed_dim(write_model: ModelWriter) -> None:
    with pytest.raises(ShapeError, match="dim 1 is fixed to 3"):
        load_model(_dynamic_model(write_model), {"x": (1, 4, 8, 8)})


@pytest.mark.parametrize("text", ["x", "x=", "=1x2", "x=1xax3", "x=0x3"])
def test_parse_shape_arg_rejects_malformed(text: str) -> None:
    with pytest.raises(ShapeError):
        parse_shape_arg(text)


def test_parse_shape_arg() -> None:
    assert parse_shape_arg("images=1x3x640x640") == ("images", (1, 3, 640, 640))
    assert parse_shape_arg("a=b=1,2") == ("a=b", (1, 2))


def test_shape_subgraph_is_folded_and_feeds_reshape(write_model: ModelWriter) -> None:
    # y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the PyTorch export pattern for flatten.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["r", "target"], ["y"]),
    ]
    inits = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus1": np.array([-1], np.int64)}
    graph = load_model(write_model(nodes, [("x", F32, [2, 3, 4, 5])], [("y", F32, None)], inits))
    assert [n.op_type for n in graph.layers] == ["Relu", "Reshape"]
    assert [n.op_type for n in graph.folded] == ["Shape", "Gather", "Unsqueeze", "Concat"]
    np.testing.assert_array_equal(graph.value("target"), [2, -1])
    y = graph.tensor("y")
    assert y is not None and y.shape == (2, 60)


def test_layer_ids_are_names_or_synthesized_and_unique(write_model: ModelWriter) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="act"),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Relu", ["b"], ["c"], name="dup"),
        helper.make_node("Relu", ["c"], ["d"], name="dup"),
    ]
    graph = load_model(write_model(nodes, [("x", F32, [1, 4])], [("d", F32, None)]))
    assert [n.id for n in graph.layers] == ["act", "Relu(b)", "Relu(c)", "Relu(d)"]


def test_missing_file() -> None:
    with pytest.raises(ModelError, match="no such file"):
        load_model("/nonexistent/model.onnx")


def test_not_an_onnx_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("this is a text file, not a protobuf\n" * 20)
    with pytest.raises(ModelError, match=r"not .*ONNX model"):
        load_model(path)


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.97])
def test_truncated_model(tmp_path: Path, fraction: float) -> None:
    data = zoo("squeezenet").read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelError):
        load_model(path)


def _external_model(tmp_path: Path, shape: tuple[int, ...], location: str, create: bool = True) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    weight = TensorProto()
    weight.name = "w"
    weight.data_type = TensorProto.FLOAT
    weight.dims.extend(shape)
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", location
    nbytes = int(np.prod(shape)) * 4
    if create:
        with (folder / "weights.bin").open("wb") as fh:
            fh.truncate(nbytes)  # sparse: nothing is written, and layerscope must not read it
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F32, [1, shape[0]])],
                              [helper.make_tensor_value_info("y", F32, None)], initializer=[weight])
    path = folder / "model.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_external_data_over_2gb_loads_without_reading_weights(tmp_path: Path) -> None:
    # 16384 x 32768 fp32 = 2 GiB (2,147,483,648 bytes): over protobuf's 2 GB limit, so it must stay external.
    graph = load_model(_external_model(tmp_path, (16384, 32768), "weights.bin"))
    assert graph.weight_bytes == 16384 * 32768 * 4
    y = graph.tensor("y")
    assert y is not None and y.shape == (1, 32768)


@pytest.mark.parametrize("location", ["../weights.bin", "/etc/passwd", "sub/../../weights.bin"])
def test_external_data_outside_model_folder_is_refused(tmp_path: Path, location: str) -> None:
    with pytest.raises(ModelError, match="outside the model's folder"):
        load_model(_external_model(tmp_path, (4, 4), location))


def test_external_data_file_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        load_model(_external_model(tmp_path, (4, 4), "weights.bin", create=False))


def test_initializer_listed_as_input_is_a_constant(write_model: ModelWriter) -> None:
    # IR < 4 models (the zoo's) list weights among the graph inputs; they are not runtime inputs.
    w = np.ones((4, 4), np.float32)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph_proto = helper.make_graph([node], "g",
                                    [helper.make_tensor_value_info("x", F32, [1, 4]),
                                     helper.make_tensor_value_info("w", F32, [4, 4])],
                                    [helper.make_tensor_value_info("y", F32, None)],
                                    initializer=[numpy_helper.from_array(w, "w")])
    path = Path(write_model([node], [("x", F32, [1, 4])], [("y", F32, None)], {"w": w})).parent / "ir3.onnx"
    onnx.save_model(helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 9)]), str(path))
    graph = load_model(path)
    assert [t.name for t in graph.inputs] == ["x"]
    assert graph.is_constant("w")


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT64,
                                  TensorProto.INT8, TensorProto.BOOL, TensorProto.STRING, TensorProto.INT4,
                                  TensorProto.UINT4, TensorProto.FLOAT8E4M3FN, TensorProto.COMPLEX64])
def test_dtype_names_round_trip_to_onnx_types(elem: int) -> None:
    from layerscope.model.load import onnx_dtype_name, onnx_elem_type

    assert onnx_elem_type(onnx_dtype_name(elem)) == elem


@pytest.mark.parametrize("shape", [(3, 4), (), (2000,), (1, 0, 5), (64, 32, 3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.int8])
def test_a_weight_typed_as_an_input_is_the_helpers_value_info(shape: tuple[int, ...], dtype: type) -> None:
    """Shape inference sees a large weight as a typed graph input: the very message ONNX's helper builds."""
    from layerscope.model.validate import typed_input

    tensor = numpy_helper.from_array(np.zeros(shape, dtype), "w")
    expected = helper.make_tensor_value_info("w", tensor.data_type, list(tensor.dims))
    types: dict[tuple[int, tuple[int, ...]], bytes] = {}
    assert typed_input("w", tensor.data_type, tuple(tensor.dims), types) == expected.SerializeToString()
    again = onnx.ValueInfoProto.FromString(typed_input("v", tensor.data_type, shape, types))  # the type known
    assert again.name == "v" and again.type == expected.type and len(types) == 1
    assert again.type.tensor_type.HasField("shape")  # a scalar's empty shape is still a shape


def test_a_weight_whose_name_is_not_text_is_not_typed() -> None:
    """A name protobuf could not decode (``bytes``) is a ``ValueError``, as ONNX's helper raises it: the checker's cut
    is then not made (its copy's check refuses the name)."""
    from layerscope.model.validate import typed_input

    with pytest.raises(ValueError):
        helper.make_tensor_value_info(b"\xff", TensorProto.FLOAT, [2, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        typed_input(b"\xff", TensorProto.FLOAT, (2, 2), {})  # type: ignore[arg-type]


def test_the_typed_weights_given_to_shape_inference_are_what_it_reads_back() -> None:
    """``_infer`` takes the infos of the weights typed as inputs as given: the tensors it returns, in order, are
    those it reads back from shape inference's result; a weight with a dim 0 has no static shape either way."""
    from layerscope.model.load import (
        _infer,
        _initializer_fields,
        _initializer_infos,
        _shape_data,
        _typed_weights,
        _without_large_weights,
    )

    # a zero-size weight, a large vector (typed), an fp16 matrix, and a weight also listed as an input (not typed)
    weights = {"empty": np.zeros((0, 3), np.float32), "long": np.zeros(70000, np.int64),
               "half": np.zeros((4, 3), np.float16), "listed": np.zeros((2, 2), np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "half"], ["y"]), helper.make_node("Shape", ["long"], ["n"]),
             helper.make_node("MatMul", ["z", "empty"], ["e"]),
             helper.make_node("Add", ["listed", "listed"], ["s"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 0]),
         helper.make_tensor_value_info("listed", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in ("y", "n", "e", "s")],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    initializers = _initializer_fields(model)
    shape_data = _shape_data(initializers)
    typed = _typed_weights(model, initializers, shape_data)
    light = _without_large_weights(model, shape_data, typed)
    infos = _initializer_infos(initializers)
    given = _infer(light, data_prop=True, typed=[infos[weight.name] for weight in typed])
    read = _infer(light, data_prop=True)
    assert typed and list(given.items()) == list(read.items())
    assert [weight.name for weight in typed] == ["empty", "long", "half"]
    assert "empty" not in given and given["half"] == TensorInfo("half", (4, 3), "float16")


@pytest.mark.parametrize("name", ["resnet50", "conv-reshape", "functions"])
def test_the_copy_for_shape_inference_cut_from_the_file_is_the_copy_made_of_the_model(name: str) -> None:
    """``_light_bytes`` (fields cut from the file's bytes, the inputs as they are now) parses as
    ``_without_large_weights`` of the model: the inputs changed after the file was read included."""
    from layerscope.model.load import (
        _inference_cut,
        _initializer_fields,
        _light_bytes,
        _shape_data,
        _typed_weights,
        _without_large_weights,
    )
    from layerscope.model.validate import file_layout

    model = onnx.load(str(zoo("resnet50"))) if name == "resnet50" else _conv_reshape_model()
    if name == "functions":
        relu = helper.make_node("Relu", ["a"], ["b"])
        model.functions.append(helper.make_function("local", "F", ["a"], ["b"], [relu], [helper.make_opsetid("", 17)]))
        model.opset_import.append(helper.make_opsetid("local", 1))
    model.graph.doc_string = "left out"
    data = model.SerializeToString()
    parsed = onnx.ModelProto.FromString(data)
    layout = file_layout(parsed, data)
    assert layout is not None
    initializers = _initializer_fields(parsed)
    shape_data = _shape_data(initializers)
    cut = _inference_cut(data, layout, shape_data)
    parsed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 7  # as --shape/--dim set an input's dims
    typed = _typed_weights(parsed, initializers, shape_data)
    light = onnx.ModelProto.FromString(_light_bytes(parsed, cut, typed))
    assert light == _without_large_weights(parsed)
    assert light.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 7


def _conv_reshape_model() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Reshape", ["c", "shape"], ["y"])], "",
        [helper.make_tensor_value_info("x", F32, [1, 3, 8, 8]), helper.make_tensor_value_info("w", F32, [4, 3, 3, 3])],
        [helper.make_tensor_value_info("y", F32, None)], initializer=[weight, shape],
        value_info=[helper.make_tensor_value_info("c", F32, [1, 4, 8, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=3)


@pytest.mark.parametrize("name", ["resnet50", "conv-reshape"])
def test_the_copy_for_shape_inference_is_what_make_model_of_make_graph_gives(name: str) -> None:
    """``_without_large_weights`` builds its copy in place; it must be the message the helpers build."""
    from layerscope.model.load import _without_large_weights
    from layerscope.model.validate import is_shape_data_dims

    model = onnx.load(str(zoo(name))) if name != "conv-reshape" else _conv_reshape_model()
    model.graph.doc_string = "left out"  # make_graph is given no doc string
    graph = model.graph
    small = [t for t in graph.initializer if is_shape_data_dims(tuple(t.dims))]
    large = [t for t in graph.initializer if not is_shape_data_dims(tuple(t.dims))]
    assert large  # the copy is made
    listed = {vi.name for vi in graph.input}
    expected = helper.make_model(
        helper.make_graph(list(graph.node), graph.name or "g",
                          [*graph.input, *(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                           for t in large if t.name not in listed)],
                          list(graph.output), initializer=small,
                          value_info=list(graph.value_info)),
        opset_imports=list(model.opset_import), ir_version=max(model.ir_version, 4), functions=list(model.functions))
    light = _without_large_weights(model)
    assert light == expected
    assert light.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    assert not light.graph.doc_string and len(light.graph.initializer) < len(graph.initializer)


@pytest.mark.parametrize(("shape", "dtype"), [((1, 3, 8, 8), "float32"), ((), "int64"), ((2, 0), "float8"),
                                              ((5,), "unknown-type")])
def test_a_renamed_tensor_is_the_tensor_made_under_that_name(shape: tuple[int, ...], dtype: str) -> None:
    import dataclasses

    from layerscope.model.types import TensorInfo

    made = TensorInfo("b", shape, dtype)
    renamed = TensorInfo("a", shape, dtype).renamed("b")
    assert renamed == made and repr(renamed) == repr(made)
    assert (renamed.elements, renamed.itemsize, renamed.nbytes) == (made.elements, made.itemsize, made.nbytes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        renamed.name = "c"  # type: ignore[misc]


@pytest.mark.parametrize(("names", "expected"), [
    (["a", "b", "c"], ["a", "b", "c"]),  # every name given and unique: the names
    (["a", "", "Relu(y1)"], ["a", "Relu(y1)", "Relu(y1)~2"]),  # a synthesized id meets a name
    (["a", "a", "b"], ["Relu(y0)", "Relu(y1)", "b"]),  # a repeated name is no node's id
])
def test_layer_ids_of_rows(names: list[str], expected: list[str]) -> None:
    from layerscope.model.load import _ids

    rows = [(name, "Relu", "", (f"x{k}",), (f"y{k}",), ()) for k, name in enumerate(names)]
    assert _ids(rows) == expected


@pytest.mark.parametrize("size", [0, 1000, (1 << 20) + 7], ids=["empty", "small-on-the-callers-thread", "threaded"])
def test_the_models_sha256_is_hashlibs_whether_or_not_it_is_hashed_on_a_thread(size: int) -> None:
    import hashlib

    from layerscope.digest import Sha256

    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert Sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()


def test_a_node_made_by_its_slots_is_the_one_its_constructor_makes() -> None:
    """``made_node`` writes every field's slot: a field added to Node must be added to it (this test fails)."""
    import dataclasses

    from layerscope.model.types import Node, made_node

    assert [f.name for f in dataclasses.fields(Node)] == [
        "id", "name", "op_type", "domain", "inputs", "outputs", "attrs", "shape_source", "parent", "executions",
        "observed"]
    args = ("c1", "conv", "Conv", "", ("x", "w"), ("y",), {"pads": [1, 1, 1, 1]}, "symbolic", "if0", 3)
    made, built = made_node(*args), Node(*args)
    assert made == built and repr(made) == repr(built) and hash(made.inputs) == hash(built.inputs)
    assert made.observed == {} and made.observed is not made_node(*args).observed
