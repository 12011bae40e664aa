"""hbtool train: learn the normal ranges of the HSA features."""

from __future__ import annotations

import click

from .hsa_common import beats_option

from .output import warn

LABEL_OPTIONS = {"--normal": "normal", "--memoryleak": "memoryleak", "--shutdown": "shutdown"}


def _split(tokens) -> dict[str, list[str]]:
    """--normal A B --shutdown C: each label option takes every path up to the next option."""
    groups: dict[str, list[str]] = {v: [] for v in LABEL_OPTIONS.values()}
    current = None
    for tok in tokens:
        name, eq, val = tok.partition("=")
        if name in LABEL_OPTIONS:
            current = LABEL_OPTIONS[name]
            if eq:
                groups[current].append(val)
        elif tok.startswith("--") and tok != "-":
            raise click.UsageError(f"no such option: {tok}")
        elif current is None:
            raise click.UsageError(f"{tok}: say which label it has (--normal, --memoryleak or --shutdown before it)")
        else:
            groups[current].append(tok)
    return groups


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="Model file to write (JSON).")
@click.option("--level", type=click.FloatRange(0.5, 1.0), default=None,
              help="Share of the normal values each range spans (default: chosen by cross-validated "
                   "macro-F1 with anomalous traces, 0.95 with normal ones only).")
@click.option("--reference", "ref", metavar="REF", help="Reference trace (default: each run's median thread).")
@beats_option
@click.argument("traces", nargs=-1, type=click.UNPROCESSED, metavar="--normal TRACE... [--memoryleak TRACE...] [--shutdown TRACE...]")
def train(out, level, ref, beats, traces):
    """Learn the normal ranges of the features and write a model (JSON).

    Each range spans the central LEVEL share of the normal sequences' values (on a log
    scale), widened on each side by a margin of its distance to the median
    (docs/methods.md). From normal traces alone LEVEL is 0.95 and the margin 1, and no
    range is narrower than the built-in one (a few runs understate how much runs differ);
    given anomalous traces too, the (level, margin) with the best cross-validated macro-F1 on
    the training sequences is chosen. Every thread of a trace counts under the label it is
    given, unless a labels.json beside the trace labels each thread (as
    benchmarks/make_dataset.py writes) or the truth.json of the example programs says
    which thread got the anomaly.

    \b
    Example:
      hbtool train --normal runs/normal/* --memoryleak runs/leak/* --shutdown runs/stop/* -o model.json
      hbtool diagnose new_run/ --model model.json
    """
    from pathlib import Path

    from .. import config
    from ..analyzers.hsa import train_from_traces
    from ..io.dataset import thread_labels
    from ..io.hsa_model import write_model
    from .hsa_common import read_all

    groups = _split(traces)
    if not groups["normal"]:
        raise click.UsageError("give at least one normal trace: --normal TRACE...")
    reference = read_all([ref], "reference", beats=beats, stream=True) if ref else None
    labelled = ((read_all([p], f"reading {label}", beats=beats, stream=True), label, thread_labels(Path(p)) if Path(p).is_dir() else {}, {})
                for label, paths in groups.items() for p in paths)
    levels = (level,) if level else config.HSA_LEVELS
    try:
        model, table = train_from_traces(labelled, reference=reference, levels=levels,
                                         default_level=level or config.HSA_DEFAULT_LEVEL)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    skipped = int(table["na_reason"].astype(bool).sum())
    if skipped:
        warn([f"{skipped} threads have too few beats for features and were not used"])
    model.training["reference"] = f"trace {ref}" if ref else "each run's median thread"
    write_model(model, out)
    f1 = model.training.get("macro_f1")
    click.echo(
        f"hbtool: wrote {out}: level {model.level:g}, trained on "
        + ", ".join(f"{n} {k}" for k, n in model.training["sequences"].items() if n)
        + (f" sequences, training macro-F1 {f1:.3f}" if f1 is not None else " sequences")
        + (f", expected {model.expected_beats:g} beats per thread" if model.expected_beats else ""),
        err=True,
    )
