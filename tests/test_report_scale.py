"""The HTML report of a big run (issue #19 item 3): size per layer, blocks, and the page in Chromium.

A 20,000-layer synthetic graph (blocks of Conv 3x3 -> Sigmoid -> Mul beside a Conv 1x1, joined by Add, as
``benchmarks/scale.py`` builds them, on 4x8x8 activations) is estimated with the NPU timeline once per module.
Checked: the page's size per layer against a bound derived by hand below, the Summary's tables drawn in the markup
without decoding the data, the virtualized layer table (rows after a scroll and a sort, the detail of a clicked
row read back from the columns), the merged timeline spans and the block graph, each with its note.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import pytest
from playwright.sync_api import Browser

from layerscope.estimator import estimate_graph, simulate_timeline
from layerscope.model import load_model
from layerscope.report.html import GRAPH_MAX_LAYERS, render_html
from layerscope.report.units import human_us
from layerscope.report.views.layers import MAX_BLOCKS, layer_blocks
from layerscope.run import estimate_run, timeline_section
from layerscope.runfile import as_run
from layerscope.samples.synthetic import block_chain
from layerscope.targets import load_profile

LAYERS = 20_000


@dataclass(frozen=True)
class Big:
    """The 20k-layer run (estimate + timeline), its report written to a file, and the report's data read back
    from the page."""

    run: dict[str, Any]
    page: Path
    data: dict[str, Any]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Big:
    folder = tmp_path_factory.mktemp("report-scale")
    model = folder / "big.onnx"
    onnx.save_model(block_chain(LAYERS, channels=4, size=8), str(model))
    graph = load_model(model)
    profile = load_profile("rdk-s100")
    estimate = estimate_graph(graph, profile)
    run = estimate_run(graph, estimate, profile).to_json()
    run["timeline"] = timeline_section(simulate_timeline(graph, profile, None, costs=estimate.costs))
    page = folder / "big.html"
    html = render_html(as_run(run))
    page.write_text(html, encoding="utf-8")
    return Big(run, page, json.loads(island(html)))


def island(html: str) -> str:
    """The page's data island, decoded (base64, gunzip) to the JSON text the page parses."""
    found = re.search(r'<script type="application/octet-stream" id="report-data" data-encoding="gzip\+base64">'
                      r"([A-Za-z0-9+/=]*)</script>", html)
    assert found, "no data island"
    return gzip.decompress(base64.b64decode(found.group(1))).decode("utf-8")


# --------------------------------------------------------------------------------------------------- size


def test_size_per_layer_is_bounded(big: Big) -> None:
    html = big.page.read_text(encoding="utf-8")
    data = big.data
    assert data["n"] == LAYERS and data["layers"]["id"] == [layer["id"] for layer in big.run["layers"]]
    packed = len(re.search(r'data-encoding="gzip\+base64">([^<]*)<', html).group(1))  # type: ignore[union-attr]
    fixed = len(html.encode("utf-8")) - packed  # ECharts, the script, the style, the Summary's markup
    # Bound by hand, per layer, on the island (base64 of gzip): a layer carries ~45 values (15 table columns,
    # ~30 detail values: cost, estimate, timeline) and a timeline span (4 numbers). Ids like "b123/conv3"
    # and tensor names like "b123.c" differ from the layer before in a digit or two; delta-coded times in ns
    # are a few digits. At about 1 byte of gzip per value that is ~50 B, x 4/3 for base64 = ~67 B; allow
    # 80 B/layer (the 10 MB goal at 100k layers leaves (10 MB - 1.2 MB fixed) / 100k = 88 B/layer).
    assert packed <= 80 * LAYERS, f"{packed / LAYERS:.1f} B/layer"
    # The fixed part: ECharts (1.12 MB) + our script and style (< 60 kB) + the Summary (tables of at most
    # 25 op types, 20 blocks, 20 layers: < 30 kB).
    assert fixed <= 1_121_883 + 90_000, fixed
    # the Summary's tables are in the markup; nothing else per layer is
    assert html.count("<tr>") < 200


