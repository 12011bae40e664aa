"""One registry of every input format: what it holds, how it is recognised, who reads it.

Each :class:`Format` names the data model it gives (``heartbeats``, ``profile``,
``queues``, ``probes``, ``status``), its magic bytes and suffixes, an optional
content check for formats with no magic, an optional check for run directories,
and its reader as ``"module:function"`` (imported only when used, so that
``hbtool --help`` stays fast). Every reader has one signature::

    reader(path: pathlib.Path, options: ReadOptions) -> the model

:func:`detect` picks the format of a path for a model: for a directory, the first
format whose directory check says yes; for a file, magic bytes first, then content
checks, then the suffix, each in registration order. :func:`read` detects, reads,
and turns a parser's low-level error into one :class:`TraceFormatError` line.
``-`` is standard input, for every model and every format known by its content: it
is copied to a temporary file (at most ``config.MAX_STDIN_BYTES``) that is detected
and read like any other file, and the model then names it ``stdin``.

A new format: write its reader in a module of this package, then add one
``register(Format(...))`` line below (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Callable

from .. import config
from ..errors import HbtoolError, InputNotFoundError, TraceFormatError, UnknownFormatError, reason

#: magic bytes at the start of each binary format (the C headers are the source of truth)
MAGIC_HBTRACE = b"HBTRACE\0"   # native_tracer/include/hbtrace_format.h
MAGIC_HBPROF = b"HBPROF\0\0"   # native_tracer/mpi/include/hbprof_format.h
MAGIC_PARQUET = b"PAR1"
MAGIC_ZIP = b"PK\x03\x04"      # xlsx workbooks are zip archives

#: bytes read from the start of a file to recognise it
HEAD_BYTES = 4096

#: the data models, and what a user calls each in a message
MODELS = {"heartbeats": "heartbeat trace", "profile": "segment profile", "queues": "queue samples",
          "probes": "probe statistics", "status": "machine status"}


@dataclass(frozen=True)
class ReadOptions:
    """What a user may tell a reader about its input; each reader uses what applies."""

    item_size: int | None = None   # queue sample tables and traces: bytes per item
    period: float | None = None    # queue sample tables: the first sample's period (s)
    stream: bool = False           # heartbeats: a reader that can may leave the beats in the file
                                   # (hbtool.model.StreamedTrace), for summaries in bounded memory


@dataclass(frozen=True)
class Format:
    name: str
    model: str
    reader: str                                   # "module:function" in hbtool.io
    description: str
    suffixes: tuple[str, ...] = ()
    magic: tuple[bytes, ...] = ()
    sniff: Callable[[bytes], bool] | None = None  # content check for a file with no magic
    directory: Callable[[Path], bool] | None = None
    writer: str | None = None                     # "module:function(model, out) -> paths written"
    write_suffixes: tuple[str, ...] = ()          # output names the writer is picked by

    def read(self, path: Path, options: ReadOptions):
        return _function(self.reader)(path, options)

    def write(self, model, out: str) -> list[str]:
        return _function(self.writer)(model, out)


def _function(spec: str):
    module, func = spec.split(":")
    return getattr(import_module(f"{__package__}.{module}"), func)


FORMATS: list[Format] = []


def register(fmt: Format) -> Format:
    if fmt.model not in MODELS:
        raise ValueError(f"format {fmt.name}: unknown model {fmt.model!r}")
    FORMATS.append(fmt)
    return fmt


def formats(model: str) -> list[Format]:
    return [f for f in FORMATS if f.model == model]


def writer(model: str, name: str | None = None, suffix: str | None = None) -> Format | None:
    """The format that writes `model` under this name (csv, xlsx, hbt, ...) or output suffix, if any."""
    for f in formats(model):
        if f.writer and (name is not None and (f.name == name or f".{name}" in f.write_suffixes)
                         or suffix is not None and suffix.lower() in f.write_suffixes):
            return f
    return None


def head(path: Path, n: int = HEAD_BYTES) -> bytes:
    """The first `n` bytes of a file (a CLI-ready error when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        raise HbtoolError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def written_end(fh, size: int) -> int:
    """Where the written bytes of the open file `fh` of `size` bytes end: `size`, less a hole at
    its end (a file grown by ftruncate or `truncate -s` and not written there: zeros that reading
    would only turn into memory and time). Filesystems that do not report holes count every
    byte as written. Leaves the file position at 0."""
    fd, end, pos = fh.fileno(), 0, 0
    try:
        while pos < size:
            pos = os.lseek(fd, os.lseek(fd, pos, os.SEEK_DATA), os.SEEK_HOLE)
            end = pos
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data after pos; anything else: holes not reported
            end = size
    fh.seek(0)
    return min(end, size)


def first_hole(path: Path) -> tuple[int, int]:
    """(where the file's first hole begins, its size): a hole is a range never written, read as
    zeros; the size when it has none (or the filesystem does not say)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            return min(os.lseek(fh.fileno(), 0, os.SEEK_HOLE), size), size
        except OSError:
            return size, size


def refuse_holes(path: Path, what: str) -> None:
    """A file of a text or zip format with a hole is no such file (their writers write every
    byte): say so before a parser reads gigabytes of zeros."""
    hole, size = first_hole(path)
    if hole < size:
        raise TraceFormatError(f"{path}: a sparse file of {size} bytes, never written from byte {hole} on "
                               f"(truncate -s or a crash leaves such holes): not {what}")


def _known(model: str) -> str:
    descr = [f.description for f in formats(model)]
    return descr[0] if len(descr) == 1 else "; ".join(descr[:-1]) + "; or " + descr[-1]


def detect(path: str | os.PathLike, model: str) -> Format:
    """The registered format of `path` for `model` (raises UnknownFormatError, InputNotFoundError)."""
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError(f"{path}: no such file or directory")
    cands = formats(model)
    if not p.is_dir() and not p.is_file():
        raise UnknownFormatError(f"{path}: not a regular file (a pipe, socket or device): give a trace file, or "
                                 f"pipe the trace into '-'")
    if p.is_dir():
        for f in cands:
            if f.directory is not None and f.directory(p):
                return f
        raise UnknownFormatError(f"{path}: this directory holds no {MODELS[model]} hbtool knows (expected "
                                 f"{_known(model)})")
    h = head(p)
    for f in cands:
        if any(h.startswith(m) for m in f.magic):
            return f
    for f in cands:
        if f.sniff is not None and f.sniff(h):
            return f
    suffix = p.suffix.lower()
    for f in cands:
        if suffix in f.suffixes:
            return f
    raise UnknownFormatError(f"{path}: unknown {MODELS[model]} format (expected {_known(model)}): "
                             f"see docs/formats.md")


def read(path: str | os.PathLike, model: str, options: ReadOptions | None = None):
    """Detect the format of `path` and read it into `model`'s data model (the string '-':
    standard input; Path('-') is a file of that name)."""
    if not (isinstance(path, str) and path == STDIN):
        return _read(Path(path), model, options or ReadOptions())
    with stdin_file() as tmp:
        try:
            return _relabel(_read(tmp, model, options or ReadOptions()), tmp)
        except HbtoolError as exc:
            raise type(exc)(_unspool(str(exc), tmp)) from exc


def _read(path: Path, model: str, options: ReadOptions):
    fmt = detect(path, model)
    try:
        return fmt.read(path, options)
    except HbtoolError:
        raise
    except (UnicodeDecodeError, ValueError, KeyError, IndexError) as exc:
        # a format-specific parser choked on malformed content
        raise TraceFormatError(f"{path}: unreadable {fmt.name} file ({reason(exc)})") from exc
    except OSError as exc:
        raise HbtoolError(f"{path}: cannot read ({exc.strerror or exc})") from exc


# --------------------------------------------------------------------------- standard input

#: the path that means standard input, and what a model and a message call it
STDIN = "-"
STDIN_NAME = "stdin"


@contextlib.contextmanager
def stdin_file():
    """Standard input copied to a temporary file named `stdin` (readers take paths, and
    detection needs the first bytes); removed on exit. Traces are untrusted input: more
    than config.MAX_STDIN_BYTES is refused, and the copy never holds more than a block in
    memory."""
    src = getattr(sys.stdin, "buffer", sys.stdin)
    if src is None:
        raise InputNotFoundError(f"{STDIN_NAME}: there is no standard input to read a trace from")
    with contextlib.suppress(AttributeError, OSError, ValueError):
        if src.isatty():
            raise InputNotFoundError(f"{STDIN_NAME}: '-' reads a trace from standard input, which is a terminal: "
                                     f"pipe a trace into hbtool, or give a file")
    with tempfile.TemporaryDirectory(prefix="hbtool-stdin-") as d:
        tmp = Path(d) / STDIN_NAME
        size = 0
        with open(tmp, "wb") as out:
            while block := src.read(1 << 20):
                if isinstance(block, str):   # a text stream with no bytes underneath
                    block = block.encode()
                size += len(block)
                if size > config.MAX_STDIN_BYTES:
                    raise HbtoolError(f"{STDIN_NAME}: standard input holds more than {_size(config.MAX_STDIN_BYTES)}, "
                                      f"the most hbtool copies from it: give the trace as a file instead")
                out.write(block)
        if size == 0:
            raise UnknownFormatError(f"{STDIN_NAME}: standard input is empty "
                                     f"(pipe a trace into hbtool, or give a file)")
        yield tmp


def _size(n: int) -> str:
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} bytes"


def _unspool(text: str, tmp: Path) -> str:
    """`text` naming standard input where it names the temporary file or its folder."""
    return text.replace(str(tmp), STDIN_NAME).replace(str(tmp.parent), STDIN_NAME)


def _relabel(model, tmp: Path):
    """Name standard input instead of the temporary file `tmp` in a model's metadata and warnings."""
    def fix(v):
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        if isinstance(v, str):
            return _unspool(v, tmp)
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    for name, value in vars(model).items():
        if isinstance(value, (str, os.PathLike, dict, list)):
            setattr(model, name, fix(value))
    return model


