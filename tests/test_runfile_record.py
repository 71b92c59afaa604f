"""The run file's record classes (runfile/record.py): made without pydantic, validated, dumped and described by it on
first use, and behaving as the pydantic models they mirror; the trusted sections' check (models.check_trusted)."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic_core import ValidationError

from conftest import zoo
from layerscope.runfile import _pydantic
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
from layerscope.runfile.record import REQUIRED, Field, Record, model_validator

ROOT = Path(__file__).resolve().parent.parent


class _Inner(Section):
    size: Annotated[int, Field(ge=0, le=10)]
    tags: list[str] = []


class _Cat(Section):
    kind: Literal["cat"]
    lives: int = 9


class _Dog(Section):
    kind: Literal["dog"]
    good: bool = True


class _Outer(Section):
    """An outer record: nested records, a tagged union, an alias, a forward reference and a check."""

    name: str
    inner: _Inner | None = None
    inners: list[_Inner] = []
    pet: Annotated[_Cat | _Dog, Field(discriminator="kind")] | None = None
    from_: str | None = Field(default=None, alias="from")
    later: _Later | None = None  # defined below: a forward reference

    @model_validator(mode="after")
    def _name_not_empty(self) -> _Outer:
        if not self.name:
            raise ValueError("name: must not be empty")
        return self


class _Later(Section):
    value: float


def test_fields_are_read_from_annotations_in_order_with_defaults_aliases_and_forward_references() -> None:
    fields = _Outer.model_fields
    assert list(fields) == ["name", "inner", "inners", "pet", "from_", "later"]
    assert fields["name"].is_required() and fields["name"].default is REQUIRED
    assert fields["inners"].default == [] and fields["from_"].alias == "from"
    assert fields["later"].annotation == (_Later | None)  # the quoted name, resolved in this module
    assert not hasattr(_Outer, "inners")  # a field is read from a record, never from its class


def test_validation_makes_records_of_the_class_itself_at_every_depth() -> None:
    outer = _Outer.model_validate({"name": "o", "inner": {"size": 3}, "inners": [{"size": 1, "tags": ["a"]}],
                                   "pet": {"kind": "dog"}, "from": "x", "later": {"value": 2.5}, "odd": [1]},
                                  by_alias=True)
    assert type(outer) is _Outer and type(outer.inner) is _Inner and type(outer.inners[0]) is _Inner
    assert type(outer.pet) is _Dog and outer.pet.good is True and type(outer.later) is _Later
    assert outer.from_ == "x" and outer.model_extra == {"odd": [1]} and outer.odd == [1]
    assert outer.model_fields_set == {"name", "inner", "inners", "pet", "from_", "later", "odd"}  # as pydantic's
    # pydantic's checks and strictness: a bound, a string for a number, the model's own check
    for bad, where in (({"name": "o", "inner": {"size": 11}}, "inner.size"),
                       ({"name": "o", "later": {"value": "2.5"}}, "later.value"),
                       ({"name": ""}, "name: must not be empty")):
        with pytest.raises(ValidationError, match="_Outer") as error:
            _Outer.model_validate(bad)
        assert where.split(":")[0].split(".")[-1] in str(error.value)
    with pytest.raises(ValidationError):
        _Outer(name="o", pet={"kind": "bird"})  # type: ignore[arg-type]


def test_records_dump_copy_compare_and_pickle_as_pydantic_models_do() -> None:
    outer = _Outer.model_validate({"name": "o", "inners": [{"size": 1}], "from": "x", "odd": 1}, by_alias=True)
    assert outer.model_dump(mode="json", by_alias=True, exclude_unset=True) == {
        "name": "o", "inners": [{"size": 1}], "from": "x", "odd": 1}
    assert json.loads(outer.model_dump_json(by_alias=True, exclude_unset=True)) == {
        "name": "o", "inners": [{"size": 1}], "from": "x", "odd": 1}
    assert repr(_Inner(size=2)) == "_Inner(size=2, tags=[])"
    copied = outer.model_copy(update={"name": "p", "new_key": 5})
    assert copied.name == "p" and copied.new_key == 5 and outer.name == "o" and "new_key" not in outer.model_extra
    assert copied.model_fields_set == outer.model_fields_set | {"name", "new_key"}
    assert outer.model_fields_set == {"name", "inners", "from_", "odd"}  # the original's set is not the copy's
    deep = outer.model_copy(deep=True)
    assert deep == outer and deep.inners is not outer.inners and deep.inners[0] == outer.inners[0]
    for again in (pickle.loads(pickle.dumps(outer)), copy.deepcopy(outer), copy.copy(outer)):
        assert again == outer and type(again) is _Outer and again.model_fields_set == outer.model_fields_set
    assert outer != copied and _Inner(size=1) == _Inner(size=1) and _Inner(size=1) != _Later(value=1.0)
    assert hash(_Later(value=1.0)) == hash(_Later(value=1.0))
    with pytest.raises(AttributeError, match="frozen"):
        outer.name = "q"  # type: ignore[misc]
    built = _Outer.model_construct(name="c", **{"from": "y", "extra_key": 1})
    assert built.from_ == "y" and built.inners == [] and built.model_extra == {"extra_key": 1}
    assert built.model_fields_set == {"name", "from_"}


def test_a_record_class_schema_is_its_pydantic_mirror_and_the_shipped_schema_is_unchanged() -> None:
    mirror = _pydantic.mirror(_Outer)
    assert mirror.__name__ == "_Outer" and mirror.__doc__ == _Outer.__doc__
    schema = _Outer.model_json_schema(by_alias=True)
    assert schema == mirror.model_json_schema(by_alias=True)
    assert set(schema["properties"]) == {"name", "inner", "inners", "pet", "from", "later"}
    assert schema["$defs"]["_Inner"]["properties"]["size"] == {"maximum": 10, "minimum": 0, "title": "Size",
                                                                "type": "integer"}
    # record classes inside other pydantic types (a TypeAdapter of a list of layers) validate into records
    from pydantic import TypeAdapter

    (layer,) = TypeAdapter(list[Layer]).validate_python([{"id": "a", "estimate": {"latency_us": 1.5}}])
    assert type(layer) is Layer and type(layer.estimate) is LayerEstimate


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


def test_the_trusted_check_runs_in_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.environ.get("LAYERSCOPE_CHECK_TRUSTED") == "1"
    with pytest.raises(TypeError, match=r"trusted LayerEstimate\.latency_us"):
        LayerEstimate.trusted({"latency_us": 3})


def _pydantic_modules_of_estimate(model: Path, out: Path) -> list[str]:
    """The pydantic modules a child process has imported after ``estimate MODEL -o OUT`` (which must succeed)."""
    script = (
        "import sys\n"
        "from layerscope.cli.main import main\n"
        f"code = main(['estimate', {str(model)!r}, '-t', 'rdk-s100', '-o', {str(out)!r}])\n"
        "assert code == 0, code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')))\n")
    env = {key: value for key, value in os.environ.items() if key != "LAYERSCOPE_CHECK_TRUSTED"}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))
    return modules


def test_an_estimate_imports_no_pydantic(tmp_path: Path) -> None:
    """What makes a small model's estimate as fast as onnx-tool's (benchmarks/run.py): its run is made and written
    without pydantic, which only validation, dumps and schemas import."""
    assert _pydantic_modules_of_estimate(zoo("squeezenet"), tmp_path / "r.json") == []
    run = as_run(json.loads((tmp_path / "r.json").read_text()))  # and what it wrote validates
    assert run.summary.macs is not None and run.summary.macs > 0 and isinstance(run.target_or_empty.clock_hz, float)


def test_an_estimate_with_an_op_without_cost_imports_no_pydantic(tmp_path: Path) -> None:
    """The run's list of unknown ops is written as each section's values too, not by pydantic's dump."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(  # a string op: no cost function (reinterpreting text has no MACs to count)
        [helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER")], "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [4])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "normalizer.onnx"
    path.write_bytes(model.SerializeToString())
    assert _pydantic_modules_of_estimate(path, tmp_path / "r.json") == []
    run = as_run(json.loads((tmp_path / "r.json").read_text()))
    assert [(u.domain, u.op_type, u.count, u.layers) for u in run.unknown_ops] == [
        ("", "StringNormalizer", 1, ["StringNormalizer(y)"])]


def test_record_is_no_pydantic_model() -> None:
    from pydantic import BaseModel

    assert not issubclass(Record, BaseModel) and not issubclass(Layer, BaseModel)
    assert issubclass(_pydantic.mirror(Layer), BaseModel)
