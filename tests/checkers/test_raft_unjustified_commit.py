"""A leader that commits without a majority committed nothing: the checks built on commitment
must not blame the lawful peer that leads next for lacking or overwriting what it announced.

Before, leader-completeness, committed-durable and state-machine-safety took every commit index
on the wire as proof of commitment: when the broken leader (the mutant ``commit-no-majority``, or
the stand-in's ``--break commit-no-majority``) announced an index no majority held and a lawful
successor overwrote it, all three failed naming the successor (2 of 8 live mixed runs, and 3 of
40 simulated chaos runs with the mutant as the last peer). Now what only such an announcement
shows committed is set aside, and the state-machine-safety failure names its cause; a commit
that is lawful (a majority of the leader's term holds it, before or after the bad announcement,
or another peer shows it committed) still binds every later leader.

Synthetic wire: three probed peers; ``peers.2`` leads term 1, ``peers.1`` term 2."""

from __future__ import annotations

import os
from typing import Any

from harness.checkers.base import NOTE, RECV, SEND, Observer, Verdict
from harness.checkers.raft import CommitRule, CommittedDurable, LeaderCompleteness, StateMachineSafety
from harness.protocols import codec
from harness.protocols.raft import LogEntry
from harness.checkers.raft.wire import entry_id
from harness.composition import run_sim
from harness.scenario import load_scenario
from reference_nodes.raft.mutants import MUTANTS
from tests.checkers.test_raft_mixed_leader import Wire

RAFT = codec("raft")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS = ["peers.0", "peers.1", "peers.2"]


def entry(i: int, term: int) -> LogEntry:
    return LogEntry(bytes(11) + bytes([i]), 0, term, b"v%d-%d" % (i, term))


class Cluster:
    """Every check of commitment on one shared tracker, fed a probed cluster's events."""

    def __init__(self) -> None:
        self.checks = [CommitRule(peers=3), LeaderCompleteness(peers=3), CommittedDurable(peers=3),
                       StateMachineSafety()]
        for c in self.checks[1:]:
            c.join(self.checks[0])
        self.obs = Observer([self.checks[0]], RAFT, {p: "peer" for p in PEERS})
        self.t = 0
        self.mid = 0

    def emit(self, node: str, kind: str, socket: str = "", frames: list[bytes] | None = None, **kw: Any) -> None:
        self.t += 1_000_000
        self.obs.emit(self.t, node, kind, socket=socket, frames=frames, **kw)

    def append(self, lead: str, to: str, term: int, prev: tuple[int, int], entries: list[tuple[int, int]],
               commit: int, ack: bool = True) -> None:
        """``lead`` sends ``to`` entries (index, term) after ``prev`` (index, term) with ``commit``;
        ``ack``: ``to`` receives it and answers success, and ``lead`` receives the answer."""
        self.mid += 1
        frames = RAFT.encode("AppendEntries", {
            "message_id": self.mid, "cluster": b"", "peer_id": lead, "term": term, "prev_log_index": prev[0],
            "prev_log_term": prev[1], "commit_index": commit, "entries": [entry(i, t) for i, t in entries]})
        self.emit(lead, SEND, f"peer:{to}", frames)
        if ack:
            rid = b"\x00" + lead.encode()
            answer = RAFT.encode("AppendEntriesResponse", {"message_id": self.mid, "term": term, "success": True})
            self.emit(to, RECV, "router", [rid, *frames])
            self.emit(to, SEND, "router", [rid, *answer])
            self.emit(lead, RECV, f"peer:{to}", answer)

    def vote(self, node: str, term: int, last: tuple[int, int]) -> None:
        self.mid += 1
        self.emit(node, SEND, "peer:peers.0", RAFT.encode("RequestVote", {
            "message_id": self.mid, "cluster": b"", "peer_id": node, "term": term, "last_log_index": last[0],
            "last_log_term": last[1]}))

    def apply(self, node: str, entries: list[tuple[int, int]]) -> None:
        ids = [entry_id(RAFT.encode("AppendEntries", {
            "message_id": 1, "cluster": b"", "peer_id": "x", "term": t, "prev_log_index": 0, "prev_log_term": 0,
            "commit_index": 0, "entries": [entry(i, t)]})[-1]) for i, t in entries]
        self.emit(node, NOTE, msg_type="apply", data={"first": entries[0][0], "last": entries[-1][0],
                                                       "terms": [t for t, _ in ids], "crcs": [c for _, c in ids]})

    def broadcast(self, node: str, term: int, entries: list[tuple[int, int]]) -> None:
        """``node`` publishes these entries as committed (a StateBroadcast)."""
        self.emit(node, SEND, "pub", RAFT.encode("StateBroadcast", {
            "cluster": b"", "term": term, "last_applied": entries[-1][0], "entries": [entry(i, t) for i, t in entries]}))

    def verdicts(self) -> dict[str, Verdict]:
        return {v.check: v for c in self.checks for v in c.finish(self.t)}


