#!/usr/bin/env python3
"""gen_wrappers.py -- generate libhbprof's wrappers from a declarative list.

    gen_wrappers.py mpi   src/wrap_mpi.list   --header build/mpi.h.i -o build/wrap_mpi.gen.c
    gen_wrappers.py posix src/wrap_posix.list -o build/wrap_posix.gen.c

mpi: every line of the list names an MPI function and its class (see the
list's own comment). The prototype comes from the installed mpi.h, given as
its preprocessed text (`mpicc -E -P`): a listed function that the header
does not declare (or whose PMPI_ twin it does not declare), that does not
return int, that is variadic, or whose parameters in the list differ from
the header's in number or type, stops the build with a message that names
the list line and shows both prototypes. The wrappers are then sure to match
the header, and a list of every function the header declares is one `time`
line per function away.

posix: every line names a libc function, the metric it counts in and its
prototype (the compiler compares it with the libc headers, since the
generated file declares each prototype before its definition).

mpi, heartbeats: `beat=collective` on a line marks a blocking collective.
Every MPI wrapper but start/finalize gets a number; the generated file ends
with the tables beats.c reads (hbp_wrap_name, hbp_wrap_collective): the
functions HBTRACE_MPI_BEATS may name, and the ones that beat by default.

The output says at its top that it is generated, and depends only on the
list and the header text (no timestamps, no paths of the build machine).
Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path


class ListError(Exception):
    """A problem with the list or a disagreement with the header."""


# ---------------------------------------------------------------------------
# C declarations: a small parser for prototypes, enough for mpi.h and libc

TYPE_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "_Bool",
              "const", "volatile", "struct", "union", "enum"}
QUALIFIERS_DROPPED = {"restrict", "__restrict", "__restrict__", "extern"}
TOKEN = re.compile(r"\.\.\.|[A-Za-z_]\w*|\[[^\]]*\]|\S")


@dataclass(frozen=True)
class Param:
    type_tokens: tuple[str, ...]    # without the name; an array is a trailing "*"
    name: str | None

    def type_key(self) -> tuple[str, ...]:
        return self.type_tokens

    def type_text(self) -> str:
        s = ""
        for tok in self.type_tokens:
            if tok == "*":
                s += "*" if s.endswith("*") else " *"
            else:
                s += (" " if s else "") + tok
        return s

    def decl(self, name: str) -> str:
        t = self.type_text()
        return f"{t}{name}" if t.endswith("*") else f"{t} {name}"


@dataclass(frozen=True)
class Prototype:
    ret: str
    params: tuple[Param, ...]
    variadic: bool

    def signature(self) -> str:
        inner = ", ".join(p.decl(p.name or "") for p in self.params) + (", ..." if self.variadic else "")
        return f"{self.ret} ({inner or 'void'})"


def strip_attributes(text: str) -> str:
    """Remove __attribute__((...)), __asm__(...) and __extension__ (balanced parentheses)."""
    out, i = [], 0
    pat = re.compile(r"\b(__attribute__|__asm__|__asm|asm)\s*\(")
    while True:
        m = pat.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        depth, j = 0, m.end() - 1
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        i = j
    return re.sub(r"\b__extension__\b", " ", "".join(out))


def split_top(text: str, sep: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_param(text: str) -> Param:
    toks = [t for t in TOKEN.findall(text) if t not in QUALIFIERS_DROPPED]
    arrays = 0
    while toks and toks[-1].startswith("["):
        toks.pop()
        arrays += 1
    if not toks or any(t in "(){};," for t in toks):
        raise ListError(f"cannot parse the parameter '{text.strip()}'")
    name = None
    if len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) and toks[-1] not in TYPE_WORDS:
        name = toks.pop()
    return Param(tuple(toks) + ("*",) * arrays, name)


def parse_params(text: str) -> tuple[tuple[Param, ...], bool]:
    items = [p.strip() for p in split_top(text, ",")]
    if items == [""] or items == ["void"]:
        return (), False
    variadic = items[-1] == "..."
    if variadic:
        items.pop()
    return tuple(parse_param(p) for p in items), variadic


def header_prototypes(text: str, prefix: str) -> dict[str, Prototype | None]:
    """Every function declaration of the preprocessed text whose name starts with prefix
    (None: declared in a form this parser does not understand, e.g. a function-pointer parameter)."""
    decl = re.compile(r"^(?P<ret>[A-Za-z_][\w\s\*]*?)\s*\b(?P<name>" + prefix + r"\w+)\s*\((?P<params>.*)\)$", re.S)
    found: dict[str, Prototype | None] = {}
    for stmt in split_top(strip_attributes(text), ";"):
        stmt = " ".join(stmt.split())
        m = decl.match(stmt)
        if not m or "typedef" in m.group("ret").split() or "{" in stmt:
            continue
        ret = " ".join(t for t in TOKEN.findall(m.group("ret")) if t not in QUALIFIERS_DROPPED | {"static", "inline"})
        try:
            params, variadic = parse_params(m.group("params"))
        except ListError:
            found[m.group("name")] = None
            continue
        found[m.group("name")] = Prototype(ret, params, variadic)
    return found


# ---------------------------------------------------------------------------
# the list

@dataclass
class Entry:
    where: str                      # "file:line"
    name: str
    cls: str
    ret: str | None                 # posix: the return type
    params: tuple[Param, ...] | None
    variadic: bool
    fields: dict[str, str] = field(default_factory=dict)


def take_parens(text: str) -> tuple[str, str]:
    """text starts with '(': (inside, rest after the closing parenthesis)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return text[1:i], text[i + 1:]
    raise ListError("unbalanced parentheses")


