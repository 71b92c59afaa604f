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
             dtype: str | None = None, timeline: bool = False) -> Run:
    """A static per-layer estimate of ``model`` on the hardware profile ``target`` (a name or a TOML file), as
    ``layerscope estimate`` makes it; ``timeline`` adds the schedule per unit and core and DDR over time."""
    from layerscope.estimate import estimate_graph, simulate_timeline
    from layerscope.model import load_model
    from layerscope.run import add_timeline, estimate_run
    from layerscope.targets import load_profile

    profile = load_profile(target)
    if dtype is not None and dtype not in profile.dtypes:
        raise InputError(f"profile {profile.name!r} has no dtype {dtype!r}; it has {', '.join(profile.dtypes)}")
    graph = load_model(model, _shapes(shapes))
    result = estimate_graph(graph, profile, dtype)
    run = estimate_run(graph, result, profile)
    if timeline:
        run = add_timeline(run, simulate_timeline(graph, profile, dtype, costs=result.costs),
                           profile.ddr_nominal_bytes_per_s)
    return Run(_as_saved(run))


def profile(model: PathLike, *, target: str = "host", shapes: Mapping[str, Sequence[int]] | None = None,
            inputs: Sequence[str] = (), seed: int = 0, runs: int = 50, warmup: int = 10, threads: int = 0,
            opt_level: str = "all", provider: str = "CPUExecutionProvider", timeline: bool = False) -> Run:
    """Measure every layer of ``model`` on ONNX Runtime beside its estimate on ``target``, as ``layerscope
    profile`` does: ``runs`` uninstrumented runs for the latency, then as many profiled runs for the layers.
    ``inputs`` takes the CLI's ``--input`` specs; ``threads`` 0 is ONNX Runtime's default; ``seed`` seeds the
    generated inputs."""
    from layerscope.estimate import estimate_graph, simulate_timeline
    from layerscope.measure.backend import get_backend
    from layerscope.measure.inputs import make_inputs
    from layerscope.measure.session import SessionConfig
    from layerscope.model import load_model
    from layerscope.run import add_measurement, add_timeline, estimate_run
    from layerscope.targets import load_profile

    backend = get_backend("onnxruntime")
    backend.check_provider(provider)
    graph = load_model(model, _shapes(shapes))
    feeds = make_inputs(graph, inputs, seed)
    hardware = load_profile(target)
    result = estimate_graph(graph, hardware)
    config = SessionConfig(provider=provider, threads=threads, opt_level=opt_level)
    measurement = backend.profile(graph, feeds, config, runs=runs, warmup=warmup,
                                  weights={e.layer_id: e.latency_us for e in result.layers})
    run = add_measurement(estimate_run(graph, result, hardware), measurement)
    if timeline:
        run = add_timeline(run, simulate_timeline(graph, hardware, None, costs=result.costs),
                           hardware.ddr_nominal_bytes_per_s)
    return Run(_as_saved(run))


def _shapes(shapes: Mapping[str, Sequence[int]] | None) -> dict[str, tuple[int, ...]]:
    out = {}
    for name, dims in (shapes or {}).items():
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise InputError(f"shape of input {name!r}: {list(dims)} is not a list of positive integers")
        out[name] = tuple(dims)
    return out


def _as_saved(run: RunFile) -> dict[str, Any]:
    """The document as its run file reads back (version 2, JSON types), so the API and the CLI agree."""
    import json

    loaded: dict[str, Any] = json.loads(json.dumps(run.to_json(), allow_nan=False))
    return loaded


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
