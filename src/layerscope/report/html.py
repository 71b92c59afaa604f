"""The HTML report: one self-contained file that works offline, rendered from a saved run.

:func:`render_html` is a pure function of the run (the same run gives the same bytes). Contract:

- tabs Summary, Layer Details, Timeline, Temporal Statistics, Charts and Graph; each says what the run lacks
  for it instead of failing (:func:`layerscope.report.views.summary.missing_notes`); an Experiments tab only when the
  run holds a section a later command added (``bisect``, ``comparison``, ``pipeline``, ``stress``:
  :func:`layerscope.report.views.experiments.experiments`), drawn in the markup (static tables, no script);
- Jinja2 templates with inheritance (``templates/base.html`` <- ``templates/report.html``), autoescaped: every
  string from the model or a vendor's file is escaped in the markup;
- the data the page's script draws from is one ``<script type="application/json">`` whose ``<``, ``>`` and
  ``&`` are written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (it cannot close the element), parsed with
  ``JSON.parse``; the script sets text with ``textContent`` and escapes what goes into chart tooltips;
- everything is inlined: the stylesheet, the script and Apache ECharts (vendored in
  ``templates/vendor/echarts``, see its ``VENDORED.md``); a Content-Security-Policy allows no network access
  and only the page's own scripts (by hash), so an injected ``onerror=`` attribute could not run either.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from layerscope.report.units import fixed, us_text
from layerscope.report.views.bisect import BISECT_GOAL_ERROR, BISECT_LARGE_SHARE
from layerscope.report.views.common import Run
from layerscope.report.views.experiments import Experiments, experiments
from layerscope.report.views.findings import findings
from layerscope.report.views.layers import (
    LayerRow,
    graph_layout,
    layer_rows,
    op_type_totals,
    scale_factor,
    share_basis,
    top_layers,
)
from layerscope.report.views.summary import headline, missing_notes, summary_sections
from layerscope.report.views.timeline import Tracks, estimated_tracks, measured_tracks, temporal
from layerscope.runfile.io import as_run
from layerscope.runfile.models import RunLike

#: The tabs in order: id and title.
TABS: tuple[tuple[str, str], ...] = (
    ("summary", "Summary"),
    ("layers", "Layer Details"),
    ("timeline", "Timeline"),
    ("temporal", "Temporal Statistics"),
    ("charts", "Charts"),
    ("graph", "Graph"),
)
#: The tab of the sections later commands add (bisect, comparison, pipeline, stress), after :data:`TABS`, only in
#: a run that holds at least one: one tab rather than four, so that the tab bar stays the same from run to run and
#: the few tables a run holds read together (a compared run may also hold a bisect or a stress test).
EXPERIMENTS_TAB: tuple[str, str] = ("experiments", "Experiments")

#: Columns of the layer table's data rows (the script names them the same way).
LAYER_COLUMNS: tuple[str, ...] = ("index", "id", "op", "shapes", "macs", "est", "meas", "ratio", "share", "bound",
                                  "unit", "core", "status", "group", "fallback")

TOP_N = 20


def _asset(*parts: str) -> str:
    """The text of a file shipped under ``templates/``."""
    return resources.files("layerscope.report").joinpath("templates", *parts).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _environment() -> Environment:
    env = Environment(loader=PackageLoader("layerscope.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["with_code"] = with_code
    env.filters.update(NUMBER_FILTERS)
    return env


def _general(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _change(ratio: Any) -> str:
    """A ratio as a signed change: ``1.25`` -> ``"+25.0%"``."""
    return fixed(1, signed=True, scale=100, suffix="%")(ratio - 1 if isinstance(ratio, int | float) else None)


def _width(share: Any) -> str:
    """A share as a CSS percentage in 0..100 (a number only, safe in a style attribute)."""
    value = share if isinstance(share, int | float) else 0.0
    return f"{100 * min(1.0, max(0.0, value)):.2f}"


#: Number formats the templates use (``None`` reads ``-``): µs and ratios to 1 or 2 decimals, shares in percent.
NUMBER_FILTERS: dict[str, Any] = {
    "f1": fixed(1), "f2": fixed(2), "sf1": fixed(1, signed=True), "pct": fixed(1, scale=100, suffix="%"),
    "pct0": fixed(0, scale=100, suffix="%"), "spct": fixed(1, signed=True, scale=100, suffix="%"),
    "hus": us_text, "g": _general, "change": _change, "width": _width,
}


@lru_cache(maxsize=1)
def _scripts() -> tuple[str, str]:
    """(ECharts, the report's script): inlined as they ship."""
    return _asset("vendor", "echarts", "echarts.min.js"), _asset("assets", "report.js")


def with_code(text: str) -> Markup:
    """Escaped ``text`` whose backticked parts become ``<code>`` (the missing-data notes name commands)."""
    pieces = str(text).split("`")
    return Markup("").join(Markup("<code>{}</code>").format(p) if i % 2 else escape(p) for i, p in enumerate(pieces))


def script_json(data: Any) -> Markup:
    """``data`` as JSON safe inside a ``<script type="application/json">`` element (see the module docstring)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return Markup(text)  # safe: no '<', '>' or '&' is left in it


def csp_hash(script: str) -> str:
    """The CSP source expression allowing one inline script: ``'sha256-<base64>'``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"


# --------------------------------------------------------------------------------------------------- payload


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _layer_row(row: LayerRow) -> list[Any]:
    shapes = " → ".join(p for p in (", ".join(row.input_shapes), ", ".join(row.output_shapes)) if p)
    group = f"{row.kernel} (×{len(row.fused_group)})" if row.fused_group else ""
    return [row.index, row.id, row.op_type, shapes, row.macs, _r(row.est_us), _r(row.meas_us), _r(row.ratio, 4),
            _r(row.share, 6), row.bound, row.unit, row.core, row.status, group, row.fallback_reason]


def _tracks_payload(tracks: Tracks | None, *, names: bool) -> dict[str, Any] | None:
    """Tracks as ``{tracks, events: [[track, start, end, layer, name?]], names?}`` (names only for kernels)."""
    if tracks is None:
        return None
    name_index: dict[str, int] = {}
    events = []
    for t, track in enumerate(tracks.tracks):
        for s in track.slices:
            event: list[Any] = [t, _r(s.start_us), _r(s.end_us), s.layer]
            if names:
                event.append(name_index.setdefault(s.name, len(name_index)))
            events.append(event)
    payload: dict[str, Any] = {"source": tracks.source, "note": tracks.note, "end": _r(tracks.end_us),
                               "tracks": [t.name for t in tracks.tracks], "events": events}
    if names:
        payload["names"] = list(name_index)
    return payload


def _gbps(value: float | None) -> float | None:
    return None if value is None else round(value / 1e9, 4)


def _temporal_payload(run: Run) -> dict[str, Any] | None:
    series = temporal(run)
    if series is None:
        return None
    return {"t": list(series.starts_us), "interval": series.interval_us, "load": list(series.ddr_load_mb_per_s),
            "store": list(series.ddr_store_mb_per_s), "ddr": list(series.ddr_utilization),
            "ddr_nominal": list(series.ddr_nominal_utilization) or None,
            "nominal_gbps": _gbps(series.ddr_nominal_bytes_per_s),
            "effective_gbps": _gbps(series.ddr_effective_bytes_per_s),
            "units": [[unit, list(values)] for unit, values in series.utilization]}


@dataclass(frozen=True)
class _Page:
    """What the page draws: the layer rows, the share basis, the timelines' and the temporal series' payloads,
    and all of it as the script's JSON (``data``)."""

    rows: list[LayerRow]
    basis: str | None
    estimated: dict[str, Any] | None
    measured: dict[str, Any] | None
    temporal: dict[str, Any] | None
    data: dict[str, Any]


def _page(run: Run) -> _Page:
    rows = layer_rows(run)
    basis = share_basis(run)
    k = scale_factor(run)
    layout = graph_layout(run)
    estimated = _tracks_payload(estimated_tracks(run), names=False)
    measured = _tracks_payload(measured_tracks(run), names=True)
    temporal_series = _temporal_payload(run)
    data = {
        "basis": basis,
        "layers": {"cols": list(LAYER_COLUMNS), "rows": [_layer_row(r) for r in rows]},
        "details": [[[group, sorted(values.items())] for group, values in r.detail.items()] for r in rows],
        "ops": sorted({r.op_type for r in rows}),
        "timeline": {"est": estimated, "meas": measured},
        "temporal": temporal_series,
        "charts": {
            "byOp": [[t.op_type, t.count, _r(t.est_us), _r(t.meas_us)] for t in op_type_totals(rows)],
            "top": [r.index for r in top_layers(rows, TOP_N)],
            "k": None if k is None else {"value": round(k.value, 6), "source": k.source, "warning": k.warning},
        },
        "graph": {"pos": [[x, y] for x, y in layout.position], "edges": [list(e) for e in layout.edges]},
    }
    return _Page(rows, basis, estimated, measured, temporal_series, data)


def report_data(run: Run) -> dict[str, Any]:
    """Everything the page's script draws, as JSON-ready data (compact: rows as arrays)."""
    return _page(run).data


# --------------------------------------------------------------------------------------------------- page


def tabs(run: Run) -> tuple[tuple[str, str], ...]:
    """The page's tabs: :data:`TABS`, and :data:`EXPERIMENTS_TAB` when the run holds an experiment."""
    return _tabs(experiments(run))


def _tabs(exp: Experiments) -> tuple[tuple[str, str], ...]:
    return (*TABS, EXPERIMENTS_TAB) if exp else TABS


def _context(run: Run) -> dict[str, Any]:
    echarts, script = _scripts()
    page = _page(run)
    exp = experiments(run)
    tool = (run.tool.name, run.tool.version) if run.tool is not None else ("layerscope",)
    return {
        "title": f"layerscope report: {run.model.name or 'model'}",
        "model_name": run.model.name or "model",
        "target_name": run.target.name if run.target is not None else None,
        "tool_text": " ".join(v for v in tool if v),
        "tabs": _tabs(exp),
        "exp": exp,
        "bisect_large_share": BISECT_LARGE_SHARE,
        "bisect_goal_error": BISECT_GOAL_ERROR,
        "metrics": headline(run),
        "sections": summary_sections(run),
        "findings": findings(run, 10),
        "findings_total": len(findings(run)),
        "missing": missing_notes(run),
        "estimate_note": run.estimate_info.note if run.estimate_info is not None else None,
        "measured_note": run.measurement.source if run.measurement is not None else None,
        "has": {
            "layers": bool(page.rows),
            "estimated_timeline": page.estimated is not None,
            "measured_timeline": page.measured is not None,
            "temporal": page.temporal is not None,
            "estimate": any(row.est_us is not None for row in page.rows),
            "measured": any(row.meas_us is not None for row in page.rows),
            "experiments": bool(exp),
        },
        "basis": page.basis,
        "top_n": TOP_N,
        "data_json": script_json(page.data),
        "echarts_js": Markup(echarts),  # the vendored file, inlined as shipped
        "report_js": Markup(script),  # our own script
        "csp": f"default-src 'none'; script-src {csp_hash(echarts)} {csp_hash(script)}; "
               "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'",
    }


def render_html(run: RunLike) -> str:
    """The report page for ``run`` (see the module docstring)."""
    run = as_run(run)
    return _environment().get_template("report.html").render(**_context(run))
