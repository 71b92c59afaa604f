"""Advise: hot spots, bounds and CPU fallback, then findings with advice, as data (``layerscope advise``,
``layerscope.advise``).

The model is reloaded from the run's path (sha256 checked) for the rules that read the graph. With ``measure``
(the default when the run was measured on ONNX Runtime), mitigations that can be tried on ONNX Runtime are
measured: the subnormal-weights finding then reports the flushed model's measured gain
(:mod:`layerscope.analysis.advise`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from layerscope.analysis.advise import AdviceReport, measure_config_of, reload_model, run_profile, with_findings
from layerscope.analysis.advise import advise as advise_run
from layerscope.measure.session import SessionConfig
from layerscope.runfile.commands import made_by
from layerscope.runfile.io import load
from layerscope.runfile.models import RunFile
from layerscope.workflows.common import QUIET, Hooks, PathLike


@dataclass(frozen=True)
class AdviseRequest:
    """``layerscope advise``'s options. ``model``: the model file when it moved since the run was made (its sha256
    must match the run's); ``no_model``: the rules that read the graph are skipped; ``target``: the profile of the
    rules (``None``: the run's); ``measure``: measure the mitigations that can be tried on ONNX Runtime (``None``:
    when the run was measured there, with its session settings) in ``measure_runs`` paired rounds, the model fed
    ``inputs`` (``--input`` specs); ``top``: hot spots kept in the findings' diagnosis."""

    run: PathLike
    model: PathLike | None = None
    no_model: bool = False
    target: str | None = None
    measure: bool | None = None
    measure_runs: int = 20
    inputs: tuple[str, ...] = ()
    top: int = 10


@dataclass(frozen=True)
class AdviseResult:
    """The run with its ``findings`` section (replacing an earlier one), and the diagnosis and advice the terminal
    report shows."""

    run: RunFile
    report: AdviceReport


def advise(request: AdviseRequest, hooks: Hooks = QUIET) -> AdviseResult:
    """Diagnose the run at ``request.run`` and advise what to change, layer by layer. ``RunFileError`` for a bad
    run file; ``ModelError`` when the run's model is missing or changed (its sha256)."""
    run = load(request.run)
    profile = run_profile(run, request.target)
    model = Path(request.model) if request.model is not None else None
    graph = None if request.no_model else reload_model(run, model, request.inputs)
    config = measure_config_of(run)
    if request.measure and config is None:
        config = SessionConfig()
    report = advise_run(run, profile, graph, measure_config=config if request.measure is not False else None,
                        measure_runs=request.measure_runs, input_specs=request.inputs)
    return AdviseResult(made_by(with_findings(run, report, top=request.top), "advise"), report)
