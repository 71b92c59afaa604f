"""Options shared by several subcommands."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from layerscope.cli.outputs import OutputPath
from layerscope.runtimes import registry
from layerscope.runtimes.onnxruntime.session import OPT_LEVELS, PROVIDERS
from layerscope.workflows.common import Hooks, OptionError, PhaseUpdate, UsageConflict, command_runner, open_runtime

if TYPE_CHECKING:
    from layerscope.measure.runners import CommandRunner
    from layerscope.model import Graph
    from layerscope.runtimes.base import OpenRuntime

FC = TypeVar("FC", bound=Callable[..., object])

_DIMS_KEY = "layerscope.dims"


def _store_dims(ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> None:
    ctx.meta[_DIMS_KEY] = parse_dims(values)


def parse_dims(values: Iterable[str]) -> dict[str, int]:
    """``--dim NAME=V`` values to a mapping; malformed, non-positive or repeated names are errors."""
    dims: dict[str, int] = {}
    for text in values:
        name, sep, value = text.rpartition("=")
        if not sep or not name or not value.strip().isdigit() or int(value) <= 0:
            raise click.BadParameter(f"{text!r}: expected NAME=V with V a positive integer, e.g. batch=1",
                                     param_hint="--dim")
        if name in dims:
            raise click.BadParameter(f"dim {name!r} given twice", param_hint="--dim")
        dims[name] = int(value)
    return dims


def cli_dims() -> dict[str, int]:
    """The current command's ``--dim`` values (``{}`` outside a command or when none were given)."""
    ctx = click.get_current_context(silent=True)
    return dict(ctx.meta.get(_DIMS_KEY, {})) if ctx is not None else {}


def shape_option(fn: FC) -> FC:
    """``--shape NAME=DIMS`` (the command's ``shapes``) and ``--dim NAME=V`` (read with :func:`cli_dims`)."""
    fn = click.option(
        "--dim", "dims", multiple=True, metavar="NAME=V", expose_value=False, callback=_store_dims,
        help="Set a named input dim for the whole model, e.g. --dim batch=1 --dim sequence=512 (repeatable). "
             "Batch-like dims (batch, N, unk__*, ?) default to 1.")(fn)
    return click.option(
        "--shape", "shapes", multiple=True, metavar="NAME=DIMS",
        help="Fix an input's dims, e.g. --shape images=1x3x640x640 (repeatable).")(fn)


def print_shape_notes(graph: Graph) -> None:
    """On stderr (stdout may be JSON): the dims layerscope assumed, how many layers' shapes were executed."""
    from layerscope.model.shapes import shape_notes

    for line in shape_notes(graph.shape_source_counts(), graph.assumptions):
        click.echo(line, err=True)


def _phases(labels: Mapping[str, str], units: Mapping[str, str] | None = None
            ) -> AbstractContextManager[PhaseUpdate]:
    from layerscope.cli.progress import phase_progress  # rich's progress only for a command that measures

    return phase_progress(labels, units)


def _warning(text: str) -> None:
    click.echo(f"layerscope: warning: {text}", err=True)


#: How a use case speaks on the command line: shape notes and warnings on stderr, progress bars on a terminal.
CLI_HOOKS = Hooks(loaded=print_shape_notes, phases=_phases, warning=_warning)


@contextmanager
def usage_errors() -> Iterator[None]:
    """A use case's errors about options as click's own: an :class:`OptionError` as a bad value of its option, a
    :class:`UsageConflict` as a usage error (usage line, exit 2)."""
    try:
        yield
    except OptionError as exc:
        raise click.BadParameter(exc.detail, param_hint=exc.option) from None
    except UsageConflict as exc:
        raise click.UsageError(exc.message) from None


def target_option(fn: FC) -> FC:
    """``--target/-t NAME|FILE`` (default ``host``); given twice with different values: exit 2 naming both."""
    return _one_value_option("--target", "-t", default="host", metavar="NAME|FILE",
                             help="Hardware profile: a name from `layerscope targets` or a profile TOML file "
                                  "[default: host].")(fn)


