"""The hostile-input corpus: every class of bad input the second hostile round named, one case each or more, run
through the CLI in a child process under a 20 s CPU / 4 GiB address-space budget.

    PYTHONPATH=src .venv/bin/python benchmarks/hostile.py [--only SUBSTRING] [--json OUT.json]

A case is **clean** when the command
- exits with a code the case allows (0 with correct output, or 2 for bad input; 130/143 for an interrupt),
- on exit 2 prints exactly one line on stderr, with no traceback and no "internal error",
- leaves every device node it was pointed at a device (``/dev/null``, ``/dev/full`` still character devices),
- writes nothing outside its own case folder (its ``HOME`` and ``TMPDIR`` are inside it and checked empty of
  strays: ONNX Runtime's telemetry and session files included),
- finishes within the budget.

Classes: special files as inputs (FIFO, ``/dev/zero``, ``/dev/urandom``, a folder) for every reader; output paths
that are devices, FIFOs, sockets, folders or under a file; budgets (nodes, declared dims, Loop trip counts, a run
that never ends, vendor lines, a gzip bomb); overflow and parser limits (a 10,000-digit integer in a profile, NUL
and over-long names, path traversal in external data); malformed models and vendor files; control characters in
names; interrupts during start-up and work. Prints one row per case and the share clean; exit 1 when any case is
not clean.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CPU_S = 20
MEMORY_BYTES = 4 << 30
WALL_S = 90.0
F32 = TensorProto.FLOAT


@dataclass
class Case:
    """One hostile input: ``make(folder)`` builds what it needs in ``folder`` and returns the CLI arguments."""

    name: str
    klass: str
    make: Callable[[Path], list[str]]
    allowed: tuple[int, ...] = (2,)
    env: dict[str, str] = field(default_factory=dict)
    devices: tuple[str, ...] = ()
    #: Send this signal this many seconds after the start (an interrupt case).
    interrupt: tuple[int, float] | None = None
    #: Checks the output of a run that exits 0 (``None``: no check beyond the exit code).
    check: Callable[[Path, str], str | None] | None = None


# --- models -----------------------------------------------------------------------------------------------------

def _model(graph: onnx.GraphProto, opset: int = 17) -> bytes:
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _relu(dims: list[int | str] | None = None, name: str = "r") -> bytes:
    return _model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name=name)], "g",
                                    [helper.make_tensor_value_info("x", F32, dims or [1, 4])],
                                    [helper.make_tensor_value_info("y", F32, None)]))


def _chain(nodes: int) -> bytes:
    names = ["x", *[f"t{i}" for i in range(nodes - 1)], "y"]
    return _model(helper.make_graph([helper.make_node("Relu", [names[i]], [names[i + 1]]) for i in range(nodes)],
                                    "g", [helper.make_tensor_value_info("x", F32, [1, 4])],
                                    [helper.make_tensor_value_info("y", F32, [1, 4])]))


def _loop(trips: int | None) -> bytes:
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["co"]), helper.make_node("Relu", ["v"], ["vo"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("v", F32, [1])],
        [helper.make_tensor_value_info("co", TensorProto.BOOL, []), helper.make_tensor_value_info("vo", F32, [1])])
    inits = [helper.make_tensor("C", TensorProto.BOOL, [], [True])]
    inputs = [helper.make_tensor_value_info("x", F32, [1])]
    if trips is None:
        inputs.insert(0, helper.make_tensor_value_info("M", TensorProto.INT64, []))
    else:
        inits.append(helper.make_tensor("M", TensorProto.INT64, [], [trips]))
    return _model(helper.make_graph([helper.make_node("Loop", ["M", "C", "x"], ["y"], body=body, name="steps")],
                                    "g", inputs, [helper.make_tensor_value_info("y", F32, [1])], initializer=inits))


def _external(location: str) -> bytes:
    w = TensorProto(name="w", data_type=F32, dims=[1, 4], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return _model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                                    [helper.make_tensor_value_info("x", F32, [1, 4])],
                                    [helper.make_tensor_value_info("y", F32, [1, 4])], initializer=[w]))


def _write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def _good_model(folder: Path) -> Path:
    return _write(folder, "m.onnx", _relu())


def _good_run(folder: Path, gz: bool = False, command: str = "estimate") -> Path:
    """A real run file made by ``estimate`` or ``profile`` (in the parent: a case's own child is the command under
    test); its HOME and TMPDIR are the case's own, emptied after."""
    run = folder / ("run.json.gz" if gz else "run.json")
    extra = ["--runs", "3"] if command == "profile" else []
    subprocess.run([sys.executable, "-m", "layerscope", command, str(_good_model(folder)), "--top", "0", *extra,
                    "-o", str(run)], env=_env(folder), check=True, capture_output=True)
    for sub in ("home", "tmp"):
        shutil.rmtree(folder / sub)
        (folder / sub).mkdir()
    return run


