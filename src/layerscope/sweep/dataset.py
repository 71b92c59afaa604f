"""A sweep's results as two Parquet tables (pyarrow), gathered from its run files.

Contract:
- ``runs.parquet``: one row per cell of the plan (model x configuration), done or failed or not run: ``cell.*``
  (key, model, model_name, target, mode, dtype, threads, opt_level, runs, warmup, shapes as JSON, status
  ``ok``/``failed``/``missing``, error, run_file relative to the sweep folder), then the run's scalars, namespaced
  by section: ``model.*``, ``target.*``, ``summary.*``, ``latency.*``, ``measurement.*`` (``measurement.steadiness.*``
  one level down), and ``k.*`` (k = measured / estimated as every report computes it: value, measured_us,
  estimated_us, scope);
- ``layers.parquet``: one row per layer of every done cell: ``cell.key`` then the columns of
  :func:`layerscope.runfile.derived.layer_rows` (``id``, ``name``, ``op_type``, ``cost.*``, ``est.*``, ``meas.*``,
  ``share``);
- a column whose values mix types (a string beside numbers) is written as strings; an absent value is null.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layerscope.errors import BackendUnavailable
from layerscope.fileio import write_atomic
from layerscope.runfile.models import RunFile
from layerscope.sweep.plan import Cell
from layerscope.sweep.tasks import load_failure, run_path

RUNS_TABLE = "runs.parquet"
LAYERS_TABLE = "layers.parquet"
_SECTIONS = ("model", "target", "summary", "latency", "measurement")


@dataclass(frozen=True)
class SweepRow:
    """One cell of the plan as gathered: its status (``ok``, ``failed``, ``missing``), its error, its run file
    (relative to the sweep folder) and typed run when done, and its ``runs.parquet`` row (``columns``)."""

    cell: Cell
    status: str
    error: str | None
    run_file: str | None
    run: RunFile | None
    columns: dict[str, Any]


def cell_columns(cell: Cell, out_dir: Path) -> dict[str, Any]:
    """The ``cell.*`` columns of ``cell`` (status ``ok``, ``failed`` or ``missing``, from what is on disk)."""
    done = run_path(out_dir, cell).is_file()
    failed = None if done else load_failure(out_dir, cell)
    return {
        "cell.key": cell.key, "cell.model": cell.model, "cell.model_name": Path(cell.model).stem,
        "cell.target": cell.target, "cell.mode": cell.mode, "cell.dtype": cell.dtype,
        "cell.threads": cell.threads, "cell.opt_level": cell.opt_level, "cell.runs": cell.runs,
        "cell.warmup": cell.warmup,
        "cell.shapes": json.dumps({n: list(d) for n, d in cell.shapes}) if cell.shapes else None,
        "cell.status": "ok" if done else ("failed" if failed else "missing"),
        "cell.error": failed.error if failed else None,
        "cell.run_file": str(run_path(out_dir, cell).relative_to(out_dir)) if done else None,
    }


def run_row(run: RunFile) -> dict[str, Any]:
    """The namespaced scalar columns of one run (see the module docstring)."""
    document = run.to_json()
    row: dict[str, Any] = {}
    for section in _SECTIONS:
        values = document.get(section)
        if not isinstance(values, Mapping):
            continue
        for key, value in values.items():
            if _scalar(value):
                row[f"{section}.{key}"] = value
            elif isinstance(value, Mapping) and section == "measurement":
                row.update({f"{section}.{key}.{k}": v for k, v in value.items() if _scalar(v)})
    k = run.k_factor
    if k is not None:
        row.update({"k.value": k.k if k.estimated_us else None,
                    "k.measured_us": k.measured_us, "k.estimated_us": k.estimated_us, "k.scope": k.scope,
                    "k.device_mismatch": k.mismatch})
    return row


def gather(cells: Sequence[Cell], out_dir: Path) -> tuple[list[SweepRow], int]:
    """Write ``runs.parquet`` and ``layers.parquet`` under ``out_dir``; return the rows (for the leaderboard) and
    the number of layer rows."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise BackendUnavailable("the sweep's dataset is written with pyarrow, which is not installed",
                                 hint="pip install 'pyarrow>=14'") from None
    from layerscope.runfile.derived import layer_rows
    from layerscope.runfile.io import load

    rows: list[SweepRow] = []
    layers: list[dict[str, Any]] = []
    for cell in cells:
        done = run_path(out_dir, cell).is_file()
        failed = None if done else load_failure(out_dir, cell)
        run = load(run_path(out_dir, cell)) if done else None
        columns = {**cell_columns(cell, out_dir), **(run_row(run) if run is not None else {})}
        if run is not None:
            layers.extend({"cell.key": cell.key, **r} for r in layer_rows(run))
        rows.append(SweepRow(cell, "ok" if done else ("failed" if failed else "missing"),
                             failed.error if failed else None,
                             str(run_path(out_dir, cell).relative_to(out_dir)) if done else None, run, columns))
    _write(pq, _table(pa, [r.columns for r in rows]), out_dir / RUNS_TABLE)
    _write(pq, _table(pa, layers) if layers else pa.table({"cell.key": pa.array([], pa.string())}),
           out_dir / LAYERS_TABLE)
    return rows, len(layers)


def _table(pa: Any, rows: Sequence[Mapping[str, Any]]) -> Any:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    arrays = {}
    for name in columns:
        values = [row.get(name) for row in rows]
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[name] = pa.array([None if v is None else str(v) for v in values], pa.string())
        if pa.types.is_null(arrays[name].type):
            arrays[name] = arrays[name].cast(pa.string())
    return pa.table(arrays)


def _write(pq: Any, table: Any, path: Path) -> None:
    import io

    sink = io.BytesIO()
    pq.write_table(table, sink)
    write_atomic(path, sink.getvalue())


def iter_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet table this module wrote, as dicts (for tests and scripts)."""
    import pyarrow.parquet as pq

    yield from pq.read_table(path).to_pylist()


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
