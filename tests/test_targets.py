"""Hardware profiles: shipped files, validation, op-support rules and the ``targets`` command."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

from layerscope.cli.targets import command
from layerscope.costs.types import UnitKind
from layerscope.errors import ProfileError
from layerscope.model import Graph, Node, load_model
from layerscope.targets import (
    PREDICATES,
    fallback_reason,
    known_targets,
    list_profiles,
    load_profile,
    register_predicate,
)
from layerscope.targets import host as host_mod
from layerscope.targets.loader import PROFILES_DIR
from layerscope.targets.profile import Profile
from layerscope.targets.schema import load_profile_file

SHIPPED = [name for name in known_targets() if name != "host"]


@pytest.fixture(autouse=True)
def _no_host_probe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test in this file may measure the machine: an empty cache dir and a probe that fails."""
    monkeypatch.setenv("LAYERSCOPE_CACHE_DIR", str(tmp_path / "cache"))

    def refuse() -> None:
        raise AssertionError("the host probe ran")

    monkeypatch.setattr(host_mod, "measure_host", refuse)


# ------------------------------------------------------------------------------ shipped profiles
def _numeric_fields(profile: Profile) -> list[str]:
    fields = [
        "ddr_bandwidth_bytes_per_s",
        "ddr_efficiency",
        "cpu_ddr_bandwidth_bytes_per_s",
        "transfer_overhead_us",
        "sram_bytes",
        "cores",
        "clock_hz",
        "lane_width",
    ]
    for unit in profile.units:
        fields += [f"units.{unit.name}.peak_ops_per_s.{d}" for d in unit.peak_ops_per_s]
        fields += [f"units.{unit.name}.efficiency", f"units.{unit.name}.overhead_us"]
    fields += [f"cpu.peak_ops_per_s.{d}" for d in profile.cpu.peak_ops_per_s]
    fields += ["cpu.efficiency", "cpu.overhead_us"]
    return fields


