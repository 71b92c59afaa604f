"""benchmarks/string_lookups.py: what it counts, and the analysis package reading the typed run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "string_lookups.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("string_lookups_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sl = _load()


def test_counts_string_subscripts_and_gets_but_not_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text(
        'run = {"layers": []}\n'                   # a dict literal: not a lookup
        'a = run["layers"]\n'                      # 1
        'b = run["model"]["sha256"]\n'             # 2 more
        'c = run.get("target", {}).get("name")\n'  # 2 more
        'run["findings"] = 1\n'                    # 1 more (a store)
        'd = run[name]\n'                          # a variable key: not counted
        'e = run[0]\n'                             # an integer key: not counted
        'f = getattr(run, "get")\n'                # not a call of .get("...")
        '# run["comment"] and "run.get(\'x\')" in a string are not code\n')
    assert sl.count_file(path) == 6


def test_the_not_run_data_files_exist_and_the_owner_is_left_out() -> None:
    for rel in sl.NOT_RUN_DATA:
        assert (sl.SRC / rel).is_file(), rel
    counts = sl.count_tree()
    assert not any(rel.startswith("runfile/") for rel in counts)
    assert "run.py" in counts and "analysis/rules.py" in counts
