"""Big models: estimate time and peak memory, timeline time, run-file size, HTML size and first render in Chromium
for 1k/10k/100k-layer synthetic graphs, against the goals of issue #19.

Usage: ``.venv/bin/python benchmarks/scale.py [--layers 1000,10000,100000] [--target rdk-s100] [--no-html]
[--no-browser] [--repeat N]``

The graph (built with ``onnx.helper``, seeded zero weights, not timed): blocks of five layers as in
``benchmarks/timeline.py`` (3x3 Conv, Sigmoid, Mul, a 1x1 Conv beside them, Add), with 8 channels at 16x16 so
a 100k-layer model stays ~50 MB. Built once into ``benchmarks/.cache/``.

Each step is one child process of the CLI (``python -m layerscope``), timed by wall clock; its peak memory is the
child's maximum resident set (``wait4``'s ``ru_maxrss``). The children's bytecode is cached in a temporary
``PYTHONPYCACHEPREFIX`` that an untimed warm-up (estimate with timeline and report of a 1k-layer graph) fills, as
``pip install`` compiles it (``PYTHONDONTWRITEBYTECODE`` in the caller's environment would otherwise make each child
compile layerscope's source, ~0.2 s, as ``benchmarks/run.py`` explains):

- ``estimate MODEL -t TARGET -o RUN``: estimate time and peak memory; RUN's size ("run MB");
- ``estimate MODEL -t TARGET -o RUN.gz``: the same run gzip-compressed ("gz MB", a faithful record: the
  same text), timed too ("gz s");
- ``estimate MODEL -t TARGET --timeline -o RUN``: timeline time and peak;
- ``report RUN -o OUT.html``: HTML render time and size (``--no-html`` skips it);
- first render ("draw s"): headless Chromium (Debian's ``/usr/bin/chromium`` through Playwright, as
  ``benchmarks/report_size.py`` does) from ``page.goto`` of the HTML until the page says it drew its first
  tab (``<html data-ready="1">``), one load after a warm-up of the browser on a bare page, beside the load of
  the bare page just before it ("bare s": the baseline, the machine's load is in both); skipped with
  ``--no-browser`` or when Chromium or Playwright is missing; a page that does not draw within 120 s is "timeout".

``--repeat N`` runs the two estimate steps N times each, alternating: their columns are the medians (the peaks the
largest), and each run's wall time is listed after the table: on this VM two runs of one command differ by 5% and
more at 100k layers, where the estimate sits at its goal. Printed last for each size: the timeline's own time, the
median over the pairs of runs of the `--timeline` run less the estimate run just before it (simulating the
timeline, making its section and writing its rows).

Goals (for 100k layers): estimate <= 5 s and <= 600 MB peak; timeline <= 5 s; HTML <= 10 MB; first render
(draw) < 3 s. The timeline's goal ("the timeline of 100k layers simulated in <= 5 s", beside the estimate's own
<= 5 s) is judged on the timeline's own time, with the whole `estimate --timeline` command printed beside it: read
as the whole command, it would leave the timeline no time once the estimate is at its goal. Each is printed
with PASS or FAIL; exit status 0 when every goal of the largest size measured passes, else 1. The wall times
are those of this machine as it is (a shared machine's load is in them): the CPU seconds of each child
("cpu s", user + system) are printed beside the estimate's wall time.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
sys.path.insert(0, str(ROOT / "benchmarks"))
from run import bytecode_cached_env  # noqa: E402
from timeline import synthetic_model as timeline_graph  # noqa: E402

CHANNELS = 8
SIZE = 16
GOALS = {"estimate_s": 5.0, "estimate_peak_mb": 600.0, "timeline_s": 5.0, "html_mb": 10.0, "draw_s": 3.0}


def synthetic_model(layers: int) -> onnx.ModelProto:
    """``benchmarks/timeline.py``'s graph of ``layers`` layers at this benchmark's size."""
    return timeline_graph(layers, CHANNELS, SIZE)


def model_path(layers: int) -> Path:
    path = CACHE / f"scale-{layers}.onnx"
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        onnx.save_model(synthetic_model(layers), str(tmp))
        os.replace(tmp, path)
    return path


CHROMIUM = Path("/usr/bin/chromium")
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DRAW_TIMEOUT_MS = 120_000


def first_render_s(html: Path, folder: Path) -> tuple[float | None, float]:
    """Seconds from ``page.goto`` of ``html`` until it says it drew its first tab (``None`` when it did not
    within :data:`DRAW_TIMEOUT_MS`), and the same for a bare one-line page loaded just before it (the baseline:
    the machine's load is in both); NaN when Chromium or Playwright is missing."""
    if not CHROMIUM.exists():
        return float("nan"), float("nan")
    try:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        from playwright.sync_api import sync_playwright
    except ImportError:
        return float("nan"), float("nan")
    bare = folder / "bare.html"
    bare.write_text('<!DOCTYPE html><html><body><script>document.documentElement.dataset.ready="1"</script>'
                    "</body></html>", encoding="utf-8")
    ready = "document.documentElement.dataset.ready === '1'"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(bare.as_uri())  # warm-up: the browser's own start is not the report's
        page.wait_for_function(ready)
        start = time.perf_counter()
        page.goto(bare.as_uri())
        page.wait_for_function(ready)
        bare_s = time.perf_counter() - start
        start = time.perf_counter()
        try:
            page.goto(html.as_uri(), timeout=DRAW_TIMEOUT_MS)
            page.wait_for_function(ready, timeout=DRAW_TIMEOUT_MS)
        except PlaywrightTimeout:
            return None, bare_s
        finally:
            seconds = time.perf_counter() - start
            browser.close()
    return seconds, bare_s


def run_cli(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``python -m layerscope ARGS``; exits 1 if the command fails.
    The child's CPU seconds (user + system) are kept in :data:`LAST_CPU_S`."""
    env = {**(bytecode_cached_env(Path(PYCACHE[0])) if PYCACHE else os.environ),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "layerscope", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    LAST_CPU_S[0] = usage.ru_utime + usage.ru_stime
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
        sys.exit(f"layerscope {' '.join(args)} failed ({proc.returncode}): {err[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


LAST_CPU_S = [0.0]
#: Layers of the graph of the untimed warm-up that fills the children's bytecode cache.
WARM_UP_LAYERS = 1000
#: The bytecode cache of the children (:func:`run_cli`), set by :func:`main` to a temporary folder.
PYCACHE: list[str] = []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--layers", default="1000,10000,100000", help="comma-separated layer counts")
    parser.add_argument("--target", default="rdk-s100", help="hardware profile (default rdk-s100)")
    parser.add_argument("--no-html", action="store_true", help="skip the HTML report (and its first render)")
    parser.add_argument("--no-browser", action="store_true", help="skip the first render in Chromium")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run `estimate` and `estimate --timeline` N times each, alternating; their columns are "
                             "the medians (peak: the largest), each run's times listed after the table (default 1)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = [int(n) for n in args.layers.split(",")]
    print(f"{'layers':>8}{'estimate s':>12}{'cpu s':>8}{'peak MB':>10}{'timeline s':>12}{'peak MB':>10}"
          f"{'run MB':>9}{'gz s':>8}{'gz MB':>8}{'html s':>9}{'html MB':>9}{'draw s':>9}{'bare s':>8}")
    last: dict[str, float] = {}
    runs: dict[int, tuple[list[float], list[float]]] = {}
    own: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="layerscope-scale-") as tmp:
        # the children's bytecode in a cache of this run, filled by a warm-up on a 1k-layer graph: as
        # after `pip install`, which compiles it (PYTHONDONTWRITEBYTECODE in the caller's environment would
        # otherwise make every child compile layerscope's source again)
        PYCACHE[:] = [str(Path(tmp) / "pycache")]
        run_cli(["estimate", str(model_path(WARM_UP_LAYERS)), "-t", args.target, "--top", "0", "--timeline", "-o",
                 str(Path(tmp) / "warm-up.json")])
        run_cli(["report", str(Path(tmp) / "warm-up.json"), "-o", str(Path(tmp) / "warm-up.html")])
        for layers in sizes:
            model = model_path(layers)
            run = Path(tmp) / f"run-{layers}.json"
            tl_run = Path(tmp) / f"timeline-{layers}.json"
            estimates: list[tuple[float, float, float]] = []
            timelines: list[tuple[float, float]] = []
            for _ in range(args.repeat):  # alternating, so that the machine's drift hits both alike
                run.unlink(missing_ok=True)  # each a first estimate of the model, not a merge into the last run
                tl_run.unlink(missing_ok=True)
                seconds, peak = run_cli(["estimate", str(model), "-t", args.target, "--top", "0", "-o", str(run)])
                estimates.append((seconds, LAST_CPU_S[0], peak))
                timelines.append(run_cli(["estimate", str(model), "-t", args.target, "--top", "0", "--timeline",
                                          "-o", str(tl_run)]))
            est_s, est_cpu = (statistics.median(e[i] for e in estimates) for i in (0, 1))
            est_mb = max(e[2] for e in estimates)
            tl_s, tl_mb = statistics.median(t[0] for t in timelines), max(t[1] for t in timelines)
            # the timeline's own time: each `--timeline` run less the estimate run just before it
            own[layers] = statistics.median(t[0] - e[0] for e, t in zip(estimates, timelines, strict=True))
            run_mb = run.stat().st_size / 1e6
            packed = Path(tmp) / f"run-{layers}.json.gz"
            gz_s, _ = run_cli(["estimate", str(model), "-t", args.target, "--top", "0", "-o", str(packed)])
            gz_mb = packed.stat().st_size / 1e6
            html_s = html_mb = float("nan")
            draw: float | None = float("nan")
            bare_s = float("nan")
            if not args.no_html:
                html = Path(tmp) / f"report-{layers}.html"
                html_s, _ = run_cli(["report", str(tl_run), "-o", str(html)])
                html_mb = html.stat().st_size / 1e6
                if not args.no_browser:
                    draw, bare_s = first_render_s(html, Path(tmp))
            draw_text = "timeout" if draw is None else f"{draw:.2f}"
            print(f"{layers:>8}{est_s:>12.2f}{est_cpu:>8.2f}{est_mb:>10.0f}{tl_s:>12.2f}{tl_mb:>10.0f}{run_mb:>9.1f}"
                  f"{gz_s:>8.2f}{gz_mb:>8.1f}{html_s:>9.2f}{html_mb:>9.1f}{draw_text:>9}{bare_s:>8.2f}", flush=True)
            last = {"layers": layers, "estimate_s": est_s, "estimate_peak_mb": est_mb, "timeline_s": own[layers],
                    "timeline_command_s": tl_s,
                    "html_mb": html_mb, "draw_s": math.inf if draw is None else draw}
            if args.repeat > 1:
                runs[layers] = ([e[0] for e in estimates], [t[0] for t in timelines])
    for layers, (estimate_runs, timeline_runs) in runs.items():
        print(f"{layers:>8} layers, each run (s): estimate {' '.join(f'{v:.2f}' for v in estimate_runs)}; "
              f"timeline {' '.join(f'{v:.2f}' for v in timeline_runs)}")
    print()
    ok = True
    for name, goal in GOALS.items():
        value = last[name]
        if math.isnan(value):  # not measured
            print(f"goal {name} <= {goal:g} at {last['layers']:.0f} layers: not measured")
            continue
        passed = value <= goal
        ok &= passed
        beside = (f"; the whole `estimate --timeline` command {last['timeline_command_s']:.2f} s"
                  if name == "timeline_s" else "")
        print(f"goal {name} <= {goal:g} at {last['layers']:.0f} layers: {'PASS' if passed else 'FAIL'} ({value:.2f}"
              f"{beside})")
    print("(the timeline column is the whole `estimate --timeline` command, estimate included; its goal is the "
          "timeline's own time)")
    for layers, seconds in own.items():
        print(f"{layers:>8} layers: the timeline's own time (each `--timeline` run less the estimate run before it, "
              f"median): {seconds:.2f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
