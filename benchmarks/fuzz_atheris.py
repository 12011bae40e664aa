#!/usr/bin/env python3
"""Coverage-guided fuzzing of the binary readers with atheris (libFuzzer for Python).

The mutation fuzzer (benchmarks/fuzz_readers.py) draws its mutations blindly; this one keeps
the inputs that reach new lines and branches of the reader, so it gets past the checks of
one field at a time. One target per run:

    hbt         hbtool.io.hbt.read_hbt_file        (the eager reader of the tracer's files)
    hbt_stream  hbtool.io.hbt_stream.scan_file     (the bounded-memory reader info and diagnose use)
    hbprof      hbtool.io.hbprof.read_hbprof       (the PMPI profiler's run files and per-rank files)

Any input may be refused with an HbtoolError (TraceFormatError, ...); any other exception is
a finding, and so is a run over 10 s or above 2 GB (libFuzzer's -timeout and -rss_limit_mb).
Needs `pip install -e '.[fuzz]'` (atheris 3.0 installs here as a wheel for Python 3.11).

    python benchmarks/fuzz_atheris.py hbt -atheris_runs=20000 benchmarks/fuzz_seeds
    python benchmarks/fuzz_atheris.py hbprof -max_total_time=600 /tmp/corpus benchmarks/fuzz_seeds

The corpus folders are libFuzzer's: the first one given also receives the new inputs found
(give a scratch folder first to keep benchmarks/fuzz_seeds as it is); a crashing input is
written as crash-<sha1> in the working directory, to be kept in tests/fuzz_regressions/.
"""

from __future__ import annotations

import os
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["hbtool"]):
    from hbtool.errors import HbtoolError
    from hbtool.io import hbprof, hbt, hbt_stream

TARGETS = {
    "hbt": hbt.read_hbt_file,
    "hbt_stream": lambda path: hbt_stream.scan_file(path).fh.close(),
    "hbprof": hbprof.read_hbprof,
}
#: a file on tmpfs when there is one: the readers take paths
SCRATCH = tempfile.mkdtemp(prefix="hbtool-atheris-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [libFuzzer options] [corpus folders]")
    name = sys.argv.pop(1)
    read = TARGETS[name]
    path = os.path.join(SCRATCH, "input" + (".hbp" if name == "hbprof" else ".hbt"))

    def one(data: bytes) -> None:
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            read(path)
        except HbtoolError:
            pass

    args = sys.argv + [a for a in ("-timeout=10", "-rss_limit_mb=2048")
                       if not any(s.startswith(a.split("=")[0] + "=") for s in sys.argv)]
    atheris.Setup(args, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
