"""Profile files: TOML (schema 1) -> validated ``Profile``.

Every problem is reported as ONE ``ProfileError`` line that names the file and the key, e.g.
``my.toml: units[1].peak_ops_per_s.int8 must be a positive number, got "fast"``. Unknown keys are
errors too (a typo must not silently drop a number). The file layout::

    schema = 1
    name = "rdk-s100"            # kind = "npu" | "gpu" | "cpu"
    description = "..."
    ddr_bandwidth_bytes_per_s = 76.8e9   # ... and the other scalar Profile fields
    ddr_nominal_bytes_per_s = 76.8e9     # optional: the vendor's stated DDR peak (needs a [sources] entry)
    fuse_elementwise = true              # optional (default false): the compiler fuses element-wise layers
    plan_sram = true                     # optional (default false): the compiler plans SRAM over the graph
    task_overhead_us = 100.0             # optional (default 0): a fixed cost per inference, outside every layer
    output_bytes_per_s = 1.8e9           # optional: float32 output bytes/s the runtime hands over per inference
    stream_bytes_per_s = 2.0e10          # optional (with plan_sram): bytes/s of feature maps streamed in tiles
    weight_sram_bytes = 262144           # optional: on-chip bytes for one layer's weights (default sram_bytes / 2)
    activation_matmul_ns_per_element = 1.0  # optional (default 0): ns per output element of an activation MatMul
    layout_transpose_efficiency = 1.0    # optional: multiplier on a layout Transpose's rate (not op_efficiency's)
    weight_dtype = "int8"                # optional: the widest dtype the accelerator keeps float weights at
    cache_bytes_per_s = 9.0e10           # optional (CPU profiles): bytes/s of activations the caches hold
    [[units]]                    # name, kinds, efficiency, overhead_us, [units.peak_ops_per_s]
    [cpu]                        # same keys as a unit; kinds optional (default: every kind)
    [[fallback_rules]]           # op_type, condition (optional), reason
    [op_efficiency]              # optional: ONNX op type = positive multiplier on its unit's rate
    [sources]                    # "dotted.field" = "URL / document / assumption: why"
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from layerscope.costs.types import UnitKind
from layerscope.errors import InputError, ProfileError
from layerscope.fileio import read_text_limited
from layerscope.targets.profile import (
    KNOWN_DTYPES,
    PROFILE_KINDS,
    ComputeUnit,
    FallbackRule,
    Profile,
)
from layerscope.targets.rules import PREDICATES

SCHEMA_VERSION = 1

_TOP_KEYS = frozenset(
    {
        "schema",
        "name",
        "description",
        "kind",
        "units",
        "cpu",
        "ddr_bandwidth_bytes_per_s",
        "ddr_efficiency",
        "weight_ddr_efficiency",
        "activation_matmul_ns_per_element",
        "layout_transpose_efficiency",
        "weight_dtype",
        "feature_map_alignment",
        "cache_bytes_per_s",
        "cpu_ddr_bandwidth_bytes_per_s",
        "transfer_overhead_us",
        "sram_bytes",
        "cores",
        "clock_hz",
        "default_dtype",
        "dtypes",
        "lane_width",
        "fallback_rules",
        "sources",
        "op_efficiency",
        "ddr_nominal_bytes_per_s",
        "fuse_elementwise",
        "plan_sram",
        "task_overhead_us",
        "output_bytes_per_s",
        "stream_bytes_per_s",
        "weight_sram_bytes",
    }
)
_UNIT_KEYS = frozenset({"name", "kinds", "peak_ops_per_s", "efficiency", "overhead_us"})
_RULE_KEYS = frozenset({"op_type", "condition", "reason"})
_KIND_NAMES = tuple(k.value for k in UnitKind)


#: Physical bounds of a profile's numbers (inclusive). Below or above them, a number is a typo or an
#: attack: 5e-324 ops/s made every latency infinite and the timeline NaN. The bounds are far outside any
#: real device: 1 kOPS (a microcontroller does 1e7) to 1e18 ops/s (an exascale machine); 1 kB/s to
#: 1 PB/s of memory bandwidth (HBM3e is ~5e12); 1 kHz to 100 GHz clocks; overheads up to 10 s; an
#: efficiency of at least 1e-6; op_efficiency multipliers within 1e-6 .. 1e6; SRAM up to 1 TB;
#: cores and lane width up to 1e6.
BOUNDS: dict[str, tuple[float, float, str]] = {
    "ops": (1e3, 1e18, "ops/s"),
    "bandwidth": (1e3, 1e15, "bytes/s"),
    "clock": (1e3, 1e11, "Hz"),
    "overhead": (0.0, 1e7, "µs"),
    "multiplier": (1e-6, 1e6, ""),
}
MIN_EFFICIENCY = 1e-6
MAX_SRAM_BYTES = 10**12
MAX_COUNT = 10**6


def _show(value: Any) -> str:
    """A value as the user wrote it, short: strings quoted, tables/lists named."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, dict):
        text = "a table"
    elif isinstance(value, list):
        text = "a list"
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Reader:
    """Typed access to one file's mapping; every failure names ``<file>: <key>``."""

    def __init__(self, display: str) -> None:
        self.display = display

    def fail(self, key: str, problem: str) -> ProfileError:
        return ProfileError(f"{self.display}: {key} {problem}")

    def require(self, table: Mapping[str, Any], key: str, where: str) -> Any:
        """``table[key]``; a missing key fails as ``missing key <where><key>``."""
        if key not in table:
            raise ProfileError(f"{self.display}: missing key {where}{key}")
        return table[key]

    def check_keys(self, table: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
        for key in table:
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                raise ProfileError(f"{self.display}: unknown key {where}{key} (known: {known})")

    def table(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table, got {_show(value)}")
        return value

    def text(self, value: Any, key: str, *, empty_ok: bool = False) -> str:
        if not isinstance(value, str) or (not empty_ok and not value.strip()):
            raise self.fail(key, f"must be a non-empty string, got {_show(value)}")
        return value

    def number(self, value: Any, key: str, *, low: float = 0.0, low_ok: bool = False,
               bounds: str | None = None) -> float:
        """A finite number above ``low`` (or equal to it when ``low_ok``), within :data:`BOUNDS` ``[bounds]``."""
        is_num = isinstance(value, int | float) and not isinstance(value, bool)
        if not is_num or not math.isfinite(value) or value < low or (value == low and not low_ok):
            what = "a non-negative number" if low_ok and low == 0 else "a positive number"
            raise self.fail(key, f"must be {what}, got {_show(value)}")
        if bounds is not None:
            least, most, unit = BOUNDS[bounds]
            if not least <= value <= most:
                shown = f"{least:g} .. {most:g}" + (f" {unit}" if unit else "")
                raise self.fail(key, f"must be within the physical bounds {shown}, got {_show(value)}")
        return float(value)

    def integer(self, value: Any, key: str, *, low: int, high: int = MAX_COUNT) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < low or value > high:
            raise self.fail(key, f"must be an integer from {low} to {high:g}, got {_show(value)}")
        return value

    def fraction(self, value: Any, key: str) -> float:
        if not _is_number(value) or not MIN_EFFICIENCY <= value <= 1.0:
            raise self.fail(key, f"must be a number in [{MIN_EFFICIENCY:g}, 1], got {_show(value)}")
        return float(value)

    def dtype(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or value not in KNOWN_DTYPES:
            raise self.fail(key, f"must be one of {', '.join(KNOWN_DTYPES)}, got {_show(value)}")
        return value

    def string_list(self, value: Any, key: str) -> list[Any]:
        if not isinstance(value, list) or not value:
            raise self.fail(key, f"must be a non-empty list, got {_show(value)}")
        return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unit(r: _Reader, raw: Any, where: str, *, default_kinds: bool) -> ComputeUnit:
    table = r.table(raw, where)
    r.check_keys(table, _UNIT_KEYS, where + ".")
    name = r.text(r.require(table, "name", where + "."), where + ".name")
    if "." in name:
        raise r.fail(where + ".name", f"must not contain '.' (it separates source keys), got {_show(name)}")
    if "kinds" in table or not default_kinds:
        kinds_raw = r.string_list(r.require(table, "kinds", where + "."), where + ".kinds")
        kinds = tuple(_unit_kind(r, k, f"{where}.kinds[{i}]") for i, k in enumerate(kinds_raw))
    else:
        kinds = tuple(UnitKind)
    peaks_key = where + ".peak_ops_per_s"
    peaks_raw = r.table(r.require(table, "peak_ops_per_s", where + "."), peaks_key)
    if not peaks_raw:
        raise r.fail(peaks_key, "must list at least one dtype")
    peaks = {}
    for dtype, rate in peaks_raw.items():
        r.dtype(dtype, f"{peaks_key} key")
        peaks[dtype] = r.number(rate, f"{peaks_key}.{dtype}", bounds="ops")
    return ComputeUnit(
        name=name,
        kinds=kinds,
        peak_ops_per_s=MappingProxyType(peaks),
        efficiency=r.fraction(r.require(table, "efficiency", where + "."), where + ".efficiency"),
        overhead_us=r.number(
            r.require(table, "overhead_us", where + "."), where + ".overhead_us", low_ok=True, bounds="overhead"
        ),
    )


def _unit_kind(r: _Reader, value: Any, key: str) -> UnitKind:
    if not isinstance(value, str) or value not in _KIND_NAMES:
        raise r.fail(key, f"must be one of {', '.join(_KIND_NAMES)}, got {_show(value)}")
    return UnitKind(value)


def _rule(r: _Reader, raw: Any, where: str) -> FallbackRule:
    table = r.table(raw, where)
    r.check_keys(table, _RULE_KEYS, where + ".")
    condition = table.get("condition")
    if condition is not None:
        condition = r.text(condition, where + ".condition")
        if condition not in PREDICATES:
            known = ", ".join(sorted(PREDICATES))
            raise r.fail(where + ".condition", f"{_show(condition)} is not a known condition; known: {known}")
    return FallbackRule(
        op_type=r.text(r.require(table, "op_type", where + "."), where + ".op_type"),
        condition=condition,
        reason=r.text(r.require(table, "reason", where + "."), where + ".reason"),
    )


def _units(r: _Reader, data: Mapping[str, Any]) -> tuple[ComputeUnit, ...]:
    raw = r.require(data, "units", "")
    if not isinstance(raw, list) or not raw:
        raise r.fail("units", f"must be a non-empty list of tables ([[units]]), got {_show(raw)}")
    units = tuple(_unit(r, u, f"units[{i}]", default_kinds=False) for i, u in enumerate(raw))
    seen: set[str] = set()
    for i, unit in enumerate(units):
        if unit.name in seen:
            raise r.fail(f"units[{i}].name", f"{_show(unit.name)} is used by two units")
        seen.add(unit.name)
    return units


def _rules(r: _Reader, data: Mapping[str, Any]) -> tuple[FallbackRule, ...]:
    raw = data.get("fallback_rules", [])
    if not isinstance(raw, list):
        raise r.fail("fallback_rules", f"must be a list of tables ([[fallback_rules]]), got {_show(raw)}")
    return tuple(_rule(r, rule, f"fallback_rules[{i}]") for i, rule in enumerate(raw))


def _sources(r: _Reader, data: Mapping[str, Any]) -> Mapping[str, str]:
    raw = r.table(data.get("sources", {}), "sources")
    return MappingProxyType({k: r.text(v, f"sources.{k}") for k, v in raw.items()})


def _op_efficiency(r: _Reader, data: Mapping[str, Any]) -> Mapping[str, float]:
    """``[op_efficiency]``: op type -> a positive, finite multiplier (see ``Profile``); optional."""
    raw = r.table(data.get("op_efficiency", {}), "op_efficiency")
    return MappingProxyType({op: r.number(v, f"op_efficiency.{op}", bounds="multiplier") for op, v in raw.items()})


def _alignment(r: _Reader, data: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    """``feature_map_alignment``: optional list of [W multiple, C multiple] pairs of positive integers (see
    ``Profile``)."""
    key = "feature_map_alignment"
    raw = data.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(p, list) and len(p) == 2 for p in raw):
        raise r.fail(key, f"must be a list of [W multiple, C multiple] pairs, got {_show(raw)}")
    return tuple((r.integer(w, f"{key}[{i}][0]", low=1), r.integer(c, f"{key}[{i}][1]", low=1))
                 for i, (w, c) in enumerate(raw))


def _flag(r: _Reader, data: Mapping[str, Any], key: str) -> bool:
    """An optional ``true``/``false`` key (default false)."""
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise r.fail(key, f"must be true or false, got {_show(value)}")
    return value


def _ddr_nominal(r: _Reader, data: Mapping[str, Any]) -> float | None:
    """``ddr_nominal_bytes_per_s``: optional; a vendor's figure is only given with where the vendor states it."""
    if "ddr_nominal_bytes_per_s" not in data:
        return None
    value = r.number(data["ddr_nominal_bytes_per_s"], "ddr_nominal_bytes_per_s")
    sources = data.get("sources")
    if not isinstance(sources, dict) or not str(sources.get("ddr_nominal_bytes_per_s") or "").strip():
        raise r.fail("ddr_nominal_bytes_per_s", "needs a sources.ddr_nominal_bytes_per_s entry (where the vendor "
                                                "states it)")
    return value


def _dtypes(r: _Reader, data: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
    listed = r.string_list(r.require(data, "dtypes", ""), "dtypes")
    dtypes = tuple(r.dtype(d, f"dtypes[{i}]") for i, d in enumerate(listed))
    default = r.dtype(r.require(data, "default_dtype", ""), "default_dtype")
    if default not in dtypes:
        raise r.fail("default_dtype", f"{_show(default)} must be one of dtypes ({', '.join(dtypes)})")
    return dtypes, default


def profile_from_mapping(data: Mapping[str, Any], source_path: str, display: str | None = None) -> Profile:
    """Validate a parsed profile mapping and build the ``Profile``.

    ``source_path`` is recorded in the profile; ``display`` (default: ``source_path``) is how error
    messages name the file. Raises ``ProfileError`` (one line, file and key) on any problem.
    """
    r = _Reader(display or source_path)
    r.check_keys(data, _TOP_KEYS, "")
    schema = r.require(data, "schema", "")
    if schema != SCHEMA_VERSION or isinstance(schema, bool):
        expected = f"must be {SCHEMA_VERSION} (this layerscope reads schema {SCHEMA_VERSION})"
        raise r.fail("schema", f"{expected}, got {_show(schema)}")
    kind = r.text(r.require(data, "kind", ""), "kind")
    if kind not in PROFILE_KINDS:
        raise r.fail("kind", f"must be one of {', '.join(PROFILE_KINDS)}, got {_show(kind)}")
    dtypes, default_dtype = _dtypes(r, data)

    def num(key: str, bounds: str, *, low_ok: bool = False) -> float:
        return r.number(r.require(data, key, ""), key, low_ok=low_ok, bounds=bounds)

    return Profile(
        name=r.text(r.require(data, "name", ""), "name"),
        description=r.text(r.require(data, "description", ""), "description", empty_ok=True),
        kind=kind,
        source_path=source_path,
        units=_units(r, data),
        cpu=_unit(r, r.require(data, "cpu", ""), "cpu", default_kinds=True),
        ddr_bandwidth_bytes_per_s=num("ddr_bandwidth_bytes_per_s", "bandwidth"),
        ddr_efficiency=r.fraction(r.require(data, "ddr_efficiency", ""), "ddr_efficiency"),
        cpu_ddr_bandwidth_bytes_per_s=num("cpu_ddr_bandwidth_bytes_per_s", "bandwidth"),
        transfer_overhead_us=num("transfer_overhead_us", "overhead", low_ok=True),
        sram_bytes=r.integer(r.require(data, "sram_bytes", ""), "sram_bytes", low=0, high=MAX_SRAM_BYTES),
        cores=r.integer(r.require(data, "cores", ""), "cores", low=1),
        clock_hz=num("clock_hz", "clock"),
        default_dtype=default_dtype,
        dtypes=dtypes,
        lane_width=r.integer(r.require(data, "lane_width", ""), "lane_width", low=1),
        fallback_rules=_rules(r, data),
        sources=_sources(r, data),
        op_efficiency=_op_efficiency(r, data),
        ddr_nominal_bytes_per_s=_ddr_nominal(r, data),
        fuse_elementwise=_flag(r, data, "fuse_elementwise"),
        plan_sram=_flag(r, data, "plan_sram"),
        task_overhead_us=r.number(data.get("task_overhead_us", 0.0), "task_overhead_us", low_ok=True,
                                  bounds="overhead"),
        output_bytes_per_s=(None if data.get("output_bytes_per_s") is None
                            else r.number(data["output_bytes_per_s"], "output_bytes_per_s", bounds="bandwidth")),
        weight_sram_bytes=(None if data.get("weight_sram_bytes") is None
                           else r.integer(data["weight_sram_bytes"], "weight_sram_bytes", low=0, high=MAX_SRAM_BYTES)),
        stream_bytes_per_s=(None if data.get("stream_bytes_per_s") is None
                            else r.number(data["stream_bytes_per_s"], "stream_bytes_per_s", bounds="bandwidth")),
        weight_ddr_efficiency=(None if data.get("weight_ddr_efficiency") is None
                               else r.fraction(data["weight_ddr_efficiency"], "weight_ddr_efficiency")),
        activation_matmul_ns_per_element=r.number(data.get("activation_matmul_ns_per_element", 0.0),
                                                  "activation_matmul_ns_per_element", low_ok=True, bounds="overhead"),
        layout_transpose_efficiency=(None if data.get("layout_transpose_efficiency") is None
                                     else r.number(data["layout_transpose_efficiency"], "layout_transpose_efficiency",
                                                   bounds="multiplier")),
        weight_dtype=None if data.get("weight_dtype") is None else r.dtype(data["weight_dtype"], "weight_dtype"),
        feature_map_alignment=_alignment(r, data),
        cache_bytes_per_s=(None if data.get("cache_bytes_per_s") is None
                           else r.number(data["cache_bytes_per_s"], "cache_bytes_per_s", bounds="bandwidth")),
    )


#: Largest profile file read (the shipped ones are ~5 KB).
MAX_PROFILE_BYTES = 1 << 20


def read_toml(path: Path, display: str | None = None) -> dict[str, Any]:
    """Parse a TOML file; a missing, unreadable, special (a FIFO, a device), oversized or malformed file is one
    ``ProfileError`` line."""
    shown = display or str(path)
    if not path.exists():
        raise ProfileError(f"{shown}: profile file not found")
    try:
        text = read_text_limited(path, MAX_PROFILE_BYTES, what="a profile file may have")
    except InputError as exc:
        raise ProfileError(f"{shown}: cannot read the profile file: {str(exc).removeprefix(f'{path}: ')}") from None
    except ValueError as exc:  # a NUL in the path
        raise ProfileError(f"{shown}: cannot read the profile file: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{shown}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ProfileError(f"{shown}: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit (10**4300)
        raise ProfileError(f"{shown}: cannot read the profile file: {str(exc).split(';')[0]}") from None


def load_profile_file(path: Path, display: str | None = None) -> Profile:
    """Read and validate one profile file."""
    data = read_toml(path, display)
    if "template" in data:
        raise ProfileError(
            f"{display or path}: is a template for the measured host profile; use the target 'host'"
        )
    return profile_from_mapping(data, str(path), display)
