"""Human-readable numbers for reports: counts, bytes, microseconds; formatters that read ``-`` for a missing
value (anything but a number: ``None``, a bool)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def human_count(value: float) -> str:
    """``4089184256`` -> ``"4.09 G"``; small numbers stay whole."""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {suffix}"
    return f"{value:.0f}"


def human_bytes(value: float) -> str:
    """Bytes in binary units: ``1536`` -> ``"1.50 KiB"``."""
    for scale, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {suffix}"
    return f"{value:.0f} B"


def human_us(value: float) -> str:
    """Microseconds with a unit that suits the size: ``1234.5`` -> ``"1.23 ms"``."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f} s"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.2f} ms"
    return f"{value:.1f} µs"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def fixed(digits: int, *, signed: bool = False, scale: float = 1.0, suffix: str = "") -> Callable[[Any], str]:
    """A formatter: ``scale * value`` to ``digits`` decimals (a sign when ``signed``), then ``suffix``; ``-``
    for a missing value. ``fixed(1, signed=True, scale=100, suffix="%")(0.25)`` -> ``"+25.0%"``."""
    sign = "+" if signed else ""

    def fmt(value: Any) -> str:
        return f"{scale * value:{sign}.{digits}f}{suffix}" if _number(value) else "-"

    return fmt


def us_text(value: Any) -> str:
    """:func:`human_us` of ``value``; ``-`` for a missing value."""
    return human_us(value) if _number(value) else "-"
