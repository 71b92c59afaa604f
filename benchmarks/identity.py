"""Byte identity before/after: every output of layerscope's commands from two source trees, diffed.

Usage (from the repository root)::

    PYTHONPATH=src .venv/bin/python benchmarks/identity.py                    # base: merge-base of HEAD and main^1
    PYTHONPATH=src .venv/bin/python benchmarks/identity.py --base HEAD~3
    PYTHONPATH=src .venv/bin/python benchmarks/identity.py --base-tree /work/base [--corpus] [--keep DIR]

Options: ``--new-tree PATH`` (the tree after the change, default this checkout), ``--models a,b`` (only these
samples and zoo models: a quick check), ``--only-different`` (print only what differs), ``--keep DIR`` (both sides'
outputs kept).

The new tree is this checkout's ``src/`` (its working files, edits included). The base tree is REV's ``src/``
read out with ``git archive`` into a temporary folder (removed at the end; the repository's git state is not
touched), or the source tree at ``--base-tree PATH``. Each tree runs in one child process of the same venv with
``PYTHONPATH=<tree>/src`` that calls the CLI's ``main(argv)`` once per command, its stdout and stderr captured
(``COLUMNS=120``, ``PYTHONHASHSEED=0``), in its own working folder; a few commands also run as whole processes
(``python -m layerscope``) to cover the console entry. The two children run at the same time.

Deterministic commands (each case's outputs compared file by file):

- ``schema``, ``targets``, ``backends``, ``--help``; ``schema`` and ``estimate`` as whole processes;
- for each bundled sample (built by each tree into its folder, the ``.onnx`` compared too) and each ONNX zoo model
  the tests use (``onnx/backend/test/data/light``), on host, rdk-s100, rdk-x5 and a100-pcie:
  ``estimate M -t T -o run.json`` (stdout, run file), ``estimate M -t T --timeline --html est.html -o tl.json.gz``
  (stdout, HTML, gzip run file), ``report run.json --format table|csv|md`` (stdout),
  ``report run.json --format html|trace -o ...`` and ``report tl.json.gz --format trace -o ...``;
- with ``--corpus``: ``estimate`` (run file and stdout) of each model of ``benchmarks/realworld_models.toml`` on
  host and rdk-s100 with its manifest arguments (``benchmarks/realworld.py`` fetches them into its cache; a model
  that cannot be fetched is named and left out).

Measured commands differ by value from run to run, so one run file of each kind is made once, with the new tree,
as whole processes (ONNX Runtime ``profile`` twice, ``bench``, OpenVINO ``profile`` where it is installed, ``import``
of the TensorRT fixtures in ``../shared/fixtures``, a quick ``bisect``, ``compare`` of the two profiles), and both
trees then read each of these same files: ``report --format table|csv|md|html|trace``, ``reconcile -o``,
``advise --no-measure -o`` and a load->save round trip (``layerscope.load(RUN).save(OUT)``). An error is an output
too: its one line and exit code are compared.

Masks (applied to both sides before comparing; nothing else is masked):

- the trees' source folders (``<src>``: profiles' ``source_path``; on both sides, as the measured run files both
  read hold the new tree's) and the side's working folder (``<work>``: model and output paths), the absolute
  paths that must differ between the sides;
- the tool version string (``<version>``), only when the two trees' ``__version__`` differ;
- the gzip run files are compared by their text (their bytes are deterministic, but a compressed file has no lines
  to name a difference by);
- each sample's build cache (``samples-cache/``) is not compared: its file name carries the builder's version; the
  model itself is compared as ``models/NAME.onnx``.

The host profile's measured machine block is not masked: both trees read the same cached probe (the host is probed
once, by the new tree, into a cache folder of this run).

Cost: about 1,170 commands per tree, ~55 s of CPU each (the two run at once: about a minute on two idle cores);
``--corpus`` adds two estimates per public model.

Printed: one line per compared output (``same`` or ``DIFFERENT`` with the first differing line), then a total.
Exit status 0 when every output is the same, 1 otherwise, 2 on a setup error (no base, a child that crashed).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "benchmarks"
FIXTURES = ROOT.parent / "shared" / "fixtures"
TARGETS = ("host", "rdk-s100", "rdk-x5", "a100-pcie")
CORPUS_TARGETS = ("host", "rdk-s100")
REPORT_STDOUT = ("table", "csv", "md")
#: Measured run files both trees read (made once by the new tree); the model they measure.
MEASURED_MODEL = "squeezenet"
#: Folders of a side not compared (see the module's masks).
SKIPPED = ("samples-cache",)
#: Environment of every child: a fixed terminal width and hash seed, no colour.
CHILD_ENV = {"COLUMNS": "120", "LINES": "50", "PYTHONHASHSEED": "0", "NO_COLOR": "1", "TERM": "dumb"}


@dataclass(frozen=True)
class Job:
    """One command for a side's child. ``kind``: ``cli`` (``main(argv)`` in process), ``process`` (``python -m
    layerscope argv``), ``sample`` (build sample ``argv[0]`` into ``models/``) or ``roundtrip`` (load ``argv[0]``,
    save ``argv[1]``). ``name``: where its stdout and stderr go (``NAME.out``, ``NAME.err``), relative to the side's
    folder."""

    name: str
    argv: tuple[str, ...]
    kind: str = "cli"


@dataclass(frozen=True)
class Outcome:
    """One compared output: its path relative to the sides' folders, whether it is the same, and if not the first
    differing line (1-based) with each side's text of it."""

    path: str
    same: bool
    detail: str = ""


