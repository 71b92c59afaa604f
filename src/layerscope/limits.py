"""Budgets checked before work: how large an input may be before layerscope refuses it with one line (exit 2).

Each budget has a name, a default and an environment variable that raises (or lowers) it:
``LAYERSCOPE_LIMIT_<NAME>`` (``LAYERSCOPE_LIMIT_NODES=5000000``); the CLI's global ``--limit NAME=VALUE`` sets the
same variable, so worker processes (a sweep's Ray workers, a bisect's children) see the same budgets. A value
that is not a positive number is bad input (exit 2) naming the variable.

The defaults are far above what real models and vendor files need (the largest public models of the corpus have
~10k nodes; a profiler log of a large model has ~100k lines) and far below what exhausts a machine:

============== ============== ===========================================================================
name           default        what it bounds
============== ============== ===========================================================================
nodes          1,000,000      the nodes of a model's main graph, counted in the file before it is parsed
elements       2**36          the elements of one tensor a model declares (its dims multiplied)
loop_trips     10,000,000     a ``Loop``'s constant trip count, before the model is executed
run_s          600            seconds one execution of the model may take while layerscope observes it
import_lines   2,000,000      the lines of one vendor file an importer reads
============== ============== ===========================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from layerscope.errors import InputError


class OverBudget(InputError):
    """An input is larger than a budget of :data:`BUDGETS` (exit 2); the message names the budget and how to
    raise it."""


@dataclass(frozen=True)
class Budget:
    """One budget: its ``name`` (``--limit NAME=...``), ``default`` and what it counts (``unit``, plural)."""

    name: str
    default: float
    unit: str

    @property
    def variable(self) -> str:
        """The environment variable that overrides the default."""
        return f"LAYERSCOPE_LIMIT_{self.name.upper()}"


BUDGETS: dict[str, Budget] = {budget.name: budget for budget in (
    Budget("nodes", 1_000_000, "nodes"),
    Budget("elements", float(2**36), "elements"),
    Budget("loop_trips", 10_000_000, "iterations"),
    Budget("run_s", 600.0, "seconds"),
    Budget("import_lines", 2_000_000, "lines"),
)}


def limit(name: str) -> float:
    """The budget ``name`` in force: its environment variable when set, else its default. ``InputError`` (exit 2)
    when the variable is not a positive number."""
    budget = BUDGETS[name]
    text = os.environ.get(budget.variable)
    if text is None or not text.strip():
        return budget.default
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise InputError(f"{budget.variable}={text[:40]!r}: a budget must be a positive number of {budget.unit}")
    return value


def check(name: str, value: float, what: str) -> None:
    """``OverBudget`` when ``value`` exceeds the budget ``name``; ``what`` says what was counted and where
    (``"model.onnx: 10,000,000 nodes"``)."""
    allowed = limit(name)
    if value > allowed:
        raise OverBudget(f"{what}: over the budget of {allowed:,.0f} {BUDGETS[name].unit}", hint=raise_hint(name))


def raise_hint(name: str) -> str:
    """How to raise the budget ``name``: the hint of every :class:`OverBudget` on it."""
    return f"raise it with --limit {name}=N (or {BUDGETS[name].variable}=N) if this is meant"


def parse_assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` of ``--limit`` as (name, value); ``InputError`` naming the known budgets otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip().lower().replace("-", "_")
    if not sep or name not in BUDGETS:
        raise InputError(f"--limit {text[:60]!r}: expected NAME=VALUE with NAME one of {', '.join(BUDGETS)}")
    return name, value.strip()
