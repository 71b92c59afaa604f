"""SIGTERM and SIGHUP stop a measuring command the way Ctrl-C does: exit 128 + the signal, one line on stderr
saying where the partial results are, those results kept and marked, no temporary file or folder left.

Each command runs in a child process on squeezenet with ``TMPDIR`` pointed at an empty test folder and
``LAYERSCOPE_PROGRESS_FILE`` set, and is signalled once its progress file shows that measured runs are under
way (not before: an interrupt before anything was measured keeps nothing, by design).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from tests._cli_subprocess import cli_env, start_cli
from tests.conftest import zoo

SQUEEZENET = str(zoo("squeezenet"))

SCRIPT = textwrap.dedent("""
    def pipeline(model):
        model.run(None, dict(model.example_inputs))
""")


@pytest.fixture(scope="module")
def runtime_leftovers(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What importing onnxruntime itself leaves in ``TMPDIR`` (a ``.ses`` file): not layerscope's to remove."""
    folder = tmp_path_factory.mktemp("ort-tmp")
    env = cli_env({"TMPDIR": str(folder)})
    subprocess.run([sys.executable, "-c", "import onnxruntime"], env=env, check=True)
    return {p.name for p in folder.iterdir()}


def _started(progress: Path, phase: str) -> bool:
    return progress.exists() and any(line.split()[0] == phase for line in progress.read_text().splitlines())


def _signal_after(args: list[str], phase: str, tmp_path: Path, signum: int = signal.SIGTERM) -> tuple[int, str]:
    """Start ``layerscope ARGS``, send ``signum`` once ``phase`` has done a unit of work; (exit code, its one
    stderr line). What ``TMPDIR`` held when the signal was sent is left in ``tmp_path / "at-signal.txt"``."""
    progress, scratch = tmp_path / "progress.txt", tmp_path / "tmp"
    scratch.mkdir()
    started = start_cli(args, tmp_path / "io", env={"TMPDIR": str(scratch), "LAYERSCOPE_PROGRESS_FILE": str(progress)})
    started.wait_until(lambda: _started(progress, phase))
    (tmp_path / "at-signal.txt").write_text("\n".join(sorted(p.name for p in scratch.iterdir())))
    started.proc.send_signal(signum)
    result = started.finish()
    assert "Traceback" not in result.err, result.describe()
    assert len(result.err_lines) == 1, result.describe()
    return result.returncode, result.err_lines[0]


def _leftovers(tmp_path: Path, runtime_leftovers: set[str]) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name not in runtime_leftovers)


def test_bench_sigterm_keeps_the_runs_measured(tmp_path: Path, runtime_leftovers: set[str]) -> None:
    out = tmp_path / "bench.json"
    code, line = _signal_after(["bench", SQUEEZENET, "--runs", "100000", "--warmup", "1", "-o", out],
                               "measure", tmp_path)
    assert code == 143
    assert line == f"layerscope: terminated by SIGTERM: what was measured is saved in {out} (marked interrupted)"
    run = json.loads(out.read_text())
    assert run["measurement"]["interrupted"] is True
    assert 1 <= run["latency"]["samples"] < 100000
    assert _leftovers(tmp_path, runtime_leftovers) == []


def test_bench_sighup_exits_129(tmp_path: Path, runtime_leftovers: set[str]) -> None:
    out = tmp_path / "bench.json"
    code, line = _signal_after(["bench", SQUEEZENET, "--runs", "100000", "--warmup", "0", "-o", out],
                               "measure", tmp_path, signal.SIGHUP)
    assert code == 129
    assert line.startswith("layerscope: terminated by SIGHUP: what was measured is saved in")
    assert json.loads(out.read_text())["measurement"]["interrupted"] is True
    assert _leftovers(tmp_path, runtime_leftovers) == []


def test_profile_sigterm_before_the_profiled_runs_keeps_the_end_to_end_runs(tmp_path: Path,
                                                                            runtime_leftovers: set[str]) -> None:
    out, html = tmp_path / "profile.json", tmp_path / "profile.html"
    code, line = _signal_after(["profile", SQUEEZENET, "--runs", "100000", "--warmup", "1", "--top", "0",
                                "-o", out, "--html", html], "latency", tmp_path)
    assert code == 143
    assert line == (f"layerscope: terminated by SIGTERM: what was measured is saved in {out}, {html} "
                    "(marked partial)")
    run = json.loads(out.read_text())
    m = run["measurement"]
    assert m["interrupted"] is True and m["partial"].startswith("end-to-end runs only")
    assert m["planned_runs"] == 100000 and m["runs"] == run["latency"]["samples"] >= 1
    assert run["summary"]["meas_latency_us"] == run["latency"]["p50_us"] > 0
    assert "kernels" not in run and not any("measured" in layer for layer in run["layers"])
    assert html.read_text().startswith("<!DOCTYPE html>") or "<html" in html.read_text()[:500]
    assert _leftovers(tmp_path, runtime_leftovers) == []


