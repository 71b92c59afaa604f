"""The data flow runs one way: no module imports a package above its own (DESIGN.md, STYLE.md).

model ─▶ costs ─▶ targets ─▶ estimator ─▶ runfile ─▶ measure / run ─▶ runtimes ─▶ importers ─▶ analysis ─▶ report
─▶ workflows ─▶ cli
(an importer of a runtime's profile maps its kernels with that runtime's fusion map, from ``measure``).
Every import of a ``layerscope`` module counts, also one inside a function or under ``TYPE_CHECKING``: a type
that points up the flow is a dependency that points up the flow.

No module imports what another library marks private (a module or name starting with one underscore): its authors
may change it in any release, and no version pin says which.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import layerscope

PACKAGE = Path(layerscope.__file__).parent

#: Rank of each top-level unit of the package; a module may import units of its own rank or below.
RANKS: dict[str, int] = {
    "errors": 0, "fileio": 0, "rounding": 0, "stats": 0, "textsafe": 0, "tracing": 0, "samples": 0, "_lazy": 0,
    "collector": 0, "limits": 0, "tempdirs": 0, "version": 0, "interrupts": 0, "digest": 0, "offload": 0,
    "model": 1,
    "costs": 2,
    "targets": 3,
    "estimator": 4,
    "runfile": 5,
    "measure": 6, "run": 6, "run_merge": 6,
    "runtimes": 7,
    "importers": 8,
    "analysis": 9,
    "report": 10,
    "workflows": 11, "api": 11, "sweep": 11,
    "cli": 12, "__main__": 12, "__init__": 12,
}
#: Upward imports allowed (none).
ALLOWED: set[tuple[str, str]] = set()
#: A report is a function of the saved run alone: what it needs (thresholds too) is in the run.
FORBIDDEN = {"report": {"measure", "importers", "run"}}


def _unit(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(tree: ast.AST) -> Iterator[tuple[str, list[str]]]:
    """Every absolute import anywhere in ``tree``: ``(module, the names taken from it)``, one per module of an
    ``import a, b`` (no names) and one per ``from module import x, y``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)


def _imported_units(tree: ast.AST) -> set[str]:
    units = set()
    for module, names in _imports(tree):
        paths = [module] if module != "layerscope" else [f"layerscope.{name}" for name in names]
        units.update(p.split(".")[1] for p in paths if p.startswith("layerscope.") and len(p.split(".")) > 1)
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


def _module_name(path: Path) -> str:
    parts = ("layerscope", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, known: set[str]) -> set[str]:
    """The ``layerscope`` modules ``path`` imports (anywhere in it): ``from a.b import c`` is module ``a.b.c`` when
    that is a module, else ``a.b``; the package ``layerscope`` itself (run by every import) is left out."""
    found = set()
    for imported, names in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        for name in [f"{imported}.{n}" for n in names] if names else [imported]:
            module = name
            while module and module not in known:
                module = module.rpartition(".")[0]
            if module and module != "layerscope":
                found.add(module)
    return found


def _cycles_across_packages(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` (module -> modules it imports) that hold modules of more
    than one unit (``layerscope.X``): import circles between packages."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative (a deep import chain must not recurse)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len({m.split(".")[1] for m in component if m.count(".")}) > 1:
                    found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle_between_packages() -> None:
    paths = {_module_name(p): p for p in _modules()}
    graph = {name: _imported_modules(path, set(paths)) - {name} for name, path in paths.items()}
    assert _cycles_across_packages(graph) == []


def test_the_check_sees_a_circle_between_packages() -> None:
    graph = {"layerscope.api": {"layerscope.sweep.tasks"}, "layerscope.sweep.tasks": {"layerscope.api"},
             "layerscope.report.a": {"layerscope.report.b"}, "layerscope.report.b": {"layerscope.report.a"}}
    assert _cycles_across_packages(graph) == [["layerscope.api", "layerscope.sweep.tasks"]]


#: Modules outside ``runtimes/`` that import a runtime library (``onnxruntime``, ``openvino``), each with its reason.
RUNTIME_IMPORTS: dict[str, str] = {
    "model/shapes.py": "shape inference: ONNX Runtime's symbolic shape inference, and running the model to observe "
                       "shapes static inference left out (model/ sits below runtimes/)",
    "model/fold_if.py": "folding an If to the branch the inputs take: its condition computed by running the model",
    "model/bounded.py": "running a model within the run_s budget, stoppable by a signal (shapes, If folding)",
    "targets/host.py": "the host probe: which runtime and providers this machine has",
}


def _runtime_libraries(tree: ast.AST) -> set[str]:
    """The runtime libraries (``onnxruntime``, ``openvino``) a module imports anywhere in it."""
    return {library for module, _ in _imports(tree) if (library := module.split(".")[0]) in ("onnxruntime", "openvino")}


def test_runtime_libraries_are_imported_by_runtime_packages_only() -> None:
    outside = {p.relative_to(PACKAGE).as_posix(): p for p in _modules() if _unit(p) != "runtimes"}
    importing = {rel for rel, path in outside.items()
                 if _runtime_libraries(ast.parse(path.read_text(encoding="utf-8")))}
    assert importing - set(RUNTIME_IMPORTS) == set(), "import onnxruntime/openvino in runtimes/ (or give a reason)"
    assert set(RUNTIME_IMPORTS) - importing == set(), "these no longer import a runtime: drop them from the list"


def test_the_check_sees_a_runtime_import() -> None:
    tree = ast.parse("def f():\n    import openvino.runtime as ov\n    from onnxruntime import InferenceSession\n")
    assert _runtime_libraries(tree) == {"onnxruntime", "openvino"}


def _private_imports(tree: ast.AST) -> list[str]:
    """The modules and names of other libraries (the standard library's included) a module imports that their
    authors mark private: a component of the dotted path, or an imported name, that starts with one underscore
    (``pydantic._internal``, ``from onnx.helper import _attr``); ``__future__`` and dunder names are public."""
    return [path for module, names in _imports(tree) for path in (module, *(f"{module}.{n}" for n in names))
            if path.split(".")[0] != "layerscope"
            and any(part.startswith("_") and not part.startswith("__") for part in path.split("."))]


def test_no_import_of_another_librarys_private_module() -> None:
    found = {p.relative_to(PACKAGE).as_posix(): imports for p in _modules()
             if (imports := _private_imports(ast.parse(p.read_text(encoding="utf-8"))))}
    assert found == {}


def test_the_check_sees_a_private_import() -> None:
    tree = ast.parse("from __future__ import annotations\nimport pydantic._internal._model_construction\n"
                     "def f():\n    from onnx.helper import _attr_type\n    from layerscope._lazy import x\n"
                     "    from numpy import __version__\n")
    assert _private_imports(tree) == ["pydantic._internal._model_construction", "onnx.helper._attr_type"]
