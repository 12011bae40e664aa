"""A labelled heartbeat data set: DATASET_DIR/<benchmark>/<label>/<run>/...

Each run directory is anything `read_heartbeats` reads as one run (tracer files, legacy
per-thread files). A `labels.json` beside the trace may give each thread its own label
({"threads": {"0": "normal", "2": "memoryleak"}}); otherwise every thread of the run
carries the run's directory label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import HbtoolError

LABELS = ("normal", "memoryleak", "shutdown")


@dataclass(frozen=True)
class LabelledRun:
    benchmark: str
    label: str
    path: Path
    thread_labels: dict[int, str]


def find_runs(root: str | Path) -> list[LabelledRun]:
    root = Path(root)
    if not root.is_dir():
        raise HbtoolError(f"{root}: not a directory (expected DATASET_DIR/<benchmark>/<label>/<run>/)")
    runs = []
    for bench in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for label_dir in sorted(p for p in bench.iterdir() if p.is_dir()):
            label = label_dir.name.lower()
            if label not in LABELS:
                continue
            for run in sorted(p for p in label_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
                runs.append(LabelledRun(bench.name, label, run, _thread_labels(run)))
    if not runs:
        raise HbtoolError(
            f"{root}: no runs found: a data set is laid out DATASET_DIR/<benchmark>/<label>/<run>/ with "
            f"label one of {', '.join(LABELS)} (make one with benchmarks/make_dataset.py)"
        )
    return runs


def _thread_labels(run: Path) -> dict[int, str]:
    f = run / "labels.json"
    if not f.is_file():
        return {}
    try:
        doc = json.loads(f.read_text())
        threads = doc.get("threads", {})
        return {int(k): str(v) for k, v in threads.items() if str(v) in LABELS}
    except (ValueError, AttributeError, TypeError) as exc:
        raise HbtoolError(f"{f}: unreadable labels file ({exc})") from exc
