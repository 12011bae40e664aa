"""Shared by features, train, diagnose and evaluate: read traces, compute feature tables."""

from __future__ import annotations

import pandas as pd

from .output import warn
from .progress import progress


def read_all(paths, label="reading"):
    from ..io import read_heartbeats
    from ..model import HeartbeatTrace

    traces = []
    with progress(paths, label) as bar:
        for p in bar:
            traces.append(read_heartbeats(p))
    trace = traces[0] if len(traces) == 1 else HeartbeatTrace.concat(traces)
    warn(trace.warnings)
    if not len(trace.beats):
        from ..errors import HbtoolError

        raise HbtoolError(f"{', '.join(map(str, paths))}: the trace holds no heartbeats: nothing to analyse")
    return trace


def feature_rows(table: pd.DataFrame, text: bool = False) -> list[dict]:
    """Rows for output: NaN features as None, the reason a thread has none."""
    from ..analyzers.features import FEATURES

    rows = []
    for r in table.to_dict(orient="records"):
        out = {k: r[k] for k in ("run", "process", "thread", "beats", "reference")}
        for f in FEATURES:
            out[f] = r[f]
        out["na_reason"] = r["na_reason"] or ("" if text else None)
        out["ended"] = r.get("ended", "")
        rows.append(out)
    return rows
