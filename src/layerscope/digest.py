"""The SHA-256 a run records of its model file, computed on a thread of its own while the model is read.

Contract:
- :class:`Sha256` hashes some bytes, or a file, from when it is made until :meth:`Sha256.hexdigest` is asked:
  ``hashlib`` (and reading a file) let other threads run, so a model's hash costs no time where a second core
  imports, parses and checks meanwhile; bytes under :data:`THREAD_MIN_BYTES` are hashed at once, on the caller's
  thread;
- a file is hashed with the ``os.stat_result`` it is known by: :meth:`Sha256.hexdigest` raises ``ModelError`` when
  the file hashed is another, or was written meanwhile (:func:`changed`): the hash would not be of the bytes parsed;
- :func:`prefetch` starts a file's hash as soon as its path is known (before ``onnx`` is imported); the loader uses
  it only when the file it opens is the one hashed (:func:`changed`), and hashes again otherwise;
- :func:`sha256_file` hashes a file at once, on the caller's thread.

The file is read, never mapped: a mapped file truncated by another process while it is hashed kills the reader with
SIGBUS. This module imports neither ``onnx`` nor ``numpy``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path
from stat import S_ISREG

from layerscope.errors import ModelError

#: The block a file is hashed by.
BLOCK_BYTES = 16 << 20

#: Bytes and files smaller than this are hashed on the caller's thread: starting a thread costs more.
THREAD_MIN_BYTES = 1 << 20


class Sha256:
    """The SHA-256 of ``data``, or of the file at ``path`` known by ``stat`` (see the module docstring)."""

    def __init__(self, data: bytes | None = None, *, path: Path | None = None, stat: os.stat_result | None = None,
                 ) -> None:
        self._digest = hashlib.sha256()
        self._thread: threading.Thread | None = None
        self.path = path
        #: The file's ``os.stat_result`` as its hash was asked for (``None`` for bytes).
        self.stat = stat
        self._changed = False
        if data is not None and len(data) < THREAD_MIN_BYTES:
            self._digest.update(data)
            return
        work = functools.partial(self._digest.update, data) if data is not None else self._hash_file
        # a daemon: a refusal while it runs does not wait for it
        thread = threading.Thread(target=work, name="layerscope-sha256", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: hashed here
            work()
        else:
            self._thread = thread

    def _hash_file(self) -> None:
        """The file at ``path`` hashed by blocks (each read and hashed with other threads running), from a
        descriptor of its own; ``_changed`` when it is not the file ``stat`` describes, once hashed."""
        assert self.path is not None and self.stat is not None
        try:
            with self.path.open("rb", buffering=0) as f:
                block = bytearray(BLOCK_BYTES)
                view = memoryview(block)
                while count := f.readinto(block):
                    self._digest.update(view[:count])
                self._changed = changed(os.fstat(f.fileno()), self.stat)
        except OSError:
            self._changed = True

    def hexdigest(self) -> str:
        """The hash, hex (waits for its thread); ``ModelError`` when the file changed while it was hashed."""
        if self._thread is not None:
            self._thread.join()
        if self._changed:
            raise changed_error(self.path)
        return self._digest.hexdigest()


def sha256_file(path: Path) -> str:
    """The SHA-256 of the file at ``path``, hex, read on the caller's thread (a run's model file checked against the
    hash the run recorded)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


#: The hashes :func:`prefetch` started, by the path as ``pathlib`` reads it (``./m.onnx`` and ``m.onnx`` alike, as the
#: command line hands its model path on).
_STARTED: dict[Path, Sha256] = {}


def prefetch(path: str) -> None:
    """Start the hash of the file at ``path`` now, when it is a regular file of at least :data:`THREAD_MIN_BYTES`,
    for :func:`started` to hand to its loader; nothing otherwise, or when it cannot be read (the loader says why)."""
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return
    if S_ISREG(stat.st_mode) and stat.st_size >= THREAD_MIN_BYTES and Path(path) not in _STARTED:
        _STARTED[Path(path)] = Sha256(path=Path(path), stat=stat)


def started(path: str | os.PathLike[str]) -> Sha256 | None:
    """The hash :func:`prefetch` started for ``path`` (handed out once), else ``None``."""
    return _STARTED.pop(Path(path), None)


def changed(now: os.stat_result, then: os.stat_result) -> bool:
    """Whether ``now`` is another file than ``then``, or the same written since (its size or modification time)."""
    return (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) != (then.st_dev, then.st_ino, then.st_size,
                                                                        then.st_mtime_ns)


def changed_error(path: Path | None) -> ModelError:
    """The refusal of a file that changed while it was read."""
    return ModelError(f"{path}: the file changed while it was being read", hint="run again once the model is written")
