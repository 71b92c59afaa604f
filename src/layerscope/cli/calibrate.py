"""``layerscope calibrate RUN... -o my-host.toml``: fit a profile's efficiency per unit and layer kind, a compute
factor per op type where the runs hold enough evidence (``[op_efficiency]``; ``--no-op-efficiency`` leaves it
out), its per-layer overhead and its DDR bandwidth to measured runs; write a profile `--target` accepts; report
the leave-one-model-out error (and the error on held-out ``--check`` runs).

To calibrate on your own model family, pass its runs with the others (e.g. the model-zoo runs plus one YOLO
run) and check on other members of the family with ``--check``: op types only that family has can only be
learnt from its runs."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.analysis.calibrate import (
    Calibration,
    calibrate,
    calibrated_profile,
    calibration_section,
    profile_toml,
    run_data,
    write_profile,
)
from layerscope.cli.calibrate_kernels import kernel_runner, run_kernels
from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    Command,
    backend_option,
    deprecated_option,
    device_command,
    device_command_options,
    openvino_bench_options,
    parse_shapes,
    shape_option,
)
from layerscope.cli.outputs import OutputPath
from layerscope.errors import InputError
from layerscope.fileio import write_atomic
from layerscope.measure.kernels import FAMILIES
from layerscope.report.analysis_terminal import board_k_report, calibration_report
from layerscope.run import load_run
from layerscope.targets import Profile, load_profile
from layerscope.targets.schema import load_profile_file


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
@click.option("--kernel-threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="With --kernels: ONNX Runtime intra-op threads the kernels are timed with.")
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
def command(*, runs: tuple[Path, ...], output: Path, name: str | None, base: str | None, checks: tuple[Path, ...],
            per_unit_only: bool, json_out: Path | None, kernels: bool, budget: str, families: str | None,
            kernel_threads: int, visits: int, cache: Path | None, shapes: tuple[str, ...], adaptive: bool,
            backend_name: str, board_table: Path | None) -> None:
    """Fit a hardware profile to measured RUNs (from `layerscope profile`) and write it to OUT.toml; with
    --kernels, fit the kernel-level latency predictor (RUNS: calibration models, optional) to OUT.json."""
    command = device_command()
    if kernels:
        runner = kernel_runner(backend_name, command)
        run_kernels(models=runs, output=output, budget=budget, families=families, threads=kernel_threads,
                    visits=visits, cache=cache, shapes=parse_shapes(shapes), adaptive=adaptive, runner=runner)
        return
    if backend_name != "onnxruntime" or command is not None:
        raise click.UsageError("--backend and --run-cmd apply with --kernels only")
    if output.suffix != ".toml":
        raise InputError(f"{output}: the calibrated profile must be a .toml file")
    if board_table is not None:
        if runs or checks:
            raise click.UsageError("--board calibrates from the table alone: give no RUN or --check")
        _calibrate_board(board_table, base=base, output=output, name=name, json_out=json_out)
        return
    if not runs:
        raise InputError("calibrate needs at least one RUN (or --kernels, or --board)")
    data = [run_data(load_run(path), str(path)) for path in runs]
    held_out = [run_data(load_run(path), str(path)) for path in checks]
    targets = sorted({d.target for d in data if d.target})
    if base is None and len(targets) != 1:
        raise InputError(f"the runs were estimated on {', '.join(targets) or 'no profile'}; pass --base")
    profile = load_profile(base or targets[0])
    cal = calibrate(data, profile, held_out, per_op=not per_unit_only)
    header = (f"Calibrated by `layerscope calibrate` from {len(data)} run(s) on base profile '{profile.name}'.\n"
              "Efficiencies, op-type multipliers, overheads and bandwidth are fitted to those measurements "
              "(see [sources]).")
    console = SafeConsole()
    written = _write_profile(cal, profile, output, name, header)
    console.print(op_table(cal))
    _report(console, cal, written, json_out)


def _write_profile(cal: Calibration, profile: Profile, output: Path, name: str | None, header: str) -> Path:
    """The calibrated profile written to ``output`` (and loaded back: it must load as any profile does)."""
    mapping = calibrated_profile(profile, cal.params, name=name or output.stem, models=cal.models)
    written = write_profile(output, profile_toml(mapping, header))
    load_profile_file(written)  # a failure here is a bug of ours
    return written


def _report(console: SafeConsole, cal: Calibration, written: Path, json_out: Path | None,
            *extra: RenderableType) -> None:
    """The fit's report (then ``extra``), and its JSON to ``json_out`` when given."""
    console.print(calibration_report(cal, str(written)))
    for part in extra:
        console.print(part)
    if json_out is not None:
        text = json.dumps(calibration_section(cal, str(written)), indent=1, sort_keys=True) + "\n"
        console.print(f"calibration: {write_atomic(json_out, text)}")


def _calibrate_board(table_path: Path, *, base: str | None, output: Path, name: str | None,
                     json_out: Path | None) -> None:
    """``calibrate --board``: estimate every model of the table on the base profile, fit it to their board
    latencies, print the fit with its leave-one-family-out errors and k's spread, write the profile."""
    from layerscope.analysis.board import board_runs, calibrate_board, k_analysis, read_board_table

    if base is None:
        raise click.UsageError("--board needs --base: the profile of the board the latencies were measured on")
    profile = load_profile(base)
    table = read_board_table(table_path, board=profile.name)
    console = SafeConsole()
    if table.other_boards:
        console.print(f"{table.other_boards} row(s) of other boards than {profile.name} left out")
    runs = board_runs(table.entries, profile)
    cal = calibrate_board(runs, profile)
    header = (f"Calibrated by `layerscope calibrate --board` from {len(cal.models)} whole-model board latencies on "
              f"base profile '{profile.name}' ({table_path.name}).\nEfficiencies, overheads and bandwidth are fitted "
              "to those measurements (see [sources]).")
    written = _write_profile(cal, profile, output, name, header)
    _report(console, cal, written, json_out, board_k_report(k_analysis(runs)),
            board_k_report(k_analysis(runs, cal.params)))
