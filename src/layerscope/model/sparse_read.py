"""A model file read into memory without the values of its large weights, which the loader never reads.

Contract:
- :func:`read_sparse` reads a binary ONNX file of over :data:`SPARSE_MIN_BYTES` into a buffer of the file's size
  (anonymous memory: pages never written are never allocated), in ascending order, walking the ``ModelProto``'s
  fields, its graph's fields and the fields of each initializer encoded in over 16 KB by their tags and lengths
  (:mod:`layerscope.model.wire`). The ``raw_data`` of the weights :func:`validate.without_large_raw_data` leaves out
  is skipped: those bytes of the buffer stay zero. Every other byte of the buffer is the file's. It returns the
  buffer, the :class:`~layerscope.model.validate.Layout` :func:`validate.bytes_layout` reads from the whole file,
  the skipped spans and :func:`validate.without_large_raw_data` of the buffer (the model to parse); ``None`` when
  the walk meets anything :func:`wire.fields` does not read, skips nothing (it gives up after
  :data:`_UNSKIPPED_MAX_BYTES`), or skips a byte outside the weights ``without_large_raw_data`` leaves out: the
  caller reads the file whole, and what it parses or refuses is then the file itself.
- the file ending before ``size`` raises ``OSError`` (the loader refuses it with one line).

What it buys (``benchmarks/README.md``, ``tricks.py``): on a detector of 84 MB, 70 MB of it large weights, the
main thread reads 13 MB instead of 84 (12-14 ms against 51-56 ms for one copy of the whole file into fresh memory)
and the process peaks at 111 MB instead of 162. The file's SHA-256 is computed meanwhile from the file, on a
thread the loader starts when the walk first leaves bytes unread.
"""

from __future__ import annotations

import bisect
import io
import mmap
from collections.abc import Callable
from typing import NamedTuple

from layerscope.model import wire
from layerscope.model.validate import (
    _CHECKER_MAX_INITIALIZER_BYTES,
    _CHECKER_WHOLE_MAX_BYTES,
    GRAPH_INITIALIZER,
    MODEL_GRAPH,
    TENSOR_RAW_DATA,
    Layout,
    _large_raw_weight,
    spans_layout,
    without_large_raw_data,
)

#: Files of at most this many bytes are read whole: :func:`validate.without_large_raw_data` leaves nothing out of them.
SPARSE_MIN_BYTES = _CHECKER_WHOLE_MAX_BYTES

#: Bytes read past what the walk needs, for the fields after it: one read for a run of small fields (a graph's
#: nodes), not one each. After the tag of a large initializer only :data:`_TENSOR_AHEAD` is read: the fields of a
#: tensor before its ``raw_data`` (dims, data type, name) fit in it.
_AHEAD = 256 << 10
_TENSOR_AHEAD = 4 << 10

#: The walk gives up when it has read this many bytes and left none unread: a graph of many nodes and small
#: weights (the 10k- and 100k-layer graphs of ``benchmarks/scale.py``) is read whole, its fields walked once. The
#: nodes of a model of large weights come first and take a few hundred KB (yolov5s_deep's 687: 0.1 MB).
_UNSKIPPED_MAX_BYTES = 2 << 20

#: The longest tag and length of a field (two varints of 10 bytes), read before a field is walked.
_HEADER = 21


class SparseRead(NamedTuple):
    """A model file as :func:`read_sparse` read it."""

    #: The file's bytes but those of ``skipped``, which are zero.
    data: mmap.mmap
    #: Its fields' spans, as :func:`validate.bytes_layout` reads them from the whole file.
    layout: Layout
    #: The ``raw_data`` values left unread, as ``(start, end)``.
    skipped: tuple[tuple[int, int], ...]
    #: :func:`validate.without_large_raw_data` of the file: the model to parse, and the initializers it leaves out
    #: (by index), which hold every byte left unread.
    light: bytes
    stripped: tuple[int, ...]


class _Reader:
    """The file ``f`` read into ``data`` in ascending order: every byte below ``ready`` is read but the skipped ones."""

    def __init__(self, f: io.FileIO, size: int, skipping: Callable[[], object] | None) -> None:
        self.file = f
        self.skipping = skipping
        self.size = size
        self.data = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.view = memoryview(self.data)
        self.ready = 0
        self.skipped: list[tuple[int, int]] = []

    def need(self, end: int, ahead: int = _AHEAD, limit: int | None = None) -> None:
        """The bytes up to ``end`` read, and ``ahead`` past it (not past ``limit``, nor the file's end)."""
        if end <= self.ready:
            return
        stop = max(end, min(end + ahead, self.size if limit is None else limit))
        self.read(self.ready, stop)
        self.ready = stop

    def skip(self, start: int, end: int) -> None:
        """The bytes up to ``start`` read, those up to ``end`` left unread: reading goes on after them."""
        self.need(start, 0)
        if end > self.ready:
            if self.skipping is not None:
                self.skipping()
                self.skipping = None
            self.skipped.append((max(start, self.ready), end))
            self.ready = end

    def read(self, start: int, end: int) -> None:
        """The file's bytes ``start:end`` into ``data``; ``OSError`` when the file ends before."""
        self.file.seek(start)
        while start < end:
            count = self.file.readinto(self.view[start:end])
            if not count:
                raise OSError(f"the file ended at byte {start:,} of {self.size:,} (it changed while it was read)")
            start += count

    def field(self, pos: int, end: int, ahead: int) -> wire.Span | None:
        """The field at ``pos`` of a message ending at ``end``, its tag and length read (and ``ahead`` bytes)."""
        self.need(min(pos + _HEADER, end), ahead, end)
        return wire.field_at(self.data, pos, end)

    def close(self) -> None:
        self.view.release()
        self.data.close()


