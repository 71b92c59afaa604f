"""The kernel-level latency predictor (issue #18) on public models it never saw, beside the roofline and
today's ``calibrate``.

Steps (all with ONNX Runtime on one thread, from the repository root with ``PYTHONPATH=src``):

1. Train: ``layerscope calibrate --kernels <the nine model-zoo networks> --budget B -o OUT/predictor.json``:
   every distinct kernel of the zoo networks, then generated kernels of every family until the budget is spent.
2. Today's calibration: ``layerscope profile`` each zoo network (``--runs R --threads 1``) and
   ``layerscope calibrate <zoo runs> -o OUT/host-cal.toml`` (per-op efficiency).
3. The zoo scale: ``layerscope estimate`` each zoo network with the predictor; the median of its measured P50 (step
   2) over the prediction is the ``predictor-s`` column's factor (fitted on the calibration models only).
4. Held out: the real-world corpus (``benchmarks/realworld_models.toml``, models extracted under ``--models``,
   default ``/work/models``; those needing constant inputs left out): ``layerscope profile MODEL --threads 1``
   twice (rounds A and B, all models in turn between them): A is the truth, |A/B - 1| the machine's noise on
   that model. ``layerscope estimate MODEL -t OUT/host-cal.toml --predictor OUT/predictor.json`` gives the
   calibrated estimate and the prediction; A's own estimate is the uncalibrated roofline (``host``).
5. Prints per model and method: end-to-end error (predicted / measured P50 - 1), per-layer Spearman rank
   correlation (layers with a measured time) and top-10 overlap (``pred-alone``: the predictor's kernels alone
   summed, without the in-model context it fitted to the zoo's whole P50: end to end only); then per method
   the share within ±10%, the median |error|, the median Spearman; and the noise. Writes everything to
   ``OUT/predictor-bench.json``.

Usage: ``python benchmarks/predictor.py [--budget 300s] [--runs 30] [--out DIR] [--reuse] [--only NAME ...]``.
``--reuse`` keeps run files and the predictor already in OUT. Exit 0 when the goal holds (≥ 90% of held-out
models within ±10% and Spearman ≥ 0.9 on each), 1 when not, 2 when a step fails for every model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from realworld import load_manifest  # noqa: E402

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
              "squeezenet", "vgg19", "zfnet512")
METHODS = ("roofline", "calibrate", "pred-alone", "predictor", "predictor-s")


def _layerscope(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "layerscope", *args]
    print("$ layerscope", " ".join(args), flush=True)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)


def _profile(model: Path, extra: Sequence[str], out: Path, runs: int, reuse: bool) -> dict[str, Any] | None:
    if not (reuse and out.exists()):
        done = _layerscope("profile", str(model), *extra, "--threads", "1", "--runs", str(runs), "--warmup", "3",
                           "--top", "0", "-o", str(out))
        if done.returncode != 0:
            print(f"  failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
            return None
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); ``None`` with fewer than 3 pairs or no spread."""
    if len(a) < 3:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else None


def top_overlap(measured: Mapping[str, float], predicted: Mapping[str, float], n: int = 10) -> float:
    """|top-n by measured ∩ top-n by predicted| / n (n capped at the layer count)."""
    n = min(n, len(measured))
    top_m = set(sorted(measured, key=lambda k: -measured[k])[:n])
    top_p = set(sorted(predicted, key=lambda k: -predicted[k])[:n])
    return len(top_m & top_p) / n if n else 0.0


