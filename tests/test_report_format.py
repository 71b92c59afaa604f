"""``layerscope report RUN --format``: one renderer per format, and ``--format terminal`` prints what the
command that made the run printed (estimate --timeline, profile, bench, bisect, pipeline, import), read from the
saved run alone."""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import onnx
import pytest

from conftest import zoo
from layerscope.api import load
from layerscope.cli.main import main
from layerscope.report.command_terminal import run_kind
from layerscope.report.renderers import FORMATS, RENDERERS, format_of, get_renderer
from layerscope.runfile import load as load_typed

SQUEEZENET = str(zoo("squeezenet"))
#: Lines a command prints about the files it wrote; the report of the saved run has none of them.
FILE_LINES = ("run file:", "report:", "trace:")

PIPELINE = textwrap.dedent("""
    import layerscope


    def pipeline(model):
        with layerscope.trace_point("preprocess"):
            feeds = {name: array.copy() for name, array in model.example_inputs.items()}
        outputs = model.run(None, feeds)
        with layerscope.trace_point("postprocess"):
            sorted(outputs[0].ravel().tolist())
""")


def _tables(printed: str) -> list[str]:
    """What a command printed without the lines naming its files (and trailing padding)."""
    return [line.rstrip() for line in printed.splitlines() if not line.startswith(FILE_LINES)]


def _command_then_report(args: list[str], run: Path, capsys: pytest.CaptureFixture[str],
                         report_args: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    assert main([*args, "-o", str(run)]) == 0
    printed = capsys.readouterr().out
    assert main(["report", str(run), "--format", "table", *report_args]) == 0
    again = capsys.readouterr()
    assert "missing" not in again.out  # the notes about what a run lacks are not part of the terminal report
    return _tables(printed), _tables(again.out)


@pytest.fixture(autouse=True)
def _wide_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")


def test_estimate_with_timeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed, again = _command_then_report(["estimate", SQUEEZENET, "-t", "rdk-s100", "--timeline", "--top", "7"],
                                          tmp_path / "run.json", capsys, ("--top", "7"))
    assert printed == again
    text = "\n".join(again)
    assert "Top 7 of 66 layers by estimated latency" in text and "minimum requirement = static" in text
    # without --top the report shows the command's default, 20 rows
    assert main(["report", str(tmp_path / "run.json"), "--format", "table"]) == 0
    assert "Top 20 of 66 layers by estimated latency" in capsys.readouterr().out


def test_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed, again = _command_then_report(["profile", SQUEEZENET, "-t", "rdk-s100", "--runs", "3", "--warmup", "1",
                                           "--threads", "1", "--top", "5"], tmp_path / "run.json", capsys,
                                          ("--top", "5"))
    assert printed == again
    assert any(line.startswith("Top 5 of 66 layers by measured time") for line in again)
    assert run_kind(load_typed(tmp_path / "run.json")) == "profile"
    # an estimate refreshed into the measured run prints the estimate; the run stays a profile for the report
    assert main(["estimate", SQUEEZENET, "-t", "rdk-s100", "--top", "5", "-o", str(tmp_path / "run.json")]) == 0
    assert "Top 5 of 66 layers by estimated latency" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "run.json"), "--format", "table", "--top", "5"]) == 0
    assert "Top 5 of 66 layers by measured time" in capsys.readouterr().out


