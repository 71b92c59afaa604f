"""Lint: the settings of a Horizon hb_compile config that cost board performance, and unknown keys (likely typos)
with a did-you-mean (``layerscope lint``, ``layerscope.lint``; the rules are :mod:`layerscope.analysis.lint`'s)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from layerscope.analysis.findings import Finding, Severity
from layerscope.analysis.lint import lint_file
from layerscope.workflows.common import QUIET, Hooks, PathLike


@dataclass(frozen=True)
class LintRequest:
    """``layerscope lint``'s options: ``config``, the hb_compile YAML file."""

    config: PathLike


@dataclass(frozen=True)
class LintResult:
    """The findings, in the order the report lists them; ``failed``: one of them has severity error (the command
    exits 1; warnings and infos do not fail)."""

    findings: tuple[Finding, ...]

    @property
    def failed(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)


def lint(request: LintRequest, hooks: Hooks = QUIET) -> LintResult:
    """Lint ``request.config``. ``InputError`` (exit 2) for a missing or malformed file."""
    return LintResult(tuple(lint_file(Path(request.config))))
