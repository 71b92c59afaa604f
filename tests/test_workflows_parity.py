"""The command line and the Python API run the same use case (:mod:`layerscope.workflows`): every option of a
moved command is a parameter of its API function and a field of its request, with the same default, and the two
give the same run on the same model."""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest

import layerscope
from conftest import ModelWriter
from layerscope import api
from layerscope.cli.main import main
from layerscope.errors import LayerscopeError
from layerscope.workflows.advise import AdviseRequest
from layerscope.workflows.bench import BenchRequest
from layerscope.workflows.bisect import BisectRequest
from layerscope.workflows.calibrate import CalibrateRequest
from layerscope.workflows.common import RENAMED
from layerscope.workflows.estimate import EstimateRequest
from layerscope.workflows.import_run import ImportRequest
from layerscope.workflows.lint import LintRequest
from layerscope.workflows.pipeline import PipelineRequest
from layerscope.workflows.profile import ProfileRequest
from layerscope.workflows.reconcile import ReconcileRequest
from layerscope.workflows.sweep import SweepRequest
from test_bisect import write_residual

#: Options that only say where the run goes or how much of it the terminal shows, with what the API offers instead.
OUTPUT_ONLY: dict[str, str] = {
    "json_out": "the function returns the run; Run.save writes it (estimate: a file that exists is merge_into)",
    "html_out": "Run.report(path) renders the HTML report",
    "top": "rows of the terminal table; Run.report(fmt='terminal') prints all",
    "output_format": "--format trace is Run.report(fmt='trace')",
    "level": "detail of --format trace on stdout",
}
#: Per use case, more output-only options (same rule), and options of :data:`OUTPUT_ONLY` that are a field there.
MORE_OUTPUT_ONLY: dict[str, dict[str, str]] = {
    "import": {"output": "-o: the function returns the run; Run.save writes it"},
    "reconcile": {"save": "--save writes each run back; the function returns the runs: Run.save writes them"},
    "advise": {"save": "--save writes the run back; the function returns it: Run.save writes it"},
    "calibrate": {"json_out": "--fit-json writes the fit as JSON: the function returns the fit (calibration)"},
    "pipeline": {"trace_out": "--trace: Run.report(path, fmt='trace') writes the trace"},
    "lint": {"fmt": "--format json prints the findings as JSON: the function returns them",
             "output": "-o writes the report or the JSON to a file: the function returns the findings"},
}
FIELD_THERE: dict[str, set[str]] = {"advise": {"top"}}  # the hot spots the saved findings keep
#: API parameters that are no option of the command, and why.
API_ONLY: dict[str, set[str]] = {"estimate": {"merge_into"}}  # the CLI's -o at a file that exists
#: Arguments the command line may leave out that the API requires, and why.
#: (the deprecated --model, --out may give it; the command refuses neither).
REQUIRED_IN_API = {("pipeline", "model"), ("sweep", "out_dir")}
#: Options whose command-line form is text the command parses, and the request holds parsed: their defaults are
#: compared as parsed (nothing given: empty).
PARSED = {"shapes", "dims", "sweep"}

#: Use case -> (its command's module, its API function, its request class).
MOVED: dict[str, tuple[str, Callable[..., Any], type]] = {
    "estimate": ("layerscope.cli.estimate", api.estimate, EstimateRequest),
    "profile": ("layerscope.cli.profile", api.profile, ProfileRequest),
    "bisect": ("layerscope.cli.bisect", api.bisect, BisectRequest),
    "bench": ("layerscope.cli.bench", api.bench, BenchRequest),
    "import": ("layerscope.cli.import_cmd", api.import_run, ImportRequest),
    "reconcile": ("layerscope.cli.reconcile", api.reconcile, ReconcileRequest),
    "advise": ("layerscope.cli.advise", api.advise, AdviseRequest),
    "calibrate": ("layerscope.cli.calibrate", api.calibrate, CalibrateRequest),
    "pipeline": ("layerscope.cli.pipeline", api.profile_pipeline, PipelineRequest),
    "sweep": ("layerscope.cli.sweep", api.run_sweep, SweepRequest),
    "lint": ("layerscope.cli.lint", api.lint, LintRequest),
}


def _command(module: str) -> click.Command:
    command = __import__(module, fromlist=["command"]).command
    assert isinstance(command, click.Command)
    return command


def _options(module: str) -> list[click.Parameter]:
    return [p for p in _command(module).params if not getattr(p, "hidden", False)]


