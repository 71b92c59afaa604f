"""``layerscope report RUN``: the reports people read, rendered from a saved run (nothing is measured again).

Outputs: ``-o report.html`` (self-contained, offline), ``--trace out.json[.gz]`` (Perfetto / Chrome trace),
``--csv out.csv`` (one row per layer), ``--markdown out.md`` (summary for a pull request or a post),
``--annotate out.onnx`` (the model with the run's numbers on its nodes, for Netron). With no output option the
HTML report is written next to RUN (``run.json`` -> ``run.html``). Every file is written atomically. Exit 2 for a
bad run file, or for ``--annotate`` when the model file is missing or is not the run's model (sha256).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from layerscope.cli.console import echo
from layerscope.cli.outputs import OutputPath
from layerscope.errors import InputError
from layerscope.fileio import write_atomic
from layerscope.report.html import render_html
from layerscope.report.perfetto import trace_bytes
from layerscope.report.tables import layers_csv, markdown_summary
from layerscope.report.units import human_bytes
from layerscope.report.views.summary import missing_notes
from layerscope.run import load_run


def as_saved(run: Mapping[str, Any]) -> dict[str, Any]:
    """``run`` as it reads back from its run file, so a report made in memory equals one made from the file."""
    loaded: dict[str, Any] = json.loads(json.dumps(run, allow_nan=False))
    return loaded


def write_html(run: Mapping[str, Any], path: Path) -> Path:
    """Render the HTML report of ``run`` to ``path`` (used by ``report``, ``estimate --html``, ``profile --html``)."""
    return write_atomic(path, render_html(as_saved(run)).encode("utf-8"))


def write_trace(run: Mapping[str, Any], path: Path) -> Path:
    """The Perfetto / Chrome trace, gzip-compressed when ``path`` ends in ``.gz``."""
    return write_atomic(path, trace_bytes(run, compress=path.suffix == ".gz"))


def write_annotated(run: Mapping[str, Any], path: Path, model_path: Path | None) -> tuple[Path, int, int]:
    """The annotated model copy; returns the path, nodes annotated, nodes without a layer of the run."""
    import onnx  # only here: a report from the run file alone does not need it

    from layerscope.report.annotate import annotate_model, check_model

    source = check_model(run, model_path)
    try:
        model = onnx.load_model(str(source))
    except Exception as exc:  # onnx raises several types for a corrupt file
        raise InputError(f"{source}: cannot read the model ({exc})") from None
    result = annotate_model(model, run)
    try:
        data = result.model.SerializeToString()
    except ValueError as exc:  # protobuf's 2 GB limit
        raise InputError(f"{source}: the annotated model cannot be written as one file ({exc})") from None
    return write_atomic(path, data), result.annotated, result.unmatched


def _default_html(run_path: Path) -> Path:
    return run_path.with_suffix(".html") if run_path.suffix else run_path.with_name(run_path.name + ".html")


@click.command("report")
@click.argument("run_file", metavar="RUN", type=click.Path(path_type=Path))
@click.option("-o", "--output", "html_out", type=OutputPath(), default=None, metavar="OUT.html",
              help="The self-contained HTML report (default, when no other output is asked for: RUN with .html).")
@click.option("--trace", "trace_out", type=OutputPath(), default=None, metavar="OUT.json[.gz]",
              help="Perfetto / Chrome trace: measured kernels per thread, estimated layers per unit and core, "
                   "DDR bandwidth counters (open in ui.perfetto.dev).")
@click.option("--csv", "csv_out", type=OutputPath(), default=None, metavar="OUT.csv",
              help="One row per layer, namespaced columns (cost.*, est.*, meas.*).")
@click.option("--markdown", "md_out", type=OutputPath(), default=None, metavar="OUT.md",
              help="A Markdown summary to paste into a pull request or a forum post.")
@click.option("--annotate", "onnx_out", type=OutputPath(), default=None, metavar="OUT.onnx",
              help="A copy of the run's model whose nodes carry the run's numbers (Netron shows them).")
@click.option("--model", "model_path", type=click.Path(path_type=Path), default=None, metavar="MODEL",
              help="With --annotate: the model file, when it is no longer at the run's model.path (same sha256).")
def command(*, run_file: Path, html_out: Path | None, trace_out: Path | None, csv_out: Path | None,
            md_out: Path | None, onnx_out: Path | None, model_path: Path | None) -> None:
    """Render the reports of a saved RUN file: HTML, Perfetto trace, CSV, Markdown, annotated model."""
    run = load_run(run_file)
    if not any((html_out, trace_out, csv_out, md_out, onnx_out)):
        html_out = _default_html(run_file)
    written: list[tuple[str, Path, str]] = []
    if onnx_out is not None:  # first: it is the one that can refuse
        path, annotated, unmatched = write_annotated(run, onnx_out, model_path)
        written.append(("annotated", path, f"{annotated} nodes annotated, {unmatched} without a layer of the run"))
    if html_out is not None:
        written.append(("html", write_html(run, html_out), ""))
    if trace_out is not None:
        written.append(("trace", write_trace(run, trace_out), "open in ui.perfetto.dev"))
    if csv_out is not None:
        written.append(("csv", write_atomic(csv_out, layers_csv(run).encode("utf-8")), ""))
    if md_out is not None:
        written.append(("markdown", write_atomic(md_out, markdown_summary(run).encode("utf-8")), ""))
    for kind, path, note in written:
        size = human_bytes(path.stat().st_size)
        echo(f"{kind:<10} {path}  ({size}{', ' + note if note else ''})")
    for note in missing_notes(run):
        echo(f"missing    {note}")
