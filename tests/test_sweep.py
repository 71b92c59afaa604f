"""``layerscope sweep`` on a real local Ray cluster (started here once for the module, two CPUs, no dashboard; shut
down at the end), in a network namespace with loopback alone, where Ray's node address is 127.0.0.1 (elsewhere Ray
takes the machine's own address whatever it is told; `make test` runs these tests under ``unshare -n``): zoo models
x two targets, rerun does nothing, a failed cell is listed without stopping the sweep, a worker killed mid-cell is
retried, a sweep killed halfway completes when rerun.

Every CLI run is a child process under a timeout (connected to this cluster with ``--ray``), so no test can hang.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._cli_subprocess import SRC, CliResult, run_cli, start_cli
from tests.conftest import ModelWriter, run_schema_validator, zoo
from tests.test_bisect import write_residual

import layerscope
from layerscope.cli.main import main
from layerscope.measure.cuts import CutPlanner
from layerscope.model import load_model
from layerscope.runfile import load_document
from layerscope.sweep import SweepSpec, expand
from layerscope.sweep.dataset import iter_rows
from layerscope.sweep.devices import resource_name
from layerscope.sweep.executor import MEASURE_RESOURCE

ray = pytest.importorskip("ray")
pytest.importorskip("pyarrow")
pytestmark = pytest.mark.ray


def _loopback_only() -> bool:
    """Whether this process's network namespace has no interface but loopback (asked of the kernel: /sys/class/net
    shows the namespace sysfs was mounted in)."""
    try:
        return {name for _, name in socket.if_nameindex()} <= {"lo"}
    except OSError:
        return False

#: Ray reserves far more address space than it touches: the child's cap is a guard, not a measure.
MEMORY_BYTES = 64 * 1024**3
TIMEOUT_S = 240.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """The address of a Ray cluster of one node (127.0.0.1: this namespace has loopback alone) with 2 CPUs,
    one measuring slot and two fake devices, ``a`` and ``b``."""
    if not _loopback_only():
        pytest.skip("the Ray cluster starts only in a network namespace with loopback alone: `make test` runs "
                    "these tests under `unshare -n`")
    with pytest.MonkeyPatch.context() as patch:
        # the workers are started by this node and import this checkout
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p))
        ray.init(address="local", num_cpus=2, include_dashboard=False,
                 resources={MEASURE_RESOURCE: 1, resource_name("a"): 1, resource_name("b"): 1},
                 _node_ip_address="127.0.0.1", logging_level=logging.WARNING, log_to_driver=False)
        try:
            yield ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()


def sweep(address: str, *args: str | os.PathLike[str]) -> CliResult:
    return run_cli(["sweep", "--ray", address, *args], timeout_s=TIMEOUT_S, memory_bytes=MEMORY_BYTES)


def run_files(out: Path) -> dict[str, int]:
    """Run file name -> mtime in ns."""
    return {p.name: p.stat().st_mtime_ns for p in sorted((out / "runs").glob("*.json"))}


def test_two_zoo_models_on_two_targets_then_a_rerun_does_nothing(cluster: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    models = [zoo("squeezenet"), zoo("resnet50")]
    result = sweep(cluster, *models, "-t", "host", "-t", "rdk-s100", "-o", out)
    assert result.returncode == 0, result.describe()
    assert "4 cells: 0 already done, 4 run now, 0 failed" in result.out
    cells = expand(SweepSpec(models=tuple(map(str, models)), targets=("host", "rdk-s100")))
    assert sorted(run_files(out)) == sorted(f"{c.key}.json" for c in cells)

    rows = {(r["cell.model_name"], r["cell.target"]): r for r in iter_rows(out / "runs.parquet")}
    assert set(rows) == {(m.stem, t) for m in models for t in ("host", "rdk-s100")}
    layers = list(iter_rows(out / "layers.parquet"))
    for (name, target), row in rows.items():
        assert row["cell.status"] == "ok" and row["cell.mode"] == "estimate" and row["cell.error"] is None
        run = layerscope.load(out / row["cell.run_file"])
        run_schema_validator().validate(run.document)
        summary = run.document["summary"]
        assert row["summary.est_latency_us"] == summary["est_latency_us"] and row["target.name"] == target
        if target != "host":  # host is this machine's probe, measured (and cached) where the cell ran
            # the same numbers as the Python API's estimate of the same cell
            direct = layerscope.estimate(zoo(name.removeprefix("light_")), target=target).document["summary"]
            assert row["summary.est_latency_us"] == direct["est_latency_us"]
        assert row["summary.macs"] == layerscope.estimate(zoo(name.removeprefix("light_")),
                                                          target=target).document["summary"]["macs"]
        own = [r for r in layers if r["cell.key"] == row["cell.key"]]
        assert len(own) == row["summary.layer_count"] == len(run.document["layers"])
        assert {r["id"] for r in own} == {layer["id"] for layer in run.document["layers"]}
    # an accelerator profile estimates each model far faster than the host CPU
    for model in models:
        assert rows[(model.stem, "rdk-s100")]["summary.est_latency_us"] < rows[(model.stem, "host")][
            "summary.est_latency_us"]
    html = (out / "leaderboard.html").read_text(encoding="utf-8")
    assert "4 cells done, 0 failed" in html
    # ranked by estimated latency within each target: resnet50 (4.1 GMACs) after squeezenet (0.35 GMACs)
    host = html[html.index("host &middot; estimate"):html.index("rdk-s100 &middot; estimate")]
    assert host.index("light_squeezenet") < host.index("light_resnet50")

    before = run_files(out)
    again = sweep(cluster, *models, "-t", "host,rdk-s100", "-o", out)
    assert again.returncode == 0, again.describe()
    assert "4 cells: 4 already done, 0 run now, 0 failed" in again.out
    assert run_files(out) == before  # not one run file rewritten


def test_a_failed_cell_is_listed_and_the_others_complete(cluster: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad<img src=x onerror=alert(1)>.onnx"
    bad.write_text("not an onnx model", encoding="utf-8")
    out = tmp_path / "sweep"
    result = sweep(cluster, zoo("squeezenet"), bad, "-t", "host", "-o", out)
    assert result.returncode == 2, result.describe()  # the bad model is bad input
    assert "1 of 2 cells failed" in result.err
    assert "2 cells: 0 already done, 2 run now, 1 failed" in result.out
    rows = {r["cell.model_name"]: r for r in iter_rows(out / "runs.parquet")}
    assert rows["light_squeezenet"]["cell.status"] == "ok"
    failed = rows[bad.stem]
    assert failed["cell.status"] == "failed" and failed["cell.run_file"] is None
    assert failed["cell.error"] and failed["summary.est_latency_us"] is None
    record = json.loads(next((out / "failed").glob("*.json")).read_text(encoding="utf-8"))
    assert record["error"] == failed["cell.error"] and record["exit_code"] == 2
    html = (out / "leaderboard.html").read_text(encoding="utf-8")
    assert "<img" not in html and "bad&lt;img src=x onerror=alert(1)&gt;" in html
    assert "1 cells done, 1 failed" in html


def test_a_worker_killed_mid_cell_is_retried(cluster: str, tmp_path: Path) -> None:
    out, tmp = tmp_path / "sweep", tmp_path / "tmp"
    tmp.mkdir()
    # a measuring cell: several seconds of ONNX Runtime sessions, long enough to be caught running
    started = start_cli(["sweep", "--ray", cluster, zoo("squeezenet"), "--mode", "profile", "--runs", "20",
                         "--warmup", "2", "-o", out], tmp_path / "log", env={"TMPDIR": str(tmp)},
                        memory_bytes=MEMORY_BYTES)
    markers = out / "running"
    started.wait_until(lambda: markers.is_dir() and any(markers.glob("*.json")), timeout_s=TIMEOUT_S)
    marker = next(markers.glob("*.json"))
    victim = json.loads(marker.read_text(encoding="utf-8"))["pid"]
    os.kill(victim, signal.SIGKILL)
    result = started.finish(timeout_s=TIMEOUT_S)
    assert result.returncode == 0, result.describe()
    assert "1 cells: 0 already done, 1 run now, 0 failed" in result.out
    (row,) = iter_rows(out / "runs.parquet")
    assert row["cell.status"] == "ok" and row["cell.mode"] == "profile"
    assert row["summary.meas_latency_us"] > 0 and row["measurement.runs"] == 20
    assert not any(markers.glob("*.json"))  # the retry ran to its end and cleaned up
    assert list(tmp.iterdir()) == []  # the killed worker's cell folder went with the sweep's root


def _profile_folders(tmp: Path) -> list[Path]:
    return [p for p in tmp.rglob("layerscope-profile-*") if p.is_dir()]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_sweep_stopped_while_a_worker_profiles_leaves_no_temporary_folder(cluster: str, tmp_path: Path,
                                                                            signum: int) -> None:
    """The driver's TMPDIR holds the sweep's root, and the worker (on this machine) its cell's folder under it,
    where the profiled session writes its optimized model and trace: a signal to the driver then, and nothing
    of them is left once it has exited (the worker, stopped with the driver, cannot clean up: the driver does)."""
    out, tmp = tmp_path / "sweep", tmp_path / "tmp"
    tmp.mkdir()
    started = start_cli(["sweep", "--ray", cluster, zoo("squeezenet"), "--mode", "profile", "--runs", "3",
                         "--warmup", "40", "-o", out], tmp_path / "log", env={"TMPDIR": str(tmp)},
                        memory_bytes=MEMORY_BYTES)
    started.wait_until(lambda: bool(_profile_folders(tmp)), timeout_s=TIMEOUT_S)
    (profiled,) = _profile_folders(tmp)
    started.proc.send_signal(signum)
    result = started.finish(timeout_s=TIMEOUT_S)
    assert profiled.parent.name.startswith("layerscope-cell-p") and profiled.parent.parent.parent == tmp
    assert result.returncode == 128 + signum and "Traceback" not in result.err, result.describe()
    assert list(tmp.iterdir()) == []


def test_a_sweep_killed_halfway_completes_when_rerun(cluster: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    models = [zoo(n) for n in ("vgg19", "densenet121", "inception_v2", "resnet50")]
    targets = "host,rdk-s100,rdk-x5"
    started = start_cli(["sweep", "--ray", cluster, *models, "-t", targets, "-o", out], tmp_path / "log",
                        memory_bytes=MEMORY_BYTES)
    runs = out / "runs"
    started.wait_until(lambda: runs.is_dir() and any(runs.glob("*.json")), timeout_s=TIMEOUT_S)
    started.proc.send_signal(signal.SIGKILL)
    started.proc.wait(timeout=30)
    kept = run_files(out)
    assert 1 <= len(kept) < 12, kept  # killed halfway: some cells done, not all

    result = sweep(cluster, *models, "-t", targets, "-o", out)
    assert result.returncode == 0, result.describe()
    assert f"12 cells: {len(kept)} already done, {12 - len(kept)} run now, 0 failed" in result.out
    after = run_files(out)
    assert len(after) == 12 and {k: after[k] for k in kept} == kept  # the cells done before were not rerun
    assert [r["cell.status"] for r in iter_rows(out / "runs.parquet")] == ["ok"] * 12


def test_a_sweep_sigterm_cancels_its_tasks_and_keeps_the_cells_done(cluster: str, tmp_path: Path) -> None:
    """SIGTERM on the driver: the cells done are kept, exit 143 with one line; the tasks still queued or running end
    with the driver; a rerun runs only the others and leaves no marker."""
    out = tmp_path / "sweep"
    models = [zoo(n) for n in ("vgg19", "densenet121", "inception_v2", "resnet50")]
    args = ["sweep", "--ray", cluster, *models, "-t", "host,rdk-s100,rdk-x5", "-o", out]
    started = start_cli(args, tmp_path / "log", memory_bytes=MEMORY_BYTES)
    runs = out / "runs"
    started.wait_until(lambda: runs.is_dir() and any(runs.glob("*.json")), timeout_s=TIMEOUT_S)
    started.proc.send_signal(signal.SIGTERM)
    result = started.finish(timeout_s=TIMEOUT_S)
    assert result.returncode == 143 and "Traceback" not in result.err, result.describe()
    kept = run_files(out)
    assert result.err_lines[-1] == (f"layerscope: terminated by SIGTERM: {len(kept)} of 12 cells are done, their run "
                                    f"files in {runs}; run the same command again to run the others")
    again = sweep(cluster, *models, "-t", "host,rdk-s100,rdk-x5", "-o", out)
    assert again.returncode == 0, again.describe()
    # run files are written by the driver alone: what it kept is what the rerun finds done
    assert f"12 cells: {len(kept)} already done, {12 - len(kept)} run now, 0 failed" in again.out
    assert len(run_files(out)) == 12 and {k: v for k, v in run_files(out).items() if k in kept} == kept
    assert not (out / "running").exists()


def test_an_unknown_mode_is_bad_input_before_any_cluster(tmp_path: Path) -> None:
    """The plan's errors come before Ray is touched (no --ray: a local runtime would be started otherwise)."""
    result = run_cli(["sweep", zoo("squeezenet"), "--mode", "estimate,bench", "-o", tmp_path / "o"])
    assert result.returncode == 2 and "unknown sweep mode(s) 'bench'" in result.err, result.describe()


