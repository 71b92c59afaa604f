"""Calibration from whole-model device latencies: the numbers a board owner can measure.

A board's tool (``hrt_model_exec perf`` on D-Robotics RDK boards) gives one latency per model; per layer there is
only the static estimate. :func:`read_board_table` reads a table of models and their board latencies,
:func:`board_runs` estimates each model on a base profile and pairs the estimate with its latency, and
:func:`calibrate_board` fits the profile to the end-to-end latencies (:func:`fit_board`: a compute and an
overhead factor per unit, the DDR efficiency, the per-inference task overhead and, where some models were compiled
at int16, the int16 compute rate; no op-type factors, as one number per model cannot tell op types apart; a prior
keeps what the models cannot tell apart near the base profile's value), with the leave-one-family-out error: each
architecture family is predicted by a fit that never saw it. :func:`k_analysis` is the forum's k procedure over such
models; :func:`derive_profile` makes a sibling chip's profile from a calibrated one by its published differences.

The table (CSV, one header row; extra columns are ignored):

- ``model``: an ONNX file (relative paths from the table's folder) or ``sample:<name>[:key=value;...]``, a
  sample architecture (:mod:`layerscope.samples`);
- ``latency_ms``: the board's single-thread latency, or ``perf``: a file ``hrt_model_exec perf`` wrote (its
  console summary, or the ``profiler.log``/``profiler.csv`` of ``--profile_path``) to read it from;
- ``family`` (optional): the architecture family a leave-one-family-out fold holds out together (empty: the
  model is its own family);
- ``board`` (optional): rows of another board than the base profile are left out, and counted;
- ``dtype`` (optional): the dtype the model was compiled at, when not the profile's default (``int16``: a model
  the vendor's toolchain quantized to int16 throughout); empty: the profile's ``default_dtype``;
- ``outputs`` (optional): ``quantized`` for a model deployed without the Dequantize nodes at its outputs (hb_mapper's
  ``remove_node_type: "Dequantize"``), estimated with no float32 hand-over (``estimate --quantized-outputs``);
  empty: the runtime hands the outputs over as float32.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from layerscope.analysis.calibrate import (
    FALLBACK_KIND,
    Calibration,
    Params,
    RunData,
    base_overheads,
    board_run_data,
    errors,
    leave_one_out,
    predict_us,
    require_profile,
)
from layerscope.costs.types import UnitKind
from layerscope.errors import InputError
from layerscope.fileio import read_text_limited
from layerscope.importers._common import US_PER_MS
from layerscope.model.types import Graph
from layerscope.runfile.derived import ScaleFactor
from layerscope.targets import Profile
from layerscope.targets.profile import ComputeUnit

SAMPLE_PREFIX = "sample:"
#: The |error| a board estimate counts as within tolerance: a user sizing a product around a board's latency.
BOARD_TOLERANCE = 0.15
#: A board table larger than this is refused before it is read.
MAX_TABLE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class BoardEntry:
    """One row of a board table: a model, its board latency, its family and where the latency came from."""

    model: str
    latency_us: float
    family: str = ""
    board: str = ""
    source: str = ""
    #: the dtype the model runs at on the board; empty: the profile's default
    dtype: str = ""
    #: the model runs without the Dequantize nodes at its outputs: no float32 hand-over
    #: (:func:`layerscope.estimator.estimate_graph`'s ``quantized_outputs``)
    quantized_outputs: bool = False

    @property
    def label(self) -> str:
        """The model as a person reads it: a sample spec without its prefix, else the file's name."""
        if self.model.startswith(SAMPLE_PREFIX):
            return self.model[len(SAMPLE_PREFIX):]
        return Path(self.model).name


@dataclass(frozen=True)
class BoardTable:
    """The rows of a board table for one board, and how many rows of other boards were left out."""

    entries: tuple[BoardEntry, ...]
    other_boards: int = 0


