"""DCP reference nodes driven directly through the sans-IO contract (harness/node.py): call
start / receive / handle_timer / command with frames and times, assert on the actions.

A tiny in-test ``Net`` wires nodes together for the multi-hop cases (forward chains, expiry,
retries); it is not a simulator: zero latency, FIFO, one clock, no faults except "down".
"""

from __future__ import annotations

import ast
import pathlib
from typing import Any

import pytest

from harness.node import (
    NS_PER_MS, Connect, Deliver, Discard, Disconnect, Note, Send, SocketType,
)
from harness.protocols import ConformanceError, DecodeError, catalogue, codec
from reference_nodes.dcp import mutants as M
from reference_nodes.dcp.broker import Broker
from reference_nodes.dcp.client import Client
from reference_nodes.dcp.worker import Worker
from tests.reference_nodes.node_helpers import ctx, notes, of, sends

MS = NS_PER_MS
S = codec("dcp")
D = codec("dcp", "dcp:dagbox")
T0 = 1_000 * MS  # an arbitrary non-zero start time


def enc(name: str, c=S, **fields: Any) -> list[bytes]:
    return c.encode(name, fields)


def req(service: str = "echo", addr: bytes | None = None, md=(b"r1",), data=(b"hello",), c=S) -> list[bytes]:
    return c.encode("REQUEST", {"service": service, "client_address": addr, "metadata": list(md), "data": list(data)})


def rep(addr: bytes, md=(b"r1",), data=(b"HELLO",), c=S) -> list[bytes]:
    return c.encode("REPLY", {"client_address": addr, "metadata": list(md), "data": list(data)})


MALFORMED = [
    ([b"garbage"], "dcp.wire.message-type"),  # not identifiable as any message type
    ([], "dcp.wire.message-type"),
    ([b"", b"DGBX\x02", b"\x02"], "dcp.wire.version"),
    ([b"", b"DGBY\x01", b"\x02"], "dcp.wire.header"),
    ([b"x", b"DGBX\x01", b"\x02"], "dcp.wire.header"),
    ([b"", b"DGBX\x01", b"\x02", b"extra"], "dcp.heartbeat.header-only"),
    ([b"", b"DGBX\x01", b"\x09"], "dcp.wire.message-type"),
    ([b"", b"DGBX\x01", b"\x04", b"svc", b"", b"md"], "dcp.request.format"),  # no metadata delimiter
]


# ---- broker --------------------------------------------------------------------------------


def broker(**config: Any) -> Broker:
    b = Broker(ctx("broker", **config))
    b.start(T0)
    return b


def register(b: Broker, wid: bytes, service: str = "echo", now: int = T0) -> list:
    return b.receive("router", [wid, *enc("REGISTER", service=service)], now)


def test_broker_socket_and_defaults() -> None:
    b = Broker(ctx("broker"))
    (spec,) = b.sockets()
    assert (spec.name, spec.type, spec.bind) == ("router", SocketType.ROUTER, ("tcp://127.0.0.1:5555",))
    assert (b.protocol, b.role, b.expiry_ns) == ("dcp", "broker", 3000 * MS)
    b2 = Broker(ctx("broker", bind=["tcp://127.0.0.1:7001", "ipc:///tmp/x"], heartbeat_ms=100, liveness=5))
    assert b2.sockets()[0].bind == ("tcp://127.0.0.1:7001", "ipc:///tmp/x")
    assert b2.expiry_ns == 500 * MS
    assert b.start(0) == []  # nothing to time yet
    with pytest.raises(ValueError):
        Broker(ctx("broker", dialect="nope"))


def test_register_is_echoed_and_worker_gets_queued_work() -> None:
    b = broker()
    out = b.receive("router", [b"C", *req()], T0)
    assert sends(out) == []  # no worker yet: queued
    out = register(b, b"W", now=T0 + 5 * MS)
    echo, work = sends(out)
    assert echo.frames == [b"W", *enc("REGISTER", service="echo")] and echo.msg_type == "REGISTER"
    assert work.frames == [b"W", *req(addr=b"C")]
    assert work.meta == {"topic": "echo", "corr": "r1"}
    assert notes(out, "worker-registered")[0].data["worker"] == b"W"
    # a repeated registration is a no-op that is echoed again (E-DCP-07, E-DCP-12)
    out = register(b, b"W", now=T0 + 6 * MS)
    assert [s.msg_type for s in sends(out)] == ["REGISTER"] and not notes(out, "worker-registered")


def test_register_any_service_name_bytes() -> None:
    b = broker()
    weird = b"\xff\x00 s:v".decode("utf-8", "surrogateescape")
    for wid, svc in ((b"W1", ""), (b"W2", weird)):
        out = register(b, wid, svc)
        assert sends(out)[0].frames == [wid, *enc("REGISTER", service=svc)]
    out = b.receive("router", [b"C", *req(service=weird)], T0)
    assert sends(out)[0].frames[0] == b"W2"
    out = b.receive("router", [b"C", *req(service="")], T0)
    assert sends(out)[0].frames[0] == b"W1"


def test_request_client_address_inserted_iff_missing() -> None:
    b = broker()
    register(b, b"W")
    body = req(md=(b"id", b"m2"), data=(b"a", b"", b"c"))
    (fwd,) = sends(b.receive("router", [b"CLIENT", *body], T0))
    assert fwd.frames == [b"W", *req(addr=b"CLIENT", md=(b"id", b"m2"), data=(b"a", b"", b"c"))]
    b.receive("router", [b"W", *rep(b"CLIENT")], T0)
    # an address that is present is kept, even if it is not the sender's (E-DCP-05)
    (fwd,) = sends(b.receive("router", [b"OTHER", *req(addr=b"ORIGIN")], T0))
    assert fwd.frames == [b"W", *req(addr=b"ORIGIN")]


