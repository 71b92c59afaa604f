"""Sample models that ship with layerscope: architecture-faithful ONNX graphs with random weights.

Each builder in :data:`SAMPLES` returns an :class:`onnx.ModelProto` (opset 17) laid out the way
the real exporter lays that architecture out, with the real channel widths, so node counts,
parameter counts and MACs match the published figures given in each builder's docstring. Weights
are seeded random numbers: the models run, but predict nothing.

:func:`sample_path` writes a sample to the cache folder once and returns its path; the file name
carries every builder parameter (defaults included) and :data:`SAMPLES_VERSION`, so a changed
builder or parameter never reuses a stale file. ``python -m layerscope.samples [NAME] [key=value
...]`` prints that path (default :data:`DEFAULT_SAMPLE`).
"""

from __future__ import annotations

import inspect
import os
import re
import typing
from collections.abc import Callable
from pathlib import Path

import onnx

from layerscope.fileio import write_atomic
from layerscope.samples import attention, cnn, efficientformer_v2, fcos, mobile
from layerscope.samples import yolo as _yolo
from layerscope.samples.ocr import crnn, dbnet
from layerscope.samples.transformer import bert_tiny, vit_tiny
from layerscope.samples.yolo import yolov5, yolov5s, yolov5s_deep, yolov8, yolov8s

__all__ = [
    "BENCHMARK_SAMPLE",
    "BOARD_SAMPLES",
    "DEFAULT_SAMPLE",
    "SAMPLES",
    "SAMPLES_VERSION",
    "bert_tiny",
    "crnn",
    "dbnet",
    "default_cache_dir",
    "parse_params",
    "parse_spec",
    "parse_value",
    "resolve_params",
    "sample_file_name",
    "sample_path",
    "vit_tiny",
    "yolov5",
    "yolov5s",
    "yolov5s_deep",
    "yolov8",
    "yolov8s",
]

#: Bump when any builder's output changes, so cached files from older builders are not reused.
SAMPLES_VERSION = 1

#: Name -> builder. Every builder takes keyword parameters with defaults and returns a model.
SAMPLES: dict[str, Callable[..., onnx.ModelProto]] = {
    "yolov5s": yolov5s,
    "yolov5s_deep": yolov5s_deep,
    "yolov5": yolov5,
    "yolov8s": yolov8s,
    "yolov8": yolov8,
    "crnn": crnn,
    "dbnet": dbnet,
    "bert_tiny": bert_tiny,
    "vit_tiny": vit_tiny,
}

#: The architectures behind the board model zoos' published latencies (``benchmarks/data/board_latency.csv``):
#: name -> builder, each taking a ``variant``/``scale`` parameter for the zoo's model sizes.
BOARD_SAMPLES: dict[str, Callable[..., onnx.ModelProto]] = {**cnn.SAMPLES, **mobile.SAMPLES, **attention.SAMPLES,
                                                           **efficientformer_v2.SAMPLES, **fcos.SAMPLES,
                                                           **_yolo.BOARD_SAMPLES}
SAMPLES.update(BOARD_SAMPLES)

#: What ``make run`` estimates: YOLOv5s at 640.
DEFAULT_SAMPLE = "yolov5s"
#: The ~700-node detection model at 640 that ``benchmarks/run.py`` times.
BENCHMARK_SAMPLE = "yolov5s_deep"

ParamValue = int | float | bool | str
_SAFE = re.compile(r"[^A-Za-z0-9_.]+")


def default_cache_dir() -> Path:
    """``$LAYERSCOPE_CACHE_DIR/samples`` if that variable is set, else ``~/.cache/layerscope/samples``."""
    root = os.environ.get("LAYERSCOPE_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "layerscope"
    return base / "samples"


def _builder(name: str) -> Callable[..., onnx.ModelProto]:
    try:
        return SAMPLES[name]
    except KeyError:
        raise KeyError(f"unknown sample {name!r}; available: {', '.join(sorted(SAMPLES))}") from None


def resolve_params(name: str, **params: ParamValue) -> dict[str, ParamValue]:
    """All parameters of builder ``name`` (defaults filled in), in signature order.

    Raises ``KeyError`` for an unknown sample, ``TypeError`` for an unknown parameter or a value
    of the wrong type (an int is accepted where a float is expected; bools are not ints here).
    """
    fn = _builder(name)
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    bound = sig.bind(**params)
    bound.apply_defaults()
    out: dict[str, ParamValue] = {}
    for key, value in bound.arguments.items():
        want = hints.get(key)
        ok = (
            want is None
            or (want is bool and isinstance(value, bool))
            or (want is int and isinstance(value, int) and not isinstance(value, bool))
            or (want is float and isinstance(value, int | float) and not isinstance(value, bool))
            or (want is str and isinstance(value, str))
        )
        if not ok:
            kind = getattr(want, "__name__", want)
            raise TypeError(f"{name}: parameter {key!r} must be {kind}, got {value!r}")
        out[key] = float(value) if want is float else value
    return out


def sample_file_name(name: str, **params: ParamValue) -> str:
    """The cache file name for ``name`` built with ``params``, e.g. ``yolov5s-size640-v1.onnx``."""
    parts = [name]
    for key, value in resolve_params(name, **params).items():
        parts.append(_SAFE.sub("_", f"{key}{value:g}" if isinstance(value, float) else f"{key}{value}"))
    return "-".join([*parts, f"v{SAMPLES_VERSION}"]) + ".onnx"


def parse_value(text: str) -> ParamValue:
    """A builder parameter from text: ``true``/``false``, an int, a float, else the text itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_spec(spec: str) -> tuple[str, dict[str, ParamValue]]:
    """``"name:key=value;key=value"`` (or a bare name) -> the sample name and its parameters.

    ``ValueError`` for an item that is not ``key=value``; the name and parameters are checked by
    :func:`resolve_params`, which raises ``KeyError``/``TypeError``.
    """
    name, _, rest = spec.strip().partition(":")
    items = [part.strip() for part in rest.split(";") if part.strip()]
    return name, parse_params(name, items, what=f"sample spec {spec!r}")


def parse_params(name: str, items: list[str], *, what: str = "") -> dict[str, ParamValue]:
    """``key=value`` items -> builder ``name``'s parameters: a value is text where the builder takes text
    (``version=11`` stays ``"11"``), else :func:`parse_value`'s reading. Checked by :func:`resolve_params`."""
    hints = typing.get_type_hints(_builder(name))
    params: dict[str, ParamValue] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValueError(f"{what + ': ' if what else ''}expected key=value, got {item!r}")
        params[key] = value if hints.get(key) is str else parse_value(value)
    resolve_params(name, **params)
    return params


def sample_path(name: str, *, cache_dir: str | os.PathLike[str] | None = None, **params: ParamValue) -> Path:
    """Path of sample ``name`` built with ``params``; builds and writes it first if it is missing.

    The file goes to ``cache_dir`` (default :func:`default_cache_dir`), created if needed. Writing
    is atomic (a temporary file in the same folder, then :func:`os.replace`), so concurrent callers
    and interrupted builds never leave a truncated model behind. An existing file is trusted.
    """
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = folder / sample_file_name(name, **params)
    if target.is_file():
        return target
    model = SAMPLES[name](**resolve_params(name, **params))
    return write_atomic(target, model.SerializeToString())
