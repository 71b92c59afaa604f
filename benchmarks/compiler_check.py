"""The RDK X5 estimate against the BPU compiler's own static figures and the board: ``compiler_static.csv``.

The RDK X5 zoo publishes the compile logs of its Ultralytics models (``hb_mapper makertbin``, hbdk 3.49): each ends
with the compiler's static estimate of the compiled BPU model, ``FPS=..., latency = ... us, DDR = ... bytes`` (one frame
on one BPU core). ``benchmarks/data/compiler_static.csv`` holds those figures with the zoo README's single- and
two-thread throughputs and the float32 bytes of the model's outputs (``hrt_model_exec model_info``; empty where the
zoo publishes none). Two threads keep the BPU busy, so 1000 / fps at two threads is the BPU's time per frame. For
every row this prints, beside the published board latency (``board_latency.csv``):

  hbdk       the compiler's BPU latency and DDR bytes per inference;
  ours       layerscope's layer time (no per-inference work) and DDR bytes on a profile (default: the datasheet
             profile ``benchmarks/data/profiles/<board>.toml``, uncalibrated), and its ratio to hbdk's latency, where a
             sample rebuilds the model;
  2-thr      the BPU's time per frame at two threads (which tracks hbdk's latency);
  gap        board latency less hbdk's latency: what the single-thread board time holds outside the BPU model (the
             zoo: "pre-processing, quantization nodes and some anti-quantization nodes running on the CPU",
             ``samples/vision/yolov5/README.md``), against the outputs' float32 MB;

and the least-squares line ``gap = a + b * out MB`` over the rows with a sample.

Usage (from the repository root, layerscope importable):

    python benchmarks/compiler_check.py [--profile path/to/profile.toml]
"""

from __future__ import annotations

import argparse
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
from layerscope.targets import Profile
from layerscope.targets.schema import load_profile_file

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "compiler_static.csv"
BOARD = HERE / "data" / "board_latency.csv"
DATASHEET = HERE / "data" / "profiles"
#: bytes of one float32 output element
FLOAT32_BYTES = 4


@dataclass(frozen=True)
class CompilerRow:
    """One compile log's static estimate (the compiled BPU model's latency in µs and DDR traffic per inference) and
    the zoo's throughputs at one and two threads (frames/s; ``None`` where not published)."""

    board: str
    model: str
    sample: str
    latency_us: float
    ddr_bytes: int
    threads1_fps: float | None
    threads2_fps: float | None
    source: str


def _optional(cell: str) -> float | None:
    return float(cell) if cell.strip() else None


def read_rows(path: Path = DATA) -> list[CompilerRow]:
    """The rows of ``compiler_static.csv``."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [CompilerRow(r["board"], r["model"], r["sample"].strip(), float(r["hbdk_latency_us"]),
                            int(r["hbdk_ddr_bytes"]), _optional(r["threads1_fps"]), _optional(r["threads2_fps"]),
                            r["source"]) for r in csv.DictReader(handle)]


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, help="profile file (default: the board's datasheet profile)")
    args = parser.parse_args(argv)
    boards = board_latency_ms()
    print(f"{'model':<14}{'board ms':>9}{'hbdk ms':>8}{'ours ms':>8}{'ratio':>6}{'hbdk MB':>8}{'our MB':>7}"
          f"{'2-thr ms':>9}{'gap ms':>7}{'out MB':>7}")
    out_mb: list[float] = []
    gaps: list[float] = []
    profiles: dict[str, Profile] = {}
    for row in read_rows():
        board = boards[(row.board, row.model)]
        gap = board - row.latency_us / 1e3
        two = f"{1000 / row.threads2_fps:>9.2f}" if row.threads2_fps else f"{'-':>9}"
        line = f"{row.model:<14}{board:>9.2f}{row.latency_us / 1e3:>8.2f}"
        if not row.sample:
            print(f"{line}{'-':>8}{'-':>6}{row.ddr_bytes / 1e6:>8.1f}{'-':>7}{two}{gap:>7.2f}{'-':>7}")
            continue
        graph = load_model(model_path(BoardEntry(f"sample:{row.sample}", board * 1e3, "", row.board, "", "")))
        if row.board not in profiles:
            profiles[row.board] = load_profile_file(args.profile or DATASHEET / f"{row.board}.toml")
        est = estimate_graph(graph, profiles[row.board])
        mb = float_output_bytes(graph) / 1e6
        out_mb.append(mb)
        gaps.append(gap)
        print(f"{line}{est.layers_us / 1e3:>8.2f}{est.layers_us / row.latency_us:>6.2f}{row.ddr_bytes / 1e6:>8.1f}"
              f"{est.ddr_bytes / 1e6:>7.1f}{two}{gap:>7.2f}{mb:>7.2f}")
    a, b = gap_line(out_mb, gaps)
    print(f"\nboard - hbdk = {a:.2f} ms + {b:.3f} ms per MB of float32 output "
          f"(1 ms per MB = 1 ns per byte) over {len(gaps)} models with a sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
