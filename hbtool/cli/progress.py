"""A progress bar on stderr when stderr is a terminal; silent in pipelines.

Used by the commands that read many traces (features, train, diagnose, evaluate) and
by benchmarks/make_dataset.py."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click


class _Silent:
    """What a bar offers, doing nothing: iterate the items, update() counts nothing."""

    def __init__(self, items):
        self._items = items

    def __iter__(self):
        return iter(self._items)

    def update(self, n_steps: int = 1) -> None:
        pass


@contextmanager
def progress(items=None, label: str = "", length: int | None = None):
    """Wrap an iterable, or count `length` steps by calling `.update(1)` on what it yields:
    click's bar on a terminal, nothing otherwise (and nothing for a single step)."""
    items = list(items) if items is not None else None
    steps = len(items) if items is not None else length or 0
    if sys.stderr.isatty() and steps > 1:
        with click.progressbar(items, length=None if items is not None else length, label=label,
                               file=sys.stderr, show_pos=True) as bar:
            yield bar
    else:
        yield _Silent(items if items is not None else ())
