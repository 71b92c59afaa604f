"""benchmarks/identity.py's diff of two sides' outputs: same, different, masked, missing (not the benchmark's run)."""

from __future__ import annotations

import gzip
from pathlib import Path
from types import ModuleType

from _scripts import load_script

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "identity.py"


def _identity() -> ModuleType:
    return load_script("identity_benchmark", BENCHMARK)


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_the_same_outputs_are_the_same_and_a_changed_line_is_named(tmp_path: Path) -> None:
    identity = _identity()
    base = _write(tmp_path / "base", {"a/run.json": b'{\n  "x": 1,\n  "y": 2\n}\n', "a/estimate.out": b"table\n"})
    new = _write(tmp_path / "new", {"a/run.json": b'{\n  "x": 1,\n  "y": 3\n}\n', "a/estimate.out": b"table\n"})
    outcomes = {o.path: o for o in identity.compare_folders(base, new)}
    assert set(outcomes) == {"a/run.json", "a/estimate.out"}
    assert outcomes["a/estimate.out"].same
    changed = outcomes["a/run.json"]
    assert not changed.same
    assert changed.detail == "line 3 col 8: base '  \"y\": 2' | new '  \"y\": 3'"


def test_masks_hide_only_the_side_paths_and_gzip_is_compared_by_its_text(tmp_path: Path) -> None:
    identity = _identity()
    base_text = b'{"path": "/tmp/b/work/models/m.onnx", "source": "/old/src/p.toml", "tool": "0.1.0"}\n'
    new_text = b'{"path": "/tmp/n/work/models/m.onnx", "source": "/new/src/p.toml", "tool": "0.1.0"}\n'
    base = _write(tmp_path / "base", {"run.json": base_text, "tl.json.gz": gzip.compress(base_text, mtime=1)})
    new = _write(tmp_path / "new", {"run.json": new_text, "tl.json.gz": gzip.compress(new_text, mtime=2)})
    base_masks = [("/tmp/b/work", "<work>"), ("/old/src", "<src>")]
    new_masks = [("/tmp/n/work", "<work>"), ("/new/src", "<src>")]
    assert all(o.same for o in identity.compare_folders(base, new, base_masks, new_masks))
    unmasked = identity.compare_folders(base, new, base_masks[:1], new_masks[:1])
    assert [(o.path, o.same) for o in unmasked] == [("run.json", False), ("tl.json.gz", False)]
    # the first differing character is the 'o' of /old (column 46 once the work folder is masked), shown from 20
    # characters before it
    assert unmasked[0].detail == ("line 1 col 46: "
                                  "base '....onnx\", \"source\": \"/old/src/p.toml\", \"tool\": \"0.1.0\"}' | "
                                  "new '....onnx\", \"source\": \"/new/src/p.toml\", \"tool\": \"0.1.0\"}'")


def test_a_file_on_one_side_only_and_a_shorter_output_are_different(tmp_path: Path) -> None:
    identity = _identity()
    base = _write(tmp_path / "base", {"x.out": b"one\ntwo\n", "only-base.html": b"<p>",
                                      "samples-cache/m-v1.onnx": b"1"})
    new = _write(tmp_path / "new", {"x.out": b"one\n", "only-new.html": b"<p>", "samples-cache/m-v2.onnx": b"2"})
    outcomes = {o.path: o for o in identity.compare_folders(base, new)}
    assert outcomes["only-base.html"].detail == "only in base"
    assert outcomes["only-new.html"].detail == "only in new"
    assert outcomes["x.out"].detail == "line 2 col 1: base 'two' | new <end>"
    assert not any(path.startswith("samples-cache/") for path in outcomes)  # the build cache is not compared
