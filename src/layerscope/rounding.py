"""Rounding many floats at once, exactly as Python's :func:`round` does one at a time.

numpy's ``np.round(x, n)`` scales, rounds and scales back, so it can differ from ``round(x, n)`` (which rounds the
exact decimal value of ``x``) in the last bit; the run file's bytes must not depend on which one wrote them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

#: Scaled values at or beyond this are left to :func:`round` (their spacing is no longer well below 1/2).
_EXACT_LIMIT = 2.0**51


def rounded(values: npt.ArrayLike, digits: int) -> list[float]:
    """``[round(v, digits) for v in values]`` (``digits`` >= 0), the same floats bit for bit, vectorized.

    ``round(v, n)`` is the float nearest to ``m / 10**n``, ``m`` the integer nearest to the exact ``v * 10**n``
    (ties to even); the float division ``m / 10.0**n`` gives that float whenever ``m`` is exact. ``m`` is taken as
    ``rint`` of the computed product, which is off from the exact one by at most a unit in its last place, so
    ``rint`` finds the same integer unless the product lies within a few units of a half: those values, and
    non-finite or huge ones, are rounded by :func:`round` itself.
    """
    if digits < 0:
        raise ValueError(f"digits must be >= 0, not {digits}")
    x = np.asarray(values, dtype=np.float64)
    scale = 10.0**digits
    with np.errstate(invalid="ignore", over="ignore"):
        product = x * scale
        magnitude = np.abs(product)
        near_half = np.abs(magnitude - np.floor(magnitude) - 0.5) <= 4 * np.spacing(magnitude)
        risky = ~(magnitude < _EXACT_LIMIT) | near_half
        result: list[float] = (np.rint(product) / scale).tolist()
    for i in np.flatnonzero(risky).tolist():
        result[i] = round(float(x[i]), digits)
    return result


def rounded_or_none(values: npt.ArrayLike, present: Sequence[bool], digits: int) -> list[float | None]:
    """:func:`rounded`, with ``None`` where ``present`` is false."""
    return [v if keep else None for v, keep in zip(rounded(values, digits), present, strict=True)]


__all__ = ["rounded", "rounded_or_none"]
