"""Whole-process time of ``layerscope estimate`` on a ~700-node detector, beside onnx-tool's profile.

Usage: ``.venv/bin/python benchmarks/run.py [--runs 5] [--warmup 1] [--sample yolov5s_deep]``

Each tool runs as its own subprocess, so a time covers interpreter start, imports, loading the
model, shape inference, costing and writing the result: what a user waits for. Each run writes a fresh
output file (the file is deleted before the run: layerscope's first estimate of a model, not the merge
into an existing run). Both tools run with Python's bytecode cache on, in a temporary
``PYTHONPYCACHEPREFIX`` that the warm-up fills (as after ``pip install``, which compiles the ``.pyc``
files; ``PYTHONDONTWRITEBYTECODE`` in the caller's environment would otherwise make layerscope's
source tree compile on every run while onnx-tool's installed package does not). Runs of the two
tools alternate (after the warm-ups) so drifting machine load hits both alike. Reported: median and
minimum wall time of the timed runs, the median CPU time (user + system), the ratios of medians to
onnx-tool's, the goal lines, and the MACs each tool reports beside an independent count from ONNX shape
inference.

Exit status: 0 when the goal is met, 1 when it is not (or layerscope failed), 2 on a setup error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import shape_inference

from layerscope.samples import BENCHMARK_SAMPLE, SAMPLES, sample_path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
GOAL_S = 2.0
#: Issue #36: the estimate's median wall time at most this multiple of onnx-tool's, in the same run.
RATIO_GOAL = 1.1
TARGET = "rdk-s100"

#: The onnx-tool side: load + shape inference + profile (what ``onnx_tool.model_profile`` does,
#: minus printing the table), then the MACs it found as JSON.
ONNX_TOOL_SCRIPT = """
import json, sys
import onnx_tool
from onnx_tool.tensor import volume
model = onnx_tool.Model(sys.argv[1], {"verbose": False})
g = model.graph
g.graph_reorder_nodes()
g.shape_infer(None)
g.profile()
conv = conv_bias = 0
for node in g.nodemap.values():
    if node.op_type == "Conv":
        conv += node.macs[0]
        if len(node.input) > 2:
            conv_bias += volume(g.tensormap[node.output[0]].get_shape())
with open(sys.argv[2], "w") as f:
    json.dump({"macs": g.macs[0], "conv_macs": conv, "conv_bias_adds": conv_bias}, f)
"""


@dataclass
class Tool:
    """One benchmarked command and what its runs produced."""

    name: str
    argv: list[str]
    out: Path
    env: dict[str, str] | None = None
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    error: str | None = None

    def run(self) -> tuple[float, float] | None:
        """Run once into a fresh output file; return (wall, CPU user + system) seconds, or None (and set
        :attr:`error`) on failure."""
        self.out.unlink(missing_ok=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(self.argv, capture_output=True, text=True, check=False, env=self.env)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0 or not self.out.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            self.error = f"exit {proc.returncode}: " + " | ".join(tail)
            return None
        return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def layerscope_argv() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m layerscope``."""
    script = Path(sys.executable).parent / "layerscope"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "layerscope"]


def reference_macs(model: onnx.ModelProto) -> dict[str, int]:
    """Independent MAC count from ONNX shape inference (Conv, ConvTranspose, MatMul, Gemm)."""
    g = shape_inference.infer_shapes(model, strict_mode=True).graph
    shapes: dict[str, tuple[int, ...]] = {t.name: tuple(t.dims) for t in g.initializer}
    for vi in [*g.input, *g.value_info, *g.output]:
        shapes[vi.name] = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    out: dict[str, int] = {}
    for n in g.node:
        if n.op_type == "Conv":
            w = shapes[n.input[1]]
            macs = math.prod(shapes[n.output[0]]) * math.prod(w[1:])
        elif n.op_type == "ConvTranspose":
            w = shapes[n.input[1]]
            macs = math.prod(shapes[n.input[0]]) * math.prod(w[1:])
        elif n.op_type in ("MatMul", "Gemm"):
            trans_a = any(a.name == "transA" and a.i for a in n.attribute)
            a = shapes[n.input[0]]
            macs = math.prod(shapes[n.output[0]]) * (a[-2] if trans_a else a[-1])
        else:
            continue
        out[n.op_type] = out.get(n.op_type, 0) + macs
    return out


def layerscope_conv_macs(report: dict[str, Any]) -> int | None:
    """Sum of ``macs`` over the Conv entries of a run file's ``layers``, if it lists them."""
    layers = report.get("layers")
    if not isinstance(layers, list):
        return None
    return sum(int(x.get("macs", 0)) for x in layers if isinstance(x, dict) and x.get("op_type") == "Conv")


def fmt_g(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e9:.4f} G"


