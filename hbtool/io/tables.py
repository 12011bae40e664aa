"""Reading a csv or parquet table that another tool wrote, with a cap on its rows.

A crafted or runaway table must not make hbtool allocate without bound: parquet
says its row count in its footer, csv is read one row past the cap.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..errors import TraceFormatError, reason
from .registry import MAGIC_PARQUET, head, refuse_holes


def read_capped_table(path: str | os.PathLike, max_rows: int, what: str) -> pd.DataFrame:
    """The table at `path` (parquet by magic or suffix, else csv) with at most `max_rows`
    rows; `what` names it in errors ("segment table", "sample table")."""
    p = Path(path)
    try:
        if p.suffix.lower() in (".parquet", ".pq") or head(p, 4) == MAGIC_PARQUET:
            import pyarrow.parquet as pq

            rows = pq.ParquetFile(p).metadata.num_rows
            if rows > max_rows:
                raise TraceFormatError(f"{path}: {rows} rows, more than the {max_rows} hbtool reads")
            df = pd.read_parquet(p)
        else:
            refuse_holes(p, f"a csv {what}")
            df = pd.read_csv(p, nrows=max_rows + 1, engine="c", low_memory=False)
    except TraceFormatError:
        raise
    except (ValueError, OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise TraceFormatError(f"{path}: not a readable {what} ({reason(e)})") from None
    if len(df) > max_rows:
        raise TraceFormatError(f"{path}: more than the {max_rows} rows hbtool reads")
    return df
