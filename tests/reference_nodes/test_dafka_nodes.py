"""Dafka reference nodes driven directly through the sans-IO contract (harness/node.py): call
start / receive / handle_timer / command with frames and times, assert on the actions.

Frames are built with the strict codec (the document plus docs/errata.md); what a node
sends is compared byte for byte with what the codec encodes for the expected fields.
"""

from __future__ import annotations

import ast
import pathlib
import random
from typing import Any

import pytest

from harness.node import (
    NS_PER_MS, Connect, Deliver, Discard, Disconnect, DurableStore, Send, SocketType, Subscribe,
)
from harness.protocols import catalogue, codec
from harness.protocols.dafka import PEER
from reference_nodes.dafka import mutants as M
from reference_nodes.dafka.common import FetchState, Runs, new_address
from reference_nodes.dafka.consumer import Consumer
from reference_nodes.dafka.producer import Producer
from reference_nodes.dafka.store import Store
from reference_nodes.dafka.tower import Tower
from tests.reference_nodes.node_helpers import ctx, notes, of, sends

MS = NS_PER_MS
S = codec("dafka")
Z = codec("dafka", "dafka:zproto")
T0 = 1_000 * MS  # an arbitrary non-zero start time
P = "A" * 32  # a producer address
P2 = "B" * 32
C = "C" * 32  # a consumer address
ST = "D" * 32  # a store address


def enc(name: str, c=S, **fields: Any) -> list[bytes]:
    return c.encode(name, fields)


def records(actions) -> list[tuple[str, str, int, bytes]]:
    return [(d.data["topic"], d.data["partition"], d.data["offset"], d.data["content"])
            for d in of(actions, Deliver) if d.kind == "record"]


def dec(send: Send, c=S):
    return c.decode(send.frames, channel=PEER)


def record(topic="t", address=P, seq=0, content=b"x", c=S) -> list[bytes]:
    return enc("RECORD", c, topic=topic, address=address, subject=topic, sequence=seq, content=content)


def direct_record(to, topic="t", address=P, seq=0, content=b"x", c=S) -> list[bytes]:
    return enc("DIRECT-RECORD", c, topic=to, address=address, subject=topic, sequence=seq, content=content)


def head(topic="t", address=P, seq=0, c=S) -> list[bytes]:
    return enc("HEAD", c, topic=topic, address=address, subject=topic, sequence=seq)


def direct_head(to, topic="t", address=P, seq=0) -> list[bytes]:
    return enc("DIRECT-HEAD", topic=to, address=address, subject=topic, sequence=seq)


def fetch(partition=P, requestor=C, topic="t", seq=0, count=1) -> list[bytes]:
    return enc("FETCH", topic=partition, address=requestor, subject=topic, sequence=seq, count=count)


def ack(partition=P, store=ST, topic="t", seq=0, c=S) -> list[bytes]:
    fields = {"topic": partition, "subject": topic, "sequence": seq}
    if c is S:
        fields["address"] = store
    return c.encode("ACK", fields)


def tower_beacon(sender: str, endpoint: str) -> list[bytes]:
    return enc("TOWER-BEACON", sender=sender, endpoint=endpoint)


MALFORMED = [
    ([b"garbage"], "dafka.wire.grammar"),
    ([b"Mt", b"\xaa\xa0M\x01\x01A\x01t" + bytes(8), b"x"], "dafka.wire.signature"),  # AA A0 (E-DAFKA-01)
    ([b"Mt", b"\xaa\xa5M\x02\x01A\x01t" + bytes(8), b"x"], "dafka.wire.version"),
    ([b"Mt", b"\xaa\xa5H\x01\x01A\x01t" + bytes(8), b"x"], "dafka.wire.grammar"),  # ids differ
    ([b"Mt", b"\xaa\xa5M\x01\x01A\x01t" + bytes(8), b"x", b"y"], "dafka.wire.single-frame-content"),
    ([b"Gt", b"\xaa\xa5G\x01\x05AB"], "dafka.wire.grammar"),  # string shorter than its length
]


# ---- helpers of common.py ------------------------------------------------------------------------


def test_runs_offsets_as_intervals() -> None:
    r = Runs()
    assert not r and r.prefix_end() == -1 and r.lowest_run_end() == -1
    for o in (5, 3, 4, 0, 9, 1):
        assert r.add(o)
    assert not r.add(4)
    assert (r.starts, r.ends, len(r)) == ([0, 3, 9], [1, 5, 9], 6)
    assert 4 in r and 2 not in r and 10 not in r
    assert r.prefix_end() == 1 and r.lowest_run_end() == 1
    assert r.missing(0, 9) == (2, 8) and r.missing(0, 12) == (2, 12) and r.missing(3, 5) == (6, 2)
    assert r.within(1, 10) == [1, 3, 4, 5, 9] and r.within(4, 4) == [] and r.within(6, 9) == []
    r.add(2)
    assert (r.starts, r.ends) == ([0, 9], [5, 9]) and r.prefix_end() == 5
    r.discard_below(4)
    assert (r.starts, r.ends, len(r)) == ([4, 9], [5, 9], 3)
    r.discard_below(9)
    assert (r.starts, r.ends, len(r)) == ([9], [9], 1)
    assert Runs([7, 8]).prefix_end() == -1 and Runs([7, 8]).lowest_run_end() == 8


def test_fetch_pacing() -> None:
    f, held = FetchState(), Runs([5])
    assert f.plan(held, 3, 2, T0, 100) is None and f.deadline(100) is None
    assert f.plan(held, 0, 4, T0, 100) == (0, 5) and f.deadline(100) == T0 + 100
    assert f.plan(held, 0, 4, T0 + 50, 100) is None  # outstanding
    assert f.plan(held, 0, 7, T0 + 60, 100) == (6, 2)  # only what is new and missing
    assert f.plan(held, 2, 7, T0 + 100, 100) == (2, 6)  # retry: the whole range again
    assert f.plan(held, 8, 7, T0 + 101, 100) is None and f.deadline(100) is None  # filled


