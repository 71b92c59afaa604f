"""Output redirected to a file reads as a clean text file: no line ends in a space, no line is spaces alone, and
the width is :data:`~layerscope.report.console.WIDE_COLUMNS` when ``COLUMNS`` is not set (not rich's 80-column
fallback, not unbounded)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from rich import box
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.table import Table

from conftest import F32, ModelWriter
from layerscope.cli.main import main
from layerscope.report.console import WIDE_COLUMNS, SafeConsole, strip_line_ends

HORIZON = Path(__file__).resolve().parent / "fixtures" / "importers" / "horizon"


def _conv_model(write_model: ModelWriter) -> Path:
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "c"], ["y"], name="add")]
    weights = {"w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32)}
    return write_model(nodes, [("x", F32, [1, 3, 32, 32])], [("y", F32, [1, 8, 32, 32])], weights)


def _assert_clean(text: str, command: str) -> None:
    lines = text.splitlines()
    assert lines, f"{command} printed nothing"
    ragged = [(number, line) for number, line in enumerate(lines, 1) if line != line.rstrip()]
    assert not ragged, f"{command}: {len(ragged)} of {len(lines)} lines end in whitespace, e.g. {ragged[:3]}"
    widest = max(len(line) for line in lines)
    assert widest <= WIDE_COLUMNS, f"{command}: a line of {widest} columns"


def test_every_command_prints_no_trailing_spaces_when_redirected(
        write_model: ModelWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    model = _conv_model(write_model)
    est, prof, bench, imported = (tmp_path / name for name in ("est.json", "prof.json", "bench.json", "hz.json"))
    commands = [
        ["estimate", str(model), "-t", "rdk-s100", "--timeline", "-o", str(est)],
        ["profile", str(model), "-t", "rdk-s100", "--runs", "3", "--warmup", "1", "-o", str(prof)],
        ["bench", str(model), "--runs", "5", "--warmup", "1", "-o", str(bench)],
        ["import", str(HORIZON / "s100_profiler.log"), str(HORIZON / "s100_model.json"), "-o", str(imported)],
        ["reconcile", str(prof)],
        ["reconcile", str(imported)],
        ["advise", str(prof), "--no-measure"],
        ["report", str(prof), "--format", "table"],
        ["report", str(est), "--format", "table"],
    ]
    capsys.readouterr()
    for argv in commands:
        code = main(argv)
        out = capsys.readouterr().out
        assert code == 0, f"layerscope {' '.join(argv)} -> {code}\n{out}"
        _assert_clean(out, f"layerscope {argv[0]}")


def test_a_table_keeps_its_columns_and_loses_its_padding() -> None:
    table = Table("layer", "µs", box=box.SIMPLE_HEAD, show_edge=False)  # as the layer tables are drawn
    table.add_row("a-long-layer-name", "1.0")
    table.add_row("b", "22.5")
    out = io.StringIO()
    SafeConsole(file=out, width=60, color_system=None).print(table)
    lines = out.getvalue().splitlines()
    assert all(line == line.rstrip() for line in lines)
    plain = io.StringIO()
    Console(file=plain, width=60, color_system=None).print(table)
    assert lines == [line.rstrip() for line in plain.getvalue().splitlines()]  # same text, only the pads gone
    assert any(line != line.rstrip() for line in plain.getvalue().splitlines())  # rich alone pads


def test_emoji_codes_in_names_print_as_written() -> None:
    """rich reads ``:name:`` as an emoji code by default: a layer named ``conv:smile:1`` printed as ``conv😄1``."""
    table = Table("layer", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_row("conv:smile:1")
    out = io.StringIO()
    console = SafeConsole(file=out, width=60, color_system=None)
    console.print(table)
    console.print("tail :thumbs_up:")
    assert "conv:smile:1" in out.getvalue() and "tail :thumbs_up:" in out.getvalue()  # not replaced by emoji


def test_strip_line_ends_keeps_what_shows() -> None:
    """Spaces before a line break go (a line of spaces becomes empty); text after the last break, spaces inside a
    line and, with ``keep_background``, spaces on a coloured background stay."""
    segments = [Segment("a b  "), Segment("   "), Segment("\n"), Segment("    \n  x "), Segment(" tail ")]
    assert "".join(s.text for s in strip_line_ends(segments)) == "a b\n\n  x  tail "
    shaded = [Segment("ab"), Segment("  ", Style(bgcolor="red")), Segment("\n")]
    assert "".join(s.text for s in strip_line_ends(shaded, keep_background=True)) == "ab  \n"
    assert "".join(s.text for s in strip_line_ends(shaded)) == "ab\n"


def test_a_render_on_another_thread_is_cleaned_while_one_is_under_way() -> None:
    """A progress bar's refresh thread renders beside the main thread on one console: each thread's top-level render
    cleans its own segments (the console cleans once per top-level render, not at every level of nesting)."""
    import threading

    console = SafeConsole(file=io.StringIO(), width=80, color_system=None)
    table = Table("name")
    table.add_row("conv\x1b1")
    under_way = console.render(table)
    first = next(under_way)  # the main thread is inside a render
    other: list[str] = []
    thread = threading.Thread(target=lambda: other.extend(s.text for s in console.render("relu\x07\x1b2")))
    thread.start()
    thread.join()
    rest = "".join([first.text, *(s.text for s in under_way)])
    assert "relu2" in "".join(other) and not any(c in "".join(other) for c in "\x07\x1b")
    assert "conv1" in rest and "\x1b" not in rest
