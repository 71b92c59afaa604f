"""``layerscope pipeline SCRIPT.py:FUNCTION --model MODEL``, and the ``--stress`` option of ``bench`` and ``profile``.

``pipeline`` loads the user's script by path (it is their own code: that is the point), calls FUNCTION once per
run with a model session made by layerscope (:mod:`layerscope.measure.pipeline`), and prints where the
end-to-end time goes: the user's trace points beside the model's layers, and the split into pre-processing /
model / post-processing / other. An exception in the script is one line (exit 2) naming its file and line; the
script's traceback only with ``--debug``.

``--stress memory[:N]`` (:mod:`layerscope.measure.stress`) is defined here, with its terminal report, so that
``bench`` and ``profile`` share one definition of the option and one rendering of the ``stress`` section.
Exit codes: 0, 2 (bad script, model or input; an exception in the script), 3 (provider not available),
130 (Ctrl-C: what was measured by then is printed and saved).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from layerscope.cli.console import SafeConsole
from layerscope.cli.options import (
    cli_dims,
    intra_threads_option,
    opt_level_option,
    parse_shapes,
    provider_option,
    shape_option,
    target_option,
)
from layerscope.cli.outputs import OutputPath
from layerscope.cli.progress import PhaseUpdate, phase_progress
from layerscope.errors import InputError
from layerscope.fileio import write_atomic
from layerscope.measure.session import ort_provider
from layerscope.measure.stress import StressSpec, parse_stress
from layerscope.report.terminal import key_value_grid
from layerscope.report.units import fixed, human_us, us_text
from layerscope.report.views.stress import StressView, stress_compared, stress_eligible, stress_view
from layerscope.run import save_run
from layerscope.runfile.io import stress_thresholds

_PHASES = {"warmup": "warm-up", "timed": "pipeline runs", "warmup-profiled": "warm-up (profiler on)",
           "profiled": "pipeline runs (profiler on)"}


# --- loading the user's function ----------------------------------------------------------------------------------

def load_function(spec: str) -> tuple[Any, Path]:
    """The callable named by ``SCRIPT.py:FUNCTION`` and the script's path; errors are one-line ``InputError``."""
    from layerscope.measure.pipeline import UserCodeError, describe_exception

    path_text, colon, name = spec.rpartition(":")
    if not colon or not path_text or not name.isidentifier():
        raise InputError(f"{spec!r}: expected SCRIPT.py:FUNCTION, e.g. my_pipeline.py:run_once")
    path = Path(path_text)
    if not path.is_file():
        raise InputError(f"{path}: no such script")
    module_name = "_layerscope_pipeline_" + re.sub(r"\W", "_", path.stem)
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise InputError(f"{path}: cannot be loaded as a Python script")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the script's own imports of its neighbours
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        raise UserCodeError(f"{path.name}: loading the script raised {describe_exception(exc, str(path))}",
                            hint="rerun with --debug for the traceback") from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(k for k, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", "") == module_name)
        raise InputError(f"{path.name} has no function {name!r}; its functions: {', '.join(found) or 'none'}")
    return fn, path


# --- the command --------------------------------------------------------------------------------------------------

@click.command("pipeline")
@click.argument("function", metavar="SCRIPT.py:FUNCTION")
@click.option("--model", "-m", "model", required=True, type=click.Path(path_type=Path),
              help="The ONNX model; FUNCTION is called with a session on it (call model.run(None, feeds)).")
@target_option
@shape_option
@click.option("--runs", default=20, show_default=True, type=click.IntRange(min=1), help="Measured pipeline runs.")
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(min=0), help="Untimed runs first.")
@intra_threads_option()
@opt_level_option
@provider_option
@click.option("--layers/--no-layers", default=True, show_default=True,
              help="Run the pipeline again with ONNX Runtime's profiler on for per-layer times and kernels.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of model.example_inputs.")
@click.option("-o", "--json", "json_out", type=OutputPath(), default=None, metavar="OUT",
              help="Write the run file (estimate, per-layer measurement and the pipeline section).")
@click.option("--trace", "trace_out", type=OutputPath(), default=None, metavar="OUT",
              help="Write a Perfetto trace of one run: user spans with the model's layers (OUT.gz: compressed).")
