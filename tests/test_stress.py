"""The memory-contention experiment: background streamers, their clean stop, the comparison, ``--stress``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conftest import zoo
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.measure.stress import (
    MAX_SENSITIVE,
    MemoryStress,
    PairedRounds,
    StressReport,
    StressSpec,
    Timed,
    add_stress,
    compare_layers,
    default_buffer_bytes,
    paired_rounds,
    parse_stress,
)
from layerscope.report.stress_terminal import stress_report
from layerscope.runfile import as_run, load_document
from layerscope.runfile.models import RunFile
from layerscope.stats import summarize

SQUEEZENET = str(zoo("squeezenet"))
SMALL = 8 << 20  # 8 MiB buffers keep the unit tests light; the CLI tests use the default size


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


# --- spec -----------------------------------------------------------------------------------------------------------

def test_parse_stress() -> None:
    assert parse_stress("memory") == StressSpec(processes=1)
    assert parse_stress("memory:3").processes == 3
    for bad in ("cpu", "memory:0", "memory:x", "memory:-1", ""):
        with pytest.raises(InputError):
            parse_stress(bad)
    with pytest.raises(ValueError, match="processes"):
        StressSpec(processes=0)


def test_default_buffer_is_larger_than_the_cache_and_bounded() -> None:
    assert 64 << 20 <= default_buffer_bytes() <= 1 << 30


# --- the processes --------------------------------------------------------------------------------------------------

def test_stress_streams_then_stops_cleanly() -> None:
    start = time.perf_counter()
    with MemoryStress(StressSpec(processes=1, buffer_bytes=SMALL)) as stress:
        assert stress.running == 1
        pids = [p.pid for p in stress._processes]
        time.sleep(0.3)
    assert stress.running == 0 and not any(_alive(pid) for pid in pids)
    report = stress.report
    assert report is not None and report.copied_bytes > 0 and report.traffic_bytes_per_s > 0
    assert report.streaming_s >= 0.3 and not report.expired
    assert time.perf_counter() - start < 30


def test_an_exception_in_the_body_still_stops_the_processes() -> None:
    stress = MemoryStress(StressSpec(processes=2, buffer_bytes=SMALL))
    with pytest.raises(KeyboardInterrupt), stress:
        assert stress.running == 2
        raise KeyboardInterrupt
    assert stress.running == 0 and stress.report is not None and stress.report.processes == 2


def test_processes_stop_on_their_own_after_max_duration() -> None:
    with MemoryStress(StressSpec(processes=1, buffer_bytes=SMALL, max_duration_s=0.3)) as stress:
        deadline = time.monotonic() + 10
        while stress.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stress.running == 0
    assert stress.report is not None and stress.report.expired


def test_a_killed_parent_leaves_no_streamer_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal
        from layerscope.measure.stress import MemoryStress, StressSpec
        if __name__ == "__main__":
            stress = MemoryStress(StressSpec(processes=1, buffer_bytes={SMALL})).__enter__()
            open({str(pid_file)!r}, "w").write(str(stress._processes[0].pid))
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup runs in the parent
    """))
    subprocess.run([sys.executable, str(script)], check=False, timeout=60)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_pause_and_resume_switch_the_copying() -> None:
    with MemoryStress(StressSpec(processes=1, buffer_bytes=SMALL)) as stress:
        stress.pause()
        copied = int(stress._states[0][0])
        time.sleep(0.2)
        assert int(stress._states[0][0]) == copied  # idle while paused
        stress.resume()
        time.sleep(0.2)
        assert int(stress._states[0][0]) > copied
    report = stress.report
    assert report is not None and 0.15 < report.streaming_s < 5 and not report.expired


def test_paired_rounds_alternate_the_order_and_pause_for_baselines() -> None:
    calls: list[tuple[bool, int, bool]] = []
    holder: dict[str, MemoryStress] = {}
    original = MemoryStress.__enter__

    def enter(self: MemoryStress) -> MemoryStress:
        holder["stress"] = self
        return original(self)

    def measure(stressed: bool, index: int) -> str:
        calls.append((stressed, index, holder["stress"]._go.is_set()))
        time.sleep(0.05)  # off the CPU: cores busy near 0
        return f"{'B' if stressed else 'A'}{index}"

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MemoryStress, "__enter__", enter)
        experiment = paired_rounds(measure, StressSpec(processes=1, buffer_bytes=SMALL, rounds=3))
    assert experiment.results() == [("A0", "B0"), ("A1", "B1"), ("A2", "B2")]
    assert [(s, i) for s, i, _ in calls] == [(False, 0), (True, 0), (True, 1), (False, 1), (False, 2), (True, 2)]
    assert all(go == stressed for stressed, _, go in calls)  # streaming exactly for the stressed ones
    assert all(0 <= t.cores_busy < 0.5 for pair in experiment.pairs for t in pair)
    assert experiment.report.processes == 1 and holder["stress"].running == 0
    assert not experiment.cut_short(StressSpec(rounds=3), lambda _: False)


