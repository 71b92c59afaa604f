"""Every command the README and the documentation show with its output runs here, and its output is compared with
what the page shows: a page whose example drifts from the program fails this test.

What is an example: a fenced block with the info string ``console`` in ``README.md`` or ``docs/**/*.md``. In it,
a line starting with ``$ `` is a command (a line ending in ``\\`` continues it), and the lines up to the next
command are its output (stdout and stderr together, as a terminal shows them). A line that starts with ``...``
stands for any number of lines (an elided part; the rest of the line may say what was left out). A block
written as ``text`` or ``bash`` is not an example.

How it runs: each command in ``bash``, in one working folder shared by all the examples (``out/`` in it; the
Horizon fixtures as ``profiler.log`` and ``model.json``), with this checkout's ``layerscope`` and ``python``
first on ``PATH``, a 120-column terminal without colour (``COLUMNS=120``, ``NO_COLOR``), and the test's own
cache folder. A block that reads a file under ``out/`` that another block writes runs that block first.

How it compares, chosen by an HTML comment on the line before the block (invisible on the rendered page):

- no comment: the output must be the page's exactly (an estimate, an import, a comparison of estimates are
  deterministic: no number is masked). Only paths are masked: the cache folder reads ``~/.cache/layerscope``.
- ``<!-- docs-example: measured -->``: the output depends on the machine (times, k, FPS, shares of measured
  time, which layers are slowest, warnings about a noisy machine). Its *labels* are compared: the column
  headers of every table and the label of every summary line (``latency``, ``coverage``, ...), in order; a line
  whose label is listed after ``optional:`` (``<!-- docs-example: measured; optional: WARNING -->``) may be
  absent on either side.
- ``<!-- docs-example: skip: REASON -->``: the block is reported as skipped with its reason (for a run that
  takes minutes, or needs something this checkout does not have).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: The files the examples name, copied into the working folder: name there -> file here.
WORKSPACE_FILES = {
    "profiler.log": FIXTURES / "importers" / "horizon" / "s100_profiler.log",
    "model.json": FIXTURES / "importers" / "horizon" / "s100_model.json",
}
#: The width of the terminal the pages show.
COLUMNS = 120
COMMAND_TIMEOUT_S = 300
_DIRECTIVE = re.compile(r"^<!--\s*docs-example:\s*(?P<body>.*?)\s*-->$")
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class Command:
    """One ``$`` command of an example and the output the page shows for it (lines, right-stripped)."""

    text: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """One ``console`` block: where it is, how it is compared, its commands."""

    page: str
    line: int
    mode: str  # "exact", "measured" or "skip"
    reason: str = ""
    optional: tuple[str, ...] = ()
    commands: tuple[Command, ...] = field(default_factory=tuple)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def writes(self) -> set[str]:
        """Paths under ``out/`` the commands write with ``-o``/``--json``/``--html``."""
        return {m for c in self.commands for m in re.findall(r"(?:-o|--json|--html|--trace)\s+(out/\S+)", c.text)}

    def reads(self) -> set[str]:
        """Paths under ``out/`` the commands name that they do not write themselves."""
        named = {m for c in self.commands for m in re.findall(r"(?<![\w/])(out/[\w./-]+)", c.text)}
        return named - self.writes()


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _directive(lines: list[str], fence_index: int) -> tuple[str, str, tuple[str, ...]]:
    """The (mode, reason, optional labels) of the comment on the line before the fence, else exact."""
    match = _DIRECTIVE.match(lines[fence_index - 1].strip()) if fence_index else None
    if match is None:
        return "exact", "", ()
    body = match.group("body")
    if body.startswith("skip"):
        reason = body.partition(":")[2].strip()
        assert reason, f"line {fence_index}: a skipped example says why (<!-- docs-example: skip: REASON -->)"
        return "skip", reason, ()
    if body.startswith("measured"):
        optional = body.partition("optional:")[2]
        return "measured", "", tuple(label.strip() for label in optional.split(",") if label.strip())
    raise AssertionError(f"line {fence_index}: unknown docs-example directive {body!r}")


def _commands(block: list[str]) -> tuple[Command, ...]:
    commands: list[Command] = []
    text: list[str] = []
    output: list[str] = []
    continued = False
    for line in block:
        if continued or line.startswith("$ "):
            if not continued and text:
                commands.append(Command(" ".join(text), tuple(output)))
                text, output = [], []
            part = line[2:] if not continued else line
            continued = part.rstrip().endswith("\\")
            text.append(part.rstrip().removesuffix("\\").strip())
        else:
            output.append(line.rstrip())
    if text:
        commands.append(Command(" ".join(text), tuple(output)))
    return tuple(commands)


def collect_examples() -> list[Example]:
    """Every ``console`` block of the README and the docs, in page order."""
    examples: list[Example] = []
    for page in _pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            if lines[index].strip() == "```console":
                end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
                mode, reason, optional = _directive(lines, index)
                examples.append(Example(str(page.relative_to(ROOT)), index + 1, mode, reason, optional,
                                        _commands(lines[index + 1:end])))
                index = end
            index += 1
    return examples


EXAMPLES = collect_examples()


def test_the_pages_have_examples() -> None:
    """The collection finds the examples (a renamed fence would silently test nothing)."""
    pages = {example.page for example in EXAMPLES}
    assert {"README.md", "docs/getting-started.md", "docs/importers.md"} <= pages
    assert all(example.commands for example in EXAMPLES), [e.id for e in EXAMPLES if not e.commands]


# ---------------------------------------------------------------------------------------------------------------
# Comparing


def _matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` equals ``actual``, a line ``...`` in ``expected`` standing for any number of lines."""
    if not expected:
        return not actual
    if expected[0].startswith("..."):
        return any(_matches(expected[1:], actual[start:]) for start in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and _matches(expected[1:], actual[1:])


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1]:
        lines = lines[:-1]
    return lines


