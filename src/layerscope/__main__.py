"""``python -m layerscope``."""

from layerscope.cli.main import entry

entry()