def _one_value_option(*flags: str, default: str | None, **kwargs: Any) -> Callable[[FC], FC]:
    """An option that takes one value, refusing two different ones (:func:`single`)."""
    def decorate(fn: FC) -> FC:
        fn = click.option(*flags, multiple=True, callback=single, **kwargs)(fn)
        param = fn.__click_params__[-1]  # type: ignore[attr-defined]
        param.default_one = default
        return fn
    return decorate


def one_target_option(*, default: str | None, help: str) -> Callable[[FC], FC]:
    """``--target/-t`` with another default and help (``advise``: the run's target when not given)."""
    return _one_value_option("--target", "-t", default=default, metavar="NAME|FILE", help=help)
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
    """The runtime's intra-op thread count under ``flag``: ONNX Runtime's intra-op threads, OpenVINO's
    ``INFERENCE_NUM_THREADS`` (0: the runtime's default)."""
    return click.option(flag, default=0, show_default=True, type=click.IntRange(min=0),
                        help="Intra-op threads of the runtime: ONNX Runtime's intra-op threads, OpenVINO's "
                             "INFERENCE_NUM_THREADS (0: the runtime's default; 1 on a shared or noisy machine).")


def parse_shapes(values: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """``--shape`` values to a mapping; a repeated name is an error."""
    from layerscope.model import parse_shape_arg  # the model loader: not for commands that read run files

    shapes: dict[str, tuple[int, ...]] = {}
    for text in values:
        name, shape = parse_shape_arg(text)
        if name in shapes:
            raise click.BadParameter(f"input {name!r} given twice", param_hint="--shape")
        shapes[name] = shape
    return shapes


# --- one vocabulary: old spellings kept one release, repeated single-valued options refused -------------------------

_DEPRECATED_KEY = "layerscope.deprecated"


def deprecation_notice(old: str, new: str) -> None:
    """The one line on stderr that an old spelling still works this release."""
    click.echo(f"layerscope: warning: {old} is deprecated and will be removed in the next release; use {new}",
               err=True)


def deprecated_option(*flags: str, dest: str, new: str, value: object = None, **kwargs: Any) -> Callable[[FC], FC]:
    """A hidden old spelling of the option (or argument) ``dest``, spelled ``new`` now: when given, it prints
    :func:`deprecation_notice` and sets ``dest`` (to ``value`` when not ``None``, for a flag that became a
    choice). The command must be a :class:`Command`, which applies it; giving both spellings is a usage error."""
    def store(ctx: click.Context, param: click.Parameter, given: Any) -> None:
        if given is None or given is False or given == ():
            return
        old = "/".join(flags)
        deprecation_notice(old, new)
        ctx.meta.setdefault(_DEPRECATED_KEY, {})[dest] = (given if value is None else value, old, new)

    return click.option(*flags, f"deprecated_{dest}", expose_value=False, hidden=True, callback=store, **kwargs)


def output_option(*, help: str, dest: str = "json_out", metavar: str = "RUN.json",
                  allow_stdout: bool = False) -> Callable[[FC], FC]:
    """``-o/--output`` under ``dest``: where the command writes its main output, a run file unless ``help`` says
    otherwise (``allow_stdout``: ``-`` is stdout). ``--json`` is its deprecated spelling for one release
    (:func:`deprecated_option`), so the command must be a :class:`Command`."""
    def decorate(fn: FC) -> FC:
        fn = deprecated_option("--json", dest=dest, new="-o/--output", type=OutputPath(allow_stdout=allow_stdout),
                               default=None)(fn)
        return click.option("-o", "--output", dest, type=OutputPath(allow_stdout=allow_stdout), default=None,
                            metavar=metavar, help=help)(fn)
    return decorate


def html_option(of: str = "the run", note: str = "") -> Callable[[FC], FC]:
    """``--html OUT`` (``html_out``): also write the HTML report ``of`` the run the command made, as ``layerscope
    report`` renders it; ``note`` ends the help (what the report holds for this command)."""
    return click.option("--html", "html_out", type=OutputPath(), default=None, metavar="OUT",
                        help=f"Also write the self-contained HTML report of {of} (as `layerscope report` renders "
                             f"it{'; ' + note if note else ''}).")


class Command(click.Command):
    """A subcommand that applies its :func:`deprecated_option` values to the options they were renamed to."""

    def invoke(self, ctx: click.Context) -> Any:
        for dest, (value, old, new) in ctx.meta.get(_DEPRECATED_KEY, {}).items():
            source = ctx.get_parameter_source(dest)
            if source not in (None, click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP):
                raise click.UsageError(f"give {new} or the deprecated {old}, not both")
            ctx.params[dest] = value
        return super().invoke(ctx)


def single(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | None:
    """Callback of a ``multiple=True`` option that takes one value: two different values are a usage error
    (exit 2) naming both, instead of the last one silently winning; none gives the option's ``default_one``."""
    distinct = list(dict.fromkeys(values))
    flag = param.opts[0] if param.opts else param.name
    if len(distinct) > 1:
        raise click.BadParameter(f"given {len(distinct)} times ({', '.join(map(repr, distinct))}); this command "
                                 "takes one", param_hint=flag)
    if distinct:
        return distinct[0]
    default: str | None = getattr(param, "default_one", None)
    return default


_OPENVINO_KEY = "layerscope.openvino"
_OPENVINO_DEFAULTS = {"device": "CPU", "precision": "", "performance_hint": "LATENCY", "streams": 0}

class RuntimeChoice(click.Choice[str]):
    """``--backend``'s choices: the registry's (:func:`layerscope.runtimes.registry.choices`) when the option is
    parsed or its help shown, so a runtime registered after import is one."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return registry.choices()

    @choices.setter
    def choices(self, value: object) -> None:
        """The registry is the only source: what ``click.Choice`` sets is ignored."""


backend_option = click.option(
    "--backend", "backend_name", type=RuntimeChoice(), default=registry.DEFAULT,
    show_default=True, help="Runtime that measures: ONNX Runtime (--provider) or OpenVINO (--device ...).")


def _store_openvino(ctx: click.Context, param: click.Parameter, value: object) -> None:
    ctx.meta.setdefault(_OPENVINO_KEY, dict(_OPENVINO_DEFAULTS))[str(param.name)] = value


def openvino_options(fn: FC) -> FC:
    """``--device``, ``--precision``, ``--performance-hint``, ``--streams`` (used with ``--backend openvino``;
    read with :func:`selected_backend`)."""
    fn = click.option("--streams", "streams", default=0, show_default=True, type=click.IntRange(min=0),
                      expose_value=False, callback=_store_openvino,
                      help="OpenVINO: concurrent inference streams on the device, NUM_STREAMS (0: what the "
                           "performance hint chooses).")(fn)
    return openvino_bench_options(fn)


def openvino_bench_options(fn: FC) -> FC:
    """``--device``, ``--precision``, ``--performance-hint`` (used with ``--backend openvino``; read with
    :func:`selected_backend`). ``bench`` has its own ``--streams``: concurrent requests, one per stream."""
    from layerscope.runtimes.openvino.compile import PERFORMANCE_HINTS, PRECISIONS

    for decorator in (
        click.option("--performance-hint", "performance_hint", default="LATENCY", show_default=True,
                     type=click.Choice(PERFORMANCE_HINTS, case_sensitive=False), expose_value=False,
                     callback=_store_openvino, help="OpenVINO: PERFORMANCE_HINT."),
        click.option("--precision", "precision", default="", type=click.Choice(PRECISIONS, case_sensitive=False),
                     expose_value=False, callback=_store_openvino,
                     help="OpenVINO: INFERENCE_PRECISION_HINT [default: the device's, bf16 where the CPU has it]."),
        click.option("--device", "device", default="CPU", show_default=True, metavar="CPU|GPU|NPU|AUTO",
                     expose_value=False, callback=_store_openvino,
                     help="OpenVINO device; one this installation does not see exits 3 naming those present."),
    ):
        fn = decorator(fn)
    return fn


def openvino_values() -> dict[str, Any]:
    """The current command's OpenVINO options (``device``, ``precision``, ``performance_hint``, ``streams``;
    their defaults outside a command)."""
    ctx = click.get_current_context(silent=True)
    values = dict(_OPENVINO_DEFAULTS)
    if ctx is not None:
        values.update(ctx.meta.get(_OPENVINO_KEY, {}))
    return values


def selected_backend(name: str, provider: str) -> OpenRuntime:
    """The measuring runtime of ``--backend`` opened with the options it reads: ``--provider`` for ONNX Runtime,
    ``--device`` (with the other OpenVINO options) for OpenVINO; its ``provider`` is what its sessions use. Exit 3
    when it is not available."""
    values = openvino_values()
    return open_runtime(name, provider, device=str(values["device"]), precision=str(values["precision"]),
                        performance_hint=str(values["performance_hint"]), streams=int(str(values["streams"])))


_DEVICE_COMMAND_KEY = "layerscope.device_command"


def _store_device_command(ctx: click.Context, param: click.Parameter, value: object) -> None:
    ctx.meta.setdefault(_DEVICE_COMMAND_KEY, {})[str(param.name)] = value


def device_command_options(*, what: str, condition: str = "") -> Callable[[FC], FC]:
    """``--run-cmd``, ``--compile-cmd``, ``--latency-regex``, ``--latency-json``, ``--latency-unit`` and
    ``--timeout``: time each ``what`` (a prefix, a kernel) on a device with a shell command; read with
    :func:`device_command`. ``condition`` (e.g. ``"With --kernels: "``) starts the help of the first two."""
    from layerscope.measure.runners import UNITS

    def store(*flags: str, help: str, **kwargs: Any) -> Callable[[FC], FC]:
        return click.option(*flags, expose_value=False, callback=_store_device_command, help=help, **kwargs)

    def lead(text: str) -> str:  # "Time ..." alone, "With --kernels: time ..." after a condition
        return condition + (text[0].lower() + text[1:] if condition else text)

    decorators = (
        store("--run-cmd", "run_cmd", metavar="TEMPLATE", default=None,
              help=lead(f"Time each {what} on a device with this shell command, e.g. ")
                   + "'compile {model} -o {compiled} && ssh board perf {compiled}'. Placeholders: {model} (the "
                   f"{what} .onnx), {{compiled}} (a path for the compiled file), {{out}} (a file to write the "
                   f"report to; read instead of the output), {{dir}} (the {what}'s folder)."),
        store("--compile-cmd", "compile_cmd", metavar="TEMPLATE", default=None,
              help=lead(f"Run once per {what} before its first --run-cmd (same placeholders).")),
        store("--latency-regex", "latency_regex", metavar="RE", default=None,
              help="With --run-cmd: read the latency from the command's output: the last match, its group "
                   "'latency' or first group (a group 'unit' may give the unit), e.g. "
                   "'average latency: ([0-9.]+) ms'."),
        store("--latency-json", "latency_json", metavar="FIELD", default=None,
              help="With --run-cmd: read the latency from the JSON the command prints, at this dotted path "
                   "(e.g. perf.avg_ms)."),
        store("--latency-unit", "latency_unit", type=click.Choice(list(UNITS)), default="ms", show_default=True,
              help="With --run-cmd: unit of the number read, unless the regex has a 'unit' group."),
        store("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None, metavar="S",
              help="With --run-cmd: kill a device command that runs longer than S seconds (exit 3)."),
    )

    def decorate(fn: FC) -> FC:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return decorate


def device_command_values() -> dict[str, Any]:
    """The current command's :func:`device_command_options` values by destination (``run_cmd``, ``compile_cmd``,
    ``latency_regex``, ``latency_json``, ``latency_unit``, ``timeout_s``)."""
    values: dict[str, Any] = {"run_cmd": None, "compile_cmd": None, "latency_regex": None, "latency_json": None,
                              "latency_unit": "ms", "timeout_s": None}
    values.update(click.get_current_context().meta.get(_DEVICE_COMMAND_KEY, {}))
    return values


def device_command() -> CommandRunner | None:
    """The command runner :func:`device_command_options` describe, or ``None`` without ``--run-cmd``; the options
    are checked first (exit 2: one of the others without ``--run-cmd``, a bad template or reader)."""
    values = device_command_values()
    with usage_errors():
        return command_runner(values["run_cmd"], values["compile_cmd"], latency_regex=values["latency_regex"],
                              latency_json=values["latency_json"], latency_unit=values["latency_unit"] or "ms",
                              timeout_s=values["timeout_s"])
