"""An interrupt at a moment of start-up or work: ``profile`` and ``bisect`` signalled after a fixed delay (the
moments ``benchmarks/hostile.py`` tries ten of, here three: start-up with the runtime's import, model loading and
warm-up, measuring) exit 128 + the signal's number (or 0 when they finished first), print no traceback and leave
nothing in their ``TMPDIR``.

Each command is a child process with a ``TMPDIR`` of its own, on a chain of six small convolutions.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests._cli_subprocess import cli_env, start_cli

from conftest import conv_chain


@pytest.fixture(scope="module")
def runtime_leftovers(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What importing onnxruntime itself leaves in ``TMPDIR``: not layerscope's to remove."""
    folder = tmp_path_factory.mktemp("ort-tmp")
    subprocess.run([sys.executable, "-c", "import layerscope, onnxruntime"], env=cli_env({"TMPDIR": str(folder)}),
                   check=True)
    return {p.name for p in folder.iterdir()}


def _command(name: str, folder: Path) -> list[str | Path]:
    model = folder / "chain.onnx"
    model.write_bytes(conv_chain(6))
    if name == "profile":
        return ["profile", model, "--runs", "400", "--warmup", "5", "--top", "0", "-o", folder / "p.json"]
    return ["bisect", model, "--segments", "3", "--no-cache", "-o", folder / "b.json"]


@pytest.mark.parametrize("command", ["profile", "bisect"])
@pytest.mark.parametrize(("signum", "after_s"), [(signal.SIGINT, 0.3), (signal.SIGTERM, 1.0), (signal.SIGINT, 2.0)],
                         ids=["SIGINT-0.3s", "SIGTERM-1.0s", "SIGINT-2.0s"])
def test_an_interrupt_at_a_moment_exits_cleanly(command: str, signum: int, after_s: float, tmp_path: Path,
                                                runtime_leftovers: set[str]) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    started = start_cli(_command(command, tmp_path), tmp_path / "io", env={"TMPDIR": str(tmp)})
    deadline = time.monotonic() + after_s
    while started.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if started.proc.poll() is None:
        started.proc.send_signal(signum)
    result = started.finish()
    assert result.returncode in (0, 128 + signum), result.describe()
    assert "Traceback" not in result.err and "internal error" not in result.err, result.describe()
    if result.returncode:
        assert len(result.err_lines) == 1 and result.err_lines[0].startswith("layerscope: "), result.describe()
    assert sorted(p.name for p in tmp.rglob("*") if p.name not in runtime_leftovers) == []



#: A child that sends itself SIGINT while ``layerscope.cli.main`` is being imported (an import hook runs first),
#: then enters the command line as the console script does.
_INTERRUPTED_IMPORT = """
import os, signal, sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "layerscope.cli.main":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
from layerscope.cli.start import entry
entry()
"""


def test_ctrl_c_while_the_command_line_is_imported_ends_quietly() -> None:
    """Ctrl-C while the interpreter imports the command line (before :func:`layerscope.cli.main.main` installs its
    handlers) ends the process as Ctrl-C's default action does (status -2: 130 in a shell), without Python's
    traceback of a ``KeyboardInterrupt`` raised inside an import."""
    result = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT, "--version"], env=cli_env(None),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == -signal.SIGINT, (result.returncode, result.stderr)
    assert result.stderr == ""
