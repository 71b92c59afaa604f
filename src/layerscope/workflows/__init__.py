"""The use cases, one module each: a frozen request in, the typed run (and what a report prints beside it) out.

The command line (:mod:`layerscope.cli`) parses options into a request, calls the use case and prints or writes
what it returns; the Python API (:mod:`layerscope.api`, ``layerscope.estimate(...)`` and the others) builds the
same request from keyword arguments and calls the same function, so the two give the same run. A request's
fields are the command's options, under the same names and defaults (:mod:`layerscope.workflows.common` names
the few that differ). A use case writes no file and prints nothing: what it has to say as it goes (the shape notes
of a loaded model, progress, warnings) goes to the :class:`~layerscope.workflows.common.Hooks` it is given.

- :mod:`~layerscope.workflows.estimate`: a static per-layer estimate, merged into an existing run on request;
- :mod:`~layerscope.workflows.profile`: every layer measured on a runtime beside its estimate;
- :mod:`~layerscope.workflows.bisect`: per-segment times by differential timing of the model's prefixes.
"""
