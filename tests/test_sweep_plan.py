"""The sweep's plan (axes, cells, keys, spec files) and a sweep run in this process (``--no-ray``): no Ray here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import zoo

from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.sweep import SweepSpec, expand, load_spec


def test_estimate_cells_are_not_multiplied_by_profile_settings() -> None:
    models = (str(zoo("squeezenet")), str(zoo("resnet50")))
    spec = SweepSpec(models=models, targets=("host", "rdk-s100"), modes=("estimate", "profile"),
                     dtypes=("int8",), threads=(1, 2), opt_levels=("all",))
    cells = expand(spec)
    estimate = [c for c in cells if c.mode == "estimate"]
    profile = [c for c in cells if c.mode == "profile"]
    assert len(estimate) == 2 * 2 and len(profile) == 2 * 2 * 2
    assert {c.dtype for c in estimate} == {"int8"} and {c.threads for c in estimate} == {None}
    assert {(c.threads, c.dtype) for c in profile} == {(1, None), (2, None)}
    keys = [c.key for c in cells]
    assert len(set(keys)) == len(keys)
    assert keys == [c.key for c in expand(spec)]  # stable: what resuming relies on
    assert keys[0].startswith("light_squeezenet__host__estimate__")


def test_a_yaml_spec_names_models_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(zoo("squeezenet").read_bytes())
    spec_file = tmp_path / "sweep.yaml"
    spec_file.write_text("models: [m.onnx]\ntargets: [rdk-s100, rdk-x5]\nmodes: estimate\nruns: 3\n"
                         "shapes: {data_0: [1, 3, 224, 224]}\n", encoding="utf-8")
    axes = load_spec(spec_file)
    assert axes["models"] == (str(tmp_path / "m.onnx"),) and axes["modes"] == ("estimate",) and axes["runs"] == 3
    cells = expand(SweepSpec(**axes))
    assert [(Path(c.model).name, c.target) for c in cells] == [("m.onnx", "rdk-s100"), ("m.onnx", "rdk-x5")]
    assert cells[0].shapes == (("data_0", (1, 3, 224, 224)),)


@pytest.mark.parametrize(("text", "message"), [
    ("models: [a.onnx]\ntarget: [host]\n", "unknown key(s) 'target'"),
    ("models: !!python/object/apply:os.system ['true']\n", "not a valid sweep file"),
    ("models: [a.onnx]\nthreads: [one]\n", "'threads' must be an integer"),
    ("models: [a.onnx]\nshapes: {x: [1, 0]}\n", "dims of 'x' must be a list of positive integers"),
    ("- a\n- b\n", "a sweep file is a mapping"),
])
def test_a_bad_spec_file_is_one_input_error(tmp_path: Path, text: str, message: str) -> None:
    spec_file = tmp_path / "sweep.yaml"
    spec_file.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_spec(spec_file)


def test_a_sweep_in_this_process_then_a_dry_run_shows_it_done(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    args = ["sweep", str(zoo("squeezenet")), "-t", "rdk-s100", "--dtype", "int8,fp16", "-o", str(out)]
    assert main([*args, "--no-ray"]) == 0
    assert "2 cells: 0 already done, 2 run now, 0 failed" in capsys.readouterr().out
    assert len(list((out / "runs").glob("*.json"))) == 2 and not (out / "running").exists()
    assert main([*args, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "2 cells" and all(line.startswith("done ") for line in lines[:-1])
    assert main(["sweep", str(tmp_path / "none.onnx"), "-o", str(out), "--no-ray"]) == 2
    assert "none.onnx: no such model file" in capsys.readouterr().err
    os.mkfifo(tmp_path / "pipe.onnx")  # a special file is named for what it is, before anything opens it
    assert main(["sweep", str(tmp_path / "pipe.onnx"), "-o", str(out), "--no-ray"]) == 2
    assert "pipe.onnx: not a file (a FIFO, a device or a folder)" in capsys.readouterr().err


def test_a_completed_sweep_removes_the_markers_killed_workers_left(tmp_path: Path) -> None:
    """A worker killed as it wrote its marker leaves the atomic writer's temporary file, one killed while it ran
    the cell leaves the marker: once every cell has run, both go (and the folder); a file not of this sweep stays."""
    out = tmp_path / "sweep"
    args = ["sweep", str(zoo("squeezenet")), "-t", "rdk-s100", "-o", str(out), "--no-ray"]
    assert main([*args, "--dry-run"]) == 0
    key = expand(SweepSpec(models=(str(zoo("squeezenet")),), targets=("rdk-s100",)))[0].key
    running = out / "running"
    running.mkdir(parents=True)
    (running / f".{key}.json.zh6bn63e.tmp").write_text('{"host": "a", "pid": 1', encoding="utf-8")
    (running / f"{key}.json").write_text('{"host": "a", "pid": 1, "started_utc": "x"}', encoding="utf-8")
    assert main(args) == 0
    assert not running.exists()
    running.mkdir()
    (running / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(args) == 0
    assert [p.name for p in running.iterdir()] == ["notes.txt"]


def test_a_stop_the_moment_a_cells_marker_is_written_removes_it(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C or SIGTERM (a KeyboardInterrupt in the CLI) arriving as the marker's write returns: the marker goes
    with the cell (it was left behind, and a stopped sweep's ``running`` folder with it, when the stop came
    before the cell's own clean-up was set)."""
    from layerscope.sweep import tasks

    (cell,) = expand(SweepSpec(models=(str(zoo("squeezenet")),), targets=("rdk-s100",)))
    written = tasks.write_atomic

    def write_then_stop(path: Path, data: str) -> Path:
        written(path, data)
        raise KeyboardInterrupt

    monkeypatch.setattr(tasks, "write_atomic", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        tasks.run_cell(cell, str(tmp_path))
    assert not any((tmp_path / tasks.RUNNING).iterdir())
