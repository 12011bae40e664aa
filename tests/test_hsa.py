"""HSA: alignment, features, ranges, the decision rules, training, macro-F1, model files."""

import json

import numpy as np
import pandas as pd
import pytest

from hbtool.analyzers.align import common_grid, fit_poly
from hbtool.analyzers.features import FEATURES, FeatureSettings, compute_features, make_series, too_few_beats
from hbtool.analyzers.hsa import HsaModel, classify, classify_row, fit_ranges, macro_f1, train
from hbtool.io.hsa_model import ModelFormatError, read_model, write_model

S = FeatureSettings()


def test_fit_poly_finds_the_lowest_degree_that_fits():
    t = np.linspace(-5, 5, 200)  # symmetric: a line explains none of t^2 (R^2 = 0)
    f = fit_poly(t, 3 * t**2 - t + 5)
    assert f.degree == 2 and f.r2 == pytest.approx(1.0)
    np.testing.assert_allclose(f(np.array([2.0])), [3 * 4 - 2 + 5])
    assert fit_poly(t, 2 * t + 1).degree == 1
    # SPEC 2: the lowest degree reaching R^2 >= 0.9 wins, even when a higher one is exact
    u = np.linspace(0, 10, 200)
    assert fit_poly(u, 3 * u**2 - u + 5).degree == 1


def test_fit_poly_ignores_nan_and_handles_tiny_input():
    t = np.arange(10.0)
    y = 2 * t
    y[3] = np.nan
    assert fit_poly(t, y).r2 == pytest.approx(1.0)
    assert np.isnan(fit_poly([1.0], [2.0])(np.array([1.0]))).all()
    assert common_grid(np.array([0.0, 1.0]), np.array([2.0, 3.0]), 10).size == 0


def _steady(n, period, start=0.0):
    return start + period * np.arange(1, n + 1)


def test_identical_sequences():
    q = make_series(_steady(300, 0.001), S.window)
    f = compute_features(q, q, S)
    assert f["GTR"] == 1 and f["LTR"] == 1 and f["GHR"] == 1 and f["progress"] == 1
    assert f["LHR"] == pytest.approx(1.0) and f["DTW"] == 0 and f["LB"] == 0


def test_twice_slower_sequence():
    q = make_series(_steady(300, 0.001), S.window)
    c = make_series(_steady(300, 0.002), S.window)
    f = compute_features(q, c, S)
    assert f["GTR"] == pytest.approx(2.0)
    assert f["LTR"] == pytest.approx(2.0)
    assert f["GHR"] == pytest.approx(0.5)
    assert f["LHR"] == pytest.approx(0.5, rel=1e-6)
    assert f["DTW"] > 0 and f["LB"] > 0


def test_truncated_sequence_and_expected_beats():
    q = make_series(_steady(300, 0.001), S.window)
    c = make_series(_steady(120, 0.001), S.window)
    f = compute_features(q, c, S)
    assert f["progress"] == pytest.approx(0.4)
    assert f["GTR"] == pytest.approx(0.4)
    assert compute_features(q, c, S, expected_beats=240)["progress"] == pytest.approx(0.5)


def test_too_few_beats_and_repeated_timestamps():
    assert "too few" in too_few_beats(make_series(_steady(5, 0.1), S.window), S)
    assert "no elapsed time" in too_few_beats(make_series(np.zeros(50), S.window), S)
    assert too_few_beats(make_series(_steady(50, 0.1), S.window), S) is None


RANGES = {"GTR": (0.8, 1.2), "LTR": (0.8, 1.2), "GHR": (0.8, 1.2), "LHR": (0.8, 1.2),
          "DTW": (None, 10.0), "LB": (None, 5.0), "LTRmax": (None, 2.0), "progress": (0.9, None)}
MODEL = HsaModel(RANGES, level=0.99)


def row(**kw):
    r = {"GTR": 1.0, "LTR": 1.0, "GHR": 1.0, "LHR": 1.0, "DTW": 1.0, "LB": 1.0, "LTRmax": 1.2, "progress": 1.0,
         "beats": 100, "na_reason": "", "died": False, "ended": ""}
    r.update(kw)
    return r


