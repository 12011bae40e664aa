"""Addresses the tracer could not name are named from the program's own symbol table."""

from __future__ import annotations

import subprocess

import pytest

from hbtool.io.symbols import symbolize

SRC = r"""
static int __attribute__((noinline)) hidden_work(int x) { return x * 3 + 1; }
int main(int argc, char **argv) { (void)argv; return hidden_work(argc) == 4 ? 0 : 1; }
"""


@pytest.mark.parametrize("pie", ["-pie", "-no-pie"])
def test_a_local_function_is_named_from_the_symbol_table(tmp_path, pie):
    (tmp_path / "p.c").write_text(SRC)
    exe = tmp_path / "prog"
    subprocess.run(["gcc", "-O1", "-fPIE" if pie == "-pie" else "-fno-pie", pie, str(tmp_path / "p.c"), "-o",
                    str(exe)], check=True)
    nm = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    addr = next(int(line.split()[0], 16) for line in nm.splitlines() if line.endswith(" hidden_work"))
    # the tracer writes the offset from where the object is loaded: 0 for PIE, 0x400000 for a fixed address
    base = 0 if pie == "-pie" else 0x400000
    assert symbolize(f"prog+0x{addr - base:x}", str(exe)) == "hidden_work"
    assert symbolize(f"prog+0x{addr - base + 2:x}", str(exe)) == "hidden_work+0x2"
    assert symbolize(f"other+0x{addr - base:x}", str(exe)) is None  # not the program's object
    assert symbolize("prog+0xzz", str(exe)) is None
    (tmp_path / "junk").write_bytes(b"\x7fELF" + b"\0" * 100)
    assert symbolize("junk+0x10", str(tmp_path / "junk")) is None  # a broken ELF is not an error
