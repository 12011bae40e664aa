"""Service rate of a pipeline stage from samples of its queue ends (SPEC 7, seed 002).

The rate a stage could sustain if nothing blocked it: only the periods in which its
queue end did not block count. Over a sliding window of their rates (count /
realized period), a discrete Gaussian filter of radius 2 without padding, then
q = mean + z * sd of the filtered window, averaged online (Welford) into q-bar.
An estimate converges when the running sd of the q, filtered by a Gaussian of
radius 1 and a Laplacian, stays within a tolerance of q-bar over a window; then the
average restarts, so that a change of rate shows as a new phase. Details and the
choice of every constant: docs/methods.md "Service rate".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import config
from ..model import QueueSamples


@dataclass(frozen=True)
class Params:
    window: int = config.SERVICE_WINDOW
    z: float = config.SERVICE_Z
    radius: int = config.SERVICE_FILTER_RADIUS
    sigma: float = config.SERVICE_FILTER_SIGMA
    conv_window: int = config.SERVICE_CONV_WINDOW
    tolerance: float = config.SERVICE_TOLERANCE
    min_values: int = config.SERVICE_MIN_VALUES
    phase_change: float = config.SERVICE_PHASE_CHANGE

    def check(self) -> None:
        if self.radius < 0 or self.window < 2 * self.radius + 3:
            raise ValueError(f"the window ({self.window}) must hold at least 2 x radius + 3 samples")
        if not self.sigma > 0 or not self.tolerance > 0 or not self.phase_change > 0:
            raise ValueError("sigma, tolerance and the phase change must be above 0")
        if self.conv_window < 1 or self.min_values < 1:
            raise ValueError("the convergence window and the minimum number of values must be at least 1")


def gaussian(radius: int, sigma: float) -> np.ndarray:
    """Discrete Gaussian kernel of a radius, normalised to sum 1."""
    i = np.arange(-radius, radius + 1, dtype=float)
    w = np.exp(-(i * i) / (2.0 * sigma * sigma))
    return w / w.sum()


def convergence_filter(sigma: float = 1.0) -> np.ndarray:
    """Gaussian of radius 1, then the Laplacian [1, -2, 1]: one 5-tap kernel."""
    return np.convolve(gaussian(1, sigma), np.array([1.0, -2.0, 1.0]))


@dataclass
class EndRates:
    """What one queue end says about its stage's service rate."""

    queue: str
    end: str
    process: int
    item_size: int | None
    samples: int
    nonblocking: int
    blocked_share: float
    period_s: float | None           # median realized sampling period
    status: str                      # converged | not converged | no non-blocking samples | cannot estimate
    reason: str = ""
    estimates: list[dict] = field(default_factory=list)
    phases: list[dict] = field(default_factory=list)
    caution: str = ""                # why the phases should not be read as changes of rate

    def as_dict(self) -> dict:
        return {"queue": self.queue, "end": self.end, "process": self.process, "item_size": self.item_size,
                "status": self.status, "reason": self.reason, "samples": self.samples,
                "nonblocking_samples": self.nonblocking, "blocked_share": self.blocked_share,
                "period_s": self.period_s, "estimates": self.estimates, "phases": self.phases,
                "caution": self.caution or None}


def _bytes(items: float, size: int | None) -> float | None:
    return items * size if size is not None and size > 0 else None


def estimate_end(df: pd.DataFrame, params: Params, warnings: list[str]) -> EndRates:
    """Estimates and phases of one queue end (rows of QueueSamples.samples, in time order)."""
    from ..kernels import service_rate_scan

    queue, end = str(df["queue"].iloc[0]), str(df["end"].iloc[0])
    sizes = df["item_size"].to_numpy()
    size = int(sizes[-1]) if len(sizes) and sizes[-1] > 0 else None
    n = len(df)
    period = df["period_s"].to_numpy(dtype=float)
    bad = ~(period > 0)
    if bad.any():
        warnings.append(f"queue {queue} ({end}): {int(bad.sum())} samples with a period of zero length left out")
    blocked = df["blocked"].to_numpy(dtype=bool)
    ok = ~blocked & ~bad
    res = EndRates(queue=queue, end=end, process=int(df["process"].iloc[0]), item_size=size, samples=n,
                   nonblocking=int(ok.sum()), blocked_share=float(blocked.mean()) if n else 0.0,
                   period_s=float(np.median(period[~bad])) if (~bad).any() else None, status="")
    if not ok.any():
        res.status = "no non-blocking samples"
        res.reason = (f"this end blocked in all {n} sampled periods: the stage never ran unhindered, so its "
                      f"service rate cannot be told" if n else "no samples")
        return res
    x = df["count"].to_numpy(dtype=float)[ok] / period[ok]
    t = df["t"].to_numpy(dtype=float)[ok]
    if x.size < params.window:
        res.status = "cannot estimate"
        res.reason = f"only {x.size} non-blocking samples; the window needs {params.window}"
        return res
    qbar, _, conv = service_rate_scan(np.ascontiguousarray(x), params.window, gaussian(params.radius, params.sigma),
                                      params.z, convergence_filter(), params.conv_window, params.tolerance,
                                      params.min_values)
    idx = np.flatnonzero(conv)
    start = params.window - 1
    for i in idx.tolist():
        res.estimates.append({"t_s": float(t[i]), "items_per_s": float(qbar[i]), "bytes_per_s": _bytes(qbar[i], size),
                              "converged": True, "since_s": float(t[start])})
        start = i + 1
    last = x.size - 1
    if start <= last:
        # the average since the last restart, not converged (yet)
        res.estimates.append({"t_s": float(t[last]), "items_per_s": float(qbar[last]),
                              "bytes_per_s": _bytes(qbar[last], size), "converged": False, "since_s": float(t[start])})
    res.phases = phases([e for e in res.estimates if e["converged"]], params.phase_change, size)
    res.caution = unsettled(res.phases)
    if res.caution:
        warnings.append(f"queue {queue} ({end}): {res.caution}")
    if idx.size:
        res.status = "converged"
    else:
        res.status = "not converged"
        res.reason = (f"the estimate did not settle within {x.size} non-blocking samples (tolerance "
                      f"{params.tolerance:g} of the rate); the last value is a running average")
    return res