def test_the_shipped_targets_are_the_documented_ones() -> None:
    assert known_targets() == ["a100-pcie", "a100-sxm", "host", "rdk-s100", "rdk-s100p", "rdk-x3", "rdk-x5"]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_profile_loads_under_its_file_name(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert Path(profile.source_path) == PROFILES_DIR / f"{name}.toml"
    assert profile.default_dtype in profile.dtypes
    assert profile.units and profile.cpu.peak_ops_per_s


@pytest.mark.parametrize("name", SHIPPED)
def test_every_number_in_a_shipped_profile_has_a_source(name: str) -> None:
    profile = load_profile(name)
    missing = [f for f in _numeric_fields(profile) if not (profile.source_for(f) or "").strip()]
    assert missing == []
    assert profile.source_for("fallback_rules")


#: The datasheet profiles the shipped RDK X5 and S100 profiles are calibrated from (benchmarks/board_truth.py).
DATASHEET = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles"


def test_rdk_s100_numbers_match_the_documentation() -> None:
    s100 = load_profile_file(DATASHEET / "rdk-s100.toml")
    tensor = s100.unit_for(UnitKind.TENSOR)
    assert tensor.name == "TAE"
    assert tensor.ops_per_s("int8") == 80e12
    assert s100.peak_ops_per_s("int8") == 80e12
    assert s100.ddr_bandwidth_bytes_per_s == 6400e6 * 96 / 8 == 76.8e9
    assert s100.cpu_ddr_bandwidth_bytes_per_s == 46.4e9
    assert (s100.kind, s100.default_dtype, s100.cores) == ("npu", "int8", 1)
    # 6 A78AE cores x 1.5 GHz x 16 fp32 ops/cycle
    assert s100.cpu.ops_per_s("fp32") == pytest.approx(6 * 1.5e9 * 16)
    # the shipped profile is calibrated from it: the same peaks and DDR, fitted efficiencies, and says so
    shipped = load_profile("rdk-s100")
    assert shipped.unit("TAE").peak_ops_per_s == tensor.peak_ops_per_s
    assert shipped.ddr_bandwidth_bytes_per_s == s100.ddr_bandwidth_bytes_per_s
    assert (shipped.source_for("units.TAE.efficiency") or "").startswith("calibrated: fitted to ")


def test_calibrated_shipped_profiles_keep_their_units_whole() -> None:
    for name in ("rdk-x5", "rdk-s100"):
        shipped, datasheet = load_profile(name), load_profile_file(DATASHEET / f"{name}.toml")
        assert [(u.name, u.kinds) for u in shipped.units] == [(u.name, u.kinds) for u in datasheet.units]
        assert shipped.fuse_elementwise and shipped.plan_sram


@pytest.mark.parametrize(
    ("name", "int8_ops"),
    [("rdk-s100p", 128e12), ("rdk-x5", 10e12), ("rdk-x3", 5e12), ("a100-pcie", 624e12), ("a100-sxm", 624e12)],
)
def test_tensor_unit_int8_peaks(name: str, int8_ops: float) -> None:
    assert load_profile(name).unit_for(UnitKind.TENSOR).ops_per_s("int8") == int8_ops


def test_rdk_x3_peak_is_the_total_of_its_two_cores() -> None:
    x3 = load_profile("rdk-x3")
    assert x3.cores == 2
    assert x3.peak_ops_per_s("int8") == 5e12


def test_a100_numbers_match_the_datasheet_and_the_fixture_device() -> None:
    pcie, sxm = load_profile("a100-pcie"), load_profile("a100-sxm")
    for gpu in (pcie, sxm):
        assert gpu.peak_ops_per_s("fp16") == 312e12
        assert gpu.peak_ops_per_s("tf32") == 156e12
        assert gpu.peak_ops_per_s("fp32") == 19.5e12
        assert (gpu.cores, gpu.clock_hz, gpu.sram_bytes) == (108, 1.41e9, 40 * 1024 * 1024)
    # the fixture's device query: 1512 MHz memory clock, double data rate, 5120-bit bus
    assert pcie.ddr_bandwidth_bytes_per_s == pytest.approx(1512e6 * 2 * 5120 / 8)
    assert sxm.ddr_bandwidth_bytes_per_s == 2.039e12
    assert pcie.fallback_rules == ()


# -------------------------------------------------------------------------- units and dtypes
def test_ops_per_s_uses_the_exact_dtype_then_the_documented_fallback() -> None:
    s100 = load_profile_file(DATASHEET / "rdk-s100.toml")
    tae, vpu = s100.unit("TAE"), s100.unit("VPU")
    assert tae.ops_per_s("int16") == 40e12
    assert tae.ops_per_s("uint8") == 80e12  # uint8 -> int8
    assert tae.ops_per_s("float16") == 40e12  # fp16 -> fp32 -> neither listed: the slowest rate
    assert vpu.ops_per_s("float32") == vpu.ops_per_s("fp32") == 0.05e12
    assert tae.attainable_ops_per_s("int8") == pytest.approx(80e12 * 0.7)


def test_unit_for_prefers_a_unit_with_the_dtype_and_falls_back_to_the_cpu() -> None:
    s100 = load_profile("rdk-s100")
    assert s100.unit_for(UnitKind.VECTOR).name == "VAE"
    assert s100.unit_for(UnitKind.VECTOR, "float32").name == "VPU"
    assert s100.unit_for(UnitKind.VECTOR, "int8").name == "VAE"
    assert s100.unit_for(UnitKind.ZERO_COPY).name == "TRANS"
    assert s100.unit_for(UnitKind.SCALAR).name == "SPU"


def test_a_kind_no_unit_lists_runs_on_the_cpu(tmp_path: Path) -> None:
    profile = load_profile(str(_write(tmp_path / "mine.toml", VALID)))
    assert profile.unit_for(UnitKind.TENSOR).name == "NPU"
    assert profile.unit_for(UnitKind.SCALAR) is profile.cpu


def test_units_and_profiles_are_hashable_values() -> None:
    first, again = load_profile("rdk-s100"), load_profile("rdk-s100")
    assert first == again and hash(first) == hash(again)
    busy = dict.fromkeys((*first.units, first.cpu), 0.0)
    busy[again.unit("TAE")] += 1.0
    assert busy[first.unit("TAE")] == 1.0


def test_peaks_ignore_units_that_only_move_data() -> None:
    s100 = load_profile("rdk-s100")
    assert s100.peak_ops_per_s("fp32") == 0.05e12  # the VPU, not the TRANS layout unit
    assert load_profile("rdk-x5").peak_ops_per_s("fp16") is None


# ---------------------------------------------------------------------------- malformed files
VALID = """\
schema = 1
name = "mine"
kind = "npu"
description = "a test board"
default_dtype = "int8"
dtypes = ["int8", "fp16"]
lane_width = 16
cores = 1
clock_hz = 1.0e9
sram_bytes = 1048576
ddr_bandwidth_bytes_per_s = 10.0e9
ddr_efficiency = 0.7
cpu_ddr_bandwidth_bytes_per_s = 5.0e9
transfer_overhead_us = 30.0

[[units]]
name = "NPU"
kinds = ["tensor"]
efficiency = 0.8
overhead_us = 1.0
[units.peak_ops_per_s]
int8 = 4.0e12

[[units]]
name = "VEC"
kinds = ["vector", "aux"]
efficiency = 0.5
overhead_us = 1.0
[units.peak_ops_per_s]
int8 = 1.0e12

[cpu]
name = "A55-x4"
efficiency = 0.3
overhead_us = 20.0
[cpu.peak_ops_per_s]
fp32 = 20.0e9

[[fallback_rules]]
op_type = "ScatterND"
condition = "always"
reason = "no ScatterND on this NPU"
"""


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _load_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ProfileError) as caught:
        load_profile(str(_write(tmp_path / "my.toml", text)))
    assert caught.value.exit_code == 2
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / "my.toml") + ": ")
    return message.split(": ", 1)[1]


