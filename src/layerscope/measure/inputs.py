"""The arrays a model is run on: seeded random values, or the user's files, checked strictly against the model.

Contract of :func:`resolve_inputs` / :func:`make_inputs`:

- every runtime input of ``graph`` gets exactly one C-contiguous array in native byte order, with the
  model's static shape and numpy dtype — or an :class:`~layerscope.errors.InputError` (exit 2) is raised;
  nothing is ever cast, reshaped, padded or cropped to fit, because a quietly wrong input gives a quietly
  wrong measurement (a 512x512 image fed to a 640x640 model runs, and runs faster);
- files are given as ``--input`` specs (:func:`parse_input_spec`):

  ==========================  ==================================================================
  ``NAME=x.npy``              one array (``np.save``)
  ``NAME=x.npz``              the array called ``NAME`` in the archive, or its only array
  ``NAME=x.npz:KEY``          the array called ``KEY`` in the archive
  ``x.npz``                   every array in the archive, each named after the input it feeds
  ``NAME=x.bin``              raw bytes (any suffix but ``.npy``/``.npz``): the model's shape and
                              dtype, C order, little-endian; the size must match to the byte
  ``x.npy`` / ``x.bin``       the same, for a model with a single input
  ==========================  ==================================================================

  ``.npy``/``.npz`` files are read with ``allow_pickle=False`` (never executes code from a file);
- inputs no file provides get seeded random values (:func:`random_array`), reproducible for a given
  ``seed`` and independent of which other inputs came from files:

  ================================  ===============================================================
  float16 / float32 / float64       uniform in [0, 1) (a normalised image)
  name contains ``mask``            ones (everything attended) — any integer dtype or bool
  name contains ``type``/``segment``  zeros (token-type / segment ids: every model has type 0)
  name contains ``position``        0, 1, 2, ... along the last axis
  uint8                             uniform integers in [0, 256) (raw pixels)
  int8                              uniform integers in [-128, 128)
  other integers (ids, tokens, ...) uniform integers in [0, 100): small, non-negative, valid
                                    indices for any real vocabulary
  bool                              random True / False
  ================================  ===============================================================

  except that an integer input the model's ops give a meaning takes it (an index is drawn below the length
  of what it indexes, a shape is one valid for the data, a sample rate is 16000 or the rate the model
  compares it with, ...: :mod:`layerscope.model.random_inputs` lists the rules), and its source says so;

  dtypes numpy / ONNX Runtime's Python API cannot hold (bfloat16, float8, int4, string) are an
  ``InputError``.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layerscope.errors import InputError
from layerscope.model.random_inputs import (
    INT_HIGH,
    SUPPORTED_DTYPES,
    IntHint,
    c_contiguous,
    consumer_hints,
    hints_in_use,
    mark_seeded,
    merged_hints,
    random_array,
    random_input_bytes,
    random_kind,
)
from layerscope.model.random_inputs import numpy_dtype as _numpy_dtype
from layerscope.model.types import Graph, TensorInfo

__all__ = ["INT_HIGH", "SUPPORTED_DTYPES", "InputSpec", "ModelInputs", "check_array", "feeder", "graph_hints",
           "make_inputs", "parse_input_spec", "random_array", "random_kind", "resolve_inputs"]

_NPY_MAGIC = b"\x93NUMPY"


@dataclass(frozen=True)
class InputSpec:
    """One parsed ``--input``: which model input (``None``: all in an .npz, or the only one) from which file."""

    text: str
    name: str | None
    path: Path
    key: str | None = None

    @property
    def kind(self) -> str:
        """``"npy"``, ``"npz"`` or ``"raw"``, from the file's suffix."""
        suffix = self.path.suffix.lower()
        return suffix[1:] if suffix in (".npy", ".npz") else "raw"


@dataclass(frozen=True)
class ModelInputs:
    """The arrays to feed, by input name, and where each came from (``"file x.npy"``, ``"random ..."``)."""

    arrays: Mapping[str, np.ndarray]
    sources: Mapping[str, str]


def make_inputs(graph: Graph, specs: Sequence[str] = (), seed: int = 0) -> dict[str, np.ndarray]:
    """The feed dict for ``graph``: arrays from the ``--input`` ``specs``, seeded random values for the rest.

    See the module docstring for the forms of a spec, the random ranges and the checks; any mismatch
    with the model is an ``InputError`` naming what was given and what the model expects.
    """
    return dict(resolve_inputs(graph, specs, seed).arrays)


