"""The HTML report explains itself, checked in headless Chromium (as :mod:`test_report_browser` drives it): a colour
legend beside every chart that colours by op type, drawn from the map the chart uses; every timeline track named
(none ``-`` or empty); a layer's details with human labels, formatted as the terminal formats them; the bisect chart
with its intervals as error bars; no column whose every value is absent; the utilisation figures defined and told
apart from the terminal's "busy".

Runs: the shared report runs (:func:`test_report_runs.shared_runs`), the shared experiment runs (a bisect among
them), and a model built here whose 19 layers hold 18 op types, a zero-copy Reshape and a TopK that falls back to the
CPU on the RDK S100 (its int64 indices), estimated with and without the timeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from playwright.sync_api import Browser, Page

from layerscope.cli.main import main
from layerscope.report.console import render_text
from layerscope.report.html import render_html, report_data
from layerscope.report.html_text import (
    NO_UNIT_TRACK,
    OTHER_LABEL,
    PALETTE,
    UNKNOWN_UNIT_TRACK,
    detail_label,
    track_names,
)
from layerscope.report.timeline_terminal import units_table
from layerscope.report.units import fixed, human_bytes, human_count, human_us
from layerscope.report.views.bisect import bisect_view
from layerscope.report.views.bisect_chart import bisect_chart, nice_step
from layerscope.run import load_run
from layerscope.runfile import RunFile, as_run
from test_report_browser import open_report, show
from test_report_runs import ALL_RUNS, BARE_RUN, shared_experiment_runs, shared_runs

#: The unary op types of the built model, one layer each, between a Conv and a Reshape + TopK.
UNARY = ("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Softplus", "Elu", "Selu", "HardSigmoid", "LeakyRelu",
         "Floor", "Ceil", "Reciprocal", "Sin", "Cos")


def many_ops_model(path: Path) -> Path:
    """Conv 3x3 -> 16 unary ops -> Reshape (a zero-copy view) -> TopK (int64 indices: CPU on the RDK S100)."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8, 3, 3)).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, 8, 256], np.int64), "shape")
    k = numpy_helper.from_array(np.array([4], np.int64), "k")
    nodes = [helper.make_node("Conv", ["x", "w"], ["t0"], name="conv", pads=[1, 1, 1, 1])]
    nodes += [helper.make_node(op, [f"t{i}"], [f"t{i + 1}"], name=f"{op.lower()}_{i}") for i, op in enumerate(UNARY)]
    nodes.append(helper.make_node("Reshape", [f"t{len(UNARY)}", "shape"], ["flat"], name="flatten"))
    nodes.append(helper.make_node("TopK", ["flat", "k"], ["values", "indices"], name="topk", axis=-1))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])]
    outputs = [helper.make_tensor_value_info("values", TensorProto.FLOAT, [1, 8, 4]),
               helper.make_tensor_value_info("indices", TensorProto.INT64, [1, 8, 4])]
    graph = helper.make_graph(nodes, "many_ops", inputs, outputs, [w, shape, k])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@dataclass(frozen=True)
class Pages:
    """Typed runs and their report pages: ``serial`` / ``timeline`` (the built model without / with the timeline),
    and the shared runs by name."""

    runs: dict[str, RunFile]
    pages: dict[str, Path]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Pages:
    folder = tmp_path_factory.mktemp("explains")
    model = many_ops_model(folder / "many.onnx")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAYERSCOPE_CACHE_DIR", str(folder / "cache"))
        assert main(["estimate", str(model), "-t", "rdk-s100", "-o", str(folder / "serial.json"), "--top", "0"]) == 0
        assert main(["estimate", str(model), "-t", "rdk-s100", "--timeline", "-o", str(folder / "timeline.json"),
                     "--top", "0"]) == 0
    runs = {"serial": load_run(folder / "serial.json"), "timeline": load_run(folder / "timeline.json")}
    shared = shared_runs(tmp_path_factory)
    runs.update({name: as_run(shared.load(name)) for name in ALL_RUNS})
    runs["bare"] = as_run(BARE_RUN)
    pages = {}
    for name, run in runs.items():
        pages[name] = folder / f"{name}.html"
        pages[name].write_text(render_html(run), encoding="utf-8")
    return Pages(runs, pages)


