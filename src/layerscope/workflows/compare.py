"""Compare: two runs of a model before and after a change, every difference judged against the runs' noise, and
the CI gate (``layerscope compare``, ``layerscope.compare``)."""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.analysis.compare import Comparison, compare_runs, comparison_section, gate
from layerscope.errors import Regression
from layerscope.runfile.commands import written_by
from layerscope.runfile.models import Comparison as ComparisonSection
from layerscope.runfile.models import RunFile
from layerscope.workflows.common import OptionError, PathLike


@dataclass(frozen=True)
class CompareRequest:
    """``layerscope compare``'s options. ``before``, ``after``: run files (or typed runs) of any command;
    ``labels``: the two runs' names in every table (``--labels A,B``); ``fail_if_slower``: a regression is the
    end-to-end latency P50 judged slower by more than this many percent; ``fail_if_layer_slower``: the same for any
    matched layer (``None``: no gate)."""

    before: PathLike | RunFile
    after: PathLike | RunFile
    labels: tuple[str, str] = ("before", "after")
    fail_if_slower: float | None = None
    fail_if_layer_slower: float | None = None


@dataclass(frozen=True)
class CompareResult:
    """The comparison (with its gate when one was asked) and the *after* run holding it as its ``comparison``
    section (what ``compare -o`` writes)."""

    comparison: Comparison
    run: RunFile

    @property
    def regression(self) -> bool:
        """The gate found a regression."""
        return self.comparison.gate is not None and self.comparison.gate.regression

    def check(self) -> None:
        """Raise :class:`layerscope.errors.Regression` (exit 4) naming the first regression, when the gate found
        one."""
        failures = self.comparison.gate.failures if self.comparison.gate is not None else ()
        if failures:
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise Regression(f"regression: {failures[0]}{more}")


def compare(request: CompareRequest) -> CompareResult:
    """Compare ``request.before`` with ``request.after`` (:func:`layerscope.analysis.compare.compare_runs`) and
    apply the gate. ``OptionError`` for labels that are not two names or a negative threshold; ``RunFileError``
    for a file that is not a run."""
    names = [label.strip() for label in request.labels]
    if len(names) != 2 or not all(names):
        raise OptionError("--labels", "give two names separated by a comma, e.g. main,pr")
    for flag, value in (("--fail-if-slower", request.fail_if_slower),
                        ("--fail-if-layer-slower", request.fail_if_layer_slower)):
        if value is not None and not value >= 0:
            raise OptionError(flag, f"{value}: expected a percentage >= 0, e.g. 5")
    run_before, run_after = _typed(request.before), _typed(request.after)
    cmp = compare_runs(run_before, run_after, before_label=names[0], after_label=names[1])
    if request.fail_if_slower is not None or request.fail_if_layer_slower is not None:
        cmp = gate(cmp, request.fail_if_slower, request.fail_if_layer_slower)
    section = ComparisonSection.model_validate(comparison_section(cmp, run_before, run_after))
    return CompareResult(cmp, run_after.model_copy(update={"comparison": section, "tool": written_by("compare")}))


def _typed(run: PathLike | RunFile) -> RunFile:
    """A run given as a path (read and checked: ``RunFileError`` naming the file) or typed (as it is)."""
    from layerscope.runfile.io import load

    return run if isinstance(run, RunFile) else load(run)
