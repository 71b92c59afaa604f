"""Runtimes: the engines layerscope measures with, one package each behind one protocol, found by name.

- :mod:`~layerscope.runtimes.base`: the :class:`~layerscope.runtimes.base.Runtime` protocol (name, capabilities,
  the options it reads, availability, open) and what an opened runtime does (profile per kernel, bench, the bisect
  runner, the compiled graph's fused groups, the precision it chose);
- :mod:`~layerscope.runtimes.registry`: name -> runtime, the ``--backend`` choices, what is available here;
- :mod:`~layerscope.runtimes.onnxruntime`, :mod:`~layerscope.runtimes.openvino`: runtimes in this process;
- :mod:`~layerscope.runtimes.command`: a device command timed as a black box (``--run-cmd``).

The measurement logic the runtimes share (timed runs, the fusion map, the bench engine, differential timing)
stays in :mod:`layerscope.measure`; this package decides which of it a runtime uses. Importing this package
imports no runtime.
"""
