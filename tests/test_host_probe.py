"""The host probe: measures this machine once, caches it atomically, reuses the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from layerscope.cli.targets import command
from layerscope.costs.types import UnitKind
from layerscope.targets import host, list_profiles, load_profile
from layerscope.targets.host import HostMeasurement

FAKE = HostMeasurement(
    probe_version=host.PROBE_VERSION,
    measured_at="2025-01-01T00:00:00+00:00",
    cpu_model="Test CPU 9000",
    cores=4,
    onnxruntime_version="1.0",
    numpy_version="2.0",
    machine="x86_64",
    fp32_ops_per_s=100e9,
    int8_ops_per_s=None,
    fp16_ops_per_s=None,
    copy_bytes_per_s=20e9,
    dispatch_overhead_us=3.0,
    llc_bytes=32 * 1024 * 1024,
    clock_hz=None,
    lane_width=8,
    on_chip_bytes=9 * 1024 * 1024,
    on_chip_source="sysfs cpu0 caches, per core L2 0.5 MiB + L3 4 MiB x 2 cores",
    cache_knee_bytes=None,
)


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("LAYERSCOPE_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def fake_probe(monkeypatch: pytest.MonkeyPatch, cache: Path) -> list[int]:
    """Replace the real measurement by ``FAKE``; the list counts the calls."""
    calls: list[int] = []

    def measure() -> HostMeasurement:
        calls.append(1)
        return replace(FAKE, cores=FAKE.cores + len(calls) - 1)

    monkeypatch.setattr(host, "measure_host", measure)
    return calls


def test_real_probe_measures_positive_numbers_and_the_second_call_reads_the_cache(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = host.host_profile()
    files = list(cache.glob("host-*.json"))
    assert len(files) == 1 and files[0] == host.cache_path()
    assert not list(cache.glob("*.tmp"))
    unit = first.unit_for(UnitKind.TENSOR)
    assert unit == first.cpu and unit.name == "cpu-simd"
    assert unit.ops_per_s("fp32") > 0 and unit.overhead_us > 0
    assert first.ddr_bandwidth_bytes_per_s > 0 and first.cores >= 1
    assert first.kind == "cpu" and first.fallback_rules == ()
    assert host.cpu_model() in first.description and "onnxruntime" in first.description
    assert (first.source_for(f"units.{unit.name}.peak_ops_per_s.fp32") or "").startswith("measured: ")

    mtime = files[0].stat().st_mtime_ns

    def refuse() -> None:
        raise AssertionError("measured again instead of reading the cache")

    monkeypatch.setattr(host, "measure_host", refuse)
    second = load_profile("host")
    assert second.cpu.peak_ops_per_s == first.cpu.peak_ops_per_s
    assert second.description == first.description
    assert files[0].stat().st_mtime_ns == mtime
    row = next(r for r in list_profiles() if r.name == "host")
    assert not row.measured_on_first_use and row.peak_fp32_ops_per_s == unit.ops_per_s("fp32")


def test_refresh_measures_again_and_replaces_the_cache(fake_probe: list[int]) -> None:
    assert host.host_measurement().cores == 4
    assert host.host_measurement().cores == 4
    assert len(fake_probe) == 1
    assert host.host_measurement(refresh=True).cores == 5
    assert len(fake_probe) == 2
    assert host.load_cached() == replace(FAKE, cores=5)


def test_a_corrupt_cache_is_measured_again(fake_probe: list[int]) -> None:
    path = host.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json", encoding="utf-8")
    assert host.host_measurement() == FAKE
    assert fake_probe == [1]
    assert json.loads(path.read_text(encoding="utf-8"))["schema"] == 1


def test_a_cache_from_another_probe_version_is_ignored(fake_probe: list[int]) -> None:
    path = host.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(replace(FAKE, probe_version=host.PROBE_VERSION + 1).to_json(), encoding="utf-8")
    assert host.load_cached() is None
    host.host_measurement()
    assert fake_probe == [1]


@pytest.mark.parametrize(("field", "value"), [("cores", "4"), ("fp32_ops_per_s", -1.0), ("cpu_model", None)])
def test_a_cache_with_a_wrong_field_is_ignored(fake_probe: list[int], field: str, value: object) -> None:
    path = host.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(FAKE.to_json())
    data[field] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    assert host.load_cached() is None
    assert host.host_measurement() == FAKE and fake_probe == [1]


def test_the_profile_built_from_a_measurement(fake_probe: list[int]) -> None:
    profile = host.host_profile()
    assert profile.cpu.peak_ops_per_s == {"fp32": 100e9}
    assert profile.dtypes == ("fp32",)
    assert profile.cpu.ops_per_s("int8") == 100e9  # not measured: falls back to the slowest listed
    assert (profile.ddr_bandwidth_bytes_per_s, profile.cpu_ddr_bandwidth_bytes_per_s) == (20e9, 20e9)
    assert (profile.sram_bytes, profile.cores, profile.lane_width) == (9 * 1024 * 1024, 4, 8)
    assert profile.source_for("sram_bytes") == (
        "measured: sysfs cpu0 caches, per core L2 0.5 MiB + L3 4 MiB x 2 cores "
        "(nominal last-level cache 33554432 bytes, not used)")
    assert profile.clock_hz == 1e9
    assert (profile.source_for("clock_hz") or "").startswith("assumption")
    assert profile.description == (
        "this machine, measured 2025-01-01T00:00:00+00:00: Test CPU 9000, 4 cores, onnxruntime 1.0"
    )


def test_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LAYERSCOPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert host.cache_dir() == tmp_path / "xdg" / "layerscope"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert host.cache_dir() == tmp_path / "home" / ".cache" / "layerscope"
    monkeypatch.setenv("LAYERSCOPE_CACHE_DIR", str(tmp_path / "mine"))
    assert host.cache_path().parent == tmp_path / "mine"
    assert host.cache_path().name.startswith("host-") and host.cache_path().suffix == ".json"


def test_targets_reprobe_measures_and_shows_the_host(fake_probe: list[int]) -> None:
    host.host_measurement()
    result = CliRunner(env={"COLUMNS": "200"}).invoke(command, ["--reprobe"])
    assert result.exit_code == 0, result.output
    assert fake_probe == [1, 1]
    assert "Test CPU 9000" in result.output and "cpu-simd" in result.output


def test_an_unwritable_cache_warns_but_still_measures(
    fake_probe: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("LAYERSCOPE_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(UserWarning, match="could not cache the host measurement"):
        assert host.host_measurement() == FAKE
    assert fake_probe == [1]


def test_a_cache_that_cannot_be_written_is_a_warning(fake_probe: list[int], cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache folder under a regular file: write_atomic's OutputError becomes a warning, the measurement
    is returned."""
    plain = cache / "plain"
    plain.write_text("a file\n")
    monkeypatch.setenv("LAYERSCOPE_CACHE_DIR", str(plain / "cache"))
    with pytest.warns(UserWarning, match="could not cache the host measurement: .* is not a folder"):
        assert host.host_measurement() == FAKE
    assert fake_probe == [1]


