"""Accuracy of `layerscope bisect` (differential profiling) on real CNNs, with the ONNX Runtime or OpenVINO runner.

Goals (issue #7), per model:
  1. the segments add up to the whole model: |sum of increments + baseline - whole model| <= 5% of the whole
     model, the whole model timed apart from the bisect (the uninstrumented runs of the validation's
     `layerscope profile`, taken between the bisect's rounds) with the bisect's statistic (10th percentile,
     minimum or median);
  2. every segment holding >= 5% of the time agrees with `layerscope profile`'s kernel time of its layers
     (per profiled run summed over the segment, then the same statistic over the runs) within 15%
     (`bisect --validate`).

Each segment is also judged as timed, without the cut-cost correction (`--boundary-runs`): the increment plus
the correction the run file records, so both come from the same rounds.

Intervals: per model and overall, how many segments' stated 95% intervals (random and systematic parts
together) contain the validation reference, and how many the bootstrap part alone does.

With ``--backend openvino`` each prefix and suffix is compiled by OpenVINO and timed end to end; the reference
is OpenVINO's performance counters (`layerscope profile --backend openvino`); ``--cuts heuristic`` lets the
planner cut inside groups the compiler fused (the op-type heuristic only), ``exec-graph`` (the default) never.

Each model is bisected by one `layerscope bisect --validate` process (no cache, so every number is measured
in that run); the run file it writes is read back. Models: the ONNX model zoo's ResNet-50 and SqueezeNet
(shipped with onnx) and the bundled YOLOv5s at 320x320.

    .venv/bin/python benchmarks/bisect_accuracy.py [--models resnet50,squeezenet,yolov5s] [--repeats N]
        [--segments 12] [--visit-warmup N] [--warm-with auto|whole|self|loop] [--runs-per-visit 1]
        [--recompile-every N] [--max-ci F] [--max-cut-share F] [--threads 1]
        [--statistic auto|median|p10|min] [--clock wall] [--boundary-runs 10] [--no-suffixes] [--keep DIR]
        [--backend onnxruntime|openvino] [--cuts auto|exec-graph|heuristic] [--runs 1]

Exit status 0 when every model meets both goals, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx

SUM_GOAL = 0.05
SEGMENT_GOAL = 0.15
LARGE_SHARE = 0.05
ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def model_path(name: str) -> Path:
    """A zoo network by name, or the bundled sample ``yolov5s`` at 320x320."""
    if name == "yolov5s":
        from layerscope.samples import sample_path

        return sample_path("yolov5s", size=320)
    return ZOO / f"light_{name}.onnx"


def bisect(model: Path, args: argparse.Namespace, out: Path) -> float:
    """Run `layerscope bisect --validate` on ``model``; the wall time it took."""
    exe = Path(sys.executable).with_name("layerscope")
    command = [str(exe), "bisect", str(model), "--target", "host", "--threads", str(args.threads),
               "--segments", str(args.segments), *(["--repeats", str(args.repeats)] if args.repeats else []),
               "--runs-per-visit", str(args.runs_per_visit),
               *(["--recompile-every", str(args.recompile_every)] if args.recompile_every is not None else []),
               *(["--max-ci", str(args.max_ci)] if args.max_ci is not None else []),
               *(["--max-cut-share", str(args.max_cut_share)] if args.max_cut_share is not None else []),
               *(["--visit-warmup", str(args.visit_warmup)] if args.visit_warmup is not None else []),
               "--warm-with", args.warm_with,
               "--statistic", args.statistic, "--clock", args.clock, "--validate",
               "--validate-runs", str(args.validate_runs), "--boundary-runs", str(args.boundary_runs),
               "--suffixes" if args.suffixes else "--no-suffixes", "--no-cache", "-o", str(out),
               "--backend", args.backend, *(["--cuts", args.cuts] if args.backend == "openvino" else [])]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def coverage(run: dict[str, Any]) -> tuple[int, int, int]:
    """(segments with a reference, whose stated interval holds it, whose bootstrap interval alone holds it)."""
    checked = stated = random = 0
    for s in run["bisect"]["segments"]:
        if s.get("profile_us") is None:
            continue
        checked += 1
        stated += s["ci_low_us"] <= s["profile_us"] <= s["ci_high_us"]
        low, high = s.get("random_ci_low_us", s["ci_low_us"]), s.get("random_ci_high_us", s["ci_high_us"])
        random += low <= s["profile_us"] <= high
    return checked, stated, random


def judge(name: str, run: dict[str, Any], wall_s: float) -> bool:
    """Print one model's figures and return whether both goals are met."""
    section = run["bisect"]
    whole = section["full_us"]
    measured = section["sum_segments_us"] + (section["baseline_us"] or 0.0)
    same_rounds = (measured - whole) / whole
    validation = section["validation"]
    sum_error = validation["sum_vs_profile_latency"]
    large = [s for s in section["segments"] if s["share"] >= LARGE_SHARE]
    errors = [abs(s["error"]) for s in large if s["error"] is not None]
    within = sum(1 for e in errors if e <= SEGMENT_GOAL)
    ok_sum = sum_error is not None and abs(sum_error) <= SUM_GOAL
    ok_segments = len(errors) == len(large) and within == len(large)
    # the same run without the cut-cost correction: the increments as timed (increment + its correction)
    raw_errors = [abs(raw_error(s)) for s in large if s["profile_us"]]
    print(f"\n{name}: {len(section['segments'])} segments ({section['refinements']} refinement steps), "
          f"{section['repeats']} rounds, {section['runs']} runs, {wall_s:.0f} s")
    samples = sorted(section["prefixes"][-1]["samples_us"])
    mean = sum(samples) / len(samples)
    cv = (sum((x - mean) ** 2 for x in samples) / max(1, len(samples) - 1)) ** 0.5 / mean
    print(f"  whole model {whole / 1e3:.2f} ms (run-to-run CV {cv:.1%}, fastest {samples[0] / 1e3:.2f} ms); "
          f"baseline {section['baseline_us']:.1f} us; sum of segments {section['sum_segments_us'] / 1e3:.2f} ms")
    if section.get("suffixes"):
        exact = f" (prefixes meet suffixes at cut {section['meet']}: the rest is what that cut costs both halves)"
    elif section["statistic"] in ("min", "p10"):
        exact = " (exact by construction: differences of per-prefix levels telescope)"
    else:
        exact = ""
    print(f"  sum + baseline vs the last prefix in the same rounds: {same_rounds:+.1%}{exact}")
    stat = section["statistic"]
    print(f"  sum + baseline vs the whole model timed apart ({stat} of profile's uninstrumented runs, "
          f"{validation['profile_latency_us'] / 1e3:.2f} ms; their P50 {validation['profile_latency_p50_us'] / 1e3:.2f}"
          f" ms): {sum_error:+.1%}  [goal <= {SUM_GOAL:.0%}: {'PASS' if ok_sum else 'FAIL'}]")
    print(f"  segments >= {LARGE_SHARE:.0%} of the time: {within} of {len(large)} within {SEGMENT_GOAL:.0%} of "
          f"profile (worst {max(errors, default=0.0):.1%}; median |error| "
          f"{sorted(errors)[len(errors) // 2] if errors else 0.0:.1%})  "
          f"[{'PASS' if ok_segments else 'FAIL'}]")
    boundary = section.get("boundary", {})
    if boundary.get("corrected"):
        raw_within = sum(1 for e in raw_errors if e <= SEGMENT_GOAL)
        print(f"  cut costs: {boundary['models_with_cost']} of {boundary['models']} models, up to "
              f"{boundary['max_us']:.1f} us ({boundary['runs']} profiled runs each); the same rounds uncorrected: "
              f"{raw_within} of {len(large)} within {SEGMENT_GOAL:.0%} (worst {max(raw_errors, default=0.0):.1%})")
    if boundary.get("dropped"):
        cuts = ", ".join(f"{d['layers']} ({d['cost_us']:.0f} us, "
                         + (f"{d['share']:.0%})" if d.get("share") is not None else "-)") for d in boundary["dropped"])
        print(f"  cuts dropped (cost over {boundary['max_share']:.0%} of a segment beside them): {cuts}")
    checked, stated, random = coverage(run)
    print(f"  95% intervals holding the profile's value: {stated} of {checked} stated (random + systematic), "
          f"{random} of {checked} bootstrap only")
    print("    #  layers     share  bisect us               profile us   error   cut us  uncorrected  systematic")
    for s in section["segments"]:
        mark = "*" if s["share"] >= LARGE_SHARE else " "
        error = f"{s['error']:+.1%}" if s["error"] is not None else "-"
        raw = f"{raw_error(s):+.1%}" if s["profile_us"] else "-"
        print(f"  {mark}{s['index']:2d}  {s['start']:4d}-{s['end'] - 1:<4d} {s['share']:6.1%}  "
              f"{s['increment_us']:9.1f} [{s['ci_low_us']:8.1f},{s['ci_high_us']:8.1f}]  {s['profile_us']:9.1f}  "
              f"{error:>7}  {s.get('boundary_us', 0.0):7.1f}  {raw:>7}  {s.get('systematic_us', 0.0):9.1f}")
    return ok_sum and ok_segments


