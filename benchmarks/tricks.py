"""What each of layerscope's speed tricks buys: the same command with the trick and with it patched out.

Usage (from the repository root)::

    PYTHONPATH=src .venv/bin/python benchmarks/tricks.py [--runs 5] [--runs-100k 3] [--sizes 700,10000,100000]
        [--only exit,gc,freeze,prefetch,wire,sparse,offload,lazy,lazy-own] [--json out/tricks.json]

Nothing in ``src`` is edited: each run is a child process (``python -c WRAPPER VARIANT ARGS``) that applies the
variant's patch, then calls ``layerscope.cli.start.entry`` with ARGS, as the console script does. The tricks and what
"without" means:

- ``exit``: ``entry`` ends with ``exit_now`` (the ``atexit`` handlers, then ``os._exit``: no interpreter teardown);
  without: ``exit_now`` replaced by ``sys.exit``.
- ``gc``: ``layerscope.collector.collector_paused`` (the cyclic collector off while many objects are made);
  without: a context manager that does nothing (patched before any module binds the name).
- ``freeze``: the console entry's ``gc.freeze()`` once the command's modules are imported (``layerscope.cli.main``:
  the objects made so far, which outlive the command, out of every later collection's walk); without: ``gc.freeze``
  a function that does nothing.
- ``prefetch``: the model file hashed from start-up, on a thread, while the modules are imported
  (``layerscope.cli.start.hash_model``); without: ``hash_model`` does nothing, and the loader hashes the file from
  the first weight its walk skips, as a Python caller's load does. It buys wall time on a second core, not CPU.
- ``wire``: the protobuf wire-level reader (``layerscope.model.validate.bytes_layout``: the model parsed without
  its large weights' bytes, the checker given a model cut from the file's bytes); without: ``bytes_layout``
  returns ``None`` and the file is read whole (no ``sparse``), the loader's own fallback: the whole file parsed by
  protobuf, the checker's light copy built from the parsed model.
- ``sparse``: a big model's file read without its large weights' values (``layerscope.model.sparse_read``, the
  file hashed from disk on a thread meanwhile); without: ``SPARSE_MIN_BYTES`` raised past every file, which is then
  read whole into one buffer and hashed from it.
- ``offload``: a big model's shape inference made in a forked child while the loader checks the model
  (:mod:`layerscope.offload`, enabled by the console entry); without: ``offload.enable`` does nothing, and the
  loader infers the shapes itself after its checks. It buys wall time on a second core, not CPU: the CPU column
  counts the child too (``wait4`` of the command's process includes the children it reaped); the peak RSS is the
  command's own, the child's (a copy of the parent's pages at the fork, most of them shared) is not in it.
- ``lazy``: layerscope's function-local imports (beyond the CLI dispatcher, which stays lazy in both); without:
  every module the command's modules import inside functions, followed transitively (read from the source with
  ``ast``; ``if TYPE_CHECKING`` blocks left out), imported before ``entry`` runs, as if each were imported at the
  top of its module. Measured on ``estimate`` of the 700-node model and on ``layerscope --help``. ``lazy-own``: the
  same with only layerscope's own modules made eager (a function-local import of another package, onnxruntime,
  OpenVINO, scikit-learn, stays where it is): what keeping just the heavy third-party imports lazy would cost.

In both variants of a trick the wrapper imports the same modules before ``entry`` (``wire`` imports the
model loader up front to patch it, ``sparse`` the reader), so only the patch differs.

Models: ``benchmarks/run.py``'s 700-node detector (``yolov5s_deep``) and ``benchmarks/scale.py``'s 10k- and
100k-layer graphs, built into ``benchmarks/.cache``. Command: ``estimate MODEL -t rdk-s100 -o RUN.json`` (a fresh
run file each time). Each (trick, model) alternates with/without (the order flipped every round) for ``--runs``
rounds (``--runs-100k`` at 100k layers); bytecode cached in a temporary ``PYTHONPYCACHEPREFIX`` filled by an
untimed warm-up. Measured per child: CPU seconds (user + system, ``wait4``), wall seconds (``perf_counter``) and
peak RSS (the child's ``VmHWM``, read by an ``atexit`` handler of the wrapper: ``ru_maxrss`` of a child keeps the
high-water mark of the parent it was forked from).

Printed: per trick and model, the median CPU time, wall time and peak RSS with and without, what the trick buys
(median of the paired differences without - with, in ms and % of the without median) and its spread (half the
interquartile range of the paired differences: unlike their range, it does not grow with the number of pairs, which
one outlier of a shared machine widens), and a verdict: ``keep`` when on some model it buys more than its spread and
at least 2% or 20 ms of CPU or of wall time (or 2% of peak RSS), else ``remove``. Cost: about 10 minutes of CPU with
the defaults, most of it the 100k-layer estimates.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
sys.path.insert(0, str(ROOT / "benchmarks"))
from run import CACHE, bytecode_cached_env  # noqa: E402
from scale import model_path as scale_model  # noqa: E402

TARGET = "rdk-s100"
TRICKS = ("exit", "gc", "freeze", "prefetch", "wire", "sparse", "offload", "lazy", "lazy-own")

#: The child: apply VARIANT's patch (``sys.argv[1]``: ``TRICK:with`` or ``TRICK:without``), import the modules
#: named in ``LAYERSCOPE_TRICKS_EAGER`` (one a line) for ``lazy:without``, then run the CLI on the rest of argv.
WRAPPER = r"""
import atexit, os, sys
def peak():
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["LAYERSCOPE_TRICKS_PEAK"], "w") as out:
        out.write(kb)
