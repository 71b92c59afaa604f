"""Load a script of ``benchmarks/`` as a module, for tests of its helpers (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(name: str, path: Path) -> ModuleType:
    """The script at ``path`` run as the module ``name``, registered in ``sys.modules`` before it runs (dataclasses
    look their module up by name while the class is built)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