def test_profile_sigterm_in_the_profiled_runs_removes_its_temporary_folder(tmp_path: Path,
                                                                           runtime_leftovers: set[str]) -> None:
    """The profiled session writes its trace and optimized model in a temporary folder (7-99 MB on real
    models): a signal during the profiled warm-up leaves none of it, and keeps the end-to-end runs."""
    out = tmp_path / "profile.json"
    code, line = _signal_after(["profile", SQUEEZENET, "--runs", "3", "--warmup", "40", "--top", "0",
                                "-o", out], "warmup-profiled", tmp_path)
    assert code == 143 and line.endswith(f"saved in {out} (marked partial)")
    assert json.loads(out.read_text())["latency"]["samples"] == 3
    assert any(name.startswith("layerscope-") for name in (tmp_path / "at-signal.txt").read_text().split())
    assert _leftovers(tmp_path, runtime_leftovers) == []


def test_pipeline_sigterm_keeps_the_runs_measured(tmp_path: Path, runtime_leftovers: set[str]) -> None:
    script = tmp_path / "pipe.py"
    script.write_text(SCRIPT)
    out = tmp_path / "pipeline.json"
    code, line = _signal_after(["pipeline", f"{script}:pipeline", SQUEEZENET, "--runs", "100000",
                                "--warmup", "1", "-o", out], "timed", tmp_path)
    assert code == 143
    assert line == f"layerscope: terminated by SIGTERM: what was measured is saved in {out} (marked interrupted)"
    run = json.loads(out.read_text())
    assert run["pipeline"]["interrupted"] is True and 1 <= run["pipeline"]["runs"] < 100000
    assert _leftovers(tmp_path, runtime_leftovers) == []


def test_bisect_sigterm_keeps_the_samples_in_its_cache(tmp_path: Path, runtime_leftovers: set[str]) -> None:
    cache = tmp_path / "cache"
    code, line = _signal_after(["bisect", SQUEEZENET, "--target", "rdk-x3", "--cache", cache,
                                "-o", tmp_path / "bisect.json"], "pilot-0", tmp_path)
    assert code == 143
    assert line == (f"layerscope: terminated by SIGTERM: the samples measured so far are cached in {cache}; "
                    "run the same command again to resume")
    assert any(cache.rglob("*.json"))  # the samples measured before the signal
    assert not (tmp_path / "bisect.json").exists()
    assert _leftovers(tmp_path, runtime_leftovers) == []


def test_sweep_sigterm_keeps_the_cells_done_and_resumes(tmp_path: Path, runtime_leftovers: set[str]) -> None:
    """A sweep (``--no-ray``: Ray's own signal handling is the cluster's) stopped after its first cell keeps the
    cells done (each run file is written whole), leaves no marker or temporary file, and a rerun runs the rest."""
    out, scratch = tmp_path / "sweep", tmp_path / "tmp"
    scratch.mkdir()
    models = [zoo(n) for n in ("vgg19", "densenet121", "resnet50")]
    args = ["sweep", "--no-ray", *models, "-t", "host,rdk-s100,rdk-x5", "-o", out]
    started = start_cli(args, tmp_path / "io", env={"TMPDIR": str(scratch)})
    runs = out / "runs"
    started.wait_until(lambda: runs.is_dir() and any(runs.glob("*.json")))
    started.proc.send_signal(signal.SIGTERM)
    result = started.finish()
    assert result.returncode == 143 and "Traceback" not in result.err, result.describe()
    assert len(result.err_lines) == 1, result.describe()
    (line,) = result.err_lines
    kept = sorted(p.name for p in runs.glob("*.json"))
    assert line == (f"layerscope: terminated by SIGTERM: {len(kept)} of 9 cells are done, their run files in {runs}; "
                    "run the same command again to run the others"), result.describe()
    assert 1 <= len(kept) < 9
    assert not (out / "running").exists() and not any(runs.glob("*.tmp*"))
    assert _leftovers(tmp_path, runtime_leftovers) == []

    again = start_cli(args, tmp_path / "io2").finish()
    assert again.returncode == 0, again.describe()
    assert f"9 cells: {len(kept)} already done, {9 - len(kept)} run now, 0 failed" in again.out


