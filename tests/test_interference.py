"""hbtool interference: the seed-004 analysis with known answers, segment tables, bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hbtool.analyzers.interference import (SegmentProfile, assess, classify, estimate, measured, probability_high,
                                           relative_clusters)

from conftest import run_cli


def _profile(durations_by_segment, comp=None, feats=None, ranks=2, name="r", noise=0):
    """Every rank has the same duration (the max is what counts) unless noise."""
    d = np.asarray(durations_by_segment, dtype=np.int64)
    S = len(d)
    seg = np.repeat(np.arange(S), ranks)
    rank = np.tile(np.arange(ranks), S)
    dur = d[seg].copy()
    if noise:
        dur[rank == 0] -= noise  # rank 0 a bit faster: the max over processes is rank 1's
    c = np.full(S, 1e6) if comp is None else np.asarray(comp, dtype=float)
    f = np.zeros((S, 0)) if feats is None else np.asarray(feats, dtype=float).reshape(S, -1)
    return SegmentProfile(name, rank, seg, dur, c[seg], f[seg], [f"f{j}" for j in range(f.shape[1])])


def test_relative_distance_clusters():
    x = np.array([10.0, 10.9, 11.0, 12.2, 0.0, 0.0, 1000.0, 1099.0, 1100.0])
    cid = relative_clusters(x)
    # 0,0 | 10, 10.9 (0.09), 11.0 (0.009) | 12.2 ((12.2-11)/11 > 0.1) | 1000, 1099 (0.099), 1100
    assert cid[4] == cid[5] == 0
    assert cid[0] == cid[1] == cid[2] == 1
    assert cid[3] == 2
    assert cid[6] == cid[7] == cid[8] == 3
    # exactly 0.1 apart starts a new cluster; equal values never split
    assert list(relative_clusters(np.array([10.0, 11.0]))) == [0, 1]
    assert list(relative_clusters(np.array([5.0, 5.0, 5.0]))) == [0, 0, 0]


def test_logistic_and_classes():
    assert probability_high(11.25) == pytest.approx(0.5)
    assert probability_high(7.5) == pytest.approx(0.21, abs=0.005)
    assert probability_high(15.0) == pytest.approx(0.79, abs=0.005)
    assert [classify(x) for x in (0, 7.49, 7.5, 15.0, 15.01)] == ["low", "low", "medium", "medium", "high"]


def test_one_interfered_segment_exact_impact():
    d = [100] * 9 + [200]  # median 100, MAD 0: the threshold is 100, the excess 100
    e = estimate(_profile(d))
    assert e.segments == 10 and e.groups == 1 and e.segments_interfered == 1
    assert e.interference_percent == pytest.approx(100 * 100 / 1100)
    assert e.klass == "medium"
    assert e.top[0]["segment"] == 9 and e.top[0]["impact_s"] == pytest.approx(100e-9)


def test_duration_is_max_and_computation_median_over_processes():
    e = estimate(_profile([1000] * 9 + [1500], noise=300))
    # rank 1 carries the durations; rank 0's shorter ones do not count
    assert e.impact_s == pytest.approx(500e-9)


def test_mad_threshold():
    d = [100, 102, 98, 101, 99, 100, 103, 97, 100, 110]
    e = estimate(_profile(d))
    med = np.median(d)
    mad = np.median(np.abs(np.array(d) - med))
    assert e.evidence["seed"] == pytest.approx(100 * (110 - (med + 4 * mad)) / sum(d))


def test_groups_by_computation_and_features_and_small_groups_not_judged():
    # two computation classes (1e6 and 3e6) x two feature tuples; one group of 4 is too small
    comp = [1e6] * 10 + [3e6] * 10 + [1e6] * 4
    feats = [[0]] * 20 + [[7]] * 4
    d = [100] * 9 + [150] + [300] * 10 + [900] * 4
    e = estimate(_profile(d, comp=comp, feats=feats))
    assert e.clusters == 2 and e.groups == 3 and e.groups_judged == 2
    assert e.segments_judged == 20
    assert e.impact_s == pytest.approx(50e-9)   # the 900s are in a group of 4: not judged


def test_nothing_judged_is_said():
    e = estimate(_profile([100, 200, 300]))
    assert not e.judged and any("nothing can be judged" in w for w in e.warnings)
    assert e.interference_percent == 0


def test_fast_collectives_warned():
    e = estimate(_profile([1_000_000] * 50))  # 1 ms segments: 1000 per second
    assert any("too short to judge" in w for w in e.warnings)
    e = estimate(_profile([50_000_000] * 50))
    assert not any("too short" in w for w in e.warnings)


def test_measured_interference_and_accuracy_against_the_fastest_run():
    base = [1000] * 40
    fast = _profile(base, name="fast")
    hit = list(base)
    hit[5] = 1000 + 8000  # instantaneous: 8000 ns lost
    slow = _profile(hit, name="hit")
    cont = _profile([1100] * 40, name="continuous")  # every segment 10 % slower
    ests, cmp = assess([fast, slow, cont])
    rows = {r["run"]: r for r in cmp}
    assert rows["fast"]["fastest"] and rows["fast"]["measured_percent"] == 0
    t_hit = (39 * 1000 + 9000) * 1e-9
    assert rows["hit"]["slower_than_fastest_percent"] == pytest.approx(100 * 8000e-9 / t_hit)
    assert rows["hit"]["measured_percent"] == pytest.approx(100 * 8000e-9 / t_hit)
    assert rows["hit"]["estimated_percent"] == pytest.approx(100 * 8000e-9 / t_hit)
    assert rows["hit"]["accuracy"] == pytest.approx(1.0)
    # the continuous run: the seed's median moved with it (seed 0 %, and its own measured
    # figure, less the displacement, 0 too: the error absorbed twice); the truth is its time
    # against the fastest, and the campaign's fastest per group finds all of it
    c = rows["continuous"]
    assert c["measured_percent"] == pytest.approx(100 * 100 / 1100)
    assert c["seed_percent"] == 0 and c["seed_measured_percent"] == pytest.approx(0, abs=1e-9)
    assert c["estimated_percent"] == pytest.approx(100 * 100 / 1100) and c["decided_by"] == "reference"
    assert c["accuracy"] == pytest.approx(1.0) and c["seed_accuracy"] < 0.8
    assert [e.klass for e in ests] == ["low", "high", "medium"]


def test_a_shift_of_most_segments_is_seen_against_the_runs_best():
    # 30 % of the segments ran clean (1000), 70 % slowed by 40 % (a neighbour that took the
    # core most of the time): the median sits in the slow mode, MAD 0, the seed sees nothing
    d = [1000] * 12 + [1400] * 28
    e = estimate(_profile(d))
    assert e.evidence["seed"] == 0
    b = 28 * (1400 - 1.05 * 1000) / sum(d)
    assert e.evidence["best"] == pytest.approx(100 * b)
    assert e.decided_by == "best" and e.klass == "high" and e.interference_percent == pytest.approx(100 * b)
    assert e.top and e.top[0]["threshold_s"] == pytest.approx(1050e-9)
    # noise within the tolerance is no shift
    e = estimate(_profile([1000, 1010, 1020, 1030, 1040] * 8))
    assert e.evidence["best"] == 0 and e.decided_by == "seed" and e.klass == "low"


def test_work_per_wall_second_not_duration():
    # the same group (computation within 10 %), durations in proportion to the work: no
    # segment is slow per unit of work, though the long ones are 9 % longer than the short
    comp = [1.0e6] * 10 + [1.09e6] * 30
    d = [1000] * 10 + [1090] * 30
    e = estimate(_profile(d, comp=comp))
    assert e.groups == 1 and e.evidence["best"] == 0
    # the same durations for equal work: the long ones lost their excess over 1.05 x the best
    assert estimate(_profile(d)).evidence["best"] == pytest.approx(100 * 30 * 40 / sum(d))


def test_groups_whose_time_communication_sets_are_left_to_the_seed():
    # a work-bound group (1e6 of work in 1000 ns) and one that waits: 10 of work, its time
    # from 10 to 1000 ns whatever its work (a receive that waits for another rank)
    comp = [1e6] * 20 + [10.0] * 20
    d = [1000] * 20 + [10] * 4 + [1000] * 16
    e = estimate(_profile(d, comp=comp))
    assert e.groups_judged == 2 and e.evidence["best"] == 0
    assert list(e.group_pace) == [k for k in e.group_sizes if k[0] == 1e6]   # only it is a reference for others


def test_the_whole_run_against_the_references_pace_of_work():
    # segments whose features differ run to run (no group matches), 40 % slower per unit of work
    clean = _profile([1000] * 40, feats=[[k] for k in range(40)], name="clean")
    slow = _profile([1400] * 40, feats=[[k + 100] for k in range(40)], name="slow")
    (e,), _ = assess([slow], references=[clean])
    assert e.reference_basis == "run" and e.decided_by == "reference" and e.reference_coverage == 1.0
    assert e.interference_percent == pytest.approx(100 * 400 / 1400)
    assert e.judged and not any("nothing can be judged" in w for w in e.warnings)   # no group, but the run is


def test_a_run_that_communicates_most_is_compared_time_against_time():
    # CPU time as the work, 1 % of the wall time (HPCC): a process polling while it waits turns
    # the wait into work (+20 % here), so per unit of work the run would look only 8 % slower
    clean = _profile([1000] * 40, comp=[10.0] * 40, name="clean")
    slow = _profile([1300] * 40, comp=[12.0] * 40, name="slow")
    for p in (clean, slow):
        p.computation_source = "cputime"
    (e,), _ = assess([slow], references=[clean])
    assert e.reference_basis == "time" and e.interference_percent == pytest.approx(100 * 300 / 1300)
    for p in (clean, slow):   # the same as instructions: no share of time to judge by, per unit of work
        p.computation_source = "instructions"
    (e,), _ = assess([slow], references=[clean])
    assert e.reference_basis == "run" and e.interference_percent == pytest.approx(100 * (52000 - 48000) / 52000)


def test_reference_sees_a_uniform_slowdown_and_trust_needs_it(tmp_path, capsys):
    slow = _profile([1300] * 40, name="slow")   # every segment 30 % slower: seed and best see nothing
    clean = _profile([1000] * 60, name="clean")
    (e,), _ = assess([slow])
    assert e.klass == "low" and e.evidence["reference"] is None and e.reference_coverage is None
    (e,), _ = assess([slow], references=[clean])
    assert e.decided_by == "reference" and e.reference_coverage == 1.0
    assert e.evidence["reference"] == pytest.approx(100 * 300 / 1300) and e.klass == "high"
    # a reference within the tolerance: no shift
    (e,), _ = assess([_profile([1040] * 40)], references=[clean])
    assert e.evidence["reference"] == 0 and e.klass == "low"
    # the command: a low verdict without reference is not "trust this run"
    paths = {}
    for name, d in (("slow", 1300), ("clean", 1000)):
        df = pd.DataFrame({"rank": 0, "segment": np.arange(40), "duration_ns": d * 1000, "computation": 1e6})
        paths[name] = tmp_path / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    code, out, err = run_cli(capsys, "interference", paths["slow"])
    assert code == 0 and "LOW" in out and "trust this run" not in out and "--reference" in out
    code, out, err = run_cli(capsys, "interference", paths["slow"], "--reference", paths["clean"], "--format", "json")
    doc = json.loads(out)
    assert doc["class"] == "high" and doc["decided_by"] == "reference"
    r = doc["runs"][0]
    assert r["seed_class"] == "low" and r["seed_percent"] == 0 and r["reference_coverage"] == 1.0
    code, out, err = run_cli(capsys, "interference", paths["clean"], "--reference", paths["clean"])
    assert code == 0 and "LOW" in out and "trust this run" in out and "decided by" in out


def test_a_million_segments_is_fast_enough_structure():
    """Correctness at scale (not timing): 200 000 segments x 8 processes, 1 % hit."""
    rng = np.random.default_rng(0)
    S, R = 200_000, 8
    seg = np.repeat(np.arange(S), R)
    rank = np.tile(np.arange(R), S)
    dur = np.full(S * R, 1_000_000, dtype=np.int64)
    hit = np.flatnonzero(rng.random(S) < 0.01)
    dur[hit * R + 3] += 500_000
    p = SegmentProfile("big", rank, seg, dur, np.full(S * R, 5e6), np.zeros((S * R, 0)), [])
    e = estimate(p)
    assert e.segments_interfered == len(hit)
    assert e.impact_s == pytest.approx(len(hit) * 500_000e-9)


# ------------------------------------------------------------------ tables and the command


def _table(tmp_path, name="seg.csv", **over):
    S, R = 60, 4
    seg = np.repeat(np.arange(S), R)
    rank = np.tile(np.arange(R), S)
    dur = np.full(S * R, 20_000_000, dtype=np.int64)
    dur[(seg == 30) & (rank == 2)] += 10_000_000
    df = pd.DataFrame({"rank": rank, "segment": seg, "duration_ns": dur, "computation": 1e7,
                       "p2p_blocking": 2, "posix_write_bytes": np.where(seg % 10 == 0, 4096, 0)})
    for k, v in over.items():
        if v is None:
            df = df.drop(columns=[k])
        else:
            df[k] = v
    path = tmp_path / name
    df.to_parquet(path) if name.endswith(".parquet") else df.to_csv(path, index=False)
    return path


def test_cli_json_on_a_table(tmp_path, capsys):
    code, out, err = run_cli(capsys, "interference", _table(tmp_path), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    for k in ("interference_percent", "class", "probability_high"):
        assert k in doc
    r = doc["runs"][0]
    assert r["segments"] == 60 and r["groups"] == 2 and r["segments_interfered"] == 1
    assert doc["interference_percent"] == pytest.approx(100 * 10e-3 / (60 * 20e-3 + 10e-3))
    assert r["most_interfered"][0]["segment"] == 30


def test_cli_text_csv_and_parquet(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "interference", _table(tmp_path, "s.parquet"))
    assert code == 0 and "lost to interference" in out and "LOW" in out
    code, out, _ = run_cli(capsys, "interference", _table(tmp_path), _table(tmp_path, "b.csv"), "--format", "csv")
    lines = out.strip().splitlines()
    assert lines[0].startswith("run,interference_percent,class") and len(lines) == 3


def test_cli_nothing_judged_exits_0(tmp_path, capsys):
    df = pd.DataFrame({"rank": [0, 0, 0], "segment": [0, 1, 2], "duration_ns": [5, 6, 7], "computation": [1, 2, 3]})
    path = tmp_path / "tiny.csv"
    df.to_csv(path, index=False)
    code, out, err = run_cli(capsys, "interference", path)
    assert code == 0 and "nothing can be judged" in out


@pytest.mark.parametrize("over,msg", [
    ({"duration_ns": None}, "missing: duration_ns"),
    ({"computation": "lots"}, "computation"),
    ({"p2p_blocking": 2.5}, "must hold integers"),
    ({"duration_ns": -1}, "negative duration_ns"),
    ({"rank": 0}, "appears twice"),
])
def test_cli_bad_tables_one_line_exit_2(tmp_path, capsys, over, msg):
    code, out, err = run_cli(capsys, "interference", _table(tmp_path, **over))
    assert code == 2
    assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_not_a_profile(tmp_path, capsys):
    p = tmp_path / "x.bin"
    p.write_bytes(b"\0" * 100)
    code, _, err = run_cli(capsys, "interference", p)
    assert code == 2 and "unknown segment profile format" in err
