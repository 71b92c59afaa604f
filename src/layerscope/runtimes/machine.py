"""The machine record every measurement carries (``measurement.machine``): where it ran.

Contract: :func:`machine_info` is the host name, CPU model (``/proc/cpuinfo``'s ``model name``, else what
``platform`` says), cores, OS, Python and the installed onnxruntime's version, whichever runtime measured (a
runtime may add keys of its own, e.g. OpenVINO's version and device).
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

__all__ = ["machine_info"]


def machine_info() -> dict[str, Any]:
    """Where a measurement ran: host name, CPU model, cores, OS, Python, onnxruntime version."""
    import onnxruntime as ort

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "cpu": cpu,
        "cores": os.cpu_count() or 0,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "onnxruntime": ort.__version__,
    }
