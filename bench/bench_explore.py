"""Explore and shrink, measured: runs per second of the search, and for every shipped mutant the
runs and seconds random and coverage-guided search need to find its failure, what shrinking
costs and how small the schedule gets.

    .venv/bin/python bench/bench_explore.py [--protocols dcp,dafka] [--budget 60] [--budgets raft=20,pppp=40]
                                            [--modes random,guided] [--mutants a,b] [--files a.yaml,b.yaml]
                                            [--record [--section 'Raft, PPPP, Event BUS']]

Every mutant of a protocol is explored on the protocol's exploration scenarios
(``scenarios/<protocol>/explore/*.yaml``, in name order) until one of them yields a shrunk
failure; the reference nodes are explored on each of them with the same budget (they must
yield nothing). Results go to ``bench/explore-results.jsonl`` as they come (a rerun skips what
is there; ``--fresh`` starts over), and ``--record`` writes the tables into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run as a script from anywhere

from bench.common import command_line, record  # noqa: E402
from harness.explore import explore  # noqa: E402
from harness.registry import package  # noqa: E402

JSONL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "explore-results.jsonl")
SHRINK_RUNS = 200


def explore_files(protocol: str) -> list[str]:
    return sorted(glob.glob(os.path.join("scenarios", protocol, "explore", "*.yaml")))


def one(path: str, mode: str, budget: int, mutant: tuple[str, str] | None,
        shrink_runs: int = SHRINK_RUNS) -> dict[str, Any]:
    """Explore one file (with one mutant, or the reference nodes); the figures of it."""
    with tempfile.TemporaryDirectory(prefix="bench-explore-") as out:
        t0 = time.monotonic()
        report = explore(path, budget=budget, mutants=dict([mutant]) if mutant else {}, out_dir=out,
                         guided=mode == "guided", shrink_runs=shrink_runs)
        total = time.monotonic() - t0
    s = report.search
    row: dict[str, Any] = {"file": path, "mode": mode, "budget": budget, "shrink_budget": shrink_runs,
                           "found": report.failed,
                           "search_runs": s.runs if s else 0, "search_s": round(s.seconds, 2) if s else 0.0,
                           "coverage": len(s.coverage) if s else 0, "total_s": round(total, 2),
                           "set_aside": report.reference_failures}
    if report.failed and report.shrunk is not None and report.original is not None:
        from harness.scenario import load_scenario  # noqa: PLC0415

        scenario = load_scenario(path)
        small, big = report.shrunk.candidate, report.original
        row.update(prop=str(report.prop), shrink_runs=report.shrunk.runs, shrink_s=round(report.shrunk.seconds, 2),
                   faults_found=len(big.faults), faults_shrunk=len(small.faults),
                   nodes_found=len(big.nodes(scenario)), nodes_shrunk=len(small.nodes(scenario)),
                   duration_found=big.duration_ns / 1e9, duration_shrunk=small.duration_ns / 1e9,
                   complete=report.shrunk.complete, replayed=report.replayed,
                   shrunk_faults=[dict(f) for f in small.faults])
    return row


def has_role(path: str, role: str) -> bool:
    from harness.scenario import load_scenario  # noqa: PLC0415

    scenario = load_scenario(path)
    return any(scenario.group_of(n).role == role for n in scenario.node_names)


def load_done(fresh: bool) -> list[dict[str, Any]]:
    if fresh or not os.path.exists(JSONL):
        return []
    with open(JSONL) as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocols", default="dcp,dafka")
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--shrink-runs", type=int, default=SHRINK_RUNS, help="bound of each shrinking")
    ap.add_argument("--budgets", default="", help="per-protocol budgets, e.g. raft=20,pppp=40 (else --budget)")
    ap.add_argument("--files", default="", help="only these exploration scenario files (base names), in this order")
    ap.add_argument("--modes", default="random,guided")
    ap.add_argument("--mutants", help="only these mutants (names; 'reference' for the reference nodes' searches)")
    ap.add_argument("--reference-budget", type=int, default=150)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--again", action="store_true", help="measure the named mutants again (the last row counts)")
    ap.add_argument("--record", action="store_true", help="write the tables into bench/RESULTS.md")
    ap.add_argument("--section", default="", help="suffix of the RESULTS.md section titles, e.g. 'Raft, PPPP, "
                    "Event BUS' (each protocol set keeps its own sections)")
    args = ap.parse_args()
    rows = load_done(args.fresh)
    done = {(r["protocol"], r["mutant"], r["mode"]) for r in rows}
    only = set(args.mutants.split(",")) if args.mutants else None
    budgets = {p: int(b) for p, b in (kv.split("=") for kv in args.budgets.split(",") if kv)}
    with open(JSONL, "w" if args.fresh else "a") as sink:
        def keep(row: dict[str, Any]) -> None:
            rows.append(row)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(json.dumps({k: v for k, v in row.items() if k != "shrunk_faults"}), flush=True)

        for protocol in args.protocols.split(","):
            files = explore_files(protocol)
            if args.files:
                names = args.files.split(",")
                files = sorted((f for f in files if os.path.basename(f) in names),
                               key=lambda f: names.index(os.path.basename(f)))
            budget = budgets.get(protocol, args.budget)
            for mode in args.modes.split(","):
                for path in files:
                    if (protocol, f"reference:{path}", mode) not in done and (only is None or "reference" in only):
                        keep({"protocol": protocol, "mutant": f"reference:{path}", "role": "",
                              **one(path, mode, args.reference_budget, None)})
                for name, (role, _, clause) in package(protocol).mutants.items():
                    if ((protocol, name, mode) in done and not args.again) or (only is not None and name not in only):
                        continue
                    row: dict[str, Any] = {}
                    for path in (f for f in files if has_role(f, role)):  # a file without the role: no such node
                        row = one(path, mode, budget, (role, name), args.shrink_runs)
                        if row["found"]:
                            break
                    keep({"protocol": protocol, "mutant": name, "role": role, "clause": clause, **row})
    if args.record:
        write_results(rows, args)


def write_results(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    protocols = set(args.protocols.split(","))
    rows = [r for r in rows if r["protocol"] in protocols]
    suffix = f" ({args.section})" if args.section else ""
    # the last row of each reference search counts (a rerun may have measured one again)
    ref = list({(r["file"], r["mode"]): r for r in rows if r["mutant"].startswith("reference:")}.values())
    speed = ["| scenario | mode | runs | s | runs / s | distinct protocol events | found |", "|---|---|---|---|---|---|---|"]
    for r in ref:
        speed.append(f"| {r['file']} | {r['mode']} | {r['search_runs']} | {r['search_s']} | "
                     f"{r['search_runs'] / max(r['search_s'], 1e-9):.2f} | {r['coverage']} | "
                     f"{'FAILURE' if r['found'] else 'nothing'} |")
    if ref:  # (a measurement of some mutants only has no reference searches)
        record(f"Explore: runs per second, reference nodes{suffix}", "\n".join(speed) + "\n\nThe search of each "
               "exploration scenario on the reference nodes, which must find nothing; runs / s is the search's own "
               "rate (hypothesis's draws, rendering, parsing and the simulated run with its checkers).", command_line())
    by: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if not r["mutant"].startswith("reference:"):
            by.setdefault((r["protocol"], r["mutant"]), {})[r["mode"]] = r
    table = ["| protocol | mutant (role) | found in | property | random: runs, s to find | guided: runs, s to find "
             "| shrink runs, s | faults found -> shrunk | nodes | duration s | replays |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (protocol, name), modes in by.items():
        r, g = modes.get("random"), modes.get("guided")
        first = r if r and r["found"] else g if g and g["found"] else (r or g)
        assert first is not None

        def find(m: dict[str, Any] | None) -> str:
            if m is None:
                return "-"
            return f"{m['search_runs']}, {m['search_s']}" if m["found"] else f"not in {m['search_runs']}"

        if first["found"]:
            table.append(f"| {protocol} | {name} ({first['role']}) | {os.path.basename(first['file'])} | "
                         f"{first['prop']} | {find(r)} | {find(g)} | {first['shrink_runs']}, {first['shrink_s']} | "
                         f"{first['faults_found']} -> {first['faults_shrunk']} | {first['nodes_found']} -> "
                         f"{first['nodes_shrunk']} | {first['duration_found']:g} -> {first['duration_shrunk']:g} | "
                         f"{'yes' if first['replayed'] else 'NO'} |")
        else:
            table.append(f"| {protocol} | {name} ({first['role']}) | - | - | {find(r)} | {find(g)} | | | | | |")
    found = {mode: [m for ms in by.values() for k, m in ms.items() if k == mode and m["found"]]
             for mode in ("random", "guided")}
    total = {mode: sum(1 for ms in by.values() if mode in ms) for mode in ("random", "guided")}
    lines = []
    for mode in ("random", "guided"):
        if total[mode]:
            runs = [m["search_runs"] for m in found[mode]]
            shrunk = [m["faults_shrunk"] for m in found[mode]]
            lines.append(f"- {mode}: found {len(found[mode])} of {total[mode]} mutants; runs to find: median "
                         f"{statistics.median(runs) if runs else '-'}, max {max(runs) if runs else '-'}; shrunk "
                         f"faults: max {max(shrunk) if shrunk else '-'}")
            for protocol in sorted({p for p, _ in by}):
                mine = [ms[mode] for (p, _), ms in by.items() if p == protocol and mode in ms]
                if mine:
                    budgets = sorted({m["budget"] for m in mine})
                    lines.append(f"  - {protocol}: {sum(1 for m in mine if m['found'])} of {len(mine)} within "
                                 f"{'/'.join(map(str, budgets))} runs per scenario")
    both = [(ms["random"], ms["guided"]) for ms in by.values() if "random" in ms and "guided" in ms
            and (ms["random"]["found"] or ms["guided"]["found"])]
    if both:
        def cost(m: dict[str, Any]) -> int:
            return m["search_runs"] if m["found"] else 10**6

        better = sum(1 for a, b in both if cost(b) < cost(a))
        worse = sum(1 for a, b in both if cost(b) > cost(a))
        lines.append(f"- guided against random, on the {len(both)} mutants either found: guided needed fewer runs "
                     f"for {better}, more for {worse}, as many for {len(both) - better - worse}")
    record(f"Explore: every shipped mutant{suffix}", "\n".join(table) + "\n\n" + "\n".join(lines) + "\n\nruns to find count "
           "every simulated run of the search, the file as written first and the reference runs that confirm a "
           "failure included; 'not in N' means no failure within the budget on any exploration scenario of the "
           "protocol. Shrinking keeps a reduction only if the mutant still fails the same property and the "
           "reference nodes pass the same schedule.", command_line())


if __name__ == "__main__":
    main()
