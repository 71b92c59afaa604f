"""Time of the NPU timeline simulation on a synthetic 1,000-layer graph, beside the plain roofline.

Usage: ``.venv/bin/python benchmarks/timeline.py [--layers 1000] [--runs 5] [--warmup 1] [--target rdk-s100]``

The graph is built with ``onnx.helper`` (seeded, zero weights): blocks of five layers, a 3x3 Conv, a SiLU
(Sigmoid, Mul) on the vector unit, a 1x1 Conv beside them from the block's input and an Add joining the
two branches, so the schedule has parallel branches, on-chip and DDR tensors and two units at work.
Loading the model (shape inference) is not timed. Timed, in the same process and alternating so drifting
machine load hits both alike:

- baseline: ``estimate_graph`` (roofline: costs, residency, per-layer latency);
- ``simulate_timeline`` (the same roofline plus the schedule, the bins and the memory plan);
- ``timeline_section`` + ``json.dumps`` of the simulated timeline (what ``-o`` adds).

Reported: median and minimum of the timed runs and the ratio of medians to the baseline's; the goal line
``simulate_timeline < 2.0 s`` with PASS or FAIL. Exit status 0 on PASS, 1 on FAIL.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import onnx

from layerscope.estimator import estimate_graph, simulate_timeline
from layerscope.model import Graph, load_model
from layerscope.run import timeline_section
from layerscope.samples.synthetic import LAYERS_PER_BLOCK, block_chain
from layerscope.targets import load_profile

GOAL_S = 2.0
CHANNELS = 32
SIZE = 40


def synthetic_model(layers: int, channels: int = CHANNELS, size: int = SIZE) -> onnx.ModelProto:
    """:func:`layerscope.samples.synthetic.block_chain` at this benchmark's size (``benchmarks/scale.py`` builds its
    graphs with it too)."""
    return block_chain(layers, channels, size)


def load_synthetic(layers: int) -> Graph:
    with tempfile.TemporaryDirectory(prefix="layerscope-timeline-bench-") as tmp:
        path = Path(tmp) / "synthetic.onnx"
        onnx.save_model(synthetic_model(layers), str(path))
        return load_model(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--layers", type=int, default=1000, help="layers of the synthetic graph (default 1000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per case (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per case first (default 1)")
    parser.add_argument("--target", default="rdk-s100", help="hardware profile (default rdk-s100)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.layers < LAYERS_PER_BLOCK:
        parser.error(f"--runs must be >= 1, --warmup >= 0, --layers >= {LAYERS_PER_BLOCK}")

    graph = load_synthetic(args.layers)
    profile = load_profile(args.target)
    timeline = simulate_timeline(graph, profile)
    cases: dict[str, Callable[[], object]] = {
        "estimate_graph (baseline)": lambda: estimate_graph(graph, profile),
        "simulate_timeline": lambda: simulate_timeline(graph, profile),
        "timeline_section + json": lambda: json.dumps(timeline_section(timeline), sort_keys=True),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(args.warmup + args.runs):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)

    print(f"graph: synthetic, {len(graph.layers)} layers ({CHANNELS}x{SIZE}x{SIZE} fp32 tensors), "
          f"target {profile.name}, {args.warmup} warm-up + {args.runs} timed runs per case, alternating")
    print(f"timeline: latency {timeline.latency_us:.1f} us, roofline serial {timeline.serial_latency_us:.1f} us, "
          f"bound by {timeline.bound}")
    base = statistics.median(times["estimate_graph (baseline)"])
    print()
    print(f"{'case':<28}{'median s':>10}{'min s':>10}{'vs baseline':>13}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<28}{med:>10.4f}{min(values):>10.4f}{med / base:>12.2f}x")
    sim = statistics.median(times["simulate_timeline"])
    passed = sim < GOAL_S
    print()
    print(f"goal: simulate_timeline of {len(graph.layers)} layers < {GOAL_S} s: {'PASS' if passed else 'FAIL'} "
          f"(median {sim:.4f} s)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