def read_board_table(path: Path, board: str | None = None,
                     perf_reader: Callable[[Path], float] | None = None) -> BoardTable:
    """The rows of the board table at ``path`` (see the module docstring) for ``board`` (all rows when None).

    ``perf_reader`` turns a ``perf`` cell's file into a latency in µs (default :func:`perf_latency_us`).
    ``InputError`` naming the file and row for a missing column, an unreadable latency or an empty table.
    """
    text = read_text_limited(path, MAX_TABLE_BYTES, what="a board table may have")
    reader = csv.DictReader(io.StringIO(text))
    columns = set(reader.fieldnames or ())
    if "model" not in columns or not columns & {"latency_ms", "perf"}:
        raise InputError(f"{path}: a board table needs a 'model' column and a 'latency_ms' or 'perf' column "
                         f"(found: {', '.join(sorted(columns)) or 'none'})")
    read_perf = perf_reader or perf_latency_us
    entries: list[BoardEntry] = []
    others = 0
    for line, row in enumerate(reader, start=2):
        where = f"{path}:{line}"
        model = _cell(row, "model")
        if not model:
            raise InputError(f"{where}: empty 'model' cell")
        row_board = _cell(row, "board")
        if board is not None and row_board and row_board != board:
            others += 1
            continue
        if not model.startswith(SAMPLE_PREFIX) and not Path(model).is_absolute():
            model = str(path.parent / model)
        entries.append(BoardEntry(model, _latency_us(row, path.parent, where, read_perf), _cell(row, "family"),
                                  row_board, _cell(row, "source"), _cell(row, "dtype"),
                                  quantized_outputs(_cell(row, "outputs"), where)))
    if not entries:
        raise InputError(f"{path}: no rows{f' for board {board!r}' if board else ''}")
    return BoardTable(tuple(entries), others)


#: The ``outputs`` cells of a board table: how the runtime hands the model's outputs over.
OUTPUTS_CELLS = {"": False, "float32": False, "quantized": True}


def quantized_outputs(cell: str, where: str) -> bool:
    """Whether a board table's ``outputs`` cell says the model runs with its outputs handed over quantized
    (``quantized``; empty or ``float32``: as float32). ``InputError`` naming ``where`` for any other text."""
    if cell.lower() not in OUTPUTS_CELLS:
        raise InputError(f"{where}: outputs {cell!r} is not one of 'quantized', 'float32' or empty")
    return OUTPUTS_CELLS[cell.lower()]


def _latency_us(row: dict[str, str | None], folder: Path, where: str, read_perf: Callable[[Path], float]) -> float:
    text = _cell(row, "latency_ms")
    if text:
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{where}: latency_ms {text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"{where}: latency_ms must be a positive number of milliseconds, got {text!r}")
        return value * US_PER_MS
    perf = _cell(row, "perf")
    if not perf:
        raise InputError(f"{where}: neither 'latency_ms' nor 'perf' is given")
    perf_path = Path(perf) if Path(perf).is_absolute() else folder / perf
    return read_perf(perf_path)


def _cell(row: dict[str, str | None], column: str) -> str:
    """A table cell's text, stripped; empty when the column or the cell is missing."""
    return (row.get(column) or "").strip()


def perf_latency_us(path: Path) -> float:
    """The end-to-end latency (µs) in a file ``hrt_model_exec perf`` wrote: its console summary ("Average latency
    is"), or the ``profiler.log`` / ``profiler.csv`` of ``--profile_path`` (read as ``layerscope import`` reads
    them). ``InputError`` when the file holds no end-to-end latency."""
    from layerscope.importers.detect import parse_file

    result = parse_file(path)
    latency = result.totals.latency
    mean_us = latency.mean_us if latency is not None else None
    if not mean_us or mean_us <= 0:
        raise InputError(f"{path}: no end-to-end latency in this {result.format} file")
    return mean_us


def model_path(entry: BoardEntry) -> Path:
    """The ONNX file of ``entry``: its path, or the sample it names, built into the sample cache once."""
    if not entry.model.startswith(SAMPLE_PREFIX):
        return Path(entry.model)
    from layerscope.samples import parse_spec, sample_path

    spec = entry.model[len(SAMPLE_PREFIX):]
    try:
        name, params = parse_spec(spec)
        return sample_path(name, cache_dir=None, **params)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{entry.model}: {exc.args[0] if exc.args else exc}") from None


