"""Every Raft checker catches a deliberately broken peer or client (reference_nodes/raft/mutants.py)
and passes the reference nodes on the same scenario.

Each case names a mutant, a small scenario built to provoke its bug, and the check that must
fail; the mutant replaces every node of its role and must fail that check within the given
seeds. The reference nodes pass every check of every scenario here."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_sim
from harness.protocols import catalogue
from harness.registry import package
from harness.scenario import parse_scenario
from reference_nodes.raft.mutants import MUTANTS, SUITE_ONLY

ALL_CHECKS = ("[election-safety, vote-once, term-update, log-matching, leader-append-only, leader-completeness, "
              "state-machine-safety, committed-durable, commit-rule, update-once, snapshot-state, snapshot-resume, "
              "linearizable, "
              "leader-heartbeat, message-ids, update-reqids, update-expiry, entries-stop, follows-entries-redirect, "
              "broadcast-state, broadcast-heartbeat, broadcast-entries, broadcast-url, request-config, repeat-config, "
              "cluster-ident, entries-pipeline, entries-from-prev, entries-follow-up]")

WHOLE_CLUSTER_DOWN = Path("scenarios/raft/explore/whole-cluster-down.yaml").read_text().replace(
    "one_way: true}\n", "one_way: true}\n  - {at: 2400ms, crash: peers, restart_after: 200ms}\n")

SCENARIOS = {
    # Five peers with identical election timeouts, all restarted at once: everyone stands at the
    # same instant and the vote splits; peer 4 crashes right after voting for itself.
    "votes": """
protocol: raft
name: raft-test-votes
duration: 2s
nodes:
  peers: {role: peer, count: 5, config: {election_min: 200ms, election_max: 200ms}}
faults:
  - {at: 1s, crash: peers, restart_after: 10ms}
  - {at: 1210100us, crash: peers.4, restart_after: 1ms}
check: CHECKS
""",
    # Narrow election windows and power cuts: candidates stand together and ask the same voters.
    "elections": """
protocol: raft
name: raft-test-elections
duration: 3s
nodes:
  peers: {role: peer, count: 5, config: {election_min: 200ms, election_max: 204ms}}
  clients: {role: client, count: 2, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 300ms, until: 2500ms}
faults:
  - {at: 1s, crash: peers, restart_after: 10ms}
  - {at: 2s, crash: peers, restart_after: 10ms}
check: CHECKS
""",
    # Peer 0 is cut off while the others commit; its term runs ahead, its log falls behind.
    "stale": """
protocol: raft
name: raft-test-stale
duration: 4s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 2, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 3500ms}
faults:
  - {from: 1s, until: 2500ms, partition: [[peers.0], [peers.1, peers.2, clients]]}
check: CHECKS
""",
    # The first leader (it has the shortest timeout) is cut off with most clients: it accepts
    # updates it cannot commit, and is deposed.
    "deposed": """
protocol: raft
name: raft-test-deposed
duration: 4s
nodes:
  first: {role: peer, config: {election_min: 100ms, election_max: 110ms, heartbeat: 50ms}}
  peers: {role: peer, count: 2}
  clients: {role: client, count: 4, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 3500ms}
faults:
  - {from: 1s, until: 2500ms, partition: [[first, clients.0, clients.1, clients.2], [peers, clients.3]]}
check: CHECKS
""",
    # A follower is down across a change of leader, and comes back behind it; before the
    # leader crashes, its links to peers 2 and 3 are slow, so its latest entries are held by a
    # minority (itself and peer 1), which elects the next leader.
    "lagging": """
protocol: raft
name: raft-test-lagging
duration: 4s
nodes:
  first: {role: peer, config: {election_min: 100ms, election_max: 110ms, heartbeat: 50ms}}
  peers: {role: peer, count: 4}
  clients: {role: client, count: 3, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 300ms, until: 3500ms}
faults:
  - {at: 1s, crash: peers.0, restart_after: 2s}
  - {at: 2s, crash: first, restart_after: 500ms}
  - {from: 0s, until: 2s, slow_link: [first, "peers.[23]"], latency: 30ms}
check: CHECKS
""",
    # Lost update responses make clients retry their reqids; duplicated AppendEntries responses
    # arrive after the next request went out.
    "retries": """
protocol: raft
name: raft-test-retries
duration: 3s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 4, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 30/s, from: 300ms, until: 2500ms}
faults:
  - rule: {message: RequestUpdateResponse, drop: 30%}
  - rule: {message: AppendEntriesResponse, duplicate: 50%}
  - rule: {message: AppendEntries, delay: 20ms}
