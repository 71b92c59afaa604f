"""Atomic file writes: every result layerscope writes goes through :func:`write_atomic`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part.

    A temporary file in the same folder is written, flushed to disk and renamed over ``path``
    (``os.replace``); on any error it is removed. Parent folders are created. The file is readable by
    everyone (0644), like a file written with ``open``. ``str`` data is written as UTF-8.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
