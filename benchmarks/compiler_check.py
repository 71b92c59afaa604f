"""The BPU compiler's own static estimates against the board and against layerscope: ``compiler_estimates.csv``.

The RDK X5 zoo publishes the compile logs of its Ultralytics models (``hb_mapper makertbin``, hbdk 3.49): each ends
with the compiler's static estimate of the compiled BPU model, ``FPS=..., latency = ... us, DDR = ... bytes``.
``benchmarks/data/compiler_estimates.csv`` holds those lines. For every row this prints, beside the published board
latency (``board_latency.csv``):

  compiler   the compiler's BPU latency and DDR bytes per inference;
  gap        board latency less the compiler's latency: what the single-thread board time holds outside the BPU
             model (the zoo: "pre-processing, quantization nodes and some anti-quantization nodes running on the
             CPU", ``samples/vision/yolov5/README.md``);
  out MB     the model's float32 output bytes (the zoo's .bin models return float32 outputs, ``hrt_model_exec
             model_info``: ``tensor type: HB_DNN_TENSOR_TYPE_F32``), from the layerscope sample;
  ours       layerscope's layer time (no per-inference task overhead) and DDR bytes on the datasheet profile
             (``benchmarks/data/profiles/<board>.toml``, uncalibrated), where a sample rebuilds the model.

and the least-squares line ``gap = a + b * out MB`` over the rows with a sample.

Usage (from the repository root, layerscope importable):

    python benchmarks/compiler_check.py
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layerscope.analysis.board import BoardEntry, model_path
from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.model.types import Graph
from layerscope.targets.schema import load_profile_file

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "compiler_estimates.csv"
BOARD = HERE / "data" / "board_latency.csv"
DATASHEET = HERE / "data" / "profiles"
#: bytes of one float32 output element
FLOAT32_BYTES = 4


@dataclass(frozen=True)
class CompilerRow:
    """One compile log's static estimate: the compiled BPU model's latency (µs) and DDR traffic per inference."""

    board: str
    model: str
    sample: str
    latency_us: float
    ddr_bytes: int
    source: str


def read_rows(path: Path = DATA) -> list[CompilerRow]:
    """The rows of ``compiler_estimates.csv``."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [CompilerRow(r["board"], r["model"], r["sample"].strip(), float(r["compiler_latency_us"]),
                            int(r["compiler_ddr_bytes"]), r["source"]) for r in csv.DictReader(handle)]


def board_latency_ms(path: Path = BOARD) -> dict[tuple[str, str], float]:
    """Published single-thread board latency (ms) by (board, model)."""
    with path.open(encoding="utf-8", newline="") as handle:
        return {(r["board"], r["model"]): float(r["latency_ms"]) for r in csv.DictReader(handle)}


def float_output_bytes(graph: Graph) -> int:
    """Bytes of ``graph``'s outputs returned as float32 (every output, as the zoo's compiled models return them)."""
    return sum(t.elements for t in graph.outputs) * FLOAT32_BYTES


def gap_line(out_mb: Sequence[float], gap_ms: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``gap_ms = a + b * out_mb``: (a ms, b ms per MB); needs two distinct ``out_mb``."""
    if len(set(out_mb)) < 2:
        raise ValueError("a line needs at least two distinct output sizes")
    b, a = np.polyfit(np.asarray(out_mb, dtype=float), np.asarray(gap_ms, dtype=float), 1)
    return float(a), float(b)


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    boards = board_latency_ms()
    print(f"{'model':<14}{'board ms':>9}{'compiler ms':>12}{'gap ms':>8}{'out MB':>8}{'comp DDR MB':>12}"
          f"{'ours ms':>9}{'our DDR MB':>11}{'DDR ratio':>10}")
    out_mb: list[float] = []
    gaps: list[float] = []
    for row in read_rows():
        board = boards[(row.board, row.model)]
        gap = board - row.latency_us / 1e3
        line = (f"{row.model:<14}{board:>9.2f}{row.latency_us / 1e3:>12.2f}{gap:>8.2f}")
        if not row.sample:
            print(f"{line}{'-':>8}{row.ddr_bytes / 1e6:>12.1f}{'(no sample)':>20}")
            continue
        graph = load_model(model_path(BoardEntry(f"sample:{row.sample}", board * 1e3, "", row.board, "", "")))
        est = estimate_graph(graph, load_profile_file(DATASHEET / f"{row.board}.toml"))
        ddr = sum(layer.ddr_read_bytes + layer.ddr_write_bytes for layer in est.layers)
        mb = float_output_bytes(graph) / 1e6
        out_mb.append(mb)
        gaps.append(gap)
        print(f"{line}{mb:>8.2f}{row.ddr_bytes / 1e6:>12.1f}{est.layers_us / 1e3:>9.2f}{ddr / 1e6:>11.1f}"
              f"{ddr / row.ddr_bytes:>10.2f}")
    a, b = gap_line(out_mb, gaps)
    print(f"\nboard - compiler = {a:.2f} ms + {b:.3f} ms per MB of float32 output "
          f"(1 ms per MB = 1 ns per byte) over {len(gaps)} models with a sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
