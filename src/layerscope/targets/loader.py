"""Finding targets by name or path, and listing them.

Shipped profiles live in ``targets/profiles/<name>.toml``; ``host`` is built from a measurement
(``targets.host``). A user passes their own file by path. Listing never measures the host.
"""

from __future__ import annotations

import os
from pathlib import Path

from layerscope.errors import ProfileError
from layerscope.targets.profile import HOST_NAME, Profile, ProfileSummary
from layerscope.targets.schema import load_profile_file

PROFILES_DIR = Path(__file__).with_name("profiles")
HOST = HOST_NAME


def _shipped() -> dict[str, Path]:
    """Shipped profile name -> file (``host.toml`` is the host template, not a profile)."""
    return {p.stem: p for p in sorted(PROFILES_DIR.glob("*.toml")) if p.stem != HOST}


def known_targets() -> list[str]:
    """Names ``load_profile`` accepts, sorted (``host`` included)."""
    return sorted([*_shipped(), HOST])


#: Longest target name quoted back in an error message.
_MAX_SHOWN = 80


def _looks_like_path(text: str) -> bool:
    """A ``.toml`` name, anything with a path separator, or an existing file."""
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    if text.endswith(".toml") or any(sep in text for sep in separators):
        return True
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long for the file system, or holding a NUL: not a file
        return False


def load_profile(name_or_path: str) -> Profile:
    """The profile for a target name (``rdk-s100``, ``host``, ...) or a profile file path.

    ``host`` measures this machine on first use (then reads the cache). Raises ``ProfileError``:
    for an unknown name (listing the known ones), a missing file, or a malformed profile.
    """
    name = name_or_path.strip()
    if name.lower() == HOST:
        from layerscope.targets import host  # the probe: only the host target measures

        return host.host_profile()
    shipped = _shipped()
    if name.lower() in shipped:
        return load_profile_file(shipped[name.lower()])
    if _looks_like_path(name):
        return load_profile_file(Path(name).expanduser(), display=name)
    shown = repr(name) if len(name) <= _MAX_SHOWN else f"{name[:_MAX_SHOWN]!r}... ({len(name)} characters)"
    raise ProfileError(f"unknown target {shown}; known: {', '.join(known_targets())}")


def _host_summary() -> ProfileSummary:
    from layerscope.targets import host

    cached = host.cached_host_profile()
    if cached is not None:
        return ProfileSummary.of(cached)
    return ProfileSummary(
        name=HOST,
        kind="cpu",
        description="this machine's CPU, measured on first use",
        peak_int8_ops_per_s=None,
        peak_fp16_ops_per_s=None,
        peak_fp32_ops_per_s=None,
        ddr_bandwidth_bytes_per_s=None,
        sram_bytes=None,
        cores=None,
        source_path=str(host.TEMPLATE_PATH),
        measured_on_first_use=True,
    )


def list_profiles() -> list[ProfileSummary]:
    """A summary of every known target, sorted by name. Never runs the host probe."""
    rows = [ProfileSummary.of(load_profile_file(path)) for path in _shipped().values()]
    rows.append(_host_summary())
    return sorted(rows, key=lambda row: row.name)
