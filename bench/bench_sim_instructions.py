"""Simulator cost in CPU instructions per delivery: the DCP scenario of bench_sim.py (1 broker,
4 workers, 8 clients, nodes encoding and decoding, trace on) run under valgrind's callgrind,
minus a run that only does the warm-up, divided by the deliveries. Unlike wall time this does
not move with the machine's load or clock, so it is what to compare two versions of the code by
(run it at each commit; the ratio is the speed-up).

    .venv/bin/python bench/bench_sim_instructions.py [--seconds 4] [--trace off] [--no-record]

Needs valgrind on the PATH; about a minute per configuration.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere, like the other benches

from bench.common import callgrind, command_line, record  # noqa: E402

CHILD = """
import sys, tempfile
sys.path.insert(0, {root!r})
from bench.bench_sim import bench_scenario
from harness.composition import run_sim
seconds, trace = float(sys.argv[1]), sys.argv[2] == "on"
with tempfile.TemporaryDirectory() as tmp:
    run_sim(bench_scenario(1.0, "warm-up"), 1, tmp, checks=False)
    if seconds:
        r = run_sim(bench_scenario(seconds), 1, tmp if trace else None, checks=False)
        print("delivered", r.stats["delivered"])
"""
TIMEOUT_S = 900  # callgrind runs ~50x slower than the program


def instructions(seconds: float, trace: str) -> tuple[int, int]:
    """(instructions, deliveries) of one child process under callgrind."""
    count, out = callgrind(CHILD.format(root=ROOT), [str(seconds), trace], TIMEOUT_S)
    d = re.search(r"delivered (\d+)", out)
    return count, int(d.group(1)) if d else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4, help="virtual seconds of the measured run")
    ap.add_argument("--trace", choices=("on", "off", "both"), default="both")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_sim_instructions: valgrind is not installed")
    base, _ = instructions(0, "on")
    rows = []
    for trace in (("on", "off") if args.trace == "both" else (args.trace,)):
        total, delivered = instructions(args.seconds, trace)
        rows.append((trace, delivered, (total - base) / delivered))
    lines = ["| DCP, 1 broker, 4 workers, 8 clients | deliveries | instructions per delivery |", "|---|---|---|"]
    lines += [f"| nodes encode/decode, trace {trace} | {n} | {per:,.0f} |" for trace, n, per in rows]
    body = "\n".join(lines) + (
        "\n\nInstructions counted by callgrind for the measured run alone (a run doing only the warm-up "
        "is subtracted). Deterministic to about 0.1%, so two commits compare by the ratio of these "
        "figures even on a busy machine.")
    print(body)
    if not args.no_record:
        record("Simulator: instructions per delivery", body, command_line())


if __name__ == "__main__":
    main()
