"""Hardware targets: profiles as data files, their loader, op-support rules and the host probe.

Public API::

    load_profile(name_or_path) -> Profile        # "rdk-s100", "host", "./my-board.toml"
    list_profiles() -> list[ProfileSummary]       # never measures the host
    known_targets() -> list[str]
    fallback_reason(profile, node, graph) -> str | None
    host_profile(refresh=False) -> Profile        # measure (or read the cached) host
"""

from typing import TYPE_CHECKING

from layerscope._lazy import from_module, lazy_names
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
__getattr__ = lazy_names(__name__, from_module("layerscope.targets.host", "HostMeasurement", "host_measurement",
                                               "host_profile"))

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