def board_runs(entries: Sequence[BoardEntry], profile: Profile) -> list[RunData]:
    """Each entry's model estimated on ``profile`` (at the entry's dtype, else the profile's default; with no float32
    output hand-over where the entry's outputs are handed over quantized), paired with
    its board latency; each layer's weight-load and activation-matrix-product µs set apart for the fit, the
    layout Transposes the profile prices apart marked (:attr:`LayerTerm.layout`), and an accelerator layer's dtype
    marked where the entry's is not the profile's default (:attr:`LayerTerm.dtype`). ``InputError`` for a dtype
    the profile does not list."""
    from layerscope.estimator import estimate_graph
    from layerscope.estimator.roofline import activation_matmul_us, layout_transposes_priced
    from layerscope.model import load_model
    from layerscope.run import estimate_run

    result: list[RunData] = []
    for entry in entries:
        dtype = entry.dtype or None
        if dtype is not None and dtype not in profile.dtypes:
            raise InputError(f"{entry.label}: dtype {dtype!r} is not one of profile {profile.name!r}'s "
                             f"({', '.join(profile.dtypes)})")
        graph = load_model(model_path(entry))
        run = estimate_run(graph, estimate_graph(graph, profile, dtype, quantized_outputs=entry.quantized_outputs),
                           profile)
        data = board_run_data(run, entry.latency_us, entry.label, entry.family)
        weights = weight_load_us(graph, profile, dtype)
        elements = {node.id: us for node in graph.layers if (us := activation_matmul_us(node, graph, profile))}
        layout = layout_transposes_priced(graph, profile)
        wide = dtype if dtype is not None and dtype != profile.default_dtype else ""
        layers = tuple(t if t.fallback else replace(t, weight_us=min(weights.get(t.layer_id, 0.0), t.memory_us),
                                                    element_us=elements.get(t.layer_id, 0.0),
                                                    layout=t.layer_id in layout, dtype=wide)
                       for t in data.layers)
        result.append(replace(data, layers=layers))
    return result


def weight_load_us(graph: Graph, profile: Profile, dtype: str | None = None) -> dict[str, float]:
    """µs each layer of ``graph`` spends loading its weights (its constant inputs at the deployed ``dtype``, the
    profile's by default, at most the profile's ``weight_dtype``: :func:`~layerscope.estimator.roofline.
    weight_float_bytes`) at the profile's weight-load bandwidth, as the roofline counts them; layers without weights
    are left out."""
    from layerscope.costs import constant_elements_read
    from layerscope.estimator.roofline import element_bytes, weight_float_bytes

    float_bytes = weight_float_bytes(profile, dtype or profile.default_dtype)
    bandwidth = profile.attainable_weight_ddr_bytes_per_s
    found: dict[str, float] = {}
    for node in graph.layers:
        loaded = sum(constant_elements_read(node, graph, t) * element_bytes(t, float_bytes)
                     for t in (graph.tensors.get(name) for name in node.inputs if name in graph.constants) if t)
        if loaded:
            found[node.id] = loaded / bandwidth * 1e6
    return found


#: Prior standard deviation, in natural-log units, of every fitted factor around the base profile's value (1):
#: a factor of e**2 (7.4x) is one standard deviation. Whole-model latencies cannot tell apart the groups a set of
#: models moves together; the prior keeps such a group near the base value instead of letting it run off. Leave-
#: one-family-out on the RDK X5 (124) and S100 (40) rows of benchmarks/data/board_latency.csv, within ±15% and median
#: |error|: 0.5 -> X5 96, 8.5%; S100 22, 14.4%; 1 -> 103, 7.1%; 36, 6.1%; 1.5 -> 105, 7.5%; 37, 5.3%; 2 -> 105,
#: 7.9%; 37, 5.7%; 3 -> 102, 7.8%; 36, 6.3%; 4 -> 99, 7.8%; 36, 6.4%. 1.5 and 2 tie on the counts; 2 keeps the
#: S100P profile derived from the S100 fit closer to its board (36 of 40, median 4.8%, against 5.3% at 1.5).
PRIOR_SD = 2.0
#: The fitted factors stay within [1 / FACTOR_BOUND, FACTOR_BOUND] of the base profile's.
FACTOR_BOUND = 50.0


