"""Advise on a saved run: reload what the rules need (the model, verified; the profile), run the rules, store
the findings.

Contract:
- readers take the typed run (:class:`~layerscope.runfile.models.RunFile`; a document is typed where it is read:
  :func:`layerscope.runfile.load`);
- :func:`reload_model` loads ``model.path`` (or an override) with the run's input shapes and refuses,
  with ``ModelError`` (exit 2), a file whose sha256 differs from ``model.sha256``: rules must read
  the model the run describes, not a file that changed since;
- :func:`run_profile` loads the profile the run was estimated on (``target.source_path`` when that file still
  exists, else ``target.name``); ``None`` when the run names none;
- :func:`advise` measures only when given a ``measure_config`` (rules that can, the subnormal-weights rule, then
  time their mitigation on ONNX Runtime); :func:`measure_config_of` is the session config of the run's own
  ONNX Runtime measurement; :func:`with_findings` returns the run with a ``findings`` section
  (see :func:`layerscope.analysis.findings.findings_section`) plus ``findings.diagnosis``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from layerscope.analysis.diagnose import Diagnosis, diagnose, diagnosis_section
from layerscope.analysis.findings import findings_section
from layerscope.analysis.rules import RULES, Advice, Rule, RuleContext, run_rules
from layerscope.digest import sha256_file
from layerscope.errors import ModelError, RunFileError
from layerscope.measure.inputs import feeder
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.runfile.models import Findings, RunFile
from layerscope.runtimes import registry
from layerscope.targets import load_profile
from layerscope.targets.profile import Profile


@dataclass(frozen=True)
class AdviceReport:
    """The diagnosis and the rules' advice for one run."""

    diagnosis: Diagnosis
    advice: Advice


def reload_model(run: RunFile, override: str | Path | None = None,
                 input_specs: Sequence[str] = ()) -> Graph:
    """The run's model, loaded with its recorded input shapes; sha256 checked against the run. Shapes that must
    be observed by running the model (control flow, data-dependent shapes) are observed on ``input_specs``
    (``--input`` files) and seeded random values for the other inputs."""
    model = run.model
    path = Path(override) if override is not None else Path(str(model.path or ""))
    if not str(path) or str(path) == ".":
        raise RunFileError("the run names no model file; pass it with --model")
    if not path.is_file():
        raise ModelError(f"{path}: the run's model file is not there", hint="pass it with --model")
    expected = model.sha256
    if expected and sha256_file(path) != expected:
        raise ModelError(f"{path}: sha256 differs from the run's model ({str(expected)[:12]}...); the file changed "
                         "since the run was made", hint="pass the original with --model, or re-run the estimate")
    shapes = {t.name: dims for t in model.inputs if t.shape is not None
              and len(dims := tuple(d for d in t.shape if isinstance(d, int) and d > 0)) == len(t.shape)}
    return load_model(path, shapes, feeds=feeder(input_specs))


def run_profile(run: RunFile, override: str | None = None) -> Profile | None:
    """The profile the run was estimated on (or ``override``); ``None`` when the run names none."""
    if override:
        return load_profile(override)
    target = run.target_or_empty
    source, name = target.source_path, target.name
    if name == "host":
        return load_profile("host")
    if source and Path(str(source)).is_file() and str(source).endswith(".toml"):
        return load_profile(str(source))
    return load_profile(str(name)) if name else None


def measure_config_of(run: RunFile) -> SessionConfig | None:
    """The session config of the run's ONNX Runtime measurement (provider, threads, optimization level);
    ``None`` when the run was not measured on ONNX Runtime."""
    measurement = run.measurement
    runtime = registry.spec(measurement.backend) if measurement is not None else None
    if measurement is None or runtime is None or not runtime.can("providers"):
        return None
    return SessionConfig(provider=str(measurement.provider or "cpu"), threads=int(measurement.threads or 0),
                         opt_level=str(measurement.opt_level or "all"))


def advise(run: RunFile, profile: Profile | None, graph: Graph | None,
           rules: tuple[Rule, ...] = RULES, *, measure_config: SessionConfig | None = None,
           measure_runs: int = 20, input_specs: Sequence[str] = ()) -> AdviceReport:
    """Diagnose ``run`` and run every rule on it; with ``measure_config``, rules that can measure their mitigation
    do (``measure_runs`` timed runs each side, the model fed ``input_specs``)."""
    ctx = RuleContext.of(run, profile, graph, measure_config=measure_config, measure_runs=measure_runs,
                         input_specs=input_specs)
    return AdviceReport(diagnose(run, profile), run_rules(ctx, rules))


def findings_of(report: AdviceReport, *, top: int = 10) -> Findings:
    """The ``findings`` section ``layerscope advise`` saves: the findings, the rules skipped and why, the diagnosis."""
    return Findings.model_validate({
        **findings_section(report.advice.findings, source="layerscope advise"),
        "skipped_rules": [{"rule": rule, "reason": why} for rule, why in report.advice.skipped],
        "diagnosis": diagnosis_section(report.diagnosis, top)})


def with_findings(run: RunFile, report: AdviceReport, *, top: int = 10) -> RunFile:
    """``run`` with its ``findings`` section set (replacing an earlier one)."""
    return run.model_copy(update={"findings": findings_of(report, top=top)})
