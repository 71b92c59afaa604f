"""The HTML report: one self-contained file that works offline, rendered from a saved run.

:func:`render_html` is a pure function of the run (the same run gives the same bytes). Contract:

- tabs Summary, Layer Details, Timeline, Temporal Statistics, Charts and Graph; each says what the run lacks
  for it instead of failing (:func:`layerscope.report.views.summary.missing_notes`); an Experiments tab only when the
  run holds a section a later command added (``bisect``, ``comparison``, ``pipeline``, ``stress``:
  :func:`layerscope.report.views.experiments.experiments`), drawn in the markup (static tables, no script; a bisect's
  segments also as a bar chart with their intervals as error bars, :mod:`layerscope.report.views.bisect_chart`);
- the page explains what it draws (:mod:`layerscope.report.html_text`): one colour map by op type
  (``data.colours``) that the timelines, the scatter and their legends all read; every timeline track named; a
  layer's details with human labels and the terminal's number formats (``data.detail_labels``); a column whose
  every value is absent is not shown; the utilisation figures defined beside them, the Temporal tab's "compute
  utilisation" told apart from the terminal's "busy" (:mod:`layerscope.report.views.utilisation`);
- Jinja2 templates with inheritance (``templates/base.html`` <- ``templates/report.html``), autoescaped: every
  string from the model or a vendor's file is escaped in the markup;
- the data the page's script draws from is one ``<script type="application/octet-stream">`` holding JSON whose
  ``<``, ``>`` and ``&`` are written as ``\\u003c``, ``\\u003e``, ``\\u0026``, gzip-compressed and base64-encoded
  (:func:`data_island`: base64 has no ``<``, so it cannot close the element); the page decodes it with
  ``DecompressionStream`` and ``JSON.parse`` the first time a tab needs it: the Summary (metrics, sections,
  findings, time by op type and by block, the slowest layers) is markup and draws without it. The data is
  columnar (see "payload" below); the script sets text with ``textContent`` and escapes what goes into chart
  tooltips;
- big runs: the Layer Details table draws only the rows in view; a layer's details are built from the columns
  when it is clicked; above 5000 spans a timeline merges spans narrower than a pixel at the current zoom, and
  above :data:`GRAPH_MAX_LAYERS` layers the Graph tab draws the blocks
  (:func:`layerscope.report.views.layers.layer_blocks`); each says so on the page;
- everything is inlined: the stylesheet, the script and Apache ECharts (vendored in
  ``templates/vendor/echarts``, see its ``VENDORED.md``); a Content-Security-Policy allows no network access
  and only the page's own scripts (by hash), so an injected ``onerror=`` attribute could not run either.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from layerscope.report.html_text import (
    DDR_EFFECTIVE_DEFINITION,
    DDR_NOMINAL_DEFINITION,
    UNIT_BUSY_DEFINITION,
    UNIT_COMPUTE_DEFINITION,
    CategoryColours,
    category_colours,
    detail_label,
    group_title,
    track_names,
)
from layerscope.report.units import fixed, us_text
from layerscope.report.views import bisect_chart as bars
from layerscope.report.views.bench_sweep import bench_sweep_view
from layerscope.report.views.bisect import BISECT_GOAL_ERROR, BISECT_LARGE_SHARE
from layerscope.report.views.common import Run
from layerscope.report.views.experiments import Experiments, experiments
from layerscope.report.views.findings import findings
from layerscope.report.views.layers import (
    Blocks,
    BlockTotal,
    LayerRow,
    OpTotal,
    block_graph,
    block_totals,
    graph_layout,
    layer_blocks,
    layer_rows,
    op_type_totals,
    scale_factor,
    share_basis,
    top_layers,
)
from layerscope.report.views.summary import headline, missing_notes, summary_sections
from layerscope.report.views.timeline import Tracks, estimated_tracks, measured_tracks, temporal
from layerscope.report.views.utilisation import unit_use
from layerscope.runfile.models import RunFile

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

#: Columns of the layer table's data (the script names them the same way; a layer's index is its position).
LAYER_COLUMNS: tuple[str, ...] = ("id", "op", "shapes", "macs", "est", "meas", "ratio", "share", "bound",
                                  "unit", "core", "status", "group", "fallback", "block")

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
#
# The data island is columnar: one array per field, every array ``n`` long (layer i is position i), and every
# repeated string (op types, shapes, units, bounds, detail text) an index into one table ``strings``. Numbers are
# rounded to what the page shows (µs to 0.001, ratios to 0.0001, shares to 1e-6). Detail values are columns too
# (one per group and key, ``null`` where a layer has no such value), so a layer's details are built when it is
# clicked, from position i of each column.


#: Above this many layers the Graph tab shows the block graph (:func:`layerscope.report.views.layers.block_graph`)
#: instead of one node per layer; the page says so and names the threshold.
GRAPH_MAX_LAYERS = 5000
#: How many blocks the Summary's table lists (the slowest; the page says how many there are).
TOP_BLOCKS = 20
#: How many op types the Summary's table lists (the slowest).
TOP_OPS = 25


class _Strings:
    """A string table: each distinct string once, referred to by index (first appearance order)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def ref(self, text: str | None) -> int | None:
        return None if text is None else self.index.setdefault(text, len(self.index))

    def refs(self, texts: Any) -> list[int | None]:
        index = self.index
        return [None if t is None else index.setdefault(t, len(index)) for t in texts]


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _number(value: float | None) -> float | int | None:
    """A count as an int when it is whole (``147456.0`` -> ``147456``)."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def _shapes_text(row: LayerRow) -> str:
    return " → ".join(p for p in (", ".join(row.input_shapes), ", ".join(row.output_shapes)) if p)


def _group_text(row: LayerRow) -> str | None:
    return f"{row.kernel} (×{len(row.fused_group)})" if row.fused_group else None


def _layers_payload(rows: list[LayerRow], blocks: Blocks, strings: _Strings) -> dict[str, list[Any]]:
    """The layer table's columns (see :data:`LAYER_COLUMNS`): ``id`` as text, ``est``/``meas``/``ratio``/
    ``share``/``macs``/``core``/``block`` as numbers, the others as indices into the string table."""
    return {
        "id": [r.id for r in rows],
        "op": strings.refs(r.op_type for r in rows),
        "shapes": strings.refs(_shapes_text(r) for r in rows),
        "macs": [_number(r.macs) for r in rows],
        "est": [_r(r.est_us) for r in rows],
        "meas": [_r(r.meas_us) for r in rows],
        "ratio": [_r(r.ratio, 4) for r in rows],
        "share": [_r(r.share, 6) for r in rows],
        "bound": strings.refs(r.bound for r in rows),
        "unit": strings.refs(r.unit for r in rows),
        "core": [r.core for r in rows],
        "status": strings.refs(r.status for r in rows),
        "group": strings.refs(_group_text(r) for r in rows),
        "fallback": strings.refs(r.fallback_reason for r in rows),
        "block": list(blocks.of_layer),
    }


def _packed(values: list[Any], scale: int) -> list[Any]:
    """A numeric column as ``["d", scale, deltas]`` when every value is a multiple of ``1 / scale`` and that is
    shorter: ``deltas[i]`` is ``round(values[i] * scale)`` less the last non-null one before it (``null`` stays
    ``null``), so the page reads ``values[i] = (deltas[0] + ... + deltas[i]) / scale`` (an integer sum divided
    once: the same number as the decimal). Times in schedule order become small integers that gzip packs well.
    Else ``["n", values]``."""
    present = [v for v in values if v is not None]
    if not set(map(type, present)) <= {int, float} or (present and max(map(abs, present)) >= 2**40):
        return ["n", values]
    scaled = [None if v is None else round(v * scale) for v in values]
    if any(n is not None and n / scale != v for n, v in zip(scaled, values, strict=True)):
        return ["n", values]
    deltas: list[int | None]
    if None in scaled:
        deltas, last = [], 0
        for n in scaled:
            deltas.append(None if n is None else n - last)
            last = last if n is None else n
    else:
        deltas = [b - a for a, b in zip([0, *scaled[:-1]], scaled, strict=True)]  # type: ignore[operator]
    packed = ["d", scale, deltas]
    return packed if len(json.dumps(deltas)) < len(json.dumps(values)) else ["n", values]


def _detail_column(values: list[Any], strings: _Strings) -> list[Any]:
    """One detail column: ``["n", numbers]`` (numbers and booleans as the run holds them),
    ``["d", [scale, deltas]]`` (numbers delta-coded: :func:`_packed`), ``["s", string refs]`` (text),
    ``["l", lists of string refs]`` (lists of text) or ``["j", string refs]`` (anything else as JSON text);
    ``null`` where a layer has no value."""
    kinds = set(map(type, values)) - {type(None)}
    if kinds <= {bool, int, float}:
        if bool in kinds:
            return ["n", values]
        packed = _packed(values, 1000)
        return ["d", packed[1:]] if packed[0] == "d" else packed
    if kinds == {str}:
        return ["s", strings.refs(values)]
    present = [v for v in values if v is not None]
    if all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in present):
        return ["l", [None if v is None else strings.refs(v) for v in values]]
    return ["j", [None if v is None else strings.ref(json.dumps(v, sort_keys=True, ensure_ascii=False))
                  for v in values]]


def _details_payload(rows: list[LayerRow], strings: _Strings) -> list[list[Any]]:
    """``[[group, [[key, column], ...]], ...]``: groups in the order the rows first hold them, keys sorted. The
    ``layer`` group's ``id`` is the table's ``id`` column (the page shows it from there) and its ``name`` is left
    out where it equals the id. :func:`_detail_labels` names each group and key for the reader."""
    keys: dict[str, set[str]] = {}
    for row in rows:
        for group, section in row.detail.items():
            keys.setdefault(group, set()).update(section)
    keys.get("layer", set()).discard("id")
    out = []
    for group, names in keys.items():
        held = [row.detail.get(group, _NO_VALUES) for row in rows]
        columns = []
        for key in sorted(names):
            values = [h.get(key) for h in held]
            if group == "layer" and key == "name":
                values = [None if v == row.id else v for v, row in zip(values, rows, strict=True)]
                if all(v is None for v in values):
                    continue
            columns.append([key, _detail_column(values, strings)])
        out.append([group, columns])
    return out


_NO_VALUES: dict[str, Any] = {}


def _detail_labels(rows: list[LayerRow], details: list[list[Any]], target: str | None) -> dict[str, Any]:
    """``{group: [title, {key: [label, format]}]}`` for every group and key of ``details``
    (:func:`layerscope.report.html_text.detail_label`: human labels, the format the page gives the value)."""
    out: dict[str, Any] = {}
    for group, columns in details:
        keys = {}
        for key, _ in columns:
            label, fmt = detail_label(key, [row.detail.get(group, _NO_VALUES).get(key) for row in rows])
            keys[key] = [label, fmt]
        out[group] = [group_title(group, target), keys]
    return out


def _tracks_payload(tracks: Tracks | None, strings: _Strings, *, names: bool,
                    cpu_units: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """Tracks as columns ``track``, ``start``, ``end``, ``layer`` (and ``name``, string refs, for kernels); the
    numeric ones packed by :func:`_packed` (µs to 0.001); each track named for what it is
    (:func:`layerscope.report.html_text.track_names`; ``cpu_units``: the units CPU-fallback layers ran on)."""
    if tracks is None:
        return None
    columns: dict[str, list[Any]] = {"track": [], "start": [], "end": [], "layer": []}
    if names:
        columns["name"] = []
    for t, track in enumerate(tracks.tracks):
        for s in track.slices:
            columns["track"].append(t)
            columns["start"].append(_r(s.start_us))
            columns["end"].append(_r(s.end_us))
            columns["layer"].append(s.layer)
            if names:
                columns["name"].append(strings.ref(s.name))
    spans = len(columns["track"])
    for key, scale in (("track", 1), ("start", 1000), ("end", 1000), ("layer", 1)):
        columns[key] = _packed(columns[key], scale)
    return {"source": tracks.source, "note": tracks.note, "end_us": _r(tracks.end_us),
            "tracks": track_names([t.name for t in tracks.tracks], "meas" if names else "est", cpu_units),
            "spans": spans, **columns}


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


def _graph_payload(run: Run, blocks: Blocks, totals: list[BlockTotal]) -> dict[str, Any]:
    """One node per layer (``pos``, ``edges``) up to :data:`GRAPH_MAX_LAYERS` layers, else the block graph
    (``blocks``: ``pos``, ``edges``, and per block its layer count, first layer, estimated and measured µs)."""
    count = len(run.layers)
    payload: dict[str, Any] = {"layers": count, "max": GRAPH_MAX_LAYERS}
    if count <= GRAPH_MAX_LAYERS:
        layout = graph_layout(run)
        payload.update(pos=[[x, y] for x, y in layout.position], edges=[list(e) for e in layout.edges])
        return payload
    layout = block_graph(run, blocks)
    payload["blocks"] = {"pos": [[x, y] for x, y in layout.position], "edges": [list(e) for e in layout.edges],
                         "count": [t.count for t in totals], "first": [t.first for t in totals],
                         "est": [_r(t.est_us) for t in totals], "meas": [_r(t.meas_us) for t in totals],
                         "rule": blocks.text}
    return payload


@dataclass(frozen=True)
class _Page:
    """What the page draws: the layer rows, the share basis, the timelines' and the temporal series' payloads,
    the blocks and their totals, and all of it as the script's JSON (``data``)."""

    rows: list[LayerRow]
    basis: str | None
    estimated: dict[str, Any] | None
    measured: dict[str, Any] | None
    temporal: dict[str, Any] | None
    blocks: Blocks
    block_totals: list[BlockTotal]
    op_totals: list[OpTotal]
    colours: CategoryColours
    data: dict[str, Any]


