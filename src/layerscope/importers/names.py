"""Vendor layer names, taken apart: normalized forms and fused names.

Contract:
- :func:`normalize` maps names that differ only in separators and case to one key:
  ``/model.2/m.0/cv1/conv/Conv`` and ``/model.2/m/0/cv1/conv/Conv`` both give
  ``model_2_m_0_cv1_conv_conv``;
- :func:`strip_runtime_suffix` removes the suffixes runtimes add to a node's name (ONNX Runtime's
  ``_nchwc`` and ``_token_N``, TensorRT's ``_clone_N``) and returns ``None`` when there is none;
- :func:`split_fused` takes apart a fused name in TensorRT's grammar: parts joined by ``" + "``,
  point-wise groups ``PWN(a, PWN(b, c))``, and Myelin ranges ``{ForeignNode[first...last]}``.
  A name that is not fused comes back as its own single part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_RUNTIME_SUFFIX = re.compile(r"(?:_nchwc|_token_\d+|_clone_\d+)$")
_PWN = re.compile(r"^PWN\((?P<inner>.*)\)$", re.DOTALL)
_ONNX_LAYER = re.compile(r"\[ONNX Layer: (?P<name>[^\]\x1e\x1f]*)\]")

#: Deepest PWN(...) nesting taken apart; deeper names are kept whole (they still join by name).
_MAX_DEPTH = 32


def normalize(name: str) -> str:
    """Lower case, every run of non-alphanumerics one ``_``, no ``_`` at either end."""
    return _NON_ALNUM.sub("_", name.lower()).strip("_")


def strip_runtime_suffix(name: str) -> str | None:
    """``name`` without a runtime-added suffix, or ``None`` when it has none."""
    stripped = _RUNTIME_SUFFIX.sub("", name)
    return stripped if stripped != name and stripped else None


@dataclass(frozen=True)
class FusedName:
    """The layers a fused name covers: single ``parts`` and inclusive ``ranges`` (first, last)."""

    parts: tuple[str, ...]
    ranges: tuple[tuple[str, str], ...] = ()

    @property
    def is_fused(self) -> bool:
        return len(self.parts) + len(self.ranges) > 1 or bool(self.ranges)


def split_fused(name: str) -> FusedName:
    """Take ``name`` apart (see the module docstring); parts keep their order of appearance."""
    parts: list[str] = []
    ranges: list[tuple[str, str]] = []
    _split_into(name, parts, ranges, 0)
    if not parts and not ranges:
        return FusedName((name,))
    return FusedName(tuple(parts), tuple(ranges))


def _split_into(text: str, parts: list[str], ranges: list[tuple[str, str]], depth: int) -> None:
    for piece in _split_top_level(text, " + "):
        chunk = piece.strip()
        if not chunk:
            continue
        foreign = foreign_range(chunk)
        pwn = _PWN.match(chunk) if depth < _MAX_DEPTH else None
        if foreign:
            ranges.append(foreign)
        elif pwn:
            for arg in _split_top_level(pwn["inner"], ","):
                _split_into(arg, parts, ranges, depth + 1)
        else:
            parts.append(chunk)


def foreign_range(chunk: str) -> tuple[str, str] | None:
    """``{ForeignNode[first...last]}`` (braces optional) as ``(first, last)``, stripped; else ``None``.

    ``first`` ends at the first ``...`` after its first character. ``str`` slicing and one ``find``:
    linear in the name's length (the former pattern's ``.+?`` then ``.+`` backtracked quadratically
    over names with many ``...``).
    """
    body = chunk[1:] if chunk.startswith("{") else chunk
    if not body.startswith("ForeignNode["):
        return None
    body = body[len("ForeignNode["):]
    if body.endswith("}"):
        body = body[:-1]
    if not body.endswith("]"):
        return None
    body = body[:-1]
    cut = body.find("...", 1)
    if cut < 0 or cut + 3 >= len(body) or "\n" in body:
        return None
    return body[:cut].strip(), body[cut + 3:].strip()


def _split_top_level(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` where it is not inside parentheses or brackets."""
    pieces: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(separator, i):
            pieces.append(text[start:i])
            i += len(separator)
            start = i
            continue
        i += 1
    pieces.append(text[start:])
    return pieces


def onnx_layers_in_metadata(metadata: str) -> tuple[str, ...]:
    """The ONNX node names in a TensorRT layer's ``Metadata`` (``[ONNX Layer: a]\\x1f[ONNX Layer: b]``)."""
    seen: dict[str, None] = {}
    for match in _ONNX_LAYER.finditer(metadata):
        name = match["name"].strip()
        if name:
            seen.setdefault(name, None)
    return tuple(seen)
