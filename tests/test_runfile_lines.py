"""The layers of a run are written column by column (``runfile.io._section_chunks``): each line must be exactly what
the layer's own dump, encoded on its own, gives, whatever the layers hold."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from layerscope.runfile import io as runfile_io
from layerscope.runfile.models import Layer, LayerEstimate, LayerMeasured, RunFile


def _one_by_one(layers: list[Layer]) -> list[str]:
    return [runfile_io._LINE.encode(layer.model_dump(mode="json", by_alias=True, exclude_unset=True))
            for layer in layers]


def _lines(layers: list[Layer]) -> list[str]:
    return [line for chunk in runfile_io._section_chunks(layers) for line in chunk]


def _trusted(k: int, **more: Any) -> Layer:
    return Layer.trusted({
        "id": f"n{k}", "name": f"n{k}", "op_type": "Conv", "domain": "", "inputs": [f"x{k}", "w"],
        "outputs": [f"y{k}"], "output_shapes": [[1, k, 16, "batch"]], "dtype": "float32", "macs": k * 1000,
        "flops": 2 * k * 1000, "known": k % 2 == 0, "unit": None if k % 3 else "TAE",
        "estimate": LayerEstimate.trusted({"latency_us": k / 7, "compute_us": 0.1 * k, "bound": "compute",
                                           "ddr_read_bytes": 2**40 + k, "weight_passes": 1.0,
                                           "fallback_reason": None}),
        "shape_source": "static", **more})


def test_trusted_layers_of_one_shape_give_each_layers_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runfile_io, "_CHUNK", 3)  # chunk boundaries inside the run
    layers = [_trusted(k) for k in range(10)]
    lines = _lines(layers)
    assert lines == _one_by_one(layers)
    # hand-checked: keys sorted, the estimate nested in its place, None as null, 1/7 as repr writes it
    assert lines[1].startswith('{"domain":"","dtype":"float32","estimate":{"bound":"compute","compute_us":0.1,'
                               '"ddr_read_bytes":1099511627777,"fallback_reason":null,'
                               '"latency_us":0.14285714285714285,"weight_passes":1.0},"flops":2000,"id":"n1",'
                               '"inputs":["x1","w"],"known":false,')
    assert lines[1].endswith('"output_shapes":[[1,1,16,"batch"]],"outputs":["y1"],"shape_source":"static",'
                             '"unit":null}')


@pytest.mark.usefixtures("unchecked_trusted")
def test_layers_of_mixed_shapes_and_odd_values_give_each_layers_own_line() -> None:
    odd = 'quote " back \\ percent %s %% tab \t nul \x00 é ✓ \U0001f600'
    validated = Layer.model_validate({
        "id": odd, "inputs": [odd], "vendor_key": {"b": 1, "a": [1.5, None]},  # an unknown key: its own dump
        "measured": {"median_us": 3.0, "status": "measured", "kernels": ["k1", "k2"], "split": True}})
    layers = [
        _trusted(1), _trusted(2, observed={"trip_count": 3, "source": "executed", "branch_taken": None}),
        _trusted(3, parent="Loop_0", executions=7), validated, _trusted(4),
        Layer.trusted({"id": "bare"}), Layer.trusted({"id": "m", "measured": LayerMeasured.trusted(
            {"median_us": 1.25, "samples": 10, "split": False, "kernels": None})}),
        Layer.trusted({"id": "flag", "known": True, "macs": 0, "estimate": None}),
        Layer.trusted({"id": odd, "name": odd, "inputs": [odd, ""], "outputs": []}),
        _trusted(5), _trusted(6),
    ]
    assert _lines(layers) == _one_by_one(layers)
    assert runfile_io._common_shape((validated,)) is None  # an unknown key: not a shape the columns write
    run = RunFile.trusted({"schema_version": 2, "layers": layers})
    assert runfile_io.run_text(run) == runfile_io.dump_text(run.to_json())


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.usefixtures("unchecked_trusted")
def test_a_non_finite_time_is_refused_as_before(bad: float) -> None:
    layers = [_trusted(1)] + [_trusted(k, estimate=LayerEstimate.trusted({"latency_us": bad})) for k in (2, 3)]
    assert runfile_io._common_shape(layers[1:3]) is not None  # a chunk of columns
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        _lines(layers)
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        json.dumps(layers[1].model_dump(mode="json"), allow_nan=False)


def test_escape_class_is_the_one_the_line_encoder_escapes() -> None:
    """``_needs_escape`` decides that text is written as it is: it must match the encoder for every character."""
    plain = "".join(chr(c) for c in range(0x110000) if not runfile_io._ESCAPED.search(chr(c)))
    assert runfile_io._LINE.encode(plain) == f'"{plain}"'
    for c in range(0x80):
        if runfile_io._ESCAPED.search(chr(c)):
            assert runfile_io._LINE.encode(chr(c)) != f'"{chr(c)}"'


def _equal(k: int, **more: Any) -> Layer:
    """A trusted layer whose fields are the same in every layer but for ``more``."""
    return Layer.trusted({"id": f"n{k}", "domain": "", "inputs": ["x", "w"], "outputs": ["y"], "macs": 7,
                          "known": True, "unit": None, "estimate": LayerEstimate.trusted(
                              {"latency_us": 0.0, "bound": "compute", "weight_passes": 1.0}), **more})


@pytest.mark.parametrize("odd", [
    {"domain": "100% com.x"},  # equal text holding the template's % character
    {"domain": 'a "quoted" name'},  # equal text that needs escaping
    {"macs": -(2**70)},  # an equal integer beyond 64 bits
    {"known": False},
    {"estimate": LayerEstimate.trusted({"latency_us": -0.0, "bound": "compute", "weight_passes": 1.0})},  # == 0.0
    {"estimate": LayerEstimate.trusted({"latency_us": 0.0, "bound": "compute", "weight_passes": 1.0 + 2**-52})},
    {"inputs": []}, {"inputs": ["a\nb"]}, {"inputs": ["%s", "%"]}, {"inputs": [1, "x"]}, {"inputs": ["x", None]},
    {"outputs": ["é✓\U0001f600", ""]}, {"unit": "TAE"}, {"unit": 3},
])
@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic's, dumping a value not of its field's type
@pytest.mark.usefixtures("unchecked_trusted")
def test_a_chunk_with_one_odd_value_gives_each_layers_own_line(odd: dict[str, Any]) -> None:
    """Columns of equal values are written as template text, columns of plain text as they are: a value that
    differs from the others or needs escaping must still give the layer's own line."""
    layers = [_equal(k) for k in range(5)] + [_equal(5, **odd)] + [_equal(k) for k in range(6, 9)]
    assert runfile_io._common_shape(layers) is not None  # one chunk of columns
    assert _lines(layers) == _one_by_one(layers)
    assert _lines([_equal(k, **odd) for k in range(4)]) == _one_by_one([_equal(k, **odd) for k in range(4)])


