"""The run file's sections are plain pydantic models (runfile/models.py): one configuration (frozen, strict, finite
numbers, unknown keys kept), validated at every depth, dumped, copied and compared as pydantic does; the trusted
sections' check (models.check_trusted); an estimate writes its run without building a validator or serializer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError, model_validator

from conftest import zoo
from layerscope.runfile.io import as_run, dump_text
from layerscope.runfile.models import (
    MAX_US,
    Layer,
    LayerEstimate,
    LayerMeasured,
    RunFile,
    Section,
    Target,
    check_trusted,
)
from layerscope.runfile.schema import schema_text, shipped_text

ROOT = Path(__file__).resolve().parent.parent


class _Inner(Section):
    size: Annotated[int, Field(ge=0, le=10)]
    tags: list[str] = []  # noqa: RUF012 (pydantic copies a default list into each section)


class _Cat(Section):
    kind: Literal["cat"]
    lives: int = 9


class _Dog(Section):
    kind: Literal["dog"]
    good: bool = True


class _Outer(Section):
    """An outer section: nested sections, a tagged union, an alias and a check."""

    name: str
    inner: _Inner | None = None
    inners: list[_Inner] = []  # noqa: RUF012 (pydantic copies it)
    pet: Annotated[_Cat | _Dog, Field(discriminator="kind")] | None = None
    from_: str | None = Field(default=None, alias="from")

    @model_validator(mode="after")
    def _name_not_empty(self) -> _Outer:
        if not self.name:
            raise ValueError("name: must not be empty")
        return self


def test_sections_are_pydantic_models_of_one_configuration() -> None:
    assert issubclass(Layer, BaseModel) and issubclass(RunFile, Section)
    assert dict(Section.model_config) == {"frozen": True, "strict": True, "extra": "allow", "allow_inf_nan": False,
                                          "defer_build": True}
    assert schema_text() == shipped_text()


def test_validation_is_strict_finite_and_keeps_unknown_keys_at_every_depth() -> None:
    outer = _Outer.model_validate({"name": "o", "inner": {"size": 3}, "inners": [{"size": 1, "tags": ["a"]}],
                                   "pet": {"kind": "dog"}, "from": "x", "odd": [1]}, by_alias=True)
    assert type(outer.inner) is _Inner and type(outer.inners[0]) is _Inner and type(outer.pet) is _Dog
    assert outer.from_ == "x" and outer.model_extra == {"odd": [1]}
    for bad, where in (({"name": "o", "inner": {"size": 11}}, "inner.size"),
                       ({"name": "o", "inner": {"size": "3"}}, "inner.size"),  # strict: no text for a number
                       ({"name": ""}, "name: must not be empty")):
        with pytest.raises(ValidationError, match="_Outer") as error:
            _Outer.model_validate(bad)
        assert where.split(":")[0].split(".")[-1] in str(error.value)
    with pytest.raises(ValidationError, match="finite"):
        LayerEstimate.model_validate({"latency_us": float("nan")})
    with pytest.raises(ValidationError):
        _Outer(name="o", pet={"kind": "bird"})  # type: ignore[arg-type]


def test_sections_are_frozen_and_copied_with_their_unknown_keys() -> None:
    outer = _Outer.model_validate({"name": "o", "inners": [{"size": 1}], "from": "x", "odd": 1}, by_alias=True)
    assert outer.model_dump(mode="json", by_alias=True, exclude_unset=True) == {
        "name": "o", "inners": [{"size": 1}], "from": "x", "odd": 1}
    with pytest.raises(ValidationError, match="frozen"):
        outer.name = "q"  # type: ignore[misc]
    copied = outer.model_copy(update={"name": "p", "new_key": 5})
    assert copied.name == "p" and copied.model_extra == {"odd": 1, "new_key": 5} and outer.name == "o"
    assert outer.model_fields_set == {"name", "inners", "from_", "odd"}


def test_a_run_file_round_trips_through_validation_unchanged() -> None:
    document = {"schema_version": 2, "model": {"name": "m"}, "summary": {"macs": 3},
                "layers": [{"id": "a", "measured": {"median_us": 2.0, "kernel": "k"}}],
                "import": {"tool": "hb_perf"}, "measurement": {"kind": "bench", "source": "bench"}}
    run = as_run(document)
    assert type(run) is RunFile and run.import_ is not None and run.measurement is not None
    assert json.loads(dump_text(run.to_json())) == document
    with pytest.raises(ValidationError, match="LayerMeasured"):
        LayerMeasured(median_us=-1.0)
    assert LayerMeasured(median_us=-1.0, method="differential").median_us == -1.0


def test_a_trusted_section_is_what_model_construct_makes() -> None:
    trusted = Layer.trusted({"id": "a", "macs": 3, "estimate": LayerEstimate.trusted({"latency_us": 1.5})})
    built = Layer.model_construct(id="a", macs=3, estimate=LayerEstimate.model_construct(latency_us=1.5))
    assert trusted == built and trusted.model_fields_set == built.model_fields_set == {"id", "macs", "estimate"}
    assert trusted.inputs == [] and trusted.inputs is not Layer.trusted({"id": "b"}).inputs  # a fresh default
    assert trusted.model_dump() == built.model_dump()


@pytest.mark.parametrize("fields", [
    {"name": "t", "clock_hz": 1_000_000_000},  # an int where validation gives a float
    {"name": 3},  # validation refuses it
    {"name": "t", "clock_hz": MAX_US * 1e6},  # out of bounds
])
def test_the_trusted_check_finds_a_section_that_validation_would_not_give(fields: dict[str, object]) -> None:
    section = Target.model_construct(**fields)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="trusted Target"):
        check_trusted([section])
    check_trusted([Target.model_construct(name="t", clock_hz=1e9)])


def test_the_trusted_check_runs_in_the_tests() -> None:
    assert os.environ.get("LAYERSCOPE_CHECK_TRUSTED") == "1"
    with pytest.raises(TypeError, match=r"trusted LayerEstimate\.latency_us"):
        LayerEstimate.trusted({"latency_us": 3})


def test_an_estimate_writes_its_run_without_building_a_validator_or_serializer(tmp_path: Path) -> None:
    """``defer_build``: a section class is compiled on its first validation or dump; an estimate makes its run of
    trusted sections and writes their values, so it compiles none (each costs start-up time)."""
    out = tmp_path / "r.json"
    script = (
        "from layerscope.cli.main import main\n"
        "from layerscope.runfile import models\n"
        f"code = main(['estimate', {str(zoo('squeezenet'))!r}, '-t', 'rdk-s100', '-o', {str(out)!r}])\n"
        "assert code == 0, code\n"
        "print(sorted(name for name, cls in vars(models).items() if isinstance(cls, type)\n"
        "             and issubclass(cls, models.Section) and cls.__pydantic_complete__))\n")
    env = {key: value for key, value in os.environ.items() if key != "LAYERSCOPE_CHECK_TRUSTED"}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    run = as_run(json.loads(out.read_text()))  # and what it wrote validates
    assert run.summary.macs is not None and run.summary.macs > 0 and isinstance(run.target_or_empty.clock_hz, float)
