"""Long-format heartbeat tables: csv, xlsx (one run per sheet) and parquet.

One row per beat. Column names are matched case-insensitively (spaces and
dashes count as underscores) against the aliases below; docs/formats.md lists
them. Lifecycle events travel in the xlsx sheet ``_events`` and in the parquet
key-value metadata ``hbtool.events``; csv holds beats only.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from pathlib import Path
from warnings import catch_warnings, simplefilter

import numpy as np
import pandas as pd

from .. import config
from ..errors import TraceFormatError, reason
from ..model import BEAT_COLUMNS, EVENT_COLUMNS, WAIT_COLUMNS, HeartbeatTrace, conform, empty_frame
from ..model.frames import sort_rows
from ..model.heartbeats import StreamedTrace
from .registry import ReadOptions, refuse_holes
from .tables import check_workbook

# target column -> accepted names (first match wins, in this order)
ALIASES: dict[str, tuple[str, ...]] = {
    "run": ("run", "run_id", "run_name"),
    "process": ("process", "rank", "mpi_rank", "proc"),
    "thread": ("thread", "thread_id", "tid", "threadnum", "thread_num", "thread_number", "pthreadnum", "threadid"),
    "seq": ("seq", "beat", "beat_id", "beat_seq", "beat_number", "sequence"),
    "loop": ("loop", "loopnum", "loop_num"),
    "iteration": ("iteration", "iter", "iteration_num", "iterations"),
    "tag": ("tag",),
    "os_tid": ("os_tid", "ostid", "lwp"),
    "label": ("label",),
    "source": ("source", "beat_source"),
    "construct": ("construct",),
}
# time columns: name -> factor to nanoseconds, in order of preference
TIME_COLUMNS: tuple[tuple[str, float], ...] = (
    ("t_ns", 1.0), ("time_ns", 1.0), ("timestamp_ns", 1.0),
    ("t", 1e9), ("t_s", 1e9), ("time", 1e9), ("time_s", 1e9), ("seconds", 1e9), ("timestamp_s", 1e9),
    ("elapsed_s", 1e9),
    ("t_us", 1e3), ("time_us", 1e3), ("timestamp_us", 1e3),
    ("t_ms", 1e6), ("time_ms", 1e6), ("timestamp_ms", 1e6),
    ("timestamp", 1.0),  # the seed tracer's Timestamp is in ns
)
EVENTS_SHEET = "_events"
PARQUET_EVENTS_KEY = b"hbtool.events"
PARQUET_WAITS_KEY = b"hbtool.waits"   # the waits themselves (files written before 2026-12-02)
PARQUET_WAITS_FILE_KEY = b"hbtool.waits_file"   # the waits table's file name, beside the beats'
PARQUET_WAITS_OF_KEY = b"hbtool.waits_of"       # in a waits table: its beats table's file name
PARQUET_RUNS_KEY = b"hbtool.runs"
XLSX_MAX_ROWS = 1_048_575
_EPOCH_LIKE_S = 86_400.0  # times above a day are absolute clocks: rebase to the run's first beat


def _norm(name) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _find(cols: dict[str, str], names) -> str | None:
    for n in names:
        if n in cols:
            return cols[n]
    return None


def usable_columns(columns) -> bool:
    cols = {_norm(c) for c in columns}
    return any(n in cols for n, _ in TIME_COLUMNS)


def _text_column(col: pd.Series, fix=None) -> pd.Series:
    """col.astype(str) (then `fix`, a function of a Series of str), as a categorical whose
    categories are in text order (it sorts as the strings would): made per distinct value,
    not per row (a column of 2 M strings as Python objects took hundreds of MB); a value
    that stays missing is missing."""
    codes, uniques = pd.factorize(col, use_na_sentinel=False)
    labels = pd.Series(uniques).astype(str)
    if fix is not None:
        labels = fix(labels)
    missing = labels.isna().to_numpy()
    cats, inv = np.unique(labels[~missing].to_numpy(dtype=object).astype(str), return_inverse=True)
    to_code = np.full(len(labels) + 1, -1, dtype=np.int64)
    to_code[np.flatnonzero(~missing)] = inv
    return pd.Series(pd.Categorical.from_codes(to_code[codes], categories=cats.tolist()), index=col.index)


def normalise(df: pd.DataFrame, default_run: str, source: str, warnings: list[str]) -> pd.DataFrame:
    """Map a long-format table onto BEAT_COLUMNS (raises TraceFormatError when unusable)."""
    cols = {}
    for c in df.columns:
        cols.setdefault(_norm(c), c)
    tcol = factor = None
    for name, f in TIME_COLUMNS:
        if name in cols:
            tcol, factor = cols[name], f
            break
    if tcol is None:
        raise TraceFormatError(
            f"{source}: no time column (looked for t_ns, time_ns, t, time, t_s, timestamp, ...; "
            f"found {', '.join(map(str, list(df.columns)[:8])) or 'no columns'}): see docs/formats.md"
        )
    out = pd.DataFrame(index=df.index)
    raw_t = df[tcol]
    if pd.api.types.is_datetime64_any_dtype(raw_t) or pd.api.types.is_timedelta64_dtype(raw_t):
        # a clock column with its own unit: as ns, whatever the name says
        factor = 1.0
        raw_t = raw_t.dt.tz_localize(None) if getattr(raw_t.dt, "tz", None) is not None else raw_t
        t = pd.Series(raw_t.to_numpy().astype("datetime64[ns]" if pd.api.types.is_datetime64_any_dtype(raw_t)
                                             else "timedelta64[ns]").astype(np.int64), index=df.index, dtype="float64")
        t[raw_t.isna().to_numpy()] = np.nan
    else:
        t = pd.to_numeric(raw_t, errors="coerce")
    bad = t.isna() | ~np.isfinite(t.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():   # (a copy of the whole table only when rows go)
        warnings.append(f"{source}: {int(bad.sum())} rows without a valid time skipped")
        keep = ~bad
        df, t = df[keep], t[keep]
        out = out[keep]
    tf = t.astype(float) * factor
    if (tf.abs() >= 2.0**62).any():
        raise TraceFormatError(f"{source}: times beyond 146 years in column '{tcol}': not a heartbeat clock")
    if factor == 1.0 and pd.api.types.is_integer_dtype(t):
        t_ns = t.astype(np.int64)
    else:
        t_ns = np.round(tf).astype(np.int64)
    out["t_ns"] = t_ns
    for target, names in ALIASES.items():
        col = _find(cols, names)
        if col is None:
            continue
        if target in ("run", "label", "construct"):
            out[target] = _text_column(df[col])
            continue
        if target == "source":
            out[target] = _text_column(df[col], lambda v: v.str.strip().str.lower().replace({"": "api", "nan": "api"}))
            continue
        vals = pd.to_numeric(df[col], errors="coerce")
        if target == "thread":
            missing = df[col].isna().to_numpy()
            if missing.any() and not (vals.isna().to_numpy() & ~missing).any():
                # numbers with a few blanks: keep the numbers, drop the rows without a thread
                warnings.append(f"{source}: {int(missing.sum())} rows without a thread skipped")
                keep2 = ~missing
                df, vals, out = df[keep2], vals[keep2], out[keep2]
        if target in ("thread", "process", "loop", "iteration", "tag", "os_tid", "seq") and vals.notna().any():
            finite = vals.dropna()
            if (finite.abs() >= 2.0**31 if target in ("thread", "process") else finite.abs() >= 2.0**62).any():
                raise TraceFormatError(f"{source}: column '{col}' holds numbers too large for a {target} id")
        if target == "thread" and vals.isna().any():
            # thread names ("worker-1"): number them in order of appearance, keep the name as label
            codes, names_ = pd.factorize(df[col].astype(str))
            out["thread"] = codes
            out["label"] = df[col].astype(str)
            warnings.append(f"{source}: thread column holds names; threads numbered in order of appearance")
            continue
        out[target] = vals.fillna(-1).astype(np.int64)
    if "thread" not in out:
        warnings.append(f"{source}: no thread column (thread, thread_id, tid, ...): all beats taken as thread 0")
        out["thread"] = 0
    if "run" not in out:
        out["run"] = default_run
    if "process" not in out:
        out["process"] = 0
    # absolute clocks (epoch ns, raw monotonic): rebase each run to its first beat
    firsts = out.groupby("run", observed=True)["t_ns"].transform("min")
    if (firsts > _EPOCH_LIKE_S * 1e9).any():
        warnings.append(f"{source}: times look absolute; each run is shifted to start at its first beat")
        out["t_ns"] = out["t_ns"] - firsts.where(firsts > _EPOCH_LIKE_S * 1e9, 0)
    out["t"] = out["t_ns"] / 1e9
    out = sort_rows(out, ["run", "process", "thread", "t_ns"])   # (no copy when sorted already)
    if "seq" not in out:
        out["seq"] = out.groupby(["run", "process", "thread"]).cumcount()
    return out


def _split_events(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Rows whose `event` column is not 'beat' are lifecycle events."""
    cols = {_norm(c): c for c in df.columns}
    ev = cols.get("event")
    if ev is None:
        return df, None
    isbeat = df[ev].astype(str).str.lower().isin(["beat", "", "nan"])
    return df[isbeat], df[~isbeat]