def test_a_valid_user_file_loads_by_path(tmp_path: Path) -> None:
    path = _write(tmp_path / "my.toml", VALID)
    profile = load_profile(str(path))
    assert (profile.name, profile.source_path, profile.lane_width) == ("mine", str(path), 16)
    assert profile.cpu.kinds == tuple(UnitKind)  # [cpu] without kinds runs every kind


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('int8 = 1.0e12', 'int8 = "fast"',
         'units[1].peak_ops_per_s.int8 must be a positive number, got "fast"'),
        ("ddr_bandwidth_bytes_per_s = 10.0e9", "ddr_bandwidth_bytes_per_s = -1.0",
         "ddr_bandwidth_bytes_per_s must be a positive number, got -1.0"),
        ("ddr_efficiency = 0.7\n", "", "missing key ddr_efficiency"),
        ("overhead_us = 20.0\n", "", "missing key cpu.overhead_us"),
        ('kinds = ["tensor"]', 'kinds = ["matrix"]',
         'units[0].kinds[0] must be one of tensor, vector, aux, move, zero_copy, scalar, got "matrix"'),
        ('condition = "always"', 'condition = "sometimes"',
         'fallback_rules[0].condition "sometimes" is not a known condition; known: always, '),
        ("efficiency = 0.8", "efficiency = 1.5", "units[0].efficiency must be a number in [1e-06, 1], got 1.5"),
        ("efficiency = 0.8", "efficiency = 0", "units[0].efficiency must be a number in [1e-06, 1], got 0"),
        ("efficiency = 0.8", "efficiency = 5e-324", "units[0].efficiency must be a number in [1e-06, 1], got 5e-324"),
        ("cores = 1", "cores = 1.5", "cores must be an integer from 1 to 1e+06, got 1.5"),
        ("cores = 1", "cores = true", "cores must be an integer from 1 to 1e+06, got true"),
        ("cores = 1", "cores = 9223372036854775807", "cores must be an integer from 1 to 1e+06"),
        # extreme finite values: 5e-324 ops/s made every latency infinite and the timeline NaN (exit 1)
        ("int8 = 1.0e12", "int8 = 5e-324",
         "units[1].peak_ops_per_s.int8 must be within the physical bounds 1000 .. 1e+18 ops/s, got 5e-324"),
        ("int8 = 1.0e12", "int8 = 1.7e308", "units[1].peak_ops_per_s.int8 must be within the physical bounds"),
        ("ddr_bandwidth_bytes_per_s = 10.0e9", "ddr_bandwidth_bytes_per_s = 5e-324",
         "ddr_bandwidth_bytes_per_s must be within the physical bounds 1000 .. 1e+15 bytes/s, got 5e-324"),
        ("clock_hz = 1.0e9", "clock_hz = 1e300", "clock_hz must be within the physical bounds 1000 .. 1e+11 Hz"),
        ("transfer_overhead_us = 30.0", "transfer_overhead_us = 1e300",
         "transfer_overhead_us must be within the physical bounds 0 .. 1e+07 µs, got 1e+300"),
        ("schema = 1", "schema = 2", "schema must be 1 (this layerscope reads schema 1), got 2"),
        ('default_dtype = "int8"', 'default_dtype = "fp32"', 'default_dtype "fp32" must be one of dtypes'),
        ('dtypes = ["int8", "fp16"]', 'dtypes = ["int8", "fp17"]', 'dtypes[1] must be one of int4, int8'),
        ('kind = "npu"', 'kind = "fpga"', 'kind must be one of npu, gpu, cpu, got "fpga"'),
        ('name = "VEC"', 'name = "NPU"', 'units[1].name "NPU" is used by two units'),
        ('name = "VEC"', 'name = "V.EC"', "units[1].name must not contain '.'"),
        ("int8 = 4.0e12", "in8 = 4.0e12", "units[0].peak_ops_per_s key must be one of int4, int8"),
        ("transfer_overhead_us = 30.0", "transfer_overhead_us = 30.0\nddr_bandwith = 1",
         "unknown key ddr_bandwith (known: "),
        ("[cpu.peak_ops_per_s]\nfp32 = 20.0e9", "[cpu.peak_ops_per_s]",
         "cpu.peak_ops_per_s must list at least"),
        ('reason = "no ScatterND on this NPU"', "reason = 3",
         "fallback_rules[0].reason must be a non-empty string"),
    ],
)
def test_a_malformed_profile_names_the_file_and_the_key(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in VALID
    assert _load_error(tmp_path, VALID.replace(old, new, 1)).startswith(expected)


def test_an_op_efficiency_table_loads_and_defaults_to_one(tmp_path: Path) -> None:
    text = VALID.replace("[[fallback_rules]]", '[op_efficiency]\nLRN = 0.07\nMatMul = 2\n\n[[fallback_rules]]', 1)
    profile = load_profile(str(_write(tmp_path / "my.toml", text)))
    assert dict(profile.op_efficiency) == {"LRN": 0.07, "MatMul": 2.0}
    assert profile.efficiency_for("LRN") == 0.07 and profile.efficiency_for("Conv") == 1.0
    assert load_profile(str(_write(tmp_path / "plain.toml", VALID))).op_efficiency == {}


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("[op_efficiency]\nLRN = 0", "op_efficiency.LRN must be a positive number, got 0"),
        ("[op_efficiency]\nLRN = -0.5", "op_efficiency.LRN must be a positive number, got -0.5"),
        ('[op_efficiency]\nLRN = "slow"', 'op_efficiency.LRN must be a positive number, got "slow"'),
        ("[op_efficiency]\nLRN = inf", "op_efficiency.LRN must be a positive number, got inf"),
        ("[op_efficiency.LRN]\nx = 1", "op_efficiency.LRN must be a positive number, got a table"),
    ],
)
def test_a_bad_op_efficiency_names_the_file_and_the_key(tmp_path: Path, table: str, expected: str) -> None:
    text = VALID.replace("[[fallback_rules]]", table + "\n\n[[fallback_rules]]", 1)
    assert _load_error(tmp_path, text) == expected