def test_addresses_are_uuids_from_the_rng() -> None:
    a = new_address(random.Random(1))
    assert len(a) == 32 and a == a.upper() and int(a, 16) >= 0
    assert a == new_address(random.Random(1)) != new_address(random.Random(2))
    assert Producer(ctx(seed=7)).address == Producer(ctx(seed=7)).address != Producer(ctx(seed=8)).address
    assert Consumer(ctx(address="X1")).address == "X1"


# ---- tower ---------------------------------------------------------------------------------------


def tower(**config: Any) -> Tower:
    t = Tower(ctx("tower", **config))
    t.start(T0)
    return t


def test_tower_sockets() -> None:
    xsub, xpub = Tower(ctx("tower")).sockets()
    assert (xsub.name, xsub.type, xsub.bind, xsub.subscribe) == ("xsub", SocketType.XSUB, ("tcp://127.0.0.1:5556",), (b"B",))
    assert (xpub.name, xpub.type, xpub.bind, xpub.welcome) == ("xpub", SocketType.XPUB, ("tcp://127.0.0.1:5557",), b"W")
    t = Tower(ctx("tower", bind_sub="tcp://127.0.0.1:7000", bind_pub=["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"]))
    assert [s.bind for s in t.sockets()] == [("tcp://127.0.0.1:7000",), ("tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002")]
    assert (t.protocol, t.role) == ("dafka", "tower")
    with pytest.raises(ValueError):
        Tower(ctx("tower", bind_sub=[]))


def test_tower_forwards_beacons() -> None:
    t = tower()
    out = t.receive("xsub", enc("BEACON", sender=P, host="10.0.0.7", port=6001), T0)
    (fwd,) = sends(out)
    assert (fwd.socket, fwd.msg_type) == ("xpub", "TOWER-BEACON")
    assert fwd.frames == [b"B", P.encode(), b"tcp://10.0.0.7:6001"]
    assert notes(out, "node-seen")[0].data == {"peer": P, "endpoint": "tcp://10.0.0.7:6001"}
    out = t.receive("xsub", enc("BEACON", sender=P, host="10.0.0.7", port=6001), T0 + MS)
    assert len(sends(out)) == 1 and not notes(out, "node-seen")
    assert t.command({"op": "status"}, T0)[0].data == {"nodes": {P: "tcp://10.0.0.7:6001"}, "forwarded": 2}
    with pytest.raises(ValueError):
        t.command({"op": "nope"}, T0)


def test_tower_forwards_subscriptions_upstream_but_not_welcome() -> None:
    t = tower()
    (up,) = sends(t.receive("xpub", [b"\x01B"], T0))
    assert (up.socket, up.frames, up.msg_type) == ("xsub", [b"\x01B"], "SUBSCRIBE")
    (down,) = sends(t.receive("xpub", [b"\x00B"], T0))
    assert (down.frames, down.msg_type) == ([b"\x00B"], "UNSUBSCRIBE")
    assert t.receive("xpub", [b"\x01W"], T0) == []


@pytest.mark.parametrize("frames, socket, clause", [
    ([b"B", P.encode(), b"host"], "xsub", "dafka.interconnect.address-beacon"),  # no port
    ([b"B", P.encode(), b"host", b"70000"], "xsub", "dafka.interconnect.address-beacon"),
    ([b"B", P.encode(), b"a/b", b"1"], "xsub", "dafka.interconnect.address-beacon"),  # not an endpoint host
    ([b"X"], "xsub", "dafka.wire.grammar"),  # not even a beacon: the codec cannot tell what it is
    ([b"\x02B"], "xpub", "dafka.subscription.register"),
    ([b"\x01B", b"more"], "xpub", "dafka.subscription.register"),
])
def test_tower_discards_garbage(frames, socket, clause) -> None:
    t = tower()
    (d,) = t.receive(socket, frames, T0)
    assert isinstance(d, Discard) and d.clause == clause and d.frames == frames


# ---- what every node shares (shown with each role) -------------------------------------------------

TWO_TOWERS = [["tcp://127.0.0.1:5556", "tcp://127.0.0.1:5557"], ["tcp://127.0.0.1:5566", "tcp://127.0.0.1:5567"]]


@pytest.mark.parametrize("cls", [Producer, Store, Consumer])
def test_node_sockets(cls) -> None:
    n = cls(ctx(cls.__name__, bind="tcp://127.0.0.1:6001", towers=TWO_TOWERS))
    pub, sub, xpub, peer = n.sockets()
    assert (pub.name, pub.type, pub.connect) == ("tower_pub", SocketType.PUB, ("tcp://127.0.0.1:5556", "tcp://127.0.0.1:5566"))
    assert (sub.name, sub.type, sub.connect, sub.subscribe) == (
        "tower_sub", SocketType.SUB, ("tcp://127.0.0.1:5557", "tcp://127.0.0.1:5567"), (b"B", b"W"))
    assert (xpub.name, xpub.type, xpub.bind, xpub.xpub_verbose) == ("xpub", SocketType.XPUB, ("tcp://127.0.0.1:6001",), True)
    assert (peer.name, peer.type, peer.connect) == ("peer_sub", SocketType.SUB, ())
    assert n.protocol == "dafka" and n.role == cls.__name__.lower()
    one = cls(ctx(cls.__name__, bind="tcp://127.0.0.1:6001"))
    assert one.sockets()[0].connect == ("tcp://127.0.0.1:5556",) and one.sockets()[1].connect == ("tcp://127.0.0.1:5557",)


