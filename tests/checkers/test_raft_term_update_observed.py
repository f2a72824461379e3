"""term-update on sends the chaos proxy saw (``via`` proxy, harness.live_observe): compared only
with the terms taken in on the same connection, since ZeroMQ may put a message handed over
earlier on the wire of another connection much later."""

from __future__ import annotations

from harness.checkers.base import RECV, SEND, VIA_PROXY, Observer
from harness.checkers.raft.elections import TermUpdate
from harness.protocols import codec

RAFT = codec("raft")
FROM_A = b"\x00id-a"


def vote(term: int, mid: int) -> list[bytes]:
    return RAFT.encode("RequestVote", {"message_id": mid, "cluster": b"", "peer_id": "a", "term": term,
                                       "last_log_index": 0, "last_log_term": 0})


def answer(term: int, mid: int) -> list[bytes]:
    return RAFT.encode("RequestVoteResponse", {"message_id": mid, "term": term, "vote_granted": False})


def judge(via: str, late_on_router: bool) -> list[str]:
    """Peer b answers a's RequestVote of term 8 on its ROUTER, then a RequestVote of term 4 of its
    own leaves on its DEALER to c (handed over before, held by ZeroMQ) — and, if asked, b answers
    a's older request of term 4 on the ROUTER with term 4 after that."""
    check = TermUpdate()
    obs = Observer([check], RAFT, {"a": "peer", "b": "peer", "c": "peer"})
    obs.emit(1, "b", RECV, socket="router", frames=[FROM_A, *vote(8, 1)], via=via)
    obs.emit(2, "b", SEND, socket="router", frames=[FROM_A, *answer(8, 1)], via=via)
    obs.emit(300_000_000, "b", SEND, socket="dealer:c", frames=vote(4, 7), via=via)
    if late_on_router:
        obs.emit(300_000_001, "b", RECV, socket="router", frames=[FROM_A, *vote(4, 2)], via=via)
        obs.emit(300_000_002, "b", SEND, socket="router", frames=[FROM_A, *answer(4, 2)], via=via)
    (verdict,) = check.finish(400_000_000)
    return [] if verdict.ok else [verdict.detail]


def test_a_late_send_on_another_connection_is_no_violation_when_seen_by_the_proxy() -> None:
    assert judge(VIA_PROXY, late_on_router=False) == []


def test_the_same_order_from_a_probe_is_a_violation() -> None:
    (detail,) = judge("", late_on_router=False)
    assert "b sent RequestVote with term 4 after taking in term 8" in detail


def test_a_lower_term_on_the_same_connection_is_still_caught_from_the_proxy() -> None:
    (detail,) = judge(VIA_PROXY, late_on_router=True)
    assert "b sent RequestVoteResponse with term 4 after taking in term 8 on the same connection" in detail
