"""A stop that a library wraps in an error of its own still stops: a sweep's cell raises it, not a failure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, WrapSerializer
from pydantic_core import PydanticSerializationError

from layerscope import interrupts
from layerscope.sweep import tasks
from layerscope.sweep.plan import Cell
from layerscope.workflows.common import Hooks


def _interrupting(value: Any, handler: Any) -> Any:
    raise KeyboardInterrupt


class _Section(BaseModel):
    rows: Annotated[list[int], WrapSerializer(_interrupting)]


def _wrapped_stop() -> PydanticSerializationError:
    """What pydantic-core raises when a stop arrives inside a serializer of a run file's section."""
    with pytest.raises(PydanticSerializationError) as caught:
        _Section(rows=[1]).model_dump(mode="json")
    return caught.value


@pytest.fixture(autouse=True)
def _clean() -> Any:
    interrupts.clear()
    yield
    interrupts.clear()


def test_pydantic_wraps_a_stop_and_it_is_recognised() -> None:
    assert interrupts.caused(_wrapped_stop())
    assert not interrupts.caused(ValueError("a cell's own error, naming KeyboardInterrupt in a model name"))


def test_a_stop_in_the_chain_of_causes_is_recognised() -> None:
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise RuntimeError("wrapped") from stop
    except RuntimeError as exc:
        assert interrupts.caused(exc)


def test_any_error_after_a_recorded_stop_is_the_stop() -> None:
    assert not interrupts.caused(ValueError("x"))
    interrupts.record(15)
    assert interrupts.requested() and interrupts.caused(ValueError("x"))
    interrupts.clear()
    assert not interrupts.requested()


def _cell() -> Cell:
    return Cell(model="m.onnx", target="host", mode="estimate")


def test_a_cell_stopped_inside_a_serializer_raises_the_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    error = _wrapped_stop()

    def run(cell: Cell) -> Any:
        raise error

    monkeypatch.setattr(tasks, "_run", run)
    with pytest.raises(KeyboardInterrupt):
        tasks.run_cell(_cell(), str(tmp_path))
    assert not any((tmp_path / tasks.RUNNING).glob("*.json"))  # its marker removed


def test_a_cell_failing_on_its_own_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(cell: Cell) -> Any:
        raise ValueError("broken model")

    monkeypatch.setattr(tasks, "_run", run)
    outcome = tasks.run_cell(_cell(), str(tmp_path))
    assert outcome.status == "failed" and outcome.error == "broken model"


def test_a_sweep_stopped_anywhere_leaves_no_marker_or_temporary_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop can land between a marker's write and its removal, or inside an atomic write: the sweep's own handler
    removes what its cells left (markers, the writer's ``.<key>.json.*.tmp``) and keeps the run files."""
    from layerscope.workflows import sweep as sweep_workflow

    cell = _cell()
    key = f"{cell.key}.json"
    running, runs = tmp_path / tasks.RUNNING, tmp_path / tasks.RUNS
    running.mkdir()
    runs.mkdir()

    def stopped(*args: Any, **kwargs: Any) -> Any:
        (running / key).write_text("{}")  # a marker whose removal the stop cut short
        (running / f".{key}.ab12.tmp").write_text("")  # an atomic write cut short, in each folder
        (runs / f".{key}.cd34.tmp").write_text("")
        (runs / "other.json").write_text("{}")  # a run file: kept
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_workflow, "run_sweep", stopped)
    with pytest.raises(KeyboardInterrupt, match="0 of 1 cells are done"):
        sweep_workflow._run([cell], tmp_path, address=None, num_cpus=None, no_ray=True, hooks=Hooks())
    assert not running.exists()
    assert sorted(p.name for p in runs.iterdir()) == ["other.json"]


def test_a_stop_inside_a_deferred_block_is_raised_as_it_ends() -> None:
    finished: list[str] = []
    with pytest.raises(KeyboardInterrupt), interrupts.deferred():
        with interrupts.deferred():
            assert interrupts.record(15)  # held: the handler raises nothing
            finished.append("inner")
        finished.append("outer")  # the inner block's end does not raise: the outer one is still open
    assert finished == ["inner", "outer"]
    assert not interrupts.record(15)  # outside any block: the handler raises at once


def test_an_error_leaving_a_deferred_block_with_a_held_stop_becomes_the_stop() -> None:
    with pytest.raises(KeyboardInterrupt) as caught, interrupts.deferred():
        interrupts.record(15)
        raise OSError("the clean-up failed")
    assert isinstance(caught.value.__context__, OSError)


def test_a_deferred_block_in_another_thread_holds_nothing() -> None:
    import threading

    held: list[bool] = []

    def work() -> None:
        with interrupts.deferred():
            held.append(interrupts.record(15))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert held == [False]