def test_peer_subscriptions_per_role() -> None:
    p = Producer(ctx(address=P, topic="t"))
    assert p.sockets()[3].subscribe == (b"K" + P.encode(), b"F" + P.encode(), b"Gt")
    assert Producer(ctx(address=P)).sockets()[3].subscribe == (b"K" + P.encode(), b"F" + P.encode())
    s = Store(ctx(address=ST))
    assert s.sockets()[3].subscribe == (b"M", b"H", b"D" + ST.encode(), b"F", b"G", b"W")
    c = Consumer(ctx(address=C, topics=["t", "u"]))
    assert c.sockets()[3].subscribe == (b"D" + C.encode(), b"E" + C.encode(), b"L" + C.encode(), b"Mt", b"Ht", b"Mu", b"Hu")


@pytest.mark.parametrize("config", [
    {"dialect": "nope"}, {"bind": "ipc:///tmp/x"}, {"bind": ["tcp://a:1"]}, {"bind": "tcp://a:70000"},
    {"towers": []}, {"towers": [["tcp://a:1"]]}, {"beacon_ms": 0}, {"beacon_ms": "x"}, {"peer_expiry_ms": -1},
    {"address": ""},
])
def test_node_config_errors(config) -> None:
    with pytest.raises(ValueError):
        Consumer(ctx(**config))


def test_default_bind_comes_from_the_rng_and_advertise() -> None:
    a, b = Consumer(ctx(seed=1)), Consumer(ctx(seed=1))
    assert a.bind == b.bind and a.bind.startswith("tcp://127.0.0.1:")
    n = Consumer(ctx(bind="tcp://*:6001"))
    assert (n.host, n.port, n.endpoint) == ("127.0.0.1", 6001, "tcp://127.0.0.1:6001")
    n = Consumer(ctx(bind="tcp://*:6001", advertise="tcp://10.1.2.3:7001"))
    assert (n.host, n.port) == ("10.1.2.3", 7001)


def test_beacons_at_start_on_welcome_and_at_the_interval() -> None:
    n = Consumer(ctx(address=C, bind="tcp://127.0.0.1:6001", beacon_ms=100))
    out = n.start(T0)
    (b,) = sends(out, "BEACON")
    assert (b.socket, b.frames) == ("tower_pub", enc("BEACON", sender=C, host="127.0.0.1", port=6001))
    assert n.get_timer() == T0 + 100 * MS
    out = n.receive("tower_sub", [b"W"], T0 + 10 * MS)
    assert sends(out, "BEACON")[0].frames == b.frames and notes(out, "tower-welcome")
    assert sends(n.handle_timer(T0 + 50 * MS)) == []  # early wake-up: nothing due
    out = n.handle_timer(T0 + 100 * MS)
    assert sends(out, "BEACON") and n.get_timer() == T0 + 200 * MS


def test_discovery_connect_and_expiry() -> None:
    n = Consumer(ctx(address=C, bind="tcp://127.0.0.1:6001", beacon_ms=100, peer_expiry_ms=400))
    n.start(T0)
    out = n.receive("tower_sub", tower_beacon(P, "tcp://127.0.0.1:6002"), T0)
    assert of(out, Connect) == [Connect("peer_sub", "tcp://127.0.0.1:6002")]
    assert notes(out, "peer-discovered")[0].data == {"peer": P, "endpoint": "tcp://127.0.0.1:6002"}
    assert of(n.receive("tower_sub", tower_beacon(C, "tcp://127.0.0.1:6001"), T0), Connect) == []  # own
    n.receive("tower_sub", tower_beacon(ST, "tcp://127.0.0.1:6003"), T0 + 100 * MS)
    assert n.receive("tower_sub", tower_beacon(P, "tcp://127.0.0.1:6002"), T0 + 300 * MS) == []  # known
    out = n.handle_timer(T0 + 500 * MS)
    assert of(out, Disconnect) == [Disconnect("peer_sub", "tcp://127.0.0.1:6003")]
    assert notes(out, "peer-expired")[0].data["peer"] == ST
    out = n.handle_timer(T0 + 700 * MS)
    assert of(out, Disconnect) == [Disconnect("peer_sub", "tcp://127.0.0.1:6002")]
    assert of(n.receive("tower_sub", tower_beacon(ST, "tcp://127.0.0.1:6003"), T0 + 800 * MS), Connect)
    never = Consumer(ctx(peer_expiry_ms=0, beacon_ms=100))
    never.start(T0)
    never.receive("tower_sub", tower_beacon(P, "tcp://127.0.0.1:6002"), T0)
    assert not of(never.handle_timer(T0 + 10_000 * MS), Disconnect)


@pytest.mark.parametrize("cls", [Producer, Store, Consumer])
@pytest.mark.parametrize("frames, clause", MALFORMED)
def test_malformed_input_is_discarded_with_its_clause(cls, frames, clause) -> None:
    n = cls(ctx(address=C, topics=["t"]) if cls is Consumer else ctx(address=P, topic="t"))
    n.start(T0)
    out = n.receive("peer_sub", frames, T0)
    (d,) = of(out, Discard)
    assert d.clause == clause and d.frames == frames and not sends(out)


def test_malformed_tower_and_xpub_input() -> None:
    n = Store(ctx(address=ST))
    n.start(T0)
    (d,) = of(n.receive("tower_sub", [b"B", b"x", b"not an endpoint"], T0), Discard)
    assert d.clause == "dafka.interconnect.address-beacon"
    (d,) = of(n.receive("xpub", [b"\x05L"], T0), Discard)
    assert d.clause == "dafka.subscription.register"
    assert of(n.receive("xpub", [b"\x01L", b"x"], T0), Discard)


# ---- producer ------------------------------------------------------------------------------------


def producer(**config: Any) -> Producer:
    config.setdefault("address", P)
    p = Producer(ctx("producer", **config))
    p.start(T0)
    return p


def produce(p: Producer, content: bytes = b"x", now: int = T0, **kw: Any) -> list:
    return p.command({"op": "produce", "content": content, **kw}, now)


def test_producer_records_from_zero_without_gaps() -> None:
    p = producer(topic="t", head_ms=100)
    for i in range(3):
        out = produce(p, b"r%d" % i, T0 + i * MS)
        (r,) = sends(out)
        assert r.frames == record(seq=i, content=b"r%d" % i) and r.socket == "xpub" and r.msg_type == "RECORD"
        assert r.meta == {"topic": "t", "seq": i, "partition": P}
    assert p.status()["held"] == [0, 1, 2] and p.status()["last"] == 2


