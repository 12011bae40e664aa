#!/usr/bin/env python3
"""Seeded mutation fuzzing of every hbtool reader through the command line (issue 20).

Each case is one command that reads a file (info, diagnose, behavior, features, plot,
convert, train, interference, service-rate, probes, status, diagnose --model/--reference)
on one mutated input, made from the seed corpus (benchmarks/fuzz_seeds/, written by the
real tracer, profiler and hbtool: `python benchmarks/fuzz_seeds.py`) and the bundled
sample_traces/. A case is fully determined by (seed, index): `--replay SEED INDEX` makes it
again and shows its traceback.

Mutations: truncation, bit flips, zeroed and random ranges, interesting integers (0, -1,
2^31, 2^60, 2^64-1, ...) in header words and in the count, length and capacity fields of
the binary formats, a header claiming 2^60 records, repeated ranges (repeated chunks),
splices of two formats, numbers in text tables swapped for huge, negative, NaN or
non-numeric ones, rows repeated or dropped, tables rewritten with hostile values
(parquet, xlsx), the workbook's XML mutated inside its zip, empty files, directories
(empty, or holding the mutated file as a run), sparse files of several GB (`truncate`:
no disk used), a FIFO with no writer, /dev/zero under a trace's name; the input given as
a file, under no suffix, on standard input, or as a run directory.

Outcomes allowed: exit 0 with a result (stdout, or the output file written), or exit 2
with exactly one line on stderr. Failures: a traceback or "internal error", any other
exit status, a hang (over 10 s of its own time: wall time less the time it waited for a CPU;
plus 1 s per 5 MB of input),
and memory beyond the cap: a case's peak resident memory
above what the process held before it may grow by at most 200 MB + 50 x the input's real
size (allocated bytes, so a sparse file counts what it holds, not what it claims). The
200 MB covers what a command needs whatever its input (pandas frames of the report,
matplotlib's figure for plot, the numba kernels' work arrays); 50x covers the eager readers,
which hold each 32-byte record as a row of ~13 columns (~110 B) plus pandas' temporary
copies, and csv, whose 15-20 text bytes per beat become the same row.

Cases run in worker processes (one per core) that import hbtool once and call its console
entry point `hbtool.cli.main` in-process, the peak resident set reset before each case
(/proc/self/clear_refs) and read after (VmHWM); the parent kills a worker whose case runs
over 10 s. Every `--subprocess-every`-th case instead runs the installed `hbtool` script as
a real process: its exit status, stderr, time (10 s after a 5 s start-up allowance) and
peak memory (wait4's rusage: the warm worker's resident size + the same cap).

    python benchmarks/fuzz_readers.py --cases 1000 --seed 1       # the default test's run (~1 min)
    python benchmarks/fuzz_readers.py --cases 100000 --seed 1      # the long run
    python benchmarks/fuzz_readers.py --replay 1 4242              # one case, with its traceback
    python benchmarks/fuzz_readers.py --cases 5000 --keep /tmp/f   # failing inputs copied to /tmp/f

It prints one row per kind of input: cases, exits 0 and 2, tracebacks, hangs, over-cap.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "benchmarks" / "fuzz_seeds"
SAMPLES = ROOT / "sample_traces"

HANG_S = 10.0
#: a case may take HANG_S plus its input's allocated bytes at this rate: the slowest reader
#: and command on big real input (a 470 MB csv of 8.25 M beats through diagnose: 62 s alone,
#: 7.6 MB/s) is no hang (the mutator's repeats and sparse files make inputs of hundreds of MB)
READ_BYTES_PER_S = 5_000_000
#: making a case (rewriting a workbook on a loaded machine takes seconds) is not the case's time
MAKE_S = 120.0
START_ALLOWANCE_S = 5.0
CAP_BASE = 200 << 20
CAP_PER_BYTE = 50
#: a worker stops itself (and the case counts as over the cap) well before the machine would
HARD_LIMIT_FACTOR = 2

# --------------------------------------------------------------------------- what is fuzzed

HB = ["info", "info --format json", "diagnose", "diagnose --format csv", "behavior", "behavior --format json",
      "features", "plot --behavior -o {out}.png", "convert {in} -o {out}.csv",
      "convert {in} -o {out}.parquet", "convert {in} -o {out}.hbt", "convert {in} -o -",
      "train --normal {in} -o {out}.json", "diagnose {good} --reference {in}", "info --beats openmp"]

#: kind -> (seed files, command templates); {in} is the input (appended when absent),
#: {out} a fresh output path, {good} an unmutated heartbeat trace
KINDS: dict[str, tuple[list[str], list[str]]] = {
    "hbt": (["pi.hbt", "omp.hbt", "sample:pi-segv", "sample:matmul-exit1"], HB),
    "csv": (["pi.csv", "sample:pi-shutdown.csv"], HB),
    "xlsx": (["pi.xlsx", "sample:jacobi-normal.xlsx"], HB),
    "parquet": (["pi.parquet"], HB),
    "legacy": (["legacy-2020-00"], ["info", "diagnose", "behavior", "convert {in} -o {out}.csv"]),
    "queue-hbt": (["queues.hbt"], ["service-rate", "service-rate --format json --end consumer", "info"]),
    "probe-hbt": (["probes.hbt"], ["probes", "probes --per-thread --format csv", "info"]),
    "status-hbt": (["status.hbt"], ["status", "status --samples --format json", "plot --status -o {out}.png"]),
    "hbprof": (["profile.hbp", "rank-r1.hbp"], ["interference", "interference --format json --top 20"]),
    "segment-table": (["segments.csv", "segments.parquet"], ["interference", "interference --format csv"]),
    "sample-table": (["samples.csv", "samples.parquet"], ["service-rate", "service-rate --item-size 8 --format json"]),
    "hsa-model": (["model.json"], ["diagnose {good} --model {in}", "diagnose {good} --model {in} --format json"]),
}
BINARY = {"hbt", "queue-hbt", "probe-hbt", "status-hbt", "hbprof"}
TEXT = {"csv", "legacy", "segment-table", "sample-table", "hsa-model"}


def seed_path(name: str) -> Path:
    if name.startswith("sample:"):
        p = SAMPLES / name[7:]
        return next(p.glob("*.hbt")) if p.is_dir() else p
    return SEEDS / name


_CACHE: dict[str, bytes] = {}


def seed_bytes(name: str) -> bytes:
    if name not in _CACHE:
        _CACHE[name] = seed_path(name).read_bytes()
    return _CACHE[name]


# --------------------------------------------------------------------------- mutations

INTERESTING = [0, 1, 2, 7, 31, 32, 255, 256, 4095, 4096, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
               2**40, 2**60, 2**62, 2**63 - 1, 2**63, 2**64 - 1]
#: (offset, size) of the count, length, offset and capacity fields (docs/formats.md, docs/profile-format.md)
FIELDS = {
    "hbt": [(8, 4), (16, 4), (20, 4), (24, 4), (32, 4), (36, 4), (40, 4), (44, 4), (48, 8), (56, 8), (64, 8),
            (72, 8), (92, 4), (96, 8), (104, 4), (108, 4)],
    "hbprof": [(8, 4), (16, 4), (28, 4), (36, 4), (40, 4), (44, 4), (48, 4), (80, 8), (88, 8), (96, 8), (104, 4),
               (108, 4), (112, 8), (120, 8), (128, 4), (136, 8), (144, 8)],
}
#: the fields that say how many records or bytes of records follow
COUNTS = {"hbt": [(56, 8), (36, 4)], "hbprof": [(88, 8), (144, 8), (28, 4)]}
HBT_DATA = 4096
TEXT_NUMBERS = ["99999999999999999999999", "-1", "0", "1e308", "-1e308", "nan", "inf", "-inf", "1e-320",
                "18446744073709551616", "9223372036854775807", "-9223372036854775808", "x", "", "0x10", "1,5",
                "2.5", "1e19", "True", "\"", "\x00"]
BAD_CELLS = [2**63 - 1, -(2**63), -1, 0, 1e308, float("nan"), float("inf"), -1e19, "x", "", None, True, 2**62, 1e-300]


def _field_kind(kind: str) -> str | None:
    return "hbt" if kind in ("hbt", "queue-hbt", "probe-hbt", "status-hbt") else ("hbprof" if kind == "hbprof" else None)


def put_int(b: bytearray, off: int, size: int, value: int) -> None:
    if off + size <= len(b):
        b[off:off + size] = (value % (1 << (8 * size))).to_bytes(size, "little")


def m_truncate(rng, b, kind):
    cut = rng.choice([rng.randrange(len(b) + 1), rng.randrange(min(len(b), 300) + 1)])
    return b[:cut], f"truncate@{cut}"


def m_bitflip(rng, b, kind):
    n = rng.randrange(1, 24)
    hot = min(len(b), rng.choice([128, 512, 4096, len(b)]))
    for _ in range(n):
        if b:
            b[rng.randrange(hot)] ^= 1 << rng.randrange(8)
    return b, f"bitflip x{n}<{hot}"


def m_zero(rng, b, kind):
    i = rng.randrange(len(b) + 1)
    n = rng.choice([8, 32, 256, 4096, 65536])
    b[i:i + n] = bytes(len(b[i:i + n]))
    return b, f"zero {i}+{n}"


def m_random(rng, b, kind):
    i = rng.randrange(len(b) + 1)
    n = rng.choice([1, 4, 8, 32, 200])
    b[i:i + n] = rng.randbytes(len(b[i:i + n]))
    return b, f"random {i}+{n}"


def m_ints(rng, b, kind):
    fk = _field_kind(kind)
    what = []
    for _ in range(rng.randrange(1, 4)):
        v = rng.choice(INTERESTING)
        if fk and rng.random() < 0.7:
            off, size = rng.choice(FIELDS[fk])
        elif fk == "hbt" and len(b) > HBT_DATA + 32 and rng.random() < 0.5:
            # a field of a chunk header or record: capacity, chunk_seq, t_ns, seq, kind, aux
            slot = HBT_DATA + 32 * rng.randrange((len(b) - HBT_DATA) // 32)
            rel, size = rng.choice([(0, 8), (8, 4), (12, 4), (24, 4), (28, 2)])
            off = slot + rel
        else:
            size = rng.choice([4, 8])
            off = size * rng.randrange(max(1, min(len(b), 256) // size))
        put_int(b, off, size, v)
        what.append(f"{off}:{size}={v}")
    return b, "ints " + ",".join(what)


def m_count_2_60(rng, b, kind):
    fk = _field_kind(kind)
    if fk is None:
        return m_ints(rng, b, kind)
    off, size = rng.choice(COUNTS[fk])
    put_int(b, off, size, 2**60 if size == 8 else 2**32 - 1)
    return b, f"count {off}:{size}=2^60"


def m_repeat(rng, b, kind):
    if not b:
        return b, "repeat-empty"
    unit = 256 if _field_kind(kind) else 1
    i = rng.randrange(len(b))
    n = rng.choice([unit, 4 * unit, 32, 4096, len(b) - i])
    i -= i % unit if kind in BINARY and i >= HBT_DATA else 0
    piece = bytes(b[i:i + n])
    times = rng.choice([1, 2, 10])
    return bytearray(bytes(b[:i + len(piece)]) + piece * times + bytes(b[i + len(piece):])), f"repeat {i}+{n}x{times}"


def m_splice(rng, b, kind):
    other_kind = rng.choice([k for k in KINDS if k != kind])
    other = seed_bytes(rng.choice(KINDS[other_kind][0]))
    i, j = rng.randrange(len(b) + 1), rng.randrange(len(other) + 1)
    if rng.random() < 0.5:
        out = bytes(b[:i]) + other[j:]
    else:
        out = other[:j] + bytes(b[i:])
    return bytearray(out), f"splice {kind}[:{i}]/{other_kind}[{j}:]"


def _lines(b: bytes) -> list[bytes]:
    return bytes(b).split(b"\n")


def m_text_number(rng, b, kind):
    text = bytes(b)
    spans = [m.span() for m in re.finditer(rb"-?\d+(\.\d+)?(e-?\d+)?", text[:200000])]
    n = rng.randrange(1, 6)
    for _ in range(n):
        if not spans:
            break
        s, e = spans.pop(rng.randrange(len(spans)))
        new = rng.choice(TEXT_NUMBERS).encode()
        text = text[:s] + new + text[e:]
        spans = [(a + len(new) - (e - s), c + len(new) - (e - s)) if a >= e else (a, c) for a, c in spans]
    return bytearray(text), f"numbers x{n}"


def m_lines(rng, b, kind):
    lines = _lines(b)
    op = rng.choice(["dup", "drop", "swap", "header-dup", "many", "long"])
    i = rng.randrange(len(lines))
    if op == "dup":
        lines[i:i] = [lines[i]] * rng.choice([1, 5, 1000])
    elif op == "drop":
        del lines[i:i + rng.choice([1, 10, len(lines)])]
    elif op == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "header-dup":
        lines.insert(i, lines[0])
    elif op == "many":
        lines = lines[:1] + lines[1:] * rng.choice([3, 50])
    else:
        lines[i] = lines[i] + b"," * rng.choice([1, 50, 5000])
    return bytearray(b"\n".join(lines)), f"lines {op}@{i}"


def m_table(rng, b, kind):
    """A table (parquet or xlsx) rewritten with hostile values in its columns."""
    import numpy as np
    import pandas as pd

    src = tempfile.NamedTemporaryFile(suffix=".parquet" if bytes(b[:4]) == b"PAR1" else ".xlsx", delete=False)
    try:
        src.write(bytes(b))
        src.close()
        if src.name.endswith(".xlsx"):   # a damaged workbook can make calamine allocate gigabytes
            from hbtool.io.tables import check_workbook

            check_workbook(src.name)
        df = pd.read_parquet(src.name) if src.name.endswith(".parquet") else pd.read_excel(src.name, engine="calamine")
    except Exception:  # the bytes are no longer a table (an earlier mutation): keep them
        return b, "table-unreadable"
    finally:
        os.unlink(src.name)
    what = []
    for _ in range(rng.randrange(1, 4)):
        if df.empty or not len(df.columns):
            break
        col = df.columns[rng.randrange(len(df.columns))]
        op = rng.choice(["cell", "column", "drop", "rename", "rows"])
        if op == "cell":
            v = rng.choice(BAD_CELLS)
            df[col] = df[col].astype(object)
            df.iloc[rng.randrange(len(df)), df.columns.get_loc(col)] = v
            what.append(f"{col}[.]={v!r}")
        elif op == "column":
            v = rng.choice(BAD_CELLS)
            df[col] = [v] * len(df)
            what.append(f"{col}={v!r}")
        elif op == "drop":
            df = df.drop(columns=[col])
            what.append(f"-{col}")
        elif op == "rename":
            df = df.rename(columns={col: rng.choice(["", "t", "thread", "time", "run", col.upper()])})
            what.append(f"rename {col}")
        else:
            many = 5000 if bytes(b[:4]) == b"PAR1" else 500   # openpyxl writes 1,000 rows a second
            df = df.iloc[np.sort(np.array([rng.randrange(len(df)) for _ in range(rng.choice([0, 1, 3, many]))],
                                          dtype=int))]
            what.append(f"rows {len(df)}")
    out = io.BytesIO()
    try:
        if src.name.endswith(".parquet"):
            df.columns = [str(c) for c in df.columns]
            for c in df.columns:
                if df[c].dtype == object:
                    df[c] = df[c].map(lambda x: x if x is None or isinstance(x, str) else repr(x))
            df.to_parquet(out, index=False)
        else:
            df.to_excel(out, index=False)
    except Exception as exc:
        return b, f"table-unwritable {type(exc).__name__}"
    return bytearray(out.getvalue()), "table " + ";".join(what)


def m_zip_member(rng, b, kind):
    """An xlsx with the XML of one of its members mutated (numbers, truncation, bytes)."""
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(b))) as z:
            members = [(i, z.read(i.filename)) for i in z.infolist()]
    except Exception:
        return b, "zip-unreadable"
    k = rng.randrange(len(members))
    info, data = members[k]
    sub = rng.choice([m_text_number, m_truncate, m_bitflip, m_lines, m_repeat])
    data, how = sub(rng, bytearray(data), "csv")
    members[k] = (info, bytes(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for i, d in members:
            z.writestr(i.filename, d)
    return bytearray(out.getvalue()), f"zip {info.filename}: {how}"


GENERIC = [(m_truncate, 3), (m_bitflip, 4), (m_zero, 2), (m_random, 2), (m_ints, 2), (m_repeat, 2), (m_splice, 1)]
EXTRA = {
    "binary": [(m_ints, 4), (m_count_2_60, 2), (m_repeat, 1)],
    "text": [(m_text_number, 6), (m_lines, 4)],
    "xlsx": [(m_zip_member, 5), (m_table, 3)],
    "parquet": [(m_table, 6)],
}


def mutators(kind: str):
    group = "binary" if kind in BINARY else "text" if kind in TEXT else kind
    return GENERIC + EXTRA.get(group, [])


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    seed: int
    index: int
    kind: str
    seed_file: str
    command: str
    mutation: str
    form: str                          # file, nosuffix, stdin, rundir, dir-of-runs, special
    argv: list[str] = field(default_factory=list)
    stdin: bytes | None = None
    input: str = ""                    # the mutated input's path (a directory for run forms)
    real_bytes: int = 0                # allocated bytes of the input (sparse files: what they hold)
    outputs: list[str] = field(default_factory=list)
    via: str = "in-process"


def _allocated(p: Path) -> int:
    if p.is_dir():
        return sum(_allocated(c) for c in p.iterdir())
    st = p.lstat()
    return st.st_blocks * 512 if stat.S_ISREG(st.st_mode) else 0


def _suffix(name: str) -> str:
    s = Path(name).suffix
    return s if s else ""


def make_case(seed: int, index: int, scratch: Path, subprocess_every: int = 0) -> Case:
    """Case `index` of run `seed`, its files written under `scratch` (emptied first)."""
    rng = random.Random(f"hbtool-fuzz/{seed}/{index}")
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    kind = rng.choice(sorted(KINDS))
    seeds, commands = KINDS[kind]
    seed_file = rng.choice(seeds)
    command = rng.choice(commands)
    data = bytearray(seed_bytes(seed_file))
    roll = rng.random()
    form = "file"
    special = None
    if roll < 0.03:
        data, mutation = bytearray(), "empty"
    elif roll < 0.05:
        special, mutation = rng.choice(["empty-dir", "fifo", "dev-zero", "dev-null"]), ""
        mutation = special
    else:
        steps = []
        weighted = [m for m, w in mutators(kind) for _ in range(w)]
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            data, how = rng.choice(weighted)(rng, data, kind)
            steps.append(how)
        mutation = " | ".join(steps)
    name = Path(seed_path(seed_file)).name
    if kind in ("hbt", "queue-hbt", "probe-hbt", "status-hbt"):
        name = "hbtrace-fuzz-1.hbt"
    suffix = _suffix(name)
    f = rng.random()
    if special is None and f < 0.04:
        form = "sparse"
    elif f < 0.12:
        form = "nosuffix"
    elif f < 0.2 and kind != "hsa-model":
        form = "stdin"
    elif f < 0.28 and kind in ("hbt", "queue-hbt", "probe-hbt", "status-hbt", "legacy", "hbprof"):
        form = "rundir"
    elif f < 0.31 and kind in ("hbt", "csv", "parquet", "xlsx"):
        form = "dir-of-runs"
    case = Case(seed, index, kind, seed_file, command, mutation, form)
    if special:
        case.form = "special"
        target = scratch / f"input{suffix}"
        if special == "empty-dir":
            target.mkdir()
        elif special == "fifo":
            os.mkfifo(target)
        else:
            target.symlink_to("/dev/zero" if special == "dev-zero" else "/dev/null")
        path = target
    elif form == "stdin":
        case.stdin = bytes(data)
        path = "-"
    else:
        if form == "nosuffix":
            path = scratch / "input"
        elif form == "rundir":
            path = scratch / "run"
            path.mkdir()
            (path / name).write_bytes(bytes(data))
            if kind == "hbprof":   # a profile directory: the run file is read from it
                (path / name).rename(path / f"hbprof-fuzz-1{suffix}")
        elif form == "dir-of-runs":
            path = scratch / "runs"
            (path / "a").mkdir(parents=True)
            (path / "a" / f"x{suffix}").write_bytes(bytes(data))
            (path / "b.txt").write_bytes(b"not a trace\n")
        else:
            path = scratch / f"input{suffix}"
        if not path.exists():
            path.write_bytes(bytes(data))
        if form == "sparse":
            size = rng.choice([2 << 30, 3 << 30, 6 << 30, (1 << 30) + 4095])
            os.truncate(path, size)
            case.mutation += f" | sparse to {size}"
    case.input = str(path)
    case.real_bytes = len(data) if path == "-" else _allocated(Path(path))
    out = scratch / "out"
    argv = command.replace("{out}", str(out)).replace("{good}", str(SEEDS / "pi.hbt")).split()
    if "{in}" in command:
        argv = [str(path) if a == "{in}" else a for a in argv]
    else:
        argv.append(str(path))
    case.argv = argv
    case.outputs = [a for a in argv if a.startswith(str(out))]
    if subprocess_every and index % subprocess_every == 0:
        case.via = "subprocess"
    return case


# --------------------------------------------------------------------------- running one case


def rss_kb(field_name: str = "VmRSS") -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def cap_bytes(case: Case) -> int:
    return CAP_BASE + CAP_PER_BYTE * case.real_bytes


def time_limit(real_bytes: int) -> float:
    """Seconds of its own time a case may take before it counts as a hang."""
    return HANG_S + real_bytes / READ_BYTES_PER_S


def classify(code, err: str, out: str, outputs_ok: bool, secs: float, mem: int, cap: int,
             limit: float = HANG_S) -> str:
    """ok, or what is wrong: traceback, exit-N, lines (exit 2 without exactly one line), no-result,
    hang (over `limit` seconds, time_limit), over-cap."""
    if secs > limit:
        return "hang"
    if mem > cap:
        return "over-cap"
    if "Traceback" in err or "internal error" in err:
        return "traceback"
    if code not in (0, 2):
        return f"exit-{code}"
    if code == 2 and len(err.strip().splitlines()) != 1:
        return "lines"
    if code == 0 and not (out.strip() or outputs_ok):
        return "no-result"
    return "ok"


def _outputs_ok(case: Case) -> bool:
    return any(Path(o).exists() and Path(o).stat().st_size > 0 for o in case.outputs)


class _Watchdog(threading.Thread):
    """Stops the worker when a case's resident memory grows past twice its cap."""

    def __init__(self, report):
        super().__init__(daemon=True)
        self.limit_kb = None
        self.report = report

    def run(self):
        while True:
            time.sleep(0.02)
            limit = self.limit_kb
            if limit is not None and rss_kb() > limit:
                self.report()
                os._exit(70)


