"""Malformed run files: mutations of real saved runs (keys deleted, wrong types, NaN, negative, huge, nested
garbage) given to ``report``, ``advise``, ``reconcile``, ``compare`` and ``calibrate`` through ``main(argv)``.

Each command must succeed (exit 0) or refuse the file with exit 2 and one line on stderr; never exit 1 (a bug of
ours: an internal error) and never a traceback. The mutations are seeded: the same files every time.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from onnx import helper

from conftest import F32, ModelWriter
from layerscope.cli.main import main
from layerscope.run import save_run
from layerscope.runfile import as_run, load_document

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
#: Mutated files per base run (two base runs).
MUTATIONS = 150
SEED = 20261201

GARBAGE: tuple[Any, ...] = ("abc", "", [], {}, None, True, 0, -1, -1.5, 1e308, 10**30, float("nan"),
                            float("inf"), {"a": [{"b": None}]}, [[["x"]]], [1, "two", None])


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path in a JSON tree (lists sampled to their first three items)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:3]):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


def _mutate(run: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """A copy of ``run`` with one mutation, and what it was."""
    doc = copy.deepcopy(run)
    paths = list(_paths(doc))
    path = rng.choice(paths)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    action = rng.choice(("delete", "garbage", "garbage", "number", "nest"))
    if action == "delete":
        if isinstance(parent, dict):
            del parent[last]
        else:
            parent.pop(last)
    elif action == "number":
        parent[last] = rng.choice((float("nan"), -1.0, -1, 1e308, 10**25, 0, 0.0, -1e-9))
    elif action == "nest":
        parent[last] = {"x": parent[last], "y": [parent[last], None]}
    else:
        parent[last] = rng.choice(GARBAGE)
    return doc, f"{action} {'/'.join(map(str, path))}"


@pytest.fixture(scope="module")
def base_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two real runs as the CLI saves them: a profile (estimated on rdk-s100) with its advice and reconcile
    sections, and a Horizon import (board profiler + static report: a vendor reconcile)."""
    folder = tmp_path_factory.mktemp("fuzz-base")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAYERSCOPE_CACHE_DIR", str(folder / "cache"))
        writer = _writer(folder)
        model = writer([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                        helper.make_node("Relu", ["c"], ["r"], name="relu"),
                        helper.make_node("GlobalAveragePool", ["r"], ["y"], name="pool")],
                       [("x", F32, [1, 4, 16, 16])], [("y", F32, [1, 8, 1, 1])])
        profiled = folder / "profile.json"
        assert main(["profile", str(model), "-t", "rdk-s100", "--runs", "3", "--warmup", "1", "-o", str(profiled),
                     "--top", "0"]) == 0
        assert main(["advise", str(profiled), "--save"]) == 0
        assert main(["reconcile", str(profiled), "--save"]) == 0
        horizon = folder / "horizon.json"
        assert main(["import", str(FIXTURES / "horizon" / "s100_profiler.log"),
                     str(FIXTURES / "horizon" / "s100_model.json"), "-o", str(horizon)]) == 0
    run = load_document(profiled)
    assert {"measurement", "latency", "kernels", "findings", "reconcile", "target"} <= run.keys()
    return [profiled, horizon]


def _writer(folder: Path) -> ModelWriter:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    def write(nodes: Any, inputs: Any, outputs: Any) -> Path:
        graph = helper.make_graph(
            list(nodes), "g", [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
            [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in outputs],
            initializer=[numpy_helper.from_array(
                np.random.default_rng(0).standard_normal((8, 4, 3, 3)).astype(np.float32), "w")])
        path = folder / "model.onnx"
        onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return path

    return write


def _commands(path: Path, base: Path, out: Path) -> list[list[str]]:
    return [
        ["report", str(path), "-o", str(out / "r.html"), "--markdown", str(out / "r.md"), "--csv", str(out / "r.csv"),
         "--trace", str(out / "t.json")],
        ["advise", str(path), "--no-model"],
        ["reconcile", str(path)],
        ["compare", str(base), str(path)],
        ["calibrate", str(path), "-o", str(out / "cal.toml"), "--base", "rdk-s100"],
    ]


def test_malformed_run_files_exit_2_with_one_line_or_succeed(base_runs: list[Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    outcomes: Counter[tuple[str, int]] = Counter()
    bad: list[str] = []
    for base in base_runs:
        original = json.loads(base.read_text(encoding="utf-8"))
        for i in range(MUTATIONS):
            doc, what = _mutate(original, rng)
            path = tmp_path / f"m{i}.json"
            path.write_text(json.dumps(doc, allow_nan=True), encoding="utf-8")
            for argv in _commands(path, base, tmp_path):
                code = main(argv)
                err = capsys.readouterr().err.strip()
                outcomes[(argv[0], code)] += 1
                if code not in (0, 2) or "Traceback" in err or (code == 2 and len(err.splitlines()) != 1):
                    bad.append(f"{argv[0]} exit {code} on {base.name} with {what}: {err[-300:]}")
    assert not bad, f"{len(bad)} bad outcomes, e.g.:\n" + "\n".join(bad[:15])
    # the mutations reach the commands' work, not only the loader: most commands succeed on some files
    for command in ("report", "advise", "reconcile", "compare"):
        assert outcomes[(command, 0)] > 0 and outcomes[(command, 2)] > 0, outcomes


def test_a_saved_base_run_round_trips(base_runs: list[Path], tmp_path: Path) -> None:
    for base in base_runs:
        document = load_document(base)
        assert load_document(save_run(as_run(document), tmp_path / base.name)) == document
