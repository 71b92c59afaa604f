"""``layerscope compare``: the before/after table, per-layer deltas by id, renamed/added/removed, Markdown, JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from layerscope.analysis.compare import compare_runs, comparison_section
from layerscope.cli.main import main
from layerscope.report.analysis_markdown import compare_markdown
from layerscope.run import SCHEMA_VERSION
from layerscope.runfile import as_run, load_document


def _layer(lid: str, op: str, us: float, *, shape: list[int], macs: int = 0, measured: float | None = None,
           fallback: str | None = None) -> dict[str, Any]:
    layer: dict[str, Any] = {"id": lid, "op_type": op, "output_shapes": [shape], "macs": macs, "weight_bytes": 0,
                             "estimate": {"latency_us": us, "fallback_reason": fallback}}
    if measured is not None:
        layer["measured"] = {"status": "measured", "median_us": measured}
    return layer


def _run(layers: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "model": {"name": "m", "path": "m.onnx", "sha256": "x"},
            "target": {"name": "rdk-s100"}, "layers": layers,
            "summary": {"macs": sum(layer["macs"] for layer in layers),
                        "est_latency_us": sum(layer["estimate"]["latency_us"] for layer in layers),
                        "cpu_fallback_count": sum(1 for layer in layers if layer["estimate"]["fallback_reason"])},
            **extra}


BEFORE = _run([_layer("slice", "Slice", 50.0, shape=[1, 3, 32, 32]),
               _layer("stem", "Conv", 100.0, shape=[1, 32, 32, 32], macs=1000),
               _layer("up", "Resize", 40.0, shape=[1, 32, 96, 96], fallback="Resize by 3.0x is not a power of 2"),
               _layer("head", "Conv", 80.0, shape=[1, 255, 32, 32], macs=500)],
              latency={"p50_us": 45000.0, "p99_us": 52000.0, "fps": 22.0},
              measurement={"cpu_util": 0.76, "peak_rss_bytes": 142 * 2**20})
AFTER = _run([_layer("model.0.conv", "Conv", 100.0, shape=[1, 32, 32, 32], macs=1000),
              _layer("up_tconv", "ConvTranspose", 30.0, shape=[1, 32, 96, 96], macs=300),
              _layer("head", "Conv", 60.0, shape=[1, 255, 32, 32], macs=500)],
             latency={"p50_us": 28000.0, "p99_us": 30000.0, "fps": 35.7},
             measurement={"cpu_util": 0.91, "peak_rss_bytes": 108 * 2**20})


def test_metrics_and_layers_are_matched_renamed_added_and_removed() -> None:
    cmp = compare_runs(as_run(BEFORE), as_run(AFTER))
    metrics = {m.name: m for m in cmp.metrics}
    assert metrics["latency P50"].change == pytest.approx(28000 / 45000 - 1)
    assert metrics["FPS"].after == 35.7 and metrics["utilization"].before == 0.76
    assert (metrics["CPU-fallback layers"].before, metrics["CPU-fallback layers"].after) == (1, 0)
    assert metrics["peak memory"].source_before == "measured (peak RSS)"
    assert [(d.before_id, d.after_id) for d in cmp.renamed] == [("stem", "model.0.conv")]
    assert cmp.layers[0].before_id == "head" and cmp.layers[0].delta_us == -20.0
    assert [a[0] for a in cmp.added] == ["up_tconv"] and sorted(r[0] for r in cmp.removed) == ["slice", "up"]
    every_before = {d.before_id for d in cmp.layers} | {r[0] for r in cmp.removed}
    every_after = {d.after_id for d in cmp.layers} | {a[0] for a in cmp.added}
    assert every_before == {layer["id"] for layer in BEFORE["layers"]}
    assert every_after == {layer["id"] for layer in AFTER["layers"]}


def test_measured_times_are_used_only_when_both_runs_measured() -> None:
    measured = _run([_layer("a", "Conv", 10.0, shape=[1], measured=30.0)])
    estimated = _run([_layer("a", "Conv", 12.0, shape=[1])])
    assert compare_runs(as_run(measured), as_run(estimated)).time_source == "estimated"
    both = compare_runs(as_run(measured), as_run(_run([_layer("a", "Conv", 12.0, shape=[1], measured=20.0)])))
    assert both.time_source == "measured" and both.layers[0].delta_us == -10.0


def test_markdown_has_the_table_users_post_and_escapes_pipes() -> None:
    text = compare_markdown(compare_runs(as_run(BEFORE), as_run(AFTER), before_label="v1|old", after_label="v2"))
    assert "| metric | v1\\|old | v2 | change |" in text
    assert "| latency P50 | 45.00 ms | 28.00 ms | -37.8% ✓ |" in text
    assert "**Renamed** (1): `stem` → `model.0.conv`" in text


def test_markdown_names_with_backticks_and_controls_stay_in_their_code_spans() -> None:
    hostile = "x`<b>bold</b>`\x1b[31m\u202e"
    before = json.loads(json.dumps(BEFORE))
    after = json.loads(json.dumps(AFTER))
    for run in (before, after):
        for layer in run["layers"]:
            layer["id"] = layer["name"] = hostile + layer["id"]
    text = compare_markdown(compare_runs(as_run(before), as_run(after), before_label="v1\x07", after_label="v2"))
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "``x`<b>bold</b>`[31m" in text  # fenced by two backticks: the single ones inside cannot end the span
    outside_code = re.sub(r"``.*?``|`[^`]*`", "", text)
    assert "<b>" not in outside_code


def test_compare_command_writes_markdown_and_a_run_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(BEFORE))
    after.write_text(json.dumps(AFTER))
    out = tmp_path / "cmp.json"
    assert main(["compare", str(before), str(after), "-o", str(out), "--markdown",
                 str(tmp_path / "cmp.md")]) == 0
    saved = load_document(out)
    before_run, after_run = as_run(BEFORE), as_run(AFTER)
    section = comparison_section(compare_runs(before_run, after_run), before_run, after_run)
    assert saved["comparison"] == json.loads(json.dumps(section))
    assert saved["layers"] == AFTER["layers"]
    assert (tmp_path / "cmp.md").read_text().startswith("## before → after")
    capsys.readouterr()
    assert main(["compare", str(before), str(after), "--markdown", "-"]) == 0
    assert capsys.readouterr().out.startswith("## before → after")
    assert main(["compare", str(before), str(tmp_path / "missing.json")]) == 2
