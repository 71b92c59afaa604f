"""ONNX's checker is given the model cut from the file's own bytes (layerscope.model.wire): the same message the
light copy would be, without copying and serializing it again; the same refusals; the parsed copy where the cut
cannot be made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ZOO_MODELS
from layerscope.errors import ModelError
from layerscope.model import load_model, wire
from layerscope.model.validate import (
    _CHECKER_WHOLE_MAX_BYTES,
    TENSOR_RAW_DATA,
    _light_copy,
    checker_bytes,
    file_layout,
    node_fields,
    raw_data_bytes,
    validate_model,
)

F32 = TensorProto.FLOAT


def _conv_model(*, name: str = "g", big_channels: int = 256, metadata: bool = False, doc: bool = False,
                op: str = "Relu", x_rank: int = 4) -> onnx.ModelProto:
    """x -> Conv(w_big: 256x256x3x3 float, 2.36 MB) -> op -> Conv(w_small: 8x256x1x1, 8 KB) + b -> y."""
    rng = np.random.default_rng(0)
    w_big = numpy_helper.from_array(rng.standard_normal((big_channels, 256, 3, 3)).astype(np.float32), "w_big")
    w_small = numpy_helper.from_array(rng.standard_normal((8, big_channels, 1, 1)).astype(np.float32), "w_small")
    bias = numpy_helper.from_array(np.zeros(8, np.float32), "b")
    x_shape = [1, 256, 8, 8][:x_rank]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w_big"], ["t"], name="c1", pads=[1, 1, 1, 1]),
         helper.make_node(op, ["t"], ["u"], name="r"),
         helper.make_node("Conv", ["u", "w_small", "b"], ["y"], name="c2")],
        name, [helper.make_tensor_value_info("x", F32, x_shape)],
        [helper.make_tensor_value_info("y", F32, [1, 8, 8, 8])], initializer=[w_big, w_small, bias],
        doc_string="a graph" if doc else None)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")
    if metadata:
        helper.set_model_props(model, {"author": "someone"})
    return model


def _parsed(data: bytes) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return model


@pytest.mark.parametrize("variant", ["plain", "no-name", "metadata", "graph-doc"])
def test_the_cut_is_the_light_copy_without_the_large_weight(variant: str) -> None:
    model = _conv_model(name="" if variant == "no-name" else "g", metadata=variant == "metadata",
                        doc=variant == "graph-doc")
    data = model.SerializeToString()
    cut = checker_bytes(_parsed(data), data, ordered=True)
    assert cut is not None
    checked = _parsed(cut)
    assert checked == _light_copy(_parsed(data), ordered=True)
    # in a model over 1 MB, the 2.36 MB weight is a typed input, not data: 8 KB of small weight, the bias and the
    # graph are left
    assert len(data) > 256 * 256 * 9 * 4 > _CHECKER_WHOLE_MAX_BYTES and len(cut) < 10_000
    assert [t.name for t in checked.graph.initializer] == ["w_small", "b"]
    assert [vi.name for vi in checked.graph.input] == ["x", "w_big"]
    assert list(checked.graph.input[1].type.tensor_type.shape.dim) == list(
        helper.make_tensor_value_info("w_big", F32, [256, 256, 3, 3]).type.tensor_type.shape.dim)
    assert checked.graph.name == (model.graph.name or "g")


def test_a_model_the_copy_would_not_change_is_given_as_read() -> None:
    model = _conv_model(big_channels=16)  # 16x256x3x3 floats: 147 KB, under the limit
    data = model.SerializeToString()
    assert _CHECKER_WHOLE_MAX_BYTES > len(data) > _CHECKER_WHOLE_MAX_BYTES // 8
    assert checker_bytes(_parsed(data), data, ordered=True) is data


@pytest.mark.parametrize("path", ZOO_MODELS, ids=lambda p: p.stem)
def test_zoo_models_are_given_as_read(path: Path) -> None:
    data = path.read_bytes()
    model = _parsed(data)
    rows = node_fields(model.graph.node)
    assert validate_model(model, path, path.parent, rows=rows, checked=checker_bytes(model, data))
    assert checker_bytes(model, data) is data


def test_where_the_cut_cannot_be_made_the_copy_is_used() -> None:
    model = _conv_model()
    data = model.SerializeToString()
    assert checker_bytes(_parsed(data), data, ordered=False) is None  # the copy sorts the nodes
    twice = data + data  # the graph written twice: protobuf merges them, the cut would not
    assert checker_bytes(_parsed(twice), twice, ordered=True) is None
    no_shape = _conv_model()
    no_shape.graph.output[0].type.tensor_type.ClearField("shape")  # the copy is given the inferred shape
    raw = no_shape.SerializeToString()
    assert checker_bytes(_parsed(raw), raw, ordered=True) is None


@pytest.mark.parametrize(("op", "x_rank", "words"), [
    ("FrobnicateXYZ", 4, "No Op registered for FrobnicateXYZ"),
    ("Relu", 2, "Input tensor must have at least 3 dimensions"),
])
def test_refusals_of_a_model_with_large_weights_are_the_checkers(tmp_path: Path, op: str, x_rank: int,
                                                                  words: str) -> None:
    path = tmp_path / "m.onnx"
    model = _conv_model(op=op, x_rank=x_rank)
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError) as cut:
        load_model(path)
    assert f"{path}: refused by onnx.checker (ONNX Runtime refuses it too): " in str(cut.value) and words in str(
        cut.value)
    with pytest.raises(ModelError) as copied:  # the light copy, serialized: the same line
        validate_model(model, path, tmp_path)
    assert str(copied.value) == str(cut.value)


def test_a_model_with_large_weights_loads_through_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_conv_model().SerializeToString())
    graph = load_model(path)
    assert [n.op_type for n in graph.layers] == ["Conv", "Relu", "Conv"]
    assert graph.tensor("y") is not None and graph.tensor("y").shape == (1, 8, 8, 8)  # type: ignore[union-attr]


def test_a_model_with_large_weights_and_nodes_out_of_order_loads_through_the_copy(tmp_path: Path) -> None:
    """The loader cuts the checker's bytes before it knows the order (and drops the file's bytes); given the cut,
    the checker would refuse nodes out of order: the validator gives it the sorted copy instead."""
    model = _conv_model()
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    graph = load_model(path)
    assert [n.op_type for n in graph.layers] == ["Conv", "Relu", "Conv"]


def test_wire_fields_are_the_messages_fields_in_order() -> None:
    model = _conv_model()
    data = model.SerializeToString()
    top = wire.fields(data)
    assert top is not None
    assert [s.number for s in top] == [f.number for f, _ in model.ListFields()]
    graph = next(s for s in top if s.number == 7)
    inner = wire.fields(data, graph.value, graph.end)
    assert inner is not None
    initializers = [s for s in inner if s.number == 5]
    assert [data[s.value:s.end] for s in initializers] == [t.SerializeToString() for t in model.graph.initializer]
    assert wire.length_delimited(2, b"g") == helper.make_graph([], "g", [], []).SerializeToString()


@pytest.mark.parametrize("size", [0, 100, 130, 300, 1 << 21])
def test_wire_fields_written_are_what_protobuf_writes(size: int) -> None:
    """A field under 16 with a length under 128 (one byte each, the short path) and the others alike."""
    name = "n" * size
    assert wire.length_delimited(2, name.encode()) == onnx.ModelProto(producer_name=name).SerializeToString()
    function = onnx.FunctionProto(name=name)
    assert wire.length_delimited(25, function.SerializeToString()) == \
        onnx.ModelProto(functions=[function]).SerializeToString()


@pytest.mark.parametrize("data", [
    b"\x0a\x05abc",  # a length past the end
    b"\x08\xff\xff",  # a varint cut short
    b"\x0b\x0c",  # a group (wire type 3)
    b"\x0e",  # wire type 6
    b"\x00\x01",  # field number 0
])
def test_wire_fields_refuse_what_they_do_not_read(data: bytes) -> None:
    assert wire.fields(data) is None


def test_a_text_format_model_loads_as_its_binary_twin(tmp_path: Path) -> None:
    """A ``.txtpb`` file is read as text protobuf (the format from the extension, as ``onnx.load_model`` does) and
    checked through the light copy: the same layers and shapes as the binary file."""
    model = _conv_model()
    binary, text = tmp_path / "m.onnx", tmp_path / "m.txtpb"
    onnx.save_model(model, str(binary))
    onnx.save_model(model, str(text), format="textproto")
    assert text.read_bytes()[:5] != binary.read_bytes()[:5]
    from_text, from_binary = load_model(text), load_model(binary)
    assert [(n.id, n.op_type) for n in from_text.layers] == [(n.id, n.op_type) for n in from_binary.layers]
    assert from_text.tensors == from_binary.tensors


def test_an_empty_file_is_not_a_model(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"  # 0 bytes parse as an empty message: no graph
    path.write_bytes(b"")
    with pytest.raises(ModelError, match="not an ONNX model \\(no graph or no nodes\\)"):
        load_model(path)


def test_trailing_garbage_is_refused_as_onnx_load_model_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_conv_model().SerializeToString() + b"\xff")
    with pytest.raises(ModelError) as caught:
        load_model(path)
    with pytest.raises(Exception) as theirs:
        onnx.load_model(str(path))
    assert f"{path}: not a readable ONNX model ({str(theirs.value).splitlines()[0]})" in str(caught.value)


@pytest.mark.parametrize(("fault", "ours", "checkers"), [
    ("two-fields", "values in raw_data, float_data: a tensor holds them in one field",
     "TensorProto (tensor name: w_big) should contain one and only one value field."),
    ("string-raw", "STRING values in raw_data: strings are held in string_data",
     "STRING data (tensor name: w_big) should not be stored in raw_data field"),
])
@pytest.mark.parametrize("big_channels", [16, 256], ids=["values-given-to-the-checker", "typed-for-the-checker"])
def test_a_weights_value_fields_are_checked_whether_or_not_the_checker_reads_its_values(
        tmp_path: Path, fault: str, ours: str, checkers: str, big_channels: int) -> None:
    """Values in two fields, or strings in ``raw_data``: ONNX's checker refuses such a tensor when it is given its
    values (a model of at most 1 MB: the weight is 147 KB); in a bigger model it is given the 2.36 MB weight as a
    typed input only, and the loader's own check refuses it."""
    model = _conv_model(big_channels=big_channels)
    weight = model.graph.initializer[0]
    if fault == "two-fields":
        weight.float_data.extend([0.0] * 4)
    else:
        weight.data_type = TensorProto.STRING
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    typed = path.stat().st_size > _CHECKER_WHOLE_MAX_BYTES
    assert typed == (big_channels == 256)
    with pytest.raises(ModelError) as refused:
        load_model(path)
    assert str(refused.value) == (f"{path}: graph.initializer[0] 'w_big': {ours}" if typed else
                                  f"{path}: refused by onnx.checker (ONNX Runtime refuses it too): {checkers}")


