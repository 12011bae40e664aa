"""hbtool record: run any program under the tracer (LD_PRELOAD)."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click


def _default_dir(program: str) -> str:
    return f"hbtrace-{Path(program).name}-{time.strftime('%Y%m%d-%H%M%S')}"


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", "outdir", type=click.Path(file_okay=False),
              help="Trace directory (default: hbtrace-PROGRAM-DATE-TIME).")
@click.option("-q", "--quiet", is_flag=True, help="Do not print the summary line.")
@click.option("-f", "--force", is_flag=True,
              help="Record into a folder that already holds a trace, deleting that trace first "
                   "(otherwise record refuses: two runs in one folder would be read as one).")
@click.option("--beats", "beat_sources", metavar="LIST", default=None,
              help="Which beats to record with no change to the program: any of openmp (a beat per loop chunk "
                   "and worksharing construct, with the time waited at barriers), mpi (a beat per blocking "
                   "collective; with --mpi), or none (default: all that apply). The program's own heartbeat API "
                   "calls are always recorded.")
@click.option("--mpi", "mpi", is_flag=True,
              help="Also load the PMPI segment profiler (libhbprof): one profile per MPI run, for "
                   "'hbtool interference'. Use it around mpirun: hbtool record --mpi -- mpirun -np 4 ./prog")
@click.option("--inject", metavar="KIND | MEAN_US,SD_US,PROB", default=None,
              help="Inject a fault. KIND (leak, stop, slow, busy, cond, exit, segv) is a fault of one thread "
                   "(docs/inject.md), with --thread and one of --at or --beat; its truth goes to "
                   "inject-truth.json in the trace folder. Three numbers MEAN_US,SD_US,PROB are the MPI delay "
                   "injector instead (implies --mpi): MPI, POSIX I/O and MPI-IO calls delayed by a Gaussian "
                   "delay with probability PROB; its truth goes beside the profile.")
@click.option("--thread", "inject_thread", metavar="N|random", default=None,
              help="Thread fault: the victim's thread number as its beats record it (OpenMP: its number in the "
                   "outermost team), or random, drawn from --inject-seed (default random).")
@click.option("--at", "inject_at", metavar="SECONDS|LO-HI", default=None,
              help="Thread fault: at the victim's first beat at or after SECONDS since the tracer started "
                   "(LO-HI: drawn from the seed).")
@click.option("--beat", "inject_beat", metavar="B|LO-HI", default=None,
              help="Thread fault: at the victim's B-th beat, counting beats of every source from 1 "
                   "(LO-HI: drawn from the seed).")
@click.option("--inject-seed", type=click.IntRange(0), default=None,
              help="Seed of the injector's random choices (default 1).")
@click.option("--inject-bytes", type=click.IntRange(0), default=None, metavar="BYTES",
              help="leak: bytes allocated and never freed per unit of work of the victim (default 1048576).")
@click.option("--inject-leak-max", type=click.IntRange(0), default=None, metavar="BYTES",
              help="leak: stop leaking once BYTES are leaked, 0 for no limit (default: a quarter of the "
                   "machine's memory, so that the leak does not bring the machine down).")
@click.option("--inject-slow", type=click.FloatRange(1, 1000, min_open=True), default=None, metavar="FACTOR",
              help="slow: each unit of work of the victim takes FACTOR times its CPU time (default 3).")
@click.option("--inject-wait-ms", type=click.IntRange(0, 86400000), default=None, metavar="MS",
              help="busy: how long the victim spins; cond: how long it waits on a condition nobody signals "
                   "(default 1000).")
@click.option("--inject-calls", default=None, metavar="LIST",
              help="Families of calls to delay: any of mpi,posix,mpiio (default all).")
@click.option("--status", "status_period", is_flag=False, flag_value=1.0, default=None,
              type=click.FloatRange(0.01, 3600), metavar="[SECONDS]",
              help="Also sample the machine's status (CPU, memory, swap, network) every SECONDS (default 1), "
                   "for 'hbtool status'.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- PROGRAM [ARGS]...")
def record(outdir, quiet, force, beat_sources, mpi, inject, inject_thread, inject_at, inject_beat, inject_seed,
           inject_bytes, inject_leak_max, inject_slow, inject_wait_ms, inject_calls, status_period, command):
    """Run PROGRAM under the heartbeat tracer and say where the trace went.

    With no change to the program, every thread's start and end and the
    process's end (exit status or fatal signal) are recorded; programs that
    call the heartbeat API also record their beats. hbtool exits with the
    program's exit status (128+N when a signal N killed it).

    \b
    Examples:
      hbtool record -o trace -- ./jacobi_omp --threads 4
      hbtool record -- python3 my_threads.py
      hbtool record --status -o trace -- ./stream_micro --rate 20000
    """
    from .. import tracer_names as names
    from ..tracer import profiler_library, tracer_paths

    lib = tracer_paths().library
    fault = _check_thread_fault(inject, inject_thread, inject_at, inject_beat, inject_bytes, inject_leak_max,
                                inject_slow, inject_wait_ms, inject_calls)
    if fault:
        thread_env, inject = fault, None
    else:
        thread_env = {}
        if (inject or inject_seed is not None or inject_calls) and not mpi:
            mpi = True
        if inject:
            _check_inject(inject)
    if beat_sources is not None:
        words = [w.strip() for w in beat_sources.split(",") if w.strip()]
        bad = [w for w in words if w not in ("api", "openmp", "mpi", "none")]
        if bad or not words:
            raise click.UsageError(f"--beats '{beat_sources}': expected a comma list of api, openmp, mpi, or none")
    if inject_calls:
        bad = [c for c in inject_calls.split(",") if c not in ("mpi", "posix", "mpiio")]
        if bad:
            raise click.UsageError(f"--inject-calls: unknown family '{bad[0]}' (expected mpi, posix, mpiio)")
    preload = [str(lib)]
    if mpi:
        preload.append(str(profiler_library()))
    outdir = Path(outdir or _default_dir(command[0]))
    folder = _prepare_dir(outdir, force)
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(x for x in (*preload, env.get("LD_PRELOAD", "")) if x)
    env[names.HBTRACE_DIR] = str(outdir.resolve())
    if mpi:
        env[names.HBPROF_DIR] = str(outdir.resolve())
    if inject:
        env[names.HBPROF_INJECT] = inject
    if inject_seed is not None and not thread_env:
        env[names.HBPROF_INJECT_SEED] = str(inject_seed)
    for key in [k for k in env if k.startswith("HBTRACE_INJECT") and k != names.HBTRACE_INJECT_TRUTH]:
        del env[key]  # the fault is what this command line says, nothing inherited
    if thread_env:
        env.update(thread_env)
        if inject_seed is not None:
            env[names.HBTRACE_INJECT_SEED] = str(inject_seed)
    if inject_calls:
        env[names.HBPROF_INJECT_CALLS] = inject_calls
    if status_period is not None:
        env[names.HBTRACE_STATUS] = f"{status_period:g}"
    if beat_sources is not None:
        env[names.HBTRACE_BEATS] = beat_sources
    report = _report_file()
    if report:
        env[names.HBTRACE_REPORT] = str(report)
    else:
        env.pop(names.HBTRACE_REPORT, None)
    static = _statically_linked(command[0])
    if static:
        click.echo(f"hbtool: warning: {command[0]} is statically linked: the tracer cannot be loaded into it, "
                   f"so nothing will be recorded (link it dynamically to trace it)", err=True)
    try:
        proc = subprocess.Popen(list(command), env=env)
    except OSError as exc:
        _read_report(report)
        folder.release()
        if isinstance(exc, FileNotFoundError):
            click.echo(f"hbtool: error: {command[0]}: command not found", err=True)
            return 127
        click.echo(f"hbtool: error: {command[0]}: {exc.strerror or exc} (not an executable program?)", err=True)
        return 126
    # the terminal's ^C reaches the program directly; we wait for it to end
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.signal(signal.SIGTERM, lambda s, f: proc.send_signal(s))
    try:
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
    failures = _read_report(report)
    if not quiet:
        _summary(folder, rc, static, failures, mpi)
        if thread_env:
            _fault_summary(outdir, thread_env[names.HBTRACE_INJECT])
    folder.release()
    return 128 - rc if rc < 0 else rc


def _statically_linked(program: str) -> bool:
    """True when `program` is an ELF executable with no program interpreter: the dynamic
    loader never runs, so LD_PRELOAD cannot load the tracer (static and static-pie)."""
    import shutil

    path = shutil.which(program) if "/" not in program else program
    if not path:
        return False
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile

        with open(path, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                return False  # a script: its interpreter is what runs
            fh.seek(0)
            elf = ELFFile(fh)
            if elf["e_type"] not in ("ET_EXEC", "ET_DYN"):
                return False
            return not any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
    except (OSError, ELFError, ValueError, ImportError):
        return False


#: what a recording writes into its folder (the MPI injector's truth goes beside its profile)
TRACE_PATTERNS = ("*.hbt", "*.hbp", "*.hbp.inject.csv", "inject-truth.json")

#: the thread faults of --inject KIND (native_tracer/src/inject.c, docs/inject.md)
THREAD_FAULTS = ("leak", "stop", "slow", "busy", "cond", "exit", "segv")


class _Folder:
    """The trace folder of one recording: flock()ed from before the program starts until
    record ends, so that a second record into it at the same time is refused, and known
    by its inode, so that its removal during the run is told apart from a run that wrote
    nothing."""

    def __init__(self, path: Path, created: bool):
        from ..errors import HbtoolError

        self.path, self.created = path, created
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        st = os.fstat(self.fd)
        self.ident = (st.st_dev, st.st_ino)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return  # a file system without locks on folders: record unlocked, as before
            os.close(self.fd)
            raise HbtoolError(f"{path} is being recorded into by another 'hbtool record' now: two runs in one "
                              f"folder would be read as one; record into another folder with -o") from None

    def removed(self) -> bool:
        """True when the folder was removed (or replaced by another) since record made it ready."""
        try:
            st = os.stat(self.path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self.ident

    def release(self) -> None:
        """Unlock; remove the folder if record created it and it stayed empty."""
        if self.created and not self.removed():
            _remove_if_empty(self.path)
        os.close(self.fd)


def _prepare_dir(outdir: Path, force: bool) -> _Folder:
    """Make the trace folder ready, and lock it for this recording."""
    from ..errors import HbtoolError

    created = not outdir.exists()
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        folder = _Folder(outdir, created)
    except OSError as exc:
        raise HbtoolError(f"cannot create the trace folder {outdir}: {exc.strerror or exc} "
                          f"(give another one with -o)") from None
    try:
        old = sorted(p for pattern in TRACE_PATTERNS for p in outdir.glob(pattern))
        if old and not force:
            raise HbtoolError(f"{outdir} already holds a trace ({len(old)} file{'s' if len(old) != 1 else ''}); "
                              f"record into another folder with -o, or add --force to delete it first")
        live = [p for p in old if _written_now(p)]
        if live:
            raise HbtoolError(f"{outdir} holds a trace that a running program is writing now ({live[0].name}): "
                              f"--force deletes no live trace; record into another folder with -o")
        for p in old:
            try:
                p.unlink()
            except OSError as exc:
                raise HbtoolError(f"cannot delete {p}: {exc.strerror or exc}") from None
    except HbtoolError:
        folder.release()
        raise
    return folder


def _written_now(path: Path) -> bool:
    """True when a live process holds the tracer's lock on this trace file (the tracer
    flock()s its file for as long as it writes it)."""
    if path.suffix != ".hbt":
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _remove_if_empty(outdir: Path) -> None:
    try:
        outdir.rmdir()
    except OSError:
        pass  # it holds something: keep it


def _check_range(option: str, value: str, integer: bool) -> None:
    """B or LO-HI (beats: integers from 1; seconds: numbers >= 0), else a usage error."""
    import math

    what = "B or LO-HI, beats counted from 1" if integer else "SECONDS or LO-HI, seconds >= 0"
    parts = value.split("-")
    try:
        if len(parts) > 2 or not all(p.strip() == p and p for p in parts):
            raise ValueError
        nums = [int(p) if integer else float(p) for p in parts]
    except ValueError:
        raise click.UsageError(f"{option} '{value}': expected {what}") from None
    if (integer and min(nums) < 1) or not all(math.isfinite(v) and v >= 0 for v in nums) or nums[-1] < nums[0]:
        raise click.UsageError(f"{option} '{value}': expected {what} (LO <= HI)")


def _check_thread_fault(inject, thread, at, beat, nbytes, leak_max, slow, wait_ms, calls) -> dict[str, str]:
    """The environment of a thread fault (--inject KIND), {} when --inject is not one; usage errors
    for the options that do not go together."""
    from .. import tracer_names as names

    thread_opts = {"--thread": thread, "--at": at, "--beat": beat, "--inject-bytes": nbytes,
                   "--inject-leak-max": leak_max, "--inject-slow": slow, "--inject-wait-ms": wait_ms}
    if inject not in THREAD_FAULTS:
        if inject:
            _check_inject(inject)  # neither a fault nor three numbers: say what is expected
        given = [k for k, v in thread_opts.items() if v is not None]
        if given:
            raise click.UsageError(f"{given[0]} goes with a thread fault, --inject KIND "
                                   f"(KIND: {', '.join(THREAD_FAULTS)})")
        return {}
    if calls:
        raise click.UsageError("--inject-calls goes with the MPI delay (--inject MEAN_US,SD_US,PROB), "
                               f"not with the thread fault '{inject}'")
    if (at is None) == (beat is None):
        raise click.UsageError(f"--inject {inject} needs exactly one of --at SECONDS and --beat B")
    for option, value, kinds in (("--inject-bytes", nbytes, ("leak",)), ("--inject-leak-max", leak_max, ("leak",)),
                                 ("--inject-slow", slow, ("slow",)),
                                 ("--inject-wait-ms", wait_ms, ("busy", "cond"))):
        if value is not None and inject not in kinds:
            raise click.UsageError(f"{option} goes with --inject {' or '.join(kinds)}, not {inject}")
    if thread is not None and thread != "random" and not (thread.isdigit() and int(thread) < 1024):
        raise click.UsageError(f"--thread '{thread}': expected a thread number below 1024 or random")
    env = {names.HBTRACE_INJECT: inject, names.HBTRACE_INJECT_THREAD: thread or "random"}
    if at is not None:
        _check_range("--at", at, integer=False)
        env[names.HBTRACE_INJECT_AT] = at
    else:
        _check_range("--beat", beat, integer=True)
        env[names.HBTRACE_INJECT_BEAT] = beat
    if nbytes is not None:
        env[names.HBTRACE_INJECT_BYTES] = str(nbytes)
    if leak_max is not None:
        env[names.HBTRACE_INJECT_LEAK_MAX] = str(leak_max)
    if slow is not None:
        env[names.HBTRACE_INJECT_SLOW] = f"{slow:g}"
    if wait_ms is not None:
        env[names.HBTRACE_INJECT_WAIT_MS] = str(wait_ms)
    return env


def _fault_summary(outdir: Path, kind: str) -> None:
    """One line: what the thread injector did, and where its truth went."""
    import json

    path = outdir / "inject-truth.json"
    try:
        truth = json.loads(path.read_text())
    except (OSError, ValueError):
        click.echo(f"hbtool: {kind} was not injected: no truth file {path} (the program made no beat)", err=True)
        sys.stderr.flush()
        return
    if truth.get("fired"):
        at = truth.get("fired_at") or {}
        click.echo(f"hbtool: injected {kind} into thread {truth.get('thread')} at its beat {at.get('beat')} "
                   f"({at.get('trace_s', 0):.3f} s); truth: {path}", err=True)
    else:
        planned = truth.get("planned") or {}
        when = (f"beat {planned['beat']}" if planned.get("beat") is not None
                else f"{planned.get('at_s', 0):.3f} s")
        click.echo(f"hbtool: {kind} was not injected: the run ended before {when} of thread "
                   f"{truth.get('thread') if truth.get('thread') is not None else '(not chosen yet)'}; "
                   f"truth: {path}", err=True)
    sys.stderr.flush()


def _check_inject(spec: str) -> None:
    import math

    parts = spec.split(",")
    try:
        mean, sd, prob = (float(x) for x in parts)
    except ValueError:
        raise click.UsageError(f"--inject '{spec}': expected MEAN_US,SD_US,PROB (the MPI delay, e.g. 500,100,0.05) "
                               f"or a thread fault: {', '.join(THREAD_FAULTS)}") from None
    if not all(math.isfinite(v) for v in (mean, sd, prob)) or mean < 0 or sd < 0 or not 0 <= prob <= 1:
        raise click.UsageError(f"--inject '{spec}': mean and deviation must be >= 0 and PROB in [0, 1]")


def _report_file() -> Path | None:
    """An empty file the tracer appends a line to when it cannot write the trace
    (HBTRACE_REPORT), on a RAM file system where there is one: a full disk under the
    trace folder must not keep the tracer from saying so. None if none can be made."""
    import tempfile

    for where in ("/dev/shm", None):
        if where and not os.access(where, os.W_OK):
            continue
        try:
            fd, name = tempfile.mkstemp(prefix="hbtool-record-", suffix=".report", dir=where)
        except OSError:
            continue
        os.close(fd)
        return Path(name)
    return None


def _read_report(report: Path | None) -> list[dict]:
    """The tracer's report lines (what, pid, errno, where), and the file removed."""
    if report is None:
        return []
    try:
        text = report.read_bytes()[: 1 << 20].decode("utf-8", errors="replace")
    except OSError:
        text = ""
    try:
        report.unlink()
    except OSError:
        pass
    out = []
    for line in text.splitlines():
        parts = line.split("\t", 3)
        if len(parts) == 4 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            out.append({"what": parts[0], "pid": int(parts[1]), "errno": int(parts[2]), "where": parts[3]})
    return out


