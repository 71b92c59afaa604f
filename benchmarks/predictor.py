"""The kernel-level latency predictor (issue #18) on public models it never saw, truth and prediction taken in one
sitting (issue #39), beside the roofline.

Steps (all on one thread, with ONNX Runtime or ``--backend openvino``, from the repository root with
``PYTHONPATH=src``), in ``--rounds`` R rounds, round-robin, so that the machine's drift over the sitting falls on
calibration and truth alike:

1. Calibration timing, a share: ``layerscope calibrate --kernels <the model-zoo networks (--zoo)> --budget B/R
   --backend BACKEND --cache OUT/cache -o OUT/predictor.json`` (with ``--backend openvino`` OUT is
   ``--out``/openvino). The cache keeps every kernel timed so far: each round times new kernels for B/R seconds
   and fits again on all of them; the last round's predictor is the one scored.
2. The held-out models' measurement, a share: the real-world corpus (``benchmarks/realworld_models.toml``, models
   extracted under ``--models``, default ``/work/models``, else ``benchmarks/.cache/realworld/models``; those
   needing constant inputs left out): ``layerscope profile MODEL --backend BACKEND --threads 1 --runs N/R`` once
   per round. The truth is the median of a model's R round P50s; its *spread* is (max - min) / median of them: the
   run-to-run noise of its own measurement, printed beside its error.
3. ``layerscope estimate MODEL --predictor OUT/predictor.json`` (``summary.est_latency_us``: the prediction;
   ``summary.roofline_latency_us``: the roofline). With ``--compare``, today's per-op calibration too
   (``profile`` each zoo network, ``layerscope calibrate`` their runs, ``estimate -t OUT/host-cal.toml``).
4. Prints per model and method: end-to-end error (predicted / measured P50 - 1), per-layer Spearman rank
   correlation (layers with a measured time, from the round whose P50 is the median) and top-10 overlap
   (``pred-alone``: the predictor's kernels alone summed, without its in-model context: end to end only),
   whether the predictor's interval holds the truth; then per method the share within ±10%, the median |error|,
   the median Spearman; the spread; and to which held-out models the in-model context was applied (those inside
   the calibration models' range: :meth:`~layerscope.analysis.predictor.Context.applies_to`). Writes everything
   to ``OUT/predictor-bench.json``.

Usage: ``python benchmarks/predictor.py [--budget 300s] [--rounds 3] [--runs 30] [--zoo a,b] [--out DIR]
[--backend onnxruntime|openvino] [--reuse] [--only NAME ...] [--compare]``. ``--reuse`` keeps run files and the
predictor already in OUT. The load average (``os.getloadavg``) at the start and the end is printed and saved. Exit 0
when the goal holds (≥ 90% of held-out models within ±10%, median |error| ≤ 5%, the interval holding ≥ 90%), 1
when not, 2 when a step fails for every model.
"""

from __future__ import annotations

import argparse
import json
import os
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
METHODS = ("roofline", "calibrate", "pred-alone", "predictor")


def _layerscope(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "layerscope", *args]
    print("$ layerscope", " ".join(args), flush=True)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)


def _profile(model: Path, extra: Sequence[str], out: Path, runs: int, reuse: bool, *,
             backend: str = "onnxruntime") -> dict[str, Any] | None:
    if not (reuse and out.exists()):
        done = _layerscope("profile", str(model), *extra, "--backend", backend, "--threads", "1", "--runs", str(runs),
                           "--warmup", "3", "--top", "0", "-o", str(out))
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
    else:  # beside a prediction, the summary keeps the roofline's total in roofline_latency_us
        summary = method_run["summary"]
        total = float(summary.get("roofline_latency_us") or summary["est_latency_us"])
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


def _budget_s(text: str) -> float:
    """``300s``, ``5m`` or ``300`` as seconds."""
    text = text.strip().lower()
    return float(text[:-1]) * 60 if text.endswith("m") else float(text.rstrip("s"))


def round_spread(p50s: Sequence[float]) -> tuple[float, float | None]:
    """(the median of a model's per-round P50s, (max - min) / that median; ``None`` with one round)."""
    truth = statistics.median(p50s)
    return truth, ((max(p50s) - min(p50s)) / truth if len(p50s) > 1 and truth > 0 else None)


