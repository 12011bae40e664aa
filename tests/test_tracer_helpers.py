"""The tracer's shared pieces: the one table of environment names (hbtrace_env.def), the
after-fork registry (every subsystem's handler runs in a real forked child), the
background-thread start (named hbt-*) and the orphan rule (tracer threads never keep a
process alive whose main thread left with pthread_exit)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TRACER, build_traced
from test_queue_tracer import QUEUE_OPEN, read_trace

pytestmark = pytest.mark.usefixtures("tracer_built")

ENV_DEF = TRACER / "include" / "hbtrace_env.def"
ENTRY = re.compile(r'^HBT_ENV\((HBTRACE_[A-Z0-9_]+), "([^"\\]+)"\)$')
NAME, NAME_PROBE = 14, 2
STATUS = 15
STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def c_sources() -> list[Path]:
    """Every C source and header of the tracer outside mpi/ (someone else's)."""
    files = []
    for sub in ("src", "include", "examples", "tools"):
        files += [p for p in (TRACER / sub).rglob("*") if p.suffix in (".c", ".h")]
    return files


def env_entries() -> list[tuple[str, str]]:
    out = []
    in_comment = False
    for line in ENV_DEF.read_text().splitlines():
        s = line.strip()
        if in_comment or s.startswith("/*"):
            in_comment = not s.endswith("*/")
            continue
        if not s:
            continue
        m = ENTRY.match(line)
        assert m, f"not one HBT_ENV(NAME, \"description\") entry: {line!r}"
        out.append((m.group(1), m.group(2)))
    return out


def test_env_table_is_one_parseable_entry_per_line():
    entries = env_entries()
    names = [n for n, _ in entries]
    assert len(names) == len(set(names)) and len(names) >= 16
    assert {"HBTRACE_DIR", "HBTRACE_DISABLE", "HBTRACE_MONITOR", "HBTRACE_STATUS"} <= set(names)
    for name, doc in entries:
        assert "default" in doc or "unset" in doc, f"{name}: say the default"


def test_no_c_source_spells_an_environment_name():
    # every name comes from hbtrace_env.def (env.c); a literal elsewhere would drift
    bad = []
    for p in c_sources():
        for k, line in enumerate(p.read_text().splitlines(), 1):
            if any("HBTRACE_" in lit for lit in STRING.findall(line)):
                bad.append(f"{p.relative_to(TRACER)}:{k}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_every_env_entry_is_read_by_the_tracer():
    # HBTRACE_MPI_BEATS is read by the MPI profiler (mpi/src/beats.c), which calls the tracer
    sources = [*(TRACER / "src").glob("*.c"), *(TRACER / "mpi" / "src").glob("*.c")]
    src = "\n".join(p.read_text() for p in sources)
    unused = [n for n, _ in env_entries() if f"HBT_ENV_{n}" not in src]
    assert not unused, unused


def test_the_library_still_exports_only_its_api():
    # the shared helpers are hidden: nothing named hbt_bg_*, hbt_fork_*, hbt_orphaned leaks
    out = subprocess.run(["nm", "-D", "--defined-only", str(TRACER / "lib" / "libhbtrace.so")],
                         capture_output=True, text=True, check=True).stdout
    syms = {line.split()[-1] for line in out.splitlines() if line.strip()}
    for s in ("hbt_bg_start", "hbt_fork_child_add", "hbt_orphaned", "hbt_sleep_until",
              "hbt_env_names", "hbt_getenv", "hbt_put_plain"):
        assert s not in syms


PROGRAM = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hbtrace.h"
#include "hbtrace_probe.h"
#include "hbtrace_queue.h"

static void names(const char *who)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(comm, sizeof comm, f)) {
            comm[strcspn(comm, "\n")] = 0;
            printf("%s thread %s\n", who, comm);
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
}

static void use(const char *who)
{
    hbt_queue_t *q = hbt_queue_create(who, sizeof(int), 16);
    int v = 7, w = 0;
    for (int i = 0; i < 100; i++) {
        hbt_queue_push(q, &v);
        hbt_queue_pop(q, &w);
        hbt_probe_t p = HBT_PROBE_BEGIN("helpers");
        HBT_PROBE_END(p);
        hbt_beat(0);
        usleep(1000);
    }
    usleep(300000);   /* a status sample or two, a queue period, monitor passes */
    names(who);
    printf("%s trace %s\n", who, hbt_trace_path());
    hbt_queue_destroy(q);
}

static void *worker(void *unused)
{
    (void)unused;
    use("worker");
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argv;
    hbt_init("helpers");
    if (argc > 1) {   /* orphan: the main thread leaves, a worker ends later */
        hbt_queue_t *q = hbt_queue_create("orphan", sizeof(int), 4);
        (void)q;
        pthread_t th;
        pthread_create(&th, NULL, worker, NULL);
        pthread_exit(NULL);
    }
    use("parent");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        use("child");
        fflush(stdout);
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}
"""


@pytest.fixture(scope="module")
def helpers_prog(tmp_path_factory):
    d = tmp_path_factory.mktemp("helpers")
    src = d / "helpers.c"
    src.write_text(PROGRAM)
    return build_traced(src, d / "helpers")


def tracer_env(traced_env):
    return dict(traced_env, HBTRACE_MONITOR="central", HBTRACE_STATUS="0.1",
                HBTRACE_QUEUE_PERIOD_US="1000")


def test_fork_child_handlers_all_run(helpers_prog, traced_env):
    r = subprocess.run([str(helpers_prog)], env=tracer_env(traced_env), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for who in ("parent", "child"):
        threads = {ln.split()[2] for ln in lines if ln.startswith(f"{who} thread ")}
        # each tracer thread started again in the child: the monitor's, the queues' and
        # the status sampler's "started" state was reset by their after-fork handlers
        assert {"hbt-monitor", "hbt-queues", "hbt-status"} <= threads, (who, threads)
    paths = {ln.split()[0]: Path(ln.split()[2]) for ln in lines if " trace " in ln}
    assert paths["parent"] != paths["child"] and paths["child"].exists()
    child = read_trace(paths["child"])["rec"]
    # the queue registry was reset: the child's first queue is id 0 again, in its own file
    opens = child[child["kind"] == QUEUE_OPEN]
    assert len(opens) == 1 and int(opens["thread"][0]) == 0
    # the probes' handler forgot the names written into the parent's file: written again
    assert np.any((child["kind"] == NAME) & ((child["aux"] >> 24) == NAME_PROBE))
    # the status sampler of the child wrote its own samples
    assert np.any(child["kind"] == STATUS)


def test_tracer_threads_never_keep_an_orphaned_process_alive(helpers_prog, traced_env):
    # the main thread leaves with pthread_exit; the worker ends ~0.4 s later; the monitor,
    # queue monitor and status sampler (one queue stays open) must then all end
    t0 = time.monotonic()
    r = subprocess.run([str(helpers_prog), "orphan"], env=tracer_env(traced_env),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 5
    threads = {ln.split()[2] for ln in r.stdout.splitlines() if ln.startswith("worker thread ")}
    assert {"hbt-monitor", "hbt-queues", "hbt-status"} <= threads, threads
