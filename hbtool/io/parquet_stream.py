"""A parquet table of beats read in bounded memory: the source of a StreamedTrace
(hbtool.model.heartbeats), as hbtool.io.hbt_stream is for the tracer's binary files.

It serves tables laid out as `hbtool convert` writes them (docs/formats.md): the columns
run, process, thread, seq, t_ns, loop, iteration, tag, os_tid (int64), label, source,
construct (text), none of them null, each thread's rows in one block, times relative to the
run (under a day at the first beat), labels empty, sources named as hbtool names them, row
groups of at most config.TABLE_STREAM_GROUP_ROWS rows; and its waits table beside it, when
it has one, likewise. A first pass reads the table a row group at a time and keeps per
thread its block of rows and its beats' count, first and last time; a thread's beats are
read again from the row groups of its block when an analysis asks, in pieces where the
block is in the beats table's order (by seq, then time), and its waits from the waits
table a row group at a time. Any other table is read whole (hbtool.io.tabular.read_parquet),
as are tables of fewer than config.TABLE_STREAM_ROWS rows: the answers are the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..errors import HbtoolError, reason
from ..model import empty_frame
from ..model.heartbeats import BEAT_SOURCES, STATS_COLUMNS, WAIT_STATS_COLUMNS, StreamedTrace
from .hbt_stream import cut_rows
from .tabular import (_EPOCH_LIKE_S, PARQUET_EVENTS_KEY, PARQUET_RUNS_KEY, PARQUET_WAITS_FILE_KEY, PARQUET_WAITS_KEY,
                      PARQUET_WAITS_OF_KEY, _events_frame, waits_table_path)

BEAT_INTS = ("process", "thread", "seq", "t_ns", "loop", "iteration", "tag", "os_tid")
BEAT_TEXTS = ("run", "label", "source", "construct")
WAIT_INTS = ("process", "thread", "os_tid", "t_ns", "wait_ns")
WAIT_TEXTS = ("run", "sync", "source", "construct")


def _layout(pf, ints, texts) -> bool:
    """The columns are there with these types, none null, in row groups no longer than the bound."""
    import pyarrow as pa

    schema = pf.schema_arrow
    for name in ints + texts:
        i = schema.get_field_index(name)
        if i < 0:
            return False
        t = schema.field(i).type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if name in ints and t != pa.int64():
            return False
        if name in texts and not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            return False
    md = pf.metadata
    wanted = set(ints + texts)
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        if rg.num_rows > config.TABLE_STREAM_GROUP_ROWS:
            return False
        for c in range(rg.num_columns):
            col = rg.column(c)
            if col.path_in_schema in wanted:
                st = col.statistics
                if st is None or not st.has_null_count or st.null_count:
                    return False
    return True


def _text(col) -> pd.Categorical:
    """A text column of a row group as a Categorical of str."""
    s = col.to_pandas()
    return s.array if isinstance(s.dtype, pd.CategoricalDtype) else pd.Categorical(s)


def _codes(cat: pd.Categorical, mapping: dict, missing: int = -1) -> np.ndarray:
    """mapping[value] per row, looked up per distinct value."""
    look = np.array([mapping.get(str(c), missing) for c in cat.categories] + [missing], dtype=np.int64)
    return look[cat.codes]


def read_parquet_stream(path: str):
    """A StreamedTrace of the parquet table at `path`, or None where it is not laid out for
    it (or is small): then the whole reader reads it."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path, read_dictionary=list(BEAT_TEXTS))   # (text as codes, not a string a row)
        if not pf.metadata.num_rows or pf.metadata.num_rows < config.TABLE_STREAM_ROWS or \
                not _layout(pf, BEAT_INTS, BEAT_TEXTS):
            return None
        meta = pf.schema_arrow.metadata or {}
        if PARQUET_WAITS_OF_KEY in meta or PARQUET_WAITS_KEY in meta:
            return None
        run = Path(path).stem
        events = runs_meta = None
        if PARQUET_EVENTS_KEY in meta:
            events = _events_frame(pd.DataFrame(json.loads(meta[PARQUET_EVENTS_KEY])), run)
        if PARQUET_RUNS_KEY in meta:
            runs_meta = json.loads(meta[PARQUET_RUNS_KEY])
            if not isinstance(runs_meta, dict):
                return None
        waits = None
        if PARQUET_WAITS_FILE_KEY in meta:
            where = waits_table_path(path, meta[PARQUET_WAITS_FILE_KEY])
            if not where.is_file():
                return None
            waits = pq.ParquetFile(where, read_dictionary=list(WAIT_TEXTS))
            if waits.metadata.num_rows > config.MAX_WAIT_ROWS or not _layout(waits, WAIT_INTS, WAIT_TEXTS):
                return None
        stream = ParquetStream(path, pf, waits)
        if not stream.scan():
            return None
    except (OSError, ValueError, TypeError, RecursionError, LookupError, ArithmeticError, HbtoolError):
        return None   # the whole reader says what is wrong, in one line
    except Exception as exc:   # pyarrow's own errors (ArrowInvalid ...)
        if type(exc).__module__.startswith("pyarrow"):
            return None
        raise
    runs = {}
    for r in stream.runs:
        m = dict((runs_meta or {}).get(r, {}))
        m.update({"format": "parquet", "source": path})
        m.setdefault("lifecycle", False)
        runs[r] = m
    return StreamedTrace(stream, stream.stats, events, runs, list(stream.warnings), wait_stats=stream.wait_stats)