def test_a_bad_target_stops_the_sweep_before_any_cell(tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = run_cli(["sweep", zoo("squeezenet"), "-t", "rdk-s100,nosuch", "--no-ray", "-o", out])
    assert result.returncode == 2 and "unknown target 'nosuch'" in result.err, result.describe()
    assert not (out / "runs").exists()  # no cell ran, on rdk-s100 either


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    import fcntl

    out = tmp_path / "o"
    out.mkdir()
    with (out / ".sweep.lock").open("a+") as held:  # a sweep running there holds this lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242")
        held.flush()
        result = run_cli(["sweep", zoo("squeezenet"), "--no-ray", "-o", out])
    assert result.returncode == 2, result.describe()
    assert "another layerscope sweep (process 4242) is running in this folder" in result.err
    assert not (out / "runs").exists()
    again = run_cli(["sweep", zoo("squeezenet"), "--no-ray", "-o", out])  # released: it runs
    assert again.returncode == 0 and "1 cells: 0 already done, 1 run now, 0 failed" in again.out, again.describe()


#: A device that sleeps for, and prints, a latency that is a function of the model file alone: 400 ms plus its
#: size in bytes as µs; it logs "DEVICE MODEL START END" (seconds since the epoch) per call, or fails while the file
#: LOG.offline-DEVICE exists. A shell script: starting it costs little beside the sleep.
FAKE_DEVICE = """#!/bin/sh
if [ -e "$3.offline-$2" ]; then echo "board $2 is offline" >&2; exit 7; fi
start=$(date +%s.%N)
us=$((400000 + $(stat -c %s "$1")))
sleep "$(awk "BEGIN { printf \\"%.6f\\", $us / 1000000 }")"
echo "$2 $1 $start $(date +%s.%N)" >> "$3"
echo "average latency: $(awk "BEGIN { printf \\"%.3f\\", $us / 1000 }") ms"
"""


def test_two_devices_time_a_bisect_plan_in_at_most_0_6x_the_time_of_one(cluster: str, tmp_path: Path,
                                                           write_model: ModelWriter) -> None:
    model = write_residual(write_model)
    script = tmp_path / "fake_device.sh"
    script.write_text(FAKE_DEVICE, encoding="utf-8")

    def warm() -> int:  # a worker that has imported what a device job needs (pickled by value: no test import)
        import layerscope.sweep.devices  # noqa: F401

        time.sleep(1.0)
        return os.getpid()

    # What is compared is the pool, not what a first run pays once (seconds on a loaded machine): one warm worker
    # per device, and one small bisect first, untimed, for this process' imports and caches.
    remote = ray.remote(num_cpus=0)(warm)
    assert len(set(ray.get([remote.options(resources={resource_name(d): 1}).remote() for d in "ab"]))) == 2
    assert main(["bisect", str(model), "--target", "rdk-s100", "--run-cmd", f"exec sh {script} {{model}} {{device}} "
                 f"{tmp_path / 'warm.log'}", "--latency-regex", r"latency: ([0-9.]+) ms", "--segments", "2",
                 "--repeats", "2", "--no-cache", "--devices", "a,b"]) == 0
    results = {}
    for devices in ("a", "a,b"):
        log = tmp_path / f"calls-{devices}.log"
        out = tmp_path / f"run-{devices}.json"
        start = time.perf_counter()
        code = main(["bisect", str(model), "--target", "rdk-s100", "--run-cmd",
                     f"exec sh {script} {{model}} {{device}} {log}",
                     "--latency-regex", r"latency: ([0-9.]+) ms", "--granularity", "layer", "--repeats", "4",
                     "--no-cache", "--devices", devices, "-o", str(out)])
        wall_s = time.perf_counter() - start
        assert code == 0
        lines = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
        calls = [fields[0] for fields in lines]
        # the devices' phase: from the first timing's start to the last one's end (the rest of the command, loading,
        # estimating, planning and writing the prefixes, is the same work with one device or two)
        phase_s = max(float(f[3]) for f in lines) - min(float(f[2]) for f in lines)
        results[devices] = (phase_s, load_document(out)["bisect"], calls, wall_s)
    one_s, one, one_calls, one_wall_s = results["a"]
    two_s, two, two_calls, two_wall_s = results["a,b"]
    # 9 models (baseline, 8 prefixes ... whole) x 4 rounds, each timed once; the pool shares them out evenly
    assert len(one_calls) == len(two_calls) == 36 and set(one_calls) == {"a"}
    assert two_calls.count("a") == two_calls.count("b") == 18
    assert [s["increment_us"] for s in two["segments"]] == [s["increment_us"] for s in one["segments"]]
    assert two["full_us"] == one["full_us"] and two["baseline_us"] == one["baseline_us"]
    assert two["full_us"] - two["baseline_us"] == sum(s["increment_us"] for s in two["segments"])
    print(f"whole bisect on one device {one_wall_s:.2f} s, on two {two_wall_s:.2f} s ({two_wall_s / one_wall_s:.2f}x); "
          f"its timing phase {one_s:.2f} s and {two_s:.2f} s ({two_s / one_s:.2f}x)")
    assert two_wall_s <= 0.6 * one_wall_s and two_s <= 0.6 * one_s, (one_wall_s, two_wall_s, one_s, two_s)


def test_the_jobs_of_a_failing_device_are_rescheduled(cluster: str, tmp_path: Path,
                                                      write_model: ModelWriter) -> None:
    model = write_residual(write_model)
    script = tmp_path / "fake_device.sh"
    script.write_text(FAKE_DEVICE, encoding="utf-8")
    log = tmp_path / "calls.log"
    (tmp_path / "calls.log.offline-b").touch()
    out = tmp_path / "run.json"
    assert main(["bisect", str(model), "--target", "rdk-s100", "--run-cmd",
                 f"exec sh {script} {{model}} {{device}} {log}", "--latency-regex", r"latency: ([0-9.]+) ms",
                 "--granularity", "layer", "--repeats", "2", "--no-cache", "--devices", "a,b", "-o", str(out)]) == 0
    calls = [line.split()[0] for line in log.read_text(encoding="utf-8").splitlines()]
    assert calls == ["a"] * 18  # b's share went to a
    planner = CutPlanner.for_model(load_model(model))
    sizes = [len(planner.prefix_model(k).SerializeToString(deterministic=True))
             for k in range(planner.layer_count + 1)]
    section = load_document(out)["bisect"]
    assert [s["increment_us"] for s in section["segments"]] == [b - a for a, b in itertools.pairwise(sizes)]
    assert section["baseline_us"] == 400_000 + sizes[0]


#: A compiler that copies the model to {compiled} in about a second, logging "START END MODEL" (seconds since the
#: epoch) per call.
FAKE_COMPILER = """#!/bin/sh
start=$(date +%s.%N)
sleep 1
cp "$1" "$2"
echo "$start $(date +%s.%N) $1" >> "$3"
"""


def test_the_pool_compiles_each_model_once_in_parallel_and_every_device_times_that_file(
        cluster: str, tmp_path: Path, write_model: ModelWriter) -> None:
    model = write_residual(write_model)
    (tmp_path / "fake_device.sh").write_text(FAKE_DEVICE, encoding="utf-8")
    (tmp_path / "fake_compiler.sh").write_text(FAKE_COMPILER, encoding="utf-8")
    calls, compiles, out = tmp_path / "calls.log", tmp_path / "compiles.log", tmp_path / "run.json"
    assert main(["bisect", str(model), "--target", "rdk-s100",
                 "--compile-cmd", f"exec sh {tmp_path / 'fake_compiler.sh'} {{model}} {{compiled}} {compiles}",
                 "--run-cmd", f"exec sh {tmp_path / 'fake_device.sh'} {{compiled}} {{device}} {calls}",
                 "--latency-regex", r"latency: ([0-9.]+) ms", "--granularity", "layer", "--repeats", "2",
                 "--no-cache", "--devices", "a,b", "-o", str(out)]) == 0
    compiled = [line.split() for line in compiles.read_text(encoding="utf-8").splitlines()]
    # 9 models (baseline, 8 prefixes ... whole), each compiled once although 2 rounds x 2 devices time them
    assert len(compiled) == len({model for _, _, model in compiled}) == 9
    spans = sorted((float(start), float(end)) for start, end, _ in compiled)
    assert any(b_start < a_end for (_, a_end), (b_start, _) in itertools.pairwise(spans)), spans  # in parallel
    timed = [line.split() for line in calls.read_text(encoding="utf-8").splitlines()]
    assert len(timed) == 18 and {fields[0] for fields in timed} == {"a", "b"}
    assert all(Path(fields[1]).name == "compiled" for fields in timed)  # the one compiled file, on both devices
    planner = CutPlanner.for_model(load_model(model))
    sizes = [len(planner.prefix_model(k).SerializeToString(deterministic=True))
             for k in range(planner.layer_count + 1)]
    section = load_document(out)["bisect"]
    assert [s["increment_us"] for s in section["segments"]] == [b - a for a, b in itertools.pairwise(sizes)]


def test_a_failing_compile_on_the_pool_stops_the_bisect_with_its_error(
        cluster: str, tmp_path: Path, write_model: ModelWriter, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_residual(write_model)
    (tmp_path / "fake_device.sh").write_text(FAKE_DEVICE, encoding="utf-8")
    code = main(["bisect", str(model), "--target", "rdk-s100", "--compile-cmd", "echo 'no licence for {model}'; exit 5",
                 "--run-cmd", f"exec sh {tmp_path / 'fake_device.sh'} {{compiled}} {{device}} {tmp_path / 'calls.log'}",
                 "--latency-regex", r"latency: ([0-9.]+) ms", "--segments", "2", "--repeats", "2", "--no-cache",
                 "--devices", "a,b"])
    err = capsys.readouterr().err
    assert code == 3 and "--compile-cmd exited with code 5" in err and "no licence for" in err, err
    assert not (tmp_path / "calls.log").exists()  # nothing was timed
