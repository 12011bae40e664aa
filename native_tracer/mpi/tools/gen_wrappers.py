#!/usr/bin/env python3
"""gen_wrappers.py -- generate libhbprof's wrappers from a declarative list.

    gen_wrappers.py mpi   src/wrap_mpi.list   --header build/mpi.h.i -o build/wrap_mpi_1.gen.c --part 1/2
    gen_wrappers.py posix src/wrap_posix.list -o build/wrap_posix.gen.c

--part K/N writes the K-th of N files of about equal size (the wrappers in the
list's order, cut between functions; the tables below in the last): the MPI
wrappers are 25,000 lines, half a minute of gcc -O2 as one file, and make
compiles the parts at once.

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
    dims: tuple[str, ...] = ()      # an array of arrays: the inner dimensions ("[3]")

    def type_key(self) -> tuple[str, ...]:
        return self.type_tokens + self.dims

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
        if self.dims:   # int ranges[][3]: a pointer to arrays of 3
            return f"{t[:-1].rstrip()} (*{name}){''.join(self.dims)}"
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
    dims: list[str] = []
    while toks and toks[-1].startswith("["):
        dims.insert(0, "[" + toks.pop()[1:-1].strip() + "]")
    if not toks or any(t in "(){};," for t in toks):
        raise ListError(f"cannot parse the parameter '{text.strip()}'")
    name = None
    if len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) and toks[-1] not in TYPE_WORDS:
        name = toks.pop()
    # the first dimension decays to a pointer; inner ones stay part of the type
    return Param(tuple(toks) + (("*",) if dims else ()), name, tuple(dims[1:]))


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
    poll: bool = False               # time only, through the cheap polling path


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
    "abort": MpiClass(None, None),
    "time": MpiClass("HBP_INJ_MPI", None),
    "poll": MpiClass("HBP_INJ_MPI", None, poll=True),
    "local": MpiClass("HBP_INJ_MPI", None, poll=True),
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
        params = tuple(Param(p.type_tokens, p.name or f"p{i + 1}", p.dims) for i, p in enumerate(h.params))
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
    if e.cls == "abort" and not any(p.name == "errorcode" and p.type_key() == ("int",) for p in params):
        raise ListError(f"{e.name}: class abort needs its error code as an int parameter named errorcode")
    if e.cls == "boundary" and not any(p.name == "comm" and p.type_key() == ("MPI_Comm",) for p in params):
        raise ListError(f"{e.name}: a boundary needs its communicator as a parameter named comm; "
                        f"give the parameters in the list")
    return Prototype("int", params, False)


def gated(expr: str | None) -> str:
    """A byte count that counts only after a successful call."""
    return f"(rc == MPI_SUCCESS ? (uint64_t)({expr}) : 0u)" if expr else "0u"


def count_statement(e: Entry) -> str:
    """The counting call of e's class with its expressions filled in ("" for time-only classes)."""
    cls = MPI_CLASSES[e.cls]
    if not cls.call:
        return ""
    calls = e.fields.get("calls")
    return cls.call.format(
        calls=f"(uint64_t)({calls})" if calls else "1u", sent=gated(e.fields.get("sent")),
        received=gated(e.fields.get("received")), bytes=gated(e.fields.get("bytes")),
        code="HBP_COLL_" + e.name[4:].upper())


