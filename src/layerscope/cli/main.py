"""The ``layerscope`` command: a click group, one module per subcommand.

``main(argv)`` returns the exit code: 0 success, 1 a failure of ours, 2 bad input, 3 an unavailable
backend or device. Errors print one line on stderr; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from layerscope import __version__
from layerscope.errors import LayerscopeError

#: Subcommand name -> the module defining it as ``command``. Modules are imported only when their
#: command runs (or help lists them), so ``layerscope estimate`` does not pay for onnxruntime or Jinja.
SUBCOMMANDS: dict[str, str] = {
    "advise": "layerscope.cli.advise",
    "backends": "layerscope.cli.backends",
    "bench": "layerscope.cli.bench",
    "bisect": "layerscope.cli.bisect",
    "calibrate": "layerscope.cli.calibrate",
    "compare": "layerscope.cli.compare",
    "estimate": "layerscope.cli.estimate",
    "import": "layerscope.cli.import_cmd",
    "lint": "layerscope.cli.lint",
    "pipeline": "layerscope.cli.pipeline",
    "profile": "layerscope.cli.profile",
    "reconcile": "layerscope.cli.reconcile",
    "report": "layerscope.cli.report",
    "schema": "layerscope.cli.schema",
    "targets": "layerscope.cli.targets",
}


class _LazyGroup(click.Group):
    """A group whose subcommands are imported from :data:`SUBCOMMANDS` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = SUBCOMMANDS.get(cmd_name)
        if module is None:
            return None
        command = importlib.import_module(module).command
        assert isinstance(command, click.Command), module
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="layerscope")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """Where the inference time of a neural network goes, layer by layer, on the device it runs on."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="layerscope", standalone_mode=False)
    except LayerscopeError as exc:
        if debug:
            raise
        click.echo(f"layerscope: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        if debug:
            raise
        exc.show()
        return 2
    except click.Abort:
        click.echo("layerscope: interrupted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("layerscope: interrupted", err=True)
        return 130
    except Exception as exc:
        if debug:
            raise
        click.echo(f"layerscope: internal error: {type(exc).__name__}: {exc} (rerun with --debug and "
                   "report it)", err=True)
        return 1
    return 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
