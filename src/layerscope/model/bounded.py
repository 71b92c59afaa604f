"""ONNX Runtime's ``session.run`` under a time budget, stoppable by a signal.

``session.run`` holds the calling thread inside native code until the model finishes: a ``Loop`` whose trip count
is only known at run time can run for days, and a Ctrl-C or SIGTERM raised in that thread waits for it. Here the
run happens on a worker thread; the calling thread waits on it (a wait that signals interrupt), and when the
budget (:mod:`layerscope.limits` ``run_s``) is spent or the wait is interrupted it sets ONNX Runtime's
``RunOptions.terminate`` flag, which stops the run at its next kernel, Loop iterations included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from layerscope import limits

#: How long to wait for the worker once it was told to stop (ONNX Runtime checks the flag between kernels).
_STOP_WAIT_S = 30.0


def run_bounded(session: Any, feeds: Mapping[str, Any], *, what: str, output_names: Sequence[str] | None = None,
                budget_s: float | None = None) -> list[Any]:
    """``session.run(output_names, feeds)`` on an ONNX Runtime ``InferenceSession``, stopped after ``budget_s``
    seconds (default: the ``run_s`` budget) with ``OverBudget`` (exit 2) naming ``what`` was run. An exception of
    the run is re-raised as is; an interrupt of the waiting thread (``KeyboardInterrupt``) stops the run, then
    propagates. Runtime log lines are silenced: its failure comes back as the exception."""
    import onnxruntime as ort

    budget = limits.limit("run_s") if budget_s is None else budget_s
    options = ort.RunOptions()
    options.log_severity_level = 4
    outputs: list[Any] = []
    errors: list[BaseException] = []
    done = threading.Event()  # waited on rather than the thread: an interrupted Thread.join can return early later

    def work() -> None:
        try:
            outputs.extend(session.run(list(output_names) if output_names else None, dict(feeds), options))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            errors.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="layerscope-run", daemon=True)
    started = time.monotonic()
    worker.start()
    try:
        finished = done.wait(budget)
    except BaseException:
        options.terminate = True
        done.wait(_STOP_WAIT_S)
        raise
    if not finished:
        options.terminate = True
        done.wait(_STOP_WAIT_S)
        raise limits.OverBudget(
            f"{what} ran for {time.monotonic() - started:,.1f} s, over the budget of {budget:,g} s, and was stopped "
            f"(a Loop whose trip count is set at run time, or a model this slow here)",
            hint=limits.raise_hint("run_s"))
    if errors:
        raise errors[0]
    return outputs
