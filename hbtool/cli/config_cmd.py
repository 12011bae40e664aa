"""hbtool config: compiler and linker flags for the tracer, like pkg-config."""

from __future__ import annotations

import click


@click.command()
@click.option("--cflags", is_flag=True, help="Print the compiler flags (include directory).")
@click.option("--libs", is_flag=True, help="Print the linker flags (-L, -lhbtrace, rpath).")
@click.option("--preload", is_flag=True, help="Print the path of libhbtrace.so, for LD_PRELOAD.")
@click.option("--include-dir", is_flag=True, help="Print the directory of hbtrace.h.")
@click.option("--env", "env", is_flag=True, help="List the environment variables of the tracer and the MPI profiler.")
def config(cflags, libs, preload, include_dir, env):
    """Print compiler and linker flags for programs that call the tracer API.

    \b
    Example:
      gcc -O2 $(hbtool config --cflags) prog.c $(hbtool config --libs) -o prog
      LD_PRELOAD=$(hbtool config --preload) ./prog
      hbtool config --env
    """
    from ..tracer import tracer_paths

    if env:
        if cflags or libs or preload or include_dir:
            raise click.UsageError("--env lists the environment alone: give it without the flag options")
        click.echo(_environment(), nl=False)
        return
    if not (cflags or libs or preload or include_dir):
        raise click.UsageError("say what to print: --cflags, --libs, --preload, --include-dir or --env")
    p = tracer_paths(check=libs or preload)
    parts = []
    if include_dir:
        parts.append(str(p.include))
    if cflags:
        parts.append(f"-I{p.include}")
    if libs:
        parts.append(f"-L{p.libdir} -Wl,-rpath,{p.libdir} -lhbtrace -pthread")
    if preload:
        parts.append(str(p.library))
    click.echo(" ".join(parts))


def _environment() -> str:
    """Every environment variable, by who reads it (from the tracer's .def tables)."""
    from ..tracer_names import PROFILER_ENV, TRACER_ENV

    groups = [("hbtool", {"HBTOOL_TRACER_DIR": "the native tracer's folder (include/, lib/, mpi/lib/); default: "
                                                "native_tracer/ beside the hbtool package"}),
              ("the tracer, libhbtrace.so (native_tracer/include/hbtrace_env.def)", TRACER_ENV),
              ("the MPI profiler, libhbprof.so (native_tracer/mpi/include/hbprof_env.def)", PROFILER_ENV)]
    width = max(len(n) for _, table in groups for n in table)
    out = []
    for title, table in groups:
        out.append(f"{title}:")
        out += [f"  {name:<{width}}  {text}" for name, text in table.items()]
        out.append("")
    return "\n".join(out)