def test_op_efficiency_must_be_a_table(tmp_path: Path) -> None:
    text = "op_efficiency = 3\n" + VALID
    assert _load_error(tmp_path, text) == "op_efficiency must be a table, got 3"


@pytest.mark.parametrize("key", ["fuse_elementwise", "plan_sram"])
def test_compiler_flags_are_booleans_and_default_to_false(tmp_path: Path, key: str) -> None:
    assert not getattr(load_profile(str(_write(tmp_path / "plain.toml", VALID))), key)
    assert getattr(load_profile(str(_write(tmp_path / "on.toml", f"{key} = true\n" + VALID))), key)
    assert _load_error(tmp_path, f'{key} = "yes"\n' + VALID) == f'{key} must be true or false, got "yes"'


def test_an_integer_past_pythons_digit_limit_is_a_profile_error(tmp_path: Path) -> None:
    message = _load_error(tmp_path, VALID.replace("cores = 1", "cores = " + "9" * 10_000))
    assert message.startswith("cannot read the profile file: Exceeds the limit (4300 digits)")


@pytest.mark.parametrize("name", ["x" * 5000, "bad\x00name"])
def test_a_target_name_no_file_can_have_is_an_unknown_target(name: str) -> None:
    with pytest.raises(ProfileError, match="unknown target") as caught:
        load_profile(name)
    assert len(str(caught.value)) < 400  # the name is quoted short


