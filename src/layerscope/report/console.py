"""The rich console every terminal report is printed with (:class:`SafeConsole`), and :func:`render_text`, a
terminal report rendered to plain text.

No control or bidirectional-override character from a name reaches the terminal
(:mod:`layerscope.textsafe`), and rich markup in a name is never read (``[bold]`` in a layer name prints as
it is). When the output is not a terminal (redirected to a file, piped) and ``COLUMNS`` is not set, the
console is :data:`WIDE_COLUMNS` wide: a file gets whole names, not the 80-column cut rich falls back to.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from layerscope.textsafe import terminal_text

#: Width of the console when stdout is not a terminal and ``COLUMNS`` is not set.
WIDE_COLUMNS = 200


class SafeConsole(Console):
    """A rich console without markup whose rendered text is cleaned by :func:`terminal_text`; the styles and
    control codes rich adds itself are kept. Removed characters have no width, so tables stay aligned.
    Not a terminal, no ``COLUMNS`` and no ``width`` given: :data:`WIDE_COLUMNS` wide."""

    def __init__(self, *, markup: bool = False, width: int | None = None, **kwargs: Any) -> None:
        super().__init__(markup=markup, width=width, **kwargs)
        if width is None and not self.is_terminal and not os.getenv("COLUMNS"):
            self.width = WIDE_COLUMNS

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text == "\n":
                yield segment
            else:
                yield Segment(terminal_text(segment.text, keep_newlines=True), segment.style)


def render_text(renderable: RenderableType, width: int | None = None) -> str:
    """``renderable`` as plain text (no colour, no escape codes), as :class:`SafeConsole` would print it to a
    file: ``width`` columns (default: ``COLUMNS``, else :data:`WIDE_COLUMNS`)."""
    out = io.StringIO()
    console = SafeConsole(file=out, width=width, color_system=None, force_terminal=False, highlight=False)
    console.print(renderable)
    return out.getvalue()
