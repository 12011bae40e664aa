"""hbtool plot: what the figures say (legends, end markers, diagnose statuses) and where
their legends sit, checked on the matplotlib Figure that `hbtool plot` saves."""

from __future__ import annotations

import ast

import matplotlib
import numpy as np
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from conftest import ROOT, SAMPLES, make_trace, run_cli
from test_timers import _status

from hbtool.analyzers.heartrate import heart_rate, heart_rate_curves, heart_rate_pieces
from hbtool.analyzers.hsa import diagnose
from hbtool.analyzers import summary
from hbtool.analyzers.behavior import OFFLINE_BEHAVIORS
from hbtool.analyzers.summary import summarize_threads
from hbtool.cli import plotting
from hbtool.io import read_heartbeats, write_heartbeats
from hbtool.model import StatusSamples

matplotlib.use("Agg")

#: every value summary.thread_endings / summarize_threads give the `ending` column
ENDINGS = list(summary.ENDINGS)


@pytest.fixture
def figures(monkeypatch):
    """The figures `hbtool plot` saves, drawn (so that their extents are final)."""
    saved = []
    real = plotting.save

    def keep(fig, out):
        real(fig, out)
        FigureCanvasAgg(fig).draw()  # save closed it: a canvas again, to measure on
        saved.append(fig)

    monkeypatch.setattr(plotting, "save", keep)
    return saved


def plot(capsys, figures, tmp_path, *args):
    code, _, err = run_cli(capsys, "plot", *args, "-o", tmp_path / "p.png")
    assert code == 0, err
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert len(figures) == 1
    return figures[0], err


def legends(fig):
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def texts(legend) -> list[str]:
    return [t.get_text() for t in legend.get_texts()]


def thread_legend(ax) -> dict[str, str]:
    """thread name -> its legend entry ('thread 3 · pthread_exit · shutdown')."""
    return {t.split(" · ")[0]: t for t in texts(ax.get_legend())}


def overlaps(a, b) -> bool:
    """Two window extents share more than a pixel in both directions."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1


def labels_of(fig) -> list:
    """Every axis label, title, tick label and the figure's title that has text."""
    out = []
    for ax in fig.axes:
        out.append(ax.title)
        for axis in (ax.xaxis, ax.yaxis):  # a twin's shared axis is not drawn
            if axis.get_visible():
                out += [axis.label, *axis.get_ticklabels()]
    if fig._suptitle is not None:
        out.append(fig._suptitle)
    out += [t for ax in fig.axes for t in (ax._left_title, ax._right_title)]
    return [t for t in out if t.get_visible() and t.get_text()]


def assert_legends_clear(fig):
    """No legend covers an axis label, title or tick label, nor another legend, and each
    lies inside the figure."""
    r = fig.canvas.get_renderer()
    boxes = [lg.get_window_extent(r) for lg in legends(fig)]
    assert boxes
    page = fig.bbox
    for i, box in enumerate(boxes):
        assert box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y0 >= page.y0 - 1 and box.y1 <= page.y1 + 1
        for t in labels_of(fig):
            assert not overlaps(box, t.get_window_extent(r)), f"a legend covers {t.get_text()!r}"
        for other in boxes[i + 1:]:
            assert not overlaps(box, other), "two legends overlap"


# --------------------------------------------------------------------------- heart rate


@pytest.mark.parametrize("traces", [["pi-condwait"], ["pi-condwait", "pi-segv"]])
def test_behavior_legends_do_not_cover_the_axis_labels(capsys, figures, tmp_path, traces):
    fig, _ = plot(capsys, figures, tmp_path, "--behavior", *(SAMPLES / t for t in traces))
    assert_legends_clear(fig)
    assert fig.axes[-1].get_xlabel() == "time since start (s)"
    key = texts(fig.legends[0])
    assert "behavior: conditional-waiting" in key and "online monitor report" in key


def test_heart_rate_legends_do_not_cover_the_axis_labels(capsys, figures, tmp_path):
    fig, _ = plot(capsys, figures, tmp_path, SAMPLES / "jacobi-leak")
    assert_legends_clear(fig)