def parse_list(path: Path, keys: set[str]) -> list[Entry]:
    entries, seen = [], {}
    key_pat = re.compile(r"(?:^|\s)(" + "|".join(sorted(keys)) + r")=(?!=)")
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path.name}:{no}"
        try:
            m = re.match(r"([A-Za-z_]\w*)\s+([a-z_0-9]+)\s*(.*)$", line)
            if not m:
                raise ListError("expected: NAME CLASS [RETURN-TYPE] [(PARAMETERS)] [KEY=EXPRESSION ...]")
            name, cls, rest = m.groups()
            ret, params, variadic = None, None, False
            if "(" in rest.split("=", 1)[0]:
                head, _, tail = rest.partition("(")
                ret = head.strip() or None
                inside, rest = take_parens("(" + tail)
                params, variadic = parse_params(inside)
            rest = rest.strip()
            fields: dict[str, str] = {}
            parts = key_pat.split(rest)
            if parts[0].strip():
                raise ListError(f"unexpected '{parts[0].strip()}' (keys: {', '.join(sorted(keys))})")
            for k, v in zip(parts[1::2], parts[2::2]):
                if k in fields:
                    raise ListError(f"{k}= given twice")
                if not v.strip():
                    raise ListError(f"{k}= without an expression")
                fields[k] = v.strip()
            if name in seen:
                raise ListError(f"{name} is listed twice (first at {seen[name]})")
            seen[name] = where
            entries.append(Entry(where, name, cls, ret, params, variadic, fields))
        except ListError as e:
            raise ListError(f"{where}: {e}") from None
    return entries


# ---------------------------------------------------------------------------
# mpi

@dataclass(frozen=True)
class MpiClass:
    family: str | None               # HBP_INJ_*; None: start/finalize
    call: str | None                 # the counting statement, or None (time only)
    keys: frozenset[str] = frozenset()


def _count(metric: str) -> MpiClass:
    return MpiClass("HBP_INJ_MPI", f"hbp_count_mpi({metric}, {{calls}}, {{sent}}, {{received}});",
                    frozenset({"calls", "sent", "received"}))


def _io(metric: str, bytes_metric: str | None = None) -> MpiClass:
    if bytes_metric is None:
        return MpiClass("HBP_INJ_MPIIO", f"hbp_add({metric}, 1);")
    return MpiClass("HBP_INJ_MPIIO", f"hbp_count_mpiio({metric}, {bytes_metric}, {{bytes}});",
                    frozenset({"bytes"}))


