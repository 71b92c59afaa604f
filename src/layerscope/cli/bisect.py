"""``layerscope bisect [MODEL]``: per-segment times on a device that only times whole models
(:mod:`layerscope.workflows.bisect`).

The model is cut after layer k for a set of k, each prefix (past the middle, each suffix: the layers after the
cut) is timed (ONNX Runtime or OpenVINO here, or any device through ``--run-cmd``), and each segment's time is the
difference of the models around it, with a bootstrap confidence interval (:mod:`layerscope.measure.differential`).
Measurements are cached by model and runner, so an interrupted bisect resumes when the same command is run
again.

Exit codes: 0; 2 bad input (model, shape, input file, template, regex, budget, or command output that the
latency regex / JSON field cannot read); 3 provider not available here, or the device command failed
(non-zero exit, timeout: its exit code and the tail of its output are printed); 130 Ctrl-C (what was
measured by then stays cached: run the same command again to resume).
"""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    CLI_HOOKS,
    Command,
    backend_option,
    cli_dims,
    device_command_options,
    device_command_values,
    html_option,
    input_option,
    intra_threads_option,
    openvino_bench_options,
    openvino_values,
    opt_level_option,
    output_option,
    parse_shapes,
    provider_option,
    shape_option,
    target_option,
    usage_errors,
)
from layerscope.cli.outputs import write_html
from layerscope.measure.cuts import BOUNDARY_SHARE
from layerscope.report.command_terminal import command_report
from layerscope.run import save_run
from layerscope.workflows import bisect as workflow
from layerscope.workflows.bisect import OPENVINO_RECOMPILE_EVERY, BisectRequest, bisect

#: The rules of ``--warm-with auto`` and ``--visit-warmup``'s default (:mod:`layerscope.workflows.bisect`).
_warm_with, _visit_warmup = workflow.warm_with, workflow.visit_warmup


@click.command("bisect", cls=Command)
@click.argument("model", type=click.Path(path_type=Path), required=False)
@target_option
@shape_option
@input_option
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs and the bootstrap.")
@device_command_options(what="prefix")
@click.option("--granularity", type=click.Choice(["segment", "layer"]), default="segment", show_default=True,
              help="segment: coarse segments refined where the time is; layer: one segment per layer.")
@click.option("--segments", default=12, show_default=True, type=click.IntRange(2, 256),
              help="Coarse segments, of roughly equal estimated time on --target.")
@click.option("--repeats", default=None, type=click.IntRange(min=2),
              help="Rounds: final samples per model [default: 10 with --run-cmd; in process 60, or more (up to "
                   "300, within --budget) while the rounds' timed runs fit in about 15 s].")
@click.option("--max-ci", type=click.FloatRange(0, 1, max_open=True), default=None, metavar="FRACTION",
              help="After the rounds, keep adding rounds (up to 5x --repeats, within --budget) while a segment holding "
                   "5% of the time or more has a 95% bootstrap interval wider than FRACTION of it either side (e.g. "
                   "0.15); 0: off [default: off].")
@click.option("--pilot", default=3, show_default=True, type=click.IntRange(min=1),
              help="Samples per prefix that decide where to refine.")
@click.option("--budget", "budget_runs", type=click.IntRange(min=1), default=None, metavar="RUNS",
              help="Most runs (samples) to plan, pilot runs included [default: 2x the coarse plan; layer: all].")
@click.option("--suffixes/--no-suffixes", default=None,
              help="Time the cuts past the middle as suffixes (the layers after the cut, fed the tensors crossing "
                   "it), so that every segment is the difference of two models of at most about half the model "
                   "[default: on with ONNX Runtime; off with --run-cmd, whose tool must then feed the suffix's "
                   "inputs].")
@click.option("--baseline/--no-baseline", default=True, show_default=True,
              help="Also time a model that returns one element of each input, the runtime's fixed cost per call "
                   "(the first segment holds that cost without it).")
@click.option("--statistic", type=click.Choice(["auto", "median", "p10", "min"]), default="auto", show_default=True,
              help="median: median over rounds of the paired differences of neighbouring prefixes (for device "
                   "tools that print an average); p10 / min: difference of the prefixes' 10th-percentile / fastest "
                   "rounds (for a CPU shared with other work, where interference only adds time); auto: p10 on "
                   "ONNX Runtime, median with --run-cmd.")
@click.option("--confidence", default=0.95, show_default=True, type=click.FloatRange(0.5, 0.999),
              help="Confidence level of the bootstrap intervals.")
@click.option("--resamples", default=2000, show_default=True, type=click.IntRange(min=100),
              help="Bootstrap resamples.")
@backend_option
@openvino_bench_options
@click.option("--cuts", "cut_rule", type=click.Choice(["auto", "exec-graph", "heuristic"]), default="auto",
              show_default=True,
              help="Where cuts may fall: exec-graph: only between the nodes the runtime's compiled whole model runs "
                   "(never inside a group it fused; OpenVINO); heuristic: op types runtimes usually fuse are kept "
                   "together where possible; auto: exec-graph with --backend openvino, else heuristic.")
@provider_option
@intra_threads_option()
@opt_level_option
@click.option("--clock", type=click.Choice(["wall", "cpu"]), default="wall", show_default=True,
              help="ONNX Runtime, OpenVINO: wall time, or the inference thread's CPU time (needs --threads 1; ignores "
                   "the time other processes hold the core).")
@click.option("--visit-warmup", default=None, show_default="1 on ONNX Runtime, 4 on OpenVINO",
              type=click.IntRange(min=0),
              help="ONNX Runtime, OpenVINO: untimed runs at each visit of a model before the timed one (see "
                   "--warm-with); 0 times every model with its caches as the previous model left them.")
