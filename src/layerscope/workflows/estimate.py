"""Estimate: a static, per-layer estimate of a model on a hardware profile (``layerscope estimate``,
``layerscope.estimate``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerscope.errors import RunFileError
from layerscope.estimator import estimate_graph
from layerscope.model.types import Graph
from layerscope.run import add_timeline, estimate_run
from layerscope.runfile.models import RunFile
from layerscope.targets import load_profile
from layerscope.workflows.common import QUIET, Hooks, OptionError, PathLike, load_graph

if TYPE_CHECKING:
    from layerscope.run_merge import ExistingRun

#: The dtypes ``--dtype`` offers (a profile may have fewer).
DTYPES = ("int8", "int16", "fp16", "bf16", "fp32")


@dataclass(frozen=True)
class EstimateRequest:
    """``layerscope estimate``'s options. ``shapes``: input name -> dims (``--shape``); ``dims``: named dim -> value
    (``--dim``); ``inputs``: ``--input`` specs (read only when the model must run to learn its shapes);
    ``predictor``: a predictor file of ``calibrate --kernels``; ``merge_into``: an existing run of the same model
    whose measured sections are kept, only its estimate (and timeline) refreshed (the CLI's ``-o`` at a file
    that exists); ``quantized_outputs``: the model is deployed without the Dequantize nodes at its outputs
    (hb_mapper's ``remove_node_type: "Dequantize"``, ``hb_model_modifier --all Dequantize``), its outputs handed
    over as the accelerator wrote them: no float32 hand-over is priced (on the profiles that price one,
    ``output_bytes_per_s``), and the run says so (``estimate_info.quantized_outputs``)."""

    model: PathLike
    target: str = "host"
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    dtype: str | None = None
    timeline: bool = False
    predictor: PathLike | None = None
    fusion: str = "auto"
    merge_into: PathLike | None = None
    quantized_outputs: bool = False


@dataclass(frozen=True)
class EstimateResult:
    """The estimate's run, the sections of a merged run to write as they were read
    (:func:`layerscope.run.save_run`'s ``as_read``), and with ``merge_into`` one line per thing to know about the
    merge (kept, stale, unmatched sections); ``notes`` is ``None`` without a merge."""

    run: RunFile
    as_read: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] | None = None

    def document(self) -> dict[str, Any]:
        """The run's JSON document, as :func:`layerscope.run.save_run` writes it."""
        return {**self.run.to_json(), **self.as_read}


def estimate(request: EstimateRequest, hooks: Hooks = QUIET) -> EstimateResult:
    """Estimate every layer of ``request.model`` on ``request.target`` (roofline; an estimate, not a measurement).
    ``OptionError`` for a ``dtype`` the profile lacks; ``RunFileError`` when ``merge_into`` is not a run of the same
    model."""
    profile = load_profile(request.target)
    if request.dtype is not None and request.dtype not in profile.dtypes:
        raise OptionError("--dtype", f"profile {profile.name!r} supports {', '.join(profile.dtypes)}")
    existing = _existing_run(Path(request.merge_into)) if request.merge_into is not None else None
    # the inputs matter only when shapes must be observed by running the model (data-dependent shapes, control flow)
    graph = load_graph(request.model, request.shapes, request.dims, request.inputs, seed=0, hooks=hooks)
    estimate = estimate_graph(graph, profile, request.dtype, quantized_outputs=request.quantized_outputs)
    typed = estimate_run(graph, estimate, profile)
    if request.timeline:
        from layerscope.estimator.timeline import simulate_timeline  # only --timeline schedules a frame

        typed = add_timeline(typed, simulate_timeline(graph, profile, request.dtype, costs=estimate.costs,
                                                      estimate=estimate),
                             profile.ddr_nominal_bytes_per_s)
    result = EstimateResult(typed)
    if existing is not None:
        from layerscope.run_merge import merge_estimate

        merged = merge_estimate(existing, typed, str(request.merge_into))
        result = EstimateResult(merged.run, merged.as_read, merged.notes)
    if request.predictor is not None:  # after the merge: a run's earlier prediction is replaced, never kept
        result = EstimateResult(_predict(result.run, graph, Path(request.predictor), request.dtype, request.fusion),
                                result.as_read, result.notes)
    return result


def _predict(run: RunFile, graph: Graph, path: Path, dtype: str | None, fusion: str = "auto") -> RunFile:
    """``run`` with the kernel predictor's numbers added (its roofline features on the predictor's own profile)."""
    from layerscope.analysis.predictor import add_prediction, load_predictor, predict_path  # only --predictor

    predictor = load_predictor(path)
    estimate = estimate_graph(graph, load_profile(predictor.profile), dtype or "fp32")
    return add_prediction(run, predict_path(predictor, graph, estimate, fusion), str(path), predictor)


def _existing_run(path: Path) -> ExistingRun:
    """The run already at ``path``: an estimate is merged into it, never written over something else."""
    from layerscope.run_merge import read_existing

    try:
        return read_existing(path)
    except RunFileError as exc:
        raise RunFileError(exc.message, hint="-o adds the estimate to an existing run of the same model; "
                                             "remove the file or choose another path") from None
