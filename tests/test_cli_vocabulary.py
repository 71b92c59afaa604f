"""One CLI vocabulary: ``-o/--output`` (= ``--json``) for the run file, ``--threads`` = intra-op threads,
MODEL an argument, ``--seed`` wherever inputs are generated; old spellings work one release with one line on
stderr; a single-valued ``--target`` given twice is refused; ``lint`` can gate CI; a redirected output is not
cut at 80 columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from onnx import TensorProto, helper

from conftest import ModelWriter, zoo
from layerscope.cli.main import main
from layerscope.run import load_run

SQUEEZENET = str(zoo("squeezenet"))
LINT = Path(__file__).parent / "fixtures" / "lint"
DEPRECATED = "is deprecated and will be removed in the next release; use"


@pytest.fixture()
def tiny(write_model: ModelWriter) -> Path:
    """y = relu(x + x): one input, two layers; cheap to run."""
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return write_model(nodes, [("x", TensorProto.FLOAT, [1, 8])], [("y", TensorProto.FLOAT, [1, 8])])


def _lines(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


# --- -o/--output and --json: the run file -----------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["-o", "--output", "--json"])
def test_estimate_writes_the_run_file_under_each_spelling(flag: str, tiny: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["estimate", str(tiny), flag, str(out)]) == 0
    assert [layer["op_type"] for layer in load_run(out)["layers"]] == ["Add", "Relu"]
    assert DEPRECATED not in capsys.readouterr().err


# --- --target once ------------------------------------------------------------------------------------------------

def test_two_different_targets_exit_2_naming_both(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(tiny), "--target", "rdk-s100", "-t", "host"]) == 2
    err = capsys.readouterr().err
    assert "'rdk-s100'" in err and "'host'" in err and "takes one" in err
    assert main(["estimate", str(tiny), "-t", "rdk-s100", "-t", "rdk-s100", "--top", "0"]) == 0  # the same: fine
    assert "rdk-s100" in capsys.readouterr().out


def test_advise_refuses_two_targets_too(tmp_path: Path, tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["estimate", str(tiny), "-o", str(out)]) == 0
    assert main(["advise", str(out), "--no-model", "-t", "host", "-t", "rdk-s100"]) == 2
    assert "given 2 times" in capsys.readouterr().err


# --- --threads / --streams in bench ------------------------------------------------------------------------------

def test_bench_threads_are_intra_op_and_streams_are_streams(tiny: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.json"
    assert main(["bench", str(tiny), "--runs", "4", "--warmup", "0", "--threads", "1", "--streams", "2",
                 "-o", str(out)]) == 0
    m = load_run(out)["measurement"]
    assert m["threads"] == 1 and m["streams"] == 2
    assert "bench --threads is" not in capsys.readouterr().err  # --streams given: no note


def test_bench_threads_alone_notes_the_new_meaning(tiny: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.json"
    assert main(["bench", str(tiny), "--runs", "2", "--warmup", "0", "--threads", "2", "-o", str(out)]) == 0
    m = load_run(out)["measurement"]
    assert m["threads"] == 2 and m["streams"] == 1
    (note,) = _lines(capsys.readouterr().err, "bench --threads is")
    assert "--streams" in note


def test_bench_intra_threads_still_works_with_one_line(tiny: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.json"
    assert main(["bench", str(tiny), "--runs", "2", "--warmup", "0", "--intra-threads", "1", "-o", str(out)]) == 0
    assert load_run(out)["measurement"]["threads"] == 1
    (line,) = _lines(capsys.readouterr().err, DEPRECATED)
    assert line == f"layerscope: warning: --intra-threads {DEPRECATED} --threads"
    assert main(["bench", str(tiny), "--intra-threads", "1", "--threads", "2"]) == 2  # both spellings: refused
    assert "not both" in capsys.readouterr().err


# --- MODEL an argument of pipeline -------------------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    def run_once(model):
        return model.run(None, model.example_inputs)
""")