def wrapper_body(e: Entry, index: int | None, call: str, after_call: str = "", convert: str = "",
                 cleanup: str = "") -> str:
    """The statements of a wrapper of e around `call` (a statement that sets int rc).

    after_call: statements right after the call (the Fortran wrappers take rc from ierr);
    convert/cleanup: around the counting, while profiling (the Fortran wrappers' handle
    conversions). Start and finalize have no index."""
    cls = MPI_CLASSES[e.cls]
    if e.cls == "start":
        return (f"    {call}\n{after_call}    if (rc == MPI_SUCCESS) {{\n        hbp_beats_init();\n"
                f"        hbp_start();\n    }}\n")
    if e.cls == "finalize":
        return f"    hbp_finalize();   /* collective: every participating rank must join */\n    {call}\n{after_call}"
    if e.cls == "abort":
        return f"{convert.replace(8 * ' ', 4 * ' ')}    hbp_abort_seen(errorcode);\n    {call}\n{after_call}"
    # the beat (when on) is taken before the counting, inside the profiled call, so that
    # the tracer's work counts as MPI time and never as computation or I/O
    enter, leave = (f"hbp_poll_enter({index})", f"hbp_poll_leave(on, {index});") if cls.poll else \
        (f"hbp_enter({cls.family})", "hbp_leave();")
    body = (f"    int beat = hbp_beat_want({index});\n"
            f"    int on = {enter};\n"
            f"    uint64_t t0 = beat ? hbp_now_ns() : 0;\n"
            f"    {call}\n{after_call}"
            f"    if (beat)\n        hbp_beat_done({index}, (const void *)&{e.name}, t0);\n"
            f"    if (on) {{\n")
    stmt = count_statement(e)
    if stmt:
        body += convert + "        " + stmt + "\n" + cleanup
    return body + f"        {leave}\n    }}\n"


def emit_mpi(e: Entry, proto: Prototype, index: int | None) -> str:
    """The C wrapper of e; index: its number in the beat tables (None: start, finalize).
    A polling call or a pure local query gets a lean front (internal.h, hbp_lean_enter)
    that makes its unsampled calls with the least work, and the full wrapper behind it
    for the others."""
    params = ", ".join(p.decl(p.name) for p in proto.params) or "void"
    args = ", ".join(p.name for p in proto.params)
    full = wrapper_body(e, index, f"int rc = P{e.name}({args});") + "    return rc;\n}\n"
    if not has_lean_front(e):
        return f"HBP_EXPORT int {e.name}({params})\n{{\n" + full
    front = f"HBP_EXPORT int {e.name}({params})\n{{\n"
    if e.cls == "poll":
        front += (f"    int how = hbp_lean_enter({index}, 1);\n"
                  f"    if (__builtin_expect(how == 2, 1)) {{\n"
                  f"        int rc = P{e.name}({args});\n"
                  f"        hbp_tls.depth = 0;\n"
                  f"        return rc;\n    }}\n"
                  f"    if (how == 1)\n")
    else:
        front += f"    if (__builtin_expect(hbp_lean_enter({index}, 0), 1))\n"
    return (f"static __attribute__((noinline)) int hbp_full_{e.name}({params})\n{{\n" + full + front
            + f"        return P{e.name}({args});\n    return hbp_full_{e.name}({args});\n}}\n")


def beat_tables(beating: list[Entry], kinds: dict[str, str]) -> str:
    """The tables of beats.c: every function that can beat, by wrapper number; and every
    wrapped function with its kind (collective, p2p, polling, other)."""
    names = "".join(f'    "{e.name}",\n' for e in beating)
    coll = "".join(f"    {int(e.fields.get('beat') == 'collective')},   /* {e.name} */\n" for e in beating)
    kind = "".join(f"    HBP_KIND_{kinds[e.name].upper()},   /* {e.name} */\n" for e in beating)
    return (f"\n/* the functions HBTRACE_MPI_BEATS may name, by wrapper number */\n"
            f"const unsigned hbp_wrap_count = {len(beating)};\n"
            f"const char *const hbp_wrap_name[{len(beating)}] = {{\n{names}}};\n"
            f"/* 1: a blocking collective (beat=collective in the list), beats by default */\n"
            f"const unsigned char hbp_wrap_collective[{len(beating)}] = {{\n{coll}}};\n"
            f"/* what kind of call each is (docs: native_tracer/mpi/README.md) */\n"
            f"const unsigned char hbp_wrap_kind[{len(beating)}] = {{\n{kind}}};\n"
            f"unsigned char hbp_beat_on[{len(beating)}];\n"
            f"/* the sampled path (classes poll and local): calls so far, mean cost of the sampled */\n"
            f"uint32_t hbp_call_n[{len(beating)}];\n"
            f"double hbp_call_mean[{len(beating)}];\n")