@dataclass(frozen=True)
class _Columns:
    """Every run's layers as flat arrays by group (the fit's design): compute µs, the layout Transposes' compute µs
    (:attr:`LayerTerm.layout`: 0 in ``compute_us`` for them, their time here; 0 elsewhere), feature-map DDR µs (the
    layer's memory time less its weight loads), weight-load µs and the index of the run each layer belongs to; per
    run, its layer count by group (for the overheads), its task µs and its activation-matrix-product µs
    (:attr:`LayerTerm.element_us`)."""

    compute_us: dict[str, np.ndarray]
    layout_us: dict[str, np.ndarray]
    memory_us: dict[str, np.ndarray]
    weight_us: dict[str, np.ndarray]
    run_index: dict[str, np.ndarray]
    layer_count: dict[str, np.ndarray]
    task_us: np.ndarray
    element_us: np.ndarray
    #: per group, each layer's index in ``dtypes`` (-1: the default dtype); the non-default dtypes, sorted
    dtype_index: dict[str, np.ndarray]
    dtypes: tuple[str, ...]

    @classmethod
    def of(cls, runs: Sequence[RunData]) -> _Columns:
        dtypes = tuple(sorted({t.dtype for r in runs for t in r.layers if t.dtype and not t.fallback}))
        position = {d: k for k, d in enumerate(dtypes)}
        rows: dict[str, list[tuple[float, float, float, float, int, int]]] = {}
        for i, run in enumerate(runs):
            for term in run.layers:
                rows.setdefault(fit_key(term.group), []).append(
                    (0.0 if term.layout else term.compute_us, term.compute_us if term.layout else 0.0,
                     term.memory_us - term.weight_us, term.weight_us, i,
                     -1 if term.fallback else position.get(term.dtype, -1)))
        table = {g: np.asarray(v, dtype=float).reshape(-1, 6) for g, v in rows.items()}
        index = {g: t[:, 4].astype(np.intp) for g, t in table.items()}
        return cls({g: t[:, 0] for g, t in table.items()}, {g: t[:, 1] for g, t in table.items()},
                   {g: t[:, 2] for g, t in table.items()}, {g: t[:, 3] for g, t in table.items()}, index,
                   {g: np.bincount(i, minlength=len(runs)).astype(float) for g, i in index.items()},
                   np.asarray([r.task_us for r in runs], dtype=float),
                   np.asarray([sum(t.element_us for t in r.layers) for r in runs], dtype=float),
                   {g: t[:, 5].astype(np.intp) for g, t in table.items()}, dtypes)

    def predict_us(self, f: _Factors) -> np.ndarray:
        """Each run's :func:`~layerscope.analysis.calibrate.predict_us` with the groups tied by unit
        (:func:`fit_key`)."""
        total = f.task * self.task_us + f.element * self.element_us
        # the dtype factors by layer: 1 at the default dtype (index -1 reads the appended 1)
        by_dtype = np.append(np.asarray([f.dtypes[d] for d in self.dtypes], dtype=float), 1.0)
        for g, c in self.compute_us.items():
            wide = by_dtype[self.dtype_index[g]]
            body = np.maximum(f.scales[g] * wide * (c + f.layout * self.layout_us[g]),
                              f.memory * self.memory_us[g] + f.weight * self.weight_us[g])
            total = total + np.bincount(self.run_index[g], weights=body, minlength=len(total))
            total = total + f.overheads[g] * self.layer_count[g]
        return total


class _Factors(NamedTuple):
    """One point of the board fit: compute scale and overhead (µs) per tied group, the feature-map memory, task,
    weight-load, activation-matrix-product and layout-Transpose factors, and a compute factor per non-default
    dtype."""

    scales: dict[str, float]
    memory: float
    overheads: dict[str, float]
    task: float
    weight: float
    element: float
    layout: float
    dtypes: dict[str, float]


def fit_key(group: str) -> str:
    """What a board fit ties together: every layer kind of one unit (``"TAE/tensor"`` -> ``"TAE"``); the CPU's
    fallback group stays apart (its layers run on another processor, across a hand-off).

    Not split further by layer class: a compute factor per class of the layer's shape (dense kxk, 1x1, depthwise
    and grouped convolutions, matrix products; lookup-table activations and reductions on the vector unit), as a
    deviation from its unit's factor with a prior of 0.5-2 in log units, left the leave-one-family-out figures of
    benchmarks/board_truth.py unchanged or lower (RDK X5 105 of 124 within ±15% either way, S100 37 or 36 of 40):
    on the X5 most convolutions are DDR-bound, so the class factors stay within 0.95-1.13 of their unit's, steady
    across the folds; the same held for per-class overheads, weight-load and feature-map factors. With every one of
    those free the fit on all X5 rows still leaves 16 of 124 outside ±15% (19 with the unit factors alone): the
    misses are in the estimate's per-layer terms, not in how the fit groups them."""
    unit, _, kind = group.partition("/")
    return group if kind == FALLBACK_KIND else unit