@pytest.mark.parametrize("kw,status", [
    ({}, "normal"),
    ({"na_reason": "3 beats: too few"}, "unknown"),
    ({"died": True}, "shutdown"),
    ({"progress": 0.5, "GTR": 0.5}, "shutdown"),                        # progress rule
    ({"GTR": 0.6, "GHR": 1.3, "DTW": 50.0}, "normal"),                  # guard: did all its work sooner
    ({"GTR": 1.5, "LTR": 1.4, "GHR": 0.6}, "memoryleak"),               # Alg. 1: similar shape, slower, lower rate
    ({"GTR": 1.5}, "normal"),                                           # slower overall, no local evidence
    ({"GTR": 1.5, "LTR": 1.4}, "memoryleak"),                           # slower, and locally (hbtool's addition)
    ({"LTRmax": 3.0}, "memoryleak"),                                    # one stretch much slower (LTRmax rule)
    ({"DTW": 50.0, "GTR": 1.4, "GHR": 0.7}, "memoryleak"),              # Alg. 1: distance out of range
    ({"DTW": 50.0}, "memoryleak"),
    ({"SS": 0.009}, "shutdown"),                                        # share rule: stopped working
    ({"SS": 0.050 * 0.99, "WS": 3.2}, "memoryleak"),                    # slowed: fewer, longer units (cd-hit)
    ({"SS": 0.009, "WS": 2.28}, "shutdown"),                            # stopped: its few units are no work (FastTree)
])
def test_decision_rules(kw, status):
    assert classify_row(row(**kw), MODEL)[0] == status


def test_algorithm1_shutdown_branch_without_progress():
    m = HsaModel({k: v for k, v in RANGES.items() if k != "progress"}, level=0.99)
    assert classify_row(row(GTR=0.5, LTR=0.5, progress=float("nan")), m)[0] == "shutdown"
    assert classify_row(row(GTR=0.5, DTW=50.0, progress=float("nan")), m)[0] == "shutdown"


def test_reason_names_the_features_outside():
    status, why = classify_row(row(DTW=50.0, GTR=1.4, GHR=0.7), MODEL)
    assert "DTW 50.0 > 10.0" in why and "GTR 1.40 outside [0.80, 1.20]" in why


def test_fit_ranges_one_sided_level_and_margin():
    # ratios are fitted on their log: values e^-1 .. e^1 around a median of 1
    normal = pd.DataFrame({f: np.exp(np.linspace(-1, 1, 101)) for f in FEATURES})
    r = fit_ranges(normal, 1.0)
    assert r["DTW"][0] is None and r["LB"][0] is None and r["LTRmax"][0] is None and r["progress"][1] is None
    assert r["GTR"] == pytest.approx((np.exp(-1), np.exp(1)))
    assert fit_ranges(normal, 1.0, margin=0.5)["GTR"] == pytest.approx((np.exp(-1.5), np.exp(1.5)))
    assert fit_ranges(normal, 0.9)["GTR"] == pytest.approx((np.exp(-0.9), np.exp(0.9)))
    # distances on log(1 + x)
    d = pd.DataFrame({"DTW": np.expm1(np.linspace(0, 4, 101))})
    assert fit_ranges(d, 1.0, margin=0.5)["DTW"] == pytest.approx((None, np.expm1(5.0)))


def test_macro_f1_exact():
    assert macro_f1(["normal", "shutdown"], ["normal", "shutdown"]) == 1.0
    # normal: tp 1 fp 1 fn 0 -> 2/3; shutdown: tp 0 fp 0 fn 1 -> 0
    assert macro_f1(["normal", "shutdown"], ["normal", "normal"]) == pytest.approx(1 / 3)