# --------------------------------------------------------------------------------------------------- tracks


def test_track_names_say_what_each_track_is(made: Pages) -> None:
    assert track_names(["-", "", "?", "TAE", "A78AE-x6"], "est", ["A78AE-x6"]) == [
        NO_UNIT_TRACK, UNKNOWN_UNIT_TRACK, UNKNOWN_UNIT_TRACK, "TAE", "A78AE-x6 (CPU fallback)"]
    assert track_names(["core 1 · LOAD", "core 0 · STORE", "core 0 · -"], "est") == [
        "core 1 · DDR load", "core 0 · DDR store", f"core 0 · {NO_UNIT_TRACK}"]
    assert track_names(["thread 7", "", "-"], "meas") == ["thread 7", "track 2: measured thread not stated in the run",
                                                         "track 3: measured thread not stated in the run"]
    # the built model: Conv on the tensor engine, the unary ops on the vector engine, the Reshape on no unit (a
    # zero-copy view), TopK on the CPU (int64 indices); with the timeline, DDR's two tracks too
    serial = report_data(made.runs["serial"])["timeline"]["est"]
    assert serial["source"] == "serial"
    assert serial["tracks"] == ["TAE", "VAE", NO_UNIT_TRACK, "A78AE-x6 (CPU fallback)"]
    scheduled = report_data(made.runs["timeline"])["timeline"]["est"]["tracks"]
    assert scheduled == ["core 0 · TAE", "core 0 · VAE", "core 0 · A78AE-x6 (CPU fallback)", "core 0 · DDR load",
                         "core 0 · DDR store"]


@pytest.mark.parametrize("name", ["serial", "timeline", *ALL_RUNS, "bare"])
def test_no_track_is_unnamed(browser: Browser, made: Pages, name: str) -> None:
    page, watch = open_report(browser, made.pages[name], "timeline")
    for chart in ("chart-est-timeline", "chart-meas-timeline"):
        names = page.evaluate(f"() => {{ const c = window.layerscopeReport.charts['{chart}'];"
                              " return c ? c.getOption().yAxis[0].data : null; }")
        if names is None:
            continue
        assert names and all(n.strip() and n.strip() not in ("-", "?") for n in names), (chart, names)
    page.close()
    assert watch.errors == []


# --------------------------------------------------------------------------------------------------- legends


def _categories(run: RunFile, layers: list[int | None], colours: dict[str, str]) -> set[str]:
    """The legend entries layers ``layers`` (``None``: a span of no layer) are drawn under."""
    out = set()
    for index in layers:
        op = None if index is None else run.layers[index].op_type
        out.add("no layer (unmapped kernel)" if op is None else op if op in colours else OTHER_LABEL)
    return out


def _legend(page: Page, legend: str) -> list[tuple[str, str]]:
    return page.locator(f"#{legend} li[data-category]").evaluate_all(
        "lis => lis.map(li => [li.dataset.category, li.dataset.colour, li.textContent,"
        " getComputedStyle(li.querySelector('.swatch')).backgroundColor])")


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.mark.parametrize("case", [
    ("timeline", "timeline", "chart-est-timeline", "legend-est-timeline", 3),
    ("serial", "timeline", "chart-est-timeline", "legend-est-timeline", 3),
    ("profile", "timeline", "chart-meas-timeline", "legend-meas-timeline", 3),
    ("profile", "charts", "chart-scatter", "legend-scatter", 2)])
