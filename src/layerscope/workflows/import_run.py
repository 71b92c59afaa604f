"""Import: the vendors' own profiling outputs into a run (``layerscope import``, ``layerscope.import_run``).

With ``model`` the vendor entries are joined to the ONNX model's layers (what cannot be joined is listed); without
it the run's layers are the vendor's entries (:mod:`layerscope.importers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from layerscope.importers import ImportedRun, import_files
from layerscope.model import load_model
from layerscope.workflows.common import QUIET, Hooks, PathLike


@dataclass(frozen=True)
class ImportRequest:
    """``layerscope import``'s options: the vendor ``files``; ``model``, the ONNX model they profile (loaded with
    ``shapes`` and ``dims``); ``format``, the files' format (``auto``: detected from each file's content)."""

    files: tuple[PathLike, ...]
    model: PathLike | None = None
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    format: str = "auto"


def import_run(request: ImportRequest, hooks: Hooks = QUIET) -> ImportedRun:
    """One run from ``request.files`` (and what the import report shows: the files' results, the joins, the
    warnings). ``InputError`` for a file that is missing or in no known format; ``RunFileError`` when what the files
    say makes no valid run."""
    graph = load_model(request.model, dict(request.shapes), dict(request.dims)) if request.model is not None else None
    return import_files([Path(path) for path in request.files], request.format, graph)
