"""CPU instructions of the Raft load of bench_raft.py (5 peers, 3 clients), per message sent:
run under valgrind's callgrind, minus a run that only does the warm-up. Unlike CPU time this
does not move with the machine's load, so it is what to compare two versions of the code by;
``--root`` measures another checkout (e.g. main's, extracted with ``git archive``) with this
venv, for a before/after in one sitting.

    .venv/bin/python bench/bench_raft_instructions.py [--seconds 10] [--config off trace checks] [--root DIR]

Prints one line per configuration (``off``: trace off, no checkers; ``trace``: trace on;
``checks``: probes and every Raft checker, trace off); records nothing. Needs valgrind on
the PATH; one to three minutes per configuration.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere, like the other benches

from bench.common import callgrind  # noqa: E402

CHILD = """
import sys, tempfile
sys.path.insert(0, {root!r})
from bench.bench_raft import LOAD
from harness.composition import run_sim
from harness.scenario import parse_scenario
seconds, config = int(sys.argv[1]), sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    run_sim(parse_scenario(LOAD.format(seconds=2, until=1), "warm-up.yaml"), 1, checks=config == "checks")
    if seconds:
        sc = parse_scenario(LOAD.format(seconds=seconds, until=seconds - 1), "bench.yaml")
        r = run_sim(sc, 1, tmp if config == "trace" else None, checks=config == "checks")
        print("sent", r.stats["sent"])
"""
TIMEOUT_S = 1800  # callgrind runs ~50x slower than the program


def instructions(root: str, seconds: int, config: str) -> tuple[int, int]:
    """(instructions, messages sent) of one child process under callgrind."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # dict and set layouts move the count by a few per cent
    count, out = callgrind(CHILD.format(root=root), [str(seconds), config], TIMEOUT_S, env)
    sent = re.search(r"sent (\d+)", out)
    return count, int(sent.group(1)) if sent else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10, help="simulated seconds of the load run")
    ap.add_argument("--config", nargs="+", default=["off", "trace", "checks"], choices=["off", "trace", "checks"])
    ap.add_argument("--root", default=ROOT, help="the checkout to measure (default: this one)")
    a = ap.parse_args()
    if a.seconds < 2:
        ap.error("--seconds: at least 2 (the load runs from 500 ms until a second before the end)")
    root = os.path.abspath(a.root)
    for config in a.config:
        warm, _ = instructions(root, 0, config)
        total, sent = instructions(root, a.seconds, config)
        print(f"{config}: {(total - warm) / 1e9:.3f} G instructions for {a.seconds} simulated s, {sent:,} messages, "
              f"{(total - warm) / sent:,.0f} per message ({root})", flush=True)


if __name__ == "__main__":
    main()
