"""hbtool convert: any readable heartbeat format to csv, xlsx, parquet or the binary format."""

from __future__ import annotations

import os

import click

from .output import warn


@click.command()
@click.argument("src", metavar="IN")
@click.argument("out", metavar="[OUT]", required=False)
@click.option("-o", "--output", metavar="FILE",
              help="Write to FILE (the same as OUT); its suffix gives the format: .csv, .xlsx, .parquet, .hbt.")
@click.option("--to", "fmt", type=click.Choice(["csv", "xlsx", "parquet", "hbt"]),
              help="Output format (default: from the output's suffix; - writes csv to stdout).")
@click.option("-f", "--force", is_flag=True, help="Replace the output file if it exists.")
def convert(src, out, output, fmt, force):
    """Convert a heartbeat trace IN to OUT (or -o FILE), keeping every field OUT can hold.

    csv holds the beats; xlsx adds the lifecycle records in a sheet named
    _events; parquet and the binary .hbt format keep everything (parquet writes
    the tracer's waits to a second table beside OUT, OUT's name with .waits). IN may be - for
    standard input (any format); OUT may be - for csv on stdout. An existing
    output file is kept unless --force is given.

    \b
    Examples:
      hbtool convert sample_traces/jacobi-normal -o jacobi.xlsx
      hbtool convert legacy_run_dir/ run.parquet
      hbtool convert - -o run.hbt < run.csv
    """
    from ..errors import HbtoolError
    from ..io import heartbeat_writer, read_heartbeats, write_heartbeats

    if out is not None and output is not None:
        raise click.UsageError(f"the output is given twice ({out} and -o {output}): give one")
    out = out if out is not None else output
    if out is None:
        raise click.UsageError("no output: give OUT or -o FILE (- for csv on stdout)")
    if out == "-":
        if fmt not in (None, "csv"):
            raise click.UsageError(f"- (stdout) takes csv only; give a file name for {fmt}")
    else:
        target_format = heartbeat_writer(out, fmt)   # an unknown suffix is refused before the input is read
        if os.path.isdir(out):
            raise HbtoolError(f"{out}: is a directory; give a file name")
        if os.path.lexists(out) and not force:
            raise HbtoolError(f"{out}: exists; give --force to replace it")
        if target_format.name == "parquet":
            from ..io.tabular import waits_file_name

            beside = waits_file_name(out)   # where the trace's waits go, if it has any
            if os.path.lexists(beside) and not force:
                raise HbtoolError(f"{beside}: exists (the waits table of {out} goes there); "
                                  f"give --force to replace it")
    # a tracer trace is read in bounded memory: its beats are written a thread at a time
    trace = read_heartbeats(src, stream=True)
    warn(trace.warnings)
    target = fmt or ("csv" if out == "-" else None)
    written = write_heartbeats(trace, out, target)
    kind = target or out.rsplit(".", 1)[-1]
    if (kind == "csv" or out.endswith(".csv")) and len(trace.events):
        warn([f"csv holds beats only: {len(trace.events)} lifecycle records not written "
              f"(use .parquet, .xlsx or .hbt to keep them)"])
    if written:
        click.echo(
            f"hbtool: wrote {trace.beat_count()} beats of {len(trace.runs)} run(s) to {', '.join(written)}",
            err=True,
        )
