"""The house rules of docs/architecture.md, checked on the source so that they keep holding.

Data flows one way: io reads files into model, analyzers compute results from
model, the CLI renders them. model imports neither io nor analyzers; io and
analyzers never import each other; only the CLI imports the CLI.
"""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

PKG = ROOT / "hbtool"

#: package part -> parts of hbtool it must never import
FORBIDDEN = {
    "model": {"io", "analyzers", "cli", "kernels", "tracer"},
    "kernels": {"io", "analyzers", "cli", "model", "tracer"},
    "io": {"analyzers", "cli"},
    "analyzers": {"io", "cli", "tracer"},
    "config": {"io", "analyzers", "cli", "model", "kernels", "tracer"},
    "errors": {"io", "analyzers", "cli", "model", "kernels", "tracer", "config"},
}


def _part(module: str) -> str:
    """'hbtool.io.hbt' -> 'io'; 'hbtool.kernels' -> 'kernels'; 'hbtool' -> ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute hbtool module) of every import in a file, lazy ones inside functions too."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("hbtool")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("hbtool"):
                continue
            if node.module is None or mod in ("hbtool",):  # from . import x / from .. import config
                out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, mod))
    return out


def test_the_import_rules_hold():
    broken = []
    for f in sorted(PKG.rglob("*.py")):
        me = _part(_module_name(f))
        for line, mod in _imports(f):
            target = _part(mod)
            if target in FORBIDDEN.get(me, ()):
                broken.append(f"{f.relative_to(ROOT)}:{line} ({me}) imports {mod}")
    assert not broken, "imports against docs/architecture.md:\n" + "\n".join(broken)


def test_the_import_check_sees_relative_and_lazy_imports(tmp_path):
    """The checker itself: a lazy relative import from io into analyzers is found."""
    f = PKG / "io" / "hbt.py"
    found = {m for _, m in _imports(f)}
    assert "hbtool.model" in found and "hbtool.io.registry" in found
    g = PKG / "cli" / "diagnose.py"
    assert any(m.startswith("hbtool.analyzers.hsa") for _, m in _imports(g))  # a lazy import inside a function


def test_magic_bytes_are_spelled_once():
    """The magic numbers live in io/registry.py; readers take them from there."""
    spelled = re.compile(rb'b"(HBTRACE|HBPROF|PAR1|PK\\x03)')
    found = [str(f.relative_to(ROOT)) for f in PKG.rglob("*.py") if spelled.search(f.read_bytes())]
    assert found == ["hbtool/io/registry.py"], found


def test_every_registered_reader_has_the_one_signature():
    from hbtool.io import registry

    seen = set()
    for fmt in registry.FORMATS:
        module, func = fmt.reader.split(":")
        fn = getattr(__import__(f"hbtool.io.{module}", fromlist=[func]), func)
        params = list(inspect.signature(fn).parameters)
        assert params == ["path", "options"], (fmt.name, fmt.model, params)
        if fmt.writer:
            w = list(inspect.signature(registry._function(fmt.writer)).parameters)
            assert w[:2] in (["trace", "out"], ["model", "out"]), (fmt.name, w)
        assert fmt.magic or fmt.sniff or fmt.suffixes, fmt
        assert (fmt.name, fmt.model) not in seen, fmt
        seen.add((fmt.name, fmt.model))
    assert {f.model for f in registry.FORMATS} == set(registry.MODELS)


@pytest.mark.parametrize("model,content,suffix,name", [
    ("heartbeats", b"HBTRACE\0" + bytes(64), ".bin", "hbtrace"),
    ("heartbeats", b"PAR1....", ".dat", "parquet"),
    ("heartbeats", b"PK\x03\x04....", ".dat", "xlsx"),
    ("heartbeats", b"Beat ThreadNum Iter Timestamp\n1 0 0 100\n", ".log", "legacy"),
    ("heartbeats", b"t,thread\n0.1,0\n", ".dat", "csv"),
    ("heartbeats", b"\0\0\0", ".hbt", "hbtrace"),
    ("profile", b"HBPROF\0\0" + bytes(64), ".bin", "hbprof"),
    ("profile", b"rank,segment\n", ".csv", "segment-table"),
    ("queues", b"HBTRACE\0", ".x", "hbtrace"),
    ("queues", b"queue,t,count,blocked\n", ".csv", "sample-table"),
    ("probes", b"", ".hbt", "hbtrace"),
    ("status", b"HBTRACE\0", ".y", "hbtrace"),
])
def test_detect_by_magic_then_content_then_suffix(tmp_path, model, content, suffix, name):
    from hbtool.io.registry import detect

    p = tmp_path / f"f{suffix}"
    p.write_bytes(content)
    assert detect(p, model).name == name


def test_detect_refuses_what_no_format_claims(tmp_path):
    from hbtool.errors import UnknownFormatError
    from hbtool.io.registry import detect

    p = tmp_path / "x.bin"
    p.write_bytes(bytes(range(256)))
    for model in ("heartbeats", "profile", "queues", "probes", "status"):
        with pytest.raises(UnknownFormatError, match="unknown .* format"):
            detect(p, model)


# --------------------------------------------------------------------------- copied code

#: places where copies are findings; examples, tests and benchmarks may repeat a harness
PRODUCTION = ("hbtool/", "native_tracer/src/", "native_tracer/mpi/src/", "native_tracer/include/",
              "native_tracer/mpi/include/")
#: generated files (their generator is the one copy)
GENERATED = ("hbtool/tracer_names.py",)
#: pairs alike by design, and why
ALIKE = {
    ("hbtool/analyzers/behavior.py", "hbtool/analyzers/service_rate.py"):
        "settings dataclasses: one field per tunable of config.py, the same shape on purpose",
}


def test_no_copied_block_in_production_code():
    """`duplicates` (the workplace's copy finder) on the whole tree: no pair of places in
    production code shares six or more lines, beyond what it marks as boilerplate."""
    exe = shutil.which("duplicates")
    if exe is None:
        pytest.skip("the 'duplicates' command is not on this machine")
    r = subprocess.run([exe, "--repo", str(ROOT), "--most", "200", "--seconds", "300"], capture_output=True,
                       text=True, timeout=400)
    assert "incomplete:" not in r.stdout, r.stdout[-2000:]
    rows = []
    for line in r.stdout.splitlines():
        m = re.match(r"D\d+ (\S+?):\d+-\d+ ~ (\S+?):\d+-\d+(.*)", line)
        if not m or "boilerplate" in m.group(3):
            continue
        if tuple(sorted((m.group(1), m.group(2)))) in ALIKE or {m.group(1), m.group(2)} & set(GENERATED):
            continue
        if m.group(1).startswith(PRODUCTION) and m.group(2).startswith(PRODUCTION):
            rows.append(line)
    assert not rows, "copied blocks in production code:\n" + "\n".join(rows)


# --------------------------------------------------------------------------- names shared with C


def test_python_names_are_generated_from_the_c_tables():
    """hbtool/tracer_names.py is what scripts/gen_tracer_names.py makes of the .def tables now."""
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_tracer_names.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    from hbtool import tracer_names

    for table, path, macro in (("TRACER_ENV", "native_tracer/include/hbtrace_env.def", "HBT_ENV"),
                               ("PROFILER_ENV", "native_tracer/mpi/include/hbprof_env.def", "HBP_ENV")):
        in_c = re.findall(rf"^{macro}\((\w+),", (ROOT / path).read_text(), flags=re.M)
        assert list(getattr(tracer_names, table)) == in_c and len(in_c) >= 9
        assert all(getattr(tracer_names, n) == n for n in in_c)
    metrics = re.findall(r'^HBP_COUNTER\(\w+, "(\w+)"', (ROOT / "native_tracer/mpi/include/hbprof_counters.def")
                         .read_text(), flags=re.M)
    assert list(tracer_names.PROFILE_METRICS) == metrics and metrics[0] == "computation"


def test_no_hand_kept_environment_name_in_the_python_package():
    """The package takes HBTRACE_*/HBPROF_* names from tracer_names; only help texts may spell them."""
    spelled = re.compile(r'env(?:iron)?\[\s*"HB(?:TRACE|PROF)_|getenv\(\s*"HB(?:TRACE|PROF)_')
    found = [str(f.relative_to(ROOT)) for f in PKG.rglob("*.py") if spelled.search(f.read_text())]
    assert not found, found
