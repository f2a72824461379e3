"""The chaos proxy reports the messages of observed connections (fault_injection.observe): a send
per message read, a receive per copy handed on, none for a dropped one, the damaged frames for a
corrupted one, socket types and routing ids from the handshake; a subscription as a send of the
subscriber; nothing for unobserved pairs."""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest
import zmq

from fault_injection.naming import codec_malformed
from fault_injection.observe import SEEN_RECV, SEEN_SEND, SUBSCRIBED, UNSUBSCRIBED, Seen
from fault_injection.proxy import LinkSpec
from fault_injection.rules import RuleSet
from fault_injection.zmtp import Greeting, encode_command, encode_message, ready_command
from tests.fault_injection.conftest import xpub_and_sub
from tests.fault_injection.test_fi_proxy import PING, REGISTER, drain, request
from tests.fault_injection.zmtp_peers import RawServer, connect, handshake, recv_exactly, wait_until

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


def test_subscriptions_are_reported_as_the_subscribers_sends(ctx: zmq.Context, make_proxy: Callable[..., Any]) -> None:
    """A SUB's subscriptions and cancels on an observed connection reach ``on_seen`` as sends of
    the subscriber with the prefix as the one frame, on the connection's number; the XPUB's
    welcome is not reported, and nothing of them as received."""
    reports = Reports()
    proxy = make_proxy(observe=lambda a, b: True, on_seen=reports)
    xpub, sub = xpub_and_sub(ctx, proxy)
    sub.setsockopt(zmq.UNSUBSCRIBE, b"topic")
    assert xpub.recv_multipart() == [b"\x00topic"]
    assert wait_until(lambda: len(reports.seen) == 3), reports.seen
    assert [(s.kind, s.src, s.dst, s.msg_type, s.frames) for s in reports.seen] == [
        (SEEN_SEND, "sub", "pub", SUBSCRIBED, (b"W",)), (SEEN_SEND, "sub", "pub", SUBSCRIBED, (b"topic",)),
        (SEEN_SEND, "sub", "pub", UNSUBSCRIBED, (b"topic",))]
    assert {(s.src_type, s.dst_type) for s in reports.seen} == {("SUB", "XPUB")}
    assert len({s.connection for s in reports.seen}) == 1 and reports.seen[0].connection >= 0, "one connection"
    assert proxy.stats().observed_receives == 0
    sub.close(linger=0)
    xpub.close(linger=0)


def test_zmtp_31_subscribe_commands_are_reported_too(make_proxy: Callable[..., Any]) -> None:
    reports = Reports()
    proxy = make_proxy(observe=lambda a, b: True, on_seen=reports)
    with RawServer() as srv:
        ep = proxy.add_link(LinkSpec(srv.endpoint, binder="pub", connecter="sub"))
        proxy.start()
        client = connect(ep)
        client.sendall(Greeting(3, 1).encode() + ready_command({"Socket-Type": b"SUB"}))
        server = srv.accept()
        handshake(server, b"XPUB", minor=1)
        recv_exactly(client, 64 + len(ready_command({"Socket-Type": b"XPUB"})))
        subscriptions = encode_command("SUBSCRIBE", b"t") + encode_command("CANCEL", b"t")
        client.sendall(subscriptions)
        assert recv_exactly(server, len(subscriptions)) == subscriptions
        server.sendall(encode_message([b"t", b"x"]))
        assert wait_until(lambda: len(reports.seen) == 4), reports.seen
        client.close()
    subs = [s for s in reports.seen if s.msg_type.startswith("zmq.")]
    assert [(s.src, s.msg_type, s.frames) for s in subs] == [("sub", SUBSCRIBED, (b"t",)),
                                                             ("sub", UNSUBSCRIBED, (b"t",))]
    assert [s.kind for s in reports.seen if not s.msg_type.startswith("zmq.")] == [SEEN_SEND, SEEN_RECV]
