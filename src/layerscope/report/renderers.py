"""One renderer protocol, one implementation per format: ``render(run) -> str | bytes``.

:data:`RENDERERS` maps a format's name to its renderer; ``layerscope report RUN --format NAME`` and
:meth:`layerscope.api.Run.report` both go through it, so a format renders the same from the CLI and from
Python. Every renderer is a pure function of the saved run (the annotated model also reads the model file the
run names, checked by sha256). Formats:

- ``terminal``: what the command that made the run printed (:func:`~layerscope.report.command_terminal.command_report`),
  as plain text;
- ``html``: the self-contained HTML report; ``csv``: one row per layer; ``md``: the Markdown summary;
- ``trace``: the Perfetto / Chrome trace (bytes; gzip-compressed with ``compress``);
- ``onnx``: the run's model with the run's numbers on its nodes (bytes).

Options a format takes are fields of its renderer (:func:`get_renderer` sets them): ``top`` and ``width`` for
``terminal``, ``compress`` for ``trace``, ``model_path`` for ``onnx``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from layerscope.errors import InputError
from layerscope.runfile.models import RunFile


@runtime_checkable
class Renderer(Protocol):
    """A report format: its name, the file suffix it is written under, whether it is bytes, and ``render``."""

    @property
    def name(self) -> str: ...

    @property
    def suffix(self) -> str: ...

    @property
    def binary(self) -> bool: ...

    def render(self, run: RunFile) -> str | bytes:
        """The report of ``run``: ``bytes`` when :attr:`binary`, else text."""
        ...


@dataclass(frozen=True)
class TerminalRenderer:
    """What the command that made the run printed, as plain text ``width`` columns wide (``None``: ``COLUMNS``,
    else 200); ``top``: rows of the layer table (``None``: the command's default)."""

    top: int | None = None
    width: int | None = None
    name: str = "terminal"
    suffix: str = ".txt"
    binary: bool = False

    def render(self, run: RunFile) -> str:
        from layerscope.report.command_terminal import command_report
        from layerscope.report.console import render_text

        return render_text(command_report(run, self.top), self.width)


@dataclass(frozen=True)
class HtmlRenderer:
    """The self-contained HTML report (offline: no script or style from elsewhere)."""

    name: str = "html"
    suffix: str = ".html"
    binary: bool = False

    def render(self, run: RunFile) -> str:
        from layerscope.report.html import render_html  # Jinja and the templates only here

        return render_html(run)


@dataclass(frozen=True)
class CsvRenderer:
    """One row per layer, namespaced columns (``cost.*``, ``est.*``, ``meas.*``)."""

    name: str = "csv"
    suffix: str = ".csv"
    binary: bool = False

    def render(self, run: RunFile) -> str:
        from layerscope.report.tables import layers_csv

        return layers_csv(run)


@dataclass(frozen=True)
class MarkdownRenderer:
    """The Markdown summary, for a pull request or a forum post."""

    name: str = "md"
    suffix: str = ".md"
    binary: bool = False

    def render(self, run: RunFile) -> str:
        from layerscope.report.tables import markdown_summary

        return markdown_summary(run)


@dataclass(frozen=True)
class TraceRenderer:
    """The Perfetto / Chrome trace; gzip-compressed when ``compress``."""

    compress: bool = False
    name: str = "trace"
    suffix: str = ".json"
    binary: bool = True

    def render(self, run: RunFile) -> bytes:
        from layerscope.report.perfetto import trace_bytes

        return trace_bytes(run, compress=self.compress)


@dataclass(frozen=True)
class AnnotatedModel:
    """The annotated model's bytes, and how many nodes got the run's numbers or had no layer of the run."""

    data: bytes
    annotated: int
    unmatched: int


def annotated_model(run: RunFile, model_path: Path | None = None) -> AnnotatedModel:
    """The run's model (``model_path``, else the run's ``model.path``; same sha256 or ``InputError``) with the
    run's numbers on its nodes."""
    import onnx  # only here: a report from the run file alone does not need it

    from layerscope.report.annotate import annotate_model, check_model

    source = check_model(run, model_path)
    try:
        model = onnx.load_model(str(source))
    except Exception as exc:  # onnx raises several types for a corrupt file
        raise InputError(f"{source}: cannot read the model ({exc})") from None
    result = annotate_model(model, run)
    try:
        data = result.model.SerializeToString()
    except ValueError as exc:  # protobuf's 2 GB limit
        raise InputError(f"{source}: the annotated model cannot be written as one file ({exc})") from None
    return AnnotatedModel(data, result.annotated, result.unmatched)


@dataclass(frozen=True)
class OnnxRenderer:
    """The run's model with the run's numbers on its nodes (Netron shows them); ``model_path`` when the model
    is no longer at the run's ``model.path``."""

    model_path: Path | None = None
    name: str = "onnx"
    suffix: str = ".onnx"
    binary: bool = True

    def render(self, run: RunFile) -> bytes:
        return annotated_model(run, self.model_path).data


#: Format name -> its renderer, with default options.
RENDERERS: Mapping[str, Renderer] = {
    r.name: r for r in (TerminalRenderer(), HtmlRenderer(), CsvRenderer(), MarkdownRenderer(), TraceRenderer(),
                        OnnxRenderer())
}
#: The formats, in the order help lists them.
FORMATS: tuple[str, ...] = tuple(RENDERERS)


def get_renderer(name: str, **options: Any) -> Renderer:
    """The renderer of format ``name`` with ``options`` set (those it does not take are ignored);
    ``InputError`` for an unknown format."""
    renderer = RENDERERS.get(name)
    if renderer is None:
        raise InputError(f"unknown report format {name!r}; known: {', '.join(FORMATS)}")
    fields = {f.name for f in dataclasses.fields(renderer)}  # type: ignore[arg-type]
    return dataclasses.replace(renderer, **{k: v for k, v in options.items() if k in fields})  # type: ignore[type-var]


def format_of(path: str | os.PathLike[str] | None, default: str = "html") -> str:
    """The format a file name asks for by its suffix (``.json`` and ``.json.gz``: trace), else ``default``."""
    if path is None:
        return default
    name = Path(path).name.lower()
    if name.endswith(".json.gz"):
        return "trace"
    suffix = Path(name).suffix
    return next((r.name for r in RENDERERS.values() if r.suffix == suffix), default)
