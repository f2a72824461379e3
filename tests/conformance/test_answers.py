"""harness.conformance.answers: a typeless response decodes as the answer to its request."""

from __future__ import annotations

from harness.conformance.answers import Answers
from harness.protocols import codec

RAFT = codec("raft", "strict")


def test_a_response_decodes_as_the_answer_to_the_request_with_its_id() -> None:
    a = Answers(RAFT)
    vote = RAFT.encode("RequestVote", {"message_id": 7, "cluster": b"", "peer_id": "b", "term": 1,
                                       "last_log_index": 0, "last_log_term": 0})
    append = RAFT.encode("AppendEntries", {"message_id": 8, "cluster": b"", "peer_id": "b", "term": 1,
                                           "prev_log_index": 0, "prev_log_term": 0, "commit_index": 0})
    a.sent("dealer.b", "RequestVote", vote)
    a.sent("dealer.b", "AppendEntries", append)
    assert a.name("dealer.b", [b"\x07", b"\x01", b"\x01"]) == "RequestVoteResponse"
    assert a.name("dealer.b", [b"\x08", b"\x01", b"\x01"]) == "AppendEntriesResponse"
    # an id it never sent: the answer to its last request (so the case fails on the id)
    assert a.name("dealer.b", [b"\x09", b"\x01", b"\x01"]) == "AppendEntriesResponse"


def test_a_peer_that_asked_nothing_decodes_as_usual() -> None:
    a = Answers(RAFT)
    a.sent("dealer.b", "RequestVoteResponse", [b"\x01", b"\x01", b"\x01"])  # a response answers nothing
    assert a.name("dealer.b", [b"\x01"]) is None
    assert a.name("client.x", [b"\x01"]) is None
    assert Answers(codec("dcp", "strict")).answer_of == {}