# ---------------------------------------------------------------------------
# mpi: every function of the header

# Functions of mpi.h that are not wrapped, by rule (tests/test_mpi_wrappers.py holds the
# same reasons): they return no error code, or take variable arguments.
def not_wrapped(name: str, proto: Prototype) -> str | None:
    """Why the header's function `name` is not wrapped, or None if it is."""
    if re.search(r"_(c2f|f2c)$", name):
        return "a handle conversion between C and Fortran: local, a few ns (the profiler calls it itself)"
    if proto.ret != "int":
        return f"returns {proto.ret}, not an error code (MPI_Wtime, MPI_Wtick: local clock reads)"
    if proto.variadic:
        return "takes variable arguments (MPI_Pcontrol: a request to the profiler, costs nothing)"
    return None


_POLLING = r"Test|Testall|Testany|Testsome|Iprobe|Improbe|Request_get_status|Win_test"
_COLL_OPS = (r"Barrier|Bcast|Gatherv?|Scatterv?|Allgatherv?|Alltoall[vw]?|Reduce|Allreduce|Reduce_scatter"
             r"|Reduce_scatter_block|Scan|Exscan")
_COLLECTIVE = (rf"I?(?:{_COLL_OPS})|I?Neighbor_\w+|(?:{_COLL_OPS})_init|Comm_(?:create(?:_group|_from_group)?"
               r"|dup\w*|idup\w*"
               r"|split\w*|spawn\w*|accept|connect|disconnect|free)|Cart_(?:create|sub)|Graph_create"
               r"|Dist_graph_create\w*|Intercomm_(?:create|merge)|Win_(?:create|create_dynamic|allocate\w*|fence|free)"
               r"|File_(?:open|close|set_view|set_size|preallocate|set_atomicity|sync|set_info|\w+_all"
               r"|\w+_all_(?:begin|end)|\w+_ordered|\w+_ordered_(?:begin|end))|Finalize|Init|Init_thread")
_P2P = (r"I?[BSR]?send|I?recv|[BSR]?send_init|Recv_init|Sendrecv\w*|M?probe|I?mrecv|Start|Startall|Cancel"
        r"|Request_free|Wait|Waitall|Waitany|Waitsome|Buffer_(?:attach|detach)|Put|Get|Accumulate"
        r"|Get_accumulate|Fetch_and_op|Compare_and_swap|R(?:put|get|accumulate|get_accumulate)"
        r"|Win_(?:lock\w*|unlock\w*|flush\w*|sync|start|complete|post|wait)")


def mpi_kind(name: str) -> str:
    """collective, p2p (point-to-point, one-sided, completion), polling or other, by name
    (any case: the nonblocking forms are I + the name, Ialltoallv)."""
    short = name[4:]
    for kind, pat in (("polling", _POLLING), ("collective", _COLLECTIVE), ("p2p", _P2P)):
        if re.fullmatch(pat, short, re.IGNORECASE):
            return kind
    return "other"


# "other" functions whose cost depends on their data or on something outside the process:
# measured on every call, never estimated from samples
_OTHER_MEASURED = r"Pack|Unpack|Pack_external|Unpack_external|Reduce_local|Alloc_mem|Free_mem|Lookup_name" \
                  r"|Publish_name|Unpublish_name|Open_port|Close_port|Comm_join|Register_datarep"


