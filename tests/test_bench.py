"""``layerscope bench``, the measuring loop behind it, and the latency statistics it reports."""

from __future__ import annotations

import _thread
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import helper

from conftest import F32, I64, ModelWriter, zoo
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.measure.bench import BenchConfig, run_bench
from layerscope.measure.cputime import CpuClock
from layerscope.runfile import load_document
from layerscope.runtimes.onnxruntime.session import failure_of
from layerscope.stats import drift, summarize

LATENCY_KEYS = {"mean_us", "min_us", "max_us", "p50_us", "p90_us", "p99_us", "p999_us", "fps", "samples", "source"}
MEASUREMENT_KEYS = {"backend", "backend_version", "provider", "threads", "opt_level", "runs", "warmup", "machine",
                    "created_utc", "source"}
SQUEEZENET = str(zoo("squeezenet"))

#: The longest a thread's CPU time can go unaccounted on Linux: one scheduler tick, HZ >= 100 (USER_HZ).
SCHEDULER_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def max_cpu_util(wall_s: float, cores: int) -> float:
    """The highest ``cpu_util`` a span of ``wall_s`` can report when no more than ``cores`` were busy.

    The CPU clock resolves ``time.get_clock_info('process_time').resolution`` (two readings); the threads on the
    other cores when the span began are accounted up to a tick late, so up to (cores - 1) ticks of their work
    before the span land in it. Over ``wall_s`` x ``cores`` that is 1 + the slack below; the run file rounds
    ``cpu_util`` to 4 decimals (5e-5 more).
    """
    resolution_s = time.get_clock_info("process_time").resolution
    slack_s = 2 * resolution_s + (cores - 1) * SCHEDULER_TICK_S
    return 1.0 + slack_s / (wall_s * cores) + 5e-5


# --- stats -------------------------------------------------------------------------------------------------------

#: A process pinned to its first allowed core starts a thread that pins itself to another core, as ONNX Runtime's
#: pool does under ``taskset``; it prints what ``available_cores`` counts.
_PINNED_THREAD = """
import os, threading
from layerscope.measure.bench import available_cores
first, second = sorted(os.sched_getaffinity(0))[:2]
os.sched_setaffinity(0, {first})
ready, done = threading.Event(), threading.Event()
def pinned():
    os.sched_setaffinity(0, {second})
    ready.set()
    done.wait()
thread = threading.Thread(target=pinned)
thread.start()
ready.wait()
print(available_cores(), len(os.sched_getaffinity(0)))
done.set()
thread.join()
"""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2
                    or not os.path.isdir("/proc/self/task"), reason="needs two cores and per-thread affinity (Linux)")
