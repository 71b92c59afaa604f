"""The ``layerscope`` command: a click group, one module per subcommand.

``main(argv)`` returns the exit code: 0 success, 1 a failure of ours, 2 bad input, 3 an unavailable
backend or device, 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP. Errors print one line on stderr; ``--debug`` shows the
traceback instead.

SIGTERM and SIGHUP are handled like Ctrl-C: while ``main`` runs they raise ``KeyboardInterrupt`` in the main
thread, so every command stops the same way (temporary folders removed by their context managers, what was
measured kept and marked ``interrupted``) and exits 128 + the signal's number with one line. Every such signal,
Ctrl-C's too, is recorded when it arrives: an error raised after it (an interrupted ``import onnxruntime`` surfaces
as "not installed") is reported as the interruption, with its exit code, not as that error.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any, NoReturn

import click

from layerscope import interrupts, limits, offload
from layerscope.collector import collector_paused
from layerscope.errors import LayerscopeError
from layerscope.textsafe import terminal_text
from layerscope.version import __version__

#: Subcommand name -> the module defining it as ``command``. Modules are imported only when their
#: command runs (or help lists them), so ``layerscope estimate`` does not pay for onnxruntime or Jinja.
SUBCOMMANDS: dict[str, str] = {
    "advise": "layerscope.cli.advise",
    "backends": "layerscope.cli.backends",
    "bench": "layerscope.cli.bench",
    "bisect": "layerscope.cli.bisect",
    "calibrate": "layerscope.cli.calibrate",
    "compare": "layerscope.cli.compare",
    "estimate": "layerscope.cli.estimate",
    "import": "layerscope.cli.import_cmd",
    "lint": "layerscope.cli.lint",
    "pipeline": "layerscope.cli.pipeline",
    "profile": "layerscope.cli.profile",
    "reconcile": "layerscope.cli.reconcile",
    "report": "layerscope.cli.report",
    "schema": "layerscope.cli.schema",
    "sweep": "layerscope.cli.sweep",
    "targets": "layerscope.cli.targets",
}


class _LazyGroup(click.Group):
    """A group whose subcommands are imported from :data:`SUBCOMMANDS` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(cmd_name)
        if module is None:
            return None
        with collector_paused():  # the modules' objects are made to stay: nothing for a collection to find
            command = importlib.import_module(module).command
            if _ENDS_PROCESS:  # nor need a later one walk them: every object made so far outlives the command
                gc.freeze()
        assert isinstance(command, click.Command), module
        return command

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # past click, which would print a blank line and drop the message
            raise _Interrupted(exc) from None


class _Interrupted(Exception):
    """A ``KeyboardInterrupt`` (Ctrl-C, or a signal of :data:`TERMINATING_SIGNALS`) on its way to :func:`main`."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(*interrupt.args)
        self.interrupt = interrupt


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="layerscope")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option("--limit", "limit_values", multiple=True, metavar="NAME=N",
              help="Raise (or lower) a budget checked before work: nodes, elements, loop_trips, run_s, import_lines "
                   "(defaults in `layerscope.limits`; also LAYERSCOPE_LIMIT_<NAME>). Repeatable.")
def cli(debug: bool, limit_values: tuple[str, ...]) -> None:
    """Where the inference time of a neural network goes, layer by layer, on the device it runs on."""
    for text in limit_values:
        name, value = limits.parse_assignment(text)
        os.environ[limits.BUDGETS[name].variable] = value  # read by this process and the workers it starts
        limits.limit(name)  # a value that is not a positive number: one line, exit 2


#: Signals that stop a command the way Ctrl-C does (``kill``, ``docker stop``, a closed terminal or SSH session), and
#: Ctrl-C's own: each is recorded when it arrives, so that an error it causes is reported as the interruption.
TERMINATING_SIGNALS: tuple[str, ...] = ("SIGINT", "SIGTERM", "SIGHUP")


@contextmanager
def _signals_interrupt(received: list[int]) -> Iterator[None]:
    """While inside, :data:`TERMINATING_SIGNALS` raise ``KeyboardInterrupt`` (their numbers appended to
    ``received``); the previous handlers are restored on the way out. A signal ignored on entry stays ignored
    (``nohup layerscope ...`` keeps running when its terminal closes). Only the main thread can set handlers;
    elsewhere (``main`` called from a thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if not interrupts.record(signum):  # else a clean-up that must finish holds it (interrupts.deferred)
            raise KeyboardInterrupt

    previous = {}
    for name in TERMINATING_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is not signal.SIG_IGN:  # Windows has no SIGHUP
            previous[number] = signal.signal(number, interrupt)
    replaced = dict(_REPLACED)
    for number, handler in previous.items():  # an inner block keeps what the outermost one replaced
        _REPLACED.setdefault(number, handler)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _REPLACED.clear()
        _REPLACED.update(replaced)


#: The handlers :func:`_signals_interrupt` replaced while its block runs, by signal number (empty outside it).
_REPLACED: dict[int, Any] = {}


def _handlers_put_back_in_child() -> None:
    """In a process forked while :func:`_signals_interrupt`'s handlers are installed (a library's worker: OpenVINO's
    telemetry sender, any ``multiprocessing`` fork), the handlers they replaced, put back: the child is a process of
    its own, which a SIGTERM ends as its parent expects (``Process.terminate``), not a copy of the command that would
    turn it into an interruption held until the call it waits in returns (a name lookup without a network: tens of
    seconds, the parent's exit waiting on it)."""
    for number, handler in _REPLACED.items():
        with suppress(ValueError, OSError, TypeError):
            signal.signal(number, handler)
    _REPLACED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_handlers_put_back_in_child)


