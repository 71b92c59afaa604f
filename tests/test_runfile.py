"""The run file owned by ``layerscope.runfile``: the shipped schema, loading with validation and migration, and the
quantities defined once (k, a layer's measured time) read the same in every output."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from onnx import helper
from rich.console import Console

from conftest import F32, ModelWriter, run_schema_validator
from layerscope.analysis.diagnose import diagnose
from layerscope.analysis.reconcile import reconcile_run
from layerscope.cli.main import main
from layerscope.errors import RunFileError
from layerscope.report.html import render_html, report_data
from layerscope.report.import_terminal import measured_table
from layerscope.report.tables import markdown_summary
from layerscope.report.terminal import measured_layers_table, measurement_summary
from layerscope.report.views.layers import layer_rows
from layerscope.report.views.layers import scale_factor as report_k
from layerscope.run import save_run
from layerscope.runfile import (
    SCHEMA_VERSION,
    RunFile,
    as_run,
    device_mismatch,
    layer_measured_us,
    load,
    load_document,
    measurement_origin,
    scale_factor,
)
from layerscope.runfile.schema import schema_text, shipped_text


def _text(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=250, color_system=None)
    console.print(renderable)
    out = console.file.getvalue()
    assert isinstance(out, str)
    return out


# --------------------------------------------------------------------------------------------------- schema


def test_the_shipped_schema_is_the_models_schema() -> None:
    """Fails when the models changed and ``python -m layerscope.runfile.schema`` was not run."""
    assert shipped_text() == schema_text(), "run.schema.json is stale: run python -m layerscope.runfile.schema"
    schema = json.loads(shipped_text())
    assert schema["properties"]["schema_version"] == {"const": 2, "title": "Schema Version", "type": "integer"}
    assert set(schema["required"]) == {"schema_version", "model", "layers", "summary"}
    # the measurement is a tagged union on "kind"
    assert set(schema["properties"]["measurement"]["anyOf"][0]["discriminator"]["mapping"]) == {
        "kernel-profile", "bench", "differential", "vendor-import"}


def test_schema_command_prints_the_shipped_schema(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == shipped_text()
    assert main(["schema", "-o", str(tmp_path / "s.json")]) == 0
    assert (tmp_path / "s.json").read_text(encoding="utf-8") == shipped_text()


# --------------------------------------------------------------------------------------------------- loading


def _document() -> dict[str, Any]:
    return {
        "schema_version": 2, "model": {"name": "m"}, "summary": {"layer_count": 4},
        "layers": [{"id": f"l{i}", "estimate": {"latency_us": 10.0}, "measured": {"median_us": 5.0 * (i + 1)}}
                   for i in range(4)],
    }


def test_a_bad_field_is_one_line_naming_the_file_and_its_json_path(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    doc = _document()
    doc["layers"][3]["measured"]["median_us"] = "abc"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(RunFileError) as err:
        load_document(path)
    assert err.value.message == f'{path}: layers[3].measured.median_us: expected a number, got "abc"'
    assert err.value.exit_code == 2
    assert main(["reconcile", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "layers[3].measured.median_us: expected a number" in lines[0]


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d["layers"][0]["measured"].update(median_us=-1.0),
     "layers[0].measured.median_us: a measured time cannot be negative, got -1.0"),
    (lambda d: d["layers"][1].update(estimate={"latency_us": float("nan")}),
     "layers[1].estimate.latency_us: expected a finite number, got NaN"),
    (lambda d: d["layers"][1].update(macs=1.5), "layers[1].macs: expected an integer, got 1.5"),
    (lambda d: d.update(findings={"diagnosis": {"hotspots": [{"share": float("inf")}]}}),
     "findings.diagnosis.hotspots[0].share: expected a finite number, got Infinity"),
    (lambda d: d.update(measurement={"kind": "nonsense"}), "measurement: Input tag 'nonsense'"),
    (lambda d: d["layers"][2].pop("id"), "layers[2].id: missing"),
    (lambda d: d.update(layers={"id": "x"}), "layers: expected a list"),
])
def test_malformed_fields_are_refused_by_path(tmp_path: Path, mutate: Any, expected: str) -> None:
    doc = _document()
    mutate(doc)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(RunFileError, match=None) as err:
        load_document(path)
    assert str(err.value).startswith(f"{path}: {expected}"), str(err.value)


@pytest.mark.parametrize(("literal", "shown"), [("1e999", "Infinity"), ("-1e999", "-Infinity"),
                                              ("-Infinity", "-Infinity"), ("NaN", "NaN")])
def test_a_number_that_is_not_finite_is_refused_by_path_however_written(tmp_path: Path, literal: str,
                                                                        shown: str) -> None:
    """Out of a float's range (``1e999``) or a JavaScript constant: the same one line naming it."""
    doc = _document()
    doc["layers"][2]["macs"] = 12345678901
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc).replace("12345678901", literal), encoding="utf-8")
    with pytest.raises(RunFileError) as err:
        load_document(path)
    assert str(err.value).startswith(f"{path}: layers[2].macs: expected a finite number, got {shown}"), str(err.value)


