"""The NPU estimate against published board latencies: every row of ``benchmarks/data/board_latency.csv``.

For each board (RDK X5, RDK S100, and RDK S100P derived from S100), every published single-thread latency whose
architecture ``layerscope.samples`` builds is estimated three ways:

  datasheet   the profile from the vendor's figures and documented assumptions, uncalibrated
              (``benchmarks/data/profiles/<board>.toml``): the gap a user without calibration faces;
  held out    the datasheet profile calibrated on every *other* architecture family's board latencies
              (``calibrate --board``'s fit, leave-one-family-out), then predicting this family: never fitted to the
              row it predicts; what a calibrated profile promises on a family it has not seen;
  in sample   the fit on all the board's rows, as this source tree fits it now: what ``--write-profiles`` would
              ship; the fit's best account of rows it has seen, so in practice a ceiling on the held-out figures
              (a mechanism whose in-sample share misses a goal cannot reach it held out);
  shipped     the shipped profile (``--target <board>``): the datasheet profile fitted to all the board's rows.

RDK S100P is never fitted: its profile is derived from the shipped S100's by the published differences (BPU Nash-m at
1.5 GHz and 128 TOPS against Nash-e at 1.0 GHz and 80 TOPS; ``layerscope.analysis.board.derive_profile``) and
validated on its own rows.

Printed per board: each model's error, the share within ±15%, the median |error|, k = board / estimate (mean,
coefficient of variation across families), Spearman's rank correlation, and the seeds' k verdict.

Usage (from the repository root, layerscope importable):

    python benchmarks/board_truth.py                     # ~1 min on 2 cores (estimates ~180 models, fits)
    python benchmarks/board_truth.py --board rdk-x5 --json out/board_truth.json
    python benchmarks/board_truth.py --write-profiles    # refit and rewrite the shipped RDK profiles
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from layerscope.analysis.board import (
    BOARD_TOLERANCE,
    BoardEntry,
    board_runs,
    calibrate_board,
    derive_profile,
    k_analysis,
    quantized_outputs,
)
from layerscope.analysis.calibrate import Calibration, RunData, calibrated_profile, profile_toml
from layerscope.samples import SAMPLES, parse_spec
from layerscope.targets import Profile, load_profile
from layerscope.targets.schema import load_profile_file

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "board_latency.csv"
#: The datasheet profiles the shipped RDK X5 and S100 profiles are calibrated from.
DATASHEET = HERE / "data" / "profiles"
PROFILES = HERE.parent / "src" / "layerscope" / "targets" / "profiles"
#: Boards calibrated from their own rows, and the board derived from one of them.
FITTED = ("rdk-x5", "rdk-s100")
DERIVED = {"rdk-s100p": "rdk-s100"}


@dataclass(frozen=True)
class Row:
    board: str
    model: str
    family: str
    sample: str
    latency_ms: float
    source: str
    #: the dtype the zoo compiled the model at, when not the profile's default (empty)
    dtype: str = ""
    #: the zoo ships the model without its output Dequantize nodes (the ``outputs`` column: ``quantized``)
    quantized_outputs: bool = False


def read_rows(path: Path) -> list[Row]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [Row(r["board"], r["model"], r["family"], r["sample"].strip(), float(r["latency_ms"]), r["source"],
                    (r.get("dtype") or "").strip(),
                    quantized_outputs((r.get("outputs") or "").strip(), f"{path}:{line}"))
                for line, r in enumerate(csv.DictReader(handle), start=2)]


def buildable(row: Row) -> bool:
    """Whether the row names a sample architecture that layerscope builds."""
    if not row.sample:
        return False
    try:
        name, _ = parse_spec(row.sample)
    except (KeyError, TypeError, ValueError):
        return False
    return name in SAMPLES


def entries(rows: Sequence[Row]) -> list[BoardEntry]:
    return [BoardEntry(f"sample:{r.sample}", r.latency_ms * 1000.0, r.family, r.board, r.source, r.dtype,
                       r.quantized_outputs) for r in rows]


def summary(runs: Sequence[RunData], predicted_us: Sequence[float], against: str) -> dict[str, float | None]:
    """Share within tolerance and median |error| of ``predicted_us`` against the runs' board latencies, and k's
    mean and CV across families and Spearman (:func:`k_analysis`)."""
    values = [abs(p / r.latency_us - 1) for r, p in zip(runs, predicted_us, strict=True)]
    k = k_analysis(runs, estimates_us=predicted_us, against=against)
    return {"models": len(values), "within": sum(v <= BOARD_TOLERANCE for v in values) / len(values),
            "median_abs": statistics.median(values), "k_mean": k.k_mean, "k_cv": k.family_cv, "spearman": k.spearman}


def _fmt(s: dict[str, float | None]) -> str:
    rho = s["spearman"]
    return (f"{s['within']:.0%} within ±{BOARD_TOLERANCE:.0%}, median |error| {s['median_abs']:.1%}, "
            f"k mean {s['k_mean']:.2f} CV {s['k_cv']:.1%} across families, Spearman "
            f"{'-' if rho is None else f'{rho:.2f}'} ({s['models']:.0f} models)")


def evaluate(board: str, rows: Sequence[Row], *, write: bool) -> dict[str, object]:
    """One fitted board's rows: the datasheet profile's errors, the held-out (leave-one-family-out) errors of the
    fit on it, and the shipped profile's errors; with ``write``, the shipped profile is rewritten first as the fit
    on all the rows."""
    datasheet = load_profile_file(DATASHEET / f"{board}.toml")
    runs = board_runs(entries(rows), datasheet)
    cal = calibrate_board(runs, datasheet)
    by_model = {e.model: e for e in cal.leave_one_out}
    if write:
        (PROFILES / f"{board}.toml").write_text(calibrated_text(datasheet, cal), encoding="utf-8")
    shipped = board_runs(entries(rows), load_profile(board))
    table = []
    print(f"\n== {board}: {len(rows)} published rows, {len({r.family for r in rows})} families ==")
    print(f"{'model':<24}{'family':<20}{'board':>9}{'datasheet':>10}{'err':>8}{'held out':>10}{'err':>8}"
          f"{'shipped':>9}{'err':>8}")
    for row, run, mine in zip(rows, runs, shipped, strict=True):
        held = by_model[run.model]
        print(f"{row.model:<24}{row.family:<20}{row.latency_ms:>8.2f} {run.base_estimate_us / 1e3:>9.2f}"
              f"{run.base_estimate_us / run.latency_us - 1:>+8.1%}{held.predicted_us / 1e3:>10.2f}{held.error:>+8.1%}"
              f"{mine.base_estimate_us / 1e3:>9.2f}{mine.base_estimate_us / mine.latency_us - 1:>+8.1%}")
        table.append({"model": row.model, "family": row.family, "board_ms": row.latency_ms,
                      "datasheet_ms": run.base_estimate_us / 1e3, "held_out_ms": held.predicted_us / 1e3,
                      "shipped_ms": mine.base_estimate_us / 1e3, "source": row.source})
    fitted = {e.model: e.predicted_us for e in cal.in_sample}
    result = {"datasheet": summary(runs, [r.base_estimate_us for r in runs], "the datasheet profile"),
              "held_out": summary(runs, [by_model[r.model].predicted_us for r in runs], "held-out predictions"),
              "in_sample": summary(runs, [fitted[r.model] for r in runs], "the fit on all rows"),
              "shipped": summary(shipped, [r.base_estimate_us for r in shipped], "the shipped profile")}
    for label, s in result.items():
        print(f"{label:>10}: {_fmt(s)}")
    verdict = k_analysis(shipped).verdict
    print(f"  reconcile (k of the shipped profile): {verdict}")
    return {"rows": table, **result, "verdict": verdict,
            "fit": {**cal.params.compute_scale, "memory_scale": cal.params.memory_scale}}


def calibrated_text(datasheet: Profile, cal: Calibration) -> str:
    """The shipped profile: ``datasheet`` fitted to all its board's rows, every fitted field's source saying so."""
    held = [abs(e.error) for e in cal.leave_one_out]
    within = sum(v <= BOARD_TOLERANCE for v in held)
    data = DATA.relative_to(HERE.parent).as_posix()
    note = (f"calibrated: fitted to {len(cal.models)} published single-thread board latencies ({data}) by "
            f"benchmarks/board_truth.py --write-profiles; leave-one-family-out {within} of {len(held)} within "
            f"±{BOARD_TOLERANCE:.0%}")
    mapping = calibrated_profile(datasheet, cal.params, name=datasheet.name, models=cal.models, note=note)
    mapping["description"] = datasheet.description + " -- calibrated on published board latencies"
    header = (f"{datasheet.description}\nCalibrated: the datasheet profile "
              f"(benchmarks/data/profiles/{datasheet.name}.toml) fitted to {len(cal.models)} published board "
              f"latencies ({data}) by benchmarks/board_truth.py --write-profiles.\nEvery number has an entry in "
              "[sources].")
    return profile_toml(mapping, header)


def evaluate_derived(board: str, parent: str, rows: Sequence[Row], *, write: bool) -> dict[str, object]:
    """The derived board's rows on the profile derived from ``parent``'s shipped one: validation only, never
    fitted; with ``write``, that profile is the shipped one."""
    text = derive_profile(load_profile(parent), board)
    if write:
        (PROFILES / f"{board}.toml").write_text(text, encoding="utf-8")
    profile = load_profile(board) if write else load_profile_file(_scratch(board, text))
    runs = board_runs(entries(rows), profile)
    print(f"\n== {board}: derived from {parent} (not fitted), {len(rows)} published rows ==")
    for row, run in zip(rows, runs, strict=True):
        print(f"{row.model:<24}{row.family:<20}{row.latency_ms:>8.2f} {run.base_estimate_us / 1e3:>9.2f}"
              f"{run.base_estimate_us / run.latency_us - 1:>+8.1%}")
    s = summary(runs, [r.base_estimate_us for r in runs], "the derived profile's estimate")
    print(f"   derived: {_fmt(s)}")
    return {"derived": s, "parent": parent}


def _scratch(board: str, text: str) -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="board_truth-"))
    path = folder / f"{board}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", action="append", default=None, help="only this board (repeatable)")
    parser.add_argument("--data", type=Path, default=DATA, help="the published rows (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument("--write-profiles", action="store_true",
                        help="rewrite the shipped profiles: each fitted board's fit on all its rows, then the derived")
    args = parser.parse_args(argv)
    rows = read_rows(args.data)
    boards = args.board or [*FITTED, *DERIVED]
    results: dict[str, object] = {}
    for board in boards:
        mine = [r for r in rows if r.board == board]
        built = [r for r in mine if buildable(r)]
        if len(mine) > len(built):
            skipped = sorted({r.model for r in mine if not buildable(r)})
            print(f"{board}: {len(mine) - len(built)} row(s) without a sample architecture: {', '.join(skipped)}")
        if not built:
            continue
        if board in DERIVED:
            results[board] = evaluate_derived(board, DERIVED[board], built, write=args.write_profiles)
        else:
            results[board] = evaluate(board, built, write=args.write_profiles)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=lambda o: None if isinstance(o, float) and
                                        math.isnan(o) else str(o)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
