"""What the predictor's issue-#39 features buy, held out model by model, on kernels already timed (no timing).

Reads the kernels a ``calibrate --kernels`` run timed into its sample cache (``--cache``, e.g. the one
``benchmarks/predictor.py`` leaves in ``OUT/cache``): every distinct kernel of the calibration models (``--zoo``,
model-zoo names, as that run used them) and every generated kernel whose label the cache holds. Then, for each
calibration model in turn, fits the per-family models on every other kernel (the generated ones and the other
models' kernels) and predicts the held-out model's kernels alone, two ways:

- ``v4``: the features and families of this layerscope (:data:`~layerscope.analysis.predictor.FEATURES`: the
  working set against the host's caches, large kernels, the activation class; ``conv_dw`` / ``conv_large``
  sub-family fits where they have enough kernels);
- ``v3``: the same timings with the version-3 feature set (the first 17 features) and no sub-families.

Prints per held-out model: its kernel count, the median |predicted / measured - 1| over its kernels, and the error
of their sum (the model's kernels summed as timed: what the predictor adds up before any in-model context).
Usage: ``PYTHONPATH=src python benchmarks/predictor_features.py --cache OUT/cache [--zoo a,b] [--backend openvino]``
(``--backend``: the runtime that timed them, as the calibrate run was told).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from layerscope.analysis.predictor import (
    FEATURES,
    FLOOR_US,
    MIN_FAMILY_SAMPLES,
    SUBFAMILIES,
    KernelSample,
    _regressor,
    samples_from_timings,
)
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import FAMILIES, KernelModel, TimingConfig, family_configs, model_kernels, time_kernels
from layerscope.measure.session import SessionConfig
from layerscope.runtimes import registry
from layerscope.runtimes.base import RuntimeOptions
from layerscope.targets import load_profile

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
V3_COLUMNS = 17


def cached_labels(store_dir: Path) -> set[str]:
    """The labels of the kernels the sample cache at ``store_dir`` holds."""
    labels = set()
    for path in store_dir.rglob("*"):
        if path.is_file():
            try:
                labels.add(str(json.loads(path.read_text()).get("label", "")))
            except (OSError, ValueError):
                continue
    return labels


def timed_samples(cache: Path, zoo: Sequence[str], backend: str = registry.DEFAULT) -> list[KernelSample]:
    """The cached kernels of the ``zoo`` models (grouped as ``backend`` groups them) and the cached generated
    kernels, as samples (no timing)."""
    runner = registry.get_runtime(backend).open(RuntimeOptions()).kernel_runner()
    store_dir = cache / "kernels"
    labels = cached_labels(store_dir)
    kernels: list[KernelModel] = []
    for name in zoo:
        _, found, _ = model_kernels(ZOO / f"light_{name}.onnx", None, SessionConfig(threads=1), runner)
        kernels += [k for k in found if k.label in labels]
    for family in FAMILIES:
        kernels += [k for k in (c.build() for c in family_configs(family)) if k.label in labels]
    timings, _, _ = time_kernels(kernels, SampleStore(store_dir), TimingConfig(), budget_s=0.0, runner=runner)
    print(f"{len(timings)} cached kernels of {len(kernels)} with a cached label", flush=True)
    return samples_from_timings(timings, load_profile("host"))


def _group(sample: KernelSample, subfamilies: bool) -> str:
    return sample.fit_family if subfamilies else sample.family


def predict_held_out(train: Sequence[KernelSample], test: Sequence[KernelSample], columns: int,
                     subfamilies: bool) -> np.ndarray:
    """``test``'s predicted times (µs) from per-family models fitted on ``train`` (``columns`` first features; a
    sub-family's own fit where ``subfamilies`` and it has enough samples, else its family's, else one model of
    all with the family one-hot)."""

    def design(rows: Sequence[KernelSample], onehot: bool) -> np.ndarray:
        x = np.asarray([r.features[:columns] for r in rows], dtype=np.float64)
        if onehot:
            x = np.hstack([x, [[float(r.family == f) for f in FAMILIES] for r in rows]])
        return x

    def target(rows: Sequence[KernelSample]) -> np.ndarray:
        ratios = [(r.measured_us + FLOOR_US) / (r.roofline_us + FLOOR_US) for r in rows]
        return np.asarray(np.log(ratios), dtype=np.float64)

    models = {"all": _regressor(0).fit(design(train, True), target(train))}
    for name in (*FAMILIES, *(SUBFAMILIES if subfamilies else ())):
        rows = [s for s in train if name in (s.family, _group(s, subfamilies))]
        if len(rows) >= MIN_FAMILY_SAMPLES:
            models[name] = _regressor(0).fit(design(rows, False), target(rows))
    out = []
    for sample in test:
        name = next(n for n in (_group(sample, subfamilies), sample.family, "all") if n in models)
        x = design([sample], name == "all")
        out.append(max(0.0, (sample.roofline_us + FLOOR_US) * float(np.exp(models[name].predict(x)[0])) - FLOOR_US))
    return np.asarray(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--zoo", default="resnet50,densenet121,inception_v1,squeezenet,shufflenet")
    parser.add_argument("--backend", default=registry.DEFAULT)
    args = parser.parse_args(argv)
    zoo = [m for m in args.zoo.split(",") if m]
    samples = timed_samples(args.cache, zoo, args.backend)
    assert len(FEATURES) > V3_COLUMNS
    print(f"\n{'held out':14} {'kernels':>7} | {'v3 median':>9} {'v3 sum':>8} | {'v4 median':>9} {'v4 sum':>8}")
    table: dict[str, list[float]] = {"v3": [], "v4": []}
    for name in zoo:
        source = str(ZOO / f"light_{name}.onnx")
        test = [s for s in samples if s.source == source]
        train = [s for s in samples if s.source != source]
        if not test:
            continue
        measured = np.asarray([s.measured_us for s in test])
        cells = []
        for variant, columns, sub in (("v3", V3_COLUMNS, False), ("v4", len(FEATURES), True)):
            predicted = predict_held_out(train, test, columns, sub)
            median = float(np.median(np.abs(predicted / measured - 1)))
            total = float(predicted.sum() / measured.sum() - 1)
            table[variant].append(abs(total))
            cells.append(f"{100 * median:8.1f}% {100 * total:+7.1f}%")
        print(f"{name:14} {len(test):7d} | " + " | ".join(cells), flush=True)
    for variant, sums in table.items():
        if sums:
            print(f"{variant}: median |sum error| {100 * statistics.median(sums):.1f}% ({len(sums)} held out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