# the local queries that only read the library's state and call nothing back (no
# callbacks, no progress, no I/O): the lean front of emit_mpi (tail call, no depth mark)
_PURE_QUERY = (r"(?:Comm|Group)_(?:rank|size|remote_size|compare|test_inter|translate_ranks)"
               r"|Comm_get_(?:attr|name|parent)|Cart_(?:coords|get|rank|shift)|Cartdim_get"
               r"|Graph_(?:get|neighbors|neighbors_count)|Graphdims_get|Dist_graph_neighbors(?:_count)?|Topo_test"
               r"|Type_(?:size|size_x|get_extent|get_extent_x|get_true_extent|get_true_extent_x|get_name"
               r"|get_envelope|get_attr)|Win_get_(?:attr|name)|Attr_get"
               r"|Get_(?:count|elements|elements_x|address|version|library_version|processor_name)"
               r"|Initialized|Finalized|Query_thread|Is_thread_main|Error_(?:class|string)"
               r"|Pack_size|Pack_external_size|Test_cancelled|Op_commutative")


def has_lean_front(e: Entry) -> bool:
    """A polling call or a pure local query, counting nothing but its time."""
    return not count_statement(e) and (
        e.cls == "poll" or (e.cls == "local" and re.fullmatch(_PURE_QUERY, e.name[4:]) is not None))


def auto_entry(name: str) -> Entry:
    """A header function the list does not name: time only. Polling calls take the sampled
    path (class poll), and so do the local queries and constructors of kind other (class
    local: MPI_Comm_rank, MPI_Type_size, MPI_Type_commit, ...: a few ns each, two clock
    reads would cost 20 times that); MPI-IO takes the injector's mpiio family."""
    kind = mpi_kind(name)
    if kind == "polling":
        cls = "poll"
    elif name.startswith("MPI_File_"):
        cls = "io_time"
    elif kind == "other" and not re.fullmatch(_OTHER_MEASURED, name[4:]):
        cls = "local"
    else:
        cls = "time"
    return Entry("mpi.h", name, cls, None, None, False, {})


def catalog(list_path: Path, header_text: str) -> tuple[list[Entry], dict[str, str], dict[str, Prototype]]:
    """(the wrapped functions: the list's lines, then every other function mpi.h declares,
    by name; {name: why it is not wrapped}; the header's prototypes)."""
    protos = {n: p for n, p in header_prototypes(header_text, "P?MPI_").items()}
    entries = parse_list(list_path, MPI_KEYS)
    listed = {e.name for e in entries}
    skipped: dict[str, str] = {}
    for name in sorted(n for n in protos if n.startswith("MPI_")):
        proto = protos[name]
        if name in listed or proto is None or "P" + name not in protos:
            continue   # check_mpi judges listed ones; the others fail loudly there when listed
        why = not_wrapped(name, proto)
        if why:
            skipped[name] = why
        else:
            entries.append(auto_entry(name))
    return entries, skipped, protos


def header_params(e: Entry, proto: Prototype) -> Prototype:
    """A header function's prototype with its parameters renamed p1, p2, ... (names the
    header gives could clash with the wrapper's own variables)."""
    return Prototype(proto.ret, tuple(Param(p.type_tokens, f"p{i + 1}", p.dims)
                                      for i, p in enumerate(proto.params)), proto.variadic)


def generate_mpi(list_path: Path, header_text: str, fortran_symbols: set[str] | None = None,
                 part: tuple[int, int] = (1, 1)) -> str:
    from gen_fortran import emit_fortran
    entries, skipped, protos = catalog(list_path, header_text)
    beating = [e for e in entries if MPI_CLASSES.get(e.cls, MPI_CLASSES["time"]).family is not None]
    index = {e.name: i for i, e in enumerate(beating)}
    kinds = {e.name: mpi_kind(e.name) for e in entries}
    fsyms = fortran_symbols or set()

    def emit(e: Entry) -> str:
        if e.where == "mpi.h":
            proto = check_mpi(Entry(e.where, e.name, e.cls, None, None, False, {}),
                              {e.name: header_params(e, protos[e.name]),
                               "P" + e.name: header_params(e, protos["P" + e.name])})
        else:
            proto = check_mpi(e, protos)
        text = emit_mpi(e, proto, index.get(e.name))
        return text + emit_fortran(e, proto, index.get(e.name), fsyms)

    text = render(list_path, entries, emit, "wrap_mpi.h", " and the installed mpi.h" +
                  (" and the Fortran libraries' symbols" if fsyms else ""), part)
    if part[0] != part[1]:
        return text
    not_w = "".join(f" *   {n}: {why}\n" for n, why in sorted(skipped.items()))
    return text + f"\n/*\n * Declared by mpi.h and not wrapped:\n{not_w} */\n" + beat_tables(beating, kinds)


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