def test_raw_data_lengths_read_from_the_file_are_the_parsed_tensors() -> None:
    """For initializers over 16 KB, the loader reads the length of ``raw_data`` from the file's bytes (asking the
    parsed tensor copies its data); the last ``raw_data`` written is the one protobuf keeps."""
    model = _conv_model()
    weight = model.graph.initializer[0]
    twice = weight.SerializeToString() + wire.length_delimited(TENSOR_RAW_DATA, b"\0" * (256 * 256 * 9 * 4 - 4))
    graph = onnx.GraphProto()
    graph.CopyFrom(model.graph)
    del graph.initializer[:]
    top = onnx.ModelProto()
    top.CopyFrom(model)
    top.ClearField("graph")
    data = top.SerializeToString() + wire.length_delimited(7, b"".join([
        graph.SerializeToString(), wire.length_delimited(5, twice),
        *(wire.length_delimited(5, t.SerializeToString()) for t in model.graph.initializer[1:])]))
    parsed = _parsed(data)
    layout = file_layout(parsed, data)
    assert layout is not None
    lengths = raw_data_bytes(data, layout)
    assert lengths == {0: len(parsed.graph.initializer[0].raw_data)} == {0: 256 * 256 * 9 * 4 - 4}  # w_small: 8 KB


def test_a_large_weight_short_of_data_is_refused_with_the_length_read_from_the_file(tmp_path: Path) -> None:
    model = _conv_model()
    weight = model.graph.initializer[0]
    weight.raw_data = weight.raw_data[:-4]
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError) as from_file:
        load_model(path)
    with pytest.raises(ModelError) as asked:  # the tensor asked for its data's length
        validate_model(model, path, tmp_path)
    assert str(from_file.value) == str(asked.value) == (
        f"{path}: graph.initializer[0] 'w_big': raw_data holds 2359292 bytes, its dims [256, 256, 3, 3] need 2359296")