def test_available_cores_counts_a_thread_pinned_outside_the_process_affinity() -> None:
    """cpu_util divides by the cores the process's threads may use: the calling thread's affinity alone (1 here)
    would let a runtime's own pinned thread push cpu_util above 1 (1.27 measured under ``taskset -c 0``)."""
    done = subprocess.run([sys.executable, "-c", _PINNED_THREAD], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.split() == ["2", "1"]


def test_summarize_by_hand() -> None:
    s = summarize([10, 1, 9, 2, 8, 3, 7, 4, 6, 5])
    # numpy "linear": the p-th percentile sits at position (n - 1) * p / 100 of the sorted samples
    assert s.median_us == 5.5  # position 4.5: between 5 and 6
    assert s.p90_us == pytest.approx(9.1)  # position 8.1: 9 + 0.1 * (10 - 9)
    assert s.p99_us == pytest.approx(9.91)
    assert s.p999_us == pytest.approx(9.991)
    assert (s.min_us, s.max_us, s.mean_us, s.samples) == (1.0, 10.0, 5.5, 10)
    assert s.std_us == pytest.approx((82.5 / 9) ** 0.5)  # sample std: sum of squared deviations 82.5, n - 1 = 9
    assert s.cv == pytest.approx(s.std_us / 5.5)
    assert s.fps == pytest.approx(1e6 / 5.5)
    assert s.p50_us == s.median_us
    assert set(s.to_dict()) == {"median_us", "mean_us", "p90_us", "p99_us", "p999_us", "min_us", "max_us",
                                "std_us", "cv", "samples"}


def test_summarize_one_sample_and_bad_input() -> None:
    s = summarize(np.array([250.0]))
    assert s.median_us == s.p999_us == s.min_us == s.max_us == 250.0
    assert s.std_us == 0.0 and s.cv == 0.0
    for bad in ([], [1.0, float("nan")], [-1.0]):
        with pytest.raises(ValueError, match="summarize"):
            summarize(bad)


def test_drift_compares_the_halves_in_timed_order() -> None:
    # a machine that slowed from 100 to 115 us halfway: +15%, whatever the noise inside each half
    assert drift([101, 99, 100, 98, 102, 116, 114, 115, 113, 117]) == pytest.approx(0.15)
    assert drift([116, 114, 115, 113, 117, 101, 99, 100, 98, 102]) == pytest.approx(100 / 115 - 1)
    # the same samples shuffled across the halves: no drift; an odd count leaves the middle run out
    assert drift([100, 115, 100, 115, 100, 115, 100, 115]) == 0.0
    assert drift([100, 100, 999, 110, 110]) == pytest.approx(0.10)
    assert drift([1.0, 5.0, 9.0]) == 0.0  # too few runs to tell


# --- the measuring loop ------------------------------------------------------------------------------------------

class FakeSession:
    """Sleeps ``run_s`` per run and counts calls; ``on_call(n)`` runs in the calling thread."""

    def __init__(self, run_s: float = 0.001, on_call: Any = None) -> None:
        self.run_s = run_s
        self.calls = 0
        self.threads: set[str] = set()
        self.lock = threading.Lock()
        self.on_call = on_call

    def run(self, output_names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with self.lock:
            self.calls += 1
            n = self.calls
            self.threads.add(threading.current_thread().name)
        time.sleep(self.run_s)
        if self.on_call is not None:
            self.on_call(n)
        return []


def test_run_count_is_shared_by_the_streams_and_warmup_is_per_stream() -> None:
    session = FakeSession()
    seen: list[tuple[str, float, float]] = []
    result = run_bench(session, {}, BenchConfig(warmup_runs=2, runs=12, streams=3),
                       progress=lambda phase, done, total: seen.append((phase, done, total)))
    assert session.calls == 2 * 3 + 12
    assert result.runs == 12 and sum(s.runs for s in result.streams) == 12 and len(result.streams) == 3
    assert len(session.threads) == 3
    assert seen[-1] == ("measure", 12.0, 12.0) and ("warmup", 6.0, 6.0) in seen
    assert result.latency.min_us >= 1000  # every sample covers the 1 ms sleep
    assert not result.interrupted


def test_duration_mode_runs_until_the_deadline() -> None:
    result = run_bench(FakeSession(0.002), {}, BenchConfig(warmup_runs=0, runs=None, duration_s=0.2))
    assert 10 <= result.runs <= 110
    assert 0.15 <= result.wall_s < 1.0


def test_ctrl_c_keeps_what_was_measured() -> None:
    session = FakeSession(0.002, on_call=lambda n: _thread.interrupt_main() if n == 5 else None)
    result = run_bench(session, {}, BenchConfig(warmup_runs=1, runs=100_000))
    assert result.interrupted
    assert 4 <= result.runs < 100_000
    assert result.latency.samples == result.runs


def test_ctrl_c_while_the_main_thread_starts_the_streams_keeps_what_was_measured(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a busy machine a stream can run and be interrupted before the main thread is back from starting it:
    the interrupt then lands in ``Thread.start`` (made slow here, deterministically) and is still handled."""
    session = FakeSession(0.002, on_call=lambda n: _thread.interrupt_main() if n == 5 else None)
    start = threading.Thread.start

    def slow_start(thread: threading.Thread) -> None:
        start(thread)
        deadline = time.monotonic() + 30
        while session.calls < 6 and time.monotonic() < deadline:  # the stream runs on; main waits here
            time.sleep(0.005)

    monkeypatch.setattr(threading.Thread, "start", slow_start)
    result = run_bench(session, {}, BenchConfig(warmup_runs=1, runs=100_000))
    assert result.interrupted
    assert 4 <= result.runs < 100_000 and result.latency.samples == result.runs


def test_ctrl_c_during_warmup_propagates() -> None:
    session = FakeSession(0.002, on_call=lambda n: _thread.interrupt_main() if n == 2 else None)
    with pytest.raises(KeyboardInterrupt):
        run_bench(session, {}, BenchConfig(warmup_runs=100_000, runs=10))


def test_an_onnxruntime_failure_is_input_error(write_model: ModelWriter) -> None:
    import onnxruntime as ort

    path = write_model([helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)], [("ids", I64, [1, 2])],
                       [("y", F32, None)], {"table": np.zeros((4, 2), np.float32)})
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(InputError, match="ONNX Runtime failed running the model"):
        run_bench(session, {"ids": np.array([[0, 99]], np.int64)}, BenchConfig(warmup_runs=1, runs=2, streams=2),
                  failure=failure_of)


def test_the_cpu_clock_resolves_a_busy_thread() -> None:
    """One busy thread (this one): the process's CPU time over the span is positive, at most what every core could
    give in it (other threads of this test process, ONNX Runtime's pools, may run too), and not counted in 10 ms
    ticks (os.times reported 0 or 10 ms for a 3 ms span)."""
    resolution_s = time.get_clock_info("process_time").resolution
    for span_ms in (3, 7):
        clock = CpuClock()
        deadline = time.perf_counter() + span_ms / 1000
        while time.perf_counter() < deadline:
            pass
        span = clock.stop()
        # the kernel may account another thread's CPU time up to one scheduler tick late
        lag_s = ((os.cpu_count() or 1) - 1) / os.sysconf("SC_CLK_TCK")
        assert 0 < span.cpu_s <= span.wall_s * (os.cpu_count() or 1) + 2 * resolution_s + lag_s
        ticks = span.cpu_s * 100
        assert abs(ticks - round(ticks)) > 1e-6  # not a whole number of 10 ms ticks


def test_config_is_validated() -> None:
    for kwargs in ({"runs": None}, {"runs": 3, "duration_s": 1.0}, {"runs": 0}, {"streams": 0},
                   {"runs": None, "duration_s": 0.0}):
        with pytest.raises(ValueError, match="BenchConfig"):
            BenchConfig(**kwargs)


# --- the command -------------------------------------------------------------------------------------------------

def test_bench_writes_the_latency_and_measurement_sections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", SQUEEZENET, "--runs", "8", "--warmup", "1", "-o", str(out)]) == 0
    run = load_document(out)
    lat, m = run["latency"], run["measurement"]
    assert lat.keys() >= LATENCY_KEYS and m.keys() >= MEASUREMENT_KEYS
    assert lat["min_us"] <= lat["p50_us"] <= lat["p90_us"] <= lat["p99_us"] <= lat["p999_us"] <= lat["max_us"]
    assert lat["min_us"] <= lat["mean_us"] <= lat["max_us"]
    assert lat["samples"] == m["runs"] == 8 and lat["source"] == m["source"] == "bench"
    assert lat["fps"] == pytest.approx(1e6 / lat["mean_us"], rel=0.2)  # one stream back to back
    assert m["backend"] == "onnxruntime" and m["provider"] == "CPUExecutionProvider" and m["warmup"] == 1
    assert m["machine"]["cores"] >= 1 and m["peak_rss_bytes"] > 10 * 2**20
    assert 0 < m["cpu_util"] <= max_cpu_util(m["wall_s"], m["cores"])
    assert run["layers"] == [] and run["summary"]["est_latency_us"] is None and run["summary"]["macs"] > 3e8
    assert run["model"]["inputs"] == [{"name": "data_0", "shape": [1, 3, 224, 224], "dtype": "float32"}]
    printed = capsys.readouterr().out
    for text in ("P99.9", "FPS", "CPU", "peak RSS", "onnxruntime", "CPUExecutionProvider", "intra-op threads",
                 "machine", "run file:"):
        assert text in printed, text


def test_bench_streams_and_intra_threads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    args = ["bench", SQUEEZENET, "--runs", "6", "--warmup", "1", "--streams", "2", "--threads", "1",
            "-o", str(out)]
    assert main(args) == 0
    m = json.loads(out.read_text())["measurement"]
    assert m["streams"] == 2 and m["threads"] == 1 and len(m["stream_results"]) == 2
    assert sum(s["runs"] for s in m["stream_results"]) == 6
    assert "2 streams x intra-op threads: 1" in capsys.readouterr().out


def test_bench_duration(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", SQUEEZENET, "--duration", "0.3", "--warmup", "0", "-o", str(out)]) == 0
    m = json.loads(out.read_text())["measurement"]
    assert m["runs"] >= 1 and m["duration_s"] == 0.3 and m["planned_runs"] is None


def test_bench_default_model_is_the_bundled_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--runs", "1", "--warmup", "0"]) == 0
    assert "yolov5s" in capsys.readouterr().out


def test_bench_runs_on_a_file_input(write_model: ModelWriter, tmp_path: Path) -> None:
    path = write_model([helper.make_node("Relu", ["images"], ["y"])], [("images", F32, [1, 3, 8, 8])],
                       [("y", F32, [1, 3, 8, 8])])
    np.save(tmp_path / "x.npy", np.ones((1, 3, 8, 8), np.float32))
    out = tmp_path / "bench.json"
    assert main(["bench", str(path), "--input", f"images={tmp_path / 'x.npy'}", "--runs", "2", "-o",
                 str(out)]) == 0
    assert json.loads(out.read_text())["measurement"]["inputs"] == [
        {"name": "images", "source": f"file {tmp_path / 'x.npy'}", "seed": None}]


def test_unavailable_provider_exits_3_listing_the_available(capsys: pytest.CaptureFixture[str]) -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this machine has CUDA")
    assert main(["bench", SQUEEZENET, "--provider", "cuda", "--runs", "1"]) == 3
    err = capsys.readouterr().err
    assert "provider 'cuda' is not available" in err and "available: cpu" in err


def test_runs_and_duration_together_is_a_usage_error() -> None:
    assert main(["bench", SQUEEZENET, "--runs", "3", "--duration", "1"]) == 2


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros((1, 3, 112, 112), np.float32), "has shape 1x3x112x112, the model expects 1x3x224x224"),
        (np.zeros((1, 3, 224, 224), np.float64), "has dtype float64, the model expects float32"),
    ],
)
def test_wrong_input_file_exits_2_naming_expected_and_given(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            array: np.ndarray, message: str) -> None:
    np.save(tmp_path / "x.npy", array)
    assert main(["bench", SQUEEZENET, "--input", f"data_0={tmp_path / 'x.npy'}", "--runs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("layerscope: error: input 'data_0'") and message in err


def test_ctrl_c_prints_and_saves_what_was_measured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C (simulated after 4 measured runs) during measurement: table printed, run file saved, exit 130."""
    from layerscope.runtimes.onnxruntime import runtime as bench_cli  # opens the session `layerscope bench` times

    real_make_session = bench_cli.make_session

    def interrupting_session(*args: Any, **kwargs: Any) -> Any:
        session = real_make_session(*args, **kwargs)
        calls = [0]

        class Wrapper:
            def run(self, names: Any, feeds: Any) -> Any:
                calls[0] += 1
                if calls[0] == 5:  # 1 warm-up + 4 measured
                    _thread.interrupt_main()
                return session.run(names, feeds)

        return Wrapper()

    monkeypatch.setattr(bench_cli, "make_session", interrupting_session)
    out = tmp_path / "bench.json"
    assert main(["bench", SQUEEZENET, "--runs", "100000", "--warmup", "1", "-o", str(out)]) == 130
    run = load_document(out)
    assert run["measurement"]["interrupted"] is True and run["latency"]["samples"] >= 4
    captured = capsys.readouterr()
    assert "INTERRUPTED" in captured.out and "interrupted" in captured.err


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "layerscope", *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


@pytest.mark.parametrize(
    ("spec", "rc", "message"),
    [
        ("{tmp}/x640.npy", 2, "file {tmp}/x640.npy has shape 1x3x640x640, the model expects 1x3x224x224"),
        ("{tmp}/x.bin", 2, "has 100 bytes, the model expects 602112 (1x3x224x224 float32)"),
        ("images={tmp}/x640.npy", 2, "the model has no input 'images'; its inputs: data_0 (1x3x224x224 float32)"),
        ("data_0={tmp}/missing.npy", 2, "no such file"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, spec: str, rc: int, message: str) -> None:
    np.save(tmp_path / "x640.npy", np.zeros((1, 3, 640, 640), np.float32))
    (tmp_path / "x.bin").write_bytes(bytes(100))
    result = _cli("bench", SQUEEZENET, "--runs", "1", "--input", spec.format(tmp=tmp_path))
    assert result.returncode == rc
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert message.format(tmp=tmp_path) in lines[0]
    assert result.stdout == ""


def test_cli_unavailable_provider_is_one_line_exit_3() -> None:
    import onnxruntime as ort

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("this machine has TensorRT")
    result = _cli("bench", SQUEEZENET, "--provider", "tensorrt")
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1
    assert "available:" in result.stderr


def test_bench_dynamic_model_with_shape(write_model: ModelWriter, tmp_path: Path) -> None:
    node = helper.make_node("Conv", ["images", "w"], ["y"], pads=[1, 1, 1, 1])
    path = write_model([node], [("images", F32, ["n", 3, "h", "w"])], [("y", F32, None)],
                       {"w": np.ones((4, 3, 3, 3), np.float32)})
    out = tmp_path / "bench.json"
    assert main(["bench", str(path), "--shape", "images=1x3x16x16", "--runs", "2", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["model"]["inputs"][0]["shape"] == [1, 3, 16, 16]
    assert main(["bench", str(path), "--runs", "2"]) == 2  # dims not fixed: the loader's ShapeError


def test_duration_mode_runs_each_stream_once_even_past_the_deadline() -> None:
    """A stream whose thread starts after the deadline (a busy machine) still makes one run: a result, not an
    empty sample set."""
    result = run_bench(FakeSession(0.002), {}, BenchConfig(warmup_runs=0, runs=None, duration_s=1e-9, streams=2))
    assert result.runs == 2 and result.latency.samples == 2
    assert all(stream.runs == 1 for stream in result.streams)