def test_invalid_toml_is_one_line_naming_the_file(tmp_path: Path) -> None:
    message = _load_error(tmp_path, VALID.replace("cores = 1", "cores = = 1"))
    assert message.startswith("not valid TOML: ") and "line 8" in message


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile("foo")
    assert str(caught.value) == (
        "unknown target 'foo'; known: a100-pcie, a100-sxm, host, rdk-s100, rdk-s100p, rdk-x3, rdk-x5"
    )


def test_a_missing_profile_file_is_a_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"nope\.toml: profile file not found"):
        load_profile(str(tmp_path / "nope.toml"))


def test_the_host_template_is_not_a_profile_file() -> None:
    with pytest.raises(ProfileError, match="template for the measured host profile"):
        load_profile(str(PROFILES_DIR / "host.toml"))


def test_listing_never_measures_the_host() -> None:
    rows = list_profiles()
    assert [r.name for r in rows] == known_targets()
    host_row = next(r for r in rows if r.name == "host")
    assert host_row.measured_on_first_use and host_row.peak_fp32_ops_per_s is None
    s100 = next(r for r in rows if r.name == "rdk-s100")
    assert (s100.peak_int8_ops_per_s, s100.ddr_bandwidth_bytes_per_s) == (80e12, 76.8e9)


# --------------------------------------------------------------------------- fallback predicates
def _vi(name: str, elem: int, shape: Sequence[int]) -> ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


def _graph(
    tmp_path: Path,
    nodes: Sequence[NodeProto],
    inputs: Sequence[ValueInfoProto],
    outputs: Sequence[ValueInfoProto],
    *,
    inits: Sequence[tuple[str, np.ndarray]] = (),
    opset: int = 17,
) -> Graph:
    model = helper.make_model(
        helper.make_graph(
            nodes, "g", inputs, outputs, [numpy_helper.from_array(v, n) for n, v in inits]
        ),
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=8,
    )
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return load_model(path)


def _layer(graph: Graph, op_type: str) -> Node:
    return next(layer for layer in graph.layers if layer.op_type == op_type)


F = TensorProto.FLOAT


def _resize(tmp_path: Path, out_hw: tuple[int, int], *, mode: str = "nearest", by: str = "scales") -> Graph:
    h, w = out_hw
    scales = np.array([1, 1, h / 8, w / 8], np.float32)
    sizes = np.array([1, 3, h, w], np.int64)
    inputs = ["x", "", "scales", ""] if by == "scales" else ["x", "", "", "sizes"]
    init = ("scales", scales) if by == "scales" else ("sizes", sizes)
    node = helper.make_node("Resize", inputs, ["y"], mode=mode, name="up")
    return _graph(tmp_path, [node], [_vi("x", F, (1, 3, 8, 8))], [_vi("y", F, (1, 3, h, w))], inits=[init])


def test_resize_by_three_is_not_a_power_of_two(tmp_path: Path) -> None:
    graph = _resize(tmp_path, (24, 24))
    reason = fallback_reason(load_profile("rdk-s100"), _layer(graph, "Resize"), graph)
    assert reason == (
        "Resize by 3.0x is not a power of 2: "
        "the BPU resizes nearest by power-of-2 factors only; runs on the CPU"
    )


@pytest.mark.parametrize("out_hw", [(16, 16), (32, 64), (4, 4), (8, 8)])
def test_resize_by_powers_of_two_stays_on_the_bpu(tmp_path: Path, out_hw: tuple[int, int]) -> None:
    graph = _resize(tmp_path, out_hw)
    assert fallback_reason(load_profile("rdk-s100"), _layer(graph, "Resize"), graph) is None


def test_resize_factors_come_from_sizes_too(tmp_path: Path) -> None:
    graph = _resize(tmp_path, (16, 24), by="sizes")
    reason = fallback_reason(load_profile("rdk-s100"), _layer(graph, "Resize"), graph)
    assert reason is not None and reason.startswith("Resize by 2.0x (H) and 3.0x (W) is not a power of 2")


def test_linear_resize_is_checked_by_its_own_predicate(tmp_path: Path) -> None:
    graph = _resize(tmp_path, (24, 24), mode="linear")
    node = _layer(graph, "Resize")
    assert fallback_reason(load_profile("rdk-s100"), node, graph) is None
    assert PREDICATES["resize_non_nearest"](node, graph)
    assert not PREDICATES["resize_not_pow2"](node, graph)


