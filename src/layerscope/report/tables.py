"""Tables of a run for scripts and posts: a CSV per layer and a Markdown summary.

Pure functions of a saved run (:mod:`layerscope.report.views` supply the rows). Contracts:

- :func:`layers_csv`: one row per layer in the run's order, namespaced columns (``layer.*``, ``cost.*``,
  ``est.*``, ``pred.*`` (the kernel predictor's, empty without one), ``tl.*``, ``meas.*``, ``derived.*``) fixed in
  :data:`CSV_COLUMNS` then :data:`RUNTIME_COLUMNS` then :data:`MEMORY_COLUMNS`
  whatever the run holds; a value
  the run does not hold is an empty cell, never 0. Text cells that a spreadsheet would run as a formula
  (starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return) get a leading ``'``. RFC 4180 quoting,
  ``\\n`` line ends;
- :func:`markdown_summary`: GitHub-flavoured Markdown to paste into a pull request or a forum post: the
  headline numbers, the summary sections, the slowest layers, the findings when the run has them and what the
  run is missing. Names from the model or a vendor's file are put in code spans (no HTML, no emphasis) with
  ``|`` escaped, so a layer named ``<img src=x onerror=alert(1)>`` reads as text.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from typing import Any

from layerscope.report.noise import steadiness_verdict, unsteady_text
from layerscope.report.units import human_count
from layerscope.report.views.common import Run
from layerscope.report.views.findings import findings
from layerscope.report.views.layers import LayerRow, layer_rows, scale_factor, share_basis, top_layers
from layerscope.report.views.summary import headline, measured_memory, missing_notes, summary_sections
from layerscope.runfile.models import KernelProfileMeasurement, LayerMeasured, RunFile
from layerscope.textsafe import terminal_text

Getter = Callable[[LayerRow], Any]

_NOT_MEASURED = LayerMeasured()


def _meas(row: LayerRow) -> LayerMeasured:
    """The row's ``measured`` section, an empty one (every field ``None``) when the layer was not measured."""
    return row.layer.measured if row.layer.measured is not None else _NOT_MEASURED


def _tl(key: str) -> Getter:
    """A field of the row's ``timeline.layers`` entry (``None`` when the timeline did not schedule the layer)."""
    return lambda r: getattr(r.timeline, key) if r.timeline is not None else None


#: The CSV's columns, in order: name and how to get the value from a row.
CSV_COLUMNS: tuple[tuple[str, Getter], ...] = (
    ("layer.index", lambda r: r.index),
    ("layer.id", lambda r: r.id),
    ("layer.name", lambda r: r.name),
    ("layer.op_type", lambda r: r.op_type),
    ("layer.domain", lambda r: r.domain),
    ("layer.input_shapes", lambda r: " ".join(r.input_shapes)),
    ("layer.output_shapes", lambda r: " ".join(r.output_shapes)),
    ("cost.macs", lambda r: r.layer.macs),
    ("cost.flops", lambda r: r.layer.flops),
    ("cost.params", lambda r: r.layer.params),
    ("cost.bytes_read", lambda r: r.layer.bytes_read),
    ("cost.bytes_written", lambda r: r.layer.bytes_written),
    ("cost.weight_bytes", lambda r: r.layer.weight_bytes),
    ("est.latency_us", lambda r: r.layer.est.latency_us),
    ("est.compute_us", lambda r: r.layer.est.compute_us),
    ("est.load_us", lambda r: r.layer.est.load_us),
    ("est.store_us", lambda r: r.layer.est.store_us),
    ("est.overhead_us", lambda r: r.layer.est.overhead_us),
    ("est.bound", lambda r: r.layer.est.bound),
    ("est.unit", lambda r: r.unit),
    ("est.dtype", lambda r: r.layer.est.dtype),
    ("est.ddr_read_bytes", lambda r: r.layer.est.ddr_read_bytes),
    ("est.ddr_write_bytes", lambda r: r.layer.est.ddr_write_bytes),
    ("est.fallback_reason", lambda r: r.layer.est.fallback_reason),
    ("est.method", lambda r: r.layer.est.method),
    ("pred.latency_us", lambda r: r.layer.predicted.latency_us if r.layer.predicted is not None else None),
    ("pred.kernel", lambda r: r.layer.predicted.kernel if r.layer.predicted is not None else None),
    ("tl.core", _tl("core")),
    ("tl.active_start_us", _tl("active_start_us")),
    ("tl.active_end_us", _tl("active_end_us")),
    ("meas.status", lambda r: r.status),
    ("meas.median_us", lambda r: _meas(r).median_us),
    ("meas.mean_us", lambda r: _meas(r).mean_us),
    ("meas.p90_us", lambda r: _meas(r).p90_us),
    ("meas.min_us", lambda r: _meas(r).min_us),
    ("meas.max_us", lambda r: _meas(r).max_us),
    ("meas.cv", lambda r: _meas(r).cv),
    ("meas.samples", lambda r: _meas(r).samples),
    ("meas.kernel", lambda r: r.kernel),
    ("meas.fused_group", lambda r: " ".join(r.fused_group)),
    ("meas.split", lambda r: r.split if r.layer.measured is not None else None),
    ("meas.method", lambda r: _meas(r).method),
    ("derived.meas_over_est", lambda r: None if r.ratio is None else round(r.ratio, 6)),
    ("derived.share", lambda r: None if r.share is None else round(r.share, 6)),
)