def test_bench(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed, again = _command_then_report(["bench", SQUEEZENET, "--runs", "4", "--warmup", "1", "--threads", "1"],
                                          tmp_path / "run.json", capsys)
    assert printed == again
    assert any(line.startswith("End-to-end latency, 4 measured runs") for line in again)
    assert run_kind(load_typed(tmp_path / "run.json")) == "bench"


def test_bisect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed, again = _command_then_report(["bisect", SQUEEZENET, "-t", "rdk-s100", "--threads", "1", "--segments", "3",
                                           "--repeats", "2", "--pilot", "1", "--no-cache", "--no-suffixes"],
                                          tmp_path / "run.json", capsys)
    assert printed == again
    assert run_kind(load_typed(tmp_path / "run.json")) == "bisect"
    assert sum(line.startswith(("1 ", "2 ", "3 ")) for line in (s.lstrip() for s in again)) >= 3  # a row a segment


def test_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "pipe.py"
    script.write_text(PIPELINE)
    printed, again = _command_then_report(["pipeline", f"{script}:pipeline", SQUEEZENET, "--runs", "2", "--warmup",
                                           "0", "--threads", "1", "--top", "4"], tmp_path / "run.json", capsys,
                                          ("--top", "4"))
    assert printed == again
    assert any(line.startswith("Top 4 items of pipeline") for line in again)
    assert any(line.lstrip().startswith("postprocess") for line in again)


IMPORTS = Path(__file__).parent / "fixtures" / "importers"


@pytest.mark.parametrize("files", [("horizon/s100_profiler.log", "horizon/s100_model.json"),
                                   ("trtexec/yolov5s.profile.json",)])
def test_import(files: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed, again = _command_then_report(["import", *(str(IMPORTS / f) for f in files)], tmp_path / "run.json",
                                          capsys)
    assert printed == again and len(again) > 15
    assert run_kind(load_typed(tmp_path / "run.json")) == "import"


# --- the analyses that write a run: compare, advise, reconcile (calibrate writes a profile, not a run) -----------

@pytest.fixture(scope="module")
def two_estimates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """SqueezeNet estimated on rdk-s100 and on rdk-x5 (deterministic: no measurement)."""
    folder = tmp_path_factory.mktemp("analyses")
    runs = folder / "s100.json", folder / "x5.json"
    for target, out in zip(("rdk-s100", "rdk-x5"), runs, strict=True):
        assert main(["estimate", SQUEEZENET, "-t", target, "--top", "0", "-o", str(out)]) == 0
    return runs


def test_compare(two_estimates: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = two_estimates
    capsys.readouterr()
    printed, again = _command_then_report(["compare", str(before), str(after), "--top", "5", "--labels", "s100,x5"],
                                          tmp_path / "run.json", capsys, ("--top", "5"))
    assert printed == again
    assert run_kind(load_typed(tmp_path / "run.json")) == "compare"
    text = "\n".join(again)
    assert "s100 -> x5" in text and "Largest per-layer changes" in text
    # the largest change, by hand from the two runs' estimates
    est = [{layer.id: layer.estimated_us or 0.0 for layer in load_typed(path).layers} for path in two_estimates]
    top = max(est[0], key=lambda i: (abs(est[1][i] - est[0][i]), i))
    row = next(line.split() for line in again if line.lstrip().startswith("1 "))
    assert row[1] == top and row[-1] == f"{est[1][top] - est[0][top]:+.1f}"
    # without --top the report prints compare's default, 10 rows
    assert main(["report", str(tmp_path / "run.json"), "--format", "table"]) == 0
    assert sum(line.lstrip().startswith(tuple(f"{i} " for i in range(1, 12)))
               for line in capsys.readouterr().out.splitlines()) == 10


def test_advise(two_estimates: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed, again = _command_then_report(["advise", str(two_estimates[0]), "--top", "5"], tmp_path / "run.json",
                                          capsys, ("--top", "5"))
    assert printed == again
    run = load_typed(tmp_path / "run.json")
    assert run_kind(run) == "advise" and run.findings is not None and run.findings.count
    assert f"Findings ({run.findings.count})" in again and "Top 5 of 66 layers by estimated time" in again[0]
    # without the model the rules that read the graph are skipped, and the report says so as advise did
    printed, again = _command_then_report(["advise", str(two_estimates[0]), "--no-model"], tmp_path / "bare.json",
                                          capsys)
    assert printed == again and any(line.startswith("skipped lane-alignment: needs the model file") for line in again)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reconcile") / "profile.json"
    assert main(["profile", SQUEEZENET, "-t", "rdk-s100", "--runs", "3", "--warmup", "1", "--threads", "1",
                 "--top", "0", "-o", str(out)]) == 0
    return out


def test_reconcile(profiled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    printed, again = _command_then_report(["reconcile", str(profiled), "--top", "5"], tmp_path / "run.json", capsys,
                                          ("--top", "5"))
    assert printed[0] == str(profiled)  # the path of the run reconciled names a file: the report has no such line
    assert printed[1:] == again
    run = load_typed(tmp_path / "run.json")
    assert run_kind(run) == "reconcile" and run.reconcile is not None
    assert again[1].split()[:2] == ["k", f"{run.reconcile.k:.3f}"]
    assert any(line.startswith("Top 5 layers by measured time") for line in again)


def test_reconcile_of_several_runs_keeps_the_spread(profiled: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_bytes(profiled.read_bytes())
    second.write_bytes(profiled.read_bytes())
    capsys.readouterr()
    assert main(["reconcile", str(first), str(second), "--save"]) == 0
    printed = _tables(capsys.readouterr().out)
    assert main(["report", str(second), "--format", "table"]) == 0
    again = _tables(capsys.readouterr().out)
    # the second run's report, then k across the runs: what reconcile printed after the second run's path
    assert printed[printed.index(str(second)) + 1:-1] == again
    assert printed[-1] == "reconcile saved in 2 run file(s)" and "k across runs" in again


def test_the_last_analysis_names_the_run(two_estimates: tuple[Path, Path], tmp_path: Path) -> None:
    """A run written by compare whose *after* run had been advised is a compare run; an import's reconcile section
    does not make a run a reconcile run (test_import)."""
    before, after = two_estimates
    advised = tmp_path / "advised.json"
    assert main(["advise", str(after), "--no-model", "-o", str(advised)]) == 0
    assert run_kind(load_typed(advised)) == "advise"
    assert main(["compare", str(before), str(advised), "-o", str(tmp_path / "cmp.json")]) == 0
    compared = load_typed(tmp_path / "cmp.json")
    assert compared.findings is not None and run_kind(compared) == "compare"


# --- the other formats ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def estimate_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fmt") / "run.json"
    assert main(["estimate", SQUEEZENET, "-t", "rdk-s100", "--top", "0", "-o", str(out)]) == 0
    return out


def test_every_format_has_one_renderer() -> None:
    assert FORMATS == ("terminal", "html", "csv", "md", "trace", "onnx")
    for name, renderer in RENDERERS.items():
        assert renderer.name == name and renderer.suffix.startswith(".")
    assert [n for n, r in RENDERERS.items() if r.binary] == ["trace", "onnx"]
    assert format_of("x.csv") == "csv" and format_of("x.json.gz") == "trace" and format_of("x.unknown") == "html"


def test_text_formats_print_on_stdout_and_files_are_the_same(estimate_run: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = load_typed(estimate_run)
    for fmt in ("csv", "md"):
        assert main(["report", str(estimate_run), "--format", fmt]) == 0
        shown = capsys.readouterr()
        assert shown.out == get_renderer(fmt).render(run)
        out = tmp_path / f"x.{fmt}"
        assert main(["report", str(estimate_run), "--format", fmt, "-o", str(out)]) == 0
        assert out.read_text() == shown.out
        assert f"{out}" in capsys.readouterr().out
    csv_lines = (tmp_path / "x.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + 66  # header and one row per layer of squeezenet


def test_files_next_to_the_run(estimate_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(estimate_run), "--format", "trace"]) == 0
    trace = json.loads(estimate_run.with_name("run.trace.json").read_text())
    assert trace["traceEvents"]
    assert main(["report", str(estimate_run), "--format", "onnx"]) == 0
    model = onnx.load(str(estimate_run.with_name("run.annotated.onnx")))
    annotated = [n for n in model.graph.node if any(p.key.startswith("layerscope.") for p in n.metadata_props)]
    assert len(annotated) == 66  # one node a layer; the 39 others are the constants the loader folds
    assert main(["report", str(estimate_run)]) == 0  # no option: the HTML report, as before
    assert estimate_run.with_name("run.html").read_text().startswith("<!DOCTYPE html>")
    capsys.readouterr()


def test_suffix_picks_the_format_and_old_options_still_work(estimate_run: Path, tmp_path: Path) -> None:
    assert main(["report", str(estimate_run), "-o", str(tmp_path / "t.json.gz"), "--csv", str(tmp_path / "a.csv"),
                 "--markdown", str(tmp_path / "a.md"), "--trace", str(tmp_path / "t2.json")]) == 0
    assert json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes())) == json.loads(
        (tmp_path / "t2.json").read_text())
    assert (tmp_path / "a.csv").read_text().count("\n") == 67 and (tmp_path / "a.md").read_text().startswith("#")


def test_binary_formats_refuse_stdout(estimate_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(estimate_run), "--format", "onnx", "-o", "-"]) == 2
    assert "not text" in capsys.readouterr().err


def test_the_api_renders_through_the_same_registry(estimate_run: Path) -> None:
    run = load(estimate_run)
    assert run.report(fmt="csv") == get_renderer("csv").render(load_typed(estimate_run))
    terminal = run.report(fmt="terminal")
    assert isinstance(terminal, str) and "ESTIMATE: static estimate on profile 'rdk-s100'" in terminal
    assert isinstance(run.report(fmt="onnx"), bytes)
