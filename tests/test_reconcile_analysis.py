"""Reconciling a run: k over the measured part, per-layer error, Spearman, top-10 overlap, verdict; the spread
of k across runs; the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from layerscope.analysis.reconcile import (
    k_spread,
    rank,
    reconcile_run,
    reconcile_section,
    spearman,
    top_overlap,
)
from layerscope.cli.main import main
from layerscope.errors import InputError
from layerscope.run import SCHEMA_VERSION
from layerscope.runfile import as_run, load_document


def test_ranks_average_ties_and_spearman_matches_known_values() -> None:
    assert rank([10.0, 20.0, 20.0, 5.0]) == [2.0, 3.5, 3.5, 1.0]
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2], [1, 2]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_top_overlap_counts_shared_layers() -> None:
    est = {f"l{i}": float(i) for i in range(20)}
    meas = {f"l{i}": float(20 - i) if i < 5 else float(i) for i in range(20)}
    assert top_overlap(est, est) == 1.0
    assert top_overlap(est, meas, n=10) == 0.5


def _run(layers: list[tuple[str, str, str, float, float | None]], *, p50: float | None = None) -> dict[str, Any]:
    run: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "model": {"name": "toy", "path": "toy.onnx"}, "target": {"name": "host"},
        "layers": [], "summary": {"est_latency_us": sum(e for _, _, _, e, _ in layers)}}
    for lid, op, bound, est, meas in layers:
        layer: dict[str, Any] = {"id": lid, "op_type": op, "unit_kind": "tensor" if op == "Conv" else "vector",
                                 "estimate": {"latency_us": est, "bound": bound}}
        if meas is not None:
            layer["measured"] = {"status": "measured", "median_us": meas}
        run["layers"].append(layer)
    if p50 is not None:
        run["latency"] = {"p50_us": p50}
    return run


def _proportional(k: float, n: int = 12) -> dict[str, Any]:
    return _run([(f"conv{i}", "Conv", "compute", 10.0 + i, k * (10.0 + i)) for i in range(n)], p50=k * 300)


def test_a_proportional_measurement_gives_k_and_a_trusted_verdict() -> None:
    rec = reconcile_run(as_run(_proportional(2.0)))
    assert rec.k == pytest.approx(2.0)
    assert rec.spearman == pytest.approx(1.0) and rec.top_overlap == 1.0
    assert rec.median_abs_error == pytest.approx(0.0, abs=1e-12)
    assert (rec.verdict.ranking, rec.verdict.absolute) == ("yes", "after scaling")
    assert rec.by_op_type[0].name == "Conv" and rec.by_op_type[0].k == pytest.approx(2.0)
    assert rec.end_to_end is not None


def test_a_scrambled_measurement_is_not_trusted_for_ranking_or_absolutes() -> None:
    values = [30.0, 1.0, 25.0, 2.0, 20.0, 3.0, 15.0, 4.0, 10.0, 5.0, 8.0, 6.0]
    run = _run([(f"l{i}", "Conv", "compute", float(i + 1), values[-1 - i]) for i in range(12)])
    rec = reconcile_run(as_run(run))
    assert rec.spearman is not None and rec.spearman < 0.5
    assert rec.verdict.ranking in ("no", "roughly") and rec.verdict.absolute == "no"


def test_estimate_already_right_is_usable_as_is() -> None:
    assert reconcile_run(as_run(_proportional(1.05))).verdict.absolute == "yes"


def test_eliminated_layers_are_outside_the_scope() -> None:
    run = _proportional(2.0)
    run["layers"][0]["measured"] = {"status": "eliminated", "median_us": 0.0}
    rec = reconcile_run(as_run(run))
    assert rec.excluded_layer_ids == ("conv0",) and len(rec.layers) == 11


def test_an_import_with_only_the_accelerator_block_uses_its_k() -> None:
    run = _run([("a", "Conv", "compute", 10.0, None)])
    run["reconcile"] = {"k": 1.2, "measured_us": 12.0, "estimated_us": 10.0, "scope": "accelerator (BPU) time"}
    rec = reconcile_run(as_run(run))
    assert rec.k == pytest.approx(1.2) and rec.spearman is None and rec.verdict.ranking == "unknown"
    section = reconcile_section(rec)
    assert {"k", "measured_us", "estimated_us", "scope", "layers"} <= set(section)


def test_a_run_without_a_measurement_is_refused() -> None:
    with pytest.raises(InputError, match="no measurement and estimate"):
        reconcile_run(as_run(_run([("a", "Conv", "compute", 10.0, None)])))


def test_spread_of_k_warns_when_dispersed_and_names_the_driver() -> None:
    def mixed(bw_share: float) -> dict[str, Any]:
        # bandwidth-bound layers measure 4x their estimate, compute-bound ones 1.5x: k grows with their share
        layers = [(f"c{i}", "Conv", "compute", 10.0 * (1 - bw_share) + 1, 1.5 * (10.0 * (1 - bw_share) + 1))
                  for i in range(6)]
        layers += [(f"b{i}", "Add", "bandwidth", 10.0 * bw_share + 1, 4.0 * (10.0 * bw_share + 1)) for i in range(6)]
        return _run(layers)

    spread = k_spread([reconcile_run(as_run(mixed(s))) for s in (0.1, 0.4, 0.7, 0.9)])
    assert spread.dispersed and spread.lines[1].startswith("WARNING")
    assert "bandwidth" in spread.lines[2]
    stable = k_spread([reconcile_run(as_run(_proportional(k))) for k in (2.0, 2.05, 1.98)])
    assert not stable.dispersed and "stable" in stable.lines[-1]
    with pytest.raises(InputError):
        k_spread([reconcile_run(as_run(_proportional(2.0)))])


def test_reconcile_command_prints_k_and_saves_the_section(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    files = []
    for i, k in enumerate((2.0, 3.0)):
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps(_proportional(k)))
        files.append(str(path))
    assert main(["reconcile", *files, "--save"]) == 0
    out = capsys.readouterr().out
    assert "k across runs" in out and "WARNING: k is dispersed" in out and "Spearman 1.000" in out
    saved = load_document(files[1])["reconcile"]
    assert saved["k"] == pytest.approx(3.0) and saved["spread"]["dispersed"] is True
    assert main(["reconcile", files[0], "-o", str(tmp_path / "one.json")]) == 0
    assert load_document(tmp_path / "one.json")["reconcile"]["verdict"]["ranking"] == "yes"
    assert main(["reconcile", *files, "-o", str(tmp_path / "x.json")]) == 2
    (tmp_path / "bad.json").write_text("{}")
    assert main(["reconcile", str(tmp_path / "bad.json")]) == 2
