"""layerscope's version, as ``pyproject.toml`` declares it: written into every run file's ``tool.version``."""

__version__ = "0.1.0"
