"""The fault suite's programs it was not written for, and its disk and file faults (issue 20):
real programs run as they are and under `hbtool record`, compared for their fate (exit status,
stdout, stderr without hbtool's and the tracer's own lines, the files they write), with the
trace checked readable by `hbtool info`; a program killed with SIGKILL at seeded moments,
with the beats it counted itself compared with the trace's; and the faults of the trace's
folder and file. Shared by tests/test_hostile_programs.py (quick cases) and
benchmarks/hostile_programs.py (every case, the README's table).

Each check returns a Result whose `problems` list says what went wrong, empty when it held.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs" / "hostile"
LIB = ROOT / "native_tracer" / "lib" / "libhbtrace.so"
EXAMPLES = ROOT / "native_tracer" / "examples" / "bin"
HBTOOL = [sys.executable, "-m", "hbtool"]
OWN_LINES = (b"hbtool: ", b"hbtrace: ")  # what hbtool and the tracer add to stderr
#: a bug, not a message: a traceback, or the one line the console entry point makes of one
BUG_MARKS = (b"Traceback (most recent call last)", b"hbtool: error: internal error")
NO_BEATS = "the program made no heartbeats and started no threads"


@dataclass
class Result:
    name: str
    kind: str  # "program", "kill" or "disk"
    problems: list[str] = field(default_factory=list)
    fate_changed: bool = False
    tracebacks: int = 0
    hangs: int = 0
    beats_lost: int = 0
    beats_checked: int = 0
    runs: int = 1
    seconds: float = 0.0


@dataclass
class Run:
    rc: int | None  # None: timed out (a hang)
    out: bytes
    err: bytes
    files: dict[str, str]  # the files the run left in its folder: path -> sha256


def build(work: Path) -> dict[str, Path]:
    """Compile the hostile C programs (not linked with the tracer: `hbtool record` preloads it),
    a statically linked one, and benchmarks/idle_threads.c, into work/bin."""
    out = work / "bin"
    out.mkdir(parents=True, exist_ok=True)
    srcs = {p.stem: p for p in sorted(PROGRAMS.glob("*.c"))}
    srcs["idle_threads"] = ROOT / "benchmarks" / "idle_threads.c"
    bins = {}
    for name, src in srcs.items():
        bins[name] = out / name
        subprocess.run(["gcc", "-O1", "-Wall", "-Wextra", "-pthread", str(src), "-o", str(bins[name])], check=True)
    bins["static"] = out / "signals_blocked_static"
    subprocess.run(["gcc", "-O1", "-static", "-pthread", str(PROGRAMS / "signals_blocked.c"), "-o",
                    str(bins["static"])], check=True)
    return bins


def bugs(err: bytes | str) -> int:
    err = err.encode() if isinstance(err, str) else err
    return sum(err.count(m) for m in BUG_MARKS)


def info(trace: Path, *options: str) -> Run:
    """`hbtool info TRACE` through the console entry point, in this process (no start-up cost)."""
    import io

    from hbtool.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["info", *options, str(trace)])
            rc = 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Run(rc, out.getvalue().encode(), err.getvalue().encode(), {})


def plain_env() -> dict:
    """The environment without the tracer or any of its settings."""
    return {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith(("HBTRACE_", "HBPROF_"))}


def _hashes(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            out[str(p.relative_to(folder))] = h.hexdigest()
    return out


def run(argv: list[str], cwd: Path, timeout: float, env: dict | None = None) -> Run:
    """Run to its end (or kill its whole session after `timeout`: rc None)."""
    p = subprocess.Popen(argv, cwd=cwd, env=env or plain_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return Run(p.returncode, out, err, {})
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Run(None, out, err, {})


# --------------------------------------------------------------------------- programs


@dataclass
class Case:
    """A program run as it is and under `hbtool record`, in the same folder (so that paths it
    writes into its files are the same), made ready by `prepare` before each run."""
    name: str
    argv: Callable[[dict, Path], list[str]]  # (bins, data) -> the command
    slow: bool = False
    unordered: bool = False  # output lines compared as a multiset (make -j8)
    #: output lines left out of the comparison on both sides: what differs from run to run
    #: without the tracer too (make -j8 runs `mkdir -p bin` or not, as its jobs happen to go)
    ignore: bytes | None = None
    static: bool = False
    prepare: Callable[[Path, Path], None] | None = None  # (run folder, data)
    timeout: float = 120.0


def _own(err: bytes) -> bytes:
    return b"".join(ln for ln in err.splitlines(keepends=True) if not ln.startswith(OWN_LINES))


def _same(a: bytes, b: bytes, case: Case) -> bool:
    if case.ignore:
        a, b = (b"".join(ln for ln in x.splitlines(keepends=True) if not re.match(case.ignore, ln)) for x in (a, b))
    return sorted(a.splitlines()) == sorted(b.splitlines()) if case.unordered else a == b


def _program_side(case: Case, bins: dict, data: Path, folder: Path, record_into: Path | None) -> Run:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if case.prepare:
        case.prepare(folder, data)
    argv = case.argv(bins, data)
    if record_into is not None:
        argv = [*HBTOOL, "record", "-o", str(record_into), "--", *argv]
    r = run(argv, folder, case.timeout)
    r.files = _hashes(folder)
    return r


def run_case(case: Case, bins: dict, work: Path, data: Path) -> Result:
    """Run the case without and with the tracer; its fate compared, its trace read."""
    t0 = time.monotonic()
    res = Result(case.name, "program", runs=2)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", case.name).strip("-")  # a path a Makefile's shell can take
    folder, trace = work / slug / "run", work / slug / "trace"
    shutil.rmtree(trace, ignore_errors=True)
    plain = _program_side(case, bins, data, folder, None)
    traced = _program_side(case, bins, data, folder, trace)
    for side, r in (("without the tracer", plain), ("under hbtool record", traced)):
        if r.rc is None:
            res.hangs += 1
            res.problems.append(f"hung {side} (killed after {case.timeout:g} s)")
    if plain.rc is not None and traced.rc is not None:
        if plain.rc != traced.rc:
            res.problems.append(f"exit status {plain.rc} without the tracer, {traced.rc} with it")
        if not _same(plain.out, traced.out, case):
            res.problems.append(f"stdout differs ({len(plain.out)} bytes without the tracer, {len(traced.out)} "
                                f"with it)")
        if not _same(plain.err, _own(traced.err), case):
            res.problems.append(f"stderr differs: {plain.err[-300:]!r} without, {_own(traced.err)[-300:]!r} with")
        if plain.files != traced.files:
            diff = sorted(set(plain.files.items()) ^ set(traced.files.items()))
            res.problems.append(f"the files it wrote differ: {sorted({k for k, _ in diff})[:5]}")
    res.fate_changed = bool(res.problems)
    res.tracebacks += bugs(traced.err)
    res.problems += _readable(case, traced, trace)
    res.tracebacks += sum(bugs(p) for p in res.problems)
    res.seconds = time.monotonic() - t0
    return res


def _readable(case: Case, traced: Run, trace: Path) -> list[str]:
    """The trace reads with `hbtool info`; or, where nothing was traced, record said why in its one
    documented line."""
    lines = [ln.decode(errors="replace") for ln in traced.err.splitlines() if ln.startswith(b"hbtool: ")]
    files = sorted(trace.glob("*.hbt")) if trace.is_dir() else []
    if case.static:
        want = [ln for ln in lines if "is statically linked: the tracer cannot be loaded into it" in ln]
        if len(lines) != 1 or len(want) != 1 or files:
            return [f"a statically linked program: expected one line and no trace, got {lines} and {len(files)} "
                    f"files"]
        return []
    if not files:
        if any(f"no trace written to {trace}/: {NO_BEATS}" in ln for ln in lines):
            return []
        return [f"no trace and no line that says why: {lines}"]
    r = info(trace)
    if r.rc != 0:
        return [f"hbtool info exit status {r.rc}: {r.err.decode(errors='replace')[-500:]}"]
    return []


def _text(path: Path, nbytes: int, seed: int) -> None:
    """nbytes of lines of letters and spaces (seeded): compressible, sortable."""
    if path.exists() and path.stat().st_size == nbytes:
        return
    table = np.frombuffer((b"etaoinshrdlucmfwypvbgkjqxz" * 9)[:230] + b" " * 20 + b"\n" * 6, dtype=np.uint8)
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for at in range(0, nbytes, 1 << 24):
            fh.write(table[rng.integers(0, table.size, min(1 << 24, nbytes - at))].tobytes())


def _link_input(name: str, nbytes: int) -> Callable[[Path, Path], None]:
    def prepare(folder: Path, data: Path) -> None:
        _text(data / name, nbytes, seed=nbytes)
        os.link(data / name, folder / "input")
    return prepare


#: what `make -j8` builds: the tracer itself, library, layout tool and examples, from a copy
PROJECT = ("Makefile", "src", "include", "tools", "examples")


def _copy_project(folder: Path, data: Path) -> None:
    dst = folder / "native_tracer"
    dst.mkdir()
    for part in PROJECT:
        src = ROOT / "native_tracer" / part
        if src.is_dir():
            shutil.copytree(src, dst / part, ignore=shutil.ignore_patterns("bin", "bin-*", "*.o", "*.d"))
        else:
            shutil.copy2(src, dst / part)


def _ab(folder: Path, data: Path) -> None:
    (folder / "out").mkdir()


CASES = [
    Case("xz -T4 (2 MB)", lambda b, d: ["xz", "-T4", "-1", "--block-size=256KiB", "-k", "input"],
         prepare=_link_input("text2m", 2 << 20)),
    Case("xz -T4 (200 MB)", lambda b, d: ["xz", "-T4", "-1", "-k", "input"],
         prepare=_link_input("text200m", 200 << 20), slow=True, timeout=900),
    Case("sort --parallel=4 (16 MB)", lambda b, d: ["sort", "--parallel=4", "-S", "4M", "-o", "sorted", "input"],
         prepare=_link_input("text16m", 16 << 20)),
    Case("sort --parallel=4 (200 MB)", lambda b, d: ["sort", "--parallel=4", "-S", "64M", "-o", "sorted", "input"],
         prepare=_link_input("text200m", 200 << 20), slow=True, timeout=900),
    Case("Python, 200 threads", lambda b, d: [sys.executable, str(PROGRAMS / "threads200.py")]),
    Case("fork pool of 8, spawn pool of 2, exit 3", lambda b, d: [sys.executable, str(PROGRAMS / "pools.py")]),
    Case("own SIGSEGV handler, 1,000 recoveries", lambda b, d: [str(b["segv_recover"]), "1000"]),
    Case("5,000 threads, 50 at a time", lambda b, d: [str(b["idle_threads"]), "threads", "5000", "50"], slow=True),
    Case("500 forked children, 4 threads each", lambda b, d: [str(b["idle_threads"]), "fork", "500", "4"],
         slow=True, timeout=600),
    Case("closes every descriptor", lambda b, d: [str(b["close_fds"]), "out"], prepare=_ab),
    Case("exit(7) from a thread while others spin", lambda b, d: [str(b["exit_from_thread"])]),
    Case("threads, then exec", lambda b, d: [str(b["threads_exec"]), "/bin/sh", "-c", "echo after exec; exit 5"]),
    Case("every signal blocked", lambda b, d: [str(b["signals_blocked"])]),
    Case("vfork and posix_spawn", lambda b, d: [str(b["spawn"])]),
    Case("setrlimit RLIMIT_FSIZE", lambda b, d: [str(b["rlimits"]), "fsize", "out"], prepare=_ab),
    Case("setrlimit RLIMIT_NOFILE", lambda b, d: [str(b["rlimits"]), "nofile", "out"], prepare=_ab),
    Case("setrlimit RLIMIT_AS", lambda b, d: [str(b["rlimits"]), "as", "out"], prepare=_ab),
    Case("statically linked", lambda b, d: [str(b["static"])], static=True),
    Case("make -j8 (the tracer and its examples)", lambda b, d: ["make", "-j8", "-C", "native_tracer"],
         prepare=_copy_project, unordered=True, ignore=rb"mkdir -p ", slow=True, timeout=900),
]


# --------------------------------------------------------------------------- SIGKILL


def run_kills(bins: dict, work: Path, kills: int, seed: int, first: float = 0.3, last: float = 2.0) -> Result:
    """`beat_truth` (32 threads) under the tracer, killed with SIGKILL at `kills` seeded moments
    in [first, last] s after its start. 100 ms before each kill the program's own counts are
    read: every one of those beats is older than 100 ms at the kill and must be in the trace
    (beats_lost counts those that are not)."""
    t_start = time.monotonic()
    res = Result(f"32 threads, SIGKILL at {kills} moments", "kill", runs=kills)
    rng = np.random.default_rng(seed)
    for k in range(kills):
        when = float(rng.uniform(first, last))
        trace, truth = work / f"kill{k}" / "trace", work / f"kill{k}" / "truth"
        shutil.rmtree(trace.parent, ignore_errors=True)
        trace.parent.mkdir(parents=True)
        env = dict(plain_env(), LD_PRELOAD=str(LIB), HBTRACE_DIR=str(trace))
        p = subprocess.Popen([str(bins["beat_truth"]), str(truth)], env=env, stderr=subprocess.PIPE)
        t0 = time.monotonic()
        time.sleep(max(0.0, when - 0.1))
        counted = np.fromfile(truth, dtype=np.int64).reshape(-1, 2).copy() if truth.exists() else np.zeros((0, 2))
        read_at = time.monotonic()  # the kill comes 100 ms after this at the least, however late it was
        time.sleep(max(0.0, max(t0 + when, read_at + 0.1) - time.monotonic()))
        p.kill()
        err = p.communicate()[1]
        if p.returncode != -signal.SIGKILL:
            res.problems.append(f"kill {k}: exit status {p.returncode}, not killed by SIGKILL")
            res.fate_changed = True
        if err.strip(b"\n") and any(not ln.startswith(OWN_LINES) for ln in err.splitlines()):
            res.problems.append(f"kill {k}: stderr {err[-300:]!r}")
        res.tracebacks += _count_lost(res, k, trace, counted)
    res.seconds = time.monotonic() - t_start
    return res


def _count_lost(res: Result, k: int, trace: Path, counted: np.ndarray) -> int:
    """Add the beats of `counted` (os_tid, beats) missing from the trace to res; the tracebacks."""
    from hbtool.io import read_heartbeats

    r = info(trace)
    if r.rc != 0:
        res.problems.append(f"kill {k}: hbtool info exit status {r.rc}: {r.err[-300:]!r}")
        return bugs(r.err)
    beats = read_heartbeats(trace).beats
    by_tid = {int(t): g["seq"].to_numpy() for t, g in beats.groupby("os_tid")}
    for tid, n in counted.tolist():
        if n <= 0:
            continue
        seq = by_tid.get(int(tid), np.zeros(0, dtype=np.int64))
        lost = int(n - np.count_nonzero(seq < n))
        res.beats_checked += int(n)
        res.beats_lost += lost
        if lost:
            res.problems.append(f"kill {k}: thread {tid} lost {lost} of its first {n} beats")
    return 0


# --------------------------------------------------------------------------- disk and file faults


@contextlib.contextmanager
def mounted_tmpfs(at: Path, size: str, read_only: bool = False):
    """A small tmpfs mounted at `at` (needs root): yields False where none can be mounted."""
    at.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(at)], capture_output=True)
    if r.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(at)], check=False)


def _record(outdir: Path, *argv, cwd: Path | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([*HBTOOL, "record", "-o", str(outdir), "--", *map(str, argv)], cwd=cwd,
                            env=plain_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _finish(p: subprocess.Popen, res: Result, what: str, timeout: float = 300) -> tuple[int | None, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        res.hangs += 1
        res.problems.append(f"{what}: hung")
        return None, err
    res.tracebacks += bugs(err)
    return p.returncode, err


def _expect(res: Result, cond: bool, problem: str, fate: bool = False) -> None:
    if not cond:
        res.problems.append(problem)
        res.fate_changed |= fate


def _info_reads(res: Result, trace: Path) -> None:
    r = info(trace)
    res.tracebacks += bugs(r.err)
    _expect(res, r.rc == 0, f"hbtool info {trace}: exit status {r.rc}: {r.err[-300:]!r}")


PI = [EXAMPLES / "pi_pthread", "--threads", "4", "--beats", "2000", "--work", "100000"]  # ~0.5-2 s


PROBE = [EXAMPLES / "probe_demo", "--threads", "3", "--seconds", "0.1", "--exit", "3"]  # 4 threads, status 3


def _small_disk(work: Path, name: str, fill: bool, argv: list, status: int, said: str) -> Result | None:
    """Record into a 1 MiB tmpfs (filled first, or filling during the run): the program's
    status kept, record's line says `said` (with {trace} for the folder), what was written reads."""
    res = Result(name, "disk")
    mnt = work / name.replace(" ", "-")
    with mounted_tmpfs(mnt, "1m") as ok:
        if not ok:
            return None
        if fill:
            _fill(mnt / "filler")
        rc, err = _finish(_record(mnt / "trace", *argv), res, "record")
        _expect(res, rc == status, f"exit status {rc}, the program's is {status}", fate=True)
        _expect(res, said.format(trace=mnt / "trace") in err, f"record said: {err!r}")
        if list((mnt / "trace").glob("*.hbt")):
            _info_reads(res, mnt / "trace")
    return res


