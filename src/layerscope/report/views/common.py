"""Values every view shares: number and text coercion, the ``Run`` alias, summary rows.

The HTML report, the Markdown summary, the CSV table and the Perfetto trace are all drawn from these, so a
number is computed once and reads the same everywhere. Contract:

- every function takes the typed run (:class:`~layerscope.runfile.models.RunFile`, converted once by the entry
  point with :func:`~layerscope.runfile.io.as_run`), reads it by attribute, and never measures or reads files;
- a run may hold an estimate, a measurement, a timeline, an import, or any mix: each function returns
  what the run holds and ``None`` / empty where it holds nothing; :func:`missing_notes` says what is absent
  and which command fills it;
- values a vendor did not report are ``null`` in the run and ``None`` here, never 0;
- the output depends only on the run: the same run gives the same sections, in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerscope.runfile.models import Layer, RunFile

Run = RunFile


# --------------------------------------------------------------------------------------------------- values


def num(value: Any) -> float | None:
    """``value`` as a float when it is a number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def measured_us(layer: Layer) -> float | None:
    """A layer's measured time, as :func:`layerscope.runfile.layer_measured_us` defines it (0 when eliminated)."""
    return layer.measured_us


def estimated_us(layer: Layer) -> float | None:
    """A layer's estimated latency, ``None`` when the run holds no estimate for it."""
    return layer.estimated_us


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value`` (> 0): a chart axis's end or tick step."""
    power = 10.0 ** math.floor(math.log10(value))
    return next(power * f for f in (1, 2, 2.5, 5, 10) if power * f >= value)


def shape_text(shape: Sequence[Any] | None) -> str:
    """``[1, 3, 640, 640]`` -> ``"1x3x640x640"``; a scalar is ``"scalar"``; unknown is ``"?"``."""
    if shape is None:
        return "?"
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


# ----------------------------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One line of a summary section: a label and its value, formatted for reading."""

    label: str
    value: str


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _maps(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    number = num(value)
    return int(number) if number is not None else None


def _text(value: Any) -> str:
    """A name from the run as text; ``"?"`` when missing."""
    return "?" if value is None else str(value)


def _layer_index(run: Run) -> dict[str, int]:
    """Layer id -> index in the run (links from the experiments to the layer's details)."""
    return {layer.id: i for i, layer in enumerate(run.layers)}
