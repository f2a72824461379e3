"""Shared helpers for the benchmarks: machine description, RESULTS.md updates, instruction counts."""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}, {platform.system()}"


def record(section: str, body: str, command: str) -> None:
    """Replace (or add) ``## section`` in bench/RESULTS.md with today's figures."""
    today = datetime.date.today().isoformat()
    block = f"## {section}\n\n- date: {today}\n- machine: {machine()}\n- command: `{command}`\n\n{body.strip()}\n"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\nFigures written by the scripts in bench/; rerun them to refresh a section.\n"
    pattern = re.compile(rf"^## {re.escape(section)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(block + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + block
    RESULTS.write_text(text)


def callgrind(child: str, args: list[str], timeout_s: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """(instructions, standard output) of the Python program ``child`` run with ``args`` under
    valgrind's callgrind (needs valgrind on the PATH)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(child)
    try:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, f.name,
                              *args], capture_output=True, text=True, timeout=timeout_s, env=env)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(f"the program under callgrind failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    m = re.search(r"Collected : ([\d,]+)", out.stderr)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(m.group(1).replace(",", "")), out.stdout


def command_line() -> str:
    """The command that ran this benchmark, the script's path relative to the repository."""
    root = Path(__file__).resolve().parent.parent
    args = list(sys.argv)
    try:
        args[0] = str(Path(args[0]).resolve().relative_to(root))
    except ValueError:
        pass
    return " ".join([Path(sys.executable).name if "venv" not in sys.executable else ".venv/bin/python", *args])