def disk_full_at_start(work: Path) -> Result | None:
    return _small_disk(work, "disk full at start", True, PROBE, 3,
                       "no trace written to {trace}/: the tracer could not create its trace file in {trace}: "
                       "No space left on device")


def disk_full_mid_run(work: Path) -> Result | None:
    return _small_disk(work, "disk full mid-run", False,
                       [EXAMPLES / "pi_pthread", "--threads", "4", "--beats", "100000", "--work", "100"], 0,
                       "records dropped because the disk was full (No space left on device) (in {trace}/")


def _fill(path: Path) -> None:
    with open(path, "wb") as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()


def read_only_folder(work: Path) -> Result | None:
    """A trace folder on a read-only file system (root ignores permission bits, so a read-only
    mount it is): the program runs as it would, record says the trace could not be created."""
    res = Result("read-only folder", "disk")
    mnt = work / "ro"
    with mounted_tmpfs(mnt, "1m", read_only=True) as ok:
        if not ok:
            return None
        rc, err = _finish(_record(mnt, *PROBE), res, "record")
        _expect(res, rc == 3, f"exit status {rc}, the program's is 3", fate=True)
        _expect(res, f"no trace written to {mnt}/: the tracer could not create its trace file in {mnt}: Read-only "
                     f"file system; the program exited with status 3" in err, f"record said: {err!r}")
        # a folder record would have to create there: refused before the program runs
        rc, err = _finish(_record(mnt / "sub", "/bin/true"), res, "record")
        _expect(res, rc == 2 and err.strip() == f"hbtool: error: cannot create the trace folder {mnt / 'sub'}: "
                     f"Read-only file system (give another one with -o)", f"record into {mnt / 'sub'}: {rc} {err!r}")
    return res


