"""The runtime registry: name -> runtime, the ``--backend`` choices, what is installed here.

Contract:

- :data:`DEFAULT` is the runtime a command uses without ``--backend``;
- :func:`get_runtime` returns the runtime called ``name`` (case-insensitive) or raises ``InputError`` (exit 2)
  naming the known ones; :func:`spec` its static description without importing it (``None`` for a name no
  runtime has, e.g. a vendor tool's recorded in an imported run);
- :func:`choices` are the runtimes ``--backend`` offers (those with the ``in-process`` capability), in
  registration order; :func:`available` those of them whose runtime is installed here; :func:`with_capability`
  the names that have one capability;
- :func:`register` adds a runtime (a new runtime is one package and one line here); :func:`unregister` removes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from layerscope.errors import InputError
from layerscope.runtimes import command, onnxruntime, openvino
from layerscope.runtimes.spec import RuntimeSpec

if TYPE_CHECKING:
    from layerscope.runtimes.base import Runtime

__all__ = ["DEFAULT", "available", "choices", "get_runtime", "names", "register", "spec", "unregister",
           "with_capability"]

#: The runtime a command measures with unless ``--backend`` says.
DEFAULT = onnxruntime.SPEC.name

_RUNTIMES: dict[str, tuple[RuntimeSpec, Callable[[], Runtime]]] = {}


def register(spec: RuntimeSpec, factory: Callable[[], Runtime]) -> None:
    """Make ``factory``'s runtime known as ``spec.name`` (replacing one of that name)."""
    _RUNTIMES[spec.name] = (spec, factory)


def unregister(name: str) -> None:
    """Forget the runtime called ``name`` (nothing when none is)."""
    _RUNTIMES.pop(name, None)


for _package in (onnxruntime, openvino, command):
    register(_package.SPEC, _package.create)


def names() -> tuple[str, ...]:
    """Every registered runtime's name, in registration order."""
    return tuple(_RUNTIMES)


def spec(name: str | None) -> RuntimeSpec | None:
    """The static description of the runtime called ``name``; ``None`` when none is (or ``name`` is ``None``)."""
    entry = _RUNTIMES.get((name or "").lower())
    return entry[0] if entry is not None else None


def get_runtime(name: str) -> Runtime:
    """The runtime called ``name``; ``InputError`` (exit 2) naming the known ones."""
    entry = _RUNTIMES.get(name.lower())
    if entry is None:
        raise InputError(f"unknown backend {name!r}; known: {', '.join(choices())}")
    return entry[1]()


def with_capability(capability: str) -> tuple[str, ...]:
    """The names of the runtimes that have ``capability``, in registration order."""
    return tuple(name for name, (s, _) in _RUNTIMES.items() if s.can(capability))


def choices() -> tuple[str, ...]:
    """The runtimes ``--backend`` offers: those that run in this process."""
    return with_capability("in-process")


def available() -> tuple[str, ...]:
    """The ``--backend`` choices whose runtime is installed here (its version known)."""
    return tuple(name for name in choices() if get_runtime(name).info().version)