def read_sparse(f: io.FileIO, size: int, skipping: Callable[[], object] | None = None) -> SparseRead | None:
    """The model file ``f`` (``size`` bytes) read without its large weights' values (module docstring).
    ``skipping`` is called when the walk first leaves bytes unread (once at most: the caller hashes the file from
    then on)."""
    if size <= SPARSE_MIN_BYTES:
        return None
    reader = _Reader(f, size, skipping)
    graphs: list[list[wire.Span]] = []
    top = _walk(reader, 0, size, graphs)
    layout = None if top is None or len(graphs) != 1 else spans_layout(top, graphs[0])
    light = None if layout is None or not reader.skipped else without_large_raw_data(reader.data, layout)
    if layout is None or light is None or not _within(reader.skipped, layout, light[1]):
        reader.close()
        return None
    reader.view.release()
    return SparseRead(reader.data, layout, tuple(reader.skipped), *light)


def _within(skipped: list[tuple[int, int]], layout: Layout, initializers: tuple[int, ...]) -> bool:
    """Whether every span of ``skipped`` is in one of ``initializers`` (indices into ``layout.initializers``)."""
    spans = sorted((layout.initializers[index].value, layout.initializers[index].end) for index in initializers)
    starts = [start for start, _ in spans]
    for start, end in skipped:
        at = bisect.bisect_right(starts, start) - 1
        if at < 0 or end > spans[at][1]:
            return False
    return True


def _walk(reader: _Reader, start: int, end: int, graphs: list[list[wire.Span]] | None) -> list[wire.Span] | None:
    """The fields of the message at ``start:end``, read as they are walked; ``None`` when one does not read.
    ``graphs`` given: the message is a ``ModelProto``, each graph field's own fields are walked and appended to
    ``graphs``. Otherwise a ``GraphProto``, whose initializers encoded in over 16 KB are walked field by field
    (:func:`_initializer`). A run of other fields is read at once with what follows it: the bytes read ahead double
    with each run (a graph's nodes: one read of up to :data:`_AHEAD`, not one each) and fall back after a large
    initializer (the next one's values are not read ahead)."""
    spans: list[wire.Span] = []
    pos = start
    ahead = _TENSOR_AHEAD
    while pos < end:
        head = reader.field(pos, end, _TENSOR_AHEAD)
        if head is None:
            return None
        large = head.wire_type == wire.LENGTH_DELIMITED and (
            head.number == MODEL_GRAPH if graphs is not None else
            head.number == GRAPH_INITIALIZER and head.end - head.value > _CHECKER_MAX_INITIALIZER_BYTES)
        if large:
            if graphs is not None:
                inner = _walk(reader, head.value, head.end, None)
                if inner is None:
                    return None
                graphs.append(inner)
            elif not _initializer(reader, head):
                return None
            spans.append(head)
            pos = head.end
            ahead = _TENSOR_AHEAD
            continue
        if not reader.skipped and reader.ready > _UNSKIPPED_MAX_BYTES:
            return None  # a graph of many small fields (nodes, small weights): read whole, walked once
        reader.need(head.end, ahead, end)
        ahead = min(2 * ahead, _AHEAD)
        run = wire.fields(reader.data, pos, min(reader.ready, end), prefix=True)
        if not run:
            return None
        spans.extend(run)
        pos = run[-1].end
    return spans


def _initializer(reader: _Reader, span: wire.Span) -> bool:
    """The tensor encoded in ``span`` read field by field, its ``raw_data`` left unread when
    :func:`validate._large_raw_weight` says so (read otherwise); ``False`` when a field does not read."""
    tensor: list[wire.Span] = []
    holes: list[tuple[int, int]] = []
    pos = span.value
    while pos < span.end:
        field = reader.field(pos, span.end, _TENSOR_AHEAD)
        if field is None:
            return False
        if field.number == TENSOR_RAW_DATA and field.end - field.value > _CHECKER_MAX_INITIALIZER_BYTES:
            before = len(reader.skipped)
            reader.skip(field.value, field.end)
            holes.extend(reader.skipped[before:])
        else:
            reader.need(field.end, 0)
        tensor.append(field)
        pos = field.end
    if holes and not _large_raw_weight(reader.data, tensor):
        for start, end in holes:  # a weight the loader reads (a small one, text, external): its bytes read after all
            reader.read(start, end)
            reader.skipped.remove((start, end))
    return True
