"""Size and render time of the HTML report of a ~700-layer model, in headless Chromium.

Usage: ``.venv/bin/python benchmarks/report_size.py [--sample yolov5s_deep] [--runs 5] [--no-measure]``

The run: ``yolov5s_deep`` (685 layers at 640x640) estimated on the RDK S100 profile with the NPU timeline, and,
unless ``--no-measure``, profiled on ONNX Runtime (3 runs, 1 warm-up) and joined, so the report holds every
section a run can have (the largest report). The model is built once into ``benchmarks/.cache/``; building
it, estimating and profiling are not timed.

Measured:

- size of the HTML file, beside the run file's own size (``save_run``) as the baseline, and its gzip size;
- ``render_html`` time in Python (median of ``--runs``);
- in Chromium (Debian's ``/usr/bin/chromium`` through Playwright), time from ``page.goto`` of the file until
  the page says it drew its first tab (``<html data-ready="1">``), beside a bare page load (a one-line HTML
  file, the baseline), alternating the two so that machine load hits both alike; then the time to draw every
  other tab once (Layer Details, Timeline, Temporal Statistics, Charts, Graph), clicked in turn.

Goals, printed with PASS or FAIL: report ≤ 5 MB and first render < 3 s (median). Exit status 0 on PASS,
1 on FAIL, 2 when Chromium or Playwright is missing.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from layerscope.estimator import estimate_graph, simulate_timeline
from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.report.html import TABS, render_html
from layerscope.run import add_measurement, add_timeline, estimate_run, save_run
from layerscope.runfile import RunFile
from layerscope.runtimes.onnxruntime.profile import profile_model
from layerscope.samples import BENCHMARK_SAMPLE, SAMPLES, sample_path
from layerscope.targets import load_profile

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
GOAL_BYTES = 5 * 1000 * 1000
GOAL_RENDER_S = 3.0


def make_run(sample: str, measure: bool) -> RunFile:
    """The run of ``sample``: estimate and timeline on the RDK S100, plus an ONNX Runtime profile if ``measure``."""
    graph = load_model(sample_path(sample, cache_dir=CACHE))
    profile = load_profile("rdk-s100")
    estimate = estimate_graph(graph, profile)
    run = estimate_run(graph, estimate, profile)
    if measure:
        weights = {e.layer_id: e.latency_us for e in estimate.layers}
        measurement = profile_model(graph, make_inputs(graph, ()), SessionConfig(), runs=3, warmup=1, weights=weights)
        run = add_measurement(run, measurement)
    return add_timeline(run, simulate_timeline(graph, profile, None, costs=estimate.costs))


def median_time(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def browser_times(report: Path, bare: Path, runs: int) -> tuple[list[float], list[float], dict[str, float], list[str]]:
    """(report load times, bare load times, seconds to draw each other tab, console errors)."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    loads: list[float] = []
    bares: list[float] = []
    tabs: dict[str, float] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(bare.as_uri())  # warm-up: the browser's own start is not the report's
        for _ in range(runs):
            start = time.perf_counter()
            page.goto(bare.as_uri())
            page.wait_for_function("document.documentElement.dataset.ready === '1'")
            bares.append(time.perf_counter() - start)
            start = time.perf_counter()
            page.goto(report.as_uri())
            page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=60_000)
            loads.append(time.perf_counter() - start)
        for tab, _title in TABS[1:]:
            start = time.perf_counter()
            page.click(f"#tab-{tab}")
            page.wait_for_selector(f"#panel-{tab}[data-rendered='1']", state="visible", timeout=60_000)
            tabs[tab] = time.perf_counter() - start
        browser.close()
    return loads, bares, tabs, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sample", default=BENCHMARK_SAMPLE, choices=sorted(SAMPLES))
    parser.add_argument("--runs", type=int, default=5, help="timed page loads and renders (default 5)")
    parser.add_argument("--no-measure", action="store_true", help="estimate and timeline only (no ONNX Runtime)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: apt-get install chromium (make test installs it)", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("the playwright package is missing: pip install -e '.[dev]'", file=sys.stderr)
        return 2

    run = make_run(args.sample, measure=not args.no_measure)
    with tempfile.TemporaryDirectory(prefix="layerscope-report-bench-") as tmp:
        folder = Path(tmp)
        run_file = save_run(run, folder / "run.json")
        html = render_html(run)
        render_s = median_time(lambda: render_html(run), args.runs)
        report = folder / "report.html"
        report.write_text(html, encoding="utf-8")
        bare = folder / "bare.html"
        bare.write_text('<!DOCTYPE html><html><body><script>document.documentElement.dataset.ready="1"</script>'
                        "</body></html>", encoding="utf-8")
        size, run_size = report.stat().st_size, run_file.stat().st_size
        gz_size = len(gzip.compress(html.encode("utf-8"), mtime=0))
        loads, bares, tabs, errors = browser_times(report, bare, args.runs)

    load, bare_load = statistics.median(loads), statistics.median(bares)
    sections = [k for k in ("measurement", "timeline") if getattr(run, k) is not None]
    print(f"model            {args.sample}: {len(run.layers)} layers; run holds estimate + {' + '.join(sections)}")
    print(f"report size      {size / 1e6:.2f} MB  (baseline: the run file itself {run_size / 1e6:.2f} MB; "
          f"ratio {size / run_size:.2f}; gzip {gz_size / 1e6:.2f} MB)")
    print(f"render_html      {1000 * render_s:.0f} ms median of {args.runs} (Python)")
    print(f"first render     {load:.2f} s median, min {min(loads):.2f} s  (baseline: bare page load "
          f"{1000 * bare_load:.0f} ms; ratio {load / bare_load:.1f}x)")
    print("other tabs       " + ", ".join(f"{tab} {1000 * s:.0f} ms" for tab, s in tabs.items())
          + f"; all tabs drawn {load + sum(tabs.values()):.2f} s after load")
    if errors:
        print(f"console errors   {len(errors)}: {errors[:3]}")
    ok_size, ok_time = size <= GOAL_BYTES, load < GOAL_RENDER_S
    print(f"goal: report ≤ 5 MB: {'PASS' if ok_size else 'FAIL'}; first render < {GOAL_RENDER_S:.0f} s: "
          f"{'PASS' if ok_time else 'FAIL'}")
    return 0 if ok_size and ok_time and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