def test_x3_resize_needs_h_factor_at_most_w_factor(tmp_path: Path) -> None:
    graph = _resize(tmp_path, (32, 16))
    reason = fallback_reason(load_profile("rdk-x3"), _layer(graph, "Resize"), graph)
    assert reason == (
        "Resize scales H by 4.0x but W by only 2.0x: the BPU's nearest resize needs the H factor <= the W "
        "factor; runs on the CPU"
    )


def test_resize_10_reads_scales_from_its_second_input(tmp_path: Path) -> None:
    node = helper.make_node("Resize", ["x", "s"], ["y"], mode="nearest")
    graph = _graph(
        tmp_path, [node], [_vi("x", F, (1, 3, 8, 8))], [_vi("y", F, (1, 3, 40, 40))],
        inits=[("s", np.array([1, 1, 5, 5], np.float32))], opset=10,
    )
    reason = fallback_reason(load_profile("rdk-s100"), _layer(graph, "Resize"), graph)
    assert reason is not None and reason.startswith("Resize by 5.0x is not a power of 2")


def test_upsample_scales_input(tmp_path: Path) -> None:
    node = helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")
    graph = _graph(
        tmp_path, [node], [_vi("x", F, (1, 3, 8, 8))], [_vi("y", F, (1, 3, 24, 24))],
        inits=[("s", np.array([1, 1, 3, 3], np.float32))], opset=9,
    )
    reason = fallback_reason(load_profile("rdk-s100"), _layer(graph, "Upsample"), graph)
    assert reason is not None and reason.startswith("Upsample by 3.0x is not a power of 2")


def _topk(tmp_path: Path, *, cast: bool) -> Graph:
    nodes = [helper.make_node("TopK", ["x", "k"], ["vals", "idx"], name="topk")]
    outputs = [_vi("vals", F, (1, 5)), _vi("idx", TensorProto.INT64, (1, 5))]
    if cast:
        nodes.append(helper.make_node("Cast", ["idx"], ["idx32"], to=TensorProto.INT32, name="to_i32"))
        outputs[1] = _vi("idx32", TensorProto.INT32, (1, 5))
    return _graph(tmp_path, nodes, [_vi("x", F, (1, 100))], outputs, inits=[("k", np.array([5], np.int64))])


def test_topk_whose_int64_indices_feed_a_cast(tmp_path: Path) -> None:
    graph = _topk(tmp_path, cast=True)
    s100 = load_profile("rdk-s100")
    assert fallback_reason(s100, _layer(graph, "TopK"), graph) == (
        "TopK output 'idx' is int64 and is converted by Cast 'to_i32': the BPU does not produce int64 index "
        "tensors, so this TopK and its Cast run on the CPU; export int32 indices to keep them on the BPU"
    )
    assert fallback_reason(s100, _layer(graph, "Cast"), graph) == (
        "Cast reads int64 tensor 'idx': the BPU has no int64 arithmetic; the Cast runs on the CPU"
    )


def test_topk_without_a_cast_still_returns_int64(tmp_path: Path) -> None:
    graph = _topk(tmp_path, cast=False)
    node = _layer(graph, "TopK")
    assert not PREDICATES["feeds_cast_from_int64"](node, graph)
    assert fallback_reason(load_profile("rdk-s100"), node, graph) == (
        "output 'idx' is int64: "
        "TopK returns int64 indices, which the BPU does not produce; it runs on the CPU"
    )


def test_argmax_falls_back_only_when_a_cast_reads_it(tmp_path: Path) -> None:
    x = _vi("x", F, (1, 10, 4, 4))
    plain = _graph(tmp_path, [helper.make_node("ArgMax", ["x"], ["am"], axis=1)], [x],
                   [_vi("am", TensorProto.INT64, (1, 1, 4, 4))])
    assert fallback_reason(load_profile("rdk-s100"), _layer(plain, "ArgMax"), plain) is None
    cast = _graph(tmp_path, [helper.make_node("ArgMax", ["x"], ["am"], axis=1),
                             helper.make_node("Cast", ["am"], ["c"], to=TensorProto.FLOAT)],
                  [x], [_vi("c", F, (1, 1, 4, 4))])
    reason = fallback_reason(load_profile("rdk-s100"), _layer(cast, "ArgMax"), cast)
    assert reason is not None and reason.startswith("ArgMax output 'am' is int64 and is converted by Cast")


