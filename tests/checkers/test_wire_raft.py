"""wire-conformance on Raft: responses carry no type, so each is judged as the answer to the
request its sender received on the same link (the request id it repeats); the reference passes
in both dialects, also with duplicated and lost messages, and a peer that sends a malformed
answer or request is caught. No shipped Raft mutant breaks the wire format (their faults are in
what the messages say), so the broken peers are made here from the reference."""

from __future__ import annotations

import pytest

from harness.registry import package
from tests.checkers.wire_helpers import broken, run, rewriting, wire

PEER = package("raft").roles["peer"].factory
SMALL = """
protocol: raft
name: raft-wire
duration: 2s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 1}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 400ms, until: 1800ms}
faults:
  - rule: {message: "AppendEntries*", drop: 5%}
  - rule: {message: "Request*", duplicate: 10%}
check: []
"""


@pytest.mark.parametrize("dialect", ["strict", "raft:zmq-raft"])
def test_reference_nodes_conform_in_each_dialect(dialect: str) -> None:
    (v,) = wire(run(SMALL, dialect=dialect))
    assert v.ok and v.clause == "raft.wire.grammar" and "all conform" in v.detail


def test_an_answer_is_judged_as_the_answer_to_its_request() -> None:
    """An AppendEntriesResponse without its success frame is [message id, term]: on its own a
    valid InstallSnapshotResponse, so only the request it answers tells that it is malformed."""
    bad = broken(run(SMALL, peer=rewriting(PEER, "AppendEntriesResponse", lambda f: f[:3])))  # routing id, id, term
    (v,) = bad.values()
    first = v.evidence[0]
    assert first["message"] == "AppendEntriesResponse" and "AppendEntriesResponse" in first["error"]
    assert first["node"].startswith("peers.")


def test_a_request_with_an_oversized_integer_is_caught() -> None:
    """The term of a RequestVote is a uint of at most 8 bytes."""
    bad = broken(run(SMALL, peer=rewriting(PEER, "RequestVote", lambda f: f[:4] + [b"\x01" * 9] + f[5:])))
    (v,) = bad.values()
    assert "RequestVote" in v.evidence[0]["error"] and v.evidence[0]["socket"] != "router"
