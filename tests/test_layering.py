"""The data flow runs one way: no module imports a package above its own (DESIGN.md, STYLE.md).

model ─▶ costs ─▶ targets ─▶ estimate ─▶ runfile ─▶ measure / run ─▶ runtimes ─▶ importers ─▶ analysis ─▶ report
─▶ workflows ─▶ cli
(an importer of a runtime's profile maps its kernels with that runtime's fusion map, from ``measure``).
Every import of a ``layerscope`` module counts, also one inside a function or under ``TYPE_CHECKING``: a type
that points up the flow is a dependency that points up the flow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import layerscope

PACKAGE = Path(layerscope.__file__).parent

#: Rank of each top-level unit of the package; a module may import units of its own rank or below.
RANKS: dict[str, int] = {
    "errors": 0, "fileio": 0, "rounding": 0, "stats": 0, "textsafe": 0, "tracing": 0, "samples": 0, "_lazy": 0,
    "collector": 0, "limits": 0, "tempdirs": 0,
    "model": 1,
    "costs": 2,
    "targets": 3,
    "estimate": 4,
    "runfile": 5,
    "measure": 6, "run": 6, "run_merge": 6,
    "runtimes": 7,
    "importers": 8,
    "analysis": 9,
    "report": 10,
    "workflows": 11, "api": 11, "sweep": 11,
    "cli": 12, "__main__": 12, "__init__": 12,
}
#: The one upward import allowed, and why: ``layerscope.estimate`` names both this package and the API's function
#: (``layerscope.estimate(model, ...)``); Python binds the name to the package once it is imported, so the package
#: is made callable and forwards the call, importing the API only then.
ALLOWED = {("estimate/__init__.py", "api")}
#: A report is a function of the saved run alone: what it needs (thresholds too) is in the run.
FORBIDDEN = {"report": {"measure", "importers", "run"}}


def _unit(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_units(tree: ast.AST) -> set[str]:
    units = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "layerscope" else [f"layerscope.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        units.update(n.split(".")[1] for n in names if n.startswith("layerscope.") and len(n.split(".")) > 1)
    return units


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "templates" not in p.parts)


def test_every_unit_has_a_rank() -> None:
    units = {_unit(p) for p in _modules()}
    assert units <= set(RANKS), f"give these a rank in RANKS: {sorted(units - set(RANKS))}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_the_data_flow(path: Path) -> None:
    own = _unit(path)
    rel = path.relative_to(PACKAGE).as_posix()
    bad = []
    for unit in sorted(_imported_units(ast.parse(path.read_text(encoding="utf-8")))):
        if unit == own or unit not in RANKS or (rel, unit) in ALLOWED:
            continue
        if RANKS[unit] > RANKS[own] or unit in FORBIDDEN.get(own, ()):
            bad.append(unit)
    assert not bad, f"{path.relative_to(PACKAGE)} ({own}, rank {RANKS[own]}) imports {bad} from higher up the flow"


def test_the_check_sees_an_upward_import() -> None:
    tree = ast.parse("def f():\n    from layerscope.report.html import render\n")
    assert _imported_units(tree) == {"report"}