def _cpu_units(rows: list[LayerRow]) -> tuple[str, ...]:
    """The units the run's CPU-fallback layers ran on."""
    return tuple(sorted({r.unit for r in rows if r.fallback_reason and r.unit}))


def _page(run: Run) -> _Page:
    rows = layer_rows(run)
    basis = share_basis(run)
    k = scale_factor(run)
    blocks = layer_blocks(run)
    totals = block_totals(rows, blocks)
    ops = op_type_totals(rows)
    strings = _Strings()
    colours = category_colours([t.op_type for t in ops])
    layers = _layers_payload(rows, blocks, strings)
    details = _details_payload(rows, strings)
    estimated = _tracks_payload(estimated_tracks(run), strings, names=False, cpu_units=_cpu_units(rows))
    measured = _tracks_payload(measured_tracks(run), strings, names=True)
    temporal_series = _temporal_payload(run)
    data = {
        "n": len(rows),
        "basis": basis,
        "layers": layers,
        "details": details,
        "detail_labels": _detail_labels(rows, details, run.target.name if run.target is not None else None),
        "colours": colours.as_data(),
        "ops": sorted({r.op_type for r in rows}),
        "blocks": {"names": list(blocks.names), "rule": blocks.text},
        "timeline": {"est": estimated, "meas": measured},
        "temporal": temporal_series,
        "charts": {
            "byOp": [[t.op_type, t.count, _r(t.est_us), _r(t.meas_us)] for t in ops],
            "top": [r.index for r in top_layers(rows, TOP_N)],
            "k": None if k is None else {"value": round(k.value, 6), "source": k.source, "warning": k.warning},
        },
        "graph": _graph_payload(run, blocks, totals),
        "strings": list(strings.index),
    }
    return _Page(rows, basis, estimated, measured, temporal_series, blocks, totals, ops, colours, data)


