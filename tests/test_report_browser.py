"""The HTML report in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

These tests never skip: without ``/usr/bin/chromium`` or the ``playwright`` package they fail, and ``make test``
installs both. Each page is opened from a file with every network request refused and counted, so the report
must work offline. Checked: no console errors or page errors, every tab draws, sorting and filtering work, a
row click shows the layer, and a layer named ``<img src=x onerror=alert(1)>`` reads as text (no dialog fires,
no element is made from it), in the table, the details and the chart tooltips. The Experiments tab (a run with
bisect, comparison, pipeline and stress sections) shows its tables and links its layer names to their details.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route

from layerscope.report.html import TABS, render_html, tabs
from layerscope.runfile import as_run
from test_report_runs import ALL_RUNS, BARE_RUN, XSS, Runs, shared_experiment_runs, shared_runs


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The HTML report of each shared run, written to a file."""
    folder = tmp_path_factory.mktemp("browser-runs")
    runs: Runs = shared_runs(tmp_path_factory)
    out = {}
    for name in ALL_RUNS:
        out[name] = folder / f"{name}.html"
        out[name].write_text(render_html(as_run(runs.load(name))), encoding="utf-8")
    out["bare"] = folder / "bare.html"
    out["bare"].write_text(render_html(as_run(BARE_RUN)), encoding="utf-8")
    return out


@dataclass
class Watch:
    """What a page did that it should not: console errors, page errors, dialogs, network requests."""

    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_report(browser: Browser, path: Path, tab: str = "") -> tuple[Page, Watch]:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    watch = Watch()
    page.on("console", lambda m: watch.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watch.errors.append(str(e)))

    def on_dialog(dialog: object) -> None:
        watch.dialogs.append(getattr(dialog, "message", "?"))
        dialog.dismiss()  # type: ignore[attr-defined]

    page.on("dialog", on_dialog)

    def route(r: Route) -> None:
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            watch.requests.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri() + (f"#{tab}" if tab else ""))
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=10_000)
    return page, watch


def show(page: Page, tab: str) -> None:
    page.click(f"#tab-{tab}")
    page.wait_for_selector(f"#panel-{tab}[data-rendered='1']", state="visible", timeout=10_000)


@pytest.mark.parametrize("name", [*ALL_RUNS, "bare"])
def test_every_tab_renders_without_errors(browser: Browser, pages: dict[str, Path], name: str) -> None:
    page, watch = open_report(browser, pages[name])
    for tab, title in TABS:
        show(page, tab)
        assert page.inner_text(f"#tab-{tab}") == title
        panel = page.locator(f"#panel-{tab}")
        assert panel.inner_text().strip(), f"{tab} is empty"
        assert not panel.locator(".error").count(), panel.inner_text()
        for chart in panel.locator(".chart").all():  # a chart that is there has drawn into its canvas
            assert chart.locator("canvas").count() >= 1, f"{tab}: {chart.get_attribute('id')} did not draw"
    assert page.locator("#panel-summary .card").count() >= 1
    page.close()
    assert watch.errors == [] and watch.dialogs == [] and watch.requests == []


def test_tabs_draw_what_the_run_has(browser: Browser, pages: dict[str, Path]) -> None:
    page, watch = open_report(browser, pages["estimate"], "temporal")
    assert page.locator("#chart-ddr canvas").count() and page.locator("#chart-util canvas").count()
    show(page, "timeline")
    assert page.locator("#chart-est-timeline canvas").count()
    assert "No kernel events" in page.inner_text("#panel-timeline")
    page.close()
    page, _ = open_report(browser, pages["profile"], "charts")
    assert page.locator("#chart-scatter canvas").count()
    assert page.inner_text("#scatter-note").startswith("k = ")
    page.close()
    assert watch.errors == []


def column(page: Page, key: str) -> list[str]:
    index = page.locator("#layer-table thead th").evaluate_all(
        f"(ths) => ths.findIndex(th => th.dataset.key === '{key}')")
    return page.locator(f"#layer-table tbody tr.row td:nth-child({index + 1})").all_inner_texts()


def test_sorting_filtering_and_details(browser: Browser, pages: dict[str, Path]) -> None:
    page, watch = open_report(browser, pages["profile"], "layers")
    rows = page.locator("#layer-table tbody tr.row")
    count = rows.count()
    assert count == 5 and page.inner_text("#layer-count") == "5 of 5 layers"
    page.click("th[data-key='meas']")
    assert page.get_attribute("th[data-key='meas']", "aria-sort") == "descending"
    times = [float(t) for t in column(page, "meas")]
    assert times == sorted(times, reverse=True)
    page.click("th[data-key='meas']")
    assert page.get_attribute("th[data-key='meas']", "aria-sort") == "ascending"
    assert [float(t) for t in column(page, "meas")] == sorted(times)
    page.click("th[data-key='id']")
    ids = column(page, "id")
    assert ids == sorted(ids, key=lambda s: s.lower()) or ids == sorted(ids)
    page.fill("#layer-filter", "conv")
    assert set(column(page, "op")) == {"Conv"}
    page.fill("#layer-filter", "")
    page.select_option("#op-filter", "Relu")
    assert column(page, "op") == ["Relu"]
    page.select_option("#op-filter", "")
    assert rows.count() == count
    page.locator("#layer-table tbody tr.row", has_text="TopK").click()
    assert page.inner_text("#layer-detail h3") == "topk"
    assert "measured" in page.inner_text("#layer-detail").lower()
    page.close()
    assert watch.errors == []


