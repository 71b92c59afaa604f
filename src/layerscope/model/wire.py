"""The fields of a serialized protobuf message as byte spans, read from the wire format without decoding a value.

Contract:
- :func:`fields` lists the fields of one message level, in the order they are written, each as a :class:`Span`
  (field number, first byte of its tag, first byte of its value, end); a length-delimited value (a string, a
  bytes field, an embedded message) is skipped by its length, never read. It returns ``None`` for anything it
  does not read as a plain message: a truncated field, a malformed varint, a group (wire types 3 and 4, which
  ONNX never writes) or an unknown wire type, so that a caller falls back to the parsed message;
- :func:`varints` and :func:`varint_at` read integer values (packed or one);
- :func:`length_delimited` writes one length-delimited field (tag, length, value), :func:`header` its tag and
  length alone (for a value written after it in pieces).

Protobuf parses a message's fields in any order, and the entries of a repeated field in the order they are
written: a message cut from spans of another (some fields left out, entries of a repeated field kept in their
order, entries appended after them) parses as the message with those fields, which is how
:mod:`layerscope.model.validate` gives ONNX's checker a model without its large weights without copying the rest
through Python objects, and how the loader parses a model without its large weights' bytes. Against parsing the whole
file with protobuf and cutting the checker's copy from the parsed model (``benchmarks/tricks.py``, ``estimate``):
58 ms of 0.62 s CPU and 217 -> 163 MB peak on a 700-node detector with 84 MB of weights, 0.32 s of 5.7 s and
521 -> 488 MB at 100k layers.
"""

from __future__ import annotations

import mmap
from typing import NamedTuple, TypeAlias

#: What the readers below read: a file's bytes, or the buffer a file was read into
#: (:mod:`layerscope.model.sparse_read`).
ReadBuffer: TypeAlias = bytes | mmap.mmap

#: Wire types (protobuf encoding): varint, 64-bit, length-delimited, 32-bit.
VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


class Span(NamedTuple):
    """One field of a message: ``data[start:end]`` is the field as written (tag and value), ``data[value:end]``
    its value (for a length-delimited field: the bytes after the length). A named tuple, immutable: a message
    of 100k nodes has 100k of them, made in a loop."""

    number: int
    wire_type: int
    start: int
    value: int
    end: int


#: ``Span`` made from a tuple without the named tuple's keyword-argument ``__new__`` (a third of the loop's time).
_span = tuple.__new__


def _varint(data: ReadBuffer, pos: int, end: int) -> tuple[int, int] | None:
    """The varint at ``pos`` and the position after it; ``None`` when it runs past ``end`` or past 10 bytes."""
    result = shift = 0
    while pos < end and shift < 70:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    return None


def fields(data: ReadBuffer, start: int = 0, end: int | None = None, *, prefix: bool = False) -> list[Span] | None:
    """The fields of the message in ``data[start:end]`` (the whole of ``data`` by default), in written order;
    ``None`` when it is not read as a plain message (module docstring). ``prefix``: the fields read before the first
    that runs past ``end`` or is not read, never ``None`` (``data`` read up to ``end`` so far, the rest to come)."""
    stop = len(data) if end is None else end
    out: list[Span] = []
    pos = start
    while pos < stop:
        key = data[pos]
        if key < 0x80:  # a one-byte tag: fields 1 to 15
            at = pos + 1
        else:
            tag = _varint(data, pos, stop)
            if tag is None:
                break
            key, at = tag
        number, wire_type = key >> 3, key & 7
        if number == 0:
            break
        if wire_type == VARINT:
            value = _varint(data, at, stop)
            if value is None:
                break
            after = value[1]
        elif wire_type == LENGTH_DELIMITED:
            if at < stop and data[at] < 0x80:  # a length under 128
                size, at = data[at], at + 1
            elif at + 1 < stop and data[at + 1] < 0x80:  # under 16384 (a small weight, a node)
                size, at = (data[at] & 0x7F) | data[at + 1] << 7, at + 2
            else:
                length = _varint(data, at, stop)
                if length is None:
                    break
                size, at = length
            after = at + size
        elif wire_type == FIXED64:
            after = at + 8
        elif wire_type == FIXED32:
            after = at + 4
        else:  # groups (3, 4) and the undefined wire types 6 and 7
            break
        if after > stop:
            break
        out.append(_span(Span, (number, wire_type, pos, at, after)))
        pos = after
    else:
        return out
    return out if prefix else None


def field_at(data: ReadBuffer, pos: int, end: int) -> Span | None:
    """The field whose tag is at ``data[pos]`` in a message ending at ``end``, read from its tag and length (or
    varint) alone: its value need not be in ``data`` yet. ``None`` when :func:`fields` would not read it."""
    tag = _varint(data, pos, end)
    if tag is None or tag[0] >> 3 == 0:
        return None
    key, at = tag
    number, wire_type = key >> 3, key & 7
    if wire_type == VARINT:
        value = _varint(data, at, end)
        after = None if value is None else value[1]
    elif wire_type == LENGTH_DELIMITED:
        length = _varint(data, at, end)
        if length is None:
            return None
        after = length[1] + length[0]
        at = length[1]
    elif wire_type in (FIXED64, FIXED32):
        after = at + (8 if wire_type == FIXED64 else 4)
    else:
        return None
    return None if after is None or after > end else Span(number, wire_type, pos, at, after)


def varints(data: ReadBuffer, start: int, end: int) -> list[int] | None:
    """The varints packed in ``data[start:end]`` (a packed repeated integer field's value), as unsigned integers;
    ``None`` when one is malformed or runs past ``end``."""
    out: list[int] = []
    pos = start
    while pos < end:
        read = _varint(data, pos, end)
        if read is None:
            return None
        value, pos = read
        out.append(value)
    return out


def varint_at(data: ReadBuffer, pos: int, end: int) -> int | None:
    """The varint at ``data[pos]`` (a varint field's value), ``None`` when malformed or running past ``end``."""
    read = _varint(data, pos, end)
    return None if read is None else read[0]


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_field(number: int, value: int) -> bytes:
    """Field ``number`` holding the non-negative integer ``value`` (an int32/int64/enum field), as protobuf
    writes it."""
    return _encode_varint(number << 3 | VARINT) + _encode_varint(value)


def header(number: int, size: int) -> bytes:
    """The tag and length of a length-delimited field ``number`` whose value is ``size`` bytes."""
    if number < 16 and size < 0x80:  # a one-byte tag and a one-byte length: most fields of a graph
        return bytes((number << 3 | LENGTH_DELIMITED, size))
    return _encode_varint(number << 3 | LENGTH_DELIMITED) + _encode_varint(size)


def length_delimited(number: int, value: bytes) -> bytes:
    """Field ``number`` holding ``value`` (a string, bytes, or a serialized message), as protobuf writes it."""
    return header(number, len(value)) + value