def _strerror(err: int) -> str:
    return os.strerror(err) if err > 0 else "unknown error"


def _failed_starts(failures: list[dict]) -> str:
    """'the tracer could not create its trace file in DIR: No space left on device (3 processes)'."""
    starts = [f for f in failures if f["what"] == "start"]
    if not starts:
        return ""
    f = starts[0]
    n = len({x["pid"] for x in starts})
    return (f"the tracer could not create its trace file in {f['where']}: {_strerror(f['errno'])}"
            + (f" ({n} processes)" if n > 1 else ""))


def _full_disk(outdir: Path) -> str:
    """When the tracer could not report (no RAM file system for HBTRACE_REPORT): a folder
    on a disk without room for a trace file's first 68 KiB is the likely reason."""
    try:
        st = os.statvfs(outdir)
    except OSError:
        return ""
    if st.f_bavail * st.f_frsize >= 4096 + 65536:
        return ""
    return f"the disk holding {outdir} is full ({st.f_bavail * st.f_frsize} bytes free): no trace file fits"


def _losses(trace, failures: list[dict]) -> str:
    """'records were dropped: ...' for the processes whose trace could not take them all."""
    procs = [p for meta in trace.runs.values() for p in meta.get("processes", [])]
    lost = [p for p in procs if p.get("lost_records")]
    if not lost:
        grows = [f for f in failures if f["what"] in ("grow", "cap")]
        if not grows:
            return ""
        f = grows[0]
        return (f"the trace file {f['where']} could not grow ({_strerror(f['errno']) if f['errno'] else 'size cap'}); "
                f"records after that were dropped")
    total = sum(int(p["lost_records"]) for p in lost)
    reasons = sorted({p.get("lost_reason") or "the file could not take them" for p in lost})
    where = lost[0]["file"] + (f" and {len(lost) - 1} more" if len(lost) > 1 else "")
    return (f"{total} record{'s' if total != 1 else ''} dropped because {'; '.join(reasons)} "
            f"(in {where}): the trace lacks them from that moment on")


