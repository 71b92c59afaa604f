"""Names of a package imported on first use (PEP 562 module ``__getattr__``), so that importing the package stays
cheap: ``__getattr__ = lazy_names(__name__, {name: (module, attribute), ...})``. ``attribute`` ``None`` names the
module itself. The value found is bound in the package, so a name is imported once; an unknown name is
``AttributeError``, as for any module."""

from __future__ import annotations

import importlib
import sys

#: ``typing.TYPE_CHECKING`` without importing :mod:`typing` (~20 ms): this module and the package's ``__init__`` are
#: all that runs before the console entry restores Ctrl-C's default action (:mod:`layerscope.cli.start`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_names(package: str, names: Mapping[str, tuple[str, str | None]]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` for ``names`` (module docstring)."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = names[name]
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def from_module(module: str, *names: str) -> dict[str, tuple[str, str | None]]:
    """``names``, each the attribute of the same name in ``module``: the common case of :func:`lazy_names`."""
    return {name: (module, name) for name in names}
