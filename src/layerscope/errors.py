"""The error hierarchy. Every error the user can cause carries an exit code.

Exit codes (shared by every subcommand):
    1  a failure of ours (a bug): reported with a hint to rerun with --debug
    2  bad input: missing/corrupt file, bad shape, unknown target, malformed profile ...
    3  an unavailable backend or device
The CLI prints ``str(error)`` as one line; no traceback unless ``--debug``.
"""

from __future__ import annotations


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


class OutputError(InputError):
    """An output path cannot be written: a folder, under a regular file, read-only, full, ... (exit 2)."""
