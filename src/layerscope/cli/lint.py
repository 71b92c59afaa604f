"""``layerscope lint CONFIG.yaml``: settings in a Horizon hb_compile config that cost board performance, and
unknown keys (likely typos) with a did-you-mean. Exit 2 for a missing or malformed file."""

from __future__ import annotations

import json
from pathlib import Path

import click

from layerscope.analysis.findings import findings_section
from layerscope.analysis.lint import lint_file
from layerscope.cli.console import SafeConsole, echo_json
from layerscope.report.analysis_terminal import lint_report


@click.command("lint")
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--json", "json_out", is_flag=True, help="Print the findings as JSON instead of the report.")
def command(*, config: Path, json_out: bool) -> None:
    """Lint a Horizon hb_compile YAML CONFIG."""
    findings = lint_file(config)
    if json_out:
        echo_json(json.dumps(findings_section(findings, source=f"layerscope lint {config}"), indent=1,
                              sort_keys=True, ensure_ascii=False))
        return
    SafeConsole().print(lint_report(str(config), findings))
