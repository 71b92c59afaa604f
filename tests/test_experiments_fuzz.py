"""Experiment sections cut short or malformed: the ``bisect``, ``comparison`` and ``stress`` sections (and the
per-layer stress fields) of real saved runs with one key deleted, or mutated (wrong types, NaN, negative, huge,
nested garbage), then rendered by ``report`` as HTML and as the terminal report (the bisect's segment table and
validation; the profile's stress tables).

These sections are typed field by field inside (:mod:`layerscope.runfile.models`) and every inner field is optional:
a run missing any one of them renders (exit 0). A mutated file either loads and renders, or is refused on load with
one line naming the bad field (exit 2). Never exit 1 (a bug of ours: a view that assumes a key the typed section may
lack) and never a traceback. Seeded: the same files every time.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from layerscope.cli.main import main
from test_report_runs import shared_experiment_runs
from test_runfile_fuzz import _mutate

#: Mutated files per base run.
MUTATIONS = 40
SEED = 20261201
#: The sections this file fuzzes (the per-layer stress fields are under ``layers[].measured``).
SECTIONS = ("bisect", "comparison", "stress")
STRESS_FIELDS = ("stress_baseline_us", "stress_median_us", "stress_ratio", "stress_ratio_min", "memory_sensitive")


def _targeted(run: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """One mutation inside an experiment section (or a layer's stress fields): :func:`test_runfile_fuzz._mutate`
    applied to a document holding only that part, put back in a copy of ``run``."""
    choices: list[tuple[str, ...]] = [(name,) for name in SECTIONS if name in run]
    choices += [("layers", str(i)) for i, layer in enumerate(run["layers"])
                if STRESS_FIELDS[0] in (layer.get("measured") or {})]
    where = rng.choice(choices)
    if where[0] == "layers":
        index = int(where[1])
        part = {key: run["layers"][index]["measured"][key] for key in STRESS_FIELDS}
        mutated, what = _mutate({"part": part}, rng)
        doc = json.loads(json.dumps(run))
        measured = {k: v for k, v in doc["layers"][index]["measured"].items() if k not in STRESS_FIELDS}
        doc["layers"][index]["measured"] = {**measured, **(mutated.get("part") or {})} \
            if isinstance(mutated.get("part"), dict) else measured
        return doc, f"layers[{index}].measured: {what}"
    mutated, what = _mutate({where[0]: run[where[0]]}, rng)
    doc = {key: value for key, value in json.loads(json.dumps(run)).items() if key != where[0]}
    doc.update(mutated)
    return doc, what


def _key_paths(node: Any, prefix: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Every dict key's path under ``node`` (lists sampled to their first item)."""
    paths: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            paths += [(*prefix, key), *_key_paths(value, (*prefix, key))]
    elif isinstance(node, list) and node:
        paths += _key_paths(node[0], (*prefix, 0))
    return paths


def _without(run: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    doc = json.loads(json.dumps(run))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return doc


@pytest.fixture(scope="module")
def base_runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, dict[str, Any]]]:
    """The bisect run validated against the kernel profile with the comparison and stress sections (``report
    --format terminal`` prints the bisect), and the compared profile run with ``--stress`` (it prints the stress
    tables)."""
    runs = shared_experiment_runs(tmp_path_factory)
    merged, compared = runs.merged(), runs.load("compared")
    assert {"bisect", "comparison", "stress"} <= merged.keys() and "validation" in merged["bisect"]
    assert "bisect" not in compared and any("stress_ratio" in (layer.get("measured") or {})
                                            for layer in compared["layers"])
    return [("merged", merged), ("compared", compared)]


def test_sections_missing_any_one_key_render(base_runs: list[tuple[str, dict[str, Any]]], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    failed: list[str] = []
    tried = 0
    for name, original in base_runs:
        paths = [p for section in SECTIONS if section in original for p in _key_paths(original[section], (section,))]
        stressed = [i for i, layer in enumerate(original["layers"])
                    if STRESS_FIELDS[0] in (layer.get("measured") or {})]
        paths += [("layers", i, "measured", key) for i in stressed[:2] for key in STRESS_FIELDS]
        for path in paths:
            file = tmp_path / "cut.json"
            file.write_text(json.dumps(_without(original, path)), encoding="utf-8")
            for argv in (["report", str(file), "-o", str(tmp_path / "r.html")],
                         ["report", str(file), "--format", "table"]):
                tried += 1
                code, err = main(argv), capsys.readouterr().err.strip()
                # the terminal re-print of `compare` rebuilds the comparison it printed: a saved comparison
                # missing a field it needs is refused in one line naming the field (exit 2), not half-printed
                refused = (argv[-1] == "table" and path[0] == "comparison" and code == 2
                           and len(err.splitlines()) == 1 and "run: comparison." in err)
                if code != 0 and not refused:
                    failed.append(f"{argv[-1]} on {name} without {'/'.join(map(str, path))}: {err[-300:]}")
    assert tried > 200 and not failed, f"{len(failed)} of {tried} failed, e.g.:\n" + "\n".join(failed[:15])


def test_malformed_experiment_sections_exit_2_with_one_line_or_render(
        base_runs: list[tuple[str, dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    outcomes: Counter[tuple[str, int]] = Counter()
    bad: list[str] = []
    for name, original in base_runs:
        for i in range(MUTATIONS):
            doc, what = _targeted(original, rng)
            path = tmp_path / f"{name}-{i}.json"
            path.write_text(json.dumps(doc, allow_nan=True), encoding="utf-8")
            for form, argv in (("html", ["report", str(path), "-o", str(tmp_path / "r.html")]),
                               ("terminal", ["report", str(path), "--format", "table"])):
                code = main(argv)
                err = capsys.readouterr().err.strip()
                outcomes[(form, code)] += 1
                if code not in (0, 2) or "Traceback" in err or (code == 2 and len(err.splitlines()) != 1):
                    bad.append(f"{form} exit {code} on {name} with {what}: {err[-300:]}")
    print("OUTCOMES", outcomes)
    assert not bad, f"{len(bad)} bad outcomes, e.g.:\n" + "\n".join(bad[:15])
    # the mutations reach the renderers, not only the loader: some files render, some are refused
    for form in ("html", "terminal"):
        assert outcomes[(form, 0)] > 0 and outcomes[(form, 2)] > 0, outcomes
