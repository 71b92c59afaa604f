"""What the use cases share: the hooks they report through, the errors that name an option, and the steps several
of them take (load the model, open the measuring runtime, build a device command, pair stressed rounds).

Names: a request's field is the command's option under the option's own name (``--runs`` -> ``runs``,
``--opt-level`` -> ``opt_level``), except :data:`RENAMED`. An output option (``-o/--json``, ``--html``, ``--top``,
``--format``) is no field: the use case returns the run and the caller writes or renders it. It is one where it
names what the use case makes (``calibrate -o``: the profile; ``sweep --out``: the folder), shapes what it returns
(``advise --top``: the hot spots the findings keep) or says what the input is (``import --from``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerscope.errors import InputError
from layerscope.model.types import Graph

if TYPE_CHECKING:
    import numpy as np

    from layerscope.measure.runners import CommandRunner
    from layerscope.model.types import TensorInfo
    from layerscope.runfile.models import RunFile
    from layerscope.runtimes.base import OpenRuntime

#: Option destination (click's name for it) -> the request field and API parameter that holds it.
RENAMED: Mapping[str, str] = {"input_specs": "inputs", "backend_name": "backend", "predictor_path": "predictor",
                              "fmt": "format", "run_path": "run", "model_path": "model", "board_table": "board",
                              "address": "ray_address", "sweep_axes": "sweep"}

#: update(phase, done, total): what measuring code calls as it goes.
PhaseUpdate = Callable[[str, float, float], None]
#: phases(labels, units): a context whose value is the update function of one progress display; ``labels`` name
#: the phases, ``units`` what each counts (default ``runs``).
Phases = Callable[[Mapping[str, str], Mapping[str, str] | None], AbstractContextManager[PhaseUpdate]]

PathLike = str | os.PathLike[str]


def _ignore(_: Any) -> None:
    return None


def _nothing() -> None:
    return None


def _no_progress(labels: Mapping[str, str], units: Mapping[str, str] | None = None
                 ) -> AbstractContextManager[PhaseUpdate]:
    def update(phase: str, done: float, total: float) -> None:
        return None

    return nullcontext(update)


@dataclass(frozen=True)
class Hooks:
    """What a use case says as it goes; the defaults say nothing (the Python API). ``ready`` is called once the
    measuring runtime was found, before any work; ``loaded`` once with the model as loaded (the CLI prints its shape
    notes on stderr); ``phases`` opens a progress display; ``warning`` takes one line that does not stop the
    work; ``note`` takes one line of what was found on the way (``calibrate --kernels``: each model's kernels),
    printed as it comes."""

    ready: Callable[[], None] = _nothing
    loaded: Callable[[Graph], None] = _ignore
    phases: Phases = _no_progress
    warning: Callable[[str], None] = _ignore
    note: Callable[[str], None] = _ignore


QUIET = Hooks()


class OptionError(InputError):
    """One option's value is bad for this input (exit 2): ``option`` is its flag (``--dtype``), ``detail`` why."""

    def __init__(self, option: str, detail: str) -> None:
        super().__init__(f"{option}: {detail}")
        self.option, self.detail = option, detail


class UsageConflict(InputError):
    """Options that do not go together, or one missing that another needs (exit 2)."""


class Interrupted(KeyboardInterrupt):
    """The work was interrupted (Ctrl-C, SIGTERM): ``run`` holds what was measured by then, marked ``mark``
    (``partial``: before any per-layer time; ``interrupted``: some rounds missing). Raised by the Python API; the
    CLI prints and saves the run, then stops as every interrupted command does."""

    def __init__(self, run: RunFile, mark: str) -> None:
        super().__init__(f"what was measured is in the run (marked {mark})")
        self.run, self.mark = run, mark


def model_or_sample(model: PathLike | None) -> Path:
    """``model``, or the bundled sample that measuring commands take when none is given (the sample builders are
    imported only then)."""
    if model is not None:
        return Path(model)
    from layerscope.samples import DEFAULT_SAMPLE, sample_path

    return sample_path(DEFAULT_SAMPLE)


def load_graph(model: PathLike, shapes: Mapping[str, tuple[int, ...]], dims: Mapping[str, int],
               inputs: Sequence[str], *, seed: int, hooks: Hooks) -> Graph:
    """``model`` loaded with ``--shape`` and ``--dim`` values; ``inputs`` (``--input`` specs, the rest seeded random
    values) feed it only when its shapes must be observed by running it, which imports the inputs module only
    then. ``hooks.loaded`` is told."""
    from layerscope.digest import started
    from layerscope.model import load_model  # onnx: not for the use cases that read run files only

    def feeds(tensors: Sequence[TensorInfo]) -> dict[str, np.ndarray]:
        from layerscope.measure.inputs import feeder

        return feeder(inputs, seed)(tensors)

    graph = load_model(model, dict(shapes), dict(dims), feeds=feeds, digest=started(model))
    hooks.loaded(graph)
    return graph


def checked_shapes(shapes: Mapping[str, Sequence[int]] | None) -> dict[str, tuple[int, ...]]:
    """``shapes`` as the loader takes them; dims that are not positive integers are an ``InputError``."""
    out = {}
    for name, dims in (shapes or {}).items():
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise InputError(f"shape of input {name!r}: {list(dims)} is not a list of positive integers")
        out[name] = tuple(dims)
    return out


def checked_dims(dims: Mapping[str, int] | None) -> dict[str, int]:
    """``--dim`` values as the loader takes them; a value that is not a positive integer is an ``OptionError``."""
    out = {}
    for name, value in (dims or {}).items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise OptionError("--dim", f"{name}={value!r}: expected a positive integer, e.g. batch=1")
        out[name] = value
    return out


def open_runtime(name: str, provider: str = "cpu", *, device: str = "CPU", precision: str = "",
                 performance_hint: str = "LATENCY", streams: int = 0, fallback: bool = True) -> OpenRuntime:
    """The measuring runtime ``name`` (``--backend``, from :mod:`layerscope.runtimes.registry`) opened with the
    options it reads (``provider`` on ONNX Runtime; ``device`` and the other settings on OpenVINO); its
    ``provider`` is what its sessions use; ``fallback``: layers it cannot convert run on another runtime
    (:class:`~layerscope.runtimes.base.RuntimeOptions`). ``InputError`` for an unknown name; ``BackendUnavailable``
    (exit 3) when it is not available here, before any work."""
    from layerscope.runtimes.base import RuntimeOptions
    from layerscope.runtimes.registry import get_runtime

    return get_runtime(name).open(RuntimeOptions(provider=provider, device=device, precision=precision,
                                                 performance_hint=performance_hint, streams=int(streams),
                                                 fallback=fallback))


def command_runner(run_cmd: str | None, compile_cmd: str | None = None, *, latency_regex: str | None = None,
                   latency_json: str | None = None, latency_unit: str = "ms",
                   timeout_s: float | None = None) -> CommandRunner | None:
    """The device command ``--run-cmd`` and the options that go with it describe, or ``None`` without one; a
    companion option without ``--run-cmd`` is a :class:`UsageConflict`, a bad template or reader an
    ``InputError``."""
    from layerscope.runtimes.command import device_runner

    if run_cmd is None:
        stray = [flag for flag, value in (("--compile-cmd", compile_cmd), ("--latency-regex", latency_regex),
                                          ("--latency-json", latency_json), ("--timeout", timeout_s))
                 if value is not None]
        if stray:
            raise UsageConflict(f"{', '.join(stray)} only apply with --run-cmd")
        return None
    return device_runner(run_cmd, compile_cmd, latency_regex=latency_regex, latency_json=latency_json,
                         latency_unit=latency_unit, timeout_s=timeout_s)


def _which(stressed: bool) -> str:
    return "stressed" if stressed else "baseline"


@contextmanager
def stress_phases(hooks: Hooks, labels: Mapping[str, str], rounds: int, units: Mapping[str, str] | None = None
                  ) -> Iterator[Callable[[bool, int], PhaseUpdate]]:
    """One progress display for paired stress rounds: yields ``progress_for(stressed, round)``, the update function
    of that measurement, whose phases (``labels``' keys) get their own bars."""
    def key(stressed: bool, index: int, phase: str) -> str:
        return f"{index}-{_which(stressed)}-{phase}"

    combos = [(index, stressed) for index in range(rounds) for stressed in (False, True)]
    all_labels = {key(stressed, index, phase): f"round {index + 1}/{rounds} {_which(stressed)}: {label}"
                  for index, stressed in combos for phase, label in labels.items()}
    all_units = {key(stressed, index, phase): unit for index, stressed in combos
                 for phase, unit in (units or {}).items()}
    with hooks.phases(all_labels, all_units) as update:
        def progress_for(stressed: bool, index: int) -> PhaseUpdate:
            return lambda phase, done, total: update(key(stressed, index, phase), done, total)

        yield progress_for
