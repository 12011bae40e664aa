"""A progress bar on stderr when stderr is a terminal; silent in pipelines."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click


@contextmanager
def progress(items, label: str):
    """Wrap an iterable: click's bar on a terminal, the plain iterable otherwise."""
    items = list(items)
    if sys.stderr.isatty() and len(items) > 1:
        with click.progressbar(items, label=label, file=sys.stderr, show_pos=True) as bar:
            yield bar
    else:
        yield items
