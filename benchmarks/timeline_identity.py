"""Record what ``layerscope estimate --timeline`` writes, to check that a change to the timeline keeps it identical.

Usage: ``PYTHONPATH=TREE/src .venv/bin/python benchmarks/timeline_identity.py OUT [--scale 1000,10000]``, once with
the tree before the change (e.g. ``/work/main``) and once with the tree after it, then ``diff -r OUT_BEFORE OUT_AFTER``.

Cases: five models of the onnx package's zoo (resnet50, densenet121, squeezenet, inception_v2, shufflenet) on every
bundled profile, the bundled yolov5s sample on rdk-s100 and rdk-x5, and ``benchmarks/scale.py``'s synthetic graphs
(``--scale``) on rdk-s100, rdk-x5 and rdk-x3 (two cores). All in one process (the CLI's ``main``). Per case:
``CASE.out``, the terminal output of ``estimate MODEL -t TARGET --top 0 --timeline -o RUN`` (its last line, the
run file's path, left out); ``CASE.timeline.json``, the ``timeline`` section's text as the run file holds it; and
``CASE.rest.sha256``, the digest of the rest of the run file (the tree's own folder, in the profile's source path,
written as ``<src>``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("COLUMNS", "160")

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from scale import model_path as scale_model  # noqa: E402

ZOO = ("resnet50", "densenet121", "squeezenet", "inception_v2", "shufflenet")
TARGETS = ("rdk-s100", "rdk-x5", "rdk-s100p", "rdk-x3", "a100-pcie", "a100-sxm", "host")


def cases(scales: list[int]) -> list[tuple[str, Path, str]]:
    from layerscope.samples import DEFAULT_SAMPLE, sample_path

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    found = [(f"{name}-{target}", light / f"light_{name}.onnx", target) for name in ZOO for target in TARGETS]
    found += [(f"{DEFAULT_SAMPLE}-{target}", sample_path(DEFAULT_SAMPLE), target) for target in ("rdk-s100", "rdk-x5")]
    found += [(f"scale-{n}-{target}", scale_model(n), target)
              for n in scales for target in ("rdk-s100", "rdk-x5", "rdk-x3")]
    return found


def record(out: Path, scales: list[int]) -> None:
    import layerscope
    from layerscope.cli.main import main

    tree = str(Path(layerscope.__file__).resolve().parent.parent)

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="layerscope-identity-") as tmp:
        for name, model, target in cases(scales):
            run = Path(tmp) / f"{name}.json"
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                code = main(["estimate", str(model), "-t", target, "--top", "0", "--timeline", "-o", str(run)])
            lines = [line for line in text.getvalue().splitlines() if not line.startswith("run file: ")]
            (out / f"{name}.out").write_text(f"exit {code}\n" + "\n".join(lines) + "\n")
            written = run.read_text() if run.exists() else ""
            start = written.find('\n "timeline": {')
            end = written.find("\n }", start + 1) if start >= 0 else -1
            section = written[start:end + 3] if start >= 0 else ""
            (out / f"{name}.timeline.json").write_text(section)
            rest = (written[:start] + written[end + 3:] if start >= 0 else written).replace(tree, "<src>")
            (out / f"{name}.rest.sha256").write_text(hashlib.sha256(rest.encode()).hexdigest() + "\n")
            print(f"{name}: exit {code}, timeline {len(section)} chars", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="folder to write the records to")
    parser.add_argument("--scale", default="1000,10000", help="layers of the synthetic graphs (default 1000,10000)")
    args = parser.parse_args()
    record(args.out, [int(n) for n in args.scale.split(",") if n])
    return 0


if __name__ == "__main__":
    sys.exit(main())
