"""The chaos proxy's network faults on real sockets: partitions (both ways, one way, closing),
slow links, resets, malformed bytes on purpose; hostile peers; clean shutdown."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable

import pytest
import zmq

from fault_injection.naming import codec_malformed
from fault_injection.proxy import ChaosProxy, LinkSpec, ProxyError
from fault_injection.rules import RuleSet, rule_from_dict
from fault_injection.zmtp import Greeting, encode_command, encode_message, ready_command
from harness.protocols import codec
from tests.fault_injection.conftest import bound_router
from tests.fault_injection.test_fi_proxy import PING, REGISTER, drain
from tests.fault_injection.zmtp_peers import (
    RawServer, connect, handshake, open_socket_fds, proxy_threads, recv_exactly, recv_for, wait_until,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]


def ready(router: zmq.Socket, dealer: zmq.Socket) -> None:
    """Wait until the DEALER's connection through the proxy carries messages."""
    dealer.send_multipart(REGISTER)
    assert router.recv_multipart()[1:] == REGISTER


def test_partition_both_ways_loses_messages_until_the_heal(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link()
    ready(router, dealer)
    pid = proxy.partition([["d0"], ["router"]])
    dealer.send_multipart(PING)
    router.send_multipart([b"d0", *PING])
    assert drain(router, 0.3) == [] and drain(dealer, 0.1) == []
    proxy.heal(pid)
    ready(router, dealer)
    router.send_multipart([b"d0", *PING])
    assert dealer.recv_multipart() == PING, "the same connection carries messages again"
    events = [(e.node, e.kind, e.fault, e.peer) for e in proxy.drain_events()]
    assert events[0][:3] == ("nemesis", "fault", "partition")
    assert ("router", "drop", "partition", "d0") in events and ("d0", "drop", "partition", "router") in events
    assert events[-1][:3] == ("nemesis", "fault", "heal")
    assert proxy.stats().connections == 1


def test_one_way_partition_cuts_one_direction(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link()
    ready(router, dealer)
    proxy.partition([["router"], ["d0"]], one_way=True)
    dealer.send_multipart(PING)
    router.send_multipart([b"d0", *PING])
    assert router.recv_multipart()[1:] == PING, "d0 -> router still flows"
    assert drain(dealer, 0.3) == [], "router -> d0 is cut"


def test_closing_partition_resets_and_refuses_until_the_heal(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link()
    ready(router, dealer)
    pid = proxy.partition([["d0"], ["router"]], close=True)
    assert wait_until(lambda: proxy.open_connections() == 0)
    time.sleep(0.4)  # libzmq reconnects every 100 ms: each attempt is refused
    stats = proxy.stats()
    assert stats.resets == 1 and stats.refused >= 1
    proxy.heal(pid)
    ready(router, dealer)
    assert proxy.open_connections() == 1


def test_a_connection_made_during_a_partition_waits_for_the_heal(ctx: zmq.Context,
                                                                 make_proxy: Callable[..., ChaosProxy]) -> None:
    proxy = make_proxy()
    router, target = bound_router(ctx)
    ep = proxy.add_link(LinkSpec(target, binder="router", connecter="late"))
    proxy.start()
    pid = proxy.partition([["late"], ["router"]])
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(ep)
    dealer.send_multipart(REGISTER)
    assert drain(router, 0.4) == [], "the handshake is held, so nothing can pass"
    proxy.heal(pid)
    assert router.recv_multipart()[1:] == REGISTER, "held greeting bytes go on at the heal; the queued message follows"


def test_slow_link_latency_and_bandwidth(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link()
    ready(router, dealer)
    lid = proxy.slow_link("d0", "router", "200ms")
    t0 = time.monotonic()
    dealer.send_multipart(PING)
    router.recv_multipart()
    assert time.monotonic() - t0 >= 0.19
    proxy.restore_link(lid)
    proxy.slow_link("router", "d0", bandwidth=1_000_000)
    t0 = time.monotonic()
    for _ in range(4):
        router.send_multipart([b"d0", b"x" * 100_000])
    for _ in range(4):
        dealer.recv_multipart()
    assert time.monotonic() - t0 >= 0.38, "400 kB at 1 MB/s"
    faults = [e.fault for e in proxy.drain_events()]
    assert faults == ["slow-link", "restore-link", "slow-link"]


def test_reset_and_reconnect(router_link: Callable[..., Any]) -> None:
    proxy, router, dealers = router_link(2)
    # The DEALERs reconnect with the same routing id; without hand-over a ROUTER that has not yet
    # reaped the reset connection would park the new one (libzmq's behaviour, not the proxy's).
    router.setsockopt(zmq.ROUTER_HANDOVER, 1)
    for d in dealers:
        ready(router, d)
    assert proxy.reset("d1", "router") == 1
    assert wait_until(lambda: proxy.stats().connections == 3), "libzmq reconnects after the reset"
    ready(router, dealers[1])
    ready(router, dealers[0])
    assert proxy.stats().resets == 1
    assert [e.fault for e in proxy.drain_events()] == ["reset", "reset"]


def test_malformed_bytes_only_on_purpose(ctx: zmq.Context, make_proxy: Callable[..., ChaosProxy]) -> None:
    proxy = make_proxy()
    with RawServer() as srv:
        ep = proxy.add_link(LinkSpec(srv.endpoint, binder="server", connecter="d0"))
        proxy.start()
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(ep)
        server = srv.accept()
        handshake(server, b"ROUTER")
        dealer.send_multipart([b"a", b"b"])
        assert recv_exactly(server, 6) == encode_message([b"a", b"b"])
        assert proxy.inject("d0", "server", b"\x08\x00") == 1
        dealer.send_multipart([b"c"])
        assert recv_exactly(server, 5) == b"\x08\x00" + encode_message([b"c"]), "between two whole messages"
        assert [e.fault for e in proxy.drain_events()] == ["inject"]


def test_target_down_is_refused_and_counted(ctx: zmq.Context, make_proxy: Callable[..., ChaosProxy]) -> None:
    proxy = make_proxy()
    with RawServer() as srv:
        target = srv.endpoint
    ep = proxy.add_link(LinkSpec(target, binder="gone", connecter="c"))
    proxy.start()
    try:
        client = connect(ep)
    except ConnectionResetError:
        pass  # reset before connect() looked: closed at once all the same
    else:
        assert recv_for(client, 1.0) == b"", "closed at once"
        client.close()
    assert wait_until(lambda: proxy.stats().refused == 1)


@pytest.mark.parametrize("hostile", ["pass", "cut"])
@pytest.mark.parametrize("first_bytes,reason", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "no ZMTP signature"),
    (Greeting(3, 0, "PLAIN").encode(), "mechanism PLAIN"),
])
def test_hostile_input_is_passed_or_cut_and_counted(make_proxy: Callable[..., ChaosProxy], hostile: str,
                                                    first_bytes: bytes, reason: str) -> None:
    proxy = make_proxy(hostile=hostile)
    with RawServer() as srv:
        ep = proxy.add_link(LinkSpec(srv.endpoint, binder="server", connecter="evil"))
        proxy.start()
        client = connect(ep)
        client.sendall(first_bytes + b"trailing junk")
        server = srv.accept()
        got = recv_for(server, 0.5)
        if hostile == "pass":
            assert got == first_bytes + b"trailing junk", "passed on unchanged"
        else:
            assert len(got) < len(first_bytes) + 13
            assert recv_for(client, 0.5) == b""
        stats = proxy.stats()
        assert sum(stats.opaque.values()) == 1 and reason in next(iter(stats.opaque))
        assert stats.hostile_cut == (hostile == "cut")
        client.close()


def test_a_flooding_peer_fills_a_bounded_buffer_and_others_keep_going(ctx: zmq.Context,
                                                                      make_proxy: Callable[..., ChaosProxy]) -> None:
    proxy = make_proxy()
    router, target = bound_router(ctx)
    with RawServer() as srv:
        flood_ep = proxy.add_link(LinkSpec(srv.endpoint, binder="sink", connecter="flooder"))
        ep = proxy.add_link(LinkSpec(target, binder="router", connecter="d0"))
        proxy.start()
        flooder = connect(flood_ep)
        sink = srv.accept()  # never reads after the handshake
        flooder.sendall(Greeting().encode() + ready_command({"Socket-Type": b"DEALER"}))
        handshake(sink, b"ROUTER")
        chunk = encode_message([b"f" * 60_000]) * 16
        sent = 0
        flooder.setblocking(False)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            try:
                sent += flooder.send(chunk)
            except BlockingIOError:
                time.sleep(0.01)
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(ep)
        ready(router, dealer)  # the proxy is not stuck behind the flood
        stats = proxy.stats()
        assert stats.throttled >= 1, "the flooder was paused"
        assert sent < 200 * 1024 * 1024, "the flood was held back by TCP, not buffered by the proxy"
        flooder.close()


def test_stop_leaves_no_thread_and_no_socket_behind(make_proxy: Callable[..., ChaosProxy]) -> None:
    before = open_socket_fds()
    proxy = ChaosProxy()
    with RawServer() as srv:
        ep = proxy.add_link(LinkSpec(srv.endpoint, binder="s", connecter="c"))
        proxy.add_link(LinkSpec(srv.endpoint, binder="s", connecter="c2"))
        proxy.start()
        clients = [connect(ep) for _ in range(3)]
        for c in clients:
            c.sendall(Greeting().encode())
        servers = [srv.accept() for _ in clients]
        for s in servers:
            recv_exactly(s, 64)
        proxy.stop(timeout=3.0)
        assert not proxy_threads()
        for c in clients:
            assert recv_for(c, 1.0) == b"", "the proxy closed its side"
            c.close()
    assert open_socket_fds() - before == set(), "every socket of the proxy is closed"
    with pytest.raises(ProxyError):
        proxy.partition([["a"], ["b"]])
    proxy.stop()  # idempotent


def test_calls_from_many_threads(router_link: Callable[..., Any]) -> None:
    proxy, router, (dealer,) = router_link()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for _ in range(20):
                proxy.heal(proxy.partition([["x"], ["y"]]))
                proxy.stats()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors
    ready(router, dealer)


def test_codec_names_in_a_dialect() -> None:
    from fault_injection.proxy import codec_classifier

    classify = codec_classifier("dcp", "dcp:dagbox")
    assert classify(codec("dcp", "dcp:dagbox").encode("PING")) == "PING"
    assert classify([b"nonsense"]) == ""
    assert encode_command("PING")  # the helpers the tests use stay importable
    _ = socket


def test_a_corrupt_rule_damages_messages_on_the_wire(router_link: Callable[..., Any]) -> None:
    """The simulator's ``corrupt`` over real sockets: the proxy rewrites the message's frames
    (malformed for the codec), libzmq delivers the damaged message whole, the rest intact."""
    rules = RuleSet([rule_from_dict({"message": "PING", "from": "d0", "corrupt": True, "nth": 2})])
    proxy, router, (dealer,) = router_link(rules=rules, seed=4, malformed=codec_malformed("dcp"))
    ready(router, dealer)
    for _ in range(3):
        dealer.send_multipart(PING)
    got = [router.recv_multipart()[1:] for _ in range(3)]
    assert got[0] == PING and got[2] == PING
    assert got[1] != PING and codec_malformed("dcp")(got[1])
    events = [e for e in proxy.drain_events() if e.fault == "corrupt:rule-0"]
    assert len(events) == 1 and events[0].kind == "fault" and events[0].detail.startswith(("frame", "a frame"))