class ParquetStream:
    """A parquet table's threads found by a first pass, and how to read them again."""

    def __init__(self, path: str, pf, waits=None):
        self.path, self.pf, self.waits = path, pf, waits
        md = pf.metadata
        self.starts = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)])
        #: (run, process, thread) -> [first row, end row, rows in the beats table's order]
        self.blocks: dict[tuple, list] = {}
        #: (run, process) -> {construct name: id from 1}
        self.names: dict[tuple, dict[str, int]] = {}
        self.runs: list[str] = []
        self.warnings: list[str] = []
        self.stats = empty_frame(STATS_COLUMNS)
        self.wait_stats = empty_frame(WAIT_STATS_COLUMNS)

    # ----------------------------------------------------------------- the first pass

    def _batches(self, pf, columns, row_groups=None):
        """(first row, record batch) of the table, config.STREAM_PIECE_ROWS rows at a time."""
        groups = list(range(pf.metadata.num_row_groups)) if row_groups is None else row_groups
        for g in groups:
            row = int(self.starts[g]) if pf is self.pf else 0
            batches = pf.iter_batches(batch_size=config.STREAM_PIECE_ROWS, row_groups=[g], columns=columns,
                                      use_threads=False)
            while True:
                try:
                    batch = next(batches, None)
                except Exception as exc:   # pyarrow's errors, OSError: the file changed since the first pass
                    raise HbtoolError(f"{self.path}: cannot be read again ({reason(exc)}): the file changed while "
                                      f"being read; read it again") from exc
                if batch is None:
                    break
                yield row, batch
                row += batch.num_rows

    def scan(self) -> bool:
        """Find each thread's block and summarise it; False where the table is not laid out
        for streaming after all."""
        cols = ["run", "process", "thread", "os_tid", "source", "t_ns", "seq", "label", "construct"]
        parts, firsts, run_ids, cons_names = [], {}, {}, {}
        last = None   # (key, seq, t_ns) of the row before
        done: set = set()
        source_code = {x: i for i, x in enumerate(BEAT_SOURCES)}
        for row0, t in self._batches(self.pf, cols):
            n = t.num_rows
            if not n:
                continue
            run, label, source, cons = (_text(t.column(c)) for c in ("run", "label", "source", "construct"))
            if any(str(c) != "" for c in label.categories[np.unique(label.codes)]) or \
                    any(str(c) not in source_code for c in source.categories):
                return False
            v = {c: t.column(c).to_numpy() for c in ("process", "thread", "os_tid", "t_ns", "seq")}
            if (np.abs(v["process"]) >= 2**31).any() or (np.abs(v["thread"]) >= 2**31).any() or \
                    (np.abs(v["t_ns"]) >= 2**62).any() or (np.abs(v["seq"]) >= 2**62).any() or \
                    (np.abs(v["os_tid"]) >= 2**62).any():
                return False
            src = _codes(source, source_code)
            named = np.array([str(c) != "" for c in cons.categories] + [False])[cons.codes]
            if ((src == 0) & named).any():
                return False   # the program's own beats named by a construct: kept by the whole reader only
            rid = _codes(run, {})
            for i, c in enumerate(run.categories):
                rid[run.codes == i] = run_ids.setdefault(str(c), len(run_ids))
            change = np.flatnonzero((rid[1:] != rid[:-1]) | (v["process"][1:] != v["process"][:-1])
                                    | (v["thread"][1:] != v["thread"][:-1])) + 1
            bounds = np.r_[0, change, n]
            order_ok = np.r_[True, (v["seq"][1:] > v["seq"][:-1])
                             | ((v["seq"][1:] == v["seq"][:-1]) & (v["t_ns"][1:] >= v["t_ns"][:-1]))]
            names = {k: r for r, k in run_ids.items()}
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                key = (names[int(rid[a])], int(v["process"][a]), int(v["thread"][a]))
                if last is not None and last[0] == key:
                    block = self.blocks[key]
                    block[1] = row0 + b
                    block[2] = block[2] and bool(order_ok[a + 1:b].all()) and \
                        (int(v["seq"][a]), int(v["t_ns"][a])) >= last[1:]
                else:
                    if key in done:
                        return False   # a thread's rows in two places
                    if last is not None:
                        done.add(last[0])
                    self.blocks[key] = [row0 + a, row0 + b, bool(order_ok[a + 1:b].all())]
                last = (key, int(v["seq"][b - 1]), int(v["t_ns"][b - 1]))
            df = pd.DataFrame({"run": rid, "process": v["process"], "thread": v["thread"], "os_tid": v["os_tid"],
                               "source": src, "t_ns": v["t_ns"], "cons": cons.codes})
            parts.append(df.groupby(["run", "process", "thread", "os_tid", "source"], sort=False)["t_ns"]
                         .agg(["size", "min", "max"]).reset_index())
            for (r, p), g in df.groupby(["run", "process"], sort=False):
                mine = cons_names.setdefault((names[int(r)], int(p)), set())
                mine.update(str(cons.categories[c]) for c in np.unique(g["cons"].to_numpy()) if c >= 0)
                firsts[r] = min(firsts.get(r, 2**63), int(g["t_ns"].min()))
        if any(f > _EPOCH_LIKE_S * 1e9 for f in firsts.values()):
            return False   # absolute times: the whole reader rebases them
        for key, mine in cons_names.items():   # ids in name order, as the binary writer numbers them
            self.names[key] = {c: k + 1 for k, c in enumerate(sorted(mine - {""}))}
        if parts:
            s = pd.concat(parts, ignore_index=True).groupby(["run", "process", "thread", "os_tid", "source"],
                                                             sort=False).agg(beats=("size", "sum"),
                                                                             tmin=("min", "min"), tmax=("max", "max"))
            s = s.reset_index()
            names = {k: r for r, k in run_ids.items()}
            self.stats = pd.DataFrame({
                "run": [names[int(r)] for r in s["run"]], "process": s["process"].astype(np.int64),
                "thread": s["thread"].astype(np.int64), "os_tid": s["os_tid"].astype(np.int64),
                "source": [BEAT_SOURCES[int(c)] for c in s["source"]],
                "beats": s["beats"].astype(np.int64), "first_s": s["tmin"] / 1e9, "last_s": s["tmax"] / 1e9,
                "first_ns": s["tmin"].astype(np.int64), "last_ns": s["tmax"].astype(np.int64)})
            self.runs = sorted(set(self.stats["run"].tolist()))
        return self._scan_waits()

    def _scan_waits(self) -> bool:
        if self.waits is None:
            return True
        parts, bad, total = [], 0, 0
        for w in self._wait_groups():
            total += w.pop("_rows")
            bad += w.pop("_bad")
            if len(w["t_ns"]):
                df = pd.DataFrame(w)
                parts.append(df.groupby(["run", "process", "thread", "os_tid", "source", "sync"], sort=False,
                                        observed=True).agg(waits=("wait_ns", "size"), wait_ns=("wait_ns", "sum"))
                             .reset_index().astype({"run": str, "source": str, "sync": str}))
                for (r, p), cs in df.groupby(["run", "process"], observed=True)["construct"].unique().items():
                    mine = self.names.setdefault((str(r), int(p)), {})
                    for c in cs:
                        if str(c) and str(c) not in mine:
                            mine[str(c)] = len(mine) + 1
        if bad:
            self.warnings.append(f"{self.path}: {bad} of {total} waits without a valid time, length, process or "
                                 f"thread, left out")
        if parts:
            s = pd.concat(parts, ignore_index=True).groupby(["run", "process", "thread", "os_tid", "source", "sync"],
                                                             sort=False).sum().reset_index()
            self.wait_stats = s[list(WAIT_STATS_COLUMNS)]
        return True

    def _wait_groups(self, run=None, process=None, thread=None, texts=WAIT_TEXTS):
        """The waits table a batch at a time, as dicts of numpy arrays and Categoricals (the
        text), the rows the whole reader leaves out left out; of one run and process (and
        thread) where given. Each also holds _rows and _bad (the batch's rows, and of them the
        ones left out) when no run is given."""
        groups = None
        if thread is not None:   # the row groups whose bounds hold the thread (a table written by
            groups = []          # `convert` has each thread's waits together)
            md = self.waits.metadata
            at = {md.schema.column(i).name: i for i in range(md.num_columns)}
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                near = True
                for c, x in (("process", process), ("thread", thread)):
                    st = rg.column(at[c]).statistics
                    if st is not None and st.has_min_max and not (st.min <= x <= st.max):
                        near = False
                if near:
                    groups.append(g)
        for _, t in self._batches(self.waits, list(WAIT_INTS + texts), groups):
            v = {c: t.column(c).to_numpy() for c in WAIT_INTS}
            bad = (v["wait_ns"] < 0) | (np.abs(v["t_ns"]) > config.MAX_TRACE_SPAN_NS) | \
                (v["wait_ns"] > config.MAX_TRACE_SPAN_NS)
            keep = ~bad
            text = {c: _text(t.column(c)) for c in texts}
            if run is not None:
                r = text["run"]
                keep &= np.isin(r.codes, [i for i, c in enumerate(r.categories) if str(c) == run]) & \
                    (v["process"] == process)
                if thread is not None:
                    keep &= v["thread"] == thread
            out = {c: text[c][keep] for c in texts}
            for c in WAIT_INTS:
                out[c] = v[c][keep]
            if run is None:
                out["_rows"], out["_bad"] = t.num_rows, int(bad.sum())
            yield out

    # ----------------------------------------------------------------- beats read again

    def materialize(self):
        """The whole table, as the whole reader reads it (every beat in memory)."""
        from .registry import ReadOptions
        from .tabular import read_parquet

        return read_parquet(Path(self.path), ReadOptions())

    def construct_names(self, run: str, process: int) -> dict[int, str]:
        return {k: c for c, k in self.names.get((run, process), {}).items()}

    def _groups(self, run: str, process: int, thread: int, columns: list[str]):
        """The thread's rows, a batch of its row groups at a time, as record batches."""
        row0, row1, _ = self.blocks[(run, process, thread)]
        first = int(np.searchsorted(self.starts, row0, side="right")) - 1
        last = int(np.searchsorted(self.starts, row1, side="left"))
        for at, batch in self._batches(self.pf, columns, list(range(max(first, 0), last))):
            lo, hi = max(row0, at), min(row1, at + batch.num_rows)
            if hi > lo:
                yield batch.slice(lo - at, hi - lo)

    def _pieces(self, run, process, thread, sources):
        """The thread's beats of these sources, a row group at a time, in file order: dicts
        of t_ns, seq, loop, iteration, tag, os_tid, source (its code), construct (its id)."""
        ids = self.names.get((run, process), {})
        loops = {k for c, k in ids.items() if c.startswith("loop ")}
        cols = ["t_ns", "seq", "loop", "iteration", "tag", "os_tid", "source", "construct"]
        for t in self._groups(run, process, thread, cols):
            src = _codes(_text(t.column("source")), {s: i for i, s in enumerate(BEAT_SOURCES)})
            keep = np.isin(src, [BEAT_SOURCES.index(s) for s in sources if s in BEAT_SOURCES])
            d = {c: t.column(c).to_numpy()[keep] for c in ("t_ns", "seq", "loop", "iteration", "tag", "os_tid")}
            d["source"] = src[keep]
            d["construct"] = np.where(d["source"] != 0, _codes(_text(t.column("construct")), ids, 0)[keep], 0)
            # a loop chunk's count of iterations (chunk_iterations_of)
            d["iterations"] = np.where((d["source"] == 1) & np.isin(d["construct"], list(loops)), d["tag"], 0).clip(0)
            yield d

    def load_beats(self, run: str, process: int, thread: int, sources: list[str], aux: bool = False) -> dict:
        parts = list(self._pieces(run, process, thread, sources))
        if not parts:
            return {c: np.zeros(0, dtype=np.int64) for c in ("t_ns", "seq", "loop", "iteration", "tag", "os_tid",
                                                             "source", "construct", "iterations")}
        b = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        if not self.blocks[(run, process, thread)][2]:
            order = np.lexsort((b["t_ns"], b["seq"]))
            b = {k: v[order] for k, v in b.items()}
        return b

    def load_times(self, run: str, process: int, thread: int, sources: list[str], loops: bool = False):
        b = self.load_beats(run, process, thread, sources)
        t = b["t_ns"].astype(np.float64) / 1e9
        return (t, b["construct"]) if loops else t

    def beat_pieces(self, run: str, process: int, thread: int, sources: list[str], rows: int,
                    times_only: bool = False, constructs: bool = False):
        """As HbtStream.beat_pieces: of at most `rows` beats each where the thread's rows are
        in the beats table's order already, else one piece of them all."""
        def shaped(b):
            if times_only:
                return {"t_ns": b["t_ns"]}
            if constructs:
                return {"t_ns": b["t_ns"], "construct": b["construct"], "iterations": b["iterations"],
                        "first": b["iteration"]}
            return b

        if not self.blocks[(run, process, thread)][2]:
            yield shaped(self.load_beats(run, process, thread, sources))
            return
        out = False
        for piece in cut_rows((shaped(b) for b in self._pieces(run, process, thread, sources)), rows):
            out = True
            yield piece
        if not out:   # (at least one piece)
            yield shaped(self.load_beats(run, process, thread, []))

    # ----------------------------------------------------------------- waits read again

    def process_wait_pieces(self, run: str, process: int, thread: int | None = None):
        if self.waits is None:
            return
        for w in self._wait_groups(run, process, thread):
            if len(w["t_ns"]):
                yield pd.DataFrame({c: w[c] for c in ("run", "process", "thread", "os_tid", "t_ns", "wait_ns", "sync",
                                                      "source", "construct")})

    def wait_pieces(self, run: str, process: int, thread: int, span: tuple | None = None):
        if self.waits is None:
            return
        for w in self._wait_groups(run, process, thread, texts=("run", "sync")):
            if len(w["t_ns"]):
                yield w["t_ns"], w["wait_ns"], w["sync"]

    def load_waits(self, run: str, process: int, thread: int) -> pd.DataFrame:
        parts = list(self.wait_pieces(run, process, thread))
        if not parts:
            return pd.DataFrame({"t_ns": np.zeros(0, np.int64), "wait_ns": np.zeros(0, np.int64),
                                 "sync": pd.Categorical([])})
        t, ns = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        sync = pd.api.types.union_categoricals([p[2] for p in parts])
        order = np.argsort(t, kind="stable")
        return pd.DataFrame({"t_ns": t[order], "wait_ns": ns[order], "sync": sync.take(order)})

    def wait_overlap(self, spans: pd.DataFrame) -> pd.DataFrame:
        """Per thread of `spans` with waits: off_ns, the ns of its waits between its first and
        last beat (one pass over the waits table)."""
        cols = ["run", "process", "thread", "off_ns"]
        if self.waits is None or not len(spans):
            return pd.DataFrame({c: [] for c in cols})
        sp = spans.astype({"run": str}).set_index(["run", "process", "thread"])[["first", "last"]]
        off: dict[tuple, int] = {}
        for w in self._wait_groups(texts=("run",)):
            w.pop("_rows"), w.pop("_bad")
            df = pd.DataFrame({c: w[c] for c in ("run", "process", "thread", "t_ns", "wait_ns")}).astype({"run": str})
            df = df.join(sp, on=["run", "process", "thread"], how="inner")
            if not len(df):
                continue
            over = (np.minimum(df["t_ns"], df["last"]) - np.maximum(df["t_ns"] - df["wait_ns"], df["first"])).clip(0)
            for k, ns in df.assign(over=over).groupby(["run", "process", "thread"])["over"].sum().items():
                off[k] = off.get(k, 0) + int(ns)
        rows = [(r, int(p), int(th), ns) for (r, p, th), ns in sorted(off.items())]
        return pd.DataFrame(rows, columns=cols)


__all__ = ["read_parquet_stream", "ParquetStream"]