def report_data(run: Run) -> dict[str, Any]:
    """Everything the page's script draws, as JSON-ready data (columnar, with a string table: see above)."""
    return _page(run).data


def data_island(data: Any) -> str:
    """``data`` as the page carries it: :func:`script_json`'s text, gzip-compressed (level 6, no time stamp: the
    same data gives the same bytes) and base64-encoded. Base64 has no ``<``, ``>`` or ``&``, so the text cannot
    close its element; the page decodes it with ``DecompressionStream`` and ``JSON.parse``."""
    packed = gzip.compress(str(script_json(data)).encode("utf-8"), compresslevel=6, mtime=0)
    return base64.b64encode(packed).decode("ascii")


# --------------------------------------------------------------------------------------------------- page


def tabs(run: Run) -> tuple[tuple[str, str], ...]:
    """The page's tabs: :data:`TABS`, and :data:`EXPERIMENTS_TAB` when the run holds an experiment."""
    return _tabs(experiments(run))


def _tabs(exp: Experiments) -> tuple[tuple[str, str], ...]:
    return (*TABS, EXPERIMENTS_TAB) if exp else TABS


@dataclass(frozen=True)
class _Aggregate:
    """One row of the Summary's tables by op type, by block and of the slowest layers: ``index`` is the layer
    (or the block's first layer) the row links to."""

    name: str
    count: int
    est_us: float | None
    meas_us: float | None
    share: float | None
    index: int | None = None
    op_type: str | None = None
    block: int | None = None