def test_a_pthread_exit_thread_is_marked_pthread_exit_not_ended_normally(capsys, figures, tmp_path):
    fig, _ = plot(capsys, figures, tmp_path, SAMPLES / "pi-shutdown")
    ax = fig.axes[0]
    entry = thread_legend(ax)
    assert entry["thread 3"].split(" · ")[1] == "pthread_exit"
    assert all(entry[f"thread {k}"].split(" · ")[1] == "returned" for k in range(3))
    words = [t for lg in legends(fig) for t in texts(lg)] + [t.get_text() for t in labels_of(fig)]
    assert not any("normally" in w for w in words)
    key = texts(fig.legends[0])
    assert "pthread_exit: it called pthread_exit" in key and "returned: its function returned" in key
    # thread 3's end marker is pthread_exit's, not returned's
    marker = {line.get_marker() for line in ax.get_lines() if line.get_linestyle() == "None"
              and line.get_color() == ax.get_legend().legend_handles[3].get_color()}
    assert marker == {plotting.ENDING_MARKERS["pthread_exit"][0]} != {plotting.ENDING_MARKERS["returned"][0]}


def test_thread_legends_name_endings_the_way_info_does(capsys, figures, tmp_path):
    for name in ("matmul-exit1", "pi-segv"):
        figures.clear()
        fig, _ = plot(capsys, figures, tmp_path, SAMPLES / name)
        summary = summarize_threads(read_heartbeats(SAMPLES / name))
        entry = thread_legend(fig.axes[0])
        for r in summary.itertuples():
            assert entry[f"thread {r.thread}"].split(" · ")[1] == r.ended
        # every one of these processes died: black end markers, and the key says what black means
        assert any("black marker: the process died" in t for t in texts(fig.legends[0]))


def test_every_ending_has_a_marker_and_an_unknown_one_is_named_as_it_is():
    assert set(ENDINGS) <= set(plotting.ENDING_MARKERS)
    assert len({m for m, _ in plotting.ENDING_MARKERS.values()}) == len(plotting.ENDING_MARKERS)
    trace = make_trace(threads=len(ENDINGS) + 1, beats=80)
    summary = summarize_threads(trace)
    summary["ending"] = [*ENDINGS, "ended (7)"]
    summary["ended"] = [*(f"info says {e}" for e in ENDINGS), "ended (7)"]
    curves = {k: plotting.thread_curve(t, hr) for k, (t, hr) in heart_rate_curves(trace, 10).items()}
    fig = plotting.heart_rate_figure(curves, summary, 10)
    FigureCanvasAgg(fig).draw()
    entry = thread_legend(fig.axes[0])
    assert entry[f"thread {len(ENDINGS)}"].split(" · ")[1] == "ended (7)"
    assert entry["thread 1"].split(" · ")[1] == "info says pthread_exit"
    assert entry["thread 0"].split(" · ")[1] == "info says returned"
    key = texts(fig.legends[0])
    assert "ended (7): as the trace records it" in key
    assert not any("normally" in t for t in key + list(entry.values()))
    plt.close(fig)


