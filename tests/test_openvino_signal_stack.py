"""OpenVINO's compilation leaves the thread's alternate signal stack as it found it, so that a signal after an
OpenVINO bisect (dozens of models compiled and freed out of order) is handled, not a segmentation fault.

The signal is sent in a child process: a segmentation fault there fails the test instead of ending the test run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests._cli_subprocess import cli_env

from conftest import conv_chain
from layerscope.measure.session import SessionConfig
from layerscope.runtimes.openvino import signal_stack
from layerscope.runtimes.openvino.compile import OpenVinoOptions, compile_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the alternate stack is kept on Linux")


def _chain(path: Path) -> Path:
    path.write_bytes(conv_chain(6))
    return path


class _File:
    def __init__(self, path: Path) -> None:
        self.name, self.path = path.name, str(path)


def test_compiling_keeps_the_threads_alternate_signal_stack(tmp_path: Path) -> None:
    before = signal_stack.current()
    assert before is not None
    compiled = [compile_for(_File(_chain(tmp_path / "m.onnx")), SessionConfig(threads=1), OpenVinoOptions(),
                            profiling=False) for _ in range(3)]
    assert signal_stack.current() == before
    del compiled[1], compiled[0]  # freed in another order than made
    assert signal_stack.current() == before


#: A child that runs ``layerscope bisect --backend openvino`` in its own process (``main``), then handles SIGTERM.
_AFTER_BISECT = """
import os, signal, sys, time
from layerscope.cli.main import main
assert main(sys.argv[1:]) == 0
received = []
signal.signal(signal.SIGTERM, lambda number, frame: received.append(number))
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.2)
print("handled", received)
"""


def test_a_signal_after_an_openvino_bisect_is_handled(tmp_path: Path) -> None:
    model = _chain(tmp_path / "chain.onnx")
    result = subprocess.run([sys.executable, "-c", _AFTER_BISECT, "bisect", str(model), "--backend", "openvino",
                             "--segments", "3", "--no-cache", "-o", str(tmp_path / "b.json")],
                            env=cli_env({"TMPDIR": str(tmp_path)}), capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert f"handled [{int(signal.SIGTERM)}]" in result.stdout