# ------------------------------------------------------------------------------------------------- comparing

def masked(data: bytes, masks: Sequence[tuple[str, str]]) -> bytes:
    """``data`` with each ``(text, token)`` of ``masks`` replaced, longest text first."""
    for text, token in sorted(masks, key=lambda m: -len(m[0])):
        if text:
            data = data.replace(text.encode(), token.encode())
    return data


def _content(path: Path) -> bytes:
    """A file's bytes, a gzip file's decompressed."""
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _around(line: bytes | None, column: int, width: int = 60) -> str:
    """``line``'s text from a little before ``column`` (``<end>`` for no line)."""
    if line is None:
        return "<end>"
    start = max(0, column - 20)
    text = line[start:start + width].decode("utf-8", "replace")
    return repr(("..." if start else "") + text + ("..." if start + width < len(line) else ""))


def first_difference(base: bytes, new: bytes) -> str:
    """Where two texts first differ: ``line N col C: base 'text' | new 'text'``, each side's text from a little
    before the first differing character (a missing line is ``<end>``)."""
    a, b = base.splitlines(), new.splitlines()
    for number in range(max(len(a), len(b))):
        left = a[number] if number < len(a) else None
        right = b[number] if number < len(b) else None
        if left != right:
            column = next((i for i, (x, y) in enumerate(zip(left or b"", right or b"", strict=False)) if x != y),
                          min(len(left or b""), len(right or b"")))
            return f"line {number + 1} col {column + 1}: base {_around(left, column)} | new {_around(right, column)}"
    return "same lines, different line endings"


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and p.relative_to(folder).parts[0] not in SKIPPED}


def compare_folders(base: Path, new: Path, base_masks: Sequence[tuple[str, str]] = (),
                    new_masks: Sequence[tuple[str, str]] = ()) -> list[Outcome]:
    """Every file under ``base`` or ``new`` (but :data:`SKIPPED` folders), sorted by path: the same when both sides
    hold it and their contents (gzip files decompressed) are equal after each side's masks."""
    outcomes = []
    for rel in sorted(_files(base) | _files(new)):
        left, right = base / rel, new / rel
        if not left.is_file() or not right.is_file():
            outcomes.append(Outcome(rel, False, f"only in {'new' if right.is_file() else 'base'}"))
            continue
        a, b = masked(_content(left), base_masks), masked(_content(right), new_masks)
        outcomes.append(Outcome(rel, True) if a == b else Outcome(rel, False, first_difference(a, b)))
    return outcomes


# ------------------------------------------------------------------------------------------------- the jobs

def _zoo() -> list[tuple[str, Path]]:
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return [(p.stem.removeprefix("light_"), p) for p in sorted(light.glob("light_*.onnx"))]


def _samples() -> list[str]:
    from layerscope.samples import SAMPLES

    return list(SAMPLES)


def estimate_jobs(case: str, model: str, target: str, extra: Sequence[str] = ()) -> list[Job]:
    """The deterministic commands of one model on one target, into folder ``case``."""
    run, tl = f"{case}/run.json", f"{case}/timeline.json.gz"
    jobs = [Job(f"{case}/estimate", ("estimate", model, "-t", target, *extra, "-o", run)),
            Job(f"{case}/estimate-timeline",
                ("estimate", model, "-t", target, *extra, "--timeline", "--html", f"{case}/estimate.html", "-o", tl))]
    jobs += [Job(f"{case}/report-{fmt}", ("report", run, "--format", fmt)) for fmt in REPORT_STDOUT]
    jobs += [Job(f"{case}/report-html", ("report", run, "--format", "html", "-o", f"{case}/report.html")),
             Job(f"{case}/report-trace", ("report", run, "--format", "trace", "-o", f"{case}/trace.json")),
             Job(f"{case}/report-timeline-trace",
                 ("report", tl, "--format", "trace", "-o", f"{case}/timeline-trace.json"))]
    return jobs


