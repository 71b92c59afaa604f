"""Big models: estimate time and peak memory, timeline time, run-file size and HTML size for 1k/10k/100k-layer
synthetic graphs, against the goals of issue #19.

Usage: ``.venv/bin/python benchmarks/scale.py [--layers 1000,10000,100000] [--target rdk-s100] [--no-html]``

The graph (built with ``onnx.helper``, seeded zero weights, not timed): blocks of five layers as in
``benchmarks/timeline.py`` (3x3 Conv, Sigmoid, Mul, a 1x1 Conv beside them, Add), with 8 channels at 16x16 so
a 100k-layer model stays ~50 MB. Built once into ``benchmarks/.cache/``.

Each step is one child process of the CLI (``python -m layerscope``), timed by wall clock; its peak memory is the
child's maximum resident set (``wait4``'s ``ru_maxrss``):

- ``estimate MODEL -t TARGET --json RUN``: estimate time and peak memory; RUN's size;
- ``estimate MODEL -t TARGET --timeline --json RUN``: timeline time and peak;
- ``report RUN -o OUT.html``: HTML render time and size (``--no-html`` skips it).

Goals (for 100k layers): estimate <= 5 s and <= 600 MB peak; timeline <= 5 s; HTML <= 10 MB. Each is printed
with PASS or FAIL; exit status 0 when every goal of the largest size measured passes, else 1. The HTML's
first-render time in Chromium is not measured here (see ``benchmarks/report_size.py`` for that method).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
sys.path.insert(0, str(ROOT / "benchmarks"))
from timeline import synthetic_model as timeline_graph  # noqa: E402

CHANNELS = 8
SIZE = 16
GOALS = {"estimate_s": 5.0, "estimate_peak_mb": 600.0, "timeline_s": 5.0, "html_mb": 10.0}


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


def run_cli(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``python -m layerscope ARGS``; exits 1 if the command fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "layerscope", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
        sys.exit(f"layerscope {' '.join(args)} failed ({proc.returncode}): {err[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--layers", default="1000,10000,100000", help="comma-separated layer counts")
    parser.add_argument("--target", default="rdk-s100", help="hardware profile (default rdk-s100)")
    parser.add_argument("--no-html", action="store_true", help="skip the HTML report")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.layers.split(",")]
    print(f"{'layers':>8}{'estimate s':>12}{'peak MB':>10}{'timeline s':>12}{'peak MB':>10}{'run MB':>9}"
          f"{'html s':>9}{'html MB':>9}")
    last: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="layerscope-scale-") as tmp:
        for layers in sizes:
            model = model_path(layers)
            run = Path(tmp) / f"run-{layers}.json"
            est_s, est_mb = run_cli(["estimate", str(model), "-t", args.target, "--top", "0", "--json", str(run)])
            run_mb = run.stat().st_size / 1e6
            tl_run = Path(tmp) / f"timeline-{layers}.json"
            tl_s, tl_mb = run_cli(["estimate", str(model), "-t", args.target, "--top", "0", "--timeline",
                                   "--json", str(tl_run)])
            html_s = html_mb = float("nan")
            if not args.no_html:
                html = Path(tmp) / f"report-{layers}.html"
                html_s, _ = run_cli(["report", str(tl_run), "-o", str(html)])
                html_mb = html.stat().st_size / 1e6
            print(f"{layers:>8}{est_s:>12.2f}{est_mb:>10.0f}{tl_s:>12.2f}{tl_mb:>10.0f}{run_mb:>9.1f}"
                  f"{html_s:>9.2f}{html_mb:>9.1f}", flush=True)
            last = {"layers": layers, "estimate_s": est_s, "estimate_peak_mb": est_mb, "timeline_s": tl_s,
                    "html_mb": html_mb}
    print()
    ok = True
    for name, goal in GOALS.items():
        value = last[name]
        if math.isnan(value):  # not measured
            print(f"goal {name} <= {goal:g} at {last['layers']:.0f} layers: not measured")
            continue
        passed = value <= goal
        ok &= passed
        print(f"goal {name} <= {goal:g} at {last['layers']:.0f} layers: {'PASS' if passed else 'FAIL'} ({value:.2f})")
    print("(the timeline column is the whole `estimate --timeline` command, estimate included)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
