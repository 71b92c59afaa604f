"""The ``host`` target: this machine's CPU, measured rather than looked up.

``measure_host()`` times a few small onnxruntime sessions and a numpy copy (about a second; the
whole probe is bounded by ``_BUDGET_S`` per measurement). The result is cached as JSON in
``$LAYERSCOPE_CACHE_DIR`` (else ``$XDG_CACHE_HOME/layerscope``, else ``~/.cache/layerscope``) under
``host-<hash of cpu model, core count, onnxruntime version, probe version>.json``, written
atomically. ``host_profile()`` turns the measurement plus the ``profiles/host.toml`` template into a
validated ``Profile``. Only ``host_measurement``/``host_profile`` ever measure; listing targets reads
the cache alone (``cached_host_profile``).

What each number means:
- ``fp32_ops_per_s``: onnxruntime CPU MatMul, n x n x n, 2*n^3 ops / best time (all threads ORT uses).
- ``int8_ops_per_s``: the same with MatMulInteger (uint8); ``None`` if this onnxruntime lacks it.
- ``fp16_ops_per_s``: fp16 MatMul; ``None`` where the CPU provider has no fp16 kernel (most x86).
- ``copy_bytes_per_s``: numpy copy of a 64 MiB array, (bytes read + bytes written) / best time,
  one thread: the bandwidth a single CPU fallback layer streams at.
- ``dispatch_overhead_us``: per-node cost of onnxruntime's sequential executor, from a chain of
  tiny Add nodes: (time(N+1 nodes) - time(1 node)) / N, one thread, graph optimizations off.
Every timing is the best of several repeats: the least-disturbed run on a shared machine.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from layerscope.costs.types import UnitKind
from layerscope.errors import BackendUnavailable, OutputError
from layerscope.fileio import write_atomic
from layerscope.targets.profile import Profile
from layerscope.targets.schema import profile_from_mapping, read_toml

PROBE_VERSION = 1
HOST_NAME = "host"
CACHE_ENV = "LAYERSCOPE_CACHE_DIR"
TEMPLATE_PATH = Path(__file__).with_name("profiles") / "host.toml"

_MATMUL_N = 512
_CHAIN_NODES = 100
_COPY_BYTES = 64 * 1024 * 1024
_BUDGET_S = 0.4
_MIN_REPEATS = 3
_MAX_REPEATS = 50
_ONNX_OPSET = 17
_ONNX_IR_VERSION = 8


@dataclass(frozen=True)
class HostMeasurement:
    """One probe of this machine (see the module docstring for how each number is measured)."""

    probe_version: int
    measured_at: str
    cpu_model: str
    cores: int
    onnxruntime_version: str
    numpy_version: str
    machine: str
    fp32_ops_per_s: float
    int8_ops_per_s: float | None
    fp16_ops_per_s: float | None
    copy_bytes_per_s: float
    dispatch_overhead_us: float
    llc_bytes: int
    clock_hz: float | None
    lane_width: int

    def to_json(self) -> str:
        return json.dumps({"schema": 1, **asdict(self)}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> HostMeasurement | None:
        """Parse a cache file; ``None`` if it is corrupt, of another schema or another probe."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.pop("schema", None) != 1:
            return None
        names = {f.name for f in fields(cls)}
        if set(data) != names or data.get("probe_version") != PROBE_VERSION:
            return None
        if not all(_cache_value_ok(name, data[name]) for name in names):
            return None
        return cls(**data)


_CACHE_TEXT = frozenset({"measured_at", "cpu_model", "onnxruntime_version", "numpy_version", "machine"})
_CACHE_OPTIONAL = frozenset({"int8_ops_per_s", "fp16_ops_per_s", "clock_hz"})
_CACHE_INT = frozenset({"probe_version", "cores", "llc_bytes", "lane_width"})


def _cache_value_ok(name: str, value: Any) -> bool:
    """Whether a cached field has the type (and sign) the profile needs."""
    if name in _CACHE_TEXT:
        return isinstance(value, str)
    if value is None:
        return name in _CACHE_OPTIONAL
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if name in _CACHE_INT:
        return isinstance(value, int) and value >= (0 if name == "llc_bytes" else 1)
    return value > 0 or (name == "dispatch_overhead_us" and value >= 0)


