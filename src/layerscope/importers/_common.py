"""Helpers every vendor parser shares: reading files, JSON, numbers, cost strings, errors.

Contract: every helper that rejects input raises :class:`~layerscope.errors.InputError` (exit 2) with
one line naming the file (``source``) and the line or field, e.g.
``profiler.log: model_latency.Preprocess.avg_time: expected a number, got 'abc'``. Vendor strings are
data: they are only ever compared, split and converted with ``float``/``int``/``json`` — never
evaluated.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from layerscope import limits
from layerscope.errors import InputError
from layerscope.fileio import read_text_limited

#: Vendor files larger than this are refused (ONNX Runtime profiles of long runs reach ~100 MB).
MAX_FILE_BYTES = 512 * 1024 * 1024

#: Larger numbers are refused: no time, count or size in a profile comes near, and sums of many of
#: them stay far from float overflow.
MAX_NUMBER = 1e18

#: Microseconds per millisecond: most vendors report ms, layerscope keeps µs.
US_PER_MS = 1e3

#: Microseconds per unit, for the time units vendors print.
US_PER_UNIT = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6}

#: Longest cost cell read (``"59 us (8.2% of model)"`` is 21 characters); longer cells are refused
#: before any pattern runs over them.
MAX_COST_CELL = 256

#: The number at the start of a cost cell. Parsing goes left to right with no pattern that can
#: backtrack over whitespace runs (three adjacent ``\s*`` made the former single regex cubic).
_COST_NUMBER = re.compile(r"[0-9][0-9,]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
_PERCENT = re.compile(r"[0-9]+(?:\.[0-9]*)?")
_COST_UNITS = ("ns", "us", "µs", "μs", "ms", "s")


def fail(source: str, where: str, message: str) -> NoReturn:
    """Raise the one-line ``InputError`` every parser uses: ``<file>: <where>: <message>``."""
    prefix = f"{source}: {where}: " if where else f"{source}: "
    raise InputError(prefix + message)


def read_text(path: str | Path) -> str:
    """The text of a vendor file (UTF-8, a BOM dropped, undecodable bytes replaced).

    ``InputError`` when the file is missing, not a file, unreadable or larger than
    :data:`MAX_FILE_BYTES` (:func:`layerscope.fileio.read_text_limited`); ``OverBudget`` when it has more lines than
    the ``import_lines`` budget of :mod:`layerscope.limits` (checked before any parser reads it).
    """
    text = read_text_limited(path, MAX_FILE_BYTES, what="an import reads")
    lines = text.count("\n") + (not text.endswith("\n"))
    limits.check("import_lines", lines, f"{path}: {lines:,} lines")
    return text


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number JSON allows")


def load_json(text: str, source: str, *, first_line: int = 1) -> Any:
    """Parse JSON text; ``InputError`` naming the line and column when it is not valid JSON.

    ``NaN`` and ``Infinity`` are refused (they are not JSON, and a run file cannot hold them).
    ``first_line`` is the file line the text starts on, for messages about a part of a file.
    """
    try:
        return json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        fail(source, f"line {exc.lineno + first_line - 1} column {exc.colno}", f"not valid JSON ({exc.msg})")
    except ValueError as exc:
        fail(source, "", f"not valid JSON ({exc})")
    except RecursionError:
        fail(source, "", "JSON nested too deeply")


def raw_decode(text: str, pos: int) -> tuple[Any, int] | None:
    """One JSON value starting at ``pos`` and the index after it; ``None`` when none parses there."""
    try:
        return json.JSONDecoder(parse_constant=_no_constants).raw_decode(text, pos)
    except (ValueError, RecursionError):
        return None


def csv_rows(text: str, source: str, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """(line number, stripped cells) of each CSV row; ``InputError`` naming the line when it is not CSV."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        for row in reader:
            yield reader.line_num, [cell.strip() for cell in row]
    except csv.Error as exc:
        fail(source, f"line {reader.line_num}", f"not valid CSV ({exc})")


