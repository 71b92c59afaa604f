"""Atomic file writes (every result layerscope writes goes through :func:`write_atomic`) and bounded reads of
small input files (:func:`read_text_limited`)."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO, Protocol

from layerscope import interrupts
from layerscope.errors import InputError, OutputError

#: The temporary file's name keeps at most this many characters of the target's, so that a target whose
#: name is near the file system's limit (255 bytes) does not fail only because of the temporary name.
_TMP_NAME_CHARS = 64
#: ``str`` data is encoded and written this many characters at a time.
_CHUNK_CHARS = 1 << 22


def write_atomic(path: str | os.PathLike[str], data: bytes | str | Iterable[bytes]) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part.

    A temporary file in the same folder is written, flushed to disk and renamed over ``path``
    (``os.replace``); on any error it is removed (also one raised while ``data``, an iterable of byte strings
    written as they come, is made). Parent folders are created. The file is readable by
    everyone (0644), like a file written with ``open``. ``str`` data is written as UTF-8. A symbolic link
    at ``path`` is replaced by the file, never written through.

    A ``path`` that is (or links to) a character device or a FIFO the user named (``/dev/stdout``, ``/dev/null``,
    a named pipe) is written straight through, never replaced; any other kind of file that is not a regular
    file (a block device, a socket) is refused. The output path rule: :func:`output_kind`.

    Raises :class:`~layerscope.errors.OutputError` (exit 2) naming ``path`` and the reason for every OS
    error: ``path`` is a folder, a parent is a regular file, the folder is read-only, the disk is full, ...
    """
    target = Path(path)
    if output_kind(target) == "stream":
        return _write_through(target, data)
    try:
        _existing_folder(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(target.name), suffix=_TMP_SUFFIX, dir=target.parent)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            _write_data(handle, data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException as exc:
        with interrupts.deferred():  # a second stop does not leave the temporary file
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
        raise
    return target


_TMP_SUFFIX = ".tmp"


def _temporary_prefix(name: str) -> str:
    return f".{name[:_TMP_NAME_CHARS]}."


def is_temporary_of(entry_name: str, names: Iterable[str]) -> bool:
    """Whether a file named ``entry_name`` is one of :func:`write_atomic`'s temporary files for a target named one of
    ``names`` in the same folder: what a write cut short (a kill, a power cut) leaves beside it."""
    return entry_name.endswith(_TMP_SUFFIX) and entry_name.startswith(tuple(map(_temporary_prefix, names)))


def _write_data(handle: BinaryIO, data: bytes | str | Iterable[bytes]) -> None:
    """``data`` into ``handle``: bytes as they are, ``str`` as UTF-8 a slice at a time (a 60 MB run is never held
    twice), an iterable of byte strings as they come."""
    if isinstance(data, str):
        for start in range(0, len(data), _CHUNK_CHARS):
            handle.write(data[start:start + _CHUNK_CHARS].encode("utf-8"))
    elif isinstance(data, bytes):
        handle.write(data)
    else:
        for part in data:
            handle.write(part)


def output_kind(target: Path) -> str:
    """How :func:`write_atomic` writes ``target``: ``"file"`` (missing, a regular file, or a symbolic link to
    one or to nothing: replaced by a renamed temporary file) or ``"stream"`` (a character device or a FIFO,
    itself or behind links: written through). ``OutputError`` for any other kind of file: it is never replaced."""
    try:
        mode = target.stat().st_mode  # follows links: /dev/stdout -> /proc/self/fd/1 -> the terminal or pipe
    except (FileNotFoundError, NotADirectoryError):
        return "file"  # missing, a dangling link (replaced), or under a regular file (refused with its reason later)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "stream"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return "file"  # a folder is refused by _existing_folder with its own message
    raise OutputError(f"{target}: cannot write (not a regular file, a character device or a FIFO)")


def _write_through(target: Path, data: bytes | str | Iterable[bytes]) -> Path:
    """Write ``data`` to the device or FIFO at ``target`` as it is (no temporary file, no rename)."""
    try:
        with target.open("wb") as handle:
            _write_data(handle, data)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    return target


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Fail early, before any work, when :func:`write_atomic` could not write ``path``; creates nothing.

    ``path`` must not be a folder, its nearest existing parent must be a folder, and a file must be
    creatable there (probed with an anonymous temporary file, which leaves nothing behind). Raises
    :class:`~layerscope.errors.OutputError` (exit 2) naming ``path`` and the reason; returns ``path``.
    A path that passes can still fail later (the disk fills up): :func:`write_atomic` reports that too.
    """
    target = Path(path)
    if output_kind(target) == "stream":
        if not os.access(target, os.W_OK):
            raise OutputError(f"{target}: cannot write (Permission denied)")
        return target
    try:
        folder = _existing_folder(target)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({_reason(exc)})") from None
    return target


def _existing_folder(target: Path) -> Path:
    """The nearest existing parent folder of ``target``; ``OutputError`` when ``target`` is a folder or that
    parent is not a folder (a path under a regular file)."""
    if target.is_dir() and not target.is_symlink():
        raise OutputError(f"{target}: cannot write (it is a folder)")
    for parent in target.parents:
        if parent.is_symlink() or parent.exists():
            if not parent.is_dir():
                raise OutputError(f"{target}: cannot write ({parent} is not a folder)")
            return parent
    return Path.cwd()  # pragma: no cover - a relative path's parents end at '.', which exists


def _reason(exc: OSError) -> str:
    """The OS's words for ``exc`` (``strerror``), without the path it repeats; ``str(exc)`` when it has none."""
    if exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def read_text_limited(path: str | os.PathLike[str], max_bytes: int, *, what: str = "a file may have") -> str:
    """The text of the regular file at ``path`` (UTF-8, a BOM dropped, undecodable bytes replaced), at most
    ``max_bytes`` long.

    Checked before the file is opened: it exists and is a regular file (a FIFO, a device or a folder is refused:
    reading one could block or never end) no larger than ``max_bytes``; the bytes read are checked again (a file
    that grows meanwhile). ``InputError`` (exit 2), one line naming ``path``: "no such file", "not a file",
    "cannot read (<reason>)", or "<size> bytes is larger than the <max_bytes> bytes <what>".
    """
    target = Path(path)
    try:
        info = target.stat()
    except FileNotFoundError:
        raise InputError(f"{target}: no such file") from None
    except OSError as exc:
        raise InputError(f"{target}: cannot read ({_reason(exc)})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{target}: not a file")
    if info.st_size > max_bytes:
        raise InputError(f"{target}: {info.st_size} bytes is larger than the {max_bytes} bytes {what}")
    try:
        with target.open("rb") as handle:
            data = read_limited(handle, max_bytes)
    except OSError as exc:
        raise InputError(f"{target}: cannot read ({_reason(exc)})") from None
    if data is None:
        raise InputError(f"{target}: grew past {max_bytes} bytes while being read; not read")
    return data.decode("utf-8-sig", errors="replace")


#: Bytes read per piece by :func:`read_limited`.
READ_PIECE_BYTES = 1 << 22


class Readable(Protocol):
    """What :func:`read_limited` reads: a binary file, a ``gzip.GzipFile``."""

    def read(self, size: int = -1, /) -> bytes: ...


def read_limited(stream: Readable, max_bytes: int) -> bytes | None:
    """All of ``stream``, read :data:`READ_PIECE_BYTES` at a time; ``None`` as soon as it passes ``max_bytes``.
    Nothing sized by the limit is reserved up front (``read(max_bytes + 1)`` allocates that much for a file of a
    few bytes: a 512 MiB limit fails a small file under a 400 MiB address-space limit)."""
    pieces: list[bytes] = []
    total = 0
    while piece := stream.read(READ_PIECE_BYTES):
        total += len(piece)
        if total > max_bytes:
            return None
        pieces.append(piece)
    return b"".join(pieces)