atexit.register(peak)
trick, variant = sys.argv[1].split(":")
without = variant == "without"
if trick == "exit" and without:
    import layerscope.cli.main as m
    m.exit_now = lambda code: sys.exit(code)
elif trick == "gc" and without:
    import contextlib
    import layerscope.collector as c
    c.collector_paused = contextlib.nullcontext
elif trick == "freeze" and without:
    import gc
    gc.freeze = lambda: None
elif trick == "prefetch" and without:
    import layerscope.cli.start as start
    start.hash_model = lambda args: None
elif trick in ("wire", "sparse"):
    import layerscope.model.load as load
    import layerscope.model.sparse_read as sparse
    import layerscope.model.validate as validate
    if without:
        sparse.SPARSE_MIN_BYTES = 1 << 62
    if trick == "wire" and without:
        load.bytes_layout = validate.bytes_layout = lambda data: None
elif trick == "offload" and without:
    import layerscope.offload as offload
    offload.enable = lambda: None
elif trick.startswith("lazy") and without:
    import importlib
    for name in os.environ["LAYERSCOPE_TRICKS_EAGER"].split():
        try:
            importlib.import_module(name)
        except ImportError:
            pass
from layerscope.cli.start import entry
sys.argv = ["layerscope", *sys.argv[2:]]
entry()
"""


# ---------------------------------------------------------------------------------------------- lazy imports

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, modules: set[str]) -> list[str]:
    """The modules an import statement imports (``from P import x`` also ``P.x`` when that is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level or node.module is None:
        return []
    found = [node.module]
    found += [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, modules: set[str]) -> tuple[set[str], set[str]]:
    """A module's imports at module level and inside functions (``if TYPE_CHECKING`` blocks left out)."""
    top: set[str] = set()
    local: set[str] = set()

    def walk(nodes: Iterable[ast.AST], in_function: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                walk(node.orelse, in_function)
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                (local if in_function else top).update(_imported(node, modules))
                continue
            inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            walk(ast.iter_child_nodes(node), inner)

    walk(tree.body, False)
    return top, local


def import_graph() -> dict[str, tuple[set[str], set[str]]]:
    """Each layerscope module's (module-level, function-local) imports, from its source."""
    paths = {_module_name(p): p for p in (SRC / "layerscope").rglob("*.py")}
    names = set(paths)
    return {name: _imports(ast.parse(path.read_text()), names) for name, path in paths.items()}


def eager_closure(start: Iterable[str], graph: dict[str, tuple[set[str], set[str]]], own: bool = False) -> list[str]:
    """The modules imported from ``start`` when every function-local import counts as a module-level one (a
    package's ``__init__`` counted for each submodule), followed through layerscope's modules; outside modules are
    leaves (``own``: a function-local import of an outside module is left out). The CLI dispatcher's ``importlib``
    imports are no ``import`` statements: they stay lazy."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        if name in graph:
            top, local = graph[name]
            todo += sorted(top | {m for m in local if not own or m.split(".")[0] == "layerscope"})
    return sorted(seen)


# ---------------------------------------------------------------------------------------------- running

@dataclass
class Series:
    """The runs of one (trick, case): CPU and wall seconds and peak RSS (MB) with and without the trick, in pair
    order."""

    trick: str
    case: str
    cpu_with: list[float] = field(default_factory=list)
    cpu_without: list[float] = field(default_factory=list)
    wall_with: list[float] = field(default_factory=list)
    wall_without: list[float] = field(default_factory=list)
    rss_with: list[float] = field(default_factory=list)
    rss_without: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run_child(variant: str, args: Sequence[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """One child: CPU seconds (user + system), wall seconds, peak RSS in MB, and its stderr's last line when it
    failed."""
    with tempfile.TemporaryFile("w+") as err, tempfile.TemporaryDirectory() as tmp:
        peak = Path(tmp) / "peak"
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", WRAPPER, variant, *args], stdout=subprocess.DEVNULL,
                                env={**env, "LAYERSCOPE_TRICKS_PEAK": str(peak)}, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        failed = "" if proc.returncode == 0 else (err.read().strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        peak_mb = int(peak.read_text()) / 1024 if peak.is_file() else float("nan")
    return usage.ru_utime + usage.ru_stime, wall, peak_mb, failed


def measure(trick: str, case: str, args_of: Callable[[int], list[str]], rounds: int, env: dict[str, str]) -> Series:
    """``rounds`` alternating pairs of children with and without ``trick``; ``args_of(i)`` the argv of run ``i``."""
    series = Series(trick, case)
    for i in range(rounds):
        order = ("with", "without") if i % 2 == 0 else ("without", "with")
        for variant in order:
            cpu, wall, rss, error = run_child(f"{trick}:{variant}", args_of(i), env)
            if error:
                series.errors.append(f"{variant}: {error}")
            getattr(series, f"cpu_{variant}").append(cpu)
            getattr(series, f"wall_{variant}").append(wall)
            getattr(series, f"rss_{variant}").append(rss)
    return series


@dataclass(frozen=True)
class Figure:
    """What a trick buys on one case: medians, the median paired difference and its spread."""

    cpu_with_ms: float
    cpu_without_ms: float
    gain_ms: float
    gain_pct: float
    spread_ms: float
    wall_with_ms: float
    wall_without_ms: float
    wall_gain_ms: float
    wall_gain_pct: float
    wall_spread_ms: float
    rss_with_mb: float
    rss_without_mb: float
    rss_gain_mb: float
    rss_spread_mb: float

    @property
    def earns(self) -> bool:
        """More than its spread and at least 2% or 20 ms of CPU or of wall time, or 2% of peak RSS beyond its
        spread."""
        cpu = self.gain_ms > self.spread_ms and (self.gain_pct >= 2.0 or self.gain_ms >= 20.0)
        wall = self.wall_gain_ms > self.wall_spread_ms and (self.wall_gain_pct >= 2.0 or self.wall_gain_ms >= 20.0)
        rss = self.rss_gain_mb > self.rss_spread_mb and self.rss_gain_mb >= 0.02 * self.rss_without_mb
        return cpu or wall or rss


def figure(series: Series) -> Figure:
    """Medians and paired differences (without - with) of ``series``; spread: half their interquartile range."""
    cpu = [b - a for a, b in zip(series.cpu_with, series.cpu_without, strict=True)]
    wall = [b - a for a, b in zip(series.wall_with, series.wall_without, strict=True)]
    rss = [b - a for a, b in zip(series.rss_with, series.rss_without, strict=True)]
    without = statistics.median(series.cpu_without)
    wall_without = statistics.median(series.wall_without)
    return Figure(cpu_with_ms=1000 * statistics.median(series.cpu_with), cpu_without_ms=1000 * without,
                  gain_ms=1000 * statistics.median(cpu), gain_pct=100 * statistics.median(cpu) / without,
                  spread_ms=1000 * _half_iqr(cpu),
                  wall_with_ms=1000 * statistics.median(series.wall_with), wall_without_ms=1000 * wall_without,
                  wall_gain_ms=1000 * statistics.median(wall),
                  wall_gain_pct=100 * statistics.median(wall) / wall_without,
                  wall_spread_ms=1000 * _half_iqr(wall),
                  rss_with_mb=statistics.median(series.rss_with), rss_without_mb=statistics.median(series.rss_without),
                  rss_gain_mb=statistics.median(rss), rss_spread_mb=_half_iqr(rss))


def _half_iqr(values: Sequence[float]) -> float:
    """Half the interquartile range of ``values`` (0 for a single value)."""
    if len(values) < 2:
        return 0.0
    low, _, high = statistics.quantiles(values, n=4)
    return (high - low) / 2


def cases(sizes: Sequence[int]) -> dict[str, Path]:
    """The models by label: ``700`` is run.py's detector, the others scale.py's graphs."""
    from layerscope.samples import BENCHMARK_SAMPLE, sample_path

    found = {}
    for size in sizes:
        found[str(size)] = sample_path(BENCHMARK_SAMPLE, cache_dir=CACHE) if size == 700 else scale_model(size)
    return found


def table(rows: Sequence[tuple[str, str, Figure]]) -> str:
    head = (f"{'trick':<12}{'case':>10}{'CPU with':>10}{'without':>9}{'buys ms':>9}{'%':>7}{'+-':>7}"
            f"{'wall with':>11}{'without':>9}{'buys ms':>9}{'%':>7}{'+-':>7}"
            f"{'RSS with':>10}{'without':>9}{'buys MB':>9}{'+-':>6}")
    lines = [head, "-" * len(head)]
    for trick, case, f in rows:
        lines.append(f"{trick:<12}{case:>10}{f.cpu_with_ms:>9.0f} {f.cpu_without_ms:>8.0f} {f.gain_ms:>8.0f} "
                     f"{f.gain_pct:>6.1f} {f.spread_ms:>6.0f} {f.wall_with_ms:>10.0f} {f.wall_without_ms:>8.0f} "
                     f"{f.wall_gain_ms:>8.0f} {f.wall_gain_pct:>6.1f} {f.wall_spread_ms:>6.0f} "
                     f"{f.rss_with_mb:>9.0f} {f.rss_without_mb:>8.0f} {f.rss_gain_mb:>8.1f} {f.rss_spread_mb:>5.1f}")
    return "\n".join(lines)


def plan(tricks: Sequence[str], models: dict[str, Path]) -> list[tuple[str, str, list[str] | None]]:
    """(trick, case, argv or ``None`` for an estimate of model ``case``) in run order."""
    steps: list[tuple[str, str, list[str] | None]] = []
    for trick in tricks:
        if trick.startswith("lazy"):
            steps += [(trick, "700", None)] if "700" in models else []
            steps.append((trick, "--help", ["--help"]))
        else:
            steps += [(trick, case, None) for case in models]
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="alternating pairs per case (default 5)")
    parser.add_argument("--runs-100k", type=int, default=3, help="pairs at 100k layers (default 3)")
    parser.add_argument("--sizes", default="700,10000,100000", help="models: 700 (run.py's) and scale.py layers")
    parser.add_argument("--only", default=",".join(TRICKS), help=f"tricks to measure (default {','.join(TRICKS)})")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    tricks = [t for t in args.only.split(",") if t]
    unknown = sorted(set(tricks) - set(TRICKS))
    if unknown:
        parser.error(f"unknown trick(s) {', '.join(unknown)}; known: {', '.join(TRICKS)}")
    models = cases([int(s) for s in args.sizes.split(",") if s])
    graph = import_graph()
    results: list[tuple[str, str, Figure]] = []
    raw: list[Series] = []
    with tempfile.TemporaryDirectory(prefix="layerscope-tricks-") as tmp:
        env = {**bytecode_cached_env(Path(tmp) / "pycache"), "PYTHONPATH": str(SRC)}
        warm = scale_model(1000)
        for variant in ("exit:with", "lazy:without"):  # bytecode of every module either variant imports
            run_child(variant, ["estimate", str(warm), "-t", TARGET, "-o", str(Path(tmp) / "warm.json")],
                      {**env, "LAYERSCOPE_TRICKS_EAGER": " ".join(eager_closure(_starts(None), graph))})
        for trick, case, fixed in plan(tricks, models):
            out = Path(tmp) / "run.json"

            def args_of(i: int, fixed: list[str] | None = fixed, case: str = case, out: Path = out) -> list[str]:
                out.unlink(missing_ok=True)
                return fixed or ["estimate", str(models[case]), "-t", TARGET, "-o", str(out)]

            eager = " ".join(eager_closure(_starts(fixed), graph, own=trick == "lazy-own"))
            rounds = args.runs_100k if case == "100000" else args.runs
            series = measure(trick, case, args_of, rounds, {**env, "LAYERSCOPE_TRICKS_EAGER": eager})
            for error in series.errors[:1]:
                print(f"{trick} {case}: a run failed: {error}")
            raw.append(series)
            results.append((trick, case, figure(series)))
            print(table(results[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(results))
    print()
    for trick in tricks:
        mine = [f for t, _, f in results if t == trick]
        print(f"{trick}: {'keep' if any(f.earns for f in mine) else 'remove'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"runs": [asdict(s) for s in raw],
                                         "figures": [{"trick": t, "case": c, **asdict(f)} for t, c, f in results]},
                                        indent=1))
    return 0


def _starts(fixed: list[str] | None) -> list[str]:
    """The modules a command starts from: the dispatcher, and ``estimate``'s module or (``--help``) every
    subcommand's, which the help lists by importing them."""
    sys.path.insert(0, str(SRC))
    from layerscope.cli.main import SUBCOMMANDS

    return ["layerscope.cli.main", *(SUBCOMMANDS.values() if fixed else [SUBCOMMANDS["estimate"]])]


if __name__ == "__main__":
    sys.exit(main())