def test_hostile_names_show_as_text(browser: Browser, pages: dict[str, Path]) -> None:
    page, watch = open_report(browser, pages["profile"], "layers")
    assert XSS in column(page, "id")
    page.locator("#layer-table tbody tr.row", has_text=XSS).first.click()
    assert page.inner_text("#layer-detail h3") == XSS
    assert page.inner_text("h1") == "<script>alert('model')</script>"
    # The tooltip of every chart that names layers, opened on the hostile layer (layer 0), shows it as text.
    for tab, chart, find in (
            ("charts", "chart-top", "o => o.yAxis[0].data.indexOf(NAME)"),
            ("charts", "chart-scatter", "o => o.series[0].data.findIndex(p => p[2] === 0)"),
            ("graph", "chart-graph", "o => 0"),
            ("timeline", "chart-est-timeline", "o => o.series[0].data.findIndex(e => e[3] === 0)"),
            ("timeline", "chart-meas-timeline", "o => o.series[0].data.findIndex(e => e[3] === 0)")):
        show(page, tab)
        index = page.evaluate(f"NAME => ({find})(window.layerscopeReport.charts['{chart}'].getOption())", XSS)
        assert index >= 0, chart
        page.evaluate(f"i => window.layerscopeReport.charts['{chart}']"
                      ".dispatchAction({type: 'showTip', seriesIndex: 0, dataIndex: i})", index)
        page.wait_for_function(f"NAME => [...document.querySelectorAll('#{chart} .tip')]"
                               ".some(t => t.textContent.includes(NAME))", arg=XSS, timeout=5_000)
    assert page.evaluate("() => document.querySelectorAll('img, iframe').length") == 0
    assert page.evaluate("() => document.scripts.length") == 3  # the data, ECharts, the report's script
    page.close()
    assert watch.dialogs == [] and watch.errors == [] and watch.requests == []


EXPERIMENT_TABLES = ("bisect-table", "comparison-metrics", "comparison-layers", "pipeline-breakdown",
                     "pipeline-stages", "pipeline-top", "stress-rounds", "stress-layers")


def test_experiments_tab_shows_its_tables(browser: Browser, pages: dict[str, Path],
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    run = shared_experiment_runs(tmp_path_factory).merged()  # bisect, comparison, pipeline and stress
    path = tmp_path_factory.mktemp("browser-experiments") / "experiments.html"
    path.write_text(render_html(as_run(run)), encoding="utf-8")
    page, watch = open_report(browser, path)
    assert [tab for tab, _ in tabs(as_run(run))] == [tab for tab, _ in TABS] + ["experiments"]
    assert page.locator("#panel-experiments").is_hidden()
    show(page, "experiments")
    assert page.inner_text("#tab-experiments") == "Experiments"
    for table in EXPERIMENT_TABLES:
        assert page.locator(f"#{table}").is_visible(), table
        assert page.locator(f"#{table} tbody tr").count() >= 1, table
    assert page.locator("#bisect-table tbody tr").count() == len(run["bisect"]["segments"])
    # the first segment starts at the first layer (named XSS): text, not markup (a costly cut dropped after it makes
    # the segment span more layers, named after XSS)
    assert page.locator("#bisect-table tbody tr").first.locator("td").nth(1).inner_text().startswith(XSS)
    # the segment and layer tables sort by a click on a header: numbers largest first, then reversed
    increment = page.locator("#bisect-table thead th").nth(4)
    values = page.locator("#bisect-table tbody tr td:nth-child(5)")
    expected = sorted(float(s["increment_us"]) for s in run["bisect"]["segments"])
    increment.click()
    assert increment.get_attribute("aria-sort") == "descending"
    assert [float(v) for v in values.all_inner_texts()] == pytest.approx(expected[::-1], abs=0.051)
    increment.click()
    assert increment.get_attribute("aria-sort") == "ascending"
    assert [float(v) for v in values.all_inner_texts()] == pytest.approx(expected, abs=0.051)
    assert page.locator("#bisect-table tbody tr").count() == len(expected)
    page.locator("#stress-layers a.layer-link", has_text=XSS).click()  # a layer name opens its details
    page.wait_for_selector("#panel-layers[data-rendered='1']", state="visible", timeout=10_000)
    assert page.inner_text("#layer-detail h3") == XSS
    for tab, _ in tabs(as_run(run)):  # the other tabs still draw beside it
        show(page, tab)
        assert not page.locator(f"#panel-{tab} .error").count()
    assert page.evaluate("() => document.querySelectorAll('img, iframe').length") == 0
    page.close()
    page, plain = open_report(browser, pages["estimate"], "experiments")  # no such tab here: the summary instead
    assert page.locator("#panel-summary").is_visible() and not page.locator("#tab-experiments").count()
    page.close()
    assert watch.errors == [] and watch.dialogs == [] and watch.requests == [] and plain.errors == []
