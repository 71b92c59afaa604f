"""Runtimes behind one protocol: no backend-name comparison outside ``runtimes/``, and a runtime registered in one
file (a fake that times ``time.sleep``) runs ``profile``, ``bench`` and ``bisect`` through the use cases and through
the CLI's ``--backend``; the predictor's kernel timing goes through each runtime's ``kernel_runner``."""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerscope
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.measure.fusion import FusionMap, KernelMapping
from layerscope.measure.kernel_trace import KernelSamples
from layerscope.measure.kernels import KernelRunner
from layerscope.measure.profile import KernelResult, Measurement, Progress, layer_results
from layerscope.measure.runners import Job, Runner
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph
from layerscope.runfile.io import measurement_kind
from layerscope.runfile.models import DifferentialMeasurement
from layerscope.runtimes import registry
from layerscope.runtimes.base import BackendInfo, BenchSession, BisectTiming, RuntimeOptions, SyncBenchSession
from layerscope.runtimes.command import kernel_runner as command_kernel_runner
from layerscope.runtimes.machine import machine_info
from layerscope.runtimes.onnxruntime.kernels import OrtKernels
from layerscope.runtimes.openvino.kernels import OpenVinoKernels
from layerscope.runtimes.spec import RuntimeSpec
from layerscope.stats import summarize
from layerscope.workflows.bench import BenchRequest, bench
from layerscope.workflows.bisect import BisectRequest, bisect
from layerscope.workflows.profile import ProfileRequest, profile

PACKAGE = Path(layerscope.__file__).parent

#: Seconds one fake layer sleeps.
LAYER_S = 0.0002


def _runtime_names() -> set[str]:
    return set(registry.names()) | {"ort"}


