"""``leader-heartbeat`` of external Raft peers, judged from their AppendEntries as the chaos
proxy read them (harness/checkers/raft/timing.py): three peers run as processes, the proxy between
them. With ELECTION_TIMEOUT_MIN at 2 s the bound is 1 s + the 90 ms tolerance + 500 ms of
external slack (1590 ms); one write every 1.8 s gives a ``no-heartbeat`` leader (it sends
AppendEntries only with entries) gaps of 1.8 s, which fail the bound before a follower's election
timeout (2 s at least) makes a new leader. The reference peer as the process passes, judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.raft_external import COMMANDS
from harness.composition import RunResult, run_live
from harness.scenario import parse_scenario

pytestmark = [pytest.mark.live, pytest.mark.slow]

FILE = """protocol: raft
name: raft-external-heartbeat
duration: 9500ms
nodes:
  peers: {role: peer, count: 3, command: "COMMAND", ready: {line: READY},
          config: {election_min: 2000ms, election_max: 3000ms}}
  clients: {role: client, count: 1}
workload:  # one write at each of 3.5, 5.3, 7.1 and 8.9 s (a Poisson process of 100,000/s for 1 ms)
WRITES
check: [leader-heartbeat]
"""
WRITES = "\n".join(f"  - {{nodes: clients, op: put, rate: 100000/s, from: {t}ms, until: {t + 1}ms, limit: 1}}"
                   for t in (3500, 5300, 7100, 8900))


def run(command: str, tmp_path: Path) -> RunResult:
    text = FILE.replace("COMMAND", command).replace("WRITES", WRITES)
    return run_live(parse_scenario(text, "heartbeat.yaml"), 1, str(tmp_path))


def test_an_external_leader_that_sends_no_heartbeats_is_caught_as_the_proxy_read_it(tmp_path: Path) -> None:
    r = run(COMMANDS["reference"] + " --mutant no-heartbeat", tmp_path)
    failed = {v.check: v for v in r.failed}
    assert set(failed) == {"leader-heartbeat"}, [v.to_dict() for v in r.failed]
    v = failed["leader-heartbeat"]
    assert v.clause in ("raft.algorithm.leader-heartbeat", "raft.rpc.timeout-bound"), v.detail
    assert "+ 500 ms: seen by the proxy" in v.detail, v.detail


def test_external_reference_peers_pass_and_are_judged(tmp_path: Path) -> None:
    r = run(COMMANDS["reference"], tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = next(v.detail for v in r.verdicts if v.check == "leader-heartbeat")
    assert "external peers judged from their requests as the chaos proxy read them" in said, said
    assert "not judged" not in said and not said.startswith("0 gap"), said
