"""The console entry of ``layerscope`` and ``python -m layerscope``.

Ctrl-C's default action (end the process: status 130 in a shell) is put back before the command line's modules
are imported, so an interrupt during start-up ends the process quietly instead of printing Python's traceback of
a ``KeyboardInterrupt`` raised inside an import; :func:`layerscope.cli.main.main` installs its own handlers (one
line, exit 130/143, what was measured kept) as soon as it runs. An interrupt that was ignored when the process
started (``nohup``, a background job) stays ignored.

The model file a command loads is hashed (its run records the file's SHA-256) from here on, on a thread of its own,
while the command line's modules are imported; ``benchmarks/tricks.py`` (``prefetch``) measures what that buys.
"""

import signal
import sys

#: The commands whose model file is loaded (:func:`layerscope.workflows.common.load_graph`).
MODEL_COMMANDS = frozenset({"estimate", "profile", "bench", "bisect"})


def entry() -> None:
    """Run the command line (:func:`layerscope.cli.main.entry`) with start-up interrupts ending the process quietly,
    the model file of a command that loads one hashed meanwhile (:func:`hash_model`)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    hash_model(sys.argv[1:])
    from layerscope.cli.main import entry as run

    run()


def hash_model(args: list[str]) -> None:
    """The model file of a command of :data:`MODEL_COMMANDS` (the first argument after the command's name that ends
    in ``.onnx``) hashed from now on, on a thread of its own (:func:`layerscope.digest.prefetch`: the loader
    uses the hash only for the file it opens)."""
    command = next((i for i, arg in enumerate(args) if arg in MODEL_COMMANDS), None)
    path = next((arg for arg in args[command + 1:] if arg.endswith(".onnx")), None) if command is not None else None
    if path is not None:
        from layerscope.digest import prefetch

        prefetch(path)
