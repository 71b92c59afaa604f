"""Model inputs: seeded random values per dtype, and files checked strictly against the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from conftest import F32, I64, ModelWriter, zoo
from layerscope.errors import InputError
from layerscope.measure.inputs import check_array, make_inputs, random_array, resolve_inputs
from layerscope.model import TensorInfo, load_model
from layerscope.samples import sample_path


def _image_model(write_model: ModelWriter, size: int = 8) -> Path:
    """One input ``images`` (1x3xSxS float32) -> Conv 3->4 3x3: the output depends on every input value."""
    weights = np.random.default_rng(7).standard_normal((4, 3, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["images", "w"], ["y"], pads=[1, 1, 1, 1])
    return write_model([node], [("images", F32, [1, 3, size, size])], [("y", F32, [1, 4, size, size])],
                       {"w": weights}, name=f"image{size}.onnx")


def _multi_model(write_model: ModelWriter) -> Path:
    """A picture and three token inputs, like a vision-language encoder: Conv, and Gathers on small tables."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["y"], pads=[1, 1, 1, 1]),
        helper.make_node("Gather", ["words", "input_ids"], ["emb"], axis=0),
        helper.make_node("Gather", ["types", "token_type_ids"], ["typ"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
    ]
    inits = {"w": rng.standard_normal((2, 3, 3, 3)).astype(np.float32),
             "words": rng.standard_normal((100, 4)).astype(np.float32),
             "types": rng.standard_normal((2, 4)).astype(np.float32)}
    return write_model(nodes, [("images", F32, [1, 3, 4, 4]), ("input_ids", I64, [1, 5]),
                               ("attention_mask", I64, [1, 5]), ("token_type_ids", I64, [1, 5])],
                       [("y", F32, None), ("emb", F32, None), ("typ", F32, None), ("m", F32, None)],
                       inits, name="multi.onnx")


def _run(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))


def _error(graph_path: Path, *specs: str) -> str:
    with pytest.raises(InputError) as info:
        make_inputs(load_model(graph_path), specs)
    assert info.value.exit_code == 2
    return str(info.value)


# --- random inputs ---------------------------------------------------------------------------------------------

def test_random_inputs_match_the_model_and_are_reproducible() -> None:
    graph = load_model(zoo("squeezenet"))
    a, b, c = make_inputs(graph), make_inputs(graph), make_inputs(graph, seed=1)
    x = a["data_0"]
    assert list(a) == ["data_0"]
    assert x.shape == (1, 3, 224, 224) and x.dtype == np.float32 and x.flags.c_contiguous
    assert x.min() >= 0.0 and x.max() < 1.0 and 0.45 < x.mean() < 0.55
    assert np.array_equal(x, b["data_0"])
    assert not np.array_equal(x, c["data_0"])


def test_random_values_per_dtype_and_name(write_model: ModelWriter) -> None:
    inputs = make_inputs(load_model(_multi_model(write_model)))
    assert inputs["images"].dtype == np.float32
    ids = inputs["input_ids"]
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 100
    assert np.array_equal(inputs["attention_mask"], np.ones((1, 5), np.int64))
    assert np.array_equal(inputs["token_type_ids"], np.zeros((1, 5), np.int64))
    assert random_array(TensorInfo("position_ids", (2, 4), "int64"), 0).tolist() == [[0, 1, 2, 3]] * 2
    pixels = random_array(TensorInfo("image", (4096,), "uint8"), 0)
    assert pixels.dtype == np.uint8 and pixels.min() < 10 and pixels.max() > 245
    flags = random_array(TensorInfo("keep", (64,), "bool"), 0)
    assert flags.dtype == np.bool_ and 0 < flags.sum() < 64
    assert random_array(TensorInfo("x", (8,), "float16"), 0).dtype == np.float16


def test_random_bert_inputs_are_valid_for_the_model() -> None:
    """Token ids within the vocabulary, type ids within its two types, mask all ones: the model runs."""
    path = sample_path("bert_tiny", seq_len=16)
    feeds = make_inputs(load_model(path))
    outputs = _run(path, feeds)
    assert outputs[0].shape == (1, 16, 128) and np.isfinite(outputs[0]).all()