def _edited_run(folder: Path, edit: Callable[[dict[str, object]], None]) -> Path:
    run = _good_run(folder, command="profile")
    document = json.loads(run.read_text())
    edit(document)
    run.write_text(json.dumps(document))
    return run


def _set_target_name(value: str) -> Callable[[dict[str, object]], None]:
    def edit(document: dict[str, object]) -> None:
        target = document.get("target")
        if isinstance(target, dict):
            target["name"] = value
    return edit


def _gzip_bomb(folder: Path) -> Path:
    """~1 MB of gzip that inflates to 1.1 GiB of spaces (over the run-file limit)."""
    path = folder / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b"{")
        chunk = b" " * (1 << 24)
        for _ in range(70):
            handle.write(chunk)
    return path


def _profile_toml(folder: Path, body: str) -> Path:
    return _write(folder, "p.toml", body)


PROFILE_BASE = """name = "p"
description = "hostile"
[units.cpu]
kind = "cpu"
peak_ops_per_s = { fp32 = 1e11 }
[memory]
ddr_bandwidth_bytes_per_s = 1e10
"""


def _socket(folder: Path) -> Path:
    path = folder / "out.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    _KEEP.append(server)
    return path


_KEEP: list[socket.socket] = []


def _trailing_output(expected: str) -> Callable[[Path, str], str | None]:
    def check(folder: Path, stdout: str) -> str | None:
        return None if expected in stdout else f"{expected!r} not in the output"
    return check


def _no_control(folder: Path, stdout: str) -> str | None:
    bad = [c for c in stdout if (ord(c) < 32 and c not in "\n\t") or c in "\u202e\u2066\u2067\u2068\u2069"]
    return f"control characters in the output: {bad[:5]!r}" if bad else None