def run_in_process(case: Case) -> dict:
    from hbtool.cli import main

    old = sys.stdin, sys.stdout, sys.stderr
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin if case.stdin is not None else b""))
    t0, q0 = time.monotonic(), queued_s()
    code = None
    try:
        main(case.argv)
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
    except BaseException as exc:  # main lets nothing else out: a bug of the harness or of main
        import traceback

        err.write("Traceback (escaped main)\n" + "".join(traceback.format_exception(exc)))
        code = -1
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    secs = time.monotonic() - t0 - (queued_s() - q0)
    for s in (out, err):
        s.flush()
    return {"code": code, "out": out.buffer.getvalue().decode("utf-8", "replace"),
            "err": err.buffer.getvalue().decode("utf-8", "replace"), "secs": secs}


def queued_s(pid: int | str = "self") -> float:
    """Seconds the process's main thread has spent runnable but waiting for a CPU
    (/proc/PID/schedstat, its second field; 0 where the kernel does not say). A case's own
    time is its wall time less this: on a loaded machine a case that waits for a core is
    not a hang, while one blocked in a read (sleeping, not queued) still is."""
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def hbtool_command() -> list[str]:
    exe = Path(sys.executable).parent / "hbtool"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "hbtool"]


def run_subprocess(case: Case, scratch: Path) -> dict:
    """The real console script as a process: exit status, stderr, time, peak memory (wait4)."""
    so, se = scratch / "stdout", scratch / "stderr"
    env = {k: v for k, v in os.environ.items() if k != "HBTOOL_DEBUG"}
    env["MPLBACKEND"] = "Agg"
    with open(so, "wb") as fo, open(se, "wb") as fe:
        stdin = subprocess.DEVNULL
        if case.stdin is not None:
            (scratch / "stdin").write_bytes(case.stdin)
            stdin = open(scratch / "stdin", "rb")
        t0 = time.monotonic()
        # GNU time measures the peak: a child's own rusage would count the memory of the
        # worker it was forked from (Linux keeps the larger hiwater across exec)
        timer = ["/usr/bin/time", "-f", "%M", "-o", str(scratch / "rss")] if os.path.exists("/usr/bin/time") else []
        p = subprocess.Popen(timer + hbtool_command() + case.argv, stdin=stdin, stdout=fo, stderr=fe, env=env,
                             start_new_session=True)
        if stdin is not subprocess.DEVNULL:
            stdin.close()
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > time_limit(case.real_bytes) + START_ALLOWANCE_S:
                os.killpg(p.pid, signal.SIGKILL)
                _, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
        p.returncode = os.waitstatus_to_exitcode(status)
    secs = time.monotonic() - t0
    peak = usage.ru_maxrss
    if timer:
        words = (scratch / "rss").read_text().split() if (scratch / "rss").exists() else []
        peak = int(words[-1]) if words and words[-1].isdigit() else peak
    return {"code": p.returncode, "out": so.read_text(errors="replace"), "err": se.read_text(errors="replace"),
            "secs": max(0.0, secs - START_ALLOWANCE_S), "peak_kb": peak}


