"""Every mutant that a fault schedule exposes is found by explore within its budget (60 runs for
DCP, 12 for Raft, PPPP and the Event BUS) on the protocol's exploration scenarios, shrunk to at
most a handful of faults, and the written file replays the failure (slow: several minutes; the
figures are in bench/RESULTS.md, made by bench/bench_explore.py).

FOUND lists the mutants the bench found; the other DCP mutants (wire-format and timing mutants
such as no-pong, ping-payload) were not found by any schedule within 60 runs: the conformance suites catch them, exploration does not. For Raft, PPPP and the
Event BUS, FOUND_BY lists what the bench found with 12 runs (the others and why: docs/explore.md,
"Which mutants explore finds"). Dafka mutants are not measured yet."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from harness.explore import explore
from harness.registry import package

FOUND = ["busy-worker", "never-expire", "alters-metadata", "strips-metadata", "no-client-address", "wrong-header",
         "wrong-version", "dagbox-type", "any-service", "no-queue", "replaces-client-address", "drops-empty-data",
         "drops-trailing-empty", "misroutes-reply", "drops-metadata", "no-ping", "no-reregister", "no-register",
         "wrong-reply-address", "worker-wrong-header", "duplicate-delivery",
         # found since message rules corrupt (bench/bench_explore.py --mutants ..., 2026-11-27: 3-9 runs)
         "crash-on-malformed", "worker-crash-on-malformed", "client-crash-on-malformed"]
HANDFUL = 3


@pytest.mark.slow
@pytest.mark.parametrize("name", FOUND)
def test_explore_finds_and_shrinks_a_dcp_mutant(name: str, tmp_path: Path) -> None:
    role = package("dcp").mutants[name][0]
    for path in sorted(glob.glob("scenarios/dcp/explore/*.yaml")):
        report = explore(path, budget=60, mutants={role: name}, out_dir=str(tmp_path), shrink_runs=200)
        if report.failed:
            break
    assert report.failed and report.shrunk is not None, f"{name}: no failure within 60 runs on any scenario"
    assert len(report.shrunk.candidate.faults) <= HANDFUL
    assert report.written and report.replayed


# Found by `bench/bench_explore.py --protocols raft,eventbus,pppp --budget 12` (bench/RESULTS.md).
FOUND_BY: dict[str, list[str]] = {
    "raft": ["volatile-log", "commit-no-majority", "keep-conflicts", "wrong-prev-term", "ignore-higher-term",
             "truncating-leader", "apply-uncommitted", "fixed-timeout", "local-read", "slow-election",
             "hides-leader", "ignores-redirect", "reuse-reqid", "dies-on-malformed"],
    "pppp": ["releases-on-first-ack", "publisher-no-heartbeat", "publisher-slow-first-heartbeat",
             "publisher-slow-heartbeat", "short-sequence", "numbers-from-zero", "late-ack", "never-acks",
             "subscriber-no-heartbeat", "subscriber-slow-first-heartbeat", "subscriber-slow-heartbeat",
             "subscriber-short-sequence", "no-resubscribe", "resubscribes-one", "heartbeat-first",
             "publisher-crash-on-malformed", "subscriber-crash-on-malformed"],
    "eventbus": ["syncend-latest", "syncend-filter", "syncend-ahead", "empty-snapshot", "no-syncend", "first-client",
             "pub-sequence", "broadcast-twice", "drops-pub", "server-uuid-v1", "server-no-zone", "trailing-data",
             "server-sequence-format", "applies-twice", "foreign-topics", "two-frame-syncstart", "comma-subtrees",
             "client-sequence-format", "same-uuid", "hello-first", "server-crash-on-malformed",
             "client-crash-on-malformed"],
}
SMALL_BUDGET = 12
AT_MOST = 5


@pytest.mark.slow
@pytest.mark.parametrize("protocol,name", [(p, n) for p, names in FOUND_BY.items() for n in names])
def test_explore_finds_and_shrinks_a_mutant_of_every_protocol(protocol: str, name: str, tmp_path: Path) -> None:
    role = package(protocol).mutants[name][0]
    for path in sorted(glob.glob(f"scenarios/{protocol}/explore/*.yaml")):
        report = explore(path, budget=SMALL_BUDGET, mutants={role: name}, out_dir=str(tmp_path), shrink_runs=200)
        if report.failed:
            break
    assert report.failed and report.shrunk is not None, f"{name}: no failure within {SMALL_BUDGET} runs"
    assert len(report.shrunk.candidate.faults) <= AT_MOST
    assert report.written and report.replayed  # the written file fails the same property again
