"""Does each compilation of one model run at its own speed? (issue #17: why `bisect --recompile-every` exists)

A model is compiled ``--instances`` times by OpenVINO (group "compiles": each its own compiled model and infer
request), and once more with ``--instances`` infer requests of that one compiled model (group "requests"). All of
them are timed in the same interleaved rounds (one untimed then one timed ``infer`` per visit, alternating
direction, as `bisect` visits its models), with the settings `bisect --backend openvino --threads 1` compiles with
and through the bisect runner's own compiled model and timed call (``runtimes.openvino.runner._Compiled``).

Printed per group: each instance's 10th percentile and median over the rounds, the spread of the instances' 10th
percentiles (their standard deviation: "between"), and the bootstrap standard error of one instance's 10th
percentile ("within", the root mean square over the group). Instances that differ only by chance have "between"
about equal to "within"; a "between" well above "within" is an offset each instance keeps for its life, which no
number of rounds of that instance reveals -- and a bisect's segment is the difference of two models' levels.

    .venv/bin/python benchmarks/compile_offsets.py [--model resnet50] [--instances 4] [--rounds 100]

Exit status 0 (a measurement, not a goal).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runtimes.openvino.compile import OpenVinoOptions, _require_openvino, compile_for
from layerscope.runtimes.openvino.runner import _Compiled, _PathGraph

sys.path.insert(0, str(Path(__file__).parent))
from bisect_accuracy import model_path


def p10_error(samples: np.ndarray, rng: np.random.Generator, resamples: int = 400) -> float:
    """Bootstrap standard error of the 10th percentile of ``samples``."""
    draws = rng.choice(samples, (resamples, samples.size))
    return float(np.quantile(draws, 0.1, axis=1).std(ddof=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50", help="resnet50, squeezenet, yolov5s or a zoo name")
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    path = model_path(args.model)
    graph = load_model(path)
    feeds = make_inputs(graph, (), 0)
    core = _require_openvino().Core()
    config, options = SessionConfig(provider="CPU", threads=1), OpenVinoOptions()

    def compiled() -> Any:
        return compile_for(_PathGraph(path.stem, str(path)), config, options, profiling=False,
                           model=core.read_model(str(path)))

    # each _Compiled holds its own infer request (as the bisect's runner times them): four of one compiled model
    instances = [("compiles", _Compiled(compiled(), feeds, path)) for _ in range(args.instances)]
    shared = compiled()
    instances += [("requests", _Compiled(shared, feeds, path)) for _ in range(args.instances)]
    for _, model in instances:
        for _ in range(3):
            model.infer()
    times: list[list[float]] = [[] for _ in instances]
    for round_no in range(args.rounds):
        order = range(len(instances)) if round_no % 2 == 0 else reversed(range(len(instances)))
        for k in order:
            model = instances[k][1]
            model.infer()
            times[k].append(model.infer() / 1e3)
    rng = np.random.default_rng(0)
    print(f"{args.model}: OpenVINO CPU, 1 thread, {args.instances} instances per group, {args.rounds} rounds")
    for group in ("compiles", "requests"):
        rows = [np.asarray(t) for (g, _), t in zip(instances, times, strict=True) if g == group]
        p10 = np.array([np.quantile(r, 0.1) for r in rows])
        within = float(np.sqrt(np.mean([p10_error(r, rng) ** 2 for r in rows])))
        print(f"  {group:9s} p10 us  {'  '.join(f'{v:9.1f}' for v in p10)}   between {p10.std(ddof=1):7.1f}   "
              f"within {within:7.1f}   ratio {p10.std(ddof=1) / within:4.2f}")
        print(f"  {'':9s} median  {'  '.join(f'{float(np.median(r)):9.1f}' for r in rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
