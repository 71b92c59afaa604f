"""Report outputs that measuring commands offer as options (``--html``), loaded only when asked for."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_html(run: Mapping[str, Any], path: Path) -> Path:
    """Write the HTML report of ``run``; Jinja and the templates are imported only here, on demand."""
    from layerscope.cli.report import write_html as render_and_write

    return render_and_write(run, path)