def _table(n_normal=60, n_leak=20, n_stop=20, seed=1):
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for _ in range(n_normal):
        rows.append(row(**{f: rng.normal(1.0, 0.05) for f in ("GTR", "LTR", "GHR", "LHR")},
                        DTW=abs(rng.normal(5, 2)), LB=abs(rng.normal(1, 0.5)), beats=400))
        labels.append("normal")
    for _ in range(n_leak):
        rows.append(row(GTR=rng.uniform(1.5, 3), LTR=rng.uniform(1.5, 3), GHR=rng.uniform(0.3, 0.6),
                        LHR=rng.uniform(0.3, 0.6), DTW=rng.uniform(30, 90), LB=rng.uniform(10, 50), beats=400))
        labels.append("memoryleak")
    for _ in range(n_stop):
        b = int(rng.integers(100, 300))
        rows.append(row(GTR=b / 400, beats=b, DTW=abs(rng.normal(5, 2))))
        labels.append("shutdown")
    return pd.DataFrame(rows), np.array(labels, dtype=object)


def test_train_learns_expected_beats_and_separates_classes():
    table, labels = _table()
    model = train(table, labels)
    assert model.expected_beats == 400
    assert model.training["sequences"] == {"normal": 60, "memoryleak": 20, "shutdown": 20}
    assert model.training["macro_f1"] >= 0.95
    test, tl = _table(seed=7)
    assert macro_f1(tl, classify(test, model)["status"]) >= 0.95


def test_train_from_normal_only_uses_default_level():
    table, labels = _table(n_leak=0, n_stop=0)
    model = train(table, labels)
    assert (model.level, model.margin) == (0.95, 1.0) and model.training["macro_f1"] is None


def test_a_model_of_normal_runs_alone_widens_the_built_in_ranges_and_never_narrows_them():
    """Three quiet runs of a program bound LB far below where its later normal runs go (NPB EP,
    4 threads on 2 CPUs: 0.2 against 15): with no anomalous run to say how tight is right, a
    model keeps the built-in ranges at least; trained with anomalies it may narrow them."""
    from hbtool import config

    table, labels = _table(n_leak=0, n_stop=0)
    quiet = train(table, labels)
    for f, (lo, hi) in config.HSA_DEFAULT_RANGES.items():
        mlo, mhi = quiet.ranges[f]
        assert lo is None or mlo is None or mlo <= lo, (f, mlo, lo)   # None: unbounded
        assert hi is None or mhi is None or mhi >= hi, (f, mhi, hi)
    # wider where the runs themselves vary more than the built-in ranges allow
    noisy = table.copy()
    noisy["GTR"] = np.linspace(0.3, 2.5, len(noisy))
    assert train(noisy, labels).ranges["GTR"][1] > config.HSA_DEFAULT_RANGES["GTR"][1]
    # a normal thread of a later run, LB 15, is normal for it; with anomalies learnt, LB 15 is not
    later = pd.DataFrame([row(GTR=1.0, LTR=1.0, GHR=1.0, LHR=1.0, DTW=5.0, LB=15.0, beats=400)])
    assert classify(later, quiet)["status"].iloc[0] == "normal"
    full, full_labels = _table()
    assert classify(later, train(full, full_labels))["status"].iloc[0] == "memoryleak"


