"""``python -m layerscope``."""

from layerscope.cli.start import entry

entry()