def test_one_request_per_worker_fifo_and_reply_routing() -> None:
    b = broker()
    register(b, b"W")
    out1 = b.receive("router", [b"C", *req(md=(b"1",))], T0)
    out2 = b.receive("router", [b"C", *req(md=(b"2",))], T0)
    out3 = b.receive("router", [b"C", *req(md=(b"3",))], T0)
    assert [s.frames[0] for s in sends(out1)] == [b"W"]
    assert sends(out2) == sends(out3) == []  # W is busy: queued
    assert b.status()["queues"] == {"echo": 2}
    reply = rep(b"C", md=(b"1",))
    out = b.receive("router", [b"W", *reply], T0 + MS)
    fwd, nxt = sends(out)
    assert fwd.frames == [b"C", *reply] and fwd.msg_type == "REPLY"  # byte for byte, address kept
    assert fwd.meta == {"corr": "1", "topic": "echo"}
    assert nxt.frames == [b"W", *req(addr=b"C", md=(b"2",))]  # FIFO
    (nxt,) = sends(b.receive("router", [b"W", *rep(b"C", md=(b"2",))], T0 + 2 * MS), "REQUEST")
    assert nxt.frames == [b"W", *req(addr=b"C", md=(b"3",))]


def test_requests_spread_over_ready_workers_of_the_service_only() -> None:
    b = broker()
    register(b, b"W1", "a")
    register(b, b"W2", "a")
    register(b, b"X", "b")
    got = [sends(b.receive("router", [b"C", *req("a", md=(b"%d" % i,))], T0))[0].frames[0] for i in range(2)]
    assert got == [b"W1", b"W2"]
    assert sends(b.receive("router", [b"C", *req("a", md=(b"3",))], T0)) == []
    (s,) = sends(b.receive("router", [b"C", *req("b")], T0))
    assert s.frames[0] == b"X"
    assert sends(b.receive("router", [b"C", *req("nobody")], T0)) == []
    assert b.status()["queues"] == {"a": 1, "nobody": 1}


def test_request_and_ping_from_worker_mark_it_ready() -> None:
    b = broker()
    register(b, b"A", "a")
    register(b, b"B", "b")
    b.receive("router", [b"C", *req("a", md=(b"1",))], T0)
    assert sends(b.receive("router", [b"C", *req("a", md=(b"2",))], T0)) == []
    # A passes partial work on to service b, keeping the client address: that is a response
    out = b.receive("router", [b"A", *req("b", addr=b"C", md=(b"1",))], T0)
    assert [(s.frames[0], s.frames[4 + 1]) for s in sends(out)] == [(b"A", b"C"), (b"B", b"C")]
    # B is busy now; its ping means "ready for more" (E-DCP-06) and gets a pong
    b.receive("router", [b"C", *req("b", md=(b"3",))], T0)
    out = b.receive("router", [b"B", *enc("PING")], T0)
    assert [s.msg_type for s in sends(out)] == ["PONG", "REQUEST"]
    assert sends(out)[0].frames == [b"B", *enc("PONG")]


def test_heartbeats_from_unknown_peers_get_reconnect_only() -> None:
    b = broker()
    for t in ("PING", "PONG"):
        out = b.receive("router", [b"U", *enc(t)], T0)
        assert [s.frames for s in sends(out)] == [[b"U", *enc("RECONNECT")]]
    register(b, b"W")
    assert sends(b.receive("router", [b"W", *enc("PONG")], T0)) == []  # counted as traffic only


def test_reply_from_unknown_peer_is_forwarded() -> None:
    # a worker the broker forgot may still answer the request it holds (E-DCP-13)
    b = broker()
    out = b.receive("router", [b"GHOST", *rep(b"C")], T0)
    assert [s.frames for s in sends(out)] == [[b"C", *rep(b"C")]]


def test_worker_expiry_timing_and_dropped_request() -> None:
    b = broker(heartbeat_ms=100, liveness=3)
    out = register(b, b"W", now=T0)
    assert b.get_timer() == T0 + 300 * MS
    out = b.receive("router", [b"W", *enc("PING")], T0 + 50 * MS)
    assert b.get_timer() == T0 + 350 * MS  # traffic postpones expiry
    b.receive("router", [b"C", *req()], T0 + 60 * MS)  # W holds it now
    register(b, b"V", "other", now=T0 + 70 * MS)
    out = b.handle_timer(T0 + 350 * MS - 1)
    assert not notes(out, "worker-expired") and b.get_timer() == T0 + 350 * MS
    out = b.handle_timer(T0 + 350 * MS)
    (n,) = notes(out, "worker-expired")
    assert n.data == {"worker": b"W", "service": "echo", "services": ["echo"], "last_heard": T0 + 50 * MS,
                      "expired_at": T0 + 350 * MS, "limit_ns": 300 * MS, "dropped_request": "r1"}
    assert b.get_timer() == T0 + 370 * MS  # V is next
    assert b"W" not in b.status()["workers"] and b.dropped == 1
    # W comes back with a ping: it is unknown now
    out = b.receive("router", [b"W", *enc("PING")], T0 + 360 * MS)
    assert [s.msg_type for s in sends(out)] == ["RECONNECT"]
    # a due expiry is applied before a late message is handled, even without the timer
    out = b.receive("router", [b"V", *enc("PING")], T0 + 400 * MS)
    assert notes(out, "worker-expired") and [s.msg_type for s in sends(out)] == ["RECONNECT"]
    assert b.get_timer() is None


