"""What the CLI prints goes through here: a rich console and a plain ``echo`` that never pass a control or
bidirectional-override character from a name to the terminal (:mod:`layerscope.textsafe`), and never read
rich markup in one (``[bold]`` in a layer name prints as it is)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from layerscope.textsafe import terminal_json, terminal_text


class SafeConsole(Console):
    """A rich console without markup whose rendered text is cleaned by :func:`terminal_text`; the styles and
    control codes rich adds itself are kept. Removed characters have no width, so tables stay aligned."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        super().__init__(**kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text == "\n":
                yield segment
            else:
                yield Segment(terminal_text(segment.text, keep_newlines=True), segment.style)


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of ``text`` cleaned by :func:`terminal_text` (line breaks kept)."""
    click.echo(terminal_text(text, keep_newlines=True), err=err, nl=nl)


def echo_json(text: str) -> None:
    """``click.echo`` of JSON text, with the characters a terminal would act on escaped (same JSON value)."""
    click.echo(terminal_json(text))
