"""Whether this process was asked to stop (Ctrl-C, SIGTERM, SIGHUP) while a command runs.

A stop raises ``KeyboardInterrupt`` in the Python code that runs when it arrives. When that code is a callback a
library calls from its own compiled code (pydantic-core's serializers, for one), the library may hand it on
wrapped in an error of its own: an ``Exception``, which a loop that survives a failed item (a sweep's cells)
would count as that item's failure and go on. Such a loop asks :func:`caused` first and stops instead.

The CLI's signal handlers :func:`record` each stop; :func:`clear` forgets them (each CLI call starts clean).
"""

from __future__ import annotations

_received: list[int] = []


def record(signum: int) -> None:
    """Note that signal ``signum`` asked this process to stop."""
    _received.append(signum)


def clear() -> None:
    """Forget the stops recorded so far."""
    _received.clear()


def requested() -> bool:
    """Whether a stop was recorded since the last :func:`clear`."""
    return bool(_received)


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