def test_mixed_shapes_are_split_until_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk of sections of mixed shapes is written in parts of one shape, each line the section's own."""
    calls: list[int] = []
    chunk_lines = runfile_io._chunk_lines
    monkeypatch.setattr(runfile_io, "_chunk_lines", lambda s, shape: calls.append(len(s)) or chunk_lines(s, shape))
    layers = [_trusted(k) for k in range(16)]
    layers[11] = _trusted(11, parent="Loop_0")  # another set of fields: another shape
    assert runfile_io._common_shape(layers) is None
    assert runfile_io._common_shape(layers[:8]) == runfile_io._common_shape(layers[:1])
    assert _lines(layers) == _one_by_one(layers)
    assert calls == [8, 2, 1, 1, 4]


def test_sections_given_as_read_are_written_so_in_place_of_the_runs_own() -> None:
    run = RunFile.from_json({"schema_version": 2, "model": {"name": "m"}, "summary": {"est_latency_us": 1.0},
                             "layers": [], "latency": {"p50_us": 7.0}, "custom": {"z": 1}, "import": {"files": []}})
    as_read = {"latency": {"p50_us": 7}, "custom": {"z": 1, "a": [2]}, "import": {"files": [], "note": "x"}}
    text = "".join(runfile_io.run_parts(run, as_read))
    assert text == runfile_io.dump_text({**run.to_json(), **as_read})
    assert '"p50_us": 7\n' in text and "".join(runfile_io.run_parts(run)) == runfile_io.dump_text(run.to_json())


@pytest.mark.usefixtures("unchecked_trusted")
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # 1.0 in an int field: written as it is
def test_output_shapes_whose_reprs_differ_are_written_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes are encoded once per distinct ``repr``: values JSON writes apart (``1``, ``1.0``, ``"1"``) never share a
    text."""
    monkeypatch.setattr(runfile_io, "_CHUNK", 4)
    shapes: list[list[Any]] = [[[1, 8]], [[1.0, 8]], [["1", 8]], [[1, 8]], [[1, 8], [2]], [[1.0, 8]], [["1", 8]]]
    layers = [_trusted(k, output_shapes=shape) for k, shape in enumerate(shapes)]
    lines = _lines(layers)
    assert lines == _one_by_one(layers)
    assert [json.loads(line)["output_shapes"] for line in lines] == shapes
    assert '"output_shapes":[[1.0,8]]' in lines[1] and '"output_shapes":[["1",8]]' in lines[2]
