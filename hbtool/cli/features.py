"""hbtool features: the six features of seed 000 (and progress) per thread."""

from __future__ import annotations

import click

from .hsa_common import beats_option
from .output import emit, output_options

COLUMNS = ["run", "thread", "beats", "GTR", "LTR", "GHR", "LHR", "DTW", "LB", "progress", "reference", "na_reason"]


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="TRACE...")
@click.option("--reference", "ref", metavar="REF",
              help="Reference trace: its thread of the same number (else its median thread). "
                   "Default: each run's own median thread.")
@beats_option
@output_options
def features(paths, ref, beats, fmt):
    """GTR, LTR, GHR, LHR, DTW, LB_Keogh and progress of every thread against a reference.

    A thread with too few beats for the heart-rate window gets n/a and the reason.

    \b
    Examples:
      hbtool features sample_traces/jacobi-leak
      hbtool features run.xlsx --reference normal_run/ --format csv
    """
    from ..analyzers.diagnosis import features_table
    from .hsa_common import feature_rows, read_all

    trace = read_all(paths, beats=beats, stream=True)
    reference = read_all([ref], "reference", beats=beats, stream=True) if ref else None
    table = features_table(trace, reference=reference)
    rows = feature_rows(table, text=fmt == "text")
    cols = COLUMNS if fmt != "csv" else COLUMNS[:1] + ["process"] + COLUMNS[1:]
    emit(fmt, rows, cols, key="threads", headers={"na_reason": "n/a because"})
