"""hbtool convert: any readable heartbeat format to csv, xlsx, parquet or the binary format."""

from __future__ import annotations

import click

from .output import warn


@click.command()
@click.argument("src", metavar="IN")
@click.argument("out", metavar="OUT")
@click.option("--to", "fmt", type=click.Choice(["csv", "xlsx", "parquet", "hbt"]),
              help="Output format (default: from OUT's suffix; - writes csv to stdout).")
def convert(src, out, fmt):
    """Convert a heartbeat trace IN to OUT, keeping every field OUT can hold.

    csv holds the beats; xlsx adds the lifecycle records in a sheet named
    _events; parquet and the binary .hbt format keep everything.

    \b
    Examples:
      hbtool convert sample_traces/jacobi-normal jacobi.xlsx
      hbtool convert legacy_run_dir/ run.parquet
      hbtool convert run.csv run.hbt
    """
    from ..io import read_heartbeats, write_heartbeats

    if out == "-" and fmt not in (None, "csv"):
        raise click.UsageError(f"- (stdout) takes csv only; give a file name for {fmt}")
    trace = read_heartbeats(src)
    warn(trace.warnings)
    target = fmt or ("csv" if out == "-" else None)
    written = write_heartbeats(trace, out, target)
    kind = target or out.rsplit(".", 1)[-1]
    if (kind == "csv" or out.endswith(".csv")) and len(trace.events):
        warn([f"csv holds beats only: {len(trace.events)} lifecycle records not written "
              f"(use .parquet, .xlsx or .hbt to keep them)"])
    if written:
        click.echo(
            f"hbtool: wrote {len(trace.beats)} beats of {len(trace.runs)} run(s) to {', '.join(written)}",
            err=True,
        )
