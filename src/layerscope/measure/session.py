"""How a runtime session is built, as every runtime reads it (the runtimes' session makers:
:mod:`layerscope.runtimes.onnxruntime.session`, :mod:`layerscope.runtimes.openvino.compile`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SessionConfig"]


@dataclass(frozen=True)
class SessionConfig:
    """How a session is built. ``threads`` 0 lets ONNX Runtime choose (one per physical core)."""

    provider: str = "cpu"
    threads: int = 0
    inter_op_threads: int = 0
    opt_level: str = "all"