#: Columns after :data:`CSV_COLUMNS`: the runtime that measured the layer (the run's backend and device; for a layer
#: that fell back to another runtime, that runtime and its kernel's provider) and what its kernel ran as (precision:
#: the kernel's, else the run's; a compiling runtime's kernel implementation; a builder's tactic and the kernel's
#: input and output formats, ``; ``-separated, as TensorRT's layer info states).
RUNTIME_COLUMNS = ("meas.backend", "meas.device", "meas.precision", "meas.exec_type", "meas.tactic",
                   "meas.input_formats", "meas.output_formats")

#: Columns after :data:`RUNTIME_COLUMNS`: the sizes the runtime's profiler reported for the kernel that wrote the
#: layer's output (bytes), whether that output is live at the measured peak (``measurement.memory``), and the
#: run's steadiness verdict (``UNSTEADY (moved 33%)`` or ``steady``, on every measured layer's row).
MEMORY_COLUMNS = ("meas.output_bytes", "meas.activation_bytes", "meas.parameter_bytes", "meas.at_peak",
                  "meas.steadiness")

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """A value as a CSV cell: ``None`` empty, bools ``true``/``false``, floats as Python prints them (shortest
    round-trip), text guarded against spreadsheet formulas."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def layers_csv(run: RunFile) -> str:
    """The per-layer CSV (see the module docstring)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*(name for name, _ in CSV_COLUMNS), *RUNTIME_COLUMNS, *MEMORY_COLUMNS])
    runtime, memory = _runtime_cells(run), _memory_cells(run)
    for row in layer_rows(run):
        writer.writerow([*(csv_cell(get(row)) for _, get in CSV_COLUMNS), *(csv_cell(v) for v in runtime(row)),
                         *(csv_cell(v) for v in memory(row))])
    return buffer.getvalue()


def _runtime_cells(run: Run) -> Callable[[LayerRow], list[Any]]:
    """The :data:`RUNTIME_COLUMNS` of a layer row (empty for a layer the run did not measure)."""
    measurement = run.measurement
    kernels = {k.name: k for k in run.kernels}

    def cells(row: LayerRow) -> list[Any]:
        if not row.detail.get("measured") or measurement is None:
            return [None] * len(RUNTIME_COLUMNS)
        kernel = kernels.get(row.kernel) if row.kernel is not None else None
        measured = row.layer.measured
        backend: str | None
        device: str | None
        if measured is not None and measured.fallback_reason and measured.runtime:
            # a layer another runtime ran (a fallback): its runtime and its kernel's provider and precision
            backend, device = measured.runtime, kernel.provider if kernel is not None else None
            precision = kernel.precision if kernel is not None else None
        else:
            backend, device = measurement.backend, getattr(measurement, "device", None) or measurement.provider
            precision = (kernel.precision if kernel is not None else None) or getattr(measurement, "precision", None)
        if kernel is None:
            return [backend, device, precision, *([None] * (len(RUNTIME_COLUMNS) - 3))]
        return [backend, device, precision, kernel.exec_type, kernel.tactic,
                _joined(kernel.input_formats), _joined(kernel.output_formats)]

    return cells


def _memory_cells(run: Run) -> Callable[[LayerRow], list[Any]]:
    """The :data:`MEMORY_COLUMNS` of a layer row (empty for a layer the run did not measure; ``meas.at_peak`` empty
    when the run has no measured memory)."""
    memory = measured_memory(run)
    holders = set(memory.peak_layers) if memory is not None else set()
    m = run.measurement
    verdict = steadiness_verdict(m.steadiness) if isinstance(m, KernelProfileMeasurement) else None

    def cells(row: LayerRow) -> list[Any]:
        measured = row.layer.measured
        if measured is None:
            return [None] * len(MEMORY_COLUMNS)
        return [measured.output_bytes, measured.activation_bytes, measured.parameter_bytes,
                (row.id in holders) if memory is not None else None, verdict]

    return cells


def _joined(values: Sequence[str] | None) -> str | None:
    """A list as one cell, ``; ``-separated (formats hold spaces); ``None`` for no list."""
    return "; ".join(values) if values else None


# --------------------------------------------------------------------------------------------------- markdown
_BACKTICKS = re.compile("`+")


def md_code(text: Any) -> str:
    """``text`` as an inline code span safe inside a table cell (CommonMark's rule: a fence one backtick longer
    than the longest run of backticks inside, a space inside it when the text starts or ends with one), pipes
    escaped, one line, control and bidirectional-override characters removed (:func:`terminal_text`)."""
    value = terminal_text(" ".join(str(text).split()))
    if not value:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}".replace("|", "\\|")


