"""Rockchip RKNN ``rknn.eval_perf()`` per-layer table (``init_runtime(perf_debug=True)``), as text.

The table starts at a header row ``ID  OpType  DataType  Target  InputShape  OutputShape ...
Time(us)  MacUsage(%)  ...  RW(KB)  FullName``; columns are separated by two or more spaces and their
set varies by toolkit version (``Cycles(DDR/NPU/Total)`` or ``DDR Cycles``/``NPU Cycles``/``Total
Cycles``; ``WorkLoad(0/1/2)`` or ``WorkLoad(0/1/2)-ImproveTherical`` whose cells read ``100.0%/0.0%/0.0%
- Up:0.0%``; ``Task Number``, ``Lut Number``, ``Task Size``, ``Regcmd Size``). Each row is a layer
with its ``ID`` first and its ``FullName`` (``<onnx op>:<onnx node>``) last. Lines the toolkit's log
prefixes (``D RKNN: [15:13:15.945] ...``) are read from the header's ``ID`` column on. After the table,
``Total Operator Elapsed (Per Frame) Time(us): N`` is the per-frame total. Times are measured with
per-layer synchronisation (``perf_debug``), so they can exceed the free-running latency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from layerscope.importers._common import as_float, fail
from layerscope.importers.types import EntryKind, ImportResult, TimeStats, Totals, VendorEntry, make_info

TOOL = "rknn eval_perf"
FORMAT = "rknn"
#: The header's first two columns, and its time column (searched after them on the same line). Two
#: simple searches per line instead of one pattern with ``.*?`` and ``.*`` around them, which
#: backtracked quadratically over a long line repeating ``ID OpType``.
_ID_OPTYPE = re.compile(r"\bID[ \t]+OpType\b")
_TIME_COLUMN = re.compile(r"\bTime\(us\)")
_TOTAL = re.compile(r"Total Operator Elapsed(?: Per Frame)? Time\(us\)\s*:\s*(?P<us>[0-9][0-9.,]*)")
#: Second words of the two-word column names (``DDR Cycles``, ``Task Number``, ``Regcmd Size``).
_SECOND_WORDS = frozenset({"Cycles", "Number", "Size"})
_IO_OPS = frozenset({"InputOperator", "OutputOperator"})
_FULL_NAME = "FullName"


@dataclass(frozen=True)
class _Row:
    """One parsed table row: cells by column name."""

    line: int
    cells: dict[str, str]


def parse(text: str, source: str) -> ImportResult:
    """Read the first per-layer table and the per-frame total; skip rows that do not fit the header."""
    header = find_header(text)
    if header is None:
        fail(source, "", "no 'ID  OpType ... Time(us)' header: not an RKNN eval_perf table")
    line_start, start, line_end = header
    columns = header_columns(text[line_start + start:line_end])
    first_line = text.count("\n", 0, line_end) + 2
    lines = text[line_end + 1:].split("\n") if line_end < len(text) else []
    rows, warnings = _rows(lines, first_line, (start, columns), source)
    entries = _entries(rows, source)
    total = _TOTAL.search(text)
    totals = Totals(latency=TimeStats(mean_us=as_float(total["us"], source, "Total Operator Elapsed Time(us)"))
                    if total else None)
    return ImportResult(path=source, format=FORMAT, tool=TOOL, entries=entries, totals=totals,
                        info=make_info({"columns": len(columns)}), warnings=tuple(warnings))


def find_header(text: str) -> tuple[int, int, int] | None:
    """The first header line: (its offset in ``text``, the ``ID`` column within it, its end offset).

    A header line has ``ID``, blanks and ``OpType`` as words, and ``Time(us)`` after them. Linear in
    the text's length: each line is searched once for each of the two parts.
    """
    line_start = 0
    while line_start <= len(text):
        line_end = text.find("\n", line_start)
        line_end = len(text) if line_end < 0 else line_end
        line = text[line_start:line_end]
        columns = _ID_OPTYPE.search(line) if "Time(us)" in line else None
        if columns is not None and _TIME_COLUMN.search(line, columns.end()) is not None:
            return line_start, columns.start(), line_end
        line_start = line_end + 1
    return None


def header_columns(line: str) -> list[str]:
    """The column names of a header line: words, with ``DDR Cycles``-like pairs kept together.

    Column gaps are not reliable (``DataType Target`` is one space apart), so names are words, and a
    word followed by ``Cycles``, ``Number`` or ``Size`` forms one name with it.
    """
    columns: list[str] = []
    for word in line.split():
        if word in _SECOND_WORDS and columns and columns[-1] not in _SECOND_WORDS:
            columns[-1] = f"{columns[-1]} {word}"
        else:
            columns.append(word)
    return columns


def _rows(lines: list[str], first_line: int, layout: tuple[int, list[str]], source: str
          ) -> tuple[list[_Row], list[str]]:
    """The rows in ``lines`` (the text after the header, from file line ``first_line``) until a line
    that is not a row; ``layout`` is the header's ID column and column names. Also the warnings."""
    start, columns = layout
    rows: list[_Row] = []
    warnings: list[str] = []
    for offset, line in enumerate(lines):
        number = first_line + offset
        tokens = line[start:].split() if len(line) > start else []
        if not tokens:
            if rows:
                break
            continue
        if not tokens[0].isdigit():
            if rows or not set(tokens[0]) <= set("-="):
                break
            continue
        cells = _cells(tokens, columns)
        if cells is None:
            warnings.append(f"{source}: line {number}: row does not fit the header's {len(columns)} columns; skipped")
            continue
        rows.append(_Row(number, cells))
    return rows, warnings


def _cells(tokens: list[str], columns: list[str]) -> dict[str, str] | None:
    """Tokens to cells; the workload column may take ``a/b/c - Up:x%`` and ``FullName`` the rest."""
    cells: dict[str, str] = {}
    i = 0
    for column in columns:
        if i >= len(tokens):
            return None
        if column == _FULL_NAME and column == columns[-1]:
            cells[column] = " ".join(tokens[i:])
            i = len(tokens)
            continue
        take = 1
        if column.startswith("WorkLoad") and i + 1 < len(tokens) and tokens[i + 1].startswith("-"):
            take = 3 if tokens[i + 1] == "-" else 2
        cells[column] = " ".join(tokens[i:i + take])
        i += take
    return cells if i == len(tokens) else None


def _entries(rows: list[_Row], source: str) -> tuple[VendorEntry, ...]:
    entries: dict[str, VendorEntry] = {}
    for row in rows:
        where = f"line {row.line}"
        if "Time(us)" not in row.cells:
            fail(source, where, "no Time(us) cell")
        op_type = row.cells.get("OpType", "")
        full = row.cells.get(_FULL_NAME, "")
        name = full or f"{op_type}#{row.cells['ID']}"
        if name in entries:
            name = f"{name}#{row.cells['ID']}"
        node = full.split(":", 1)[1] if ":" in full else full
        entries[name] = VendorEntry(
            name=name,
            kind=EntryKind.OTHER if op_type in _IO_OPS else EntryKind.LAYER,
            op_type=op_type,
            stats=TimeStats(mean_us=as_float(row.cells["Time(us)"], source, f"{where}.Time(us)")),
            provider=row.cells.get("Target", ""),
            source_names=(node,) if node else (),
        )
    return tuple(entries.values())