@click.option("--top", default=15, show_default=True, type=click.IntRange(min=0), help="Rows in the top table.")
def command(*, function: str, model: Path, target: str, shapes: tuple[str, ...], runs: int, warmup: int,
            threads: int, opt_level: str, provider: str, layers: bool, seed: int, json_out: Path | None,
            trace_out: Path | None, top: int) -> None:
    """Profile a whole pipeline: FUNCTION(model) from SCRIPT.py, run after run, with its trace points."""
    from layerscope.measure.pipeline import profile

    ort_provider(provider)  # exit 3 before any work when the provider is missing
    fn, script = load_function(function)
    with phase_progress(_PHASES) as progress:
        run = profile(fn, model, runs=runs, warmup=warmup, threads=threads, provider=provider, opt_level=opt_level,
                      target=target, layers=layers, shapes=parse_shapes(shapes), dims=cli_dims(), seed=seed,
                      name=f"{script.name}:{getattr(fn, '__qualname__', function)}", progress=progress)
    console = SafeConsole()
    console.print(pipeline_report(run, top))
    if trace_out is not None:
        from layerscope.report.perfetto import trace_bytes

        written = write_atomic(trace_out, trace_bytes(run, compress=trace_out.suffix == ".gz"))
        console.print(f"trace: {written} (open in https://ui.perfetto.dev)")
    saved = save_run(run, json_out) if json_out is not None else None
    if saved is not None:
        console.print(f"run file: {saved}")
    if run["pipeline"]["interrupted"]:
        raise KeyboardInterrupt(f"what was measured is saved in {saved} (marked interrupted)" if saved else "")


# --- terminal reports (pure functions of a saved run) -------------------------------------------------------------

def _table(title: str, caption: str | None = None) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                 pad_edge=False, caption=caption, caption_justify="left")


def _share(value: float, total: float) -> str:
    return f"{100 * value / total:.1f}%" if total > 0 else "-"


def pipeline_report(run: Mapping[str, Any], top: int = 15) -> RenderableType:
    """The top items (user stages and model layers), the stages, and the end-to-end breakdown."""
    section = run["pipeline"]
    parts: list[RenderableType] = []
    if top:
        parts += [top_items_table(section, top), Text("")]
    parts += [stages_table(section), Text(""), pipeline_summary(run)]
    return Group(*parts)


def top_items_table(section: Mapping[str, Any], top: int) -> Table:
    """User stages (self time) and model layers (measured) ranked together by median."""
    items = section["top"][:top]
    table = _table(f"Top {len(items)} items of pipeline {section['function']} by median time",
                   "stage: a trace point, its self time (without nested trace points); layer: a model layer, "
                   "measured with the profiler on")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("item", overflow="fold", min_width=10)
    table.add_column("kind", no_wrap=True)
    for header in ("median µs", "share", "P90 µs"):
        table.add_column(header, justify="right", no_wrap=True)
    for rank, item in enumerate(items, 1):
        kind = "layer" if item["kind"] == "layer" else f"stage ({item['kind']})"
        table.add_row(str(rank), Text(item["name"]), kind, f"{item['median_us']:.1f}", f"{100 * item['share']:.1f}%",
                      f"{item['p90_us']:.1f}")
    return table


def stages_table(section: Mapping[str, Any]) -> Table:
    """Every stage: kind, calls per run, time covered (P50, P90) and self time, share of the end to end."""
    e2e = section["end_to_end"]["median_us"]
    table = _table(f"Stages over {section['runs']} runs",
                   "pre / post: before the first / after the last model call; between: around or between model "
                   "calls; share: of the median end to end")
    table.add_column("stage", overflow="fold", min_width=10)
    table.add_column("kind", no_wrap=True)
    for header in ("calls/run", "P50", "P90", "self P50", "share"):
        table.add_column(header, justify="right", no_wrap=True)
    for level, stage in _tree(section["stages"]):
        stats = stage["stats"]
        table.add_row(Text("  " * level + stage["name"]), stage["kind"],
                      f"{stage['calls_per_run']:g}", human_us(stats["median_us"]), human_us(stats["p90_us"]),
                      human_us(stage["self"]["median_us"]), _share(stats["median_us"], e2e))
    return table


