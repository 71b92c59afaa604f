"""Run the ``layerscope`` CLI in a subprocess under a time and address-space limit.

Contract of :func:`run_limited`: the command runs as ``python -m layerscope ARGS`` with this checkout's
``src`` first on the path, ``RLIMIT_AS`` set to ``memory_bytes`` (so an allocation beyond it fails in
the child instead of swapping the machine) and killed after ``timeout_s``. The result carries the exit
code, the wall time and stderr's lines; a timeout is ``returncode`` ``None`` and ``timed_out``.

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
#: Wall-clock budget of one run.
TIMEOUT_S = 10.0


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


def _limit(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_limited(args: Sequence[str], *, timeout_s: float = TIMEOUT_S, memory_bytes: int = MEMORY_BYTES,
                cwd: Path | None = None, env: dict[str, str] | None = None) -> Limited:
    """``layerscope ARGS`` in a child under ``RLIMIT_AS = memory_bytes``, killed after ``timeout_s``."""
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join([str(SRC), child_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    child_env.setdefault("OMP_NUM_THREADS", "1")
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "layerscope", *args], check=False, capture_output=True,
                              text=True, timeout=timeout_s, cwd=cwd, env=child_env,
                              preexec_fn=lambda: _limit(memory_bytes))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return Limited(None, time.perf_counter() - start, out, err)
    return Limited(done.returncode, time.perf_counter() - start, done.stdout, done.stderr)


def assert_one_line_error(result: Limited, *words: str, code: int = 2) -> str:
    """``result`` exited ``code`` in time with exactly one stderr line containing every one of ``words``."""
    assert not result.timed_out, f"timed out after {result.wall_s:.1f} s; stderr: {result.stderr[-500:]}"
    lines = result.error_lines
    assert result.returncode == code, f"exit {result.returncode}, expected {code}; stderr: {result.stderr[-800:]}"
    assert len(lines) == 1, f"expected one line, got {len(lines)}: {result.stderr[-800:]}"
    line = lines[0]
    assert "Traceback" not in line and "internal error" not in line, line
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"
    return line