def deterministic_jobs(samples: Sequence[str], zoo: Sequence[tuple[str, Path]],
                       corpus: Sequence[tuple[str, Path, tuple[str, ...]]]) -> list[Job]:
    """Every deterministic command (relative paths: each side runs in its own folder)."""
    jobs = [Job("cli/schema", ("schema",)), Job("cli/targets", ("targets",)), Job("cli/help", ("--help",)),
            Job("cli/backends", ("backends",)),
            Job("process/schema", ("schema",), "process")]
    jobs += [Job(f"models/{name}.build", (name,), "sample") for name in samples]
    if samples:
        jobs.append(Job("process/estimate", ("estimate", f"models/{samples[0]}.onnx", "-t", "rdk-s100",
                                             "-o", "process/run.json"), "process"))
    for target in TARGETS:
        jobs += [j for name in samples for j in estimate_jobs(f"samples/{name}/{target}", f"models/{name}.onnx",
                                                              target)]
        jobs += [j for name, path in zoo for j in estimate_jobs(f"zoo/{name}/{target}", str(path), target)]
    for name, path, args in corpus:
        for target in CORPUS_TARGETS:
            case = f"corpus/{name}/{target}"
            jobs += [Job(f"{case}/estimate", ("estimate", str(path), "-t", target, *args, "-o", f"{case}/run.json"))]
    return jobs


def measured_commands(folder: Path, model: Path, openvino: bool) -> list[tuple[str, list[str]]]:
    """The commands that make the measured run files (run once, by the new tree): name, argv."""
    quick = ["--runs", "5", "--warmup", "1", "--threads", "1", "--top", "5"]
    commands = [("profile", ["profile", str(model), "-t", "rdk-s100", *quick, "-o", str(folder / "profile.json")]),
                ("profile2", ["profile", str(model), "-t", "rdk-s100", *quick, "-o", str(folder / "profile2.json")]),
                ("bench", ["bench", str(model), "--runs", "20", "--warmup", "2", "--threads", "1",
                           "-o", str(folder / "bench.json")]),
                ("bisect", ["bisect", str(model), "-t", "rdk-s100", "--segments", "3", "--repeats", "3", "--pilot",
                            "1", "--budget", "30", "--threads", "1", "--warm-with", "self", "--no-cache",
                            "--boundary-runs", "0", "--resamples", "100", "-o", str(folder / "bisect.json")])]
    trt = sorted((FIXTURES / "tensorrt" / "resnet-a100-fp16").glob("*.json"))
    if trt:
        commands.append(("import", ["import", *map(str, trt), "-o", str(folder / "import.json")]))
    if openvino:
        commands.append(("openvino", ["profile", str(model), "-t", "rdk-s100", "--backend", "openvino", *quick,
                                      "-o", str(folder / "openvino.json")]))
    commands.append(("compare", ["compare", str(folder / "profile.json"), str(folder / "profile2.json"),
                                 "-o", str(folder / "compare.json")]))
    return commands


def reading_jobs(runs: Sequence[Path]) -> list[Job]:
    """What both trees do with each measured run file: reports, reconcile, advise and a round trip."""
    jobs = []
    for run in runs:
        case = f"measured/{run.stem}"
        jobs += [Job(f"{case}/report-{fmt}", ("report", str(run), "--format", fmt)) for fmt in REPORT_STDOUT]
        jobs += [Job(f"{case}/report-html", ("report", str(run), "--format", "html", "-o", f"{case}/report.html")),
                 Job(f"{case}/report-trace", ("report", str(run), "--format", "trace", "-o", f"{case}/trace.json")),
                 Job(f"{case}/reconcile", ("reconcile", str(run), "-o", f"{case}/reconciled.json")),
                 Job(f"{case}/advise", ("advise", str(run), "--no-measure", "-o", f"{case}/advised.json")),
                 Job(f"{case}/roundtrip", (str(run), f"{case}/roundtrip.json"), "roundtrip")]
    return jobs


# ------------------------------------------------------------------------------------------------- a side's child

