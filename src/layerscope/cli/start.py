"""The console entry of ``layerscope`` and ``python -m layerscope``.

Ctrl-C's default action (end the process: status 130 in a shell) is put back before the command line's modules
are imported, so an interrupt during start-up ends the process quietly instead of printing Python's traceback of
a ``KeyboardInterrupt`` raised inside an import; :func:`layerscope.cli.main.main` installs its own handlers (one
line, exit 130/143, what was measured kept) as soon as it runs. An interrupt that was ignored when the process
started (``nohup``, a background job) stays ignored.
"""

import signal


def entry() -> None:
    """Run the command line (:func:`layerscope.cli.main.entry`) with start-up interrupts ending the process quietly."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    from layerscope.cli.main import entry as run

    run()
