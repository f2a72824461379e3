"""Which mutants the explore tables of bench/RESULTS.md list as not found are found now that every
run judges the wire (``wire-conformance``): each is explored on its protocol's shipped exploration
scenarios (in name order, until one yields a shrunk failure) with a small budget, and a row per
mutant is printed (JSON lines, then a Markdown table).

    nice -n 10 .venv/bin/python bench/bench_wire_found.py [--budget 4] [--protocols dcp,eventbus] [--mutants a,b]

Nothing is written to bench/RESULTS.md: the explore tables there are another bench's
(bench_explore.py), which re-measures every mutant.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import RESULTS  # noqa: E402
from harness.explore import explore  # noqa: E402
from harness.registry import package  # noqa: E402

ROW = re.compile(r"^\| (\w+) \| ([\w-]+) \((\w+)\) \| - \|")


def not_found() -> list[tuple[str, str, str]]:
    """(protocol, mutant, role) of every row of the explore tables that found nothing."""
    out, section = [], False
    for line in RESULTS.read_text().splitlines():
        if line.startswith("## "):
            section = line.startswith("## Explore: every shipped mutant")
        m = ROW.match(line) if section else None
        if m and (m.group(1), m.group(2), m.group(3)) not in out:
            out.append((m.group(1), m.group(2), m.group(3)))
    return out


def one(protocol: str, mutant: str, role: str, budget: int) -> dict[str, Any]:
    row: dict[str, Any] = {"protocol": protocol, "mutant": mutant, "role": role, "found": False, "runs": 0}
    t0 = time.monotonic()
    for path in sorted(glob.glob(os.path.join("scenarios", protocol, "explore", "*.yaml"))):
        with tempfile.TemporaryDirectory(prefix="bench-wire-found-") as out:
            report = explore(path, budget=budget, mutants={role: mutant}, out_dir=out, shrink_runs=60)
        s = report.search
        row["runs"] += s.runs if s else 0
        if report.failed:
            row.update(found=True, file=os.path.basename(path), prop=str(report.prop),
                       faults_shrunk=len(report.shrunk.candidate.faults) if report.shrunk else None,
                       replayed=report.replayed)
            break
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=4, help="runs per exploration scenario")
    ap.add_argument("--protocols", help="only these protocols")
    ap.add_argument("--mutants", help="only these mutants")
    args = ap.parse_args()
    only_p = set(args.protocols.split(",")) if args.protocols else None
    only_m = set(args.mutants.split(",")) if args.mutants else None
    rows = []
    for protocol, mutant, role in not_found():
        if (only_p and protocol not in only_p) or (only_m and mutant not in only_m):
            continue
        if mutant not in package(protocol).mutants:
            continue
        row = one(protocol, mutant, role, args.budget)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| protocol | mutant (role) | found | property | runs | shrunk faults | replays | s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['protocol']} | {r['mutant']} ({r['role']}) | {'yes, ' + r['file'] if r['found'] else 'no'} | "
              f"{r.get('prop', '-')} | {r['runs']} | {r.get('faults_shrunk', '-')} | "
              f"{'yes' if r.get('replayed') else '-'} | {r['seconds']} |")


if __name__ == "__main__":
    main()