def _run_job(job: Job) -> tuple[str, str, int]:
    """Run one job in this process (the tree on ``sys.path``); its stdout, stderr and exit code."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = _dispatch(job)
        except Exception as exc:  # a crash of the tree is an output to compare, not the end of the benchmark
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            code = -1
    return out.getvalue(), err.getvalue(), code


def _dispatch(job: Job) -> int:
    if job.kind == "cli":
        from layerscope.cli.main import main

        return main(list(job.argv))
    if job.kind == "process":
        done = subprocess.run([sys.executable, "-m", "layerscope", *job.argv], capture_output=True, text=True,
                              check=False)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode
    if job.kind == "sample":
        from layerscope.samples import sample_path

        built = sample_path(job.argv[0], cache_dir="samples-cache")
        shutil.copyfile(built, f"models/{job.argv[0]}.onnx")
        return 0
    if job.kind == "roundtrip":
        import layerscope

        Path(job.argv[1]).parent.mkdir(parents=True, exist_ok=True)
        layerscope.load(job.argv[0]).save(job.argv[1])
        return 0
    raise ValueError(f"unknown job kind {job.kind!r}")


def child(jobs_file: Path) -> int:
    """A side's child: run every job of ``jobs_file`` in the current folder, writing ``NAME.out`` and ``NAME.err``
    (stderr, then ``exit N``) beside the files the commands write."""
    jobs = [Job(j["name"], tuple(j["argv"]), j["kind"]) for j in json.loads(jobs_file.read_text())]
    for job in jobs:
        relative = [Path(a) for a in job.argv if "/" in a and not Path(a).is_absolute()]
        for path in {Path(job.name).parent, *(p.parent for p in relative)}:
            path.mkdir(parents=True, exist_ok=True)
        stdout, stderr, code = _run_job(job)
        Path(f"{job.name}.out").write_text(stdout)
        Path(f"{job.name}.err").write_text(f"{stderr}exit {code}\n")
    return 0


# ------------------------------------------------------------------------------------------------- the driver

def base_tree(rev: str, into: Path) -> Path:
    """REV's ``src/`` written under ``into`` by ``git archive`` (the repository is only read); ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"], capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def default_base() -> str:
    """The merge-base of HEAD and main's first parent (on main: the commit before HEAD)."""
    done = subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main^1"], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def child_env(tree: Path, cache: Path, pycache: Path) -> dict[str, str]:
    """The environment of a child of ``tree``: its ``src`` first on the path, the shared cache folder (host probe),
    a bytecode cache of its own."""
    return {**os.environ, **CHILD_ENV, "PYTHONPATH": str(tree / "src"), "LAYERSCOPE_CACHE_DIR": str(cache),
            "PYTHONPYCACHEPREFIX": str(pycache), "PYTHONDONTWRITEBYTECODE": ""}