def test_a_version_1_run_is_migrated_and_saved_as_version_2(tmp_path: Path) -> None:
    """Version 1 told measurement shapes apart by ``source``; version 2 tags them with ``kind``."""
    old = tmp_path / "v1.json"
    for source, kind in (("layerscope profile", "kernel-profile"), ("bench", "bench"),
                         ("layerscope bisect", "differential"), ("vendor:trtexec a.json", "vendor-import")):
        doc = dict(_document(), schema_version=1, measurement={"backend": "onnxruntime", "source": source})
        old.write_text(json.dumps(doc), encoding="utf-8")
        loaded = load_document(old)
        assert loaded["schema_version"] == SCHEMA_VERSION == 2
        assert loaded["measurement"] == {"backend": "onnxruntime", "source": source, "kind": kind}
        assert type(load(old).measurement).__name__.lower().startswith(kind.split("-")[0].replace("-", "")[:5])
        saved = json.loads(save_run(as_run(loaded), tmp_path / "v2.json").read_text(encoding="utf-8"))
        assert saved["schema_version"] == 2 and saved["measurement"]["kind"] == kind
        assert not list(run_schema_validator().iter_errors(saved))


def test_newer_and_unknown_versions_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(dict(_document(), schema_version=3)), encoding="utf-8")
    with pytest.raises(RunFileError, match=r"schema 3 is newer than this layerscope's \(2\)"):
        load_document(path)
    path.write_text(json.dumps(dict(_document(), schema_version="2")), encoding="utf-8")
    with pytest.raises(RunFileError, match="schema_version: expected an integer"):
        load_document(path)


def test_typed_round_trip_keeps_unknown_keys() -> None:
    doc = _document()
    doc["layers"][0]["measured"]["new_field_us"] = 1.0  # a later command's addition
    doc["import"] = {"files": [], "joined": 0}
    typed = RunFile.from_json(doc)
    assert typed.layers[0].measured is not None and typed.layers[0].measured.median_us == 5.0
    assert typed.to_json() == doc


# --------------------------------------------------------------------------------------------------- derived


def test_measured_time_and_k_definitions() -> None:
    doc = _document()  # measured 5, 10, 15, 20 against estimates of 10 each
    doc["layers"][1]["measured"] = {"status": "eliminated", "median_us": 0.0}
    doc["layers"][2]["measured"] = {"median_us": None, "mean_us": 15.0}  # a vendor that reports means only
    del doc["layers"][3]["measured"]
    assert [layer_measured_us(layer) for layer in doc["layers"]] == [5.0, 0.0, 15.0, None]
    k = scale_factor(doc)
    assert k is not None and k.scope == "layers"
    # l1 (eliminated) is out of both sums, l3 has no measurement: (5 + 15) / (10 + 10)
    assert (k.measured_us, k.estimated_us, k.k) == (20.0, 20.0, 1.0)
    assert k.layer_ids == ("l0", "l2") and k.excluded_ids == ("l1",)


