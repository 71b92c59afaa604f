"""Whole-pipeline profiling: the user's trace points beside the model's layers, in the run file and the trace."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import layerscope
from conftest import zoo
from layerscope.cli.main import main
from layerscope.measure.session import SessionConfig
from layerscope.run import save_run
from layerscope.runfile import as_run, load_document
from layerscope.runtimes.onnxruntime.pipeline import (
    UserCodeError,
    breakdown_of_run,
    profile_pipeline,
    stage_results,
)
from layerscope.tracing import Span, SpanKind, recording

SQUEEZENET = str(zoo("squeezenet"))
#: The deliberately slow post-processing: well above SqueezeNet's time on one thread (about 15 ms here, 40+ ms on a
#: loaded machine, where 40 ms of post-processing once made only 43% of the run).
SLOW_POST_S = 0.15

SCRIPT = textwrap.dedent(f"""
    import time

    import numpy as np

    import layerscope


    @layerscope.trace_point("decode")
    def decode(outputs):
        return np.argsort(outputs[0].ravel())[-5:]


    def pipeline(model):
        with layerscope.trace_point("preprocess"):
            feeds = {{name: array.copy() for name, array in model.example_inputs.items()}}
        outputs = model.run(None, feeds)
        with layerscope.trace_point("postprocess"):
            decode(outputs)
            time.sleep({SLOW_POST_S})  # the deliberately slow post-processing


    def no_model(model):
        with layerscope.trace_point("alone"):
            pass


    def broken(model):
        values = [1, 2]
        return values[5]