# --------------------------------------------------------------------------------- machine facts
def _cpuinfo() -> dict[str, str]:
    """The first value of each key in /proc/cpuinfo (empty where there is none)."""
    info: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() and key.strip() not in info:
                info[key.strip()] = value.strip()
    return info


def cpu_model() -> str:
    """The CPU's marketing name (/proc/cpuinfo ``model name``), or the best substitute known."""
    info = _cpuinfo()
    for key in ("model name", "Model", "Hardware", "cpu model"):
        if info.get(key):
            return info[key]
    return platform.processor() or platform.machine() or "unknown CPU"


def core_count() -> int:
    """Logical CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _lane_width(info: Mapping[str, str]) -> int:
    """fp32 lanes of the widest SIMD the CPU reports (AVX-512: 16, AVX/AVX2: 8, NEON/SSE: 4)."""
    flags = set((info.get("flags") or info.get("Features") or "").split())
    if "avx512f" in flags:
        return 16
    if flags & {"avx2", "avx"}:
        return 8
    return 4


def _size_bytes(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text) if text.isdigit() else 0


def _llc_bytes() -> int:
    """Size of cpu0's last-level cache from sysfs; 0 if unknown."""
    best_level, best_size = -1, 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        with contextlib.suppress(OSError, ValueError):
            level = int((index / "level").read_text())
            size = _size_bytes((index / "size").read_text())
            if level > best_level:
                best_level, best_size = level, size
    return best_size


def _clock_hz(info: Mapping[str, str]) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        return float(khz) * 1e3
    with contextlib.suppress(ValueError, KeyError):
        return float(info["cpu MHz"]) * 1e6
    return None


def _ort_version() -> str:
    try:
        import onnxruntime
    except ImportError:  # pragma: no cover - a declared dependency
        return "unavailable"
    return str(onnxruntime.__version__)


# ------------------------------------------------------------------------------------- timings
def _best_time(run: Callable[[], object]) -> float:
    """Best wall time of ``run`` over at least ``_MIN_REPEATS`` calls within ``_BUDGET_S``."""
    run()  # warm-up: first-run allocations and lazy initialisation
    best = float("inf")
    start = time.perf_counter()
    for repeat in range(_MAX_REPEATS):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        if repeat + 1 >= _MIN_REPEATS and time.perf_counter() - start > _BUDGET_S:
            break
    return max(best, 1e-9)


def _session(model: Any, *, threads: int = 0, optimize: bool = True) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any]) -> Any:
    from onnx import helper

    graph = helper.make_graph(nodes, "layerscope_probe", inputs, outputs, inits)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _ONNX_OPSET)], ir_version=_ONNX_IR_VERSION
    )


def _matmul_ops_per_s(kind: str) -> float | None:
    """Ops/s of an n x n x n matmul: ``kind`` is ``"fp32"``, ``"fp16"`` or ``"int8"``.

    ``None`` when this onnxruntime cannot build or run the model on the CPU.
    """
    from onnx import TensorProto, helper, numpy_helper

    n = _MATMUL_N
    rng = np.random.default_rng(0)
    if kind == "int8":
        a = rng.integers(0, 255, size=(n, n), dtype=np.uint8)
        b = rng.integers(0, 255, size=(n, n), dtype=np.uint8)
        elem_in, elem_out, op = TensorProto.UINT8, TensorProto.INT32, "MatMulInteger"
    else:
        np_type = np.float32 if kind == "fp32" else np.float16
        a = rng.standard_normal((n, n)).astype(np_type)
        b = rng.standard_normal((n, n)).astype(np_type)
        elem_in = elem_out = TensorProto.FLOAT if kind == "fp32" else TensorProto.FLOAT16
        op = "MatMul"
    model = _model(
        [helper.make_node(op, ["a", "b"], ["y"])],
        [helper.make_tensor_value_info("a", elem_in, [n, n])],
        [helper.make_tensor_value_info("y", elem_out, [n, n])],
        [numpy_helper.from_array(b, "b")],
    )
    try:
        session = _session(model)
        seconds = _best_time(lambda: session.run(None, {"a": a}))
    except Exception:  # onnxruntime raises its own error types for a missing kernel
        return None
    return 2.0 * n**3 / seconds