def _calibrate(zoo: Sequence[str], budget_s: float, out: Path, predictor: Path, backend: str = "onnxruntime") -> bool:
    done = _layerscope("calibrate", "--kernels", *[str(ZOO / f"light_{m}.onnx") for m in zoo], "--budget",
                       f"{max(1.0, budget_s):.0f}s", "--backend", backend, "--cache", str(out / "cache"), "-o",
                       str(predictor), timeout_s=3600)
    print("\n".join(line for line in done.stdout.splitlines() if "context" in line or line.startswith("timed")))
    if done.returncode != 0:
        print(done.stderr)
    return done.returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / ".cache" / "predictor")
    parser.add_argument("--models", type=Path, default=None)
    parser.add_argument("--budget", default="300s")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=30, help="profile runs per held-out model, over all rounds")
    parser.add_argument("--zoo", default=",".join(ZOO_MODELS), help="calibration models (model-zoo names)")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--compare", action="store_true", help="also today's per-op calibration (profiles the zoo)")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--backend", default="onnxruntime", choices=("onnxruntime", "openvino"))
    args = parser.parse_args(argv)
    out: Path = args.out if args.backend == "onnxruntime" else args.out / args.backend
    load_start = os.getloadavg()
    out.mkdir(parents=True, exist_ok=True)
    zoo = [m for m in args.zoo.split(",") if m]
    models_dir = args.models or next((d for d in (Path("/work/models"), ROOT / "benchmarks" / ".cache" / "realworld"
                                                  / "models") if d.is_dir()), Path("/work/models"))
    models = _held_out(models_dir, args.only)
    predictor = out / "predictor.json"
    rounds = max(1, args.rounds)
    share_s = _budget_s(args.budget) / rounds
    per_round = max(3, args.runs // rounds)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in models}
    for index in range(rounds):  # round-robin: a share of calibration, then every held-out model once
        print(f"--- round {index + 1} of {rounds}", flush=True)
        if not (args.reuse and predictor.exists() and index == 0) and not _calibrate(zoo, share_s, out, predictor,
                                                                                      args.backend):
            return 2
        for name, path, extra in models:
            run = _profile(path, extra, out / f"held-{name}-r{index}.json", per_round, args.reuse, backend=args.backend)
            if run is not None:
                runs[name].append(run)
    calibrated = _compare_calibration(zoo, out, args) if args.compare else None
    results: dict[str, Any] = {}
    for name, path, extra in models:
        est_path = out / f"held-{name}-est.json"
        est_path.unlink(missing_ok=True)  # estimate -o merges into an existing run
        extra_t = ["-t", str(calibrated)] if calibrated is not None else []
        done = _layerscope("estimate", str(path), *extra, *extra_t, "--predictor", str(predictor), "--top", "0",
                           "-o", str(est_path))
        if not runs[name] or done.returncode != 0:
            results[name] = {"error": (done.stderr or "profile failed").strip().splitlines()[-1:]}
            continue
        p50s = [float(r["latency"]["p50_us"]) for r in runs[name]]
        truth, spread = round_spread(p50s)
        middle = min(runs[name], key=lambda r: abs(float(r["latency"]["p50_us"]) - truth))
        measured = dict(middle, latency=dict(middle["latency"], p50_us=truth))
        est = json.loads(est_path.read_text())
        low, high = est["summary"]["est_low_us"], est["summary"]["est_high_us"]
        row = {"measured_us": truth, "round_p50_us": p50s, "noise": spread,
               "roofline": score(measured, measured, "roofline"), "pred-alone": alone(measured, est),
               "predictor": score(measured, est, "predictor"), "interval_us": [low, high],
               "in_interval": low <= truth <= high, "est_source": est["summary"].get("est_source"),
               "context_applied": bool((est["predictor"].get("context") or {}).get("applied"))}
        if calibrated is not None:
            row["calibrate"] = score(measured, est, "calibrate")
        results[name] = row
    methods = [m for m in METHODS if m != "calibrate" or calibrated is not None]
    summary = render(results, methods)
    summary["backend"] = args.backend
    summary["loadavg_start"], summary["loadavg_end"] = list(load_start), list(os.getloadavg())
    print(f"backend {args.backend}; load average (1, 5, 15 min) at the start {load_start}, at the end "
          f"{summary['loadavg_end']} on {os.cpu_count()} CPUs")
    context = json.loads(predictor.read_text()).get("context", {})
    summary["context"] = {k: context.get(k) for k in ("applied", "why", "factor", "per_kernel_us", "models",
                                                      "support")}
    inside = [name for name, r in results.items() if r.get("context_applied")]
    summary["context"]["applied_to"] = inside
    print(f"in-model context: {'transfers' if context.get('applied') else 'does NOT transfer'}: {context.get('why')}; "
          f"applied to {len(inside)} of {len(results)} held-out model(s) (those inside the calibration models' "
          f"range {context.get('support')})")
    (out / "predictor-bench.json").write_text(json.dumps({"models": results, "summary": summary}, indent=1))
    ok = [r for r in results.values() if "roofline" in r]
    if not ok:
        return 2
    goal = (summary["predictor"]["within_10"] >= 0.9 and (summary["predictor"]["median_abs_error"] or 1) <= 0.05
            and summary["interval_holds"] >= 0.9)
    print(f"goal (>= 90% within ±10%, median |error| <= 5%, interval holds >= 90%): {'PASS' if goal else 'FAIL'}")
    return 0 if goal else 1


def _compare_calibration(zoo: Sequence[str], out: Path, args: argparse.Namespace) -> Path | None:
    """Today's per-op calibration on the zoo's profile runs (``--compare``): the calibrated profile's path."""
    zoo_runs = [out / f"zoo-{m}.json" for m in zoo]
    for model, run in zip(zoo, zoo_runs, strict=True):
        _profile(ZOO / f"light_{model}.onnx", [], run, max(5, args.runs // 3), args.reuse)
    calibrated = out / "host-cal.toml"
    done = _layerscope("calibrate", *[str(r) for r in zoo_runs if r.exists()], "-o", str(calibrated))
    if done.returncode != 0:
        print(done.stderr)
        return None
    return calibrated


def render(results: Mapping[str, Any], methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """Print the side-by-side table (each model's measured P50, the spread of its round P50s, each method's error,
    Spearman and top-10 overlap, whether the interval holds the truth) and the per-method summary; return it."""
    print(f"\n{'model':22} {'meas ms':>8} {'spread':>6} | " + " | ".join(f"{m:^21}" for m in methods) + " | interval")
    print(f"{'':22} {'':>8} {'':>6} | " + " | ".join(f"{'err':>7} {'rho':>6} {'top10':>6}" for _ in methods))
    for name, row in results.items():
        if "roofline" not in row:
            print(f"{name:22} failed: {row.get('error')}")
            continue
        cells = []
        for m in methods:
            s = row[m]
            rho = "-" if s["spearman"] is None else f"{s['spearman']:.2f}"
            top10 = "-" if s["top10"] is None else f"{s['top10']:.1f}"
            cells.append(f"{100 * s['error']:+6.1f}% {rho:>6} {top10:>6}")
        noise = "-" if row["noise"] is None else f"{100 * row['noise']:.1f}%"
        held = {True: "holds", False: "misses"}.get(row.get("in_interval"), "-")
        print(f"{name:22} {row['measured_us'] / 1e3:8.2f} {noise:>6} | " + " | ".join(cells) + f" | {held}")
    ok = [r for r in results.values() if "roofline" in r]
    summary: dict[str, Any] = {}
    for m in methods:
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
    summary["interval_holds"] = sum(bool(r.get("in_interval")) for r in ok) / max(1, len(ok))
    print(f"interval holds the measured P50 on {100 * summary['interval_holds']:.0f}% of {len(ok)} models")
    noises = [r["noise"] for r in ok if r["noise"] is not None]
    if noises:
        summary["noise_median"] = statistics.median(noises)
        summary["noise_max"] = max(noises)
        print(f"spread ((max - min) / median of a model's round P50s): median {100 * statistics.median(noises):.1f}%, "
              f"max {100 * max(noises):.1f}%")
    return summary


if __name__ == "__main__":
    sys.exit(main())
