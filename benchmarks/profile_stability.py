"""Repeatability of `layerscope profile`: per-layer medians from 3 separate invocations.

Goal (issue #3): for every layer holding >= 1% of the measured time, the medians of 3 separate
`layerscope profile` processes differ by <= 10% (max/min - 1). The baseline named beside it is the
end-to-end P50 of the same 3 invocations: how much the whole model moved between them, so a layer's
spread can be read against the machine's own drift. Each invocation's `measurement.steadiness` (run-to-run CV,
drift between the halves of its runs) and the spread of each layer's share of its run are printed beside it.

    .venv/bin/python benchmarks/profile_stability.py [--model PATH] [--runs 30] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

GOAL = 0.10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"
    parser.add_argument("--model", type=Path, default=default)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--invocations", type=int, default=3)
    args = parser.parse_args()
    exe = Path(sys.executable).with_name("layerscope")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.invocations):
            out = Path(tmp) / f"run{i}.json"
            subprocess.run([str(exe), "profile", str(args.model), "-t", "rdk-s100", "--runs", str(args.runs),
                            "--warmup", str(args.warmup), "--threads", str(args.threads), "-o", str(out),
                            "--top", "0"], check=True, stdout=subprocess.DEVNULL)
            runs.append(json.loads(out.read_text()))
    medians = [{layer["id"]: layer["measured"]["median_us"] for layer in run["layers"]} for run in runs]
    total = sum(medians[0].values())
    heavy = [lid for lid, t in medians[0].items() if t >= 0.01 * total]
    spreads = {lid: max(m[lid] for m in medians) / max(min(m[lid] for m in medians), 1e-9) - 1 for lid in heavy}
    p50s = [run["latency"]["p50_us"] for run in runs]
    worst = sorted(spreads.items(), key=lambda kv: -kv[1])[:5]
    print(f"model: {args.model.name}, {args.invocations} invocations x {args.runs} runs, threads {args.threads}")
    print(f"layers holding >= 1% of the time: {len(heavy)}")
    print(f"baseline: end-to-end P50 spread across invocations: {max(p50s) / min(p50s) - 1:.1%} "
          f"({', '.join(f'{p / 1e3:.2f} ms' for p in p50s)})")
    profiled = [run["measurement"]["instrumented"]["median_us"] for run in runs]
    print(f"          profiled runs' P50 spread (the runs the per-layer medians come from): "
          f"{max(profiled) / min(profiled) - 1:.1%} ({', '.join(f'{p / 1e3:.2f} ms' for p in profiled)})")
    print(f"per-layer median spread: max {max(spreads.values()):.1%}, "
          f"median {sorted(spreads.values())[len(spreads) // 2]:.1%}")
    print("worst layers: " + ", ".join(f"{lid} {s:.1%}" for lid, s in worst))
    for i, run in enumerate(runs):
        steady = run["measurement"]["steadiness"]
        print(f"invocation {i + 1}: run-to-run CV {steady['latency_cv']:.1%}, drift between halves "
              f"{steady['latency_drift']:+.1%} (uninstrumented) / {steady['profiled_drift']:+.1%} (profiled)")
    # for information: each layer's share of its own run, which a uniform change of machine speed leaves alone
    shares = [{lid: t / sum(m.values()) for lid, t in m.items()} for m in medians]
    share_spreads = [max(sh[lid] for sh in shares) / min(sh[lid] for sh in shares) - 1 for lid in heavy]
    print(f"for information, per-layer share of the run: spread max {max(share_spreads):.1%}, "
          f"median {sorted(share_spreads)[len(share_spreads) // 2]:.1%}")
    ok = max(spreads.values()) <= GOAL
    print(f"goal: every layer >= 1% within {GOAL:.0%} across invocations: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
