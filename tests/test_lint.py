"""``layerscope lint``: Horizon hb_compile YAML checks (each triggered and not), typos with did-you-mean, bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from layerscope.analysis.findings import Severity
from layerscope.analysis.lint import lint_config, lint_file, read_config
from layerscope.cli.main import main
from layerscope.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures" / "lint"


def rules(config: dict[str, Any]) -> list[str]:
    return [f.rule_id for f in lint_config(config)]


def test_the_bad_config_has_every_problem_and_the_good_one_none() -> None:
    bad = lint_file(FIXTURES / "bad_s100.yaml")
    assert sorted({f.rule_id for f in bad}) == sorted({
        "lint.core-num", "lint.debug-mode", "lint.optimize-level", "lint.remove-node-type", "lint.compile-mode",
        "lint.max-time-per-fc", "lint.unknown-key"})
    assert [f.severity for f in bad][:4] == [Severity.ERROR] * 4  # errors first
    assert lint_file(FIXTURES / "good_s100.yaml") == []


@pytest.mark.parametrize("config, rule", [
    ({"model_parameters": {"debug_mode": "dump_all_layers_output"}}, "lint.debug-mode"),
    ({"model_parameters": {"debug_mode": ["dump_all_layers_output", "dump_all_layers_output_txt"]}},
     "lint.debug-mode"),
    ({"compiler_parameters": {"compile_mode": "bandwidth"}}, "lint.compile-mode"),
    ({"compiler_parameters": {"optimize_level": "O1"}}, "lint.optimize-level"),
    ({"model_parameters": {"march": "nash-m"}, "compiler_parameters": {"optimize_level": "O3"}},
     "lint.optimize-level"),
    ({"compiler_parameters": {"max_time_per_fc": 500}}, "lint.max-time-per-fc"),
    ({"model_parameters": {"march": "nash-e"}, "compiler_parameters": {"core_num": 2}}, "lint.core-num"),
    ({"model_parameters": {"remove_node_type": "Quantize;Sigmoid"}}, "lint.remove-node-type"),
])
def test_each_check_triggers(config: dict[str, Any], rule: str) -> None:
    assert rule in rules(config)


@pytest.mark.parametrize("config", [
    {"model_parameters": {"debug_mode": "dump_calibration_data"}},
    {"compiler_parameters": {"compile_mode": "latency"}},
    {"model_parameters": {"march": "nash-e"}, "compiler_parameters": {"optimize_level": "O2"}},
    {"model_parameters": {"march": "bayes-e"}, "compiler_parameters": {"optimize_level": "O3"}},
    {"compiler_parameters": {"max_time_per_fc": 0}},
    {"model_parameters": {"march": "bernoulli2"}, "compiler_parameters": {"core_num": 2}},
    {"model_parameters": {"remove_node_type": "Quantize;Transpose;Dequantize;Cast;Reshape;Softmax"}},
])
def test_each_check_stays_quiet_on_good_settings(config: dict[str, Any]) -> None:
    assert rules(config) == []


def test_unknown_keys_get_a_did_you_mean() -> None:
    found = lint_config({"compiler_parameters": {"optimise_level": "O2"}, "input_paramters": {}})
    mitigations = {f.evidence["key"]: f.mitigation for f in found}
    assert mitigations["compiler_parameters.optimise_level"] == "did you mean 'optimize_level'?"
    assert mitigations["input_paramters"] == "did you mean 'input_parameters'?"


def test_bad_files_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match="not valid YAML at line 2"):
        read_config(FIXTURES / "broken.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(InputError, match="mapping of sections"):
        read_config(tmp_path / "list.yaml")
    assert main(["lint", str(tmp_path / "missing.yaml")]) == 2
    assert "no such config file" in capsys.readouterr().err


def test_yaml_is_read_safely(tmp_path: Path) -> None:
    (tmp_path / "evil.yaml").write_text("model_parameters: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(InputError, match="not valid YAML"):
        read_config(tmp_path / "evil.yaml")


def test_cli_prints_findings_and_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["lint", str(FIXTURES / "bad_s100.yaml")]) == 1  # four errors: it fails a CI gate
    out = capsys.readouterr().out
    assert "did you mean 'scale_value'?" in out and "HBDK4 (nash) accepts O0-O2 only" in out
    assert main(["lint", str(FIXTURES / "bad_s100.yaml"), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["by_severity"]["error"] == 4
    assert {"rule", "severity", "hazard", "mitigation", "help", "evidence"} <= set(data["items"][0])
