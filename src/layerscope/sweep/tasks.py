"""One cell's work, wherever it runs (a Ray worker or this process): run it through the Python API and hand the
run document back; the driver (:func:`store`) writes its run file, or an error record when it failed, so the output
folder need not be shared with the workers of a cluster.

Layout of a sweep's output folder (every file written atomically, so a killed task never leaves half a file):
- ``runs/<key>.json``: the run file of a cell that finished (exactly what ``Run.save`` writes); its presence is
  what "done" means when a sweep resumes;
- ``failed/<key>.json``: ``{"cell", "error", "error_type", "exit_code"}`` of a cell that failed; removed when the
  cell later succeeds;
- ``running/<key>.json``: ``{"host", "pid", "started_utc"}`` while a task runs the cell (who runs what, and a
  handle on a stuck worker); removed when it ends. Written by the worker, so on a cluster without a shared folder
  it lies on the worker's machine; a killed worker leaves it behind; it means nothing on resume, and a sweep that
  completes removes the markers of its done cells (here).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layerscope import interrupts
from layerscope.errors import LayerscopeError
from layerscope.fileio import write_atomic
from layerscope.sweep.plan import Cell
from layerscope.tempdirs import scratch_under

RUNS = "runs"
FAILED = "failed"
RUNNING = "running"


@dataclass(frozen=True)
class CellOutcome:
    """What a task returns for one cell: ``status`` ``"ok"`` with ``seconds`` and the run ``document`` (absent once
    the driver wrote it), or ``"failed"`` with the ``cell`` (its settings), ``error`` (one line), ``error_type`` and
    ``exit_code`` (the CLI's: 2 bad input, 3 unavailable backend, 1 anything else)."""

    key: str
    status: str
    seconds: float | None = None
    document: Mapping[str, Any] | None = None
    cell: Mapping[str, Any] | None = None
    error: str | None = None
    error_type: str | None = None
    exit_code: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def record(self) -> dict[str, Any]:
        """The error record ``failed/<key>.json`` holds: ``{"key", "status", "cell", "error", "error_type",
        "exit_code"}``."""
        return {"key": self.key, "status": self.status, "cell": dict(self.cell or {}), "error": self.error,
                "error_type": self.error_type, "exit_code": self.exit_code}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CellOutcome | None:
        """The outcome an error record describes, ``None`` when it is not one (a key missing or of a wrong type)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"document", "seconds"}
        try:
            outcome = cls(**{name: value for name, value in record.items() if name in names})
        except TypeError:
            return None
        typed = (isinstance(outcome.key, str) and isinstance(outcome.status, str)
                 and (outcome.error is None or isinstance(outcome.error, str))
                 and (outcome.exit_code is None or type(outcome.exit_code) is int))
        return outcome if typed else None


def run_path(out_dir: Path, cell: Cell) -> Path:
    return out_dir / RUNS / f"{cell.key}.json"


def failure_path(out_dir: Path, cell: Cell) -> Path:
    return out_dir / FAILED / f"{cell.key}.json"


def is_done(out_dir: Path, cell: Cell) -> bool:
    """A cell is done when its run file exists (run files are written atomically: present means complete)."""
    return run_path(out_dir, cell).is_file()


def run_cell(cell: Cell, out_dir: str | None = None, scratch_root: str | None = None) -> CellOutcome:
    """Run ``cell`` and return its :class:`CellOutcome`: ``ok`` with the run file's document; on a
    :class:`LayerscopeError` or any other exception return the error record with ``"status": "failed"`` (a task
    never raises for a bad cell, so one bad cell does not stop the sweep). A worker that dies does not return:
    its scheduler retries the cell or reports it. With ``out_dir`` (a folder this worker can write) the task
    also keeps ``running/<key>.json`` there while it runs. Every temporary folder the cell makes lies in one
    folder of its own (:func:`~layerscope.tempdirs.scratch_under` ``scratch_root``, the sweep's root when this
    machine has it), removed when the cell ends however it ends; a worker killed outright leaves it to the
    driver, which removes the root."""
    marker = Path(out_dir) / RUNNING / f"{cell.key}.json" if out_dir is not None else None
    try:  # the marker is written inside: a stop (Ctrl-C, SIGTERM) the moment it is written still removes it
        if marker is not None and not _mark_running(marker):
            marker = None
        start = time.perf_counter()
        with scratch_under(scratch_root):
            run = _run(cell)
        return CellOutcome(cell.key, "ok", seconds=round(time.perf_counter() - start, 3), document=run)
    except Exception as exc:
        if interrupts.caused(exc):  # a stop a library wrapped in an error of its own: the sweep stops, not the cell
            raise KeyboardInterrupt from exc
        return failure(cell, exc)
    finally:
        if marker is not None:
            with interrupts.deferred():
                marker.unlink(missing_ok=True)


def _mark_running(marker: Path) -> bool:
    """Write ``marker`` (this host, process and start time); ``False`` when it cannot be written (not our folder on
    this node: the marker is a convenience, not the result)."""
    try:
        write_atomic(marker, json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                         "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
    except LayerscopeError:
        return False
    return True


#: ONNX Runtime's exception classes (``onnxruntime.capi.onnxruntime_pybind11_state``) that mean the runtime
#: rejected the model or its inputs: bad input (exit 2), as the CLI reports them, not a failure of ours.
RUNTIME_REJECTIONS = frozenset({"Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NoSuchFile",
                                "NotImplemented"})


def exit_code_of(exc: BaseException) -> int:
    """The CLI's exit code for ``exc``: a :class:`LayerscopeError`'s own; 2 for an ONNX Runtime rejection that
    escaped unwrapped (:data:`RUNTIME_REJECTIONS`); 1 for anything else."""
    if isinstance(exc, LayerscopeError):
        return exc.exit_code
    kind = type(exc)
    return 2 if kind.__module__.startswith("onnxruntime") and kind.__name__ in RUNTIME_REJECTIONS else 1


def failure(cell: Cell, exc: BaseException) -> CellOutcome:
    """The outcome of ``cell`` failing with ``exc`` (``status`` ``failed``; ``exit_code`` as the CLI's:
    :func:`exit_code_of`)."""
    message = (str(exc) or type(exc).__name__).strip().splitlines()
    return CellOutcome(cell.key, "failed", cell=cell.to_dict(), error=message[0] if message else type(exc).__name__,
                       error_type=type(exc).__name__, exit_code=exit_code_of(exc))


def store(out_dir: Path, cell: Cell, outcome: CellOutcome) -> CellOutcome:
    """Write what a task returned: the run file (and drop an old error record), or the error record. Returns the
    outcome without its document (what the driver keeps in memory)."""
    if outcome.ok and outcome.document is not None:
        from layerscope.run import save_run
        from layerscope.runfile import as_run

        path = run_path(out_dir, cell)
        save_run(as_run(outcome.document, path), path)  # the worker's document, typed once where it is written
        failure_path(out_dir, cell).unlink(missing_ok=True)
        return dataclasses.replace(outcome, document=None)
    write_atomic(failure_path(out_dir, cell), json.dumps(outcome.record(), indent=1))
    return outcome


def load_failure(out_dir: Path, cell: Cell) -> CellOutcome | None:
    """The error record a previous sweep left for ``cell``, if any (unreadable records count as none)."""
    try:
        record = json.loads(failure_path(out_dir, cell).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return CellOutcome.from_record(record) if isinstance(record, dict) else None


def _run(cell: Cell) -> dict[str, Any]:
    """The run document of ``cell``: the use case its mode names, called as ``layerscope.estimate`` /
    ``layerscope.profile`` call it, as its file reads back."""
    from layerscope.workflows.common import Interrupted, checked_shapes

    shapes = checked_shapes({name: list(dims) for name, dims in cell.shapes})
    if cell.mode == "estimate":
        from layerscope.workflows.estimate import EstimateRequest, estimate

        document = estimate(EstimateRequest(cell.model, target=cell.target, shapes=shapes, dtype=cell.dtype)).document()
    else:
        from layerscope.workflows.profile import ProfileRequest, profile

        result = profile(ProfileRequest(cell.model, target=cell.target, shapes=shapes, runs=cell.runs or 20,
                                        warmup=cell.warmup if cell.warmup is not None else 5,
                                        threads=cell.threads or 0, opt_level=cell.opt_level or "all"))
        if result.interrupted:
            raise Interrupted(result.run, "interrupted")
        document = result.run.to_json()
    saved: dict[str, Any] = json.loads(json.dumps(document, allow_nan=False))
    return saved
