"""Reading, checking, migrating and writing run files.

Contract:
- :func:`load_document` reads a file, migrates a version-1 document to version 2 and validates it against the
  typed models (:mod:`layerscope.runfile.models`, the source of the published schema); every failure is a
  ``RunFileError`` (exit 2) of one line naming the file and the JSON path of the first bad field, e.g.
  ``run.json: layers[3].measured.median_us: expected a number, got "abc"``; :func:`check_apart` checks a
  document the same, its layers a part at a time (a run too large to hold typed at once);
- :func:`upgrade` is the one migration: version 1 had no ``measurement.kind``; version 2 tags the measurement
  with it (inferred from ``measurement.source``). It never loses a key;
- :func:`dump_text` writes deterministic bytes (sorted keys, NaN refused) of the version-2 document;
  :func:`encode` gives the bytes of a file: that text in UTF-8, gzip-compressed (deterministically: no name, no
  time in the header) when the path ends in ``.gz``. Readers take either, whatever the name: a file that starts
  with gzip's magic bytes is decompressed (at most :data:`MAX_RUN_BYTES`) before it is parsed.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import stat
import struct
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from functools import cache
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from types import UnionType
from typing import Any, Final, Literal, NoReturn, Union, get_args, get_origin

from pydantic import TypeAdapter, ValidationError

from layerscope.collector import collector_paused
from layerscope.errors import RunFileError
from layerscope.fileio import Readable, read_limited
from layerscope.runfile.models import Layer, Rows, RunFile, RunLike, Section

SCHEMA_VERSION: Final = 2
#: Largest run file layerscope reads, decompressed (a gzip file that inflates past it is refused, not read): 16x the
#: run of a 100k-layer model (62 MB), and small enough that reading up to it fits a 4 GiB address space.
MAX_RUN_BYTES = 1 << 30
#: gzip level of ``.gz`` run files: a 100k-layer run (62 MB of JSON) compresses about 10x in under a second.
GZIP_LEVEL = 6
_GZIP_MAGIC = b"\x1f\x8b"
#: Run files are encoded (and compressed) this many characters at a time: a whole text, and one written as it is
#: made (:func:`encode_parts`).
_SLICE_CHARS = 1 << 22
_STREAM_SLICE_CHARS = 1 << 20
#: Versions :func:`upgrade` can read.
MIGRATABLE = (1, 2)


#: A version-1 measurement's kind by its recorded ``source`` (the command that wrote it); ``bench`` and
#: ``differential`` win over what the section's other fields say.
V1_KIND_BY_SOURCE: Mapping[str, str] = {"bench": "bench", "layerscope bisect": "differential",
                                        "layerscope profile": "kernel-profile", "layerscope pipeline": "kernel-profile"}
#: A version-1 measurement's kind by its recorded ``backend``, for a section that recorded no known ``source``:
#: version 1 wrote kernel profiles of ONNX Runtime without one. Any other backend is a vendor tool's import.
V1_KIND_BY_BACKEND: Mapping[str, str] = {"onnxruntime": "kernel-profile"}


def measurement_kind(measurement: Mapping[str, Any]) -> str:
    """The version-2 tag of a measurement section, from what version 1 told its shapes apart by: its ``source``
    (:data:`V1_KIND_BY_SOURCE`), a ``differential`` method, a ``vendor:`` source, then its ``backend``
    (:data:`V1_KIND_BY_BACKEND`)."""
    kind = measurement.get("kind")
    if isinstance(kind, str):
        return kind
    source = str(measurement.get("source") or "")
    by_source = V1_KIND_BY_SOURCE.get(source)
    if by_source in ("bench", "differential"):
        return by_source
    if measurement.get("method") == "differential":
        return "differential"
    if source.startswith("vendor:"):
        return "vendor-import"
    return by_source or V1_KIND_BY_BACKEND.get(str(measurement.get("backend")), "vendor-import")


#: The thresholds of the memory-stress verdict, as ``layerscope`` judged runs before the ``stress`` section stored
#: them (``min_share``: a layer's least share of the baseline layer total to be compared; ``off_cpu_drop``: the drop
#: in the cores this process kept busy that marks a round contended).
STRESS_THRESHOLDS_BEFORE_STORED = (0.005, 0.10)


def stress_thresholds(run: RunLike) -> tuple[float, float]:
    """``(min_share, off_cpu_drop)`` of the run's ``stress`` section: the values the measurement stored, else the
    ones runs were judged by before they were stored."""
    stress = as_run(run).stress
    default_share, default_drop = STRESS_THRESHOLDS_BEFORE_STORED
    if stress is None:
        return default_share, default_drop
    return (float(stress.min_share) if stress.min_share is not None else default_share,
            float(stress.off_cpu_drop) if stress.off_cpu_drop is not None else default_drop)


def upgrade(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` (version 1 or 2) as version 2; the input is not changed."""
    run = dict(document)
    measurement = run.get("measurement")
    if isinstance(measurement, Mapping) and "kind" not in measurement:
        run["measurement"] = {**measurement, "kind": measurement_kind(measurement)}
    run["schema_version"] = SCHEMA_VERSION
    return run


