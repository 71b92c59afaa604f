"""Which in-model context rule holds on models the predictor never saw, offline (issue #39): no timing.

Reads what ``benchmarks/predictor.py`` left in OUT (``--out``; ``OUT/openvino`` with ``--backend openvino``):
``predictor-bench.json`` (each held-out model's measured P50, the median of its round P50s) and the
``held-NAME-est.json`` runs (each kernel's predicted time alone, ``isolated_us``, and the per-call overhead). The
calibration models' rows (whole P50, kernels' predicted sum alone, kernel count) are computed again: each zoo
network's kernels predicted by ``OUT/predictor.json`` with its context taken off, its whole P50 read from the
sample cache (``OUT/cache``; a network whose whole P50 is not cached is left out, never timed).

Each rule turns a held-out model's kernels into a latency; the table gives, per model, the measured P50, its kernel
count and median kernel time alone, and each rule's error; then per rule the share within ±10% and the median
|error|:

- ``alone``: the kernels summed as timed, plus the overhead (no context);
- ``fit-all``: the context fitted anew by this layerscope's :func:`~layerscope.analysis.predictor.fit_context`
  on the calibration rows, applied to every model whatever its size when it passes its leave-one-model-out check
  (the rule before the range check);
- ``fit-range``: the same fit applied only where :meth:`~layerscope.analysis.predictor.Context.applies_to` says
  the model lies inside the calibration models' range (kernel count, median kernel time alone, their sum alone:
  this layerscope's rule);
- ``scale-only``: the factor alone (no per-kernel term) fitted on the calibration rows, applied to every model;
- ``gap-capped``: the fit, its per-kernel term capped at the model's own kernels' median time alone.

Usage: ``PYTHONPATH=src python benchmarks/predictor_context.py --out OUT [--backend openvino] [--zoo a,b]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from layerscope.analysis.predictor import (
    Context,
    Predictor,
    _fit_rows,
    fit_context,
    load_predictor,
    predict_path,
)
from layerscope.estimator import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import TimingConfig, time_models
from layerscope.model import load_model
from layerscope.runtimes import registry
from layerscope.runtimes.base import RuntimeOptions
from layerscope.targets import load_profile

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
RULES = ("alone", "fit-all", "fit-range", "scale-only", "gap-capped")
#: A held-out model's kernels: each one's predicted time alone (µs).
Kernels = Sequence[float]


class _ReadOnlyStore(SampleStore):
    """A sample store that never takes a new sample: a whole model not cached raises instead of being timed."""

    def add(self, key: str, phase: Any, sample_us: float, *, job: Any, runner: Mapping[str, Any]) -> None:
        raise LookupError(f"{job.label}: not in the sample cache (this script never times)")


def calibration_rows(out: Path, predictor: Predictor, zoo: Sequence[str], backend: str,
                     ) -> list[tuple[float, list[float]]]:
    """Each zoo network's (whole P50 from the cache, its kernels' predicted times alone) under ``predictor``
    without its context; networks whose whole P50 is not cached are left out."""
    bare = dataclasses.replace(predictor, context=Context())
    profile = load_profile(predictor.profile)
    runner = registry.get_runtime(backend).open(RuntimeOptions()).kernel_runner()
    timing = TimingConfig(threads=int(predictor.runtime.get("threads", 1) or 1))
    rows = []
    for name in zoo:
        path = ZOO / f"light_{name}.onnx"
        try:
            wholes = time_models([path], None, _ReadOnlyStore(out / "cache" / "kernels"), timing, runner=runner)
        except LookupError as exc:
            print(f"  {name}: {exc}")
            continue
        if not wholes:
            continue
        graph = load_model(path)
        pred = predict_path(bare, graph, estimate_graph(graph, profile, "fp32"))
        rows.append((wholes[0][1], [k.isolated_us for k in pred.kernels]))
    return rows


def held_out(out: Path) -> dict[str, tuple[float, list[float], float]]:
    """Each held-out model's (measured P50, kernels' predicted times alone, overhead) from the benchmark's files."""
    bench = json.loads((out / "predictor-bench.json").read_text())["models"]
    found = {}
    for name, row in bench.items():
        est = out / f"held-{name}-est.json"
        if "measured_us" not in row or not est.exists():
            continue
        section = json.loads(est.read_text())["predictor"]
        found[name] = (float(row["measured_us"]), [float(k["isolated_us"]) for k in section["kernels"]],
                       float(section["overhead_us"]))
    return found