# --------------------------------------------------------------------------- the worker


def _warm_up() -> None:
    """Import every command's module and what they load on use, so that no case pays for the
    imports (their memory is the baseline, not the case's); numba's kernels come from its
    on-disk cache on first use."""
    import importlib

    from hbtool.cli import COMMANDS

    for module, _, _ in COMMANDS.values():
        importlib.import_module(module)
    for module in ("pandas", "pyarrow.parquet", "openpyxl", "matplotlib.pyplot", "hbtool.analyzers.features",
                   "hbtool.analyzers.hsa", "hbtool.analyzers.behavior", "hbtool.analyzers.interference",
                   "hbtool.analyzers.service_rate", "hbtool.io.hbt_stream", "hbtool.io.tabular", "hbtool.io.hbprof"):
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


def worker(rfd: int, wfd: int, subprocess_every: int, scratch: Path) -> None:
    os.environ["MPLBACKEND"] = "Agg"
    os.environ.pop("HBTOOL_DEBUG", None)
    import warnings

    # as in a fresh process per case: every warning shown each time, but for the categories
    # Python hides by default
    warnings.resetwarnings()
    warnings.simplefilter("always")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category)
    rfile, wfile = os.fdopen(rfd, "r"), os.fdopen(wfd, "w")
    current: dict = {}

    def send(result: dict) -> None:
        wfile.write(json.dumps(result) + "\n")
        wfile.flush()

    def over_cap() -> None:
        send({**current, "outcome": "over-cap", "mem": rss_kb() * 1024 - current.get("base", 0),
              "code": None, "err": "", "secs": 0.0})

    dog = _Watchdog(over_cap)
    dog.start()
    try:
        _warm_up()
        warm_rss = rss_kb() * 1024
        send({"ready": True, "warm_rss": warm_rss})
        for line in rfile:
            req = json.loads(line)
            case = make_case(req["seed"], req["index"], scratch / "case", subprocess_every)
            # the case's clock starts now, not while it was made
            send({"started": req["index"], "limit": time_limit(case.real_bytes)})
            cap = cap_bytes(case)
            current.clear()
            current.update(head(case))
            if case.via == "subprocess":
                r = run_subprocess(case, scratch)
                mem = r.pop("peak_kb") * 1024 - warm_rss
            else:
                open("/proc/self/clear_refs", "w").write("5")
                base = rss_kb() * 1024
                current["base"] = base
                dog.limit_kb = (base + HARD_LIMIT_FACTOR * cap) // 1024
                r = run_in_process(case)
                dog.limit_kb = None
                mem = rss_kb("VmHWM") * 1024 - base
            outcome = classify(r["code"], r["err"], r["out"], _outputs_ok(case), r["secs"], mem, cap,
                               time_limit(case.real_bytes))
            send({**head(case), "outcome": outcome, "code": r["code"], "secs": round(r["secs"], 3),
                  "mem": mem, "cap": cap, "err": r["err"][-2000:]})
    finally:
        # the parent removes it too: a worker it kills never gets here
        shutil.rmtree(scratch, ignore_errors=True)


