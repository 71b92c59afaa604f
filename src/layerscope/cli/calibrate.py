"""``layerscope calibrate RUN... -o my-host.toml``: fit a profile's efficiency per unit and layer kind, a compute
factor per op type where the runs hold enough evidence (``[op_efficiency]``; ``--no-op-efficiency`` leaves it
out), its per-layer overhead and its DDR bandwidth to measured runs; write a profile `--target` accepts; report
the leave-one-model-out error (and the error on held-out ``--check`` runs).

To calibrate on your own model family, pass its runs with the others (e.g. the model-zoo runs plus one YOLO
run) and check on other members of the family with ``--check``: op types only that family has can only be
learnt from its runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.analysis.calibrate import Calibration, calibration_section
from layerscope.cli.calibrate_kernels import print_kernel_fit
from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    CLI_HOOKS,
    Command,
    backend_option,
    cli_dims,
    deprecated_option,
    device_command_options,
    device_command_values,
    openvino_bench_options,
    openvino_values,
    parse_shapes,
    shape_option,
    usage_errors,
)
from layerscope.cli.outputs import OutputPath
from layerscope.fileio import write_atomic
from layerscope.measure.kernels import FAMILIES
from layerscope.report.analysis_terminal import board_k_report, calibration_report
from layerscope.workflows.calibrate import CalibrateRequest, calibrate


def op_table(cal: Calibration) -> RenderableType:
    """The op types that got a compute factor: evidence, spread, shrinkage weight, raw and fitted factor (compute
    time relative to the unit kind's fitted efficiency), and the multiplier on the unit's rate it writes."""
    if not cal.op_fits:
        return Text("op-type factors: none (no op type had enough evidence, or --no-op-efficiency)")
    table = Table(title="Op-type factors: compute time x factor, relative to the unit kind's",
                  box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for header in ("op type", "layers", "models", "share", "spread", "w", "x", "rate x"):
        table.add_column(header, justify="left" if header == "op type" else "right", no_wrap=True)
    for f in cal.op_fits:
        table.add_row(Text(f.op_type), str(f.layers), str(f.models), f"{100 * f.share:.1f}%", f"{f.spread:.2f}",
                      f"{f.weight:.2f}", f"{f.scale:.3g}", f"{1 / f.scale:.3g}")
    note = Text("w: shrinkage weight; x: the fitted factor, raw x ** w (raw in --json); rate x: [op_efficiency] in "
                "the profile, the multiplier on the unit's attainable rate (1 / x)")
    parts: list[RenderableType] = [table, note]
    return Group(*parts)


@click.command("calibrate", cls=Command)
@click.argument("runs", nargs=-1, required=False, type=click.Path(path_type=Path))
@click.option("-o", "--output", "output", type=OutputPath(), required=True, metavar="OUT.toml",
              help="Where to write the calibrated profile (with --kernels: the predictor, OUT.json).")
@click.option("--kernels", is_flag=True,
              help="Sample and time single kernels (and every kernel of the MODELs given as RUNS) on ONNX Runtime "
                   "and fit the kernel-level latency predictor that `estimate --predictor` uses.")
@click.option("--budget", default="10m", show_default=True, metavar="DURATION",
              help="With --kernels: stop timing new kernels after this long (90s, 10m); cached ones are free.")
@click.option("--families", default=None, metavar="A,B",
              help=f"With --kernels: the generated kernel families (default all: {', '.join(FAMILIES)}).")
@click.option("--threads", "kernel_threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="With --kernels: the runtime's intra-op threads the kernels are timed with.")
@deprecated_option("--kernel-threads", dest="kernel_threads", new="--threads", type=click.IntRange(min=1), default=None)
@click.option("--visits", default=11, show_default=True, type=click.IntRange(min=1),
              help="With --kernels: samples per kernel (one run each after an untimed one; their median, a P50).")
@click.option("--adaptive/--no-adaptive", default=True, show_default=True,
              help="With --kernels: spend the second half of the budget on the families (and regions of their "
                   "configuration space) with the highest cross-validated error; off: round-robin to the end.")
@click.option("--cache", "cache", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="With --kernels: the sample cache [default: the bisect cache's kernels/ folder].")
@backend_option
@openvino_bench_options
@device_command_options(what="kernel", condition="With --kernels: ")
@shape_option
@click.option("--name", default=None, help="Name of the calibrated profile (default: OUT's file name).")
@click.option("--base", default=None, metavar="NAME|FILE",
              help="The profile the runs were estimated on (default: the runs' target).")
@click.option("--check", "checks", multiple=True, type=click.Path(path_type=Path), metavar="RUN",
              help="A run of a model outside the calibration set, predicted with the fit (repeatable).")
@click.option("--board", "board_table", type=click.Path(path_type=Path), default=None, metavar="TABLE.csv",
              help="Calibrate an NPU profile from whole-model board latencies instead of RUNs: a CSV with a 'model' "
                   "column (an ONNX file or sample:NAME[:key=value;...]) and 'latency_ms' or 'perf' (a file "
                   "`hrt_model_exec perf` wrote), optionally 'family' (held out together) and 'board'. Needs --base.")
@click.option("--no-op-efficiency", "per_unit_only", is_flag=True,
              help="Fit one efficiency per unit and layer kind only (no per-op-type factors).")
@click.option("--fit-json", "json_out", type=OutputPath(), default=None, metavar="OUT.json",
              help="Also write the fit and its errors as JSON (not a run file).")
@deprecated_option("--json", dest="json_out", new="--fit-json", type=OutputPath(), default=None)
@click.option("--force", is_flag=True,
              help="Write the profile even when the fit is outside physical bounds (an efficiency above 1, a factor "
                   "above 100 or below 0.01); without it such a fit exits 2 naming the value.")
def command(*, runs: tuple[Path, ...], output: Path, name: str | None, base: str | None, checks: tuple[Path, ...],
            per_unit_only: bool, json_out: Path | None, kernels: bool, budget: str, families: str | None,
            kernel_threads: int, visits: int, cache: Path | None, shapes: tuple[str, ...], adaptive: bool,
            backend_name: str, board_table: Path | None, force: bool) -> None:
    """Fit a hardware profile to measured RUNs (from `layerscope profile`) and write it to OUT.toml; with
    --kernels, fit the kernel-level latency predictor (RUNS: calibration models, optional) to OUT.json."""
    openvino = openvino_values()
    request = CalibrateRequest(
        output, runs=runs, kernels=kernels, budget=budget, families=families, kernel_threads=kernel_threads,
        visits=visits, adaptive=adaptive, cache=cache, backend=backend_name, device=str(openvino["device"]),
        precision=str(openvino["precision"]), performance_hint=str(openvino["performance_hint"]),
        **device_command_values(), shapes=parse_shapes(shapes), dims=cli_dims(), name=name, base=base,
        checks=checks, board=board_table, per_unit_only=per_unit_only, force=force)
    console = SafeConsole()
    hooks = dataclasses.replace(CLI_HOOKS, note=lambda line: console.print(line, markup=False, highlight=False))
    with usage_errors():
        result = calibrate(request, hooks)
    if result.kernels is not None:
        print_kernel_fit(console, result.kernels, result.written)
        return
    assert result.calibration is not None  # a profile's fit
    if result.board is None:
        console.print(op_table(result.calibration))
        _report(console, result.calibration, result.written, json_out)
    else:
        _report(console, result.calibration, result.written, json_out, board_k_report(result.board.before),
                board_k_report(result.board.after))


def _report(console: SafeConsole, cal: Calibration, written: Path, json_out: Path | None,
            *extra: RenderableType) -> None:
    """The fit's report (then ``extra``), and its JSON to ``json_out`` when given."""
    console.print(calibration_report(cal, str(written)))
    for part in extra:
        console.print(part)
    if json_out is not None:
        text = json.dumps(calibration_section(cal, str(written)), indent=1, sort_keys=True) + "\n"
        console.print(f"calibration: {write_atomic(json_out, text)}")
