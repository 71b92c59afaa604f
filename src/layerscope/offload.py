"""A piece of work run in a forked child process, beside the caller's own: a second core's time, not less CPU.

Contract of :func:`started` (a context manager): it yields an :class:`Offload` whose child runs ``work`` (a function
returning bytes, or ``None`` when it has nothing to give) on a copy of the caller's memory as it is at the fork, or
``None`` when it does not fork: :func:`enable` was not called (the command line's console entry calls it: a process the
command line owns, which no other library shares; never a caller's process, a Ray worker or a test), not on Linux, one
usable CPU only (:func:`usable_cpus`: the affinity, and a container's CPU quota), ``when`` false, or the fork failed (a
process limit, memory). :meth:`Offload.result` waits for the child and gives its bytes, or ``None`` when the child
failed in any way (an exception, a signal, a crash): the caller then does the work itself, so that any failure is the
caller's own, with its own message. The child never runs the caller's signal handlers, ``atexit`` handlers or stream
buffers (``os._exit``); a stop (Ctrl-C) sent to the process group ends it. When the block ends, the child is killed if
it still runs and always reaped, a stop arriving meanwhile held (:func:`layerscope.interrupts.deferred`): no child
outlives the block, none is left a zombie.

``work`` must read only what the caller will not change until it reads the result back (the child sees the memory of
the fork), and must not take a lock another thread may hold at the fork: it runs alone in its process. The loader
uses it for ONNX's shape inference of a big model (:mod:`layerscope.model.load`); ``benchmarks/README.md`` gives what
it buys.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from layerscope import interrupts

_enabled = False


def enable() -> None:
    """Let :func:`started` fork from now on (the console entry of a process the command line owns)."""
    global _enabled  # noqa: PLW0603 -- set once, by the entry that owns the process
    _enabled = True


def available() -> bool:
    """Whether :func:`started` forks when asked: enabled, on Linux, with more than one usable CPU
    (:func:`usable_cpus`)."""
    return _enabled and sys.platform.startswith("linux") and hasattr(os, "fork") and usable_cpus() > 1


def usable_cpus(root: Path = Path("/")) -> int:
    """The CPUs this process may keep busy at once: those it may run on (its affinity), no more than its control
    group's CPU quota allows in whole CPUs (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``:
    a container's ``--cpus``), at least one. ``root``: where ``/proc`` and ``/sys`` are read from."""
    count = len(os.sched_getaffinity(0))
    quota = _cgroup_cpu_quota(root)
    return count if quota is None else max(1, min(count, math.floor(quota)))


def _cgroup_cpu_quota(root: Path) -> float | None:
    """This process's control group's CPU quota in CPUs, or ``None`` when none is set or none can be read."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, group = parts
        if controllers == "":  # v2: "0::/path"
            fields = _read_first(root / "sys/fs/cgroup", group, "cpu.max")
            if fields is not None and len(fields) == 2 and fields[0] != "max":
                return _ratio(fields[0], fields[1])
        elif "cpu" in controllers.split(","):  # v1: "4:cpu,cpuacct:/path"
            mount = root / "sys/fs/cgroup" / controllers
            quota = _read_first(mount, group, "cpu.cfs_quota_us")
            period = _read_first(mount, group, "cpu.cfs_period_us")
            if quota and period and quota[0] != "-1":
                return _ratio(quota[0], period[0])
    return None


def _read_first(mount: Path, group: str, name: str) -> list[str] | None:
    """The fields of the file ``name`` of the control group ``group`` under ``mount``, or of the mount's own (a
    container sees its group as the mount's root); ``None`` when neither can be read."""
    for folder in (mount / group.lstrip("/"), mount):
        try:
            return (folder / name).read_text().split()
        except OSError:
            continue
    return None


def _ratio(quota: str, period: str) -> float | None:
    """``quota / period`` as numbers, ``None`` when either is not a positive number."""
    try:
        value, over = float(quota), float(period)
    except ValueError:
        return None
    return value / over if value > 0 and over > 0 else None


class Offload:
    """A child process running a piece of work (:func:`started`)."""

    def __init__(self, pid: int, read_fd: int) -> None:
        self._pid: int | None = pid
        self._read_fd: int | None = read_fd
        self._result: bytes | None = None

    def result(self) -> bytes | None:
        """The child's bytes once it has ended, or ``None`` when it gave none (it failed, or was killed). Waits for
        it; later calls give the same."""
        if self._read_fd is not None:
            with open(self._read_fd, "rb", closefd=True) as pipe:
                self._read_fd = None
                data = pipe.read()
            status = self._reap()
            self._result = data[1:] if status == 0 and data[:1] == _DONE else None
        return self._result

    def close(self) -> None:
        """Kill the child if it still runs, reap it, close the pipe (a stop arriving meanwhile is held until the
        end)."""
        with interrupts.deferred():
            if self._read_fd is not None:
                os.close(self._read_fd)
                self._read_fd = None
            if self._pid is not None:
                with contextlib.suppress(ProcessLookupError):  # ended, not reaped yet
                    os.kill(self._pid, signal.SIGKILL)
                self._reap()

    def _reap(self) -> int:
        """Wait for the child; its exit code (negative: the signal that ended it; ``-1`` when reaped already)."""
        pid, self._pid = self._pid, None
        if pid is None:
            return -1
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


#: The first byte of what a child writes when its work gave bytes (an empty pipe: it gave none).
_DONE = b"\x01"


@contextlib.contextmanager
def started(work: Callable[[], bytes | None], *, when: bool = True) -> Iterator[Offload | None]:
    """``work`` run in a forked child (module docstring), or ``None`` when not forking; the child ended and reaped
    when the block ends."""
    pid = -1
    if when and available():
        try:
            read_fd, write_fd = os.pipe()
        except OSError:  # out of file descriptors: the caller does the work
            pass
        else:
            pid = _fork(read_fd, write_fd)
    if pid < 0:  # not forking, or the fork failed (a process limit, memory): the caller does the work
        yield None
        return
    if pid == 0:  # pragma: no cover -- the child: measured by the tests through its result
        _run_child(work, read_fd, write_fd)
    os.close(write_fd)
    offload = Offload(pid, read_fd)
    try:
        yield offload
    finally:
        offload.close()


def _fork(read_fd: int, write_fd: int) -> int:
    """``os.fork()``: the child's pid in the parent, 0 in the child; -1, the pipe closed, when the fork fails."""
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns of a fork beside threads: ``work`` takes no lock
            warnings.simplefilter("ignore", DeprecationWarning)
            return os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return -1


def _run_child(work: Callable[[], bytes | None], read_fd: int, write_fd: int) -> None:
    """The child's whole life: ``work``, its bytes written after :data:`_DONE`, then ``os._exit`` (0 when it gave
    bytes, 1 when not or on any error)."""
    code = 1
    try:
        os.close(read_fd)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        data = work()
        if data is not None:
            view = memoryview(_DONE + data)
            while view:
                view = view[os.write(write_fd, view):]
            code = 0
    except BaseException:  # the caller does the work itself: its failure is reported there
        code = 1
    finally:
        os._exit(code)
