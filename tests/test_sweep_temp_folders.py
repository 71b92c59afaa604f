"""A sweep's temporary folders go on every exit path of its driver: a ``--no-ray`` sweep (its cells run in the
driver) stopped by SIGINT or SIGTERM while a profile cell has its optimized model and profile on disk leaves
nothing in its ``TMPDIR``; those folders lie in the cell's folder under the sweep's root while it runs.

Each sweep is a child process with a ``TMPDIR`` of its own (its only temporary folder), on squeezenet.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests._cli_subprocess import cli_env, start_cli
from tests.conftest import zoo


@pytest.fixture(scope="module")
def runtime_leftovers(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What importing onnxruntime itself leaves in ``TMPDIR``: not layerscope's to remove."""
    folder = tmp_path_factory.mktemp("ort-tmp")
    subprocess.run([sys.executable, "-c", "import layerscope, onnxruntime"], env=cli_env({"TMPDIR": str(folder)}),
                   check=True)
    return {p.name for p in folder.iterdir()}


def _profile_folders(tmp: Path) -> list[Path]:
    return [p for p in tmp.rglob("layerscope-profile-*") if p.is_dir()]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_sweep_stopped_in_a_profile_cell_leaves_no_temporary_folder(signum: int, tmp_path: Path,
                                                                      runtime_leftovers: set[str]) -> None:
    tmp, out = tmp_path / "tmp", tmp_path / "sweep"
    tmp.mkdir()
    args = ["sweep", "--no-ray", zoo("squeezenet"), "--mode", "profile", "--runs", "3", "--warmup", "40",
            "-o", out]
    started = start_cli(args, tmp_path / "io", env={"TMPDIR": str(tmp)})
    started.wait_until(lambda: bool(_profile_folders(tmp)))  # the profiled session's folder: its model, its trace
    (profiled,) = _profile_folders(tmp)
    started.proc.send_signal(signum)
    result = started.finish()
    # the profile's folder lay in the cell's, under the sweep's root: layerscope-sweep-p<PID>-*/layerscope-cell-...
    cell, root = profiled.parent, profiled.parent.parent
    assert cell.name.startswith("layerscope-cell-p") and root.name.startswith("layerscope-sweep-p")
    assert root.parent == tmp
    assert result.returncode == 128 + signum and "Traceback" not in result.err, result.describe()
    assert len(result.err_lines) == 1, result.describe()
    assert sorted(p.name for p in tmp.iterdir() if p.name not in runtime_leftovers) == []
    assert not (out / "running").exists() or not any((out / "running").iterdir())