def test_broker_malformed_input_is_discarded_and_it_keeps_serving() -> None:
    b = broker()
    register(b, b"W")
    for body, clause in MALFORMED:
        out = b.receive("router", [b"X", *body], T0)
        (d,) = of(out, Discard)
        assert d.clause == clause and d.frames == [b"X", *body] and not sends(out)
        assert d.reason.startswith("dcp [strict]")
    out = b.receive("router", [], T0)
    assert of(out, Discard) and not sends(out)
    # DagBox's 4-byte type is a finding in strict mode
    (d,) = of(b.receive("router", [b"W", *enc("PING", c=D)], T0), Discard)
    assert "dcp:dagbox" in d.reason
    # unexpected for a broker: RECONNECT
    (d,) = of(b.receive("router", [b"W", *enc("RECONNECT")], T0), Discard)
    assert d.clause == "dcp.wire.grammar" and "unexpected RECONNECT" in d.reason
    (s,) = sends(b.receive("router", [b"C", *req()], T0))
    assert s.frames == [b"W", *req(addr=b"C")]


def test_broker_queue_limit() -> None:
    b = broker(queue_limit=2)
    for i in range(2):
        assert not of(b.receive("router", [b"C", *req(md=(b"%d" % i,))], T0), Discard)
    out = b.receive("router", [b"C", *req(md=(b"x",))], T0)
    (d,) = of(out, Discard)
    assert "full" in d.reason and b.dropped == 1
    out = register(b, b"W")
    assert sends(out, "REQUEST")[0].meta["corr"] == "0"


def test_broker_dagbox_dialect() -> None:
    b = broker(dialect="dcp:dagbox")
    out = b.receive("router", [b"W", *enc("REGISTER", c=D, service="echo")], T0)
    assert sends(out)[0].frames == [b"W", b"", b"DGBX\x01", b"\x01\x00\x00\x00", b"echo"]
    assert sends(b.receive("router", [b"W", *enc("PING", c=D)], T0))[0].frames[3] == b"\x03\x00\x00\x00"
    (s,) = sends(b.receive("router", [b"C", *req(c=D)], T0))
    assert s.frames == [b"W", *req(addr=b"C", c=D)]
    assert sends(b.receive("router", [b"U", *enc("PING", c=D)], T0))[0].frames == [b"U", *enc("RECONNECT", c=D)]
    (d,) = of(b.receive("router", [b"W", *enc("PING")], T0), Discard)  # the strict 1-byte form
    assert d.reason.startswith("dcp [dcp:dagbox]")


# ---- worker --------------------------------------------------------------------------------


def worker(now: int = T0, **config: Any) -> tuple[Worker, list]:
    config.setdefault("service", "echo")
    w = Worker(ctx("worker", **config))
    return w, w.start(now)


def confirm(w: Worker, now: int = T0, c=S) -> list:
    return w.receive("dealer", enc("REGISTER", c=c, service=w.service), now)


def test_worker_socket_and_registration() -> None:
    w, out = worker(identity="w-1", connect="tcp://127.0.0.1:6000", heartbeat_ms=100)
    (spec,) = w.sockets()
    assert (spec.name, spec.type, spec.connect, spec.identity) == (
        "dealer", SocketType.DEALER, ("tcp://127.0.0.1:6000",), b"w-1")
    (s,) = sends(out)
    assert s.frames == enc("REGISTER", service="echo") and s.meta == {"topic": "echo"}
    assert w.get_timer() == T0 + 100 * MS
    out = confirm(w, T0 + MS)
    assert notes(out, "registered") and w.confirmed
    with pytest.raises(ValueError):
        Worker(ctx("w", behaviour="explode"))


def test_worker_reregisters_without_echo() -> None:
    w, _ = worker(heartbeat_ms=100)
    out = w.handle_timer(T0 + 100 * MS)
    assert [s.msg_type for s in sends(out)] == ["REGISTER"]  # E-DCP-07, and no ping beside it
    confirm(w, T0 + 101 * MS)
    out = w.handle_timer(T0 + 200 * MS)
    assert [s.msg_type for s in sends(out)] == ["PING"]


@pytest.mark.parametrize("behaviour,data,expect", [
    ("echo", [b"Hello", b""], [b"Hello", b""]),
    ("upper", [b"Hello", b"\xffx"], [b"HELLO", b"\xffX"]),
    ("reverse", [b"abc", b"de"], [b"cba", b"ed"]),
])
def test_worker_replies_copying_address_and_metadata(behaviour: str, data, expect) -> None:
    w, _ = worker(behaviour=behaviour)
    confirm(w)
    md = [b"id-7", b"\x00bin", b"x"]
    out = w.receive("dealer", req(addr=b"\x00\x80\x00\x00\x01", md=md, data=data), T0 + MS)
    (s,) = sends(out)
    assert s.frames == rep(b"\x00\x80\x00\x00\x01", md=md, data=expect)
    assert s.msg_type == "REPLY" and s.meta == {"topic": "echo", "corr": "id-7"}


def test_worker_service_time_and_request_while_busy() -> None:
    w, _ = worker(service_time_ms=50, heartbeat_ms=1000)
    confirm(w)
    out = w.receive("dealer", req(addr=b"C", md=(b"1",)), T0 + 10 * MS)
    assert not sends(out) and w.get_timer() == T0 + 60 * MS
    out = w.receive("dealer", req(addr=b"C", md=(b"2",)), T0 + 20 * MS)
    (n,) = notes(out, "request-while-busy")
    assert n.data == {"corr": "2", "holding": "1", "queued": 1} and not sends(out)
    assert not sends(w.handle_timer(T0 + 59 * MS))
    out = w.handle_timer(T0 + 60 * MS)
    assert [s.frames for s in sends(out)] == [rep(b"C", md=(b"1",), data=(b"hello",))]
    assert w.get_timer() == T0 + 110 * MS
    out = w.handle_timer(T0 + 110 * MS)
    assert [s.frames for s in sends(out)] == [rep(b"C", md=(b"2",), data=(b"hello",))]
    assert w.handled == 2
    (st,) = w.command({"op": "status"}, T0 + 111 * MS)
    assert st == Deliver("worker-status", {"service": "echo", "busy": False, "backlog": 0, "handled": 2,
                                           "confirmed": True})