@pytest.mark.parametrize("field", ["float_data", "raw_data"])
def test_an_external_weight_that_also_holds_values_is_refused(tmp_path: Path, field: str) -> None:
    """The checker is never given external data, only the weight's type: the loader refuses values held beside it,
    as the checker would ("is stored externally and should not have data field")."""
    weight = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    (tmp_path / "w.bin").write_bytes(weight.raw_data)
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value="w.bin")
    if field == "float_data":
        weight.float_data.extend([1.0, 2.0, 3.0, 4.0])
    else:
        weight.raw_data = b"\0" * 16
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", F32, [2, 2])],
                              [helper.make_tensor_value_info("y", F32, [2, 2])], initializer=[weight])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with pytest.raises(ModelError) as refused:
        load_model(path)
    assert str(refused.value) == \
        f"{path}: graph.initializer[0] 'w': external data and values in {field}: a tensor's values are in one place"


def test_a_weight_the_files_cut_types_is_field_checked_even_where_protobuf_would_encode_it_smaller(
        tmp_path: Path) -> None:
    """The checker's cut types an initializer by its size in the file; the value-field check must see the same
    size: here the file writes the weight's dims unpacked and its data type as an overlong varint, over 16,384
    bytes, where protobuf's (minimal) encoding is 16,384, the limit. Its values are in two fields: refused."""
    raw = np.ones((2, 2045), np.float32).tobytes()[:-4]  # 16,360 bytes: one float is in float_data
    crafted = b"".join([
        b"\x08\x82\x80\x80\x80\x00", b"\x08\xfd\x0f",  # dims 2, 2045 (unpacked; the 2 as an overlong varint)
        b"\x10\x81\x80\x80\x00",  # data_type 1 (FLOAT), overlong
        wire.length_delimited(8, b"w_edge_abc"), wire.length_delimited(4, np.float32(1).tobytes()),
        wire.length_delimited(TENSOR_RAW_DATA, raw)])
    big = numpy_helper.from_array(np.zeros((2, 150_000), np.float32), "w_big")  # 1.2 MB: the model is over 1 MB
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w_edge_abc"], ["y"]),
         helper.make_node("MatMul", ["x", "w_big"], ["z"])], "g",
        [helper.make_tensor_value_info("x", F32, [1, 2])],
        [helper.make_tensor_value_info("y", F32, [1, 2045]), helper.make_tensor_value_info("z", F32, [1, 150_000])])
    top = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    top.ClearField("graph")
    data = top.SerializeToString() + wire.length_delimited(7, b"".join([
        graph.SerializeToString(), wire.length_delimited(5, crafted),
        wire.length_delimited(5, big.SerializeToString())]))
    parsed = _parsed(data)
    layout = file_layout(parsed, data)
    assert layout is not None
    span = layout.initializers[0]
    assert parsed.graph.initializer[0].ByteSize() == 16_384 < span.end - span.value
    assert len(data) > _CHECKER_WHOLE_MAX_BYTES
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(ModelError) as refused:
        load_model(path)
    assert str(refused.value) == \
        f"{path}: graph.initializer[0] 'w_edge_abc': values in raw_data, float_data: a tensor holds them in one field"