def _events_frame(raw: pd.DataFrame | None, default_run: str) -> pd.DataFrame | None:
    if raw is None or not len(raw):
        return None
    e = pd.DataFrame({_norm(c): raw[c].to_numpy() for c in raw.columns})
    if "event" in e and "kind" not in e:
        e["kind"] = e["event"]
    if "run" not in e:
        e["run"] = default_run
    if "t_ns" not in e and "t" in e:
        e["t_ns"] = np.round(pd.to_numeric(e["t"], errors="coerce") * 1e9)
    e["t_ns"] = pd.to_numeric(e.get("t_ns"), errors="coerce").fillna(0).astype(np.int64)
    e["t"] = e["t_ns"] / 1e9
    for c in ("process", "os_tid", "thread", "detail", "flags"):
        if c in e:
            e[c] = pd.to_numeric(e[c], errors="coerce").fillna(-1 if c in ("os_tid", "thread") else 0).astype(np.int64)
    return conform(e, EVENT_COLUMNS)


def _trace(beats: pd.DataFrame, events: pd.DataFrame | None, fmt: str, source: str,
           warnings: list[str], runs_meta: dict | None = None) -> HeartbeatTrace:
    runs = {}
    for run in pd.unique(beats["run"]):
        meta = dict((runs_meta or {}).get(run, {}))
        meta.update({"format": fmt, "source": source})
        meta.setdefault("lifecycle", False)
        runs[run] = meta
    if events is None:
        events = conform(pd.DataFrame(), EVENT_COLUMNS)
    return HeartbeatTrace(beats=beats, events=events, runs=runs, warnings=warnings)


