"""``layerscope lint CONFIG.yaml``: settings in a Horizon hb_compile config that cost board performance, and
unknown keys (likely typos) with a did-you-mean.

Exit codes, so that ``lint`` can gate CI: 0 no finding of severity error (warnings and infos are printed, not
failed on), 1 at least one error-severity finding (the report or the JSON is printed first), 2 a missing or
malformed file (:mod:`layerscope.workflows.lint`). ``-o/--output FILE`` writes the report (or the JSON) to FILE
instead of stdout, with one line on stdout naming it; the exit code is the same."""

from __future__ import annotations

import json
from pathlib import Path

import click

from layerscope.analysis.findings import findings_section
from layerscope.cli.console import SafeConsole, echo_json
from layerscope.cli.options import Command, deprecated_option
from layerscope.cli.outputs import OutputPath
from layerscope.fileio import write_atomic
from layerscope.report.analysis_terminal import lint_report
from layerscope.report.console import render_text
from layerscope.workflows.lint import LintRequest, lint

#: Exit code when the config has an error-severity finding.
EXIT_ERRORS = 1


@click.command("lint", cls=Command)
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table: the report; json: the findings as JSON on stdout.")
@deprecated_option("--json", dest="fmt", new="--format json", value="json", is_flag=True, default=False)
@click.option("-o", "--output", "output", type=OutputPath(allow_stdout=True), default=None, metavar="OUT",
              help="Write the report (or with --format json the JSON) to OUT instead of stdout ('-': stdout).")
def command(*, config: Path, fmt: str, output: Path | None) -> None:
    """Lint a Horizon hb_compile YAML CONFIG; exit 1 when it has errors (warnings do not fail)."""
    result = lint(LintRequest(config))
    findings = list(result.findings)
    if fmt == "json":
        text = json.dumps(findings_section(findings, source=f"layerscope lint {config}"), indent=1, sort_keys=True,
                          ensure_ascii=False) + "\n"
    if output is None or str(output) == "-":
        if fmt == "json":
            echo_json(text.rstrip("\n"))
        else:
            SafeConsole().print(lint_report(str(config), findings))
    else:
        text = text if fmt == "json" else render_text(lint_report(str(config), findings))
        click.echo(f"lint report: {write_atomic(output, text)}")
    if result.failed:
        raise click.exceptions.Exit(EXIT_ERRORS)