def test_producer_head_only_after_the_first_record() -> None:
    p = producer(topic="t", head_ms=100, beacon_ms=1000)
    assert sends(p.handle_timer(T0 + 500 * MS), "HEAD") == []
    out = produce(p, now=T0 + 600 * MS)
    assert p.get_timer() == T0 + 700 * MS
    produce(p, now=T0 + 650 * MS)
    out = p.handle_timer(T0 + 700 * MS)
    (h,) = sends(out, "HEAD")
    assert h.frames == head(seq=1) and h.meta["seq"] == 1
    assert p.get_timer() == T0 + 800 * MS
    assert sends(p.handle_timer(T0 + 800 * MS), "HEAD")[0].frames == head(seq=1)


def test_producer_topic_from_the_first_record_and_only_one_topic() -> None:
    p = producer()
    with pytest.raises(ValueError):
        produce(p)  # no topic anywhere
    out = produce(p, topic="news")
    assert of(out, Subscribe) == [Subscribe("peer_sub", b"Gnews")]
    assert sends(out)[0].frames == record("news")
    assert not of(produce(p, topic="news"), Subscribe)
    with pytest.raises(ValueError):
        produce(p, topic="other")
    with pytest.raises(ValueError):
        p.command({"op": "consume"}, T0)
    assert p.command({"op": "status"}, T0)[0].kind == "producer-status"


def test_producer_answers_fetch_ascending_with_what_it_holds() -> None:
    p = producer(topic="t")
    for i in range(5):
        produce(p, b"r%d" % i)
    out = p.receive("peer_sub", fetch(seq=1, count=3), T0)
    assert [s.frames for s in sends(out)] == [direct_record(C, seq=i, content=b"r%d" % i) for i in (1, 2, 3)]
    assert {s.msg_type for s in sends(out)} == {"DIRECT-RECORD"}
    assert [s.meta["seq"] for s in sends(out)] == [1, 2, 3]
    assert len(sends(p.receive("peer_sub", fetch(seq=3, count=100), T0))) == 2
    assert sends(p.receive("peer_sub", fetch(seq=0, count=0), T0)) == []
    assert sends(p.receive("peer_sub", fetch(seq=9, count=3), T0)) == []
    assert sends(p.receive("peer_sub", fetch(partition=P + "X"), T0)) == []  # another partition
    assert sends(p.receive("peer_sub", fetch(topic="u"), T0)) == []  # another topic


def test_producer_keeps_records_until_a_cumulative_ack() -> None:
    p = producer(topic="t")
    for i in range(5):
        produce(p)
    assert p.receive("peer_sub", ack(partition=P + "X", seq=4), T0) == []
    assert p.receive("peer_sub", ack(topic="u", seq=4), T0) == []
    assert p.status()["held"] == [0, 1, 2, 3, 4]
    out = p.receive("peer_sub", ack(seq=2), T0)
    assert notes(out, "records-released")[0].data == {"topic": "t", "partition": P, "upto": 2, "count": 3}
    assert p.status()["held"] == [3, 4] and p.acked == 2
    assert sends(p.receive("peer_sub", fetch(seq=0, count=5), T0), "DIRECT-RECORD")[0].frames[0] == b"D" + C.encode()
    assert [dec(s)["sequence"] for s in sends(p.receive("peer_sub", fetch(seq=0, count=5), T0))] == [3, 4]
    assert p.receive("peer_sub", ack(seq=1), T0) == []  # older ACK: nothing
    p.receive("peer_sub", ack(seq=99), T0)
    assert p.status()["held"] == []
    keep = producer(topic="t", release_acked=False)
    produce(keep)
    keep.receive("peer_sub", ack(seq=0), T0)
    assert keep.status()["held"] == [0] and keep.acked == 0


def test_producer_direct_head_for_its_topic_only() -> None:
    p = producer(topic="t")
    assert p.receive("peer_sub", enc("GET-HEADS", topic="t", address=C), T0) == []  # nothing published
    produce(p)
    produce(p)
    (h,) = sends(p.receive("peer_sub", enc("GET-HEADS", topic="t", address=C), T0))
    assert h.frames == direct_head(C, seq=1) and h.msg_type == "DIRECT-HEAD"
    assert p.receive("peer_sub", enc("GET-HEADS", topic="tt", address=C), T0) == []  # E-DAFKA-20


def test_producer_discards_what_it_never_expects() -> None:
    p = producer(topic="t")
    (d,) = of(p.receive("peer_sub", record(), T0), Discard)
    assert "unexpected RECORD" in d.reason
    assert p.receive("xpub", [b"\x01Mt"], T0) == []  # subscriptions are no news to a producer


def test_producer_zproto_dialect() -> None:
    p = producer(topic="t", dialect="dafka:zproto")
    (r,) = sends(produce(p))
    assert r.frames == record(c=Z)
    out = p.receive("peer_sub", ack(seq=0, c=Z), T0)
    assert notes(out, "records-released")


# ---- store -----------------------------------------------------------------------------------------


def store(db: DurableStore | None = None, **config: Any) -> Store:
    config.setdefault("address", ST)
    s = Store(ctx("store", store=db, **config))
    s.start(T0)
    return s


def test_store_stores_durably_and_acks_cumulatively() -> None:
    db = DurableStore()
    s = store(db)
    out = s.receive("peer_sub", record(seq=0, content=b"a"), T0)
    (k,) = sends(out)
    assert k.frames == ack(seq=0) and k.msg_type == "ACK" and k.meta == {"topic": "t", "seq": 0, "partition": P}
    assert db.get("rec/0/0") == b"a" and db.get("part/0") == {"topic": b"t", "partition": P.encode()}
    assert db.get("address") == ST
    out = s.receive("peer_sub", record(seq=1, content=b"b"), T0)
    assert sends(out)[0].frames == ack(seq=1)
    assert sends(s.receive("peer_sub", record(seq=1, content=b"b"), T0)) == []  # duplicate: nothing new