def _eliminating_model(write_model: ModelWriter) -> Path:
    """Conv -> Identity -> Relu -> Conv."""
    import numpy as np

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Identity", ["c1"], ["i1"], name="ident"),
             helper.make_node("Relu", ["i1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    return write_model(nodes, [("x", F32, [1, 8, 56, 56])], [("y", F32, [1, 16, 56, 56])],
                       {"w1": rng.standard_normal((16, 8, 3, 3)).astype(np.float32),
                        "w2": rng.standard_normal((16, 16, 3, 3)).astype(np.float32)})


def test_one_profiled_run_gives_the_same_k_and_layer_times_in_every_output(
        write_model: ModelWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real ``profile`` run on x86 ONNX Runtime against an ``rdk-s100`` estimate, one layer eliminated: the
    terminal, Markdown and HTML reports, ``reconcile`` (terminal and JSON), ``advise``'s diagnosis and the import
    table show one k and one measured time per layer, and every output warns that the devices differ."""
    model = _eliminating_model(write_model)
    path = tmp_path / "run.json"
    assert main(["profile", str(model), "-t", "rdk-s100", "--runs", "5", "--warmup", "1", "-o", str(path),
                 "--top", "0"]) == 0
    capsys.readouterr()
    run = load_document(path)
    by_id = {layer["id"]: layer for layer in run["layers"]}
    # mark the Relu eliminated, in the shape run.py writes for a layer no kernel covers (this ONNX Runtime fuses
    # it into the Conv's kernel instead; an eliminated layer with an estimate is the case that split k in two)
    by_id["relu1"]["measured"] = {"status": "eliminated", "kernel": None, "kernels": [], "fused_group": None,
                                  "split": False, "method": "kernel-profile", "median_us": 0.0, "samples": 0}
    run["measurement"]["eliminated_layers"] = ["relu1"]
    save_run(as_run(run), path)
    run = load_document(path)
    by_id = {layer["id"]: layer for layer in run["layers"]}

    # k by hand: every layer but the eliminated Relu has an estimate and a measured time
    counted = [layer for layer in run["layers"] if layer["id"] != "relu1"]
    expected = (sum(layer["measured"]["median_us"] for layer in counted)
                / sum(layer["estimate"]["latency_us"] for layer in counted))
    k = scale_factor(run)
    assert k is not None and k.k == pytest.approx(expected, rel=1e-12) and set(k.excluded_ids) == {"relu1"}
    # the eliminated layer's estimate is in no sum: including it would change k
    with_relu = expected * (sum(layer["estimate"]["latency_us"] for layer in counted)
                             / sum(layer["estimate"]["latency_us"] for layer in run["layers"]))
    assert by_id["relu1"]["estimate"]["latency_us"] > 0 and with_relu != pytest.approx(expected)

    k3 = f"{expected:.3f}"
    measured = {lid: layer_measured_us(layer) for lid, layer in by_id.items()}
    assert measured["relu1"] == 0.0

    # reports: HTML data and page, Markdown, terminal (measurement summary and layer table)
    report = report_k(as_run(run))
    assert report is not None and report.value == pytest.approx(expected, rel=1e-12)
    data = report_data(as_run(run))
    assert data["charts"]["k"]["value"] == round(expected, 6)
    assert {r.id: r.meas_us for r in layer_rows(as_run(run))} == measured
    html = render_html(as_run(run))
    markdown = markdown_summary(as_run(run))
    terminal = _text(measurement_summary(load(path))) + _text(measured_layers_table(load(path), 10))
    for text in (html, markdown, terminal):
        assert k3 in text
        assert "k compares two devices" in text
        assert "board time" not in text
    for lid in ("conv1", "conv2"):
        assert f"{measured[lid]:.1f}" in terminal

    # reconcile: the terminal report and the JSON section
    out = tmp_path / "rec.json"
    assert main(["reconcile", str(path), "-o", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert k3 in printed, printed and "k compares two devices" in printed and "board time" not in printed
    section = load_document(out)["reconcile"]
    assert section["k"] == round(expected, 6) and section["excluded_layers"] == ["relu1"]
    assert "rdk-s100" in section["device_mismatch"] and "ONNX Runtime kernel profile" in section["measured_on"]
    assert {row["name"]: row["measured_us"] for row in section["layers"]} == {
        lid: round(v, 3) for lid, v in measured.items() if lid != "relu1" and v is not None}
    rec = reconcile_run(as_run(run))
    assert rec.k == pytest.approx(expected, rel=1e-12)

    # the k of the reconciled run file is the same again (its reconcile section is not read as a vendor's)
    k_again = scale_factor(load_document(out))
    assert k_again is not None and k_again.k == pytest.approx(expected, rel=1e-12)

    # advise: the diagnosis ranks by the same measured times (0 for the eliminated layer)
    diag = diagnose(as_run(run))
    assert {d.layer_id: d.time_us for d in diag.layers} == measured
    assert main(["advise", str(path), "--no-model", "-o", "-"]) == 0
    hotspots = json.loads(capsys.readouterr().out)["diagnosis"]["hotspots"]
    assert {h["id"]: h["time_us"] for h in hotspots} == {lid: round(v, 3) for lid, v in measured.items()
                                                         if v is not None}

    # import's measured-layer table reads the same times
    table = _text(measured_table(load(path), 10))
    for lid in ("conv1", "conv2", "relu1"):
        assert f"{measured[lid]:.1f}" in table
    assert "relu1" in table


@pytest.mark.parametrize(("kind", "what"), [
    ("kernel-profile", "OpenVINO performance counters"), ("bench", "OpenVINO benchmark"),
    ("differential", "differential (bisect) timing on OpenVINO")])
def test_an_openvino_measurement_of_any_kind_names_openvino_its_device_and_precision(kind: str, what: str) -> None:
    """A bench or bisect on OpenVINO ran on this host's CPU, not on 'a device command'."""
    doc = _document()
    doc["target"] = {"name": "host", "kind": "cpu"}
    doc["measurement"] = {"kind": kind, "backend": "openvino", "provider": "CPU", "device": "CPU",
                          "precision": "f32", "machine": {"cpu": "Xeon"}, "source": f"layerscope {kind}"}
    origin = measurement_origin(doc)
    assert origin is not None and origin.device == "host-cpu" and origin.label == f"{what}, CPU (f32) on Xeon"
    assert device_mismatch(doc) is None
    doc["measurement"]["device"] = "NPU"
    origin = measurement_origin(doc)
    assert origin is not None and origin.device == "device" and origin.label.startswith(f"{what}, NPU (f32)")


def test_no_device_warning_when_measured_where_estimated() -> None:
    doc = _document()
    doc["target"] = {"name": "host", "kind": "cpu"}
    doc["measurement"] = {"kind": "kernel-profile", "backend": "onnxruntime", "provider": "CPUExecutionProvider",
                          "source": "layerscope profile"}
    assert device_mismatch(doc) is None
    doc["target"] = {"name": "my-host", "kind": "cpu"}  # a profile `layerscope calibrate` fitted to this host
    assert device_mismatch(doc) is None
    origin = measurement_origin(doc)
    assert origin is not None and origin.device == "host-cpu"
    doc["target"] = {"name": "a100-sxm", "kind": "gpu"}
    assert device_mismatch(doc) is not None
    doc["measurement"]["provider"] = "CUDAExecutionProvider"
    assert device_mismatch(doc) is None
    # a vendor's profiler measures its own device: no warning against a vendor or NPU target
    doc["measurement"] = {"kind": "vendor-import", "source": "vendor:hrt_model_exec p.log"}
    doc["target"] = {"name": "rdk-s100", "kind": "npu"}
    assert device_mismatch(doc) is None


def test_reading_a_run_and_its_report_run_with_the_collector_paused(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's JSON objects and typed sections are made with Python's cyclic collector paused (at 100k layers its
    collections were half of `report`), and it is back on after."""
    import gc

    from conftest import zoo
    from layerscope.cli import report as report_cli
    from layerscope.runfile import io as runfile_io
    from layerscope.runfile.models import RunFile

    run_path = tmp_path / "run.json"
    assert main(["estimate", str(zoo("squeezenet")), "-t", "rdk-s100", "-o", str(run_path)]) == 0
    seen: dict[str, list[bool]] = {"json": [], "typed": [], "report": []}
    loads, from_json, load_run_cli = runfile_io.json.loads, RunFile.from_json.__func__, report_cli.load

    def spy_loads(*args: Any, **kwargs: Any) -> Any:
        seen["json"].append(gc.isenabled())
        return loads(*args, **kwargs)

    def spy_from_json(cls: type[RunFile], data: dict[str, Any]) -> RunFile:
        seen["typed"].append(gc.isenabled())
        return from_json(cls, data)

    def spy_load_run(path: Path) -> Any:
        seen["report"].append(gc.isenabled())
        return load_run_cli(path)

    monkeypatch.setattr(runfile_io.json, "loads", spy_loads)
    monkeypatch.setattr(RunFile, "from_json", classmethod(spy_from_json))
    monkeypatch.setattr(report_cli, "load", spy_load_run)
    assert gc.isenabled()
    assert isinstance(load_document(run_path), dict)  # the checked document
    assert main(["report", str(run_path), "-o", str(tmp_path / "r.html")]) == 0
    assert seen["json"] and seen["typed"] and seen["report"] == [False]
    assert not any(seen["json"]) and not any(seen["typed"])
    assert gc.isenabled()
