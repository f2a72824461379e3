"""A Raft leader whose sends nothing reports, judged from its followers' receipts: an external peer
beside the harness's in-process peers (live: no probe, and no chaos proxy between it and a probed
peer), whose AppendEntries show only as the others' RECV rows (docs/raft.md, "One external peer
beside the harness's peers").

Before, commit-rule, election-safety, leader-append-only, log-matching and vote-once read the
peers' sends only: such a leader committing without a majority, counting replicas of an older term,
changing an entry within its term, breaking log matching, or sharing its term with another leader,
and such a peer voting twice in a term, passed unseen (every simulation case below passes on the
old code). And with two external peers and the proxy
between them, an external leader whose majority was a probed follower's acknowledgement was
blamed for its commit index (the acknowledgement showed only as the follower's send).

Simulation: every event of the hidden peer is withheld from the checker (`Unprobed`)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checkers.base import RECV, SEND, VIA_PROXY, Event, Observer, Verdict
from harness.checkers.raft import CommitRule, ElectionSafety, LeaderAppendOnly, LogMatching, VoteOnce
from harness.checkers.raft.wire import Tracker, unseen_sender
from harness.composition import run_sim
from harness.protocols import codec
from harness.protocols.raft import LogEntry
from harness.registry import package
from harness.scenario import parse_scenario
from reference_nodes.raft.mutants import MUTANTS
from tests.checkers.test_raft_checkers import SCENARIOS
from tests.checkers.unprobed import Unprobed

RAFT = codec("raft")


# ---- synthetic wire ------------------------------------------------------------------------------
class Wire:
    """Events of a cluster whose peer ``lead`` is external: what it sends the probed peers shows as
    their receipts on their ROUTERs; ``proxy`` names the peers the chaos proxy sits between it and."""

    def __init__(self, check: Any, peers: list[str]) -> None:
        self.check = check
        self.obs = Observer([check], RAFT, {p: "peer" for p in peers})
        self.t = 0
        self.mid = 0

    def emit(self, node: str, kind: str, socket: str, frames: list[bytes], via: str = "") -> None:
        self.t += 1_000_000
        self.obs.emit(self.t, node, kind, socket=socket, frames=frames, via=via)

    def append(self, lead: str, to: str, prev: int, n: int, commit: int, term: int = 1,
               via: str = "", ack: bool = False) -> None:
        """``lead`` sends ``to`` entries prev+1..prev+n of ``term`` and commit index ``commit``:
        received by ``to``'s probe (or sent and handed on by the proxy: ``via``); ``ack``: the
        follower answers success."""
        self.mid += 1
        entries = [LogEntry(bytes(11) + bytes([prev + k + 1]), 0, term, b"x") for k in range(n)]
        frames = RAFT.encode("AppendEntries", {"message_id": self.mid, "cluster": b"", "peer_id": lead,
                                               "term": term, "prev_log_index": prev,
                                               "prev_log_term": term if prev else 0, "commit_index": commit,
                                               "entries": entries})
        answer = RAFT.encode("AppendEntriesResponse", {"message_id": self.mid, "term": term, "success": True})
        rid = b"\x00" + lead.encode()
        if via:
            self.emit(lead, SEND, f"dealer:{to}", frames, via)
        self.emit(to, RECV, "router", [rid, *frames], via)
        if ack:
            self.emit(to, SEND, "router", [rid, *answer], via)
            if via:
                self.emit(lead, RECV, f"dealer:{to}", answer, via)

    def verdicts(self) -> list[Verdict]:
        return self.check.finish(self.t)


def test_an_unseen_leader_announcing_what_no_majority_holds_fails_naming_it() -> None:
    w = Wire(CommitRule(peers=3), ["ext", "peers.0", "peers.1"])
    w.append("ext", "peers.0", 0, 1, 0, ack=True)
    w.append("ext", "peers.1", 0, 1, 1, ack=True)  # entry 1 is on ext and peers.0: a majority
    w.append("ext", "peers.0", 1, 1, 2)  # entry 2 on ext alone
    (v,) = w.verdicts()
    assert not v.ok and v.clause == "raft.algorithm.commit-majority", v.detail
    assert "ext, leader of term 1, sent commit index 2, held by no majority (acknowledged: [1, 1]" in v.detail
    assert v.evidence[0]["node"] == "peers.0" and "received by peers.0" in v.evidence[0]["seen_as"]


def test_an_unseen_leader_committing_over_a_majority_passes_and_the_verdict_says_it_was_judged() -> None:
    w = Wire(CommitRule(peers=3), ["ext", "peers.0", "peers.1"])
    w.append("ext", "peers.0", 0, 2, 0, ack=True)
    w.append("ext", "peers.1", 0, 2, 2)
    (v,) = w.verdicts()
    assert v.ok and "1 commit index advance(s) (1 seen only as their followers' receipts)" in v.detail, v.detail


def test_a_majority_only_unreported_peers_could_make_is_not_judged() -> None:
    """Five peers, two external (ext leads, peers.x runs no probe either): ext, peers.0 and an
    acknowledgement of peers.x the run may not show would be a majority. Without peers.0's,
    even peers.x's could not make one."""
    names = ["ext", "peers.0", "peers.1", "peers.2", "peers.x"]
    w = Wire(CommitRule(peers=5), names)
    for p in ("peers.0", "peers.1", "peers.2"):  # the probed peers, seen answering something
        w.append("ext", p, 0, 0, 0, ack=True)
    w.append("ext", "peers.0", 0, 1, 0, ack=True)
    w.append("ext", "peers.1", 0, 1, 1)
    (v,) = w.verdicts()
    assert v.ok and "1 announcement(s) of such leaders not judged" in v.detail, v.detail
    w.append("ext", "peers.1", 1, 1, 2)  # entry 2: ext alone, peers.4 perhaps: 2 of 5
    (v,) = w.verdicts()
    assert not v.ok and "sent commit index 2, held by no majority" in v.detail, v.detail


