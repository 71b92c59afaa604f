"""Join an ONNX Runtime profile to the model through the fusion map, as ``layerscope profile`` does.

ONNX Runtime's profiler names the kernels of its *optimized* graph: fused nodes (``Mul_43/QuickGeluFusion/``,
``/fc1/MatMul/MatMulAddFusion``), nodes the NCHWc transformer made (``<tensor>_nchwc``, ``ReorderOutput``),
nodes it named itself (``Gelu``, ``SpaceToDepth``). Names alone cannot place them; the optimized graph
can. Contract of :func:`fusion_resolutions`:

- the optimized graph is re-created here, for the model given with ``--model``, on the CPU provider, at
  each optimization level from ``all`` down until one names every profiled kernel; the level that names
  the most kernels is used (ties: the higher level);
- each kernel it names is placed by :func:`~layerscope.measure.fusion.build_fusion_map`: ``layer``
  kernels on the layers they cover, ``layout`` and ``constant`` kernels (reorders, computations from
  constants only) as layout work, the rest unmapped with the reason;
- kernels it does not name are left to the name join (``None`` in the result); when ONNX Runtime cannot
  load the model here the whole profile is, with a warning.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import onnx

from layerscope.errors import LayerscopeError
from layerscope.importers.join import LAYER, LAYOUT, UNMAPPED, Resolution
from layerscope.importers.types import VendorEntry
from layerscope.measure.fusion import FusionMap, build_fusion_map
from layerscope.model.types import Graph
from layerscope.tempdirs import scratch

#: The levels tried, best first: a profile is most often taken at ONNX Runtime's default, ``all``.
LEVELS = ("all", "extended", "basic", "disable")


@dataclass(frozen=True)
class FusionJoin:
    """The fusion map a profile was joined through, the level it was re-created at, and how many of the
    profile's kernels it names."""

    fusion: FusionMap
    opt_level: str
    named: int
    kernels: int


def best_fusion_map(graph: Graph, kernel_names: Iterable[str]) -> FusionJoin:
    """The optimized graph (as a fusion map) that names the most of ``kernel_names`` (see the module
    docstring). ``LayerscopeError`` when ONNX Runtime cannot build a session for the model."""
    from layerscope.measure.session import SessionConfig
    from layerscope.runtimes.onnxruntime.session import make_session

    names = set(kernel_names)
    best: FusionJoin | None = None
    with scratch("import") as tmp:
        for level in LEVELS:
            path = str(Path(tmp) / f"optimized-{level}.onnx")
            make_session(graph.path, SessionConfig(opt_level=level, threads=1), optimized_model_path=path)
            fusion = build_fusion_map(graph, onnx.load(path, load_external_data=False))
            found = FusionJoin(fusion, level, len(fusion.profiled_names(names)), len(names))
            if best is None or found.named > best.named:
                best = found
            if best.named == len(names):
                break
    assert best is not None
    return best


def fusion_resolutions(graph: Graph, entries: Iterable[VendorEntry]) -> tuple[dict[str, Resolution], FusionJoin | None,
                                                                                  str | None]:
    """Per ONNX Runtime entry the fusion map places, its resolution; the join used; a warning if none was
    possible (ONNX Runtime missing or unable to load the model)."""
    listed = list(entries)
    try:
        join = best_fusion_map(graph, (e.name for e in listed))
    except (LayerscopeError, ImportError) as exc:
        return {}, None, f"ONNX Runtime's optimized graph could not be re-created ({exc}); joined by name"
    return resolutions_from_map(listed, join), join, None


def resolutions_from_map(entries: Iterable[VendorEntry], join: FusionJoin) -> dict[str, Resolution]:
    """The entries the map names, placed by it."""
    how = f"fusion-map:{join.opt_level}"
    placed: dict[str, Resolution] = {}
    listed = list(entries)
    known = join.fusion.profiled_names(e.name for e in listed)
    for entry in listed:
        mapping = join.fusion.kernels.get(known.get(entry.name, ""))
        if mapping is None:
            continue
        if mapping.category == "layer":
            placed[entry.name] = Resolution(entry, LAYER, layer_ids=mapping.layers, how=how)
        elif mapping.category in ("layout", "constant"):
            placed[entry.name] = Resolution(entry, LAYOUT, how=f"{how}:{mapping.category}")
        else:
            placed[entry.name] = Resolution(entry, UNMAPPED, how=how,
                                            reason="an ONNX Runtime kernel the fusion map relates to no layer")
    return placed
