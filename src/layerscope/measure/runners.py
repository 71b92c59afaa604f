"""What times one prefix or suffix model for differential profiling (:mod:`layerscope.measure.differential`).

- :class:`Runner`: the protocol (one sample per :meth:`Runner.measure`, the cut's boundary cost, its identity);
  the runtimes' runners implement it (:class:`layerscope.runtimes.onnxruntime.runner.OrtRunner`,
  :class:`layerscope.runtimes.openvino.runner.OpenVinoRunner`), with the visit lifecycle written here once
  (:func:`warm_sequence`, :func:`warm_up`, :class:`Recompile`, :class:`Lru`, :func:`feeds_sha256`);
- :class:`CommandRunner`: a shell command template per sample, e.g. ``'hb_compile ... {model} && ssh board
  hrt_model_exec perf --model_file {compiled}'``, the latency read from its output by a regex or a JSON field
  (:class:`LatencyReader`). A command that exits non-zero, times out or cannot start raises
  :class:`DeviceCommandError` (exit 3) with its exit code and the tail of its output; output the reader cannot
  read, and templates that cannot work, raise ``InputError`` (exit 2).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shlex
import signal
import string
import subprocess
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

import numpy as np
import onnx

from layerscope.errors import BackendUnavailable, InputError, RuntimeFailure
from layerscope.measure.cuts import Cut

__all__ = [
    "NO_BOUNDARY_COST",
    "PLACEHOLDERS",
    "UNITS",
    "BoundaryCost",
    "Clock",
    "CommandRunner",
    "CommandTemplate",
    "DeviceCommandError",
    "Job",
    "LatencyReader",
    "Runner",
    "Side",
    "WarmWith",
    "touch",
    "warm_sequence",
    "warm_up",
]

#: A cut's ``"prefix"`` (the layers before it) or ``"suffix"`` (the layers after it, fed what crosses it).
Side = Literal["prefix", "suffix"]
#: What a runner in this process times: elapsed time, or the calling thread's CPU time.
Clock = Literal["wall", "cpu"]
#: What a runner runs untimed at each visit before the timed run: the model itself; the whole model (so the timed
#: run starts in the state the whole model leaves the machine in); or ``"loop"``, the state the whole model's loop
#: leaves at the model's first layer: a model warmed by itself, then a suffix by one run of its feeding prefix
#: (:func:`warm_sequence`).
WarmWith = Literal["self", "whole", "loop"]

#: Placeholders of a command template: the prefix (suffix) model, a path for the compiled artifact, a file the
#: command may write its report to (read instead of the output when the template names it), its folder.
PLACEHOLDERS = ("model", "compiled", "out", "dir", "device")
#: Latency units a regex group or ``--latency-unit`` may name -> microseconds per unit.
UNITS: Mapping[str, float] = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


class DeviceCommandError(BackendUnavailable):
    """The device command failed: non-zero exit, timeout, or it could not start (exit 3)."""


@dataclass(frozen=True)
class Job:
    """One model to time: its cut and side, cache key, model file (written before its first sample) and a
    label; a suffix's ``feeds_model`` is the prefix model whose outputs are the suffix's inputs; ``whole_model``
    is the whole model's file."""

    cut: Cut
    key: str
    model_path: Path
    label: str
    side: Side = "prefix"
    feeds_model: Path | None = None
    #: The whole model's file (none for the whole model itself): what runs before a visit with ``whole``.
    whole_model: Path | None = None


def random_ops_of(path: Path) -> tuple[str, ...]:
    """The random ops (``RandomNormalLike 'noise'``) of the model file at ``path``, subgraphs included; ``()``
    when it has none or cannot be read."""
    from layerscope.model.random_inputs import RANDOM_OPS
    from layerscope.model.shapes import walk

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:  # onnx raises several types; the failure being reported is the runtime's
        return ()
    return tuple(f"{n.op_type} {n.name or n.output[0]!r}" for n in walk(graph) if n.op_type in RANDOM_OPS)