def test_worker_forward_passes_partial_work_on() -> None:
    w, _ = worker(service="first", behaviour="forward:second:stage", transform="upper")
    confirm(w)
    (s,) = sends(w.receive("dealer", req("first", addr=b"C", md=(b"id", b"m")), T0))
    assert s.frames == req("second:stage", addr=b"C", md=(b"id", b"m"), data=(b"HELLO",))
    assert s.msg_type == "REQUEST" and s.meta == {"topic": "second:stage", "corr": "id"}


def test_worker_pings_when_idle_and_skips_after_traffic() -> None:
    w, _ = worker(heartbeat_ms=100)
    confirm(w, T0 + MS)
    out = w.handle_timer(T0 + 100 * MS)
    (p,) = sends(out)
    assert p.frames == enc("PING") and p.msg_type == "PING"
    w.receive("dealer", enc("PONG"), T0 + 101 * MS)
    # a reply at +150 is "any other message in this interval": the next ping is due at +250
    w.receive("dealer", req(addr=b"C"), T0 + 150 * MS)
    out = w.handle_timer(T0 + 200 * MS)
    assert not sends(out) and w.get_timer() == T0 + 250 * MS
    assert [s.msg_type for s in sends(w.handle_timer(T0 + 250 * MS))] == ["PING"]


def test_worker_pings_during_a_request_longer_than_the_interval() -> None:
    # E-DCP-06: worker-interval is a MUST, so a long request does not silence the worker
    w, _ = worker(heartbeat_ms=100, service_time_ms=250)
    confirm(w)
    w.receive("dealer", req(addr=b"C", md=(b"1",)), T0)
    types = []
    for t in (100, 200, 250):
        out = w.handle_timer(T0 + t * MS)
        types += [s.msg_type for s in sends(out)]
        w.receive("dealer", enc("PONG"), T0 + t * MS)
    assert types == ["PING", "PING", "REPLY"]


def test_worker_detects_lost_broker_and_reconnects() -> None:
    w, _ = worker(heartbeat_ms=100, liveness=3, connect="tcp://127.0.0.1:6001")
    confirm(w, T0)
    for t in (100, 200):
        assert [s.msg_type for s in sends(w.handle_timer(T0 + t * MS))] == ["PING"]
    out = w.handle_timer(T0 + 300 * MS)
    (n,) = notes(out, "broker-lost")
    assert n.data == {"endpoint": "tcp://127.0.0.1:6001", "last_heard": T0, "at": T0 + 300 * MS}
    assert of(out, Disconnect) == [Disconnect("dealer", "tcp://127.0.0.1:6001")]
    assert of(out, Connect) == [Connect("dealer", "tcp://127.0.0.1:6001")]
    assert [s.msg_type for s in sends(out)] == ["REGISTER"]
    order = [type(a).__name__ for a in out if not isinstance(a, Note)]
    assert order == ["Disconnect", "Connect", "Send"]
    # any message from the broker keeps it alive
    w2, _ = worker(heartbeat_ms=100, liveness=3)
    confirm(w2, T0)
    for t in (100, 200, 300, 400):
        out = w2.handle_timer(T0 + t * MS)
        w2.receive("dealer", enc("PONG"), T0 + t * MS)
        assert not notes(out, "broker-lost")


def test_worker_registers_again_on_reconnect() -> None:
    w, _ = worker(service="svc")
    confirm(w)
    out = w.receive("dealer", enc("RECONNECT"), T0 + 5 * MS)
    assert [s.frames for s in sends(out)] == [enc("REGISTER", service="svc")]
    assert not w.confirmed and notes(out, "reconnect")


def test_worker_malformed_and_unexpected_input() -> None:
    w, _ = worker()
    confirm(w)
    for body, clause in MALFORMED:
        out = w.receive("dealer", body, T0)
        (d,) = of(out, Discard)
        assert d.clause == clause and d.frames == body and not sends(out)
    (d,) = of(w.receive("dealer", req(addr=None), T0), Discard)
    assert d.clause == "dcp.broker.insert-client-address"
    for t in ("PING",):
        (d,) = of(w.receive("dealer", enc(t), T0), Discard)
        assert d.clause == "dcp.wire.grammar"
    assert of(w.receive("dealer", rep(b"C"), T0), Discard)
    assert of(w.receive("dealer", enc("REGISTER", service="other"), T0), Discard)
    (s,) = sends(w.receive("dealer", req(addr=b"C"), T0))  # still serving
    assert s.msg_type == "REPLY"


def test_worker_dagbox_dialect() -> None:
    w, out = worker(dialect="dcp:dagbox", heartbeat_ms=100)
    assert sends(out)[0].frames == [b"", b"DGBX\x01", b"\x01\x00\x00\x00", b"echo"]
    confirm(w, c=D)
    assert w.confirmed
    (s,) = sends(w.receive("dealer", req(addr=b"C", c=D), T0))
    assert s.frames == rep(b"C", data=(b"hello",), c=D)
    assert sends(w.handle_timer(T0 + 100 * MS))[0].frames == enc("PING", c=D)
    (d,) = of(w.receive("dealer", req(addr=b"C"), T0), Discard)  # strict 1-byte type
    assert "dcp:dagbox" in d.reason


# ---- client --------------------------------------------------------------------------------


def client(**config: Any) -> Client:
    c = Client(ctx("client", **config))
    c.start(T0)
    return c


def ask(c: Client, rid: str, now: int = T0, service: str = "echo", data=(b"hello",), **extra: Any) -> list:
    return c.command({"op": "request", "service": service, "data": list(data), "id": rid, **extra}, now)


