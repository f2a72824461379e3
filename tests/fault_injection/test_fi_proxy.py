"""The chaos proxy between real pyzmq sockets on loopback: it relays every socket pattern the
protocols use unchanged, and applies each kind of message rule to whole messages."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest
import zmq

from fault_injection.proxy import ChaosProxy, LinkSpec
from fault_injection.rules import RuleSet
from harness.protocols import codec
from fault_injection.zmtp import Greeting, encode_command, encode_message, ready_command
from tests.fault_injection.conftest import xpub_and_sub
from tests.fault_injection.zmtp_peers import RawServer, connect, handshake, recv_exactly, wait_until

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]

DCP = codec("dcp")
PING = DCP.encode("PING")
REGISTER = DCP.encode("REGISTER", {"service": "echo"})


def request(k: int) -> list[bytes]:
    return DCP.encode("REQUEST", {"service": "echo", "data": [str(k).encode()]})


def rules(*items: dict[str, Any]) -> RuleSet:
    return RuleSet.from_dicts(list(items))


def drain(sock: zmq.Socket, seconds: float = 0.5) -> list[list[bytes]]:
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if sock.poll(20):
            out.append(sock.recv_multipart())
    return out


WITH_RULE = rules({"message": "NO-SUCH-TYPE", "drop": True})  # touches every path: messages get looked at


@pytest.mark.parametrize("ruleset", [None, WITH_RULE], ids=["fast-path", "looked-at"])
def test_dealer_router_multipart_large_frames_and_identities_pass_unchanged(router_link: Callable[..., Any],
                                                                         ruleset: RuleSet | None) -> None:
    proxy, router, (dealer,) = router_link(rules=ruleset)
    messages = [[b"one"], [b""] * 6, [b"a" * 256, b"b" * 70_000, b"", b"c"], [b"x" * 3_000_000], PING]
    for m in messages:
        dealer.send_multipart(m)
    got = [router.recv_multipart() for _ in messages]
    assert got == [[b"d0", *m] for m in messages]
    for m in messages:
        router.send_multipart([b"d0", *m])
    assert [dealer.recv_multipart() for _ in messages] == messages
    stats = proxy.stats()
    assert stats.messages == 2 * len(messages) and stats.connections == 1
    if ruleset is not None:
        assert stats.by_type["PING"] == 2 and stats.by_type[""] == 2 * (len(messages) - 1)


def test_drop_by_message_type(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link(rules=rules({"message": "PING", "drop": True}))
    for _ in range(5):
        dealer.send_multipart(PING)
        dealer.send_multipart(REGISTER)
    assert drain(router) == [[b"d0", *REGISTER]] * 5
    events = proxy.drain_events()
    assert [(e.node, e.kind, e.fault, e.peer, e.msg_type, e.socket) for e in events] == \
        [("d0", "drop", "drop:rule-0", "router", "PING", "backend")] * 5


def test_delay_keeps_fifo_order(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link(rules=rules({"message": "PING", "delay": "300ms"}))
    dealer.send_multipart(REGISTER)
    router.recv_multipart()  # connected
    t0 = time.monotonic()
    dealer.send_multipart(PING)
    dealer.send_multipart(REGISTER)
    first, second = router.recv_multipart(), router.recv_multipart()
    took = time.monotonic() - t0
    assert (first[1:], second[1:]) == (PING, REGISTER), "the message behind a delayed one waits (FIFO)"
    assert took >= 0.29
    assert [e.detail for e in proxy.drain_events()] == ["+300000000ns"]


def test_duplicate(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link(rules=rules({"message": "REGISTER", "duplicate": 2}))
    dealer.send_multipart(REGISTER)
    dealer.send_multipart(PING)
    assert drain(router) == [[b"d0", *REGISTER]] * 3 + [[b"d0", *PING]]
    assert proxy.stats().effects == {"duplicate:rule-0": 1}


def test_reorder_behind_the_next_message_or_after_the_window(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link(rules=rules({"message": "PING", "reorder": {"window": "400ms"}}))
    dealer.send_multipart(REGISTER)
    router.recv_multipart()
    dealer.send_multipart(PING)
    time.sleep(0.05)
    dealer.send_multipart(REGISTER)
    assert [m[1:] for m in drain(router, 0.3)] == [REGISTER, PING], "released right behind the next one"
    t0 = time.monotonic()
    dealer.send_multipart(PING)
    assert router.recv_multipart()[1:] == PING
    assert time.monotonic() - t0 >= 0.35, "alone, it waits for the window"


def _dropped_requests(router_link: Callable[..., Any], seed: int) -> set[int]:
    proxy, router, (dealer,) = router_link(seed=seed, rules=rules({"message": "REQUEST", "drop": "50%"}))
    for k in range(200):
        dealer.send_multipart(request(k))
    dealer.send_multipart(PING)
    got = []
    while True:
        m = router.recv_multipart()
        if m[1:] == PING:
            break
        got.append(int(m[-1]))
    assert proxy.stats().effects["drop:rule-0"] == 200 - len(got)
    proxy.stop()
    return set(range(200)) - set(got)


def test_probability_draws_come_from_the_seed(router_link: Callable[..., Any]) -> None:
    a, b, c = (_dropped_requests(router_link, s) for s in (7, 7, 8))
    assert 60 < len(a) < 140
    assert a == b, "same seed, same messages dropped"
    assert a != c


def test_direction_and_peer_match(router_link: Callable[..., Any]) -> None:
    proxy, router, dealers = router_link(2, rules=rules({"to": "d1", "direction": "to_connecter", "drop": True}))
    for d in dealers:
        d.send_multipart(REGISTER)
    assert sorted(m[0] for m in drain(router)) == [b"d0", b"d1"], "to_binder passes"
    for name in (b"d0", b"d1"):
        router.send_multipart([name, *PING])
    assert drain(dealers[0]) == [PING]
    assert drain(dealers[1]) == [], "router -> d1 is dropped"


def test_connecters_named_by_source_address(ctx: zmq.Context, make_proxy: Callable[..., ChaosProxy]) -> None:
    proxy = make_proxy(rules=rules({"from": "a", "drop": True}))
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    ep = proxy.add_link(LinkSpec(f"tcp://127.0.0.1:{port}", binder="router"))
    proxy.name_source("127.0.0.5", "a")
    proxy.name_source("127.0.0.6", "b")
    proxy.start()
    port_of = ep.rsplit(":", 1)[1]
    dealers = {}
    for name, source in (("a", "127.0.0.5"), ("b", "127.0.0.6"), ("c", "127.0.0.1")):
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.ROUTING_ID, name.encode())
        d.connect(f"tcp://{source}:0;127.0.0.1:{port_of}")
        dealers[name] = d
    for d in dealers.values():
        d.send_multipart(REGISTER)
    assert sorted(m[0] for m in drain(router)) == [b"b", b"c"]
    stats = proxy.stats()
    assert stats.unidentified == 1 and stats.connections == 3
    assert any(e.fault == "unidentified" for e in proxy.drain_events())


def test_xpub_sees_subscriptions_cancels_and_sends_its_welcome(ctx: zmq.Context,
                                                               make_proxy: Callable[..., ChaosProxy]) -> None:
    proxy = make_proxy(rules=WITH_RULE)
    xpub, sub = xpub_and_sub(ctx, proxy)
    xpub.send_multipart([b"other", b"x"])
    xpub.send_multipart([b"topic", b"y" * 1000])
    assert sub.recv_multipart() == [b"topic", b"y" * 1000], "the SUB filters what the proxy passed"
    sub.setsockopt(zmq.UNSUBSCRIBE, b"topic")
    assert xpub.recv_multipart() == [b"\x00topic"]
    by_type = proxy.stats().by_type
    assert by_type["zmq.subscribe"] == 2 and by_type["zmq.unsubscribe"] == 1 and by_type["zmq.welcome"] == 1


@pytest.mark.parametrize("minor", [0, 1])
def test_subscriptions_by_message_and_by_command_and_the_welcome_are_named(make_proxy: Callable[..., ChaosProxy],
                                                                            minor: int) -> None:
    """ZMTP 3.0 subscribes with a \\x01 message, 3.1 with a SUBSCRIBE command; an XPUB's first
    message, when it is the welcome the run named, is zmq.welcome (raw peers on both sides)."""
    proxy = make_proxy(rules=WITH_RULE)
    with RawServer() as srv:
        ep = proxy.add_link(LinkSpec(srv.endpoint, binder="pub", connecter="sub", welcome=b"W"))
        proxy.start()
        client = connect(ep)
        client.sendall(Greeting(3, minor).encode() + ready_command({"Socket-Type": b"SUB"}))
        server = srv.accept()
        handshake(server, b"XPUB", minor=minor)
        recv_exactly(client, 64 + len(ready_command({"Socket-Type": b"XPUB"})))
        server.sendall(encode_message([b"W"]) + encode_message([b"W"]))
        if minor:
            subscriptions = encode_command("SUBSCRIBE", b"t") + encode_command("CANCEL", b"t")
        else:
            subscriptions = encode_message([b"\x01t"]) + encode_message([b"\x00t"])
        client.sendall(subscriptions)
        assert recv_exactly(client, 6) == encode_message([b"W"]) * 2
        assert recv_exactly(server, len(subscriptions)) == subscriptions
        assert proxy.stats().by_type == {"zmq.welcome": 1, "": 1, "zmq.subscribe": 1, "zmq.unsubscribe": 1}
        client.close()


def test_plain_pub_sub(ctx: zmq.Context, make_proxy: Callable[..., ChaosProxy]) -> None:
    proxy = make_proxy()
    pub = ctx.socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    ep = proxy.add_link(LinkSpec(f"tcp://127.0.0.1:{port}", binder="pub", connecter="sub"))
    proxy.start()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"t")
    sub.connect(ep)

    def arrived() -> bool:
        pub.send_multipart([b"t", b"1"])
        return bool(sub.poll(20))

    assert wait_until(arrived), "the subscription reached the PUB through the proxy"
    assert sub.recv_multipart() == [b"t", b"1"]


def test_the_third_ping_and_requests_by_service(router_link: Callable[..., Any]) -> None:
    """What byte-level proxies cannot do: drop the third PING, and every REQUEST of one service
    (a field of the decoded message)."""
    from fault_injection.naming import codec_fields

    proxy, router, (dealer,) = router_link(fields_of=codec_fields("dcp"), rules=rules(
        {"message": "PING", "nth": 3, "drop": True},
        {"message": "REQUEST", "fields": {"service": "other"}, "drop": True}))
    for _ in range(5):
        dealer.send_multipart(PING)
    for service in ("echo", "other", "echo"):
        dealer.send_multipart(DCP.encode("REQUEST", {"service": service, "data": [b"x"]}))
    got = [DCP.decode(m[1:]) for m in drain(router)]
    assert [m.name for m in got] == ["PING"] * 4 + ["REQUEST"] * 2
    assert {m["service"] for m in got if m.name == "REQUEST"} in ({"echo"}, {b"echo"})
    assert proxy.stats().effects == {"drop:rule-0": 1, "drop:rule-1": 1}