def tree_version(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", "from layerscope import __version__; print(__version__)"],
                          env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def probe_host(model: Path, env: dict[str, str]) -> None:
    """Probe the host once, with the new tree, into the shared cache: both sides then read the same measurement."""
    subprocess.run([sys.executable, "-m", "layerscope", "estimate", str(model), "-t", "host", "--top", "0"], env=env,
                   capture_output=True, check=False)


def make_measured(folder: Path, model: Path, env: dict[str, str]) -> list[Path]:
    """The measured run files, made by the new tree (``env``); the ones made (a failed command is named)."""
    folder.mkdir(parents=True, exist_ok=True)
    openvino = subprocess.run([sys.executable, "-c", "import openvino"], env=env, capture_output=True,
                              check=False).returncode == 0
    made = []
    for name, argv in measured_commands(folder, model, openvino):
        done = subprocess.run([sys.executable, "-m", "layerscope", *argv], env=env, capture_output=True, text=True,
                              check=False)
        path = folder / f"{name}.json"
        if done.returncode == 0 and path.is_file():
            made.append(path)
        else:
            print(f"measured {name}: exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]}")
    return made


def corpus_models() -> list[tuple[str, Path, tuple[str, ...]]]:
    """The public-model corpus as ``benchmarks/realworld.py`` prepares it: name, path, manifest arguments."""
    sys.path.insert(0, str(HERE))
    import realworld

    entries = realworld.load_manifest()
    found = []
    for item in realworld.prepare(entries, realworld.CACHE, entries):
        if item.path is None:
            print(f"corpus {item.entry.name}: left out: {item.error}")
        else:
            found.append((item.entry.name, item.path, item.entry.args))
    return found


@contextlib.contextmanager
def _sides(work: Path) -> Iterator[tuple[Path, Path]]:
    base, new = work / "base", work / "new"
    for side in (base, new):
        (side / "models").mkdir(parents=True)
    yield base, new


def run_sides(jobs: Sequence[Job], trees: dict[str, Path], work: Path, cache: Path) -> None:
    """Run ``jobs`` with each tree in ``work/<side>``, the two children at once."""
    jobs_file = work / "jobs.json"
    jobs_file.write_text(json.dumps([{"name": j.name, "argv": list(j.argv), "kind": j.kind} for j in jobs]))
    children = []
    for side, tree in trees.items():
        env = child_env(tree, cache, work / f"pycache-{side}")
        children.append((side, subprocess.Popen([sys.executable, __file__, "--child", str(jobs_file)], env=env,
                                                cwd=work / side)))
    failed = []
    for side, proc in children:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        print(f"identity: {side} child: {len(jobs)} commands, {usage.ru_utime + usage.ru_stime:.0f} s CPU")
        if proc.returncode != 0:
            failed.append(side)
    if failed:
        raise RuntimeError(f"the {', '.join(failed)} child failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--base", metavar="REV", help="git revision of the base (default: merge-base with main^1)")
    where.add_argument("--base-tree", metavar="PATH", type=Path, help="a source tree (holding src/) as the base")
    parser.add_argument("--new-tree", metavar="PATH", type=Path, default=ROOT,
                        help="the source tree after the change (default: this checkout)")
    parser.add_argument("--corpus", action="store_true", help="also the public-model corpus (realworld_models.toml)")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="keep both sides' outputs in DIR")
    parser.add_argument("--models", metavar="NAMES", help="only these samples and zoo models (comma-separated), "
                        "for a quick check")
    parser.add_argument("--only-different", action="store_true", help="print only the outputs that differ")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="layerscope-identity-") as tmp:
        work = Path(tmp)
        try:
            for tree in (args.base_tree, args.new_tree):
                if tree is not None and not (tree / "src" / "layerscope").is_dir():
                    print(f"identity: {tree} holds no src/layerscope", file=sys.stderr)
                    return 2
            if args.base_tree:
                base = args.base_tree.resolve()
                label = str(base)
            else:
                rev = args.base or default_base()
                label = rev
                base = base_tree(rev, work / "base-tree")
        except subprocess.CalledProcessError as exc:
            print(f"identity: cannot read the base: {exc.stderr.decode().strip() if exc.stderr else exc}",
                  file=sys.stderr)
            return 2
        new = args.new_tree.resolve()
        trees = {"base": base, "new": new}
        cache = work / "cache"
        new_env = child_env(new, cache, work / "pycache-new")
        versions = {side: tree_version(child_env(tree, cache, work / f"pycache-{side}"))
                    for side, tree in trees.items()}
        corpus = corpus_models() if args.corpus else []
        chosen = set(args.models.split(",")) if args.models else None
        samples = [name for name in _samples() if chosen is None or name in chosen]
        zoo = [(name, path) for name, path in _zoo() if chosen is None or name in chosen]
        measured_model = dict(_zoo())[MEASURED_MODEL]
        probe_host(measured_model, new_env)
        measured = make_measured(work / "measured", measured_model, new_env)
        jobs = deterministic_jobs(samples, zoo, corpus) + reading_jobs(measured)
        print(f"identity: base {label} ({versions['base']}) against {new} ({versions['new']}): "
              f"{len(jobs)} commands per tree, {len(measured)} measured run files")
        with _sides(work) as (base_dir, new_dir):
            try:
                run_sides(jobs, trees, work, cache)
            except RuntimeError as exc:
                print(f"identity: {exc}", file=sys.stderr)
                return 2
            version_masks = ([(versions["base"], "<version>")], [(versions["new"], "<version>")]) \
                if versions["base"] != versions["new"] else ([], [])
            sources = [(str(tree / "src"), "<src>") for tree in trees.values()]  # the measured runs hold the new one
            outcomes = compare_folders(
                base_dir, new_dir,
                [*sources, (str(base_dir), "<work>"), *version_masks[0]],
                [*sources, (str(new_dir), "<work>"), *version_masks[1]])
            if args.keep:
                shutil.copytree(work, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("pycache-*"))
    different = [o for o in outcomes if not o.same]
    for outcome in outcomes:
        if not (outcome.same and args.only_different):
            print(f"{'same' if outcome.same else 'DIFFERENT'}  {outcome.path}"
                  + (f"  {outcome.detail}" if outcome.detail else ""))
    print(f"identity: {len(outcomes) - len(different)} of {len(outcomes)} outputs the same, {len(different)} "
          f"different ({time.monotonic() - started:.0f} s)")
    return 0 if not different else 1


if __name__ == "__main__":
    sys.exit(main())