def feeder(specs: Sequence[str] = (), seed: int = 0) -> Callable[[Sequence[TensorInfo]], dict[str, np.ndarray]]:
    """What :func:`make_inputs` would feed, as a function of the inputs alone: for the loader, which runs the
    model once to learn shapes before its :class:`Graph` exists (so the run sees the user's files). What the
    model's ops say of its integer inputs comes from the loader (:func:`~layerscope.model.random_inputs.using_hints`
    around the call)."""
    return lambda inputs: dict(_resolve(tuple(inputs), specs, seed, None).arrays)


def resolve_inputs(graph: Graph, specs: Sequence[str] = (), seed: int = 0) -> ModelInputs:
    """Like :func:`make_inputs`, with a one-line description of each input's source."""
    return _resolve(graph.inputs, specs, seed, graph_hints(graph))


def graph_hints(graph: Graph) -> dict[str, IntHint]:
    """What the layers of ``graph`` reading each integer input say about its values
    (:func:`~layerscope.model.random_inputs.consumer_hints`)."""

    def shape_of(name: str) -> tuple[int, ...] | None:
        info = graph.tensor(name)
        return info.shape if info is not None else None

    return consumer_hints(graph.inputs, [*graph.layers, *graph.folded], shape_of, graph.value)


def _resolve(inputs: Sequence[TensorInfo], specs: Sequence[str], seed: int,
             consumers: Mapping[str, IntHint] | None) -> ModelInputs:
    """The arrays for ``inputs``; ``consumers``: what the model's ops say of its integer inputs (``None``: those
    of the enclosing :func:`~layerscope.model.random_inputs.using_hints`)."""
    infos = {t.name: t for t in inputs}
    arrays: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    for text in specs:
        for name, array, source in _load_spec(parse_input_spec(text, infos), infos):
            if name in arrays:
                raise InputError(f"input {name!r} is given twice ({sources[name]} and {source})")
            arrays[name] = array
            sources[name] = source
    check_input_budget([info for info in inputs if info.name not in arrays])
    hints = merged_hints(inputs, hints_in_use() if consumers is None else consumers)
    for index, info in enumerate(inputs):
        if info.name not in arrays:
            hint = hints.get(info.name)
            arrays[info.name] = random_array(info, seed, index, hint)
            sources[info.name] = f"random {random_kind(info, hint)}, seed {seed}"
            mark_seeded(arrays[info.name], random_kind(info, hint))
    order = [t.name for t in inputs]
    return ModelInputs({n: arrays[n] for n in order}, {n: sources[n] for n in order})


#: Largest total of input bytes layerscope allocates, whatever the machine has (64 GiB).
INPUT_BYTES_CAP = 64 << 30


