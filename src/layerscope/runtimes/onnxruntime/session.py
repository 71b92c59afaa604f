"""ONNX Runtime sessions as layerscope measures with them.

Contract: :func:`make_session` builds an ``InferenceSession`` for one provider with explicit threads and
graph-optimization level (a :class:`~layerscope.measure.session.SessionConfig`); a provider this onnxruntime build
does not have is ``BackendUnavailable`` (exit 3) naming the available ones (:func:`ort_provider`); a model ONNX
Runtime rejects is ``ModelError`` (exit 2) with the runtime's whole reason on one line
(:func:`~layerscope.errors.condensed`). ONNX Runtime's own failures while running (:func:`run_checked`,
:func:`is_runtime_error`, :func:`ort_failure`) are a :class:`~layerscope.errors.RuntimeFailure` (exit 2) naming the
seeded inputs and how to give real ones. :data:`PROVIDERS` and :data:`OPT_LEVELS` are the CLI's names (importing
this module imports no runtime).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerscope.errors import BackendUnavailable, ModelError, RuntimeFailure, condensed
from layerscope.measure.session import SessionConfig

if TYPE_CHECKING:
    import numpy as np

__all__ = ["OPT_LEVELS", "PROVIDERS", "failure_of", "is_runtime_error", "make_session", "ort_failure", "ort_provider",
           "run_checked"]

#: CLI names of providers -> ONNX Runtime's names.
PROVIDERS: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "dml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
}

#: CLI names of graph-optimization levels (``all`` is what users deploy with).
OPT_LEVELS = ("disable", "basic", "extended", "layout", "all")


def ort_provider(name: str) -> str:
    """The ONNX Runtime provider for a CLI name (``cuda``) or a full name; exit 3 if not available here."""
    import onnxruntime as ort

    full = PROVIDERS.get(name.lower(), name)
    available = ort.get_available_providers()
    if full not in available:
        short = [k for k, v in PROVIDERS.items() if v in available] or available
        raise BackendUnavailable(
            f"provider {name!r} is not available in this onnxruntime {ort.__version__} build; "
            f"available: {', '.join(short)}",
            hint="install onnxruntime-gpu for cuda/tensorrt" if full in (PROVIDERS["cuda"], PROVIDERS["tensorrt"])
            else None)
    return full


def _graph_opt_level(name: str) -> Any:
    import onnxruntime as ort

    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    layout = getattr(ort.GraphOptimizationLevel, "ORT_ENABLE_LAYOUT", None)
    if layout is not None:
        levels["layout"] = layout
    if name not in levels:
        raise ModelError(f"optimization level {name!r} is not supported by this onnxruntime; "
                         f"choose from {', '.join(levels)}")
    return levels[name]


def make_session(model_path: str | os.PathLike[str], config: SessionConfig, *,
                 profile_prefix: str | None = None, optimized_model_path: str | None = None) -> Any:
    """An ``InferenceSession`` for ``model_path``; with ``profile_prefix`` the ORT profiler is on."""
    import onnxruntime as ort

    provider = ort_provider(config.provider)
    options = ort.SessionOptions()
    options.graph_optimization_level = _graph_opt_level(config.opt_level)
    options.intra_op_num_threads = config.threads
    options.inter_op_num_threads = config.inter_op_threads
    options.log_severity_level = 4  # its errors come back as the exception, once (see run_checked)
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    if optimized_model_path is not None:
        options.optimized_model_filepath = optimized_model_path
    providers = [provider] if provider == "CPUExecutionProvider" else [provider, "CPUExecutionProvider"]
    try:
        return ort.InferenceSession(str(model_path), sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/... types
        reason = condensed(str(exc)) or type(exc).__name__
        raise ModelError(f"{Path(model_path).name}: ONNX Runtime cannot load the model: {reason}") from None


def is_runtime_error(error: BaseException) -> bool:
    """Whether ``error`` is one of ONNX Runtime's own (``Fail``, ``InvalidArgument``, ``RuntimeException`` ...)."""
    return type(error).__module__.startswith("onnxruntime")


def ort_failure(error: BaseException, feeds: Mapping[str, np.ndarray], what: str = "the model") -> RuntimeFailure:
    """The :class:`~layerscope.errors.RuntimeFailure` for ONNX Runtime failing to run ``what`` on ``feeds``."""
    from layerscope.model.random_inputs import runtime_failure

    return runtime_failure("ONNX Runtime", error, feeds, what=what)


def failure_of(error: BaseException, feeds: Mapping[str, np.ndarray]) -> RuntimeFailure | None:
    """:func:`ort_failure` for ``error`` when it is ONNX Runtime's own (:func:`is_runtime_error`), else ``None``:
    the bench's translator of a stream's error (:data:`~layerscope.measure.bench.FailureFn`)."""
    return ort_failure(error, feeds) if is_runtime_error(error) else None


def run_checked(session: Any, feeds: Mapping[str, np.ndarray], what: str = "the model") -> Any:
    """``session.run(None, feeds)``; ONNX Runtime's own failure is :func:`ort_failure` (exit 2)."""
    try:
        return session.run(None, dict(feeds))
    except Exception as exc:
        if is_runtime_error(exc):
            raise ort_failure(exc, feeds, what) from exc
        raise