def test_legends_show_the_categories_drawn(browser: Browser, made: Pages, case: tuple[str, str, str, str, int]) -> None:
    """``case``: the run, the tab, the chart, its legend and the position of the layer index in a chart item."""
    name, tab, chart, legend, column = case
    run = made.runs[name]
    colours = dict(report_data(run)["colours"]["colours"])
    page, watch = open_report(browser, made.pages[name], tab)
    layers = page.evaluate(f"() => window.layerscopeReport.charts['{chart}'].getOption().series[0].data"
                           f".map(e => e[{column}])")
    drawn = _categories(run, layers, colours)
    entries = _legend(page, legend)
    assert {e[0] for e in entries} == drawn and len(entries) == len(drawn)  # each category drawn, once
    for category, colour, text, swatch in entries:
        assert text == category
        assert colour == colours.get(category, page.evaluate(
            f"() => window.layerscopeReport.colourOf({'null' if category.startswith('no layer') else repr(category)})"))
        assert swatch == _rgb(colour)  # the swatch shows the colour the chart's map gives
    if name == "serial":  # 18 op types, more than the palette: the slowest have their own colour, the rest "other"
        assert len(colours) == len(PALETTE) and OTHER_LABEL in drawn
        rest = sorted({layer.op_type for layer in run.layers} - set(colours))
        assert len(rest) >= 2  # op types left out of the palette share one colour, none of the palette's
        first, last = (page.evaluate(f"() => window.layerscopeReport.colourOf({op!r})") for op in (rest[0], rest[-1]))
        assert first == last and first not in {c for op, c in colours.items() if op != OTHER_LABEL}
    page.close()
    assert watch.errors == []


# --------------------------------------------------------------------------------------------------- details


def test_detail_labels_are_words_with_a_format() -> None:
    assert detail_label("compute_us") == ("compute", "us")
    assert detail_label("known", [True, False]) == ("cost known", "yesno")
    assert detail_label("bytes_read") == ("bytes read", "bytes")
    assert detail_label("macs") == ("MACs", "count")
    # keys a later command adds, read by their name and values
    assert detail_label("queue_wait_us", [1.5]) == ("queue wait", "us")
    assert detail_label("spill_bytes", [10]) == ("spill bytes", "bytes")
    assert detail_label("ddr_pages", [3, 4]) == ("DDR pages", "int")
    assert detail_label("hot", [True, None]) == ("hot", "yesno")
    assert detail_label("observed tile_count", [2]) == ("observed tile count", "int")


def _details(page: Page) -> dict[str, dict[str, tuple[str, str]]]:
    """The detail panel: group -> key -> (label shown, value shown)."""
    shown: dict[str, dict[str, list[str]]] = page.evaluate("""() => {
        const out = {};
        let group = null;
        for (const node of document.querySelectorAll('#layer-detail h4, #layer-detail dt')) {
            if (node.tagName === 'H4') { group = node.dataset.group; out[group] = {}; continue; }
            out[group][node.dataset.key || node.textContent] = [node.textContent, node.nextElementSibling.textContent];
        }
        return out;
    }""")
    return {group: {key: (label, value) for key, (label, value) in keys.items()} for group, keys in shown.items()}


def test_detail_panel_shows_labels_with_units(browser: Browser, made: Pages) -> None:
    run = made.runs["profile"]
    page, watch = open_report(browser, made.pages["profile"], "layers")
    conv = max((i for i, layer in enumerate(run.layers) if layer.op_type == "Conv"),
               key=lambda i: run.layers[i].est.compute_us or 0.0)  # the one with the most compute
    page.locator(f"#layer-table tbody tr.row[data-index='{conv}']").click()
    shown = _details(page)
    layer = run.layers[conv]
    labels = [label for group in shown.values() for label, _ in group.values()]
    assert labels and not [label for label in labels if "_" in label]  # no raw snake_case key
    headings = page.locator("#layer-detail h4").all_inner_texts()
    assert "Estimate on rdk-s100" in headings and "Cost (from the graph)" in headings
    assert shown["estimate"]["compute_us"] == ("compute", human_us(layer.est.compute_us))
    assert shown["estimate"]["compute_us"][1].endswith(" µs")
    assert shown["cost"]["bytes_read"] == ("bytes read", human_bytes(layer.bytes_read))
    assert shown["cost"]["macs"] == ("MACs", human_count(layer.macs))
    assert shown["cost"]["known"] == ("cost known", "yes")
    assert layer.measured is not None and layer.measured.median_us is not None
    assert shown["measured"]["median_us"] == ("median", human_us(layer.measured.median_us))
    page.close()
    assert watch.errors == []


