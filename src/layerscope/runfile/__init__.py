"""The run file, owned in one place: typed sections (:mod:`.models`), loading with migration and validation
(:mod:`.io`), the published JSON Schema (:mod:`.schema`) and the quantities derived from a run (:mod:`.derived`).
"""

from typing import TYPE_CHECKING, Any

from layerscope.runfile.derived import (
    KFactor,
    Origin,
    device_mismatch,
    is_eliminated,
    layer_estimated_us,
    layer_measured_us,
    layer_shares,
    layer_time_us,
    measurement_origin,
    scale_factor,
    steadiness_text,
    time_basis,
    unsteady,
)
from layerscope.runfile.io import SCHEMA_VERSION, as_run, check, dump_text, load, load_document, upgrade

if TYPE_CHECKING:
    from layerscope.runfile.models import RunFile


def __getattr__(name: str) -> Any:
    """``RunFile`` on first use: building the typed models (pydantic) costs a command that only writes a run
    (``estimate``) a large part of its start-up."""
    if name == "RunFile":
        from layerscope.runfile.models import RunFile

        return RunFile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "SCHEMA_VERSION", "KFactor", "Origin", "RunFile", "as_run", "check", "device_mismatch", "dump_text",
    "is_eliminated", "layer_estimated_us", "layer_measured_us", "layer_shares", "layer_time_us", "load",
    "load_document", "measurement_origin", "scale_factor", "steadiness_text", "time_basis", "unsteady", "upgrade",
]
