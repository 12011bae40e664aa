"""The trained HSA model: a small human-readable JSON file (read and write)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .. import __version__
from ..errors import HbtoolError, reason
from ..model.heartbeats import PER_ITERATION
from ..model.hsa import FEATURES, LATER_FEATURES, MAX_REFERENCE_BEATS, MODEL_FORMAT, MODEL_VERSION, FeatureSettings, HsaModel

MAX_WORK_THREADS = 4096
MAX_UNIT_CONSTRUCTS, MAX_NAME_CHARS = 65536, 1024
MAX_MODEL_BYTES = 8 << 20  # room for a stored reference of MAX_REFERENCE_BEATS beats


class ModelFormatError(HbtoolError):
    """A model file that is not a model, or from an incompatible version."""


def model_document(model: HsaModel) -> dict:
    """The model as the JSON document write_model stores (docs/formats.md)."""
    return {
        "format": MODEL_FORMAT,
        "model_version": MODEL_VERSION,
        "hbtool_version": __version__,
        "level": model.level,
        "margin": model.margin,
        "expected_beats": model.expected_beats,
        "lifecycle_rule": model.lifecycle_rule,
        "ranges": {k: [lo, hi] for k, (lo, hi) in model.ranges.items()},
        "settings": model.settings.to_dict(),
        "training": model.training,
        "reference": ({str(k): [int(x) for x in t] for k, t in sorted(model.reference.items())}
                      if model.reference else None),
        "work": ({str(k): round(float(v), 6) for k, v in sorted(model.work.items())} if model.work else None),
        "retained": ({str(k): int(v) for k, v in sorted(model.retained.items())} if model.retained else None),
        "team_work": ({str(k): round(float(v), 6) for k, v in sorted(model.team_work.items())}
                      if model.team_work else None),
        "units": ({k: round(float(v), 1) for k, v in sorted(model.units.items())} if model.units else None),
        "team_share": ({str(k): round(float(v), 6) for k, v in sorted(model.team_share.items())}
                       if model.team_share else None),
    }


def write_model(model: HsaModel, path: str | os.PathLike) -> None:
    text = json.dumps(model_document(model), indent=2, allow_nan=False) + "\n"
    tmp = f"{path}.tmp{os.getpid()}"
    Path(tmp).write_text(text)
    os.replace(tmp, path)


def _num(v, what: str, path) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ModelFormatError(f"{path}: {what} is not a finite number ({v!r}): the model file is damaged; train it again")
    return float(v)


def read_model(path: str | os.PathLike) -> HsaModel:
    p = Path(path)
    if not p.is_file():
        raise ModelFormatError(f"{path}: no such model file (make one with 'hbtool train')")
    if p.stat().st_size > MAX_MODEL_BYTES:
        raise ModelFormatError(f"{path}: {p.stat().st_size} bytes is far too large for a model file")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, or nested past Python's stack
        raise ModelFormatError(f"{path}: not a model file (not JSON: {reason(exc)})") from exc
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise ModelFormatError(f"{path}: not an hbtool model (no \"format\": \"{MODEL_FORMAT}\"); make one with 'hbtool train'")
    ver = doc.get("model_version")
    if ver != MODEL_VERSION:
        raise ModelFormatError(
            f"{path}: model version {ver!r} from hbtool {doc.get('hbtool_version', '?')}; this hbtool reads "
            f"version {MODEL_VERSION}: train the model again with this hbtool"
        )
    ranges_doc = doc.get("ranges")
    if not isinstance(ranges_doc, dict):
        raise ModelFormatError(f"{path}: the model has no \"ranges\" object: train it again")
    ranges = {}
    for f in FEATURES:
        r = ranges_doc.get(f)
        if r is None and f in LATER_FEATURES:
            r = [None, None]
        if not isinstance(r, list) or len(r) != 2:
            raise ModelFormatError(f"{path}: range of {f} is missing or not [low, high]: train the model again")
        lo, hi = _num(r[0], f"the low end of {f}", path), _num(r[1], f"the high end of {f}", path)
        if lo is not None and hi is not None and lo > hi:
            raise ModelFormatError(f"{path}: range of {f} is empty ({lo} > {hi}): train the model again")
        ranges[f] = (lo, hi)
    settings = doc.get("settings", {})
    if not isinstance(settings, dict):
        raise ModelFormatError(f"{path}: \"settings\" is not an object: train the model again")
    try:
        st = FeatureSettings.from_dict(settings)
        for name, v in st.to_dict().items():
            least, most = (0, 1) if name == "r2_target" else (0, 1_000_000) if name in ("band", "lb_radius") \
                else (1, 1_000_000)  # windows and counts: a window of 0 beats is no window
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not least <= v <= most):
                raise ValueError(f"{name}={v!r}")
            if name != "r2_target" and isinstance(v, float):
                # windows, counts and radii are whole numbers (they index arrays)
                if not v.is_integer():
                    raise ValueError(f"{name}={v!r} is not a whole number")
                setattr(st, name, int(v))
    except (TypeError, ValueError) as exc:
        raise ModelFormatError(f"{path}: bad feature settings ({reason(exc)}): train the model again") from exc
    reference = _reference(doc.get("reference"), path)
    work = _work(doc.get("work"), path)
    retained = _work(doc.get("retained"), path, "bytes retained", 2.0**60)
    team_work = _work(doc.get("team_work"), path, "work against the team's", 1e6)
    team_share = _work(doc.get("team_share"), path, "share of the team's units", 1e6)
    units = _units(doc.get("units"), path)
    level = doc.get("level")
    margin = doc.get("margin")
    return HsaModel(
        ranges=ranges,
        level=float(level) if isinstance(level, (int, float)) else float("nan"),
        margin=float(margin) if isinstance(margin, (int, float)) else 0.0,
        settings=st,
        expected_beats=_num(doc.get("expected_beats"), "expected_beats", path),
        lifecycle_rule=bool(doc.get("lifecycle_rule", True)),
        training=doc.get("training", {}) if isinstance(doc.get("training"), dict) else {},
        reference=reference,
        work=work,
        retained=retained,
        team_work=team_work,
        units=units,
        team_share=team_share,
    )


def _work(doc, path, what: str = "work", most: float = 1e9) -> dict[int, float] | None:
    """The stored work per thread: {"<thread>": seconds} (or another number per thread, at
    most `most`), at most MAX_WORK_THREADS of them."""
    if doc is None:
        return None
    bad = f"{path}: the stored {what} per thread is damaged"
    if not isinstance(doc, dict) or len(doc) > MAX_WORK_THREADS:
        raise ModelFormatError(f"{bad}: not an object of at most {MAX_WORK_THREADS} threads; train the model again")
    out = {}
    for k, v in doc.items():
        if not (isinstance(k, str) and k.isdigit() and len(k) <= 6) or isinstance(v, bool) \
                or not isinstance(v, (int, float)) or not 0 <= v <= most:
            raise ModelFormatError(f"{bad} at {k!r}: train the model again")
        out[int(k)] = float(v)
    return out or None


def _units(doc, path) -> dict[str, float] | None:
    """The stored units per construct: {"<construct name>": ns}, at most MAX_UNIT_CONSTRUCTS,
    names of at most MAX_NAME_CHARS characters, each unit at most a day (a loop measured per
    iteration: ps, a day in ps)."""
    if doc is None:
        return None
    bad = f"{path}: the stored units per construct are damaged"
    if not isinstance(doc, dict) or len(doc) > MAX_UNIT_CONSTRUCTS:
        raise ModelFormatError(f"{bad}: not an object of at most {MAX_UNIT_CONSTRUCTS} constructs; train the model "
                               f"again")
    out = {}
    for k, v in doc.items():
        if not isinstance(k, str) or not 0 < len(k) <= MAX_NAME_CHARS or isinstance(v, bool) \
                or not isinstance(v, (int, float)) or not 0 < v <= 86400e9 * (1000 if k.endswith(PER_ITERATION) else 1):
            raise ModelFormatError(f"{bad} at {k[:80]!r}: train the model again")
        out[k] = float(v)
    return out or None


def _reference(doc, path) -> dict[int, list[int]] | None:
    """The stored reference: {"<thread>": [t_ns, ...]} with non-decreasing times, capped."""
    if doc is None:
        return None
    bad = f"{path}: the stored reference is damaged"
    if not isinstance(doc, dict) or len(doc) > 100_000:
        raise ModelFormatError(f"{bad} (not an object of threads): train the model again")
    out, total = {}, 0
    for k, times in doc.items():
        try:
            thread = int(k)
        except ValueError:
            raise ModelFormatError(f"{bad} (thread {k!r} is not a number): train the model again") from None
        if not isinstance(times, list) or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**62
                                                  for x in times):
            raise ModelFormatError(f"{bad} (thread {k}: times are not whole nanoseconds): train the model again")
        if any(b < a for a, b in zip(times, times[1:])):
            raise ModelFormatError(f"{bad} (thread {k}: times go backwards): train the model again")
        total += len(times)
        if total > MAX_REFERENCE_BEATS:
            raise ModelFormatError(f"{bad} (more than {MAX_REFERENCE_BEATS} beats): train the model again")
        out[thread] = times
    return out or None