def _per_layer(run: Mapping[str, Any], method: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for layer in run.get("layers", []):
        if method.startswith("predictor"):
            value = (layer.get("predicted") or {}).get("latency_us")
        else:
            value = (layer.get("estimate") or {}).get("latency_us")
        if value is not None:
            out[str(layer["id"])] = float(value)
    return out


def _measured_layers(run: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for layer in run.get("layers", []):
        measured = layer.get("measured")
        if isinstance(measured, Mapping) and measured.get("status") != "eliminated":
            value = measured.get("median_us", measured.get("mean_us"))
            if value is not None:
                out[str(layer["id"])] = float(value)
    return out


def alone(measured_run: Mapping[str, Any], method_run: Mapping[str, Any]) -> dict[str, Any]:
    """The predictor without its in-model context: its kernels' predicted times alone summed, plus the per-call
    overhead (end to end only: no per-layer numbers)."""
    truth = float(measured_run["latency"]["p50_us"])
    section = method_run["predictor"]
    total = sum(float(k.get("isolated_us", k["latency_us"])) for k in section["kernels"]) + section["overhead_us"]
    return {"predicted_us": total, "error": total / truth - 1, "spearman": None, "top10": None}


def score(measured_run: Mapping[str, Any], method_run: Mapping[str, Any], method: str) -> dict[str, Any]:
    """End-to-end error, Spearman and top-10 overlap of ``method`` against the measured run."""
    truth = float(measured_run["latency"]["p50_us"])
    if method.startswith("predictor"):
        total = float(method_run["predictor"]["latency_us"])
    else:
        total = float(method_run["summary"]["est_latency_us"])
    measured = _measured_layers(measured_run)
    predicted = _per_layer(method_run, method)
    common = [k for k in measured if k in predicted]
    rho = spearman([measured[k] for k in common], [predicted[k] for k in common])
    return {"predicted_us": total, "error": total / truth - 1, "spearman": rho,
            "top10": top_overlap({k: measured[k] for k in common}, {k: predicted[k] for k in common})}


def _held_out(models_dir: Path, only: Sequence[str]) -> list[tuple[str, Path, list[str]]]:
    chosen = []
    for entry in load_manifest():
        path = models_dir / entry.family / f"{entry.name}.onnx"
        if entry.inputs or not path.exists() or (only and entry.name not in only and entry.family not in only):
            continue
        chosen.append((entry.name, path, list(entry.args)))
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / ".cache" / "predictor")
    parser.add_argument("--models", type=Path, default=Path("/work/models"))
    parser.add_argument("--budget", default="300s")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    predictor = out / "predictor.json"
    if not (args.reuse and predictor.exists()):
        done = _layerscope("calibrate", "--kernels", *[str(ZOO / f"light_{m}.onnx") for m in ZOO_MODELS],
                           "--budget", args.budget, "--cache", str(out / "cache"), "-o", str(predictor),
                           timeout_s=3600)
        print(done.stdout)
        if done.returncode != 0:
            print(done.stderr)
            return 2
    zoo_runs = [out / f"zoo-{m}.json" for m in ZOO_MODELS]
    for model, run in zip(ZOO_MODELS, zoo_runs, strict=True):
        _profile(ZOO / f"light_{model}.onnx", [], run, max(5, args.runs // 3), args.reuse)
    calibrated = out / "host-cal.toml"
    done = _layerscope("calibrate", *[str(r) for r in zoo_runs if r.exists()], "-o", str(calibrated))
    if done.returncode != 0:
        print(done.stderr)
        return 2
    scale = zoo_scale(zoo_runs, predictor, out)
    models = _held_out(args.models, args.only)
    runs: dict[str, dict[str, Any]] = {}
    for round_ in ("a", "b"):
        for name, path, extra in models:
            run = _profile(path, extra, out / f"held-{name}-{round_}.json", args.runs, args.reuse)
            if run is not None:
                runs[f"{name}:{round_}"] = run
    results: dict[str, Any] = {}
    for name, path, extra in models:
        a, b = runs.get(f"{name}:a"), runs.get(f"{name}:b")
        est_path = out / f"held-{name}-est.json"
        est_path.unlink(missing_ok=True)  # estimate --json merges into an existing run
        done = _layerscope("estimate", str(path), *extra, "-t", str(calibrated), "--predictor", str(predictor),
                           "--top", "0", "--json", str(est_path))
        if a is None or done.returncode != 0:
            results[name] = {"error": (done.stderr or "profile failed").strip().splitlines()[-1:]}
            continue
        est = json.loads(est_path.read_text())
        row = {"measured_us": a["latency"]["p50_us"],
               "noise": abs(a["latency"]["p50_us"] / b["latency"]["p50_us"] - 1) if b else None,
               "roofline": score(a, a, "roofline"), "calibrate": score(a, est, "calibrate"),
               "pred-alone": alone(a, est), "predictor": score(a, est, "predictor"),
               "predictor-s": _scaled(score(a, est, "predictor"), scale),
               "interval_us": [est["predictor"]["low_us"], est["predictor"]["high_us"]]}
        results[name] = row
    summary = render(results)
    summary["zoo_scale"] = scale
    print(f"predictor-s: the predictor x {scale:.3f}, the median of measured P50 / predicted over the zoo's own "
          "profile runs in this session (fitted on the calibration models only)")
    (out / "predictor-bench.json").write_text(json.dumps({"models": results, "summary": summary}, indent=1))
    ok = [r for r in results.values() if "roofline" in r]
    if not ok:
        return 2
    goal = summary["predictor"]["within_10"] >= 0.9 and all(
        (r["predictor"]["spearman"] or 0) >= 0.9 for r in ok)
    print(f"goal (>= 90% within ±10% and Spearman >= 0.9 on each): {'PASS' if goal else 'FAIL'}")
    return 0 if goal else 1


def zoo_scale(zoo_runs: Sequence[Path], predictor: Path, out: Path) -> float:
    """The median of measured P50 / predicted latency over the zoo networks' profile runs (the calibration
    models): what a kernel timed alone, as the fastest of its runs, misses of a whole model's P50 in this session
    (caches the neighbouring kernels evict, the machine's other load). 1.0 when no zoo run predicts."""
    ratios = []
    for model, run_path in zip(ZOO_MODELS, zoo_runs, strict=True):
        est_path = out / f"zoo-{model}-est.json"
        est_path.unlink(missing_ok=True)
        done = _layerscope("estimate", str(ZOO / f"light_{model}.onnx"), "--predictor", str(predictor), "--top", "0",
                           "--json", str(est_path))
        if done.returncode == 0 and run_path.exists():
            measured = json.loads(run_path.read_text())["latency"]["p50_us"]
            ratios.append(measured / json.loads(est_path.read_text())["predictor"]["latency_us"])
    return statistics.median(ratios) if ratios else 1.0


def _scaled(scored: dict[str, Any], scale: float) -> dict[str, Any]:
    total = scored["predicted_us"] * scale
    return dict(scored, predicted_us=total, error=(1 + scored["error"]) * scale - 1)


def render(results: Mapping[str, Any]) -> dict[str, Any]:
    """Print the side-by-side table and the per-method summary; return the summary."""
    print(f"\n{'model':22} {'meas ms':>8} {'noise':>6} | " + " | ".join(f"{m:^21}" for m in METHODS))
    print(f"{'':22} {'':>8} {'':>6} | " + " | ".join(f"{'err':>7} {'rho':>6} {'top10':>6}" for _ in METHODS))
    for name, row in results.items():
        if "roofline" not in row:
            print(f"{name:22} failed: {row.get('error')}")
            continue
        cells = []
        for m in METHODS:
            s = row[m]
            rho = "-" if s["spearman"] is None else f"{s['spearman']:.2f}"
            top10 = "-" if s["top10"] is None else f"{s['top10']:.1f}"
            cells.append(f"{100 * s['error']:+6.1f}% {rho:>6} {top10:>6}")
        noise = "-" if row["noise"] is None else f"{100 * row['noise']:.1f}%"
        print(f"{name:22} {row['measured_us'] / 1e3:8.2f} {noise:>6} | " + " | ".join(cells))
    ok = [r for r in results.values() if "roofline" in r]
    summary: dict[str, Any] = {}
    for m in METHODS:
        errors = [abs(r[m]["error"]) for r in ok]
        rhos = [r[m]["spearman"] for r in ok if r[m]["spearman"] is not None]
        summary[m] = {"models": len(ok), "within_10": sum(e <= 0.10 for e in errors) / max(1, len(ok)),
                      "median_abs_error": statistics.median(errors) if errors else None,
                      "median_spearman": statistics.median(rhos) if rhos else None,
                      "spearman_ge_0.9": sum(r >= 0.9 for r in rhos),
                      "median_top10": statistics.median(tops) if (tops := [r[m]["top10"] for r in ok
                                                                           if r[m]["top10"] is not None]) else None}
        s = summary[m]
        rho = "-" if s["median_spearman"] is None else f"{s['median_spearman']:.2f} ({s['spearman_ge_0.9']} >= 0.9)"
        top10 = "-" if s["median_top10"] is None else f"{s['median_top10']:.1f}"
        print(f"{m:10}: {100 * s['within_10']:.0f}% within ±10% ({len(ok)} models), median |err| "
              f"{100 * (s['median_abs_error'] or 0):.1f}%, median Spearman {rho}, median top-10 overlap {top10}")
    noises = [r["noise"] for r in ok if r["noise"] is not None]
    if noises:
        summary["noise_median"] = statistics.median(noises)
        summary["noise_max"] = max(noises)
        print(f"noise (|round A / round B - 1| of the measured P50): median {100 * statistics.median(noises):.1f}%, "
              f"max {100 * max(noises):.1f}%")
    return summary


if __name__ == "__main__":
    sys.exit(main())