def test_a_file_input_does_not_change_the_other_random_inputs(write_model: ModelWriter, tmp_path: Path) -> None:
    path = _multi_model(write_model)
    np.save(tmp_path / "img.npy", np.full((1, 3, 4, 4), 0.5, np.float32))
    alone = make_inputs(load_model(path))
    mixed = resolve_inputs(load_model(path), [f"images={tmp_path / 'img.npy'}"])
    assert np.array_equal(alone["input_ids"], mixed.arrays["input_ids"])
    assert mixed.sources["images"] == f"file {tmp_path / 'img.npy'}"
    assert mixed.sources["input_ids"] == ("random integers in [0, 100) (indices into axis 0 of 'words', 100 long, "
                                          "by Gather 'emb'), seed 0")


# --- files give the same outputs as the arrays fed to ONNX Runtime directly ---------------------------------------

def test_npy_npz_and_raw_inputs_feed_the_model_unchanged(write_model: ModelWriter, tmp_path: Path) -> None:
    path = _image_model(write_model)
    image = np.random.default_rng(11).random((1, 3, 8, 8)).astype(np.float32)
    expected = _run(path, {"images": image})[0]
    np.save(tmp_path / "x.npy", image)
    np.savez(tmp_path / "named.npz", images=image)
    np.savez(tmp_path / "other.npz", frame=image, spare=np.zeros(3))
    image.tofile(tmp_path / "x.bin")
    specs = [f"images={tmp_path / 'x.npy'}", f"images={tmp_path / 'named.npz'}", str(tmp_path / "named.npz"),
             f"images={tmp_path / 'other.npz'}:frame", f"images={tmp_path / 'x.bin'}", str(tmp_path / "x.bin"),
             str(tmp_path / "x.npy")]
    graph = load_model(path)
    for spec in specs:
        feeds = make_inputs(graph, [spec])
        assert np.array_equal(feeds["images"], image), spec
        np.testing.assert_array_equal(_run(path, feeds)[0], expected)


def test_one_npz_holds_every_input_by_name(write_model: ModelWriter, tmp_path: Path) -> None:
    path = _multi_model(write_model)
    arrays: dict[str, np.ndarray] = {
        "images": np.ones((1, 3, 4, 4), np.float32), "input_ids": np.arange(5, dtype=np.int64)[None],
        "attention_mask": np.array([[1, 1, 1, 0, 0]], np.int64),
        "token_type_ids": np.array([[0, 0, 1, 1, 1]], np.int64)}
    np.savez(tmp_path / "all.npz", **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle only
    feeds = make_inputs(load_model(path), [str(tmp_path / "all.npz")])
    for name, array in arrays.items():
        assert np.array_equal(feeds[name], array)
    for got, want in zip(_run(path, feeds), _run(path, arrays), strict=True):
        np.testing.assert_array_equal(got, want)


def test_big_endian_and_fortran_arrays_are_fed_as_native_c_order(write_model: ModelWriter) -> None:
    info = TensorInfo("images", (1, 3, 8, 8), "float32")
    value = np.asfortranarray(np.arange(192, dtype=">f4").reshape(1, 3, 8, 8))
    fed = check_array(value, info, "file x.npy")
    assert fed.dtype == np.dtype("float32") and fed.dtype.isnative and fed.flags.c_contiguous
    assert np.array_equal(fed, value)


# --- strict validation: exit 2 naming what was given and what the model expects ----------------------------------

def test_the_512_image_for_a_640_model_names_both_shapes(write_model: ModelWriter, tmp_path: Path) -> None:
    path = write_model([helper.make_node("Relu", ["images"], ["y"])], [("images", F32, [1, 3, 640, 640])],
                       [("y", F32, [1, 3, 640, 640])])
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 512, 512), np.float32))
    message = _error(path, f"images={tmp_path / 'x.npy'}")
    assert message == f"input 'images': file {tmp_path / 'x.npy'} has shape 1x3x512x512, the model expects 1x3x640x640"
    # the seed's case exactly: a raw 512x512 .bin for the 640x640 model
    np.zeros((1, 3, 512, 512), np.float32).tofile(tmp_path / "input_512x512.bin")
    message = _error(path, str(tmp_path / "input_512x512.bin"))
    assert "has 3145728 bytes, the model expects 4915200 (1x3x640x640 float32)" in message
    assert "fits 1x3x512x512 float32" in message