def broken_leader_commits_three(c: Cluster) -> None:
    """peers.2, leader of term 1, commits 1-2 with peers.0's acknowledgement, then announces 3,
    which nobody else holds (peers.0 never receives it)."""
    c.vote("peers.2", 1, (0, 0))
    c.append("peers.2", "peers.0", 1, (0, 0), [(1, 1), (2, 1)], 0)
    c.append("peers.2", "peers.0", 1, (2, 1), [], 2)
    c.append("peers.2", "peers.0", 1, (2, 1), [(3, 1)], 3, ack=False)
    c.apply("peers.2", [(1, 1), (2, 1), (3, 1)])


def lawful_successor_overwrites_three(c: Cluster) -> None:
    """peers.1 is elected in term 2 without entry 3 and commits its own entry 3."""
    c.vote("peers.1", 2, (2, 1))
    c.append("peers.1", "peers.0", 2, (2, 1), [(3, 2)], 2)
    c.append("peers.1", "peers.0", 2, (3, 2), [], 3)
    c.apply("peers.1", [(3, 2)])
    c.apply("peers.0", [(3, 2)])


def test_a_lawful_successor_is_not_blamed_for_what_a_broken_leader_committed_without_a_majority() -> None:
    c = Cluster()
    broken_leader_commits_three(c)
    lawful_successor_overwrites_three(c)
    v = c.verdicts()
    assert not v["commit-rule"].ok and "peers.2, leader of term 1, sent commit index 3" in v["commit-rule"].detail
    for name in ("leader-completeness", "committed-durable"):
        assert v[name].ok, v[name].detail
        assert "1 index(es) announced committed without a majority by peers.2 (see commit-rule)" in v[name].detail
    sms = v["state-machine-safety"]  # two entries applied at index 3 is a violation, of peers.2's making
    assert not sms.ok and "caused by peers.2: it announced its own entry committed without a majority" in sms.detail
    assert "so peers.1 is not at fault" in sms.detail


def test_the_broken_leaders_own_acknowledgement_before_its_announcement_is_no_lawful_commit() -> None:
    """The mutant acknowledges an update (and publishes it) before any AppendEntries says so: what
    only it showed is set aside once commit-rule fails its announcement."""
    c = Cluster()
    c.vote("peers.2", 1, (0, 0))
    c.append("peers.2", "peers.0", 1, (0, 0), [(1, 1), (2, 1)], 0)
    c.append("peers.2", "peers.0", 1, (2, 1), [], 2)
    c.broadcast("peers.2", 1, [(3, 1)])  # before commit-rule has failed anything of peers.2
    c.append("peers.2", "peers.0", 1, (2, 1), [(3, 1)], 3, ack=False)
    c.broadcast("peers.2", 1, [(4, 1)])  # after: 4 shown committed by peers.2 alone, beyond any commit index
    c.append("peers.2", "peers.0", 1, (3, 1), [(4, 1)], 4, ack=False)
    c.vote("peers.1", 2, (2, 1))
    c.append("peers.1", "peers.0", 2, (2, 1), [(3, 2), (4, 2)], 2)
    v = c.verdicts()
    assert v["leader-completeness"].ok and v["committed-durable"].ok, (v["leader-completeness"].detail,
                                                                        v["committed-durable"].detail)
    assert "2 index(es) announced committed without a majority by peers.2" in v["leader-completeness"].detail


