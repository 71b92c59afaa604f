"""Import the vendors' own profiling outputs into a layerscope run.

Formats (``import --from``): ``horizon-profiler`` (``hrt_model_exec perf`` profiler.log / profiler.csv),
``horizon-static`` (the compiler's static report JSON), ``trtexec`` (``--exportProfile``,
``--exportLayerInfo``, ``--exportTimes``), ``ort`` (ONNX Runtime profile JSON), ``openvino``
(``benchmark_app`` counters reports, CSV or JSON), ``rknn`` (``eval_perf`` table text).

Public API:
- :func:`parse_file` / :func:`parse_text` -> :class:`ImportResult` (one file, vendor names);
- :func:`detect_format` -> the format name of a file's content;
- :func:`build_run` -> :class:`ImportedRun` (the run dict, joined to a model when one is given);
- :func:`import_files` -> both steps for a list of files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from layerscope.importers.assemble import ImportedRun, Reconciled, build_run
from layerscope.importers.detect import FORMATS, detect_format, parse_file, parse_text
from layerscope.importers.types import (
    EntryKind,
    ImportResult,
    StaticCost,
    TimeStats,
    Totals,
    VendorEntry,
)
from layerscope.model.types import Graph

__all__ = [
    "FORMATS",
    "EntryKind",
    "ImportResult",
    "ImportedRun",
    "Reconciled",
    "StaticCost",
    "TimeStats",
    "Totals",
    "VendorEntry",
    "build_run",
    "detect_format",
    "import_files",
    "parse_file",
    "parse_text",
]


def import_files(paths: Iterable[str | Path], fmt: str = "auto", graph: Graph | None = None) -> ImportedRun:
    """Parse every file (with ``fmt``, or each detected) and build one run, joined to ``graph`` if given."""
    return build_run([parse_file(path, fmt) for path in paths], graph)