def test_float64_for_float32_says_how_to_convert(write_model: ModelWriter, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float64))
    message = _error(_image_model(write_model), f"images={tmp_path / 'x.npy'}")
    assert "has dtype float64, the model expects float32" in message
    assert "astype(np.float32)" in message


def test_shape_and_dtype_both_wrong_are_reported_together(write_model: ModelWriter, tmp_path: Path) -> None:
    np.savez(tmp_path / "x.npz", images=np.zeros((1, 8, 8, 3), np.uint8))
    message = _error(_image_model(write_model), str(tmp_path / "x.npz"))
    assert "has shape 1x8x8x3 and dtype uint8, the model expects 1x3x8x8 float32" in message


def test_raw_file_of_another_dtype_is_named(write_model: ModelWriter, tmp_path: Path) -> None:
    np.zeros((1, 3, 8, 8), np.uint8).tofile(tmp_path / "x.bin")
    message = _error(_image_model(write_model), f"images={tmp_path / 'x.bin'}")
    assert "has 192 bytes, the model expects 768 (1x3x8x8 float32); that size fits 1x3x8x8 uint8" in message


def test_npy_named_bin_is_recognised(write_model: ModelWriter, tmp_path: Path) -> None:
    with (tmp_path / "x.bin").open("wb") as fh:
        np.save(fh, np.zeros((1, 3, 8, 8), np.float32))
    assert "is an .npy file" in _error(_image_model(write_model), f"images={tmp_path / 'x.bin'}")


def test_unknown_input_name_lists_the_model_inputs(write_model: ModelWriter, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    message = _error(_image_model(write_model), f"img={tmp_path / 'x.npy'}")
    assert "the model has no input 'img'; its inputs: images (1x3x8x8 float32)" in message


def test_input_names_with_slashes_are_matched(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 224, 224), np.float32))
    feeds = make_inputs(load_model(zoo("resnet50")), [f"gpu_0/data_0={tmp_path / 'x.npy'}"])
    assert not feeds["gpu_0/data_0"].any()


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (None, "missing.npy", "no such file"),
        (b"not a numpy file at all", "x.npy", "is not a readable .npy file"),
        (b"PK\x03\x04 broken zip", "x.npz", "is not a readable .npz archive"),
        (b"", "x.npz", "is not a readable .npz archive"),
    ],
)
def test_missing_and_corrupt_files(write_model: ModelWriter, tmp_path: Path, content: bytes | None, name: str,
                                   message: str) -> None:
    if content is not None:
        (tmp_path / name).write_bytes(content)
    assert message in _error(_image_model(write_model), f"images={tmp_path / name}")


def test_pickled_object_arrays_are_refused(write_model: ModelWriter, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "allow_pickle" in _error(_image_model(write_model), f"images={tmp_path / 'x.npy'}")


def test_npz_selection_errors(write_model: ModelWriter, tmp_path: Path) -> None:
    path = _multi_model(write_model)
    np.savez(tmp_path / "two.npz", a=np.zeros(1), b=np.zeros(1))
    assert "has no array 'images' and holds several: a, b" in _error(path, f"images={tmp_path / 'two.npz'}")
    assert "has no array 'c'; it holds: a, b" in _error(path, f"images={tmp_path / 'two.npz'}:c")
    assert "holds array(s) a, b that are not inputs of the model" in _error(path, str(tmp_path / "two.npz"))


def test_bare_file_needs_a_name_when_the_model_has_several_inputs(write_model: ModelWriter, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 4, 4), np.float32))
    message = _error(_multi_model(write_model), str(tmp_path / "x.npy"))
    assert "the model has 4 inputs, say which this file feeds (NAME=FILE)" in message


def test_an_input_given_twice_is_an_error(write_model: ModelWriter, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    spec = f"images={tmp_path / 'x.npy'}"
    assert "input 'images' is given twice" in _error(_image_model(write_model), spec, spec)


def test_unsupported_input_dtype(write_model: ModelWriter) -> None:
    path = write_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                       [("x", TensorProto.BFLOAT16, [4])], [("y", F32, [4])])
    assert "input 'x' is bfloat16: layerscope cannot make or read arrays of that dtype" in _error(path)