def test_blocks_of_a_big_run(big: Big) -> None:
    blocks = layer_blocks(as_run(big.run))
    # 4000 name scopes ("b0" .. "b3999") are more than MAX_BLOCKS: fixed ranges of 20000 / 100 = 200 layers
    assert LAYERS // 5 > MAX_BLOCKS and blocks.rule == "range" and blocks.size == 200
    assert len(blocks.names) == 100 and blocks.names[1] == "layers 200-399" and blocks.of_layer[399] == 1
    graph = big.data["graph"]
    assert LAYERS > GRAPH_MAX_LAYERS and "pos" not in graph and len(graph["blocks"]["pos"]) == 100
    assert graph["blocks"]["edges"] == [[b, b + 1] for b in range(99)]  # a chain of blocks
    assert sum(graph["blocks"]["count"]) == LAYERS


def _named_run(names: list[str]) -> Any:
    return as_run({"schema_version": 1, "model": {"name": "m"}, "summary": {},
                   "layers": [{"id": n, "name": n} for n in names]})


def test_blocks_by_name_scope() -> None:
    yolo = [f"/model.{b}/{part}/Conv" for b in range(10) for part in ("cv1", "cv2")] + ["/Concat"]
    blocks = layer_blocks(_named_run(yolo))
    assert blocks.rule == "scope" and blocks.depth == 1
    assert blocks.names == (*(f"/model.{b}" for b in range(10)), "(no scope)")
    assert blocks.of_layer[:4] == (0, 0, 1, 1)
    # one scope at the top: the next depth down (at least 8 blocks)
    llm = [f"/model/layers.{i}/attn/MatMul" for i in range(12)] + ["/model/norm/Mul", "/lm_head/MatMul"]
    blocks = layer_blocks(_named_run(llm))
    assert blocks.depth == 2 and blocks.names[:2] == ("/model/layers.0", "/model/layers.1")
    assert blocks.names[-2:] == ("/model/norm", "/lm_head")
    # no scopes: ranges of at least 10 layers
    blocks = layer_blocks(_named_run([f"conv_{i}" for i in range(25)]))
    assert blocks.rule == "range" and blocks.names == ("layers 0-9", "layers 10-19", "layers 20-24")


def test_island_escapes_hostile_strings() -> None:
    xss = "</script><img src=x onerror=alert(1)>&amp;"
    run = {"schema_version": 1, "model": {"name": xss}, "summary": {},
           "layers": [{"id": xss, "op_type": xss, "inputs": [xss], "outputs": ["y"],
                       "estimate": {"latency_us": 1.5, "unit": xss, "bound": xss}}]}
    html = render_html(as_run(run))
    assert xss not in html and "<img src=x" not in html and "</script><img" not in html
    text = island(html)
    assert "<" not in text and ">" not in text and "&" not in text  # written as \\u003c etc. inside the gzip too
    data = json.loads(text)
    assert data["layers"]["id"] == [xss] and xss in data["strings"]
    # the Summary's tables name the layer and its op: escaped in the markup
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&amp;amp;" in html


# --------------------------------------------------------------------------------------------------- Chromium




