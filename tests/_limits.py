"""Run the ``layerscope`` CLI in a subprocess under a time and address-space limit.

Contract of :func:`run_limited`: the command runs as ``python -m layerscope ARGS`` with this checkout's
``src`` first on the path, ``RLIMIT_AS`` set to ``memory_bytes`` (so an allocation beyond it fails in
the child instead of swapping the machine), ``RLIMIT_CPU`` set to ``cpu_s`` (the 10 s budget is CPU
time, so that a loaded test machine does not make it flaky: the kernel kills the child with SIGXCPU,
exit -24) and killed after ``timeout_s`` of wall time. The result carries the exit code, the wall time
and stderr's lines; a wall-clock timeout is ``returncode`` ``None`` and ``timed_out``.

Tests of hostile inputs assert ``exit 2`` and one line naming the file and the field (or a correct
result) within the limits: :func:`assert_one_line_error` does the usual checks.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: Address space for the child: ~1.5 GB (the Python interpreter, numpy, onnx and onnxruntime
#: together map ~0.5 GB of it before any work starts).
MEMORY_BYTES = 1536 * 1024 * 1024
#: CPU-time budget of one run (user + system seconds).
CPU_S = 10
#: Wall-clock limit of one run: generous, the CPU budget is the real bound.
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Limited:
    """What a limited run did: ``returncode`` ``None`` when it was killed at ``timeout_s``."""

    returncode: int | None
    wall_s: float
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def _limit(memory_bytes: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_limited(args: Sequence[str], *, timeout_s: float = TIMEOUT_S, memory_bytes: int = MEMORY_BYTES,
                cpu_s: int = CPU_S, cwd: Path | None = None, env: dict[str, str] | None = None) -> Limited:
    """``layerscope ARGS`` in a child under ``RLIMIT_AS = memory_bytes`` and ``RLIMIT_CPU = cpu_s``,
    killed after ``timeout_s``."""
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join([str(SRC), child_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    child_env.setdefault("OMP_NUM_THREADS", "1")
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "layerscope", *args], check=False, capture_output=True,
                              text=True, timeout=timeout_s, cwd=cwd, env=child_env,
                              preexec_fn=lambda: _limit(memory_bytes, cpu_s))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return Limited(None, time.perf_counter() - start, out, err)
    return Limited(done.returncode, time.perf_counter() - start, done.stdout, done.stderr)


def assert_one_line_error(result: Limited, *words: str, code: int = 2) -> str:
    """``result`` exited ``code`` in time with exactly one stderr line containing every one of ``words``."""
    assert not result.timed_out, f"timed out after {result.wall_s:.1f} s; stderr: {result.stderr[-500:]}"
    assert result.returncode != -24, f"over the CPU budget (SIGXCPU) after {result.wall_s:.1f} s"
    lines = result.error_lines
    assert result.returncode == code, f"exit {result.returncode}, expected {code}; stderr: {result.stderr[-800:]}"
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {result.stderr[-800:]}"
    line = lines[0]
    assert "Traceback" not in line and "internal error" not in line, line
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"
    return line
