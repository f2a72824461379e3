"""The ``zmq-harness explore`` command line (the parser is `harness.cli`'s)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the search's modules are imported when it runs, not when the parser is built
    from harness.explore.candidate import Candidate, Outcome


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file")
    p.add_argument("--budget", type=int, default=100, metavar="N", help="at most N runs in the search (default 100)")
    p.add_argument("--seconds", type=float, metavar="S", help="and at most S seconds of search")
    p.add_argument("--mutant", action="append", metavar="ROLE=NAME",
                   help="a shipped mutant instead of the reference node of a role (or group); repeatable")
    p.add_argument("--out", default="runs/explore", help="where the shrunk scenario, its explanation, diagram and "
                   "trace go (default runs/explore)")
    p.add_argument("--seed", type=int, help="no search: shrink this failing seed of the file as written "
                   "(from a 'zmq-harness run --seeds' sweep)")
    p.add_argument("--guided", action="store_true", help="coverage-guided search: prefer schedules that reach "
                   "more distinct protocol events (default: random)")
    p.add_argument("--live", action="store_true", help="run every candidate over real sockets (slow: fewer runs)")
    p.add_argument("--shrink-budget", type=int, default=200, metavar="N", help="at most N runs shrinking (default 200)")
    p.add_argument("--shrink-seconds", type=float, metavar="S", help="and at most S seconds shrinking")
    p.add_argument("--search-seed", type=int, default=0, help="seed of hypothesis's draws (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def run_explore(args: argparse.Namespace) -> int:
    from harness.explore.driver import explore
    from harness.scenario import ScenarioError, parse_mutant_options

    if args.budget < 1 or args.shrink_budget < 0:
        print("error: --budget must be at least 1 and --shrink-budget at least 0", file=sys.stderr)
        return 2

    def progress(runs: int, cand: Candidate, outcome: Outcome) -> None:
        if args.quiet or not sys.stderr.isatty():
            return
        state = "FAIL " + ", ".join(map(str, outcome.failed)) if outcome.failed else (
            "invalid" if outcome.invalid else "ok")
        print(f"\r[run {runs}] seed {cand.seed}, {len(cand.faults)} fault(s): {state}"[:110].ljust(110),
              end="", file=sys.stderr, flush=True)

    def log(text: str) -> None:
        if not args.quiet:
            print(f"\n{text}", file=sys.stderr, flush=True)

    try:
        report = explore(args.file, budget=args.budget, seconds=args.seconds,
                         mutants=parse_mutant_options(args.mutant or []), out_dir=args.out, seed=args.seed,
                         live=args.live, guided=args.guided, shrink_runs=args.shrink_budget,
                         shrink_seconds=args.shrink_seconds, search_seed=args.search_seed, progress=progress,
                         log=log)
    except (ScenarioError, ValueError) as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(file=sys.stderr)
    for note in report.notes:
        print(f"note: {note}")
    if not report.failed:
        s = report.search
        if s is not None:
            corpus = f", {s.corpus} in the coverage corpus" if args.guided else ""
            print(f"nothing fails: {s.runs} run(s) in {s.seconds:.1f} s ({s.candidates} schedule(s) drawn{corpus}, "
                  f"{len(s.coverage)} distinct protocol events reached)")
            if report.reference_failures:
                print(f"  {report.reference_failures} schedule(s) failed with the reference nodes too and were set aside")
        return 0
    shrunk = report.shrunk
    assert shrunk is not None and report.original is not None
    print(f"FAIL {report.prop}")
    if report.search is not None:
        print(f"  found after {report.search.runs} run(s) in {report.search.seconds:.1f} s")
    print(f"  shrunk in {shrunk.runs} run(s), {shrunk.seconds:.1f} s: {len(report.original.faults)} -> "
          f"{len(shrunk.candidate.faults)} fault(s), {report.original.duration_ns / 1e9:g} s -> "
          f"{shrunk.candidate.duration_ns / 1e9:g} s" + ("" if shrunk.complete else " (shrink budget spent)"))
    print(f"  scenario:    {report.written}")
    print(f"  explanation: {report.explanation}")
    if report.page:
        print(f"  diagram:     {report.page}")
    print(f"  replay:      {report.replay}" + ("" if report.replayed else "  (did NOT fail the same way on replay)"))
    return 1
