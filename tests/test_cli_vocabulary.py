"""One CLI vocabulary: ``-o/--output`` for the run file (``--json`` its deprecated spelling), ``--html`` for the
report of every command that writes a run, ``--threads`` = intra-op threads, MODEL an argument, ``--seed`` wherever
inputs are generated; old spellings work one release with one line on stderr; a single-valued ``--target`` given
twice is refused; ``lint`` can gate CI; a redirected output is not cut at 80 columns. Every command's ``--help`` is
walked and checked against the shared vocabulary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
import pytest
from onnx import TensorProto, helper

from conftest import ModelWriter, zoo
from layerscope.cli.main import SUBCOMMANDS, cli, main
from layerscope.cli.options import Command
from layerscope.cli.outputs import OutputPath
from layerscope.runfile import load_document

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


# --- -o/--output and the old --json: the run file ------------------------------------------------------------

@pytest.mark.parametrize("flag", ["-o", "--output", "--json"])
def test_estimate_writes_the_run_file_under_each_spelling(flag: str, tiny: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    assert main(["estimate", str(tiny), flag, str(out)]) == 0
    assert [layer["op_type"] for layer in load_document(out)["layers"]] == ["Add", "Relu"]
    deprecations = _lines(capsys.readouterr().err, DEPRECATED)
    assert deprecations == ([f"layerscope: warning: --json {DEPRECATED} -o/--output"] if flag == "--json" else [])


# --- every command's --help: the shared vocabulary ------------------------------------------------------------

#: The commands whose main output is a run file (``-o RUN.json``), each also writing its HTML report (``--html``).
RUN_WRITERS = ("advise", "bench", "bisect", "compare", "estimate", "import", "pipeline", "profile", "reconcile")


def _command(name: str) -> click.Command:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None, name
    return command


def _help(name: str) -> str:
    """``layerscope NAME --help`` as a 200-column terminal shows it."""
    command = _command(name)
    ctx = click.Context(command, info_name=name, parent=click.Context(cli, info_name="layerscope"),
                        terminal_width=200, max_content_width=200)
    return command.get_help(ctx)


def _options(name: str) -> dict[str, click.Option]:
    """The command's options as ``--help`` lists them, by each of their spellings."""
    return {flag: param for param in _command(name).params if isinstance(param, click.Option) and not param.hidden
            for flag in param.opts}


def _hidden(name: str) -> set[str]:
    return {flag for param in _command(name).params if isinstance(param, click.Option) and param.hidden
            for flag in param.opts}


def _renamed(name: str, old: str) -> click.Option:
    """The listed option that the hidden old spelling ``old`` of command ``name`` sets (``deprecated_option``
    names its parameter ``deprecated_`` + the new option's)."""
    (hidden,) = [p for p in _command(name).params if isinstance(p, click.Option) and p.hidden and old in p.opts]
    assert hidden.name is not None and hidden.name.startswith("deprecated_")
    (new,) = [p for p in _command(name).params if isinstance(p, click.Option) and not p.hidden
              and p.name == hidden.name.removeprefix("deprecated_")]
    return new


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_help_speaks_the_shared_vocabulary(name: str) -> None:
    text, options = _help(name), _options(name)
    # --json is only a hidden old spelling: of -o/--output, of --format json where json is a format, or of
    # calibrate's --fit-json (its JSON is not a run file)
    assert "--json" not in options and "--json" not in text
    if "--json" in _hidden(name):
        renamed = _renamed(name, "--json")
        assert (renamed.opts == ["-o", "--output"]
                or (renamed.opts == ["--format"] and "json" in renamed.type.choices)  # type: ignore[attr-defined]
                or (name, renamed.opts) == ("calibrate", ["--fit-json"])), renamed.opts
    # -o and --output are one option wherever either is offered, and it writes a file (sweep: a folder)
    if "-o" in options or "--output" in options:
        assert options["-o"] is options["--output"]
    # --html: the HTML report of the run, a file checked before any work
    if "--html" in options:
        html = options["--html"]
        assert isinstance(html.type, OutputPath) and html.metavar == "OUT"
        assert (html.help or "").startswith("Also write the self-contained HTML report of ")
    # --top: a count of rows, never negative
    if "--top" in options:
        top = options["--top"]
        assert isinstance(top.type, click.IntRange) and top.type.min == 0
    # --threads: the runtime's intra-op threads wherever it appears; --streams: bench's concurrent streams only
    if "--threads" in options:
        assert "intra-op threads" in (options["--threads"].help or "")
    if "--streams" in options:
        assert name == "bench" and "Concurrent inference streams" in (options["--streams"].help or "")
    # --format: the terminal report is "table" wherever one is offered (import names its input's with --from)
    if "--format" in options:
        assert "table" in options["--format"].type.choices  # type: ignore[attr-defined]
    # an old spelling is not listed, and is applied: only a Command carries its value to the new option
    if _hidden(name):
        assert isinstance(_command(name), Command), name
    listed = [line.strip() for line in text.splitlines()]
    for old in _hidden(name):
        assert not [line for line in listed if line.startswith((f"{old} ", f"{old},"))], old


@pytest.mark.parametrize("name", RUN_WRITERS)
def test_every_command_writing_a_run_has_output_and_html(name: str) -> None:
    options = _options(name)
    output = options["-o"]
    assert output is options["--output"] and output.metavar == "RUN.json" and isinstance(output.type, OutputPath)
    assert "--html" in options
    assert _renamed(name, "--json") is output  # the old spelling still sets it, with its line


def test_the_run_writers_are_every_command_offering_a_run_file() -> None:
    """A command added later whose -o writes a run file is checked too."""
    offering = {name for name in SUBCOMMANDS if (opt := _options(name).get("-o")) is not None
                and opt.metavar == "RUN.json"}
    assert offering == set(RUN_WRITERS)


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
    m = load_document(out)["measurement"]
    assert m["threads"] == 1 and m["streams"] == 2
    assert "bench --threads" not in capsys.readouterr().err  # --streams given: no note


def test_bench_threads_alone_notes_the_new_meaning(tiny: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.json"
    assert main(["bench", str(tiny), "--runs", "2", "--warmup", "0", "--threads", "2", "-o", str(out)]) == 0
    m = load_document(out)["measurement"]
    assert m["threads"] == 2 and m["streams"] == 1
    (note,) = _lines(capsys.readouterr().err, "bench --threads")
    assert note == ("layerscope: note: bench --threads 2 sets ONNX Runtime's intra-op threads, as in every command; "
                    "for 2 concurrent streams use --streams 2 (--threads meant streams before this release)")


@pytest.mark.parametrize("args", [["--threads", "1"], ["--threads", "0"], ["--threads", "2", "--sweep", "streams=1,2"]])
def test_bench_threads_that_cannot_mean_streams_get_no_note(args: list[str], tiny: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """One stream is what --threads 0 or 1 asked for under the old meaning too; a streams axis names the streams."""
    out = tmp_path / "b.json"
    assert main(["bench", str(tiny), "--runs", "2", "--warmup", "0", *args, "-o", str(out)]) == 0
    assert load_document(out)["measurement"]["threads"] == int(args[1])
    assert "bench --threads" not in capsys.readouterr().err


def test_bench_intra_threads_still_works_with_one_line(tiny: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.json"
    assert main(["bench", str(tiny), "--runs", "2", "--warmup", "0", "--intra-threads", "1", "-o", str(out)]) == 0
    assert load_document(out)["measurement"]["threads"] == 1
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
        assert load_document(tmp_path / path)["model"]["path"] == str(tiny)
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