def _tree(stages: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The stages as a tree (each followed by the stages inside it), keeping their order among siblings."""
    names = {stage["name"] for stage in stages}
    out: list[tuple[int, Mapping[str, Any]]] = []
    placed: set[int] = set()

    def visit(parent: str | None, level: int) -> None:
        for index, stage in enumerate(stages):
            own_parent = stage.get("parent") if stage.get("parent") in names else None
            if index not in placed and own_parent == parent:
                placed.add(index)
                out.append((level, stage))
                visit(stage["name"], level + 1)

    visit(None, 0)
    out.extend((0, stage) for index, stage in enumerate(stages) if index not in placed)  # cycles (recursion)
    return out


def pipeline_summary(run: Mapping[str, Any]) -> Table:
    """End to end, the breakdown, the model's latency, and what it was measured on."""
    section = run["pipeline"]
    e2e, b = section["end_to_end"], section["breakdown"]
    grid = key_value_grid()
    grid.add_row("end to end", f"P50 {human_us(e2e['median_us'])}  P90 {human_us(e2e['p90_us'])}  "
                               f"P99 {human_us(e2e['p99_us'])}  mean {human_us(e2e['mean_us'])}  "
                               f"({section['runs']} runs)")
    total = b["end_to_end_us"]
    grid.add_row("breakdown", "  ".join(f"{label} {human_us(b[key])} ({_share(b[key], total)})" for label, key in
                                        (("pre", "pre_us"), ("model", "model_us"), ("post", "post_us"),
                                         ("other", "other_us"))) + "  (means per run; they add up)")
    model = run["model"]
    calls = section["model_calls_per_run"]
    lat = run.get("latency")
    model_line = f"{model['name']}, {calls:g} call(s) per run"
    if lat:
        model_line += f"; model.run P50 {human_us(lat['p50_us'])} (profiler off)"
    grid.add_row("model", Text(model_line))
    m = run.get("measurement")
    if m:
        grid.add_row("runtime", f"{m['backend']} {m['backend_version']}, {m['provider']}, opt level "
                                f"{m['opt_level']}, intra-op threads {m['threads'] or 'default'}")
        grid.add_row("layers", f"{100 * m['coverage']:.1f}% of each profiled model call inside kernels; "
                               f"{100 * m['mapped_share']:.1f}% of kernel time mapped to layers")
        machine = m["machine"]
        grid.add_row("machine", Text(f"{machine.get('hostname')}: {machine.get('cpu')}, {machine.get('cores')} cores"))
    trace = section["trace"]
    grid.add_row("traced run", f"run {trace['run']} of the {trace['phase']} phase (the median one)")
    if calls == 0:
        grid.add_row("WARNING", Text("the function never called model.run: nothing was measured of the model",
                                     style="red"))
    if section["interrupted"]:
        grid.add_row("INTERRUPTED", "fewer runs than asked were measured")
    return grid


# --- --stress for bench and profile -------------------------------------------------------------------------------

def _stress_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> StressSpec | None:
    if value is None:
        return None
    try:
        return parse_stress(value)
    except InputError as exc:
        raise click.BadParameter(str(exc)) from None


stress_option = click.option(
    "--stress", "stress", default=None, metavar="memory[:N]", callback=_stress_callback,
    help="Then measure in paired rounds without and with N background processes (default 1) streaming memory "
         "(arrays 4x the last-level cache) and report the change end to end, and per layer for profile; the "
         "layers that slow down most are marked memory_sensitive in the run.")


def _which(stressed: bool) -> str:
    return "stressed" if stressed else "baseline"


@contextmanager
def stress_progress(labels: Mapping[str, str], rounds: int, units: Mapping[str, str] | None = None
                    ) -> Iterator[Callable[[bool, int], PhaseUpdate]]:
    """One progress bar for the paired rounds: yields ``progress_for(stressed, round)``, the update function of
    that measurement, whose phases (``labels``' keys) get their own bars."""
    def key(stressed: bool, index: int, phase: str) -> str:
        return f"{index}-{_which(stressed)}-{phase}"

    combos = [(index, stressed) for index in range(rounds) for stressed in (False, True)]
    all_labels = {key(stressed, index, phase): f"round {index + 1}/{rounds} {_which(stressed)}: {label}"
                  for index, stressed in combos for phase, label in labels.items()}
    all_units = {key(stressed, index, phase): unit for index, stressed in combos
                 for phase, unit in (units or {}).items()}
    with phase_progress(all_labels, all_units) as update:
        def progress_for(stressed: bool, index: int) -> PhaseUpdate:
            return lambda phase, done, total: update(key(stressed, index, phase), done, total)

        yield progress_for


def stress_report(run: Mapping[str, Any], top: int = 10) -> RenderableType:
    """The ``stress`` section: end to end without and with stress, the most affected layers, what ran (drawn
    from :func:`layerscope.report.views.stress.stress_view`, which the HTML report shows too)."""
    view = stress_view(run)
    assert view is not None, "stress_report needs a run with a stress section"
    parts: list[RenderableType] = [Text(""), _stress_latency_table(view)]
    compared = stress_compared(run)
    if compared and top:
        min_share = stress_thresholds(run)[0]
        eligible = stress_eligible(compared, min_share=min_share, keep_sensitive=False)
        parts += [Text(""), _stress_layers_table(eligible, top, min_share)]
    parts += [Text(""), _stress_context(view)]
    return Group(*parts)


def _stress_latency_table(view: StressView) -> Table:
    processes = view.processes or 0
    table = _table(f"End to end without and with memory stress ({processes} background process"
                   f"{'es' if processes > 1 else ''}), paired rounds",
                   f"change: stressed / baseline - 1 within a round; all: the median over the rounds (they range "
                   f"from {_change(view.change_low)} to {_change(view.change_high)}); cores busy: this process's "
                   "CPU time / wall time")
    table.add_column("round", no_wrap=True)
    for header in ("baseline P50", "stressed P50", "change", "cores busy", "under stress"):
        table.add_column(header, justify="right", no_wrap=True)
    for r in view.rounds:
        table.add_row(f"{r.number} ({r.order})", us_text(r.baseline_p50_us), us_text(r.stressed_p50_us),
                      _change(r.change), _fixed2(r.baseline_cores_busy), _fixed2(r.stressed_cores_busy))
    table.add_row("all", "", "", _change(view.latency_change), "", "")
    return table


_change = fixed(1, signed=True, scale=100, suffix="%")
_fixed2 = fixed(2)


def _stress_layers_table(eligible: list[tuple[int, Mapping[str, Any]]], top: int, min_share: float) -> Table:
    ranked = [layer for _, layer in eligible[:top]]
    table = _table(f"Layers most slowed by memory stress: top {len(ranked)} by ratio, of the {len(eligible)} "
                   f"layers with at least {min_share:.1%} of the layer time",
                   "baseline / stressed: medians over the rounds; ratio: median of the rounds' paired ratios, "
                   "min: the smallest; * memory-sensitive (rule: the run file's stress.rule)")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("layer", overflow="fold", min_width=10)
    table.add_column("op", no_wrap=True)
    for header in ("baseline µs", "stressed µs", "ratio", "min"):
        table.add_column(header, justify="right", no_wrap=True)
    for rank, layer in enumerate(ranked, 1):
        meas = layer["measured"]
        mark = " *" if meas.get("memory_sensitive") else ""
        table.add_row(str(rank), Text(layer["id"] + mark), Text(layer.get("op_type", "")),
                      f"{meas['stress_baseline_us']:.1f}",
                      f"{meas['stress_median_us']:.1f}", f"{meas['stress_ratio']:.2f}",
                      f"{meas['stress_ratio_min']:.2f}")
    return table


def _stress_context(view: StressView) -> Table:
    grid = key_value_grid()
    for row in view.context:
        grid.add_row(row.label, Text(row.value))
    for notice in view.warnings:
        grid.add_row(notice.level.upper(), Text(notice.text, style="red" if notice.level == "warning" else "yellow"))
    if view.order:
        grid.add_row("MEASURED", view.order)
    return grid