def test_a_proxy_seen_leader_counts_what_a_probed_follower_acknowledged() -> None:
    """Two external peers and one reference peer: the proxy reports ext's AppendEntries to
    peers.x (which never answers), peers.0's acknowledgement shows only as its own send. The old
    code blamed ext: "sent commit index 1, held by no majority (acknowledged: {})"."""
    w = Wire(CommitRule(peers=3), ["ext", "peers.x", "peers.0"])
    w.append("ext", "peers.0", 0, 1, 0, ack=True)
    w.mid += 1
    frames = RAFT.encode("AppendEntries", {"message_id": w.mid, "cluster": b"", "peer_id": "ext", "term": 1,
                                           "prev_log_index": 0, "prev_log_term": 0, "commit_index": 1,
                                           "entries": [LogEntry(bytes(12), 0, 1, b"x")]})
    w.emit("ext", SEND, "dealer:peers.x", frames, VIA_PROXY)
    (v,) = w.verdicts()
    assert v.ok, v.detail


def test_a_receipt_is_the_only_sight_of_a_send_when_neither_a_probe_nor_the_proxy_reports_it() -> None:
    tracker = Tracker()
    frames = RAFT.encode("AppendEntries", {"message_id": 1, "cluster": b"", "peer_id": "ext", "term": 1,
                                           "prev_log_index": 0, "prev_log_term": 0, "commit_index": 0})

    def ev(kind: str, node: str, via: str = "") -> Event:
        e = Event(1, node, "peer", kind, "router" if kind == RECV else "peer:peers.0",
                  [b"\x00ext", *frames] if kind == RECV else frames, "", None, RAFT)
        e.via = via
        return e

    msg = ev(RECV, "peers.0").decoded(1, channel="request")
    assert unseen_sender(tracker, ev(RECV, "peers.0"), msg) == "ext"
    assert unseen_sender(tracker, ev(RECV, "peers.0", VIA_PROXY), msg) is None  # the proxy reported the send
    tracker.classify(ev(SEND, "ext", VIA_PROXY))  # a send the proxy saw: still no probe of ext
    assert unseen_sender(tracker, ev(RECV, "peers.0"), msg) == "ext"
    tracker.classify(ev(SEND, "ext"))  # its own probe reports its sends: an in-process peer
    assert unseen_sender(tracker, ev(RECV, "peers.0"), msg) is None


