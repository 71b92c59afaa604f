"""``estimate -o RUN`` into an existing run held as the merge needs it (``run_merge.read_existing``): the file
it writes is the one the document merge wrote (the reference below: every old section as read, per layer the
typed old layer under the new one's keys), and the old run is checked as a whole check would check it."""

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
from layerscope.run import ESTIMATE_LAYER_FIELDS, load_run, save_run
from layerscope.run_merge import existing_run, merge_estimate, read_existing
from layerscope.runfile import io as runfile_io
from layerscope.runfile import load_document
from layerscope.runfile.io import as_run, dump_text, upgrade


def _model(write_model: ModelWriter) -> Path:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "r"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="last")]
    weights = {"w": np.full((8, 3, 3, 3), 0.1, np.float32)}
    return write_model(nodes, [("x", F32, [1, 3, 16, 16])], [("y", F32, None)], weights)


def _reference(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The document merge ``estimate -o`` made before runs were merged typed: old sections as read, the
    estimate's from the new run, model and summary key by key, each new layer over its typed old namesake (the
    last of its id), the old layers the new run does not know last."""
    old_run, new_run = as_run(old), as_run(new)
    replaced = ("target", "estimate_info", "folded", "unknown_ops", "timeline", "schema_version", "tool")
    merged = {key: value for key, value in upgrade(old).items() if key not in replaced}
    merged.update((key, value) for key, value in new.items() if key in replaced)
    # the tool is the new estimate's, with the command that made the old run (if it recorded one)
    tool = {**new["tool"], "command": old.get("tool", {}).get("command")}
    merged["tool"] = {key: value for key, value in tool.items() if value is not None}
    dump = {"mode": "json", "by_alias": True, "exclude_unset": True}
    merged["model"] = new_run.model.over(old_run.model).model_dump(**dump)
    merged["summary"] = new_run.summary.over(old_run.summary).model_dump(**dump)
    by_id = {layer.id: layer for layer in old_run.layers}
    new_ids = {layer.id for layer in new_run.layers}
    layers = [layer.over(by_id.get(layer.id)) for layer in new_run.layers]
    layers += [layer for layer in old_run.layers if layer.id not in new_ids]
    merged["layers"] = [layer.model_dump(**dump) for layer in layers]
    return merged


def _estimate(model: Path, out: Path, *extra: str) -> None:
    assert main(["estimate", str(model), "-t", "rdk-s100", "--top", "0", "-o", str(out), *extra]) == 0


@pytest.mark.parametrize("extra", [(), ("--timeline",)])
def test_estimate_into_an_edited_run_writes_what_the_document_merge_wrote(
        write_model: ModelWriter, tmp_path: Path, extra: tuple[str, ...]) -> None:
    model, out, fresh = _model(write_model), tmp_path / "run.json", tmp_path / "fresh.json"
    _estimate(model, out, "--timeline")
    old = load_document(out)
    old["layers"][0]["measured"] = {"median_us": 3, "status": "measured"}  # an int where a float is typed
    old["layers"][1]["id"] = "renamed"  # estimate keys only, unknown to the new run: kept whole, last
    old["layers"][2]["vendor_note"] = {"b": [1, 2.5]}  # a key no model names
    old["layers"].insert(1, {"id": "vendor_only", "op_type": "Fused", "measured": {"median_us": 1.5}})
    old["layers"].append(dict(old["layers"][-1], measured={"median_us": 2.0}))  # a second "last": it wins
    old["latency"] = {"p50_us": 7, "samples": 3}  # kept as read: 7, not 7.0
    old["custom"] = {"z": 1, "a": [1.0, "x"]}
    out.write_text(dump_text(old), encoding="utf-8")  # a file edited by hand: the ints stay as written
    old = json.loads(out.read_text())
    _estimate(model, fresh, *extra)

    _estimate(model, out, *extra)

    expected = _reference(old, json.loads(fresh.read_text()))
    assert out.read_text() == dump_text(expected)
    written = json.loads(out.read_text())
    assert written["latency"] == {"p50_us": 7, "samples": 3} and '"p50_us": 7,' in out.read_text().replace("\n", "")
    assert [layer["id"] for layer in written["layers"]][-3:] == ["last", "vendor_only", "renamed"]


def test_estimate_into_a_gzip_run_with_a_profile_writes_what_the_document_merge_wrote(
        write_model: ModelWriter, tmp_path: Path) -> None:
    model, out, fresh = _model(write_model), tmp_path / "run.json.gz", tmp_path / "fresh.json"
    assert main(["profile", str(model), "-t", "rdk-s100", "--runs", "3", "--warmup", "1", "--top", "0",
                 "-o", str(out)]) == 0
    old = load_document(out)
    _estimate(model, fresh, "--timeline")
    _estimate(model, out, "--timeline")
    assert runfile_io.read_run_text(out) == dump_text(_reference(old, json.loads(fresh.read_text())))


def test_an_estimate_run_is_held_by_its_ids_alone(write_model: ModelWriter, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    _estimate(_model(write_model), out)
    existing = read_existing(out)
    assert existing.layers.kept == {} and existing.layers.ids() == ["conv", "relu", "add", "last"]
    assert "layers" not in existing.document and existing.run.layers == []
    document = load_document(out)
    document["layers"][2]["measured"] = {"median_us": 1.0}
    kept = existing_run(document).layers.kept
    assert list(kept) == [2] and kept[2] == as_run(document).layers[2]
    assert all(set(layer) <= ESTIMATE_LAYER_FIELDS for layer in load_document(out)["layers"])


def test_an_unmatched_estimate_layer_is_read_again_as_it_was(write_model: ModelWriter, tmp_path: Path) -> None:
    model, out = _model(write_model), tmp_path / "run.json"
    _estimate(model, out)
    document = load_document(out)
    document["layers"][3]["id"] = "old_last"
    save_run(as_run(document), out)
    existing = read_existing(out)
    fresh = tmp_path / "fresh.json"
    _estimate(model, fresh)
    merged = merge_estimate(existing, load_run(fresh))
    assert merged.run.layers[-1] == as_run(document).layers[3]
    assert merged.notes[-1].startswith("1 layers of the run are not in this model's estimate") and "old_last" in (
        merged.notes[-1])


def test_a_run_that_changed_before_its_layers_are_read_again_is_refused(write_model: ModelWriter,
                                                                         tmp_path: Path) -> None:
    model, out, fresh = _model(write_model), tmp_path / "run.json", tmp_path / "fresh.json"
    _estimate(model, out)
    _estimate(model, fresh)
    document = load_document(out)
    document["layers"][3]["id"] = "old_last"
    save_run(as_run(document), out)
    existing = read_existing(out)
    out.write_text(out.read_text().replace('"old_last"', '"older_last"'))
    with pytest.raises(RunFileError, match="changed while the estimate ran") as refused:
        merge_estimate(existing, load_run(fresh), str(out))
    assert "nothing was changed" in str(refused.value.hint)
