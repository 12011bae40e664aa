"""hbtool behavior: per thread, a timeline of running, busy-waiting, conditional waiting,
exit and failure (seed 001 HBTM), with what the online monitor saw and how late."""

from __future__ import annotations

import click

from ..analyzers.behavior import FINDINGS
from .hsa_common import beats_line, beats_option, beats_used
from .output import emit, output_options

CSV_COLUMNS = ["run", "process", "thread", "behavior", "start_s", "end_s", "duration_s", "first_beat",
               "last_beat", "detail", "ended_process", "exit_status", "during_exit", "online_detected_s", "online_latency_s"]


def _s(ns):
    return None if ns is None else ns / 1e9


def _fmt_t(v: float) -> str:
    return f"{v:.3f}"


def _fmt_dt(v: float) -> str:
    if v is None:
        return "n/a"
    if v != v:
        return "n/a"
    return f"{v * 1e3:.3g} ms" if abs(v) < 1 else f"{v:.3g} s"


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="TRACE...")
@click.option("--slow-factor", type=click.FloatRange(min=1.0, min_open=True), default=None, metavar="F",
              help="Busy-waiting: beats at least F times slower than usual (default 2).")
@click.option("--gap-factor", type=click.FloatRange(min=1.0, min_open=True), default=None, metavar="F",
              help="Conditional waiting: one interval at least F times the usual (default 3) ...")
@click.option("--min-wait", type=click.FloatRange(min=0.0), default=None, metavar="SEC",
              help="... and at least SEC seconds long (default 0.15); busy-waiting must last as long.")
@click.option("--window", type=click.FloatRange(min=0.0, min_open=True), default=None, metavar="SEC",
              help="The usual rate is judged over windows of SEC seconds (default 0.05).")
@beats_option
@output_options
def behavior(paths, slow_factor, gap_factor, min_wait, window, beats, fmt):
    """Per thread: when it was running, busy-waiting, conditional-waiting, and how it
    ended (exited, failed; ended when the trace cannot tell), with the online monitor's
    reports and their latency beside each interval.

    Busy-waiting: beats continue at a markedly lower, steady rate (and the rest of the
    team did not slow down with it). Conditional waiting: no beats for a while, then
    they resume. Exit and failure come from the lifecycle records the tracer writes
    (docs/methods.md). Exit status 0 whatever is found.

    \b
    Examples:
      hbtool behavior sample_traces/pi-condwait
      hbtool behavior run/ --format json | jq '.threads[] | select(.intervals | length > 2)'
    """
    from ..analyzers.behavior import BehaviorSettings, timeline
    from .hsa_common import read_all

    s = BehaviorSettings()
    for name, v in (("slow_factor", slow_factor), ("gap_factor", gap_factor), ("min_wait_s", min_wait),
                    ("min_busy_s", min_wait), ("window_s", window)):
        if v is not None:
            setattr(s, name, v)
    # a trace of lifecycle records only is shown too: its threads and how they ended
    trace = read_all(paths, beats=beats, need_beats=beats != "auto", stream=True)
    if not trace.beat_count() and not len(trace.events):
        from ..errors import HbtoolError

        raise HbtoolError(f"{', '.join(map(str, paths))}: the trace holds no heartbeats and no lifecycle records")
    report = timeline(trace, s)
    rows, monitors = report.threads, report.monitors
    threads = []
    for r in rows:
        ivs = []
        for iv in r["intervals"]:
            ivs.append({"behavior": iv["behavior"], "start_s": _s(iv["start_ns"]), "end_s": _s(iv["end_ns"]),
                        "duration_s": (iv["end_ns"] - iv["start_ns"]) / 1e9, "first_beat": iv["first_beat"],
                        "last_beat": iv["last_beat"], "detail": iv["detail"],
                        "ended_process": bool(iv.get("ended_process", False)),
                        "exit_status": iv.get("exit_status"), "during_exit": bool(iv.get("during_exit", False)),
                        "online": iv["online"]})
        threads.append({"run": r["run"], "process": r["process"], "thread": r["thread"], "os_tid": r["os_tid"],
                        "beats": r["beats"], "usual_interval_s": r["usual_interval_s"], "intervals": ivs,
                        "online": r["online"], "notes": r["notes"]})
    settings = {"slow_factor": s.slow_factor, "gap_factor": s.gap_factor, "min_wait_s": s.min_wait_s,
                "window_s": s.window_s, "min_slow_beats": s.min_slow_beats, "min_busy_s": s.min_busy_s}
    if fmt == "json":
        emit(fmt, threads, [], key="threads", extra={"settings": settings, "monitors": monitors,
                                                      "beats": beats_used(trace)})
    elif fmt == "csv":
        flat = []
        for t in threads:
            for iv in t["intervals"]:
                on = iv["online"] or {}
                flat.append({**{k: t[k] for k in ("run", "process", "thread")}, **iv,
                             "online_detected_s": on.get("detected_s"), "online_latency_s": on.get("latency_s")})
        emit(fmt, flat, CSV_COLUMNS, key="intervals")
    else:
        click.echo(_text(threads, monitors, trace), nl=False)