def js_number(value: float) -> str:
    """``value`` as JavaScript's ``String()`` writes it (the shortest text that reads back; no ``.0``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def visible_indices(page: Any) -> list[int]:
    return [int(i) for i in page.locator("#layer-table tbody tr.row").evaluate_all(
        "rows => rows.map(r => r.dataset.index)")]


def test_big_page_in_chromium(browser: Browser, big: Big) -> None:
    run, path, data = big.run, big.page, big.data
    est_us = [layer["estimate"]["latency_us"] for layer in run["layers"]]
    # the 20 slowest by estimate, ties by index (as top_layers orders them)
    top = sorted(range(LAYERS), key=lambda i: (-est_us[i], i))[:20]
    assert data["charts"]["top"] == top
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=30_000)
    # the Summary draws from its markup: the data is not decoded until another tab needs it
    assert page.evaluate("() => window.layerscopeReport.dataLoaded()") is False
    assert page.locator("#summary-blocks tbody tr").count() == 20
    assert page.locator("#summary-top tbody tr").count() == 20
    assert page.locator("#summary-top tbody tr td").first.inner_text() == run["layers"][top[0]]["id"]

    page.click("#tab-layers")
    page.wait_for_selector("#panel-layers[data-rendered='1']", timeout=30_000)
    assert page.inner_text("#layer-count") == f"{LAYERS} of {LAYERS} layers"
    shown = visible_indices(page)
    assert shown[0] == 0 and shown == list(range(len(shown))) and len(shown) < 200  # only the rows in view
    # scroll to row 12,000 (24 px a row): the rows drawn are the ones around it, in order
    page.evaluate("() => { document.querySelector('#panel-layers .table-wrap').scrollTop = 12000 * 24; }")
    page.wait_for_function("() => [...document.querySelectorAll('#layer-table tbody tr.row')]"
                           ".some(r => r.dataset.index === '12000')", timeout=10_000)
    shown = visible_indices(page)
    assert shown == list(range(shown[0], shown[0] + len(shown))) and shown[0] <= 12000 < shown[-1]
    under_header = page.evaluate("""() => {
        const wrap = document.querySelector('#panel-layers .table-wrap').getBoundingClientRect();
        const head = document.querySelector('#layer-table thead th').getBoundingClientRect();
        return Number(document.elementFromPoint(wrap.left + 30, head.bottom + 12).closest('tr').dataset.index);
    }""")
    assert abs(under_header - 12000) <= 1
    # sort by estimate, largest first: the first row is the slowest layer, and the rows drawn are in order
    page.click("th[data-key='est']")
    page.evaluate("() => { document.querySelector('#panel-layers .table-wrap').scrollTop = 0; }")
    page.wait_for_function(f"() => document.querySelector('#layer-table tbody tr.row').dataset.index === "
                           f"'{top[0]}'", timeout=10_000)
    shown = visible_indices(page)
    est = [est_us[i] for i in shown]
    assert est == sorted(est, reverse=True) and shown[: len(top)] == top
    # a row's details come from the columns: the delta-coded numbers read back exactly
    page.locator(f"#layer-table tbody tr.row[data-index='{top[0]}']").click()
    detail = page.inner_text("#layer-detail")
    layer = run["layers"][top[0]]
    assert page.inner_text("#layer-detail h3") == layer["id"]
    slot = next(t for t in run["timeline"]["layers"] if t["id"] == layer["id"])
    for group, key, value in (("estimate", "latency_us", layer["estimate"]["latency_us"]),
                              ("timeline", "active_start_us", slot["active_start_us"])):
        read = page.evaluate(f"i => String(window.layerscopeReport.detailValue('{group}', '{key}', i))", top[0])
        assert read == js_number(value), key
    assert f"latency\n{human_us(layer['estimate']['latency_us'])}" in detail  # shown with its unit
    assert f"holds its unit from\n{human_us(slot['active_start_us'])}" in detail
    # filter to a block: its 200 layers
    page.select_option("#block-filter", "3")
    assert page.inner_text("#layer-count") == f"200 of {LAYERS} layers"

    page.click("#tab-timeline")
    page.wait_for_selector("#panel-timeline[data-rendered='1']", timeout=30_000)
    note = page.inner_text("#est-timeline-note")
    spans = data["timeline"]["est"]["spans"]
    assert spans >= LAYERS and f"{spans} spans: above 5000" in note and "merges spans narrower than a pixel" in note
    drawn = page.evaluate("() => window.layerscopeReport.charts['chart-est-timeline'].getOption().series[0].data")
    assert 0 < len(drawn) < 5000 and sum(item[5] for item in drawn) == spans  # every span counted once
    page.click("#tab-graph")
    page.wait_for_selector("#panel-graph[data-rendered='1']", timeout=30_000)
    assert f"more than the {GRAPH_MAX_LAYERS} this tab draws" in page.inner_text("#graph-note")
    assert page.locator("#chart-graph canvas").count() >= 1
    nodes = page.evaluate("() => window.layerscopeReport.charts['chart-graph'].getOption().series[0].data.length")
    assert nodes == 100
    page.close()
    assert errors == []