def test_each_thread_shows_its_diagnose_status(capsys, figures, tmp_path):
    fig, _ = plot(capsys, figures, tmp_path, SAMPLES / "pi-shutdown")
    found = {f"thread {r['thread']}": r["status"] for r in diagnose(read_heartbeats(SAMPLES / "pi-shutdown")).threads()}
    assert found["thread 3"] == "shutdown"
    ax = fig.axes[0]
    entry = thread_legend(ax)
    assert {k: v.split(" · ")[2] for k, v in entry.items()} == found
    styles = {t.get_text().split(" · ")[0]: h.get_linestyle()
              for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert styles["thread 3"] == ":" and styles["thread 0"] == "-"
    key = texts(fig.legends[0])
    assert "diagnose: shutdown" in key and "diagnose: normal" in key
    assert "3 normal, 1 shutdown" in ax.get_title(loc="left")


def test_a_trace_that_cannot_be_diagnosed_is_plotted_and_says_so(capsys, figures, tmp_path):
    src = tmp_path / "one.csv"
    write_heartbeats(make_trace(threads=1, beats=200), str(src))
    fig, _ = plot(capsys, figures, tmp_path, src)
    ax = fig.axes[0]
    assert "not diagnosed" in ax.get_title(loc="left") and "at least 2 threads" in ax.get_title(loc="left")
    assert thread_legend(ax)["thread 0"].endswith(" · not diagnosed")
    assert "not diagnosed (see the title)" in texts(fig.legends[0])


@pytest.mark.parametrize("n", [3000, 50000])
def test_a_thread_drawn_from_pieces_is_the_curve_of_the_whole_thread(n):
    # seeded beat times with long gaps and beats sharing a time stamp; pieces smaller and
    # larger than the heart-rate window and the figure's blocks
    rng = np.random.default_rng(1)
    d = rng.exponential(1e-3, n)
    d[rng.integers(0, n, 5)] += 2.0
    d[100:110] = 0
    t = np.cumsum(d)
    for w in (1, 10, 64):
        whole = plotting.thread_curve(t, heart_rate(t, w))
        for size in (1, 7, 999, 4096):
            pieces = [t[a:a + size] for a in range(0, n, size)]
            rates = np.concatenate([hr for _, hr in heart_rate_pieces(iter(pieces), w)])
            np.testing.assert_array_equal(rates, heart_rate(t, w))
            got = plotting.thread_curve_pieces(n, heart_rate_pieces(iter(pieces), w))
            for name in ("x", "y", "xs", "ys"):
                np.testing.assert_array_equal(getattr(got, name), getattr(whole, name), err_msg=f"{w} {size} {name}")
            assert (got.last_t, got.last_hr) == (whole.last_t, whole.last_hr)
            assert got.top == whole.top


def test_plotting_computes_no_analysis():
    tree = ast.parse((ROOT / "hbtool" / "cli" / "plotting.py").read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any("analyzers" in m or m in ("..io", "hbtool.io") for m in imported)


# --------------------------------------------------------------------------- status


def two_processes() -> StatusSamples:
    one = _status(n=6)
    other = one.samples.copy()
    other["process"] = 1
    other["proc_rss_kb"] = 8192
    return StatusSamples(samples=pd.concat([one.samples, other], ignore_index=True),
                         machine=one.machine + [{**one.machine[0], "process": 1}])


def test_every_status_panel_has_a_legend_with_units(capsys, figures, tmp_path, monkeypatch):
    import hbtool.io

    monkeypatch.setattr(hbtool.io, "read_status", lambda path: two_processes())
    fig, _ = plot(capsys, figures, tmp_path, "--status", tmp_path)
    assert_legends_clear(fig)
    panels: dict[tuple, list] = {}  # a panel: an axes and its twins, which share its place
    for ax in fig.axes:
        panels.setdefault(tuple(round(v, 4) for v in ax.get_position().bounds), []).append(ax)
    assert len(panels) == 4
    got = []
    for axes in sorted(panels.values(), key=lambda axs: -axs[0].get_position().y0):
        shown = [ax.get_legend() for ax in axes if ax.get_legend() is not None]
        assert len(shown) == 1, "one legend per panel, for the lines of both its y axes"
        got.append(texts(shown[0]))
        drawn = [a.get_label() for ax in axes for a in [*ax.get_lines(), *ax.collections]
                 if not a.get_label().startswith("_")]
        assert sorted(drawn) == sorted(got[-1]), "every line of the panel is in its legend"
    assert got == [
        [f"CPU {p} (%)" for p in ("user", "system", "iowait", "steal", "idle")],
        ["memory used (% of RAM, left)", "swap used (MiB, right)"],
        ["network received (bytes/s)", "network sent (bytes/s)"],
        ["process 0 CPU (% of one CPU, left)", "process 1 CPU (% of one CPU, left)",
         "process 0 resident memory (MiB, right)", "process 1 resident memory (MiB, right)"],
    ]


def test_every_behavior_has_a_colour():
    assert set(plotting.BEHAVIOR_COLORS) == set(OFFLINE_BEHAVIORS)


def test_each_panel_says_which_beats_it_draws(capsys, figures, tmp_path):
    tr = make_trace(threads=3, beats=200)
    tr.beats["source"] = "openmp"
    src = tmp_path / "auto.parquet"
    write_heartbeats(tr, str(src))
    fig, _ = plot(capsys, figures, tmp_path, src)
    assert fig.axes[0].get_title(loc="left").splitlines()[1].startswith("openmp beats; ")