def test_client_socket_and_requests() -> None:
    c = client(identity=b"cli", connect="tcp://127.0.0.1:6002", timeout_ms=100)
    (spec,) = c.sockets()
    assert (spec.name, spec.type, spec.connect, spec.identity) == (
        "dealer", SocketType.DEALER, ("tcp://127.0.0.1:6002",), b"cli")
    out = ask(c, "r1", metadata=[b"trace"])
    (s,) = sends(out)
    assert s.frames == req(md=(b"r1", b"trace"))  # no client address: the broker inserts it
    assert s.msg_type == "REQUEST" and s.meta["topic"] == "echo" and s.meta["corr"] == "r1"
    assert c.get_timer() == T0 + 100 * MS
    out = ask(c, "r2", T0 + 10 * MS, service="other")  # pipelining
    assert sends(out)[0].frames == req("other", md=(b"r2",)) and c.get_timer() == T0 + 100 * MS  # r1 first
    with pytest.raises(ValueError):
        ask(c, "r1")  # still outstanding
    with pytest.raises(ValueError):
        c.command({"op": "dance"}, T0)
    (s,) = sends(c.command({"op": "request", "service": "echo", "data": b"x"}, T0))
    assert s.frames == req(md=(b"client-1",), data=(b"x",))


def test_client_delivers_each_reply_exactly_once() -> None:
    c = client(timeout_ms=100)
    ask(c, "r1", T0)
    ask(c, "r2", T0 + MS)
    out = c.receive("dealer", rep(b"C", md=(b"r2",), data=(b"B",)), T0 + 30 * MS)
    (d,) = of(out, Deliver)
    assert d.kind == "reply"
    assert d.data == {"id": "r2", "service": "echo", "data": [b"B"], "metadata": [b"r2"], "attempts": 1,
                      "sent_at": T0 + MS, "latency_ns": 29 * MS, "topic": "echo", "corr": "r2"}
    assert c.get_timer() == T0 + 100 * MS  # r1's deadline, unchanged
    out = c.receive("dealer", rep(b"C", md=(b"r2",), data=(b"B",)), T0 + 31 * MS)
    assert not of(out, Deliver) and notes(out, "duplicate-reply")[0].data["id"] == "r2"
    (d,) = of(c.receive("dealer", rep(b"C", md=(b"nope",)), T0), Discard)
    assert d.clause == "dcp.client.track-by-metadata"


def test_client_retries_same_request_then_gives_up() -> None:
    c = client(timeout_ms=100, max_attempts=3)
    first = sends(ask(c, "r1", T0, metadata=[b"m"]))[0].frames
    out = c.handle_timer(T0 + 99 * MS)
    assert not sends(out) and c.get_timer() == T0 + 100 * MS
    out = c.handle_timer(T0 + 100 * MS)
    assert [s.frames for s in sends(out)] == [first] and sends(out)[0].meta["attempt"] == 2
    assert c.get_timer() == T0 + 200 * MS
    assert [s.frames for s in sends(c.handle_timer(T0 + 200 * MS))] == [first]
    out = c.handle_timer(T0 + 300 * MS)
    assert not sends(out)
    (d,) = of(out, Deliver)
    assert d.kind == "request-failed"
    assert {k: d.data[k] for k in ("id", "service", "attempts", "sent_at", "failed_at", "reason")} == {
        "id": "r1", "service": "echo", "attempts": 3, "sent_at": T0, "failed_at": T0 + 300 * MS, "reason": "timeout"}
    assert c.get_timer() is None
    out = c.receive("dealer", rep(b"C", md=(b"r1", b"m")), T0 + 301 * MS)
    assert not of(out, Deliver) and notes(out, "late-reply")


def test_client_reply_after_retry_counts_attempts() -> None:
    c = client(timeout_ms=100)
    ask(c, "r1", T0)
    c.handle_timer(T0 + 100 * MS)
    (d,) = of(c.receive("dealer", rep(b"C", md=(b"r1",)), T0 + 150 * MS), Deliver)
    assert d.data["attempts"] == 2 and d.data["latency_ns"] == 150 * MS
    out = c.handle_timer(T0 + 200 * MS)  # the old deadline is stale now
    assert not sends(out) and not of(out, Deliver)


def test_client_connects_again_when_a_retry_follows_silence() -> None:
    # Lazy Pirate: nothing from the broker since the attempt went out, so its connection may be
    # one the broker ignores (a ROUTER without handover): a new one before the retry.
    c = client(timeout_ms=100, max_attempts=5, connect="tcp://127.0.0.1:6002")
    ask(c, "r1", T0)
    ask(c, "r2", T0 + 10 * MS)
    out = c.handle_timer(T0 + 100 * MS)
    assert [type(a).__name__ for a in out] == ["Note", "Disconnect", "Connect", "Send"]
    assert notes(out, "reconnect")[0].data == {"silent_since": T0, "at": T0 + 100 * MS}
    assert of(out, Disconnect) == [Disconnect("dealer", "tcp://127.0.0.1:6002")]
    assert of(out, Connect) == [Connect("dealer", "tcp://127.0.0.1:6002")]
    # r2 went out on the old connection too, but the new one is younger than that: no second one
    out = c.handle_timer(T0 + 110 * MS)
    assert [type(a).__name__ for a in out] == ["Send"]
    # r1's retry went out on the new connection; silent since: connect again
    out = c.handle_timer(T0 + 200 * MS)
    assert [type(a).__name__ for a in out] == ["Note", "Disconnect", "Connect", "Send"]


def test_client_keeps_its_connection_when_the_broker_was_heard() -> None:
    c = client(timeout_ms=100, max_attempts=5)
    ask(c, "r1", T0)
    ask(c, "r2", T0 + 10 * MS)
    c.receive("dealer", rep(b"C", md=(b"r2",)), T0 + 50 * MS)  # the broker answers others
    out = c.handle_timer(T0 + 100 * MS)
    assert [type(a).__name__ for a in out] == ["Send"] and not notes(out, "reconnect")


