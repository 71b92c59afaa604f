"""``layerscope estimate MODEL``: a static, per-layer estimate of a model on a hardware profile."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from layerscope.analysis.fusion_rules import FUSION_SOURCES
from layerscope.cli.console import SafeConsole
from layerscope.cli.options import cli_dims, input_option, parse_shapes, print_shape_notes, shape_option, target_option
from layerscope.cli.outputs import OutputPath, write_html
from layerscope.collector import collector_paused
from layerscope.errors import RunFileError
from layerscope.estimate import estimate_graph
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.report.command_terminal import command_report
from layerscope.run import add_timeline, estimate_run, save_run
from layerscope.runfile.models import RunFile, RunLike
from layerscope.targets import load_profile

if TYPE_CHECKING:
    import numpy as np

    from layerscope.model.types import TensorInfo
    from layerscope.run_merge import ExistingRun

DTYPES = ("int8", "int16", "fp16", "bf16", "fp32")


@click.command("estimate")
@click.argument("model", type=click.Path(path_type=Path))
@target_option
@shape_option
@input_option
@click.option("--dtype", type=click.Choice(DTYPES), default=None,
              help="Deployed dtype of the accelerator layers (default: the profile's).")
@click.option("-o", "--output", "--json", "json_out", type=OutputPath(), default=None, metavar="RUN.json",
              help="Write the run file (JSON) that later commands read and extend. An existing run of the same "
                   "model keeps its measured sections; only its estimate (and timeline) is refreshed.")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=0),
              help="How many layers the table shows.")
@click.option("--timeline", is_flag=True,
              help="Also schedule one frame over the units, cores and DDR: summary, memory plan, and with --json "
                   "the timeline per unit and core and the bandwidth over time.")
@click.option("--html", "html_out", type=OutputPath(), default=None, metavar="OUT",
              help="Also write the self-contained HTML report (as `layerscope report` renders it).")
@click.option("--predictor", "predictor_path", type=click.Path(path_type=Path), default=None, metavar="P.json",
              help="Also predict the latency per kernel with a predictor from `calibrate --kernels` (the roofline "
                   "stays the explanation).")
@click.option("--fusion", "fusion", type=click.Choice(FUSION_SOURCES), default="auto", show_default=True,
              help="With --predictor: group layers into kernels as the predictor's runtime does (runtime), by the "
                   "rules learnt at calibration (rules), or the runtime where it is installed (auto).")
def command(*, model: Path, target: str, shapes: tuple[str, ...], input_specs: tuple[str, ...], dtype: str | None,
            json_out: Path | None,
            top: int, timeline: bool, html_out: Path | None, predictor_path: Path | None, fusion: str) -> None:
    """Estimate every layer of MODEL on a hardware profile (roofline; an estimate, not a measurement)."""
    with collector_paused():
        _estimate(model=model, target=target, shapes=shapes, input_specs=input_specs, dtype=dtype,
                  json_out=json_out, top=top, timeline=timeline, html_out=html_out, predictor_path=predictor_path,
                  fusion=fusion)


def _estimate(*, model: Path, target: str, shapes: tuple[str, ...], input_specs: tuple[str, ...],
              dtype: str | None, json_out: Path | None, top: int, timeline: bool, html_out: Path | None,
              predictor_path: Path | None, fusion: str) -> None:
    profile = load_profile(target)
    if dtype is not None and dtype not in profile.dtypes:
        raise click.BadParameter(f"profile {profile.name!r} supports {', '.join(profile.dtypes)}",
                                 param_hint="--dtype")
    # a run to merge into is a regular file; a device or FIFO named as the output (/dev/stdout) is written through
    existing = _existing_run(json_out) if json_out is not None and json_out.is_file() else None
    # the inputs matter only when shapes must be observed by running the model (data-dependent shapes, control flow)
    graph = load_model(model, parse_shapes(shapes), cli_dims(), feeds=_feeds(input_specs))
    print_shape_notes(graph)
    estimate = estimate_graph(graph, profile, dtype)
    typed = estimate_run(graph, estimate, profile)
    if timeline:
        from layerscope.estimate.timeline import simulate_timeline  # only --timeline schedules a frame

        typed = add_timeline(typed, simulate_timeline(graph, profile, dtype, costs=estimate.costs,
                                                      estimate=estimate),
                             profile.ddr_nominal_bytes_per_s)
    run: RunLike = typed  # a document once given a prediction
    as_read: Mapping[str, Any] = {}  # sections of the existing run written as they were read
    console = SafeConsole()
    notes: tuple[str, ...] | None = None  # set when the estimate goes into an existing run
    if existing is not None:
        from layerscope.run_merge import merge_estimate

        merged = merge_estimate(existing, typed, str(json_out))
        run, as_read, notes = merged.run, merged.as_read, merged.notes
        if predictor_path is not None:
            run, as_read = merged.document(), {}
    if predictor_path is not None:  # after the merge: a run's earlier prediction is replaced, never kept
        run = _predict(run, graph, predictor_path, dtype, fusion)
    console.print(command_report(run, top, timeline=timeline, kind="estimate"))
    if json_out is not None:
        written = save_run(run, json_out, as_read)
        refreshed = " (estimate refreshed in the existing run)" if notes is not None else ""
        console.print(f"run file: {written}{refreshed}")
        for note in notes or ():
            console.print(f"  {note}", markup=False, highlight=False)
    if html_out is not None:
        console.print(f"report: {write_html(run, html_out)}")


def _feeds(specs: tuple[str, ...]) -> Callable[[Sequence[TensorInfo]], dict[str, np.ndarray]]:
    """:func:`layerscope.measure.inputs.feeder` of ``specs``, imported when the loader calls it: only a model whose
    shapes must be observed by running it is fed (most are not, and the inputs module is not imported)."""

    def feeds(inputs: Sequence[TensorInfo]) -> dict[str, np.ndarray]:
        from layerscope.measure.inputs import feeder

        return feeder(specs)(inputs)

    return feeds


def _predict(run: RunLike, graph: Graph, path: Path, dtype: str | None, fusion: str = "auto") -> dict[str, Any]:
    """``run``'s document with the kernel predictor's numbers added (its roofline features on the predictor's own
    profile)."""
    from layerscope.analysis.predictor import add_prediction, load_predictor, predict_path  # only --predictor

    predictor = load_predictor(path)
    estimate = estimate_graph(graph, load_profile(predictor.profile), dtype or "fp32")
    document = run.to_json() if isinstance(run, RunFile) else dict(run)
    add_prediction(document, predict_path(predictor, graph, estimate, fusion), str(path), predictor)
    return document


def _existing_run(path: Path) -> ExistingRun:
    """The run already at ``path``: an estimate is merged into it, never written over something else."""
    from layerscope.run_merge import read_existing

    try:
        return read_existing(path)
    except RunFileError as exc:
        raise RunFileError(exc.message, hint="--json adds the estimate to an existing run of the same model; "
                                             "remove the file or choose another path") from None
