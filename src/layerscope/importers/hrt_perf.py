"""Horizon ``hrt_model_exec perf`` console summary: what the board measured for one model.

The tool (X3/X5 libdnn and S100 UCP builds alike) ends its run with this block (blank runs vary)::

    Running condition:
      Thread number is: 1
      Frame count   is: 200
      Program run time: 2861.473 ms
    Perf result:
      Frame totally latency is: 2849.081 ms
      Average    latency    is: 14.245 ms
      Frame      rate       is: 69.894 FPS

preceded by log lines, the tool's echo of its command line (``hrt_model_exec perf --model_file X ...``) and
progress lines (``Frame count: 200,  Thread Average: ...``), which are not part of the summary. Published
examples: ``tests/fixtures/hrt_perf/SOURCES.md`` (D-Robotics/rdk_model_zoo, rdk_model_zoo_s).

Each line is read with its blank runs collapsed and a leading ``-``/``*`` bullet dropped (READMEs quote the
block as a list), so the match is linear in the line's length. Exactly one ``Average latency is`` line is
required: its value, in ms, is the model's mean latency per frame (per thread when ``Thread number`` > 1).
Vendor text is data: it is only split, compared and converted with ``float``/``int``.

:func:`parse` gives it to ``layerscope import`` as format ``hrt-perf``: a run whose end-to-end latency is the
board's (no per-layer entries: the board measures the accelerator's subgraph whole); ``layerscope estimate MODEL
--json RUN`` then adds the estimate beside it, and ``layerscope reconcile`` of several such runs gives k per
model, its spread and the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from layerscope.fileio import read_text_limited
from layerscope.importers._common import US_PER_MS, fail
from layerscope.importers.types import ImportResult, TimeStats, Totals, make_info

TOOL = "hrt_model_exec"
FORMAT = "hrt-perf"

#: Larger files are refused before reading: a console log of one perf run is a few KB.
MAX_PERF_BYTES = 16 * 1024 * 1024

#: Most digits a thread or frame count may have (no run comes near; keeps ``int`` off huge strings).
_MAX_DIGITS = 12
#: Longest value text quoted back in an error message.
_MAX_QUOTE = 60

#: Summary line prefix (blank runs collapsed) -> field name.
_FIELDS = {
    "Thread number is:": "threads",
    "Frame count is:": "frames",
    "Average latency is:": "latency_ms",
    "Frame rate is:": "fps",
}
#: The unit each numeric field is printed with.
_UNITS = {"latency_ms": "ms", "fps": "FPS"}
_BULLETS = ("-", "*")
_MODEL_FLAG = "--model_file"


@dataclass(frozen=True)
class BoardPerf:
    """One `hrt_model_exec perf` summary: what the board measured for one model."""

    latency_ms: float          # "Average latency is: X ms"
    fps: float | None          # "Frame rate is: Y FPS"
    threads: int | None        # "Thread number is"
    frames: int | None         # "Frame count is"
    model_file: str | None     # the --model_file / model name if printed
    source: str                # the file path it was read from


def parse_board_perf(text: str, source: str) -> BoardPerf:
    """The summary in ``text`` (see the module docstring); ``source`` names the file in messages.

    ``InputError`` (one line: ``<source>: line N: what``) when the text holds NUL bytes (not a console log), has
    no ``Average latency is: X ms`` line, repeats a summary line (two runs in one file), or a value is not a
    finite number in its unit; the latency must be > 0, FPS >= 0, the thread count >= 1, the frame count a
    whole number >= 0.
    """
    nul = text.find("\x00")
    if nul >= 0:
        fail(source, f"line {text.count(chr(10), 0, nul) + 1}", "NUL byte: binary data, not the console output "
                                                                "of hrt_model_exec perf")
    found: dict[str, tuple[int, str]] = {}
    model_file: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split()
        if words and words[0] in _BULLETS:
            words = words[1:]
        if model_file is None and _MODEL_FLAG in line:
            model_file = _model_file(words)
        field, value = _summary_field(words)
        if field is None:
            continue
        if field in found:
            fail(source, f"line {number}", f"a second {_label(field)!r} line (the first is line {found[field][0]}): "
                                           "one hrt_model_exec perf summary per file")
        found[field] = (number, value)
    if "latency_ms" not in found:
        fail(source, "", "no 'Average latency is: <X> ms' line; is this the console output of hrt_model_exec perf?")
    latency = _number(found["latency_ms"], "latency_ms", source)
    if latency <= 0:
        fail(source, f"line {found['latency_ms'][0]}", f"average latency must be positive, got {latency:g} ms")
    threads = _whole(found.get("threads"), "threads", source)
    if threads is not None and threads < 1:
        fail(source, f"line {found['threads'][0]}", f"thread number must be at least 1, got {threads}")
    return BoardPerf(
        latency_ms=latency,
        fps=_number(found["fps"], "fps", source) if "fps" in found else None,
        threads=threads,
        frames=_whole(found.get("frames"), "frames", source),
        model_file=model_file,
        source=source,
    )


def parse(text: str, source: str) -> ImportResult:
    """The summary in ``text`` as an import: the board's mean latency per frame end to end, its frame rate, and
    what it ran (model file, threads, frames); no per-layer entries."""
    perf = parse_board_perf(text, source)
    totals = Totals(latency=TimeStats(mean_us=perf.latency_ms * US_PER_MS, samples=perf.frames), fps=perf.fps)
    info = make_info({"model_name": perf.model_file, "thread_num": perf.threads, "frame_count": perf.frames})
    return ImportResult(path=source, format=FORMAT, tool=TOOL, totals=totals, info=info)


def read_board_perf(path: Path) -> BoardPerf:
    """:func:`parse_board_perf` of the file at ``path`` (UTF-8, undecodable bytes replaced).

    ``InputError`` when the file is missing, not a regular file, unreadable, or larger than
    :data:`MAX_PERF_BYTES` (checked before reading, and again on the bytes read).
    """
    text = read_text_limited(path, MAX_PERF_BYTES,
                             what="(16 MiB) an hrt_model_exec perf console log may have; not read")
    return parse_board_perf(text, str(path))


def _summary_field(words: list[str]) -> tuple[str | None, str]:
    """(field, the text after the colon) when ``words`` are a summary line, else ``(None, "")``."""
    joined = " ".join(words)
    for prefix, field in _FIELDS.items():
        if joined.startswith(prefix):
            return field, joined[len(prefix):].strip()
    return None, ""


def _label(field: str) -> str:
    return next(prefix for prefix, name in _FIELDS.items() if name == field)


def _number(entry: tuple[int, str], field: str, source: str) -> float:
    """The finite, non-negative number of ``"<X> <unit>"``; ``InputError`` naming the line otherwise."""
    number, value = entry
    unit = _UNITS[field]
    head, _, tail = value.partition(" ")
    if tail.strip() != unit:
        fail(source, f"line {number}", f"expected '<number> {unit}' after {_label(field)!r}, got {_quote(value)}")
    try:
        parsed = float(head)
    except ValueError:
        fail(source, f"line {number}", f"expected a number of {unit} after {_label(field)!r}, got {_quote(value)}")
    if not math.isfinite(parsed) or parsed < 0:
        fail(source, f"line {number}", f"expected a finite number >= 0 of {unit}, got {_quote(value)}")
    return parsed


def _whole(entry: tuple[int, str] | None, field: str, source: str) -> int | None:
    """The whole number >= 0 of a count line; ``None`` when the line is absent."""
    if entry is None:
        return None
    number, value = entry
    if not value.isascii() or not value.isdigit() or len(value) > _MAX_DIGITS:
        fail(source, f"line {number}", f"expected a whole number after {_label(field)!r}, got {_quote(value)}")
    return int(value)


def _model_file(words: list[str]) -> str | None:
    """The value of ``--model_file X`` or ``--model_file=X`` among ``words``; ``None`` when absent or empty."""
    for index, word in enumerate(words):
        if word == _MODEL_FLAG and index + 1 < len(words):
            value = words[index + 1]
        elif word.startswith(_MODEL_FLAG + "="):
            value = word[len(_MODEL_FLAG) + 1:]
        else:
            continue
        value = value.strip("\"'")
        return value or None
    return None


def _quote(value: str) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_QUOTE else text[:_MAX_QUOTE - 3] + "..."
