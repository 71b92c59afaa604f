"""Hostile vendor files: parsing is linear in the input, so a 1 MB adversarial file is refused (exit 2,
one line naming the file and the field) or read within the subprocess limits of tests/_limits.py.

Each input targets one pattern that used to backtrack: an RKNN header line repeating ``ID OpType``
(quadratic), a Horizon ``ucp_version`` line with a long run of blanks (quadratic), a Horizon static
cost cell with a long run of blanks (cubic), a truncated Horizon log nesting objects around a large
array (every key's decode scanned to the end), and TensorRT ``{ForeignNode[...]}`` names with many
``...`` (quadratic).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _limits import assert_one_line_error, run_limited

MB = 1 << 20
PERF = '{"perf_result": {"FPS": 10.0, "average_latency": 2.5}}'


def _rknn_header() -> str:
    return "ID OpType " * (MB // 10 + 1)


def _ucp_version() -> str:
    return "ucp_version: 3" + " \t" * (MB // 2) + "x\n" + PERF


def _static_cost() -> str:
    cell = "1" + " " * MB + "x"
    return json.dumps({"summary": {"performance": {"latency (us)": 5},
                                   "layer details": [{"layer name": "a", "computing cost (no DDR)": cell}]}})


def _salvage() -> str:
    return '{"model_latency": ' + '{"k": ' * 900 + "[" + "1," * (MB // 2)


def _foreign() -> str:
    return json.dumps([{"count": 1}, {"name": "{ForeignNode[" + "a..." * (MB // 4) + "b]}", "averageMs": 1.0}])


CASES = {
    # name: (format, text, words the one-line error names; None: it must parse)
    "rknn-header": ("rknn", _rknn_header, ("eval_perf", "header")),
    "rknn-header-auto": ("auto", _rknn_header, ("not a vendor profile",)),
    "ucp-version": ("horizon-profiler", _ucp_version, None),
    "static-cost-cell": ("horizon-static", _static_cost, ("summary.layer details[0].computing cost (no DDR)",
                                                          "characters")),
    "salvage-nested": ("horizon-profiler", _salvage, ("no profiler section",)),
    "foreign-node-dots": ("trtexec", _foreign, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_mb_adversarial_input_is_linear(case: str, tmp_path: Path) -> None:
    fmt, make, words = CASES[case]
    path = tmp_path / f"{case}.txt"
    path.write_text(make())
    assert path.stat().st_size >= MB
    # 5 CPU seconds: start-up is ~1.5 s, the 1 MB parse well under a second; quadratic parsing took
    # minutes (killed by SIGXCPU, exit -24).
    result = run_limited(["import", str(path), "--from", fmt, "--top", "0"], cpu_s=5)
    assert not result.timed_out and result.returncode != -24, f"{case}: over budget after {result.wall_s:.1f} s"
    if words is None:
        assert result.returncode == 0, result.stderr[-800:]
    else:
        assert_one_line_error(result, str(path), *words)


def test_ucp_version_is_read_from_a_blank_padded_line(tmp_path: Path) -> None:
    from layerscope.importers.horizon_profiler import parse_log

    result = parse_log("ucp_version:   3.7.3 \t\n" + PERF, "p.log")
    assert result.info["version"] == "3.7.3"
    assert result.totals.latency is not None and result.totals.latency.mean_us == pytest.approx(2500.0)


def test_cost_cells_keep_their_grammar() -> None:
    from layerscope.errors import InputError
    from layerscope.importers._common import parse_cost

    assert parse_cost("59 us (8.2% of model)", "m.json", "c") == (59.0, 8.2)
    assert parse_cost("1.5ms", "m.json", "c") == (1500.0, None)
    assert parse_cost("3e2 ns (1 %)", "m.json", "c") == pytest.approx((0.3, 1.0))
    for bad in ("59 usx", "59 us (8.2) x", "5 (1%))", "x"):
        with pytest.raises(InputError, match="expected a cost"):
            parse_cost(bad, "m.json", "c")


def test_foreign_range_is_split_at_the_first_dots() -> None:
    from layerscope.importers.names import split_fused

    assert split_fused("{ForeignNode[/m/a...b]}").ranges == (("/m/a", "b"),)
    assert split_fused("ForeignNode[a....b]").ranges == (("a", ".b"),)
    assert split_fused("ForeignNode[...b]").parts == ("ForeignNode[...b]",)


def test_a_foreign_node_range_over_a_long_chain_stores_its_group_once(tmp_path: Path) -> None:
    """A 123-byte TensorRT profile whose ``{ForeignNode[r0...r4999]}`` spans a 5,000-layer chain: the
    group used to be copied into every layer (2.3 GB, a 348 MB run file); now the kernel row holds it once
    and each layer says its size, and the reader gives the same list back."""
    import onnx
    from onnx import TensorProto, helper

    from layerscope.runfile import load_document
    from layerscope.runfile.derived import FUSED_GROUP_INLINE_MAX, fused_group

    n = 5_000
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"r{i}") for i in range(n)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, 8])])
    model = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps([{"count": 10}, {"name": f"{{ForeignNode[r0...r{n - 1}]}}", "averageMs": 5.0}]))
    out = tmp_path / "run.json"
    result = run_limited(["import", str(profile), "--model", str(model), "--from", "trtexec", "-o", str(out)])
    assert result.returncode == 0, result.stderr[-800:]
    assert out.stat().st_size < 5 * 1024 * 1024  # was 348 MB
    run = load_document(out)
    (kernel,) = run["kernels"]
    assert kernel["layers"] == [f"r{i}" for i in range(n)]
    first, last = run["layers"][0]["measured"], run["layers"][-1]["measured"]
    assert first["fused_group"] is None and first["fused_group_size"] == n > FUSED_GROUP_INLINE_MAX
    cache: dict[str, tuple[str, ...]] = {}
    assert fused_group(run, first, cache) == tuple(kernel["layers"]) == fused_group(run, last, cache)
    # the 5 ms is split evenly (Relu has no MACs; FLOPs are equal): 1 µs per layer
    assert first["mean_us"] == pytest.approx(1.0)