def test_a_majority_after_the_bad_announcement_makes_the_entry_committed() -> None:
    """peers.0 acknowledges entry 3 after all: it is committed (a majority of term 1 holds it) and
    binds the next leader, which lacks it."""
    c = Cluster()
    broken_leader_commits_three(c)
    c.append("peers.2", "peers.0", 1, (2, 1), [(3, 1)], 3)  # now held by peers.2 and peers.0
    lawful_successor_overwrites_three(c)
    v = c.verdicts()
    assert not v["leader-completeness"].ok
    assert "peers.1 became leader of term 2 with last log entry 2 (term 1), without committed entry 3" \
        in v["leader-completeness"].detail
    assert not v["committed-durable"].ok and "on peers.1" in v["committed-durable"].detail
    assert "caused by" not in v["state-machine-safety"].detail  # peers.2's entry was committed


def test_another_peer_showing_the_entry_committed_counts_in_either_order() -> None:
    """A StateBroadcast of peers.0 shows entry 3 committed: before or after peers.2's unjustified
    announcement, it binds the next leader (a broken announcer hides no lawful evidence)."""
    for before in (True, False):
        c = Cluster()
        if before:
            c.broadcast("peers.0", 1, [(3, 1)])
        broken_leader_commits_three(c)
        if not before:
            c.broadcast("peers.0", 1, [(3, 1)])
        lawful_successor_overwrites_three(c)
        v = c.verdicts()
        assert not v["leader-completeness"].ok and "without committed entry 3" in v["leader-completeness"].detail
        assert "announced committed without a majority" not in v["leader-completeness"].detail
        assert not v["committed-durable"].ok and "on peers.1" in v["committed-durable"].detail


def test_a_lawful_leader_losing_a_lawful_commit_is_still_blamed() -> None:
    """No broken peer: peers.2 commits 3 with a majority, peers.1 leads term 2 without it."""
    c = Cluster()
    c.vote("peers.2", 1, (0, 0))
    c.append("peers.2", "peers.0", 1, (0, 0), [(1, 1), (2, 1), (3, 1)], 0)
    c.append("peers.2", "peers.0", 1, (3, 1), [], 3)
    c.apply("peers.2", [(1, 1), (2, 1), (3, 1)])
    lawful_successor_overwrites_three(c)
    v = c.verdicts()
    assert v["commit-rule"].ok, v["commit-rule"].detail
    assert not v["leader-completeness"].ok and "peers.1 became leader of term 2" in v["leader-completeness"].detail
    assert not v["committed-durable"].ok and not v["state-machine-safety"].ok
    assert "caused by" not in v["state-machine-safety"].detail


def test_the_mutant_in_simulation_is_blamed_alone() -> None:
    """The mutant ``commit-no-majority`` as peers.2 of the leader-crash chaos file, seed 5: it
    acknowledges index 218 unjustified and crashes; peers.1 leads term 3 without it. Before,
    leader-completeness and committed-durable named peers.1, state-machine-safety no cause."""
    sc = load_scenario(os.path.join(ROOT, "scenarios", "raft", "chaos", "leader-crash.yaml"))
    result = run_sim(sc, 5, factories={"peers.2": MUTANTS["commit-no-majority"][1]})
    v = {r.check: r for r in result.verdicts}
    rule = " ".join(r.detail for r in result.verdicts if r.check == "commit-rule" and not r.ok)
    assert "peers.2, leader of term 2, sent commit index" in rule
    for name in ("leader-completeness", "committed-durable"):
        assert v[name].ok and "announced committed without a majority by peers.2" in v[name].detail, v[name].detail
    sms = v["state-machine-safety"]
    assert not sms.ok and "caused by peers.2" in sms.detail and "peers.1 is not at fault" in sms.detail


