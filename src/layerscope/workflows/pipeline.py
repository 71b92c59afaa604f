"""Pipeline: a whole pipeline profiled around its model, run after run (``layerscope pipeline``,
``layerscope.profile_pipeline``).

The user's function (``SCRIPT.py:FUNCTION``, loaded by path: it is their own code, that is the point, or a
callable) is called once per run with a model session made here
(:mod:`layerscope.runtimes.onnxruntime.pipeline`); the run holds where the end-to-end time goes: the user's trace
points beside the model's layers, and the split into
pre-processing / model / post-processing / other. An exception in the script is one line (``UserCodeError``, exit
2) naming its file and line. Interrupted, the run holds the runs completed (its ``pipeline`` section marked
interrupted).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layerscope.errors import InputError
from layerscope.runfile.models import RunFile
from layerscope.runtimes.onnxruntime.pipeline import UserCodeError, describe_exception, profile
from layerscope.runtimes.onnxruntime.session import ort_provider
from layerscope.workflows.common import QUIET, Hooks, PathLike

#: Progress labels of the pipeline's phases.
PHASES = {"warmup": "warm-up", "timed": "pipeline runs", "warmup-profiled": "warm-up (profiler on)",
          "profiled": "pipeline runs (profiler on)"}


@dataclass(frozen=True)
class PipelineRequest:
    """``layerscope pipeline``'s options: ``function``, ``SCRIPT.py:FUNCTION`` (or, from Python, the callable),
    called with a session on ``model`` (loaded with ``shapes`` and ``dims``); ``runs`` measured pipeline runs
    after ``warmup`` untimed ones, on ONNX Runtime's ``provider`` with ``threads`` intra-op threads (0: its
    default) and ``opt_level``; ``layers``: the pipeline is run again with the profiler on for per-layer times and
    kernels; ``seed``: of ``model.example_inputs``; ``target``: the profile of the estimate beside it."""

    function: str | Callable[[Any], Any]
    model: PathLike
    target: str = "host"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    runs: int = 20
    warmup: int = 3
    threads: int = 0
    opt_level: str = "all"
    provider: str = "cpu"
    layers: bool = True
    seed: int = 0


def pipeline(request: PipelineRequest, hooks: Hooks = QUIET) -> RunFile:
    """Profile ``request.function`` around ``request.model`` and return the typed run (estimate on the target,
    per-layer measurement, the ``pipeline`` section). ``BackendUnavailable`` (exit 3) before any work when the
    provider is missing; ``InputError`` for a bad script; ``UserCodeError`` for an exception in it."""
    ort_provider(request.provider)  # exit 3 before any work when the provider is missing
    if callable(request.function):
        fn = request.function
        name = getattr(fn, "__qualname__", repr(fn))
    else:
        fn, script = load_function(request.function)
        name = f"{script.name}:{getattr(fn, '__qualname__', request.function)}"
    with hooks.phases(PHASES, None) as progress:
        return profile(fn, request.model, runs=request.runs, warmup=request.warmup, threads=request.threads,
                       provider=request.provider, opt_level=request.opt_level, target=request.target,
                       layers=request.layers, shapes=dict(request.shapes), dims=dict(request.dims),
                       seed=request.seed, name=name, progress=progress)


def load_function(spec: str) -> tuple[Any, Path]:
    """The callable named by ``SCRIPT.py:FUNCTION`` and the script's path; errors are one-line ``InputError``."""
    path_text, colon, name = spec.rpartition(":")
    if not colon or not path_text or not name.isidentifier():
        raise InputError(f"{spec!r}: expected SCRIPT.py:FUNCTION, e.g. my_pipeline.py:run_once")
    path = Path(path_text)
    if not path.is_file():
        raise InputError(f"{path}: no such script")
    module_name = "_layerscope_pipeline_" + re.sub(r"\W", "_", path.stem)
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise InputError(f"{path}: cannot be loaded as a Python script")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the script's own imports of its neighbours
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        raise UserCodeError(f"{path.name}: loading the script raised {describe_exception(exc, str(path))}",
                            hint="rerun with --debug for the traceback") from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(k for k, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", "") == module_name)
        raise InputError(f"{path.name} has no function {name!r}; its functions: {', '.join(found) or 'none'}")
    return fn, path
