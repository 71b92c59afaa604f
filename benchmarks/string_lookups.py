"""Count string-key lookups (``x["key"]`` and ``x.get("key")``) in ``src/layerscope`` outside the run-file package.

Usage: ``.venv/bin/python benchmarks/string_lookups.py [--top 25] [--all] [--json OUT] [--goal 150] [--src DIR]``

Issue #15's done-when: "string-key lookups into run data outside the run-file package: under 150 in ``src/``".

What is counted (AST, so strings and comments never count):

- a subscript whose key is a string constant: ``run["layers"]``, ``layer["estimate"]["latency_us"]`` (two);
  a store (``run["findings"] = ...``) counts too: a producer writing a dict by key is the same untyped seam;
- a call ``<anything>.get("<string>", ...)``.

Not counted: ``src/layerscope/runfile/`` (the package that owns the file and may read its JSON by key), and
lookups whose keys are not string constants (``d[name]``, ``row[i]``).

The rule for "run data" (the headline number): every lookup in a file counts, except in the files of
:data:`NOT_RUN_DATA`, each listed with why its lookups read something other than a run (a vendor's file, an
ONNX Runtime profile, a TOML profile, an ONNX attribute, a compile config). The choice is per file, not per
lookup: a file that reads both run data and something else counts whole. ``--all`` prints the count over every
file as well (the issue's own "~1,500" counted everything).

Prints the total, the count per package and the top files; ``--goal N`` exits 1 when the run-data count is N or
more (0 otherwise).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "layerscope"
#: The run-file package: owns the JSON and may read it by key.
OWNER = "runfile"

#: Files whose string-key lookups read data that is not a run file (path relative to ``src/layerscope``: why).
NOT_RUN_DATA: Mapping[str, str] = {
    "importers/horizon_profiler.py": "Horizon hrt_model_exec profiler JSON (a vendor file)",
    "importers/horizon_static.py": "Horizon hb_compile static report JSON/HTML (a vendor file)",
    "importers/openvino.py": "OpenVINO benchmark_app report (a vendor file)",
    "importers/rknn.py": "RKNN toolkit profile (a vendor file)",
    "importers/trtexec.py": "TensorRT trtexec layer/profile JSON (a vendor file)",
    "importers/ort.py": "ONNX Runtime profiler event JSON",
    "importers/_common.py": "vendor file headers",
    "importers/names.py": "vendor layer-name maps",
    "runtimes/onnxruntime/trace.py": "ONNX Runtime profiler event JSON",
    "runtimes/onnxruntime/session.py": "ONNX Runtime session options",
    "measure/inputs.py": "ONNX input descriptions",
    "runtimes/openvino/runtime.py": "the OpenVINO runner's settings",
    "model/random_inputs.py": "ONNX attributes of the ops that read an input",
    "costs/quantized.py": "the per-element FLOP tables of the ops a quantized op stands for",
    "cli/profile.py": "the OpenVINO command-line options (click's context)",
    "cli/bench.py": "the OpenVINO command-line options (click's context)",
    "workflows/calibrate.py": "the kernel runner's overhead and identity",
    "model/shapes.py": "ONNX value infos and attributes",
    "model/load.py": "ONNX attributes",
    "model/control_flow.py": "ONNX subgraph attributes",
    "targets/schema.py": "TOML hardware profiles",
    "targets/loader.py": "TOML hardware profiles",
    "targets/host.py": "the host probe (/proc, lscpu output)",
    "analysis/lint.py": "hb_compile YAML compile configs",
    "samples/transformer.py": "sample-model builder arguments",
    "samples/ocr.py": "sample-model builder tensor shapes",
    "samples/yolo.py": "sample-model builder tensor shapes",
    "samples/__init__.py": "the environment (LAYERSCOPE_CACHE_DIR)",
    "model/validate.py": "ONNX external-data entries (location, offset, length)",
    "measure/subgraphs.py": "ONNX Runtime profiler event JSON (control-flow kernels' spans)",
    "measure/kernels.py": "the initializers of the single-kernel ONNX models it builds",
    "measure/runners.py": "a user runner's regex match groups",
    "runtimes/onnxruntime/runner.py": "the host probe's machine info",
    "cli/options.py": "the OpenVINO command-line options (click's context)",
    "analysis/calibrate.py": "the calibrated TOML hardware profile it writes (profile tables and [sources])",
}


def count_file(path: Path) -> int:
    """String-key lookups in one Python file (see the module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                count += 1
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            count += 1
    return count


def count_tree(src: Path = SRC) -> dict[str, int]:
    """Lookups per file (relative posix path) under ``src``, the run-file package left out."""
    counts = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.split("/")[0] == OWNER:
            continue
        counts[rel] = count_file(path)
    return counts


def run_data(counts: Mapping[str, int]) -> dict[str, int]:
    """``counts`` without the files of :data:`NOT_RUN_DATA`."""
    return {rel: n for rel, n in counts.items() if rel not in NOT_RUN_DATA}


def by_package(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts summed per top-level package (a top-level module is its own entry)."""
    packages: Counter[str] = Counter()
    for rel, n in counts.items():
        packages[rel.split("/")[0]] += n
    return dict(sorted(packages.items(), key=lambda item: (-item[1], item[0])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=25, help="files listed (default 25)")
    parser.add_argument("--all", action="store_true", help="also print the count over every file")
    parser.add_argument("--json", type=Path, default=None, help="write the counts to this JSON file")
    parser.add_argument("--goal", type=int, default=None, help="exit 1 unless the run-data count is below this")
    parser.add_argument("--src", type=Path, default=SRC, help="the package folder (default: this checkout's)")
    args = parser.parse_args(argv)
    every = count_tree(args.src)
    counts = run_data(every)
    total = sum(counts.values())
    print(f"string-key lookups into run data outside layerscope.runfile: {total} "
          f"({len(NOT_RUN_DATA)} files of other data left out: {sum(every.values()) - total} lookups)")
    if args.all:
        print(f"string-key lookups in every file outside layerscope.runfile: {sum(every.values())}")
    print("\nper package:")
    for package, n in by_package(counts).items():
        if n:
            print(f"  {n:5d}  {package}")
    print(f"\ntop {args.top} files:")
    for rel, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:args.top]:
        if n:
            print(f"  {n:5d}  {rel}")
    if args.json is not None:
        args.json.write_text(json.dumps({"run_data": total, "all": sum(every.values()), "files": every,
                                         "not_run_data": sorted(NOT_RUN_DATA)}, indent=1, sort_keys=True) + "\n")
    if args.goal is not None:
        ok = total < args.goal
        print(f"\ngoal: under {args.goal}: {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