""")


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("user") / "my_pipeline.py"
    path.write_text(SCRIPT)
    return path


@pytest.fixture(scope="module")
def pipeline_run(script: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    out = tmp_path_factory.mktemp("out")
    assert main(["pipeline", f"{script}:pipeline", SQUEEZENET, "--runs", "4", "--warmup", "1",
                 "--threads", "1", "-o", str(out / "run.json"), "--trace", str(out / "trace.json")]) == 0
    return load_document(out / "run.json"), json.loads((out / "trace.json").read_text())


# --- the done-when: slow post-processing on top, the model's layers beside it ---------------------------------------

def test_slow_postprocessing_is_the_top_item_with_the_layers_beside_it(
        pipeline_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    run, _ = pipeline_run
    top = run["pipeline"]["top"]
    assert top[0]["name"] == "postprocess" and top[0]["kind"] == "post"
    assert top[0]["median_us"] >= SLOW_POST_S * 1e6 and top[0]["share"] > 0.5
    layer_ids = {layer["id"] for layer in run["layers"]}
    layers_in_top = [item for item in top if item["kind"] == "layer"]
    assert len(layers_in_top) >= 5 and {item["name"] for item in layers_in_top} <= layer_ids
    assert [item["median_us"] for item in top] == sorted((item["median_us"] for item in top), reverse=True)


def test_stages_breakdown_and_measurement(pipeline_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    run, _ = pipeline_run
    section = run["pipeline"]
    stages = {s["name"]: s for s in section["stages"]}
    assert {name: (s["kind"], s["depth"]) for name, s in stages.items()} == {
        "postprocess": ("post", 1), "model": ("model", 1), "preprocess": ("pre", 1), "decode": ("post", 2)}
    assert all(s["calls_per_run"] == 1 and s["stats"]["samples"] == 4 for s in stages.values())
    assert {name: s["parent"] for name, s in stages.items()} == {
        "postprocess": None, "model": None, "preprocess": None, "decode": "postprocess"}
    post = stages["postprocess"]
    assert post["self"]["median_us"] < post["stats"]["median_us"]  # decode's time is not its own
    b = section["breakdown"]
    assert b["pre_us"] + b["model_us"] + b["post_us"] + b["other_us"] == pytest.approx(b["end_to_end_us"], abs=0.01)
    assert b["end_to_end_us"] == pytest.approx(section["end_to_end"]["mean_us"], rel=1e-6)
    assert b["post_us"] >= SLOW_POST_S * 1e6 > b["model_us"] > b["pre_us"] > 0
    assert section["runs"] == 4 and section["model_calls_per_run"] == 1 and not section["interrupted"]
    assert run["measurement"]["source"] == "layerscope pipeline" and run["measurement"]["runs"] == 4
    assert "pipeline" in run["latency"]["source"]
    assert all(layer["measured"]["status"] in {"measured", "fused", "eliminated"} for layer in run["layers"])


def test_the_traced_run_holds_spans_and_kernels_inside_the_model_span(
        pipeline_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    run, _ = pipeline_run
    section = run["pipeline"]
    assert section["trace"]["phase"] == "profiled"
    spans = {s["name"]: s for s in section["spans"]}
    assert set(spans) == {"my_pipeline.py:pipeline", "preprocess", "model", "postprocess", "decode"}
    root, model = spans["my_pipeline.py:pipeline"], spans["model"]
    assert root["start_us"] == 0 and root["depth"] == 0 and root["kind"] == "run"
    assert all(s["run"] == section["trace"]["run"] for s in section["spans"])
    kernels = section["kernels"]
    assert len(kernels) == len(run["kernels"])
    for kernel in kernels:
        assert model["start_us"] <= kernel["start_us"]
        assert kernel["start_us"] + kernel["duration_us"] <= model["start_us"] + model["duration_us"] + 0.002
    assert any(kernel["layers"] for kernel in kernels)


def test_the_perfetto_trace_shows_the_pipeline_with_the_layers(
        pipeline_run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    run, trace = pipeline_run
    events = [e for e in trace["traceEvents"] if e["pid"] == 3]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert any(name.startswith("PIPELINE: my_pipeline.py:pipeline") for name in names)
    slices = [e for e in events if e["ph"] == "X"]
    user = [e for e in slices if e["args"].get("kind") == "user"]
    assert max(user, key=lambda e: e["dur"])["name"] == "postprocess"
    model = next(e for e in slices if e["name"] == "model")
    layer_slices = [e for e in slices if e["args"].get("layers")]  # layout kernels have no layers
    layer_ids = {layer["id"] for layer in run["layers"]}
    assert layer_slices and all(e["name"].split(" ")[0] in layer_ids for e in layer_slices)
    assert all(model["ts"] <= e["ts"] and e["ts"] + e["dur"] <= model["ts"] + model["dur"] + 1e-6
               for e in layer_slices)
    assert trace["otherData"]["overlaps_fixed"] == 0
    assert any(e["pid"] == 1 for e in trace["traceEvents"])  # the reporter's measured kernels are there too


def test_report_trace_of_the_saved_run_holds_the_same_pipeline_spans(
        pipeline_run: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    run, trace = pipeline_run
    save_run(as_run(run), tmp_path / "run.json")
    assert main(["report", str(tmp_path / "run.json"), "--trace", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["pid"] == 3]
    assert len(spans) > 10 and [e for e in again["traceEvents"] if e["pid"] == 3] == spans


# --- the analysis, on spans made by hand ----------------------------------------------------------------------------

def _span(name: str, kind: SpanKind, start: int, end: int, *, depth: int = 1, thread: int = 1) -> Span:
    return Span(name, kind, thread, f"t{thread}", start * 1000, end * 1000, depth, 0)


def test_breakdown_splits_around_the_model_calls() -> None:
    spans = [_span("run", "run", 0, 100, depth=0), _span("pre", "user", 0, 10), _span("model", "model", 10, 40),
             _span("mid", "user", 40, 50), _span("model", "model", 50, 70), _span("post", "user", 70, 95),
             _span("nms", "user", 80, 90, depth=2)]
    assert breakdown_of_run(spans) == (10_000, 50_000, 25_000, 15_000)
    stages = {s.name: s for s in stage_results([spans])}
    assert {n: s.kind for n, s in stages.items()} == {"model": "model", "post": "post", "pre": "pre",
                                                       "mid": "between", "nms": "post"}
    assert stages["model"].total.median_us == 50 and stages["model"].calls_per_run == 2
    assert stages["post"].total.median_us == 25 and stages["post"].self_time.median_us == 15
    assert stages["nms"].depth == 2 and stages["nms"].parent == "post" and stages["post"].parent is None


def test_breakdown_counts_parallel_threads_once() -> None:
    spans = [_span("run", "run", 0, 50, depth=0), _span("load", "user", 0, 10, thread=2),
             _span("load", "user", 5, 15, thread=3), _span("model", "model", 20, 30)]
    assert breakdown_of_run(spans) == (15_000, 10_000, 0, 25_000)
    (load,) = [s for s in stage_results([spans]) if s.name == "load"]
    assert load.total.median_us == 15 and load.self_time.median_us == 20


def test_a_run_without_model_calls_is_all_other() -> None:
    spans = [_span("run", "run", 0, 20, depth=0), _span("alone", "user", 0, 10)]
    assert breakdown_of_run(spans) == (0, 0, 0, 20_000)
    assert stage_results([spans])[0].kind == "other"


def test_a_stage_absent_from_a_run_counts_zero_there() -> None:
    first = [_span("run", "run", 0, 20, depth=0), _span("rare", "user", 0, 10)]
    second = [_span("run", "run", 0, 20, depth=0)]
    (rare,) = stage_results([first, second])
    assert rare.total.min_us == 0 and rare.total.max_us == 10 and rare.calls_per_run == 0.5


# --- the API ----------------------------------------------------------------------------------------------------------

def test_model_session_is_a_plain_session_outside_a_recording() -> None:
    model = layerscope.pipeline.session(SQUEEZENET, threads=1)
    feeds = model.example_inputs
    outputs = model.run(None, feeds)
    assert isinstance(outputs[0], np.ndarray) and model.get_inputs()[0].name in feeds
    with recording() as recorder:
        model.run(None, feeds)
    (span,) = recorder.spans()
    assert (span.name, span.kind) == ("model", "model")


def test_ctrl_c_keeps_the_runs_completed() -> None:
    calls = [0]

    def pipeline(model: Any) -> None:
        calls[0] += 1
        if calls[0] == 4:  # 1 warm-up + 2 measured runs, then Ctrl-C
            raise KeyboardInterrupt
        model.run(None, model.example_inputs)

    result = profile_pipeline(pipeline, SQUEEZENET, runs=5, warmup=1, config=SessionConfig(threads=1))
    assert result.interrupted and result.runs == 2 and result.measurement is None
    assert result.trace_phase == "timed" and {s.kind for s in result.trace_spans} == {"model", "run"}


def test_without_layers_no_profiler_phase_runs() -> None:
    def pipeline(model: Any) -> None:
        with layerscope.trace_point("pre"):
            feeds = model.example_inputs
        model.run(None, feeds)

    result = profile_pipeline(pipeline, SQUEEZENET, runs=2, warmup=0, layers=False, config=SessionConfig(threads=1))
    assert result.measurement is None and result.trace_kernels == () and result.trace_phase == "timed"
    assert {s.name for s in result.stages} == {"pre", "model"}


# --- the CLI's errors -----------------------------------------------------------------------------------------------

def test_an_exception_in_the_script_is_one_line_naming_its_line(script: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", f"{script}:broken", SQUEEZENET, "--runs", "1", "--warmup", "0",
                 "--no-layers"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    line = SCRIPT.splitlines().index("    return values[5]") + 1
    assert f"IndexError: list index out of range at my_pipeline.py:{line} in broken" in err


def test_debug_shows_the_scripts_own_traceback(script: Path) -> None:
    with pytest.raises(UserCodeError) as info:
        main(["--debug", "pipeline", f"{script}:broken", SQUEEZENET, "--runs", "1", "--warmup", "0"])
    assert isinstance(info.value.__cause__, IndexError)


def test_a_pipeline_that_never_calls_the_model_says_so(script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", f"{script}:no_model", SQUEEZENET, "--runs", "2", "--warmup", "0"]) == 0
    assert "never called model.run" in capsys.readouterr().out


@pytest.mark.parametrize(("spec", "message"), [
    ("{script}:missing", "has no function 'missing'; its functions: broken, decode, no_model, pipeline"),
    ("{script}", "expected SCRIPT.py:FUNCTION"),
    ("{dir}/nowhere.py:f", "no such script"),
    ("{dir}/bad_syntax.py:f", "SyntaxError: "),
    ("{dir}/fails_on_import.py:f", "loading the script raised RuntimeError: no camera at fails_on_import.py:1"),
])
def test_script_errors_are_one_line_exit_2(script: Path, spec: str, message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (script.parent / "bad_syntax.py").write_text("def f(model):\n    return (\n")
    (script.parent / "fails_on_import.py").write_text("raise RuntimeError('no camera')\n")
    target = spec.format(script=script, dir=script.parent)
    assert main(["pipeline", target, SQUEEZENET, "--runs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