def _mpi_summary(outdir: Path) -> None:
    """What the MPI profiler left: the run file, or (a run that failed) the per-rank files
    and how the run failed, or nothing and why."""
    import re

    from ..errors import HbtoolError
    from ..io import read_profile

    profiles = sorted(p for p in outdir.glob("*.hbp") if not re.search(r"-r\d+$", p.stem))
    ranks = sorted(p for p in outdir.glob("*.hbp") if re.search(r"-r\d+$", p.stem))
    if not profiles and not ranks:
        click.echo(f"hbtool: no MPI profile written to {outdir}/: the profiler saw no MPI_Init (not an MPI "
                   f"program, or its MPI calls go where libhbprof cannot see them)", err=True)
        return
    target = profiles[0] if len(profiles) == 1 else outdir
    try:
        failure = read_profile(target).meta.get("failure")
    except HbtoolError as exc:
        failure = f"its profile cannot be read: {exc}"
    if profiles:
        click.echo(f"hbtool: MPI profile written: {', '.join(str(p) for p in profiles)}"
                   + (f"; the run failed: {failure}" if failure else ""), err=True)
    if ranks and not profiles:
        click.echo(f"hbtool: the MPI run did not finish: {failure or 'no run file'}; it left {len(ranks)} per-rank "
                   f"file{'s' if len(ranks) != 1 else ''} in {outdir}/ (hbprof-*-r<rank>.hbp; "
                   f"'hbtool interference {outdir}' reads them)", err=True)


