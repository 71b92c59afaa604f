"""``layerscope compare`` as a CI gate: two measured runs of one model are "no change detectable" (exit 0); a
model with an extra op chain many times slower is "slower" and ``--fail-if-slower`` exits 4, in the Markdown too;
each run's steadiness widens the intervals; a negative profiler overhead reads as drift."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerscope
from layerscope.analysis.compare import compare_runs, gate
from layerscope.analysis.compare_stats import FASTER, NO_CHANGE, NOISE_FLOOR, SLOWER, UNJUDGED, run_noise
from layerscope.cli.main import main
from layerscope.errors import InputError, Regression
from layerscope.report.analysis_markdown import compare_markdown
from layerscope.runfile.io import as_run, load
from layerscope.runfile.models import RunFile

#: Few runs: a wider interval, a quick test. One intra-op thread: the steadiest setting on a shared machine.
BENCH = ["--runs", "40", "--warmup", "20", "--threads", "1"]
PROFILE = ["--runs", "60", "--warmup", "10", "--threads", "1"]


def _model(path: Path, *, chain: int = 0, batch: int = 1) -> Path:
    """x[batch, 64] -> MatMul ``mm`` (64x64) -> Relu ``relu`` -> ``chain`` Sin ops -> Identity ``out``."""
    weight = numpy_helper.from_array(np.random.default_rng(0).random((64, 64), dtype=np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["r0"], name="relu")]
    nodes += [helper.make_node("Sin", [f"r{i}"], [f"r{i + 1}"], name=f"sin{i}") for i in range(chain)]
    nodes.append(helper.make_node("Identity", [f"r{chain}"], ["y"], name="out"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 64])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _measure(tmp_path: Path, command: str, model: Path, name: str) -> Path:
    out = tmp_path / f"{name}.json"
    assert main([command, str(model), *(BENCH if command == "bench" else PROFILE), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two bench runs of the base model and one of the model with 200 extra ops (many times slower)."""
    tmp = tmp_path_factory.mktemp("bench")
    base, slow = _model(tmp / "base.onnx"), _model(tmp / "slow.onnx", chain=200)
    _measure(tmp, "bench", base, "warm")  # the first session of a process runs slower: not part of the comparison
    return {"a": _measure(tmp, "bench", base, "a"), "b": _measure(tmp, "bench", base, "b"),
            "slow": _measure(tmp, "bench", slow, "slow")}


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A profile of the base model and of the same graph at batch 4096 (every layer does 4096x the work)."""
    tmp = tmp_path_factory.mktemp("profile")
    return {"base": _measure(tmp, "profile", _model(tmp / "base.onnx"), "base"),
            "big": _measure(tmp, "profile", _model(tmp / "big.onnx", batch=4096), "big")}


def _doc(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _p50_row(markdown: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith("| latency P50 |"))


def test_two_bench_runs_of_one_model_are_no_change_and_pass_the_gate(
        benched: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", str(benched["a"]), str(benched["b"]), "--fail-if-slower", "5", "--markdown", "-"]) == 0
    markdown = capsys.readouterr().out
    assert NO_CHANGE in _p50_row(markdown) and "gate: passed (--fail-if-slower 5%)" in markdown
    assert "regression" not in markdown
    # both runs' runtime and steadiness are in the comment; bench records no drift and says so
    assert "| runtime | onnxruntime" in markdown and "| intra-op threads | 1 | 1 |" in markdown
    assert markdown.count("(bench records no drift)") == 2  # its steadiness is judged on its CV alone


def test_a_many_times_slower_model_is_slower_and_the_gate_exits_4(
        benched: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = _doc(benched["a"]), _doc(benched["slow"])
    assert after["latency"]["p50_us"] > 5 * before["latency"]["p50_us"]  # the premise: many times slower
    md, out = tmp_path / "comment.md", tmp_path / "cmp.json"
    capsys.readouterr()
    code = main(["compare", str(benched["a"]), str(benched["slow"]), "--fail-if-slower", "5", "--markdown", str(md),
                 "-o", str(out)])
    captured = capsys.readouterr()
    assert code == Regression.exit_code == 4
    assert "layerscope: error: regression: end-to-end latency P50" in captured.err
    markdown = md.read_text()  # written before the exit
    row = _p50_row(markdown)
    assert f"| {SLOWER} |" in row and "✗" in row
    assert markdown.splitlines()[2].startswith(f"**{SLOWER}: end-to-end latency P50")
    assert "- regression: end-to-end latency P50 +" in markdown and "over --fail-if-slower 5%" in markdown
    section = _doc(out)["comparison"]
    assert section["gate"]["regression"] is True and len(section["gate"]["failures"]) == 1
    stat = next(m for m in section["metrics"] if m["name"] == "latency P50")["stat"]
    assert stat["low_us"] > 0 and stat["verdict"] == SLOWER and stat["method"] == "bootstrap"  # bench keeps its runs
    # a threshold above the slowdown passes: the gate needs both a detectable slowdown and one above PCT
    change = 100 * stat["delta_us"] / stat["before_us"]
    assert main(["compare", str(benched["a"]), str(benched["slow"]), "--fail-if-slower", f"{change + 1:.0f}"]) == 0
    assert main(["compare", str(benched["slow"]), str(benched["a"]), "--fail-if-slower", "5"]) == 0  # faster


def test_the_saved_comparison_reprints_and_the_html_names_both_runtimes(
        benched: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp.json"
    capsys.readouterr()
    assert main(["compare", str(benched["a"]), str(benched["slow"]), "--fail-if-slower", "5", "-o", str(out)]) == 4
    printed = capsys.readouterr().out
    assert main(["report", str(out), "--format", "table"]) == 0
    reprinted = capsys.readouterr().out
    # the verdict line, the regression, the sides, the table; the saved times are rounded to the nanosecond, which
    # can move the last digit of a percentage
    def masked(text: str) -> list[str]:
        return [re.sub(r"\d", "#", line) for line in text.splitlines()[:20]]

    assert masked(reprinted) == masked(printed)
    html_path = tmp_path / "cmp.html"
    assert main(["report", str(out), "-o", str(html_path)]) == 0
    html = html_path.read_text()
    sides = re.search(r'<table class="grid static" id="comparison-sides">(.*?)</table>', html, re.S)
    assert sides is not None and sides.group(1).count("onnxruntime ") == 2
    assert 'id="comparison-verdict">slower: end-to-end latency P50' in html


def test_profile_runs_judge_each_layer_and_gate_on_a_slower_layer(
        profiled: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cmp = gate(compare_runs(load(profiled["base"]), load(profiled["big"])), fail_if_layer_slower=50)
    by_id = {d.after_id: d for d in cmp.layers}
    mm = by_id["mm"].stat
    assert mm is not None and mm.verdict == SLOWER and mm.low_us is not None and mm.low_us > 0
    # the interval is widened by the noise of both runs and the profiler's 1 µs resolution
    assert cmp.noise is not None and cmp.noise >= NOISE_FLOOR
    assert mm.systematic_us == pytest.approx(cmp.noise * mm.before_us + 1.0)
    assert cmp.gate is not None and any(f.startswith("layer mm (MatMul) +") for f in cmp.gate.failures)
    capsys.readouterr()
    assert main(["compare", str(profiled["base"]), str(profiled["big"]), "--fail-if-layer-slower", "50"]) == 4
    assert "layerscope: error: regression: layer" in capsys.readouterr().err
    markdown = compare_markdown(cmp)
    mm_row = next(line for line in markdown.splitlines() if "| `mm` |" in line)
    assert f"| {SLOWER} ✗ |" in mm_row
    assert "| steadiness |" in markdown  # profile records its steadiness: shown for both


def test_an_unsteady_run_widens_every_interval_and_says_so(profiled: dict[str, Path]) -> None:
    steady, shaky = _doc(profiled["base"]), _doc(profiled["base"])
    shaky["measurement"]["steadiness"] = {"latency_cv": 0.02, "latency_drift": 0.33, "profiled_drift": 0.01}
    calm = compare_runs(as_run(steady), as_run(steady))
    widened = compare_runs(as_run(steady), as_run(shaky))
    own = run_noise(as_run(steady)).moved or 0.0  # the base run's own movement (a loaded machine: large)
    assert widened.noise is not None and widened.noise == pytest.approx(max(0.33, own, NOISE_FLOOR))
    assert calm.noise == pytest.approx(max(own, NOISE_FLOOR))
    a, b = calm.latency, widened.latency
    assert a is not None and b is not None and a.stat is not None and b.stat is not None
    assert b.stat.systematic_us == pytest.approx(widened.noise * b.stat.before_us)
    if own < 0.33:  # the shaky run widens what the steady one would not
        assert b.stat.high_us is not None and a.stat.high_us is not None and b.stat.high_us > a.stat.high_us
    text = compare_markdown(widened)
    assert f"intervals widened by ±{100 * widened.noise:.0f}% for machine noise (" in text
    assert "after run UNSTEADY (moved 33%))" in text
    assert "| steadiness | steady" in text or "| steadiness | UNSTEADY" in text


def test_raw_samples_are_bootstrapped() -> None:
    """A run that stores its per-run times is judged by a bootstrap of the difference of medians."""
    rng = np.random.default_rng(1)

    def run(samples: np.ndarray) -> RunFile:
        values = [round(float(x), 3) for x in samples]
        return as_run({"schema_version": 2, "model": {"name": "m"}, "layers": [], "summary": {},
                       "latency": {"p50_us": float(np.median(values)), "samples": len(values), "samples_us": values}})

    base = rng.lognormal(np.log(1000.0), 0.05, 200)
    same = compare_runs(run(base), run(rng.lognormal(np.log(1000.0), 0.05, 200))).latency
    slower = compare_runs(run(base), run(rng.lognormal(np.log(1300.0), 0.05, 200))).latency
    faster = compare_runs(run(base), run(rng.lognormal(np.log(700.0), 0.05, 200))).latency
    assert same is not None and same.stat is not None and same.stat.method == "bootstrap"
    assert same.stat.verdict == NO_CHANGE
    assert slower is not None and slower.stat is not None and slower.stat.verdict == SLOWER
    assert faster is not None and faster.stat is not None and faster.stat.verdict == FASTER


def test_estimates_are_not_judged(tmp_path: Path) -> None:
    model = _model(tmp_path / "m.onnx")
    run = layerscope.estimate(model)
    cmp = compare_runs(run.typed, run.typed)
    assert cmp.latency is not None and cmp.latency.stat is not None and cmp.latency.stat.verdict == UNJUDGED
    assert all(d.stat is not None and d.stat.verdict == UNJUDGED for d in cmp.layers)
    gated = gate(cmp, 0, 0)  # nothing judged: nothing can fail, even at 0%
    assert gated.gate is not None and not gated.gate.regression


def test_the_api_gives_the_run_the_cli_writes(benched: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    assert main(["compare", str(benched["a"]), str(benched["slow"]), "--labels", "main,pr", "--fail-if-slower",
                 "5", "-o", str(out)]) == 4
    run = layerscope.compare(benched["a"], layerscope.load(benched["slow"]), labels=("main", "pr"),
                             fail_if_slower=5)
    assert run.document == _doc(out)
    assert run.document["comparison"]["gate"]["regression"] is True
    with pytest.raises(InputError, match="--labels"):
        layerscope.compare(benched["a"], benched["b"], labels=("main", " "))


def test_a_negative_profiler_overhead_is_printed_as_drift(
        profiled: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(profiled["base"])
    doc["measurement"]["overhead"] = -0.35
    path = tmp_path / "drift.json"
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["report", str(path), "--format", "table"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "drift the profiled runs took 35.0% less time than the runs without the profiler" in text
    assert "-35.0% run time with the profiler on" not in text
    html = tmp_path / "drift.html"
    assert main(["report", str(path), "-o", str(html)]) == 0
    assert "profiling drift" in html.read_text() and "profiling overhead" not in html.read_text()
