"""Table helpers shared by every data model: empty frames, conforming columns, sorting."""

from __future__ import annotations

import numpy as np
import pandas as pd


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in columns.items()})


def _text(col: pd.Series | None, n: int) -> pd.Categorical:
    """A text column as a categorical of str ("" for missing)."""
    if col is None:
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""])
    if isinstance(col.dtype, pd.CategoricalDtype) and not col.isna().any() and all(
        isinstance(c, str) for c in col.cat.categories
    ):
        return col.array
    return pd.Categorical(col.astype(object).where(col.notna(), "").astype(str))


def conform(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Return df with exactly `columns`, in order, cast to their dtypes.

    Missing integer columns and integer fields missing from some rows are filled with -1
    (unknown), missing text with "".
    """
    out = {}
    n = len(df)
    for name, dtype in columns.items():
        col = df[name] if name in df.columns else None
        if dtype == "category":
            out[name] = _text(col, n)
        elif dtype == "object":
            out[name] = col.astype(object).to_numpy() if col is not None else np.full(n, "", dtype=object)
        elif col is not None:
            v = col.to_numpy()
            if np.dtype(dtype).kind in "iu" and v.dtype.kind in "fO":
                # rows that lack the field (NaN, None): -1, unknown, as for a missing column
                v = pd.to_numeric(col, errors="coerce").fillna(-1).to_numpy()
            out[name] = v.astype(dtype, copy=False)
        elif dtype == "int64":
            out[name] = np.full(n, -1, dtype=np.int64)
        else:
            out[name] = np.full(n, np.nan)
    return pd.DataFrame(out)


def sort_rows(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Stable sort by `keys` (categoricals by their text); no copy when already sorted."""
    arrays = []
    for k in reversed(keys):
        col = df[k]
        if isinstance(col.dtype, pd.CategoricalDtype):
            order = np.argsort(np.asarray(col.cat.categories, dtype=object).astype(str), kind="stable")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            codes = col.cat.codes.to_numpy()
            arrays.append(np.where(codes >= 0, rank[codes], -1))
        else:
            arrays.append(col.to_numpy())
    if _is_sorted(arrays[::-1]):
        return df.reset_index(drop=True)
    return df.take(np.lexsort(arrays)).reset_index(drop=True)


def _is_sorted(keys: list[np.ndarray]) -> bool:
    """True when rows are already in lexicographic order of `keys` (most significant first)."""
    if len(keys[0]) < 2:
        return True
    tie = np.ones(len(keys[0]) - 1, dtype=bool)
    for k in keys:
        a, b = k[:-1], k[1:]
        if (tie & (a > b)).any():
            return False
        tie &= a == b
        if not tie.any():
            return True
    return True