def _default(module: str, param: click.Parameter) -> Any:
    """What the command runs with when the option is not given."""
    if hasattr(param, "default_one"):  # --target: one value of a repeatable option
        return param.default_one
    default = param.get_default(click.Context(_command(module)), call=True)
    if not isinstance(default, str | int | float | tuple | list):  # None, or click's marker of no default
        default = None
    return () if default is None and param.multiple else default


def _request_default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _output_only(use_case: str) -> set[str]:
    return (set(OUTPUT_ONLY) - FIELD_THERE.get(use_case, set())) | set(MORE_OUTPUT_ONLY.get(use_case, {}))


@pytest.mark.parametrize("use_case", sorted(MOVED))
def test_every_option_is_an_api_parameter_and_a_request_field_with_the_same_default(use_case: str) -> None:
    module, function, request_class = MOVED[use_case]
    parameters = inspect.signature(function).parameters
    fields = {f.name: f for f in dataclasses.fields(request_class)}
    missing, different = [], []
    for param in _options(module):
        assert param.name is not None
        if param.name in _output_only(use_case):
            continue
        name = RENAMED.get(param.name, param.name)
        if name not in parameters or name not in fields:
            missing.append(f"{param.name} -> {name}")
            continue
        field = fields[name]
        request_default = _request_default(field)
        api_default = parameters[name].default
        if param.required or (use_case, name) in REQUIRED_IN_API:  # an argument or option the command needs
            assert request_default is dataclasses.MISSING, f"{use_case}: {name} is required, the request has a default"
            assert api_default is inspect.Parameter.empty, f"{use_case}: {name} is required, the API has a default"
            continue
        cli_default = _default(module, param)
        if name in PARSED:
            cli_default = dict(cli_default or ())
        elif isinstance(cli_default, tuple | list) or (isinstance(param, click.Argument) and param.nargs == -1):
            cli_default = tuple(cli_default or ())
        if name == "model" and isinstance(param, click.Argument):  # the bundled sample when not given
            assert request_default is None and api_default is None, f"{use_case}: {name}"
            continue
        if name in PARSED:  # not given: an empty mapping or None alike
            api_default = dict(api_default or {})
            request_default = dict(request_default or {})
        elif isinstance(api_default, tuple | list):
            api_default = tuple(api_default)
        if not (cli_default == request_default == api_default):
            different.append(f"{name}: cli {cli_default!r}, request {request_default!r}, api {api_default!r}")
    assert not missing, f"{use_case}: options without an API parameter or request field: {missing}"
    assert not different, f"{use_case}: defaults differ: {different}"
    options = {RENAMED.get(str(p.name), str(p.name)) for p in _options(module)}
    extra = set(parameters) - options - API_ONLY.get(use_case, set())
    assert not extra, f"{use_case}: API parameters that are no option of the command: {sorted(extra)}"
    assert not set(fields) - options - API_ONLY.get(use_case, set()), f"{use_case}: request fields of no option"


def test_the_check_sees_a_missing_option() -> None:
    def estimate(model: str, *, target: str = "host") -> None:
        return None

    names = {RENAMED.get(str(p.name), str(p.name)) for p in _options("layerscope.cli.estimate")}
    assert "timeline" in names and "timeline" not in inspect.signature(estimate).parameters