MPI_CLASSES = {
    "start": MpiClass(None, None),
    "finalize": MpiClass(None, None),
    "time": MpiClass("HBP_INJ_MPI", None),
    "p2p_blocking": _count("HBP_M_P2P_BLOCKING"),
    "p2p_nonblocking": _count("HBP_M_P2P_NONBLOCKING"),
    "one_to_all": _count("HBP_M_COLL_ONE_TO_ALL"),
    "all_to_one": _count("HBP_M_COLL_ALL_TO_ONE"),
    "all_to_all": _count("HBP_M_COLL_ALL_TO_ALL"),
    "boundary": MpiClass("HBP_INJ_MPI", "hbp_boundary({code}, comm, rc, {sent}, {received});",
                         frozenset({"sent", "received"})),
    "io_time": MpiClass("HBP_INJ_MPIIO", None),
    "io_open": _io("HBP_M_MPIIO_OPEN"),
    "io_close": _io("HBP_M_MPIIO_CLOSE"),
    "io_read": _io("HBP_M_MPIIO_READ", "HBP_M_MPIIO_READ_BYTES"),
    "io_write": _io("HBP_M_MPIIO_WRITE", "HBP_M_MPIIO_WRITE_BYTES"),
}
MPI_KEYS = {"calls", "sent", "received", "bytes", "beat"}
BEAT_KINDS = {"collective"}         # beat=: the values it takes
RESERVED = {"rc", "r"}


def check_mpi(e: Entry, protos: dict[str, Prototype | None]) -> Prototype:
    """The prototype to emit for entry e, checked against the header."""
    if not e.name.startswith("MPI_"):
        raise ListError(f"{e.name}: an MPI function name starts with MPI_")
    cls = MPI_CLASSES.get(e.cls)
    if cls is None:
        raise ListError(f"{e.name}: unknown class '{e.cls}' (known: {', '.join(MPI_CLASSES)})")
    bad = set(e.fields) - cls.keys - {"beat"}
    if bad:
        raise ListError(f"{e.name}: class {e.cls} takes no {', '.join(sorted(bad))}=")
    h, ph = protos.get(e.name), protos.get("P" + e.name)
    unparsed = [n for n in (e.name, "P" + e.name) if n in protos and protos[n] is None]
    if unparsed:
        raise ListError(f"{e.name}: mpi.h declares {' and '.join(unparsed)} in a form gen_wrappers.py cannot "
                        f"parse; teach parse_param() that form before listing it")
    if h is None or ph is None:
        missing = " and ".join(n for n, p in ((e.name, h), ("P" + e.name, ph)) if p is None)
        raise ListError(f"{e.name}: mpi.h does not declare {missing}; remove the line, or build with the MPI "
                        f"it was written for (MPICC=...)")
    if h.ret != "int" or h.variadic or [p.type_key() for p in h.params] != [p.type_key() for p in ph.params]:
        raise ListError(f"{e.name}: mpi.h declares {e.name} as {h.signature()} and P{e.name} as "
                        f"{ph.signature()}; only non-variadic int functions with an identical PMPI_ twin "
                        f"can be wrapped")
    if "beat" in e.fields and (e.fields["beat"] not in BEAT_KINDS or cls.family is None):
        raise ListError(f"{e.name}: beat= takes {', '.join(sorted(BEAT_KINDS))}, on a class other than "
                        f"start and finalize")
    if e.ret not in (None, "int"):
        raise ListError(f"{e.name}: an MPI function returns int, the list says {e.ret}")
    if e.params is None:
        params = tuple(Param(p.type_tokens, p.name or f"p{i + 1}") for i, p in enumerate(h.params))
    else:
        if e.variadic or [p.type_key() for p in e.params] != [p.type_key() for p in h.params]:
            listed = Prototype("int", e.params, e.variadic)
            raise ListError(f"{e.name}: the list says {listed.signature()}, mpi.h declares "
                            f"{h.signature()}; make the list agree with the header")
        if any(p.name is None for p in e.params):
            raise ListError(f"{e.name}: every listed parameter needs a name")
        params = e.params
    names = [p.name for p in params]
    if RESERVED & set(names) or len(set(names)) != len(names):
        raise ListError(f"{e.name}: parameter names must be distinct and not {', '.join(sorted(RESERVED))}")
    if e.cls == "boundary" and not any(p.name == "comm" and p.type_key() == ("MPI_Comm",) for p in params):
        raise ListError(f"{e.name}: a boundary needs its communicator as a parameter named comm; "
                        f"give the parameters in the list")
    return Prototype("int", params, False)


