"""The runtime registry and ``layerscope backends``."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from conftest import zoo
from layerscope.cli.main import main
from layerscope.errors import BackendUnavailable, InputError
from layerscope.measure.inputs import make_inputs
from layerscope.model import load_model
from layerscope.runtimes import registry
from layerscope.runtimes.base import RuntimeOptions
from layerscope.runtimes.onnxruntime.runtime import OnnxRuntime
from layerscope.runtimes.spec import CAPABILITIES


def test_onnxruntime_runtime_describes_the_installed_build() -> None:
    runtime = registry.get_runtime("ONNXRuntime")
    assert isinstance(runtime, OnnxRuntime)
    info = runtime.info()
    assert info.name == "onnxruntime" and info.version == ort.__version__
    assert "cpu" in info.available_providers and set(info.available_providers) <= set(info.providers)
    assert ("cuda" in info.available_providers) == ("CUDAExecutionProvider" in ort.get_available_providers())
    assert set(info.capabilities) <= set(CAPABILITIES) and "kernel-profile" in info.capabilities
    assert {"disable", "basic", "extended", "all"} <= set(info.opt_levels)
    assert set(runtime.spec.capabilities) <= set(CAPABILITIES)


def test_unknown_backend_and_missing_provider_are_distinct_errors() -> None:
    with pytest.raises(InputError, match="unknown backend 'tvm'; known: onnxruntime, openvino"):
        registry.get_runtime("tvm")
    runtime = registry.get_runtime("onnxruntime")
    assert runtime.open(RuntimeOptions(provider="cpu")).provider == "cpu"
    if "CoreMLExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(BackendUnavailable, match="available: cpu"):
            runtime.open(RuntimeOptions(provider="coreml"))


def test_registry_choices_are_the_in_process_runtimes() -> None:
    assert registry.choices() == ("onnxruntime", "openvino")
    assert "command" in registry.names() and "command" not in registry.choices()
    assert registry.DEFAULT in registry.available()
    assert registry.with_capability("exec-graph-cuts") == ("openvino",)
    assert registry.spec("vendor tool") is None


def test_runtime_profile_measures_every_layer() -> None:
    graph = load_model(zoo("squeezenet"))
    feeds = make_inputs(graph, ())
    opened = registry.get_runtime("onnxruntime").open(RuntimeOptions())
    measurement = opened.profile(graph, feeds, opened.session_config(1, "all"), runs=3, warmup=1)
    assert measurement.runs == 3 and measurement.mapped_share >= 0.99
    assert set(measurement.layers) == {layer.id for layer in graph.layers}
    assert all(np.isfinite(k.stats.median_us) for k in measurement.kernels)


def test_backends_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--format", "json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in entries] == list(registry.choices())
    entry = next(e for e in entries if e["name"] == "onnxruntime")
    assert entry["version"] == ort.__version__
    assert "cpu" in entry["available_providers"]
    assert main(["backends"]) == 0
    printed = capsys.readouterr().out
    assert f"onnxruntime {ort.__version__}" in printed and "kernel-profile" in printed