def render(list_path: Path, entries: list[Entry], emit, include: str, also_from: str,
           part: tuple[int, int] = (1, 1)) -> str:
    """The generated file (or its part K of N): a notice, the include, one wrapper per entry;
    every error at once, whatever the part."""
    errors, out = [], []
    for e in entries:
        try:
            out.append(f"/* {e.name}: {e.cls} ({e.where}) */\n" + emit(e))
        except ListError as err:
            errors.append(f"{e.where}: {err}")
    if errors:
        raise ListError("\n".join(errors))
    k, n = part
    # contiguous slices of about equal size: part k starts at the first wrapper whose text
    # begins at or past (k-1)/n of the whole
    starts, size = [], 0
    for text in out:
        starts.append(size)
        size += len(text)
    first = next((i for i, at in enumerate(starts) if at * n >= size * (k - 1)), len(out))
    end = next((i for i, at in enumerate(starts) if at * n >= size * k), len(out)) if k < n else len(out)
    which = f"{len(entries)} wrappers" if n == 1 else \
        f"part {k} of {n}: wrappers {first + 1}-{end} of {len(entries)}"
    out = out[first:end]
    top = (f"/*\n * Generated by tools/gen_wrappers.py from src/{list_path.name}{also_from};\n"
           f" * do not edit. {which}.\n */\n"
           f'#include "{include}"\n\n'
           f"/* deprecated functions are wrapped too: programs still call them */\n"
           f'#pragma GCC diagnostic ignored "-Wdeprecated-declarations"\n\n')
    return top + "\n".join(out)


# ---------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["mpi", "posix"])
    ap.add_argument("list", type=Path)
    ap.add_argument("--header", type=Path, help="mpi: the preprocessed mpi.h (mpicc -E -P)")
    ap.add_argument("--fortran-symbols", type=Path,
                    help="mpi: the symbols the MPI Fortran libraries export (nm -D), one a line; Fortran "
                         "entry points are wrapped only where the library has them and their PMPI twins")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--part", default="1/1", metavar="K/N",
                    help="mpi: write the K-th of N files of about equal size (default: one file, 1/1)")
    args = ap.parse_args(argv)
    m = re.fullmatch(r"([1-9]\d*)/([1-9]\d*)", args.part)
    if not m or int(m.group(1)) > int(m.group(2)):
        ap.error(f"--part {args.part!r}: expected K/N with 1 <= K <= N")
    part = (int(m.group(1)), int(m.group(2)))
    if args.kind == "posix" and part != (1, 1):
        ap.error("--part goes with mpi")
    try:
        if args.kind == "mpi":
            if args.header is None:
                ap.error("mpi needs --header")
            syms = set(args.fortran_symbols.read_text().split()) if args.fortran_symbols else None
            text = generate_mpi(args.list, args.header.read_text(), syms, part)
        else:
            text = generate_posix(args.list)
    except (ListError, OSError) as e:
        print(f"gen_wrappers.py: {e}", file=sys.stderr)
        print(f"gen_wrappers.py: {args.output} not written", file=sys.stderr)
        return 1
    args.output.write_text(text)   # only once the whole text is made (make deletes a partial one)
    return 0


if __name__ == "__main__":
    # run as the module gen_wrappers, the one gen_fortran imports (one ListError, one table)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gen_wrappers
    sys.exit(gen_wrappers.main(sys.argv[1:]))
