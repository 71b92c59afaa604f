"""What a runtime is, without importing it: its name, how a sentence names it, its capabilities.

Contract: :class:`RuntimeSpec` is static data (no runtime is imported to read it), so readers of saved runs
(reports, analysis) can ask what a recorded ``backend`` can do through
:func:`layerscope.runtimes.registry.spec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: What a runtime can do for layerscope -> what that means for the user.
CAPABILITIES: Mapping[str, str] = {
    "kernel-profile": "times every runtime kernel in every run (per-layer latency)",
    "optimized-graph": "writes the graph it runs, so fused kernels map back to source layers",
    "uninstrumented-timing": "times whole runs without the profiler (end-to-end percentiles)",
    "intra-op-threads": "sets the threads one kernel may use",
    "inter-op-threads": "sets the threads independent kernels may run on",
    "opt-levels": "sets the graph optimization level",
    "providers": "runs on an execution provider chosen with --provider",
    "devices": "compiles for a device chosen with --device, at a precision and performance hint it reports",
    "exec-graph-cuts": "reads its compiled graph's fused groups, so bisect cuts never split one",
    "model-files": "reads each timed model from its file (bisect keeps prefix models beside the cache)",
    "device-command": "times whole models with a shell command on a device (--run-cmd), nothing in this process",
    "in-process": "runs in this process (selected with --backend)",
    "kernel-timing": "times single-kernel models for the latency predictor (calibrate --kernels)",
}


@dataclass(frozen=True)
class RuntimeSpec:
    """A runtime's static description. ``name``: the registry key, recorded as a measurement's ``backend`` (a
    bisect runner's ``runner``); ``title``: how a sentence names it; ``capabilities``: keys of
    :data:`CAPABILITIES`; ``options``: the request fields (``layerscope profile``'s option names) it reads;
    ``default_threads``: what ``threads`` 0 means on it, as a report says it; ``visit_warmup`` and
    ``recompile_every``: a bisect runner's untimed runs per visit and how often it recompiles a timed model (0:
    never) unless the command says."""

    name: str
    title: str
    capabilities: frozenset[str]
    options: tuple[str, ...]
    default_threads: str = "default"
    visit_warmup: int = 1
    recompile_every: int = 0

    def can(self, capability: str) -> bool:
        """Whether this runtime has ``capability`` (a key of :data:`CAPABILITIES`)."""
        return capability in self.capabilities