def folder_removed(work: Path) -> Result:
    """The trace folder removed while the program writes into it."""
    res = Result("folder removed during the run", "disk")
    trace = work / "removed"
    shutil.rmtree(trace, ignore_errors=True)
    p = _record(trace, *PI)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(trace.glob("*.hbt")):
        time.sleep(0.01)
    shutil.rmtree(trace, ignore_errors=True)
    rc, err = _finish(p, res, "record")
    _expect(res, rc == 0, f"exit status {rc}, the program's is 0", fate=True)
    _expect(res, f"hbtool: no trace written to {trace}/: the folder was removed while the program ran, and whatever "
                 f"trace it held with it" in err, f"record said: {err!r}")
    _expect(res, not trace.exists(), "record made the removed folder again")
    return res


def two_runs_at_once(work: Path) -> Result:
    """Two `hbtool record` into one folder at the same moment: one records, the other is refused
    before its program starts (else both would be read as one run)."""
    res = Result("two runs into one folder at once", "disk")
    trace = work / "two"
    shutil.rmtree(trace, ignore_errors=True)
    procs = [_record(trace, *PI), _record(trace, *PI)]
    ends = [_finish(p, res, f"record {i}") for i, p in enumerate(procs)]
    refused = [err for rc, err in ends if rc == 2]
    _expect(res, len(refused) == 1 and refused[0].strip() == f"hbtool: error: {trace} is being recorded into by "
                 f"another 'hbtool record' now: two runs in one folder would be read as one; record into another "
                 f"folder with -o", f"expected one run refused, got {[(rc, err[-200:]) for rc, err in ends]}")
    _expect(res, sorted(rc for rc, _ in ends) == [0, 2], f"exit statuses {[rc for rc, _ in ends]}", fate=True)
    files = sorted(trace.glob("*.hbt"))
    _expect(res, len(files) == 1, f"{len(files)} trace files, expected the one run's")
    _info_reads(res, trace)
    return res


