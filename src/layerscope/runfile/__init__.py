"""The run file, owned in one place: typed sections (:mod:`.models`), loading with migration and validation
(:mod:`.io`), the published JSON Schema (:mod:`.schema`) and the quantities derived from a run (:mod:`.derived`).
"""

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
from layerscope.runfile.models import RunFile

__all__ = [
    "SCHEMA_VERSION", "KFactor", "Origin", "RunFile", "as_run", "check", "device_mismatch", "dump_text",
    "is_eliminated", "layer_estimated_us", "layer_measured_us", "layer_shares", "layer_time_us", "load",
    "load_document", "measurement_origin", "scale_factor", "steadiness_text", "time_basis", "unsteady", "upgrade",
]
