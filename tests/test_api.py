"""The Python API: the documentation's example (docs/python-api.md) runs as written, and its runs are the CLI's
runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import layerscope
from conftest import zoo
from layerscope.cli.main import main
from layerscope.errors import InputError, RunFileError

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def _example() -> str:
    text = API_DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- api-example:start -->\n```python\n(.*?)```\n<!-- api-example:end -->", text, re.S)
    assert block, "the API example of docs/python-api.md is missing"
    return block.group(1)


def test_the_docs_example_runs_and_gives_a_frame_with_one_row_per_layer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    scope: dict[str, object] = {}
    exec(compile(_example(), str(API_DOC), "exec"), scope)
    frame, measured = scope["frame"], scope["measured"]
    assert isinstance(measured, layerscope.Run)
    layers = measured.document["layers"]
    assert len(frame) == len(layers) and list(frame["id"]) == [layer["id"] for layer in layers]
    assert {"cost.macs", "est.latency_us", "meas.median_us", "meas.time_us", "share"} <= set(frame.columns)
    assert frame["meas.time_us"].notna().sum() > 0 and abs(frame["share"].sum() - 1.0) < 1e-6
    # the zoo's first conv (SqueezeNet 1.1): 64 x 3 x 3 x 3 weights, stride 2 over 224 -> a 111 x 111 output
    first = frame[frame["op_type"] == "Conv"].iloc[0]
    assert first["cost.macs"] == 64 * 3 * 3 * 3 * 111 * 111
    assert (tmp_path / "out" / "squeezenet.html").read_text().startswith("<!DOCTYPE html>")
    again = scope["again"]
    assert isinstance(again, layerscope.Run) and again.document == measured.document


def test_estimate_is_the_clis_run(tmp_path: Path) -> None:
    run = layerscope.estimate(zoo("squeezenet"), target="rdk-s100")
    assert main(["estimate", str(zoo("squeezenet")), "--target", "rdk-s100", "--top", "0",
                 "-o", str(tmp_path / "cli.json")]) == 0
    cli = json.loads((tmp_path / "cli.json").read_text())
    for doc in (cli, run.document):
        doc.pop("tool", None)
    assert run.document == cli
    assert run.typed.schema_version == 2 and run.k is None  # nothing measured: no k


def test_saving_and_loading_round_trips_and_reports_render(tmp_path: Path) -> None:
    run = layerscope.estimate(zoo("squeezenet"), target="host", timeline=True)
    path = run.save(tmp_path / "run.json")
    assert layerscope.load(path).document == run.document
    assert "timeline" in run.document
    md = run.report(fmt="md")
    assert isinstance(md, str) and md.startswith("## layerscope report")
    trace = run.report(tmp_path / "t.json")
    assert trace == tmp_path / "t.json" and json.loads(trace.read_text())["traceEvents"]


def test_bad_input_raises_the_clis_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a list of positive integers"):
        layerscope.estimate(zoo("squeezenet"), shapes={"data_0": [1, -3, 224, 224]})
    with pytest.raises(InputError, match="unknown report format"):
        layerscope.estimate(zoo("squeezenet")).report(fmt="pdf")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 2, "model": {}, "layers": [{"id": 3}], "summary": {}}')
    with pytest.raises(RunFileError, match=r"layers\[0\]"):
        layerscope.load(bad)
