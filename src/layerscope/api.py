"""The Python API, for notebooks and scripts: the same runs the CLI writes, as objects.

```python
import layerscope

run = layerscope.estimate("model.onnx", target="rdk-s100")          # a static estimate, per layer
run = layerscope.profile("model.onnx", runs=20, threads=1)          # measured on ONNX Runtime, beside it
run = layerscope.load("run.json")                                   # any run file any command wrote
frame = run.layers_frame()                                           # pandas: one row per layer
run.save("run.json"); run.report("report.html")
```

Contract:
- every function returns a :class:`Run`: the run file's document (schema version 2, exactly what ``save`` writes
  and what the CLI would have written for the same options) with its typed view (:attr:`Run.typed`, validated
  against the schema) and the derived numbers every report uses (:attr:`Run.k`, :meth:`Run.layer_measured_us`);
- bad input raises :class:`layerscope.errors.LayerscopeError` subclasses (the CLI's exit 2 and 3 are their
  ``exit_code``), never a result that looks valid;
- ``layers_frame`` needs pandas (``pip install layerscope[pandas]``); its columns are namespaced: ``id``,
  ``name``, ``op_type`` and ``shape_source``, then ``cost.*`` (MACs, bytes, unit kind), ``est.*`` (the layer's
  estimate on the run's target), ``meas.*`` (what was measured) and ``meas.time_us`` / ``share`` as
  :mod:`layerscope.runfile.derived` defines them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerscope.errors import InputError
from layerscope.report.renderers import RENDERERS, format_of, get_renderer
from layerscope.runfile.derived import KFactor, layer_rows

if TYPE_CHECKING:
    import pandas as pd

    from layerscope.measure.stress import StressSpec
    from layerscope.runfile.models import RunFile
    from layerscope.workflows.calibrate import CalibrateResult
    from layerscope.workflows.lint import LintResult
    from layerscope.workflows.sweep import SweepResult

PathLike = str | os.PathLike[str]

#: Report formats :meth:`Run.report` renders (:data:`layerscope.report.renderers.RENDERERS`), with the file suffix
#: each is written under.
REPORT_FORMATS = {name: renderer.suffix for name, renderer in RENDERERS.items()}


@dataclass(frozen=True)
class Run:
    """One run: the document a command wrote (or would write), with its typed view and derived numbers."""

    document: Mapping[str, Any]

    @cached_property
    def typed(self) -> RunFile:
        """The typed run (:class:`layerscope.runfile.models.RunFile`), validated against the schema."""
        from layerscope.runfile.io import check

        return check(self.document, "run")

    @property
    def k(self) -> KFactor | None:
        """k = measured / estimated for the same part of the model, as every report prints it."""
        return self.typed.k_factor

    def layer_measured_us(self, layer_id: str) -> float | None:
        """A layer's measured time as every report shows it (``None``: not measured; 0: eliminated)."""
        layer = self.typed.layer_by_id.get(layer_id)
        if layer is None:
            raise KeyError(layer_id)
        return layer.measured_us

    def save(self, path: PathLike) -> Path:
        """Write the run file atomically (the bytes ``layerscope ... --json`` writes); return its path."""
        from layerscope.run import save_run

        return save_run(self.typed, path)

    def report(self, path: PathLike | None = None, *, fmt: str | None = None) -> str | bytes | Path:
        """Render a report: ``fmt`` one of :data:`REPORT_FORMATS` (default: from ``path``'s suffix, else html),
        by the renderer ``layerscope report --format`` uses (:mod:`layerscope.report.renderers`; ``terminal`` is
        what the command that made the run printed, ``onnx`` the run's model annotated). With ``path`` the
        report is written atomically there (a trace to ``.gz`` compressed) and the path returned; else the text
        (bytes for the trace and the model) is returned."""
        from layerscope.fileio import write_atomic

        chosen = fmt or format_of(path)
        compress = path is not None and str(path).endswith(".gz")
        content = get_renderer(chosen, compress=compress).render(self.typed)
        return content if path is None else write_atomic(path, content)

    def layers_frame(self) -> pd.DataFrame:
        """One row per layer with namespaced columns (see the module docstring)."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("layers_frame needs pandas", hint="pip install 'layerscope[pandas]'") from None
        rows = layer_rows(self.typed)
        return pd.DataFrame(rows)


def load(path: PathLike) -> Run:
    """The run file at ``path`` (a version-1 file is migrated); ``RunFileError`` naming the bad field."""
    from layerscope.runfile import load_document

    return Run(load_document(path))


def estimate(model: PathLike, *, target: str = "host", shapes: Mapping[str, Sequence[int]] | None = None,
             dims: Mapping[str, int] | None = None, inputs: Sequence[str] = (), dtype: str | None = None,
             timeline: bool = False, predictor: PathLike | None = None, fusion: str = "auto",
             merge_into: PathLike | None = None, quantized_outputs: bool = False) -> Run:
    """A static per-layer estimate of ``model`` on the hardware profile ``target`` (a name or a TOML file), as
    ``layerscope estimate`` makes it (:class:`layerscope.workflows.estimate.EstimateRequest` says what each option
    does); ``timeline`` adds the schedule per unit and core and DDR over time; ``merge_into`` is a run file of the
    same model whose measured sections the returned run keeps (the file is not written: ``save`` it);
    ``quantized_outputs``: the model deployed without its output Dequantize nodes (no float32 hand-over priced)."""
    from layerscope.workflows.common import checked_dims, checked_shapes
    from layerscope.workflows.estimate import EstimateRequest
    from layerscope.workflows.estimate import estimate as run_estimate

    request = EstimateRequest(model, target=target, shapes=checked_shapes(shapes), dims=checked_dims(dims),
                              inputs=tuple(inputs), dtype=dtype, timeline=timeline, predictor=predictor,
                              fusion=fusion, merge_into=merge_into, quantized_outputs=quantized_outputs)
    return Run(_as_saved(run_estimate(request).document()))


def profile(model: PathLike | None = None, *, target: str = "host",
            shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None,
            inputs: Sequence[str] = (), runs: int = 50, warmup: int = 10, seed: int = 0, threads: int = 0,
            opt_level: str = "all", provider: str = "cpu", backend: str = "onnxruntime", device: str = "CPU",
            precision: str = "", performance_hint: str = "LATENCY", streams: int = 0, timeline: bool = False,
            stress: str | StressSpec | None = None, fallback: bool = True) -> Run:
    """Measure every layer of ``model`` (default: the bundled sample) on ONNX Runtime (or OpenVINO:
    ``backend="openvino"`` with ``device``, ``precision``, ``performance_hint``, ``streams``; ``fallback``: the
    layers OpenVINO cannot convert run on ONNX Runtime, ``--ov-fallback``) beside its estimate on
    ``target``, as ``layerscope profile`` does: ``runs`` uninstrumented runs for the latency, then as many profiled
    runs for the layers. ``inputs`` takes the CLI's ``--input`` specs; ``threads`` 0 is the runtime's default;
    ``seed`` seeds the generated inputs; ``stress`` (``"memory"`` or ``"memory:N"``) adds paired rounds under
    memory streamers. Interrupted (Ctrl-C), it raises :class:`layerscope.workflows.common.Interrupted` holding what
    was measured."""
    from layerscope.measure.stress import parse_stress
    from layerscope.workflows.common import Interrupted, checked_dims, checked_shapes
    from layerscope.workflows.profile import ProfileRequest
    from layerscope.workflows.profile import profile as run_profile

    request = ProfileRequest(model, target=target, shapes=checked_shapes(shapes), dims=checked_dims(dims),
                             inputs=tuple(inputs), runs=runs, warmup=warmup, seed=seed, threads=threads,
                             opt_level=opt_level, provider=provider, backend=backend, device=device,
                             precision=precision, performance_hint=performance_hint, streams=streams,
                             timeline=timeline, stress=parse_stress(stress) if isinstance(stress, str) else stress,
                             fallback=fallback)
    result = run_profile(request)
    if result.interrupted:
        raise Interrupted(result.run, "interrupted")
    return Run(_as_saved(result.run.to_json()))


def bench(model: PathLike | None = None, *, warmup: int = 10, runs: int | None = None, duration: float | None = None,
          streams: int = 1, threads: int = 0, provider: str = "cpu", backend: str = "onnxruntime", device: str = "CPU",
          precision: str = "", performance_hint: str = "LATENCY", opt_level: str = "all",
          shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None,
          inputs: Sequence[str] = (), seed: int = 0, stress: str | StressSpec | None = None,
          sweep: Mapping[str, Sequence[int]] | None = None, latency_budget_us: float | None = None,
          fallback: bool = True) -> Run:
    """The end-to-end latency distribution and throughput of ``model`` (default: the bundled sample), as
    ``layerscope bench`` measures it (:class:`layerscope.workflows.bench.BenchRequest` says what each option does):
    ``runs`` (default 100) or ``duration`` seconds over ``streams`` concurrent streams; ``sweep``: axis ->
    values (``{"streams": [1, 2, 4], "batch": [1, 4]}``, ``--sweep``), with ``latency_budget_us``
    (``--latency-budget``). Interrupted (Ctrl-C), it raises :class:`layerscope.workflows.common.Interrupted`
    holding what was measured."""
    from layerscope.measure.stress import parse_stress
    from layerscope.workflows.bench import BenchRequest, Sweep
    from layerscope.workflows.bench import bench as run_bench
    from layerscope.workflows.common import Interrupted, checked_dims, checked_shapes

    request = BenchRequest(model, warmup=warmup, runs=runs, duration=duration, streams=streams, threads=threads,
                           provider=provider, backend=backend, device=device, precision=precision,
                           performance_hint=performance_hint, opt_level=opt_level, shapes=checked_shapes(shapes),
                           dims=checked_dims(dims), inputs=tuple(inputs), seed=seed,
                           stress=parse_stress(stress) if isinstance(stress, str) else stress,
                           sweep=Sweep(**{axis: tuple(values) for axis, values in sweep.items()}) if sweep else None,
                           latency_budget_us=latency_budget_us, fallback=fallback)
    result = run_bench(request)
    if result.interrupted:
        raise Interrupted(result.run, "interrupted")
    return Run(_as_saved(result.run.to_json()))


def bisect(model: PathLike | None = None, *, target: str = "host",
           shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None,
           inputs: Sequence[str] = (), seed: int = 0, run_cmd: str | None = None, compile_cmd: str | None = None,
           latency_regex: str | None = None, latency_json: str | None = None, latency_unit: str = "ms",
           timeout_s: float | None = None, granularity: str = "segment", segments: int = 12,
           repeats: int | None = None, max_ci: float | None = None, pilot: int = 3, budget_runs: int | None = None,
           suffixes: bool | None = None, baseline: bool = True, statistic: str = "auto", confidence: float = 0.95,
           resamples: int = 2000, backend: str = "onnxruntime", device: str = "CPU", precision: str = "",
           performance_hint: str = "LATENCY", cut_rule: str = "auto", provider: str = "cpu", threads: int = 0,
           opt_level: str = "all", clock: str = "wall", visit_warmup: int | None = None, warm_with: str = "auto",
           runs_per_visit: int = 1, recompile_every: int | None = None, cache_dir: PathLike | None = None,
           no_cache: bool = False, boundary_runs: int | None = None, max_cut_share: float = 0.1,
           validate: bool = False, validate_runs: int = 50, gap_runs: int = 20, devices: str | None = None,
           ray_address: str | None = None) -> Run:
    """Time every segment of ``model`` (default: the bundled sample) by differential timing of its prefixes and
    suffixes, as ``layerscope bisect`` does: in this process on ONNX Runtime or OpenVINO, or on a device through
    ``run_cmd`` (:class:`layerscope.workflows.bisect.BisectRequest` says what each option does). Measurements are
    cached (``cache_dir``, ``no_cache``): a bisect interrupted with Ctrl-C resumes when called again with the same
    options."""
    from layerscope.workflows.bisect import BisectRequest
    from layerscope.workflows.bisect import bisect as run_bisect
    from layerscope.workflows.common import checked_dims, checked_shapes

    request = BisectRequest(
        model, target=target, shapes=checked_shapes(shapes), dims=checked_dims(dims), inputs=tuple(inputs),
        seed=seed, run_cmd=run_cmd, compile_cmd=compile_cmd, latency_regex=latency_regex, latency_json=latency_json,
        latency_unit=latency_unit, timeout_s=timeout_s, granularity=granularity, segments=segments, repeats=repeats,
        max_ci=max_ci, pilot=pilot, budget_runs=budget_runs, suffixes=suffixes, baseline=baseline,
        statistic=statistic, confidence=confidence, resamples=resamples, backend=backend, device=device,
        precision=precision, performance_hint=performance_hint, cut_rule=cut_rule, provider=provider,
        threads=threads, opt_level=opt_level, clock=clock, visit_warmup=visit_warmup, warm_with=warm_with,
        runs_per_visit=runs_per_visit, recompile_every=recompile_every, cache_dir=cache_dir, no_cache=no_cache,
        boundary_runs=boundary_runs, validate=validate, validate_runs=validate_runs, gap_runs=gap_runs,
        max_cut_share=max_cut_share, devices=devices, ray_address=ray_address)
    return Run(_as_saved(run_bisect(request).to_json()))


def import_run(files: Sequence[PathLike], *, model: PathLike | None = None,
               shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None,
               format: str = "auto") -> Run:
    """The vendors' profiling outputs ``files`` (Horizon, TensorRT, ONNX Runtime, OpenVINO, RKNN; ``format``
    ``auto``: detected from each file's content) as one run, as ``layerscope import`` makes it: joined to the layers
    of ``model`` when given (loaded with ``shapes`` and ``dims``), else one layer per vendor entry."""
    from layerscope.workflows.common import checked_dims, checked_shapes
    from layerscope.workflows.import_run import ImportRequest
    from layerscope.workflows.import_run import import_run as run_import

    request = ImportRequest(tuple(_paths(files)), model=model, shapes=checked_shapes(shapes), dims=checked_dims(dims),
                            format=format)
    return Run(_as_saved(run_import(request).run.to_json()))


def reconcile(runs: PathLike | Sequence[PathLike]) -> list[Run]:
    """Each run file of ``runs`` with its ``reconcile`` section, as ``layerscope reconcile --save`` writes it: k =
    measured / estimated, per layer and op type, rank agreement, a verdict (with several runs, k's spread across
    them in each). The files are not written: ``save`` the runs."""
    from layerscope.workflows.reconcile import ReconcileRequest
    from layerscope.workflows.reconcile import reconcile as run_reconcile

    result = run_reconcile(ReconcileRequest(tuple(_paths(runs))))
    return [Run(_as_saved(run.to_json())) for run in result.runs]


def advise(run: PathLike, *, model: PathLike | None = None, no_model: bool = False, target: str | None = None,
           measure: bool | None = None, measure_runs: int = 20, inputs: Sequence[str] = (), top: int = 10) -> Run:
    """The run file ``run`` with its ``findings`` section, as ``layerscope advise --save`` writes it
    (:class:`layerscope.workflows.advise.AdviseRequest` says what each option does). The file is not written:
    ``save`` the run."""
    from layerscope.workflows.advise import AdviseRequest
    from layerscope.workflows.advise import advise as run_advise

    request = AdviseRequest(run, model=model, no_model=no_model, target=target, measure=measure,
                            measure_runs=measure_runs, inputs=tuple(inputs), top=top)
    return Run(_as_saved(run_advise(request).run.to_json()))


def calibrate(runs: Sequence[PathLike] = (), *, output: PathLike, kernels: bool = False, budget: str = "10m",
              families: str | None = None, kernel_threads: int = 1, visits: int = 11, adaptive: bool = True,
              cache: PathLike | None = None, backend: str = "onnxruntime", device: str = "CPU", precision: str = "",
              performance_hint: str = "LATENCY", run_cmd: str | None = None, compile_cmd: str | None = None,
              latency_regex: str | None = None, latency_json: str | None = None, latency_unit: str = "ms",
              timeout_s: float | None = None, shapes: Mapping[str, Sequence[int]] | None = None,
              dims: Mapping[str, int] | None = None, name: str | None = None, base: str | None = None,
              checks: Sequence[PathLike] = (), board: PathLike | None = None,
              per_unit_only: bool = False, force: bool = False) -> CalibrateResult:
    """Fit a hardware profile to measured ``runs`` (or to the board latencies of ``board``), or with ``kernels``
    the kernel-level latency predictor, and write it to ``output``, as ``layerscope calibrate`` does
    (:class:`layerscope.workflows.calibrate.CalibrateRequest` says what each option does); returns the path written
    and the fit."""
    from layerscope.workflows.calibrate import CalibrateRequest
    from layerscope.workflows.calibrate import calibrate as run_calibrate
    from layerscope.workflows.common import checked_dims, checked_shapes

    request = CalibrateRequest(
        output, runs=tuple(_paths(runs)), kernels=kernels, budget=budget, families=families,
        kernel_threads=kernel_threads, visits=visits, adaptive=adaptive, cache=cache, backend=backend, device=device,
        precision=precision, performance_hint=performance_hint, run_cmd=run_cmd, compile_cmd=compile_cmd,
        latency_regex=latency_regex, latency_json=latency_json, latency_unit=latency_unit, timeout_s=timeout_s,
        shapes=checked_shapes(shapes), dims=checked_dims(dims), name=name, base=base, checks=tuple(_paths(checks)),
        board=board, per_unit_only=per_unit_only, force=force)
    return run_calibrate(request)


def profile_pipeline(function: str | Callable[[Any], Any], model: PathLike, *, target: str = "host",
                     shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None,
                     runs: int = 20, warmup: int = 3, threads: int = 0, opt_level: str = "all", provider: str = "cpu",
                     layers: bool = True, seed: int = 0) -> Run:
    """A whole pipeline profiled around ``model``, as ``layerscope pipeline`` does: ``function`` (``SCRIPT.py:
    FUNCTION``, or a callable) called once per run with a session on ``model``
    (:class:`layerscope.workflows.pipeline.PipelineRequest` says what each option does). Interrupted (Ctrl-C), it
    raises :class:`layerscope.workflows.common.Interrupted` holding the runs completed."""
    from layerscope.workflows.common import Interrupted, checked_dims, checked_shapes
    from layerscope.workflows.pipeline import PipelineRequest, pipeline

    request = PipelineRequest(function, model, target=target, shapes=checked_shapes(shapes), dims=checked_dims(dims),
                              runs=runs, warmup=warmup, threads=threads, opt_level=opt_level, provider=provider,
                              layers=layers, seed=seed)
    run = pipeline(request)
    if run.pipeline is not None and run.pipeline.interrupted:
        raise Interrupted(run, "interrupted")
    return Run(_as_saved(run.to_json()))


def run_sweep(models: Sequence[PathLike] = (), *, out_dir: PathLike, config: PathLike | None = None,
              targets: Sequence[str] = (), modes: Sequence[str] = (), dtypes: Sequence[str] = (),
              threads: Sequence[int] = (), opt_levels: Sequence[str] = (),
              shapes: Mapping[str, Sequence[int]] | None = None, runs: int | None = None, warmup: int | None = None,
              ray_address: str | None = None, num_cpus: int | None = None, no_ray: bool = False,
              dry_run: bool = False) -> SweepResult:
    """Every model on every target in every mode and setting, as ``layerscope sweep`` runs it into the folder
    ``out_dir`` (:class:`layerscope.workflows.sweep.SweepRequest` says what each option does; the package
    ``layerscope.sweep`` holds its parts, hence this name). Failed cells raise the error the command exits with,
    once the dataset and leaderboard are written."""
    from layerscope.workflows.common import checked_shapes
    from layerscope.workflows.sweep import SweepRequest, sweep

    request = SweepRequest(out_dir, models=tuple(_paths(models)), config=config, targets=tuple(targets),
                           modes=tuple(modes), dtypes=tuple(dtypes), threads=tuple(threads),
                           opt_levels=tuple(opt_levels), shapes=checked_shapes(shapes), runs=runs, warmup=warmup,
                           ray_address=ray_address, num_cpus=num_cpus, no_ray=no_ray, dry_run=dry_run)
    result = sweep(request)
    failure = result.failure()
    if failure is not None:
        raise failure
    return result


def lint(config: PathLike) -> LintResult:
    """The findings of ``layerscope lint`` on the Horizon hb_compile YAML ``config`` (``failed``: one is an
    error)."""
    from layerscope.workflows.lint import LintRequest
    from layerscope.workflows.lint import lint as run_lint

    return run_lint(LintRequest(config))


def _paths(paths: PathLike | Sequence[PathLike]) -> list[PathLike]:
    """One path, or each of several (a string is one path, not a sequence of them)."""
    if isinstance(paths, str | os.PathLike):
        return [paths]
    return list(paths)


def compare(before: PathLike | Run, after: PathLike | Run, *, labels: Sequence[str] = ("before", "after"),
            fail_if_slower: float | None = None, fail_if_layer_slower: float | None = None) -> Run:
    """Compare two runs of a model (run files, or :class:`Run` objects) as ``layerscope compare`` does
    (:class:`layerscope.workflows.compare.CompareRequest` says what each option does): the *after* run with its
    ``comparison`` section, where the end-to-end latency and every matched layer carry a 95% interval and a
    verdict (faster, slower, no change detectable at this noise). With a threshold the section's ``gate`` says
    whether it found a regression (``gate.regression``, ``gate.failures``); the function does not raise for one
    (the CLI exits 4)."""
    from layerscope.workflows.compare import CompareRequest
    from layerscope.workflows.compare import compare as run_compare

    def side(run: PathLike | Run) -> PathLike | RunFile:
        return run.typed if isinstance(run, Run) else run

    names = tuple(labels)
    if len(names) != 2:
        raise InputError(f"labels: expected two names, got {len(names)}")
    request = CompareRequest(side(before), side(after), labels=(names[0], names[1]), fail_if_slower=fail_if_slower,
                             fail_if_layer_slower=fail_if_layer_slower)
    return Run(_as_saved(run_compare(request).run.to_json()))


def _as_saved(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document as its run file reads back (version 2, JSON types), so the API and the CLI agree."""
    import json

    loaded: dict[str, Any] = json.loads(json.dumps(document, allow_nan=False))
    return loaded
