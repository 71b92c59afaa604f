"""The model file's SHA-256 started before the loader runs (``layerscope.digest.prefetch``): the loader takes
it for the file it opens, and hashes again a file that changed since; the console entry starts it for the model of
a command that loads one; an in-process command line leaves the caller's collector as it was."""

from __future__ import annotations

import gc
import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.cli.start import hash_model
from layerscope.digest import THREAD_MIN_BYTES, Sha256, prefetch, sha256_file, started
from layerscope.model import load_model


def _model(seed: int) -> onnx.ModelProto:
    """One 3x3 convolution of 256 x 128 float32 weights (1.2 MB: hashed on a thread, read sparsely)."""
    weight = numpy_helper.from_array(
        np.random.default_rng(seed).standard_normal((256, 128, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256, 8, 8])],
                              initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _write(path: Path, seed: int) -> str:
    data = _model(seed).SerializeToString()
    assert len(data) >= THREAD_MIN_BYTES
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_a_file_hashed_at_once_and_on_a_thread_gives_the_hash_of_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    expected = _write(path, 3)
    assert sha256_file(path) == expected
    assert Sha256(path=path, stat=os.stat(path)).hexdigest() == expected


def test_a_prefetched_hash_is_the_files_and_is_handed_out_once(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    expected = _write(path, 0)
    prefetch(str(path))
    digest = started(path)
    assert isinstance(digest, Sha256)
    assert digest.hexdigest() == expected
    assert started(path) is None


def test_a_hash_prefetched_by_the_path_as_typed_is_handed_to_the_path_as_the_command_line_reads_it(
        tmp_path: Path) -> None:
    """The console entry sees the argument as typed (``dir//m.onnx``); the command hands on a ``pathlib`` path."""
    path = tmp_path / "m.onnx"
    expected = _write(path, 0)
    prefetch(f"{tmp_path}//m.onnx")
    digest = started(Path(f"{tmp_path}//m.onnx"))
    assert digest is not None and digest.hexdigest() == expected


@pytest.mark.parametrize("case", ["small", "missing", "folder"])
def test_nothing_is_prefetched_for_a_small_file_a_missing_one_or_a_folder(tmp_path: Path, case: str) -> None:
    path = tmp_path / "m.onnx"
    if case == "small":
        path.write_bytes(b"x" * 100)
    elif case == "folder":
        path.mkdir()
    prefetch(str(path))
    assert started(path) is None


def test_the_loader_takes_a_prefetched_hash_of_the_file_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    expected = _write(path, 0)
    prefetch(str(path))
    graph = load_model(path, digest=started(path))
    assert graph.sha256 == expected == load_model(path).sha256


def test_a_file_rewritten_after_its_hash_was_started_is_hashed_again(tmp_path: Path) -> None:
    """The hash started of the first file is of other bytes: the loader's run records the second file's."""
    path = tmp_path / "m.onnx"
    _write(path, 0)
    prefetch(str(path))
    early = started(path)
    assert early is not None
    replacement = tmp_path / "new.onnx"
    expected = _write(replacement, 1)
    os.replace(replacement, path)  # another inode, as an exporter writing atomically leaves it
    assert load_model(path, digest=early).sha256 == expected


@pytest.mark.parametrize(("argv", "hashed"), [
    (["estimate", "{m}", "-t", "rdk-s100"], True),
    (["--debug", "estimate", "-t", "rdk-s100", "{m}", "-o", "run.json"], True),
    (["profile", "{m}"], True),
    (["report", "run.json"], False),
    (["compare", "{m}", "{m}"], False),
    (["estimate", "{m}.txt"], False),
])
def test_the_console_entry_hashes_the_model_of_a_command_that_loads_one(
        tmp_path: Path, argv: list[str], hashed: bool) -> None:
    path = tmp_path / "m.onnx"
    expected = _write(path, 0)
    hash_model([arg.replace("{m}", str(path)) for arg in argv])
    digest = started(path)
    assert (digest is not None) is hashed
    if digest is not None:
        assert digest.hexdigest() == expected


def test_a_command_line_run_in_the_callers_process_leaves_its_collector_as_it_was(tmp_path: Path) -> None:
    """``gc.freeze`` is for the console entry's own process only (it ends with the command)."""
    from layerscope.cli.main import main

    path = tmp_path / "m.onnx"
    _write(path, 0)
    frozen = gc.get_freeze_count()
    assert main(["estimate", str(path), "-t", "rdk-s100", "-o", str(tmp_path / "run.json")]) == 0
    assert gc.get_freeze_count() == frozen
    assert gc.isenabled()