def with_random_note(error: RuntimeFailure, job: Job) -> RuntimeFailure:
    """``error`` (a cut model failed to run), saying plainly when the models of ``job`` draw random values: each
    run draws new ones (a seed fixes the sequence, not one draw), so shapes that depend on them change from
    run to run and a cut model's fixed shapes or fed tensors may not match them."""
    ops = random_ops_of(job.model_path) + (random_ops_of(job.feeds_model) if job.feeds_model is not None else ())
    if not ops:
        return error
    listed = ", ".join(dict.fromkeys(ops))
    return RuntimeFailure(f"{error.message}; the model draws random values ({listed}): every run draws new ones, "
                          "and shapes that depend on them change from run to run, which cut models cannot follow",
                          hint=f"time the model whole with profile or bench; {error.hint}", inputs=error.inputs)


def warm_sequence(job: Job, warm_with: WarmWith, visit_warmup: int) -> tuple[str, ...]:
    """The untimed runs before ``job``'s timed run at a visit, in order: ``"self"`` (the model), ``"whole"`` (the
    whole model) or ``"feeds"`` (a suffix's feeding prefix, the layers before its cut).

    ``"self"``: ``visit_warmup`` runs of the model. ``"whole"``: ``visit_warmup`` runs of the whole model (the whole
    model itself: of itself). ``"loop"``: ``visit_warmup`` runs of the model, then for a suffix one of its feeding
    prefix, after which the runner reads the suffix's inputs (:func:`touch`; none of it when ``visit_warmup`` is 0).
    In the whole model's loop the layers after a cut run right after the layers before it, which have just written
    the tensors crossing the cut, their own weights last read one iteration earlier; a suffix warmed by itself alone
    starts with its weights cached instead. The model's own runs come first: compiled apart, it has buffers of its
    own, which in the loop the layers before it had just used."""
    if warm_with == "whole" and job.whole_model is not None:
        return ("whole",) * visit_warmup
    if warm_with == "loop" and job.side == "suffix" and job.feeds_model is not None and visit_warmup:
        return ("self",) * visit_warmup + ("feeds",)
    return ("self",) * visit_warmup


def warm_up(job: Job, warm_with: WarmWith, visit_warmup: int, *, itself: Callable[[], object],
            whole: Callable[[Path], object], feeding: Callable[[Path], object], inputs: Iterable[np.ndarray]) -> None:
    """Run :func:`warm_sequence`'s untimed runs: ``itself()`` for the model, ``whole(job.whole_model)`` for the whole
    model, and ``feeding(job.feeds_model)`` for a suffix's feeding prefix, then :func:`touch` of ``inputs`` (the
    suffix's)."""
    for what in warm_sequence(job, warm_with, visit_warmup):
        if what == "self":
            itself()
        elif what == "whole" and job.whole_model is not None:
            whole(job.whole_model)
        elif what == "feeds" and job.feeds_model is not None:
            feeding(job.feeds_model)
            touch(inputs)


def touch(arrays: Iterable[np.ndarray]) -> None:
    """Read every element of the numeric ``arrays`` (bringing them into the caches), as the layers that produce them
    would have just written them."""
    for array in arrays:
        if array.size and array.dtype.kind in "biufc":
            array.max()


@dataclass(frozen=True)
class BoundaryCost:
    """What a runtime spends in one prefix (suffix) to hand the tensors crossing its cut out as outputs (take
    them in as inputs), work the whole model does not do: per profiled run, the summed time (µs) of ``kernels``
    (the runtime's names of the kernels doing it; none: the cut costs nothing measurable of that kind,
    ``samples_us`` is ``(0.0,)``); ``tensors``: the model's input or output each of them converts, in the same
    order (empty where the runner does not say, and for costs cached before it was recorded)."""

    samples_us: tuple[float, ...]
    kernels: tuple[str, ...]
    tensors: tuple[str, ...] = ()


NO_BOUNDARY_COST = BoundaryCost(samples_us=(0.0,), kernels=())