def test_store_fetches_gaps_and_acks_when_filled() -> None:
    s = store(fetch_retry_ms=100)
    s.receive("peer_sub", record(seq=0), T0)
    out = s.receive("peer_sub", record(seq=3), T0)
    (f,) = sends(out)
    assert f.frames == fetch(requestor=ST, seq=1, count=2) and f.msg_type == "FETCH"
    assert s.get_timer() == T0 + 100 * MS
    out = s.receive("peer_sub", head(seq=5), T0 + MS)
    assert [x.frames for x in sends(out)] == [ack(seq=0), fetch(requestor=ST, seq=4, count=2)]
    out = s.handle_timer(T0 + 100 * MS)
    assert sends(out, "FETCH")[0].frames == fetch(requestor=ST, seq=1, count=5)  # retry: all of it
    out = s.receive("peer_sub", direct_record(ST, seq=1), T0 + 101 * MS)
    assert sends(out, "ACK")[0].frames == ack(seq=1)
    assert s.receive("peer_sub", direct_record(ST + "X", seq=2), T0) == []  # not for us
    out = s.receive("peer_sub", direct_record(ST, seq=2), T0 + 102 * MS)
    assert sends(out, "ACK")[0].frames == ack(seq=3)


def test_store_answers_fetch_ascending_from_any_requestor() -> None:
    s = store()
    for o in (0, 1, 3, 4):
        s.receive("peer_sub", record(seq=o, content=b"r%d" % o), T0)
    out = s.receive("peer_sub", fetch(seq=1, count=4, requestor=C), T0)
    assert [x.frames for x in sends(out)] == [direct_record(C, seq=o, content=b"r%d" % o) for o in (1, 3, 4)]
    assert sends(s.receive("peer_sub", fetch(seq=0, count=2, requestor=ST), T0)) == []  # its own
    assert sends(s.receive("peer_sub", fetch(partition=P2), T0)) == []
    assert sends(s.receive("peer_sub", fetch(topic="u"), T0)) == []


def test_store_direct_heads_per_partition_of_the_topic() -> None:
    s = store()
    s.receive("peer_sub", record(seq=0), T0)
    s.receive("peer_sub", record(seq=1), T0)
    s.receive("peer_sub", record(address=P2, seq=0), T0)
    s.receive("peer_sub", record(topic="tt", address="E" * 32, seq=0), T0)
    s.receive("peer_sub", record(address="F" * 32, seq=4), T0)  # holds 4 only
    s.receive("peer_sub", head(address="9" * 32, seq=7), T0)  # holds nothing of it
    out = s.receive("peer_sub", enc("GET-HEADS", topic="t", address=C), T0)
    assert [x.frames for x in sends(out)] == [direct_head(C, seq=1), direct_head(C, address=P2, seq=0),
                                             direct_head(C, address="F" * 32, seq=4)]
    out = s.receive("peer_sub", enc("CONSUMER-HELLO", topic=ST, address=C, subjects=["tt", "none"]), T0)
    assert [x.frames for x in sends(out)] == [direct_head(C, topic="tt", address="E" * 32, seq=0)]
    assert s.receive("peer_sub", enc("CONSUMER-HELLO", topic=ST + "X", address=C, subjects=["t"]), T0) == []


def test_store_hello_on_a_consumer_subscription() -> None:
    s = store()
    (h,) = sends(s.receive("xpub", [b"\x01L" + C.encode()], T0))
    assert h.frames == enc("STORE-HELLO", topic=C, address=ST) and h.msg_type == "STORE-HELLO"
    assert s.receive("xpub", [b"\x00L" + C.encode()], T0) == []
    assert s.receive("xpub", [b"\x01L"], T0) == []  # no consumer address to answer
    assert s.receive("xpub", [b"\x01Mt"], T0) == []


def test_store_restart_keeps_records_and_address() -> None:
    db = DurableStore()
    s = store(db, address=None)
    address = s.address
    for o in range(3):
        s.receive("peer_sub", record(seq=o, content=b"r%d" % o), T0)
    s.receive("peer_sub", record(address=P2, seq=0), T0)
    again = Store(ctx("store", store=db, seed=99))
    assert again.address == address
    out = again.start(T0)
    assert notes(out, "store-loaded")[0].data == {"partitions": 2, "records": 4}
    out = again.receive("peer_sub", fetch(seq=0, count=3), T0)
    assert [x.frames for x in sends(out)] == [direct_record(C, seq=o, content=b"r%d" % o) for o in range(3)]
    out = again.receive("peer_sub", head(seq=2), T0)
    assert [x.frames for x in sends(out)] == [enc("ACK", topic=P, address=address, subject="t", sequence=2)]
    assert len(sends(again.receive("peer_sub", enc("GET-HEADS", topic="t", address=C), T0))) == 2


def test_store_zproto_ack_has_no_address() -> None:
    s = store(dialect="dafka:zproto")
    (k,) = sends(s.receive("peer_sub", record(c=Z), T0))
    assert k.frames == ack(seq=0, c=Z)
    # an answer the dialect cannot encode (a 0x00 in a topic) drops the request, not the node
    (d,) = s.receive("peer_sub", enc("GET-HEADS", Z, topic="t", address="C\x00C"), T0)
    assert isinstance(d, Discard) and d.clause == "dafka.wire.grammar" and "cannot answer GET-HEADS" in d.reason
    assert sends(s.receive("peer_sub", enc("GET-HEADS", Z, topic="t", address=C), T0))