def test_model_file_round_trip(tmp_path):
    table, labels = _table()
    model = train(table, labels)
    model.team_work = {0: 1.02, 1: 0.98}
    p = tmp_path / "m.json"
    write_model(model, p)
    doc = json.loads(p.read_text())
    assert doc["format"] == "hbtool-hsa-model" and doc["model_version"] == 1 and "hbtool_version" in doc
    back = read_model(p)
    assert back.ranges == model.ranges and back.expected_beats == model.expected_beats
    assert (back.level, back.margin) == (model.level, model.margin)
    assert back.settings == model.settings
    assert back.team_work == {0: 1.02, 1: 0.98}
    # a damaged table of work against the team's: refused, naming it
    p.write_text(json.dumps({**doc, "team_work": {"0": -1}}))
    with pytest.raises(ModelFormatError, match="work against the team's per thread is damaged"):
        read_model(p)
    # the share of the team's units per thread: kept, and a damaged table refused
    model.team_share = {0: 1.25, 1: 0.8}
    write_model(model, p)
    assert read_model(p).team_share == {0: 1.25, 1: 0.8}
    doc = json.loads(p.read_text())
    for bad in ({"0": -1}, {"0": True}, {"x": 1.0}, {"0": 1e7}, [1, 2]):
        p.write_text(json.dumps({**doc, "team_share": bad}))
        with pytest.raises(ModelFormatError, match="share of the team's units per thread is damaged"):
            read_model(p)
    p.write_text(json.dumps(doc))
    # the units per construct: kept, and a damaged table refused
    # (a loop measured per iteration, in picoseconds: 100 s an iteration is 1e14, over a day in ns)
    model.units = {"task f+0x10": 12345.0, "loop g+0x20": 9.5e6, "loop h+0x30 (ps per iteration)": 1e14}
    write_model(model, p)
    assert read_model(p).units == {"task f+0x10": 12345.0, "loop g+0x20": 9.5e6, "loop h+0x30 (ps per iteration)": 1e14}
    doc = json.loads(p.read_text())
    for bad in ({"task f+0x10": -1}, {"task f+0x10": True}, {"": 5.0}, {"x" * 2000: 5.0},
                {"loop g+0x20": 1e14}, {"loop h+0x30 (ps per iteration)": 1e18}, [1, 2]):
        p.write_text(json.dumps({**doc, "units": bad}))
        with pytest.raises(ModelFormatError, match="units per construct are damaged"):
            read_model(p)
    # ... and `diagnose` says so in one line, exit status 2
    from conftest import SAMPLES, hbtool_here

    trace = sorted(SAMPLES.glob("*.xlsx"))[0]
    r = hbtool_here("diagnose", trace, "--model", p)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"hbtool: error: {p}: the stored units per construct are damaged: not an object of at most "
                        f"65536 constructs; train the model again\n")


def test_unit_ratio_is_the_median_construct_by_construct_and_counts_enough_units_only():
    """UR (diagnosis.unit_ratio): each construct's median unit over the reference's, weighted by
    the thread's work in it at the reference's pace; a construct of fewer than
    config.UNIT_RATIO_MIN_UNITS units, or one the reference does not have, says nothing. A
    thread is slowed by it when its UR and its UR against its teammates' are both above
    SHIFT_MAX (hsa._work_shift)."""
    import pandas as pd

    from hbtool import config
    from hbtool.analyzers.diagnosis import pooled_units, unit_ratio, unit_ratios
    from hbtool.analyzers.hsa import _work_shift

    few = config.UNIT_RATIO_MIN_UNITS - 1
    ref = pooled_units([{"a": (100.0, 40), "b": (1e6, 20), "c": (5.0, few)},
                        {"a": (300.0, 40), "b": (3e6, 20)}])
    assert ref == {"a": 200.0, "b": 2e6}   # c: too few units to say
    slow = {"a": (600.0, 100), "b": (2e6, 20), "c": (1e9, few), "d": (1.0, 500)}
    assert unit_ratio(slow, ref) == pytest.approx(1.0)   # b's work (20 x 2 ms) outweighs a's; c, d say nothing
    slow["a"] = (600.0, 1_000_000)
    assert unit_ratio(slow, ref) == pytest.approx(3.0)   # now a holds the thread's work
    assert np.isnan(unit_ratio({"d": (1.0, 500)}, ref))
    # FastTree's thread that took its stopped teammate's sections (which match no construct of the
    # model's): its region ends, 0.1 us in the model's runs, took 6.7 us with the injector armed.
    # Weighted by its own time they outweighed its loops, and it read 67; they are 66 us of work
    # at the model's pace, its loops 2.2 ms
    fasttree = {"parallel f": (6700.0, 663), "loop g": (87_000.0, 33)}
    assert unit_ratio(fasttree, {"parallel f": 100.0, "loop g": 65_600.0}) == pytest.approx(87 / 65.6)
    # ... and its sections, all three in one unit, which the model's runs never ran together: as
    # many sections at the model's length per section (the median over its names), 1.2 ms here
    from hbtool.analyzers.diagnosis import per_section
    model = {"parallel f": 100.0, "sections s #1,3": 2.4e6, "sections s #2": 1.2e6, "sections s #1": 0.8e6}
    assert per_section(model) == {"sections s": 1.2e6}
    took_all = {"parallel f": (6700.0, 663), "sections s #1,2,3": (3.9e6, 30)}
    assert np.isnan(unit_ratio({"sections s #1,2,3": (3.9e6, 30)}, model))   # without: nothing to say
    assert unit_ratio(took_all, model, per_section(model)) == pytest.approx(3.9 / 3.6)
    table = pd.DataFrame({"run": ["r", "r", "s"], "process": [0, 0, 0], "thread": [0, 1, 0],
                          "unit_medians": [slow, {"a": (200.0, 50)}, {"a": (700.0, 50)}]})
    ur, team = unit_ratios(table, ref)
    assert ur.tolist() == pytest.approx([3.0, 1.0, 3.5]) and team[:2].tolist() == pytest.approx([1.0, 3.0])
    assert np.isnan(team[2])   # alone in its run: no teammate to tell the machine from the thread
    assert "unit ratio" in _work_shift({"WS": np.nan, "UR": 3.0, "UR_team": 1.0})
    assert _work_shift({"WS": np.nan, "UR": 3.0, "UR_team": 2.0}) == ""   # the whole team slower: the machine
    assert _work_shift({"WS": np.nan, "UR": 3.0, "UR_team": np.nan}) == ""
    # GraphicsMagick: a normal thread that took mostly the dear calls' chunks of one loop, at its
    # teammate's pace per iteration in each window (IR 1.00): which calls it took, not its pace
    assert _work_shift({"WS": np.nan, "UR": 2.38, "UR_team": 0.88, "IR": 1.0}) == ""
    # ... a slowed victim's chunks are slower than its teammates' too
    assert "unit ratio" in _work_shift({"WS": np.nan, "UR": 2.71, "UR_team": 0.96, "IR": 1.8})