def test_scatternd_always_falls_back_on_the_bpu_but_not_on_the_gpu(tmp_path: Path) -> None:
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"])
    graph = _graph(
        tmp_path, [node],
        [_vi("data", F, (4, 4)), _vi("idx", TensorProto.INT64, (2, 1)), _vi("upd", F, (2, 4))],
        [_vi("y", F, (4, 4))],
    )
    layer = _layer(graph, "ScatterND")
    reason = fallback_reason(load_profile("rdk-s100"), layer, graph)
    assert reason is not None and reason.startswith("the BPU does not run ScatterND; it runs on the CPU")
    assert fallback_reason(load_profile("a100-pcie"), layer, graph) is None
    assert PREDICATES["dynamic_index"](layer, graph)


def test_constant_indices_are_not_dynamic(tmp_path: Path) -> None:
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    graph = _graph(tmp_path, [node], [_vi("x", F, (8, 4))], [_vi("y", F, (2, 4))],
                   inits=[("i", np.array([0, 3], np.int64))])
    assert not PREDICATES["dynamic_index"](_layer(graph, "Gather"), graph)


def test_rank_above_four_falls_back_on_the_x3(tmp_path: Path) -> None:
    five = _graph(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, (1, 2, 3, 4, 5))],
                  [_vi("y", F, (1, 2, 3, 4, 5))])
    assert fallback_reason(load_profile("rdk-x3"), _layer(five, "Relu"), five) == (
        "tensor 'x' has rank 5: the X3 BPU works on 4-D (NCHW) tensors; the layer runs on the CPU"
    )
    four = _graph(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, (1, 2, 3, 4))],
                  [_vi("y", F, (1, 2, 3, 4))])
    assert fallback_reason(load_profile("rdk-x3"), _layer(four, "Relu"), four) is None


@pytest.mark.parametrize(("channels", "falls_back"), [(32, False), (33, True)])
def test_x3_tanh_limit_of_8192_elements(tmp_path: Path, channels: int, falls_back: bool) -> None:
    shape = (1, channels, 16, 16)
    tanh = helper.make_node("Tanh", ["x"], ["y"])
    graph = _graph(tmp_path, [tanh], [_vi("x", F, shape)], [_vi("y", F, shape)])
    reason = fallback_reason(load_profile("rdk-x3"), _layer(graph, "Tanh"), graph)
    if falls_back:
        assert reason == (
            "input is 33x16x16 = 8448 elements per batch item, above 8192: the X3 BPU runs Tanh only when "
            "CxHxW <= 8192; runs on the CPU"
        )
    else:
        assert reason is None


def test_a_registered_predicate_can_be_used_by_a_user_profile(tmp_path: Path) -> None:
    def wide(node: Node, graph: Graph) -> bool:
        tensor = graph.tensor(node.inputs[0])
        return tensor is not None and math.prod(tensor.shape) > 10

    register_predicate("wide_relu", wide, lambda node, graph: "a wide Relu")
    try:
        text = VALID.replace('op_type = "ScatterND"\ncondition = "always"',
                             'op_type = "Relu"\ncondition = "wide_relu"')
        profile = load_profile(str(_write(tmp_path / "mine.toml", text)))
        graph = _graph(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, (1, 16))],
                       [_vi("y", F, (1, 16))])
        reason = fallback_reason(profile, _layer(graph, "Relu"), graph)
        assert reason == "a wide Relu: no ScatterND on this NPU"
    finally:
        PREDICATES.pop("wide_relu")


# -------------------------------------------------------------------------------------- the CLI
def test_targets_command_lists_without_probing() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(command, [])
    assert result.exit_code == 0, result.output
    assert "rdk-s100" in result.output and "a100-pcie" in result.output
    assert "measured on first use" in result.output
    row = next(line for line in result.output.splitlines() if "rdk-s100 " in line)
    assert "80" in row and "76.8" in row


def test_targets_show_prints_units_rules_and_sources() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(command, ["--show", "rdk-s100"])
    assert result.exit_code == 0, result.output
    for text in ("TAE", "int8 80T", "ScatterND", "resize_not_pow2", "76.8 GB/s", "rdk_doc"):
        assert text in result.output


def test_targets_show_unknown_raises_the_profile_error() -> None:
    result = CliRunner().invoke(command, ["--show", "nosuch"])
    assert isinstance(result.exception, ProfileError)
    assert "unknown target 'nosuch'" in str(result.exception)