# --------------------------------------------------------------------------- content checks


def _has_hbtrace_files(d: Path) -> bool:
    from .hbt import run_files

    return bool(run_files(d))


def _has_legacy_files(d: Path) -> bool:
    from .legacy import legacy_files

    return bool(legacy_files(d))


def _has_profiles(d: Path) -> bool:
    return any(f.is_file() for f in d.glob("*.hbp"))


def _legacy_text(h: bytes) -> bool:
    from .legacy import looks_like_legacy_text

    return looks_like_legacy_text(h)


def _csv_text(h: bytes) -> bool:
    return b"\0" not in h and b"," in h.split(b"\n", 1)[0]


# --------------------------------------------------------------------------- the formats

_TRACE = "an hbtrace file (.hbt) or the run directory 'hbtool record -o DIR' wrote"

register(Format("hbtrace", "heartbeats", "hbt:read_heartbeat_trace", _TRACE,
                suffixes=(".hbt",), magic=(MAGIC_HBTRACE,), directory=_has_hbtrace_files, writer="hbt:write_hbt",
                write_suffixes=(".hbt",)))
register(Format("parquet", "heartbeats", "tabular:read_parquet", "a parquet table (.parquet)",
                suffixes=(".parquet", ".pq"), magic=(MAGIC_PARQUET,), writer="tabular:write_parquet",
                write_suffixes=(".parquet", ".pq")))
