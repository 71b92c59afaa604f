"""The calling thread's alternate signal stack, kept as it was across OpenVINO's compilation.

OpenVINO's CPU plugin (2026.4, Linux) installs an alternate signal stack (``sigaltstack``) of its own on the thread
that compiles a model, and a compiled model put back, when it is freed, the stack that was installed when it was
made. Freed in another order than made (a bisect compiles and frees dozens of models), the thread is left with the
stack of a model already freed: the next signal handled there (Ctrl-C, SIGTERM, which the CLI handles, or a crash
that ``faulthandler`` would report) runs on freed memory and ends the process with a segmentation fault and no
message. Measured with OpenVINO 2026.4.1 on Linux: ``layerscope bisect --backend openvino`` stopped by SIGTERM
after its last compilation ended with status 139 instead of 143.

:func:`keeping_signal_stack` puts the stack found on entry back on exit: every model is then made, and every freed
model puts back, the thread's own stack (Python's ``faulthandler``'s, or none). OpenVINO installs no signal
handler that would use its stack. Elsewhere than Linux (another layout of ``stack_t``), nothing is done.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _StackT(ctypes.Structure):
    """Linux's ``stack_t`` (``<signal.h>``)."""

    _fields_ = (("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t))


def _sigaltstack() -> Callable[..., int] | None:
    """libc's ``sigaltstack``, on Linux; else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sigaltstack
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.POINTER(_StackT), ctypes.POINTER(_StackT))
    function.restype = ctypes.c_int
    return function


_SIGALTSTACK = _sigaltstack()


#: ``ss_flags``' bit saying the thread runs on the stack (reported by ``sigaltstack``, refused when set).
_SS_ONSTACK = 1


def _read() -> _StackT | None:
    """The calling thread's alternate signal stack as ``sigaltstack`` reports it; ``None`` where it cannot be read."""
    if _SIGALTSTACK is None:
        return None
    stack = _StackT()
    return stack if _SIGALTSTACK(None, ctypes.byref(stack)) == 0 else None


def _install(stack: _StackT) -> None:
    """Make ``stack`` the calling thread's alternate signal stack (``SS_ONSTACK`` is reported in ``ss_flags``,
    never accepted there)."""
    if _SIGALTSTACK is not None:
        _SIGALTSTACK(ctypes.byref(_StackT(stack.ss_sp, stack.ss_flags & ~_SS_ONSTACK, stack.ss_size)), None)


def current() -> tuple[int, int, int] | None:
    """The calling thread's alternate signal stack: (address, flags, size); ``None`` where it cannot be read."""
    stack = _read()
    return None if stack is None else (stack.ss_sp or 0, stack.ss_flags, stack.ss_size)


@contextmanager
def keeping_signal_stack() -> Iterator[None]:
    """Inside, a library may change the calling thread's alternate signal stack; on the way out (however the block
    ends) the stack found on entry is installed again. Where the stack cannot be read, nothing is done."""
    saved = _read()
    try:
        yield
    finally:
        now = _read()
        if saved is not None and now is not None and (now.ss_sp, now.ss_size) != (saved.ss_sp, saved.ss_size):
            _install(saved)
