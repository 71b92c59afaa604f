"""Hardware targets: profiles as data files, their loader, op-support rules and the host probe.

Public API::

    load_profile(name_or_path) -> Profile        # "rdk-s100", "host", "./my-board.toml"
    list_profiles() -> list[ProfileSummary]       # never measures the host
    known_targets() -> list[str]
    fallback_reason(profile, node, graph) -> str | None
    host_profile(refresh=False) -> Profile        # measure (or read the cached) host
"""

import importlib
from typing import TYPE_CHECKING, Any

from layerscope.targets.loader import known_targets, list_profiles, load_profile
from layerscope.targets.profile import (
    ComputeUnit,
    FallbackRule,
    Profile,
    ProfileSummary,
    normalize_dtype,
)
from layerscope.targets.rules import PREDICATES, fallback_reason, register_predicate

if TYPE_CHECKING:
    from layerscope.targets.host import HostMeasurement, host_measurement, host_profile

#: The host probe's names, imported on first use: a shipped or user profile never measures the host.
_HOST_NAMES = frozenset({"HostMeasurement", "host_measurement", "host_profile"})


def __getattr__(name: str) -> Any:
    if name not in _HOST_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("layerscope.targets.host"), name)
    globals()[name] = value
    return value

__all__ = [
    "PREDICATES",
    "ComputeUnit",
    "FallbackRule",
    "HostMeasurement",
    "Profile",
    "ProfileSummary",
    "fallback_reason",
    "host_measurement",
    "host_profile",
    "known_targets",
    "list_profiles",
    "load_profile",
    "normalize_dtype",
    "register_predicate",
]
