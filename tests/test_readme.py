"""The README's Python examples run as written, and print what their comments say."""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
from pathlib import Path

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


# --------------------------------------------------------------------------- shell commands

#: commands that end as the README says they do, not with 0
EXIT_STATUS = {
    "hbtool record -o trace -- native_tracer/examples/bin/pi_pthread": 128 + 11,  # the program dies by SIGSEGV
    "hbtool record --mpi -o crashed -- mpirun": 128 + 11,   # rank 1 dies by SIGSEGV, mpirun says 139
}
#: what the tour's commands need beside them, linked into the folder they run in
LINKED = ("sample_traces", "native_tracer", "benchmarks")


def shell_commands() -> list[tuple[int, str]]:
    """(line, command) of every shell command in the README's ```sh blocks: the lines after a
    `$ ` prompt where a block shows output, else every line; `\\` continues a command. The
    set-up commands (bash scripts/...) are what CI runs, so they are not run again here."""
    lines = (ROOT / "README.md").read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            i += 1
            continue
        j = lines.index("```", i + 1)
        block = list(enumerate(lines[i + 1:j], start=i + 2))
        prompted = any(t.startswith("$ ") for _, t in block)
        k = 0
        while k < len(block):
            n, t = block[k]
            if prompted and not t.startswith("$ ") or not t.strip():
                k += 1
                continue
            cmd = t[2:] if prompted else t
            while cmd.endswith("\\") and k + 1 < len(block):
                k += 1
                cmd = cmd[:-1] + " " + block[k][1].strip()
            if not cmd.startswith("bash scripts/"):
                out.append((n, cmd.strip()))
            k += 1
        i = j + 1
    return out


def test_the_readme_shows_commands():
    cmds = [c for _, c in shell_commands()]
    assert len(cmds) >= 25
    assert any(c.startswith("hbtool record --mpi") for c in cmds)
    assert not any(c.startswith("bash scripts/") for c in cmds)


def run_readme_commands(folder: Path, bin_dir: Path) -> list[str]:
    """Run each README command, in order, in `folder` (which gets links to the checkout's
    sample traces, tracer and benchmarks), with `bin_dir`'s hbtool first on PATH; returns
    what failed, one entry per command."""
    import shutil
    import subprocess

    for name in LINKED:
        (folder / name).symlink_to(ROOT / name)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    # byte code written once, by the first command that imports a module
    for k in ("HBTRACE_DIR", "HBTOOL_TRACER_DIR", "LD_PRELOAD", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"):
        env.pop(k, None)
    assert shutil.which("hbtool", path=env["PATH"]) == str(bin_dir / "hbtool"), f"no hbtool in {bin_dir}"
    failed = []
    for line, cmd in shell_commands():
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=folder, env=env, capture_output=True,
                           text=True, timeout=600)
        want = next((v for k, v in EXIT_STATUS.items() if cmd.startswith(k)), 0)
        if r.returncode != want or "Traceback" in r.stderr:
            failed.append(f"README.md:{line}: {cmd}\n  exit {r.returncode} (want {want})\n  "
                          + (r.stderr.strip() or r.stdout.strip())[-800:].replace("\n", "\n  "))
    return failed
