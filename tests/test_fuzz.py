"""The reader fuzzer of issue 20's fault suite (benchmarks/fuzz_readers.py): a seeded run of
1,000 mutated inputs through every command that reads files, and every case that ever failed,
kept in tests/fuzz_regressions/, replayed. Allowed: exit 0 with a result, or exit 2 with one
line on stderr; never a traceback, a hang over 10 s, or memory beyond 200 MB + 50 x the
input's real size. The long run (100,000 cases) is the command in README.md."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz_readers as F  # noqa: E402

REGRESSIONS = json.loads((F.REGRESSIONS / "cases.json").read_text())


def test_a_thousand_mutated_inputs_give_answers_or_one_line():
    results = F.fuzz(1000, seed=20, workers=2, subprocess_every=100)
    bad = [r for r in results if r["outcome"] != "ok"]
    assert not bad, "\n".join(f"{r['outcome']}: --replay {r['seed']} {r['index']}: {r['kind']} [{r['form']}] "
                              f"{r['mutation']} :: hbtool {' '.join(r['argv'])}\n  {r['err'][-300:]}" for r in bad)
    assert len(results) == 1000
    kinds = Counter(r["kind"] for r in results)
    assert set(kinds) == set(F.KINDS) and min(kinds.values()) >= 40, kinds
    codes = Counter(r["code"] for r in results)
    assert codes[0] >= 150 and codes[2] >= 300, codes  # both answers and refusals were exercised
    assert sum(r["via"] == "subprocess" for r in results) == 10  # the real console script, as a process
    forms = Counter(r["form"] for r in results)
    assert {"file", "nosuffix", "stdin", "rundir", "dir-of-runs", "sparse", "special"} <= set(forms), forms
    assert max(r["mem"] for r in results) > 0  # memory was measured


def test_a_case_is_the_same_bytes_given_seed_and_index(tmp_path):
    a = F.make_case(7, 123, tmp_path / "a")
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    b = F.make_case(7, 123, tmp_path / "a")   # the same folder, made again
    again = {p.name: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    assert (a.argv, a.mutation, a.stdin) == (b.argv, b.mutation, b.stdin) and first == again
    assert F.make_case(7, 124, tmp_path / "c").mutation != a.mutation or \
        F.make_case(7, 124, tmp_path / "c").command != a.command


@pytest.mark.parametrize("entry", REGRESSIONS, ids=[e.get("file") or e["name"] + "-" + e["form"] for e in REGRESSIONS])
def test_every_case_that_ever_failed_now_passes(entry, tmp_path):
    r = F.replay_regression(entry, tmp_path)
    assert r["outcome"] == "ok", (entry["defect"], r)
    assert r["secs"] < 5 and r["mem"] < r["cap"]


def test_the_regression_files_are_small_and_all_listed():
    files = {p.name for p in F.REGRESSIONS.iterdir()} - {"cases.json"}
    assert files == {e["file"] for e in REGRESSIONS if e["file"]}
    assert all((F.REGRESSIONS / f).stat().st_size <= 256 << 10 for f in files)
    assert all(e["defect"] and e["from"].startswith(("--replay ", "atheris: ", "crafted: ")) for e in REGRESSIONS)


@pytest.mark.parametrize("code, err, out, secs, mem, want", [
    (0, "", "a table\n", 0.1, 0, "ok"),
    (2, "hbtool: error: x: bad\n", "", 0.1, 0, "ok"),
    (2, "hbtool: warning: w\nhbtool: error: x: bad\n", "", 0.1, 0, "lines"),
    (1, "hbtool: error: internal error: ValueError: x (please report it)\n", "", 0.1, 0, "traceback"),
    (0, "", "", 0.1, 0, "no-result"),
    (-11, "", "", 0.1, 0, "exit--11"),
    (0, "", "x\n", 10.5, 0, "hang"),
    (0, "", "x\n", 0.1, 300 << 20, "over-cap"),
])
def test_what_counts_as_a_failure(code, err, out, secs, mem, want):
    assert F.classify(code, err, out, False, secs, mem, F.CAP_BASE + 1000) == want


def test_a_big_input_may_take_longer_but_not_for_ever():
    """A hang is over 10 s plus the input's bytes at 5 MB/s (a 470 MB csv through diagnose
    takes about a minute alone: throughput, not a hang); a small input gets 10 s."""
    assert F.time_limit(0) == F.HANG_S
    big = F.time_limit(470_000_000)
    assert 90 < big < 110
    assert F.classify(0, "", "x\n", False, 62.0, 0, F.CAP_BASE, big) == "ok"
    assert F.classify(0, "", "x\n", False, 62.0, 0, F.CAP_BASE, F.time_limit(1000)) == "hang"