# --------------------------------------------------------------------------- readers


def read_csv(path: Path, options: ReadOptions) -> HeartbeatTrace:
    """A csv table of beats."""
    src = os.fspath(path)
    warnings: list[str] = []
    refuse_holes(path, "a csv table")
    try:
        with catch_warnings(record=True) as said:  # a column of mixed types: normalise checks each value
            simplefilter("always", pd.errors.ParserWarning)
            simplefilter("ignore", pd.errors.DtypeWarning)
            # index_col=False: a row with more fields than the header is cut to the header (pandas
            # would otherwise make the surplus leading fields an index of that many levels: a
            # row of 5,000 commas took minutes), and says so
            df = pd.read_csv(src, index_col=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise TraceFormatError(f"{src}: not a readable csv table ({reason(exc)})") from exc
    if any(issubclass(w.category, pd.errors.ParserWarning) for w in said):
        warnings.append(f"{src}: rows with more fields than the header: the fields past the header's "
                        f"{len(df.columns)} columns were left out")
    run = Path(src).stem
    beats_raw, ev_raw = _split_events(df)
    beats = normalise(beats_raw, run, src, warnings)
    return _trace(beats, _events_frame(ev_raw, run), "csv", src, warnings)


def read_parquet(path: Path, options: ReadOptions) -> HeartbeatTrace:
    import pyarrow.parquet as pq

    path = os.fspath(path)
    if options.stream:   # beats left in the file where the table is laid out for it
        from .parquet_stream import read_parquet_stream

        streamed = read_parquet_stream(path)
        if streamed is not None:
            return streamed
    warnings: list[str] = []
    try:
        table = pq.read_table(path)
        table.validate(full=True)   # text that is not UTF-8 fails here, not when its values are made
        meta = table.schema.metadata or {}
        # (each column's buffers freed as it is converted: the table and the frame are not held
        # whole at once)
        df = table.to_pandas(split_blocks=True, self_destruct=True)
        del table
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError for corrupt files
        raise TraceFormatError(f"{path}: not a readable parquet file ({reason(exc)})") from exc
    if PARQUET_WAITS_OF_KEY in meta:
        beats_name = meta[PARQUET_WAITS_OF_KEY].decode("utf-8", "replace")[:255]
        raise TraceFormatError(f"{path}: the waits table of the beats table {beats_name}, not beats: "
                               f"give {beats_name}, which reads this table beside it")
    run = Path(path).stem
    beats = normalise(df, run, path, warnings)
    events = None
    runs_meta = None
    waits = None
    try:
        if PARQUET_EVENTS_KEY in meta:
            events = _events_frame(pd.DataFrame(json.loads(meta[PARQUET_EVENTS_KEY])), run)
        if PARQUET_RUNS_KEY in meta:
            runs_meta = json.loads(meta[PARQUET_RUNS_KEY])
        if PARQUET_WAITS_FILE_KEY in meta:
            waits = _read_waits_table(path, meta[PARQUET_WAITS_FILE_KEY], warnings)
        elif PARQUET_WAITS_KEY in meta:
            waits = pd.DataFrame(json.loads(meta[PARQUET_WAITS_KEY]))
        if waits is not None:
            if not {"t_ns", "wait_ns", "process", "thread"} <= set(waits.columns):
                raise ValueError("waits without their times")
            numbers = {c: pd.to_numeric(waits[c], errors="coerce") for c in ("t_ns", "wait_ns", "process", "thread")}
            bad = numbers["wait_ns"].lt(0) | numbers["t_ns"].abs().gt(config.MAX_TRACE_SPAN_NS) \
                | numbers["wait_ns"].gt(config.MAX_TRACE_SPAN_NS)
            for c in numbers.values():
                bad |= c.isna() | ~np.isfinite(c.astype(np.float64))
            if bad.any():
                warnings.append(f"{path}: {int(bad.sum())} of {len(waits)} waits without a valid time, length, "
                                f"process or thread, left out")
                waits = waits[~bad.to_numpy()].copy()
            for c, v in numbers.items():
                waits[c] = v[~bad].astype(np.int64).to_numpy()
            waits["t"] = waits["t_ns"] / 1e9
    except (ValueError, TypeError, RecursionError) as exc:
        warnings.append(f"{path}: hbtool metadata unreadable, ignored ({reason(exc)})")
        waits = None
    trace = _trace(beats, events, "parquet", path, warnings, runs_meta)
    if waits is not None and len(waits):
        if "run" not in waits:
            waits["run"] = run
        trace.waits = conform(waits, WAIT_COLUMNS)
    return trace


def waits_table_path(path: str, name: bytes) -> Path:
    """Where the waits table a parquet table of beats names (its metadata's file name) lies:
    beside it; ValueError for a name that is no plain file name (it could lead elsewhere)."""
    text = name.decode("utf-8", "replace")
    if not text or len(text) > 255 or "/" in text or "\\" in text or text in (".", ".."):
        raise ValueError(f"waits table name {text[:64]!r} is not a file name")
    return Path(path).with_name(text)


def _read_waits_table(path: str, name: bytes, warnings: list[str]) -> pd.DataFrame | None:
    """The waits table a parquet table of beats names (its file name, looked for beside it),
    or None, with a warning, when it is not there."""
    from .tables import read_capped_table

    where = waits_table_path(path, name)
    text = where.name
    if not where.is_file():
        warnings.append(f"{path}: its waits table {text} is not beside it: read without the waits "
                        f"(time the threads waited in the runtime counts as their work); "
                        f"keep {text} with it")
        return None
    waits = read_capped_table(where, config.MAX_WAIT_ROWS, "waits table")
    missing = [n for n, _ in WAITS_TABLE if n not in waits.columns]
    if missing:
        raise ValueError(f"its waits table {text} has no column {', '.join(missing)}")
    return waits


def read_xlsx(path: Path, options: ReadOptions) -> HeartbeatTrace:
    """A workbook: legacy per-thread columns (one thread's beats), else the long format."""
    from .legacy import looks_like_legacy_columns, read_legacy

    sheets = read_workbook(os.fspath(path))
    first = next(iter(sheets.values()), None)
    if first is not None and looks_like_legacy_columns(first.columns):
        return read_legacy([path], run=path.stem)
    return read_xlsx_long(os.fspath(path), sheets)


def read_xlsx_long(path: str, sheets: dict[str, pd.DataFrame] | None = None) -> HeartbeatTrace:
    """Long-format workbook: one run per sheet (sheet name = run unless a run column says)."""
    warnings: list[str] = []
    if sheets is None:
        sheets = read_workbook(path)
    stem = Path(path).stem
    data = {k: v for k, v in sheets.items() if k != EVENTS_SHEET}
    frames = []
    for name, df in data.items():
        if not len(df.columns) or not usable_columns(df.columns):
            warnings.append(f"{path}: sheet '{name}' has no usable columns, skipped")
            continue
        run = stem if len(data) == 1 else str(name)
        frames.append(normalise(df, run, f"{path} [{name}]", warnings))
    if not frames:
        raise TraceFormatError(
            f"{path}: no sheet has a time column (t_ns, time_ns, t, time, timestamp, ...): see docs/formats.md"
        )
    events = _events_frame(sheets.get(EVENTS_SHEET), stem)
    beats = pd.concat(frames, ignore_index=True)
    lifecycle = {run: {"lifecycle": True} for run in pd.unique(beats["run"])} if events is not None else None
    return _trace(beats, events, "xlsx", path, warnings, lifecycle)


def read_workbook(path: str) -> dict[str, pd.DataFrame]:
    refuse_holes(Path(path), "an xlsx workbook")
    check_workbook(path)
    try:
        return pd.read_excel(path, engine="calamine", sheet_name=None)
    except Exception as exc:  # calamine's errors for a corrupt or non-xlsx file
        raise TraceFormatError(f"{path}: not a readable xlsx workbook ({reason(exc)})") from exc


# --------------------------------------------------------------------------- writers


def beat_table(b: pd.DataFrame) -> pd.DataFrame:
    """The written table of beats (rows of a HeartbeatTrace's beats table)."""
    return pd.DataFrame(
        {
            "run": b["run"], "process": b["process"], "thread": b["thread"], "seq": b["seq"],
            "t_s": b["t"], "t_ns": b["t_ns"], "loop": b["loop"], "iteration": b["iteration"],
            "tag": b["tag"], "os_tid": b["os_tid"], "label": b["label"], "source": b["source"],
            "construct": b["construct"],
        }
    )


def beat_pieces(trace: HeartbeatTrace):
    """The written table of the trace's beats in pieces, in its order: a thread, or a part of
    a long thread, at a time when the beats stay in their files (a StreamedTrace), else
    whole; at least one piece."""
    if isinstance(trace, StreamedTrace):
        keys = trace.thread_keys()
        for key in keys:
            for rows in trace.thread_row_pieces(key):
                yield beat_table(rows)
        if keys:
            return
        yield beat_table(empty_frame(BEAT_COLUMNS))
        return
    yield beat_table(trace.beats)


def wait_pieces(trace: HeartbeatTrace):
    """The trace's waits (WAIT_COLUMNS) in pieces, by run, process and thread (each thread's in
    the whole reader's order): a batch of a thread's chunks at a time when they stay in the
    files, else whole; none when it has none. (A table of them so ordered is read a thread at
    a time by its row groups' bounds: hbtool.io.parquet_stream.)"""
    if not isinstance(trace, StreamedTrace):
        w = trace.waits
        if len(w):
            runs = w["run"].astype(str)
            for run in list(trace.runs) + sorted(set(runs.unique()) - set(trace.runs)):
                mine = w[(runs == run).to_numpy()]
                if len(mine):
                    yield sort_rows(mine, ["process", "thread"])
        return
    if not len(trace.wait_stats):
        return
    ws = trace.wait_stats
    for run, meta in trace.runs.items():
        for pm in meta.get("processes", []):
            mine = ws[(ws["run"].astype(str) == run) & (ws["process"] == pm["process"])]
            for thread in sorted(set(mine["thread"].astype(int).tolist())):
                yield from trace.process_wait_pieces(run, pm["process"], thread)


def has_waits(trace: HeartbeatTrace) -> bool:
    return bool(len(trace.wait_stats) if isinstance(trace, StreamedTrace) else len(trace.waits))


def waits_file_name(out: str) -> str:
    """The name of the waits table written beside the parquet table `out` (run.parquet:
    run.waits.parquet)."""
    p = Path(out)
    suffix = p.suffix if p.suffix.lower() in (".parquet", ".pq") else ".parquet"
    stem = p.stem if p.suffix.lower() in (".parquet", ".pq") else p.name
    return str(p.with_name(f"{stem}.waits{suffix}"))


def is_waits_table_name(path: Path) -> bool:
    """A file named as write_parquet names a waits table, its beats table beside it."""
    name = path.name.lower()
    for suffix in (".parquet", ".pq"):
        if name.endswith(".waits" + suffix):
            beats = path.with_name(path.name[: -len(".waits" + suffix)] + path.name[-len(suffix):])
            return beats.exists()
    return False


def event_table(trace: HeartbeatTrace) -> pd.DataFrame:
    e = trace.events
    return pd.DataFrame(
        {"run": e["run"], "process": e["process"], "os_tid": e["os_tid"], "thread": e["thread"],
         "t_ns": e["t_ns"], "kind": e["kind"], "detail": e["detail"], "flags": e["flags"]}
    )


def _atomic(out: str, write) -> None:
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_csv(trace: HeartbeatTrace, out: str) -> list[str]:
    def write(f):
        for i, piece in enumerate(beat_pieces(trace)):
            piece.to_csv(f, index=False, header=i == 0)

    if out == "-":
        write(sys.stdout)
        return []
    _atomic(out, lambda p: _with_open(p, "w", write))
    return [out]


def _with_open(path: str, mode: str, write) -> None:
    with open(path, mode, newline="") as f:
        write(f)


#: rows of a parquet row group written at once (the pieces of a streamed trace are gathered to it)
PARQUET_ROW_GROUP = 1 << 18


#: the columns of a waits table (write_parquet), in order, and their parquet types
WAITS_TABLE = (("run", "string"), ("process", "int64"), ("thread", "int64"), ("os_tid", "int64"),
               ("t_ns", "int64"), ("wait_ns", "int64"), ("sync", "string"), ("source", "string"),
               ("construct", "string"))


def _write_waits(trace: HeartbeatTrace, path: str, beats_name: str) -> None:
    """The trace's waits as a parquet table of their own (WAITS_TABLE), a row group at a
    time; its metadata names the beats table it belongs to."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([pa.field(n, getattr(pa, t)()) for n, t in WAITS_TABLE],
                       metadata={PARQUET_WAITS_OF_KEY: beats_name.encode()})
    with pq.ParquetWriter(path, schema) as writer:
        held, rows = [], 0
        for piece in wait_pieces(trace):
            held.append(pa.Table.from_pydict(
                {n: (piece[n].astype(str) if t == "string" else piece[n].astype(np.int64)).to_numpy()
                 for n, t in WAITS_TABLE}, schema=schema))
            rows += len(piece)
            if rows >= PARQUET_ROW_GROUP:
                writer.write_table(pa.concat_tables(held))
                held, rows = [], 0
        if held:
            writer.write_table(pa.concat_tables(held))


def write_parquet(trace: HeartbeatTrace, out: str) -> list[str]:
    """Beats as the table's rows, a row group at a time; events and run metadata in its
    key-value metadata; the tracer's waits, when there are any, in a table of their own
    beside it (run.waits.parquet, named in the metadata: a million waits made a footer
    pyarrow would not read back). Text columns are dictionary-encoded as pandas'
    categoricals are (index width from their distinct values, as a whole table's would have)."""
    import pyarrow as pa

    waits_out = waits_file_name(out) if has_waits(trace) else None

    def write(path):
        import pyarrow.parquet as pq

        writer = None
        held, rows, first = [], 0, None
        distinct: dict[str, set] = {}
        try:
            for piece in beat_pieces(trace):
                table = pa.Table.from_pandas(piece, preserve_index=False)
                if first is None:
                    first = table.schema
                    plain = pa.schema([pa.field(f.name, f.type.value_type) if pa.types.is_dictionary(f.type) else f
                                       for f in first.remove_metadata()])
                    writer = pq.ParquetWriter(path, plain, store_schema=False)
                for f in first:
                    if pa.types.is_dictionary(f.type):
                        distinct.setdefault(f.name, set()).update(piece[f.name].cat.categories[
                            np.unique(piece[f.name].cat.codes.to_numpy())].tolist() if len(piece) else [])
                held.append(table.cast(plain))
                rows += table.num_rows
                if rows >= PARQUET_ROW_GROUP:
                    writer.write_table(pa.concat_tables(held))
                    held, rows = [], 0
            if held:
                writer.write_table(pa.concat_tables(held))
            meta = _parquet_metadata(trace, first, distinct, waits_out)
            full = pa.schema([pa.field(f.name, pa.dictionary(_index_type(len(distinct[f.name])), f.type.value_type))
                              if pa.types.is_dictionary(f.type) else f for f in first], metadata=meta)
            # the Arrow schema, as pyarrow stores it: read back, the columns are the categoricals written
            writer.add_key_value_metadata({**meta, b"ARROW:schema": base64.b64encode(full.serialize().to_pybytes())})
        finally:
            if writer is not None:
                writer.close()

    if waits_out is not None:
        _atomic(waits_out, lambda p: _write_waits(trace, p, Path(out).name))
    _atomic(out, write)
    return [out] if waits_out is None else [out, waits_out]


def _index_type(n: int):
    """The dictionary index of a column of n distinct values (pandas' categorical codes)."""
    import pyarrow as pa

    return pa.int8() if n < 2**7 else pa.int16() if n < 2**15 else pa.int32()


def _parquet_metadata(trace: HeartbeatTrace, schema, distinct: dict[str, set],
                      waits_out: str | None) -> dict[bytes, bytes]:
    """Key-value metadata of a parquet file of beats: pandas' (categorical sizes of the whole
    table), the events, the waits table's name and run metadata."""
    meta = dict(schema.metadata or {})
    if b"pandas" in meta:
        doc = json.loads(meta[b"pandas"])
        for col in doc.get("columns", []):
            if col.get("pandas_type") == "categorical" and col.get("name") in distinct:
                n = len(distinct[col["name"]])
                col["metadata"] = dict(col.get("metadata") or {}, num_categories=n)
                col["numpy_type"] = "int8" if n < 2**7 else "int16" if n < 2**15 else "int32"
        meta[b"pandas"] = json.dumps(doc).encode()
    meta[PARQUET_EVENTS_KEY] = event_table(trace).to_json(orient="records").encode()
    if waits_out is not None:
        meta[PARQUET_WAITS_FILE_KEY] = Path(waits_out).name.encode()
    meta[PARQUET_RUNS_KEY] = json.dumps(trace.runs, default=str).encode()
    return meta


def _sheet_name(run: str, used: set[str]) -> str:
    base = re.sub(r"[\[\]:*?/\\]", "_", str(run))[:31] or "run"
    name, k = base, 2
    while name.lower() in used or name == EVENTS_SHEET:
        suffix = f"~{k}"
        name = base[: 31 - len(suffix)] + suffix
        k += 1
    used.add(name.lower())
    return name


def write_xlsx(trace: HeartbeatTrace, out: str) -> list[str]:
    """One sheet of beats per run (written a thread at a time, in openpyxl's write-only
    mode), the lifecycle records in the sheet _events. A run of more beats than a sheet
    holds is refused before anything is read or written."""
    from openpyxl import Workbook

    counts = (trace.stats if isinstance(trace, StreamedTrace) else trace.beats).groupby("run", observed=True)
    counts = counts["beats"].sum() if isinstance(trace, StreamedTrace) else counts.size()
    for run, n in counts.items():
        if n > XLSX_MAX_ROWS:
            from ..errors import HbtoolError

            raise HbtoolError(
                f"run '{run}' has {n} beats, more than one xlsx sheet holds ({XLSX_MAX_ROWS}): "
                f"convert to parquet or csv instead"
            )

    def write(path):
        wb = Workbook(write_only=True)
        used: set[str] = set()
        sheets: dict = {}
        for table in beat_pieces(trace):
            for run, grp in table.groupby("run", sort=False, observed=True):
                ws = sheets.get(run)
                if ws is None:
                    ws = sheets[run] = wb.create_sheet(_sheet_name(run, used))
                    ws.append(list(grp.columns))
                for row in grp.itertuples(index=False, name=None):
                    ws.append(list(row))
        events = event_table(trace)
        if len(events):
            ws = wb.create_sheet(EVENTS_SHEET)
            ws.append(list(events.columns))
            for row in events.itertuples(index=False, name=None):
                ws.append(list(row))
        wb.save(path)

    _atomic(out, write)
    return [out]
