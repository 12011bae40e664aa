"""Names for code addresses the tracer could not name at run time.

The tracer names a construct by `dladdr`, which sees only exported symbols: the
outlined functions of OpenMP regions (GCC's `resid._omp_fn.3`, clang's
`.omp_outlined.`) are local, so it writes `<object>+0x<offset>` instead. Offline,
the object's own symbol table (`.symtab`, when the binary is not stripped) names
them; pyelftools, the standard pure-Python ELF reader, reads it.

Untrusted input: the object path comes from the trace's metadata, so only a regular
file whose name matches the object the tracer saw is opened, at most
MAX_ELF_BYTES of it, and any parse error leaves the address as it is.
"""

from __future__ import annotations

import bisect
import os
from functools import lru_cache

#: largest object file read for its symbols
MAX_ELF_BYTES = 2 << 30
#: most function symbols kept per object
MAX_SYMBOLS = 2_000_000


@lru_cache(maxsize=16)
def _functions(path: str) -> tuple[list[int], list[int], list[str]] | None:
    """(starts, ends, names) of the function symbols of one ELF file, by start; None if unreadable."""
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
    except ImportError:
        return None
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_ELF_BYTES:
            return None
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            loads = [seg["p_vaddr"] for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
            base = (min(loads) & ~0xFFF) if loads else 0
            rows = []
            for name in (".symtab", ".dynsym"):
                table = elf.get_section_by_name(name)
                if table is None:
                    continue
                for sym in table.iter_symbols():
                    if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"] and sym.name:
                        rows.append((sym["st_value"] - base, sym["st_size"], sym.name))
                        if len(rows) >= MAX_SYMBOLS:
                            break
    except (OSError, ELFError, ValueError, KeyError, AttributeError):
        return None
    rows.sort()
    return [r[0] for r in rows], [r[0] + max(r[1], 1) for r in rows], [r[2] for r in rows]


def symbolize(address: str, exe: str | None) -> str | None:
    """The function holding `address` ("<object>+0x<offset>"), from the symbol table of the
    program `exe` when <object> is its file name; None when it cannot be told."""
    obj, sep, off = address.rpartition("+0x")
    if not sep or not exe or os.path.basename(exe) != obj:
        return None
    try:
        offset = int(off, 16)
    except ValueError:
        return None
    table = _functions(exe)
    if not table:
        return None
    starts, ends, names = table
    k = bisect.bisect_right(starts, offset) - 1
    if k >= 0 and offset < ends[k]:
        inside = offset - starts[k]  # two loops in one outlined function stay apart
        return names[k] + (f"+0x{inside:x}" if inside else "")
    return None
