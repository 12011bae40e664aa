"""The one output module: --format text|json|csv for every analysis command."""

from __future__ import annotations

import csv
import json
import math
import sys

import click

from .. import __version__, config

FORMATS = ("text", "json", "csv")


def output_options(f):
    """Add --format text|json|csv to a command (passed as `fmt`)."""
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
        help="text: a table for people; json: stable, documented (docs/json.md); csv: one row per item.",
    )(f)


#: the running command's warnings, said when it ends (hbtool.cli.main): on stderr, or, when the
#: command then fails, counted in its one error line
_pending: list[str] = []


def warn(lines) -> None:
    """Reader and analyzer warnings: shown on stderr when the command ends (show_warnings)."""
    _pending.extend(lines)


def show_warnings() -> None:
    """The pending warnings on stderr, summarised past a cap."""
    lines = take_warnings()
    for line in lines[: config.MAX_WARNINGS_SHOWN * 2]:
        click.echo(f"hbtool: warning: {line}", err=True)
    if len(lines) > config.MAX_WARNINGS_SHOWN * 2:
        click.echo(f"hbtool: warning: ... and {len(lines) - config.MAX_WARNINGS_SHOWN * 2} more", err=True)


def take_warnings() -> list[str]:
    """The pending warnings, no longer pending."""
    lines = list(_pending)
    _pending.clear()
    return lines


def _clean(v):
    """JSON-safe plain Python values (NaN -> null, numpy scalars -> Python)."""
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    return v


def _text_cell(v, decimals: int | None = None) -> str:
    v = _clean(v)
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if decimals is not None and isinstance(v, (int, float)):
        return f"{v:.{decimals}f}"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e5 or abs(v) < 1e-3:
            return f"{v:.4g}"
        return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:.1f}"
    if isinstance(v, list):
        return ",".join(str(x) for x in v) or "-"
    return str(v)


def render_table(rows: list[dict], columns: list[str], headers: dict[str, str] | None = None,
                 decimals: dict[str, int] | None = None) -> str:
    headers, decimals = headers or {}, decimals or {}
    cells = [[_text_cell(r.get(c), decimals.get(c)) for c in columns] for r in rows]
    titles = [headers.get(c, c) for c in columns]
    widths = [max([len(t)] + [len(row[i]) for row in cells]) for i, t in enumerate(titles)]
    lines = ["  ".join(t.ljust(w) for t, w in zip(titles, widths)).rstrip()]
    for row in cells:
        lines.append("  ".join(
            (c.rjust(w) if _is_num(c) else c.ljust(w)) for c, w in zip(row, widths)
        ).rstrip())
    return "\n".join(lines)


def _is_num(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def rounded(rows: list[dict], decimals: dict[str, int]) -> list[dict]:
    """`rows` with the float values of the columns in `decimals` rounded to that many decimals
    and two more: what the text shows, and the next two digits for programs that compare."""
    if not decimals:
        return rows
    out = []
    for r in rows:
        r = dict(r)
        for c, d in decimals.items():
            v = _clean(r.get(c))
            if isinstance(v, float):
                r[c] = round(v, d + 2)
        out.append(r)
    return out


def emit(fmt: str, rows: list[dict], columns: list[str], key: str, extra: dict | None = None,
         preamble: list[str] | None = None, headers: dict[str, str] | None = None,
         decimals: dict[str, int] | None = None, footer: list[str] | None = None) -> None:
    """Print `rows` in `fmt`.

    json: {"hbtool_version": ..., **extra, key: rows}; csv: `columns` of rows;
    text: the `preamble` lines, an aligned table, then the `footer` lines. Values of the
    columns in `decimals` are shown with exactly that many decimals in text, and rounded
    to two more in json and csv (not to 16 digits of noise).
    """
    out = sys.stdout
    if fmt != "text":
        rows = rounded(rows, decimals or {})
    if fmt == "json":
        doc = {"hbtool_version": __version__}
        doc.update(_clean(extra or {}))
        doc[key] = [_clean(r) for r in rows]
        json.dump(doc, out, indent=2)
        out.write("\n")
    elif fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([
                ";".join(map(str, v)) if isinstance(v, list) else ("" if _clean(v) is None else _clean(v))
                for v in (r.get(c) for c in columns)
            ])
    else:
        for line in preamble or []:
            out.write(line + "\n")
        out.write(render_table(rows, columns, headers, decimals) + "\n")
        for line in footer or []:
            out.write(line + "\n")
