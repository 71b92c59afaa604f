"""Shared fixtures: the ONNX package's model-zoo networks and a small-graph builder."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Every section layerscope makes without validation is checked against validation (runfile.models.check_trusted);
# set before layerscope is imported, and inherited by the commands the tests run as subprocesses.
os.environ.setdefault("LAYERSCOPE_CHECK_TRUSTED", "1")

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, settings
from onnx import TensorProto, helper, numpy_helper

# Property tests judge outcomes, never speed: no per-example deadline and no "too slow" health check (a loaded CI
# machine made a 200 ms deadline fail once), no example database written into the checkout. `make test` draws the
# same examples every run (derandomize: a test fails on every run or on none, so CI is never flaky by chance);
# LAYERSCOPE_HYPOTHESIS=explore draws new ones each run (and 10x as many): how new failures are looked for, as
# benchmarks/fuzz_inputs.py does with its seeds.
settings.register_profile("layerscope", deadline=None, database=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, database=None, derandomize=False,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("LAYERSCOPE_HYPOTHESIS", "layerscope"))
#: How many times the tests' own ``max_examples`` the profile draws.
EXAMPLES_SCALE = 10 if settings.default.derandomize is False else 1

ZOO_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO_MODELS = sorted(ZOO_DIR.glob("light_*.onnx"))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Interrupts reach the tests and their child processes: a shell that starts a job in the background without
    job control (``make test &``, ``nohup``) leaves SIGINT (or SIGHUP) ignored, and an ignored signal stays ignored
    in every child; the tests of Ctrl-C and SIGHUP need the defaults."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read or write the user's cache (host probe results, built samples)."""
    monkeypatch.setenv("LAYERSCOPE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


_RUN_SCHEMA_VALIDATOR: list[Any] = []


def run_schema_validator() -> Any:
    """A ``jsonschema`` validator of the shipped ``run.schema.json`` (built once)."""
    if not _RUN_SCHEMA_VALIDATOR:
        import jsonschema

        from layerscope.runfile.schema import shipped_text

        schema = json.loads(shipped_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        _RUN_SCHEMA_VALIDATOR.append(jsonschema.Draft202012Validator(schema))
    return _RUN_SCHEMA_VALIDATOR[0]


@pytest.fixture(autouse=True)
def _run_files_match_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run file a test writes through ``save_run`` is checked against the shipped JSON Schema."""
    import layerscope.run

    original_parts = layerscope.run.run_parts

    def check(text: str) -> str:
        errors = sorted(run_schema_validator().iter_errors(json.loads(text)), key=lambda e: list(e.absolute_path))
        assert not errors, f"run file off the schema at {errors[0].json_path}: {errors[0].message[:300]}"
        return text

    # the run's writer (a typed run: save_run takes nothing else): its parts joined and checked
    monkeypatch.setattr(layerscope.run, "run_parts",
                        lambda run, as_read=None: iter([check("".join(original_parts(run, as_read)))]))


def conv_chain(nodes: int) -> bytes:
    """A serialized model of ``nodes`` 3x3 convolutions with ReLU on a 1x8x32x32 input (some milliseconds a run;
    a bisect of a few seconds)."""
    weights = numpy_helper.from_array(np.full((8, 8, 3, 3), 0.01, dtype=np.float32), "w")
    layers = []
    for i in range(nodes):
        source = "x" if i == 0 else f"r{i - 1}"
        layers += [helper.make_node("Conv", [source, "w"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
                   helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
    graph = helper.make_graph(layers, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 32])],
                              [helper.make_tensor_value_info(f"r{nodes - 1}", TensorProto.FLOAT, [1, 8, 32, 32])],
                              initializer=[weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def zoo(name: str) -> Path:
    """Path of a model-zoo network shipped with onnx, e.g. ``zoo("resnet50")``."""
    path = ZOO_DIR / f"light_{name}.onnx"
    assert path.exists(), path
    return path


ModelWriter = Callable[..., Path]


@pytest.fixture()
def write_model(tmp_path: Path) -> ModelWriter:
    """Build a one-graph model with ``onnx.helper`` and save it; returns its path.

    ``inputs``/``outputs`` are (name, elem_type, shape) triples; ``initializers`` maps names to arrays.
    """

    def write(nodes: Sequence[onnx.NodeProto], inputs: Sequence[tuple[str, int, Sequence[int | str]]],
              outputs: Sequence[tuple[str, int, Sequence[int | str] | None]],
              initializers: dict[str, np.ndarray] | None = None, *, name: str = "model.onnx",
              opset: int = 17) -> Path:
        graph = helper.make_graph(
            list(nodes), "g",
            [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
            [helper.make_tensor_value_info(n, t, None if s is None else list(s)) for n, t, s in outputs],
            initializer=[numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        path = tmp_path / name
        onnx.save_model(model, str(path))
        return path

    return write


F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


#: Headless Chromium for the report tests: Debian's chromium (installed by `make test`) driven by Playwright.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser() -> Any:
    """One Chromium per test module (a ``playwright.sync_api.Browser``)."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def unchecked_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trusted sections not checked against validation: for tests that give the run file's writer, on purpose,
    sections validation refuses (a value of another type, NaN, a partial run)."""
    from layerscope.runfile import models

    monkeypatch.setattr(models, "CHECK_TRUSTED", False)