def bytecode_cached_env(pycache: Path) -> dict[str, str]:
    """This process's environment for a child whose bytecode is cached in ``pycache``, as ``pip install`` compiles
    it: ``PYTHONPYCACHEPREFIX`` set, ``PYTHONDONTWRITEBYTECODE`` left out (the caller's would make the child compile
    layerscope's source at every run, where an installed package's is compiled once)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(pycache)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sample", default=BENCHMARK_SAMPLE, choices=sorted(SAMPLES),
                        help=f"sample model to time (default {BENCHMARK_SAMPLE}, at its default size)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per tool (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per tool first (default 1)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write the results here")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be >= 1 and --warmup >= 0")

    if importlib.util.find_spec("onnx_tool") is None:
        print("error: onnx-tool is not installed (pip install -e '.[bench]')", file=sys.stderr)
        return 2
    model_path = sample_path(args.sample, cache_dir=CACHE)
    model = onnx.load(str(model_path))
    ref = reference_macs(model)
    print(f"model: {args.sample}  {model_path.name}  {len(model.graph.node)} nodes, "
          f"{model_path.stat().st_size / 1e6:.1f} MB, "
          f"input {[d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]}")
    print(f"runs: {args.warmup} warm-up + {args.runs} timed per tool, alternating; whole process each, "
          "a fresh output file each run (not the merge into an existing run)")

    tmp = Path(tempfile.mkdtemp(prefix="layerscope-bench-"))
    try:
        # the same bytecode cache for both tools, filled by the warm-up (module docstring)
        env = bytecode_cached_env(tmp / "pycache")
        print("bytecode: cached for both tools in a temporary PYTHONPYCACHEPREFIX"
              + (", filled by the warm-up" if args.warmup else " (no warm-up: the first timed run compiles)"))
        ls_out, ot_out = tmp / "layerscope.json", tmp / "onnx_tool.json"
        tools = [
            Tool("layerscope estimate",
                 [*layerscope_argv(), "estimate", str(model_path), "--target", TARGET, "-o", str(ls_out)],
                 ls_out, env),
            Tool("onnx-tool profile",
                 [sys.executable, "-c", ONNX_TOOL_SCRIPT, str(model_path), str(ot_out)], ot_out, env),
        ]
        for i in range(args.warmup + args.runs):
            for tool in tools:
                if tool.error is not None:
                    continue
                timed = tool.run()
                if timed is not None and i >= args.warmup:
                    tool.times.append(timed[0])
                    tool.cpu_times.append(timed[1])
        ls_report = json.loads(ls_out.read_text()) if ls_out.is_file() else None
        ot_report = json.loads(ot_out.read_text()) if ot_out.is_file() else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ls_tool, ot_tool = tools
    base = statistics.median(ot_tool.times) if ot_tool.times else None
    print()
    cpu_base = statistics.median(ot_tool.cpu_times) if ot_tool.cpu_times else None
    print(f"{'tool':<22}{'median s':>10}{'min s':>10}{'vs onnx-tool':>14}{'CPU s':>10}{'vs onnx-tool':>14}")
    for tool in tools:
        if not tool.times:
            print(f"{tool.name:<22}{'FAILED':>10}  {tool.error}")
            continue
        med, cpu = statistics.median(tool.times), statistics.median(tool.cpu_times)
        ratio = f"{med / base:.2f}x" if base else "-"
        cpu_ratio = f"{cpu / cpu_base:.2f}x" if cpu_base else "-"
        print(f"{tool.name:<22}{med:>10.3f}{min(tool.times):>10.3f}{ratio:>14}{cpu:>10.3f}{cpu_ratio:>14}")
        if tool.error:
            print(f"{'':<22}(a later run failed: {tool.error})")

    ref_conv = ref.get("Conv", 0)
    ref_total = sum(ref.values())
    ls_total = ls_conv = ot_total = ot_conv = ot_conv_pure = None
    if ls_report is not None:
        summary = ls_report.get("summary", {})
        ls_total = summary.get("macs")
        ls_conv = layerscope_conv_macs(ls_report)
    if ot_report is not None:
        ot_total, ot_conv = ot_report["macs"], ot_report["conv_macs"]
        ot_conv_pure = ot_conv - ot_report["conv_bias_adds"]
    print()
    print(f"{'MACs':<40}{'total':>14}{'Conv':>14}{'Conv / ref':>12}")

    def row(label: str, total: float | None, conv: float | None) -> None:
        ratio = f"{conv / ref_conv:.4f}" if conv is not None and ref_conv else "-"
        print(f"{label:<40}{fmt_g(total):>14}{fmt_g(conv):>14}{ratio:>12}")

    row("reference (ONNX shape inference)", ref_total, ref_conv)
    row("layerscope estimate (summary.macs)", ls_total, ls_conv)
    row("onnx-tool profile (all ops)", ot_total, ot_conv)
    row("onnx-tool Conv without bias adds", None, ot_conv_pure)
    if ls_conv is not None and ot_conv_pure:
        print(f"layerscope / onnx-tool Conv MACs (bias adds excluded): {ls_conv / ot_conv_pure:.4f}")

    passed = bool(ls_tool.times) and ls_tool.error is None and statistics.median(ls_tool.times) < GOAL_S
    med_text = f"median {statistics.median(ls_tool.times):.3f} s" if ls_tool.times else "no successful run"
    print()
    verdict = "PASS" if passed else "FAIL"
    print(f"goal: layerscope estimate < {GOAL_S} s whole-process: {verdict} ({med_text})")
    if ls_tool.times and base:
        at_or_below = "yes" if statistics.median(ls_tool.times) <= base else "no"
        print(f"layerscope's median at or below onnx-tool's ({base:.3f} s) in this run: {at_or_below}")
        ratio = statistics.median(ls_tool.times) / base
        print(f"layerscope's median within {RATIO_GOAL}x onnx-tool's (issue #36): "
              f"{'yes' if ratio <= RATIO_GOAL else 'no'} ({ratio:.2f}x)")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "sample": args.sample, "model": str(model_path), "nodes": len(model.graph.node),
            "goal_s": GOAL_S, "passed": passed,
            "tools": {t.name: {"times_s": t.times, "cpu_times_s": t.cpu_times, "error": t.error} for t in tools},
            "macs": {"reference": ref, "layerscope_total": ls_total, "layerscope_conv": ls_conv,
                     "onnx_tool_total": ot_total, "onnx_tool_conv": ot_conv,
                     "onnx_tool_conv_without_bias": ot_conv_pure},
        }, indent=2) + "\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
