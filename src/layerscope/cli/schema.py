"""``layerscope schema``: print the run file's JSON Schema (the copy shipped in the package), or write it to a file.

Every run file a command writes follows it; ``report``, ``advise``, ``reconcile``, ``compare`` and ``calibrate``
check a run against it when they load it (a version-1 run is migrated first).
"""

from __future__ import annotations

from pathlib import Path

import click

from layerscope.fileio import write_atomic
from layerscope.runfile.schema import shipped_text


@click.command("schema")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, metavar="OUT.json",
              help="Write the schema to OUT.json instead of printing it.")
def command(*, output: Path | None) -> None:
    """Print the JSON Schema of the run file (schema_version 2)."""
    text = shipped_text()
    if output is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"schema: {write_atomic(output, text.encode('utf-8'))}")