def test_client_never_heartbeats_and_drops_unexpected() -> None:
    c = client(timeout_ms=100)
    ask(c, "r1", T0)
    seen = []
    for t in range(1, 20):
        seen += c.handle_timer(T0 + t * 50 * MS)
    assert {s.msg_type for s in sends(seen)} == {"REQUEST"}
    for t in ("PONG", "RECONNECT", "PING"):
        (d,) = of(c.receive("dealer", enc(t), T0), Discard)
        assert d.clause == "dcp.wire.grammar" and not sends([d])
    assert of(c.receive("dealer", enc("REGISTER", service="x"), T0), Discard)
    assert of(c.receive("dealer", req(addr=b"C"), T0), Discard)
    for body, clause in MALFORMED:
        (d,) = of(c.receive("dealer", body, T0), Discard)
        assert d.clause == clause
    (d,) = of(c.receive("dealer", rep(b"C", c=D), T0), Discard)
    assert "dcp:dagbox" in d.reason


def test_client_dagbox_dialect() -> None:
    c = client(dialect="dcp:dagbox")
    (s,) = sends(ask(c, "r1"))
    assert s.frames == req(md=(b"r1",), c=D)
    assert of(c.receive("dealer", rep(b"C", md=(b"r1",), c=D), T0), Deliver)


# ---- several nodes wired together ------------------------------------------------------------


class Net:
    """Zero-latency FIFO wiring of one broker and DEALER peers (identity = peer name)."""

    def __init__(self, broker: Any, peers: dict[str, Any]) -> None:
        self.nodes = {"broker": broker, **peers}
        self.now = T0
        self.timers: dict[str, int | None] = {}
        self.queue: list[tuple[str, list[bytes]]] = []
        self.log: list[tuple[int, str, Any]] = []
        self.down: set[str] = set()
        for name, node in self.nodes.items():
            self._apply(name, node.start(self.now))

    def _apply(self, name: str, actions: list) -> None:
        self.timers[name] = self.nodes[name].get_timer()  # pulled after every input
        for a in actions:
            self.log.append((self.now, name, a))
            if isinstance(a, Send) and name not in self.down:
                if name == "broker":
                    target = a.frames[0].decode()
                    if target in self.nodes and target not in self.down:
                        self.queue.append((target, a.frames[1:]))
                else:
                    self.queue.append(("broker", [name.encode(), *a.frames]))

    def command(self, name: str, request: dict) -> None:
        self._apply(name, self.nodes[name].command(request, self.now))
        self._drain()

    def _drain(self) -> None:
        while self.queue:
            target, frames = self.queue.pop(0)
            if target in self.down:
                continue
            sock = "router" if target == "broker" else "dealer"
            self._apply(target, self.nodes[target].receive(sock, frames, self.now))

    def run_until(self, until: int) -> None:
        self._drain()
        while True:
            due = [(t, n) for n, t in self.timers.items() if t is not None and n not in self.down]
            if not due:
                break
            t, name = min(due)
            if t > until:
                break
            self.now = max(self.now, t)
            self.timers[name] = None
            self._apply(name, self.nodes[name].handle_timer(self.now))
            self._drain()
        self.now = max(self.now, until)

    def actions(self, name: str | None = None, kind: type | None = None) -> list:
        return [a for _, n, a in self.log if (name is None or n == name) and (kind is None or isinstance(a, kind))]


def test_forward_chain_end_to_end() -> None:
    hb = {"heartbeat_ms": 100}
    net = Net(Broker(ctx("broker", **hb)), {
        "wa": Worker(ctx("wa", service="a", behaviour="forward:b", transform="upper", **hb)),
        "wb": Worker(ctx("wb", service="b", behaviour="reverse", service_time_ms=5, **hb)),
        "cli": Client(ctx("cli", timeout_ms=500)),
    })
    net.run_until(T0 + 10 * MS)
    net.command("cli", {"op": "request", "service": "a", "data": [b"abc", b"xy"], "id": "q1", "metadata": [b"m"]})
    net.run_until(T0 + 100 * MS)
    (d,) = [a for a in net.actions("cli", Deliver)]
    assert d.kind == "reply" and d.data["data"] == [b"CBA", b"YX"] and d.data["metadata"] == [b"q1", b"m"]
    assert d.data["attempts"] == 1 and d.data["latency_ns"] == 5 * MS
    # the broker forwarded the worker's request to wb with wa's client address kept: cli
    wb_requests = [a for a in net.actions("broker", Send) if a.frames[0] == b"wb" and a.msg_type == "REQUEST"]
    assert wb_requests[0].frames[1:] == req("b", addr=b"cli", md=(b"q1", b"m"), data=(b"ABC", b"XY"))
    assert not net.actions(None, Discard)


def test_expiry_and_client_retry_end_to_end() -> None:
    hb = {"heartbeat_ms": 100, "liveness": 3}
    net = Net(Broker(ctx("broker", **hb)), {
        "w1": Worker(ctx("w1", service="s", service_time_ms=50, **hb)),
        "cli": Client(ctx("cli", timeout_ms=1000, max_attempts=3)),
    })
    net.run_until(T0 + 150 * MS)
    net.down.add("w1")  # dies without a word, having pinged at +100
    net.command("cli", {"op": "request", "service": "s", "data": [b"x"], "id": "q"})
    net.run_until(T0 + 600 * MS)
    (n,) = [a for a in net.actions("broker", Note) if a.kind == "worker-expired"]
    assert n.data["last_heard"] == T0 + 100 * MS and n.data["expired_at"] == T0 + 400 * MS
    assert n.data["dropped_request"] == "q"
    # a new worker registers; the client's retry reaches it
    net.nodes["w2"] = Worker(ctx("w2", service="s", **hb))
    net._apply("w2", net.nodes["w2"].start(net.now))
    net.run_until(T0 + 1300 * MS)
    (d,) = net.actions("cli", Deliver)
    assert d.kind == "reply" and d.data["attempts"] == 2
    # the dead worker comes back: the broker forgot it, it registers again
    net.down.discard("w1")
    net.run_until(T0 + 1700 * MS)
    w1_after = [a for t, n, a in net.log if n == "w1" and t >= T0 + 1300 * MS]
    assert [a.kind for a in w1_after if isinstance(a, Note)][:1] == ["broker-lost"]
    assert "REGISTER" in [a.msg_type for a in w1_after if isinstance(a, Send)]
    back = [a for t, n, a in net.log if n == "broker" and t >= T0 + 1300 * MS and isinstance(a, Note)]
    assert [(a.kind, a.data["worker"]) for a in back] == [("worker-registered", b"w1")]
    assert not [a for a in net.actions("cli", Send) if a.msg_type != "REQUEST"]


