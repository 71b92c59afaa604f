"""What ``layerscope calibrate --kernels [MODEL...] -o P.json`` prints: the kernels timed, the adaptive passes, the
predictor's cross-validated error per family, the in-model context and the fusion rules learnt
(:mod:`layerscope.workflows.calibrate` samples, times and fits; ``layerscope estimate MODEL --predictor P.json``
uses the predictor)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from rich import box
from rich.table import Table
from rich.text import Text

from layerscope.analysis.predictor import FamilyFit
from layerscope.cli.console import SafeConsole
from layerscope.workflows.calibrate import KernelFit


def print_kernel_fit(console: SafeConsole, fit: KernelFit, written: Path) -> None:
    """The kernel predictor's fit, as ``calibrate --kernels`` prints it once the predictor is written."""
    console.print(f"timed {fit.timed} kernel(s) ({fit.cached} from the cache; {fit.model_kernels} of the calibration "
                  f"models); per-call overhead {fit.overhead_us:.1f} us")
    for index, round_ in enumerate(fit.passes, start=1):
        worst = sorted(round_.planned_from.items(), key=lambda kv: -kv[1])[:3]
        console.print(f"adaptive pass {index}: " + ", ".join(f"{f} {n}" for f, n in sorted(round_.timed.items()))
                      + " (worst cross-validated: " + ", ".join(f"{f} {100 * e:.0f}%" for f, e in worst) + ")",
                      markup=False, highlight=False)
    console.print(_fit_table(fit.predictor.families))
    console.print(fit.predictor.context.describe(), markup=False, highlight=False)
    rules = fit.rules
    if rules is not None:
        fused = sorted(((k, v) for k, v in rules.pairs.items() if rules.fuses("", *k)), key=lambda kv: -kv[1][1])
        console.print(f"fusion rules from {rules.models} model(s): " + ", ".join(
            f"{a}+{b} ({n}/{m})" for (a, b), (n, m) in fused[:8]) + (" ..." if len(fused) > 8 else ""),
            markup=False, highlight=False)
    console.print(f"predictor: {written}")


def _fit_table(fits: Mapping[str, FamilyFit]) -> Table:
    """Per family: kernels, folds, cross-validated median error and share within ±10%, the interval factors."""
    table = Table(title="Kernel predictor: cross-validated error per family", box=box.SIMPLE_HEAD,
                  title_justify="left", pad_edge=False)
    for header in ("family", "kernels", "folds", "median |err|", "within ±10%", "interval"):
        table.add_column(header, justify="left" if header == "family" else "right", no_wrap=True)
    for name, fit in sorted(fits.items()):
        table.add_row(Text(name), str(fit.samples), str(fit.cv_folds), f"{100 * fit.cv_median_abs_error:.1f}%",
                      f"{100 * fit.cv_within_10:.0f}%",
                      f"x{math.exp(fit.residual_low):.2f}..x{math.exp(fit.residual_high):.2f}")
    return table
