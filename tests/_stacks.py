"""Conv stacks for the board-fit tests: models whose compute and memory a test sets by their map size and widths."""

from __future__ import annotations

from pathlib import Path

import onnx

from layerscope.samples._graph import GraphBuilder


def conv_stack(path: Path, size: int, widths: tuple[int, ...], seed: int, *, channels: int = 64) -> Path:
    """A plain 3x3 conv + relu stack on a ``channels`` x ``size`` x ``size`` input, one conv per width, written to
    ``path``: ``size`` sets the activations (memory), ``widths`` the MACs and the weights."""
    b = GraphBuilder(f"stack{seed}", seed=seed)
    x = b.input("data", (1, channels, size, size))
    for i, width in enumerate(widths):
        with b.scope(f"layer{i}"):
            x = b.relu(b.conv(x, width, 3))
    b.output(x)
    onnx.save(b.build("a conv stack"), str(path))
    return path
