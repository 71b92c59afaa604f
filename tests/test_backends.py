"""The measuring-backend protocol and ``layerscope backends``."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from conftest import zoo
from layerscope.cli.main import main
from layerscope.errors import BackendUnavailable, InputError
from layerscope.measure.backend import CAPABILITIES, Backend, OnnxRuntimeBackend, get_backend
from layerscope.measure.inputs import make_inputs
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model


def test_onnxruntime_backend_describes_the_installed_build() -> None:
    backend: Backend = get_backend("ONNXRuntime")
    assert isinstance(backend, OnnxRuntimeBackend)
    info = backend.info()
    assert info.name == "onnxruntime" and info.version == ort.__version__
    assert "cpu" in info.available_providers and set(info.available_providers) <= set(info.providers)
    assert ("cuda" in info.available_providers) == ("CUDAExecutionProvider" in ort.get_available_providers())
    assert set(info.capabilities) <= set(CAPABILITIES) and "kernel-profile" in info.capabilities
    assert {"disable", "basic", "extended", "all"} <= set(info.opt_levels)


def test_unknown_backend_and_missing_provider_are_distinct_errors() -> None:
    with pytest.raises(InputError, match="unknown backend 'tvm'; known: onnxruntime"):
        get_backend("tvm")
    backend = get_backend("onnxruntime")
    assert backend.check_provider("cpu") == "CPUExecutionProvider"
    if "CoreMLExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(BackendUnavailable, match="available: cpu"):
            backend.check_provider("coreml")


def test_backend_profile_measures_every_layer() -> None:
    graph = load_model(zoo("squeezenet"))
    feeds = make_inputs(graph, ())
    measurement = get_backend("onnxruntime").profile(graph, feeds, SessionConfig(threads=1), runs=3, warmup=1)
    assert measurement.runs == 3 and measurement.mapped_share >= 0.99
    assert set(measurement.layers) == {layer.id for layer in graph.layers}
    assert all(np.isfinite(k.stats.median_us) for k in measurement.kernels)


def test_backends_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--format", "json"]) == 0
    entry = next(e for e in json.loads(capsys.readouterr().out) if e["name"] == "onnxruntime")
    assert entry["name"] == "onnxruntime" and entry["version"] == ort.__version__
    assert "cpu" in entry["available_providers"]
    assert main(["backends"]) == 0
    printed = capsys.readouterr().out
    assert f"onnxruntime {ort.__version__}" in printed and "kernel-profile" in printed
