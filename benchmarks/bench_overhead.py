"""Overhead of ``layerscope bench``'s measuring loop against a plain ``session.run`` loop.

Usage: ``.venv/bin/python benchmarks/bench_overhead.py [--rounds 10] [--runs 20] [--size 320] [--model X.onnx]
[--backend onnxruntime|openvino]``

With ``--backend openvino`` the bench side times :class:`~layerscope.runtimes.openvino.compile.InferSession`
(what ``bench --backend openvino`` runs) and the plain side ``InferRequest.infer`` on a request of the same
compiled model (OpenVINO's CPU device, its defaults).

Both sides time the same ``session.run(None, feeds)`` calls on ONE shared session in this process:
``layerscope.measure.bench.run_bench`` (one stream, no warm-up: the session is warmed once up front)
against the simplest loop a user would write, ``perf_counter`` around each call. Rounds alternate
which side goes first, so drifting machine load hits both alike. Printed: each side's median over
its rounds, the median over rounds of (bench P50 / plain median) -- paired within a round, so
slow drift cancels -- and the goal line (ratio <= 1.03).

Exit status: 0 when the goal is met, 1 when it is not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from layerscope.measure.bench import BenchConfig, run_bench
from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.onnxruntime.session import make_session
from layerscope.samples import sample_path

GOAL_RATIO = 1.03


def plain_round_median_us(call: Callable[[], object], runs: int) -> float:
    """The reference: a bare loop timing each ``session.run`` (``InferRequest.infer``) with
    ``time.perf_counter``; its median."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def bench_round_p50_us(session: Any, feeds: dict[str, np.ndarray], runs: int) -> float:
    """``run_bench``'s P50 over ``runs`` runs on one stream, without warm-up."""
    return run_bench(session, feeds, BenchConfig(warmup_runs=0, runs=runs, streams=1)).latency.median_us


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="ONNX model (default: the yolov5s sample)")
    parser.add_argument("--size", type=int, default=320, help="input size of the yolov5s sample (default 320)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--runs", type=int, default=20, help="runs per side per round (default 20)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs before the first round")
    parser.add_argument("--backend", choices=("onnxruntime", "openvino"), default="onnxruntime")
    args = parser.parse_args(argv)

    model = args.model or sample_path("yolov5s", size=args.size)
    graph = load_model(model)
    feeds = make_inputs(graph)
    session: Any
    if args.backend == "openvino":
        from layerscope.runtimes.openvino.compile import (
            InferSession,
            OpenVinoOptions,
            compile_for,
            compiled_settings,
        )

        compiled = compile_for(graph, SessionConfig(provider="CPU"), OpenVinoOptions(), profiling=False)
        session, request = InferSession(compiled), compiled.create_infer_request()
        runtime = f"openvino, CPU, {compiled_settings(compiled)}"

        def plain() -> object:  # the same call as bench's (infer_shared), so the ratio is the harness alone
            return request.infer(feeds, share_inputs=True, share_outputs=True)
    else:
        session = make_session(model, SessionConfig())
        runtime = "onnxruntime, CPUExecutionProvider, intra-op threads default"

        def plain() -> object:
            return session.run(None, feeds)
    for _ in range(args.warmup):
        session.run(None, feeds)

    bench_p50s: list[float] = []
    plain_medians: list[float] = []
    for i in range(args.rounds):
        # alternate who goes first, so drift within a round does not favour one side
        if i % 2 == 0:
            bench_p50s.append(bench_round_p50_us(session, feeds, args.runs))
            plain_medians.append(plain_round_median_us(plain, args.runs))
        else:
            plain_medians.append(plain_round_median_us(plain, args.runs))
            bench_p50s.append(bench_round_p50_us(session, feeds, args.runs))

    paired = [b / p for b, p in zip(bench_p50s, plain_medians, strict=True)]
    ratio = statistics.median(paired)
    machine = machine_info()
    print(f"model        {model}")
    print(f"machine      {machine['cpu']}, {machine['cores']} cores; onnxruntime {machine['onnxruntime']}")
    print(f"runtime      {runtime}")
    print(f"method       {args.rounds} alternating rounds x {args.runs} runs per side, one shared session")
    print(f"bench P50    {statistics.median(bench_p50s) / 1e3:9.3f} ms  (median of the rounds' P50s)")
    print(f"plain median {statistics.median(plain_medians) / 1e3:9.3f} ms  (median of the rounds' medians)")
    print(f"ratio        {ratio:.4f}  (median of the rounds' bench P50 / plain median; "
          f"range {min(paired):.3f}-{max(paired):.3f})")
    ok = ratio <= GOAL_RATIO
    call = "InferRequest.infer" if args.backend == "openvino" else "session.run"
    print(f"goal: bench P50 / plain {call} median <= {GOAL_RATIO}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