def phases(estimates: list[dict], change: float, size: int | None) -> list[dict]:
    """Group consecutive converged estimates of a like rate into phases.

    A converged estimate further than `change` (relative) from the current phase's
    rate starts a new phase; a lone estimate between two phases whose rate lies
    between theirs is the average across the change, and joins the nearer phase
    without moving its rate.
    """
    groups: list[list[dict]] = []
    for e in estimates:
        if groups:
            rate = float(np.mean([g["items_per_s"] for g in groups[-1]]))
            if abs(e["items_per_s"] - rate) <= change * rate:
                groups[-1].append(e)
                continue
        groups.append([e])
    # lone estimates across a change
    transit: dict[int, list[dict]] = {}
    k = 1
    while k < len(groups) - 1:
        g = groups[k]
        if len(g) == 1:
            a = float(np.mean([e["items_per_s"] for e in groups[k - 1]]))
            b = float(np.mean([e["items_per_s"] for e in groups[k + 1]]))
            v = g[0]["items_per_s"]
            if min(a, b) <= v <= max(a, b):
                near = k - 1 if abs(v - a) <= abs(v - b) else k + 1
                transit.setdefault(id(groups[near]), []).append(g[0])
                del groups[k]
                continue
        k += 1
    out = []
    for g in groups:
        rate = float(np.mean([e["items_per_s"] for e in g]))
        extra = transit.get(id(g), [])
        span = g + extra
        out.append({"start_s": float(min(e["since_s"] for e in span)), "end_s": float(max(e["t_s"] for e in span)),
                    "items_per_s": rate, "bytes_per_s": _bytes(rate, size), "estimates": len(g),
                    "spread": float(np.std([e["items_per_s"] for e in g]) / rate) if rate else 0.0})
    return out


def unsettled(phases: list[dict]) -> str:
    """Why a list of phases says nothing about changes of rate, or "": at least
    SERVICE_NOISY_PHASES phases resting on fewer than SERVICE_ESTIMATES_PER_PHASE converged
    estimates each on average. The rate never held still long enough for estimates to
    agree (a loaded machine, a stage whose speed varies with its input): the phases are
    noise, not changes of rate."""
    est = sum(p["estimates"] for p in phases)
    if len(phases) < config.SERVICE_NOISY_PHASES or est >= config.SERVICE_ESTIMATES_PER_PHASE * len(phases):
        return ""
    lone = sum(p["estimates"] == 1 for p in phases)
    rates = np.array([p["items_per_s"] for p in phases])
    lo, hi = (float(v) for v in np.quantile(rates, [0.25, 0.75]))
    return (f"{len(phases)} phases from {est} converged estimates ({lone} resting on one): the rate never held "
            f"still, so these are not changes of rate; the middle half of the phases' rates lies between "
            f"{lo:.4g} and {hi:.4g} items/s (a loaded machine? rerun on a quiet one, or widen --window)")


@dataclass
class ServiceRates:
    ends: list[EndRates]
    queues: pd.DataFrame
    warnings: list[str]
    meta: dict


def service_rates(qs: QueueSamples, params: Params | None = None) -> ServiceRates:
    """Estimate the service rate behind every sampled end of every queue."""
    params = params or Params()
    params.check()
    warnings = list(qs.warnings)
    ends = []
    s = qs.samples
    for (queue, end), df in s.groupby(["queue", "end"], sort=False):
        ends.append(estimate_end(df.sort_values("t", kind="stable"), params, warnings))
    sampled = set(s["queue"].tolist())
    for q in qs.queues["queue"].tolist():
        if q not in sampled:
            row = qs.queues[qs.queues["queue"] == q].iloc[0]
            size = int(row["item_size"]) if row["item_size"] > 0 else None
            ends.append(EndRates(queue=q, end="consumer", process=int(row["process"]), item_size=size, samples=0,
                                 nonblocking=0, blocked_share=0.0, period_s=None, status="cannot estimate",
                                 reason="the queue has no samples (its monitor was off, or it closed before the "
                                        "first period ended)"))
    ends.sort(key=lambda e: (e.process, e.queue, e.end != "consumer"))
    return ServiceRates(ends=ends, queues=qs.queues, warnings=warnings, meta=qs.meta)
