"""hbtool record: run any program under the tracer (LD_PRELOAD)."""

from __future__ import annotations

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
@click.option("--inject", metavar="MEAN_US,SD_US,PROB", default=None,
              help="With --mpi: delay MPI, POSIX I/O and MPI-IO calls by a Gaussian delay (mean and standard "
                   "deviation in microseconds) with probability PROB; the truth goes beside the profile.")
@click.option("--inject-seed", type=click.IntRange(0), default=None, help="Seed of the injector (default 1).")
@click.option("--inject-calls", default=None, metavar="LIST",
              help="Families of calls to delay: any of mpi,posix,mpiio (default all).")
@click.option("--status", "status_period", is_flag=False, flag_value=1.0, default=None,
              type=click.FloatRange(0.01, 3600), metavar="[SECONDS]",
              help="Also sample the machine's status (CPU, memory, swap, network) every SECONDS (default 1), "
                   "for 'hbtool status'.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- PROGRAM [ARGS]...")
def record(outdir, quiet, force, beat_sources, mpi, inject, inject_seed, inject_calls, status_period, command):
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
    created = _prepare_dir(outdir, force)
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(x for x in (*preload, env.get("LD_PRELOAD", "")) if x)
    env[names.HBTRACE_DIR] = str(outdir.resolve())
    if mpi:
        env[names.HBPROF_DIR] = str(outdir.resolve())
    if inject:
        env[names.HBPROF_INJECT] = inject
    if inject_seed is not None:
        env[names.HBPROF_INJECT_SEED] = str(inject_seed)
    if inject_calls:
        env[names.HBPROF_INJECT_CALLS] = inject_calls
    if status_period is not None:
        env[names.HBTRACE_STATUS] = f"{status_period:g}"
    if beat_sources is not None:
        env[names.HBTRACE_BEATS] = beat_sources
    static = _statically_linked(command[0])
    if static:
        click.echo(f"hbtool: warning: {command[0]} is statically linked: the tracer cannot be loaded into it, "
                   f"so nothing will be recorded (link it dynamically to trace it)", err=True)
    try:
        proc = subprocess.Popen(list(command), env=env)
    except OSError as exc:
        if created:
            _remove_if_empty(outdir)
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
    if not quiet:
        _summary(outdir, rc, static)
    if created:
        _remove_if_empty(outdir)
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
TRACE_PATTERNS = ("*.hbt", "*.hbp", "*.hbp.inject.csv")


def _prepare_dir(outdir: Path, force: bool) -> bool:
    """Make the trace folder ready; True when record created it (and may remove it if it stays empty)."""
    from ..errors import HbtoolError

    created = not outdir.exists()
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HbtoolError(f"cannot create the trace folder {outdir}: {exc.strerror or exc} "
                          f"(give another one with -o)") from None
    old = sorted(p for pattern in TRACE_PATTERNS for p in outdir.glob(pattern))
    if old and not force:
        raise HbtoolError(f"{outdir} already holds a trace ({len(old)} file{'s' if len(old) != 1 else ''}); "
                          f"record into another folder with -o, or add --force to delete it first")
    for p in old:
        try:
            p.unlink()
        except OSError as exc:
            raise HbtoolError(f"cannot delete {p}: {exc.strerror or exc}") from None
    return created


def _remove_if_empty(outdir: Path) -> None:
    try:
        outdir.rmdir()
    except OSError:
        pass  # it holds something: keep it


def _check_inject(spec: str) -> None:
    import math

    parts = spec.split(",")
    try:
        mean, sd, prob = (float(x) for x in parts)
    except ValueError:
        raise click.UsageError(f"--inject '{spec}': expected MEAN_US,SD_US,PROB, e.g. 500,100,0.05") from None
    if not all(math.isfinite(v) for v in (mean, sd, prob)) or mean < 0 or sd < 0 or not 0 <= prob <= 1:
        raise click.UsageError(f"--inject '{spec}': mean and deviation must be >= 0 and PROB in [0, 1]")


def _summary(outdir: Path, rc: int, static: bool = False) -> None:
    """One line on what was written, counted as 'hbtool info' counts it."""
    import re

    from ..errors import HbtoolError
    from ..io import read_heartbeats

    how = ""
    if rc < 0:
        from ..analyzers.summary import signal_name

        how = f"; the program was killed by {signal_name(-rc)}"
    elif rc:
        how = f"; the program exited with status {rc}"
    profiles = sorted(p for p in outdir.glob("*.hbp") if not re.search(r"-r\d+$", p.stem))
    if profiles:
        click.echo(f"hbtool: MPI profile written: {', '.join(str(p) for p in profiles)}", err=True)
    files = sorted(outdir.glob("*.hbt"))
    if not files:
        why = ("the tracer cannot be loaded into a statically linked program" if static else
               "the program made no heartbeats and started no threads")
        click.echo(f"hbtool: no trace written to {outdir}/: {why}{how}", err=True)
        sys.stderr.flush()
        return
    try:
        trace = read_heartbeats([outdir])
    except HbtoolError as exc:
        click.echo(f"hbtool: trace written to {outdir}/ but it cannot be read: {exc}{how}", err=True)
        sys.stderr.flush()
        return
    what = _counts(trace)
    click.echo(f"hbtool: trace written to {outdir}/ ({len(files)} file{'s' if len(files) != 1 else ''}, "
               f"{what}){how}", err=True)
    sys.stderr.flush()


def _counts(trace) -> str:
    """'2 processes, 5 threads (4 with beats), 1200 beats' as 'hbtool info' counts them."""
    from ..analyzers.summary import summarize_threads
    from .hsa_common import threads_phrase

    procs = sum(len(meta.get("processes", [])) for meta in trace.runs.values())
    parts = [f"{procs} processes"] if procs > 1 else []
    parts.append(threads_phrase(summarize_threads(trace, beatless=True)))
    counts = trace.beats["source"].value_counts() if len(trace.beats) else {}
    parts.append(", ".join(f"{int(n)} {src}" for src, n in sorted(dict(counts).items()) if n) + " beats"
                 if len(trace.beats) else "0 beats")
    return ", ".join(parts)
