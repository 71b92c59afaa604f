"""Which untimed runs put a prefix or suffix in the state the whole model's loop leaves it in, on OpenVINO.

`layerscope bisect` times prefixes and suffixes compiled apart. What runs just before a timed run decides what is
in the caches when it starts: its own weights and buffers, the tensors crossing its cut. This benchmark times the
same prefixes and suffixes of one model with `OpenVinoRunner` under each `--warm-with` (`self`, `whole`, `loop`),
the modes alternating within every round, and compares each segment between consecutive cuts -- from the prefixes
(``P(b) - P(a)``) and from the suffixes (``S(a) - S(b)``) -- with OpenVINO's performance counters for its layers
(a `layerscope profile` of the whole model, the median over its runs). No baseline is subtracted: the first prefix
segment and the last suffix segment include the fixed cost of a call.

    .venv/bin/python benchmarks/warm_state.py [--model resnet50] [--cuts 26,48,100,130,152,162,173] [--rounds 11]
        [--visit-warmup 4] [--threads 1]

Prints, per segment, the counters' time and each mode's error against them, then each mode's median |error|.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from itertools import pairwise
from pathlib import Path

import numpy as np
import onnx

from bisect_accuracy import model_path
from layerscope.estimator import estimate_graph
from layerscope.measure.cuts import CutPlanner
from layerscope.measure.differential import profile_segment_us
from layerscope.measure.inputs import make_inputs
from layerscope.measure.runners import Job
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runtimes.openvino.compile import OpenVinoOptions
from layerscope.runtimes.openvino.profile import OpenVinoBackend
from layerscope.runtimes.openvino.runner import OpenVinoRunner
from layerscope.targets import load_profile

MODES = ("self", "whole", "loop")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--cuts", default="26,48,100,130,152,162,173")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--visit-warmup", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    graph = load_model(model_path(args.model))
    planner = CutPlanner.for_model(graph)
    n = planner.layer_count
    cuts = [int(c) for c in args.cuts.split(",")]
    if not all(0 < c < n for c in cuts) or cuts != sorted(set(cuts)):
        parser.error(f"--cuts: increasing, between 1 and {n - 1}")
    config = SessionConfig(provider="CPU", threads=args.threads, opt_level="compiler")
    feeds = make_inputs(graph, (), 0)
    with tempfile.TemporaryDirectory(prefix="layerscope-warm-") as tmp:
        folder = Path(tmp)

        def saved(model: onnx.ModelProto, name: str) -> Path:
            path = folder / f"{name}.onnx"
            onnx.save(model, str(path))
            return path

        whole = saved(planner.prefix_model(n), "whole")
        prefixes = {c: Job(cut=planner.cut(c), key=f"p{c}", model_path=saved(planner.prefix_model(c), f"p{c}"),
                           label=f"prefix {c}", whole_model=whole) for c in cuts}
        suffixes = {c: Job(cut=planner.cut(c), key=f"s{c}", model_path=saved(planner.suffix_model(c), f"s{c}"),
                           label=f"suffix {c}", side="suffix", feeds_model=prefixes[c].model_path,
                           whole_model=whole) for c in cuts}
        runners = {mode: OpenVinoRunner(config, OpenVinoOptions(), feeds, visit_warmup=args.visit_warmup,
                                        warm_with=mode) for mode in MODES}  # type: ignore[arg-type]
        samples: dict[tuple[str, str], list[float]] = {}
        for r in range(args.rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                for job in (*prefixes.values(), *suffixes.values()):
                    samples.setdefault((mode, job.key), []).append(runners[mode].measure(job))
        for runner in runners.values():
            runner.close()
    estimate = estimate_graph(graph, load_profile("host"))
    weights = {e.layer_id: e.latency_us for e in estimate.layers}
    profile = OpenVinoBackend().profile(graph, feeds, config, runs=30, warmup=3, weights=weights)
    bounds = [0, *cuts, n]
    ids = [layer.id for layer in planner.graph.layers]
    reference = profile_segment_us([ids[a:b] for a, b in pairwise(bounds)], [profile],
                                   weights, "median")

    def increments(mode: str) -> tuple[list[float | None], list[float | None]]:
        """Per segment, P(b) - P(a) (none for the last) and S(a) - S(b) (none for the first), medians."""
        p = [0.0, *(float(np.median(samples[mode, f"p{c}"])) for c in cuts)]
        s = [*(float(np.median(samples[mode, f"s{c}"])) for c in cuts), 0.0]
        return ([p[i + 1] - p[i] for i in range(len(cuts))] + [None],
                [None] + [s[i - 1] - s[i] for i in range(1, len(cuts) + 1)])

    print(f"{args.model}: {args.rounds} rounds, visit warm-up {args.visit_warmup}, threads {args.threads}; error of "
          "each segment against the performance counters (from prefixes P, from suffixes S)")
    print(f"{'segment':>10} {'counters us':>12}" + "".join(f" {m + ' P':>9} {m + ' S':>9}" for m in MODES))
    columns = [column for mode in MODES for column in increments(mode)]
    errors: dict[str, list[float]] = {m: [] for m in MODES}
    for i, ref in enumerate(reference):
        row = f"{bounds[i]:>4}-{bounds[i + 1] - 1:<5} {ref:>12.1f}"
        for k, column in enumerate(columns):
            value = column[i]
            if value is None or ref <= 0:
                row += f" {'-':>9}"
                continue
            row += f" {100 * (value / ref - 1):+8.1f}%"
            errors[MODES[k // 2]].append(abs(value / ref - 1))
        print(row)
    print("median |error|: " + ", ".join(f"{m} {100 * float(np.median(e)):.1f}%" for m, e in errors.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