# ---- mutants ---------------------------------------------------------------------------------


def test_mutant_registry() -> None:
    cat = catalogue("dcp")
    roles = {"broker": Broker, "worker": Worker, "client": Client}
    for name, (role, factory, clause) in M.MUTANTS.items():
        assert clause in cat, (name, clause)
        assert issubclass(factory, roles[role]) and factory is not roles[role]
        assert factory.__doc__ and (clause in factory.__doc__ or name == "crash-on-malformed"), name
        node = factory(ctx(name))
        assert (node.protocol, node.role) == ("dcp", role)
    for required in ("busy-worker", "no-pong", "no-reconnect", "never-expire", "alters-metadata",
                     "no-client-address", "wrong-header", "crash-on-malformed", "drops-metadata", "no-ping",
                     "no-reregister", "duplicate-delivery", "pings"):
        assert required in M.MUTANTS


def both(name: str, **config: Any):
    role, factory, _ = M.MUTANTS[name]
    ref = {"broker": Broker, "worker": Worker, "client": Client}[role]
    return ref(ctx(role, **config)), factory(ctx(role, **config))


def frames_out(actions) -> list[list[bytes]]:
    return [s.frames for s in sends(actions)]


def test_mutant_busy_worker() -> None:
    ref, mut = both("busy-worker")
    outs = []
    for b in (ref, mut):
        b.start(T0)
        register(b, b"W")
        b.receive("router", [b"C", *req(md=(b"1",))], T0)
        outs.append(b.receive("router", [b"C", *req(md=(b"2",))], T0))
    assert frames_out(outs[0]) == []
    assert frames_out(outs[1]) == [[b"W", *req(addr=b"C", md=(b"2",))]]


def test_mutant_no_pong() -> None:
    ref, mut = both("no-pong")
    outs = []
    for b in (ref, mut):
        register(b, b"W")
        b.receive("router", [b"C", *req()], T0)
        outs.append(b.receive("router", [b"W", *enc("PING")], T0))
    assert [s.msg_type for s in sends(outs[0])] == ["PONG"]
    assert sends(outs[1]) == []
    assert not mut.workers[b"W"].busy  # the ping still counts as "ready"


def test_mutant_no_reconnect() -> None:
    ref, mut = both("no-reconnect")
    assert [s.msg_type for s in sends(ref.receive("router", [b"U", *enc("PING")], T0))] == ["RECONNECT"]
    assert sends(mut.receive("router", [b"U", *enc("PING")], T0)) == []
    register(mut, b"W")
    assert [s.msg_type for s in sends(mut.receive("router", [b"W", *enc("PING")], T0))] == ["PONG"]


def test_mutant_loses_registration() -> None:
    """The first REGISTER of each identity vanishes: no echo, and the worker is unknown (its PING
    gets a RECONNECT); the next REGISTER is taken and echoed as the reference broker does."""
    ref, mut = both("loses-registration")
    assert [s.msg_type for s in sends(register(ref, b"W"))] == ["REGISTER"]
    assert sends(register(mut, b"W")) == []
    assert [s.msg_type for s in sends(mut.receive("router", [b"W", *enc("PING")], T0))] == ["RECONNECT"]
    assert frames_out(register(mut, b"W")) == [[b"W", *enc("REGISTER", service="echo")]]
    assert [s.msg_type for s in sends(mut.receive("router", [b"W", *enc("PING")], T0))] == ["PONG"]
    assert sends(register(mut, b"V", service="upper")) == []  # (every identity's first)


def test_mutant_never_expire() -> None:
    ref, mut = both("never-expire", heartbeat_ms=100)
    outs = []
    for b in (ref, mut):
        register(b, b"W", now=T0)
        silent = b.handle_timer(T0 + 1000 * MS)
        outs.append((silent, b.receive("router", [b"W", *enc("PING")], T0 + 1000 * MS)))
    assert notes(outs[0][0], "worker-expired") and [s.msg_type for s in sends(outs[0][1])] == ["RECONNECT"]
    assert not notes(outs[1][0], "worker-expired") and [s.msg_type for s in sends(outs[1][1])] == ["PONG"]
    register(ref, b"V", now=T0 + 1000 * MS)
    register(mut, b"V", now=T0 + 1000 * MS)
    assert ref.get_timer() == T0 + 1300 * MS and mut.get_timer() is None  # and no busy timer loop


@pytest.mark.parametrize("name,expect_md", [("alters-metadata", [b"id~", b"m"]), ("strips-metadata", [])])
def test_mutant_metadata_brokers(name: str, expect_md) -> None:
    ref, mut = both(name)
    fwd = []
    for b in (ref, mut):
        register(b, b"W")
        (s,) = sends(b.receive("router", [b"C", *req(md=(b"id", b"m"), data=(b"d", b""))], T0))
        fwd.append(S.decode(s.frames[1:]))
    assert fwd[0]["metadata"] == [b"id", b"m"] and fwd[1]["metadata"] == expect_md
    for f in fwd:  # nothing else differs
        assert (f["service"], f["client_address"], f["data"]) == ("echo", b"C", [b"d", b""])