@pytest.mark.parametrize("content,needle", [
    ("not json", "not JSON"),
    ('{"a": 1}', "not an hbtool model"),
    ('{"format": "hbtool-hsa-model", "model_version": 99, "hbtool_version": "9.0"}', "train the model again"),
    ('{"format": "hbtool-hsa-model", "model_version": 1, "ranges": {"GTR": [1, 2]}}', "missing"),
    ('{"format": "hbtool-hsa-model", "model_version": 1, "ranges": {"GTR": [2, 1]}}', "empty"),
    ('{"format": "hbtool-hsa-model", "model_version": 1, "ranges": {"GTR": ["a", 1]}}', "not a finite number"),
    ('[1, 2]', "not an hbtool model"),
])
def test_bad_model_files(tmp_path, content, needle):
    p = tmp_path / "m.json"
    p.write_text(content)
    with pytest.raises(ModelFormatError, match=needle):
        read_model(p)


def _fit_poly_loop(t, y, r2_target=0.9, max_degree=12):
    """Naive reference: fit every degree in turn (SPEC 2)."""
    from numpy.polynomial import Polynomial

    sst = np.sum((y - y.mean()) ** 2)
    best = (-np.inf, None)
    for d in range(1, min(max_degree, len(t) - 1) + 1):
        p = Polynomial.fit(t, y, d)
        r2 = 1 - np.sum((p(t) - y) ** 2) / sst
        if r2 > best[0]:
            best = (r2, d)
        if r2 >= r2_target:
            break
    return best[1], best[0]


@pytest.mark.parametrize("seed", range(8))
def test_fit_poly_matches_the_degree_by_degree_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 600))
    t = np.sort(rng.uniform(0, rng.uniform(0.1, 100), n))
    y = np.sin(t / t.max() * rng.uniform(1, 12)) * 100 + rng.normal(0, rng.uniform(0.1, 60), n) + 1000
    f = fit_poly(t, y)
    d, r2 = _fit_poly_loop(t, y)
    assert f.degree == d
    assert f.r2 == pytest.approx(r2, rel=1e-6, abs=1e-9)


