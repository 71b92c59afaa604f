"""Property-based tests: every vendor parser, fed arbitrary text, mutated fixtures and random JSON shaped
like its format, returns a result or raises ``InputError`` (exit 2) -- never any other exception -- and
whatever it returns builds a run that ``save_run`` can write (no NaN, no infinity).

Forms fuzzed are those of the fixture files (see tests/test_importers.py for their documented sources).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from conftest import EXAMPLES_SCALE, F32
from layerscope.errors import InputError
from layerscope.importers import build_run, horizon_profiler, horizon_static, openvino, ort, rknn, trtexec
from layerscope.importers.detect import parse_text
from layerscope.importers.names import normalize, split_fused
from layerscope.importers.types import ImportResult
from layerscope.model import Graph, load_model

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
SETTINGS = settings(max_examples=120 * EXAMPLES_SCALE, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

Parser = Callable[[str, str], ImportResult]

#: Parser and the fixtures whose content is mutated.
PARSERS: dict[str, tuple[Parser, list[str]]] = {
    "horizon-log": (horizon_profiler.parse_log, ["horizon/x3_profiler.log", "horizon/s100_profiler.log",
                                                 "horizon/s100_profiler_truncated.log"]),
    "horizon-csv": (horizon_profiler.parse_csv, ["horizon/s100_profiler.csv"]),
    "horizon-static": (horizon_static.parse, ["horizon/s100_model.json", "horizon/bayes_model.json"]),
    "trtexec": (trtexec.parse, ["trtexec/yolov5s.profile.json", "trtexec/yolov5s.layer.json",
                                "trtexec/yolov5s.times.json"]),
    "ort": (ort.parse, ["ort/conv_relu_add_sigmoid.profile.json"]),
    "openvino-csv": (openvino.parse_csv, ["openvino/benchmark_average_counters_report.csv",
                                          "openvino/benchmark_detailed_counters_report.csv"]),
    "openvino-json": (openvino.parse_json, ["openvino/benchmark_average_counters_report.json"]),
    "rknn": (rknn.parse, ["rknn/eval_perf_rk3588.txt", "rknn/eval_perf_v2.txt"]),
}


@pytest.fixture(scope="module")
def tiny_graph(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    """A 3-layer model whose names overlap the fixtures' (joins run on every fuzzed result)."""
    nodes = [helper.make_node("Conv", ["images", "w"], ["/model.0/conv/Conv_output_0"], name="/model.0/conv/Conv"),
             helper.make_node("Sigmoid", ["/model.0/conv/Conv_output_0"], ["s"], name="/model.0/act/Sigmoid"),
             helper.make_node("Concat", ["s", "/model.0/conv/Conv_output_0"], ["y"], name="/model.2/Concat",
                              axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("images", F32, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", F32, None)],
                              initializer=[numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w")])
    path = tmp_path_factory.mktemp("fuzz") / "tiny.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return load_model(path)


def _check(parser: Parser, text: str, graph: Graph | None = None) -> None:
    """The property: a result that builds a writable run, or InputError naming the source (from the parser, or
    from building the run: values no run may hold, such as a negative time)."""
    try:
        result = parser(text, "fuzz.src")
        assert isinstance(result, ImportResult)
        run = build_run([result], graph).run
    except InputError as exc:
        assert "fuzz.src" in str(exc)
        return
    json.dumps(run.to_json(), allow_nan=False)


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@st.composite
def mutated(draw: st.DrawFn, texts: list[str]) -> str:
    """A fixture with a few edits: cut, truncated, a span repeated, junk inserted, a character replaced."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 3))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 200)))
        edit = draw(st.sampled_from(["cut", "truncate", "repeat", "insert", "replace"]))
        if edit == "cut":
            text = text[:i] + text[j:]
        elif edit == "truncate":
            text = text[:i]
        elif edit == "repeat":
            text = text[:j] + text[i:j] + text[j:]
        elif edit == "insert":
            junk = draw(st.sampled_from(['"', "{", "}", "[", "]", ",", ":", "-1", "NaN", "1e999", "***\n", "\n",
                                         ";", "  ", "null", '"avg_time": "x"', "0x10", "\\", "\x00", "é"]))
            text = text[:i] + junk + text[i:]
        elif n:
            k = min(i, n - 1)
            text = text[:k] + draw(st.characters()) + text[k + 1:]
    return text


LEAVES = (st.none() | st.booleans() | st.integers(-5, 10**6) | st.just(10**400)
          | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
          | st.sampled_from(["59 us (8.2% of model)", "0", "1,234", "-3", "ms", "12 us ~ 40 us", "EXECUTED",
                             "Reformatting CopyNode for Input Tensor 0 to a + b", "x copy", "PWN(a, b)",
                             "{ForeignNode[a...b]}", "[ONNX Layer: a]\x1f[ONNX Layer: b]", "_kernel_time"]))


@st.composite
def mutated_json(draw: st.DrawFn, value: Any, depth: int = 0) -> Any:
    """The fixture's own JSON with values replaced, keys dropped or added, items repeated (lists cut to 6)."""
    roll = draw(st.integers(0, 19))
    if roll == 0 or (depth > 6 and roll < 4):
        return draw(LEAVES)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if draw(st.integers(0, 29)) == 0:
                continue
            out[key] = draw(mutated_json(item, depth + 1))
        if roll == 1:
            out[draw(st.sampled_from([*value, "x"]) if value else st.just("x"))] = draw(LEAVES)
        return out
    if isinstance(value, list):
        items = [draw(mutated_json(item, depth + 1)) for item in value[:6]]
        if roll == 2 and items:
            items.append(items[draw(st.integers(0, len(items) - 1))])
        return items
    return draw(LEAVES) if roll < 2 else value


def _json_fixtures(files: list[str]) -> list[Any]:
    """The JSON values in a format's fixtures (a profiler.log holds two, split at ``***``)."""
    values = []
    for name in files:
        text = _fixture(name)
        parts = text.split("\n***\n") if "***" in text else [text]
        try:
            values.append([json.loads(p[min(i for i in (p.find("{"), p.find("[")) if i >= 0):]) for p in parts])
        except ValueError:
            continue
    return values


@pytest.mark.parametrize("fmt", sorted(PARSERS))
@SETTINGS
@given(text=st.text(max_size=400))
def test_any_text(fmt: str, text: str) -> None:
    _check(PARSERS[fmt][0], text)


@pytest.mark.parametrize("fmt", sorted(PARSERS))
@SETTINGS
@given(data=st.data())
def test_mutated_fixtures(fmt: str, data: st.DataObject, tiny_graph: Graph) -> None:
    parser, files = PARSERS[fmt]
    text = data.draw(mutated([_fixture(f) for f in files]))
    _check(parser, text, tiny_graph)


@pytest.mark.parametrize("fmt", sorted(f for f, (_, files) in PARSERS.items() if _json_fixtures(files)))
@SETTINGS
@given(data=st.data())
def test_mutated_json_structure(fmt: str, data: st.DataObject, tiny_graph: Graph) -> None:
    parser, files = PARSERS[fmt]
    documents = data.draw(st.sampled_from(_json_fixtures(files)))
    text = "\n***\n".join(json.dumps(data.draw(mutated_json(doc))) for doc in documents)
    _check(parser, text, tiny_graph)


@settings(max_examples=300 * EXAMPLES_SCALE, deadline=None, database=None)
@given(text=st.text(max_size=300))
def test_auto_detection_on_any_text(text: str) -> None:
    _check(lambda t, s: parse_text(t, s, "auto"), text)


@settings(max_examples=300 * EXAMPLES_SCALE, deadline=None, database=None)
@given(name=st.text(max_size=120) | st.from_regex(r"(PWN\(|\{ForeignNode\[|[a-z/_.0-9]| \+ |, |\.\.\.|\)|\]\})*",
                                                  fullmatch=True))
def test_name_helpers_never_fail(name: str) -> None:
    parts = split_fused(name)
    assert parts.parts or parts.ranges
    assert normalize(normalize(name)) == normalize(name)

