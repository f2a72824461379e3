"""The opt-in client checks (harness/checkers/raft/clients.py) act only on the first answer to a
client's latest request, as a client does: a late or repeated answer to an earlier one (a
duplicate, a reordered message) is dropped by the client and must not be held against it.
The mutants they catch are in tests/checkers/test_raft_checkers.py."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import RECV, SEND, Event
from harness.checkers.raft.clients import BroadcastUrl, RepeatConfig
from harness.protocols import codec
from harness.protocols.raft import NULL

RAFT = codec("raft")
MS = 1_000_000


def ev(t_ms: int, kind: str, name: str, **fields: Any) -> Event:
    return Event(t_ms * MS, "c", "client", kind, "dealer", RAFT.encode(name, fields), name, codec=RAFT)


def rid(n: int) -> bytes:
    return n.to_bytes(12, "big")


def config(t: int, n: int) -> Event:
    return ev(t, SEND, "RequestConfig", reqid=rid(n))


def config_answer(t: int, n: int, leader: Any) -> Event:
    return ev(t, RECV, "RequestConfigResponse", reqid=rid(n), is_leader=False, leader_id=leader)


def url(t: int, n: int) -> Event:
    return ev(t, SEND, "RequestBroadcastStateUrl", reqid=rid(n))


def url_answer(t: int, n: int, address: str | None = None) -> Event:
    return ev(t, RECV, "RequestBroadcastStateUrlResponse", reqid=rid(n),
              **({"url": address} if address is not None else {}))


def failures(check: Any, events: list[Event], end_ms: int = 5000) -> list[str]:
    for e in events:
        check.on_event(e)
    return [v.detail for v in check.finish(end_ms * MS) if not v.ok]


def told_the_leader() -> list[Event]:
    return [config(0, 1), config_answer(1, 1, "p0")]


def test_a_late_answer_without_the_url_to_an_earlier_request_is_not_held_against_the_client() -> None:
    events = told_the_leader() + [url(2, 2), url_answer(3, 2), config(4, 3), config_answer(5, 3, "p0"),
                                  url(6, 4), url_answer(7, 2), url(800, 5)]  # (7: a duplicate of the answer to 2)
    assert failures(BroadcastUrl(), events) == []


def test_the_first_answer_without_the_url_to_the_latest_request_is() -> None:
    events = told_the_leader() + [url(2, 2), url_answer(3, 2), config(4, 3), config_answer(5, 3, "p0"),
                                  url(6, 4), url_answer(7, 4), url(800, 5)]
    [detail] = failures(BroadcastUrl(), events)
    assert "again after an answer without it" in detail


def test_a_repeated_null_answer_after_the_leader_was_named_starts_no_wait() -> None:
    events = [config(0, 1), config_answer(1, 1, NULL), config(300, 2), config_answer(301, 2, "p0"),
              config_answer(400, 1, NULL)]  # a duplicate of the first answer, after the leader was named
    assert failures(RepeatConfig(), events) == []


def test_a_null_answer_to_the_latest_request_left_unrepeated_fails() -> None:
    events = [config(0, 1), config_answer(1, 1, NULL), config(300, 2), config_answer(301, 2, NULL)]
    [detail] = failures(RepeatConfig(), events)
    assert "sent no RequestConfig for 4699.0 ms (bound 1000.0 ms)" in detail