def _flat(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf of a JSON document by its path (``.layers[3].estimate.latency_us``)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{path}[{i}]").items()}
    return {path: value}


def _without_tool(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "tool"}


@pytest.fixture()
def model(write_model: ModelWriter) -> Path:
    return write_residual(write_model)


def test_estimate_gives_the_clis_run_with_dims_inputs_and_a_merge(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    assert main(["estimate", str(model), "-t", "rdk-s100", "--timeline", "--top", "0", "-o", str(out)]) == 0
    run = layerscope.estimate(model, target="rdk-s100", timeline=True)
    assert _without_tool(json.loads(out.read_text())) == _without_tool(dict(run.document))
    # into the same file again on another target: the CLI merges; the API merges the same and writes nothing
    before = out.read_text()
    merged = layerscope.estimate(model, target="rdk-x5", merge_into=out)
    assert out.read_text() == before
    assert main(["estimate", str(model), "-t", "rdk-x5", "--top", "0", "-o", str(out)]) == 0
    cli = json.loads(out.read_text())
    assert _without_tool(cli) == _without_tool(dict(merged.document))
    assert "timeline" not in cli and cli["target"]["name"] == "rdk-x5"  # a stale timeline is dropped


def test_profile_gives_the_clis_run_up_to_the_measured_numbers(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    argv = ["--runs", "3", "--warmup", "1", "--threads", "1", "--seed", "5"]
    assert main(["profile", str(model), *argv, "--top", "0", "-o", str(out)]) == 0
    run = layerscope.profile(model, runs=3, warmup=1, threads=1, seed=5)
    cli, flat = _flat(json.loads(out.read_text())), _flat(dict(run.document))
    assert set(cli) == set(flat)
    differ = [path for path in cli if cli[path] != flat[path]]
    # only what was timed differs: numbers (and when), and the runtime's own kernel list (ONNX Runtime numbers some
    # kernels as it creates them); never an estimate, a layer, a name or a setting
    runtime_kernels = (".kernels[", ".measurement.median_run[")
    assert not [(p, cli[p], flat[p]) for p in differ
                if not _timed(cli[p], flat[p]) and not p.endswith("created_utc") and not p.startswith(runtime_kernels)]
    assert not [p for p in differ if ".estimate." in p or p.startswith((".model", ".target"))]
    assert flat[".measurement.threads"] == 1 and any(p.startswith(".layers[0].measured.") for p in flat)


def _timed(*values: Any) -> bool:
    """A timed number: a float or integer, or none where one run had too few samples for it."""
    return all(value is None or isinstance(value, int | float) for value in values)


FAKE_DEVICE = "import os, sys; print(f'latency: {os.path.getsize(sys.argv[1]) / 1000:.3f} ms')"


def test_bisect_gives_the_clis_run(model: Path, tmp_path: Path) -> None:
    script = tmp_path / "device.py"
    script.write_text(FAKE_DEVICE)  # a prefix's "latency" is its file's size: the same on every call
    run_cmd = f"{sys.executable} {script} {{model}}"
    out = tmp_path / "cli.json"
    assert main(["bisect", str(model), "-t", "rdk-s100", "--run-cmd", run_cmd, "--latency-regex",
                 r"latency: ([0-9.]+) ms", "--repeats", "2", "--pilot", "1", "--segments", "3", "--no-cache",
                 "-o", str(out)]) == 0
    run = layerscope.bisect(model, target="rdk-s100", run_cmd=run_cmd, latency_regex=r"latency: ([0-9.]+) ms",
                            repeats=2, pilot=1, segments=3, no_cache=True)
    cli = _flat(json.loads(out.read_text()))
    flat = _flat(dict(run.document))
    assert set(cli) == set(flat)
    differ = [path for path in cli if cli[path] != flat[path] and not path.endswith("created_utc")]
    assert not differ, differ
    assert run.document["bisect"]["segments"] and any(p.startswith(".layers[0].measured.") for p in flat)


def test_api_options_are_checked_as_the_clis() -> None:
    from layerscope.workflows.common import UsageConflict

    with pytest.raises(UsageConflict, match="--latency-regex only apply with --run-cmd"):
        layerscope.bisect(latency_regex="x")
    with pytest.raises(UsageConflict, match="--validate compares"):
        layerscope.bisect(run_cmd="true {model}", latency_regex="([0-9]+)", validate=True)


HORIZON = Path(__file__).parent / "fixtures" / "importers" / "horizon"
LINT = Path(__file__).parent / "fixtures" / "lint"


def test_import_gives_the_clis_run(tmp_path: Path) -> None:
    files = [HORIZON / "s100_profiler.log", HORIZON / "s100_model.json"]
    out = tmp_path / "cli.json"
    assert main(["import", *map(str, files), "--top", "0", "-o", str(out)]) == 0
    run = layerscope.import_run(files)
    assert _without_tool(json.loads(out.read_text())) == _without_tool(dict(run.document))
    assert run.document["layers"] and run.document["measurement"]
    # one format for every file: the static report is no profiler log
    with pytest.raises(LayerscopeError):
        layerscope.import_run(files, format="horizon-profiler")


@pytest.fixture()
def measured(model: Path, tmp_path: Path) -> Path:
    out = tmp_path / "measured.json"
    assert main(["profile", str(model), "--runs", "3", "--warmup", "1", "--threads", "1", "--top", "0",
                 "-o", str(out)]) == 0
    return out


def test_reconcile_advise_and_calibrate_give_the_clis_results(measured: Path, tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    saved.write_bytes(measured.read_bytes())
    assert main(["reconcile", str(saved), "--save"]) == 0
    [reconciled] = layerscope.reconcile(measured)  # the file is not written
    assert _without_tool(json.loads(saved.read_text())) == _without_tool(dict(reconciled.document))
    assert "reconcile" in reconciled.document and "reconcile" not in json.loads(measured.read_text())

    out = tmp_path / "advised.json"
    assert main(["advise", str(measured), "--no-measure", "--top", "3", "-o", str(out)]) == 0
    advised = layerscope.advise(measured, measure=False, top=3)
    assert _without_tool(json.loads(out.read_text())) == _without_tool(dict(advised.document))
    assert advised.document["findings"]["diagnosis"]

    cli_toml, api_toml = tmp_path / "cli.toml", tmp_path / "api.toml"
    # a two-layer model's fit is overhead, outside physical bounds: refused alike, written alike with force
    assert main(["calibrate", str(measured), "-o", str(cli_toml), "--name", "fitted"]) == 2 and not cli_toml.exists()
    with pytest.raises(LayerscopeError, match="give --force to write it anyway"):
        layerscope.calibrate([measured], output=api_toml, name="fitted")
    assert main(["calibrate", str(measured), "-o", str(cli_toml), "--name", "fitted", "--force"]) == 0
    result = layerscope.calibrate([measured], output=api_toml, name="fitted", force=True)
    assert result.written == api_toml and result.calibration is not None
    assert api_toml.read_text() == cli_toml.read_text()


def test_calibrate_refuses_in_the_api_what_the_cli_refuses(measured: Path, tmp_path: Path) -> None:
    from layerscope.workflows.common import OptionError, UsageConflict

    with pytest.raises(UsageConflict, match="--backend and --run-cmd apply with --kernels only"):
        layerscope.calibrate([measured], output=tmp_path / "p.toml", backend="openvino")
    with pytest.raises(LayerscopeError, match=r"must be a \.toml file"):
        layerscope.calibrate([measured], output=tmp_path / "p.json")
    with pytest.raises(OptionError, match="--dim"):  # calibrate loads models with --shape alone: never ignored
        layerscope.calibrate([measured], output=tmp_path / "p.toml", dims={"batch": 1})
    assert main(["calibrate", str(measured), "-o", str(tmp_path / "p.toml"), "--dim", "batch=1"]) == 2


def test_lint_gives_the_clis_findings(capsys: pytest.CaptureFixture[str]) -> None:
    from layerscope.analysis.findings import findings_section

    config = LINT / "bad_s100.yaml"
    assert main(["lint", str(config), "--format", "json"]) == 1  # it has errors
    cli = json.loads(capsys.readouterr().out)
    result = layerscope.lint(config)
    assert result.failed and cli == findings_section(result.findings, source=f"layerscope lint {config}")
    assert not layerscope.lint(LINT / "good_s100.yaml").failed


def test_sweep_plans_the_clis_cells(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    assert main(["sweep", str(model), "-t", "rdk-s100,rdk-x5", "--mode", "estimate", "-o", str(out), "--no-ray",
                 "--dry-run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    result = layerscope.run_sweep([model], out_dir=out, targets=["rdk-s100", "rdk-x5"], modes=["estimate"],
                                  no_ray=True, dry_run=True)
    assert printed == [f"to do  {cell.key}" for cell in result.cells] + ["2 cells"]
    assert not out.exists()  # a dry run writes nothing
    from layerscope.workflows.common import UsageConflict

    with pytest.raises(UsageConflict, match="--ray and --no-ray"):
        layerscope.run_sweep([model], out_dir=out, ray_address="auto", no_ray=True)


def test_pipeline_takes_the_clis_script_or_a_callable(model: Path, tmp_path: Path) -> None:
    script = tmp_path / "steps.py"
    script.write_text("def once(model):\n    model.run(None, model.example_inputs)\n")
    out = tmp_path / "cli.json"
    assert main(["pipeline", f"{script}:once", str(model), "--runs", "2", "--warmup", "0", "--no-layers",
                 "--top", "0", "-o", str(out)]) == 0
    run = layerscope.profile_pipeline(f"{script}:once", model, runs=2, warmup=0, layers=False)
    cli, flat = _flat(json.loads(out.read_text())), _flat(dict(run.document))
    assert set(cli) == set(flat)
    assert not [p for p in cli if cli[p] != flat[p] and not _timed(cli[p], flat[p]) and not p.endswith("created_utc")]
    assert run.document["pipeline"]["function"] == "steps.py:once"

    def once(session: Any) -> None:
        session.run(None, session.example_inputs)

    called = layerscope.profile_pipeline(once, model, runs=2, warmup=0, layers=False)
    assert called.document["pipeline"]["runs"] == 2 and called.document["pipeline"]["function"].endswith(".once")
