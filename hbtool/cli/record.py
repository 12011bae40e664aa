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
def record(outdir, quiet, mpi, inject, inject_seed, inject_calls, status_period, command):
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
    if inject_calls:
        bad = [c for c in inject_calls.split(",") if c not in ("mpi", "posix", "mpiio")]
        if bad:
            raise click.UsageError(f"--inject-calls: unknown family '{bad[0]}' (expected mpi, posix, mpiio)")
    preload = [str(lib)]
    if mpi:
        preload.append(str(profiler_library()))
    outdir = Path(outdir or _default_dir(command[0]))
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.ClickException(f"cannot create trace directory {outdir}: {exc.strerror}") from exc
    before = {p.name for p in outdir.glob("*.hbt")} | {p.name for p in outdir.glob("*.hbp")}
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
    try:
        proc = subprocess.Popen(list(command), env=env)
    except FileNotFoundError:
        click.echo(f"hbtool: error: {command[0]}: command not found", err=True)
        return 127
    except PermissionError:
        click.echo(f"hbtool: error: {command[0]}: permission denied (not executable?)", err=True)
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
        _summary(outdir, before, rc)
    return 128 - rc if rc < 0 else rc


def _check_inject(spec: str) -> None:
    import math

    parts = spec.split(",")
    try:
        mean, sd, prob = (float(x) for x in parts)
    except ValueError:
        raise click.UsageError(f"--inject '{spec}': expected MEAN_US,SD_US,PROB, e.g. 500,100,0.05") from None
    if not all(math.isfinite(v) for v in (mean, sd, prob)) or mean < 0 or sd < 0 or not 0 <= prob <= 1:
        raise click.UsageError(f"--inject '{spec}': mean and deviation must be >= 0 and PROB in [0, 1]")


def _summary(outdir: Path, before: set[str], rc: int) -> None:
    from ..errors import HbtoolError
    from ..io.hbt import read_hbt_file

    new = sorted(p for p in outdir.glob("*.hbt") if p.name not in before)
    beats = 0
    threads = set()
    for p in new:
        try:
            r = read_hbt_file(p)["records"]
        except HbtoolError:
            continue
        isbeat = r["kind"] == 1
        beats += int(isbeat.sum())
        threads |= {(p.name, int(t)) for t in set(r["os_tid"].tolist())}
    how = ""
    if rc < 0:
        try:
            how = f"; the program was killed by {signal.Signals(-rc).name}"
        except ValueError:
            how = f"; the program was killed by signal {-rc}"
    elif rc:
        how = f"; the program exited with status {rc}"
    import re

    profiles = sorted(p for p in outdir.glob("*.hbp") if p.name not in before and not re.search(r"-r\d+$", p.stem))
    if profiles:
        click.echo(f"hbtool: MPI profile written: {', '.join(str(p) for p in profiles)}", err=True)
    if new:
        click.echo(
            f"hbtool: trace written to {outdir}/ ({len(new)} file{'s' if len(new) != 1 else ''}, "
            f"{beats} beats, {len(threads)} threads){how}",
            err=True,
        )
    else:
        click.echo(
            f"hbtool: no trace written to {outdir}/: the program made no heartbeats and started no threads{how}",
            err=True,
        )
    sys.stderr.flush()