def test_page_formats_numbers_as_the_terminal_does(browser: Browser, made: Pages) -> None:
    values = [0, 1, 0.04, -0.05, 2.5, 0.125, 12.25, 999.95, 1234.5, 1e6, 2.5e6, -1234.5, 1536, 1048576 * 1.505,
              2**40, 4089184256, 147456, 0.5, 1.5]
    page, watch = open_report(browser, made.pages["profile"], "layers")
    for name, python in (("us", human_us), ("bytes", human_bytes), ("count", human_count),
                         ("pct", fixed(1, scale=100, suffix="%"))):
        shown = page.evaluate(f"vs => vs.map(v => window.layerscopeReport.formats.{name}(v))", values)
        assert shown == [python(v) for v in values], name
    ties = [0.125, 0.375, 2.5, 3.5, 12.25, -0.125]
    for digits in (0, 1, 2):
        shown = page.evaluate(f"vs => vs.map(v => window.layerscopeReport.formats.fixed(v, {digits}))", ties)
        assert shown == [f"{v:.{digits}f}" for v in ties], digits  # Python rounds an exact tie to even
    page.close()
    assert watch.errors == []


# --------------------------------------------------------------------------------------------------- bisect


def test_bisect_chart_geometry(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert [nice_step(s) for s in (10, 7, 1.2, 480)] == [2, 2, 0.25, 100]
    run = as_run(shared_experiment_runs(tmp_path_factory).load("bisect"))
    view = bisect_view(run)
    chart = bisect_chart(view)
    assert view is not None and chart is not None and len(chart.bars) == len(view.segments)
    assert (chart.ticks[0].at, chart.ticks[-1].at) == (chart.plot_left, chart.plot_right)  # the axis spans the plot
    for bar, row in zip(chart.bars, view.segments, strict=True):
        assert row.increment_us is not None and row.ci_low_us is not None and row.ci_high_us is not None
        assert bar.low_x is not None and bar.high_x is not None and bar.bar_x is not None and bar.bar_width is not None
        end = bar.bar_x + bar.bar_width if row.increment_us >= 0 else bar.bar_x
        assert bar.low_x <= bar.high_x
        if row.ci_low_us <= row.increment_us <= row.ci_high_us:
            assert bar.low_x - 0.2 <= end <= bar.high_x + 0.2  # the bar ends inside its error bar
    assert chart.ticks[0].anchor == "start" and chart.ticks[-1].anchor == "end"  # end labels inside the plot
    assert bisect_chart(None) is None


def test_bisect_chart_draws_error_bars(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> None:
    run = as_run(shared_experiment_runs(tmp_path_factory).merged())
    path = tmp_path_factory.mktemp("explains-bisect") / "bisect.html"
    path.write_text(render_html(run), encoding="utf-8")
    page, watch = open_report(browser, path, "experiments")
    assert run.bisect is not None
    segments = run.bisect.segments
    assert page.locator("#bisect-chart g.segment").count() == len(segments)
    boxes = page.locator("#bisect-chart g.segment").evaluate_all("""gs => gs.map(g => {
        const bar = g.querySelector('rect.bar-meas'), err = g.querySelector('g.err');
        const b = bar.getBBox(), e = err ? err.getBBox() : null;
        return {bar: [b.x, b.width, b.height], err: e && [e.x, e.width, e.height],
                title: g.querySelector('title').textContent};
    })""")
    for box, seg in zip(boxes, segments, strict=True):
        assert box["bar"][2] > 0 and box["err"] is not None and box["err"][2] > 0  # drawn, with an error bar
        width = seg.ci_high_us - seg.ci_low_us
        if width > 0:
            assert box["err"][1] > 0
        assert f"95% interval {human_us(seg.ci_low_us)} to {human_us(seg.ci_high_us)}" in box["title"]
    legend = page.locator("#bisect-legend li").evaluate_all("lis => lis.map(li => li.dataset.category)")
    assert legend[:1] == ["measured"] and "interval" in legend
    assert ("estimate" in legend) == any(s.est_us is not None for s in segments)
    page.close()
    assert watch.errors == []


# --------------------------------------------------------------------------------------------------- columns


def _empty_columns(page: Page) -> list[str]:
    """Visible columns of visible tables whose every cell is empty or '-': ``table#id: header``."""
    return page.evaluate("""() => {
        const out = [];
        for (const table of document.querySelectorAll('table.grid')) {
            if (!table.offsetParent || !table.tHead || !table.tBodies[0]) continue;
            const rows = [...table.tBodies[0].rows].filter(r => !r.classList.contains('spacer'));
            if (!rows.length) continue;
            [...table.tHead.rows[0].cells].forEach((th, c) => {
                if (getComputedStyle(th).display === 'none') return;
                const empty = rows.every(r => { const t = r.cells[c] ? r.cells[c].textContent.trim() : '';
                                                 return t === '' || t === '-'; });
                if (empty) out.push((table.id || '?') + ': ' + th.textContent);
            });
        }
        return out;
    }""")


@pytest.mark.parametrize("name", ["estimate", "serial", "profile", "horizon"])
def test_no_column_is_all_empty(browser: Browser, made: Pages, name: str) -> None:
    page, watch = open_report(browser, made.pages[name])
    for tab in ("summary", "layers", "temporal", "charts"):
        show(page, tab)
        assert _empty_columns(page) == [], (name, tab)
    keys = page.locator("#layer-table thead th").evaluate_all("ths => ths.map(th => th.dataset.key)")
    layers = made.runs[name].layers
    measured = any(layer.measured_us is not None for layer in layers)
    both = any(layer.measured_us is not None and layer.estimated_us for layer in layers)
    assert ("meas" in keys) == measured and ("ratio" in keys) == both  # estimate-only: no measured columns
    assert ("est" in keys) == any(layer.estimated_us is not None for layer in layers)
    assert keys[:3] == ["index", "id", "op"]
    page.close()
    assert watch.errors == []


# --------------------------------------------------------------------------------------------------- utilisation


def test_utilisation_is_defined_and_told_apart_from_busy(browser: Browser, made: Pages) -> None:
    run = made.runs["estimate"]
    page, watch = open_report(browser, made.pages["estimate"], "temporal")
    assert page.inner_text("#util-definition").startswith("compute utilisation: the share of each interval")
    series = page.evaluate("() => window.layerscopeReport.charts['chart-util'].getOption().series.map(s => s.name)")
    assert series and all(s.endswith(" compute %") for s in series)
    assert "DDR % of effective:" in page.inner_text("#ddr-definition")
    # the busy figures are the terminal's units table's, row for row
    terminal = render_text(units_table(run.timeline), 200) if run.timeline is not None else ""
    lines = terminal.splitlines()
    rule = next(i for i, line in enumerate(lines) if "─" in line)  # the rows follow the header's rule
    rows = [line.split() for line in lines[rule + 1:] if line.strip()]
    assert rows
    html = page.locator("#unit-use-table tbody tr").evaluate_all(
        "trs => trs.map(tr => [...tr.cells].map(td => td.textContent.trim()))")
    names = {"LOAD": "DDR load", "STORE": "DDR store"}
    assert [[names.get(r[0], r[0]), r[1], " ".join(r[2:4]), r[4]] for r in rows] == [
        [h[0].removesuffix(" (CPU fallback)"), *h[1:4]] for h in html]
    assert "busy: the share of the frame" in page.inner_text("#unit-use")
    # the compute utilisation over the frame is the curve's mean: never above the busy share
    for row in html:
        if row[4] != "-":
            assert float(row[4].rstrip("%")) <= float(row[3].rstrip("%")) + 0.05
    page.close()
    assert watch.errors == []


def test_snake_case_never_reaches_the_details(made: Pages) -> None:
    for name, run in made.runs.items():
        labels = report_data(run)["detail_labels"]
        for group, (title, keys) in labels.items():
            assert "_" not in title and "{" not in title, (name, group)
            for key, (label, fmt) in keys.items():
                assert not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", label) and "_" not in label, (name, key, label)
                assert fmt in ("us", "bytes", "count", "pct", "x2", "int", "num", "yesno", "text")

