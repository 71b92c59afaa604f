"""Reconcile: k = measured / estimated for the same part of the model, per run and across runs (``layerscope
reconcile``, ``layerscope.reconcile``).

Per run: the estimate scaled by k against the measurement per layer, k per op type, rank agreement, a verdict
(:mod:`layerscope.analysis.reconcile`); across several runs, the spread of k and what drives it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from layerscope.analysis.reconcile import KSpread, Reconciliation, k_spread, reconcile_run, reconcile_section
from layerscope.runfile.commands import written_by
from layerscope.runfile.derived import runtime_name
from layerscope.runfile.io import load
from layerscope.runfile.models import Reconcile, RunFile
from layerscope.workflows.common import QUIET, Hooks, PathLike


@dataclass(frozen=True)
class ReconcileRequest:
    """``layerscope reconcile``'s options: the run files (each with an estimate and a measurement of the same part
    of the model)."""

    runs: tuple[PathLike, ...]


@dataclass(frozen=True)
class ReconcileResult:
    """Per run of the request, in its order: the run with its ``reconcile`` section (the spread across the runs in
    it when there are several) and the reconciliation the terminal report shows; ``spread``: k across the runs
    (``None`` for one run; each run named ``model (runtime)``); ``runtimes``: per run, what measured it in a few
    words (:func:`runtime_label`), so two runs of one model are told apart."""

    runs: tuple[RunFile, ...]
    reconciliations: tuple[Reconciliation, ...]
    spread: KSpread | None
    runtimes: tuple[str, ...] = ()


def runtime_label(run: RunFile) -> str:
    """What measured ``run``, in a few words: the runtime and its provider or device (``ONNX Runtime
    CPUExecutionProvider``, ``OpenVINO CPU f32``), the vendor tool of an import, ``-`` without a measurement."""
    m = run.measurement
    if m is None:
        return "-"
    if m.kind == "vendor-import":
        return m.source or "vendor import"
    device = getattr(m, "device", None)
    where = device or m.provider
    precision = getattr(m, "precision", None) if device else None
    return " ".join(str(part) for part in (runtime_name(m.backend), where, precision) if part)


def reconcile(request: ReconcileRequest, hooks: Hooks = QUIET) -> ReconcileResult:
    """Reconcile every run of ``request.runs``; every run is read and reconciled before anything is returned.
    ``RunFileError`` for a run that is not a valid run file; ``InputError`` for one without an estimate and a
    measurement of the same part of the model."""
    loaded = [load(path) for path in request.runs]
    recs = [reconcile_run(run) for run in loaded]
    runtimes = tuple(runtime_label(run) for run in loaded)
    # across runs, each run is named with what measured it: two runs of one model are told apart (in the saved
    # spread too, so that the report of a saved run prints what reconcile printed)
    named = [replace(rec, model_name=f"{rec.model_name} ({runtime})")
             for rec, runtime in zip(recs, runtimes, strict=True)]
    spread = k_spread(named) if len(recs) > 1 else None
    reconciled = [run.model_copy(update={"reconcile": Reconcile.model_validate(reconcile_section(rec, spread=spread)),
                                         "tool": written_by("reconcile")})
                  for run, rec in zip(loaded, recs, strict=True)]
    return ReconcileResult(tuple(reconciled), tuple(recs), spread, runtimes)