def _comparisons(path: Path, names: set[str]) -> list[str]:
    """``a == "openvino"``, ``x in ("onnxruntime", ...)`` and the like in ``path``: where and what."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for operand in (node.left, *node.comparators):
            elements = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) else [operand]
            if any(isinstance(e, ast.Constant) and e.value in names for e in elements):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_backend_name_comparison_outside_the_runtimes() -> None:
    names = _runtime_names()
    outside = [hit for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != "runtimes"
               for hit in _comparisons(p, names)]
    assert outside == []


def test_the_count_sees_a_comparison(tmp_path: Path) -> None:
    path = PACKAGE / "_probe_does_not_exist.py"
    source = tmp_path / "probe.py"
    source.write_text('if backend == "openvino" or name in ("onnxruntime", "x"):\n    pass\n', encoding="utf-8")
    assert len(_comparisons_at(source, _runtime_names())) == 2
    assert not path.exists()


def _comparisons_at(path: Path, names: set[str]) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
            and any(isinstance(e, ast.Constant) and e.value in names
                    for o in (n.left, *n.comparators)
                    for e in (o.elts if isinstance(o, ast.Tuple | ast.List | ast.Set) else [o]))]


# -- a fake runtime, registered in this file only -------------------------------------------------------------------

FAKE = RuntimeSpec(name="fake", title="Fake", capabilities=frozenset({"kernel-profile", "in-process"}),
                   options=("threads",))


def _sleep_layers(count: int) -> float:
    """Run ``count`` layers of ``LAYER_S`` each; the µs it took."""
    start = time.perf_counter()
    for _ in range(count):
        time.sleep(LAYER_S)
    return (time.perf_counter() - start) * 1e6


class _Session:
    """Runs a model of ``layers`` layers: ``LAYER_S`` each."""

    def __init__(self, layers: int) -> None:
        self.layers = layers

    def run(self, _outputs: object, _feeds: Mapping[str, np.ndarray]) -> None:
        _sleep_layers(self.layers)


class _Runner:
    """Times a prefix or suffix model by its node count."""

    identity: Mapping[str, object] = {"runner": "fake", "version": "1.0", "provider": "cpu", "threads": 0,
                                      "opt_level": "all"}

    def measure(self, job: Job) -> float:
        return _sleep_layers(len(onnx.load(str(job.model_path), load_external_data=False).graph.node))

    def boundary(self, job: Job, whole: Job, runs: int) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class _Opened:
    provider: str = "cpu"
    spec: RuntimeSpec = FAKE

    def version(self) -> str:
        return "1.0"

    def session_config(self, threads: int, opt_level: str) -> SessionConfig:
        return SessionConfig(provider=self.provider, threads=threads, opt_level=opt_level)

    def profile(self, graph: Graph, feeds: Mapping[str, np.ndarray], config: SessionConfig, *, runs: int,
                warmup: int, weights: Mapping[str, float] | None = None,
                progress: Progress | None = None) -> Measurement:
        _sleep_layers(warmup * len(graph.layers))
        totals = [_sleep_layers(len(graph.layers)) for _ in range(runs)]
        per_layer = {layer.id: tuple(_sleep_layers(1) for _ in range(runs)) for layer in graph.layers}
        kernels = tuple(KernelResult(KernelSamples(f"k_{lid}", "Sleep", "cpu", series), summarize(series), (lid,),
                                     "layer") for lid, series in per_layer.items())
        fusion = FusionMap({k.samples.name: KernelMapping(k.samples.name, "Sleep", "", k.layers, "layer")
                            for k in kernels}, ())
        latency = summarize(totals)
        return Measurement(config=config, backend_version="1.0", provider="cpu", runs=runs, warmup=warmup,
                           latency=latency, instrumented=latency, kernels=kernels,
                           layers=layer_results(graph, kernels, weights or {}), fusion=fusion, coverage=1.0,
                           overhead=0.0, machine=machine_info(), median_run=(), latency_samples_us=tuple(totals),
                           backend=FAKE.name)

    def bench_session(self, graph: Graph, config: SessionConfig, streams: int) -> BenchSession:
        return SyncBenchSession(_Session(len(graph.layers)), "FakeProvider")

    def bisect_runner(self, config: SessionConfig, feeds: Mapping[str, np.ndarray], timing: BisectTiming) -> Runner:
        return _Runner()

    def fused_groups(self, graph: Graph, config: SessionConfig) -> tuple[tuple[str, ...], ...] | None:
        return None

    def chosen_precision(self, runner: Runner) -> str | None:
        return None

    def kernel_runner(self) -> KernelRunner:
        raise InputError("fake: no kernel timing")


class _Fake:
    spec = FAKE

    def info(self) -> BackendInfo:
        return BackendInfo(FAKE.name, "1.0", ("kernel-profile",), ("cpu",), ("cpu",), ())

    def open(self, options: RuntimeOptions) -> _Opened:
        return _Opened()

    def runtime_record(self, recorded: Mapping[str, object]) -> tuple[dict[str, object] | None, KernelRunner]:
        raise InputError("fake: no kernel timing")


@pytest.fixture()
def fake() -> Iterator[str]:
    registry.register(FAKE, _Fake)
    yield FAKE.name
    registry.unregister(FAKE.name)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six layers: MatMul, Relu, MatMul, Relu, MatMul, Relu on a 1x16 input."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 16])], inits)
    path = tmp_path_factory.mktemp("chain") / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_registered_runtime_is_a_backend_choice(fake: str) -> None:
    assert fake in registry.choices() and fake in registry.available()
    assert fake not in registry.with_capability("exec-graph-cuts")


def test_profile_runs_through_a_registered_runtime(fake: str, chain: Path) -> None:
    run = profile(ProfileRequest(model=chain, backend=fake, runs=3, warmup=1)).run
    assert run.measurement is not None and run.measurement.backend == fake
    measured = {layer.id: layer.measured_us for layer in run.layers}
    assert set(measured) == {"mm0", "relu0", "mm1", "relu1", "mm2", "relu2"}
    assert all(us is not None and us >= LAYER_S * 1e6 for us in measured.values()), measured


def test_bench_runs_through_a_registered_runtime(fake: str, chain: Path) -> None:
    run = bench(BenchRequest(model=chain, backend=fake, runs=5, warmup=1)).run
    assert run.measurement is not None and run.measurement.backend == fake
    assert run.measurement.provider == "FakeProvider"
    assert run.latency is not None and run.latency.p50_us >= 6 * LAYER_S * 1e6


def test_bisect_runs_through_a_registered_runtime(fake: str, chain: Path, tmp_path: Path) -> None:
    run = bisect(BisectRequest(model=chain, backend=fake, segments=3, repeats=3, pilot=1, no_cache=True,
                               gap_runs=2))
    assert isinstance(run.measurement, DifferentialMeasurement)
    assert run.measurement.backend == fake and run.measurement.method == "differential"
    segments = run.bisect.segments if run.bisect is not None else []
    assert segments and sum((s.end or 0) - (s.start or 0) for s in segments) == 6


def _run_file(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_profile_bench_and_bisect_take_a_registered_runtime_on_the_command_line(fake: str, chain: Path,
                                                                                 tmp_path: Path) -> None:
    assert main(["profile", str(chain), "--backend", fake, "--runs", "3", "--warmup", "1",
                 "-o", str(tmp_path / "p.json")]) == 0
    measured = _run_file(tmp_path / "p.json")
    assert measured["measurement"]["backend"] == fake
    assert all(layer["measured"]["median_us"] >= LAYER_S * 1e6 for layer in measured["layers"])
    assert main(["bench", str(chain), "--backend", fake, "--runs", "5", "--warmup", "1",
                 "-o", str(tmp_path / "b.json")]) == 0
    benched = _run_file(tmp_path / "b.json")
    assert benched["measurement"]["backend"] == fake and benched["measurement"]["provider"] == "FakeProvider"
    assert main(["bisect", str(chain), "--backend", fake, "--segments", "3", "--repeats", "3", "--pilot", "1",
                 "--gap-runs", "2", "--no-cache", "-o", str(tmp_path / "d.json")]) == 0
    split = _run_file(tmp_path / "d.json")
    assert split["measurement"]["backend"] == fake
    assert sum(s["end"] - s["start"] for s in split["bisect"]["segments"]) == 6


def test_an_unregistered_runtime_is_no_choice(chain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(chain), "--backend", FAKE.name]) == 2
    assert "'fake' is not one of 'onnxruntime', 'openvino'" in capsys.readouterr().err


def test_kernel_timing_goes_through_the_runtime(tmp_path: Path) -> None:
    assert registry.with_capability("kernel-timing") == ("onnxruntime", "openvino", "command")
    ort_kernels = registry.get_runtime("onnxruntime").open(RuntimeOptions()).kernel_runner()
    assert isinstance(ort_kernels, OrtKernels) and ort_kernels.name == ort_kernels.grouping == "onnxruntime"
    here, grouping = registry.get_runtime("command").runtime_record({"runner": "command", "threads": 2})
    assert here is None and isinstance(grouping, OrtKernels)
    recorded, runner = registry.get_runtime("onnxruntime").runtime_record({"runner": "onnxruntime", "threads": 2})
    assert recorded is not None and (recorded["runner"], recorded["threads"]) == ("onnxruntime", 2)
    assert isinstance(runner, OrtKernels)
    command = command_kernel_runner(object())  # type: ignore[arg-type]
    assert not command.own_grouping and command.grouping == "onnxruntime"
    if registry.get_runtime("openvino").info().version:
        opened = registry.get_runtime("openvino").open(RuntimeOptions(device="cpu"))
        kernels = opened.kernel_runner()
        assert isinstance(kernels, OpenVinoKernels) and kernels.device == "CPU" and kernels.own_grouping


def test_a_version_1_measurement_kind_is_read_from_its_recorded_source() -> None:
    assert measurement_kind({"source": "bench", "method": "differential"}) == "bench"
    assert measurement_kind({"source": "layerscope profile", "method": "differential"}) == "differential"
    assert measurement_kind({"source": "layerscope pipeline"}) == "kernel-profile"
    assert measurement_kind({"source": "vendor:hb_perf", "backend": "onnxruntime"}) == "vendor-import"
    assert measurement_kind({"backend": "onnxruntime"}) == "kernel-profile"
    assert measurement_kind({"backend": "openvino"}) == "vendor-import"
