"""Vendor imports are linear in the file's size: each format at N and 10·N lines, timed as ``layerscope import``.

    PYTHONPATH=src .venv/bin/python benchmarks/import_scale.py [--lines 100000] [--formats openvino,trtexec,ort]

For each format a real fixture of the test suite is repeated, each copy's layer names made unique, to ``--lines``
and to ten times as many lines; both files are imported in a child process (wall time and peak RSS). Baseline,
measured in the same run: the smaller file. A linear parser takes ~10x the time at 10x the lines: the printout
gives the ratio and fails (exit 1) above 15x. The large files stay under the ``import_lines`` budget (2,000,000).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "importers"
#: The ratio of times at 10x the lines above which the parser is not linear.
MAX_RATIO = 15.0


def _openvino(lines: int) -> str:
    rows = (FIXTURES / "openvino" / "benchmark_average_counters_report.csv").read_text().splitlines()
    header, body = rows[0], [r for r in rows[1:] if r and not r.startswith("Total")]
    out = [header]
    copy = 0
    while len(out) < lines:
        out.extend(f"{r.split(';', 1)[0]}#{copy};{r.split(';', 1)[1]}" for r in body)
        copy += 1
    return "\n".join(out[:lines]) + "\n"


def _trtexec(lines: int) -> str:
    entries = json.loads((FIXTURES / "trtexec" / "yolov5s.profile.json").read_text())
    head, layers = entries[0], entries[1:]
    out = [head]
    copy = 0
    while len(out) < lines:
        out.extend({**e, "name": f"{e['name']} #{copy}"} for e in layers)
        copy += 1
    return "[\n" + "\n, ".join(json.dumps(e) for e in out[:lines]) + "\n]\n"


def _ort(lines: int) -> str:
    events = json.loads((FIXTURES / "ort" / "conv_relu_add_sigmoid.profile.json").read_text())
    nodes = [e for e in events if e.get("cat") == "Node"]
    out = [e for e in events if e.get("cat") != "Node"]
    shift = max(int(e["ts"]) + int(e.get("dur", 0)) for e in events) + 1
    copy = 0
    while len(out) < lines:
        out.extend({**e, "ts": int(e["ts"]) + copy * shift} for e in nodes)  # the same nodes, run after run
        copy += 1
    return "[\n" + ",\n".join(json.dumps(e) for e in out[:lines]) + "\n]\n"


FORMATS: dict[str, tuple[str, Callable[[int], str]]] = {
    "openvino": ("benchmark_average_counters_report.csv", _openvino),
    "trtexec": ("model.profile.json", _trtexec),
    "ort": ("model.profile.json", _ort),
}


def _import(path: Path, out: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MiB) and exit code of ``layerscope import PATH -o OUT`` in a child."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "layerscope", "import", str(path), "-o", str(out)], env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        print(f"    {path.name}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return wall, peak, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=100_000, help="lines of the smaller file (the baseline)")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated: " + ", ".join(FORMATS))
    args = parser.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="layerscope-import-scale-") as tmp:
        for name in args.formats.split(","):
            filename, make = FORMATS[name]
            times = []
            for lines in (args.lines, 10 * args.lines):
                folder = Path(tmp) / f"{name}-{lines}"
                folder.mkdir()
                path = folder / filename
                path.write_text(make(lines), encoding="utf-8")
                wall, peak, code = _import(path, folder / "run.json")
                failed |= code != 0
                times.append(wall)
                print(f"{name:9} {lines:>10,} lines  {path.stat().st_size / 1e6:8.1f} MB  {wall:7.2f} s  "
                      f"(peak RSS so far {peak:,.0f} MiB)", flush=True)
            ratio = times[1] / times[0]
            verdict = "linear" if ratio <= MAX_RATIO else "NOT LINEAR"
            failed |= ratio > MAX_RATIO
            print(f"{name:9} 10x the lines took {ratio:.1f}x the time: {verdict} (baseline: the smaller file)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
