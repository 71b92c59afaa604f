"""Temporary folders that do not outlive their process.

Every temporary folder layerscope makes is :func:`scratch`: ``<parent>/layerscope-<kind>-p<PID>-<random>`` (parent:
the temporary folder, ``$TMPDIR``, unless given), removed when its ``with`` block ends (normally, on an error, on
Ctrl-C or SIGTERM, which the CLI turns into an exception); a stop that arrives while the folder is made or removed
waits for that to finish (:func:`layerscope.interrupts.deferred`).

A process killed outright (SIGKILL, the OOM killer, a power cut) cannot remove its own: :func:`remove_orphans`
removes the folders of this form whose process is gone — on the same machine the PID names, after a grace period so
that a PID reused by a new process is not mistaken for the dead one. A process runs it on the temporary folder once,
as it makes its first scratch folder, so the commands that make none (``estimate`` of a static model, ``report``)
never scan it.

Work that runs elsewhere (a sweep's cells, in Ray workers) keeps its folders under one root its driver makes
(:func:`scratch` ``"sweep"``, passed to the workers): :func:`scratch_under` makes a cell's folder there and points
:mod:`tempfile` at it while the cell runs, so every folder the cell's code makes lies inside, and the driver's root
goes, with whatever a killed worker left in it, on every exit path of the driver.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from layerscope import interrupts

#: ``layerscope-<kind>-p<PID>-<random>``: the folders :func:`scratch` makes.
_NAME = re.compile(r"^layerscope-[a-z0-9_]+-p(\d+)-[A-Za-z0-9_]+$")
#: A dead process's folder is removed only once it is this old (its PID cannot have been reused meanwhile by a
#: process that made a folder of the same name: names also hold a random part).
ORPHAN_GRACE_S = 60.0
#: Attempts at removing a folder another process may still be writing into (a Ray worker that is being stopped).
_REMOVE_ATTEMPTS = 5
_REMOVE_PAUSE_S = 0.1

_swept = threading.Event()


def _remove_orphans_once() -> None:
    """:func:`remove_orphans` on the temporary folder, the first time this process calls it (later calls: nothing)."""
    if not _swept.is_set():
        _swept.set()
        remove_orphans()


@contextmanager
def scratch(kind: str, parent: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """A new folder for ``kind`` of work (``"bisect"``, ``"profile"``...) under ``parent`` (default: the temporary
    folder), removed with its contents on the way out, however the block ends. The first call of a process first
    removes the orphans of killed processes (:func:`remove_orphans`)."""
    _remove_orphans_once()
    folder = None
    try:
        with interrupts.deferred():  # a stop between the folder's making and ``folder`` naming it would leave it
            folder = tempfile.mkdtemp(prefix=f"layerscope-{kind}-p{os.getpid()}-", dir=parent)
        yield folder
    finally:
        if folder is not None:
            with interrupts.deferred():  # a second stop, or one arriving as the block ends, finishes the removal
                remove_tree(folder)


@contextmanager
def scratch_under(root: str | None, kind: str = "cell") -> Iterator[str]:
    """A :func:`scratch` folder under ``root`` (a driver's :func:`scratch` folder, when this process can see it;
    otherwise under the temporary folder: a worker on another machine), which :mod:`tempfile` uses as the
    temporary folder while the block runs (``tempfile.tempdir``: process-wide, so the block must be the only work
    of its process, as a Ray task or a sweep's cell in its driver is)."""
    parent = root if root is not None and os.path.isdir(root) else None
    with scratch(kind, parent) as folder:
        previous = tempfile.tempdir
        tempfile.tempdir = folder
        try:
            yield folder
        finally:
            tempfile.tempdir = previous


def remove_tree(folder: str | os.PathLike[str]) -> bool:
    """Remove ``folder`` and its contents; a few attempts when it changes meanwhile (a process still writing into
    it). ``True`` when it is gone; never raises (what stays is an orphan the next :func:`remove_orphans` takes)."""
    for _ in range(_REMOVE_ATTEMPTS):
        if not os.path.lexists(folder):
            return True
        try:
            shutil.rmtree(folder)
            return True
        except OSError:  # a file removed or added meanwhile, or one that cannot be removed
            time.sleep(_REMOVE_PAUSE_S)
    return not os.path.lexists(folder)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_orphans(root: str | os.PathLike[str] | None = None, *, now: float | None = None,
                   grace_s: float = ORPHAN_GRACE_S) -> list[Path]:
    """Remove the :func:`scratch` folders under ``root`` (default: the temporary folder) whose process is gone and
    that are older than ``grace_s`` seconds; only folders this user owns. Returns what was removed. Never raises: a
    folder that cannot be read or removed is left."""
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
            if moment - info.st_mtime < grace_s or _alive(int(match.group(1))):
                continue
        except OSError:
            continue
        if remove_tree(entry.path):
            removed.append(Path(entry.path))
    return removed