def _summary(folder: _Folder, rc: int, static: bool = False, failures: list[dict] | None = None,
             mpi: bool = False) -> None:
    """One line on what was written, counted as 'hbtool info' counts it, and one more for
    each way the tracer failed to write it (the trace could not be created, or grow, or its
    folder was removed). A statically linked program that left no trace was said before it
    ran: nothing more."""
    failures = failures or []
    outdir = folder.path

    from ..errors import HbtoolError
    from ..io import read_heartbeats

    how = ""
    if rc < 0:
        from ..analyzers.summary import signal_name

        how = f"; the program was killed by {signal_name(-rc)}"
    elif rc:
        how = f"; the program exited with status {rc}"
    if mpi:
        _mpi_summary(outdir)
    files = sorted(outdir.glob("*.hbt"))
    if static and not files:
        return
    if folder.removed():
        if not files:
            click.echo(f"hbtool: no trace written to {outdir}/: the folder was removed while the program ran, "
                       f"and whatever trace it held with it{how}", err=True)
            sys.stderr.flush()
            return
        click.echo(f"hbtool: warning: {outdir}/ was removed and made again while the program ran: the trace "
                   f"files written before that are lost, the ones there now were written after", err=True)
    started = _failed_starts(failures)
    if not files and not started:
        started = _full_disk(outdir)
    if not files:
        why = started or "the program made no heartbeats and started no threads"
        click.echo(f"hbtool: no trace written to {outdir}/: {why}{how}", err=True)
        sys.stderr.flush()
        return
    try:
        trace = read_heartbeats([outdir], stream=True)   # counted in bounded memory, as `info` counts
    except HbtoolError as exc:
        click.echo(f"hbtool: trace written to {outdir}/ but it cannot be read: {exc}{how}", err=True)
        sys.stderr.flush()
        return
    what = _counts(trace)
    click.echo(f"hbtool: trace written to {outdir}/ ({len(files)} file{'s' if len(files) != 1 else ''}, "
               f"{what}){how}", err=True)
    if started:
        click.echo(f"hbtool: warning: {started}: those processes are missing from the trace", err=True)
    lost = _losses(trace, failures)
    if lost:
        click.echo(f"hbtool: warning: {lost}", err=True)
    sys.stderr.flush()


def _counts(trace) -> str:
    """'2 processes, 5 threads (4 with beats), 1200 beats' as 'hbtool info' counts them."""
    from ..analyzers.summary import summarize_threads
    from .hsa_common import threads_phrase

    procs = sum(len(meta.get("processes", [])) for meta in trace.runs.values())
    parts = [f"{procs} processes"] if procs > 1 else []
    parts.append(threads_phrase(summarize_threads(trace, beatless=True)))
    counts: dict[str, int] = {}
    for by_source in trace.sources().values():
        for src, n in by_source.items():
            counts[src] = counts.get(src, 0) + n
    parts.append(", ".join(f"{n} {src}" for src, n in sorted(counts.items()) if n) + " beats"
                 if counts else "0 beats")
    return ", ".join(parts)