# ----------------------------------------------------------------------------------------------------------------
# The loader parses a big model without its large weights' values (validate.without_large_raw_data): protobuf copies
# every byte it parses, and loading never reads those values.


def _saved(tmp_path: Path, model: onnx.ModelProto, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def test_a_big_models_large_weight_is_parsed_without_its_values_and_costed_from_its_dims(tmp_path: Path) -> None:
    import hashlib

    from layerscope.model.load import _read_model

    path = _saved(tmp_path, _conv_model())
    read = _read_model(path)
    initializers = {t.name: t for t in read.model.graph.initializer}
    assert read.stripped == (0,)  # w_big: 256x256x3x3 = 589,824 elements; w_small (2,048) and b keep their values
    assert not initializers["w_big"].HasField("raw_data") and list(initializers["w_big"].dims) == [256, 256, 3, 3]
    assert len(initializers["w_small"].raw_data) == 8 * 256 * 4
    graph = load_model(path)
    assert graph.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()  # the file's, not the parsed bytes'
    c1 = next(n for n in graph.layers if n.id == "c1")
    assert graph.constants["w_big"].elements * 4 == 2_359_296  # 589,824 float32
    from layerscope.costs import cost_layer

    assert cost_layer(c1, graph).macs == 256 * 256 * 9 * 8 * 8  # Cout x Cin x 3x3 x an 8x8 output = 37,748,736


def test_a_small_model_is_parsed_whole(tmp_path: Path) -> None:
    from layerscope.model.load import _read_model

    path = _saved(tmp_path, _conv_model(big_channels=16))  # w_big 16x256x3x3 = 36,864 elements, 147 KB
    assert path.stat().st_size <= _CHECKER_WHOLE_MAX_BYTES
    assert _read_model(path).stripped == ()


@pytest.mark.parametrize(("change", "message"), [
    ("short", "raw_data holds 2359292 bytes, its dims [256, 256, 3, 3] need 2359296"),
    ("two-fields", "values in raw_data, float_data"),
])
def test_a_large_weight_parsed_without_its_values_is_still_checked(tmp_path: Path, change: str, message: str) -> None:
    model = _conv_model()
    w_big = model.graph.initializer[0]
    if change == "short":
        w_big.raw_data = w_big.raw_data[:-4]
    else:
        w_big.float_data.append(1.0)
    path = _saved(tmp_path, model)
    with pytest.raises(ModelError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_model(path)


def _data_dependent_model() -> onnx.ModelProto:
    """x -> Conv(w_big) -> t -> NonZero -> idx (its shape known only by running the model) -> Transpose -> y."""
    model = _conv_model()
    graph = model.graph
    graph.node.extend([helper.make_node("NonZero", ["t"], ["idx"], name="nz"),
                       helper.make_node("Transpose", ["idx"], ["idx_t"], name="tr")])
    graph.output.append(helper.make_tensor_value_info("idx_t", TensorProto.INT64, None))
    return model


def test_a_model_executed_for_its_shapes_runs_with_its_weights_read_again(tmp_path: Path) -> None:
    path = _saved(tmp_path, _data_dependent_model())
    graph = load_model(path)
    by_id = {n.id: n for n in graph.layers}
    assert by_id["nz"].shape_source == by_id["tr"].shape_source == "executed"
    shape = graph.tensors["idx"].shape
    assert shape[0] == 4 and shape[1] > 0  # one row per dim of t, one column per non-zero value


def test_a_file_changed_before_its_weights_are_read_again_is_refused(tmp_path: Path) -> None:
    from layerscope.model.load import _read_model, _with_weights
    from layerscope.model.validate import bytes_layout

    path = _saved(tmp_path, _conv_model())
    read = _read_model(path)
    layout = bytes_layout(path.read_bytes())
    assert layout is not None
    restored = _with_weights(read.model, path, read.sha256, read.stripped, layout)
    assert restored.graph.initializer[0].raw_data == _conv_model().graph.initializer[0].raw_data
    path.write_bytes(_conv_model(name="other").SerializeToString())
    with pytest.raises(ModelError, match="changed while it was being read"):
        _with_weights(read.model, path, read.sha256, read.stripped, layout)


def test_a_large_weight_with_a_negative_dim_is_parsed_whole_and_refused(tmp_path: Path) -> None:
    from layerscope.model.load import _read_model

    model = _conv_model()
    model.graph.initializer[0].dims[0] = -256
    path = _saved(tmp_path, model)
    assert _read_model(path).stripped == ()  # a dim the wire gives as 2^64 - 256: not read as a size
    with pytest.raises(ModelError, match=r"negative dim in \[-256, 256, 3, 3\]"):
        load_model(path)