def test_absurd_heads_give_bounded_fetches() -> None:
    s = store()
    out = s.receive("peer_sub", head(seq=2**64 - 1), T0)
    assert dec(sends(out, "FETCH")[0])["count"] == 2**32 - 1
    c = consumer()
    out = c.receive("peer_sub", head(seq=2**64 - 1), T0)
    assert dec(sends(out, "FETCH")[0])["count"] == 2**32 - 1
    late = consumer(offset_reset="latest")
    assert not sends(late.receive("peer_sub", head(seq=2**64 - 1), T0), "FETCH")


# ---- consumer ------------------------------------------------------------------------------------


def consumer(db: DurableStore | None = None, **config: Any) -> Consumer:
    config.setdefault("address", C)
    config.setdefault("topics", ["t"])
    c = Consumer(ctx("consumer", store=db, **config))
    c.start(T0)
    return c


def test_consumer_get_heads_on_start_and_subscribe() -> None:
    db = DurableStore()
    c = Consumer(ctx("consumer", store=db, address=C, topics=["t"], get_heads_ms=0))
    out = c.start(T0)
    (g,) = sends(out, "GET-HEADS")
    assert g.frames == enc("GET-HEADS", topic="t", address=C) and g.meta["topic"] == "t"
    out = c.command({"op": "subscribe", "topic": "u"}, T0)
    assert of(out, Subscribe) == [Subscribe("peer_sub", b"Mu"), Subscribe("peer_sub", b"Hu")]
    assert sends(out)[0].frames == enc("GET-HEADS", topic="u", address=C)
    assert c.command({"op": "subscribe", "topic": "u"}, T0) == []
    assert Consumer(ctx("consumer", store=db)).topics == ["u"]  # kept across a restart
    with pytest.raises(ValueError):
        c.command({"op": "subscribe"}, T0)
    with pytest.raises(ValueError):
        c.command({"op": "produce"}, T0)


def test_consumer_delivers_in_order_exactly_once() -> None:
    c = consumer(fetch_retry_ms=100)
    out = c.receive("peer_sub", record(seq=0, content=b"a"), T0)
    assert records(out) == [("t", P, 0, b"a")]
    assert notes(out, "partition-start")[0].data == {"topic": "t", "partition": P, "offset": 0, "reset": "earliest"}
    assert records(c.receive("peer_sub", record(seq=0, content=b"a"), T0)) == []  # duplicate
    out = c.receive("peer_sub", record(seq=3, content=b"d"), T0)
    assert records(out) == []
    assert sends(out, "FETCH")[0].frames == fetch(seq=1, count=2)
    assert c.get_timer() == T0 + 100 * MS
    assert records(c.receive("peer_sub", record(seq=3, content=b"d"), T0)) == []
    out = c.receive("peer_sub", direct_record(C, seq=2, content=b"c"), T0)
    assert records(out) == [] and not sends(out)
    out = c.receive("peer_sub", direct_record(C, seq=1, content=b"b"), T0)
    assert records(out) == [("t", P, 1, b"b"), ("t", P, 2, b"c"), ("t", P, 3, b"d")]
    assert records(c.receive("peer_sub", direct_record(C, seq=1, content=b"b"), T0)) == []
    assert c.status()["partitions"][f"t/{P}"] == {"next": 4, "known_head": 3, "buffered": 0}


def test_consumer_fetches_from_heads_and_retries() -> None:
    c = consumer(fetch_retry_ms=100)
    out = c.receive("peer_sub", direct_head(C, seq=4), T0)
    assert sends(out, "FETCH")[0].frames == fetch(seq=0, count=5)
    out = c.receive("peer_sub", head(seq=6), T0 + 10 * MS)
    assert sends(out, "FETCH")[0].frames == fetch(seq=5, count=2)
    c.receive("peer_sub", direct_record(C, seq=0), T0 + 20 * MS)
    out = c.handle_timer(T0 + 100 * MS)
    assert sends(out, "FETCH")[0].frames == fetch(seq=1, count=6)
    assert c.get_timer() == T0 + 200 * MS
    for o in range(1, 7):
        c.receive("peer_sub", direct_record(C, seq=o), T0 + 150 * MS)
    assert not sends(c.handle_timer(T0 + 200 * MS), "FETCH")


def test_consumer_offset_reset_latest() -> None:
    c = consumer(offset_reset="latest")
    out = c.receive("peer_sub", record(seq=5), T0)
    assert records(out) == [("t", P, 5, b"x")] and not sends(out, "FETCH")
    assert notes(out, "partition-start")[0].data["offset"] == 5
    out = c.receive("peer_sub", head(address=P2, seq=9), T0)
    assert not sends(out, "FETCH") and notes(out, "partition-start")[0].data["offset"] == 10
    assert records(c.receive("peer_sub", record(address=P2, seq=10), T0)) == [("t", P2, 10, b"x")]
    early = consumer(offset_reset="earliest")
    assert sends(early.receive("peer_sub", record(seq=5), T0), "FETCH")[0].frames == fetch(seq=0, count=5)
    with pytest.raises(ValueError):
        consumer(offset_reset="middle")


def test_consumer_hellos() -> None:
    c = consumer()
    (h,) = sends(c.receive("peer_sub", enc("STORE-HELLO", topic=C, address=ST), T0))
    assert h.frames == enc("CONSUMER-HELLO", topic=ST, address=C, subjects=["t"]) and h.msg_type == "CONSUMER-HELLO"
    assert c.receive("peer_sub", enc("STORE-HELLO", topic=C + "X", address=ST), T0) == []
    (h,) = sends(c.receive("xpub", [b"\x01W" + ST.encode()], T0))
    assert h.frames == enc("CONSUMER-HELLO", topic=ST, address=C, subjects=["t"])
    assert c.receive("xpub", [b"\x01W"], T0) == []
    bare = consumer(topics=[])
    assert bare.receive("peer_sub", enc("STORE-HELLO", topic=C, address=ST), T0) == []
    assert bare.receive("xpub", [b"\x01W" + ST.encode()], T0) == []


