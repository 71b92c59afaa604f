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
from layerscope.workflows.bench import BenchRequest
from layerscope.workflows.bisect import BisectRequest
from layerscope.workflows.common import RENAMED
from layerscope.workflows.estimate import EstimateRequest
from layerscope.workflows.profile import ProfileRequest
from test_bisect import write_residual

#: Options that only say where the run goes or how much of it the terminal shows, with what the API offers instead.
OUTPUT_ONLY: dict[str, str] = {
    "json_out": "the function returns the run; Run.save writes it (estimate: a file that exists is merge_into)",
    "html_out": "Run.report(path) renders the HTML report",
    "top": "rows of the terminal table; Run.report(fmt='terminal') prints all",
    "output_format": "--format trace is Run.report(fmt='trace')",
    "level": "detail of --format trace on stdout",
}
#: Options whose command-line form is text the command parses, and the request holds parsed: their defaults are
#: compared as parsed (nothing given: empty).
PARSED = {"shapes", "dims"}

#: Use case -> (its command's module, its API function, its request class). The use cases not moved yet keep
#: their code in ``layerscope.cli`` and are not listed.
MOVED: dict[str, tuple[str, Callable[..., Any], type]] = {
    "estimate": ("layerscope.cli.estimate", api.estimate, EstimateRequest),
    "profile": ("layerscope.cli.profile", api.profile, ProfileRequest),
    "bisect": ("layerscope.cli.bisect", api.bisect, BisectRequest),
    "bench": ("layerscope.cli.bench", api.bench, BenchRequest),
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


@pytest.mark.parametrize("use_case", sorted(MOVED))
def test_every_option_is_an_api_parameter_and_a_request_field_with_the_same_default(use_case: str) -> None:
    module, function, request_class = MOVED[use_case]
    parameters = inspect.signature(function).parameters
    fields = {f.name: f for f in dataclasses.fields(request_class)}
    missing, different = [], []
    for param in _options(module):
        assert param.name is not None
        if param.name in OUTPUT_ONLY:
            continue
        name = RENAMED.get(param.name, param.name)
        if name not in parameters or name not in fields:
            missing.append(f"{param.name} -> {name}")
            continue
        field = fields[name]
        request_default = _request_default(field)
        cli_default = _default(module, param)
        if name in PARSED:
            cli_default = dict(cli_default or ())
        elif isinstance(cli_default, tuple | list):
            cli_default = tuple(cli_default)
        api_default = parameters[name].default
        if name == "model":  # a positional argument: required by estimate, the bundled sample elsewhere
            required = api_default is inspect.Parameter.empty
            assert required == param.required == (request_default is dataclasses.MISSING)
            continue
        if name in PARSED:
            api_default = dict(api_default or {})
        elif isinstance(api_default, tuple | list):
            api_default = tuple(api_default)
        if not (cli_default == request_default == api_default):
            different.append(f"{name}: cli {cli_default!r}, request {request_default!r}, api {api_default!r}")
    assert not missing, f"{use_case}: options without an API parameter or request field: {missing}"
    assert not different, f"{use_case}: defaults differ: {different}"
    extra = set(parameters) - {RENAMED.get(str(p.name), str(p.name)) for p in _options(module)} - {"merge_into"}
    assert not extra, f"{use_case}: API parameters that are no option of the command: {sorted(extra)}"


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
    assert main(["estimate", str(model), "-t", "rdk-s100", "--timeline", "--top", "0", "--json", str(out)]) == 0
    run = layerscope.estimate(model, target="rdk-s100", timeline=True)
    assert _without_tool(json.loads(out.read_text())) == _without_tool(dict(run.document))
    # into the same file again on another target: the CLI merges; the API merges the same and writes nothing
    before = out.read_text()
    merged = layerscope.estimate(model, target="rdk-x5", merge_into=out)
    assert out.read_text() == before
    assert main(["estimate", str(model), "-t", "rdk-x5", "--top", "0", "--json", str(out)]) == 0
    cli = json.loads(out.read_text())
    assert _without_tool(cli) == _without_tool(dict(merged.document))
    assert "timeline" not in cli and cli["target"]["name"] == "rdk-x5"  # a stale timeline is dropped


def test_profile_gives_the_clis_run_up_to_the_measured_numbers(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    argv = ["--runs", "3", "--warmup", "1", "--threads", "1", "--seed", "5"]
    assert main(["profile", str(model), *argv, "--top", "0", "--json", str(out)]) == 0
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
                 "--json", str(out)]) == 0
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