def gated(expr: str | None) -> str:
    """A byte count that counts only after a successful call."""
    return f"(rc == MPI_SUCCESS ? (uint64_t)({expr}) : 0u)" if expr else "0u"


def emit_mpi(e: Entry, proto: Prototype, index: int | None) -> str:
    """The wrapper of e; index: its number in the beat tables (None: start, finalize)."""
    cls = MPI_CLASSES[e.cls]
    params = ", ".join(p.decl(p.name) for p in proto.params) or "void"
    args = ", ".join(p.name for p in proto.params)
    real = f"P{e.name}({args})"
    head = f"HBP_EXPORT int {e.name}({params})\n{{\n"
    if e.cls == "start":
        return head + f"    int rc = {real};\n    if (rc == MPI_SUCCESS) {{\n        hbp_beats_init();\n" \
                      f"        hbp_start();\n    }}\n    return rc;\n}}\n"
    if e.cls == "finalize":
        return head + f"    hbp_finalize();   /* collective: every participating rank must join */\n" \
                      f"    return {real};\n}}\n"
    # the beat (when on) is taken before the counting, inside the profiled call, so that
    # the tracer's work counts as MPI time and never as computation or I/O
    body = (f"    int beat = hbp_beat_want({index});\n"
            f"    int on = hbp_enter({cls.family});\n"
            f"    uint64_t t0 = beat ? hbp_now_ns() : 0;\n"
            f"    int rc = {real};\n"
            f"    if (beat)\n        hbp_beat_done({index}, (const void *)&{e.name}, t0);\n"
            f"    if (on) {{\n")
    if cls.call:
        calls = e.fields.get("calls")
        body += "        " + cls.call.format(
            calls=f"(uint64_t)({calls})" if calls else "1u", sent=gated(e.fields.get("sent")),
            received=gated(e.fields.get("received")), bytes=gated(e.fields.get("bytes")),
            code="HBP_COLL_" + e.name[4:].upper()) + "\n"
    return head + body + "        hbp_leave();\n    }\n    return rc;\n}\n"


def beat_tables(beating: list[Entry]) -> str:
    """The tables of beats.c: every function that can beat, by wrapper number."""
    names = "".join(f'    "{e.name}",\n' for e in beating)
    coll = "".join(f"    {int(e.fields.get('beat') == 'collective')},   /* {e.name} */\n" for e in beating)
    return (f"\n/* the functions HBTRACE_MPI_BEATS may name, by wrapper number */\n"
            f"const unsigned hbp_wrap_count = {len(beating)};\n"
            f"const char *const hbp_wrap_name[{len(beating)}] = {{\n{names}}};\n"
            f"/* 1: a blocking collective (beat=collective in the list), beats by default */\n"
            f"const unsigned char hbp_wrap_collective[{len(beating)}] = {{\n{coll}}};\n"
            f"unsigned char hbp_beat_on[{len(beating)}];\n")


def generate_mpi(list_path: Path, header_text: str) -> str:
    protos = header_prototypes(header_text, "P?MPI_")
    entries = parse_list(list_path, MPI_KEYS)
    beating = [e for e in entries if MPI_CLASSES.get(e.cls, MPI_CLASSES["time"]).family is not None]
    index = {e.name: i for i, e in enumerate(beating)}
    text = render(list_path, entries, lambda e: emit_mpi(e, check_mpi(e, protos), index.get(e.name)),
                  "wrap_mpi.h", " and the installed mpi.h")
    return text + beat_tables(beating)


# ---------------------------------------------------------------------------
# posix

POSIX_METRICS = {   # metric: (calls, bytes, default bytes expression)
    "open": ("HBP_M_POSIX_OPEN", "HBP_M_POSIX_OPEN", None),
    "close": ("HBP_M_POSIX_CLOSE", "HBP_M_POSIX_CLOSE", None),
    "read": ("HBP_M_POSIX_READ", "HBP_M_POSIX_READ_BYTES", "r"),
    "write": ("HBP_M_POSIX_WRITE", "HBP_M_POSIX_WRITE_BYTES", "r"),
}
POSIX_KEYS = {"fallback", "missing", "bytes", "vararg"}
POSIX_RESERVED = {"r", "real", "real_p", "on", "ap"}