def test_an_interrupted_measurement_ends_the_rounds() -> None:
    def measure(stressed: bool, index: int) -> str:
        if index == 1 and not stressed:
            raise KeyboardInterrupt
        return f"{'B' if stressed else 'A'}{index}"

    spec = StressSpec(buffer_bytes=SMALL, rounds=3)
    experiment = paired_rounds(measure, spec)
    assert experiment.results() == [("A0", "B0")]  # round 2 (B1 then A1) never completed its pair
    assert experiment.cut_short(spec, lambda _: False)


# --- the comparison -------------------------------------------------------------------------------------------------

def test_sensitive_layers_grow_in_every_round_more_than_the_model() -> None:
    before = {"a": 100.0, "b": 100.0, "c": 100.0, "tiny": 0.1, "d": 100.0, "gone": 5.0}
    rounds = [(before, {"a": 200.0, "b": 110.0, "c": 100.0, "tiny": 1.0, "d": 95.0}),
              (before, {"a": 190.0, "b": 112.0, "c": 160.0, "tiny": 1.0, "d": 95.0, "gone": 5.0}),
              (before, {"a": 210.0, "b": 111.0, "c": 170.0, "tiny": 1.0, "d": 96.0, "gone": 5.0})]
    comparison = compare_layers(rounds)
    compared = {c.layer_id: c for c in comparison.layers}
    assert set(compared) == {"a", "b", "c", "tiny", "d"}  # "gone" is missing from a round
    # a: x2 in every round; b: +10-12% but the model grows ~30%; c: x1.6 at the median but not slower in round 1;
    # tiny: below the share
    assert [lid for lid, c in compared.items() if c.sensitive] == ["a"]
    assert compared["a"].ratio == 2.0 and compared["a"].min_ratio == 1.9
    assert compared["c"].ratio == 1.6 and compared["c"].min_ratio == 1.0
    assert comparison.total_ratio == pytest.approx(558 / 400.1)  # the median round


def test_at_most_max_sensitive_are_marked_highest_ratio_first() -> None:
    baseline = {f"l{i}": 100.0 for i in range(30)}
    stressed = {f"l{i}": 100.0 * (1 + i / 10) for i in range(30)}
    marked = [c.layer_id for c in compare_layers([(baseline, stressed)]).layers if c.sensitive]
    assert marked == [f"l{i}" for i in range(30 - MAX_SENSITIVE, 30)]


def test_add_stress_writes_the_layer_fields_and_the_section() -> None:
    typed = _run([
        {"id": "a", "measured": {"median_us": 100.0, "samples": 3}},
        {"id": "b", "measured": {"median_us": 100.0, "samples": 3}},
        {"id": "gone", "measured": {"median_us": 0.0, "samples": 0}},
    ])
    before = {"a": 100.0, "b": 100.0}
    report = StressReport(processes=1, buffer_bytes=SMALL, streaming_s=2.0, copied_bytes=10**9, expired=False)
    measured = [((10.0, before), (15.0, {"a": 150.0, "b": 100.0})), ((10.0, before), (12.0, {"a": 170.0, "b": 101.0}))]
    experiment = PairedRounds(tuple((Timed(a, 1.0), Timed(b, 0.95)) for a, b in measured), report)
    run = add_stress(typed, experiment, lambda m: summarize([m[0]]), model_threads=1,
                     layer_times=lambda m: m[1]).to_json()
    a, b, gone = run["layers"]
    assert a["measured"]["stress_ratio"] == 1.6 and a["measured"]["stress_ratio_min"] == 1.5
    assert a["measured"]["stress_baseline_us"] == 100 and a["measured"]["memory_sensitive"] is True
    assert b["measured"]["memory_sensitive"] is False and "stress_ratio" not in gone["measured"]
    section = run["stress"]
    assert section["latency_ratio_p50"] == pytest.approx(1.35) and section["latency_ratio_p50_range"] == [1.2, 1.5]
    assert [r["ratio_p50"] for r in section["rounds"]] == [1.5, 1.2]
    assert [(r["baseline_cores_busy"], r["stressed_cores_busy"]) for r in section["rounds"]] == [(1.0, 0.95)] * 2
    assert section["contended_rounds"] == []
    assert section["traffic_bytes_per_s"] == 1e9 and section["layer_ratio"] == pytest.approx(1.3025)
    assert section["sensitive_layers"] == ["a"]