def line_at(text: str, pos: int) -> int:
    """The 1-based line number of character ``pos`` of ``text``."""
    return text.count("\n", 0, pos) + 1


def expect_dict(value: Any, source: str, where: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``InputError`` naming ``where``."""
    if not isinstance(value, dict):
        fail(source, where, f"expected an object, got {_kind(value)}")
    return value


def expect_list(value: Any, source: str, where: str) -> list[Any]:
    """``value`` if it is a JSON array, else ``InputError`` naming ``where``."""
    if not isinstance(value, list):
        fail(source, where, f"expected an array, got {_kind(value)}")
    return value


def expect_str(value: Any, source: str, where: str) -> str:
    """``value`` if it is a string, else ``InputError`` naming ``where``."""
    if not isinstance(value, str):
        fail(source, where, f"expected a string, got {_kind(value)}")
    return value


def as_float(value: Any, source: str, where: str) -> float:
    """A finite, non-negative number up to :data:`MAX_NUMBER` from a JSON number or a numeric string
    (``"1,234.5"`` too). Times, counts and sizes are never negative; ``InputError`` names ``where``
    otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        fail(source, where, f"expected a number, got {_kind(value)}")
    try:
        number = float(value.replace(",", "").strip()) if isinstance(value, str) else float(value)
    except (ValueError, OverflowError):
        fail(source, where, f"expected a number, got {_short(value)}")
    if not math.isfinite(number) or number < 0 or number > MAX_NUMBER:
        fail(source, where, f"expected a number from 0 to {MAX_NUMBER:g}, got {_short(value)}")
    return number


def as_int(value: Any, source: str, where: str) -> int:
    """A non-negative whole number (``200`` or ``"200"`` or ``200.0``); ``InputError`` otherwise."""
    number = as_float(value, source, where)
    if number != int(number):
        fail(source, where, f"expected a whole number, got {_short(value)}")
    return int(number)


def opt_float(mapping: dict[str, Any], key: str, source: str, where: str) -> float | None:
    """``mapping[key]`` as a number (see :func:`as_float`); ``None`` when the key is absent or null."""
    value = mapping.get(key)
    return None if value is None else as_float(value, source, f"{where}.{key}" if where else key)


def parse_cost(text: Any, source: str, where: str) -> tuple[float, float | None]:
    """A static report's cost cell, e.g. ``"59 us (8.2% of model)"``: (microseconds, percent or None).

    Accepts a bare number (taken as microseconds, as Horizon's reports write ``"0"``), a number with a
    unit (ns, us, µs, ms, s), and an optional ``(P% of model)`` part.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        return as_float(text, source, where), None
    cell = expect_str(text, source, where)
    if len(cell) > MAX_COST_CELL:
        fail(source, where, f"a cost cell of {len(cell)} characters (at most {MAX_COST_CELL} are read)")
    parsed = _split_cost(cell.strip())
    if parsed is None:
        fail(source, where, f"expected a cost like '59 us (8.2% of model)', got {_short(cell)}")
    number, unit, pct = parsed
    value = as_float(number, source, where) * US_PER_UNIT[unit]
    return value, (float(pct) if pct is not None else None)


def _split_cost(cell: str) -> tuple[str, str, str | None] | None:
    """``"59 us (8.2% of model)"`` -> ``("59", "us", "8.2")``; ``None`` when the cell is not of that form.

    Linear in the cell's length: one anchored number match, then prefix checks and ``str`` splits.
    """
    number = _COST_NUMBER.match(cell)
    if number is None:
        return None
    rest = cell[number.end():].lstrip()
    unit = next((u for u in _COST_UNITS if rest.startswith(u)), "us")
    if rest.startswith(unit):
        rest = rest[len(unit):].lstrip()
    if not rest:
        return number.group(), unit, None
    if not (rest.startswith("(") and rest.endswith(")")) or ")" in rest[1:-1]:
        return None
    pct, sep, _ = rest[1:-1].partition("%")
    pct = pct.strip()
    if not sep or _PERCENT.fullmatch(pct) is None:
        return None
    return number.group(), unit, pct


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