def truncated_while_read(work: Path, moments: int, seed: int) -> Result:
    """A trace cut shorter and shorter (every 5 ms, from a seeded moment, to seeded lengths) while
    `hbtool info` reads it: info reads what is there (exit 0) or says in one line that it cannot
    (exit 2); never a traceback, never more beats than the file held."""
    res = Result(f"trace cut while info reads it ({moments} runs)", "disk", runs=moments)
    src = work / "truncate-src"
    if not list(src.glob("*.hbt")):
        shutil.rmtree(src, ignore_errors=True)
        rc, err = _finish(_record(src, EXAMPLES / "pi_pthread", "--threads", "4", "--beats", "250000", "--work", "10"),
                          res, "record")
        if rc != 0:
            res.problems.append(f"could not make the trace to cut: {err[-300:]}")
            return res
    (orig,) = src.glob("*.hbt")
    full = _beats_in(info(src, "--format", "json").out)
    rng = np.random.default_rng(seed)
    trace = work / "truncate"
    for k in range(moments):
        shutil.rmtree(trace, ignore_errors=True)
        trace.mkdir()
        f = trace / orig.name
        shutil.copy(orig, f)
        cuts = np.sort(rng.integers(0, f.stat().st_size, 400))[::-1]
        start = float(rng.uniform(0.0, 1.0))
        done = threading.Event()

        def cut_down(f=f, cuts=cuts, start=start, done=done) -> None:
            if done.wait(start):
                return
            for c in cuts.tolist():
                os.truncate(f, c)
                if done.wait(0.005):
                    return

        cutter = threading.Thread(target=cut_down)
        cutter.start()
        r = run([*HBTOOL, "info", "--format", "json", str(trace)], work, 120)
        done.set()
        cutter.join()
        res.tracebacks += bugs(r.err)
        lines = r.err.decode(errors="replace").splitlines()
        if r.rc is None:
            res.hangs += 1
            res.problems.append(f"run {k}: info hung")
        elif r.rc == 0:
            got = _beats_in(r.out)
            _expect(res, 0 <= got <= full, f"run {k}: {got} beats read, the whole file holds {full}")
        elif r.rc != 2 or len(lines) != 1 or not lines[0].startswith("hbtool: error: "):
            res.problems.append(f"run {k} (cut from {start:.2f} s): exit status {r.rc}: {lines[-3:]}")
    return res


def _beats_in(info_json: bytes) -> int:
    import json

    try:
        doc = json.loads(info_json)
    except ValueError:
        return -1
    return int(sum(t.get("beats", 0) for t in doc.get("threads", []))) if isinstance(doc, dict) else -1


DISK_FAULTS = (disk_full_at_start, disk_full_mid_run, read_only_folder, folder_removed, two_runs_at_once)