def _text(threads, monitors, trace) -> str:
    out = []
    mons = {(m["run"], m["process"]): m for m in monitors}
    last = None
    found: dict[str, int] = {}
    ends: dict[str, int] = {}
    for t in threads:
        for iv in t["intervals"]:
            if iv["behavior"] in FINDINGS:
                found[iv["behavior"]] = found.get(iv["behavior"], 0) + 1
            elif iv["behavior"] == "exited" and iv["exit_status"]:
                found["failing exit"] = found.get("failing exit", 0) + 1
        end = t["intervals"][-1]["behavior"] if t["intervals"] else None
        if end in ("exited", "ended") and not (t["intervals"][-1]["exit_status"] or 0):
            ends[end] = ends.get(end, 0) + 1
    line = (f"{len(threads)} thread{'s' if len(threads) != 1 else ''}; found: "
            + (", ".join(f"{n} {b}" for b, n in sorted(found.items())) or "nothing unusual"))
    if ends:
        line += "; " + ", ".join(f"{n} {b}" for b, n in sorted(ends.items())) + " normally" * ("exited" in ends and len(ends) == 1)
    out.append(line)
    out.append(beats_line(trace))
    if len(trace.monitor) and any(m["reports"] for m in monitors):
        out.append("online: what the monitor reported during the run, from the beats so far; the timeline is judged")
        out.append("on the whole trace. Where they differ, believe the timeline; the online report says when it was noticed.")
    for t in threads:
        key = (t["run"], t["process"])
        if key != last:
            last = key
            m = mons.get(key)
            procs = trace.runs.get(t["run"], {}).get("processes") or []
            pid = next((p["pid"] for p in procs if p.get("process") == t["process"]), None)
            head = f"\n{t['run']}  process {t['process']}" + (f" (pid {pid})" if pid else "")
            if m:
                head += (f"  online monitor: {m['mode']}, {m['messages']} messages "
                         f"({m['messages_per_window']:.1f} per window of {m['window_beats']} beats per thread), "
                         f"{m['reports']} reports")
            elif not len(trace.monitor):
                head += "  online monitor: none in this trace"
            out.append(head)
        usual = t["usual_interval_s"]
        out.append(f"  thread {t['thread']}: " + (f"{t['beats']} beats, usual interval {_fmt_dt(usual)}"
                                                  if t["beats"] else "no beats"))
        for iv in t["intervals"]:
            line = f"    {_fmt_t(iv['start_s']):>9} - {_fmt_t(iv['end_s']) + ' s':<11} {iv['behavior']:<20} {iv['detail']}"
            on = iv["online"]
            if on:
                said = "" if on["behavior"] == iv["behavior"] else f" reported {on['behavior']},"
                line += (f"  [online {on['mode']}:{said} detected at {_fmt_t(on['detected_s'])} s, "
                         f"{_fmt_dt(on['latency_s'])} after]")
            elif iv["behavior"] not in ("running", "ended", "idle") and len(trace.monitor):
                line += "  [online: not reported]"
            out.append(line.rstrip())
        extra = [o for o in t["online"] if not o["matched"]]
        for o in extra:
            out.append(f"    online {o['mode']} also reported {o['behavior']} from {_fmt_t(o['onset_s'])} s "
                       f"(detected at {_fmt_t(o['detected_s'])} s)")
        for n in t["notes"]:
            out.append(f"    note: {n}")
    return "\n".join(out) + "\n"
