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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerscope.errors import InputError
from layerscope.report.renderers import RENDERERS, format_of, get_renderer
from layerscope.runfile.derived import KFactor, layer_shares, scale_factor, time_basis

if TYPE_CHECKING:
    import pandas as pd

    from layerscope.measure.stress import StressSpec
    from layerscope.runfile.models import RunFile, RunLike

PathLike = str | os.PathLike[str]

#: Layer fields that are the layer's identity, not a quantity.
_IDENTITY = ("id", "name", "op_type", "domain", "shape_source")
#: Layer fields that are lists of names or shapes: left out of the frame (the run file keeps them).
_STRUCTURE = ("inputs", "outputs", "output_shapes", "observed")
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
        return scale_factor(self.document)

    def layer_measured_us(self, layer_id: str) -> float | None:
        """A layer's measured time as every report shows it (``None``: not measured; 0: eliminated)."""
        layer = self.typed.layer_by_id.get(layer_id)
        if layer is None:
            raise KeyError(layer_id)
        return layer.measured_us

    def save(self, path: PathLike) -> Path:
        """Write the run file atomically (the bytes ``layerscope ... --json`` writes); return its path."""
        from layerscope.run import save_run

        return save_run(self.document, path)

    def report(self, path: PathLike | None = None, *, fmt: str | None = None) -> str | bytes | Path:
        """Render a report: ``fmt`` one of :data:`REPORT_FORMATS` (default: from ``path``'s suffix, else html),
        by the renderer ``layerscope report --format`` uses (:mod:`layerscope.report.renderers`; ``terminal`` is
        what the command that made the run printed, ``onnx`` the run's model annotated). With ``path`` the
        report is written atomically there (a trace to ``.gz`` compressed) and the path returned; else the text
        (bytes for the trace and the model) is returned."""
        from layerscope.fileio import write_atomic

        chosen = fmt or format_of(path)
        compress = path is not None and str(path).endswith(".gz")
        content = get_renderer(chosen, compress=compress).render(dict(self.document))
        return content if path is None else write_atomic(path, content)

    def layers_frame(self) -> pd.DataFrame:
        """One row per layer with namespaced columns (see the module docstring)."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("layers_frame needs pandas", hint="pip install 'layerscope[pandas]'") from None
        rows = layer_rows(self.document)
        return pd.DataFrame(rows)


def layer_rows(run: RunLike) -> list[dict[str, Any]]:
    """One dict per layer of a run (typed, or its document), with the namespaced columns of
    :meth:`Run.layers_frame` (scalars only; what a layer lacks is absent from its dict)."""
    from layerscope.runfile.io import as_run

    typed = as_run(run)
    dumped = [layer.model_dump(mode="json", exclude_unset=True) for layer in typed.layers]
    shares = layer_shares(typed.layers, time_basis(typed))
    rows = []
    for layer, fields, share in zip(typed.layers, dumped, shares, strict=True):
        row: dict[str, Any] = {key: fields.get(key) for key in _IDENTITY}
        for key, value in fields.items():
            if key in ("estimate", "measured") and isinstance(value, Mapping):
                prefix = "est" if key == "estimate" else "meas"
                row.update({f"{prefix}.{k}": v for k, v in value.items() if _scalar(v)})
            elif key not in _IDENTITY and key not in _STRUCTURE and _scalar(value):
                row[f"cost.{key}"] = value
        rows.append({**row, "meas.time_us": layer.measured_us, "share": share})
    return rows


def load(path: PathLike) -> Run:
    """The run file at ``path`` (a version-1 file is migrated); ``RunFileError`` naming the bad field."""
    from layerscope.run import load_run

    return Run(load_run(path))


def estimate(model: PathLike, *, target: str = "host", shapes: Mapping[str, Sequence[int]] | None = None,
             dims: Mapping[str, int] | None = None, inputs: Sequence[str] = (), dtype: str | None = None,
             timeline: bool = False, predictor: PathLike | None = None, fusion: str = "auto",
             merge_into: PathLike | None = None) -> Run:
    """A static per-layer estimate of ``model`` on the hardware profile ``target`` (a name or a TOML file), as
    ``layerscope estimate`` makes it (:class:`layerscope.workflows.estimate.EstimateRequest` says what each option
    does); ``timeline`` adds the schedule per unit and core and DDR over time; ``merge_into`` is a run file of the
    same model whose measured sections the returned run keeps (the file is not written: ``save`` it)."""
    from layerscope.workflows.common import checked_dims, checked_shapes
    from layerscope.workflows.estimate import EstimateRequest
    from layerscope.workflows.estimate import estimate as run_estimate

    request = EstimateRequest(model, target=target, shapes=checked_shapes(shapes), dims=checked_dims(dims),
                              inputs=tuple(inputs), dtype=dtype, timeline=timeline, predictor=predictor,
                              fusion=fusion, merge_into=merge_into)
    return Run(_as_saved(run_estimate(request).document()))


def profile(model: PathLike | None = None, *, target: str = "host",
            shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None,
            inputs: Sequence[str] = (), runs: int = 50, warmup: int = 10, seed: int = 0, threads: int = 0,
            opt_level: str = "all", provider: str = "cpu", backend: str = "onnxruntime", device: str = "CPU",
            precision: str = "", performance_hint: str = "LATENCY", streams: int = 0, timeline: bool = False,
            stress: str | StressSpec | None = None) -> Run:
    """Measure every layer of ``model`` (default: the bundled sample) on ONNX Runtime (or OpenVINO:
    ``backend="openvino"`` with ``device``, ``precision``, ``performance_hint``, ``streams``) beside its estimate on
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
                             timeline=timeline, stress=parse_stress(stress) if isinstance(stress, str) else stress)
    result = run_profile(request)
    if result.interrupted:
        raise Interrupted(result.run, "interrupted")
    return Run(_as_saved(result.run.to_json()))


