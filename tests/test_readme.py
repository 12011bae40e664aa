"""The README's Python examples run as written, and print what their comments say."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re

from conftest import ROOT


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_python_examples_print_what_they_say():
    blocks = _python_blocks()
    assert blocks, "the README has no Python example"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for block in blocks:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, "README.md", "exec"), {})
            printed = out.getvalue().splitlines()
            said = [ast.literal_eval(m) for m in re.findall(r"print\(.*\)\s+# (.+)$", block, flags=re.M)]
            assert [ast.literal_eval(x) for x in printed] == said, (printed, said)
    finally:
        os.chdir(cwd)