def test_receipts_are_not_read_where_a_rule_may_corrupt_messages() -> None:
    w = Wire(CommitRule(peers=3, receipts=False), ["ext", "peers.0", "peers.1"])
    w.append("ext", "peers.0", 0, 1, 1)
    (v,) = w.verdicts()
    assert v.ok, v.detail
    text = SCENARIOS["stale"].replace("CHECKS", "[commit-rule, election-safety]")
    plain = parse_scenario(text)
    corrupt = parse_scenario(text.replace("faults:", "faults:\n  - rule: {message: AppendEntries, corrupt: 1%}"))
    checks = package("raft").checks
    assert checks["commit-rule"].factory(plain).kb.receipts
    assert not checks["commit-rule"].factory(corrupt).kb.receipts
    assert not checks["election-safety"].factory(corrupt).receipts
    assert not checks["vote-once"].factory(corrupt).receipts and checks["vote-once"].factory(plain).receipts


# ---- simulation: a broken peer whose events are withheld -------------------------------------------
def _judge(check: Any, name: str, hidden: str, seed: int, mutant: str | None) -> list[Verdict]:
    scenario = parse_scenario(SCENARIOS[name].replace("CHECKS", "[commit-rule]"))
    watcher = Unprobed(check, hidden)
    run_sim(scenario, seed, observers=[watcher], factories={hidden: MUTANTS[mutant][1]} if mutant else {})
    return watcher.finish(scenario.duration_ns)


# (checker, mutant, scenario, the hidden mutant, seed, what the failure says); each passed on the old code
CAUGHT = [
    (lambda: CommitRule(peers=3), "commit-no-majority", "stale", "peers.2", 1,
     "peers.2, leader of term 1, sent commit index"),
    (lambda: CommitRule(peers=3), "commit-no-majority", "deposed", "first", 1, "first, leader of term 1, sent commit"),
    (lambda: CommitRule(peers=5), "commit-old-term", "lagging", "peers.1", 1,
     "peers.1, leader of term 3, committed 45 by counting replicas of entry 45 of the earlier term 1"),
    (LeaderAppendOnly, "truncating-leader", "lagging", "peers.1", 2, "leader peers.1 of term 3 changed its entry"),
    (LogMatching, "wrong-prev-term", "stale", "peers.1", 1, "follows an entry of term"),
    (ElectionSafety, "vote-twice", "elections", "peers.2", 1, "term 1 has two leaders, peers.1 and peers.2"),
    (VoteOnce, "vote-twice", "elections", "peers.4", 1, "peers.4 voted for peers.2 and for peers.1 in term 1"),
]


@pytest.mark.parametrize("case", CAUGHT, ids=[f"{c[1]}-{c[3]}" for c in CAUGHT])
def test_a_broken_leader_seen_only_in_receipts_is_caught(case: tuple) -> None:
    make, mutant, name, hidden, seed, says = case
    failed = [v for v in _judge(make(), name, hidden, seed, mutant) if not v.ok]
    assert failed and says in failed[0].detail, [v.detail for v in failed]
    assert failed[0].evidence


@pytest.mark.parametrize("name,hidden", [("stale", "peers.2"), ("deposed", "first"), ("lagging", "first")])
def test_the_reference_leader_seen_only_in_receipts_passes(name: str, hidden: str) -> None:
    peers = 5 if name == "lagging" else 3
    checks = [CommitRule(peers=peers), LeaderAppendOnly(), LogMatching(), ElectionSafety(), VoteOnce()]
    scenario = parse_scenario(SCENARIOS[name].replace("CHECKS", "[commit-rule]"))
    watchers = [Unprobed(c, hidden) for c in checks]
    run_sim(scenario, 1, observers=watchers)
    verdicts = [v for w in watchers for v in w.finish(scenario.duration_ns)]
    assert all(v.ok for v in verdicts), [v.detail for v in verdicts if not v.ok]
    assert checks[0].from_receipts > 0, verdicts[0].detail  # it led, and was judged from receipts