register(Format("xlsx", "heartbeats", "tabular:read_xlsx", "an xlsx workbook (long format, or legacy per-thread)",
                suffixes=(".xlsx", ".xlsm"), magic=(MAGIC_ZIP,), writer="tabular:write_xlsx",
                write_suffixes=(".xlsx",)))
register(Format("legacy", "heartbeats", "legacy:read_legacy_path",
                "legacy per-thread heartbeat text files (or a directory of them)",
                sniff=_legacy_text, directory=_has_legacy_files))
register(Format("csv", "heartbeats", "tabular:read_csv", "a csv table (.csv)",
                suffixes=(".csv", ".txt", ".tsv"), sniff=_csv_text, writer="tabular:write_csv",
                write_suffixes=(".csv",)))

register(Format("hbprof", "profile", "hbprof:read_profile_path",
                "a profile of the PMPI profiler (.hbp) or a directory of them",
                suffixes=(".hbp",), magic=(MAGIC_HBPROF,), directory=_has_profiles))
register(Format("segment-table", "profile", "segment_table:read_segment_table",
                "a segment table (.csv or .parquet: rank, segment, duration_ns, computation, features...)",
                suffixes=(".csv", ".parquet", ".txt"), magic=(MAGIC_PARQUET,)))

register(Format("hbtrace", "queues", "instruments:read_queue_trace", _TRACE,
                suffixes=(".hbt",), magic=(MAGIC_HBTRACE,), directory=_has_hbtrace_files))
register(Format("sample-table", "queues", "queues:read_sample_table",
                "a sample table (.csv or .parquet with columns queue, t, count, blocked)",
                suffixes=(".parquet", ".pq", ".csv", ".txt"), magic=(MAGIC_PARQUET,)))

register(Format("hbtrace", "probes", "instruments:read_probe_trace", _TRACE,
                suffixes=(".hbt",), magic=(MAGIC_HBTRACE,), directory=_has_hbtrace_files))
register(Format("hbtrace", "status", "instruments:read_status_trace", _TRACE,
                suffixes=(".hbt",), magic=(MAGIC_HBTRACE,), directory=_has_hbtrace_files))