check: CHECKS
""",
    # Peer 2's answers are lost for 170 ms while it still hears the leader, whose retries repeat
    # the unanswered AppendEntries; entry 17 never reaches it, and the next leader's first
    # AppendEntries names entry 17 as the previous one (explore's shrunk find for accept-any-prev).
    "cut-off-answers": """
protocol: raft
name: raft-test-cut-off-answers
duration: 1700ms
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 1, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 1200ms, limit: 16}
faults:
  - {from: 1100ms, until: 1270ms, partition: [[peers.2], [rest]], one_way: true}
check: CHECKS
""",
    # A client's reads cross a 250 ms link to peer 4, which leads and is paused: its read arrives
    # after the new leader's first AppendEntries, so it is answered "not the leader" (explore's
    # shrunk find for ignores-entries-redirect on scenarios/raft/explore/redirects.yaml).
    "slow-reads": """
protocol: raft
name: raft-test-slow-reads
duration: 2100ms
nodes:
  peers: {role: peer, count: 5}
  clients: {role: client, count: 1, config: {op_timeout: 4s, response_ttl: 2s}}
workload:
  - {nodes: clients, op: put, rate: 30/s, from: 300ms, until: 1600ms, limit: 2}
faults:
  - {from: 0s, until: 1830ms, slow_link: [clients.0, peers.4], latency: 250ms}
  - {from: 1900ms, until: 2070ms, pause: peers.4}
check: CHECKS
""",
    # Responses of at most 2 entries: a client's read up to its update's index takes several
    # RequestEntries responses, at most 5 unconfirmed (explore's shrunk find for
    # unbounded-pipeline on scenarios/raft/explore/catch-up.yaml).
    "catch-up": """
protocol: raft
name: raft-test-catch-up
duration: 2900ms
nodes:
  peers: {role: peer, count: 1, config: {max_entries: 2}}
  clients: {role: client, count: 3, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 2400ms, limit: 42}
check: CHECKS
""",
    # One peer compacting every 10 entries; a client restarted after 14 updates reads its replica
    # again from index 0, below the snapshot (explore's shrunk find for skips-snapshot on
    # scenarios/raft/explore/catch-up.yaml).
    "compacted-reads": """
protocol: raft
name: raft-test-compacted-reads
duration: 2500ms
nodes:
  peers: {role: peer, count: 1, config: {max_entries: 2, snapshot_every: 10, snapshot_keep: 2}}
  clients: {role: client, count: 1, config: {op_timeout: 1s}}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 1800ms}
faults:
  - {at: 1s, crash: clients.0, restart_after: 50ms}
check: CHECKS
""",
    "quiet": """
protocol: raft
name: raft-test-quiet
duration: 3s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 1, config: {op_timeout: 1s}}
workload:
  - {nodes: clients, op: put, rate: 5/s, from: 300ms, until: 2s}
check: [live-after-heal: 1500ms]
""",
    # Compaction keeping entries: peer 2, cut off while the others compact, catches up by
    # InstallSnapshot; a client starting late reads the snapshot with RequestEntries.
    "compaction": """
protocol: raft
name: raft-test-compaction
duration: 3s
nodes:
  peers: {role: peer, count: 3, config: {snapshot_every: 20, snapshot_keep: 5, chunk_size: 128}}
  clients: {role: client, count: 2, config: {op_timeout: 2s}}
  late: {role: client, start: 2s}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 2500ms, keys: 8}
  - {nodes: late, op: get, rate: 5/s, from: 2200ms, until: 2500ms, keys: 8}
faults:
  - {from: 600ms, until: 1800ms, partition: [[peers.2], [peers.0, peers.1, clients, late]]}
check: CHECKS
""",
    # Peer 2 gets a snapshot in small, slow chunks after a partition and restarts in the middle
    # of the transfer: it answers the next chunk with offset 0 (a shorter cousin of
    # scenarios/raft/chaos/snapshot-restart.yaml).
    "snapshot-restart": """
protocol: raft
name: raft-test-snapshot-restart
duration: 3s
nodes:
  peers: {role: peer, count: 3, config: {snapshot_every: 20, snapshot_keep: 5, chunk_size: 16}}
  clients: {role: client, count: 2, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 1400ms, keys: 8}
faults:
  - {from: 500ms, until: 1500ms, partition: [[peers.2], [peers.0, peers.1, clients]]}
  - rule: {message: InstallSnapshot, delay: 20ms}
  - {at: 1900ms, crash: peers.2, restart_after: 50ms}
check: CHECKS
""",
    # The TTL of reqids is 1 s and a client's clock runs 3 s behind: the leader must refuse its
    # updates as expired (false, no third frame).
    "expiry": """
protocol: raft
name: raft-test-expiry
duration: 2s
nodes:
  peers: {role: peer, count: 3, config: {update_ttl: 1s}}
  clients: {role: client, count: 2, config: {op_timeout: 1s}}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 300ms, until: 1500ms}
