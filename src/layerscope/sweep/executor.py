"""Scheduling a sweep's cells: on Ray (a local runtime started here, or an existing cluster), or in this process.

Contract:
- cells whose run file exists are skipped (:func:`layerscope.sweep.tasks.is_done`); the others run, and each
  result is written by this driver as it arrives, so a sweep killed at any point keeps every cell that finished
  and a rerun completes the rest;
- a cell that fails is recorded (``failed/<key>.json``) and the sweep goes on; a Ray worker that dies while
  running a cell is retried :data:`MAX_RETRIES` times by Ray, then recorded as failed;
- measuring (``profile``) cells ask for one unit of the Ray resource :data:`MEASURE_RESOURCE`; the local runtime
  gives each node one, so two measurements never share a machine, while estimate cells run in parallel (one CPU
  each) and all before the first measuring cell starts (no estimate disturbs a measurement of the same sweep).
  An existing cluster's nodes must declare it (``ray start ... --resources='{"layerscope_measure": 1}'``); a
  sweep with profile cells on a cluster without it is refused (``BackendUnavailable``) before anything runs;
- the temporary folders of the cells (a profile cell's optimized model and ONNX Runtime profile: hundreds of MB)
  lie under one root this driver makes (:func:`~layerscope.tempdirs.scratch` ``"sweep"``), each cell's in a folder
  of its own that the cell removes as it ends; the folder of a worker that died is removed as the sweep goes on
  (every :data:`REAP_S` seconds), and the root, with whatever is left in it, when the sweep ends however it ends
  (its last cell, Ctrl-C, SIGTERM, an error), after the Ray runtime is shut down. A worker on another machine
  than the driver keeps its cell's folder under its own temporary folder (removed by the cell, or, if the
  worker was killed, by the next layerscope command there that makes a temporary folder).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layerscope.errors import BackendUnavailable, InputError
from layerscope.sweep.plan import Cell
from layerscope.sweep.tasks import RUNNING, CellOutcome, failure, is_done, run_cell, store
from layerscope.tempdirs import remove_orphans, scratch

MEASURE_RESOURCE = "layerscope_measure"
#: Times Ray reruns a cell whose worker died (a crash, OOM kill, a lost node) before the cell counts as failed.
MAX_RETRIES = 2
#: Seconds between two looks, while Ray cells run, for the temporary folders of workers that died.
REAP_S = 5.0
#: Executors :func:`run_sweep` knows.
EXECUTORS = ("ray", "inline")

#: on_done(outcome, finished, total): called in the driver as each cell ends (outcome without its document).
OnDone = Callable[[CellOutcome, int, int], None]


@dataclass(frozen=True)
class SweepOutcome:
    """What one invocation did: cells skipped as done, cells run now (ok or failed, in completion order)."""

    skipped: tuple[str, ...]
    finished: tuple[CellOutcome, ...]

    @property
    def failed(self) -> tuple[CellOutcome, ...]:
        return tuple(o for o in self.finished if not o.ok)


def run_sweep(cells: Sequence[Cell], out_dir: Path, *, executor: str = "ray", address: str | None = None,
              num_cpus: int | None = None, on_done: OnDone | None = None) -> SweepOutcome:
    """Run the cells of ``cells`` not done yet under ``out_dir`` (see the module docstring)."""
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
    todo = [c for c in cells if not is_done(out_dir, c)]
    skipped = tuple(c.key for c in cells if is_done(out_dir, c))
    finished: list[CellOutcome] = []

    def done(cell: Cell, outcome: CellOutcome) -> None:
        kept = store(out_dir, cell, outcome)
        finished.append(kept)
        if on_done is not None:
            on_done(kept, len(finished), len(todo))

    if todo:
        with scratch("sweep") as root:
            if executor == "inline":
                for cell in todo:
                    done(cell, run_cell(cell, str(out_dir), root))
            else:
                _on_ray(todo, out_dir, address, num_cpus, done, root=root)
    return SweepOutcome(skipped=skipped, finished=tuple(finished))


def _on_ray(todo: Sequence[Cell], out_dir: Path, address: str | None, num_cpus: int | None,
            done: Callable[[Cell, CellOutcome], None], *, root: str) -> None:
    try:
        import ray
    except ImportError:
        raise BackendUnavailable("the sweep runs its cells on Ray, which is not installed",
                                 hint="pip install 'ray>=2.9', or run with --no-ray") from None
    started_here = False
    if not ray.is_initialized():
        handlers = _signal_handlers()
        try:
            if address:
                ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
            else:
                ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                         resources={MEASURE_RESOURCE: 1}, logging_level=logging.WARNING, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray runtime"
            raise BackendUnavailable(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None
        _restore(handlers)  # ray.init installs its own SIGTERM handler, which would end the driver with exit 1
        started_here = True
    try:
        if any(c.mode == "profile" for c in todo) and ray.cluster_resources().get(MEASURE_RESOURCE, 0) < 1:
            raise BackendUnavailable(
                f"the Ray cluster has no {MEASURE_RESOURCE!r} resource for measuring cells",
                hint=f"start each node with ray start ... --resources='{{\"{MEASURE_RESOURCE}\": 1}}'")
        remote: Any = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(run_cell)
        # estimate cells first, all in parallel; then the measuring cells, which so share no machine with them
        for phase in ("estimate", "profile"):
            pending: dict[Any, Cell] = {}
            for cell in (c for c in todo if c.mode == phase):
                # measuring cells also take the one measuring slot of their node
                options: dict[str, Any] = {"num_cpus": 1, **(
                    {"resources": {MEASURE_RESOURCE: 1}} if cell.mode == "profile" else {})}
                pending[remote.options(**options).remote(cell, str(out_dir), root)] = cell
            try:
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=REAP_S)
                    remove_orphans(root, grace_s=0.0)  # the cell folders of workers that died (this machine's)
                    for ref in ready:
                        cell = pending.pop(ref)
                        try:
                            outcome = ray.get(ref)
                        except ray.exceptions.RayError as exc:  # its worker died MAX_RETRIES + 1 times, or left
                            outcome = failure(cell, exc)
                        done(cell, outcome)
            except KeyboardInterrupt:
                # what is done stays done; the cells still queued or running end with this driver (Ray stops a
                # job's tasks when its driver leaves; `ray.cancel(force=True)` here crashed Ray 2.60's driver when
                # a task completed at the same moment). Their markers go now; one a task writes in the moment
                # before it is stopped is replaced when the rerun runs that cell.
                for cell in pending.values():
                    (out_dir / RUNNING / f"{cell.key}.json").unlink(missing_ok=True)
                raise
    finally:
        if started_here:
            ray.shutdown()


def _signal_handlers() -> dict[int, Any]:
    """This process's Python handlers of SIGTERM and SIGHUP (the CLI's: they stop a command like Ctrl-C)."""
    numbers = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    return {number: signal.getsignal(number) for number in numbers}


def _restore(handlers: dict[int, Any]) -> None:
    """Set ``handlers`` again (only the main thread may; a handler Python did not set is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for number, handler in handlers.items():
        if handler is not None:
            signal.signal(number, handler)