def test_consumer_get_heads_when_someone_subscribes_and_periodically() -> None:
    c = consumer(topics=["t", "u"], get_heads_ms=1000)
    assert [s.frames[0] for s in sends(c.receive("xpub", [b"\x01G"], T0))] == [b"Gt", b"Gu"]
    assert [s.frames[0] for s in sends(c.receive("xpub", [b"\x01Gu"], T0))] == [b"Gu"]
    assert sends(c.receive("xpub", [b"\x00G"], T0)) == []
    out = c.handle_timer(T0 + 1000 * MS)
    assert [s.frames[0] for s in sends(out, "GET-HEADS")] == [b"Gt", b"Gu"]
    assert c.get_timer() == T0 + 2000 * MS


def test_consumer_compares_topics_and_addresses_exactly() -> None:
    c = consumer(topics=["foo"])
    assert c.receive("peer_sub", record(topic="foobar"), T0) == []
    assert c.receive("peer_sub", head(topic="foobar", seq=3), T0) == []
    assert c.receive("peer_sub", direct_record(C + "X", topic="foo"), T0) == []
    assert c.receive("peer_sub", direct_head(C + "X", topic="foo", seq=3), T0) == []
    assert c.receive("peer_sub", direct_record(C, topic="bar"), T0) == []
    bad = enc("RECORD", topic="foo", address=P, subject="bar", sequence=0, content=b"x")
    (d,) = of(c.receive("peer_sub", bad, T0), Discard)
    assert d.clause == "dafka.wire.topic-record"
    assert records(c.receive("peer_sub", record(topic="foo"), T0)) == [("foo", P, 0, b"x")]


def test_consumer_restart_neither_repeats_nor_skips() -> None:
    db = DurableStore()
    c = consumer(db)
    c.receive("peer_sub", record(seq=0), T0)
    c.receive("peer_sub", record(seq=1), T0)
    again = Consumer(ctx("consumer", store=db, topics=["t"], seed=5))
    assert again.address != C
    again.start(T0)
    assert records(again.receive("peer_sub", record(seq=1), T0)) == []
    out = again.receive("peer_sub", record(seq=3), T0)
    assert dec(sends(out, "FETCH")[0])["sequence"] == 2
    assert [r[2] for r in records(again.receive("peer_sub", direct_record(again.address, seq=2), T0))] == [2, 3]


# ---- mutants ---------------------------------------------------------------------------------------


def test_mutant_registry() -> None:
    cat = catalogue("dafka")
    roles = {"producer": Producer, "store": Store, "consumer": Consumer}
    for name, (role, factory, clause) in M.MUTANTS.items():
        assert clause in cat, (name, clause)
        assert issubclass(factory, roles[role]) and factory is not roles[role]
        assert factory.__doc__ and clause in factory.__doc__, name
        node = factory(ctx(name))
        assert (node.protocol, node.role) == ("dafka", role)
    for required in ("skip-offset", "offset-one", "early-release", "descending-fetch-producer",
                     "descending-fetch-store", "memory-store", "duplicate-delivery", "out-of-order",
                     "skip-gaps", "hello-without-subscription", "no-store-hello"):
        assert required in M.MUTANTS


def both(name: str, db: tuple[DurableStore, DurableStore] | None = None, **config: Any):
    role, factory, _ = M.MUTANTS[name]
    ref = {"producer": Producer, "store": Store, "consumer": Consumer}[role]
    dbs = db or (DurableStore(), DurableStore())
    nodes = ref(ctx(role, store=dbs[0], **config)), factory(ctx(role, store=dbs[1], **config))
    for n in nodes:
        n.start(T0)
    return nodes


def offsets_sent(actions, msg_type: str = "RECORD") -> list[int]:
    return [dec(s)["sequence"] for s in sends(actions, msg_type)]


def test_mutant_skip_offset() -> None:
    ref, mut = both("skip-offset", address=P, topic="t")
    got = [[offsets_sent(produce(n))[0] for _ in range(4)] for n in (ref, mut)]
    assert got == [[0, 1, 2, 3], [0, 1, 3, 4]]


def test_mutant_offset_one() -> None:
    ref, mut = both("offset-one", address=P, topic="t")
    got = [[offsets_sent(produce(n))[0] for _ in range(3)] for n in (ref, mut)]
    assert got == [[0, 1, 2], [1, 2, 3]]


def test_mutant_early_release() -> None:
    ref, mut = both("early-release", address=P, topic="t")
    for n in (ref, mut):
        for _ in range(3):
            produce(n)
    answers = [offsets_sent(n.receive("peer_sub", fetch(seq=0, count=3), T0), "DIRECT-RECORD") for n in (ref, mut)]
    assert answers == [[0, 1, 2], []]
    assert [sends(produce(n))[0].frames for n in (ref, mut)][0] == record(seq=3)  # otherwise the same


def test_mutant_descending_fetch_producer() -> None:
    ref, mut = both("descending-fetch-producer", address=P, topic="t")
    for n in (ref, mut):
        for _ in range(3):
            produce(n)
    answers = [offsets_sent(n.receive("peer_sub", fetch(seq=0, count=3), T0), "DIRECT-RECORD") for n in (ref, mut)]
    assert answers == [[0, 1, 2], [2, 1, 0]]


def test_mutant_no_head() -> None:
    ref, mut = both("no-head", address=P, topic="t", head_ms=100)
    heads = []
    for n in (ref, mut):
        produce(n)
        heads.append(len(sends(n.handle_timer(T0 + 100 * MS), "HEAD")))
    assert heads == [1, 0]


def test_mutant_wrong_signature() -> None:
    ref, mut = both("wrong-signature", address=P, topic="t")
    r, m = (sends(produce(n))[0] for n in (ref, mut))
    assert r.frames[1][:2] == b"\xaa\xa5" and m.frames[1][:2] == b"\xaa\xa0"
    assert r.frames[1][2:] == m.frames[1][2:] and r.frames[0] == m.frames[0]
    assert sends(mut.start(T0), "BEACON")[0].frames == sends(ref.start(T0), "BEACON")[0].frames


