"""Raft responses carry no type of their own: the chaos proxy names one by the request it
answers, seen on the same connection (fault_injection.naming.codec_classifier). Before, every
response was named RequestVoteResponse (the codec's first candidate), so a rule on
AppendEntriesResponse never matched one live and a rule on RequestVoteResponse hit them all:
in lossy.yaml live, 556 responses went by that name against 2 RequestVotes."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import zmq

from fault_injection.naming import codec_classifier
from fault_injection.rules import RuleSet
from harness.protocols import codec

RAFT = codec("raft")


def vote(mid: int) -> list[bytes]:
    return RAFT.encode("RequestVote", {"message_id": mid, "cluster": b"c", "peer_id": "a", "term": 2,
                                       "last_log_index": 0, "last_log_term": 0})


def vote_answer(mid: int) -> list[bytes]:
    return RAFT.encode("RequestVoteResponse", {"message_id": mid, "term": 2, "vote_granted": True})


def append(mid: int) -> list[bytes]:
    return RAFT.encode("AppendEntries", {"message_id": mid, "cluster": b"c", "peer_id": "a", "term": 2,
                                         "prev_log_index": 0, "prev_log_term": 0, "commit_index": 0, "entries": []})


def append_answer(mid: int) -> list[bytes]:
    return RAFT.encode("AppendEntriesResponse", {"message_id": mid, "term": 2, "success": True})


MID, OTHER = 7, 9


def test_a_response_is_named_by_the_request_it_answers_on_its_connection() -> None:
    classify = codec_classifier("raft")
    assert classify(append(MID), (1, "to_binder")) == "AppendEntries"
    assert classify(append_answer(MID), (1, "to_connecter")) == "AppendEntriesResponse"
    assert classify(append_answer(MID), (2, "to_connecter")) == "RequestVoteResponse", "another connection's"
    assert classify(append_answer(OTHER), (1, "to_connecter")) == "RequestVoteResponse", "no such request"
    assert classify(append_answer(MID)) == "RequestVoteResponse", "without a conversation: the first candidate"
    assert classify(vote(MID), (3, "to_binder")) == "RequestVote"
    assert classify(vote_answer(MID), (3, "to_connecter")) == "RequestVoteResponse"


@pytest.mark.live
@pytest.mark.timeout(30)
def test_the_proxy_drops_append_entries_responses_and_passes_vote_answers(router_link: Callable[..., Any]) -> None:
    rules = RuleSet.from_dicts([{"message": "AppendEntriesResponse", "drop": True}])
    proxy, router, (dealer,) = router_link(rules=rules, classify=codec_classifier("raft"))
    dealer.send_multipart(append(MID))
    dealer.send_multipart(vote(OTHER))
    for _ in range(2):
        frames = router.recv_multipart()
        router.send_multipart([frames[0], *(append_answer(MID) if frames[1:] == append(MID) else vote_answer(OTHER))])
    assert dealer.recv_multipart() == vote_answer(OTHER)
    assert dealer.poll(300, zmq.POLLIN) == 0, "the AppendEntries answer was dropped"
    dropped = [(e.kind, e.msg_type) for e in proxy.drain_events() if e.kind == "drop"]
    assert dropped == [("drop", "AppendEntriesResponse")]