def fit_board(runs: Sequence[RunData], base_overhead_us: Mapping[str, float]) -> Params:
    """Fit a compute factor and an overhead factor per group, one memory (DDR) factor, a factor on the profile's
    per-inference task overhead, a weight-load factor (when the runs set weight loads apart) and a factor on the
    activation-matrix-product time (when the base profile prices it: :attr:`LayerTerm.element_us`) and a factor on
    the layout Transposes' compute time relative to their unit's (when the base profile prices them apart:
    :attr:`LayerTerm.layout`) and a compute factor per non-default dtype the runs' accelerator layers run at
    (:attr:`LayerTerm.dtype`: an int16 deployment's rate relative to the base profile's int16 peaks) to the runs'
    whole-model latencies: least squares on log(predicted / measured),
    every model alike, with a normal prior of :data:`PRIOR_SD` on each factor's log around 1 (the base profile).
    Layers take ``max(s_g * compute, d * memory) + o_g``, as :class:`~layerscope.analysis.calibrate.Params`
    defines."""
    from scipy.optimize import least_squares

    if not runs:
        raise InputError("a board calibration needs at least one model with a board latency")
    members: dict[str, list[str]] = {}
    for group in sorted({t.group for r in runs for t in r.layers}):
        members.setdefault(fit_key(group), []).append(group)
    keys = sorted(members)
    # a tied unit's base overhead: its kinds' share one unit, so one value (the first kind's)
    base_by_key = {k: base_overhead_us.get(members[k][0], 0.0) for k in keys}
    columns = _Columns.of(runs)
    measured = np.log([r.latency_us for r in runs])
    n = len(keys)
    # weight loads take a factor of their own only where the runs say which of a layer's memory time is weights;
    # the activation-matrix-product time takes one where the base profile prices it
    split = any(t.weight_us > 0 for r in runs for t in r.layers)
    priced = any(t.element_us > 0 for r in runs for t in r.layers)
    layout = any(t.layout for r in runs for t in r.layers)
    extra = 2 + split + priced + layout + len(columns.dtypes)

    def unpack(theta: np.ndarray) -> _Factors:
        factors = [float(f) for f in np.exp(theta)]
        scales = dict(zip(keys, factors[:n], strict=True))
        overheads = {k: base_by_key[k] * f for k, f in zip(keys, factors[n + 1:2 * n + 1], strict=True)}
        rest = iter(factors[2 * n + 2:])
        weight = next(rest) if split else factors[n]
        element = next(rest) if priced else 1.0
        layout_factor = next(rest) if layout else 1.0
        return _Factors(scales, factors[n], overheads, factors[2 * n + 1], weight, element, layout_factor,
                        {d: next(rest) for d in columns.dtypes})

    def residuals(theta: np.ndarray) -> np.ndarray:
        predicted = np.log(np.maximum(columns.predict_us(unpack(theta)), 1e-9))
        return np.concatenate([predicted - measured, theta / PRIOR_SD])

    bound = math.log(FACTOR_BOUND)
    solution = least_squares(residuals, np.zeros(2 * n + extra), bounds=(-bound, bound), method="trf",
                             xtol=1e-12, ftol=1e-12, gtol=1e-12)
    scales, memory, overheads, task, weight, element, layout_factor, dtypes = unpack(solution.x)
    return Params({g: scales[k] for k in keys for g in members[k]}, {g: overheads[k] for k in keys for g in members[k]},
                  memory, dict(base_overhead_us), task_scale=task, weight_memory_scale=weight if split else None,
                  element_scale=element, layout_scale=layout_factor, dtype_scale=dtypes)


