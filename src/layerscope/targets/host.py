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
- ``op_ops_per_s``: for each op type of :data:`PROBE_OPS` (element-wise, normalisation, transcendental and
  data-movement ops), the operations layerscope's cost model counts for one such node
  (:func:`layerscope.costs.cost_layer`: flops, plus one per output element for data movement) over the best time
  of the node alone in onnxruntime, on activations of ``_OP_ROWS`` x ``_OP_COLS`` fp32 (128 KiB: in cache, so the
  time is the kernel's arithmetic, not DRAM), all threads as for the MatMul. The profile turns each into an
  ``op_efficiency`` multiplier: its rate over the fp32 MatMul peak. A CPU's element-wise kernels run far below its
  GEMM peak (an Add of cached floats at ~1/30 of it, an Erf at ~1/300 on an AMD EPYC VM): without it every such
  layer was estimated at the GEMM rate.
- ``cache_bytes_per_s``: the bandwidth of an activation the caches hold: the median over the one-thread copy
  bandwidth curve's sizes (read+write bytes, 256 KiB and up) that fit half the on-chip bytes (~94 GB/s on an AMD
  EPYC VM, against a 25-29 GB/s DRAM copy rate).
- ``on_chip_bytes`` (the profile's ``sram_bytes``): the cache the cores this process may use hold between
  them, not the nominal L3 a VM reports (a 480 MiB "L3" made 13 MB activations count as on-chip).
  From sysfs (:func:`sysfs_on_chip`): per core, its L2 share plus its share of L3, each share capped at
  ``_CACHE_SHARE_CAP`` per core, times the cores. A measured knee (:func:`bandwidth_knee` over
  :func:`copy_bandwidth_curve`, one thread: the working set one core keeps in cache) bounds the L3 share
  further; with no sysfs, the knee alone. ``on_chip_source`` says which, with the figures.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from layerscope.costs.types import UnitKind
from layerscope.errors import BackendUnavailable, OutputError
from layerscope.fileio import write_atomic
from layerscope.targets.profile import HOST_NAME as HOST_NAME  # noqa: PLC0414 (explicit re-export, PEP 484)
from layerscope.targets.profile import Profile
from layerscope.targets.schema import profile_from_mapping, read_toml

PROBE_VERSION = 4
CACHE_ENV = "LAYERSCOPE_CACHE_DIR"
TEMPLATE_PATH = Path(__file__).with_name("profiles") / "host.toml"

_MATMUL_N = 512
_CHAIN_NODES = 100
_COPY_BYTES = 64 * 1024 * 1024
# Per-core cap on a cache share: 4 MiB is the L3 per core of AMD Zen 2-4 and above Intel's 1.25-2 MiB; a VM's
# nominal L3 (480 MiB seen) divided over its few vCPUs gives far more, which no core has.
_CACHE_SHARE_CAP = 4 * 1024 * 1024
_SYS_CPU = Path("/sys/devices/system/cpu")
# Working sets (source + destination bytes) of the copy-bandwidth curve: 256 KiB to 128 MiB, doubling.
_KNEE_SIZES = tuple(256 * 1024 * 2**i for i in range(10))
_KNEE_BUDGET_S = 0.02
# A size is "on chip" while its bandwidth stays this many times above the DRAM floor (the largest sizes').
_KNEE_RATIO = 1.4
_BUDGET_S = 0.4
_MIN_REPEATS = 3
_MAX_REPEATS = 50
_ONNX_OPSET = 17
_ONNX_IR_VERSION = 8
# The op probe's activations: 32 x 1024 fp32 = 128 KiB, inside any core's L2; its per-op time budget.
_OP_ROWS = 32
_OP_COLS = 1024
_OP_BUDGET_S = 0.05
#: ONNX Runtime's fused contrib ops (domain ``com.microsoft``) the probe times: its transformer optimizer writes them
#: (and ``minilm``-style exports ship them), and their kernels run at their own rates, far from the GEMM peak.
_CONTRIB_OPS = frozenset({"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "SkipLayerNormalization",
                          "SkipSimplifiedLayerNormalization"})
_NORM_OPS = frozenset({"LayerNormalization", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"})
#: The op types the host probe times (``op_ops_per_s``): the element-wise, normalisation, reduction and data-movement
#: ops real models run most, whose speed on a CPU is far from its GEMM peak and differs op to op.
PROBE_OPS: tuple[str, ...] = (
    "Add", "Mul", "Sub", "Div", "Max", "Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
    "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Where", "Equal", "Cast", "Softmax",
    "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "Transpose", "Gather", "Concat", "Slice",
    "Expand", *sorted(_CONTRIB_OPS),
)


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
    on_chip_bytes: int
    on_chip_source: str
    cache_knee_bytes: int | None
    op_ops_per_s: dict[str, float] = field(default_factory=dict, hash=False)
    cache_bytes_per_s: float | None = None

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


_CACHE_TEXT = frozenset({"measured_at", "cpu_model", "onnxruntime_version", "numpy_version", "machine",
                         "on_chip_source"})
_CACHE_OPTIONAL = frozenset({"int8_ops_per_s", "fp16_ops_per_s", "clock_hz", "cache_knee_bytes", "cache_bytes_per_s"})
_CACHE_INT = frozenset({"probe_version", "cores", "llc_bytes", "lane_width", "on_chip_bytes", "cache_knee_bytes"})
_CACHE_ZERO_OK = frozenset({"llc_bytes", "on_chip_bytes"})
_CACHE_MAPPING = frozenset({"op_ops_per_s"})


def _cache_value_ok(name: str, value: Any) -> bool:
    """Whether a cached field has the type (and sign) the profile needs."""
    if name in _CACHE_TEXT:
        return isinstance(value, str)
    if name in _CACHE_MAPPING:
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v > 0
            for k, v in value.items())
    if value is None:
        return name in _CACHE_OPTIONAL
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if name in _CACHE_INT:
        return isinstance(value, int) and value >= (0 if name in _CACHE_ZERO_OK else 1)
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


@dataclass(frozen=True)
class CacheLevel:
    """One data or unified cache of a CPU as sysfs lists it: ``size_bytes`` shared by ``shared_cpus`` CPUs."""

    level: int
    size_bytes: int
    shared_cpus: int

    @property
    def per_cpu_bytes(self) -> int:
        return self.size_bytes // max(1, self.shared_cpus)


def _cpu_count(cpu_list: str) -> int:
    """CPUs in a sysfs cpu list such as ``0-3,8``; 1 when it cannot be read."""
    count = 0
    for part in cpu_list.strip().split(","):
        low, _, high = part.partition("-")
        with contextlib.suppress(ValueError):
            count += int(high) - int(low) + 1 if high else 1
    return max(1, count)


def cache_levels(cpu_dir: Path = _SYS_CPU) -> tuple[CacheLevel, ...]:
    """cpu0's data and unified caches from ``cpu_dir/cpu0/cache/index*``, by level; empty if unreadable."""
    levels = []
    for index in sorted((cpu_dir / "cpu0" / "cache").glob("index*")):
        with contextlib.suppress(OSError, ValueError):
            if (index / "type").read_text().strip() == "Instruction":
                continue
            size = _size_bytes((index / "size").read_text())
            shared = (index / "shared_cpu_list").read_text() if (index / "shared_cpu_list").exists() else "0"
            if size > 0:
                levels.append(CacheLevel(int((index / "level").read_text()), size, _cpu_count(shared)))
    return tuple(sorted(levels, key=lambda c: c.level))


def _mib(n: float) -> str:
    return f"{n / 1024**2:.3g} MiB"


def sysfs_on_chip(levels: tuple[CacheLevel, ...], cores: int, knee: int | None = None) -> tuple[int, str] | None:
    """On-chip bytes of ``cores`` cores from their caches, and how; ``None`` without an L2 or deeper cache.

    Per core: its share of each cache from L2 out, each capped at ``_CACHE_SHARE_CAP``, times ``cores``. L1 is
    left out (the kernels' own working set, not activations). A measured ``knee`` (what one core reaches
    before copies fall to DRAM speed) bounds the outermost level: at most ``knee`` minus the inner levels,
    over the CPUs sharing it -- a VM's nominal L3 cannot be larger than what a core can use of it.
    """
    outer = [c for c in levels if c.level >= 2]
    if not outer:
        return None
    parts, per_core, inner = [], 0, 0
    for position, cache in enumerate(outer):
        share = min(cache.per_cpu_bytes, _CACHE_SHARE_CAP)
        notes = [f"{_mib(cache.size_bytes)} over {cache.shared_cpus} CPUs"]
        if share < cache.per_cpu_bytes:
            notes.append(f"capped at {_mib(_CACHE_SHARE_CAP)}")
        if knee and position == len(outer) - 1:
            reachable = max(knee - inner, 0) // cache.shared_cpus
            if reachable < share:
                share = reachable
                notes.append(f"bounded by the measured knee {_mib(knee)}")
        per_core += share
        inner += cache.size_bytes
        parts.append(f"L{cache.level} {_mib(share)} ({', '.join(notes)})")
    knee_text = f"; measured copy-bandwidth knee {_mib(knee)} (one thread)" if knee else "; no bandwidth knee measured"
    return per_core * cores, f"sysfs cpu0 caches, per core {' + '.join(parts)} x {cores} cores{knee_text}"


def bandwidth_knee(curve: Sequence[tuple[int, float]], ratio: float = _KNEE_RATIO) -> int | None:
    """The largest working set (bytes) still served from cache in a copy-bandwidth ``curve``.

    ``curve``: (working-set bytes, bytes/s) with growing sizes. The DRAM floor is the median of the last
    three points' bandwidth; the knee is the last size at or above ``ratio`` x floor after which every larger
    size stays below it. ``None`` when there is no such drop: a flat curve (every size at DRAM speed, or all
    in cache), or a drop only at the very first size.
    """
    if len(curve) < 4:
        return None
    points = sorted(curve)
    floor = sorted(bw for _, bw in points[-3:])[1]
    above = [bw >= ratio * floor for _, bw in points]
    if not any(above) or above[-1]:
        return None
    last = max(i for i, fast in enumerate(above) if fast)
    return points[last][0]


def copy_bandwidth_curve(sizes: Sequence[int] = _KNEE_SIZES) -> tuple[tuple[int, float], ...]:
    """(working-set bytes, bytes/s) of a one-thread numpy copy for each size (half source, half destination).

    Each point repeats the copy at least ``_MIN_REPEATS`` times and until ~``_KNEE_BUDGET_S`` has passed, and
    keeps the best repeat (the least disturbed on a shared machine).
    """
    points = []
    for size in sizes:
        src = np.ones(max(1, size // 16), dtype=np.float64)
        dst = np.empty_like(src)
        inner = max(1, (8 * 1024 * 1024) // size)  # small copies are repeated to rise above the timer's step
        best = float("inf")
        start = time.perf_counter()
        np.copyto(dst, src)
        for repeat in range(_MAX_REPEATS):
            t0 = time.perf_counter()
            for _ in range(inner):
                np.copyto(dst, src)
            best = min(best, (time.perf_counter() - t0) / inner)
            if repeat + 1 >= _MIN_REPEATS and time.perf_counter() - start > _KNEE_BUDGET_S:
                break
        points.append((2 * src.nbytes, 2 * src.nbytes / max(best, 1e-9)))
    return tuple(points)


def on_chip_figure(levels: tuple[CacheLevel, ...], cores: int, knee: int | None) -> tuple[int, str]:
    """The host's on-chip bytes and where the figure came from (see the module docstring)."""
    sysfs = sysfs_on_chip(levels, cores, knee)
    if sysfs is not None:
        return sysfs
    if knee:
        return knee, f"measured copy-bandwidth knee {_mib(knee)} (one thread); no L2/L3 in sysfs"
    return 0, "unknown: no L2/L3 in sysfs and no bandwidth knee measured (nothing counted on chip)"


def _clock_hz(info: Mapping[str, str]) -> float | None:
    with contextlib.suppress(OSError, ValueError):
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        return float(khz) * 1e3
    with contextlib.suppress(ValueError, KeyError):
        return float(info["cpu MHz"]) * 1e6
    return None


def _ort_version() -> str:
    """``onnxruntime.__version__``, read from the installed distribution's metadata when one holds the package that
    ``import onnxruntime`` would load (:func:`_ort_distribution_version`), which spares the 30 ms import when the
    host profile only needs its cache key; else from the import. ``"unavailable"`` without onnxruntime."""
    version = _ort_distribution_version()
    if version is not None:
        return version
    try:
        import onnxruntime
    except ImportError:  # pragma: no cover - a declared dependency
        return "unavailable"
    return str(onnxruntime.__version__)


#: The distributions that install the ``onnxruntime`` package (PyPI names): the CPU wheel and the builds for other
#: execution providers, each with the same package and its release's ``__version__``.
_ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml",
                      "onnxruntime-qnn", "onnxruntime-rocm", "onnxruntime-training")


def _ort_distribution_version() -> str | None:
    """The version of the installed distribution of :data:`_ORT_DISTRIBUTIONS` whose files hold the
    ``onnxruntime/__init__.py`` that ``import onnxruntime`` would run (found, not run: ``find_spec``); ``None`` when
    none does (not installed, or installed some other way), so that the caller imports it."""
    import importlib.metadata
    import importlib.util

    try:
        spec = importlib.util.find_spec("onnxruntime")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin).resolve()
    for name in _ORT_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Path(str(dist.locate_file("onnxruntime/__init__.py"))).resolve() == origin and dist.version:
            return str(dist.version)
    return None


# ------------------------------------------------------------------------------------- timings
def _best_time(run: Callable[[], object], budget_s: float = _BUDGET_S) -> float:
    """Best wall time of ``run`` over at least ``_MIN_REPEATS`` calls within ``budget_s``."""
    run()  # warm-up: first-run allocations and lazy initialisation
    best = float("inf")
    start = time.perf_counter()
    for repeat in range(_MAX_REPEATS):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        if repeat + 1 >= _MIN_REPEATS and time.perf_counter() - start > budget_s:
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
        graph, opset_imports=[helper.make_opsetid("", _ONNX_OPSET), helper.make_opsetid("com.microsoft", 1)],
        ir_version=_ONNX_IR_VERSION,
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


def _probe_node(op: str) -> tuple[list[Any], list[Any], Any]:
    """One ``op`` node on an ``_OP_ROWS`` x ``_OP_COLS`` fp32 input ``x`` (second operands, scales and indices as
    constants): its nodes, initializers and output value info."""
    from onnx import TensorProto, helper, numpy_helper

    rows, cols = _OP_ROWS, _OP_COLS
    rng = np.random.default_rng(0)
    out_shape: list[int] = [rows, cols]
    inits: list[Any] = []
    attrs: dict[str, Any] = {}
    inputs = ["x"]
    out_type = TensorProto.FLOAT
    if op in ("Add", "Mul", "Sub", "Div", "Max", "Equal"):
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, (cols,)).astype(np.float32), "b"))
        inputs.append("b")
        out_type = TensorProto.BOOL if op == "Equal" else out_type
    elif op == "Clip":
        inits += [numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
        inputs += ["lo", "hi"]
    elif op == "Where":
        inits += [numpy_helper.from_array(rng.integers(0, 2, (rows, cols)).astype(bool), "c"),
                  numpy_helper.from_array(np.zeros((cols,), np.float32), "z")]
        inputs = ["c", "x", "z"]
    elif op == "Cast":
        attrs["to"] = TensorProto.FLOAT16
        out_type = TensorProto.FLOAT16
    elif op == "Softmax":
        attrs["axis"] = -1
    elif op in _NORM_OPS:
        if op == "LayerNormalization":
            attrs["axis"] = -1
        else:  # the skip (residual) input, the same shape as x
            inits.append(numpy_helper.from_array(rng.standard_normal((rows, cols)).astype(np.float32), "skip"))
            inputs.append("skip")
        inits.append(numpy_helper.from_array(np.ones((cols,), np.float32), "g"))
        inputs.append("g")
        if op != "SkipSimplifiedLayerNormalization":
            inits.append(numpy_helper.from_array(np.zeros((cols,), np.float32), "beta"))
            inputs.append("beta")
    elif op in ("FastGelu", "BiasGelu"):  # with their bias input, as the optimizer writes them
        inits.append(numpy_helper.from_array(rng.standard_normal((cols,)).astype(np.float32), "bias"))
        inputs.append("bias")
    elif op.startswith("Reduce"):
        attrs["axes"] = [-1]
        out_shape = [rows, 1]
    elif op == "Transpose":
        attrs["perm"] = [1, 0]
        out_shape = [cols, rows]
    elif op == "Gather":  # an embedding lookup: rows of a table, the indices fed
        inits.append(numpy_helper.from_array(rng.standard_normal((4 * rows, cols)).astype(np.float32), "table"))
        inputs = ["table", "idx"]
    elif op == "Concat":
        attrs["axis"] = 1
        inits.append(numpy_helper.from_array(rng.standard_normal((rows, cols)).astype(np.float32), "y"))
        inputs.append("y")
        out_shape = [rows, 2 * cols]
    elif op == "Slice":
        inits += [numpy_helper.from_array(np.array([1], np.int64), "s0"),
                  numpy_helper.from_array(np.array([cols - 1], np.int64), "s1"),
                  numpy_helper.from_array(np.array([1], np.int64), "ax")]
        inputs += ["s0", "s1", "ax"]
        out_shape = [rows, cols - 2]
    elif op == "Expand":
        inits.append(numpy_helper.from_array(np.array([4, rows, cols], np.int64), "shape"))
        inputs.append("shape")
        out_shape = [4, rows, cols]
    domain = "com.microsoft" if op in _CONTRIB_OPS else ""
    node = helper.make_node(op, inputs, ["y_out"], name=f"probe_{op}", domain=domain, **attrs)
    return [node], inits, helper.make_tensor_value_info("y_out", out_type, out_shape)


def _probe_ops(model: Any) -> float | None:
    """The operations layerscope's cost model counts for the one node of ``model``, as the roofline does: flops,
    or twice the MACs where more, plus one per output element for data-movement and auxiliary layers; ``None``
    when it has no cost."""
    from layerscope.costs import cost_layer
    from layerscope.model.load import load_model
    from layerscope.tempdirs import scratch

    with scratch("probe") as folder:
        path = Path(folder) / "probe.onnx"
        path.write_bytes(model.SerializeToString())
        graph = load_model(path)
    node = graph.layers[0]
    cost = cost_layer(node, graph)
    if cost.unit_kind in (UnitKind.MOVE, UnitKind.AUX):
        out_elements = sum(t.elements for t in (graph.tensor(o) for o in node.outputs) if t)
        return float(cost.flops + out_elements)
    ops = float(max(cost.flops, 2 * cost.macs))
    return ops if ops > 0 else None


def _op_ops_per_s() -> dict[str, float]:
    """``op_ops_per_s`` (see the module docstring): for each of :data:`PROBE_OPS` this onnxruntime runs and
    layerscope costs, its cost-model operations per second."""
    from onnx import TensorProto, helper

    rates: dict[str, float] = {}
    feeds = {"x": np.random.default_rng(1).standard_normal((_OP_ROWS, _OP_COLS)).astype(np.float32),
             "idx": np.random.default_rng(2).integers(0, 4 * _OP_ROWS, (_OP_ROWS,)).astype(np.int64)}
    types = {"x": (TensorProto.FLOAT, [_OP_ROWS, _OP_COLS]), "idx": (TensorProto.INT64, [_OP_ROWS])}
    # a session.run's own cost (a one-node chain of 8 floats), taken off each op's time
    call_s = _chain_seconds(1)
    for op in PROBE_OPS:
        nodes, inits, output = _probe_node(op)
        names = [name for name in ("x", "idx") if name in nodes[0].input]
        inputs = [helper.make_tensor_value_info(name, *types[name]) for name in names]
        model = _model(nodes, inputs, [output], inits)
        try:
            ops = _probe_ops(model)
            if ops is None:
                continue
            session = _session(model)
            given = {name: feeds[name] for name in names}
            seconds = _best_time(partial(session.run, None, given), _OP_BUDGET_S)
        except Exception:  # an op this onnxruntime or this cost model lacks: left out, the profile's default
            continue
        rates[op] = ops / max(seconds - call_s, seconds / 10)
    return rates


def _copy_bytes_per_s() -> float:
    src = np.ones(_COPY_BYTES // 8, dtype=np.float64)
    dst = np.empty_like(src)
    seconds = _best_time(lambda: np.copyto(dst, src))
    return 2.0 * src.nbytes / seconds


def cache_bandwidth(curve: Sequence[tuple[int, float]], cached_bytes: int) -> float | None:
    """``cache_bytes_per_s``: the median bandwidth of the copy-bandwidth ``curve``'s points (working-set bytes,
    bytes/s) whose working set is at most ``cached_bytes`` (half the on-chip bytes, the activations the estimate
    takes as cached); ``None`` when no point is that small."""
    rates = sorted(bw for size, bw in curve if size <= cached_bytes)
    return float(np.median(rates)) if rates else None


def measure_host() -> HostMeasurement:
    """Probe this machine now (about a second; never reads or writes the cache).

    Raises ``BackendUnavailable`` when onnxruntime cannot run even an fp32 MatMul.
    """
    info = _cpuinfo()
    fp32 = _matmul_ops_per_s("fp32")
    if fp32 is None:
        raise BackendUnavailable("onnxruntime cannot run an fp32 MatMul on this CPU; the host probe needs it")
    cores = core_count()
    curve = copy_bandwidth_curve()
    knee = bandwidth_knee(curve)
    on_chip, on_chip_source = on_chip_figure(cache_levels(), cores, knee)
    return HostMeasurement(
        probe_version=PROBE_VERSION,
        measured_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        cpu_model=cpu_model(),
        cores=cores,
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
        on_chip_bytes=on_chip,
        on_chip_source=on_chip_source,
        cache_knee_bytes=knee,
        op_ops_per_s=_op_ops_per_s(),
        cache_bytes_per_s=cache_bandwidth(curve, on_chip // 2),
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
        "op_efficiency": (f"measured: each op type's cost-model ops / best time of one node on {_OP_ROWS}x{_OP_COLS} "
                          f"fp32 in onnxruntime (all threads, a session call's own time taken off), over the fp32 "
                          f"MatMul peak, {when}"),
        "sram_bytes": f"measured: {m.on_chip_source} (nominal last-level cache {m.llc_bytes} bytes, not used)",
    }
    if m.cache_bytes_per_s is not None:
        sources["cache_bytes_per_s"] = (f"measured: one-thread numpy copies of 256 KiB up to half of sram_bytes, "
                                        f"read+write bytes / best time, median over the sizes, {when}")
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
        "sram_bytes": m.on_chip_bytes,
        "cores": m.cores,
        "clock_hz": m.clock_hz or 1e9,
        "default_dtype": template.get("default_dtype", "fp32"),
        "dtypes": dtypes,
        "lane_width": m.lane_width,
        "fallback_rules": template.get("fallback_rules", []),
        "op_efficiency": op_efficiency(m),
        **({"cache_bytes_per_s": m.cache_bytes_per_s} if m.cache_bytes_per_s is not None else {}),
        "sources": {**template.get("sources", {}), **_measured_sources(str(unit.get("name")), m)},
    }


def op_efficiency(m: HostMeasurement) -> dict[str, float]:
    """The host profile's ``op_efficiency``: each probed op type's measured rate (``op_ops_per_s``) over the fp32
    MatMul peak its unit lists, kept within the schema's bounds (1e-6 .. 1e6)."""
    return {op: min(max(rate / m.fp32_ops_per_s, 1e-6), 1e6) for op, rate in sorted(m.op_ops_per_s.items())}


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