def head(case: Case) -> dict:
    return {k: v for k, v in asdict(case).items() if k not in ("stdin", "outputs")}


# --------------------------------------------------------------------------- the parent


class Worker:
    def __init__(self, subprocess_every: int):
        self.subprocess_every = subprocess_every
        self.start()

    def start(self):
        r1, w1 = os.pipe()   # parent -> worker
        r2, w2 = os.pipe()   # worker -> parent
        self.scratch = tempfile.mkdtemp(prefix="hbtool-fuzz-")
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", str(r1), str(w2),
                                      str(self.subprocess_every), self.scratch], pass_fds=(r1, w2),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(r1)
        os.close(w2)
        self.to = os.fdopen(w1, "w")
        self.fd = r2
        self.buf = b""
        self.task = None
        self.started = 0.0
        self.queued0 = 0.0     # its run-queue wait when its case started (queued_s)
        self.running = False   # the case is made and runs (until then its clock is MAKE_S)
        self.limit = HANG_S    # its case's time limit once it runs (time_limit)
        self.ready = False
        self.warm_rss = 0

    def send(self, seed: int, index: int):
        self.task = (seed, index)
        self.started, self.running, self.limit = time.monotonic(), False, HANG_S
        self.to.write(json.dumps({"seed": seed, "index": index}) + "\n")
        self.to.flush()

    def lines(self) -> list[dict] | None:
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            return None
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        return [json.loads(x) for x in done]

    def kill(self):
        with contextlib.suppress(OSError, ValueError):
            self.proc.kill()
        self.proc.wait()
        with contextlib.suppress(OSError, ValueError):
            self.to.close()
        with contextlib.suppress(OSError, ValueError):
            os.close(self.fd)
        shutil.rmtree(self.scratch, ignore_errors=True)


