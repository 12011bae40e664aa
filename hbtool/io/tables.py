"""Reading a csv or parquet table that another tool wrote, with a cap on its rows.

A crafted or runaway table must not make hbtool allocate without bound: parquet
says its row count in its footer, csv is read one row past the cap.
"""

from __future__ import annotations

import os
import re
import zipfile
import zlib
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
            from pyarrow.lib import ArrowException

            df = pd.read_parquet(p)
            try:
                for c in df.columns:   # a damaged text column fails only when its values are made
                    if not pd.api.types.is_numeric_dtype(df[c]):
                        df[c].to_numpy()
            except ArrowException as e:
                raise ValueError(str(e)) from None
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


#: a cell's or row's reference in a worksheet's XML, and the sheet's dimension
_REF = re.compile(rb'<(?:c|row)\b[^>]*?\br="([A-Z]{0,3})(\d+)"|<dimension ref="[^":]*:([A-Z]{1,3})(\d+)"')
#: unpacked bytes a workbook may hold per byte of the file (xlsx tables pack 5-20x), plus a floor
WORKBOOK_RATIO, WORKBOOK_FLOOR = 200, 64 << 20


def _column(letters: bytes) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ch - 64
    return n


def check_workbook(path: str | os.PathLike, what: str = "an xlsx workbook") -> None:
    """Refuse a workbook that would make its parser allocate without bound: a member that does
    not unpack (or fails its CRC), more unpacked bytes than WORKBOOK_RATIO x the file, or a
    sheet whose cells reach further (rows x columns: the grid a parser allocates) than its XML
    could fill (one damaged digit of a cell reference, F3760 -> F37663760, asked for 13 GB)."""
    p = Path(path)
    budget = WORKBOOK_FLOOR + WORKBOOK_RATIO * p.stat().st_size
    total = 0
    try:
        with zipfile.ZipFile(p) as z:
            for info in z.infolist():
                sheet = info.filename.startswith("xl/worksheets/") and info.filename.endswith(".xml")
                rows = cols = size = 0
                tail = b""
                with z.open(info) as fh:
                    while chunk := fh.read(1 << 20):
                        size += len(chunk)
                        total += len(chunk)
                        if total > budget:
                            raise TraceFormatError(f"{path}: unpacks to more than {budget} bytes, "
                                                   f"{WORKBOOK_RATIO} times its size: not {what} hbtool reads")
                        if sheet:
                            for m in _REF.finditer(tail + chunk):
                                col, row = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
                                rows, cols = max(rows, int(row)), max(cols, _column(col) if col else 1)
                            tail = (tail + chunk)[-512:]
                if sheet and rows * max(cols, 1) > max(1 << 20, size // 4):
                    raise TraceFormatError(f"{path}: sheet {info.filename} reaches row {rows} and column {cols} "
                                           f"with {size} bytes of cells: a damaged cell reference; not {what}")
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
        raise TraceFormatError(f"{path}: not {what} ({reason(exc)})") from exc