faults:
  - {at: 200ms, clock_skew: clients.0, offset: -3s}
check: CHECKS
""",
    # Lost RequestEntries answers: a client reading the log sees a gap, stops the RPC (count 0)
    # and reads again.
    "gaps": """
protocol: raft
name: raft-test-gaps
duration: 3s
nodes:
  peers: {role: peer, count: 3, config: {max_entries: 2}}
  clients: {role: client, count: 3, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 20/s, from: 300ms, until: 2500ms}
  - {nodes: clients, op: get, rate: 10/s, from: 300ms, until: 2500ms}
faults:
  - rule: {message: RequestEntriesResponse, drop: 20%}
check: CHECKS
""",
    # StateBroadcast and the clients' RequestConfig / RequestBroadcastStateUrl: every client
    # subscribes, the watcher only follows the broadcast; the leader is paused while two more
    # subscribers start, so they ask a deposed leader for the URL; the last 1.5 s are idle.
    "broadcast": """
protocol: raft
name: raft-test-broadcast
duration: 3s
nodes:
  peers: {role: peer, count: 3}
  writer: {role: client, config: {subscribe: true, op_timeout: 1s}}
  watcher: {role: client, config: {subscribe: true}}
  late: {role: client, count: 2, start: 1050ms, config: {subscribe: true}}
workload:
  - {nodes: writer, op: put, rate: 10/s, from: 300ms, until: 1500ms}
faults:
  - {from: 1s, until: 1800ms, pause: leader}
check: CHECKS
""",
    # A peer of another cluster shares the endpoints (every peer list names it): its RequestVotes
    # reach the cluster's peers, which must not answer them (E-RAFT-10).
    "foreign": """
protocol: raft
name: raft-test-foreign
duration: 2s
nodes:
  peers: {role: peer, count: 3, config: {cluster: kv}}
  outsider: {role: peer, config: {cluster: other, outsider: true}}
  clients: {role: client, config: {cluster: kv, op_timeout: 1s}}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 300ms, until: 1500ms}
check: CHECKS
""",
    # The shipped exploration file (the leader's answers to the clients lost for 1.5 s: every
    # client waits on an update the log holds) with the fault explore draws to find no-checkpoint:
    # every peer down at once, so none knows the log's tail committed (E-RAFT-28).
    "whole-cluster-down": WHOLE_CLUSTER_DOWN,
    # Three clients write and read two keys; no fault at all.
    "reads": """
protocol: raft
name: raft-test-reads
duration: 3s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 3, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 300ms, until: 2500ms, keys: 2}
  - {nodes: clients, op: get, rate: 10/s, from: 300ms, until: 2500ms, keys: 2}
