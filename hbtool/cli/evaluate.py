"""hbtool evaluate: seed 000's evaluation protocol on a labelled data set."""

from __future__ import annotations

import click

from .output import emit, output_options, warn


@click.command()
@click.argument("dataset", metavar="DATASET_DIR", type=click.Path(file_okay=False))
@click.option("--repeats", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option("--train-fraction", type=click.FloatRange(0.05, 0.95), default=0.3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random splits.")
@output_options
def evaluate(dataset, repeats, train_fraction, seed, fmt):
    """Mean macro-F1 per benchmark: stratified 30 % train, the rest test, 3 repetitions.

    DATASET_DIR is laid out <benchmark>/<label>/<run>/ with label normal, memoryleak or
    shutdown (benchmarks/make_dataset.py makes one with the real tracer).

    \b
    Example:
      python benchmarks/make_dataset.py /tmp/hbds && hbtool evaluate /tmp/hbds
    """
    from ..analyzers.diagnosis import labelled_table
    from ..analyzers.evaluation import evaluate_table, repetitions
    from ..io import read_heartbeats
    from ..io.dataset import find_runs
    from .progress import progress

    skipped: list[str] = []
    runs = find_runs(dataset, skipped)
    warnings: list[str] = [f"{dataset}: {len(skipped)} folder{'s' if len(skipped) != 1 else ''} passed over: "
                           f"{', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''} (a label folder is "
                           f"named normal, memoryleak or shutdown)"] if skipped else []

    def labelled(bar):
        for lr in bar:
            tr = read_heartbeats(lr.path, stream=True)  # a tracer trace's beats stay in its file
            warnings.extend(tr.warnings)
            yield tr, lr.label, lr.thread_labels, {"benchmark": lr.benchmark}

    # evaluation.evaluate_runs in two steps, each with its bar on a terminal: reading the
    # traces and their features, then training and testing (most of the time)
    with progress(runs, "reading runs") as bar:
        table = labelled_table(labelled(bar))
    with progress(length=repetitions(table, repeats), label="training") as bar:
        results = evaluate_table(table, repeats=repeats, fraction=train_fraction, seed=seed,
                                 step=lambda: bar.update(1))
    warn(warnings)
    rows = []
    for r in results:
        rows.append({"benchmark": r.benchmark, **{f"n_{k}": v for k, v in r.sequences.items()},
                     "macro_f1": round(r.mean_f1, 4), "macro_f1_runs": [round(x, 4) for x in r.f1], "levels": r.levels,
                     "confusion": {t: {p: int(n) for p, n in row.items()} for t, row in r.confusion.iterrows()}})
    cols = ["benchmark", "n_normal", "n_memoryleak", "n_shutdown", "macro_f1", "macro_f1_runs", "levels"]
    overall = float(sum(r.mean_f1 for r in results) / len(results))
    extra = {"protocol": {"repeats": repeats, "train_fraction": train_fraction, "seed": seed,
                          "stratified": True}, "mean_macro_f1": overall}
    preamble = [f"{len(runs)} runs, {len(table)} thread sequences; stratified {train_fraction:.0%} train / "
                f"{1 - train_fraction:.0%} test, {repeats} repetitions (seed {seed})"]
    made = _dataset_description(dataset)
    if made:
        extra["dataset"] = made
        leak = made.get("leak_bytes_per_beat")
        preamble.append(
            f"data set: {made.get('maker', '?')}, seed {made.get('seed', '?')}, {made.get('threads', '?')} threads, "
            f"{made.get('beats', '?')} beats per thread"
            + "".join(f" (x{k} for {b})" for b, k in (made.get("beats_factor") or {}).items()
                      if isinstance(made.get("beats_factor"), dict))
            + (f", memory leak {leak / 2**20:g} MiB per beat" if isinstance(leak, (int, float)) else ""))
    preamble.append("")
    emit(fmt, rows, cols if fmt != "csv" else cols[:-2], key="benchmarks", extra=extra, preamble=preamble,
         headers={"macro_f1": "mean macro-F1", "macro_f1_runs": "per repetition"})
    if fmt == "text":
        for r in results:
            click.echo(f"\nconfusion matrix, {r.benchmark} (test sets of all repetitions; rows: truth)")
            click.echo(r.confusion.to_string())


def _dataset_description(dataset) -> dict:
    """What benchmarks/make_dataset.py wrote about the data set (dataset.json), if anything."""
    import json
    from pathlib import Path

    f = Path(dataset) / "dataset.json"
    try:
        doc = json.loads(f.read_text()) if f.is_file() and f.stat().st_size < 65536 else {}
    except (OSError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}
