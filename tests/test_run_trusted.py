"""The estimate run is built without per-layer validation (``Section.trusted``) and written a layer at a time
(``run_text``): both must give exactly what validation and the whole-document writer give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import zoo
from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.run import estimate_run
from layerscope.runfile.io import dump_text, run_text
from layerscope.runfile.models import Layer, LayerEstimate, RunFile, Section
from layerscope.targets import load_profile


def _state(section: Section) -> dict[str, Any]:
    """A section's values with their exact types (``0`` and ``0.0`` differ), nested sections too, and the
    fields it holds."""
    def typed(value: Any) -> Any:
        if isinstance(value, Section):
            return _state(value)
        if isinstance(value, list):
            return [typed(v) for v in value]
        return (type(value).__name__, value)

    return {"set": sorted(section.model_fields_set), "extra": section.model_extra,
            **{name: typed(value) for name, value in section.__dict__.items()}}


def _assert_as_validated(run: RunFile) -> None:
    text = run_text(run)
    assert text == dump_text(run.to_json())  # a layer at a time: the bytes of the whole-document writer
    validated = RunFile.from_json(json.loads(text))
    assert run_text(validated) == text
    assert len(validated.layers) == len(run.layers)
    for built, checked in zip(run.layers, validated.layers, strict=True):
        assert _state(built) == _state(checked), built.id
    assert run == validated


@pytest.mark.parametrize(("model", "target"), [("squeezenet", "rdk-s100"), ("resnet50", "rdk-x5"),
                                               ("shufflenet", "host"), ("inception_v2", "rdk-x5")])
def test_the_estimate_run_equals_the_validated_one(model: str, target: str) -> None:
    graph = load_model(zoo(model))
    profile = load_profile(target)
    run = estimate_run(graph, estimate_graph(graph, profile), profile)
    if target == "rdk-x5":  # a layer falls back to the CPU there: its estimate has a reason
        assert any(layer.est.fallback_reason for layer in run.layers)
    _assert_as_validated(run)


def test_a_loop_bodys_layers_equal_the_validated_ones(tmp_path: Path) -> None:
    """Control flow: ``parent``, ``executions`` and ``observed`` are set, the body's estimate is repeated."""
    f32 = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="body_add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", f32, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", f32, [2, 3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trip", "", "x"], ["z"], body=body, name="Loop_0"),
         helper.make_node("Relu", ["z"], ["out"], name="relu")], "g",
        [helper.make_tensor_value_info("x", f32, [2, 3])], [helper.make_tensor_value_info("out", f32, None)],
        initializer=[numpy_helper.from_array(np.array(3, np.int64), "trip")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "loop.onnx"
    onnx.save_model(model, str(path))
    loaded = load_model(path)
    profile = load_profile("rdk-s100")
    run = estimate_run(loaded, estimate_graph(loaded, profile), profile)
    body_add = run.layer_by_id["Loop_0/body/body_add"]
    assert body_add.parent == "Loop_0" and body_add.executions == 3
    assert run.layer_by_id["Loop_0"].observed == {"source": "executed", "trip_count": 3}
    _assert_as_validated(run)


@pytest.mark.parametrize(("model", "target"), [("squeezenet", "rdk-s100"), ("inception_v2", "rdk-x5")])
def test_a_timeline_run_equals_the_validated_one(model: str, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline's spans and busy intervals are trusted rows, written row by row inside their section: the
    values validation gives (exact types), and the bytes of the whole-document writer."""
    from layerscope.estimator.timeline import simulate_timeline
    from layerscope.run import add_timeline, timeline_section

    graph = load_model(zoo(model))
    profile = load_profile(target)
    estimate = estimate_graph(graph, profile)
    timeline = simulate_timeline(graph, profile, None, costs=estimate.costs, estimate=estimate)
    run = add_timeline(estimate_run(graph, estimate, profile), timeline, profile.ddr_nominal_bytes_per_s)
    section = run.timeline
    assert section is not None and len(section.layers) == len(graph.layers)
    assert any(unit.busy for unit in section.units) and any(s.load_start_us is None for s in section.layers)
    _assert_as_validated(run)
    validated = RunFile.from_json(json.loads(run_text(run))).timeline
    assert validated is not None
    for built, checked in zip([*section.layers, *(b for u in section.units for b in u.busy)],
                              [*validated.layers, *(b for u in validated.units for b in u.busy)], strict=True):
        assert _state(built) == _state(checked)
    assert timeline_section(timeline, profile.ddr_nominal_bytes_per_s) == section.model_dump(
        mode="json", by_alias=True, exclude_unset=True)
    expected = dump_text(run.to_json())

    def refused(self: Section, **_: Any) -> dict[str, Any]:
        raise AssertionError(f"{type(self).__name__} dumped one by one")

    from layerscope.runfile.models import Timeline, TimelineBusy, TimelineLayer, TimelineUnit

    # the section is written from its values and its rows from their columns: none of them dumped by pydantic
    for cls in (Timeline, TimelineUnit, TimelineBusy, TimelineLayer):
        monkeypatch.setattr(cls, "model_dump", refused)
    assert run_text(run) == expected


@pytest.mark.usefixtures("unchecked_trusted")
def test_a_section_with_a_value_the_rows_do_not_take_is_written_as_its_own_dump() -> None:
    """A list of sections inside a section is written row by row; a section holding something else than JSON's own
    types (a tuple, here) is left to its own dump, with the same bytes."""
    from layerscope.runfile.models import Timeline, TimelineBusy, TimelineUnit

    busy = TimelineBusy.trusted_rows(("layer", "start_us", "end_us"), [("a", 0.0, 1.5), ("b", 1.5, 2.25)])
    plain = Timeline(units=[TimelineUnit(name="bpu", busy=busy)], method="timeline")
    odd = Timeline.model_construct(method="timeline", units=[TimelineUnit(name="bpu", busy=busy)],
                                   temporal=None, extra_tuple=(1, 2))
    for section in (plain, odd):
        run = RunFile.trusted({"schema_version": 2, "timeline": section})
        assert run_text(run) == dump_text(run.to_json())
    assert '"units": [{"busy":[{"end_us":1.5,"layer":"a","start_us":0.0},{"end_us":2.25,"layer":"b",' \
           '"start_us":1.5}],"name":"bpu"}]' in run_text(RunFile.trusted({"schema_version": 2, "timeline": plain}))


def test_a_trusted_section_takes_its_defaults_fresh() -> None:
    first = Layer.trusted({"id": "a"})
    second = Layer.trusted({"id": "b"})
    assert first.model_fields_set == {"id"} and first.inputs == [] and first.inputs is not second.inputs
    assert first == Layer(id="a")
    estimate = LayerEstimate.trusted({"latency_us": 1.5})
    assert estimate.model_dump(exclude_unset=True) == {"latency_us": 1.5} and estimate.unit is None


def test_trusted_sections_of_the_same_names_share_their_fields_set_and_a_copy_does_not_change_it() -> None:
    first = Layer.trusted({"id": "a", "op_type": "Conv"})
    second = Layer.trusted({"id": "b", "op_type": "Relu"})
    assert first.model_fields_set is second.model_fields_set  # one set for 100k layers, not one each
    assert Layer.trusted({"op_type": "Relu", "id": "c"}).model_fields_set == {"id", "op_type"}
    renamed = first.model_copy(update={"name": "conv"})
    assert renamed.model_fields_set == {"id", "op_type", "name"}
    assert first.model_fields_set == second.model_fields_set == {"id", "op_type"}  # the shared set is unchanged
    assert first.model_dump(exclude_unset=True) == {"id": "a", "op_type": "Conv"}
    assert renamed.model_dump(exclude_unset=True) == {"id": "a", "op_type": "Conv", "name": "conv"}


def test_a_runs_sections_are_written_as_the_runs_own_dump_gives_them() -> None:
    """run_text dumps each section by its own class when it can (only the serializers of the sections a run holds
    are built); an alias (``import``), unknown keys, a measurement (a union's member) and a timeline must come
    out as the run's own dump gives them."""
    from layerscope.runfile.io import _run_parts, _sections

    graph = load_model(zoo("squeezenet"))
    profile = load_profile("rdk-s100")
    estimated = estimate_run(graph, estimate_graph(graph, profile), profile)
    measured = RunFile.from_json({
        "schema_version": 2, "model": {"name": "m", "extra_key": [1, 2]}, "summary": {"layer_count": 1},
        "layers": [{"id": "l0", "measured": {"median_us": 5.0}}], "folded": ["c0"], "unknown_key": {"a": 1},
        "import": {"files": [], "joined": 0},
        "measurement": {"kind": "kernel-profile", "backend": "onnxruntime", "runs": 3, "source": "layerscope profile"},
        "latency": {"mean_us": 1.0, "p50_us": 1.0, "samples": 3}})
    known_keys_only = RunFile.from_json({key: value for key, value in measured.to_json().items()
                                         if key != "unknown_key"})
    for run in (estimated, measured, known_keys_only, known_keys_only.model_copy(update={"unknown_ops": []})):
        expected = run.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"layers"})
        written = json.loads("".join(_run_parts(_sections(run))))  # lists of sections in it are written row by row
        assert written == expected
        assert json.dumps(written, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert "import" in _sections(measured) and "measurement" in _sections(measured)


def test_trusted_rows_equal_trusted_sections_one_by_one() -> None:
    names = ("id", "macs", "estimate")
    estimate = LayerEstimate.trusted({"latency_us": 1.5, "bound": "compute"})
    rows = [("a", 10, estimate), ("b", 0, None)]
    built = Layer.trusted_rows(names, rows)
    one_by_one = [Layer.trusted(dict(zip(names, row, strict=True))) for row in rows]
    assert [_state(s) for s in built] == [_state(s) for s in one_by_one]
    assert built[0].model_fields_set is built[1].model_fields_set == {"id", "macs", "estimate"}
    assert built[0].inputs == [] and built[0].inputs is not built[1].inputs  # a fresh default list each
    assert built[1].name is None and built[0].estimate is estimate
    with pytest.raises(ValueError):  # a row of another length than the names
        Layer.trusted_rows(names, [("c", 1)])


def test_a_timelines_rows_are_held_as_columns_and_written_without_being_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeline's spans and busy intervals are :class:`Rows` (columns): the run is written from the columns, no
    section of them made, in the bytes of the whole-document writer."""
    from layerscope.estimator.timeline import simulate_timeline
    from layerscope.run import add_timeline
    from layerscope.runfile.models import Rows

    graph = load_model(zoo("squeezenet"))
    profile = load_profile("rdk-s100")
    estimate = estimate_graph(graph, profile)
    timeline = simulate_timeline(graph, profile, None, costs=estimate.costs, estimate=estimate)
    run = add_timeline(estimate_run(graph, estimate, profile), timeline, profile.ddr_nominal_bytes_per_s)
    assert run.timeline is not None and type(run.timeline.layers) is Rows
    assert all(type(unit.busy) is Rows for unit in run.timeline.units)
    assert len(run.timeline.layers) == len(graph.layers)
    with monkeypatch.context() as patched:
        def refused(*_: Any) -> list[Section]:
            raise AssertionError("a row made")

        patched.setattr(Section, "trusted_rows", classmethod(refused))
        text = run_text(run)
    assert text == dump_text(run.to_json())  # pydantic's dump: every row made first
    assert type(run.timeline.layers) is Rows  # pydantic's dump reads the rows; the section is not changed


def test_rows_are_a_read_only_sequence_equal_to_their_sections() -> None:
    from layerscope.runfile.models import Rows, TimelineBusy, TimelineUnit

    names = ("layer", "start_us", "end_us")
    columns = (["a", "b"], [0.0, 1.5], [1.5, 2.25])
    rows = TimelineBusy.trusted_columns(names, columns)
    made = TimelineBusy.trusted_rows(names, zip(*columns, strict=True))
    assert isinstance(rows, Rows) and len(rows) == 2 and bool(rows)
    assert rows[1].layer == "b" and rows[-1].end_us == 2.25 and rows[:1] == [TimelineBusy(layer="a", start_us=0.0,
                                                                                           end_us=1.5)]
    assert list(rows) == made and rows == made and made == rows and rows == tuple(made) and rows != made[:1]
    assert rows.made() is not rows.made()  # a copy of the list each time: the rows cannot be changed through it
    assert not TimelineBusy.trusted_columns(names, ([], [], []))
    unit = TimelineUnit.trusted({"name": "bpu", "busy": rows})
    assert unit.model_dump()["busy"] == [{"layer": "a", "start_us": 0.0, "end_us": 1.5},
                                         {"layer": "b", "start_us": 1.5, "end_us": 2.25}]
    with pytest.raises(ValueError, match="columns of lengths"):
        TimelineBusy.trusted_columns(names, (["a"], [0.0, 1.0], [1.0, 2.0]))
    with pytest.raises(ValueError, match="3 names"):
        TimelineBusy.trusted_columns(names, (["a"], [0.0]))


@pytest.mark.parametrize("first", [0.0, None])
@pytest.mark.usefixtures("unchecked_trusted")
def test_rows_holding_a_value_json_refuses_are_refused_as_a_list_of_them_is(first: float | None) -> None:
    from layerscope.runfile.models import Timeline, TimelineBusy, TimelineUnit

    names = ("layer", "start_us", "end_us")
    columns = (["a", "b"], [first, float("nan")], [1.5, 2.25])
    as_rows = TimelineBusy.trusted_rows(names, zip(*columns, strict=True))
    for busy in (TimelineBusy.trusted_columns(names, columns), as_rows):
        section = Timeline.trusted({"method": "timeline", "units": [TimelineUnit.trusted({"name": "bpu",
                                                                                          "busy": busy})]})
        with pytest.raises(ValueError, match="JSON compliant"):
            run_text(RunFile.trusted({"schema_version": 2, "timeline": section}))


@pytest.mark.usefixtures("unchecked_trusted")
def test_a_column_of_floats_and_nones_is_written_as_json_writes_it() -> None:
    from layerscope.runfile.models import Timeline, TimelineLayer

    names = ("id", "load_start_us", "load_end_us")
    columns = (["a", "b", "c", "d"], [None, -0.0, 1e-07, 123456789.125], [None, 0.1 + 0.2, None, 5e20])
    layers = TimelineLayer.trusted_columns(names, columns)
    text = run_text(RunFile.trusted({"schema_version": 2, "timeline": Timeline.trusted({"layers": layers})}))
    expected = [json.dumps(dict(zip(names, row, strict=True)), sort_keys=True, separators=(",", ":"))
                for row in zip(*columns, strict=True)]
    assert '"layers": [' + ",".join(expected) + "]" in text


def test_a_copy_of_rows_is_dumped_when_the_rows_it_was_copied_from_are_gone() -> None:
    import copy
    import gc

    from layerscope.runfile.models import Rows, TimelineBusy, TimelineUnit

    gc.collect()  # no other test's rows left alive
    unit = TimelineUnit.trusted({"name": "bpu", "busy": TimelineBusy.trusted_columns(
        ("layer", "start_us", "end_us"), (["a", "b"], [0.0, 1.5], [1.5, 2.25]))})
    deep = copy.deepcopy(unit)
    del unit
    gc.collect()
    assert type(deep.busy) is Rows and deep.model_dump()["busy"][1]["end_us"] == 2.25


def test_an_estimates_layers_are_columns_written_and_ranked_without_being_made(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    """A plain model's layers (and their estimates) are :class:`Rows`: written from the columns, and the estimate's
    table ranks them by their estimates' latency column, making only the layers it shows; the same bytes and the
    same table as from the list of the layers."""
    import io

    from rich.console import Console

    from layerscope.report.terminal import estimate_summary, top_layers_table
    from layerscope.runfile.models import Rows, field_values

    graph = load_model(zoo("inception_v2"))
    profile = load_profile("rdk-x5")  # some layers fall back to the CPU: the summary lists them
    run = estimate_run(graph, estimate_graph(graph, profile), profile)
    layers = run.layers
    assert type(layers) is Rows and type(layers.column("estimate")) is Rows
    made: list[int] = []
    trusted_rows = Section.trusted_rows.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Section], names: tuple[str, ...], rows: Any) -> list[Section]:
        sections = trusted_rows(cls, names, rows)
        made.append(len(sections))
        return sections

    def text(renderable: Any) -> str:
        console = Console(file=io.StringIO(), width=160)
        console.print(renderable)
        return console.file.getvalue()  # type: ignore[attr-defined]

    with monkeypatch.context() as patched:
        patched.setattr(Section, "trusted_rows", classmethod(counted))
        written = run_text(run)
        table = text(top_layers_table(run, 7))
        summary = text(estimate_summary(run))
    assert sum(made) == 2 * 7  # the 7 ranked layers and their estimates, one at a time
    listed = run.model_copy(update={"layers": layers.made()})
    assert type(listed.layers) is list
    assert written == run_text(listed) == dump_text(run.to_json())
    assert table == text(top_layers_table(listed, 7)) and summary == text(estimate_summary(listed))
    assert "CPU fallback:" in summary
    assert field_values(layers, "estimate", "latency_us") == field_values(listed.layers, "estimate", "latency_us")
    assert layers[3] == listed.layers[3] and layers[-1].id == listed.layers[-1].id


def test_a_control_flow_models_layers_are_rows_of_their_own_fields(tmp_path: Path) -> None:
    from layerscope.runfile.models import Rows

    path = tmp_path / "if.onnx"
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
         helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
         helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[numpy_helper.from_array(np.zeros((), np.float32), "zero")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    loaded = load_model(path)
    profile = load_profile("rdk-s100")
    run = estimate_run(loaded, estimate_graph(loaded, profile), profile)
    assert type(run.layers) is list and any(layer.parent for layer in run.layers)
    assert type(run.layers) is not Rows
    _assert_as_validated(run)