def cases() -> list[Case]:
    """The corpus."""
    out: list[Case] = []
    add = out.append
    # special files as inputs
    for reader, args in (("estimate", ["estimate", "{}"]), ("report", ["report", "{}"]),
                         ("reconcile", ["reconcile", "{}"]), ("import", ["import", "{}"]),
                         ("lint", ["lint", "{}"]), ("advise", ["advise", "{}"])):
        for special in ("fifo", "/dev/zero", "/dev/urandom", "folder"):
            def make(folder: Path, args: list[str] = args, special: str = special) -> list[str]:
                target = (str(_fifo(folder, "in.fifo")) if special == "fifo" else
                          str(folder) if special == "folder" else special)
                return [a.format(target) for a in args]
            add(Case(f"{reader} reads {special}", "special input", make))
    add(Case("estimate --target a FIFO profile", "special input",
             lambda f: ["estimate", str(_good_model(f)), "--target", str(_fifo(f, "p.toml"))]))
    add(Case("estimate --target /dev/zero", "special input",
             lambda f: ["estimate", str(_good_model(f)), "--target", "/dev/zero"]))
    add(Case("sweep config is a FIFO", "special input",
             lambda f: ["sweep", str(_fifo(f, "sweep.toml")), "-o", str(f / "sweep")]))
    add(Case("calibrate: a run's target names /dev/zero", "special input",
             lambda f: ["calibrate", str(_edited_run(f, _set_target_name("/dev/zero"))), "-o", str(f / "c.toml")]))
    # output places
    add(Case("schema -o /dev/null", "output place", lambda f: ["schema", "-o", "/dev/null"], allowed=(0,),
             devices=("/dev/null",)))
    add(Case("report csv -o /dev/full", "output place",
             lambda f: ["report", str(_good_run(f)), "--format", "csv", "-o", "/dev/full"], devices=("/dev/full",)))
    add(Case("estimate -o /dev/null", "output place",
             lambda f: ["estimate", str(_good_model(f)), "--top", "0", "-o", "/dev/null"], allowed=(0,),
             devices=("/dev/null",)))
    add(Case("estimate -o /dev/full", "output place",
             lambda f: ["estimate", str(_good_model(f)), "--top", "0", "-o", "/dev/full"], devices=("/dev/full",)))
    add(Case("schema -o /dev/stdout", "output place", lambda f: ["schema", "-o", "/dev/stdout"], allowed=(0,),
             check=_trailing_output('"$schema"')))
    add(Case("estimate -o into a socket", "output place",
             lambda f: ["estimate", str(_good_model(f)), "--top", "0", "-o", str(_socket(f))]))
    add(Case("estimate -o at a folder", "output place",
             lambda f: ["estimate", str(_good_model(f)), "--top", "0", "-o", str(f)]))
    add(Case("estimate -o under a file", "output place",
             lambda f: ["estimate", str(_good_model(f)), "--top", "0", "-o",
                        str(_write(f, "file", "x") / "run.json")]))
    add(Case("estimate --html /dev/full", "output place",
             lambda f: ["estimate", str(_good_model(f)), "--top", "0", "--html", "/dev/full"], devices=("/dev/full",)))
    # budgets
    add(Case("a model over the node budget", "budget",
             lambda f: ["estimate", str(_write(f, "chain.onnx", _chain(200)))], env={"LAYERSCOPE_LIMIT_NODES": "100"}))
    add(Case("declared dims 2^31 x 2^31 with --timeline", "budget",
             lambda f: ["estimate", str(_write(f, "d.onnx", _relu([2**31, 2**31]))), "--timeline", "-t", "rdk-x5"]))
    add(Case("declared dim 2^40", "budget", lambda f: ["estimate", str(_write(f, "d.onnx", _relu([2**40])))]))
    add(Case("--shape 2^40 on a dynamic input", "budget",
             lambda f: ["estimate", str(_write(f, "d.onnx", _relu(["n", 4]))), "--shape", f"x={2**40}x4"]))
    add(Case("a Loop of 2^62 iterations", "budget", lambda f: ["estimate", str(_write(f, "l.onnx", _loop(2**62)))]))
    add(Case("profile a Loop of 2^62 iterations", "budget",
             lambda f: ["profile", str(_write(f, "l.onnx", _loop(2**62)))]))

    def endless(f: Path) -> list[str]:
        np.save(f / "m.npy", np.array(2**62, dtype=np.int64))
        return ["estimate", str(_write(f, "l.onnx", _loop(None))), "--input", f"M={f / 'm.npy'}"]
    add(Case("a Loop whose trip count is an input of 2^62", "budget", endless, env={"LAYERSCOPE_LIMIT_RUN_S": "2"}))
    add(Case("a vendor file over the line budget", "budget",
             lambda f: ["import", str(_write(f, "p.log", "x\n" * 5000))],
             env={"LAYERSCOPE_LIMIT_IMPORT_LINES": "1000"}))
    add(Case("a gzip bomb as a run file", "budget", lambda f: ["report", str(_gzip_bomb(f))]))
    add(Case("a small gzip run file", "budget", lambda f: ["report", str(_good_run(f, gz=True)), "--format", "csv"],
             allowed=(0,)))
    # overflow and parser limits
    add(Case("a 10,000-digit integer in a profile", "overflow",
             lambda f: ["estimate", str(_good_model(f)), "--target",
                        str(_profile_toml(f, PROFILE_BASE + f"sram_bytes = {'9' * 10000}\n"))]))
    add(Case("a float of 1e400 in a profile", "overflow",
             lambda f: ["estimate", str(_good_model(f)), "--target",
                        str(_profile_toml(f, PROFILE_BASE.replace("1e10", "1e400")))]))
    add(Case("a NUL byte in an external-data path", "overflow",
             lambda f: ["estimate", str(_write(f, "e.onnx", _external("w\x00.bin")))]))
    add(Case("an over-long external-data path", "overflow",
             lambda f: ["estimate", str(_write(f, "e.onnx", _external("w" * 5000 + ".bin")))]))
    add(Case("external data outside the model's folder", "overflow",
             lambda f: ["estimate", str(_write(f, "e.onnx", _external("../../../../etc/passwd")))]))
    add(Case("a run's target name 5,000 characters long", "overflow",
             lambda f: ["calibrate", str(_edited_run(f, _set_target_name("t" * 5000))), "-o", str(f / "c.toml")]))
    add(Case("a run's target name with a NUL", "overflow",
             lambda f: ["calibrate", str(_edited_run(f, _set_target_name("rdk\x00x5"))), "-o", str(f / "c.toml")]))
    add(Case("--dim negative", "overflow",
             lambda f: ["estimate", str(_write(f, "d.onnx", _relu(["n", 4]))), "--dim", "n=-3"]))
    # malformed models
    add(Case("an empty model file", "malformed model", lambda f: ["estimate", str(_write(f, "m.onnx", b""))]))
    add(Case("a truncated model", "malformed model",
             lambda f: ["estimate", str(_write(f, "m.onnx", _chain(50)[:300]))]))
    add(Case("random bytes as a model", "malformed model",
             lambda f: ["estimate", str(_write(f, "m.onnx", os.urandom(4096)))]))
    add(Case("an opset from the future", "malformed model",
             lambda f: ["estimate", str(_write(f, "m.onnx", _model(helper.make_graph(
                 [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", F32, [1, 4])],
                 [helper.make_tensor_value_info("y", F32, [1, 4])]), opset=99)))]))
    add(Case("a dynamic dim without --shape", "malformed model",
             lambda f: ["estimate", str(_write(f, "m.onnx", _relu(["n", 4])))], allowed=(0, 2)))
    add(Case("a cycle", "malformed model", lambda f: ["estimate", str(_write(f, "m.onnx", _model(helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])], "g",
        [helper.make_tensor_value_info("x", F32, [1, 4])], [helper.make_tensor_value_info("b", F32, [1, 4])]))))]))
    add(Case("a name defined twice", "malformed model", lambda f: ["estimate", str(_write(f, "m.onnx", _model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", F32, [1, 4])],
                          [helper.make_tensor_value_info("y", F32, [1, 4])]))))]))
    add(Case("weights shorter than their dims", "malformed model", lambda f: ["estimate", str(_write(f, "m.onnx",
        _model(helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                                 [helper.make_tensor_value_info("x", F32, [1, 4])],
                                 [helper.make_tensor_value_info("y", F32, [1, 4])],
                                 initializer=[TensorProto(name="w", data_type=F32, dims=[1, 4],
                                                          raw_data=b"\0" * 8)]))))]))
    # malformed vendor and run files
    for name, text in (("profiler.log", "{\n  \"model_latency\": {\n"), ("x.layer.json", "[{\"Layers\": 7}]"),
                       ("ov.csv", "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)\na;EXECUTED;"
                                  "Conv;jit;fast;1\n"),
                       ("ort.json", "[]"), ("eval_perf.txt", "\x00\x01garbage\n" * 10), ("t.json", "{\"a\": NaN}")):
        add(Case(f"a malformed vendor file {name}", "malformed vendor file", functools.partial(_import, name, text)))
    add(Case("a run file of another schema", "malformed run file",
             lambda f: ["report", str(_write(f, "r.json", json.dumps({"schema_version": 99})))]))
    add(Case("a run file with NaN", "malformed run file",
             lambda f: ["report", str(_write(f, "r.json", "{\"schema_version\": 2, \"x\": NaN}"))]))
    # hostile names
    add(Case("control characters in a layer name", "names",
             lambda f: ["estimate", str(_write(f, "m.onnx", _relu(name="a\x1b[31mred\x07\u202eevil")))],
             allowed=(0,), check=_no_control))
    add(Case("markup in a layer name, HTML report", "names",
             lambda f: ["estimate", str(_write(f, "m.onnx", _relu(name="<script>alert(1)</script>"))), "--top", "0",
                        "--html", str(f / "r.html")], allowed=(0,),
             check=lambda f, out: "unescaped <script> in the HTML" if "<script>alert(1)" in
             (f / "r.html").read_text() else None))
    # interrupts
    add(Case("SIGTERM while observing an endless Loop", "interrupt", endless, allowed=(143,),
             interrupt=(signal.SIGTERM, 4.0)))
    for number in (signal.SIGINT, signal.SIGTERM):
        for after in INTERRUPT_MOMENTS_S:
            add(Case(f"{number.name} {after} s into profile", "interrupt",
                     lambda f: ["profile", str(_good_model(f)), "--runs", "4000", "-o", str(f / "p.json")],
                     allowed=_interrupt_codes(number, after), interrupt=(number, after)))
            add(Case(f"{number.name} {after} s into bisect", "interrupt",
                     lambda f: ["bisect", str(_write(f, "c.onnx", _chain(6))), "--segments", "3", "--no-cache",
                                "-o", str(f / "b.json")],
                     allowed=_interrupt_codes(number, after), interrupt=(number, after)))
    return out