def emit_posix(e: Entry) -> str:
    if e.cls not in POSIX_METRICS:
        raise ListError(f"{e.name}: unknown metric '{e.cls}' (known: {', '.join(POSIX_METRICS)})")
    m_calls, m_bytes, default_bytes = POSIX_METRICS[e.cls]
    if e.params is None or not e.ret:
        raise ListError(f"{e.name}: give the return type and the parameters")
    if ("fallback" in e.fields) == ("missing" in e.fields):
        raise ListError(f"{e.name}: say what happens without a real function: fallback= or missing=")
    if "bytes" in e.fields and default_bytes is None:
        raise ListError(f"{e.name}: {e.cls} counts no bytes")
    if e.variadic != ("vararg" in e.fields) or not e.params:
        raise ListError(f"{e.name}: a variadic function needs vararg= (and only it)")
    names = [p.name for p in e.params]
    if None in names or POSIX_RESERVED & set(names) or len(set(names)) != len(names):
        raise ListError(f"{e.name}: parameters need distinct names, not {', '.join(sorted(POSIX_RESERVED))}")
    ret = Param(tuple(TOKEN.findall(e.ret)), None)
    params = ", ".join(p.decl(p.name) for p in e.params) + (", ..." if e.variadic else "")
    args = list(names)
    lines = [f"{ret.decl(e.name)}({params});", f"HBP_EXPORT {ret.decl(e.name)}({params})", "{"]
    if e.variadic:
        var = re.match(r"[\w\s\*]*?(\w+)\s*=", e.fields["vararg"])
        if not var:
            raise ListError(f"{e.name}: vararg= must declare and set one variable")
        args.append(var.group(1))
        lines += ["    va_list ap;", f"    va_start(ap, {names[-1]});", f"    {e.fields['vararg']};", "    va_end(ap);"]
    lines += ["    static void *real_p;",
              f"    __typeof__(&{e.name}) real = (__typeof__(&{e.name}))hbp_resolve(&real_p, \"{e.name}\");"]
    call = f"real({', '.join(args)})"
    if "missing" in e.fields:
        lines += ["    if (!real) {", "        errno = ENOSYS;", f"        return {e.fields['missing']};", "    }"]
    else:
        call = f"real ? {call} : ({ret.type_text()}){e.fields['fallback']}"
    bytes_expr = e.fields.get("bytes", default_bytes)
    counted = f"(long long)({bytes_expr})" if bytes_expr else "0"
    lines += ["    int on = hbp_enter(HBP_INJ_POSIX);", f"    {ret.decl('r')} = {call};", "    if (on)",
              f"        hbp_posix_done({m_calls}, {m_bytes}, {counted}, errno);", "    return r;", "}"]
    return "\n".join(lines) + "\n"


def generate_posix(list_path: Path) -> str:
    return render(list_path, parse_list(list_path, POSIX_KEYS), emit_posix, "wrap_posix.h", "")


# ---------------------------------------------------------------------------

def render(list_path: Path, entries: list[Entry], emit, include: str, also_from: str) -> str:
    """The generated file: a notice, the include, one wrapper per entry; every error at once."""
    errors, out = [], []
    for e in entries:
        try:
            out.append(f"/* {e.name}: {e.cls} ({e.where}) */\n" + emit(e))
        except ListError as err:
            errors.append(f"{e.where}: {err}")
    if errors:
        raise ListError("\n".join(errors))
    top = (f"/*\n * Generated by tools/gen_wrappers.py from src/{list_path.name}{also_from};\n"
           f" * do not edit. {len(entries)} wrappers.\n */\n"
           f'#include "{include}"\n\n')
    return top + "\n".join(out)


# ---------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["mpi", "posix"])
    ap.add_argument("list", type=Path)
    ap.add_argument("--header", type=Path, help="mpi: the preprocessed mpi.h (mpicc -E -P)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        if args.kind == "mpi":
            if args.header is None:
                ap.error("mpi needs --header")
            text = generate_mpi(args.list, args.header.read_text())
        else:
            text = generate_posix(args.list)
    except (ListError, OSError) as e:
        print(f"gen_wrappers.py: {e}", file=sys.stderr)
        print(f"gen_wrappers.py: {args.output} not written", file=sys.stderr)
        return 1
    args.output.write_text(text)   # only once the whole text is made (make deletes a partial one)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
