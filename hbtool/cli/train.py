"""hbtool train: learn the normal ranges of the HSA features."""

from __future__ import annotations

import click

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
              help="Confidence level of the ranges (default: chosen by training macro-F1 with anomalous "
                   "traces, 0.999 with normal ones only).")
@click.option("--reference", "ref", metavar="REF", help="Reference trace (default: each run's median thread).")
@click.argument("traces", nargs=-1, type=click.UNPROCESSED, metavar="--normal TRACE... [--memoryleak TRACE...] [--shutdown TRACE...]")
def train(out, level, ref, traces):
    """Learn the normal ranges of the features and write a model (JSON).

    From normal traces alone the ranges are the normal sequences' robust centre plus or
    minus z(level) spreads; given anomalous traces too, the level that maximises the
    training macro-F1 is chosen. Every thread of a trace counts under the label it is
    given, unless a labels.json beside the trace labels each thread (as
    benchmarks/make_dataset.py writes) or the truth.json of the example programs says
    which thread got the anomaly.

    \b
    Example:
      hbtool train --normal runs/normal/* --memoryleak runs/leak/* --shutdown runs/stop/* -o model.json
      hbtool diagnose new_run/ --model model.json
    """
    from pathlib import Path

    import pandas as pd

    from .. import config
    from ..analyzers.diagnosis import features_table
    from ..analyzers.hsa import train as train_model
    from ..io.dataset import _thread_labels
    from ..io.hsa_model import write_model
    from .hsa_common import read_all

    groups = _split(traces)
    if not groups["normal"]:
        raise click.UsageError("give at least one normal trace: --normal TRACE...")
    reference = read_all([ref], "reference") if ref else None
    tables = []
    for label, paths in groups.items():
        for p in paths:
            tr = read_all([p], f"reading {label}")
            t = features_table(tr, reference=reference)
            per = _thread_labels(Path(p)) if Path(p).is_dir() else {}
            t["label"] = [per.get(int(th), label) if per else label for th in t["thread"]]
            tables.append(t)
    table = pd.concat(tables, ignore_index=True)
    levels = (level,) if level else config.HSA_LEVELS
    try:
        model = train_model(table, table["label"].to_numpy(dtype=object), levels=levels,
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