class Runner(Protocol):
    """Times one prefix or suffix model per call to :meth:`measure` (one sample, µs)."""

    @property
    def identity(self) -> Mapping[str, Any]:
        """What the samples depend on besides the model (part of the cache key)."""

    def measure(self, job: Job) -> float:
        """One sample of ``job``'s model, in microseconds."""

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost | None:
        """What ``job``'s prefix spends handing its crossing tensors out that ``whole`` (the whole model) does
        not, over ``runs`` profiled runs; ``None`` when the runner cannot see inside a run."""

    def close(self) -> None:
        """Release sessions, files or connections."""


T = TypeVar("T")


class Lru(Generic[T]):
    """At most ``size`` values by key, the least recently used dropped first (open sessions, compiled models)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, T] = OrderedDict()

    def get(self, key: str, make: Callable[[], T]) -> tuple[T, bool]:
        """The value under ``key``, made by ``make`` when there is none (then ``True``), after dropping the least
        recently used ones over ``size``."""
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key], False
        while len(self._items) >= self.size:
            self._items.popitem(last=False)
        value = make()
        self._items[key] = value
        return value, True

    def drop(self, key: str) -> None:
        """Forget the value under ``key`` (none: nothing happens); the next :meth:`get` makes it anew."""
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()


class Recompile:
    """When a runner makes a timed model's compiled form (OpenVINO's compiled model, ONNX Runtime's session) anew:
    after every ``every`` visits of it (0: never). Each compilation of one model runs at its own speed, fixed for
    its life: OpenVINO CPU, ResNet-50 compiled four times in one process and timed in the same interleaved rounds,
    10th percentiles 58.4 / 57.2 / 57.2 / 56.9 ms (the bootstrap's standard error of each: 0.27 ms), where four
    infer requests of one compiled model read 56.9 / 56.6 / 57.0 / 56.9 ms (``benchmarks/compile_offsets.py``). A
    segment is the difference of two models, so a prefix of 20-40 ms whose compilation is 1-2.5 % off is 7-35 % off
    a segment of 5 % of ResNet-50, and no number of rounds of that one compilation shows it. Compiled afresh every
    ``every`` visits, a model's samples span several compilations, whose offsets its statistic averages."""

    def __init__(self, every: int) -> None:
        if every < 0:
            raise ValueError("Recompile: every >= 0")
        self.every = every
        self._visits: dict[str, int] = {}

    def due(self, key: str) -> bool:
        """Count one visit of ``key``: whether its compiled model is to be made anew before it (each visit after
        the first ``every``, the next ``every`` ...)."""
        visits = self._visits.get(key, 0)
        self._visits[key] = visits + 1
        return self.every > 0 and visits > 0 and visits % self.every == 0


def feeds_sha256(feeds: Mapping[str, np.ndarray]) -> str:
    """A digest of the inputs a runner feeds (names, dtypes, shapes and values): part of its identity, so
    samples taken on other inputs are never reused."""
    digest = hashlib.sha256()
    for name, array in sorted(feeds.items()):
        digest.update(name.encode() + b"\0" + str(array.dtype).encode() + str(array.shape).encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class CommandTemplate:
    """A shell command line with ``{model}``-style placeholders (:data:`PLACEHOLDERS`; ``{{``/``}}`` for
    literal braces). Values are shell-quoted when rendered."""

    text: str
    option: str
    fields: frozenset[str]

    @classmethod
    def parse(cls, text: str, option: str) -> CommandTemplate:
        """Check ``text``: known placeholders only, balanced braces; ``InputError`` (exit 2) otherwise."""
        try:
            names = {name for _, name, spec, conv in string.Formatter().parse(text) if name is not None}
        except ValueError as exc:
            raise InputError(f"{option} {text!r}: {exc}", hint="write literal braces as {{ and }}") from None
        unknown = sorted(n for n in names if n not in PLACEHOLDERS)
        if unknown:
            raise InputError(f"{option} {text!r}: unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)}",
                             hint=f"use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        if not text.strip():
            raise InputError(f"{option}: empty command")
        return cls(text=text, option=option, fields=frozenset(names))

    def render(self, values: Mapping[str, str]) -> str:
        return self.text.format(**{k: shlex.quote(v) for k, v in values.items()})


@dataclass(frozen=True)
class LatencyReader:
    """Reads one latency from a command's output: the *last* match of ``pattern`` (its group ``latency``,
    else its first group; a group ``unit`` overrides ``unit``), or the number at ``json_field`` (dotted
    path, list indexes as numbers) of the output's JSON document (else of its last line that is JSON)."""

    pattern: re.Pattern[str] | None
    json_field: tuple[str, ...] | None
    unit: str

    @classmethod
    def create(cls, regex: str | None, json_field: str | None, unit: str = "ms") -> LatencyReader:
        """Check the options; ``InputError`` (exit 2) when they cannot work."""
        if (regex is None) == (json_field is None):
            raise InputError("give exactly one of --latency-regex and --latency-json with --run-cmd")
        if unit not in UNITS:
            raise InputError(f"--latency-unit {unit!r}: choose from {', '.join(UNITS)}")
        if json_field is not None:
            path = tuple(json_field.split("."))
            if not all(path):
                raise InputError(f"--latency-json {json_field!r}: expected a dotted path such as perf.latency_ms")
            return cls(pattern=None, json_field=path, unit=unit)
        assert regex is not None
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            raise InputError(f"--latency-regex {regex!r}: not a valid regular expression ({exc})") from None
        if pattern.groups < 1:
            raise InputError(f"--latency-regex {regex!r}: needs a group around the number, "
                             r"e.g. 'latency: ([0-9.]+) ms'")
        return cls(pattern=pattern, json_field=None, unit=unit)

    @property
    def describe(self) -> str:
        if self.pattern is not None:
            return f"regex {self.pattern.pattern!r} ({self.unit})"
        return f"json {'.'.join(self.json_field or ())} ({self.unit})"

    def read(self, text: str, where: str) -> float:
        """The latency in µs; ``InputError`` naming ``where`` and the output's tail when it is not there."""
        value, unit = self._regex(text) if self.pattern is not None else self._json(text)
        if value is None:
            raise InputError(f"{where}: {self.describe} found no latency in the output; last output: "
                             f"{_tail(text)}", hint="check --latency-regex / --latency-json against it")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{where}: {self.describe} read {value!r}, which is not a number") from None
        unit = (unit or self.unit).strip()
        if unit not in UNITS or not math.isfinite(number) or number < 0:
            raise InputError(f"{where}: {self.describe} read {value!r} {unit}: not a latency "
                             f"(units: {', '.join(UNITS)})")
        return number * UNITS[unit]

    def _regex(self, text: str) -> tuple[Any, str | None]:
        assert self.pattern is not None
        matches = list(self.pattern.finditer(text))
        if not matches:
            return None, None
        last = matches[-1]
        groups = last.groupdict()
        return (groups["latency"] if "latency" in groups else last.group(1)), groups.get("unit")

    def _json(self, text: str) -> tuple[Any, str | None]:
        document = _json_document(text)
        for part in self.json_field or ():
            if isinstance(document, Mapping) and part in document:
                document = document[part]
            elif isinstance(document, list) and part.isdigit() and int(part) < len(document):
                document = document[int(part)]
            else:
                return None, None
        return (document if isinstance(document, int | float | str) and not isinstance(document, bool)
                else None), None


class CommandRunner:
    """Runs ``run`` (and ``compile`` once per prefix in this session, when given) as shell commands in the
    prefix's own folder; one sample = the latency ``reader`` finds in the run command's output."""

    def __init__(self, run: CommandTemplate, reader: LatencyReader, *, compile: CommandTemplate | None = None,
                 timeout_s: float | None = None, device: str | None = None,
                 identity: Mapping[str, Any] | None = None, shared_compiled: bool = False) -> None:
        if not shared_compiled and "model" not in run.fields | (compile.fields if compile else frozenset()):
            raise InputError(f"{run.option} {run.text!r}: the command never names {{model}}, so every prefix "
                             "would run the same thing", hint="pass the prefix model as {model}")
        self.run = run
        self.compile = compile
        self.reader = reader
        self.timeout_s = timeout_s
        #: The device of a pool this runner times on (``{device}``; its own ``{out}``, and its own ``{compiled}``
        #: unless ``shared_compiled``: the pool compiled every model once, into the untagged path).
        self.device = device
        self.shared_compiled = shared_compiled
        self._compiled: set[str] = set()
        self._identity = dict(identity) if identity is not None else {
            "runner": "command", "run_cmd": run.text, "compile_cmd": compile.text if compile else None,
            "latency": reader.describe}

    @property
    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def _values(self, job: Job) -> dict[str, str]:
        folder = job.model_path.parent
        tag = f"-{self.device}" if self.device is not None else ""
        compiled = folder / ("compiled" if self.shared_compiled else f"compiled{tag}")
        return {"model": str(job.model_path), "compiled": str(compiled), "out": str(folder / f"out{tag}.txt"),
                "dir": str(folder), "device": self.device or ""}

    def compile_job(self, job: Job) -> None:
        """Run the compile command for ``job`` now (once per model in this runner's life)."""
        if self.compile is not None and job.key not in self._compiled:
            self._shell(self.compile, self._values(job), job)
            self._compiled.add(job.key)

    def measure(self, job: Job) -> float:
        values = self._values(job)
        out_file = Path(values["out"])
        self.compile_job(job)
        if "out" in self.run.fields:
            out_file.unlink(missing_ok=True)
        stdout, stderr = self._shell(self.run, values, job)
        where = f"{self.run.option} on {job.label}"
        if "out" in self.run.fields:
            try:
                text = out_file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                raise InputError(f"{where}: the command did not write {{out}} ({out_file})") from None
        else:
            text = stdout if self.reader.json_field is not None else f"{stdout}\n{stderr}"
        return self.reader.read(text, where)

    def _shell(self, template: CommandTemplate, values: Mapping[str, str], job: Job) -> tuple[str, str]:
        command = template.render(values)
        code, stdout, stderr = _run_shell(command, self.timeout_s, job.model_path.parent)
        if code is None:
            raise DeviceCommandError(f"{template.option} timed out after {self.timeout_s:g} s on {job.label}: "
                                     f"{command}; last output: {_tail(stdout + stderr)}")
        if code != 0:
            hint = ("the baseline model only slices one element of each input; if the toolchain cannot compile "
                    "it, use --no-baseline" if job.cut.layers == 0 else None)
            raise DeviceCommandError(f"{template.option} exited with code {code} on {job.label}: {command}; "
                                     f"last output: {_tail(stdout + stderr)}", hint=hint)
        return stdout, stderr

    def boundary(self, job: Job, whole: Job, runs: int) -> None:
        """``None``: a device command times whole runs only."""
        return None

    def close(self) -> None:
        self._compiled.clear()


def _run_shell(command: str, timeout_s: float | None, cwd: Path) -> tuple[int | None, str, str]:
    """(exit code or ``None`` on timeout, stdout, stderr); the whole process group is killed on timeout or
    Ctrl-C."""
    try:
        proc = subprocess.Popen(command, shell=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        raise DeviceCommandError(f"cannot start the device command {command!r}: {exc}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = proc.communicate()
        return None, stdout, stderr
    except BaseException:
        _kill_group(proc)
        proc.communicate()
        raise
    return proc.returncode, stdout, stderr


def _kill_group(proc: subprocess.Popen[str]) -> None:
    if hasattr(os, "killpg"):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - Windows
        proc.kill()


def _tail(text: str, lines: int = 6, chars: int = 500) -> str:
    """The last lines of ``text`` on one line, joined by `` | ``."""
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    joined = " | ".join(kept)
    return repr(joined[-chars:]) if joined else "(no output)"


def _json_document(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None
