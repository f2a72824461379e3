"""A leader whose sends nothing reports: an external peer beside the harness's own peers (a group
with a ``command`` of one process: no probe, and no chaos proxy between it and a probed peer), whose
AppendEntries show only as the others' receipts (docs/live-faults.md, "Observing external nodes").

commit-rule learned what is committed only from leaders' sends, so after such a leader was deposed,
its successor announcing the commit index it had rightly learned from it was blamed: "sent commit
index 12, held by no majority (acknowledged: [])" (found live: the stand-in peer beside two
reference peers, partitioned away while leading; 3 of 3 seeds, with or without compaction). Now
what an unseen leader announces raises the bound (it is not judged: its followers' answers to it
cannot be paired), and the leaders the wire does show are judged as before.

Simulation: every event of the hidden peer is withheld from the checker."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import Verdict
from harness.checkers.raft import CommitRule
from harness.composition import run_sim
from harness.scenario import parse_scenario
from reference_nodes.raft.mutants import MUTANTS
from tests.checkers.test_raft_checkers import SCENARIOS
from tests.checkers.unprobed import Unprobed


def _judge(name: str, hidden: str, seed: int, **kw: Any) -> list[Verdict]:
    scenario = parse_scenario(SCENARIOS[name].replace("CHECKS", "[commit-rule]"))
    watcher = Unprobed(CommitRule(peers=3), hidden)
    run_sim(scenario, seed, observers=[watcher], **kw)
    return watcher.finish(scenario.duration_ns)


def test_the_successor_of_a_leader_nobody_saw_send_is_not_blamed_for_its_commits() -> None:
    # `first` leads (the shortest timeout) until it is cut off; peers.0 or peers.1 follows it
    verdicts = _judge("deposed", "first", 1)
    assert [v.ok for v in verdicts] == [True], [v.detail for v in verdicts]


def test_a_leader_the_wire_shows_committing_without_a_majority_is_still_caught() -> None:
    mutant = MUTANTS["commit-no-majority"][1]
    verdicts = _judge("stale", "peers.2", 1, factories={f"peers.{i}": mutant for i in range(3)})
    failed = [v for v in verdicts if not v.ok]
    assert failed and failed[0].clause == "raft.algorithm.commit-majority", [v.detail for v in verdicts]
    assert "peers.1, leader of term" in failed[0].detail