def fuzz(cases: int, seed: int = 1, workers: int = 2, subprocess_every: int = 100, start: int = 0,
         keep: Path | None = None, progress: bool = False, confirm: bool = True) -> list[dict]:
    """Run cases start .. start+cases-1 of run `seed`; one result dict per case. confirm: a
    case that ran over HANG_S of its own time is run again alone (one worker, nothing else of
    the fuzzer's beside it); if it then ends in time, its outcome is what it did alone and
    ``slow_under_load`` keeps its time among the others (a starved or I/O-bound case on a
    loaded machine is not a hang of hbtool; the table counts them apart)."""
    todo = list(range(start, start + cases))[::-1]
    results: list[dict] = []
    pool = [Worker(subprocess_every) for _ in range(max(1, workers))]
    sel = selectors.DefaultSelector()
    for w in pool:
        sel.register(w.fd, selectors.EVENT_READ, w)

    def restart(w: Worker):
        sel.unregister(w.fd)
        w.kill()
        w.start()
        sel.register(w.fd, selectors.EVENT_READ, w)

    t0 = time.monotonic()
    while todo or any(w.task for w in pool):
        for w in pool:
            if w.ready and w.task is None and todo:
                w.send(seed, todo.pop())
        for key, _ in sel.select(timeout=0.2):
            w = key.data
            msgs = w.lines()
            if msgs is None:   # the worker died: its case is a failure of its own kind
                if w.task:
                    results.append(_lost(w, seed, "worker-died"))
                    w.task = None
                restart(w)
                continue
            for m in msgs:
                if m.get("ready"):
                    w.ready, w.warm_rss = True, m["warm_rss"]
                    continue
                if "started" in m:
                    w.started, w.running, w.limit = time.monotonic(), True, m.get("limit", HANG_S)
                    w.queued0 = queued_s(w.proc.pid)
                    continue
                results.append(m)
                w.task = None
                if progress and m["outcome"] != "ok":
                    print(f"  FAIL {m['outcome']}: --replay {seed} {m['index']}: {m['kind']} [{m['form']}] "
                          f"{m['mutation'][:80]} :: {' '.join(m['argv'][:3])}", file=sys.stderr, flush=True)
                if m["outcome"] == "over-cap" and m.get("code") is None:
                    restart(w)   # the watchdog stopped it
        now = time.monotonic()
        for w in pool:
            limit = w.limit + START_ALLOWANCE_S + 5 if (w.task and w.task[1] % max(1, subprocess_every) == 0
                                                        and subprocess_every) else w.limit
            limit = limit if w.running else MAKE_S
            own = now - w.started - (queued_s(w.proc.pid) - w.queued0 if w.running else 0.0)
            if w.task and own > limit:
                results.append(_lost(w, seed, "hang", own))
                if progress:
                    print(f"  FAIL hang: --replay {seed} {w.task[1]}", file=sys.stderr, flush=True)
                w.task = None
                restart(w)
        if progress and len(results) and len(results) % 1000 == 0:
            print(f"  {len(results)} cases, {time.monotonic() - t0:.0f} s, "
                  f"{sum(r['outcome'] != 'ok' for r in results)} failures", file=sys.stderr, flush=True)
    for w in pool:
        w.kill()
    if confirm:
        for r in results:
            if r["outcome"] == "hang":
                again = fuzz(1, seed, 1, subprocess_every, r["index"], confirm=False)[0]
                if again["outcome"] != "hang":
                    r.update({k: again[k] for k in ("outcome", "code", "secs", "mem", "cap", "err") if k in again},
                             slow_under_load=r["secs"])
                if progress:
                    print(f"  --replay {seed} {r['index']} alone: {again['outcome']} in {again['secs']} s",
                          file=sys.stderr, flush=True)
    if keep:
        for r in results:
            if r["outcome"] != "ok":
                keep_case(seed, r["index"], keep)
    return sorted(results, key=lambda r: r["index"])


