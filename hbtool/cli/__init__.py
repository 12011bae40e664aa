"""hbtool command line.

Subcommands are imported only when they run, so that ``hbtool --help`` stays
fast. Library errors become one line on stderr and exit status 2 here, at the
edge, and nowhere else.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from .. import __version__
from ..errors import HbtoolError

#: name -> (module, function, one-line help); the module is imported on use
COMMANDS = {
    "diagnose": ("hbtool.cli.diagnose", "diagnose", "Which thread misbehaved, and how: normal, memoryleak, shutdown."),
    "features": ("hbtool.cli.features", "features", "The HSA features of every thread against a reference."),
    "train": ("hbtool.cli.train", "train", "Learn the normal ranges of the features; write a model."),
    "evaluate": ("hbtool.cli.evaluate", "evaluate", "Macro-F1 of the diagnosis on a labelled data set."),
    "behavior": ("hbtool.cli.behavior", "behavior", "Per thread: running, busy-waiting, waiting, exited, failed, and when."),
    "interference": ("hbtool.cli.interference", "interference", "How much of an MPI run's time was lost to outside interference."),
    "service-rate": ("hbtool.cli.service_rate", "service_rate", "How fast each pipeline stage could go if nothing blocked it."),
    "probes": ("hbtool.cli.probes", "probes", "Calls and time of every timing probe, per thread and merged."),
    "status": ("hbtool.cli.status", "status", "The machine's CPU, memory, swap and network over the run."),
    "info": ("hbtool.cli.info", "info", "Beats, time span, heart rate and ending of every thread."),
    "convert": ("hbtool.cli.convert", "convert", "Convert a trace between csv, xlsx, parquet and the binary format."),
    "plot": ("hbtool.cli.plot", "plot", "Draw the heart rate of every thread over time to a PNG."),
    "record": ("hbtool.cli.record", "record", "Run a program under the heartbeat tracer."),
    "config": ("hbtool.cli.config_cmd", "config", "Where the tracer is, its build flags and its environment."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, help_) for name, (_, _, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hbtool")
def cli():
    """Offline trace analyzer for parallel programs (OpenMP, pthreads, MPI).

    \b
    Examples:
      hbtool record -o trace/ -- ./jacobi_omp --threads 4
      hbtool info trace/
      hbtool plot trace/ -o heart.png
    """


def _error(message: str) -> None:
    """One line on stderr, whatever the message holds (a parser's text may end in newlines), with
    the warnings said before the failure counted in it, the first quoted (it often says why)."""
    from .output import take_warnings

    before = take_warnings()
    if before:
        message += f" (after {len(before)} warning{'s' if len(before) > 1 else ''}, the first: {before[0]})"
    one = " ".join(part.strip() for part in message.splitlines() if part.strip())
    click.echo(f"hbtool: error: {one}", err=True)


def _broken_pipe() -> None:
    """The reader of our stdout went away (| head): quietly stop."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    sys.exit(0)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: exit status 0 ok, 2 bad input or usage, else the command's own."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args:  # bare `hbtool`: what `hbtool --help` does, not a usage error
        args = ["--help"]
    from .output import show_warnings

    try:
        rv = cli.main(args=args, prog_name="hbtool", standalone_mode=False)
        show_warnings()
    except click.UsageError as exc:
        cmd = exc.ctx.command_path if exc.ctx else "hbtool"
        _error(f"{exc.format_message()} (see '{cmd} --help')")
        sys.exit(2)
    except click.ClickException as exc:
        _error(exc.format_message())
        sys.exit(exc.exit_code if exc.exit_code else 2)
    except HbtoolError as exc:
        _error(str(exc))
        sys.exit(exc.exit_code)
    except click.Abort:
        _error("interrupted")
        sys.exit(130)
    except KeyboardInterrupt:
        _error("interrupted")
        sys.exit(130)
    except SystemExit:  # a command's own exit status
        show_warnings()
        raise
    except BrokenPipeError:
        _broken_pipe()
    except OSError as exc:  # the file system said no: a path the user gave, not a bug
        where = exc.filename or ""
        _error(f"{where + ': ' if where else ''}{exc.strerror or exc}")
        sys.exit(2)
    except Exception as exc:  # a bug, not bad input: say so in one line, keep the traceback on request
        if os.environ.get("HBTOOL_DEBUG"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc} (please report it; HBTOOL_DEBUG=1 shows the traceback)")
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
