"""``leader-heartbeat`` of external Raft peers, judged from their requests as the chaos proxy
read them (harness/checkers/raft/timing.py): the bound gets the external slack; a gap is not
judged across a follower's absence or a partition (its requests wait unread); an external peer
the proxy does not observe is not judged. The live proof with mutant peers as the external
processes is in tests/live/test_raft_external_heartbeat.py."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, PAUSE, RESTART, RESUME, SEND, VIA_PROXY, Observer, Verdict
from harness.checkers.raft.timing import LeaderHeartbeat
from harness.composition import build_checkers
from harness.protocols import codec
from harness.scenario import parse_scenario

RAFT = codec("raft")
MS = 1_000_000
PEERS = {"a": "peer", "b": "peer", "c": "peer"}


def append(mid: int, term: int = 2) -> list[bytes]:
    return RAFT.encode("AppendEntries", {"message_id": mid, "cluster": b"", "peer_id": "a", "term": term,
                                         "prev_log_index": 0, "prev_log_term": 0, "commit_index": 0, "entries": []})


def judge(events: list[tuple[int, str, str, str]], end_ms: int, **params: Any) -> Verdict:
    """(time ms, node, kind, follower): an AppendEntries of a to the follower as the proxy read it,
    or a lifecycle event of ``node``."""
    check = LeaderHeartbeat(election_min={"a": 200}, external=frozenset({"a", "b", "c"}), **params)
    obs = Observer([check], RAFT, PEERS)
    for i, (t, node, kind, to) in enumerate(events):
        if kind == SEND:
            obs.emit(t * MS, node, SEND, socket=f"dealer:{to}", frames=append(i), data={"peer": to, "connection": 1},
                     via=VIA_PROXY)
        else:
            obs.emit(t * MS, node, kind)
    (v,) = check.finish(end_ms * MS)
    return v


def beats(*times: int, to: str = "b") -> list[tuple[int, str, str, str]]:
    return [(t, "a", SEND, to) for t in times]


def test_an_external_leader_silent_past_its_bound_and_slack_fails() -> None:
    """Bound: ELECTION_TIMEOUT_MIN / 2 = 100 ms, + 90 ms of tolerance, + half the bound (50 ms)
    for the proxy's view (correct external peers showed gaps of up to 196 ms)."""
    ok = judge(beats(0, 100, 340, 400), end_ms=450)
    assert ok.ok and "external peers judged from their requests as the chaos proxy read them" in ok.detail, ok.detail
    v = judge(beats(0, 100, 350, 400), end_ms=450)
    assert not v.ok and v.clause == "raft.algorithm.leader-heartbeat", v.detail
    assert "a, leader of term 2, sent b no AppendEntries or InstallSnapshot for 250.0 ms before the next" in v.detail
    assert "+ 50 ms: seen by the proxy" in v.detail
    assert not judge(beats(0, 100, 300, 400), end_ms=450, external_slack_ms=0).ok  # the slack is a setting


def test_a_gap_across_a_follower_s_absence_or_a_partition_is_not_judged() -> None:
    away = ([(150, "b", CRASH, ""), (900, "b", RESTART, "")], [(150, "b", PAUSE, ""), (900, "b", RESUME, "")])
    for lifecycle in away:
        events = sorted(beats(0, 100, 1300, 1400) + lifecycle)
        assert judge(events, end_ms=1500).ok
        # the same silence toward another follower that stayed up fails
        assert not judge(sorted(beats(0, 100, 1300, 1400, to="c") + lifecycle), end_ms=1500).ok
    assert judge(beats(0, 100, 1300, 1400), end_ms=1500, partitions=((200 * MS, 700 * MS),)).ok
    assert not judge(beats(0, 100, 1300, 1400), end_ms=1500, partitions=((1400 * MS, 1450 * MS),)).ok  # later
    # long after the follower came back, a gap is judged again
    assert not judge(sorted(beats(0, 100, 1300, 1400, 2000) + [(150, "b", CRASH, ""), (900, "b", RESTART, "")]),
                     end_ms=2100).ok


def test_an_external_peer_not_observed_is_not_judged() -> None:
    check = LeaderHeartbeat(election_min={"a": 200})
    obs = Observer([check], RAFT, PEERS)
    for i, t in enumerate((0, 900)):
        obs.emit(t * MS, "a", SEND, socket="dealer:b", frames=append(i), data={"peer": "b"}, via=VIA_PROXY)
    assert check.finish(1000 * MS)[0].ok


FILE = """protocol: raft
name: t
duration: 2s
nodes:
  peers: {role: peer, count: 3, command: "p {endpoint}"}
FAULTS
check: [leader-heartbeat]
"""


def checker(text: str) -> LeaderHeartbeat:
    (c,) = [c for c in build_checkers(parse_scenario(text, "t.yaml")) if c.name == "leader-heartbeat"]
    return c  # type: ignore[return-value]


def test_the_external_peers_judged_are_those_the_proxy_observes() -> None:
    c = checker(FILE.replace("FAULTS", "faults:\n  - {from: 500ms, until: 1s, partition: [[peers.0], [rest]]}"))
    assert c.external == {"peers.0", "peers.1", "peers.2"} and c.blind == [(500 * MS, 1500 * MS)]
    assert not checker(FILE.replace("FAULTS", "live: {observe: false}")).external
    one = FILE.replace('count: 3, command: "p {endpoint}"}', 'count: 2}\n  outside: {role: peer, command: "p"}')
    c = checker(one.replace("FAULTS", ""))
    assert not c.external  # one external peer: the proxy stands between no two of them
    v = c.finish(0)[0]
    assert "not judged: the gaps between their AppendEntries (the chaos proxy's read time" in v.detail
