"""Source beats in a copy of the NAS Parallel Benchmarks (issue 16's "source beats where you
add them"): the program's own heartbeat API calls, as a user adds them, beside the tracer's
automatic OpenMP beats.

    python benchmarks/npb_source_beats.py COPY_OF_NPB [--kernels EP,MG,FT,LU]

In each kernel's C file of COPY_OF_NPB (a copy of ../shared/workloads/npb-omp, never the
original), a beat `hbt_beat_ex(omp_get_thread_num(), LOOP, 0)` becomes the first statement
of every loop that an `omp for` or `omp parallel for` shares out (LOOP: the loop's number in
the file, from 1): each thread beats once per iteration it is given, one unit of work. Loops
whose body is not a braced block on the `for` line are left as they are. Nothing else
changes; `link_flags()` gives what config/make.def's C_LIB needs to link libhbtrace.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "native_tracer" / "lib"
FILES = {"EP": "EP/ep.c", "MG": "MG/mg.c", "FT": "FT/ft.c", "LU": "LU/lu.c", "IS": "IS/is.c"}
PRAGMA = re.compile(r"^\s*#\s*pragma\s+omp\s+(parallel\s+)?for\b")
FOR_BLOCK = re.compile(r"^\s*for\s*\(.*\)\s*\{\s*(//.*|/\*.*\*/\s*)?$")
HEADER = ("#include <omp.h>\n"
          "void hbt_beat_ex(int thread, int loop, int iter);   /* hbtool's heartbeat API (source beats) */\n")


def add_source_beats(path: Path) -> int:
    """Insert the beats into one C file in place; returns how many loops got one."""
    lines = path.read_text().splitlines(keepends=True)
    out, loops, pending = [], 0, False
    for line in lines:
        out.append(line)
        if PRAGMA.match(line):
            pending = True
            continue
        if pending and line.strip():
            pending = False
            if FOR_BLOCK.match(line):
                loops += 1
                out.append(f"hbt_beat_ex(omp_get_thread_num(), {loops}, 0);\n")
    if loops:
        first_code = next(i for i, x in enumerate(out) if x.startswith("#include"))
        out.insert(first_code, HEADER)
    path.write_text("".join(out))
    return loops


def link_flags() -> str:
    return f"-L{LIB} -lhbtrace -Wl,-rpath,{LIB}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("copy", type=Path, help="a copy of npb-omp to change")
    ap.add_argument("--kernels", default="EP,MG,FT,LU")
    a = ap.parse_args()
    if (a.copy.resolve() / "..").resolve() == (ROOT.parent / "shared" / "workloads").resolve():
        raise SystemExit("npb_source_beats: give a copy of npb-omp, not the original")
    for k in a.kernels.split(","):
        print(f"{k}: {add_source_beats(a.copy / FILES[k])} loops beat; link with {link_flags()}")


if __name__ == "__main__":
    main()