def _every_kind(params: Params, profile: Profile) -> Params:
    """``params`` with each fitted unit's factors given to every kind the unit runs (the fit ties a unit's kinds
    together, also those the models had no layer of), so that the calibrated profile keeps the unit whole."""
    scales, overheads = dict(params.compute_scale), dict(params.overhead_us)
    for unit in profile.units:
        fitted = next((f"{unit.name}/{k.value}" for k in unit.kinds if f"{unit.name}/{k.value}" in scales), None)
        if fitted is None:
            continue
        for kind in unit.kinds:
            scales.setdefault(f"{unit.name}/{kind.value}", scales[fitted])
            overheads.setdefault(f"{unit.name}/{kind.value}", overheads[fitted])
    return replace(params, compute_scale=scales, overhead_us=overheads)


def calibrate_board(runs: Sequence[RunData], profile: Profile) -> Calibration:
    """Fit ``profile`` to the runs' board latencies (:func:`fit_board`), with the in-sample errors and the
    leave-one-family-out errors (``Calibration.leave_one_out``): each family predicted by a fit without it."""
    if len(runs) < 2:
        raise InputError("a board calibration needs at least two models with a board latency")
    require_profile(runs, profile)
    groups = sorted({t.group for r in runs for t in r.layers})
    base = base_overheads(profile, groups)
    params = _every_kind(fit_board(runs, base), profile)
    held_out = leave_one_out(runs, lambda train: fit_board(train, base), lambda r: r.family_key)
    return Calibration(profile.name, params, tuple(r.model for r in runs), errors(runs, params), held_out,
                       (), dict.fromkeys(groups, 0), holdout="family", tolerance=BOARD_TOLERANCE,
                       measured_on="on that board")


#: The seeds' check of k across structurally different models: k is steady when the coefficient of variation of
#: the families' mean k is at most this (the issue's goal after calibration).
K_STEADY_CV = 0.10


@dataclass(frozen=True)
class KRow:
    """One model's k = board latency / estimate, and the share of its estimate in bandwidth-bound layers."""

    model: str
    family: str
    factor: ScaleFactor
    bandwidth_share: float

    @property
    def k(self) -> float:
        return self.factor.k


@dataclass(frozen=True)
class KAnalysis:
    """The seeds' k procedure over board-measured models: k per model and per family, its spread across families
    (coefficient of variation of the family means), Spearman's rank correlation of estimate and board, the
    correlation of k with the bandwidth-bound share (what drives k), and the verdict."""

    rows: tuple[KRow, ...]
    family_k: tuple[tuple[str, float], ...]
    k_mean: float
    family_cv: float
    spearman: float | None
    bandwidth_r: float | None
    against: str

    @property
    def steady(self) -> bool:
        return self.family_cv <= K_STEADY_CV

    @property
    def verdict(self) -> str:
        """What to do with k, in the words of the forum's advice (shared by the vendor's engineers)."""
        if self.steady:
            return (f"k steady across families (CV {self.family_cv:.0%} <= {K_STEADY_CV:.0%}): scale the per-layer "
                    f"estimate by k = {self.k_mean:.2f} to read per-layer board times")
        driver = ""
        if self.bandwidth_r is not None and abs(self.bandwidth_r) >= 0.5:
            more = "higher" if self.bandwidth_r > 0 else "lower"
            driver = f"; k is {more} for models with more bandwidth-bound time (r = {self.bandwidth_r:.2f})"
        return (f"k scattered across families (CV {self.family_cv:.0%} > {K_STEADY_CV:.0%}){driver}: per-layer "
                "shares still rank hot spots within a model, but their absolute values are not trustworthy")


def bandwidth_share(run: RunData, params: Params | None = None) -> float:
    """The share of ``run``'s estimate (under ``params``, else the base profile) in layers whose memory time
    exceeds their compute time."""
    total = bound = 0.0
    for term in run.layers:
        compute = params.compute_us(term) if params else term.compute_us
        memory = params.memory_us(term) if params else term.memory_us
        body = max(compute, memory)
        total += body
        if memory > compute:
            bound += body
    return bound / total if total > 0 else 0.0


