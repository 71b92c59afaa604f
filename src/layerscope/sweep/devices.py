"""A pool of devices for ``bisect --devices a,b``: each device is a Ray resource, one job on it at a time.

Contract (:class:`RayDevicePool`, a :class:`layerscope.measure.differential.DevicePool`):
- device ``NAME`` is the Ray resource ``layerscope_device_NAME`` (one unit): a local Ray runtime started here
  declares one per device; an existing cluster (``--ray ADDRESS``) must have them on the nodes that reach each
  device (``ray start ... --resources='{"layerscope_device_board1": 1}'``), else ``BackendUnavailable``;
- every round's jobs are submitted at once; a round's jobs go to the devices in turn, starting one device
  further each round (a model meets every device over the rounds, so no segment is the difference of two fixed
  devices); each job is a Ray task holding its device's resource, so N devices time N models at once; a round's
  samples are handed back as soon as it and every round before it are done (what an interruption loses is the
  rounds still in flight);
- a job whose device fails (the command fails, or the worker or node dies) is retried on the next device; when
  every device failed it, the last error is raised (the samples of earlier rounds are already in the cache);
- with ``--compile-cmd``, every model a call times is compiled once before its first timing: the compile steps
  are Ray tasks of one CPU each and no device resource, so they fan out across the cluster's CPUs in parallel
  (a task lost with its worker or node is retried twice; a compile command that fails stops the bisect with its
  error); the devices then time the one compiled file (``{compiled}`` names the same path on every device);
- the model files are written by the driver: the workers must see the driver's work folder (one machine, or a
  shared file system).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from layerscope.errors import BackendUnavailable, InputError, LayerscopeError
from layerscope.measure.runners import CommandRunner, DeviceCommandError, Job

RESOURCE_PREFIX = "layerscope_device_"


def resource_name(device: str) -> str:
    return RESOURCE_PREFIX + device


def parse_devices(text: str) -> tuple[str, ...]:
    """``a,b`` -> ``("a", "b")``: names of letters, digits, ``.``, ``_`` and ``-``, each once."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", n)]
    if not names or bad:
        raise InputError(f"--devices {text!r}: expected NAME[,NAME...] of letters, digits, '.', '_', '-'")
    if len(set(names)) != len(names):
        raise InputError(f"--devices {text!r}: a device is named twice")
    return names


def _time(runner: CommandRunner, job: Job) -> float:
    return runner.measure(job)


def _compile(runner: CommandRunner, job: Job) -> None:
    runner.compile_job(job)


class RayDevicePool:
    """Times jobs on ``devices`` through copies of ``runner`` bound to each device (see the module docstring)."""

    def __init__(self, runner: CommandRunner, devices: Sequence[str], *, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise BackendUnavailable("--devices schedules on Ray, which is not installed",
                                     hint="pip install 'ray>=2.9'") from None
        self.ray = ray
        self.devices = tuple(devices)
        #: Compiles each model once, for every device (see the module docstring); the device runners do not.
        self.compiler = runner
        self.compiled: set[str] = set()
        self.runners = {d: CommandRunner(runner.run, runner.reader, timeout_s=runner.timeout_s, device=d,
                                         identity=runner.identity, shared_compiled=runner.compile is not None)
                        for d in self.devices}
        self.started_here = False
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
                else:
                    ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING,
                             log_to_driver=False, resources={resource_name(d): 1 for d in self.devices})
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"the Ray cluster at {address}" if address else "a local Ray runtime"
                raise BackendUnavailable(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None
            self.started_here = True
        have = ray.cluster_resources()
        missing = [d for d in self.devices if have.get(resource_name(d), 0) < 1]
        if missing:
            self.close()
            raise BackendUnavailable(f"the Ray cluster has no resource for device(s) {', '.join(missing)}",
                                     hint="start the node of each device with ray start ... "
                                          f"--resources='{{\"{resource_name(missing[0])}\": 1}}'")
        self.remote = ray.remote(max_retries=0)(_time)
        self.remote_compile = ray.remote(max_retries=2)(_compile)

    def compile_all(self, jobs: Sequence[Job]) -> None:
        """Compile every model of ``jobs`` not compiled yet, in parallel across the cluster (one CPU each)."""
        if self.compiler.compile is None:
            return
        todo = {job.key: job for job in jobs if job.key not in self.compiled}
        pending = {self.remote_compile.options(num_cpus=1).remote(self.compiler, job): job for job in todo.values()}
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    self.ray.get(ref)
                except (self.ray.exceptions.RayError, LayerscopeError) as exc:
                    raise self._give_up(exc, pending, f"--compile-cmd failed on {job.label}") from None
                self.compiled.add(job.key)

    def _submit(self, job: Job, device: str) -> Any:
        return self.remote.options(num_cpus=0, resources={resource_name(device): 1}).remote(self.runners[device], job)

    def measure_rounds(self, rounds: Sequence[tuple[int, Sequence[Job]]],
                       on_round: Callable[[int, list[float]], None]) -> None:
        self.compile_all([job for _, ordered in rounds for job in ordered])
        n = len(self.devices)
        tries: dict[tuple[int, int], int] = {}
        pending: dict[Any, tuple[int, int]] = {}
        jobs = {r: list(ordered) for r, ordered in rounds}
        for r, ordered in rounds:
            for i, job in enumerate(ordered):
                tries[(r, i)] = 0
                pending[self._submit(job, self.devices[(i + r) % n])] = (r, i)
        samples: dict[tuple[int, int], float] = {}
        order = [r for r, _ in rounds]
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1)
            for ref in ready:
                r, i = pending.pop(ref)
                try:
                    samples[(r, i)] = float(self.ray.get(ref))
                except (self.ray.exceptions.RayError, LayerscopeError) as exc:
                    tries[(r, i)] += 1
                    if tries[(r, i)] >= n:
                        raise self._give_up(exc, pending, f"every device failed {jobs[r][i].label}") from None
                    pending[self._submit(jobs[r][i], self.devices[(i + r + tries[(r, i)]) % n])] = (r, i)
            while order and all((order[0], i) in samples for i in range(len(jobs[order[0]]))):
                r = order.pop(0)
                on_round(r, [samples.pop((r, i)) for i in range(len(jobs[r]))])

    def _give_up(self, exc: BaseException, pending: Mapping[Any, object], what: str) -> LayerscopeError:
        """Cancel the tasks still ``pending``; the error to raise for a task's ``exc``: the layerscope error the task
        raised, else a :class:`DeviceCommandError` of ``what`` and the last line of Ray's message."""
        self._cancel(pending)
        cause = getattr(exc, "cause", None)
        if isinstance(cause, LayerscopeError):
            return cause
        return DeviceCommandError(f"{what}: {str(exc).strip().splitlines()[-1]}")

    def _cancel(self, pending: Mapping[Any, object]) -> None:
        for ref in pending:
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)

    def close(self) -> None:
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()
        self.started_here = False
