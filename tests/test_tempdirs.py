"""Temporary folders (:mod:`layerscope.tempdirs`): removed when their block ends, and a killed process's folders
removed by the next command, never a live process's, a recent one's or another form of folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from layerscope import tempdirs
from layerscope.tempdirs import remove_orphans, scratch


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


def test_a_killed_run_leaves_a_folder_the_next_command_removes(tmp_path: Path) -> None:
    """A child making a scratch folder is killed with SIGKILL (no clean-up runs): the folder stays, and the next
    command's start (the CLI calls :func:`remove_orphans`) removes it once the grace period has passed."""
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(Path(tempdirs.__file__).parents[1]))
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
    done = subprocess.run([sys.executable, "-m", "layerscope", "schema", "-o", str(tmp_path / "s.json")], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert not folder.exists()