def k_analysis(runs: Sequence[RunData], params: Params | None = None, *,
               estimates_us: Sequence[float] | None = None, against: str | None = None) -> KAnalysis:
    """k of every run against its estimate under ``params`` (a calibration), else against the base profile's
    estimate (the seeds' k: board / static estimate), or against ``estimates_us`` given one per run (``against``
    names them). ``InputError`` for fewer than two runs."""
    from layerscope.analysis.reconcile import pearson, spearman

    if len(runs) < 2:
        raise InputError("k across models needs at least two models with a board latency")
    if estimates_us is None:
        estimates_us = [predict_us(r, params) if params else r.base_estimate_us for r in runs]
        against = "the calibrated profile" if params else "the base profile's estimate"
    rows = tuple(KRow(r.model, r.family_key, ScaleFactor(r.latency_us, e), bandwidth_share(r, params))
                 for r, e in zip(runs, estimates_us, strict=True))
    by_family: dict[str, list[float]] = {}
    for row in rows:
        by_family.setdefault(row.family, []).append(row.k)
    family_k = tuple((f, sum(ks) / len(ks)) for f, ks in by_family.items())
    means = [k for _, k in family_k]
    mean = sum(means) / len(means)
    cv = math.sqrt(sum((k - mean) ** 2 for k in means) / len(means)) / mean if mean > 0 else math.inf
    factors = [row.factor for row in rows]
    return KAnalysis(rows, family_k, mean, cv,
                     spearman([f.estimated_us for f in factors], [f.measured_us for f in factors]),
                     pearson([r.bandwidth_share for r in rows], [row.k for row in rows]), against or "the estimate")


# ------------------------------------------------------------------------------------------- derived profiles
@dataclass(frozen=True)
class Derivation:
    """A sibling chip derived from a calibrated one by its published differences: the tensor unit's peak, the
    clock of the accelerator's other units (their rates and per-layer overheads) and the CPU's clock."""

    parent: str
    description: str
    tensor_ratio: float
    clock_ratio: float
    cpu_ratio: float
    clock_hz: float
    source: str


#: RDK S100P from RDK S100: BPU Nash-m at 1.5 GHz, 128 TOPS, 6x A78AE at 2.0 GHz, against Nash-e at 1.0 GHz,
#: 80 TOPS, 6x A78AE at 1.5 GHz (the boards' optimal states as the S100 model zoo publishes them).
DERIVATIONS: dict[str, Derivation] = {
    "rdk-s100p": Derivation(
        parent="rdk-s100",
        description="D-Robotics RDK S100P: BPU Nash-m 128 TOPS int8, 6x Cortex-A78AE @2.0 GHz, 96-bit LPDDR5-6400",
        tensor_ratio=128 / 80, clock_ratio=1.5 / 1.0, cpu_ratio=2.0 / 1.5, clock_hz=1.5e9,
        source="D-Robotics/rdk_model_zoo_s@218434e8d0a52d724a934140fa004eeb9f830165:samples/Vision/"
               "ultralytics_YOLO_Detect/README.md ('Optimal state for S100P: CPU 6 x A78AE @ 2.0GHz, BPU 1 x Nash-m "
               "@ 1.5GHz, 128TOPS at int8'; S100: 6 x A78AE @ 1.5GHz, 1 x Nash-e @ 1.0GHz, 80TOPS)"),
}