def test_pipeline_model_argument_and_the_old_option(tiny: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "pipe.py"
    script.write_text(SCRIPT)
    common = ["--runs", "1", "--warmup", "0", "--no-layers", "--threads", "1"]
    assert main(["pipeline", f"{script}:run_once", str(tiny), *common, "-o", str(tmp_path / "a.json")]) == 0
    assert DEPRECATED not in capsys.readouterr().err
    assert main(["pipeline", f"{script}:run_once", "-m", str(tiny), *common, "-o", str(tmp_path / "b.json")]) == 0
    (line,) = _lines(capsys.readouterr().err, DEPRECATED)
    assert line.startswith("layerscope: warning: --model/-m is deprecated") and "MODEL" in line
    for path in ("a.json", "b.json"):
        assert load_run(tmp_path / path)["model"]["path"] == str(tiny)
    assert main(["pipeline", f"{script}:run_once", *common]) == 2
    assert "Missing argument 'MODEL'" in capsys.readouterr().err


# --- --seed in profile ------------------------------------------------------------------------------------------

def test_profile_takes_a_seed(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import layerscope.workflows.profile as profile_cmd  # the use case the command runs

    seen: list[int] = []
    original = profile_cmd.make_inputs

    def recording(graph: Any, specs: Any, seed: int = 0) -> Any:
        seen.append(seed)
        return original(graph, specs, seed)

    monkeypatch.setattr(profile_cmd, "make_inputs", recording)
    assert main(["profile", str(tiny), "--runs", "1", "--warmup", "0", "--top", "0", "--seed", "7"]) == 0
    assert seen == [7]
    feeds = [original(load_run_graph(tiny), (), seed) for seed in (7, 8)]
    assert not (feeds[0]["x"] == feeds[1]["x"]).all()  # the seed changes what is fed


def load_run_graph(path: Path) -> Any:
    from layerscope.model import load_model

    return load_model(path)


# --- stdout flags renamed --------------------------------------------------------------------------------------

def test_lint_gates_ci(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(LINT / "good_s100.yaml")]) == 0
    assert main(["lint", str(LINT / "bad_s100.yaml")]) == 1  # four errors
    capsys.readouterr()
    assert main(["lint", str(LINT / "bad_s100.yaml"), "--format", "json"]) == 1
    new = capsys.readouterr()
    assert json.loads(new.out)["by_severity"]["error"] == 4 and DEPRECATED not in new.err
    assert main(["lint", str(LINT / "bad_s100.yaml"), "--json"]) == 1  # the old flag: the same JSON, one line more
    old = capsys.readouterr()
    assert json.loads(old.out) == json.loads(new.out)
    (line,) = _lines(old.err, DEPRECATED)
    assert line == f"layerscope: warning: --json {DEPRECATED} --format json"


def test_lint_warnings_alone_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layerscope.analysis.lint import lint_file

    config = tmp_path / "typo.yaml"
    config.write_text((LINT / "good_s100.yaml").read_text() + "\nmodel_paramters: {}\n")
    severities = {f.severity.value for f in lint_file(config)}
    assert severities and "error" not in severities  # a typo is not an error
    assert main(["lint", str(config)]) == 0


def test_backends_format_json_and_the_old_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--format", "json"]) == 0
    new = capsys.readouterr()
    assert main(["backends", "--json"]) == 0
    old = capsys.readouterr()
    assert json.loads(new.out) == json.loads(old.out) and json.loads(new.out)[0]["name"] == "onnxruntime"
    assert DEPRECATED not in new.err and len(_lines(old.err, DEPRECATED)) == 1


def test_calibrate_fit_json_and_the_old_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # both spellings at once are refused before any run is read
    assert main(["calibrate", str(tmp_path / "r.json"), "-o", str(tmp_path / "p.toml"), "--json",
                 str(tmp_path / "a.json"), "--fit-json", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert len(_lines(err, DEPRECATED)) == 1 and "--fit-json or the deprecated --json, not both" in err


# --- output not a terminal: wide, not cut at 80 columns ----------------------------------------------------------

def test_targets_redirected_to_a_file_keeps_whole_names(tmp_path: Path) -> None:
    out = tmp_path / "t.txt"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    with out.open("w") as fh:
        subprocess.run([sys.executable, "-m", "layerscope", "targets"], stdout=fh, env=env, check=True)
    text = out.read_text()
    assert "…" not in text
    assert "rdk-s100" in text and "rdk-s100p" in text
