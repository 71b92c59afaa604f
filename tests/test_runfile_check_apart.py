"""``check_apart``: a run checked with its layers a part at a time accepts, refuses (with the same message) and
types exactly as the whole check."""

from __future__ import annotations

from typing import Any

import pytest

from layerscope.errors import RunFileError
from layerscope.runfile import io as runfile_io
from layerscope.runfile.io import check, check_apart
from layerscope.runfile.models import Layer


def _document(layers: int) -> dict[str, Any]:
    return {"schema_version": 2, "model": {"name": "m", "sha256": "s"}, "summary": {},
            "layers": [{"id": f"l{k}", "macs": k, "estimate": {"latency_us": 1.0}} for k in range(layers)]}


@pytest.mark.parametrize("spoil", [
    lambda d: d["layers"][7].update(macs="abc"),  # in the second part
    lambda d: (d["layers"][9]["estimate"].update(latency_us=-1.0), d["summary"].update(est_latency_us="x")),
    lambda d: d.update(layers={"not": "a list"}),
    lambda d: d["layers"].append(3),
    lambda d: d.update(target={"name": 3}),
])
def test_check_apart_refuses_what_check_refuses_with_its_message(spoil: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runfile_io, "CHECK_CHUNK", 4)
    document = _document(11)
    spoil(document)
    with pytest.raises(RunFileError) as whole:
        check(document, "r.json")
    with pytest.raises(RunFileError) as apart:
        _run, parts = check_apart(document, "r.json")
        list(parts)
    assert apart.value.message == whole.value.message and apart.value.hint == whole.value.hint


def test_check_apart_types_the_layers_as_check_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runfile_io, "CHECK_CHUNK", 4)
    document = _document(10)
    document["layers"][5]["observed"] = {"trip_count": 3}
    run, parts = check_apart(document)
    chunks = list(parts)
    assert [len(chunk) for chunk in chunks] == [4, 4, 2] and run.layers == []
    typed: list[Layer] = [layer for chunk in chunks for layer in chunk]
    assert typed == check(document).layers
    assert run.model_copy(update={"layers": typed}) == check(document)