def labels(lines: list[str]) -> list[str]:
    """The machine-independent skeleton of a measured output: each table's column headers (the line above a rule
    of ``─``) and each summary line's label (a line at column 0 whose first cell, before two spaces, is a few
    words), numbers masked, spaces collapsed; in order. Table rows, wrapped continuations and prose are left out:
    which layers are slowest and how a sentence wraps depend on the run."""
    out: list[str] = []
    for index, line in enumerate(lines):
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if following and set(following) == {"─"}:
            out.append("header: " + " ".join(_NUMBER.sub("N", line).split()))
        elif line[:1].strip() and "  " in line.strip():
            cell = line.split("  ", 1)[0].strip()
            if len(cell.split()) <= 3 and not _NUMBER.fullmatch(cell):
                out.append("label: " + _NUMBER.sub("N", cell))
    return out


def _without(items: list[str], optional: tuple[str, ...]) -> list[str]:
    return [item for item in items if item.removeprefix("label: ") not in optional]


def compare(example: Example, command: Command, actual: str) -> None:
    """Fail with a diff-like message when the page's output is not what the command printed."""
    got = _trimmed([line.rstrip() for line in actual.splitlines()])
    want = _trimmed(list(command.expected))
    where = f"{example.id}: `$ {command.text}`"
    if example.mode == "measured":
        want_labels, got_labels = _without(labels(want), example.optional), _without(labels(got), example.optional)
        assert want_labels == got_labels, (f"{where}: the page's tables and summary lines are not the command's\n"
                                           f"page:    {want_labels}\ncommand: {got_labels}\n--- output\n{actual}")
    else:
        assert _matches(want, got), f"{where}: the page shows other output than the command prints\n--- output\n" \
                                    + "\n".join(got)


