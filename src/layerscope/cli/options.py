"""Options shared by several subcommands."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import click

from layerscope.measure.session import OPT_LEVELS, PROVIDERS
from layerscope.model import parse_shape_arg

FC = TypeVar("FC", bound=Callable[..., object])

shape_option = click.option(
    "--shape", "shapes", multiple=True, metavar="NAME=DIMS",
    help="Fix an input's dims, e.g. --shape images=1x3x640x640 (repeatable).")
target_option = click.option(
    "--target", "-t", default="host", show_default=True, metavar="NAME|FILE",
    help="Hardware profile: a name from `layerscope targets` or a profile TOML file.")
input_option = click.option(
    "--input", "-i", "input_specs", multiple=True, metavar="NAME=FILE",
    help="Feed an input from a file instead of seeded random values (repeatable): NAME=x.npy, "
         "NAME=x.npz[:KEY], x.npz (every input by name), or NAME=x.bin (raw bytes in the model's shape "
         "and dtype). Shape, dtype and size must match the model exactly; nothing is converted.")

opt_level_option = click.option(
    "--opt-level", type=click.Choice(OPT_LEVELS), default="all", show_default=True,
    help="ONNX Runtime graph optimization level (all: what deployments use).")
provider_option = click.option(
    "--provider", type=click.Choice(sorted(PROVIDERS)), default="cpu", show_default=True,
    help="ONNX Runtime execution provider; one this onnxruntime build lacks exits 3.")


def intra_threads_option(flag: str = "--threads") -> Callable[[FC], FC]:
    """ONNX Runtime's intra-op thread count under ``flag`` (0: its default, one per physical core)."""
    return click.option(flag, default=0, show_default=True, type=click.IntRange(min=0),
                        help="ONNX Runtime intra-op threads (0: its default, one per physical core; "
                             "1 on a shared or noisy machine).")


def parse_shapes(values: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """``--shape`` values to a mapping; a repeated name is an error."""
    shapes: dict[str, tuple[int, ...]] = {}
    for text in values:
        name, shape = parse_shape_arg(text)
        if name in shapes:
            raise click.BadParameter(f"input {name!r} given twice", param_hint="--shape")
        shapes[name] = shape
    return shapes