def _chain_seconds(length: int) -> float:
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Add", [f"t{i}", "one"], [f"t{i + 1}"], name=f"add{i}") for i in range(length)
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info(f"t{length}", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(np.ones((1, 8), np.float32), "one")],
    )
    session = _session(model, threads=1, optimize=False)
    x = np.zeros((1, 8), np.float32)
    return _best_time(lambda: session.run(None, {"t0": x}))


def _dispatch_overhead_us() -> float:
    """Per-node executor overhead in microseconds (clamped to >= 0.01 against timer noise)."""
    per_node = (_chain_seconds(_CHAIN_NODES + 1) - _chain_seconds(1)) / _CHAIN_NODES
    return max(per_node * 1e6, 0.01)


def _copy_bytes_per_s() -> float:
    src = np.ones(_COPY_BYTES // 8, dtype=np.float64)
    dst = np.empty_like(src)
    seconds = _best_time(lambda: np.copyto(dst, src))
    return 2.0 * src.nbytes / seconds


def measure_host() -> HostMeasurement:
    """Probe this machine now (about a second; never reads or writes the cache).

    Raises ``BackendUnavailable`` when onnxruntime cannot run even an fp32 MatMul.
    """
    info = _cpuinfo()
    fp32 = _matmul_ops_per_s("fp32")
    if fp32 is None:
        raise BackendUnavailable("onnxruntime cannot run an fp32 MatMul on this CPU; the host probe needs it")
    return HostMeasurement(
        probe_version=PROBE_VERSION,
        measured_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        cpu_model=cpu_model(),
        cores=core_count(),
        onnxruntime_version=_ort_version(),
        numpy_version=np.__version__,
        machine=platform.machine(),
        fp32_ops_per_s=fp32,
        int8_ops_per_s=_matmul_ops_per_s("int8"),
        fp16_ops_per_s=_matmul_ops_per_s("fp16"),
        copy_bytes_per_s=_copy_bytes_per_s(),
        dispatch_overhead_us=_dispatch_overhead_us(),
        llc_bytes=_llc_bytes(),
        clock_hz=_clock_hz(info),
        lane_width=_lane_width(info),
    )


# ---------------------------------------------------------------------------------------- cache
def cache_dir() -> Path:
    """``$LAYERSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/layerscope``, else ``~/.cache/layerscope``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "layerscope"


def cache_path() -> Path:
    """This machine's cache file: keyed by CPU model, core count, onnxruntime and probe version."""
    key = f"{cpu_model()}|{core_count()}|{_ort_version()}|probe{PROBE_VERSION}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / f"host-{digest}.json"


def load_cached() -> HostMeasurement | None:
    """The cached measurement for this machine; ``None`` if absent or unusable. Never measures."""
    try:
        text = cache_path().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return HostMeasurement.from_json(text)


def host_measurement(refresh: bool = False) -> HostMeasurement:
    """The cached measurement, or a fresh one (cached) when there is none or ``refresh`` is set.

    A cache that cannot be written is a warning, not an error: the measurement is still returned.
    """
    if not refresh:
        cached = load_cached()
        if cached is not None:
            return cached
    measurement = measure_host()
    path = cache_path()
    try:
        write_atomic(path, measurement.to_json())
    except OutputError as exc:  # the measurement stands; only its cache is lost
        warnings.warn(f"could not cache the host measurement: {exc}", stacklevel=2)
    return measurement


# -------------------------------------------------------------------------------------- profile
def _unit_mapping(template: Mapping[str, Any], m: HostMeasurement) -> dict[str, Any]:
    unit = dict(template.get("unit", {}))
    peaks = {"fp32": m.fp32_ops_per_s}
    if m.int8_ops_per_s is not None:
        peaks["int8"] = m.int8_ops_per_s
    if m.fp16_ops_per_s is not None:
        peaks["fp16"] = m.fp16_ops_per_s
    unit.setdefault("kinds", [k.value for k in UnitKind])
    unit["peak_ops_per_s"] = peaks
    unit["overhead_us"] = m.dispatch_overhead_us
    return unit


def _measured_sources(unit: str, m: HostMeasurement) -> dict[str, str]:
    when = f"on {m.measured_at} ({m.cpu_model}, onnxruntime {m.onnxruntime_version})"
    shape = f"{_MATMUL_N}x{_MATMUL_N}x{_MATMUL_N}"
    peak = f"units.{unit}.peak_ops_per_s"
    sources = {
        f"{peak}.fp32": f"measured: onnxruntime MatMul {shape} fp32, best time, {when}",
        f"units.{unit}.overhead_us": f"measured: per-node cost of a {_CHAIN_NODES}-node Add chain, {when}",
        "ddr_bandwidth_bytes_per_s": f"measured: numpy copy of 64 MiB, read+write bytes / best time, {when}",
        "cpu_ddr_bandwidth_bytes_per_s": "measured: same copy as ddr_bandwidth_bytes_per_s",
        "cores": "measured: CPUs this process may run on (sched_getaffinity)",
        "lane_width": "measured: fp32 lanes of the widest SIMD in /proc/cpuinfo flags",
        "sram_bytes": "measured: cpu0 last-level cache size from sysfs (0 if unreadable)",
    }
    if m.int8_ops_per_s is not None:
        sources[f"{peak}.int8"] = f"measured: onnxruntime MatMulInteger {shape} uint8, {when}"
    if m.fp16_ops_per_s is not None:
        sources[f"{peak}.fp16"] = f"measured: onnxruntime MatMul {shape} fp16, {when}"
    sources["clock_hz"] = (
        "measured: cpufreq cpuinfo_max_freq or /proc/cpuinfo 'cpu MHz'"
        if m.clock_hz
        else "assumption: 1 GHz; this machine does not report its clock"
    )
    return sources


def profile_mapping(template: Mapping[str, Any], m: HostMeasurement) -> dict[str, Any]:
    """The full schema-1 profile mapping for ``m``: template parts plus measured numbers."""
    unit = _unit_mapping(template, m)
    dtypes = ["fp32", *(["int8"] if m.int8_ops_per_s is not None else []),
              *(["fp16"] if m.fp16_ops_per_s is not None else [])]
    description = (
        f"this machine, measured {m.measured_at}: {m.cpu_model}, {m.cores} cores, "
        f"onnxruntime {m.onnxruntime_version}"
    )
    return {
        "schema": template.get("schema"),
        "name": template.get("name", HOST_NAME),
        "kind": template.get("kind", "cpu"),
        "description": description,
        "units": [unit],
        "cpu": unit,
        "ddr_bandwidth_bytes_per_s": m.copy_bytes_per_s,
        "ddr_efficiency": template.get("ddr_efficiency"),
        "cpu_ddr_bandwidth_bytes_per_s": m.copy_bytes_per_s,
        "transfer_overhead_us": template.get("transfer_overhead_us"),
        "sram_bytes": m.llc_bytes,
        "cores": m.cores,
        "clock_hz": m.clock_hz or 1e9,
        "default_dtype": template.get("default_dtype", "fp32"),
        "dtypes": dtypes,
        "lane_width": m.lane_width,
        "fallback_rules": template.get("fallback_rules", []),
        "sources": {**template.get("sources", {}), **_measured_sources(str(unit.get("name")), m)},
    }


def profile_from_measurement(m: HostMeasurement) -> Profile:
    """The validated host ``Profile`` for a measurement (template errors name host.toml)."""
    template = read_toml(TEMPLATE_PATH)
    return profile_from_mapping(profile_mapping(template, m), str(TEMPLATE_PATH))


def host_profile(refresh: bool = False) -> Profile:
    """The host ``Profile``; measures this machine if there is no cached measurement (or ``refresh``)."""
    return profile_from_measurement(host_measurement(refresh=refresh))


def cached_host_profile() -> Profile | None:
    """The host ``Profile`` from the cache alone; ``None`` before the first measurement."""
    cached = load_cached()
    return profile_from_measurement(cached) if cached is not None else None
