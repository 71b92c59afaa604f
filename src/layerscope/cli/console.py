"""What the CLI prints goes through here: a rich console and a plain ``echo`` that never pass a control or
bidirectional-override character from a name to the terminal (:mod:`layerscope.textsafe`), and never read
rich markup in one (``[bold]`` in a layer name prints as it is). The console is
:class:`layerscope.report.console.SafeConsole` (wide when stdout is not a terminal)."""

from __future__ import annotations

import click

from layerscope.report.console import SafeConsole
from layerscope.textsafe import terminal_json, terminal_text

__all__ = ["SafeConsole", "echo", "echo_json"]


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of ``text`` cleaned by :func:`terminal_text` (line breaks kept)."""
    click.echo(terminal_text(text, keep_newlines=True), err=err, nl=nl)


def echo_json(text: str) -> None:
    """``click.echo`` of JSON text, with the characters a terminal would act on escaped (same JSON value)."""
    click.echo(terminal_json(text))