def test_fit_poly_of_beats_in_tight_clusters_says_nothing_on_stderr():
    """A damaged trace's beats can fall in a few clusters microseconds wide, seconds apart:
    numpy's least squares then calls the chosen degree's fit poorly conditioned (RankWarning,
    a RuntimeWarning: a line on the user's stderr, an error under this suite's settings; a
    damaged sections trace failed so now and then). The degree is what the QR found to add a
    direction: fitted quietly."""
    import warnings

    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(200):
            n, c = rng.integers(20, 200), rng.choice([2, 3, 4])
            centers, width = np.sort(rng.uniform(0, 10, c)), 10 ** rng.uniform(-9, -3)
            t = np.concatenate([x + rng.uniform(0, width, n // c) for x in centers])
            f = fit_poly(t, rng.normal(size=t.size))
            assert 1 <= f.degree <= 12


def test_the_work_shift_is_a_lasting_change_not_one_slow_window_at_either_end():
    """The work shift's split (docs/methods.md, "WS"): a thread 3x slower from window 10 of 20
    on shifted by 3; one slow window among the last two or the first two (a thread that
    stalled once late; NPB FT's last phase, four beats a window, where 4 of 8 normal FT runs at
    4 threads had a thread called memoryleak by the mean of such a pair) is no shift."""
    from hbtool.analyzers.summary import split_shift

    rng = np.random.default_rng(3)
    calm = rng.normal(0, 0.05, 20)
    shift, at = split_shift(calm + np.where(np.arange(20) >= 10, np.log(3), 0))
    assert 2.7 < shift < 3.3 and at == 10
    for i in (18, 19, 0, 1):
        one = calm.copy()
        one[i] += np.log(6)   # a window 6x as slow: the mean of the pair would read 2.4
        shift, _ = split_shift(one)
        assert 0.85 < shift < 1.2, (i, shift)
    shift, _ = split_shift(calm + np.where(np.arange(20) >= 18, np.log(3), 0))
    assert 2.7 < shift < 3.3   # both of the last two windows slower: a shift


def test_a_slowdown_that_ends_is_measured_against_the_windows_around_it_not_its_recovery():
    """shift_segment: a thread slowed from window 4 to window 10 of 20 (ImageMagick's leaking
    thread, 1 MiB a unit, until the injector's cap; then at work as before) and its teammate,
    which waits for it (the mirror image). The best step is at the recovery, and read the
    teammate 5x slower "from window 10 on" (memoryleak); the excursion against the windows
    around it reads the slowed thread 10x slower and the teammate faster. A lasting step and a
    calm series are still steps; an excursion of two windows is none."""
    from hbtool.analyzers.summary import shift_segment, split_shift

    rng = np.random.default_rng(5)
    calm = rng.normal(0, 0.1, 20)
    w = np.arange(20)
    slowed = calm + np.where((w >= 4) & (w < 10), np.log(10) * (1 + (w - 4) / 6), 0)   # worse as it goes
    step, at = split_shift(-slowed)
    assert step > 2 and at == 10   # what the step alone read for the teammate
    shift, a, b = shift_segment(slowed)
    assert shift > 8 and (a, b) == (4, 10), (shift, a, b)
    shift, a, b = shift_segment(-slowed)
    assert shift < 0.125 and (a, b) == (4, 10), (shift, a, b)
    lasting = calm + np.where(w >= 8, np.log(3), 0)
    shift, a, b = shift_segment(lasting)
    assert 2.7 < shift < 3.3 and (a, b) == (8, 20), (shift, a, b)
    shift, a, b = shift_segment(calm)
    assert 0.8 < shift < 1.25 and b == 20, (shift, a, b)
    two = calm + np.where((w >= 7) & (w < 9), np.log(3), 0)
    shift, a, b = shift_segment(two)
    assert 0.8 < shift < 1.25 and b == 20, (shift, a, b)


def test_a_phase_constructs_raw_ratio_counts_only_when_a_construct_of_both_sides_shifts():
    """_raw_shift: a thread's raw ratios to its team by window and construct. A heavy construct
    in windows 0-7 and a light one in windows 6-19 (MUSCLE 5's two phases): the light one 1x
    in windows 6-9 and 3x after, the heavy one 3x from window 7 (a thread slowed from there):
    a shift of 3 from about window 8 (the median of both per window), whatever each
    construct's own usual ratio. The same light phase 3x throughout (lopsided by design: the
    master alone in it), the heavy construct even: no construct of both sides shifts, no
    shift."""
    import pandas as pd
    from hbtool.analyzers.summary import _raw_shift

    def table(rows):
        return pd.Series([r for _, _, r in rows], index=pd.MultiIndex.from_tuples(
            [(w, c) for w, c, _ in rows], names=["window", "construct"]))

    rng = np.random.default_rng(11)
    slow = [(w, "heavy", (np.log(3) if w >= 7 else 0) + rng.normal(0, 0.03)) for w in range(8)]
    slow += [(w, "light", (np.log(3) if w >= 10 else 0) + rng.normal(0, 0.03)) for w in range(6, 20)]
    shift, at = _raw_shift(table(slow))
    assert 2.6 < shift < 3.4 and 7 <= at <= 10, (shift, at)
    lopsided = [(w, "heavy", rng.normal(0, 0.03)) for w in range(8)]
    lopsided += [(w, "light", np.log(3) + rng.normal(0, 0.03)) for w in range(6, 20)]
    assert _raw_shift(table(lopsided)) is None


def test_a_constructs_unit_is_the_one_that_holds_its_work_not_a_rare_long_one():
    """The work shift's unit per window and construct (docs/methods.md, "WS"): a construct
    that runs at several sizes (NPB MG's resid at every level of its V-cycle: units of 2 us on
    the coarse grids, milliseconds on the fine one) is measured by the units that hold its
    work, not by the median unit, which falls on the coarse grids or the fine one as a
    window's mix of levels goes (MG at 4 threads: normal threads read a shift of 3); and a
    rare long unit of a construct whose units are short (a stall) does not become its unit."""
    import pandas as pd
    from hbtool.analyzers.summary import _UnitHistograms

    rng = np.random.default_rng(5)
    # window 0: 60 units of 2 us and 40 of 1 ms, shuffled; window 1: 99 of 7 us and one of 2.3 ms
    first = rng.permutation(np.r_[np.full(60, 2_000), np.full(40, 1_000_000)])
    second = rng.permutation(np.r_[np.full(99, 7_000), 2_300_000])
    steps = np.r_[first, second]
    clock = np.r_[0, np.cumsum(steps)].astype(np.int64)
    h = _UnitHistograms(np.array([0, first.size, steps.size]))
    h.add(clock, pd.Categorical(["loop f"] * clock.size))
    m = h.medians()
    assert m[(0, "loop f")] == pytest.approx(1_000_000, rel=0.03)
    assert m[(1, "loop f")] == pytest.approx(7_000, rel=0.03)


def _histograms(steps: np.ndarray, labels: list, edges: np.ndarray, t=None, by_time=False):
    import pandas as pd
    from hbtool.analyzers.summary import _UnitHistograms

    h = _UnitHistograms(edges, by_time)
    h.add(np.r_[0, np.cumsum(steps)].astype(np.int64), pd.Categorical(["", *labels]), None, t)
    return h


def test_a_construct_of_the_runtimes_microseconds_does_not_vote_in_the_windows_it_holds_no_work():
    """FastTree (CPU-clock `slow` 3x on its master): each region holds a sections construct of
    1.7 ms units and ends 12 us later (the runtime's); in three windows of a phase the region's
    end held milliseconds of real work, so over the run it held more than 1 % of the team's work
    and was compared in every window. With two constructs, the window's median was halfway
    between the slowed sections (3x) and the runtime's microseconds (1x): a work shift of 1.42,
    the victim called normal. Where a construct holds next to none of a window's work
    (config.SHIFT_CONSTRUCT_WORK), it does not vote there."""
    from hbtool.analyzers.summary import _construct_series, split_shift

    rng = np.random.default_rng(7)
    windows, pairs = 20, 20
    edges = np.arange(windows + 1) * 2 * pairs
    units = {}
    for k, slowed in ((0, True), (1, False)):
        steps, labels = [], []
        for w in range(windows):
            big = 1_700_000 * (3 if slowed and w >= 8 else 1)
            end = 4_000_000 if 5 <= w <= 7 else 12_000
            for _ in range(pairs):
                steps += [big * rng.uniform(0.95, 1.05), end * rng.uniform(0.9, 1.1)]
                labels += ["sections f+0x10", "parallel f"]
        units[("r", 0, k)] = _histograms(np.array(steps), labels, edges)
    series = _construct_series(units)
    victim, _ = split_shift(series[("r", 0, 0)].to_numpy())
    teammate, _ = split_shift(series[("r", 0, 1)].to_numpy())
    assert 2.6 < victim < 3.4 and 0.25 < teammate < 0.45, (victim, teammate)


def test_a_thread_that_took_a_windows_units_alone_and_its_share_after_did_not_stop():
    """The share shift with one window before (a thread that stopped in the first window it
    shared work in): FastTree's slowed victim took 225x its teammate's units in the run's first
    twentieth (the teammate was in a long unit of its own) and as many as its teammate after;
    against that window its share fell to 0.004, and it was called shutdown. A share above its
    teammates' counts as theirs; a thread that took its share and then none still stopped."""
    from hbtool.analyzers.summary import _share_shifts

    rng = np.random.default_rng(9)
    windows, span = 20, 1_000_000_000
    edges = np.linspace(0, windows * span, windows + 1).astype(np.int64)

    def team(first_alone: bool, stops: bool):
        out = {}
        for k in (0, 1):
            t = [0]
            for w in range(windows):
                if first_alone and w == 0 and k == 0:
                    t.append(t[-1] + span)   # one long unit of its own
                    continue
                n = 200 if first_alone and w == 0 else (0 if stops and k == 1 and w >= 10 else 40)
                if not n:
                    t.append(t[-1] + span)   # it does no chunk (a gap of a whole window)
                    continue
                step = span / n
                t += list(t[-1] + step * np.arange(1, n + 1) * rng.uniform(0.999, 1.0))
            t = np.array(t, dtype=np.int64)
            out[("r", 0, k)] = _histograms(np.diff(t).astype(np.float64), ["loop f"] * (t.size - 1), edges, t,
                                           by_time=True)
        return out

    took_alone = _share_shifts(team(first_alone=True, stops=False))
    assert took_alone[("r", 0, 1)][0] > 0.5, took_alone
    stopped = _share_shifts(team(first_alone=False, stops=True))
    assert stopped[("r", 0, 1)][0] < 0.05, stopped


@pytest.mark.parametrize("cut", [1, 2, 5])
def test_units_measured_in_pieces_are_those_measured_whole(cut):
    """A streamed thread's beats come in pieces (the reader's chunks): its units, and the chunks
    that show its own pace (IR), must not depend on where the pieces are cut -- a first piece
    of one beat too, which closes no unit (before, it left the thread's last beat unset, and
    the next piece's chunk times no longer matched its units: an error)."""
    import pandas as pd
    from hbtool.analyzers.summary import _UnitHistograms

    rng = np.random.default_rng(11)
    n = 40
    steps = rng.uniform(50_000, 150_000, n - 1).astype(np.int64)
    clock = np.r_[0, np.cumsum(steps)].astype(np.int64)
    t = clock + 1_000_000
    labels = ["loop a"] * 20 + ["loop b"] * 20
    iterations = np.r_[0, rng.integers(4, 40, n - 1)].astype(np.int64)
    edges = np.linspace(t[0], t[-1] + 1, 5).astype(np.int64)

    def measured(pieces):
        h = _UnitHistograms(edges, True)
        for a, b in pieces:
            h.add(clock[a:b], pd.Categorical(labels[a:b], categories=["loop a", "loop b"]), None, t[a:b],
                  None, iterations[a:b])
        return h

    whole, cut_up = measured([(0, n)]), measured([(0, cut), (cut, 17), (17, n)])
    assert whole.pace_chunks and whole.pace_chunks == cut_up.pace_chunks
    assert whole.pace_counts == cut_up.pace_counts and whole.counts == cut_up.counts
