"""The sweep's plan: its axes (:class:`SweepSpec`), read from the command line or a small TOML/YAML file, and
their expansion into cells.

Contract:
- a cell is one run: one model on one target in one mode (``estimate``: the roofline estimate; ``profile``:
  measured on ONNX Runtime beside the estimate) with one value of each setting that mode uses (``dtype`` for
  estimate; ``threads`` and ``opt_level`` for profile), so estimate cells are not multiplied by profile settings;
- a cell's :attr:`Cell.key` is a function of the cell's values alone (the model by its resolved path), stable
  across runs and machines with the same paths: a sweep resumes by skipping the keys whose run file exists;
- a spec file names only the keys of :data:`SPEC_KEYS` (anything else is an ``InputError`` naming it); model
  paths in a file are relative to the file; YAML is read with ``yaml.safe_load``.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from layerscope.errors import InputError

MODES = ("estimate", "profile")
OPT_LEVELS = ("disable", "basic", "extended", "all")
#: Keys a spec file may hold, and what each is.
SPEC_KEYS = {
    "models": "list of ONNX model paths (relative to the spec file)",
    "targets": "list of hardware profile names or TOML files",
    "modes": "list of: estimate, profile",
    "dtypes": "list of dtypes for estimate cells (default: each profile's own)",
    "threads": "list of ONNX Runtime intra-op thread counts for profile cells (0: its default)",
    "opt_levels": "list of ONNX Runtime graph optimization levels for profile cells",
    "shapes": "mapping input name -> list of dims, for every cell",
    "runs": "profiled runs per profile cell",
    "warmup": "warm-up runs per profile cell",
}


@dataclass(frozen=True)
class Cell:
    """One run of the sweep. ``model`` is an absolute path; unused settings are ``None``."""

    model: str
    target: str
    mode: str
    dtype: str | None = None
    threads: int | None = None
    opt_level: str | None = None
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    runs: int | None = None
    warmup: int | None = None

    @property
    def key(self) -> str:
        """``<model stem>__<target>__<mode>__<hash>``: readable, filesystem-safe and unique per cell."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:10]
        parts = (Path(self.model).stem, Path(self.target).stem, self.mode)
        return "__".join(_safe(p) for p in parts) + f"__{digest}"

    @property
    def settings(self) -> dict[str, Any]:
        """The settings this cell's mode uses (for columns and the leaderboard)."""
        if self.mode == "estimate":
            return {"dtype": self.dtype}
        return {"threads": self.threads, "opt_level": self.opt_level, "runs": self.runs, "warmup": self.warmup}

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "shapes": {name: list(dims) for name, dims in self.shapes}}


@dataclass(frozen=True)
class SweepSpec:
    """The axes of a sweep. Empty ``dtypes``: each profile's default dtype."""

    models: tuple[str, ...]
    targets: tuple[str, ...] = ("host",)
    modes: tuple[str, ...] = ("estimate",)
    dtypes: tuple[str | None, ...] = (None,)
    threads: tuple[int, ...] = (0,)
    opt_levels: tuple[str, ...] = ("all",)
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = field(default=())
    runs: int = 20
    warmup: int = 5

    def __post_init__(self) -> None:
        if not self.models:
            raise InputError("a sweep needs at least one model", hint="pass MODEL... or models = [...] in --config")
        for name, values in (("targets", self.targets), ("modes", self.modes), ("dtypes", self.dtypes),
                             ("threads", self.threads), ("opt_levels", self.opt_levels)):
            if not values:
                raise InputError(f"sweep axis {name!r} is empty")
        bad = [m for m in self.modes if m not in MODES]
        if bad:
            raise InputError(f"unknown sweep mode(s) {', '.join(map(repr, bad))}; known: {', '.join(MODES)}")
        bad_levels = [o for o in self.opt_levels if o not in OPT_LEVELS]
        if bad_levels:
            raise InputError(f"unknown opt level(s) {', '.join(map(repr, bad_levels))}; known: {', '.join(OPT_LEVELS)}")
        if any(t < 0 for t in self.threads):
            raise InputError(f"threads must be >= 0, got {list(self.threads)}")
        if self.runs < 1 or self.warmup < 0:
            raise InputError(f"runs must be >= 1 and warmup >= 0, got runs={self.runs} warmup={self.warmup}")


def expand(spec: SweepSpec) -> list[Cell]:
    """Every cell of ``spec``, in model, target, mode, setting order, without duplicates. Model paths are resolved;
    a missing model is an ``InputError`` before anything runs."""
    cells: list[Cell] = []
    for model in spec.models:
        path = Path(model).expanduser()
        if not path.is_file():
            raise InputError(f"{model}: not a file (a FIFO, a device or a folder)" if path.exists() else
                             f"{model}: no such model file")
        resolved = str(path.resolve())
        for target in spec.targets:
            base = Cell(model=resolved, target=target, mode="estimate", shapes=spec.shapes)
            for mode in spec.modes:
                if mode == "estimate":
                    cells.extend(replace(base, dtype=d) for d in spec.dtypes)
                else:
                    cells.extend(replace(base, mode="profile", threads=t, opt_level=o, runs=spec.runs,
                                         warmup=spec.warmup)
                                 for t in spec.threads for o in spec.opt_levels)
    return list(dict.fromkeys(cells))


def load_spec(path: Path) -> dict[str, Any]:
    """The raw axes a spec file (``.toml``, ``.yaml``/``.yml`` or ``.json``) sets, validated by key and type;
    model paths made relative to the file's folder. Merge with the command line's and build a :class:`SweepSpec`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the sweep file ({exc.strerror or exc})") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise InputError(f"{path}: a sweep file is .toml, .yaml, .yml or .json")
    except InputError:
        raise
    except Exception as exc:  # tomllib, yaml and json each raise their own error type
        raise InputError(f"{path}: not a valid sweep file ({str(exc).splitlines()[0] if str(exc) else exc})") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: a sweep file is a mapping of {', '.join(SPEC_KEYS)}")
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise InputError(f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(SPEC_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("runs", "warmup"):
            out[key] = _int(path, key, value)
        elif key == "shapes":
            out[key] = shapes_tuple(value, f"{path}: shapes")
        else:
            items = _list(path, key, value)
            if key == "models":
                items = [str((path.parent / str(m)).expanduser()) for m in items]
            elif key == "threads":
                items = [_int(path, key, v) for v in items]
            else:
                items = [_str(path, key, v) for v in items]
            out[key] = tuple(items)
    return out


def shapes_tuple(value: Any, where: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``{name: [dims]}`` as the sorted tuple a :class:`Cell` holds; dims are positive integers."""
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected a mapping of input name -> list of dims")
    out = []
    for name, dims in value.items():
        if not isinstance(dims, list | tuple) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise InputError(f"{where}: dims of {name!r} must be a list of positive integers, got {dims!r}")
        out.append((str(name), tuple(dims)))
    return tuple(sorted(out))


def _list(path: Path, key: str, value: Any) -> list[Any]:
    if isinstance(value, str | int) and not isinstance(value, bool):
        return [value]
    if not isinstance(value, list) or not value:
        raise InputError(f"{path}: {key!r} must be a non-empty list ({SPEC_KEYS[key]})")
    return value


def _int(path: Path, key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"{path}: {key!r} must be an integer, got {value!r}")
    return value


def _str(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"{path}: {key!r} must hold non-empty strings, got {value!r}")
    return value


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:60] or "x"
