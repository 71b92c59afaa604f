"""``layerscope lint CONFIG.yaml``: settings in a Horizon hb_compile config that cost board performance, and
unknown keys (likely typos) with a did-you-mean.

Exit codes, so that ``lint`` can gate CI: 0 no finding of severity error (warnings and infos are printed, not
failed on), 1 at least one error-severity finding (the report or the JSON is printed first), 2 a missing or
malformed file (:mod:`layerscope.workflows.lint`)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from layerscope.analysis.findings import findings_section
from layerscope.cli.console import SafeConsole, echo_json
from layerscope.cli.options import Command, deprecated_option
from layerscope.report.analysis_terminal import lint_report
from layerscope.workflows.lint import LintRequest, lint

#: Exit code when the config has an error-severity finding.
EXIT_ERRORS = 1


@click.command("lint", cls=Command)
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table: the report; json: the findings as JSON on stdout.")
@deprecated_option("--json", dest="fmt", new="--format json", value="json", is_flag=True, default=False)
def command(*, config: Path, fmt: str) -> None:
    """Lint a Horizon hb_compile YAML CONFIG; exit 1 when it has errors (warnings do not fail)."""
    result = lint(LintRequest(config))
    findings = list(result.findings)
    if fmt == "json":
        echo_json(json.dumps(findings_section(findings, source=f"layerscope lint {config}"), indent=1,
                              sort_keys=True, ensure_ascii=False))
    else:
        SafeConsole().print(lint_report(str(config), findings))
    if result.failed:
        raise click.exceptions.Exit(EXIT_ERRORS)
