"""Hostile config files, through the CLI under the limits of tests/_limits.py: exit 2 with one line
naming the file and the field, within 10 CPU seconds and ~1.5 GB.

- ``lint``: deeply nested YAML (RecursionError, exit 1 before), YAML nested past the depth cap, and
  an alias bomb (30 levels of 3 aliases each: 3^29 strings once expanded, which the checks would walk);
- hardware-profile TOML with extreme finite values (5e-324 peak: NaN and exit 1 before).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import helper

from _limits import assert_one_line_error, run_limited
from conftest import F32, ModelWriter
from test_targets import VALID


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["xxxxxxxxxx", "xxxxxxxxxx"]']
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 30)]
    return "\n".join([*lines, "model_parameters:\n  remove_node_type: *a29\n"])


YAML = {
    "recursion": ("model_parameters: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    "depth-cap": ("model_parameters: " + "[" * 40 + "]" * 40 + "\n", "nested deeper than 32 levels"),
    "alias-bomb": (_alias_bomb(), "values once YAML aliases are expanded"),
}


@pytest.mark.parametrize("case", sorted(YAML))
def test_hostile_yaml_is_refused_by_lint(case: str, tmp_path: Path) -> None:
    text, words = YAML[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    assert_one_line_error(run_limited(["lint", str(path)]), str(path), words)


@pytest.mark.parametrize(("old", "new", "field"), [
    ("int8 = 1.0e12", "int8 = 5e-324", "units[1].peak_ops_per_s.int8"),
    ("ddr_bandwidth_bytes_per_s = 10.0e9", "ddr_bandwidth_bytes_per_s = 1.7976931348623157e308",
     "ddr_bandwidth_bytes_per_s"),
    ("efficiency = 0.8", "efficiency = 5e-324", "units[0].efficiency"),
])
def test_extreme_profile_values_are_refused_naming_the_field(old: str, new: str, field: str, tmp_path: Path,
                                                             write_model: ModelWriter) -> None:
    assert old in VALID
    profile = tmp_path / "extreme.toml"
    profile.write_text(VALID.replace(old, new, 1))
    model = write_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", F32, [1, 8])], [("y", F32, [1, 8])])
    line = assert_one_line_error(run_limited(["estimate", str(model), "--target", str(profile)]), str(profile),
                                 field)
    assert "bounds" in line or "[1e-06, 1]" in line
