"""The chaos proxy reports the messages of observed connections (fault_injection.observe): a send
per message read, a receive per copy handed on, none for a dropped one, the damaged frames for a
corrupted one, socket types and routing ids from the handshake; nothing for unobserved pairs."""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

from fault_injection.naming import codec_malformed
from fault_injection.observe import SEEN_RECV, SEEN_SEND, Seen
from fault_injection.rules import RuleSet
from tests.fault_injection.test_fi_proxy import PING, REGISTER, drain, request
from tests.fault_injection.zmtp_peers import wait_until

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]


class Reports:
    """What ``on_seen`` was handed, from the proxy's thread."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.threads: set[str] = set()

    def __call__(self, seen: Seen) -> None:
        self.threads.add(threading.current_thread().name)
        self.seen.append(seen)

    def of(self, kind: str) -> list[Seen]:
        return [s for s in self.seen if s.kind == kind]


def test_sends_receives_drops_and_duplicates_are_reported(router_link: Callable[..., Any]) -> None:
    reports = Reports()
    rules = RuleSet.from_dicts([{"message": "REQUEST", "nth": 2, "drop": True},
                                {"message": "PING", "duplicate": True}])
    proxy, router, (dealer,) = router_link(observe=lambda a, b: True, on_seen=reports, rules=rules)
    dealer.send_multipart(REGISTER)
    assert router.recv_multipart() == [b"d0", *REGISTER]
    for k in range(4):
        dealer.send_multipart(request(k))
    router.send_multipart([b"d0", *PING])
    got = drain(router, 0.5)
    assert [f[1:] for f in got] == [request(0), request(2), request(3)]
    assert dealer.recv_multipart() == PING and dealer.recv_multipart() == PING
    assert wait_until(lambda: len(reports.seen) == 12), reports.seen
    sends, recvs = reports.of(SEEN_SEND), reports.of(SEEN_RECV)
    assert [list(s.frames) for s in sends] == [REGISTER, *(request(k) for k in range(4)), PING]
    assert [s.msg_type for s in sends] == ["REGISTER", "REQUEST", "REQUEST", "REQUEST", "REQUEST", "PING"]
    by_number = {s.number: s for s in sends}
    # the dropped request (the 2nd) has no receive, the duplicated PING two
    assert [by_number[r.number].frames for r in recvs] == [tuple(f) for f in (REGISTER, request(0), request(2),
                                                                               request(3), PING, PING)]
    up, down = sends[0], sends[-1]
    assert (up.src, up.dst, up.binder, up.src_type, up.dst_type) == ("d0", "router", "router", "DEALER", "ROUTER")
    assert (down.src, down.dst, down.src_type, down.dst_type) == ("router", "d0", "ROUTER", "DEALER")
    assert up.src_id == b"d0" and down.dst_id == b"d0", "the DEALER's routing id, from its READY"
    assert (up.src_socket, up.dst_socket) == ("backend", "frontend")
    assert all(s.time_ns >= 0 for s in reports.seen) and reports.threads == {"zmq-harness-proxy"}
    stats = proxy.stats()
    assert (stats.observed_sends, stats.observed_receives) == (6, 6)


def test_a_corrupted_message_is_received_damaged(router_link: Callable[..., Any]) -> None:
    reports = Reports()
    rules = RuleSet.from_dicts([{"message": "REQUEST", "corrupt": "truncate"}])
    proxy, router, (dealer,) = router_link(observe=lambda a, b: True, on_seen=reports, rules=rules, seed=3,
                                           malformed=codec_malformed("dcp"))
    dealer.send_multipart(request(7))
    damaged = router.recv_multipart()[1:]
    assert damaged != request(7)
    assert wait_until(lambda: len(reports.seen) == 2)
    send, recv = reports.seen
    assert list(send.frames) == request(7), "the sender sent the true message"
    assert list(recv.frames) == damaged and recv.number == send.number, "the receiver got the damaged one"


def test_unobserved_pairs_are_not_reported(router_link: Callable[..., Any]) -> None:
    reports = Reports()
    proxy, router, (dealer,) = router_link(observe=lambda a, b: a == "nobody", on_seen=reports)
    dealer.send_multipart(REGISTER)
    assert router.recv_multipart() == [b"d0", *REGISTER]
    router.send_multipart([b"d0", *PING])
    assert dealer.recv_multipart() == PING
    assert reports.seen == [] and proxy.stats().observed_sends == 0


def test_a_failing_consumer_stops_the_reports_not_the_proxy(router_link: Callable[..., Any]) -> None:
    def broken(seen: Seen) -> None:
        raise RuntimeError("consumer bug")

    proxy, router, (dealer,) = router_link(observe=lambda a, b: True, on_seen=broken)
    for _ in range(2):
        dealer.send_multipart(REGISTER)
        assert router.recv_multipart() == [b"d0", *REGISTER]
    assert proxy.on_seen is None