#: When the interrupt cases signal their command, in seconds from its start: the interpreter's start-up and imports
#: (up to about 0.15 s), loading the model and ONNX Runtime, the warm-up, the timed runs, the profiled session.
INTERRUPT_MOMENTS_S = (0.05, 0.15, 0.3, 0.5, 0.8, 1.2, 1.6, 2.0, 2.5, 3.0)


def _interrupt_codes(number: signal.Signals, after: float) -> tuple[int, ...]:
    """The exit codes an interrupt case allows: 128 + the signal's number, or 0 when the command finished first;
    in the interpreter's own start-up (the first 0.1 s), before layerscope's code runs, also the signal's default
    end (status -15 for SIGTERM, which a shell reports as 143; nothing is written by then)."""
    codes: tuple[int, ...] = (0, 128 + number)
    return codes + ((-number,) if after < 0.1 else ())


def _import(name: str, text: str, folder: Path) -> list[str]:
    return ["import", str(_write(folder, name, text))]


def _env(folder: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HOME"] = str(folder / "home")
    env["TMPDIR"] = str(folder / "tmp")
    env["XDG_CACHE_HOME"] = str(folder / "home" / ".cache")
    env["LAYERSCOPE_CACHE_DIR"] = str(Path.home() / ".cache" / "layerscope")  # the samples, built once
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


#: layerscope's own cache (the measured host profile, built samples), documented: not a stray.
OWN_CACHE = Path("home/.cache/layerscope")


def _strays(folder: Path) -> list[str]:
    """Files left in the case's HOME and TMPDIR, but layerscope's own cache."""
    left = []
    for sub in ("home", "tmp"):
        for path in (folder / sub).rglob("*"):
            relative = path.relative_to(folder)
            if relative not in (Path("home/.cache"), OWN_CACHE) and not relative.is_relative_to(OWN_CACHE):
                left.append(str(relative))
    return left


def run_case(case: Case, root: Path) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="case-", dir=root))
    (folder / "home").mkdir()
    (folder / "tmp").mkdir()
    before = {d: stat.S_ISCHR(os.stat(d).st_mode) for d in case.devices}
    problems: list[str] = []
    try:
        args = case.make(folder)
    except Exception as exc:  # a case that cannot be built is reported, not fatal
        return {"case": case.name, "class": case.klass, "clean": False, "exit": None, "wall_s": 0.0,
                "problems": [f"case not built: {exc}"], "line": ""}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "layerscope", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(folder, case.env),
                            preexec_fn=_limit)  # noqa: PLW1509  # no threads run in this process
    if case.interrupt is not None:
        number, after = case.interrupt
        try:
            proc.wait(after)
        except subprocess.TimeoutExpired:
            proc.send_signal(number)
    try:
        stdout, stderr = proc.communicate(timeout=WALL_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        problems.append(f"killed after {WALL_S:.0f} s")
    wall = time.perf_counter() - start
    code = proc.returncode
    lines = [line for line in stderr.splitlines() if line.strip()]
    if code not in case.allowed:
        problems.append(f"exit {code}, allowed {case.allowed}")
    if code == -signal.SIGXCPU:
        problems.append(f"over the {CPU_S} s CPU budget")
    if code == 2 and len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr")
    if any("Traceback" in line or "internal error" in line for line in lines):
        problems.append("a traceback or an internal error")
    for device, was in before.items():
        if was and not stat.S_ISCHR(os.stat(device).st_mode):
            problems.append(f"{device} is no longer a device")
    if code == 0 and case.check is not None and (failure := case.check(folder, stdout)):
        problems.append(failure)
    if strays := _strays(folder):
        problems.append(f"wrote outside its places: {', '.join(strays[:3])}")
    shutil.rmtree(folder, ignore_errors=True)
    return {"case": case.name, "class": case.klass, "clean": not problems, "exit": code, "wall_s": round(wall, 2),
            "problems": problems, "line": lines[-1][:160] if lines else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    selected = [c for c in cases() if args.only.lower() in c.name.lower()]
    with tempfile.TemporaryDirectory(prefix="layerscope-hostile-") as tmp:
        results = []
        for case in selected:
            result = run_case(case, Path(tmp))
            results.append(result)
            mark = "clean" if result["clean"] else "NOT CLEAN"
            print(f"{mark:9}  exit {result['exit']!s:>4}  {result['wall_s']:6.2f} s  {case.klass:22} {case.name}"
                  + ("" if result["clean"] else f"\n           {'; '.join(str(p) for p in result['problems'])}"
                     f"\n           stderr: {result['line']}"), flush=True)
    clean = sum(bool(r["clean"]) for r in results)
    print(f"\n{clean}/{len(results)} cases clean ({100 * clean / max(len(results), 1):.0f}%), "
          f"{len({c.klass for c in selected})} classes; budget per case {CPU_S} s CPU, {MEMORY_BYTES >> 30} GiB")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "clean": clean, "cases": len(results)}, indent=1))
    for server in _KEEP:
        server.close()
    return 0 if clean == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