def test_an_announcement_commit_rule_could_not_judge_is_not_set_aside() -> None:
    """An external leader seen only in receipts, whose commit index a majority holds only with a
    follower the run has not heard from, is not judged (commit-rule counts it): not unjustified,
    so its commit still binds the next leader."""
    owner, lc = CommitRule(peers=3), LeaderCompleteness(peers=3)
    lc.join(owner)
    w = Wire(owner, ["ext", "peers.0", "peers.1"])
    w.append("ext", "peers.0", 0, 1, 1)  # no acknowledgement: only peers.1, unheard, could make the majority
    w.emit("peers.1", SEND, "peer:peers.0", RAFT.encode("RequestVote", {
        "message_id": 1, "cluster": b"", "peer_id": "peers.1", "term": 2, "last_log_index": 0, "last_log_term": 0}))
    w.emit("peers.1", SEND, "peer:peers.0", RAFT.encode("AppendEntries", {
        "message_id": 2, "cluster": b"", "peer_id": "peers.1", "term": 2, "prev_log_index": 0, "prev_log_term": 0,
        "commit_index": 0, "entries": []}))
    (rule,), (complete,) = w.verdicts(), lc.finish(w.t)
    assert rule.ok and "1 announcement(s) of such leaders not judged" in rule.detail, rule.detail
    assert owner.kb.committed[1].unjustified is None
    assert not complete.ok and "peers.1 became leader of term 2 with last log entry 0" in complete.detail


def test_an_unprobed_leaders_acknowledgement_beyond_every_commit_index_is_set_aside() -> None:
    """Live, beside reference peers: the external leader ``ext`` (no probe; what it sends shows as
    receipts) commits 2 without a majority, then acknowledges update 3 to a client before any
    AppendEntries of its reaches a peer with commit index 3 (it is restarted: rolling-restarts).
    The client's receipt names no sender; ext, whom commit-rule failed and no probe reports, is
    the only one that can have sent it. peers.1 leading next without 3 is not to blame."""
    owner, lc, cd = CommitRule(peers=3), LeaderCompleteness(peers=3), CommittedDurable(peers=3)
    lc.join(owner)
    cd.join(owner)
    w = Wire(owner, ["ext", "peers.0", "peers.1", "clients.0"])
    w.append("ext", "peers.0", 0, 1, 0, ack=True)
    w.append("ext", "peers.1", 0, 1, 1, ack=True)  # 1 on a majority, both followers heard from
    w.append("ext", "peers.0", 1, 1, 2)  # 2 announced, held by ext alone: commit-rule fails it
    reqid = bytes(11) + b"\x03"
    w.emit("clients.0", SEND, "dealer", RAFT.encode("RequestUpdate", {"reqid": reqid, "data": b"x"}))
    w.emit("clients.0", RECV, "dealer", RAFT.encode("RequestUpdateResponse", {"reqid": reqid, "success": True,
                                                                               "log_index": 3}))
    w.emit("peers.1", SEND, "peer:peers.0", RAFT.encode("RequestVote", {
        "message_id": 9, "cluster": b"", "peer_id": "peers.1", "term": 2, "last_log_index": 2, "last_log_term": 1}))
    w.emit("peers.1", SEND, "peer:peers.0", RAFT.encode("AppendEntries", {
        "message_id": 10, "cluster": b"", "peer_id": "peers.1", "term": 2, "prev_log_index": 2, "prev_log_term": 1,
        "commit_index": 1, "entries": [LogEntry(bytes(11) + b"\x09", 0, 2, b"y")]}))
    rule = [v for v in w.verdicts() if not v.ok]
    assert rule and "ext, leader of term 1, sent commit index 2, held by no majority" in rule[0].detail
    (complete,), (durable,) = lc.finish(w.t), cd.finish(w.t)
    assert complete.ok and durable.ok, (complete.detail, durable.detail)
    assert "2 index(es) announced committed without a majority by ext" in complete.detail
