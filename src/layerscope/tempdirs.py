"""Temporary folders that do not outlive their process.

Every temporary folder layerscope makes is :func:`scratch`: ``$TMPDIR/layerscope-<kind>-p<PID>-<random>``, removed
when its ``with`` block ends (normally, on an error, on Ctrl-C or SIGTERM, which the CLI turns into an exception).
A process killed outright (SIGKILL, the OOM killer, a power cut) cannot remove its own: :func:`remove_orphans`,
which the CLI runs as it starts, removes the folders of this form whose process is gone — on the same machine the
PID names, after a grace period so that a PID reused by a new process is not mistaken for the dead one.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: ``layerscope-<kind>-p<PID>-<random>``: the folders :func:`scratch` makes.
_NAME = re.compile(r"^layerscope-[a-z0-9_]+-p(\d+)-[A-Za-z0-9_]+$")
#: A dead process's folder is removed only once it is this old (its PID cannot have been reused meanwhile by a
#: process that made a folder of the same name: names also hold a random part).
ORPHAN_GRACE_S = 60.0


@contextmanager
def scratch(kind: str) -> Iterator[str]:
    """A temporary folder for ``kind`` of work (``"bisect"``, ``"profile"``...), removed on the way out."""
    with tempfile.TemporaryDirectory(prefix=f"layerscope-{kind}-p{os.getpid()}-") as folder:
        yield folder


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_orphans(root: str | os.PathLike[str] | None = None, *, now: float | None = None) -> list[Path]:
    """Remove the :func:`scratch` folders under ``root`` (default: the temporary folder) whose process is gone and
    that are older than :data:`ORPHAN_GRACE_S`; only folders this user owns. Returns what was removed. Never
    raises: a folder that cannot be read or removed is left."""
    base = Path(root if root is not None else tempfile.gettempdir())
    moment = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or (uid is not None and info.st_uid != uid):
                continue
            if moment - info.st_mtime < ORPHAN_GRACE_S or _alive(int(match.group(1))):
                continue
            shutil.rmtree(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            continue
    return removed