def _lost(w: Worker, seed: int, outcome: str, secs: float = 0.0) -> dict:
    with tempfile.TemporaryDirectory() as d:
        case = make_case(seed, w.task[1], Path(d) / "c", w.subprocess_every)
        return {**head(case), "outcome": outcome, "code": None, "secs": round(secs, 3), "mem": 0, "cap": 0,
                "err": ""}


def keep_case(seed: int, index: int, where: Path) -> Path:
    """Make case (seed, index) again under `where`/<seed>-<index>/ with a case.json beside it."""
    d = where / f"{seed}-{index}"
    case = make_case(seed, index, d / "case")
    (d / "case.json").write_text(json.dumps(head(case), indent=1))
    if case.stdin is not None:
        (d / "stdin").write_bytes(case.stdin)
    return d


REGRESSIONS = ROOT / "tests" / "fuzz_regressions"


def save_regression(name: str, seed: int, index: int, defect: str, where: Path = REGRESSIONS) -> dict:
    """Keep case (seed, index) as a regression: its input as `name` (plus the suffix it had) in
    `where`, and an entry in where/cases.json saying how to run it again (tests/test_fuzz.py
    replays every entry): the arguments, with {file} for the input and {seeds} for the seed
    folder; how the input is given (file, stdin, rundir, fifo, dev-zero); a sparse size."""
    with tempfile.TemporaryDirectory() as d:
        case = make_case(seed, index, Path(d) / "case")
        entry = {"file": None, "defect": defect, "from": f"--replay {seed} {index}", "form": case.form}
        src = Path(case.input)
        if case.form == "special":   # empty-dir, fifo, dev-zero, dev-null: made under this name when replayed
            entry["form"], entry["name"] = case.mutation, src.name
        elif case.stdin is not None:
            entry["file"] = name + _suffix(Path(seed_path(case.seed_file)).name)
            (where / entry["file"]).write_bytes(case.stdin)
        else:
            f = next(p for p in src.rglob("*") if p.is_file()) if src.is_dir() else src
            entry["file"] = name + f.suffix
            with open(f, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                data = fh.read(written_end(fh, size))
            (where / entry["file"]).write_bytes(data)
            if len(data) < size:
                entry["sparse"] = size
            if case.form in ("rundir", "dir-of-runs"):
                entry["member"] = str(f.relative_to(src))
        entry["args"] = [a.replace(case.input, "{file}").replace(str(SEEDS), "{seeds}") for a in case.argv]
        entry["args"] = [re.sub(r"^/.*/case/out", "{out}", a) for a in entry["args"]]
    index_file = where / "cases.json"
    cases = json.loads(index_file.read_text()) if index_file.exists() else []
    cases = [c for c in cases if c["file"] != entry["file"] or c["defect"] != defect] + [entry]
    index_file.write_text(json.dumps(cases, indent=1) + "\n")
    return entry


def replay_regression(entry: dict, scratch: Path, where: Path = REGRESSIONS) -> dict:
    """Run one kept regression (an entry of cases.json) in this process as the fuzzer runs a
    case: its result, with outcome "ok" or what is wrong (classify); a case that blocks is
    stopped after its time limit (time_limit) by an alarm."""
    scratch.mkdir(parents=True, exist_ok=True)
    form, stdin = entry["form"], None
    if form in ("fifo", "dev-zero", "dev-null", "empty-dir"):
        path = scratch / entry["name"]
        if form == "fifo":
            os.mkfifo(path)
        elif form == "empty-dir":
            path.mkdir()
        else:
            path.symlink_to("/dev/zero" if form == "dev-zero" else "/dev/null")
    elif form == "stdin":
        path, stdin = "-", (where / entry["file"]).read_bytes()
    else:
        path = scratch / entry["file"].removesuffix(".gz")   # a large table is kept gzipped
        if entry["file"].endswith(".gz"):
            import gzip

            path.write_bytes(gzip.decompress((where / entry["file"]).read_bytes()))
        elif form in ("rundir", "dir-of-runs"):
            path = scratch / "run"
            (path / entry["member"]).parent.mkdir(parents=True)
            shutil.copyfile(where / entry["file"], path / entry["member"])
        else:
            shutil.copyfile(where / entry["file"], path)
            if entry.get("sparse"):
                os.truncate(path, entry["sparse"])
    args = [a.replace("{file}", str(path)).replace("{seeds}", str(SEEDS)).replace("{out}", str(scratch / "out"))
            for a in entry["args"]]
    case = Case(0, 0, "regression", entry.get("file") or "", " ".join(entry["args"]), entry["defect"], form,
                argv=args, stdin=stdin, input=str(path),
                real_bytes=len(stdin) if stdin is not None else _allocated(Path(path)),
                outputs=[a for a in args if a.startswith(str(scratch / "out"))])

    limit = time_limit(case.real_bytes)

    def stop(signum, frame):
        raise TimeoutError(f"over {limit:.0f} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(int(limit) + 1)
    open("/proc/self/clear_refs", "w").write("5")
    base = rss_kb() * 1024
    try:
        r = run_in_process(case)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    mem = rss_kb("VmHWM") * 1024 - base
    r["mem"], r["cap"] = mem, cap_bytes(case)
    r["outcome"] = classify(r["code"], r["err"], r["out"], _outputs_ok(case), r["secs"], mem, r["cap"],
                            time_limit(case.real_bytes))
    return r


def written_end(fh, size):
    from hbtool.io.registry import written_end as end

    return end(fh, size)


def table(results: list[dict]) -> str:
    rows = defaultdict(Counter)
    for r in results:
        c = rows[r["kind"]]
        c["cases"] += 1
        c[f"exit {r['code']}" if r["outcome"] == "ok" else r["outcome"]] += 1
        c["subprocess"] += r["via"] == "subprocess"
        c["slow under load"] += "slow_under_load" in r
    cols = ["cases", "exit 0", "exit 2", "traceback", "hang", "over-cap", "other", "slow under load"]
    lines = ["| kind | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    total = Counter()
    for kind in sorted(rows):
        c = rows[kind]
        c["other"] = sum(v for k, v in c.items() if k not in cols and k not in ("subprocess", "slow under load"))
        total.update({k: c[k] for k in cols})
        lines.append(f"| {kind} | " + " | ".join(str(c[k]) for k in cols) + " |")
    lines.append("| **all** | " + " | ".join(f"**{total[k]}**" for k in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--subprocess-every", type=int, default=100,
                    help="every N-th case runs the installed hbtool as a process (0: none)")
    ap.add_argument("--keep", type=Path, help="make every failing case again in this folder")
    ap.add_argument("--json", type=Path, help="write every case's result here")
    ap.add_argument("--replay", nargs=2, type=int, metavar=("SEED", "INDEX"))
    ap.add_argument("--save", nargs=4, metavar=("NAME", "SEED", "INDEX", "DEFECT"),
                    help="keep case (SEED, INDEX) in tests/fuzz_regressions/ as NAME, saying its DEFECT")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(*map(int, a.worker[:3]), Path(a.worker[3]))
        return
    if a.save:
        print(json.dumps(save_regression(a.save[0], int(a.save[1]), int(a.save[2]), a.save[3]), indent=1))
        return
    if a.replay:
        with tempfile.TemporaryDirectory() as d:
            case = make_case(a.replay[0], a.replay[1], Path(d) / "case")
            print(json.dumps(head(case), indent=1))
            os.environ["HBTOOL_DEBUG"] = "1"
            os.environ["MPLBACKEND"] = "Agg"
            if case.stdin is not None:
                sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin))
            _warm_up()
            from hbtool.cli import main as hb

            open("/proc/self/clear_refs", "w").write("5")
            base, t0 = rss_kb() * 1024, time.monotonic()
            try:
                hb(case.argv)
            finally:
                print(f"{time.monotonic() - t0:.2f} s, peak memory {(rss_kb('VmHWM') * 1024 - base) / 2**20:.0f} MB "
                      f"above the start (cap {cap_bytes(case) / 2**20:.0f} MB)", file=sys.stderr)
        return
    t0 = time.monotonic()
    results = fuzz(a.cases, a.seed, a.workers, a.subprocess_every, a.start, a.keep, progress=True)
    wall = time.monotonic() - t0
    print(f"{len(results)} cases (seed {a.seed}, indices {a.start}-{a.start + a.cases - 1}) in {wall:.0f} s on "
          f"{a.workers} workers; {sum(r['via'] == 'subprocess' for r in results)} through the hbtool script "
          f"as a process; peak memory of a case {max((r['mem'] for r in results), default=0) / 2**20:.0f} MB")
    print(table(results))
    bad = [r for r in results if r["outcome"] != "ok"]
    for r in bad[:50]:
        last = r["err"].strip().splitlines()[-1:] or [""]
        print(f"FAIL {r['outcome']}: --replay {r['seed']} {r['index']}: {r['kind']} {r['seed_file']} "
              f"[{r['form']}] {r['mutation']} :: hbtool {' '.join(r['argv'])}\n    {last[0][:300]}")
    if a.json:
        a.json.write_text(json.dumps(results))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
