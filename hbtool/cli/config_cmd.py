"""hbtool config: compiler and linker flags for the tracer, like pkg-config."""

from __future__ import annotations

import click


@click.command()
@click.option("--cflags", is_flag=True, help="Print the compiler flags (include directory).")
@click.option("--libs", is_flag=True, help="Print the linker flags (-L, -lhbtrace, rpath).")
@click.option("--preload", is_flag=True, help="Print the path of libhbtrace.so, for LD_PRELOAD.")
@click.option("--include-dir", is_flag=True, help="Print the directory of hbtrace.h.")
def config(cflags, libs, preload, include_dir):
    """Print compiler and linker flags for programs that call the tracer API.

    \b
    Example:
      gcc -O2 $(hbtool config --cflags) prog.c $(hbtool config --libs) -o prog
      LD_PRELOAD=$(hbtool config --preload) ./prog
    """
    from ..tracer import tracer_paths

    if not (cflags or libs or preload or include_dir):
        raise click.UsageError("say what to print: --cflags, --libs, --preload or --include-dir")
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