@click.option("--warm-with", type=click.Choice(["auto", "whole", "self", "loop"]), default="auto",
              show_default=True,
              help="ONNX Runtime, OpenVINO: what the untimed runs run: the whole model, so that each model is "
                   "timed in the state the whole model leaves the machine in; the model itself (cheaper, but a "
                   "model's data is then cached as it never is in the whole model's loop); or loop: the model "
                   "itself, then for a suffix one run of the layers before its cut, as the whole model's loop runs "
                   "them. auto: loop (README: what each gave on both runtimes).")
@click.option("--runs-per-visit", default=1, show_default=True, type=click.IntRange(min=1),
              help="ONNX Runtime, OpenVINO: timed runs per visit of a model; the fastest is the sample.")
@click.option("--recompile-every", default=None, type=click.IntRange(min=0), metavar="VISITS",
              show_default=f"{OPENVINO_RECOMPILE_EVERY} on OpenVINO, 0 on ONNX Runtime",
              help="ONNX Runtime, OpenVINO: compile each timed model afresh (a new session) every VISITS visits, so "
                   "that its samples span several compilations, each of which runs at its own speed; 0: never.")
@click.option("--cache", "cache_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Cache of measurements [default: $LAYERSCOPE_CACHE_DIR/bisect or ~/.cache/layerscope/bisect].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option("--boundary-runs", type=click.IntRange(min=0), default=None, metavar="N",
              help="ONNX Runtime, OpenVINO: profiled runs per model that time what its cut alone costs (converting "
                   "the crossing tensors out of or into the runtime's blocked layout), subtracted from its "
                   "samples; 0: no correction [default: 10; not with --run-cmd].")
@click.option("--max-cut-share", type=click.FloatRange(min=0), default=BOUNDARY_SHARE, show_default=True,
              metavar="FRACTION",
              help="With the cut-cost correction: do not report a cut whose measured cost is more than FRACTION of "
                   "the smaller segment beside it (the two segments become one; such a correction is too uncertain "
                   "for them); 0: keep every cut.")
@click.option("--validate", is_flag=True,
              help="Compare each segment with `layerscope profile`'s kernel times (OpenVINO: its performance "
                   "counters; not with --run-cmd).")
@click.option("--validate-runs", default=50, show_default=True, type=click.IntRange(min=1),
              help="Profiled runs of the validation, taken in 5 parts between the bisect's rounds.")
@click.option("--gap-runs", default=20, show_default=True, type=click.IntRange(min=0),
              help="Profiled runs of the whole model that estimate the time between kernels (part of each "
                   "segment's systematic error; 0: not estimated; not with --run-cmd).")
@click.option("--devices", "devices", default=None, metavar="NAME[,NAME]",
              help="With --run-cmd: a pool of devices that time a round's models in parallel, one model per device "
                   "at a time, each a Ray resource layerscope_device_NAME; the command names its device as "
                   "{device}. A job whose device fails is retried on another.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="With --devices: an existing Ray cluster whose nodes declare the device resources "
                   "(default: a local Ray runtime).")
@output_option(help="Write the run file (estimate, per-layer differential times, the bisect section).")
@html_option()
@click.option("--top", default=None, type=click.IntRange(min=0),
              help="Rows of the segment table: the segments of largest bisect time, in model order (default: all; "
                   "0: no table).")
def command(*, model: Path | None, target: str, shapes: tuple[str, ...], input_specs: tuple[str, ...], seed: int,
            granularity: str, segments: int, repeats: int | None, max_ci: float | None,
            pilot: int, budget_runs: int | None, suffixes: bool | None, baseline: bool, statistic: str,
            confidence: float, resamples: int, backend_name: str, cut_rule: str, provider: str,
            threads: int, opt_level: str, clock: str,
            visit_warmup: int | None, warm_with: str, runs_per_visit: int, recompile_every: int | None,
            cache_dir: Path | None, no_cache: bool,
            boundary_runs: int | None, max_cut_share: float, validate: bool, validate_runs: int, gap_runs: int,
            devices: str | None,
            ray_address: str | None, json_out: Path | None, html_out: Path | None, top: int | None) -> None:
    """Time every segment of MODEL (default: the bundled sample) by differential profiling of its prefixes and
    suffixes."""
    openvino = openvino_values()
    request = BisectRequest(
        model, target=target, shapes=parse_shapes(shapes), dims=cli_dims(), inputs=input_specs, seed=seed,
        **device_command_values(), granularity=granularity, segments=segments, repeats=repeats, max_ci=max_ci,
        pilot=pilot, budget_runs=budget_runs, suffixes=suffixes, baseline=baseline, statistic=statistic,
        confidence=confidence, resamples=resamples, backend=backend_name, device=str(openvino["device"]),
        precision=str(openvino["precision"]), performance_hint=str(openvino["performance_hint"]), cut_rule=cut_rule,
        provider=provider, threads=threads, opt_level=opt_level, clock=clock, visit_warmup=visit_warmup,
        warm_with=warm_with, runs_per_visit=runs_per_visit, recompile_every=recompile_every, cache_dir=cache_dir,
        no_cache=no_cache, boundary_runs=boundary_runs, max_cut_share=max_cut_share, validate=validate,
        validate_runs=validate_runs, gap_runs=gap_runs, devices=devices, ray_address=ray_address)
    with usage_errors():
        run = bisect(request, CLI_HOOKS)
    console = SafeConsole()
    console.print(command_report(run, top, kind="bisect"))
    if json_out is not None:
        console.print(f"run file: {save_run(run, json_out)}")
    if html_out is not None:
        console.print(f"report: {write_html(run, html_out)}")
