"""ONNX Runtime's bisect runner: one prefix or suffix model timed per sample, in this process.

Contract of :class:`OrtRunner` (a :class:`~layerscope.measure.runners.Runner`): one sample = one timed
``session.run`` call (the fastest of ``runs_per_visit``, after the untimed runs
:func:`~layerscope.measure.runners.warm_sequence` names); a suffix is fed what its prefix computes from the model's
inputs. It also times a model's *boundary cost* (:meth:`OrtRunner.boundary`): the layout kernels a cut adds, read
from ONNX Runtime's profiler (:mod:`layerscope.runtimes.onnxruntime.trace`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from layerscope.errors import InputError, RuntimeFailure
from layerscope.measure.fusion import LAYOUT_OPS
from layerscope.measure.runners import (
    NO_BOUNDARY_COST,
    BoundaryCost,
    Clock,
    Job,
    Lru,
    Recompile,
    WarmWith,
    feeds_sha256,
    warm_up,
    with_random_note,
)
from layerscope.measure.session import SessionConfig
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.onnxruntime.session import is_runtime_error, make_session, ort_failure, run_checked
from layerscope.runtimes.onnxruntime.trace import load_events, parse_profile
from layerscope.tempdirs import scratch

__all__ = ["OrtRunner"]


class OrtRunner:
    """ONNX Runtime in this process. One sample = the fastest of ``runs_per_visit`` timed runs (as
    ``timeit`` advises: slower runs are interference), after ``visit_warmup`` untimed runs (``warmup`` when
    the session is new); at most ``max_sessions`` sessions stay open (least recently used closed first).

    One timed run per visit keeps neighbouring models as close in time as possible, which is what cancels a
    shared machine's interference. What runs just before it decides the state of the caches the timed run
    starts in: ``visit_warmup`` untimed runs of the model itself (``warm_with="self"``), or of the whole model
    (``"whole"``, the job's ``whole_model``): then a segment is timed in the state the whole model leaves the
    machine in, as in the whole model's loop. ``layerscope bisect`` runs the whole model once: on SqueezeNet
    the first segment then reads 3-7% under the kernel profile, against 7-16% warmed by itself; without any
    untimed run, each session's own copy of the weights is cold at every visit.

    ``recompile_every``: a timed model's session is opened afresh after every that many visits (:class:`Recompile`;
    0: never).

    ``clock="wall"`` times ``session.run`` with ``perf_counter``; ``"cpu"`` with the calling thread's CPU time,
    which does not count the time other processes hold the core. ``"cpu"`` needs ``threads == 1`` (ONNX
    Runtime then runs every kernel on the calling thread; pool threads' time would be missed): ``InputError``
    otherwise. Runs are timed on the calling thread for that reason (not through ``measure.bench``).
    """

    def __init__(self, config: SessionConfig, feeds: Mapping[str, np.ndarray], *, runs_per_visit: int = 1,
                 visit_warmup: int = 0, warm_with: WarmWith = "self", warmup: int = 2, clock: Clock = "wall",
                 max_sessions: int = 32, recompile_every: int = 0) -> None:
        import onnxruntime as ort

        if clock == "cpu" and config.threads != 1:
            raise InputError(f"--clock cpu needs --threads 1 (got {config.threads}): with more threads the work "
                             "runs on pool threads whose CPU time the calling thread does not see")
        if runs_per_visit < 1 or visit_warmup < 0 or warmup < 0:
            raise ValueError("OrtRunner: runs_per_visit >= 1, visit_warmup >= 0, warmup >= 0")
        self.config = config
        self.feeds = dict(feeds)
        self.runs_per_visit = runs_per_visit
        self.visit_warmup = visit_warmup
        self.warm_with = warm_with
        self.warmup = warmup
        self._clock_ns = time.thread_time_ns if clock == "cpu" else time.perf_counter_ns
        self._sessions: Lru[Any] = Lru(max_sessions)
        self._recompile = Recompile(recompile_every)
        self._converted: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._suffix_feeds: dict[str, dict[str, np.ndarray]] = {}
        machine = machine_info()
        self._identity = {
            "runner": "onnxruntime", "version": ort.__version__, "provider": config.provider,
            "threads": config.threads, "inter_op_threads": config.inter_op_threads, "opt_level": config.opt_level,
            "runs_per_visit": runs_per_visit, "visit_statistic": "min", "visit_warmup": visit_warmup,
            "warm_with": warm_with, "warmup": warmup, "clock": clock, "inputs_sha256": feeds_sha256(self.feeds),
            "hostname": machine["hostname"], "cpu": machine["cpu"],
            **({"recompile_every": recompile_every} if recompile_every else {}),
        }

    @property
    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def measure(self, job: Job) -> float:
        try:
            return self._measure(job)
        except RuntimeFailure as exc:
            raise with_random_note(exc, job) from exc.__cause__

    def _measure(self, job: Job) -> float:
        if self._recompile.due(job.key):
            self._sessions.drop(job.key)
        session, new = self._session(job.key, job.model_path)
        feeds = self.feeds_for(job)
        for _ in range(self.warmup if new else 0):
            self._run(session, feeds)
        warm_up(job, self.warm_with, self.visit_warmup, itself=lambda: self._run(session, feeds),
                whole=lambda path: self._run(self._session(f"whole:{path}", path)[0], self.feeds),
                feeding=lambda path: self._run(self._session(f"feeds:{job.key}", path)[0], self.feeds),
                inputs=feeds.values())
        return min(self._run(session, feeds) for _ in range(self.runs_per_visit)) / 1e3

    def feeds_for(self, job: Job) -> Mapping[str, np.ndarray]:
        """The model's feeds for a prefix; for a suffix, the values its feeding prefix computes from them
        (computed once per suffix) and the model inputs it reads. With ``warm_with="loop"`` the feeding prefix's
        session is the one the warm-up runs (kept open), else one opened for this alone."""
        if job.feeds_model is None:
            return self.feeds
        if job.key not in self._suffix_feeds:
            session = self._session(job.key, job.model_path)[0]
            prefix = self._session(f"feeds:{job.key}", job.feeds_model)[0] if self.warm_with == "loop" else \
                make_session(job.feeds_model, self.config)
            outputs = run_checked(prefix, self.feeds, "a bisect model")
            values = dict(zip([o.name for o in prefix.get_outputs()], outputs, strict=True))
            values.update(self.feeds)
            self._suffix_feeds[job.key] = {i.name: values[i.name] for i in session.get_inputs()}
        return self._suffix_feeds[job.key]

    def boundary(self, job: Job, whole: Job, runs: int) -> BoundaryCost:
        """The layout kernels (:data:`~layerscope.measure.fusion.LAYOUT_OPS`: ReorderOutput from the blocked
        NCHWc layout, ReorderInput into it) of the model's optimized graph that produce one of its outputs or
        read one of its inputs, unless the whole model's optimized graph has a layout kernel producing /
        reading that tensor too; their summed time per run from ONNX Runtime's profiler over ``runs`` runs
        (after :attr:`warmup` runs), and the model input (ReorderInput) or output (ReorderOutput) each converts.
        A model without such kernels is not run: :data:`NO_BOUNDARY_COST`. A ``whole`` model without layout
        kernels (a kernel timed alone has no model around it) leaves every such kernel counted."""
        if whole.key not in self._converted:
            nodes = [n for n in self._optimized(whole.model_path).node if n.op_type in LAYOUT_OPS]
            self._converted[whole.key] = (frozenset(o for n in nodes for o in n.output),
                                          frozenset(i for n in nodes for i in n.input))
        produced, read = self._converted[whole.key]
        with scratch("boundary") as tmp:
            optimized_path = Path(tmp) / "optimized.onnx"
            session = make_session(job.model_path, self.config, profile_prefix=str(Path(tmp) / "ort"),
                                   optimized_model_path=str(optimized_path))
            try:
                graph = onnx.load(str(optimized_path), load_external_data=False).graph
                outputs = {o.name for o in graph.output} - produced
                inputs = {i.name for i in graph.input} - read
                chosen = [node for node in graph.node if node.op_type in LAYOUT_OPS
                          and (set(node.output) & outputs or set(node.input) & inputs)]
                kernels = tuple(node.name for node in chosen)
                tensors = tuple(next(iter(sorted(set(node.input) & inputs)), None)
                                or sorted(set(node.output) & outputs)[0] for node in chosen)
                if kernels:
                    feeds = self.feeds_for(job)
                    for _ in range(self.warmup + runs):
                        self._run(session, feeds)
            finally:
                profile_file = session.end_profiling()
            if not kernels:
                return NO_BOUNDARY_COST
            data = parse_profile(load_events(profile_file), skip_runs=self.warmup)
        sums = np.zeros(len(data.run_durations_us))
        for kernel in data.kernels:
            if kernel.name in kernels:
                sums += np.asarray(kernel.durations_us, dtype=np.float64)
        return BoundaryCost(samples_us=tuple(float(v) for v in sums), kernels=kernels, tensors=tensors)

    def _optimized(self, model_path: Path) -> onnx.GraphProto:
        """The graph ONNX Runtime runs for ``model_path`` under this runner's session settings."""
        with scratch("boundary") as tmp:
            optimized_path = Path(tmp) / "optimized.onnx"
            make_session(model_path, self.config, optimized_model_path=str(optimized_path))
            return onnx.load(str(optimized_path), load_external_data=False).graph

    def _run(self, session: Any, feeds: Mapping[str, np.ndarray]) -> int:
        """One ``session.run`` timed in ns; ONNX Runtime's own failures are
        :func:`~layerscope.runtimes.onnxruntime.session.ort_failure` (exit 2, naming the seeded inputs)."""
        clock = self._clock_ns
        try:
            start = clock()
            session.run(None, feeds)
            return clock() - start
        except Exception as exc:
            if not is_runtime_error(exc):
                raise
            raise ort_failure(exc, feeds, "a bisect model") from exc

    def _session(self, key: str, path: Path) -> tuple[Any, bool]:
        """The open session under ``key`` (made from ``path`` when there is none: ``True``); at most
        ``max_sessions`` stay open, the least recently used closed first."""
        return self._sessions.get(key, lambda: make_session(path, self.config))

    def close(self) -> None:
        self._sessions.clear()
        self._suffix_feeds.clear()
