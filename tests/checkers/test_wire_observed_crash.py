"""wire-conformance and a killed external process: the chaos proxy reports what it read from the
process's connection, and may read its last answer after the crash event (the bytes were on their
way when the kill came). The answer then still answers the request the process received before:
a crash of an external node is forgotten at its restart, not at once.

Found with the reference peer as the external command of five-peers-everything: the leader's
"committed" answer to an update ([reqid, true, 48]) came through 0.5 ms after ``crash: leader``,
was judged as a message answering nothing, and a RequestUpdateResponse cannot be told from the
other responses on its own: "unidentified message", raft.wire.grammar, in both runs of seed 1."""

from __future__ import annotations

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Event
from harness.checkers.wire import WireConformance
from harness.checkers.wire_receipts import ExternalSenders
from harness.node import SocketSpec, SocketType
from harness.protocols import codec
from harness.registry import package

REQID = bytes.fromhex("6b09db557346c8b415906bc5")
ROUTING = b"\x00\x00\x00\x01\x82"
UPDATE = [REQID, b"=", b"\x81\xa2op\xa3get"]


def judge(answer: list[bytes], crash_between: bool = True, restart_between: bool = False) -> tuple[bool, str]:
    pkg = package("raft")
    checker = WireConformance("raft", "strict", pkg.capture, external=ExternalSenders({"peers.2": "peer"}))
    checker.on_sockets("peers.2", [SocketSpec("router", SocketType.ROUTER, bind=("tcp://127.0.0.1:9",))])
    checker.on_sockets("clients.0", [SocketSpec("dealer", SocketType.DEALER, connect=("tcp://127.0.0.1:9",))])
    events = [Event(1, "clients.0", "client", SEND, "dealer", list(UPDATE), "RequestUpdate"),
              Event(2, "peers.2", "peer", RECV, "router", [ROUTING, *UPDATE], "RequestUpdate", via="proxy")]
    if crash_between:
        events.append(Event(3, "peers.2", "peer", CRASH))
    if restart_between:
        events.append(Event(4, "peers.2", "peer", RESTART))
    events.append(Event(5, "peers.2", "peer", SEND, "router", [ROUTING, *answer], via="proxy"))
    for ev in events:
        ev.codec = codec("raft", "strict")
        checker.on_event(ev)
    (verdict,) = checker.finish(10)
    return verdict.ok, verdict.detail


def test_an_answer_the_proxy_reads_after_the_kill_answers_the_request_before_it() -> None:
    assert judge([REQID, b"\x01", b"\x30"]) == judge([REQID, b"\x01", b"\x30"], crash_between=False)
    ok, detail = judge([REQID, b"\x01", b"\x30"])
    assert ok, detail


def test_a_malformed_answer_after_the_kill_is_still_caught() -> None:
    ok, detail = judge([REQID, b"\x01", b"\x30", b"extra"])
    assert not ok and "RequestUpdateResponse" in detail, detail


def test_after_the_restart_the_new_process_owes_nothing() -> None:
    ok, detail = judge([REQID, b"\x01", b"\x30"], restart_between=True)
    assert not ok and "unidentified message" in detail, detail
