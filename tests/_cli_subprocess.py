"""Run the ``layerscope`` CLI in a child process, under a memory cap (``RLIMIT_AS``) and a timeout.

For tests that need what an in-process ``main()`` call cannot show: the exit status a shell sees, signals,
what reaches the terminal (stdout and stderr bytes), temporary files left behind. The child runs this
checkout's ``src`` with colour off (``NO_COLOR``, ``TERM=dumb``), a wide fixed terminal, no core dumps, and
the parent's environment otherwise (so the test's ``LAYERSCOPE_CACHE_DIR`` applies).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
#: Address-space cap of the child: ONNX Runtime and numpy reserve far more than they touch, so this is a
#: guard against a runaway allocation (a hostile shape), not a measure of what a command needs.
DEFAULT_MEMORY_BYTES = 6 * 1024**3
DEFAULT_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class CliResult:
    """What one finished run of the CLI left: its exit status and everything it wrote, undecoded."""

    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def err_lines(self) -> list[str]:
        """stderr's non-empty lines."""
        return [line for line in self.err.splitlines() if line.strip()]

    def describe(self) -> str:
        """The run for an assertion message."""
        return (f"layerscope {' '.join(self.args)} -> {self.returncode}\n--- stdout\n{self.out[-3000:]}\n"
                f"--- stderr\n{self.err[-3000:]}")


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the parent's, this checkout first on ``PYTHONPATH``, colour off, ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env.update({"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200", "LINES": "50", "PYTHONUNBUFFERED": "1"})
    env.pop("FORCE_COLOR", None)
    env.update(extra or {})
    return env


#: The child's first statements: its limits, then ``python -m layerscope ARGS`` (``sys.argv[1]`` is the cap).
_LAUNCH = (
    "import resource, runpy, sys\n"
    "cap = int(sys.argv.pop(1))\n"
    "resource.setrlimit(resource.RLIMIT_AS, (cap, cap))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "sys.argv[0] = 'layerscope'\n"
    "runpy.run_module('layerscope', run_name='__main__', alter_sys=True)\n"
)


def command_line(args: Sequence[str], memory_bytes: int = DEFAULT_MEMORY_BYTES) -> list[str]:
    """``python -m layerscope ARGS`` under an address-space cap of ``memory_bytes`` and no core dumps."""
    return [sys.executable, "-c", _LAUNCH, str(memory_bytes), *map(str, args)]


def run_cli(args: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None,
            cwd: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
            memory_bytes: int = DEFAULT_MEMORY_BYTES) -> CliResult:
    """Run ``layerscope ARGS`` to completion; a run past ``timeout_s`` is killed and fails the test."""
    argv = [str(a) for a in args]
    try:
        proc = subprocess.run(command_line(argv, memory_bytes), check=False, env=cli_env(env), cwd=cwd,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"layerscope {' '.join(argv)} ran past {timeout_s} s\n{exc.stderr!r}")
    return CliResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Started:
    """A CLI run in progress whose output goes to files (no pipe to fill up and block it)."""

    args: tuple[str, ...]
    proc: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path

    def output(self) -> str:
        """stdout and stderr so far."""
        return self.stdout_path.read_text("utf-8", "replace") + self.stderr_path.read_text("utf-8", "replace")

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Poll ``predicate`` until it holds; fails the test when the process ends first or time runs out."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if self.proc.poll() is not None:
                pytest.fail(f"layerscope {' '.join(self.args)} ended ({self.proc.returncode}) before the "
                            f"condition held\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"condition not met within {timeout_s} s\n{self.output()[-3000:]}")
            time.sleep(0.05)

    def finish(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> CliResult:
        """Wait for the process to end; killed (and the test failed) past ``timeout_s``."""
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"layerscope {' '.join(self.args)} did not end within {timeout_s} s\n{self.output()[-3000:]}")
        return CliResult(self.args, code, self.stdout_path.read_bytes(), self.stderr_path.read_bytes())


def start_cli(args: Sequence[str | os.PathLike[str]], folder: Path, *, env: Mapping[str, str] | None = None,
              memory_bytes: int = DEFAULT_MEMORY_BYTES) -> Started:
    """Start ``layerscope ARGS`` in the background; its stdout and stderr go to files in ``folder``."""
    argv = [str(a) for a in args]
    folder.mkdir(parents=True, exist_ok=True)
    out, err = folder / "stdout.txt", folder / "stderr.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(command_line(argv, memory_bytes), env=cli_env(env), stdout=stdout, stderr=stderr,
                                stdin=subprocess.DEVNULL)
    return Started(tuple(argv), proc, out, err)
