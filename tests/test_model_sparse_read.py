"""The model file read without its large weights' values (layerscope.model.sparse_read): every byte the loader
reads is the file's, the layout is the one read from the whole file, and a file that changes while it is read is
refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.errors import ModelError
from layerscope.model import load_model
from layerscope.model.sparse_read import SPARSE_MIN_BYTES, SparseRead, read_sparse
from layerscope.model.validate import bytes_layout, raw_data_span, without_large_raw_data

F32 = TensorProto.FLOAT


def _model(*, text_weight: bool = False, int4_sized: bool = False) -> onnx.ModelProto:
    """Three convolutions whose weights are of each kind the reader meets: ``w_large`` (256x128x3x3 float32,
    294,912 elements, 1.2 MB: its values left unread), ``w_medium`` (32x128x3x3, 36,864 elements, 147 KB: over
    16 KB but at most 65,536 elements, read), ``w_small`` (8x32x1x1, 1 KB) and a bias; a Slice's and a Reshape's
    constants among them.
    ``text_weight``: a large initializer of strings too (never left unread). ``int4_sized``: ``w_large`` declared
    with dims of 2 x its elements (its raw_data then holds fewer bytes than the dims need: the reader still only
    reads its tags, the loader refuses it)."""
    rng = np.random.default_rng(1)
    w_large = numpy_helper.from_array(rng.standard_normal((256, 128, 3, 3)).astype(np.float32), "w_large")
    if int4_sized:
        w_large.dims[0] = 512
    w_medium = numpy_helper.from_array(rng.standard_normal((32, 128, 3, 3)).astype(np.float32), "w_medium")
    w_small = numpy_helper.from_array(rng.standard_normal((8, 32, 1, 1)).astype(np.float32), "w_small")
    bias = numpy_helper.from_array(np.zeros(8, np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    starts, ends, axes = (numpy_helper.from_array(np.array([v], np.int64), n)
                          for v, n in ((0, "starts"), (128, "ends"), (1, "axes")))
    initializers = [w_large, w_medium, w_small, bias, shape, starts, ends, axes]
    if text_weight:
        initializers.append(helper.make_tensor("names", TensorProto.STRING, [70_000], [b"n"] * 70_000))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w_large"], ["t0"], name="c1", pads=[1, 1, 1, 1]),
         helper.make_node("Slice", ["t0", "starts", "ends", "axes"], ["t"], name="half"),
         helper.make_node("Conv", ["t", "w_medium"], ["u"], name="c2", pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["u", "w_small", "b"], ["v"], name="c3"),
         helper.make_node("Reshape", ["v", "shape"], ["y"], name="flat")],
        "g", [helper.make_tensor_value_info("x", F32, [1, 128, 8, 8])],
        [helper.make_tensor_value_info("y", F32, [1, 512])], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")


def _read(path: Path) -> SparseRead | None:
    with path.open("rb", buffering=0) as f:
        return read_sparse(f, path.stat().st_size)


@pytest.mark.parametrize("text_weight", [False, True])
def test_every_byte_but_the_large_weights_values_is_the_files_and_the_layout_is_the_whole_files(
        tmp_path: Path, text_weight: bool) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_model(text_weight=text_weight).SerializeToString())
    data = path.read_bytes()
    assert len(data) > SPARSE_MIN_BYTES
    read = _read(path)
    assert read is not None
    layout = bytes_layout(data)
    assert read.layout == layout
    # one hole: w_large's 1,179,648 bytes of raw_data but the first few KB read with its dims and name (w_medium's
    # 147 KB and the strings are read)
    (start, end), = read.skipped
    assert layout is not None
    raw = raw_data_span(data, layout.initializers[0])
    assert raw is not None and raw.end - raw.value == 256 * 128 * 9 * 4
    assert raw.value <= start < raw.value + 8192 and end == raw.end
    assert read.data[start:end] == bytes(end - start) != data[start:end]
    assert read.data[:start] == data[:start] and read.data[end:] == data[end:]
    # what the loader parses is the same from either
    light = without_large_raw_data(read.data, read.layout)
    assert light is not None and light == without_large_raw_data(data, layout)
    assert light == (read.light, read.stripped) and read.stripped == (0,)


def test_a_file_that_leaves_nothing_out_is_read_whole(tmp_path: Path) -> None:
    model = _model()
    del model.graph.initializer[0]  # w_large: what is left is over 1 MB only with padding
    model.graph.doc_string = "d" * (SPARSE_MIN_BYTES + 1)
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert path.stat().st_size > SPARSE_MIN_BYTES and _read(path) is None
    small = tmp_path / "small.onnx"
    small.write_bytes(_model().SerializeToString()[:SPARSE_MIN_BYTES])
    assert _read(small) is None  # at most 1 MB: never walked


def test_a_graph_of_many_small_fields_before_its_large_weights_is_read_whole(tmp_path: Path) -> None:
    model = _model()
    graph = model.graph
    tail = graph.node[-1].output[0]
    for i in range(12_000):  # 12k Identity nodes of long names: ~3 MB of nodes before the weights
        graph.node.append(helper.make_node("Identity", [tail], [f"{'t' * 100}{i}"], name=f"{'n' * 100}{i}"))
        tail = graph.node[-1].output[0]
    graph.output[0].name = tail
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert _read(path) is None
    graph_read = load_model(path)  # read whole, its hash the file's all the same
    assert graph_read.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and len(graph_read.layers) == 12_005


def test_a_truncated_file_fails_to_read_as_a_whole_read_fails_to_parse(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    data = _model().SerializeToString()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        load_model(path)
    with path.open("rb", buffering=0) as f, pytest.raises(OSError, match="the file ended at byte"):
        read_sparse(f, len(data))  # the size asked before another process cut the file


def test_the_loaded_graph_is_the_one_a_whole_read_gives_and_its_hash_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from layerscope.model import sparse_read

    path = tmp_path / "m.onnx"
    path.write_bytes(_model().SerializeToString())
    sparse = load_model(path)
    assert sparse.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(sparse_read, "SPARSE_MIN_BYTES", 1 << 40)  # every file read whole
    whole = load_model(path)
    assert (sparse.sha256, sparse.layers, sparse.tensors, sparse.constants, sparse.folded) == \
        (whole.sha256, whole.layers, whole.tensors, whole.constants, whole.folded)
    assert [n.id for n in sparse.layers] == ["c1", "half", "c2", "c3", "flat"]
    assert sparse.tensors["y"].shape == (1, 512)


def test_a_weight_whose_dims_do_not_match_its_values_is_refused_as_from_a_whole_read(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_model(int4_sized=True).SerializeToString())
    assert _read(path) is not None
    with pytest.raises(ModelError, match=r"raw_data holds 1179648 bytes, its dims \[512, 128, 3, 3\] need 2359296"):
        load_model(path)


def test_a_file_written_while_it_is_hashed_is_refused(tmp_path: Path) -> None:
    from layerscope.digest import Sha256

    path = tmp_path / "m.onnx"
    path.write_bytes(_model().SerializeToString())
    before = os.stat(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))  # another writer, same size
    digest = Sha256(path=path, stat=before)
    with pytest.raises(ModelError, match="changed while it was being read"):
        digest.hexdigest()
    same = Sha256(path=path, stat=os.stat(path))
    assert same.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
