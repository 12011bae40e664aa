"""The evaluation protocol of seed 000 4.2 (SPEC 4): per benchmark, a stratified random
30 % of the sequences train, the rest test, three repetitions with fixed seeds; mean
macro-F1 over normal/memoryleak/shutdown, and the summed confusion matrix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .diagnosis import labelled_table
from .hsa import STATUSES, classify, confusion, macro_f1, train


@dataclass
class BenchmarkResult:
    benchmark: str
    sequences: dict[str, int]
    f1: list[float]
    levels: list[float]
    confusion: pd.DataFrame

    @property
    def mean_f1(self) -> float:
        return float(np.mean(self.f1)) if self.f1 else float("nan")


def stratified_split(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of the training rows: `fraction` of each label (at least one of each)."""
    train_mask = np.zeros(len(labels), dtype=bool)
    for lab in np.unique(labels):
        idx = np.flatnonzero(labels == lab)
        k = max(1, int(round(fraction * idx.size))) if idx.size > 1 else idx.size
        train_mask[rng.choice(idx, size=k, replace=False)] = True
    return train_mask


def evaluate_table(table: pd.DataFrame, repeats: int = 3, fraction: float = 0.3, seed: int = 0,
                   settings=None, step=None) -> list[BenchmarkResult]:
    """`table`: a features table with `benchmark` and `label` columns, one row per sequence.
    `step`, if given, is called with no argument after each repetition (of
    `repetitions(table, repeats)`), e.g. to move a progress bar: training is most of the time."""
    results = []
    for bench, sub in table.groupby("benchmark", sort=True):
        sub = sub.reset_index(drop=True)
        labels = sub["label"].to_numpy(dtype=object)
        f1s, levels, conf = [], [], None
        for rep in range(repeats):
            rng = np.random.default_rng([seed, rep])
            tr = stratified_split(labels, fraction, rng)
            model = train(sub[tr], labels[tr], settings)
            pred = classify(sub[~tr], model)["status"].to_numpy()
            f1s.append(macro_f1(labels[~tr], pred))
            levels.append(model.level)
            c = confusion(labels[~tr], pred)
            conf = c if conf is None else conf + c
            if step is not None:
                step()
        counts = {s: int(np.sum(labels == s)) for s in STATUSES}
        results.append(BenchmarkResult(str(bench), counts, f1s, levels, conf))
    return results


def repetitions(table: pd.DataFrame, repeats: int = 3) -> int:
    """How many train-and-test repetitions evaluate_table makes of `table`."""
    return int(table["benchmark"].nunique()) * repeats


def evaluate_runs(labelled, repeats: int = 3, fraction: float = 0.3, seed: int = 0,
                  settings=None) -> tuple[list[BenchmarkResult], pd.DataFrame]:
    """The whole protocol over labelled traces (diagnosis.labelled_table; each must carry a
    `benchmark` column): the results per benchmark and the features table they came from."""
    table = labelled_table(labelled, settings)
    return evaluate_table(table, repeats=repeats, fraction=fraction, seed=seed, settings=settings), table
