"""Work in a forked child (``layerscope.offload``), and the loader's shape inference made there: the same graph as
made in the process, a child that fails or is stopped never changes what the caller gets, and no child outlives
its block."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import conv_chain, zoo
from layerscope import offload
from layerscope.errors import ModelError
from layerscope.model import load
from layerscope.model.load import load_model
from layerscope.model.types import Graph


@pytest.fixture()
def enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """``offload`` enabled as the console entry enables it, for this test only (skipped where it never forks)."""
    if not sys.platform.startswith("linux") or offload.usable_cpus() < 2:
        pytest.skip("the child is forked on Linux with a second usable CPU only")
    monkeypatch.setattr(offload, "_enabled", True)


def _cgroups(root: Path, cgroup: str, files: dict[str, str]) -> Path:
    """A fake ``/proc/self/cgroup`` holding ``cgroup`` and control-group files under ``root/sys/fs/cgroup``."""
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup)
    for name, text in files.items():
        path = root / "sys/fs/cgroup" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux's CPU affinity")
@pytest.mark.parametrize(("cgroup", "files", "quota"), [
    ("0::/user.slice/job\n", {"user.slice/job/cpu.max": "150000 100000\n"}, 1),
    ("0::/\n", {"cpu.max": "max 100000\n"}, None),
    ("0::/in/a/namespace\n", {"cpu.max": "400000 100000\n"}, 4),  # the group's files at the mount's root
    ("4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n", {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "100000\n",
                                                         "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}, 1),
    ("1:cpu:/\n0::/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ("garbled\n", {}, None),
], ids=["v2-1.5-cpus", "v2-no-quota", "v2-namespaced", "v1-1-cpu", "v1-no-quota", "unreadable"])
def test_the_usable_cpus_are_capped_by_the_control_groups_quota(tmp_path: Path, cgroup: str, files: dict[str, str],
                                                                 quota: int | None) -> None:
    affinity = len(os.sched_getaffinity(0))
    usable = offload.usable_cpus(_cgroups(tmp_path, cgroup, files))
    assert usable == (affinity if quota is None else max(1, min(affinity, quota)))


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux's CPU affinity")
def test_a_quota_of_one_cpu_forks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _cgroups(tmp_path, "0::/\n", {"cpu.max": "100000 100000\n"})
    monkeypatch.setattr(offload, "_enabled", True)
    usable_cpus = offload.usable_cpus
    monkeypatch.setattr(offload, "usable_cpus", lambda: usable_cpus(root))
    with offload.started(lambda: b"x") as child:
        assert child is None


def test_nothing_is_forked_unless_enabled() -> None:
    with offload.started(lambda: b"x") as child:
        assert child is None


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("fails", ["pipe", "fork"])
def test_a_fork_that_fails_leaves_the_work_to_the_caller(monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    opened: list[int] = []
    pipe = os.pipe

    def counted_pipe() -> tuple[int, int]:
        fds = pipe()
        opened.extend(fds)
        return fds

    def refused(*args: object) -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")  # EAGAIN: a process limit

    monkeypatch.setattr(os, "pipe", refused if fails == "pipe" else counted_pipe)
    if fails == "fork":
        monkeypatch.setattr(os, "fork", refused)
    with offload.started(lambda: b"x") as child:
        assert child is None
    for fd in opened:  # the pipe made for the child is closed again
        with pytest.raises(OSError):
            os.fstat(fd)


@pytest.mark.usefixtures("enabled")
def test_the_child_gives_its_bytes_and_is_reaped() -> None:
    with offload.started(lambda: str(os.getpid()).encode()) as child:
        assert child is not None
        data = child.result()
        assert child.result() == data  # read once, kept
    assert data is not None
    pid = int(data)
    assert pid != os.getpid()
    with pytest.raises(ChildProcessError):  # reaped: no child of that pid is left, not even a zombie
        os.waitpid(pid, os.WNOHANG)


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize("work", [lambda: None, lambda: 1 / 0, lambda: os.kill(os.getpid(), 9)],
                         ids=["nothing", "an error", "killed"])
def test_a_child_that_gives_nothing_gives_none(work: object) -> None:
    with offload.started(work) as child:  # type: ignore[arg-type]
        assert child is not None
        assert child.result() is None


@pytest.mark.usefixtures("enabled")
def test_a_child_still_running_when_its_block_ends_is_killed_and_reaped(tmp_path: Path) -> None:
    marker = tmp_path / "pid"

    def work() -> bytes:
        marker.write_text(str(os.getpid()))
        time.sleep(60)
        return b"late"

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), offload.started(work):
        while not marker.exists() or not marker.read_text():
            time.sleep(0.01)
        raise KeyboardInterrupt  # a stop in the caller's block
    assert time.monotonic() - started < 30
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(marker.read_text()), 0)


def _model_file(tmp_path: Path, model: bytes | onnx.ModelProto) -> Path:
    path = tmp_path / "m.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return path


def _same_graph(a: Graph, b: Graph) -> None:
    assert list(a.tensors.items()) == list(b.tensors.items())  # the same infos, in the same order
    assert a.layers == b.layers
    assert a.folded == b.folded
    assert a.inputs == b.inputs and a.outputs == b.outputs
    assert a.assumptions == b.assumptions


def _dynamic_batch_model() -> onnx.ModelProto:
    """A convolution and a reshape of a batch-symbolic input: ``--dim``/``--shape`` decide its shapes."""
    weights = numpy_helper.from_array(np.full((4, 3, 3, 3), 0.1, dtype=np.float32), "w")
    shape = numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "flat"], ["y"])]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[weights, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.usefixtures("enabled")
@pytest.mark.parametrize(("model", "shapes", "dims"), [
    (conv_chain(40), None, None),
    (zoo("squeezenet"), None, None),
    (_dynamic_batch_model(), None, {"N": 3}),
    (_dynamic_batch_model(), {"x": (2, 3, 8, 8)}, None),
], ids=["conv-chain", "squeezenet", "dim", "shape"])
def test_the_loader_reads_the_childs_inference_and_gets_the_same_graph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: bytes | onnx.ModelProto | Path,
        shapes: dict[str, tuple[int, ...]] | None, dims: dict[str, int] | None) -> None:
    path = model if isinstance(model, Path) else _model_file(tmp_path, model)
    inferred_here: list[int] = []
    infer = load._infer

    def counted(*args: object, **kwargs: object) -> object:
        inferred_here.append(os.getpid())
        return infer(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(load, "OFFLOAD_MIN_NODES", 0)
    monkeypatch.setattr(load, "_infer", counted)
    offloaded = load_model(path, shapes, dims)
    assert os.getpid() not in inferred_here  # the child inferred (its own count is in its own memory)
    monkeypatch.setattr(offload, "_enabled", False)
    here = load_model(path, shapes, dims)
    assert inferred_here == [os.getpid()]
    _same_graph(offloaded, here)


@pytest.mark.usefixtures("enabled")
def test_a_child_that_fails_leaves_the_inference_to_the_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                ) -> None:
    path = _model_file(tmp_path, conv_chain(20))
    monkeypatch.setattr(load, "OFFLOAD_MIN_NODES", 0)
    monkeypatch.setattr(load, "_inferred_in_child", lambda *args, **kwargs: 1 / 0)
    _same_graph(load_model(path), load_model(path, None, None))


def test_an_inference_of_another_model_is_not_taken(tmp_path: Path) -> None:
    light = conv_chain(3)
    infos = load._infer(light, data_prop=True)
    data = load._infos_bytes(load._inference_key(light, True), infos)
    assert load._infos_from(data, light, True) == infos
    assert load._infos_from(data, light, False) is None
    assert load._infos_from(data, conv_chain(4), True) is None
    assert load._infos_from(None, light, True) is None


@pytest.mark.usefixtures("enabled")
def test_a_model_the_loader_refuses_is_refused_the_same_with_the_child(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    model = onnx.load_from_string(conv_chain(5))
    model.graph.node[3].output[0] = model.graph.node[1].output[0]  # one tensor written by two nodes
    path = _model_file(tmp_path, model)
    with pytest.raises(ModelError) as here:
        load_model(path)
    monkeypatch.setattr(load, "OFFLOAD_MIN_NODES", 0)
    with pytest.raises(ModelError) as offloaded:
        load_model(path)
    assert str(offloaded.value) == str(here.value)


def test_the_console_entry_enables_it_and_a_python_caller_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from layerscope.cli import main as cli_main

    monkeypatch.setattr(offload, "_enabled", False)
    monkeypatch.setattr(cli_main, "_ENDS_PROCESS", False)
    assert cli_main.main(["--version"]) == 0  # a Python caller's process: nothing forks
    assert not offload._enabled
    ended: list[int] = []
    monkeypatch.setattr(cli_main, "main", lambda: 0)
    monkeypatch.setattr(cli_main, "exit_now", ended.append)
    cli_main.entry()  # the console script's process
    assert offload._enabled and ended == [0]
