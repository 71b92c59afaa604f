"""What a cut costs on OpenVINO, inside a node the compiler fused and between two nodes (issue #17, item 3).

For cut k, prefix k (the layers before it) and suffix k (the layers after it, fed what crosses it) together do
the whole model's work once; what they take beyond the whole model and one more fixed cost per call (the
suffix baseline, the outputs fed and cut to one element) is what the cut costs:

    cost(k) = P(k) + S(k) - W - B_suffix

(the prefix hands the crossing tensors out of the plugin's blocked layout, the suffix takes them in, and a cut
inside a group the compiler fused -- a Conv and its Relu -- runs the group's parts apart). Every model is timed in
interleaved rounds (one sample per model and round, alternating direction), each sample the calling thread's
CPU time of one ``infer`` (``--threads 1``: OpenVINO's CPU plugin runs on the calling thread, so the time other
processes hold the core is not counted), after one untimed run of the model itself; a model's time is the 10th
percentile over the rounds. Cuts: ``--cuts`` of each kind (inside a fused node / between nodes, from the compiled
whole model's runtime graph), spread evenly over the model.

    .venv/bin/python benchmarks/cut_cost.py [--models squeezenet,resnet50,yolov5s] [--cuts 6] [--rounds 15]
        [--at K,K,...] [--warm-with self|loop] [--visit-warmup N] [--clock cpu|wall]

``--at`` times the cuts named (after K layers, as `bisect`'s tables number them) instead, and prints each cut's
cost; ``--warm-with loop --visit-warmup 4 --clock wall`` times them as `bisect --backend openvino` does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from layerscope.measure.cuts import CutPlanner
from layerscope.measure.groups import group_cuts
from layerscope.measure.inputs import make_inputs
from layerscope.measure.runners import Job
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runtimes.openvino.compile import OpenVinoOptions
from layerscope.runtimes.openvino.runner import OpenVinoRunner, fused_groups

sys.path.insert(0, str(Path(__file__).parent))
from bisect_accuracy import model_path


def spread(cuts: list[int], count: int) -> list[int]:
    """``count`` of ``cuts`` evenly spread (all when fewer)."""
    if len(cuts) <= count:
        return cuts
    return [cuts[round(i * (len(cuts) - 1) / (count - 1))] for i in range(count)]


def measure(name: str, args: argparse.Namespace) -> tuple[dict[int, float], dict[int, float], float]:
    """(costs of cuts inside fused nodes, costs of cuts between nodes, each by cut, the whole model), µs."""
    graph = load_model(model_path(name))
    config = SessionConfig(provider="CPU", threads=1)
    options = OpenVinoOptions()
    planner = CutPlanner.for_model(graph)
    inside = group_cuts(planner.graph, fused_groups(graph, config, options))
    n = planner.layer_count
    named = [int(k) for k in args.at.split(",")] if args.at else None
    clean = [k for k in named if k not in inside] if named else spread([k for k in range(1, n) if k not in inside],
                                                                       args.cuts)
    fused = [k for k in named if k in inside] if named else spread(sorted(inside), args.cuts)
    feeds = make_inputs(graph, (), 0)
    runner = OpenVinoRunner(config, options, feeds, visit_warmup=args.visit_warmup, warm_with=args.warm_with,
                            clock=args.clock, max_models=4 * (len(clean) + len(fused)) + 4)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def job(model: onnx.ModelProto, label: str, feeds_model: onnx.ModelProto | None = None) -> Job:
            path = folder / label / "model.onnx"
            path.parent.mkdir()
            onnx.save(model, str(path))
            feeds_path = None
            if feeds_model is not None:
                feeds_path = path.parent / "feeds.onnx"
                onnx.save(feeds_model, str(feeds_path))
            return Job(cut=planner.cut(0), key=label, model_path=path, label=label, feeds_model=feeds_path,
                       side="suffix" if feeds_model is not None else "prefix")

        jobs = {"whole": job(planner.prefix_model(n), "whole"), "sbase": job(planner.suffix_model(n), "sbase",
                                                                             planner.prefix_model(n))}
        for k in (*clean, *fused):
            jobs[f"p{k}"] = job(planner.prefix_model(k), f"p{k}")
            jobs[f"s{k}"] = job(planner.suffix_model(k), f"s{k}", planner.prefix_model(k))
        order = list(jobs)
        samples: dict[str, list[float]] = {key: [] for key in order}
        for r in range(args.rounds):
            for key in order if r % 2 == 0 else reversed(order):
                samples[key].append(runner.measure(jobs[key]))
        runner.close()
    level = {key: float(np.quantile(v, 0.1)) for key, v in samples.items()}

    def cost(k: int) -> float:
        return level[f"p{k}"] + level[f"s{k}"] - level["whole"] - level["sbase"]

    return {k: cost(k) for k in fused}, {k: cost(k) for k in clean}, level["whole"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="squeezenet,resnet50,yolov5s")
    parser.add_argument("--cuts", type=int, default=6, help="cuts of each kind per model")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--at", default=None, help="comma-separated cuts to time instead of --cuts of each kind")
    parser.add_argument("--warm-with", choices=["self", "loop"], default="self")
    parser.add_argument("--visit-warmup", type=int, default=1)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    args = parser.parse_args()
    print(f"OpenVINO CPU, threads 1, {'thread CPU' if args.clock == 'cpu' else 'wall'} time, P10 of {args.rounds} "
          f"interleaved rounds, {args.visit_warmup} untimed run(s) per visit ({args.warm_with}); "
          f"cost(k) = P(k) + S(k) - W - suffix baseline")
    for name in args.models.split(","):
        fused, clean, whole = measure(name, args)
        print(f"\n{name}: whole model {whole / 1e3:.2f} ms")
        for label, by_cut in (("inside a fused node", fused), ("between nodes", clean)):
            costs = list(by_cut.values())
            if costs:
                print(f"  cut {label:20s} n={len(costs)}  median {statistics.median(costs):8.1f} us "
                      f"({statistics.median(costs) / whole:+.1%} of the model)  range "
                      f"[{min(costs):.1f}, {max(costs):.1f}]")
            if args.at:
                for k, value in sorted(by_cut.items()):
                    print(f"    cut {k:4d}: {value:8.1f} us ({value / whole:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