def test_mutant_no_client_address() -> None:
    ref, mut = both("no-client-address")
    fwd = []
    for b in (ref, mut):
        register(b, b"W")
        fwd.append(sends(b.receive("router", [b"C", *req()], T0))[0].frames)
    assert fwd[0] == [b"W", *req(addr=b"C")] and fwd[1] == [b"W", *req()]
    # and an address that is present still passes
    assert sends(mut.receive("router", [b"W", *enc("PING")], T0))  # (ready again)
    assert sends(mut.receive("router", [b"X", *req(addr=b"C")], T0), "REQUEST")[0].frames == [b"W", *req(addr=b"C")]


@pytest.mark.parametrize("name,clause", [
    ("wrong-header", "dcp.wire.header"), ("wrong-version", "dcp.wire.version"), ("dagbox-type", None)])
def test_mutant_header_brokers(name: str, clause: str | None) -> None:
    ref, mut = both(name)
    r, m = register(ref, b"W"), register(mut, b"W")
    assert frames_out(r) == [[b"W", *enc("REGISTER", service="echo")]]
    (bad,) = frames_out(m)
    assert len(bad) == len(frames_out(r)[0]) and bad[0] == b"W"
    with pytest.raises(DecodeError) as e:
        S.decode(bad[1:])
    if clause is None:  # the DagBox 4-byte type: valid only in that dialect
        assert isinstance(e.value, ConformanceError) and e.value.dialects == ["dcp:dagbox"]
        assert D.decode(bad[1:]).name == "REGISTER"
    else:
        assert e.value.clause == clause
    # every message is affected, the pong too
    p = sends(mut.receive("router", [b"W", *enc("PING")], T0))[0].frames[1:]
    with pytest.raises(DecodeError):
        S.decode(p)


def test_mutant_crash_on_malformed() -> None:
    ref, mut = both("crash-on-malformed")
    assert of(ref.receive("router", [b"X", b"junk"], T0), Discard)
    with pytest.raises(RuntimeError):
        mut.receive("router", [b"X", b"junk"], T0)
    assert sends(register(mut, b"W"))  # well-formed input is served as usual


def test_mutant_drops_metadata() -> None:
    ref, mut = both("drops-metadata", service="echo")
    out = []
    for w in (ref, mut):
        w.start(T0)
        out.append(sends(w.receive("dealer", req(addr=b"C", md=(b"id", b"m")), T0))[0].frames)
    assert out[0] == rep(b"C", md=(b"id", b"m"), data=(b"hello",))
    assert out[1] == rep(b"C", md=(), data=(b"hello",))


def test_mutant_no_ping() -> None:
    ref, mut = both("no-ping", heartbeat_ms=100, liveness=3)
    types = []
    for w in (ref, mut):
        w.start(T0)
        confirm(w)
        seen = []
        for t in (100, 200):
            seen += [s.msg_type for s in sends(w.handle_timer(T0 + t * MS))]
        types.append(seen)
        assert w.get_timer() is not None and w.get_timer() > T0 + 200 * MS  # no busy loop
    assert types == [["PING", "PING"], []]


def test_mutant_no_reregister() -> None:
    ref, mut = both("no-reregister", service="svc")
    outs = []
    for w in (ref, mut):
        w.start(T0)
        confirm(w)
        outs.append(w.receive("dealer", enc("RECONNECT"), T0 + MS))
    assert [s.msg_type for s in sends(outs[0])] == ["REGISTER"]
    assert sends(outs[1]) == []


def test_mutant_duplicate_delivery() -> None:
    ref, mut = both("duplicate-delivery", timeout_ms=100)
    delivered = []
    for c in (ref, mut):
        c.start(T0)
        ask(c, "r1", T0)
        c.handle_timer(T0 + 100 * MS)  # retried: two replies come back
        a = c.receive("dealer", rep(b"C", md=(b"r1",)), T0 + 120 * MS)
        b = c.receive("dealer", rep(b"C", md=(b"r1",)), T0 + 121 * MS)
        delivered.append(len(of(a + b, Deliver)))
    assert delivered == [1, 2]


def test_mutant_pings() -> None:
    ref, mut = both("pings", ping_ms=100)
    types = []
    for c in (ref, mut):
        seen = c.start(T0)
        for t in (100, 200):
            seen += c.handle_timer(T0 + t * MS)
        types.append([s.msg_type for s in sends(seen)])
    assert types == [[], ["PING", "PING"]]
    assert sends(mut.handle_timer(T0 + 300 * MS))[0].frames == enc("PING")


# ---- the sans-IO rule ----------------------------------------------------------------------------


def test_nodes_are_sans_io() -> None:
    forbidden = {"zmq", "simpy", "time", "socket", "asyncio", "threading", "random", "os", "subprocess"}
    root = pathlib.Path(__file__).resolve().parents[2] / "reference_nodes" / "dcp"
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                assert n.split(".")[0] not in forbidden, f"{path.name} imports {n}"


def test_get_timer_follows_the_deadlines_and_an_early_wake_up_is_harmless() -> None:
    b = broker(heartbeat_ms=100, liveness=3)
    register(b, b"W", now=T0)  # expiry at T0 + 300 ms
    for t in (50, 100, 150, 200):  # traffic keeps postponing the expiry
        b.receive("router", [b"W", *enc("PING")], T0 + t * MS)
        assert b.get_timer() == T0 + (t + 300) * MS
    early = b.handle_timer(T0 + 300 * MS)  # woken early (a runtime may): W is not due
    assert not notes(early, "worker-expired") and b.get_timer() == T0 + 500 * MS
    assert notes(b.handle_timer(T0 + 500 * MS), "worker-expired")
    # an earlier deadline shows at once: a worker's service time inside its heartbeat
    w, _ = worker(service_time_ms=10, heartbeat_ms=1000)
    confirm(w)
    w.receive("dealer", req(addr=b"C", md=(b"1",)), T0 + 10 * MS)
    assert w.get_timer() == T0 + 20 * MS
