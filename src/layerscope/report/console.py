"""The rich console every terminal report is printed with (:class:`SafeConsole`), and :func:`render_text`, a
terminal report rendered to plain text.

No control or bidirectional-override character from a name reaches the terminal
(:mod:`layerscope.textsafe`), and neither rich markup nor rich's emoji codes in a name are read (``[bold]`` and
``:smile:`` in a layer name print as they are). No line ends in a space: rich pads table cells and grid rows to
their width, and those pads at the end of a line (and lines of spaces alone) are removed, so output redirected to a
file or diffed has no trailing whitespace. When the output is not a terminal (redirected to a file, piped) and
``COLUMNS`` is not set, the console is :data:`WIDE_COLUMNS` wide: a file gets whole names, not the 80-column cut
rich falls back to.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from layerscope.textsafe import terminal_text

#: Width of the console when stdout is not a terminal and ``COLUMNS`` is not set.
WIDE_COLUMNS = 200


class SafeConsole(Console):
    """A rich console without markup or emoji codes whose rendered text is cleaned by :func:`terminal_text`; the
    styles and control codes rich adds itself are kept. Removed characters have no width, so tables stay aligned.
    Spaces at the end of a line are removed (:func:`strip_line_ends`), except coloured-background ones when
    the console writes colour. Not a terminal, no ``COLUMNS`` and no ``width`` given: :data:`WIDE_COLUMNS`
    wide."""

    def __init__(self, *, markup: bool = False, emoji: bool = False, width: int | None = None, **kwargs: Any,
                 ) -> None:
        super().__init__(markup=markup, emoji=emoji, width=width, **kwargs)
        if width is None and not self.is_terminal and not os.getenv("COLUMNS"):
            self.width = WIDE_COLUMNS
        #: per thread (a progress bar's refresh thread renders beside the main thread): whether this thread is
        #: inside a top-level :meth:`render`
        self._rendering = threading.local()

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterator[Segment]:
        state = self._rendering
        if getattr(state, "active", False):  # a part of the renderable being rendered (rich renders parts here)
            yield from super().render(renderable, options)
            return
        state.active = True  # its segments are cleaned once, here, not at every level of nesting
        try:
            yield from strip_line_ends(self._clean(renderable, options), keep_background=self.color_system is not None)
        finally:
            state.active = False

    def _clean(self, renderable: RenderableType, options: ConsoleOptions | None) -> Iterator[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text == "\n":
                yield segment
            else:
                yield Segment(terminal_text(segment.text, keep_newlines=True), segment.style)


def strip_line_ends(segments: Iterable[Segment], *, keep_background: bool = False) -> Iterator[Segment]:
    """``segments`` with the spaces before each line break removed (a line of spaces alone becomes empty).
    Text after the last line break is passed on as it is (the caller may continue that line). Control segments
    are kept in place. ``keep_background``: spaces styled with a background colour are kept (they are visible)."""
    line: list[Segment] = []
    for segment in segments:
        if segment.control or "\n" not in segment.text:
            line.append(segment)
            continue
        parts = segment.text.split("\n")
        for part in parts[:-1]:
            if part:
                line.append(Segment(part, segment.style))
            yield from _rstrip_line(line, keep_background)
            yield Segment("\n", segment.style)
            line = []
        if parts[-1]:
            line.append(Segment(parts[-1], segment.style))
    yield from line


def _rstrip_line(line: list[Segment], keep_background: bool) -> list[Segment]:
    """One line's segments (no line break) without the trailing spaces; control segments stay."""
    out = list(line)
    index = len(out) - 1
    while index >= 0:
        segment = out[index]
        if segment.control:
            index -= 1
            continue
        if keep_background and segment.style is not None and segment.style.bgcolor is not None:
            break
        stripped = segment.text.rstrip(" ")
        if stripped:
            out[index] = Segment(stripped, segment.style)
            break
        del out[index]
        index -= 1
    return out


def render_text(renderable: RenderableType, width: int | None = None) -> str:
    """``renderable`` as plain text (no colour, no escape codes), as :class:`SafeConsole` would print it to a
    file: ``width`` columns (default: ``COLUMNS``, else :data:`WIDE_COLUMNS`)."""
    out = io.StringIO()
    console = SafeConsole(file=out, width=width, color_system=None, force_terminal=False, highlight=False)
    console.print(renderable)
    return out.getvalue()
