"""``layerscope backends``: the runtimes layerscope measures per layer with, what each can do here.

For each runtime ``--backend`` offers (:mod:`layerscope.runtimes.registry`): its version, the execution providers
it knows and whether each is available in the installed build, its graph-optimization levels and its capabilities.
``--format json`` prints the same as JSON. Nothing is measured.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from layerscope.cli.console import SafeConsole, echo_json
from layerscope.cli.options import Command, deprecated_option
from layerscope.report.terminal import key_value_grid
from layerscope.runtimes import registry
from layerscope.runtimes.base import BackendInfo
from layerscope.runtimes.spec import CAPABILITIES


@click.command("backends", cls=Command)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table: one grid per backend; json: the same as JSON on stdout.")
@deprecated_option("--json", dest="fmt", new="--format json", value="json", is_flag=True, default=False)
def command(*, fmt: str) -> None:
    """List the measuring backends, their providers here and their capabilities."""
    infos = [registry.get_runtime(name).info() for name in registry.choices()]
    if fmt == "json":
        echo_json(json.dumps([asdict(info) for info in infos], indent=1))
        return
    SafeConsole().print(Group(*(backend_table(info) for info in infos)))


def backend_table(info: BackendInfo) -> Table:
    """One backend as a key/value grid: version, providers here and not, levels, capabilities."""
    grid = key_value_grid()
    grid.add_row("backend", Text(f"{info.name} {info.version or '(not installed)'}", style="bold"))
    missing = [p for p in info.providers if p not in info.available_providers]
    grid.add_row("providers", Text.assemble((", ".join(info.available_providers) or "none", "green"),
                                            (f"   not in this build: {', '.join(missing)}" if missing else "", "dim")))
    grid.add_row("opt levels", ", ".join(info.opt_levels))
    for capability in info.capabilities:
        grid.add_row(capability, CAPABILITIES[capability])
    return grid
