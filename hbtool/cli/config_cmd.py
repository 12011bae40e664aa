"""hbtool config: where the native tracer is, its flags (like pkg-config) and its environment."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--cflags", is_flag=True, help="Print the compiler flags (include directory).")
@click.option("--libs", is_flag=True, help="Print the linker flags (-L, -lhbtrace, rpath).")
@click.option("--preload", is_flag=True, help="Print the path of libhbtrace.so, for LD_PRELOAD.")
@click.option("--mpi-preload", is_flag=True, help="Print the path of the MPI profiler libhbprof.so.")
@click.option("--include-dir", is_flag=True, help="Print the directory of hbtrace.h.")
@click.option("--env", "env", is_flag=True, help="List the environment variables of the tracer and the MPI profiler.")
def config(cflags, libs, preload, mpi_preload, include_dir, env):
    """Where the native tracer is, and the flags to build and run programs with it.

    With no option: where the tracer was found and which of its parts are there.
    Each option prints one thing, like pkg-config; when that thing does not exist
    (the tracer or the MPI profiler was not built) it says why and exits 2.

    \b
    Examples:
      hbtool config
      gcc -O2 $(hbtool config --cflags) prog.c $(hbtool config --libs) -o prog
      LD_PRELOAD=$(hbtool config --preload) ./prog
      hbtool config --env
    """
    from ..tracer import profiler_library, tracer_paths

    flags = cflags or libs or preload or mpi_preload or include_dir
    if env:
        if flags:
            raise click.UsageError("--env lists the environment alone: give it without the flag options")
        click.echo(_environment(), nl=False)
        return
    if not flags:
        click.echo(_summary(tracer_paths(check=False)), nl=False)
        return
    p = tracer_paths(check=libs or preload)
    if (cflags or include_dir) and not (p.include / "hbtrace.h").is_file():
        from ..errors import TracerNotBuiltError

        raise TracerNotBuiltError(f"the tracer's header is not at {p.include / 'hbtrace.h'}: set HBTOOL_TRACER_DIR "
                                  f"to a native_tracer folder, or reinstall hbtool")
    parts = []
    if include_dir:
        parts.append(str(p.include))
    if cflags:
        parts.append(f"-I{p.include}")
    if libs:
        parts.append(f"-L{p.libdir} -Wl,-rpath,{p.libdir} -lhbtrace -pthread")
    if preload:
        parts.append(str(p.library))
    if mpi_preload:
        parts.append(str(profiler_library()))
    click.echo(" ".join(parts))


def _summary(p) -> str:
    """Where the tracer is and what of it is there (exit 2 when the tracer itself is missing)."""
    def state(path: Path, absent: str) -> str:
        return str(path) if path.is_file() else f"absent ({absent})"

    lines = [f"tracer folder:  {p.root} ({p.source})",
             f"header:         {state(p.include / 'hbtrace.h', 'not built or not shipped')}",
             f"library:        {state(p.library, 'not built')}",
             f"MPI profiler:   {state(p.profiler, 'no mpicc when it was built' if p.source == 'installed with hbtool' else 'not built: make -C ' + str(p.root / 'mpi'))}",
             ""]
    if not p.library.is_file():
        from ..tracer import tracer_paths

        click.echo("\n".join(lines), nl=False)
        tracer_paths(check=True)  # raises the one-line reason, exit 2
    return "\n".join(lines)


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
