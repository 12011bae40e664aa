"""The Python record layout and docs/formats.md match the C header (sizeof/offsetof)."""

import json
import re
import subprocess

import pytest

from hbtool.io import hbt

from conftest import ROOT, TRACER

STRUCTS = {
    "hbt_file_header": hbt.header_dtype(),
    "hbt_chunk_header": hbt.chunk_header_dtype(),
    "hbt_record": hbt.record_dtype(),
}


@pytest.fixture(scope="module")
def layout(tracer_built):
    out = subprocess.run([str(TRACER / "bin" / "hbt_layout")], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("struct", list(STRUCTS))
def test_python_dtype_matches_c(layout, struct):
    dt = STRUCTS[struct]
    c = layout[struct]
    assert dt.itemsize == c["size"]
    assert {name: dt.fields[name][1] for name in dt.names} == c["fields"]


def test_constants_match_c(layout):
    k = layout["constants"]
    assert k["HBT_VERSION"] == hbt.VERSION
    assert k["HBT_ENDIAN_MARK"] == hbt.ENDIAN_MARK
    assert k["HBT_SLOT_SIZE"] == hbt.SLOT_SIZE
    assert k["HBT_HEADER_SIZE"] == hbt.HEADER_SIZE
    assert k["HBT_CHUNK_MAGIC"] == hbt.CHUNK_MAGIC
    assert k["HBT_DATA_OFFSET"] == hbt.DATA_OFFSET
    assert k["HBT_META_CAPACITY"] == hbt.META_CAPACITY
    assert k["HBT_CHUNK_SIZE"] == hbt.CHUNK_SIZE
    assert k["HBT_REC_BEAT"] == hbt.REC_BEAT
    for code, name in hbt.REC_KINDS.items():
        assert k["HBT_REC_" + name.upper()] == code
    for code, name in hbt.MONITOR_KINDS.items():
        assert k["HBT_REC_" + name.upper()] == code
    from hbtool.model import BEHAVIORS, MONITOR_MODES

    c_names = {"running": "RUNNING", "busy-waiting": "BUSY_WAITING", "conditional-waiting": "COND_WAITING",
               "exited": "EXITED", "failed": "FAILED"}
    assert [k["HBT_BHV_" + c_names[b]] for b in BEHAVIORS] == list(range(len(BEHAVIORS)))
    assert {k["HBT_MON_CENTRAL"]: "central", k["HBT_MON_RING"]: "ring"} == MONITOR_MODES
    assert k["HBT_FLAG_PRELOAD"] == hbt.FLAG_PRELOAD and k["HBT_FLAG_CONVERTED"] == hbt.FLAG_CONVERTED
    from hbtool.io import instruments

    assert (k["HBT_QFLAG_BLOCKED"], k["HBT_QFLAG_FINAL"], k["HBT_QFLAG_STAGE_BLOCKED"]) == (
        instruments.QFLAG_BLOCKED, instruments.QFLAG_FINAL, instruments.QFLAG_STAGE_BLOCKED)


def _doc_tables():
    """(struct -> {field: (offset, size)}) from the tables of docs/formats.md."""
    text = (ROOT / "docs" / "formats.md").read_text()
    out = {}
    for struct in STRUCTS:
        m = re.search(rf"\(`struct {struct}`.*?\n\n(.*?)\n\n", text, re.S)
        assert m, f"docs/formats.md has no table for struct {struct}"
        rows = {}
        for line in m.group(1).splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[3]] = (int(cells[0]), int(cells[1]))
        out[struct] = rows
    return out


@pytest.mark.parametrize("struct", list(STRUCTS))
def test_docs_mirror_the_header(layout, struct):
    doc = _doc_tables()[struct]
    dt = STRUCTS[struct]
    assert {f: off for f, (off, _) in doc.items()} == layout[struct]["fields"]
    assert {f: size for f, (_, size) in doc.items()} == {n: dt.fields[n][0].itemsize for n in dt.names}
    assert sum(size for _, size in doc.values()) == layout[struct]["size"]
