"""Runtimes: the engines layerscope measures with, one package each behind one protocol, found by name.

- :mod:`~layerscope.runtimes.base`: the :class:`~layerscope.runtimes.base.Runtime` protocol (name, capabilities,
  the options it reads, availability, open) and what an opened runtime does (profile per kernel, bench, the bisect
  runner, the compiled graph's fused groups, the precision it chose);
- :mod:`~layerscope.runtimes.registry`: name -> runtime, the ``--backend`` choices, what is available here;
- :mod:`~layerscope.runtimes.onnxruntime`, :mod:`~layerscope.runtimes.openvino`: runtimes in this process, each
  with everything that imports its library (sessions or compilation, its profile reader, its bisect runner, its
  kernels for the predictor);
- :mod:`~layerscope.runtimes.command`: a device command timed as a black box (``--run-cmd``);
- :mod:`~layerscope.runtimes.machine`: the machine record every measurement carries.

The measurement logic the runtimes share (the session settings, the profiling lifecycle, timed runs, the fusion
map, the bench engine, differential timing, the runner and kernel-runner protocols) stays in
:mod:`layerscope.measure`, which imports no runtime; this package decides which of it a runtime uses. Importing
this package imports no runtime.
"""