def raw_error(segment: dict[str, Any]) -> float:
    """A segment's error against the profile had its cut costs not been subtracted."""
    return (segment["increment_us"] + segment.get("boundary_us", 0.0) - segment["profile_us"]) / segment["profile_us"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,squeezenet,yolov5s")
    parser.add_argument("--repeats", type=int, default=None,
                        help="rounds [default: layerscope's: 60, more for a fast model]")
    parser.add_argument("--segments", type=int, default=12)
    parser.add_argument("--runs-per-visit", type=int, default=1)
    parser.add_argument("--visit-warmup", type=int, default=None, help="[default: bisect's, per runtime]")
    parser.add_argument("--warm-with", choices=("auto", "whole", "self", "loop"), default="auto")
    parser.add_argument("--max-ci", type=float, default=None,
                        help="more rounds while a large segment's interval is wider than this [default: bisect's]")
    parser.add_argument("--max-cut-share", type=float, default=None,
                        help="passed to bisect (default: bisect's own, 0.1; 0 keeps every cut)")
    parser.add_argument("--recompile-every", type=int, default=None,
                        help="visits between fresh compilations of a timed model [default: bisect's, per runtime]")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--statistic", choices=("auto", "median", "p10", "min"), default="auto")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--validate-runs", type=int, default=50)
    parser.add_argument("--boundary-runs", type=int, default=10,
                        help="profiled runs per prefix timing its cut's own cost (0: no correction)")
    parser.add_argument("--no-suffixes", dest="suffixes", action="store_false",
                        help="time every cut as a prefix (the segments past the middle then rest on large prefixes)")
    parser.add_argument("--backend", choices=("onnxruntime", "openvino"), default="onnxruntime")
    parser.add_argument("--cuts", choices=("auto", "exec-graph", "heuristic"), default="auto",
                        help="openvino: where cuts may fall (exec-graph: never inside a fused node)")
    parser.add_argument("--runs", type=int, default=1, help="bisects per model (a model passes in most of them)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR", help="also keep the run files here")
    args = parser.parse_args()
    runtime = "ONNX Runtime CPU" if args.backend == "onnxruntime" else f"OpenVINO CPU (cuts: {args.cuts})"
    print(f"layerscope bisect accuracy: {runtime}, threads {args.threads}, {args.segments} coarse segments, "
          f"{args.repeats or 'default'} rounds, {args.visit_warmup if args.visit_warmup is not None else 'default'} "
          f"untimed ({args.warm_with}) + best of "
          f"{args.runs_per_visit} per visit, recompiled every "
          f"{args.recompile_every if args.recompile_every is not None else 'default'} visits, max-ci "
          f"{args.max_ci if args.max_ci is not None else 'default'}, max-cut-share "
          f"{args.max_cut_share if args.max_cut_share is not None else 'default'}, "
          f"statistic {args.statistic}, clock {args.clock}, cut costs {args.boundary_runs} profiled runs, "
          f"{'prefixes and suffixes' if args.suffixes else 'prefixes only'}; reference: layerscope profile, "
          f"{args.validate_runs} runs")
    verdicts: dict[str, list[bool]] = {}
    totals = [0, 0, 0]
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in range(args.runs):
            for name in args.models.split(","):
                out = Path(tmp) / f"{name}-{args.backend}-{attempt}.json"
                wall_s = bisect(model_path(name), args, out)
                run = json.loads(out.read_text())
                verdicts.setdefault(name, []).append(judge(f"{name} (run {attempt + 1})", run, wall_s))
                totals = [a + b for a, b in zip(totals, coverage(run), strict=True)]
                if args.keep is not None:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    (args.keep / out.name).write_bytes(out.read_bytes())
    print("\n" + ", ".join(f"{name}: {sum(oks)} of {len(oks)} runs PASS" for name, oks in verdicts.items()))
    checked, stated, random = totals
    print(f"95% intervals holding the profile's value: {stated} of {checked} segments "
          f"({stated / max(1, checked):.0%}) stated; bootstrap only {random} ({random / max(1, checked):.0%})")
    # a model passes when it meets both goals in most of its runs
    return 0 if all(2 * sum(oks) > len(oks) for oks in verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