def bench(model: PathLike | None = None, *, warmup: int = 10, runs: int | None = None, duration: float | None = None,
          streams: int = 1, threads: int = 0, provider: str = "cpu", backend: str = "onnxruntime", device: str = "CPU",
          precision: str = "", performance_hint: str = "LATENCY", opt_level: str = "all",
          shapes: Mapping[str, Sequence[int]] | None = None, dims: Mapping[str, int] | None = None,
          inputs: Sequence[str] = (), seed: int = 0, stress: str | StressSpec | None = None) -> Run:
    """The end-to-end latency distribution and throughput of ``model`` (default: the bundled sample), as
    ``layerscope bench`` measures it (:class:`layerscope.workflows.bench.BenchRequest` says what each option does):
    ``runs`` (default 100) or ``duration`` seconds over ``streams`` concurrent streams. Interrupted (Ctrl-C), it
    raises :class:`layerscope.workflows.common.Interrupted` holding what was measured."""
    from layerscope.measure.stress import parse_stress
    from layerscope.workflows.bench import BenchRequest
    from layerscope.workflows.bench import bench as run_bench
    from layerscope.workflows.common import Interrupted, checked_dims, checked_shapes

    request = BenchRequest(model, warmup=warmup, runs=runs, duration=duration, streams=streams, threads=threads,
                           provider=provider, backend=backend, device=device, precision=precision,
                           performance_hint=performance_hint, opt_level=opt_level, shapes=checked_shapes(shapes),
                           dims=checked_dims(dims), inputs=tuple(inputs), seed=seed,
                           stress=parse_stress(stress) if isinstance(stress, str) else stress)
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
    return Run(_as_saved(run_bisect(request)))


def _as_saved(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document as its run file reads back (version 2, JSON types), so the API and the CLI agree."""
    import json

    loaded: dict[str, Any] = json.loads(json.dumps(document, allow_nan=False))
    return loaded


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