# ------------------------------------------------------------------ on-chip memory: sysfs caches and the knee
MiB = 1024 * 1024


def fake_sys(root: Path, caches: list[tuple[int, str, str, str]]) -> Path:
    """A /sys/devices/system/cpu tree whose cpu0 lists ``caches`` as (level, type, size, shared_cpu_list)."""
    for i, (level, kind, size, shared) in enumerate(caches):
        index = root / "cpu0" / "cache" / f"index{i}"
        index.mkdir(parents=True)
        for name, text in (("level", str(level)), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (index / name).write_text(text + "\n")
    return root


def test_a_vms_bogus_l3_is_capped_per_core(tmp_path: Path) -> None:
    # The VM that reported a 480 MiB L3 over its 4 vCPUs: 120 MiB per core counted as on-chip before.
    root = fake_sys(tmp_path, [(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                               (2, "Unified", "2048K", "0"), (3, "Unified", "491520K", "0-3")])
    levels = host.cache_levels(root)
    assert levels == (host.CacheLevel(1, 48 * 1024, 1), host.CacheLevel(2, 2 * MiB, 1),
                      host.CacheLevel(3, 480 * MiB, 4))
    on_chip, source = host.on_chip_figure(levels, 4, None)
    assert on_chip == 4 * (2 * MiB + 4 * MiB)  # L2 2 MiB + the L3 share capped at 4 MiB, per core, x 4 cores
    assert "480 MiB over 4 CPUs, capped at 4 MiB" in source and "x 4 cores" in source


def test_a_plain_cache_tree_counts_l2_and_the_l3_share(tmp_path: Path) -> None:
    # This build machine's own tree: L2 512K per core, L3 32 MiB shared by CPUs 0-1 (16 MiB each, capped).
    root = fake_sys(tmp_path, [(1, "Data", "32K", "0"), (2, "Unified", "512K", "0"), (3, "Unified", "8192K", "0,2-3")])
    on_chip, source = host.on_chip_figure(host.cache_levels(root), 2, None)
    assert on_chip == 2 * (512 * 1024 + 8 * MiB // 3)  # 8 MiB over 3 CPUs: under the cap
    assert "capped" not in source and "no bandwidth knee measured" in source


def test_the_knee_bounds_the_l3_share_and_stands_in_without_sysfs(tmp_path: Path) -> None:
    root = fake_sys(tmp_path, [(2, "Unified", "1024K", "0"), (3, "Unified", "32768K", "0-7")])
    levels = host.cache_levels(root)
    # One core reaches 64 MiB: (64 - 1) / 8 = 7.9 MiB of L3 each, above the 4 MiB share: sysfs stands.
    assert host.on_chip_figure(levels, 8, 64 * MiB)[0] == 8 * (1 * MiB + 4 * MiB)
    # One core reaches only 16 MiB: the L3 it can use is (16 - 1) / 8 = 1.875 MiB per core.
    on_chip, source = host.on_chip_figure(levels, 8, 16 * MiB)
    assert on_chip == 8 * (1 * MiB + 15 * MiB // 8)
    assert "bounded by the measured knee 16 MiB" in source and "knee 16 MiB (one thread)" in source
    # The VM with a 480 MiB L3: a 24 MiB knee leaves (24 - 2) / 4 = 5.5 MiB, so the 4 MiB cap decides.
    vm = (host.CacheLevel(2, 2 * MiB, 1), host.CacheLevel(3, 480 * MiB, 4))
    assert host.on_chip_figure(vm, 4, 24 * MiB)[0] == 4 * 6 * MiB
    assert host.on_chip_figure((), 8, 16 * MiB) == (16 * MiB, "measured copy-bandwidth knee 16 MiB (one thread); "
                                                               "no L2/L3 in sysfs")
    assert host.on_chip_figure(host.cache_levels(tmp_path / "missing"), 8, None)[0] == 0


def _curve(points: list[tuple[float, float]]) -> list[tuple[int, float]]:
    """(MiB, GB/s) to (bytes, bytes/s)."""
    return [(int(size * MiB), gbps * 1e9) for size, gbps in points]


def test_knee_of_synthetic_curves() -> None:
    # Three cache levels then DRAM: the knee is the last size clearly above the DRAM floor (median 10 GB/s).
    stairs = _curve([(0.25, 120), (0.5, 110), (1, 60), (2, 58), (4, 40), (8, 38), (16, 13), (32, 10), (64, 10),
                     (128, 9)])
    assert host.bandwidth_knee(stairs) == 8 * MiB
    # Noise: a dip inside the cache range does not end it early; a late bump at DRAM size does not count.
    noisy = _curve([(0.25, 6), (0.5, 70), (1, 55), (2, 30), (4, 70), (8, 22), (16, 9.5), (32, 4), (64, 7.3)])
    assert host.bandwidth_knee(noisy) == 8 * MiB
    flat = _curve([(0.25, 10), (1, 10.5), (4, 9.8), (16, 10), (64, 10)])
    assert host.bandwidth_knee(flat) is None  # no cache effect visible: no knee
    rising = _curve([(0.25, 10), (1, 10), (4, 10), (16, 30), (64, 40)])
    assert host.bandwidth_knee(rising) is None  # faster at the end: not a cache curve
    assert host.bandwidth_knee(stairs[:3]) is None  # too few points to tell


def test_cpu_list_counts() -> None:
    assert [host._cpu_count(t) for t in ("0", "0-3", "0,2-3", "0-1,8-9\n", "")] == [1, 4, 3, 4, 1]


def test_the_cache_key_reads_onnxruntimes_version_without_importing_it() -> None:
    """The key's onnxruntime version is the string the import gives (the same cache file as before), read from the
    installed distribution that holds the package: a child process keys its cache and never imports onnxruntime."""
    import onnxruntime

    assert host._ort_distribution_version() == onnxruntime.__version__
    child = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        from layerscope.targets import host
        print(host._ort_version())
        host.cache_path()
        print("onnxruntime" in sys.modules)
    """)], capture_output=True, text=True, check=True)
    assert child.stdout.split() == [onnxruntime.__version__, "False"]


def test_a_distribution_that_does_not_hold_the_imported_package_is_not_read(tmp_path: Path) -> None:
    """The version comes from the package ``import onnxruntime`` would load: a package found elsewhere (a source
    checkout ahead on the path) is not the installed distribution's, and its version is the import's."""
    shadow = tmp_path / "onnxruntime"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('__version__ = "0.0.shadow"\n')
    paths = [str(tmp_path), *(p for p in sys.path if p)]
    child = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        from layerscope.targets import host
        print(host._ort_distribution_version(), host._ort_version())
    """)], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})
    assert child.stdout.split() == ["None", "0.0.shadow"]