check: CHECKS
""",
}

# mutant, scenario, check that must fail, seeds to try; for commit-rule also the clause its
# verdict must name (which rule of commitment the mutant's behaviour broke)
CASES = [
    ("vote-twice", "elections", "vote-once", [1, 2, 3]),
    ("vote-twice", "elections", "election-safety", [1, 2, 3]),
    ("forget-vote", "votes", "vote-once", [1, 2]),
    ("skip-up-to-date", "stale", "leader-completeness", [1, 3, 4]),
    ("volatile-log", "elections", "committed-durable", [1, 2]),
    ("commit-no-majority", "stale", "commit-rule", [1, 2], "raft.algorithm.commit-majority"),
    ("commit-old-term", "lagging", "commit-rule", [1, 2, 3], "raft.algorithm.commit-current-term"),
    ("keep-conflicts", "deposed", "state-machine-safety", [3, 4, 1]),
    ("wrong-prev-term", "stale", "log-matching", [1, 2]),
    ("accept-any-prev", "cut-off-answers", "log-matching", [7490]),
    ("ignores-entries-redirect", "slow-reads", "follows-entries-redirect", [295818]),
    ("unbounded-pipeline", "catch-up", "entries-pipeline", [1, 2, 3]),
    ("skips-snapshot", "compacted-reads", "entries-from-prev", [1, 2]),
    ("new-reqid-follow-up", "catch-up", "entries-follow-up", [1, 2]),
    ("ignore-higher-term", "deposed", "term-update", [1, 2, 3]),
    ("reapply-reqid", "retries", "update-once", [1, 2]),
    ("no-debounce", "retries", "commit-rule", [1, 2, 3], "raft.algorithm.commit-majority"),
    ("truncating-leader", "lagging", "leader-append-only", [1, 2]),
    ("apply-uncommitted", "deposed", "state-machine-safety", [1, 2, 3]),
    ("fixed-timeout", "quiet", "live-after-heal", [1]),
    ("no-checkpoint", "whole-cluster-down", "live-after-heal", [1]),
    ("local-read", "reads", "linearizable", [1, 2]),
    ("snapshot-ahead", "compaction", "snapshot-state", [1, 2]),
    ("ignores-resume-offset", "snapshot-restart", "snapshot-resume", [1, 2]),
    # timing and ids, judged from the sender's own messages
    ("no-heartbeat", "stale", "leader-heartbeat", [1, 2]),
    ("slow-append-retry", "stale", "leader-heartbeat", [1, 2], "raft.rpc.timeout-bound"),
    ("no-retry", "stale", "leader-heartbeat", [1, 2]),
    ("same-message-id", "reads", "message-ids", [1, 2]),
    ("new-reqid-on-retry", "retries", "update-reqids", [1, 2], "raft.client.broken-leader-search"),
    ("reuse-reqid", "reads", "update-reqids", [1, 2]),
    ("never-expires", "expiry", "update-expiry", [1, 2]),
    ("expired-as-not-leader", "expiry", "update-expiry", [1, 2], "raft.update.expired"),
    ("entries-uncommitted", "reads", "commit-rule", [1, 2], "raft.entries.committed-only"),
    ("ignores-stop", "gaps", "entries-stop", [2, 3]),
    # what a peer publishes on its PUB, and the clients' SHOULDs (harness/checkers/raft/broadcasts.py, clients.py)
    ("silent-broadcast", "broadcast", "broadcast-heartbeat", [1, 2], "raft.broadcast.pub-socket"),
    ("no-broadcast-heartbeat", "broadcast", "broadcast-heartbeat", [1, 2]),
    ("no-broadcast-on-apply", "broadcast", "broadcast-entries", [1, 2]),
    ("stale-last-applied", "broadcast", "broadcast-state", [1, 2]),
    ("broadcast-unapplied", "broadcast", "broadcast-state", [1, 2]),
    ("url-before-leader", "broadcast", "broadcast-url", [1, 2]),
    ("ignores-missing-url", "broadcast", "broadcast-url", [1, 2, 3], "raft.broadcast.config-on-missing-url"),
    ("no-config", "broadcast", "request-config", [1, 2]),
    ("no-repeat-config", "broadcast", "repeat-config", [1, 2]),
    ("any-cluster", "foreign", "cluster-ident", [1, 2]),
]


def scenario(name: str):
    return parse_scenario(SCENARIOS[name].replace("CHECKS", ALL_CHECKS), f"{name}.yaml")


def run(name: str, seed: int, mutant: str | None = None) -> RunResult:
    sc = scenario(name)
    factories = {}
    if mutant is not None:
        role, factory, _ = MUTANTS[mutant]
        factories = {n: factory for n in sc.node_names if sc.role_of(n) == role}
    return run_sim(sc, seed, factories=factories)


def verdict(result: RunResult, check: str):
    return next(v for v in result.verdicts if v.check == check)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}->{c[2]}" for c in CASES])
def test_the_check_catches_the_mutant(case: tuple) -> None:
    mutant, name, check, seeds = case[:4]
    clause = case[4] if len(case) > 4 else package("raft").checks[check].clause
    for seed in seeds:
        v = verdict(run(name, seed, mutant), check)
        if not v.ok:
            assert v.evidence, f"{check} failed {mutant} without evidence"
            assert v.clause == clause
            assert v.level == package("raft").checks[check].checker.level  # SHOULD for an opt-in check
            return
    pytest.fail(f"{check} passed the {mutant} mutant on seeds {seeds}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_reference_peers_pass_every_check_of_the_mutant_scenarios(name: str) -> None:
    seeds = sorted({c[3][0] for c in CASES if c[1] == name})[:2]
    for seed in seeds:
        r = run(name, seed)
        assert r.ok, (seed, [(v.check, v.detail) for v in r.failed])


def test_every_mutant_names_a_catalogued_clause_and_has_a_case() -> None:
    ids = {c.id for c in catalogue("raft")}
    assert {c[0] for c in CASES} == set(MUTANTS) - set(SUITE_ONLY)
    for name, (role, _, clause) in MUTANTS.items():
        assert role in ("peer", "client") and clause in ids, name


def test_only_the_linearizable_check_sees_a_client_that_reads_its_own_replica() -> None:
    """The local-read client breaks nothing the peers do: every other check passes it, on the
    seed where linearizable fails it."""
    result = run("reads", 1, "local-read")
    failed = {v.check for v in result.verdicts if not v.ok}
    assert failed == {"linearizable"}, failed
    v = verdict(result, "linearizable")
    assert "cannot be explained" in v.detail and v.evidence[0]["minimal"]


def test_every_raft_check_has_a_mutant_it_catches() -> None:
    caught = {c[2] for c in CASES}
    assert caught == set(package("raft").checks)
