"""A labelled heartbeat data set: DATASET_DIR/<benchmark>/<label>/<run>/...

Each run directory is anything `read_heartbeats` reads as one run (tracer files, legacy
per-thread files). A `labels.json` beside the trace may give each thread its own label
({"threads": {"0": "normal", "2": "memoryleak"}}); else the `truth.json` that the example
programs write says which thread got which injection; otherwise every thread of the run
carries the run's directory label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import HbtoolError, reason

LABELS = ("normal", "memoryleak", "shutdown")


@dataclass(frozen=True)
class LabelledRun:
    benchmark: str
    label: str
    path: Path
    thread_labels: dict[int, str]


def find_runs(root: str | Path, skipped: list[str] | None = None) -> list[LabelledRun]:
    """Every run of a data set; the folders it passes over (a label it does not know) are
    appended to `skipped`."""
    root = Path(root)
    if not root.is_dir():
        raise HbtoolError(f"{root}: not a directory (expected DATASET_DIR/<benchmark>/<label>/<run>/)")
    runs = []
    for bench in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for label_dir in sorted(p for p in bench.iterdir() if p.is_dir()):
            label = label_dir.name.lower()
            if label not in LABELS:
                if skipped is not None:
                    skipped.append(f"{bench.name}/{label_dir.name}")
                continue
            for run in sorted(p for p in label_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
                runs.append(LabelledRun(bench.name, label, run, thread_labels(run)))
    if not runs:
        raise HbtoolError(
            f"{root}: no runs found: a data set is laid out DATASET_DIR/<benchmark>/<label>/<run>/ with "
            f"label one of {', '.join(LABELS)} (make one with benchmarks/make_dataset.py)"
        )
    return runs


def _labels_from_truth(f: Path) -> dict[int, str]:
    """Thread labels from an example program's truth.json (native_tracer/examples/README.md):
    the injected thread gets the anomaly; a shutdown that took the whole process down makes
    every thread's trace end early. Injections HSA has no class for give no labels."""
    try:
        doc = json.loads(f.read_text())
        n = int(doc["threads"])
        inject = doc.get("inject")
        thread = doc.get("thread")
        mode = (doc.get("params") or {}).get("shutdown_mode", "thread")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise HbtoolError(f"{f}: unreadable truth file ({reason(exc)})") from exc
    if not 0 < n <= 1 << 16:
        raise HbtoolError(f"{f}: unreadable truth file (threads = {n})")
    if inject in (None, "none") or doc.get("injected") is False:
        return {t: "normal" for t in range(n)}
    if inject == "leak" and isinstance(thread, int):
        return {t: ("memoryleak" if t == thread else "normal") for t in range(n)}
    if inject == "shutdown" and isinstance(thread, int):
        if mode != "thread":
            return {t: "shutdown" for t in range(n)}
        return {t: ("shutdown" if t == thread else "normal") for t in range(n)}
    return {}


def thread_labels(run: Path) -> dict[int, str]:
    """Per-thread labels of a run directory: labels.json, else the examples' truth.json, else none."""
    f = run / "labels.json"
    if not f.is_file():
        truth = run / "truth.json"
        return _labels_from_truth(truth) if truth.is_file() else {}
    try:
        doc = json.loads(f.read_text())
        threads = doc.get("threads", {})
        return {int(k): str(v) for k, v in threads.items() if str(v) in LABELS}
    except (ValueError, AttributeError, TypeError, RecursionError) as exc:
        raise HbtoolError(f"{f}: unreadable labels file ({reason(exc)})") from exc
