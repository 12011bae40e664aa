"""Service-rate estimator (SPEC 7): kernel against the naive reference, the analyzer on
synthetic samples with known rates, the sample-table reader, the command and its errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hbtool import kernels
from hbtool.analyzers.service_rate import Params, convergence_filter, gaussian, service_rates
from hbtool.errors import TraceFormatError
from hbtool.io import read_queue_samples
from hbtool.io.queues import samples_from_frame

import naive
from conftest import run_cli


def _table(rates, n=1200, period=0.01, blocked_share=0.1, seed=1, queue="q", end=None):
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1) * period
    k = len(rates)
    mu = np.asarray(rates, dtype=float)[np.minimum((np.arange(n) * k) // n, k - 1)]
    count = rng.poisson(mu * period)
    blocked = rng.random(n) < blocked_share
    # a blocked period shows only part of the service
    count = np.where(blocked, (count * rng.random(n)).astype(int), count)
    df = pd.DataFrame({"queue": queue, "t": t, "count": count, "blocked": blocked.astype(int)})
    if end:
        df["end"] = end
    return df


def test_filters():
    g = gaussian(2, 1.0)
    assert g.size == 5 and g.sum() == pytest.approx(1.0) and g[2] == g.max() and g[0] == g[4]
    c = convergence_filter()
    assert c.size == 5 and c.sum() == pytest.approx(0.0)  # a Laplacian ignores a constant
    assert np.dot(c, np.arange(5.0)) == pytest.approx(0.0)  # ... and a straight line


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("z", [0.0, 1.0])
def test_kernel_matches_naive(seed, z):
    rng = np.random.default_rng(seed)
    x = np.r_[rng.poisson(100, 150), rng.poisson(60, 150)].astype(float)
    args = (12, gaussian(2, 1.0), z, convergence_filter(), 8, 0.02, 10)
    got = kernels.service_rate_scan(x, *args)
    want = naive.service_rate_scan(x, *args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9, equal_nan=True)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9, atol=1e-9, equal_nan=True)
    assert got[2].tolist() == want[2].tolist()
    assert got[2].sum() > 0  # the case exercises restarts


def test_constant_rate_converges_exactly():
    # deterministic service: every unblocked period holds exactly 50 items of 10 ms
    df = pd.DataFrame({"queue": "q", "t": np.arange(1, 301) * 0.01, "count": 50, "blocked": 0})
    res = service_rates(samples_from_frame(df, "x", "x"))
    (e,) = res.ends
    assert e.status == "converged"
    assert all(est["items_per_s"] == pytest.approx(5000.0) for est in e.estimates)
    assert len(e.phases) == 1 and e.phases[0]["items_per_s"] == pytest.approx(5000.0)


@pytest.mark.parametrize("rate", [800, 5000, 60000])
def test_poisson_rate_within_ten_percent(rate):
    res = service_rates(samples_from_frame(_table([rate]), "x", "x"), Params(z=0.0))
    (e,) = res.ends
    assert e.status == "converged"
    conv = [x["items_per_s"] for x in e.estimates if x["converged"]]
    assert len(conv) >= 5
    assert np.mean(np.abs(np.asarray(conv) / rate - 1) <= 0.10) >= 0.9
    assert len(e.phases) == 1


def test_two_phases_found():
    res = service_rates(samples_from_frame(_table([6000, 3000], n=2400), "x", "x"), Params(z=0.0))
    (e,) = res.ends
    assert len(e.phases) == 2
    a, b = e.phases
    assert a["items_per_s"] == pytest.approx(6000, rel=0.1) and b["items_per_s"] == pytest.approx(3000, rel=0.1)
    assert a["end_s"] <= b["start_s"] + 1e-9
    assert 10.0 < b["start_s"] < 14.5  # the change is at 12 s


def test_blocked_samples_are_dropped():
    df = _table([5000], blocked_share=0.0)
    df.loc[::2, "count"] = 7  # every other period the stage starved ...
    df.loc[::2, "blocked"] = 1  # ... and said so
    (e,) = service_rates(samples_from_frame(df, "x", "x"), Params(z=0.0)).ends
    assert e.nonblocking == len(df) // 2
    assert e.phases[0]["items_per_s"] == pytest.approx(5000, rel=0.05)


def test_all_blocked_and_too_few():
    df = _table([5000], n=100, blocked_share=1.0)
    (e,) = service_rates(samples_from_frame(df, "x", "x")).ends
    assert e.status == "no non-blocking samples" and not e.estimates and "blocked in all 100" in e.reason
    df = _table([5000], n=20, blocked_share=0.0)
    (e,) = service_rates(samples_from_frame(df, "x", "x")).ends
    assert e.status == "cannot estimate" and "only 20 non-blocking samples" in e.reason


def test_not_converged_reports_running_average():
    df = _table([5000], n=60, blocked_share=0.0)
    (e,) = service_rates(samples_from_frame(df, "x", "x"), Params(min_values=1000)).ends
    assert e.status == "not converged"
    assert len(e.estimates) == 1 and e.estimates[0]["converged"] is False
    assert e.estimates[0]["items_per_s"] == pytest.approx(5000, rel=0.15)
    assert e.phases == []


def test_ends_and_item_size(tmp_path):
    df = pd.concat([_table([4000], end="consumer"), _table([9000], end="producer", seed=3)])
    df["item_size"] = 16
    p = tmp_path / "s.csv"
    df.to_csv(p, index=False)
    res = service_rates(read_queue_samples(str(p)), Params(z=0.0))
    by_end = {e.end: e for e in res.ends}
    assert set(by_end) == {"consumer", "producer"}
    assert by_end["consumer"].phases[0]["items_per_s"] == pytest.approx(4000, rel=0.1)
    assert by_end["producer"].phases[0]["items_per_s"] == pytest.approx(9000, rel=0.1)
    ph = by_end["producer"].phases[0]
    assert ph["bytes_per_s"] == pytest.approx(16 * ph["items_per_s"])


def test_parquet_and_period_column(tmp_path):
    df = _table([5000], n=400, blocked_share=0.0)
    df["period"] = 0.01
    df["t"] = df["t"] + 100.0  # any origin
    p = tmp_path / "s.parquet"
    df.to_parquet(p)
    qs = read_queue_samples(str(p), item_size=4)
    assert (qs.samples["period_s"] == 0.01).all() and (qs.samples["item_size"] == 4).all()
    (e,) = service_rates(qs, Params(z=0.0)).ends
    assert e.phases[0]["items_per_s"] == pytest.approx(5000, rel=0.1)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.drop(columns=["blocked"]), "no column 'blocked'"),
    (lambda d: d.assign(count=d["count"] - 10_000), "negative count"),
    (lambda d: d.iloc[::-1], "out of time order"),
    (lambda d: d.assign(count="x"), "column 'count' holds 'x'"),
    (lambda d: d.assign(count=1.5), "expected an integer"),
    (lambda d: d.assign(blocked="maybe"), "expected 1/0 or true/false"),
    (lambda d: d.assign(end="middle"), "expected consumer or producer"),
    (lambda d: d.iloc[:0], "no samples"),
    (lambda d: d.assign(period=-1.0), "expected seconds above 0"),
])
def test_bad_tables(tmp_path, capsys, mutate, message):
    p = tmp_path / "bad.csv"
    mutate(_table([5000], n=50)).to_csv(p, index=False)
    with pytest.raises(TraceFormatError, match=message):
        read_queue_samples(str(p))
    code, out, err = run_cli(capsys, "service-rate", p)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err


def test_cli_formats(tmp_path, capsys):
    p = tmp_path / "s.csv"
    _table([6000, 3000], n=2400).to_csv(p, index=False)
    code, out, err = run_cli(capsys, "service-rate", p, "--format", "json", "--z", "0", "--item-size", "8")
    assert code == 0, err
    doc = json.loads(out)
    (q,) = doc["queues"]
    assert q["queue"] == "q" and q["end"] == "consumer" and q["status"] == "converged"
    assert {"t_s", "items_per_s", "bytes_per_s", "converged"} <= set(q["estimates"][0])
    assert len(q["phases"]) == 2 and doc["params"]["z"] == 0.0
    code, out, _ = run_cli(capsys, "service-rate", p, "--format", "csv", "--z", "0")
    lines = out.splitlines()
    assert lines[0].startswith("queue,end,process,status,phase,t_s")
    assert len(lines) - 1 == len(q["estimates"])
    code, out, _ = run_cli(capsys, "service-rate", p, "--z", "0", "--item-size", "8")
    assert "2 phases" in out and "kitems/s" in out and "kB/s" in out


def test_phases_of_lone_estimates_are_called_noise_not_changes(tmp_path, capsys):
    # a stage whose speed wanders (a loaded machine): around 5000 items/s, a new speed every
    # 0.1 s (log-normal, sd 0.5), never long enough for estimates in a row to agree
    rng = np.random.default_rng(1)
    n = 1200
    mu = 5000 * np.exp(0.5 * rng.standard_normal(n // 10).repeat(10))
    df = pd.DataFrame({"queue": "q", "t": np.arange(1, n + 1) * 0.01, "count": rng.poisson(mu * 0.01),
                       "blocked": 0})
    res = service_rates(samples_from_frame(df, "x", "x"))
    (e,) = res.ends
    est = sum(p["estimates"] for p in e.phases)
    assert len(e.phases) >= 3 and est < 2.5 * len(e.phases)
    assert e.caution.startswith(f"{len(e.phases)} phases from {est} converged estimates")
    assert f"queue q (consumer): {e.caution}" in res.warnings
    path = tmp_path / "wander.csv"
    df.to_csv(path, index=False)
    code, out, err = run_cli(capsys, "service-rate", path)
    assert code == 0
    assert f"  caution: {e.caution}" in out.splitlines()
    assert f"hbtool: warning: queue q (consumer): {e.caution}" in err.splitlines()
    # two steady phases: no caution
    (e,) = service_rates(samples_from_frame(_table([6000, 3000], n=2400), "x", "x"), Params(z=0.0)).ends
    assert len(e.phases) == 2 and e.caution == ""