def _where(loc: tuple[int | str, ...], tags: frozenset[str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in tags:  # the tag pydantic puts in the path of a tagged union's member
            continue
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


_EXPECTED = {
    "float_type": "expected a number", "int_type": "expected an integer", "string_type": "expected a string",
    "bool_type": "expected true or false", "list_type": "expected a list", "model_type": "expected an object",
    "dict_type": "expected an object", "missing": "missing", "finite_number": "expected a finite number",
    "int_from_float": "expected an integer", "model_attributes_type": "expected an object",
}


def _got(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(error: ValidationError) -> str:
    """The first error of ``error`` as ``path: what was expected, got what`` (and how many more)."""
    errors = error.errors(include_url=False)
    first = errors[0]
    where = _where(tuple(first["loc"]), frozenset(("kernel-profile", "bench", "differential", "vendor-import")))
    kind = first["type"]
    what = _EXPECTED.get(kind) or str(first["msg"]).removeprefix("Value error, ")
    if kind == "value_error":  # a model's own check: its message names the field and the value
        text = f"{where}.{what}" if re.match(r"^\w+: ", what) else f"{where}: {what}"
    elif kind == "missing":
        text = f"{where}: {what}"
    else:
        text = f"{where}: {what}, got {_got(first.get('input'))}"
    return text + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


def check(document: Mapping[str, Any], source: str | os.PathLike[str] = "run") -> RunFile:
    """The typed run of a version-2 ``document``; ``RunFileError`` naming ``source`` and the bad field."""
    try:
        with collector_paused():  # a typed object per layer, kernel, span: none of them garbage
            return RunFile.from_json(dict(document))
    except ValidationError as exc:
        raise RunFileError(f"{source}: {describe(exc)}", hint="see `layerscope schema`") from None


#: Layers :func:`check_apart` types at a time.
CHECK_CHUNK = 4096


def check_apart(document: Mapping[str, Any], source: str | os.PathLike[str] = "run"
                ) -> tuple[RunFile, Iterator[list[Layer]]]:
    """:func:`check` of a version-2 ``document`` made a part at a time, for a run too large to hold typed at once (a
    100k-layer run's typed layers take ~500 MB): the run typed without its layers (``layers`` empty), and its layers
    typed :data:`CHECK_CHUNK` at a time, in order, as the iterator is read. A document is accepted exactly when
    :func:`check` accepts it (no check spans parts), and its values are typed as :func:`check` types them; on the
    first part refused, the ``RunFileError`` is :func:`check`'s of the whole document (the first bad field in its
    order, and how many more)."""
    layers = document["layers"]
    try:
        with collector_paused():
            run = RunFile.from_json({**document, "layers": []})
    except ValidationError as exc:
        _refuse(document, source, exc)
    return run, _checked_layers(document, layers, source)


def _checked_layers(document: Mapping[str, Any], layers: Any, source: str | os.PathLike[str]
                    ) -> Iterator[list[Layer]]:
    """The layers of ``document`` typed :data:`CHECK_CHUNK` at a time (see :func:`check_apart`)."""
    adapter = _layers_adapter()
    parts = ((layers[start:start + CHECK_CHUNK] for start in range(0, len(layers), CHECK_CHUNK))
             if type(layers) is list else iter((layers,)))  # not a list: refused as a whole
    for part in parts:
        try:
            with collector_paused():
                typed = adapter.validate_python(part, strict=True, by_alias=True)
        except ValidationError as exc:
            _refuse(document, source, exc)
        yield typed


def _refuse(document: Mapping[str, Any], source: str | os.PathLike[str], error: ValidationError) -> NoReturn:
    """Raise :func:`check`'s ``RunFileError`` of ``document``, of which a part failed with ``error``."""
    check(document, source)
    # not reached: the parts' checks are the whole's
    raise RunFileError(f"{source}: {describe(error)}", hint="see `layerscope schema`")


def layers_of(layers: Sequence[Any]) -> list[Layer]:
    """``layers`` (layer documents of a run that :func:`check` accepts) typed as :func:`check` types them."""
    with collector_paused():
        return _layers_adapter().validate_python(list(layers), strict=True, by_alias=True)


@cache
def _layers_adapter() -> TypeAdapter[list[Layer]]:
    """The validator and serializer of a run's ``layers``, built on first use."""
    return TypeAdapter(list[Layer])


def as_run(run: RunLike, source: str | os.PathLike[str] = "run") -> RunFile:
    """``run`` typed: a :class:`RunFile` as it is; a document (version 1 or 2) migrated and checked
    (``RunFileError`` naming ``source`` and the bad field). Readers take either, so a command can pass the
    document it loaded and keeps it to write back."""
    if isinstance(run, RunFile):
        return run
    return check(upgrade(run), source)


def read_document(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The file's JSON object, migrated to version 2 (not yet validated)."""
    return parse_document(read_run_text(path), path)


def read_run_text(path: str | os.PathLike[str]) -> str:
    """The text of the run file at ``path`` (decompressed when it is gzip); ``RunFileError`` when it cannot be
    read."""
    source = Path(path)
    try:
        return _read_text(source)
    except FileNotFoundError:
        raise RunFileError(f"{source}: no such run file") from None
    except (OSError, EOFError, zlib.error, ValueError) as exc:  # ValueError: not UTF-8, or inflating too far
        raise RunFileError(f"{source}: not a layerscope run file ({exc})") from None


def parse_document(text: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object of the run file text ``text`` (read from ``path``, which errors name), migrated to version 2
    (not yet validated); ``RunFileError`` when it is not a run file of a schema this version reads, or holds a
    number that is not finite."""
    source = Path(path)
    try:
        finite = _Finite()
        with collector_paused():  # a dict and list per layer, span, kernel: no cycle among them
            data = json.loads(text, parse_float=finite.number, parse_constant=finite.constant)
    except RecursionError as exc:
        raise RunFileError(f"{source}: not a layerscope run file ({exc})") from None
    except ValueError as exc:  # not JSON, or e.g. an integer literal too long to convert
        raise RunFileError(f"{source}: not a layerscope run file ({exc})") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise RunFileError(f"{source}: not a layerscope run file (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunFileError(f"{source}: schema_version: expected an integer, got {_got(version)}")
    if version not in MIGRATABLE:
        newer = version > SCHEMA_VERSION
        raise RunFileError(
            f"{source}: run file schema {version} is {'newer' if newer else 'older'} than this layerscope's "
            f"({SCHEMA_VERSION})", hint="upgrade layerscope" if newer else "re-create the run with this version")
    for key in ("model", "layers", "summary"):
        if key not in data:
            raise RunFileError(f"{source}: run file has no {key!r} section")
    bad = _non_finite(data) if finite.seen else None  # the file's path to it found only when there is one
    if bad is not None:
        where, value = bad
        raise RunFileError(f"{source}: {where}: expected a finite number, got {value}",
                           hint="JSON has no NaN or Infinity; layerscope never writes them")
    return upgrade(data)


def _read_text(source: Path) -> str:
    """The file's text: its bytes, decompressed first when they start with gzip's magic bytes. Only a regular file
    is opened (a FIFO would block, a device never end); at most :data:`MAX_RUN_BYTES` are read either way, a piece
    at a time (nothing sized by the limit is reserved up front: a small file reads in little memory)."""
    info = source.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file")
    with source.open("rb") as handle:
        if handle.read(2) != _GZIP_MAGIC:
            if info.st_size > MAX_RUN_BYTES:
                raise ValueError(f"over {MAX_RUN_BYTES:,} bytes")
            handle.seek(0)
            return _read_limited(handle, "").decode("utf-8")
        handle.seek(0)
        with gzip.GzipFile(fileobj=handle) as unzipped:
            return _read_limited(unzipped, " once decompressed").decode("utf-8")


def _read_limited(stream: Readable, when: str) -> bytes:
    """All of ``stream`` (:func:`layerscope.fileio.read_limited`); ``ValueError`` as soon as it passes
    :data:`MAX_RUN_BYTES` (``when`` says after what, e.g. decompression)."""
    data = read_limited(stream, MAX_RUN_BYTES)
    if data is None:
        raise ValueError(f"over {MAX_RUN_BYTES:,} bytes{when}")
    return data


class _Finite:
    """Parse hooks of ``json.loads`` that give the values its defaults give and note whether any number is not
    finite (``NaN``, ``Infinity``, or a literal out of a float's range such as ``1e999``): a file without one, nearly
    every file, is not walked again by :func:`_non_finite` (a tenth of a second for a 700-layer run)."""

    def __init__(self) -> None:
        self.seen = False

    def number(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            self.seen = True
        return value

    def constant(self, name: str) -> float:  # only NaN, Infinity and -Infinity reach it
        self.seen = True
        return float(name)


def _non_finite(node: Any, where: str = "") -> tuple[str, str] | None:
    """The JSON path and text of the first NaN or infinite number anywhere in ``node`` (also in the parts the
    models leave permissive), else ``None``."""
    stack: list[tuple[Any, str]] = [(node, where)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "(top level)", _got(value)
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(value))))
    return None


def load_document(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The run file at ``path`` as a checked version-2 JSON document (a plain dict the caller may change)."""
    document = read_document(path)
    check(document, path)
    return document


def load(path: str | os.PathLike[str]) -> RunFile:
    """The run file at ``path``, typed."""
    return check(read_document(path), path)


def dump_text(document: Mapping[str, Any]) -> str:
    """Deterministic text of ``document`` (sorted keys, NaN refused); a run (a document with a ``schema_version``)
    is written as version 2 in the layout of :func:`_run_text` (a section per line group, one layer per line).
    Other JSON records written through ``save_run`` (the bisect cache) are written as they are, one-space indent."""
    if "schema_version" in document:
        return _run_text(upgrade(document)) + "\n"
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def run_text(run: RunFile) -> str:
    """:func:`dump_text` of ``run.to_json()``, the same bytes, without the whole document as Python objects
    first: the text of :func:`run_parts` joined."""
    return "".join(run_parts(run))


def run_parts(run: RunFile, as_read: Mapping[str, Any] | None = None) -> Iterator[str]:
    """:func:`run_text` in parts, made as they are read: the sections other than ``layers`` are dumped together,
    each layer on its own and straight to its line when its turn comes (a 100k-layer run never holds 100k layer
    dicts, nor its 60 MB of text, at once: :func:`encode_parts` writes it a slice at a time). ``as_read``: top-level
    sections of the run, by their key in the file, written as these documents in place of the run's dump of them
    (sections carried unchanged from a file: written as they were read)."""
    carried = as_read or {}
    document = _sections(run, carried.keys())
    document.update(carried)
    if "layers" in run.model_fields_set and "layers" not in carried:
        document["layers"] = _Layers(run.layers)
    yield from _run_parts(upgrade(document))
    yield "\n"


def _sections(run: RunFile, skipped: Collection[str] = ()) -> dict[str, Any]:
    """``run.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"layers"})`` but for the keys
    ``skipped``: each section dumped by its own class when it is of the one class its field names (lists of sections
    item by item, text and numbers as they are), so that only the serializers of the sections a run holds are built
    (the models build theirs on first use); the run's own dump for anything else (a union's member, unknown keys)."""
    fields = RunFile.model_fields
    names = {name for name in run.model_fields_set if section_key(name) in skipped or name == "layers"}
    document: dict[str, Any] = {}
    for name in run.model_fields_set - names:
        info = fields.get(name)
        value = run.__dict__.get(name, _MISSING) if info is not None else _MISSING
        dumped = _dumped(value, info.annotation if info is not None else None)
        if dumped is _MISSING:
            return run.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude=names)
        document[section_key(name)] = dumped
    return document


def section_key(name: str) -> str:
    """The key in the file of the :class:`RunFile` field (or unknown key) ``name``."""
    info = RunFile.model_fields.get(name)
    return (info.alias or name) if info is not None else name


def _dumped(value: Any, annotation: Any) -> Any:
    """``value`` of a field of type ``annotation`` as its JSON-mode dump, or :data:`_MISSING` when
    :func:`_sections` leaves it to the run's own dump."""
    if value is None or value is _MISSING:
        return value
    kinds = [a for a in (get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,))
             if a is not type(None)]
    if len(kinds) != 1:
        return _MISSING
    kind = kinds[0]
    if isinstance(value, Section):
        if type(value) is not kind:
            return _MISSING
        document = _document(value)
        return document if document is not None else value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if type(value) is list and get_origin(kind) is list:
        (item,) = get_args(kind)
        if isinstance(item, type) and issubclass(item, Section):
            if not all(type(v) is item for v in value):
                return _MISSING
            # each item's values as they are (_document) where its dump is those, as for one section; a document
            # holding rows (_Object) is left to the item's own dump: a list's items are written on one line each
            documents = [_document(v) for v in value]
            return [d if type(d) is dict else v.model_dump(mode="json", by_alias=True, exclude_unset=True)
                    for d, v in zip(documents, value, strict=True)]
        return list(value) if item is str and all(type(v) is str for v in value) else _MISSING
    if type(value) is int and get_origin(kind) is Literal and value in get_args(kind):
        return value
    return _MISSING


_MISSING: Any = object()


class _Layers:
    """A run's typed layers, each dumped to its line by :func:`_run_parts` when written."""

    __slots__ = ("layers",)

    def __init__(self, layers: Sequence[Layer]) -> None:
        self.layers = layers


class _Rows:
    """A list of sections inside a section (a timeline's 100k spans), written as :func:`_section_chunks` gives them,
    in one line, when written."""

    __slots__ = ("rows",)

    def __init__(self, rows: Sequence[Section]) -> None:
        self.rows = rows


class _Object(dict[str, Any]):
    """A section's dump that holds :class:`_Rows` (somewhere in it): written by :func:`_line_parts`."""


def _document(section: Section) -> dict[str, Any] | None:
    """``section.model_dump(mode="json", by_alias=True, exclude_unset=True)``, with each list of sections it holds
    (at any depth) left as :class:`_Rows` to be written a row at a time (an :class:`_Object` then holds it); ``None``
    when its dump is not its values as they are (a class with aliases or serializers, unknown keys, a value other
    than JSON's own types, a number not finite): the caller dumps it itself."""
    if _plain_of(type(section)) is False or section.__pydantic_extra__:
        return None
    state = section.__dict__
    document: dict[str, Any] = {}
    rows = False
    for name in section.__pydantic_fields_set__:
        value = state[name]
        if type(value) is Rows and not (value and _written_from_columns(value.section)):
            value = value.made() if value else []  # written as the list of its sections
        if isinstance(value, Section):
            value = _document(value)
            if value is None:
                return None
            rows = rows or type(value) is _Object
        elif type(value) is Rows:  # written from its columns (_section_chunks)
            value = _Rows(value)
            rows = True
        elif type(value) is list and value and all(isinstance(v, Section) for v in value):
            if all(_leaf_class(type(v)) for v in value):
                value = _Rows(value)
            else:  # sections that hold lists of sections: each its own document
                documents = [_document(v) for v in value]
                if any(d is None for d in documents):
                    return None
                value = documents
            rows = True
        elif not _plain_json(value):
            return None
        document[name] = value
    return _Object(document) if rows else document


def _written_from_columns(cls: type[Section]) -> bool:
    """Whether the :class:`Rows` of ``cls`` are written from their columns (:func:`_column_chunks`): its dump is its
    values as they are, and it names no list of sections."""
    return _plain_of(cls) is not False and _leaf_class(cls)


def _leaf_class(cls: type[Section]) -> bool:
    """Whether ``cls``'s fields name no list of sections (its sections are written by :func:`_section_chunks`)."""
    leaf = _LEAF.get(cls)
    if leaf is None:
        leaf = _LEAF[cls] = not any(
            get_origin(kind) is list and _sections_named(get_args(kind)[0])
            for info in cls.model_fields.values()
            for kind in (get_args(info.annotation) if get_origin(info.annotation) in (Union, UnionType)
                         else (info.annotation,)))
    return leaf


_LEAF: dict[type[Section], bool] = {}


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of JSON's own types only (text, integers, finite floats, booleans, ``None``, lists,
    objects with text keys), which a section's JSON dump gives as they are."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind in (str, int, bool) or value is None:
        return True
    if kind is list:
        return all(map(_plain_json, value))
    if kind is dict:
        return all(type(key) is str for key in value) and all(map(_plain_json, value.values()))
    return False


def encode(text: str, path: str | os.PathLike[str]) -> str | bytes:
    """What a run file at ``path`` holding ``text`` contains: the text itself (written as UTF-8), or, when the
    name ends in ``.gz``, its gzip bytes (deterministic: no name, time 0), compressed a slice at a time
    (:func:`encode_parts`)."""
    if not str(path).endswith(".gz"):
        return text
    return b"".join(encode_parts((text,), path, _SLICE_CHARS))


def encode_parts(parts: Iterable[str], path: str | os.PathLike[str],
                 slice_chars: int = _STREAM_SLICE_CHARS) -> Iterator[bytes]:
    """The bytes of :func:`encode` of ``"".join(parts)``, made as ``parts`` are read, ``slice_chars`` characters at
    a time (deflate's output does not depend on how its input is split: the same bytes, gzip's included)."""
    text = _slices(parts, slice_chars)
    if not str(path).endswith(".gz"):
        for chunk in text:
            yield chunk.encode("utf-8")
        return
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw deflate: the header is ours
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no flags, mtime 0, OS unknown
    crc = size = 0
    for part in text:
        data = part.encode("utf-8")
        crc, size = zlib.crc32(data, crc), size + len(data)
        yield deflate.compress(data)
    yield deflate.flush() + struct.pack("<II", crc, size & 0xFFFFFFFF)


def _slices(parts: Iterable[str], chars: int) -> Iterator[str]:
    """The text of ``parts`` in slices of ``chars`` characters (the last one shorter)."""
    held: list[str] = []
    count = 0
    for part in parts:
        held.append(part)
        count += len(part)
        if count >= chars:
            text = "".join(held)
            cut = len(text) - len(text) % chars
            for start in range(0, cut, chars):
                yield text[start:start + chars]
            held, count = [text[cut:]], len(text) - cut
    text = "".join(held)
    if text:
        yield text


def _run_parts(value: Any, level: int = 0) -> Iterator[str]:
    """:func:`_run_text` of ``value`` in parts: a chunk of layers at a time for the run's layers."""
    if isinstance(value, _Layers):
        if not value.layers:
            yield "[]"
            return
        pad = " " * (level + 1)
        joint = ",\n" + pad
        opening = "[\n" + pad
        for lines in _section_chunks(value.layers):
            yield opening + joint.join(lines)
            opening = joint
        yield "\n" + " " * level + "]"
    elif level < 2 and isinstance(value, Mapping) and value:
        pad = " " * (level + 1)
        yield "{\n"
        for k, key in enumerate(sorted(value)):
            yield f"{',' + chr(10) if k else ''}{pad}{json.dumps(str(key), ensure_ascii=False)}: "
            yield from _run_parts(value[key], level + 1)
        yield "\n" + " " * level + "}"
    elif level >= 2:
        yield from _line_parts(value)
    else:
        yield _run_text(value, level)


def _line_parts(value: Any) -> Iterator[str]:
    """``_LINE.encode(value)`` in parts, for a value of a section's dump that may hold :class:`_Rows` (each row's
    text from :func:`_section_chunks`) in :class:`_Object` s."""
    if type(value) is _Rows:
        opening = "["
        for lines in _section_chunks(value.rows):
            yield opening + ",".join(lines)
            opening = ","
        yield "]" if value.rows else "[]"
    elif type(value) is _Object:
        for k, key in enumerate(sorted(value)):
            yield ("," if k else "{") + json.encoder.encode_basestring(key) + ":"
            yield from _line_parts(value[key])
        yield "}" if value else "{}"
    elif type(value) is list and any(type(v) in (_Object, _Rows) for v in value):
        for k, item in enumerate(value):
            yield "," if k else "["
            yield from _line_parts(item)
        yield "]"
    else:
        yield _LINE.encode(value)


def _run_text(value: Any, level: int = 0) -> str:
    """JSON of a run: the top-level object and its sections expanded (one-space indent), everything deeper on one
    line (so each layer, kernel, timeline span ... is one line). Python's C encoder does the deep part; the
    pure-Python encoder that ``indent`` selects took 80 % of ``estimate --json`` on a 10k-layer model."""
    if level < 2 and isinstance(value, Mapping) and value:
        pad = " " * (level + 1)
        items = (f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {_run_text(value[k], level + 1)}"
                 for k in sorted(value))
        return "{\n" + ",\n".join(items) + "\n" + " " * level + "}"
    if level < 2 and isinstance(value, list | tuple) and value:
        pad = " " * (level + 1)
        return "[\n" + ",\n".join(f"{pad}{_run_text(v, level + 1)}" for v in value) + "\n" + " " * level + "]"
    return _LINE.encode(value)


#: The encoder of :func:`_run_text`'s one-line parts, built once (``json.dumps`` with these options builds one per
#: call: 100k layers, 100k encoders).
_LINE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


#: Sections of one shape are encoded this many at a time by :func:`_section_chunks` (columns of that many values).
_CHUNK = 2048


def _section_chunks(sections: Sequence[Section]) -> Iterator[list[str]]:
    """``_LINE.encode(section.model_dump(mode="json", by_alias=True, exclude_unset=True))`` of each section, in
    order, a list of lines at a time: up to :data:`_CHUNK` consecutive sections of one shape (:func:`_common_shape`:
    a trusted run's layers are all of one) are encoded column by column through one ``%`` template of their keys
    in order; sections of mixed shapes are split in halves until they are of one, and a section of no shape, or a
    chunk holding a value the columns do not take, is written by its own dump. :class:`Rows` are written from their
    columns (:func:`_column_chunks`)."""
    if type(sections) is Rows:
        yield from _column_chunks(sections)
        return
    for start in range(0, len(sections), _CHUNK):
        yield from _uniform_chunks(sections[start:start + _CHUNK])


def _column_chunks(rows: Rows[Section]) -> Iterator[list[str]]:
    """:func:`_section_chunks` of the sections of ``rows`` (of a plain class, :func:`_written_from_columns`), written
    from its columns: up to :data:`_CHUNK` rows at a time through one ``%`` template of the names in order, each
    column as :func:`_column` writes it, a column of sections held as :class:`Rows` as its own object in the
    template; a chunk holding a value the columns do not take is written by its sections."""
    for start in range(0, len(rows), _CHUNK):
        stop = min(start + _CHUNK, len(rows))
        template: list[str] = []
        columns: list[Sequence[Any]] = []
        try:
            _fill_columns(rows, start, stop, template, columns)
        except (TypeError, ValueError):
            yield from _section_chunks(rows[start:stop])  # a list: written by its sections
            continue
        yield _filled(template, columns, stop - start)


def _fill_columns(rows: Rows[Section], start: int, stop: int, template: list[str],
                  columns: list[Sequence[Any]]) -> None:
    """Add the template of rows ``start:stop`` of ``rows`` and their value columns (``TypeError``: a column of
    sections that is not a :class:`Rows` written from its columns)."""
    if not _written_from_columns(rows.section):
        raise TypeError(f"{rows.section.__name__}: not written from columns")
    template.append("{")
    for n, k in enumerate(sorted(range(len(rows.names)), key=rows.names.__getitem__)):
        template.append(_template_key(rows.names[k], first=not n))
        column = rows.columns[k]
        if type(column) is Rows:
            _fill_columns(column, start, stop, template, columns)
        else:
            _add_column(column[start:stop], template, columns)
    template.append("}")


def _uniform_chunks(sections: Sequence[Section]) -> Iterator[list[str]]:
    """:func:`_section_chunks` of at most :data:`_CHUNK` ``sections``: one list when they are of one shape."""
    shape = _common_shape(sections)
    lines = _chunk_lines(sections, shape) if shape is not None else None
    if lines is not None:
        yield lines
    elif shape is None and len(sections) > 1:
        half = len(sections) // 2
        yield from _uniform_chunks(sections[:half])
        yield from _uniform_chunks(sections[half:])
    else:
        yield [_LINE.encode(s.model_dump(mode="json", by_alias=True, exclude_unset=True)) for s in sections]


#: A section's shape (:func:`_common_shape`): its class, the identity of its set of fields, and the shapes of the
#: sections it holds, by field name.
_Shape = tuple[Any, ...]

_STATE = attrgetter("__dict__")
_FIELDS_SET = attrgetter("__pydantic_fields_set__")
_EXTRA = attrgetter("__pydantic_extra__")


def _common_shape(sections: Sequence[Section]) -> _Shape | None:
    """The shape every one of ``sections`` (not empty) has: what decides a section's keys and how its dump is made,
    i.e. its class, its set of fields (by identity: trusted sections of the same field names share one) and the
    shapes of the sections it holds; tested a field at a time over all of them. ``None`` when two differ or one has
    none: the fast path does not take it (unknown keys, aliases, serializers or values not a section's field's own)."""
    cls = type(sections[0])
    plain = _plain_of(cls)
    if plain is False or _types(sections) != {cls} or any(map(_EXTRA, sections)):
        return None
    names = sections[0].__pydantic_fields_set__
    if len(set(map(id, map(_FIELDS_SET, sections)))) != 1:
        return None
    states = list(map(_STATE, sections))
    inner: list[Any] = [cls, id(names)]
    for name, classes in plain:
        if name in names:
            values = list(map(itemgetter(name), states))
            kinds = _types(values)
            if len(kinds) != 1:
                return None  # some None, some a section: shapes that differ
            (kind,) = kinds
            if kind in classes:
                nested = _common_shape(values)
                if nested is None:
                    return None
                inner.append((name, nested))
            elif kind is type(None):
                inner.append((name, None))
            else:
                return None  # a section's field that holds something else: its own dump
    return tuple(inner)


def _types(values: Iterable[Any]) -> set[type]:
    """The exact types of ``values``."""
    return set(map(type, values))


def _plain_class(cls: type[Section]) -> tuple[tuple[str, tuple[type, ...]], ...] | Literal[False]:
    """``cls``'s fields that may hold a section, each with the section classes it names, or ``False`` when its
    dump is not its values as they are (a field with an alias)."""
    if any(info.alias for info in cls.model_fields.values()):
        return False
    fields = ((name, _sections_named(info.annotation)) for name, info in cls.model_fields.items())
    return tuple((name, kinds) for name, kinds in fields if kinds)


def _sections_named(annotation: Any) -> tuple[type, ...]:
    """The section classes a field's annotation names (a member of a union)."""
    kinds = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return tuple(kind for kind in kinds if isinstance(kind, type) and issubclass(kind, Section))


_PLAIN: dict[type[Section], tuple[tuple[str, tuple[type, ...]], ...] | Literal[False]] = {}


def _plain_of(cls: type[Section]) -> tuple[tuple[str, tuple[type, ...]], ...] | Literal[False]:
    """:func:`_plain_class` of ``cls``, read once."""
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = _plain_class(cls)
    return plain


def _chunk_lines(sections: Sequence[Section], shape: _Shape) -> list[str] | None:
    """The lines of ``sections`` (all of ``shape``): one ``%`` template of the keys in order, filled from columns
    of values (:func:`_column`); ``None`` when a value is not one the columns encode as the section's dump would
    (then the sections are dumped one by one)."""
    template: list[str] = []
    columns: list[Sequence[Any]] = []
    try:
        _fill(list(map(_STATE, sections)), sections[0].__pydantic_fields_set__, shape, template, columns)
    except (TypeError, ValueError):
        return None
    return _filled(template, columns, len(sections))


def _fill(states: list[dict[str, Any]], names: set[str], shape: _Shape, template: list[str],
          columns: list[Sequence[Any]]) -> None:
    """Add the template of the object of sections of ``shape`` (their ``__dict__`` ``states``, their fields set
    ``names``) and its value columns."""
    nested = dict(shape[2:])
    template.append("{")
    keys = sorted(names)
    for k, (name, values) in enumerate(zip(keys, _field_columns(states, keys), strict=True)):
        template.append(_template_key(name, first=not k))
        if nested.get(name) is not None:
            _fill(list(map(_STATE, values)), values[0].__pydantic_fields_set__, nested[name], template, columns)
        else:
            _add_column(values, template, columns)
    template.append("}")


def _template_key(name: str, *, first: bool) -> str:
    """The key ``name`` in a ``%`` template of an object (its comma before it, but for the first key)."""
    return f"{'' if first else ','}{json.encoder.encode_basestring(name).replace('%', '%%')}:"


def _add_column(values: Sequence[Any], template: list[str], columns: list[Sequence[Any]]) -> None:
    """Add the field of ``values`` (:func:`_column`) to ``template``, and its column to ``columns`` when it has one."""
    field, column = _column(values)
    template.append(field)
    if column is not None:
        columns.append(column)


def _filled(template: list[str], columns: list[Sequence[Any]], count: int) -> list[str]:
    """The ``count`` lines of ``template`` filled from ``columns`` (one text ``count`` times when it has none)."""
    text = "".join(template)
    return list(map(text.__mod__, zip(*columns, strict=True))) if columns else [text] * count


def _field_columns(states: list[dict[str, Any]], keys: list[str]) -> list[tuple[Any, ...]]:
    """The values of each of ``keys`` in ``states``, a tuple per key."""
    if len(keys) == 1:
        return [tuple(map(itemgetter(keys[0]), states))]
    return list(zip(*map(itemgetter(*keys), states), strict=True)) if keys else []


def _column(values: Sequence[Any]) -> tuple[str, Sequence[Any] | None]:
    """``values`` as ``_LINE`` encodes them: the ``%`` template of the field and the column it is filled from, or
    the field's text itself (column ``None``) when every value is written as one text (:func:`_one_text`).
    Values of one type: integers by ``%d``, finite floats by ``%r`` (``float.__repr__``, as ``_LINE``; a
    non-finite one: ``ValueError``), text that needs no escaping by ``"%s"``, lists of such text
    (:func:`_list_texts`); anything else encoded a value at a time (:func:`_encoded`)."""
    kinds = _types(values)
    if kinds == _FLOAT_OR_NONE:  # a time that some rows lack (a timeline's bursts)
        _check_finite(v for v in values if v is not None)
        return "%s", ["null" if v is None else _FLOAT_TEXT(v) for v in values]
    if len(kinds) != 1:
        return "%s", _encoded(values)
    (kind,) = kinds
    if kind is float:
        _check_finite(values)
    if _one_text(kind, values):
        return _encoded(values[:1])[0].replace("%", "%%"), None
    if kind is int:
        return "%d", values
    if kind is float:
        return "%r", values
    if kind is str and not _needs_escape(values):
        return '"%s"', values
    if kind is list:
        texts = _list_texts(values)
        return "%s", texts if texts is not None else _encoded_alike(values)
    return "%s", _encoded(values)


def _check_finite(floats: Iterable[float]) -> None:
    """``ValueError``, as ``_LINE`` raises it, when one of ``floats`` is not finite."""
    if not all(map(math.isfinite, floats)):
        raise ValueError("Out of range float values are not JSON compliant")


def _one_text(kind: type, values: Sequence[Any]) -> bool:
    """Whether ``values`` (all of type ``kind``) are all written as one text: equal ``None``, text, integers,
    booleans, or finite floats other than zero (``0.0 == -0.0``, written apart)."""
    first = values[0]
    if kind is float and first == 0.0:
        return False
    return kind in _ONE_TEXT_KINDS and values.count(first) == len(values)


_FLOAT_OR_NONE = frozenset((float, type(None)))
#: How ``_LINE`` writes a finite float.
_FLOAT_TEXT = float.__repr__

#: The types whose equal values ``_LINE`` writes as one text (floats but zero: :func:`_one_text`).
_ONE_TEXT_KINDS = frozenset((type(None), str, int, bool, float))

#: The one character class ``_LINE`` escapes in text (``ensure_ascii=False``): the quote, the backslash and the
#: control characters; any other character is written as it is.
_ESCAPED = json.encoder.ESCAPE


def _needs_escape(texts: Iterable[str]) -> bool:
    """Whether any of ``texts`` holds a character ``_LINE`` escapes (``texts`` not written as they are)."""
    return _ESCAPED.search("".join(texts)) is not None


def _list_texts(lists: Sequence[list[Any]]) -> list[str] | None:
    """``lists`` as ``_LINE`` encodes them (each: ``["a","b"]``) when every item is text that :func:`_needs_escape`
    leaves as it is, else ``None``. (A ``str`` subclass is written as its text by ``str.join`` as by ``_LINE``.)"""
    try:
        if _needs_escape(chain.from_iterable(lists)):
            return None
    except TypeError:  # an item that is not text
        return None
    texts = list(map(_TEXT_LIST.__mod__, map(_TEXT_JOINT.join, lists)))
    return texts if all(lists) else [text if items else "[]" for text, items in zip(texts, lists, strict=True)]


_TEXT_LIST = '["%s"]'
_TEXT_JOINT = '","'


def _encoded(values: Sequence[Any]) -> list[str]:
    """Each of ``values`` as ``_LINE`` encodes it."""
    return list(map(_LINE.encode, values))


def _encoded_alike(values: Sequence[Any]) -> list[str]:
    """:func:`_encoded` of ``values`` (lists: a layer's output shapes), each distinct ``repr`` encoded once: values of
    equal ``repr`` (of the types ``_LINE`` encodes: ``1``, ``1.0`` and ``True`` apart, text quoted) are encoded
    alike, and 100k layers' shapes are of a few kinds (``benchmarks/README.md``, ``scale.py``: 0.14 s at 100k)."""
    texts: dict[str, str] = {}
    out: list[str] = []
    for value in values:
        key = repr(value)
        text = texts.get(key)
        if text is None:
            text = texts[key] = _LINE.encode(value)
        out.append(text)
    return out