@dataclass(frozen=True)
class _Aggregates:
    """The Summary's tables, drawn in the markup from the totals (no per-layer data needed to show them)."""

    ops: list[_Aggregate]
    ops_total: int
    blocks: list[_Aggregate]
    blocks_total: int
    blocks_rule: str
    top: list[_Aggregate]
    basis: str | None


def _aggregates(page: _Page) -> _Aggregates:
    def time(est: float | None, meas: float | None) -> float:
        return (meas if page.basis == "measured" else est) or 0.0

    ops = [_Aggregate(t.op_type, t.count, t.est_us, t.meas_us, t.share) for t in page.op_totals[:TOP_OPS]]
    slow = sorted(page.block_totals, key=lambda t: (-time(t.est_us, t.meas_us), t.index))[:TOP_BLOCKS]
    blocks = [_Aggregate(t.name, t.count, t.est_us, t.meas_us, t.share, t.first, block=t.index) for t in slow]
    top = [_Aggregate(r.id, 1, r.est_us, r.meas_us, r.share, r.index, r.op_type) for r in top_layers(page.rows, TOP_N)]
    return _Aggregates(ops, len(page.op_totals), blocks, len(page.block_totals), page.blocks.text, top, page.basis)


def _context(run: Run) -> dict[str, Any]:
    echarts, script = _scripts()
    page = _page(run)
    exp = experiments(run)
    uses = unit_use(run)
    tool = (run.tool.name, run.tool.version) if run.tool is not None else ("layerscope",)
    return {
        "title": f"layerscope report: {run.model.name or 'model'}",
        "model_name": run.model.name or "model",
        "target_name": run.target.name if run.target is not None else None,
        "tool_text": " ".join(v for v in tool if v),
        "tabs": _tabs(exp),
        "exp": exp,
        "bench_sweep": bench_sweep_view(run),
        "bisect_chart": bars.bisect_chart(exp.bisect),
        "bisect_colours": {"measured": bars.MEASURED_COLOUR, "noisy": bars.NOISY_COLOUR,
                           "interval": bars.INTERVAL_COLOUR, "estimate": bars.ESTIMATE_COLOUR},
        "bisect_large_share": BISECT_LARGE_SHARE,
        "bisect_goal_error": BISECT_GOAL_ERROR,
        "metrics": headline(run),
        "sections": summary_sections(run),
        "findings": findings(run, 10),
        "findings_total": len(findings(run)),
        "missing": missing_notes(run),
        "unit_use": list(zip(uses, track_names([u.name for u in uses], "est", _cpu_units(page.rows)), strict=True)),
        "definitions": {"busy": UNIT_BUSY_DEFINITION, "compute": UNIT_COMPUTE_DEFINITION,
                        "ddr_effective": DDR_EFFECTIVE_DEFINITION, "ddr_nominal": DDR_NOMINAL_DEFINITION},
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
        "aggregates": _aggregates(page),
        "graph_max_layers": GRAPH_MAX_LAYERS,
        "layer_count": len(page.rows),
        "block_count": len(page.blocks.names),
        "blocks_rule": page.blocks.text,
        "data_island": data_island(page.data),
        "echarts_js": Markup(echarts),  # the vendored file, inlined as shipped
        "report_js": Markup(script),  # our own script
        "csp": f"default-src 'none'; script-src {csp_hash(echarts)} {csp_hash(script)}; "
               "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'",
    }


def render_html(run: RunFile) -> str:
    """The report page for ``run`` (see the module docstring)."""
    return _environment().get_template("report.html").render(**_context(run))