def test_rounds_where_the_model_lost_the_cpu_do_not_mark_layers() -> None:
    before = {"a": 100.0, "b": 100.0}
    report = StressReport(processes=1, buffer_bytes=SMALL, streaming_s=2.0, copied_bytes=10**9, expired=False)
    stressed = [(20.0, {"a": 200.0, "b": 150.0}), (11.0, {"a": 130.0, "b": 101.0}), (20.0, {"a": 200.0, "b": 150.0})]
    busy = [(1.0, 0.5), (1.0, 0.98), (0.6, 0.3)]  # round 2 kept the CPU: its ratios decide
    experiment = PairedRounds(tuple((Timed((10.0, before), a), Timed(after, b))
                                    for after, (a, b) in zip(stressed, busy, strict=True)), report)
    typed = _run([{"id": lid, "measured": {"median_us": 100.0, "samples": 3}} for lid in before])
    run = add_stress(typed, experiment, lambda m: summarize([m[0]]), model_threads=1,
                     layer_times=lambda m: m[1]).to_json()
    assert run["stress"]["contended_rounds"] == [1, 3]
    assert run["layers"][0]["measured"]["stress_ratio"] == 1.3 and run["stress"]["sensitive_layers"] == ["a"]
    assert "contended round(s) 1, 3" in " ".join(_render(run).split())

    every = PairedRounds(tuple(p for i, p in enumerate(experiment.pairs) if i != 1), report)
    run = add_stress(as_run(run), every, lambda m: summarize([m[0]]), model_threads=1,
                     layer_times=lambda m: m[1]).to_json()
    assert run["stress"]["sensitive_layers"] == [] and run["layers"][0]["measured"]["stress_ratio"] == 2.0
    assert "no layer is marked memory-sensitive" in " ".join(_render(run).split())


def _run(layers: list[dict[str, Any]]) -> RunFile:
    """A typed run of ``layers`` (the smallest document the schema takes)."""
    return as_run({"schema_version": 2, "model": {}, "summary": {}, "layers": layers})


def _render(run: dict[str, Any]) -> str:
    """The terminal's stress report of ``run`` (layers and a stress section) made a whole run file."""
    console = Console(width=200, record=True)
    console.print(stress_report(as_run({"schema_version": 2, "model": {"name": "m"}, "summary": {}, **run})))
    return console.export_text()


# --- --stress on the commands ---------------------------------------------------------------------------------------

def test_bench_with_stress_writes_the_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", SQUEEZENET, "--runs", "3", "--warmup", "1", "--threads", "1",
                 "--stress", "memory:1", "-o", str(out)]) == 0
    stress = load_document(out)["stress"]
    assert stress["processes"] == 1 and stress["traffic_bytes_per_s"] > 0 and not stress["expired"]
    assert len(stress["rounds"]) == 3
    assert all(r["baseline"]["samples"] == r["stressed"]["samples"] == 3 for r in stress["rounds"])
    low, high = stress["latency_ratio_p50_range"]
    assert 0 < low <= stress["latency_ratio_p50"] <= high and stress["layer_ratio"] is None
    assert "End to end without and with memory stress" in " ".join(capsys.readouterr().out.split())


def test_profile_with_stress_marks_layers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "profile.json"
    assert main(["profile", SQUEEZENET, "--runs", "3", "--warmup", "1", "--threads", "1", "--top", "3",
                 "--stress", "memory", "-o", str(out)]) == 0
    run = load_document(out)
    measured = [layer["measured"] for layer in run["layers"] if layer["measured"].get("samples")]
    assert measured and all(isinstance(m["memory_sensitive"], bool) and m["stress_ratio"] >= m["stress_ratio_min"] > 0
                            for m in measured)
    sensitive = {layer["id"] for layer in run["layers"] if layer["measured"].get("memory_sensitive")}
    assert set(run["stress"]["sensitive_layers"]) == sensitive and len(sensitive) <= MAX_SENSITIVE
    assert run["stress"]["layer_ratio"] > 0
    assert "Layers most slowed by memory stress" in " ".join(capsys.readouterr().out.split())


def test_a_bad_stress_value_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", SQUEEZENET, "--stress", "cpu:2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == ["Error: Invalid value for '--stress': unknown stress 'cpu' in 'cpu:2'; "
                                "expected memory or memory:N (see `layerscope bench --help`)"]
