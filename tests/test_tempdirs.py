"""Temporary folders (:mod:`layerscope.tempdirs`): removed when their block ends, and a killed process's folders
removed by the next command that makes one, never a live process's, a recent one's or another form of folder; a
sweep cell's folders under its driver's root."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from onnx import TensorProto, helper
from tests._cli_subprocess import cli_env, run_cli

from layerscope import tempdirs
from layerscope.tempdirs import remove_orphans, scratch, scratch_under


def _dead_pid() -> int:
    """The PID of a process that has exited (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_scratch_folder_is_named_for_its_process_and_removed_on_the_way_out() -> None:
    with scratch("bisect") as folder:
        assert Path(folder).is_dir() and Path(folder).name.startswith(f"layerscope-bisect-p{os.getpid()}-")
    assert not Path(folder).exists()


def test_a_killed_process_folders_are_removed_and_nothing_else(tmp_path: Path) -> None:
    dead, old = _dead_pid(), time.time() - 2 * tempdirs.ORPHAN_GRACE_S
    orphan = tmp_path / f"layerscope-bisect-p{dead}-abc123"
    recent = tmp_path / f"layerscope-profile-p{dead}-def456"
    alive = tmp_path / f"layerscope-bisect-p{os.getppid()}-ghi789"
    other = tmp_path / f"something-p{dead}-jkl"
    for folder in (orphan, recent, alive, other):
        (folder / "model.onnx").parent.mkdir()
        (folder / "model.onnx").write_bytes(b"x" * 100)
    for folder in (orphan, alive, other):
        os.utime(folder, (old, old))
    assert remove_orphans(tmp_path) == [orphan]
    assert not orphan.exists() and recent.exists() and alive.exists() and other.exists()


def test_a_killed_run_leaves_a_folder_the_next_command_making_one_removes(tmp_path: Path) -> None:
    """A child making a scratch folder is killed with SIGKILL (no clean-up runs): the folder stays; ``estimate`` of
    a static model on an NPU profile (which makes no temporary folder; the host profile's probe would) leaves it,
    and the next command that makes one (``profile``) removes it once the grace period has passed."""
    env = cli_env({"TMPDIR": str(tmp_path)})
    child = subprocess.Popen([sys.executable, "-c", "from layerscope.tempdirs import scratch\nimport time\n"
                              "with scratch('bisect') as f:\n    print(f, flush=True)\n    time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    folder = Path(child.stdout.readline().strip())
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert folder.is_dir()  # nothing cleaned up after a SIGKILL
    old = time.time() - 2 * tempdirs.ORPHAN_GRACE_S
    os.utime(folder, (old, old))
    model = tmp_path / "relu.onnx"
    model.write_bytes(_relu_model())
    estimated = run_cli(["estimate", model, "--target", "rdk-x5", "--top", "0"], env={"TMPDIR": str(tmp_path)})
    assert estimated.returncode == 0, estimated.describe()
    assert folder.is_dir()  # estimate's start-up does not scan the temporary folder
    profiled = run_cli(["profile", model, "--runs", "2", "--warmup", "0", "--top", "0"], env={"TMPDIR": str(tmp_path)})
    assert profiled.returncode == 0, profiled.describe()
    assert not folder.exists()


def _relu_model() -> bytes:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_a_scratch_folder_under_a_parent_and_the_cell_folder_tempfile_uses(tmp_path: Path) -> None:
    """:func:`scratch_under` makes its folder under the root it is given and points :mod:`tempfile` at it while
    its block runs; a root this process cannot see (a driver on another machine) falls back to the temporary
    folder."""
    before = tempfile.tempdir
    with scratch_under(str(tmp_path), "cell") as cell:
        assert Path(cell).parent == tmp_path and Path(cell).name.startswith(f"layerscope-cell-p{os.getpid()}-")
        assert tempfile.gettempdir() == cell
        with tempfile.TemporaryDirectory() as inner, scratch("profile") as own:
            assert Path(inner).parent == Path(cell) and Path(own).parent == Path(cell)
    assert tempfile.tempdir == before and list(tmp_path.iterdir()) == []
    default = Path(tempfile.gettempdir())
    with scratch_under(str(tmp_path / "not-here")) as cell:
        assert Path(cell).parent == default
    assert not Path(cell).exists()


def test_a_dead_worker_folder_goes_at_once_with_no_grace(tmp_path: Path) -> None:
    """A sweep's driver removes the cell folders of its dead workers as it goes (``grace_s=0``), a live one's
    never."""
    dead = tmp_path / f"layerscope-cell-p{_dead_pid()}-abc"
    alive = tmp_path / f"layerscope-cell-p{os.getppid()}-def"
    for folder in (dead, alive):
        (folder / "ort.json").parent.mkdir()
        (folder / "ort.json").write_text("{}")
    assert remove_orphans(tmp_path) == []  # both recent: the default grace keeps them
    assert remove_orphans(tmp_path, grace_s=0.0) == [dead]
    assert alive.is_dir()


def test_remove_tree_of_a_missing_folder_is_done(tmp_path: Path) -> None:
    assert tempdirs.remove_tree(tmp_path / "never-made")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_bytes(b"x")
    assert tempdirs.remove_tree(tmp_path / "a") and not (tmp_path / "a").exists()


def test_a_stop_arriving_while_a_scratch_folder_is_removed_waits_for_the_removal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM arriving the moment the folder's removal starts, with the CLI's handlers installed: the removal
    finishes, then the stop is raised. The handler is called as the interpreter calls it when the signal arrives
    (the signal itself is not sent: this process holds other libraries' threads; tests/test_interrupt_moments.py
    signals child processes)."""
    from layerscope.cli.main import _signals_interrupt

    real_rmtree = tempdirs.shutil.rmtree

    def signalled_rmtree(path: str) -> None:
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        handler(signal.SIGTERM, None)  # what the interpreter runs at the next instruction once SIGTERM arrives
        real_rmtree(path)

    monkeypatch.setattr(tempdirs.shutil, "rmtree", signalled_rmtree)
    received: list[int] = []
    made: list[str] = []
    with _signals_interrupt(received), pytest.raises(KeyboardInterrupt), scratch("test") as folder:
        made.append(folder)
        Path(folder, "model.onnx").write_bytes(b"x")
    assert received == [signal.SIGTERM]
    assert not os.path.exists(made[0])
