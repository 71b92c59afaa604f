"""Compact run files: a path ending in ``.gz`` is written gzip-compressed (the same text, deterministic bytes), and
every reader opens compressed and plain files alike, old (version-1) ones included."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import zoo
from layerscope.cli.main import main
from layerscope.errors import RunFileError
from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.run import estimate_run, save_run
from layerscope.runfile import io as runfile_io
from layerscope.runfile import load_document
from layerscope.runfile.io import as_run, load
from layerscope.targets import load_profile


def _estimate(model: Path, out: Path) -> None:
    assert main(["estimate", str(model), "-t", "rdk-s100", "--top", "0", "-o", str(out)]) == 0


def test_a_gz_run_holds_the_plain_runs_text_compressed(tmp_path: Path) -> None:
    plain, packed = tmp_path / "run.json", tmp_path / "run.json.gz"
    _estimate(zoo("squeezenet"), plain)
    _estimate(zoo("squeezenet"), packed)
    data = packed.read_bytes()
    assert data[:2] == b"\x1f\x8b"
    assert gzip.decompress(data) == plain.read_bytes()  # a faithful record: the same text, byte for byte
    assert len(data) * 4 < plain.stat().st_size
    assert load_document(packed) == load_document(plain)
    typed = load(packed)
    assert len(typed.layers) == len(json.loads(plain.read_text(encoding="utf-8"))["layers"]) > 50


def test_saving_a_gz_run_twice_gives_identical_bytes(tmp_path: Path) -> None:
    _estimate(zoo("squeezenet"), tmp_path / "run.json")
    run = load(tmp_path / "run.json")
    first = save_run(run, tmp_path / "a.json.gz").read_bytes()
    second = save_run(run, tmp_path / "b.json.gz").read_bytes()
    assert first == second  # no file name, no time in the gzip header


@pytest.mark.parametrize("name", ["run.json", "run.json.gz"])
def test_a_run_written_as_it_is_dumped_has_the_bytes_of_its_whole_text(name: str) -> None:
    """save_run encodes (and compresses) a typed run a slice at a time as its layers are dumped: whatever the
    slices, the bytes are those of the whole text encoded at once (deflate does not depend on how its input is
    split)."""
    graph = load_model(zoo("squeezenet"))
    profile = load_profile("rdk-x5")
    run = estimate_run(graph, estimate_graph(graph, profile), profile)
    text = runfile_io.run_text(run)
    assert text == runfile_io.dump_text(run.to_json()) and text.count("\n") > len(run.layers)
    encoded = runfile_io.encode(text, name)  # the text itself for a plain name, written as UTF-8
    whole = encoded.encode("utf-8") if isinstance(encoded, str) else encoded
    for chars in (1, 7, 4096, 1 << 20, 1 << 22):
        assert b"".join(runfile_io.encode_parts(runfile_io.run_parts(run), name, chars)) == whole, chars
    if name.endswith(".gz"):
        assert gzip.decompress(whole) == text.encode("utf-8")


def test_an_existing_gz_run_gets_its_estimate_refreshed(tmp_path: Path) -> None:
    packed = tmp_path / "run.json.gz"
    _estimate(zoo("squeezenet"), packed)
    document = load_document(packed)
    document["note_from_a_later_command"] = "kept"
    save_run(as_run(document), packed)
    _estimate(zoo("squeezenet"), packed)  # merges into the existing (compressed) run
    assert load_document(packed)["note_from_a_later_command"] == "kept"


def test_a_gzip_file_under_any_name_is_read(tmp_path: Path) -> None:
    _estimate(zoo("squeezenet"), tmp_path / "run.json")
    renamed = tmp_path / "renamed.json"
    renamed.write_bytes(gzip.compress((tmp_path / "run.json").read_bytes()))
    assert load_document(renamed) == load_document(tmp_path / "run.json")


def test_a_version_1_run_compressed_is_migrated(tmp_path: Path) -> None:
    _estimate(zoo("squeezenet"), tmp_path / "run.json")
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    doc.update(schema_version=1, measurement={"backend": "onnxruntime", "source": "bench"})
    old = tmp_path / "v1.json.gz"
    old.write_bytes(gzip.compress(json.dumps(doc).encode()))
    loaded = load_document(old)
    assert loaded["schema_version"] == 2
    assert loaded["measurement"]["kind"] == "bench"


def test_a_truncated_gz_run_is_one_clear_error(tmp_path: Path) -> None:
    packed = tmp_path / "run.json.gz"
    _estimate(zoo("squeezenet"), packed)
    packed.write_bytes(packed.read_bytes()[:200])
    with pytest.raises(RunFileError, match=r"run\.json\.gz: not a layerscope run file"):
        load_document(packed)


def test_a_gz_run_inflating_past_the_limit_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 100_000 + b'{"schema_version": 2}'))  # 100 kB of blanks, then a run
    monkeypatch.setattr(runfile_io, "MAX_RUN_BYTES", 50_000)
    with pytest.raises(RunFileError, match="over 50,000 bytes once decompressed"):
        load_document(bomb)
