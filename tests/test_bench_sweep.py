"""``layerscope bench --sweep``: the knee and budget rules, the sweep on a dynamic-batch model (and a static one),
the table, the run file's ``bench_sweep`` section and the HTML chart (in a real Chromium where one is installed)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from conftest import CHROMIUM, F32, zoo
from layerscope.cli.main import main
from layerscope.measure.bench import BenchConfig, BenchResult, ProcessUsage, StreamResult
from layerscope.measure.bench_sweep import SweepPoint, best_under_budget, knee_index, load_order, sweep_section
from layerscope.report.html import render_html
from layerscope.run import load_run
from layerscope.runfile.models import BenchSweep, RunFile
from layerscope.stats import summarize

# --- rules on synthetic points -----------------------------------------------------------------------------------


def test_knee_is_the_point_after_which_throughput_stalls_and_latency_climbs() -> None:
    # 100 -> 190 samples/s: +90%, no knee; 190 -> 200: +5.3% while P90 11 -> 20 µs: +82%: the knee is point 1
    assert knee_index([(100.0, 10.0), (190.0, 11.0), (200.0, 20.0), (205.0, 40.0)]) == 1
    # throughput stalls but latency grows only 40%: no knee
    assert knee_index([(100.0, 10.0), (105.0, 14.0)]) is None
    # latency doubles but throughput still grows 10%: the rule wants < 10%, no knee
    assert knee_index([(100.0, 10.0), (110.0, 20.0)]) is None
    assert knee_index([(100.0, 10.0), (109.0, 16.0)]) == 0
    assert knee_index([(100.0, 10.0)]) is None


def test_best_under_budget_is_the_highest_throughput_within_p99() -> None:
    points = [(100.0, 5_000.0), (300.0, 15_000.0), (500.0, 25_000.0), (300.0, 12_000.0)]
    assert best_under_budget(points, 20_000.0) == 3  # 300 samples/s twice: the lower P99 wins
    assert best_under_budget(points, 25_000.0) == 2  # P99 == budget is within it
    assert best_under_budget(points, 1_000.0) is None


def test_load_order_is_threads_then_samples_in_flight() -> None:
    # (streams, batch, threads)
    points = [(4, 1, 2), (1, 4, 1), (2, 1, 1), (1, 1, 1), (1, None, 2)]
    assert load_order(points) == [3, 2, 1, 4, 0]


def _point(streams: int, latency_us: float, fps: float, batch: int | None = None) -> SweepPoint:
    """A point of 100 runs of ``latency_us`` each (every percentile is ``latency_us``) at ``fps`` requests/s."""
    latency = summarize(np.full(100, latency_us))
    wall_s = 100 / fps
    result = BenchResult(BenchConfig(runs=100, streams=streams), latency, (StreamResult(0, 100, wall_s, latency),),
                         wall_s, ProcessUsage(cpu_time_s=1.0, wall_s=wall_s, cores=2, peak_rss_bytes=None), drift=0.0)
    return SweepPoint(streams, batch, 0, result)


def synthetic_sweep(budget_us: float | None = 35.0) -> BenchSweep:
    """3 points, given out of order, with a knee at streams=2: 1000 -> 1900 -> 2000 samples/s while P90 goes
    10 -> 20 -> 40 µs."""
    points = [_point(4, 40.0, 2000.0), _point(1, 10.0, 1000.0), _point(2, 20.0, 1900.0)]
    return sweep_section(points, axes={"streams": (1, 2, 4)}, batch_dim=None, batch_note=None, warmup=1, runs=100,
                         duration_s=None, latency_budget_us=budget_us, concurrency="a thread")


def test_sweep_section_orders_points_and_marks_knee_and_best() -> None:
    section = synthetic_sweep()
    assert [p.streams for p in section.points] == [1, 2, 4]
    assert [p.samples_per_s for p in section.points] == [1000.0, 1900.0, 2000.0]
    assert section.knees == [1]  # 1900 -> 2000 (+5%) while P90 20 -> 40 µs (+100%)
    assert section.best == 1  # P99 20 µs within 35 µs; streams=4's 40 µs is not
    assert section.points[0].steady is True and section.points[0].cv == 0.0
    assert synthetic_sweep(5.0).best is None
    batched = sweep_section([_point(1, 80.0, 500.0, batch=4)], axes={"batch": (4,)}, batch_dim="N", batch_note=None,
                            warmup=0, runs=100, duration_s=None, latency_budget_us=None, concurrency="")
    point = batched.points[0]
    assert (point.samples_per_s, point.requests_per_s, point.sample_p99_us) == (2000.0, 500.0, 20.0)


# --- the command -------------------------------------------------------------------------------------------------


def _model(path: Path, batch: int | str) -> Path:
    """x[batch, 64] @ W[64, 64] -> Relu; ``batch`` a name (dynamic) or a number (static)."""
    weight = numpy_helper.from_array(np.random.default_rng(0).random((64, 64), dtype=np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                              "g", [helper.make_tensor_value_info("x", F32, [batch, 64])],
                              [helper.make_tensor_value_info("z", F32, [batch, 64])], initializer=[weight])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


SWEEP = ["--sweep", "streams=1,2", "--sweep", "batch=1,4", "--duration", "0.05", "--warmup", "1"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunFile, str, Path]:
    """``bench --sweep streams=1,2 --sweep batch=1,4 --latency-budget 20ms`` on a dynamic-batch model: (run, what
    it printed, its HTML report)."""
    folder = tmp_path_factory.mktemp("sweep")
    model = _model(folder / "dyn.onnx", "N")
    out, html = folder / "run.json", folder / "run.html"
    with pytest.MonkeyPatch.context() as mp:
        printed: list[str] = []
        mp.setattr("layerscope.cli.console.SafeConsole.print",
                   lambda self, *a, **k: printed.append(_text(a[0]) if a else ""))
        assert main(["bench", str(model), *SWEEP, "--latency-budget", "20ms", "-o", str(out), "--html",
                     str(html)]) == 0
    return load_run(out), "\n".join(printed), html


def _text(renderable: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def test_sweep_points_and_section_fields(swept: tuple[RunFile, str, Path]) -> None:
    run, _, _ = swept
    sweep = run.bench_sweep
    assert sweep is not None and sweep.batch_dim == "N" and sweep.batch_note is None
    assert sweep.axes == {"streams": [1, 2], "batch": [1, 4], "threads": []}
    assert sweep.duration_s_per_point == 0.05 and sweep.warmup == 1
    # load order: streams x batch = 1, 2, 4, 8
    assert [(p.streams, p.batch) for p in sweep.points] == [(1, 1), (2, 1), (1, 4), (2, 4)]
    for p in sweep.points:
        assert p.runs and p.runs > 0 and p.wall_s and p.wall_s > 0
        assert p.samples_per_s == pytest.approx(p.requests_per_s * p.batch, rel=1e-6)
        assert p.sample_p99_us == pytest.approx(p.p99_us / p.batch, abs=1e-3)
        assert p.p50_us <= p.p90_us <= p.p99_us
        assert p.cv is not None and p.drift is not None and isinstance(p.steady, bool)
    # the choices follow the rules over the points the section holds
    assert sweep.latency_budget_us == 20_000.0
    assert sweep.best == best_under_budget([(p.samples_per_s, p.p99_us) for p in sweep.points], 20_000.0)
    knee = knee_index([(p.samples_per_s, p.p90_us) for p in sweep.points])
    assert sweep.knees == ([] if knee is None else [knee])
    # measurement and latency are the best point's (the model loaded at its batch)
    chosen = sweep.points[sweep.best if sweep.best is not None else 0]
    assert run.measurement is not None and run.measurement.streams == chosen.streams
    assert list(run.model.inputs[0].shape or ()) == [chosen.batch, 64]
    assert run.latency is not None and run.latency.p99_us == chosen.p99_us


def test_sweep_table_is_printed(swept: tuple[RunFile, str, Path]) -> None:
    run, printed, _ = swept
    assert run.bench_sweep is not None
    rows = [line.split() for line in printed.splitlines() if re.match(r"^\s*[0-3]\s+[12]\s+[14]\s+default\s", line)]
    assert [(r[1], r[2]) for r in rows] == [("1", "1"), ("2", "1"), ("1", "4"), ("2", "4")]
    assert "Latency vs throughput, 4 points" in printed
    assert "knee:" in printed and "samples/s grows < 10%" in printed
    best = run.bench_sweep.best
    assert f"best        #{best} " in printed or "no point meets" in printed


def test_static_batch_sweeps_streams_only(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["bench", str(_model(tmp_path / "static.onnx", 3)), *SWEEP, "-o", str(out)]) == 0
    sweep = load_run(out).bench_sweep
    assert sweep is not None and sweep.batch_dim is None and sweep.axes["batch"] == []
    assert sweep.batch_note is not None and "batch is static" in sweep.batch_note and "x axis 0 = 3" in sweep.batch_note
    assert [(p.streams, p.batch) for p in sweep.points] == [(1, None), (2, None)]
    assert sweep.best is None and sweep.latency_budget_us is None


def test_a_zoo_model_sweep_prints_the_table_and_plots_the_curve(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """SqueezeNet from the ONNX zoo (static batch 1): streams 1 and 2, the table on the terminal and the curve in
    the HTML report, one point per configuration."""
    out, page = tmp_path / "run.json", tmp_path / "sweep.html"
    capsys.readouterr()
    assert main(["bench", str(zoo("squeezenet")), "--sweep", "streams=1,2", "--duration", "0.2", "--warmup", "1",
                 "--threads", "1", "-o", str(out), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    sweep = load_run(out).bench_sweep
    assert sweep is not None and [p.streams for p in sweep.points] == [1, 2]
    assert all((p.requests_per_s or 0) > 0 and (p.p90_us or 0) > 0 for p in sweep.points)
    assert "streams" in printed and "samples/s" in printed
    assert page.read_text(encoding="utf-8").count('<circle class="point"') == 2


@pytest.mark.parametrize("args", [["--latency-budget", "20ms"], ["--sweep", "cores=1,2"],
                                  ["--sweep", "streams=0,1"], ["--sweep", "streams=1", "--latency-budget", "fast"]])
def test_bad_sweep_options_exit_2(tmp_path: Path, args: list[str]) -> None:
    assert main(["bench", str(_model(tmp_path / "m.onnx", "N")), "--runs", "2", *args]) == 2


# --- the HTML chart ----------------------------------------------------------------------------------------------


def test_html_chart_marks_the_knee_and_the_best(swept: tuple[RunFile, str, Path]) -> None:
    run, _, _ = swept
    html = render_html(run.model_copy(update={"bench_sweep": synthetic_sweep()}))
    assert html.count('<circle class="point"') == 3
    assert re.search(r'<circle class="knee" data-index="1"', html) and "knee #1" in html
    assert 'class="best" data-index="1"' in html and "P99 budget 35.0 µs" in html


def test_browser_sees_the_sweep_chart(swept: tuple[RunFile, str, Path]) -> None:
    pytest.importorskip("playwright")
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (the browser tests need it)")
    from playwright.sync_api import sync_playwright

    from conftest import CHROMIUM_ARGS

    run, _, written = swept
    assert run.bench_sweep is not None
    page_file = written.with_name("knee.html")
    page_file.write_text(render_html(run.model_copy(update={"bench_sweep": synthetic_sweep()})), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        errors: list[str] = []
        for path, points in ((written, len(run.bench_sweep.points)), (page_file, 3)):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri())
            page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=10_000)
            page.click("#tab-charts")
            chart = page.locator("#bench-sweep-chart")
            chart.wait_for(state="visible", timeout=10_000)
            box = chart.bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 200
            assert page.locator("#bench-sweep-chart circle.point").count() == points
            assert page.locator("#bench-sweep-table tbody tr").count() == points
            if path == page_file:
                assert page.locator("#bench-sweep-chart .knee-label").text_content() == "knee #1"
                assert page.locator("#bench-sweep-chart circle.knee").is_visible()
            assert errors == []
            page.close()
        browser.close()