def test_mutant_descending_fetch_store() -> None:
    ref, mut = both("descending-fetch-store", address=ST)
    for n in (ref, mut):
        for o in range(3):
            n.receive("peer_sub", record(seq=o), T0)
    answers = [offsets_sent(n.receive("peer_sub", fetch(seq=0, count=3), T0), "DIRECT-RECORD") for n in (ref, mut)]
    assert answers == [[0, 1, 2], [2, 1, 0]]


def test_mutant_memory_store() -> None:
    dbs = (DurableStore(), DurableStore())
    ref, mut = both("memory-store", db=dbs, address=ST)
    for n in (ref, mut):
        acks = sends(n.receive("peer_sub", record(seq=0), T0), "ACK")
        assert [a.frames for a in acks] == [ack(seq=0)]  # it ACKs like the reference
    assert "rec/0/0" in dbs[0] and "rec/0/0" not in dbs[1]
    ref2, mut2 = (cls(ctx("store", store=db, address=ST)) for cls, db in ((Store, dbs[0]), (M.MemoryStore, dbs[1])))
    answers = [offsets_sent(n.receive("peer_sub", fetch(seq=0, count=1), T0), "DIRECT-RECORD") for n in (ref2, mut2)]
    assert answers == [[0], []]


def test_mutant_no_store_hello() -> None:
    ref, mut = both("no-store-hello", address=ST)
    got = [[s.msg_type for s in sends(n.receive("xpub", [b"\x01L" + C.encode()], T0))] for n in (ref, mut)]
    assert got == [["STORE-HELLO"], []]
    assert [len(sends(n.receive("peer_sub", record(), T0), "ACK")) for n in (ref, mut)] == [1, 1]


def test_mutant_duplicate_delivery() -> None:
    ref, mut = both("duplicate-delivery", address=C, topics=["t"])
    got = []
    for n in (ref, mut):
        seen = []
        for frames in (record(seq=0), direct_record(C, seq=0), record(seq=2), record(seq=2), direct_record(C, seq=1)):
            seen += [r[2] for r in records(n.receive("peer_sub", frames, T0))]
        got.append(seen)
    assert got == [[0, 1, 2], [0, 0, 2, 1, 2]]


def test_mutant_out_of_order() -> None:
    ref, mut = both("out-of-order", address=C, topics=["t"])
    got = []
    for n in (ref, mut):
        seen = []
        for frames in (record(seq=0), record(seq=2), record(seq=3), record(seq=2), direct_record(C, seq=1),
                       record(seq=4)):
            seen += [r[2] for r in records(n.receive("peer_sub", frames, T0))]
        got.append(seen)
    assert got == [[0, 1, 2, 3, 4], [0, 2, 3, 1, 4]]
    assert [n.status()["partitions"][f"t/{P}"]["next"] for n in (ref, mut)] == [5, 5]


def test_mutant_skip_gaps() -> None:
    ref, mut = both("skip-gaps", address=C, topics=["t"])
    outs = [n.receive("peer_sub", record(seq=0), T0) + n.receive("peer_sub", record(seq=3), T0) for n in (ref, mut)]
    assert [[r[2] for r in records(o)] for o in outs] == [[0], [0, 3]]
    assert [len(sends(o, "FETCH")) for o in outs] == [1, 0]
    assert sends(mut.receive("peer_sub", head(seq=9), T0), "FETCH") == []


def test_mutant_hello_without_subscription() -> None:
    ref, mut = both("hello-without-subscription", address=C, topics=[])
    got = [sends(n.receive("peer_sub", enc("STORE-HELLO", topic=C, address=ST), T0)) for n in (ref, mut)]
    assert got[0] == [] and [s.frames for s in got[1]] == [enc("CONSUMER-HELLO", topic=ST, address=C, subjects=[])]
    ref, mut = both("hello-without-subscription", address=C, topics=["t"])
    got = [[s.frames for s in sends(n.receive("peer_sub", enc("STORE-HELLO", topic=C, address=ST), T0))]
           for n in (ref, mut)]
    assert got[0] == got[1]  # with a topic it behaves like the reference


def test_mutant_no_get_heads() -> None:
    ref, mut = both("no-get-heads", address=C, topics=["t"])
    assert [len(sends(n.receive("xpub", [b"\x01G"], T0), "GET-HEADS")) for n in (ref, mut)] == [1, 0]
    assert [len(sends(n.command({"op": "subscribe", "topic": "u"}, T0), "GET-HEADS")) for n in (ref, mut)] == [1, 0]
    assert [len(records(n.receive("peer_sub", record(), T0))) for n in (ref, mut)] == [1, 1]


# ---- the sans-IO rule ------------------------------------------------------------------------------


def test_nodes_are_sans_io() -> None:
    forbidden = {"zmq", "simpy", "time", "socket", "asyncio", "threading", "random", "os", "uuid", "datetime",
                 "subprocess", "select", "secrets"}
    root = pathlib.Path(__file__).resolve().parents[2] / "reference_nodes" / "dafka"
    paths = sorted(root.glob("*.py"))
    assert {p.name for p in paths} >= {"common.py", "tower.py", "producer.py", "store.py", "consumer.py", "mutants.py"}
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                assert n.split(".")[0] not in forbidden, f"{path.name} imports {n}"


def test_durable_values_are_plain_data() -> None:
    import msgpack

    db = DurableStore()
    s = store(db, address=None)
    s.receive("peer_sub", record(topic="t\udcff", seq=0, content=b"\x00\xff"), T0)  # any octets (E-DAFKA-10)
    c = consumer(DurableStore(), topics=["t\udcff"])
    c.command({"op": "subscribe", "topic": b"\xfe"}, T0)
    c.receive("peer_sub", record(topic="t\udcff", seq=0), T0)
    for snapshot in (db.snapshot(), c.store.snapshot()):
        assert msgpack.unpackb(msgpack.packb(snapshot, use_bin_type=True), raw=False) == snapshot
