"""Text from outside (model, op, tensor, vendor and file names) made safe to print on a terminal.

A name can carry escape sequences (``ESC[2J`` clears the screen, ``ESC]0;...BEL`` sets the window title,
C1 ``CSI``/``OSC`` do the same on some terminals) or bidirectional overrides that make a line read
differently from what it holds. :func:`terminal_text` removes them: C0 controls (all of them; our own line
breaks are kept with ``keep_newlines``), DEL, C1 controls (U+0080-U+009F) and the bidi controls U+061C,
U+200E/U+200F, U+202A-U+202E, U+2066-U+2069. Everything else is kept as it is.

The CLI applies it where text reaches the terminal (:mod:`layerscope.cli.console`: every rich console and
every plain line it prints, the error line included), so a name is cleaned however it gets there. Files
(run files, reports) keep names as they are; HTML escapes them itself.
"""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_KEEP_NEWLINES = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}]")


def terminal_text(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` without control or bidirectional-override characters (``keep_newlines``: ``\\n`` stays)."""
    return (_UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE).sub("", text)


def has_unsafe(text: str, *, keep_newlines: bool = False) -> bool:
    """Whether :func:`terminal_text` would change ``text``."""
    return (_UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE).search(text) is not None


def terminal_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with DEL, C1 and bidi controls written as ``\\uXXXX``
    escapes: the same JSON value, nothing a terminal acts on. (``json`` already escapes C0 controls.)"""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