def context_of(rows: Sequence[tuple[float, list[float]]], overhead_us: float) -> Context:
    """The context :func:`fit_context` fits to calibration rows (whole P50, kernels' times alone), as
    ``calibrate --kernels`` fits it."""
    medians = [float(np.median(k)) if k else 0.0 for _, k in rows]
    return fit_context([(m, sum(k), len(k)) for m, k in rows], overhead_us, medians_us=medians)


def rules(rows: Sequence[tuple[float, list[float]]], overhead_us: float) -> dict[str, Callable[[Kernels], float]]:
    """Each rule (:data:`RULES`) as a function of a model's kernels (times alone, µs) to its latency (µs)."""
    fitted = context_of(rows, overhead_us)
    triples = [(m, sum(k), len(k)) for m, k in rows if m > 0 and sum(k) > 0]
    scale, _ = _fit_rows(triples, overhead_us, False) if triples else (1.0, 0.0)

    def within(kernels: Kernels, honour_range: bool) -> float:
        use = fitted.applies_to(kernels)[0] if honour_range else fitted.applied
        return sum(fitted.apply(k) for k in kernels) if use else sum(kernels)

    def capped(kernels: Kernels) -> float:
        if not fitted.applied or not kernels:
            return sum(kernels) + overhead_us
        gap = min(fitted.per_kernel_us, float(np.median(kernels)))
        return sum(fitted.factor * k + gap for k in kernels) + overhead_us

    return {"alone": lambda k: sum(k) + overhead_us,
            "fit-all": lambda k: within(k, False) + overhead_us,
            "fit-range": lambda k: within(k, True) + overhead_us,
            "scale-only": lambda k: scale * sum(k) + overhead_us,
            "gap-capped": capped}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--backend", default=registry.DEFAULT)
    parser.add_argument("--zoo", default="resnet50,densenet121,inception_v1,squeezenet,shufflenet")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    out: Path = args.out if args.backend == registry.DEFAULT else args.out / args.backend
    predictor = load_predictor(out / "predictor.json")
    rows = calibration_rows(out, predictor, [m for m in args.zoo.split(",") if m], args.backend)
    print(f"{'calibration':14} {'meas ms':>8} {'kernels':>7} {'alone ms':>8} {'med k us':>8}")
    for (measured, kernels), name in zip(rows, args.zoo.split(","), strict=False):
        print(f"{name:14} {measured / 1e3:8.2f} {len(kernels):7d} {sum(kernels) / 1e3:8.2f} "
              f"{float(np.median(kernels)):8.2f}")
    fitted = context_of(rows, predictor.overhead_us)
    print(fitted.describe())
    print(f"the predictor file's context: {predictor.context.describe()}")
    by_rule = rules(rows, predictor.overhead_us)
    models = held_out(out)
    print(f"\n{'model':26} {'meas ms':>8} {'kern':>4} {'med us':>7} {'range':>5} | "
          + " ".join(f"{r:>10}" for r in RULES))
    errors: dict[str, list[float]] = {r: [] for r in RULES}
    table: dict[str, Any] = {}
    for name, (measured, kernels, _) in models.items():
        inside, _ = fitted.applies_to(kernels)
        cells = {}
        for rule in RULES:
            cells[rule] = by_rule[rule](kernels) / measured - 1
            errors[rule].append(abs(cells[rule]))
        table[name] = {"measured_us": measured, "kernels": len(kernels), "inside": inside,
                       "worse_than_alone": abs(cells["fit-range"]) > abs(cells["alone"]), **cells}
        median = float(np.median(kernels)) if kernels else 0.0
        print(f"{name:26} {measured / 1e3:8.3f} {len(kernels):4d} {median:7.2f} {'in' if inside else 'out':>5} | "
              + " ".join(f"{100 * cells[r]:+9.1f}%" for r in RULES))
    summary: dict[str, dict[str, Any]] = {}
    for rule in RULES:
        e = errors[rule]
        within, median = sum(x <= 0.10 for x in e) / max(1, len(e)), statistics.median(e) if e else 0.0
        worse = sum(x > a + 1e-12 for x, a in zip(e, errors["alone"], strict=True))
        summary[rule] = {"within_10": within, "median_abs_error": median, "worse_than_alone": worse}
        print(f"{rule:10}: {100 * within:.0f}% within ±10% ({len(e)} models), median |err| {100 * median:.1f}%, "
              f"{worse} model(s) worse than the kernels summed alone")
    if args.json is not None:
        args.json.write_text(json.dumps({"models": table, "summary": summary,
                                         "context": fitted.to_json()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