# ---------------------------------------------------------------------------------------------------------------
# Running


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the examples run in, with the files they name."""
    folder = tmp_path_factory.mktemp("docs-examples")
    (folder / "out").mkdir()
    for name, source in WORKSPACE_FILES.items():
        shutil.copyfile(source, folder / name)
    return folder


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env.update({"COLUMNS": str(COLUMNS), "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"})
    return env


def _mask_paths(text: str, workspace: Path) -> str:
    """``text`` with the cache folder as ``~/.cache/layerscope`` and paths in ``workspace`` relative."""
    for cache in (os.environ.get("LAYERSCOPE_CACHE_DIR"), str(Path.home() / ".cache" / "layerscope")):
        if cache:
            text = text.replace(cache.rstrip("/"), "~/.cache/layerscope")
    return text.replace(f"{workspace}/", "")


def run_command(command: Command, workspace: Path) -> str:
    """What ``command`` prints (stdout and stderr together), paths masked; a non-zero exit fails the test."""
    shell = shutil.which("bash") or "/bin/bash"
    done = subprocess.run([shell, "-c", command.text], cwd=workspace, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"`$ {command.text}` exited {done.returncode}\n{done.stdout}"
    return _mask_paths(done.stdout, workspace)


def _run_producers(example: Example, workspace: Path) -> None:
    """Run the examples that write the files under ``out/`` this one reads, where those are not there yet."""
    for needed in sorted(example.reads()):
        producer = next((other for other in EXAMPLES if needed in other.writes() and other != example), None)
        if producer is not None and not (workspace / needed).exists():
            for command in producer.commands:
                run_command(command, workspace)


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.id for example in EXAMPLES])
def test_example(example: Example, workspace: Path) -> None:
    """The commands of the example print what the page shows (see the module's docstring for how)."""
    if example.mode == "skip":
        pytest.skip(example.reason)
    _run_producers(example, workspace)
    for command in example.commands:
        compare(example, command, run_command(command, workspace))


# ---------------------------------------------------------------------------------------------------------------
# The comparison itself


def test_elision_and_labels() -> None:
    """``...`` stands for lines, nothing else does; labels keep headers and summary labels, not rows."""
    assert _matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert _matches(["a", "...", "b"], ["a", "b"])
    assert not _matches(["a", "...", "d"], ["a", "b", "c"])
    assert not _matches(["a", "b"], ["a", "c"])
    output = ["Top 2 of 9 layers", "", " #  layer  op    meas. µs", " ─────────────────", " 1  n1     Conv  5.0",
              "latency     P50 1.00 ms  P90 2.00 ms", "steadiness  run-to-run CV 7.5%; median moved",
              "            (+23.2% in the profiled runs)", "UNSTEADY MACHINE: its speed moved 9% during this"]
    assert labels(output) == ["header: # layer op meas. µs", "label: latency", "label: steadiness"]


# ---------------------------------------------------------------------------------------------------------------
# Regenerating the pages' outputs from real runs


def _regenerated(command: Command, actual: str) -> list[str] | None:
    """The page's output for ``command`` rewritten from ``actual``: all of it, or, after a leading ``...`` line,
    the part from the page's next line on (``None`` when that line is no longer printed)."""
    got = _trimmed([line.rstrip() for line in actual.splitlines()])
    want = list(command.expected)
    if not want or not want[0].startswith("..."):
        return got
    if len(want) == 1:
        return want
    anchor = next((i for i, line in enumerate(got) if line == want[1]), None)
    return None if anchor is None else [want[0], *got[anchor:]]


def regenerate(pages: list[str], measured: bool, folder: Path) -> None:
    """Rewrite the outputs of the pages' examples (all pages when ``pages`` is empty) from real runs in
    ``folder``; measured examples only when ``measured``. The commands run as the test runs them."""
    (folder / "out").mkdir(parents=True, exist_ok=True)
    for name, source in WORKSPACE_FILES.items():
        shutil.copyfile(source, folder / name)
    for example in sorted(EXAMPLES, key=lambda e: (e.page, -e.line)):  # bottom up: the lines above stay put
        if (pages and example.page not in pages) or example.mode == "skip" or (example.mode == "measured"
                                                                              and not measured):
            continue
        _run_producers(example, folder)
        lines = (ROOT / example.page).read_text(encoding="utf-8").split("\n")
        end = next(i for i in range(example.line, len(lines)) if lines[i].strip() == "```")
        block = lines[example.line:end]
        rebuilt: list[str] = []
        starts = [i for i, line in enumerate(block) if line.startswith("$ ") and not _continues(block, i)]
        for start, command in zip(starts, example.commands, strict=True):
            stop = start + 1
            while _continues(block, stop) and stop < len(block):
                stop += 1
            output = _regenerated(command, run_command(command, folder))
            if output is None:
                print(f"{example.id}: kept `$ {command.text}` (its output changed where the page elides it)")
                output = list(command.expected)
            rebuilt.extend(block[start:stop] + output)  # the page's own line breaks in the command
        lines[example.line:end] = rebuilt
        (ROOT / example.page).write_text("\n".join(lines), encoding="utf-8")
        print(f"{example.id}: rewritten")


def _continues(lines: list[str], index: int) -> bool:
    """``lines[index]`` belongs to the command begun above it (the line before ends in a backslash)."""
    return 0 < index < len(lines) and lines[index - 1].rstrip().endswith("\\")


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="Rewrite the docs' example outputs from real runs (exact ones; "
                                                 "--measured: the measured ones too). Review the diff.")
    parser.add_argument("pages", nargs="*", help="pages relative to the checkout, e.g. docs/importers.md")
    parser.add_argument("--measured", action="store_true")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        regenerate(arguments.pages, arguments.measured, Path(temporary))