def md_text(text: Any, *, strip: bool = True) -> str:
    """Plain text for a table cell: Markdown and HTML specials escaped, one line (``strip``: trimmed), control and
    bidirectional-override characters removed."""
    value = " ".join(str(text).split()) if strip else " ".join(str(text).splitlines())
    value = terminal_text(value)
    for char in "\\`*_[]<>|#":
        value = value.replace(char, "\\" + char)
    return value.replace("&", "&amp;")


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A GitHub table; ``align`` has one letter per column (``l`` or ``r``; missing means left)."""
    marks = ["---:" if (align[i:i + 1] == "r") else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _top_table(rows: Sequence[LayerRow], n: int) -> str:
    ranked = top_layers(rows, n)
    measured = any(r.meas_us is not None for r in rows)
    table = [[str(rank), md_code(r.id), md_code(r.op_type), md_text(r.output_shapes[0] if r.output_shapes else "-"),
              human_count(r.macs) if r.macs else "-", _num(r.est_us), _num(r.meas_us),
              _num(r.ratio, "{:.2f}"), _num(None if r.share is None else 100 * r.share, "{:.1f}%"),
              md_text(r.bound or "-"), md_text(r.unit or "-")]
             for rank, r in enumerate(ranked, 1)]
    title = f"Top {len(ranked)} of {len(rows)} layers by {'measured' if measured else 'estimated'} time"
    return f"### {title}\n\n" + md_table(
        ["#", "layer", "op", "output", "MACs", "est. µs", "meas. µs", "meas/est", "share", "bound", "unit"],
        table, "rllrrrrrrll")


def _findings_table(run: Run, n: int) -> str | None:
    rows = findings(run, n)
    if not rows:
        return None
    body = [[md_text(f.severity), md_code(f.rule), ", ".join(md_code(x) for x in f.layers[:3])
             + (f" +{len(f.layers) - 3}" if len(f.layers) > 3 else ""), md_text(f.hazard), md_text(f.mitigation),
             md_text(f.expected_gain or "-")] for f in rows]
    return "### Findings\n\n" + md_table(["severity", "rule", "layers", "hazard", "mitigation", "expected gain"], body)


def markdown_summary(run: RunFile, top: int = 10) -> str:
    """The Markdown summary (see the module docstring); ``top`` slowest layers are listed."""
    parts = [f"## layerscope report: {md_code(run.model.name or '?')}"]
    metrics = headline(run)
    if metrics:
        parts.append(md_table([md_text(m.label) for m in metrics], [[md_text(m.value) for m in metrics]],
                              "r" * len(metrics)))
    m = run.measurement
    verdict = unsteady_text(m.steadiness) if isinstance(m, KernelProfileMeasurement) else None
    if verdict is not None:
        parts.append(f"> **{md_text(verdict)}**")
    for section in summary_sections(run):
        block = f"### {md_text(section.title)}\n\n" + md_table(
            ["", ""], [[md_text(row.label), _value_cell(row.label, row.value)] for row in section.rows])
        if section.note:
            block += f"\n\n_{md_text(section.note)}_"
        parts.append(block)
    rows = layer_rows(run)
    if share_basis(run) is not None and top > 0:
        parts.append(_top_table(rows, top))
    k = scale_factor(run)
    if k is not None:
        parts.append(f"k = measured / estimated = **{k.value:.3f}** ({md_text(k.source)})"
                     + (f"\n\n**WARNING**: {md_text(k.warning)}" if k.warning else ""))
    findings_block = _findings_table(run, 10)
    if findings_block:
        parts.append(findings_block)
    notes = missing_notes(run)
    if notes:
        parts.append("### Not in this run\n\n" + "\n".join(f"- {_note(n)}" for n in notes))
    parts.append(_footer(run))
    return "\n\n".join(parts) + "\n"


#: Summary rows whose values are names or paths from the model or a vendor file (shown as code).
_CODE_ROWS = frozenset({"name", "file", "sha256", "inputs", "outputs", "producer", "unmatched kernels",
                        "eliminated layers", "unmapped kernels", "held by", "while running"})


def _value_cell(label: str, value: str) -> str:
    return md_code(value) if label in _CODE_ROWS and value != "none" else md_text(value)


def _note(text: str) -> str:
    """A missing-data note: its backticked commands stay code spans, the rest is escaped text."""
    pieces = text.split("`")
    return "".join(md_code(p) if i % 2 else md_text(p, strip=False) for i, p in enumerate(pieces))


def _footer(run: Run) -> str:
    kinds = []
    if run.estimate_info is not None and run.estimate_info.note:
        kinds.append("estimates are " + run.estimate_info.note)
    if run.measurement is not None:
        kinds.append("measured with " + str(run.measurement.source or run.measurement.backend))
    sentence = "; ".join(kinds)
    made_by = f"{run.tool.name} {run.tool.version or ''}".strip() if run.tool is not None else "layerscope"
    return f"<sub>{md_text(made_by)}" + (f": {md_text(sentence)}" if sentence else "") + "</sub>"