def derive_profile(parent: Profile, name: str) -> str:
    """The TOML of ``name`` derived from ``parent`` (:data:`DERIVATIONS`): the tensor unit's peaks
    scaled by the TOPS ratio, the other accelerator units' peaks scaled and their overheads and activation-matrix-
    product time divided by the clock ratio, the CPU's by its clock ratio; feature-map transfers at the parent's
    attainable rate times the accelerator's clock ratio, up to the DDR's full rate (the rate the parent attains is
    its accelerator's DMA at its clock, not the DRAM: :func:`_transfer_efficiency`); weight loads at the parent's
    rate (same memory). Validated, not fitted."""
    from layerscope.analysis.calibrate import profile_mapping, profile_toml

    rule = DERIVATIONS[name]
    if parent.name != rule.parent:
        raise InputError(f"{name} is derived from {rule.parent}, not {parent.name}")
    note = f"derived from {parent.name}: {rule.source}"
    units = tuple(replace(u, peak_ops_per_s={k: v * _ratio(rule, u) for k, v in u.peak_ops_per_s.items()},
                          overhead_us=u.overhead_us / rule.clock_ratio) for u in parent.units)
    cpu = replace(parent.cpu, peak_ops_per_s={k: v * rule.cpu_ratio for k, v in parent.cpu.peak_ops_per_s.items()},
                  overhead_us=parent.cpu.overhead_us / rule.cpu_ratio)
    sources = dict(parent.sources)
    for unit in units:
        sources.update({f"units.{unit.name}.peak_ops_per_s": f"{note}; {parent.name}'s x{_ratio(rule, unit):.4g}",
                        f"units.{unit.name}.overhead_us": f"{note}; {parent.name}'s / {rule.clock_ratio:.4g} (clock)"})
    same = f"{note}; as {parent.name}'s (the same LPDDR5-6400 memory)"
    transfer = _transfer_efficiency(parent, rule)
    sources.update({"cpu.peak_ops_per_s": f"{note}; {parent.name}'s x{rule.cpu_ratio:.4g} (CPU clock)",
                    "cpu.overhead_us": f"{note}; {parent.name}'s / {rule.cpu_ratio:.4g} (CPU clock)",
                    "ddr_efficiency": f"{note}; assumption: {parent.name}'s attainable feature-map rate "
                    f"({parent.attainable_ddr_bytes_per_s / 1e9:.4g} GB/s, {parent.ddr_efficiency:.0%} of the DDR's) "
                    f"is its BPU's DMA at its clock, so x{rule.clock_ratio:.4g} (BPU clock), at most the DDR's rate",
                    "weight_ddr_efficiency": f"{note}; {parent.name}'s weight-load rate (the same LPDDR5-6400 memory)",
                    "ddr_bandwidth_bytes_per_s": same, "cpu_ddr_bandwidth_bytes_per_s": same,
                    "clock_hz": rule.source, "description": rule.source})
    if parent.activation_matmul_ns_per_element:
        sources["activation_matmul_ns_per_element"] = f"{note}; {parent.name}'s / {rule.clock_ratio:.4g} (BPU clock)"
    if parent.layout_transpose_efficiency is not None:
        sources["layout_transpose_efficiency"] = f"{note}; {parent.name}'s (a multiplier on the unit's rate, which " \
            "the clock scales)"
    if parent.task_overhead_us:
        sources["task_overhead_us"] = f"{note}; {parent.name}'s / {rule.cpu_ratio:.4g} (the runtime's CPU clock)"
    stream_rate = parent.stream_bytes_per_s * rule.clock_ratio if parent.stream_bytes_per_s else None
    if stream_rate is not None:
        sources["stream_bytes_per_s"] = f"{note}; {parent.name}'s x{rule.clock_ratio:.4g} (BPU clock: on-chip moves)"
    output_rate = parent.output_bytes_per_s * rule.cpu_ratio if parent.output_bytes_per_s else None
    if output_rate is not None:
        sources["output_bytes_per_s"] = f"{note}; {parent.name}'s x{rule.cpu_ratio:.4g} (the runtime's CPU clock)"
    derived = replace(parent, name=name, units=units, cpu=cpu, clock_hz=rule.clock_hz, sources=sources,
                      description=f"{rule.description} -- derived from {parent.name}",
                      task_overhead_us=parent.task_overhead_us / rule.cpu_ratio, output_bytes_per_s=output_rate,
                      stream_bytes_per_s=stream_rate,
                      ddr_efficiency=transfer,
                      weight_ddr_efficiency=parent.attainable_weight_ddr_bytes_per_s / parent.ddr_bandwidth_bytes_per_s,
                      activation_matmul_ns_per_element=parent.activation_matmul_ns_per_element / rule.clock_ratio)
    mapping = profile_mapping(derived)
    header = (f"{rule.description}\nDerived from {parent.name} by its published differences "
              "(layerscope.analysis.board.derive_profile); validated on its own board rows, never fitted.\n"
              "Every number has an entry in [sources].")
    return profile_toml(mapping, header)


def _transfer_efficiency(parent: Profile, rule: Derivation) -> float:
    """The derived chip's feature-map DDR efficiency: the parent's times the accelerator's clock ratio, at most 1."""
    return min(1.0, parent.ddr_efficiency * rule.clock_ratio)


def _ratio(rule: Derivation, unit: ComputeUnit) -> float:
    """A unit's rate ratio: the TOPS ratio for a tensor unit, the clock ratio for the others."""
    return rule.tensor_ratio if UnitKind.TENSOR in unit.kinds else rule.clock_ratio
