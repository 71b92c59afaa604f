"""One typed run outside the run-file package: no module outside ``layerscope/runfile/`` accepts a run as "a typed
run or its JSON document" (issue #36: dicts only at the file boundary, where ``runfile.io.as_run`` / ``load`` convert
a document once).

Read from the source (AST), so comments and strings never count. A module fails when it names ``RunLike`` (or
imports an alias of it from ``layerscope.runfile``), or when an annotation is a union of ``RunFile`` (or the report
views' ``Run``) with a dict or mapping type: ``dict[str, Any] | RunFile``, ``RunFile | Mapping[str, Any]``,
``Union[RunFile, dict]`` ...
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "layerscope"
OWNER = SRC / "runfile"

#: Modules (path relative to ``src/layerscope``) that still hold the union, each with why; the lead empties this
#: list as the work lands. A module listed here that no longer holds the union fails too, so the list cannot
#: outlive its reason.
PENDING: Mapping[str, str] = {}

#: The names a typed run goes by outside ``runfile/`` (``report.views.common.Run`` is ``RunFile``).
TYPED = {"RunFile", "Run"}
#: Annotations that stand for a run's JSON document.
MAPPINGS = {"dict", "Dict", "Mapping", "MutableMapping"}


def _aliases() -> set[str]:
    """``RunLike`` and the names ``runfile/`` binds to it (``Document = RunLike``)."""
    names = {"RunLike"}
    for path in OWNER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == "RunLike"):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _union_members(node: ast.expr) -> Iterator[ast.expr]:
    """The members of a union annotation (``A | B | C``, ``Union[A, B]``, ``Optional[A]``), else the node itself."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        yield from _union_members(node.left)
        yield from _union_members(node.right)
    elif isinstance(node, ast.Subscript) and _name(node.value) in {"Union", "Optional"}:
        inner = node.slice
        for member in inner.elts if isinstance(inner, ast.Tuple) else [inner]:
            yield from _union_members(member)
    else:
        yield node


def _name(node: ast.expr) -> str:
    """The last name of ``node``: ``Mapping`` for ``Mapping``, ``collections.abc.Mapping`` or ``Mapping[str, Any]``."""
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.strip()
    return ""


def _parsed(annotation: ast.expr) -> ast.expr:
    """``annotation``, parsed when it is written as a string (``"RunFile | dict"``)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return annotation
    return annotation


def _is_run_or_document(annotation: ast.expr) -> bool:
    """Whether ``annotation`` (at any depth) is a union of a typed run with a dict or mapping."""
    for node in ast.walk(_parsed(annotation)):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node is not annotation
                and _is_run_or_document(node)):
            return True
        if not isinstance(node, ast.BinOp | ast.Subscript):
            continue
        names = {_name(member) for member in _union_members(node)}
        if len(names) > 1 and names & TYPED and names & MAPPINGS:
            return True
    return False


def _annotations(tree: ast.AST) -> Iterator[tuple[int, ast.expr]]:
    """Every annotation of ``tree``: parameters, returns, annotated assignments (dataclass fields)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if arg is not None and arg.annotation is not None:
                    yield arg.lineno, arg.annotation
            if node.returns is not None:
                yield node.lineno, node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.lineno, node.annotation


def offences(source: str, aliases: set[str]) -> list[str]:
    """Where ``source`` (a module's text) names a dict-or-run union: ``"line N: ..."`` each."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in aliases:
            found.append(f"line {node.lineno}: names {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in aliases:
            found.append(f"line {node.lineno}: names {node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("layerscope.runfile"):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in aliases]
    found += [f"line {line}: annotates {ast.unparse(annotation)}" for line, annotation in _annotations(tree)
              if _is_run_or_document(annotation)]
    return sorted(set(found))


def _modules() -> dict[str, str]:
    """Every module of ``src/layerscope`` outside ``runfile/``: path relative to it -> its text."""
    return {path.relative_to(SRC).as_posix(): path.read_text(encoding="utf-8") for path in sorted(SRC.rglob("*.py"))
            if OWNER not in path.parents}


def test_the_check_sees_each_form_of_the_union() -> None:
    """The detector is not vacuous: each spelling of the union is caught, a typed run alone or a document alone is
    not."""
    caught = [
        "from layerscope.runfile.models import RunLike\n",
        "def f(run: RunLike) -> None: ...\n",
        "def f(run: dict[str, Any] | RunFile) -> None: ...\n",
        "def f(run: RunFile | Mapping[str, Any]) -> None: ...\n",
        "def f(run: 'RunFile | collections.abc.Mapping[str, Any]') -> None: ...\n",
        "def f(run: Union[RunFile, Dict[str, Any]]) -> None: ...\n",
        "def f(run: PathLike | Run | dict) -> None: ...\n",
        "class R:\n    run: RunFile | dict[str, Any]\n",
        "def f() -> list[RunFile | dict[str, Any]]: ...\n",
        "from layerscope.runfile.derived import Document\n",
    ]
    for source in caught:
        assert offences(source, {"RunLike", "Document"}), source
    allowed = [
        "def f(run: RunFile, document: Mapping[str, Any]) -> dict[str, Any]: ...\n",
        "def f(run: PathLike | RunFile) -> RunFile | None: ...\n",
        "def f(x: dict[str, int] | list[int]) -> None: ...\n",
        "x = 'RunLike is a word in a string'\n",
    ]
    for source in allowed:
        assert not offences(source, {"RunLike", "Document"}), source
    assert "Document" in _aliases()  # runfile.derived's alias of RunLike is found, so importing it counts


def test_no_module_outside_runfile_accepts_a_run_or_its_document() -> None:
    aliases = _aliases()
    modules = _modules()
    assert len(modules) > 100 and "api.py" in modules and "report/tables.py" in modules
    found = {path: where for path, source in modules.items() if (where := offences(source, aliases))}
    unexpected = {path: where for path, where in found.items() if path not in PENDING}
    assert not unexpected, "a dict-or-run union outside runfile/ (take RunFile; convert a document once with " \
                           f"runfile.io.as_run where it enters): {unexpected}"
    done = sorted(set(PENDING) - set(found))
    assert not done, f"no longer pending (remove from PENDING): {done}"
