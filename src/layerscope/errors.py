"""The error hierarchy. Every error the user can cause carries an exit code.

Exit codes (shared by every subcommand):
    1  a failure of ours (a bug): reported with a hint to rerun with --debug
    2  bad input: missing/corrupt file, bad shape, unknown target, malformed profile ...
    3  an unavailable backend or device
    4  a regression: ``compare --fail-if-slower`` / ``--fail-if-layer-slower`` judged a time slower, beyond the
       threshold (:class:`Regression`; the comparison is printed and written first)
The CLI prints ``str(error)`` as one line; no traceback unless ``--debug``.
"""

from __future__ import annotations

import re


class LayerscopeError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InputError(LayerscopeError):
    """Bad input from the user: a file, an option, a model."""

    exit_code = 2


class ModelError(InputError):
    """The model file cannot be loaded or its shapes cannot be resolved."""


class ShapeError(ModelError):
    """Dynamic or inconsistent shapes (e.g. symbolic dims without ``--shape``)."""


class ProfileError(InputError):
    """A hardware profile is unknown or malformed."""


class RunFileError(InputError):
    """A saved run file is missing, corrupt or of an unsupported schema."""


class BackendUnavailable(LayerscopeError):
    """A runtime, provider or device that is not available here."""

    exit_code = 3


class Regression(LayerscopeError):
    """``layerscope compare`` found a time judged slower (its interval above zero) by more than the gate's threshold
    (exit 4): the result a CI job fails on, not a failure of the tool."""

    exit_code = 4


class OutputError(InputError):
    """An output path cannot be written: a folder, under a regular file, read-only, full, ... (exit 2)."""


class RuntimeFailure(InputError):
    """The runtime (ONNX Runtime, OpenVINO) failed running the model on the values it was fed (exit 2).

    ``inputs`` names the inputs that were seeded random values (not given with ``--input``): the message says
    which, and how to give real ones."""

    def __init__(self, message: str, *, hint: str | None = None, inputs: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint=hint)
        self.inputs = inputs


#: Lines of a runtime's message that say where, not what: its call stack.
_STACK_LINE = re.compile(r"^\s*(Exception from \S+|Stack ?trace:?|Traceback\b|File \"|at \S+\(|#\d+\s|\[\s*\d+\]\s|"
                         r"0x[0-9a-fA-F]+\s)", re.IGNORECASE)
#: A source location inside a line (``src/plugins/intel_cpu/src/node.cpp:1537:``), with the ``at`` before it.
_SOURCE_PLACE = re.compile(r"(\s+at)?\s*/?[\w.\\/-]+\.(?:cpp|hpp|cc|cxx|h|c|py):\d+:?")
#: A C++ function signature after a source location (``onnxruntime::ReshapeHelper::ReshapeHelper(...)``).
_SIGNATURE = re.compile(r"\b(?:\w+::)+~?\w+\([^()]*\)(?:\s*const)?")


def condensed(text: str, limit: int = 600) -> str:
    """A runtime's (multi-line) failure message as one line: its lines joined with ``"; "`` in order, without blank
    lines, call-stack lines, source locations and C++ signatures, each repeated line once, whitespace collapsed,
    at most ``limit`` characters (``...`` marks a cut). ``""`` when nothing is left."""
    parts: list[str] = []
    for raw in text.splitlines():
        if _STACK_LINE.match(raw):
            continue
        line = " ".join(_SIGNATURE.sub("", _SOURCE_PLACE.sub("", raw)).split()).strip(" :;")
        if line and line not in parts:
            parts.append(line)
    joined = "; ".join(parts)
    return joined if len(joined) <= limit else joined[: max(0, limit - 3)].rstrip() + "..."
