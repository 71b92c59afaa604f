"""Whether this process was asked to stop (Ctrl-C, SIGTERM, SIGHUP) while a command runs.

A stop raises ``KeyboardInterrupt`` in the Python code that runs when it arrives. When that code is a callback a
library calls from its own compiled code (pydantic-core's serializers, for one), the library may hand it on
wrapped in an error of its own: an ``Exception``, which a loop that survives a failed item (a sweep's cells)
would count as that item's failure and go on. Such a loop asks :func:`caused` first and stops instead.

The CLI's signal handlers :func:`record` each stop; :func:`clear` forgets them (each CLI call starts clean).

A clean-up that must finish once begun (a temporary folder's removal, a half-written file's) runs inside
:func:`deferred`: a stop arriving meanwhile is held, and raised as ``KeyboardInterrupt`` when the block ends, so that
the clean-up is never cut in the middle.
"""

from __future__ import annotations

import threading
from types import TracebackType


class _State:
    """The stops recorded since :func:`clear`, how many :func:`deferred` blocks the main thread is inside, and
    whether a stop arrived in one of them."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.depth = 0
        self.held = False


_state = _State()


def record(signum: int) -> bool:
    """Note that signal ``signum`` asked this process to stop. ``True`` when the main thread is inside a
    :func:`deferred` block, which then raises the stop as it ends: the handler calling this raises nothing."""
    _state.received.append(signum)
    _state.held = _state.held or _state.depth > 0
    return _state.depth > 0


def clear() -> None:
    """Forget the stops recorded so far."""
    _state.received.clear()
    _state.held = False


def requested() -> bool:
    """Whether a stop was recorded since the last :func:`clear`."""
    return bool(_state.received)


class _Deferred:
    """A block a stop does not cut: in the main thread (where Python runs signal handlers), a stop the CLI's
    handlers receive inside it is held (:func:`record`) and raised as ``KeyboardInterrupt`` when the outermost such
    block ends: after the block's work, or in place of an exception leaving it (the stop is what the user asked
    for). In other threads, or without the CLI's handlers, the block changes nothing."""

    def __init__(self) -> None:
        self._counted = False

    def __enter__(self) -> None:
        self._counted = threading.current_thread() is threading.main_thread()
        if self._counted:
            _state.depth += 1

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if not self._counted:
            return
        raise_held = _state.depth == 1 and _state.held  # read before the block stops counting: a stop arriving
        if raise_held:  # after that raises at once
            _state.held = False
        _state.depth -= 1
        if raise_held and not isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt


def deferred() -> _Deferred:
    """A block a stop does not cut (:class:`_Deferred`): ``with interrupts.deferred(): remove_tree(folder)``."""
    return _Deferred()


def caused(exc: BaseException) -> bool:
    """Whether ``exc`` is, or may be, a stop in disguise: a stop was recorded, a ``KeyboardInterrupt`` is in its
    chain of causes, or it is pydantic-core's serialization error naming one (it keeps no cause, only
    "Error calling function `f`: KeyboardInterrupt: ...")."""
    if requested():
        return True
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return type(exc).__name__ == "PydanticSerializationError" and ": KeyboardInterrupt" in str(exc)