def _interrupted(exc: BaseException, received: Sequence[int]) -> int:
    """Print the one line of an interruption and return its exit code: 130 (Ctrl-C) or 128 + the signal's
    number. A ``KeyboardInterrupt`` raised with a message (where the partial results are) adds it."""
    note = f": {exc.args[0]}" if exc.args and exc.args[0] else ""
    if received and received[0] != signal.SIGINT:
        number = received[0]
        _error_line(f"layerscope: terminated by {signal.Signals(number).name}{note}")
        return 128 + number
    _error_line(f"layerscope: interrupted{note}")
    return 130


def _error_line(text: str) -> None:
    """One line on stderr, whatever the message quotes: no line break, control or bidi character survives."""
    click.echo(terminal_text(text), err=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    received: list[int] = []
    interrupts.clear()
    with _signals_interrupt(received):
        try:
            return _main(args, received)
        except KeyboardInterrupt as exc:  # a second signal while the first one's was being reported
            return _interrupted(exc, received)


def _main(args: list[str], received: list[int]) -> int:
    debug = "--debug" in args
    try:
        result = cli.main(args=args, prog_name="layerscope", standalone_mode=False)
    except LayerscopeError as exc:
        if received and not debug:  # caused by the interruption (a runtime's import cut short: "not installed")
            return _interrupted(KeyboardInterrupt(), received)
        if debug:
            raise
        _error_line(f"layerscope: error: {exc}")
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        if debug:
            raise
        # one line, as every other error: the message, and for a usage error where the command's help is
        # (click's own form is three lines: usage, a hint, then the message)
        context = exc.ctx if isinstance(exc, click.UsageError) else None
        where = f" (see `{context.command_path} --help`)" if context is not None else ""
        _error_line(f"Error: {exc.format_message()}{where}")
        return 2
    except _Interrupted as exc:
        return _interrupted(exc.interrupt, received)
    except (click.Abort, KeyboardInterrupt):  # while the arguments were parsed
        return _interrupted(KeyboardInterrupt(), received)
    except Exception as exc:
        if received and not debug:  # an error the interruption caused, not a bug
            return _interrupted(KeyboardInterrupt(), received)
        if debug:
            raise
        _error_line(f"layerscope: internal error: {type(exc).__name__}: {exc} (rerun with --debug and report it)")
        return 1
    # a command's ``click.exceptions.Exit(code)`` comes back as the code (``lint``: 1 when it found errors)
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


#: Whether the command line runs in a process of its own that ends with it (:func:`entry`): then the objects made
#: before a command runs (the modules) are moved out of the cyclic collector's reach (``gc.freeze``) once the
#: command's modules are imported. Never for :func:`main` called in a caller's process.
_ENDS_PROCESS = False


def entry() -> None:
    """Console-script entry point: :func:`main`'s code (work offloaded to a forked child where it pays:
    :func:`layerscope.offload.enable`), then :func:`exit_now`."""
    global _ENDS_PROCESS  # noqa: PLW0603 -- set once, by the entry that owns the process
    _ENDS_PROCESS = True
    offload.enable()
    exit_now(main())


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` without tearing the interpreter down, as mypy does: the output streams
    flushed and the ``atexit`` handlers run (temporary folders, logging, a Ray runtime we started), but the
    modules and classes the process imported are not freed one by one: ``benchmarks/tricks.py`` measures 0.39 s of
    CPU of a 5.8 s estimate at 100k layers; 25-100 ms of 0.6-0.7 s on a 700-node model or at 10k layers, within
    the runs' spread in one of two runs. Every file a command writes is closed by then (written atomically, under
    ``with``). Falls back to ``sys.exit`` while a non-daemon thread still runs (it would be killed) or when a stream
    cannot be flushed (a closed pipe: the interpreter's own exit reports it)."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)
    atexit._run_exitfuncs()
    os._exit(code)
