"""One run holding a measurement and a timeline: ``profile --timeline`` and ``estimate -o`` on an existing run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import helper

from conftest import F32, ModelWriter
from layerscope.cli.main import main
from layerscope.errors import RunFileError
from layerscope.report.views.summary import missing_notes
from layerscope.run import save_run
from layerscope.run_merge import existing_run, merge_estimate
from layerscope.runfile import as_run, load_document

MEASURED_SECTIONS = ("measurement", "latency", "kernels")


def _small(write_model: ModelWriter, *, channels: int = 8, name: str = "small.onnx") -> Path:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "r"], ["y"], name="add")]
    weights = {"w": np.full((channels, 3, 3, 3), 0.1, np.float32)}
    return write_model(nodes, [("x", F32, [1, 3, 32, 32])], [("y", F32, None)], weights, name=name)


def _profile(model: Path, out: Path, *extra: str) -> None:
    assert main(["profile", str(model), "-t", "rdk-s100", "--runs", "3", "--warmup", "1", "--top", "0",
                 "-o", str(out), *extra]) == 0


def test_profile_with_timeline_holds_the_measurement_and_the_timeline(write_model: ModelWriter,
                                                                       tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    _profile(_small(write_model), out, "--timeline")
    run = load_document(out)
    assert all(key in run for key in MEASURED_SECTIONS)
    assert all(layer["measured"]["samples"] > 0 for layer in run["layers"] if layer["measured"]["status"] != "fused")
    assert run["target"]["name"] == "rdk-s100"
    timeline = run["timeline"]
    assert "rdk-s100" in timeline["note"] and [s["id"] for s in timeline["layers"]] == ["conv", "relu", "add"]
    assert not any("No timeline" in note for note in missing_notes(as_run(run)))
    del run["timeline"]
    hint = next(note for note in missing_notes(as_run(run), str(out)) if note.startswith("No timeline"))
    assert f"`layerscope estimate {run['model']['path']} --target rdk-s100 --timeline -o {out}`" in hint


def test_estimate_into_a_measured_run_refreshes_the_estimate_and_keeps_the_measurement(
        write_model: ModelWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, out = _small(write_model), tmp_path / "run.json"
    _profile(model, out)
    before = load_document(out)
    before["findings"] = {"source": "advise", "count": 0, "items": []}  # as `layerscope advise` would add
    save_run(as_run(before), out)
    capsys.readouterr()

    assert main(["estimate", str(model), "-t", "rdk-x5", "--timeline", "-o", str(out), "--top", "0"]) == 0
    after = load_document(out)
    for key in (*MEASURED_SECTIONS, "findings"):
        assert after[key] == before[key], key
    assert [layer["measured"] for layer in after["layers"]] == [layer["measured"] for layer in before["layers"]]
    assert after["summary"]["meas_latency_us"] == before["summary"]["meas_latency_us"]
    # The estimate is the new target's: target, per-layer estimate and summary agree with a fresh estimate.
    fresh = tmp_path / "fresh.json"
    assert main(["estimate", str(model), "-t", "rdk-x5", "--timeline", "-o", str(fresh), "--top", "0"]) == 0
    alone = load_document(fresh)
    assert after["target"] == alone["target"] and after["target"]["name"] == "rdk-x5"
    assert [layer["estimate"] for layer in after["layers"]] == [layer["estimate"] for layer in alone["layers"]]
    assert after["summary"]["est_latency_us"] == alone["summary"]["est_latency_us"]
    assert after["summary"]["est_latency_us"] != before["summary"]["est_latency_us"]
    assert after["timeline"] == alone["timeline"]
    printed = " ".join(capsys.readouterr().out.split())  # rich wraps long lines at spaces (long tmp paths)
    assert "estimate refreshed in the existing run" in printed
    assert "kept: findings, kernels, latency, measurement" in printed
    assert "findings came from the estimate on 'rdk-s100'" in printed


def test_estimate_refuses_a_run_of_another_model_and_leaves_it_alone(
        write_model: ModelWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    _profile(_small(write_model), out)
    original = out.read_bytes()
    other = _small(write_model, channels=16, name="other.onnx")
    capsys.readouterr()
    assert main(["estimate", str(other), "-t", "rdk-s100", "-o", str(out), "--top", "0"]) == 2
    err = capsys.readouterr().err
    assert "holds a run of another model" in err and "nothing was changed" in err
    assert len(err.strip().splitlines()) == 1
    assert out.read_bytes() == original


def test_estimate_refuses_a_file_that_is_not_a_run(write_model: ModelWriter, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "notes.json"
    out.write_text('{"mine": true}\n')
    assert main(["estimate", str(_small(write_model)), "-o", str(out), "--top", "0"]) == 2
    assert "not a layerscope run file" in capsys.readouterr().err
    assert out.read_text() == '{"mine": true}\n'


def _run(sha: str, layers: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    return {"schema_version": 1, "tool": {"name": "layerscope", "version": "t"},
            "model": {"name": "m", "sha256": sha, "inputs": [{"name": "x", "shape": [1, 3], "dtype": "float32"}]},
            "target": {"name": "a", "dtype": "int8"}, "layers": layers,
            "summary": {"est_latency_us": 1.0}, **sections}


def test_merge_joins_layers_by_id_and_keeps_the_ones_it_does_not_know() -> None:
    old = _run("s", [{"id": "a", "estimate": {"latency_us": 1.0}, "measured": {"median_us": 5.0}},
                     {"id": "vendor_only", "measured": {"median_us": 2.0}}],
               timeline={"old": True}, latency={"p50_us": 7.0})
    old["summary"]["meas_latency_us"] = 7.0
    new = _run("s", [{"id": "b", "estimate": {"latency_us": 3.0}}, {"id": "a", "estimate": {"latency_us": 4.0}}])
    new["target"] = {"name": "b", "dtype": "int8"}
    new["summary"] = {"est_latency_us": 7.0}
    snapshot = json.dumps(old, sort_keys=True)
    result = merge_estimate(existing_run(old), as_run(new))
    assert json.dumps(old, sort_keys=True) == snapshot  # inputs unchanged
    merged = result.document()
    assert [layer["id"] for layer in merged["layers"]] == ["b", "a", "vendor_only"]
    assert merged["layers"][1] == {"id": "a", "estimate": {"latency_us": 4.0}, "measured": {"median_us": 5.0}}
    assert merged["summary"] == {"est_latency_us": 7.0, "meas_latency_us": 7.0}
    assert "timeline" not in merged and merged["latency"] == {"p50_us": 7.0}
    assert any(note.startswith("timeline removed") for note in result.notes)
    assert any("1 layers of the run are not in this model's estimate" in note and "vendor_only" in note
               for note in result.notes)


def test_merge_refuses_other_input_shapes() -> None:
    old = _run("s", [])
    new = _run("s", [])
    new["model"]["inputs"] = [{"name": "x", "shape": [1, 4], "dtype": "float32"}]
    with pytest.raises(RunFileError, match=r"other input shapes \(x=1x3\)"):
        merge_estimate(existing_run(old), as_run(new))


def test_merge_refuses_a_run_without_a_model() -> None:
    old = _run("", [])
    with pytest.raises(RunFileError, match="no model file behind it"):
        merge_estimate(existing_run(old), as_run(_run("s", [])))


def test_merge_refuses_to_replace_a_vendor_estimate() -> None:
    old = _run("s", [{"id": "a", "estimate": {"latency_us": 9.0, "method": "vendor:horizon-static"}}])
    with pytest.raises(RunFileError, match=r"vendor compiler's own estimate \(vendor:horizon-static\)"):
        merge_estimate(existing_run(old), as_run(_run("s", [{"id": "a", "estimate": {"latency_us": 1.0}}])))