def input_budget_bytes() -> int:
    """Bytes the random inputs may take: half the memory available now (or of the process's address-space
    limit, when one is set), at most :data:`INPUT_BYTES_CAP`."""
    import resource

    available = INPUT_BYTES_CAP * 2
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        available = min(available, soft)
    return min(available // 2, INPUT_BYTES_CAP)


def check_input_budget(infos: Sequence[TensorInfo]) -> None:
    """``InputError`` (exit 2) saying how many bytes are needed when the random inputs would exceed
    :func:`input_budget_bytes`; nothing is allocated before."""
    needed = {info.name: random_input_bytes(info) for info in infos}
    total = sum(needed.values())
    budget = input_budget_bytes()
    if total > budget:
        largest = max(needed, key=lambda n: needed[n])
        info = next(i for i in infos if i.name == largest)
        raise InputError(f"input {largest!r} ({_fmt_shape(info.shape)} {info.dtype}) needs {needed[largest]:,} bytes"
                         f" ({total:,} for all inputs); the budget is {budget:,} bytes (half the available memory,"
                         f" at most {INPUT_BYTES_CAP >> 30} GiB)", hint="pass a smaller --shape")


def parse_input_spec(text: str, infos: Mapping[str, TensorInfo]) -> InputSpec:
    """Parse one ``--input`` value against the model's inputs (longest input name before ``=`` wins).

    Input names may contain ``=`` or ``/`` (``gpu_0/data_0``), so the name is matched against the model's
    inputs first; otherwise the text before the first ``=`` is taken as the name. A text naming an
    existing file is a bare file. A bare ``.npy``/raw file needs a single-input model.
    """
    if not text:
        raise InputError("--input: empty value; expected NAME=FILE, e.g. images=frame.npy")
    name: str | None = None
    path_text = text
    for candidate in sorted(infos, key=len, reverse=True):
        if text.startswith(candidate + "="):
            name, path_text = candidate, text[len(candidate) + 1:]
            break
    else:
        if "=" in text and not Path(text).is_file():
            unknown = text.split("=", 1)[0]
            raise InputError(f"--input {text!r}: the model has no input {unknown!r}; its inputs: "
                             f"{_describe_inputs(infos.values())}")
    path_text, key = _split_npz_key(path_text)
    if not path_text:
        raise InputError(f"--input {text!r}: no file given; expected NAME=FILE")
    spec = InputSpec(text=text, name=name, path=Path(path_text), key=key)
    if name is None and spec.kind != "npz" and len(infos) != 1:
        raise InputError(f"--input {text!r}: the model has {len(infos)} inputs, say which this file feeds "
                         f"(NAME=FILE); its inputs: {_describe_inputs(infos.values())}")
    if name is None and spec.kind != "npz":
        spec = InputSpec(text=text, name=next(iter(infos)), path=spec.path)
    return spec


def _split_npz_key(path_text: str) -> tuple[str, str | None]:
    """``x.npz:key`` -> (``x.npz``, ``key``); anything else unchanged with no key."""
    if path_text.lower().endswith(".npz") or ":" not in path_text:
        return path_text, None
    head, _, key = path_text.rpartition(":")
    if head.lower().endswith(".npz") and key:
        return head, key
    return path_text, None


def _load_spec(spec: InputSpec, infos: Mapping[str, TensorInfo]) -> list[tuple[str, np.ndarray, str]]:
    """(input name, checked array, source description) for every input ``spec`` provides."""
    if not spec.path.is_file():
        what = "no such file" if not spec.path.exists() else "not a file"
        raise InputError(f"--input {spec.text!r}: {what}: {spec.path}")
    if spec.kind == "npz":
        return _load_npz(spec, infos)
    assert spec.name is not None  # parse_input_spec names every non-npz spec
    info = infos[spec.name]
    if spec.kind == "npy":
        array = check_array(_read_npy(spec), info, f"file {spec.path}")
        return [(info.name, array, f"file {spec.path}")]
    return [(info.name, _read_raw(spec.path, info), f"file {spec.path} (raw {_fmt_shape(info.shape)} "
                                                    f"{info.dtype})")]


def _read_npy(spec: InputSpec) -> np.ndarray:
    try:
        array = np.load(spec.path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"--input {spec.text!r}: {spec.path} is not a readable .npy file ({_first_line(exc)})",
                         hint="write it with np.save") from None
    if not isinstance(array, np.ndarray):  # an .npz archive named .npy
        array.close()
        raise InputError(f"--input {spec.text!r}: {spec.path} is an .npz archive, not an .npy file",
                         hint="rename it to .npz")
    return array


def _load_npz(spec: InputSpec, infos: Mapping[str, TensorInfo]) -> list[tuple[str, np.ndarray, str]]:
    try:
        with np.load(spec.path, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise InputError(f"--input {spec.text!r}: {spec.path} is not an .npz archive")
            keys = _npz_keys(spec, archive.files, infos)
            loaded = [(name, key, archive[key]) for name, key in keys]
    except InputError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(f"--input {spec.text!r}: {spec.path} is not a readable .npz archive "
                         f"({_first_line(exc)})", hint="write it with np.savez") from None
    result = []
    for name, key, array in loaded:
        source = f"file {spec.path}[{key}]"
        result.append((name, check_array(array, infos[name], source), source))
    return result


def _npz_keys(spec: InputSpec, files: Sequence[str], infos: Mapping[str, TensorInfo]) -> list[tuple[str, str]]:
    """(input name, archive key) pairs ``spec`` selects from an archive holding ``files``."""
    listed = ", ".join(files) or "none"
    if spec.name is None:
        unknown = [k for k in files if k not in infos]
        if unknown:
            raise InputError(f"--input {spec.text!r}: {spec.path} holds array(s) {', '.join(unknown)} that are "
                             f"not inputs of the model; its inputs: {_describe_inputs(infos.values())}",
                             hint="name the arrays after the inputs, or pick one with NAME=FILE.npz:KEY")
        return [(k, k) for k in files]
    if spec.key is not None:
        if spec.key not in files:
            raise InputError(f"--input {spec.text!r}: {spec.path} has no array {spec.key!r}; it holds: {listed}")
        return [(spec.name, spec.key)]
    if spec.name in files:
        return [(spec.name, spec.name)]
    if len(files) == 1:
        return [(spec.name, files[0])]
    raise InputError(f"--input {spec.text!r}: {spec.path} has no array {spec.name!r} and holds several: {listed}",
                     hint=f"pick one with {spec.name}={spec.path}:KEY")


def _read_raw(path: Path, info: TensorInfo) -> np.ndarray:
    """A raw little-endian C-order file as ``info``'s shape and dtype; the byte size must match exactly."""
    dtype = _numpy_dtype(info)
    size = path.stat().st_size
    want = info.elements * dtype.itemsize
    if size != want:
        raise InputError(f"input {info.name!r}: file {path} has {size} bytes, the model expects {want} "
                         f"({_fmt_shape(info.shape)} {info.dtype}){_raw_size_hint(path, size, info)}")
    try:
        array = np.fromfile(path, dtype=dtype.newbyteorder("<"), count=info.elements)
    except OSError as exc:
        raise InputError(f"input {info.name!r}: cannot read {path} ({_first_line(exc)})") from None
    return c_contiguous(array.reshape(info.shape), dtype)


def _raw_size_hint(path: Path, size: int, info: TensorInfo) -> str:
    """What a raw file of ``size`` bytes would fit instead: another dtype, a square image of another size."""
    try:
        with path.open("rb") as fh:
            if fh.read(len(_NPY_MAGIC)) == _NPY_MAGIC:
                return "; the file is an .npy file: name it .npy"
    except OSError:
        pass
    hints = [f"{_fmt_shape(info.shape)} {name}" for name in ("uint8", "float16", "float32", "float64")
             if name != info.dtype and size == info.elements * np.dtype(name).itemsize]
    itemsize = _numpy_dtype(info).itemsize
    if size % itemsize == 0 and (square := _square_image_shape(size // itemsize, info.shape)) is not None:
        hints.append(f"{_fmt_shape(square)} {info.dtype}")
    return f"; that size fits {' or '.join(hints)}" if hints else ""


def _square_image_shape(elements: int, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The NCHW / NHWC shape with another square H=W that holds ``elements``, when ``shape`` is a square image."""
    if len(shape) != 4:
        return None
    for hw_axes in ((2, 3), (1, 2)):
        if shape[hw_axes[0]] != shape[hw_axes[1]]:
            continue
        rest = math.prod(d for i, d in enumerate(shape) if i not in hw_axes)
        if rest == 0 or elements % rest:
            continue
        side = math.isqrt(elements // rest)
        if side * side == elements // rest and side != shape[hw_axes[0]]:
            return tuple(side if i in hw_axes else d for i, d in enumerate(shape))
    return None


def check_array(array: np.ndarray, info: TensorInfo, origin: str) -> np.ndarray:
    """``array`` as it will be fed to input ``info`` (C-contiguous, native byte order), or ``InputError``.

    The dtype must be the model's exactly (no casting) and the shape equal, dim for dim. ``origin``
    says where the array came from (``"file x.npy"``) and starts the message.
    """
    want = _numpy_dtype(info)
    problems = []
    if array.shape != info.shape:
        problems.append(("shape", _fmt_shape(array.shape), _fmt_shape(info.shape)))
    if array.dtype.name != want.name:
        problems.append(("dtype", array.dtype.name, want.name))
    if problems:
        given = " and ".join(f"{kind} {value}" for kind, value, _ in problems)
        expected = " ".join(value for _, _, value in problems)
        hint = None
        if any(kind == "dtype" for kind, _, _ in problems):
            hint = (f"layerscope never converts inputs; convert the array yourself, e.g. "
                    f"np.save(path, a.astype(np.{want.name}))")
        raise InputError(f"input {info.name!r}: {origin} has {given}, the model expects {expected}", hint=hint)
    return c_contiguous(array, want)


def _describe_inputs(infos: Iterable[TensorInfo]) -> str:
    return ", ".join(f"{t.name} ({_fmt_shape(t.shape)} {t.dtype})" for t in infos) or "none"


def _fmt_shape(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape)) if len(shape) else "scalar"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

