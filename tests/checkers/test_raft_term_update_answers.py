"""term-update on what the chaos proxy saw of external peers (``via="proxy"``), across
connections: the proxy's read time bounds a send from above only, its hand-on time bounds a
receipt from below, so an answer on one connection is judged against the terms its peer had
answered (on any connection) before its request was handed on; a request is not judged against
terms taken in on other connections (tests/checkers/test_raft_term_update_observed.py: the same
connection).

The false alarm this guards against (seen in tests/test_live_observe.py under load): peers.1's
RequestVote of term 1 to a peer that had not started yet waited in its ZeroMQ queue, and was read
after peers.1 had answered requests of term 8."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import RECV, SEND, VIA_PROXY, Event
from harness.checkers.raft.elections import TermUpdate
from harness.protocols import codec

RAFT = codec("raft")
MS = 1_000_000


def ev(t_ms: int, node: str, kind: str, socket: str, name: str, via: str = VIA_PROXY, route: bytes = b"",
       **fields: Any) -> Event:
    frames = RAFT.encode(name, fields)
    return Event(t_ms * MS, node, "peer", kind, socket, ([route] if route else []) + frames, name, codec=RAFT,
                 via=via)


def vote(msg_id: int, term: int) -> dict[str, Any]:
    return {"message_id": msg_id, "cluster": b"c", "peer_id": "x", "term": term, "last_log_index": 0,
            "last_log_term": 0}


def judge(events: list[Event]) -> list[str]:
    check = TermUpdate()
    for e in events:
        check.on_event(e)
    return [v.detail for v in check.finish(10_000 * MS) if not v.ok]


def took_in_term_8(via: str) -> list[Event]:
    """peers.1 answers a RequestVote of term 8 from peers.0 on its ROUTER."""
    return [ev(100, "peers.1", RECV, "router", "RequestVote", via, route=b"p0", **vote(8008, 8)),
            ev(101, "peers.1", SEND, "router", "RequestVoteResponse", via, route=b"p0", message_id=8008, term=8,
               vote_granted=True)]


def test_a_request_the_proxy_read_late_is_not_judged_against_earlier_answers() -> None:
    late = ev(900, "peers.1", SEND, "dealer:peers.2", "RequestVote", **vote(1001, 1))
    assert judge(took_in_term_8(VIA_PROXY) + [late]) == []  # before: "sent RequestVote with term 1 after ... term 8"


def test_the_same_order_from_a_probe_is_still_a_violation() -> None:
    late = ev(900, "peers.1", SEND, "dealer:peers.2", "RequestVote", via="", **vote(1001, 1))
    [detail] = judge(took_in_term_8("") + [late])
    assert "sent RequestVote with term 1 after taking in term 8" in detail


def test_an_answer_to_a_request_handed_on_after_a_term_was_taken_in_is_judged() -> None:
    request = ev(300, "peers.1", RECV, "router", "RequestVote", route=b"p2", **vote(5005, 5))
    answer = ev(301, "peers.1", SEND, "router", "RequestVoteResponse", route=b"p2", message_id=5005, term=5,
                vote_granted=False)
    [detail] = judge(took_in_term_8(VIA_PROXY) + [request, answer])
    assert "sent RequestVoteResponse with term 5 after taking in term 8" in detail


def test_an_answer_to_a_request_handed_on_before_the_term_was_taken_in_is_not() -> None:
    # the request of term 5 was handed on at 50 ms, before the term-8 answer was read: the peer may
    # have answered it first, and its answer waited in its queue
    request = ev(50, "peers.1", RECV, "router", "RequestVote", route=b"p2", **vote(5005, 5))
    answer = ev(301, "peers.1", SEND, "router", "RequestVoteResponse", route=b"p2", message_id=5005, term=5,
                vote_granted=False)
    assert judge([request] + took_in_term_8(VIA_PROXY) + [answer]) == []


def append(msg_id: int, term: int) -> dict[str, Any]:
    return {"message_id": msg_id, "cluster": b"c", "peer_id": "x", "term": term, "prev_log_index": 0,
            "prev_log_term": 0, "commit_index": 0, "entries": []}


def cached_reply_after_term_8(via: str, replayed_term: int = 5) -> list[Event]:
    """peers.1 answers an AppendEntries of term 5 from p0, takes in term 8 from peers.0's vote
    request, then gets the AppendEntries again (a retry, same id and bytes) and answers it."""
    request = append(3, 5)
    first = dict(message_id=3, term=5, success=True, conflict_index=None, conflict_term=None)
    again = dict(first, term=replayed_term) if replayed_term != 5 else first
    return [ev(50, "peers.1", RECV, "router", "AppendEntries", via, route=b"p0", **request),
            ev(51, "peers.1", SEND, "router", "AppendEntriesResponse", via, route=b"p0", **first),
            *took_in_term_8(via),
            ev(300, "peers.1", RECV, "router", "AppendEntries", via, route=b"p0", **request),
            ev(301, "peers.1", SEND, "router", "AppendEntriesResponse", via, route=b"p0", **again)]


def test_a_reply_replayed_from_the_debounce_cache_is_not_judged_again() -> None:
    # E-RAFT-04: the responder may answer a repeated id from a cache of its last reply;
    # node-zmq-raft replays its last AppendEntries reply whatever its term is now
    for via in (VIA_PROXY, ""):
        check = TermUpdate()
        for e in cached_reply_after_term_8(via):
            check.on_event(e)
        [verdict] = check.finish(10_000 * MS)
        assert verdict.ok, verdict.detail
        assert "1 replayed response(s) not judged again" in verdict.detail


def test_a_new_answer_to_a_repeated_request_behind_the_term_is_still_judged() -> None:
    # not the cached bytes: the peer answered the repeat anew, with a term it had left behind
    for via in (VIA_PROXY, ""):
        [detail] = judge(cached_reply_after_term_8(via, replayed_term=6))
        assert "sent AppendEntriesResponse with term 6 after taking in term 8" in detail


def vote_answer(term: int, granted: bool) -> Event:
    return ev(301, "peers.1", SEND, "router", "RequestVoteResponse", route=b"p2", message_id=9009, term=term,
              vote_granted=granted)


def test_a_vote_request_of_a_higher_term_answered_with_the_own_term_and_no_vote_is_disregarded() -> None:
    # E-RAFT-34: node-zmq-raft's preventSpiralElections, the Raft thesis's disruptive-server rule
    request = ev(300, "peers.1", RECV, "router", "RequestVote", route=b"p2", **vote(9009, 9))
    check = TermUpdate()
    for e in took_in_term_8(VIA_PROXY) + [request, vote_answer(8, False)]:
        check.on_event(e)
    [verdict] = check.finish(10_000 * MS)
    assert verdict.ok and "1 RequestVote(s) of a higher term disregarded" in verdict.detail, verdict.detail


def test_a_vote_granted_in_a_lower_term_than_the_request_is_a_violation() -> None:
    request = ev(300, "peers.1", RECV, "router", "RequestVote", route=b"p2", **vote(9009, 9))
    [detail] = judge(took_in_term_8(VIA_PROXY) + [request, vote_answer(8, True)])
    assert "answered a RequestVote of term 9 with term 8" in detail


def test_an_append_entries_of_a_higher_term_is_never_disregarded() -> None:
    request = ev(300, "peers.1", RECV, "router", "AppendEntries", route=b"p2", **append(9009, 9))
    answer = ev(301, "peers.1", SEND, "router", "AppendEntriesResponse", route=b"p2", message_id=9009, term=8,
                success=False, conflict_index=None, conflict_term=None)
    [detail] = judge(took_in_term_8(VIA_PROXY) + [request, answer])
    assert "answered a AppendEntries of term 9 with term 8" in detail


def test_a_disregarded_vote_request_is_not_a_term_taken_in() -> None:
    # its term stays 8: a later answer of term 8 is no step back
    request = ev(300, "peers.1", RECV, "router", "RequestVote", route=b"p2", **vote(9009, 9))
    later = ev(500, "peers.1", RECV, "router", "RequestVote", route=b"p0", **vote(8010, 8))
    later_answer = ev(501, "peers.1", SEND, "router", "RequestVoteResponse", route=b"p0", message_id=8010, term=8,
                      vote_granted=False)
    assert judge(took_in_term_8(VIA_PROXY) + [request, vote_answer(8, False), later, later_answer]) == []
