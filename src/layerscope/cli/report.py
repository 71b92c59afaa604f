"""``layerscope report RUN``: the reports people read, rendered from a saved run (nothing is measured again).

``--format table|html|csv|md|trace|onnx`` picks one renderer of :mod:`layerscope.report.renderers`;
``-o/--output OUT`` is where it goes. ``table`` (the terminal report, as ``profile --format table`` names it;
``terminal`` is its deprecated spelling, one line on stderr) prints what the command that made the run printed
(``estimate``, ``profile``, ``bench``, ``bisect``, ``pipeline``: the same tables). Without ``-o`` the text
formats (table, csv, md) print on stdout, and html, trace and onnx are written next to RUN (``run.json`` ->
``run.html``, ``run.trace.json``, ``run.annotated.onnx``); ``-o -`` prints a text format on stdout. With no
``--format`` the format is the one ``-o``'s suffix names, else html (``report RUN`` writes ``run.html``).

More outputs in one call: ``--trace out.json[.gz]`` (Perfetto / Chrome trace), ``--csv out.csv``,
``--markdown out.md``, ``--annotate out.onnx`` (the model with the run's numbers on its nodes, for Netron).
Every file is written atomically. One line per file written; when the main output is stdout those lines, and
what the run lacks, go to stderr. Exit 2 for a bad run file, or for onnx when the model file is missing or is
not the run's model (sha256).
"""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.cli.console import SafeConsole, echo
from layerscope.cli.options import deprecation_notice
from layerscope.cli.outputs import OutputPath
from layerscope.collector import collector_paused
from layerscope.fileio import write_atomic
from layerscope.report.command_terminal import command_report
from layerscope.report.renderers import FORMATS, annotated_model, format_of, get_renderer
from layerscope.report.units import human_bytes
from layerscope.report.views.summary import missing_notes
from layerscope.runfile import load
from layerscope.runfile.models import RunFile

__all__ = ["command", "write_annotated", "write_html", "write_trace"]

#: Formats printed on stdout when no ``-o`` is given; the others are written next to RUN.
STDOUT_FORMATS = ("terminal", "csv", "md")
#: Suffix of the file written next to RUN, per format written there by default.
#: Where ``--format onnx`` writes without ``-o``: beside the run, under this suffix.
ANNOTATED_SUFFIX = ".annotated.onnx"
DEFAULT_SUFFIX = {"html": ".html", "trace": ".trace.json", "onnx": ANNOTATED_SUFFIX}


def write_html(run: RunFile, path: Path) -> Path:
    """Render the HTML report of ``run`` to ``path`` (used by ``report``, ``estimate --html``, ``profile --html``)."""
    return write_atomic(path, get_renderer("html").render(run))


def write_trace(run: RunFile, path: Path) -> Path:
    """The Perfetto / Chrome trace, gzip-compressed when ``path`` ends in ``.gz``."""
    return write_atomic(path, get_renderer("trace", compress=path.suffix == ".gz").render(run))


def write_annotated(run: RunFile, path: Path, model_path: Path | None) -> tuple[Path, int, int]:
    """The annotated model copy; returns the path, nodes annotated, nodes without a layer of the run."""
    result = annotated_model(run, model_path)
    return write_atomic(path, result.data), result.annotated, result.unmatched


#: ``--format`` names: the renderers', the terminal report named ``table`` as in the other commands.
FORMAT_CHOICES = tuple("table" if name == "terminal" else name for name in FORMATS)


