"""One peer that is not ours beside the harness's reference peers: the independent stand-in
(tests/standins/raft_peer.py) as the external peer ``ext`` of a shipped chaos file, the other
peers in-process (bench/raft_external.py ``--mixed``). No probe and no proxy report what ext sends
the reference peers: the run checks read it from their receipts and from what they answered it
(docs/raft.md, "One external peer beside the harness's peers").

What this found: nothing judged such a leader's commitment before. The stand-in started with
``--break commit-no-majority`` (as leader it commits every entry of its term as soon as it holds
it) passed every check of leader-crash.yaml on the old code ("0 commit index advance(s)");
commit-rule now fails it naming it. The lawful stand-in, leading first (a shorter election
timeout), passes the files and is judged from receipts.

And a false alarm: with two stand-ins and one reference peer, the proxy reports the stand-ins'
traffic with each other, but the reference peer's acknowledgements to a stand-in leader showed
only as the reference peer's sends, which commit-rule did not count: it blamed the lawful leader
("ext.0, leader of term 1, sent commit index 1, held by no majority (acknowledged: [0], majority
2)"; 3 of 3 seeds on the old code)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bench.raft_external import COMMANDS, MIXED_NODE, external_scenario
from harness.composition import run_live
from harness.scenario import parse_scenario

pytestmark = [pytest.mark.live, pytest.mark.slow]

LEADS_FIRST = {"election_min": "100ms", "election_max": "120ms"}  # the reference peers: 200-300 ms


def _run_twice(scenario: Any, seed: int, out: Path) -> Any:
    result = run_live(scenario, seed, str(out))
    if not result.ok:  # a loaded machine: a live run that fails is run again before it counts
        result = run_live(scenario, seed, str(out / "again"))
    return result


def _from_receipts(result: Any) -> int:
    """Commit index advances commit-rule judged of a leader seen only in its followers' receipts."""
    detail = next(v.detail for v in result.verdicts if v.check == "commit-rule")
    m = re.search(r"\((\d+) seen only as their followers' receipts\)", detail)
    return int(m.group(1)) if m else 0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["leader-crash", "partitions", "rolling-restarts", "lossy"])
def test_the_standin_beside_reference_peers_passes_a_shipped_chaos_file_judged_as_leader(name: str,
                                                                                          tmp_path: Path) -> None:
    scenario, left_out = external_scenario(name, "standin", mixed=True, config=LEADS_FIRST)
    assert left_out == [] and scenario.groups[MIXED_NODE].command and scenario.groups["peers"].count == 2
    result = _run_twice(scenario, 1, tmp_path)
    assert result.ok, [v.to_dict() for v in result.failed]
    assert _from_receipts(result) > 0  # it led, and its commit indexes were judged from the receipts


@pytest.mark.timeout(300)
def test_commit_rule_catches_the_standin_committing_without_a_majority_beside_reference_peers(
        tmp_path: Path) -> None:
    command = COMMANDS["standin"] + " --break commit-no-majority"
    scenario, _ = external_scenario("leader-crash", "standin", command, mixed=True, config=LEADS_FIRST)
    result = run_live(scenario, 1, str(tmp_path))
    # (one verdict per clause; the client's receipts of what the broken leader served may fail
    # raft.entries.committed-only beside it)
    failed = {(v.check, v.clause): v for v in result.failed}
    key = ("commit-rule", "raft.algorithm.commit-majority")
    assert key in failed, [v.to_dict() for v in result.verdicts if v.check == "commit-rule"]
    verdict = failed[key]
    assert f"{MIXED_NODE}, leader of term" in verdict.detail and "held by no majority" in verdict.detail
    assert verdict.evidence[0]["node"] != MIXED_NODE  # seen as a reference peer's receipt


TWO_EXTERNAL = """
protocol: raft
name: raft-two-external-one-reference
duration: 6s
nodes:
  peers: {role: peer, count: 1}
  ext: {role: peer, count: 2, config: {election_min: 100ms, election_max: 120ms}, command: "COMMAND"}
  clients: {role: client, count: 2}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 500ms, until: 5500ms}
faults:
  - {from: 1500ms, until: 4s, partition: [[ext.1], [ext.0, peers.0, clients]]}
check: [commit-rule, election-safety, leader-append-only, log-matching, leader-completeness, committed-durable,
        linearizable]
"""


@pytest.mark.timeout(300)
def test_a_standin_leader_whose_majority_is_a_reference_peers_acknowledgement_is_not_blamed(tmp_path: Path) -> None:
    scenario = parse_scenario(TWO_EXTERNAL.replace("COMMAND", COMMANDS["standin"]), "two-external.yaml")
    result = _run_twice(scenario, 1, tmp_path)
    assert result.ok, [v.to_dict() for v in result.failed]
    assert _from_receipts(result) > 0
    assert result.stats["observed_traffic"]["sends"] > 0  # the proxy reported the stand-ins' own traffic


@pytest.mark.timeout(300)
def test_commit_rule_still_catches_a_standin_leader_without_a_majority_there(tmp_path: Path) -> None:
    command = COMMANDS["standin"] + " --break commit-no-majority"
    scenario = parse_scenario(TWO_EXTERNAL.replace("COMMAND", command), "two-external.yaml")
    result = run_live(scenario, 1, str(tmp_path))
    failed = {(v.check, v.clause): v for v in result.failed}
    key = ("commit-rule", "raft.algorithm.commit-majority")
    assert key in failed, [v.to_dict() for v in result.verdicts if v.check == "commit-rule"]
    assert re.search(r"ext\.[01], leader of term \d+, sent commit index \d+, held by no majority",
                     failed[key].detail), failed[key].detail
