"""Output files: the option type every output option uses, and the reports measuring commands offer as options
(``--html``), loaded only when asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layerscope.fileio import check_writable
from layerscope.runfile.models import RunFile


class OutputPath(click.Path):
    """A file the command will write: checked before any work (:func:`~layerscope.fileio.check_writable`), so
    a folder, a path under a regular file or an unwritable place exits 2 at once, not after the measurement.
    With ``allow_stdout``, ``-`` means stdout and is not checked. The value is a :class:`~pathlib.Path`."""

    name = "output path"

    def __init__(self, *, allow_stdout: bool = False) -> None:
        super().__init__(path_type=Path)
        self.allow_stdout = allow_stdout

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        assert isinstance(path, Path)  # path_type=Path
        if not (self.allow_stdout and str(path) == "-"):
            check_writable(path)
        return path


def write_html(run: RunFile, path: Path) -> Path:
    """Write the HTML report of ``run``; Jinja and the templates are imported only here, on demand."""
    from layerscope.cli.report import write_html as render_and_write

    return render_and_write(run, path)