def _format_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--format``'s value as the renderer's name: ``table`` is the ``terminal`` renderer; ``terminal`` itself
    is the deprecated spelling of ``table`` (one line on stderr)."""
    if value == "terminal":
        deprecation_notice("--format terminal", "--format table")
    return "terminal" if value == "table" else value


def _beside(run_path: Path, suffix: str) -> Path:
    base = run_path.with_suffix("") if run_path.suffix else run_path
    return base.with_name(base.name + suffix)


@click.command("report")
@click.argument("run_file", metavar="RUN", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice((*FORMAT_CHOICES, "terminal")), default=None,
              metavar=f"[{'|'.join(FORMAT_CHOICES)}]", callback=_format_name,
              help="table: what the command that made RUN printed (terminal: deprecated spelling); html, csv, md "
                   "(Markdown summary), trace "
                   "(Perfetto), onnx (the model annotated with the run) [default: from -o's suffix, else html].")
@click.option("-o", "--output", "output", type=OutputPath(allow_stdout=True), default=None, metavar="OUT",
              help="Where the --format output goes ('-': stdout) [default: stdout for table, csv, md; next to "
                   "RUN for html, trace, onnx].")
@click.option("--top", default=None, type=click.IntRange(min=0),
              help="With --format table: rows of the layer table [default: the command's own].")
@click.option("--trace", "trace_out", type=OutputPath(), default=None, metavar="OUT.json[.gz]",
              help="Also write the Perfetto / Chrome trace: measured kernels per thread, estimated layers per unit "
                   "and core, DDR bandwidth counters, pipeline spans (open in ui.perfetto.dev).")
@click.option("--csv", "csv_out", type=OutputPath(), default=None, metavar="OUT.csv",
              help="Also write one row per layer, namespaced columns (cost.*, est.*, meas.*).")
@click.option("--markdown", "md_out", type=OutputPath(), default=None, metavar="OUT.md",
              help="Also write a Markdown summary to paste into a pull request or a forum post.")
@click.option("--annotate", "onnx_out", type=OutputPath(), default=None, metavar="OUT.onnx",
              help="Also write a copy of the run's model whose nodes carry the run's numbers (Netron shows them).")
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None, metavar="MODEL",
              help="With onnx / --annotate: the model file, when it is no longer at the run's model.path (same "
                   "sha256).")
def command(*, run_file: Path, fmt: str | None, output: Path | None, top: int | None, trace_out: Path | None,
            csv_out: Path | None, md_out: Path | None, onnx_out: Path | None, model_path: Path | None) -> None:
    """Render a saved RUN file again: the terminal report, HTML, CSV, Markdown, Perfetto trace, annotated model."""
    with collector_paused():  # rows, cells and payloads by the 100k, none of them in a cycle
        _report(run_file=run_file, fmt=fmt, output=output, top=top, trace_out=trace_out, csv_out=csv_out,
                md_out=md_out, onnx_out=onnx_out, model_path=model_path)


def _report(*, run_file: Path, fmt: str | None, output: Path | None, top: int | None, trace_out: Path | None,
            csv_out: Path | None, md_out: Path | None, onnx_out: Path | None, model_path: Path | None) -> None:
    run = load(run_file)  # the one place the document becomes the typed run
    extras = any((trace_out, csv_out, md_out, onnx_out))
    chosen = fmt or (format_of(output) if output is not None and str(output) != "-" else None)
    if chosen is None and (output is not None or not extras):
        chosen = "html"
    to_stdout = chosen is not None and (str(output) == "-" or (output is None and chosen in STDOUT_FORMATS))
    if to_stdout and chosen not in STDOUT_FORMATS:
        raise click.BadParameter(f"--format {chosen} is not text: give a file", param_hint="-o/--output")
    written: list[tuple[str, Path, str]] = []
    onnx_paths = [p for p in (onnx_out,) if p is not None]
    if chosen == "onnx":
        onnx_paths.append(output if output is not None else _beside(run_file, ANNOTATED_SUFFIX))
    for target in onnx_paths:  # first: it is the one that can refuse
        path, annotated, unmatched = write_annotated(run, target, model_path)
        written.append(("annotated", path, f"{annotated} nodes annotated, {unmatched} without a layer of the run"))
    if to_stdout:
        if chosen == "terminal":
            SafeConsole().print(command_report(run, top))
        else:
            echo(str(get_renderer(chosen or "").render(run)), nl=False)
    elif chosen is not None and chosen != "onnx":
        path = output if output is not None else _beside(run_file, DEFAULT_SUFFIX.get(chosen, "." + chosen))
        if chosen == "trace":
            written.append(("trace", write_trace(run, path), "open in ui.perfetto.dev"))
        else:
            renderer = get_renderer(chosen, top=top)
            written.append((renderer.name, write_atomic(path, renderer.render(run)), ""))
    if trace_out is not None:
        written.append(("trace", write_trace(run, trace_out), "open in ui.perfetto.dev"))
    if csv_out is not None:
        written.append(("csv", write_atomic(csv_out, get_renderer("csv").render(run)), ""))
    if md_out is not None:
        written.append(("markdown", write_atomic(md_out, get_renderer("md").render(run)), ""))
    for kind, path, note in written:
        size = human_bytes(path.stat().st_size)
        echo(f"{kind:<10} {path}  ({size}{', ' + note if note else ''})", err=to_stdout)
    if chosen != "terminal":
        for note in missing_notes(run, str(run_file)):
            echo(f"missing    {note}", err=to_stdout)
