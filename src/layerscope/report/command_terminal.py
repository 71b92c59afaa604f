"""What each command that writes a run prints, as one pure function of the run it saved.

``estimate``, ``profile``, ``bench``, ``bisect``, ``pipeline`` and ``import`` print :func:`command_report` of their run,
and ``layerscope report RUN --format terminal`` prints the same function of the saved file: the tables are
the same, only the lines naming the files a command wrote are the command's own. ``compare``, ``advise`` and
``reconcile`` print the section they save (:mod:`layerscope.report.analysis_terminal`), and
:func:`command_report` of a run they wrote prints that section the same way (``reconcile`` also prints each run's
path before its report: a line naming a file). ``calibrate`` writes a profile, not a run. Which command made a
run is read from the run itself (:func:`run_kind`).
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.text import Text

from layerscope.report.terminal import estimate_summary, measured_layers_table, measurement_summary, top_layers_table
from layerscope.runfile.commands import RunKind, recorded_command
from layerscope.runfile.models import BenchMeasurement, RunFile

#: The ``reconcile.method`` of a section ``layerscope reconcile`` wrote (``layerscope import`` writes its own).
RECONCILE_METHOD = "layerscope reconcile"

#: Rows of the layer (or item) table when the command's ``--top`` is not known: each command's default (``bisect``
#: and ``bench`` show their whole segment or sweep table unless ``--top`` is given).
DEFAULT_TOP: Mapping[RunKind, int] = {"compare": 10, "advise": 10, "reconcile": 10, "pipeline": 15, "import": 20,
                                      "profile": 20, "estimate": 20}


def run_kind(run: RunFile) -> RunKind:
    """The command whose report a run gets: the one its ``tool`` section names (``tool.command``, which every
    command that writes a run records), else the one guessed from the sections it holds (a run written before the
    command was recorded, by another tool or by hand; :func:`guessed_kind`)."""
    recorded = recorded_command(run)
    return recorded if recorded is not None else guessed_kind(run)


def guessed_kind(run: RunFile) -> RunKind:
    """The command that most likely wrote ``run``, from the sections it holds.

    An analysis writes its section over the run it read, so its section comes first: ``compare`` for a
    ``comparison`` section, ``advise`` for ``findings``, ``reconcile`` for a ``reconcile`` section that
    ``layerscope reconcile`` wrote (an import's is part of the import), in that order (the order they are
    usually run in, last first: ``compare`` writes the *after* run with what it held). Then ``pipeline`` or
    ``bisect`` when it holds their section, ``import`` for a run made of vendor files (its ``import`` section),
    ``bench`` for a bench measurement, ``profile`` for any other measurement, else ``estimate``."""
    if run.comparison is not None:
        return "compare"
    if run.findings is not None:
        return "advise"
    if run.reconcile is not None and run.reconcile.method == RECONCILE_METHOD:
        return "reconcile"
    if run.pipeline is not None:
        return "pipeline"
    if run.bisect is not None:
        return "bisect"
    if run.import_ is not None:
        return "import"
    if run.measurement is not None:
        return "bench" if isinstance(run.measurement, BenchMeasurement) else "profile"
    return "estimate"


def command_report(run: RunFile, top: int | None = None, *, timeline: bool | None = None,
                   kind: RunKind | None = None) -> RenderableType:
    """The tables the command that made ``run`` printed: ``kind`` names it (``None``: :func:`run_kind`; a
    command passes its own, so that ``estimate -o`` into a measured run still prints the estimate); ``top`` rows
    in the layer table (``None``: the command's default; 0: no table); the timeline report when ``timeline``
    (``None``: when the run holds a timeline). The report of each other section is imported when a run holds it
    (an estimate's start-up imports the estimate's tables only)."""
    kind = run_kind(run) if kind is None else kind
    rows = DEFAULT_TOP.get(kind, 0) if top is None else top
    with_timeline = run.timeline is not None if timeline is None else timeline
    parts: list[RenderableType] = []
    if kind == "compare" and run.comparison is not None:
        from layerscope.report.compare_terminal import compare_report, saved_comparison

        parts.append(compare_report(saved_comparison(run.comparison), rows))
    elif kind == "advise" and run.findings is not None:
        from layerscope.report.analysis_terminal import advice_view

        parts.append(advice_view(run.findings, len(run.layers), rows))
    elif kind == "reconcile" and run.reconcile is not None:
        from layerscope.report.analysis_terminal import latency_stat_name, reconcile_view, spread_view

        # named as ``reconcile_run`` names them
        model_name, target_name = str(run.model.name or run.model.path or "?"), str(run.target_or_empty.name or "?")
        parts += [reconcile_view(run.reconcile, model_name, target_name, rows, latency_stat_name(run.latency)),
                  Text("")]
        if run.reconcile.spread is not None:
            parts.append(spread_view(run.reconcile.spread))
    elif kind == "pipeline":
        from layerscope.report.pipeline_terminal import pipeline_report

        parts.append(pipeline_report(run, rows))
    elif kind == "bisect":
        from layerscope.report.bisect_terminal import bisect_report, validation_report

        parts.append(bisect_report(run, top))
        # ``bisect.validation`` read as an attribute: an unknown key of the section today, a field once typed
        if run.bisect is not None and getattr(run.bisect, "validation", None) is not None:
            parts += [Text(""), validation_report(run)]
    elif kind == "import":
        from layerscope.report.import_terminal import import_report

        parts.append(import_report(run, rows))
    elif kind == "bench":
        from layerscope.report.bench_terminal import bench_report

        parts.append(bench_report(run, top))
        if run.stress is not None:
            from layerscope.report.stress_terminal import stress_report

            parts.append(stress_report(run))
    else:
        has_measurement = kind == "profile" and run.latency is not None and run.measurement is not None
        if rows:
            parts.append(measured_layers_table(run, rows) if has_measurement else top_layers_table(run, rows))
        parts.append(measurement_summary(run) if has_measurement else estimate_summary(run))
        if with_timeline:
            from layerscope.report.timeline_terminal import timeline_report

            parts.append(timeline_report(run))
        if run.predictor is not None:
            from layerscope.report.predictor_terminal import predictor_report

            parts.append(predictor_report(run, rows))
        if run.stress is not None:
            from layerscope.report.stress_terminal import stress_report

            parts.append(stress_report(run, rows or 10))
    return Group(*parts)