def test_an_ignored_sighup_stays_ignored(tmp_path: Path) -> None:
    """Under ``nohup`` (SIGHUP ignored on entry) a closed terminal does not stop the command: it runs to its end."""
    progress, out = tmp_path / "progress.txt", tmp_path / "bench.json"
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup does: the child inherits it
    try:
        started = start_cli(["bench", SQUEEZENET, "--runs", "30", "--warmup", "1", "-o", out],
                            tmp_path / "io", env={"LAYERSCOPE_PROGRESS_FILE": str(progress)})
    finally:
        signal.signal(signal.SIGHUP, previous)
    started.wait_until(lambda: _started(progress, "measure"))
    started.proc.send_signal(signal.SIGHUP)
    result = started.finish()
    assert result.returncode == 0, result.describe()
    run = json.loads(out.read_text())
    assert run["latency"]["samples"] == 30 and not run["measurement"].get("interrupted")


EXIT_NOW = textwrap.dedent("""
    import atexit, sys, threading, time
    from pathlib import Path
    from layerscope.cli.main import exit_now

    out = Path(sys.argv[1])
    atexit.register(lambda: out.with_suffix(".atexit").write_text("ran"))
    if sys.argv[2] == "thread":  # a non-daemon thread still working: exit_now must wait for it
        threading.Thread(target=lambda: (time.sleep(0.3), out.write_text("thread done"))).start()
    sys.stdout.write("no newline, still buffered")
    exit_now(7)
""")


@pytest.mark.parametrize("case", ["plain", "thread"])
def test_exit_now_keeps_the_output_the_exit_handlers_and_the_threads(tmp_path: Path, case: str) -> None:
    out = tmp_path / "thread.txt"
    # stdout a pipe (block-buffered): what the command printed last is flushed before the process ends
    proc = subprocess.run([sys.executable, "-c", EXIT_NOW, str(out), case], env=cli_env({"PYTHONUNBUFFERED": ""}),
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 7 and proc.stdout == "no newline, still buffered", proc.stderr
    assert out.with_suffix(".atexit").read_text() == "ran"  # temporary folders, logging, Ray: their handlers run
    assert (out.read_text() == "thread done") if case == "thread" else not out.exists()


#: A child that stands for an interrupted runtime import: the signal arrives inside ONNX Runtime's import, which then
#: fails (its native module left half-made) and reads as "onnxruntime is not installed".
_IMPORT_CUT_SHORT = textwrap.dedent("""
    import os, signal, sys, time

    import onnx
    from onnx import TensorProto, helper

    from layerscope.cli.main import main
    from layerscope.errors import BackendUnavailable
    from layerscope.runtimes.onnxruntime import runtime as backend

    def import_cut_short():
        try:
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
            time.sleep(5)
        except KeyboardInterrupt:
            raise BackendUnavailable("onnxruntime is not installed") from None

    backend._require_onnxruntime = import_cut_short
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[2])
    sys.exit(main(["profile", sys.argv[2], "--runs", "1", "--warmup", "0"]))
""")


@pytest.mark.parametrize("case", [("SIGTERM", 143, "terminated by SIGTERM"),
                                  ("SIGINT", 130, "layerscope: interrupted")], ids=lambda case: case[0])
def test_an_error_an_interruption_causes_is_reported_as_the_interruption(case: tuple[str, int, str],
                                                                          tmp_path: Path) -> None:
    """An interruption that makes a runtime's import fail exits as interrupted, not with exit 3 "onnxruntime is not
    installed". In a child process: a real signal to this test process, which has run OpenVINO, can crash it."""
    name, code, line = case
    proc = subprocess.run([sys.executable, "-c", _IMPORT_CUT_SHORT, name, str(tmp_path / "m.onnx")],
                          capture_output=True, text=True, timeout=120, env=cli_env(), check=False)
    assert proc.returncode == code, proc.stderr
    assert line in proc.stderr and "not installed" not in proc.stderr


def test_a_process_forked_under_the_commands_handlers_is_ended_by_sigterm() -> None:
    """A library's worker forked from a thread while a command runs (OpenVINO's telemetry sender, any
    ``multiprocessing`` fork) gets the handlers back that the command replaced: a SIGTERM ends it (its parent's
    ``Process.terminate``), where the command's handler would have made it an interruption of its own."""
    from layerscope.cli import main as cli_main

    statuses: list[int] = []

    def fork_and_terminate() -> None:
        pid = os.fork()
        if pid == 0:  # the worker: an interruption ends it with status 1, SIGTERM's default action with the signal
            try:
                while True:
                    time.sleep(0.01)
            finally:
                os._exit(1)
        time.sleep(0.2)
        os.kill(pid, signal.SIGTERM)
        statuses.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))

    with cli_main._signals_interrupt([]):
        worker = threading.Thread(target=fork_and_terminate)
        worker.start()
        worker.join(30)
    assert statuses == [-signal.SIGTERM]
