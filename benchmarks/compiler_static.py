"""The RDK X5 estimate against the BPU compiler's own static figures: one model at a time, the part of a board latency
the BPU is busy with, apart from the runtime's per-inference work.

``benchmarks/data/compiler_static.csv`` holds, per model, what the zoo's reference logs print: hb_mapper's static
estimate of the compiled model (``latency = ... us, DDR = ... bytes`` for one frame on one BPU core) and the README's
single-thread and two-thread throughputs. Two threads keep the BPU busy, so 1000 / fps at two threads is the BPU's time
per frame, and the single-thread latency less it is the time per inference the BPU waits on the runtime (submitting,
handing the float32 outputs over). Printed per row: layerscope's layers-only estimate (no per-inference overhead) and
its DDR bytes beside the compiler's, the BPU time per frame at two threads, the runtime's part, and the outputs' float32
bytes that part grows with (2.9-3.1 ms for the 640x640 detectors' 4.84 MB, 4.9-5.1 ms for the segmenters' 9.19 MB,
0.23-0.25 ms for the classifiers' 4 kB).

Usage (from the repository root, layerscope importable)::

    python benchmarks/compiler_static.py                                  # the datasheet RDK X5 profile
    python benchmarks/compiler_static.py --profile path/to/profile.toml
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

from layerscope.estimator import estimate_graph
from layerscope.model import load_model
from layerscope.samples import parse_spec, sample_path
from layerscope.targets.schema import load_profile_file

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "compiler_static.csv"
DATASHEET = HERE / "data" / "profiles" / "rdk-x5.toml"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, default=DATASHEET, help="profile file (default: %(default)s)")
    args = parser.parse_args(argv)
    profile = load_profile_file(args.profile)
    print(f"{'model':<14}{'ls ms':>8}{'hbdk ms':>9}{'ls MB':>8}{'hbdk MB':>9}{'2-thr ms':>10}{'runtime ms':>12}"
          f"{'out MB':>8}")
    with DATA.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            one_ms, two_ms = 1000 / float(row["threads1_fps"]), 1000 / float(row["threads2_fps"])
            if row["sample"]:
                name, params = parse_spec(row["sample"])
                graph = load_model(sample_path(name, cache_dir=None, **params))
                est = estimate_graph(graph, profile)
                mine = f"{est.layers_us / 1e3:8.2f}{float(row['hbdk_latency_us']) / 1e3:9.2f}{est.ddr_bytes / 1e6:8.2f}"
            else:
                mine = f"{'-':>8}{float(row['hbdk_latency_us']) / 1e3:9.2f}{'-':>8}"
            print(f"{row['model']:<14}{mine}{float(row['hbdk_ddr_bytes']) / 1e6:9.2f}{two_ms:10.2f}"
                  f"{one_ms - two_ms:12.2f}{float(row['output_f32_bytes']) / 1e6:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
