"""``layerscope sweep``: models x targets x modes x settings, each cell a task (on Ray), gathered into Parquet.

- :mod:`.plan` expands the axes into :class:`~.plan.Cell` values with stable keys (what resuming relies on);
- :mod:`.tasks` runs one cell through the Python API and writes its run file (or its error record);
- :mod:`.executor` schedules the cells on Ray (measuring cells one at a time per node) or in this process;
- :mod:`.dataset` gathers the run files into ``runs.parquet`` and ``layers.parquet``;
- :mod:`.leaderboard` renders ``leaderboard.html``.
"""

from layerscope.sweep.plan import Cell, SweepSpec, expand, load_spec

__all__ = ["Cell", "SweepSpec", "expand", "load_spec"]
