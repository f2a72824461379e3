"""Event BUS reference nodes driven directly through the sans-IO contract (harness/node.py):
frames in, actions out, no runtime."""

from __future__ import annotations

import datetime
import random
import re
from typing import Any

import pytest

from harness.node import NS_PER_MS, Connect, Deliver, Discard, Disconnect, DurableStore, Send, SocketType
from harness.packages.eventbus import resolve_target
from harness.protocols import codec
from reference_nodes.eventbus.client import Client
from reference_nodes.eventbus.common import iso8601, server_endpoints, subtrees_value, uuid4
from reference_nodes.eventbus.server import Server
from tests.reference_nodes.node_helpers import ctx, notes, of, sends

MS = NS_PER_MS
S = codec("eventbus")
MT = codec("eventbus", "eventbus:micro-toolkit")
ENDPOINT = "tcp://127.0.0.1:5556"
U = ["0f8fad5b-d9cb-469f-a165-70867728950e", "9a3c2b1e-7f4d-4e2a-b5c6-d8e9f0a1b2c3",
     "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b", "1b2c3d4e-5f60-4a7b-9c8d-0e1f2a3b4c5d"]


def pub(topic: str, uuid: str, c: Any = S, seq: int = 1, data: Any = 1) -> list[bytes]:
    return c.encode("PUB", {"topic": topic, "sequence": seq, "producer": "p", "timestamp": "2017-05-04T10:20:30.123Z",
                            "uuid": uuid, "data": data})


def server(store: DurableStore | None = None, **config: Any) -> Server:
    s = Server(ctx("bus", store, bind=ENDPOINT, **config))
    s.start(0)
    return s


def publish(s: Server, topic: str, uuid: str, c: Any = S) -> Send:
    (b,) = sends(s.receive("collector", [b"prod", *pub(topic, uuid, c)], 0), "BROADCAST")
    return b


def snapshot(s: Server, subtrees: list[str], since: int, c: Any = S) -> list[Send]:
    return sends(s.receive("snapshot", [b"cli", *c.encode("SYNCSTART", {"subtrees": subtrees, "sequence": since})], 0))


# ---- common ------------------------------------------------------------------------------------


def test_endpoints_of_a_server_are_consecutive_ports() -> None:
    assert server_endpoints("tcp://h:7000") == ("tcp://h:7000", "tcp://h:7001", "tcp://h:7002")
    assert server_endpoints(["a", "b", "c"]) == ("a", "b", "c")
    with pytest.raises(ValueError, match="tcp://host:port"):
        server_endpoints("ipc:///tmp/x")


def test_uuids_are_version_4_from_the_rng_and_timestamps_are_utc_milliseconds() -> None:
    a, b = uuid4(random.Random(1)), uuid4(random.Random(1))
    assert a == b and re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", a)
    for ns in (0, 59_999 * MS, 86_400_000 * MS * 800 + 123 * MS):
        want = datetime.datetime.fromtimestamp(1_700_000_000 + ns / 1e9, datetime.timezone.utc)
        assert iso8601(ns) == want.strftime("%Y-%m-%dT%H:%M:%S.") + f"{want.microsecond // 1000:03d}Z"


def test_subtrees_from_config_follow_the_dialect() -> None:
    strict, mt = S.table.fields["subtrees"].type, MT.table.fields["subtrees"].type
    assert subtrees_value("/a/;/b/", strict) == ["/a/", "/b/"]
    assert subtrees_value("/a,/b", mt) == ["/a", "/b"]
    assert subtrees_value(None, strict) == []
    with pytest.raises(ValueError, match="subtrees"):
        subtrees_value("/a,/b", strict)
    with pytest.raises(ValueError, match="subtrees"):
        subtrees_value(["/a/", ""], strict)


# ---- server ------------------------------------------------------------------------------------


def test_server_binds_three_ports_and_says_it_is_primary() -> None:
    s = Server(ctx("bus", bind=ENDPOINT))
    assert [(x.name, x.type, x.bind) for x in s.sockets()] == [
        ("publisher", SocketType.PUB, ("tcp://127.0.0.1:5557",)),
        ("collector", SocketType.ROUTER, ("tcp://127.0.0.1:5558",)),
        ("snapshot", SocketType.ROUTER, (ENDPOINT,))]
    assert notes(s.start(0), "ha-state")[0].data["state"] == "primary"


def test_server_numbers_from_one_and_forwards_the_producers_frames() -> None:
    s = server()
    b = publish(s, "/a/1", U[0])
    frames = pub("/a/1", U[0])
    assert b.frames == [frames[0], (1).to_bytes(8, "big"), *frames[2:]]
    assert S.decode(publish(s, "/a/2", U[1]).frames, channel="publisher")["sequence"] == 2


def test_server_sequence_and_history_survive_a_restart() -> None:
    store = DurableStore()
    s = server(store)
    publish(s, "/a/1", U[0])
    publish(s, "/a/2", U[1])
    again = server(store)
    assert S.decode(publish(again, "/a/3", U[2]).frames, channel="publisher")["sequence"] == 3
    assert [S.decode(x.frames[1:])["uuid"] for x in snapshot(again, [], 0)[:-1]] == U[:3]


def test_snapshot_filters_by_subtree_and_sequence_and_echoes_the_request() -> None:
    s = server()
    for topic, u in zip(["/a/1", "/b/1", "/a/2", "/c/1"], U):
        publish(s, topic, u)
    out = snapshot(s, ["/a/"], 0)
    assert all(x.frames[0] == b"cli" for x in out)  # eventbus.server.identity-prefix
    msgs = [S.decode(x.frames[1:]) for x in out]
    assert [(m.name, m.get("sequence")) for m in msgs] == [("SYNC", 1), ("SYNC", 3), ("SYNCEND", 3)]
    assert msgs[-1]["subtrees"] == ["/a/"]
    msgs = [S.decode(x.frames[1:]) for x in snapshot(s, ["/a/", "/c/"], 1)]
    assert [(m.name, m["sequence"]) for m in msgs] == [("SYNC", 3), ("SYNC", 4), ("SYNCEND", 4)]
    (end,) = [S.decode(x.frames[1:]) for x in snapshot(s, ["/d/"], 0)]
    assert end["sequence"] == 4  # no SYNC: the latest (E-EVENTBUS-08)


def test_in_the_micro_toolkit_dialect_syncend_carries_the_latest() -> None:
    s = server(dialect="eventbus:micro-toolkit")
    publish(s, "/a/1", U[0], MT)
    publish(s, "/b/1", U[1], MT)
    out = snapshot(s, ["/a"], 0, MT)
    assert out[-1].frames[1:] == [b"SYNCEND", b"/a", b"2"]


@pytest.mark.parametrize("socket,frames,clause", [
    ("collector", [b"id", b"/a", b"x"], "eventbus.wire.grammar"),
    ("collector", [b"id", *pub("/a", U[0])[:4], b"not-a-uuid", b"\x01"], "eventbus.wire.uuid-v4"),
    ("snapshot", [b"id", b"SYNCSTART", b""], "eventbus.wire.syncstart-frames"),
    ("snapshot", [b"id", b"SYNCSTART", b"/a/,/b/", bytes(8)], "eventbus.wire.subtree-format"),
    ("snapshot", [b"id"], "eventbus.wire.grammar"),
])
def test_server_drops_malformed_input_naming_the_clause(socket: str, frames: list[bytes], clause: str) -> None:
    s = server()
    out = s.receive(socket, frames, 0)
    assert [(type(a), a.clause) for a in out] == [(Discard, clause)]


def ha_pair() -> tuple[Server, Server]:
    a = Server(ctx("a", bind="tcp://a:1000", ha="primary", peer="tcp://b:2000", ha_timeout_ms=600, check_ms=300))
    b = Server(ctx("b", bind="tcp://b:2000", ha="backup", peer="tcp://a:1000", ha_timeout_ms=600))
    return a, b


def test_primary_asks_its_peer_then_serves_and_a_backup_replicates() -> None:
    a, b = ha_pair()
    assert notes(a.start(0), "ha-state")[0].data["state"] == "backup"  # asking first
    assert snapshot(a, [], 0) == []  # not serving yet
    assert notes(a.handle_timer(300 * MS), "ha-state")[0].data["state"] == "primary"
    out = b.start(0)
    assert notes(out, "ha-state")[0].data["state"] == "backup"
    (ask,) = sends(out, "SYNCSTART")
    assert ask.socket == "replica"
    bc = publish(a, "/a/1", U[0])
    b.receive("feed", bc.frames, 10 * MS)  # replicated with the primary's sequence
    assert [e.seq for e in b.events] == [1]


def test_backup_takes_over_only_when_the_peer_is_silent_and_a_client_came() -> None:
    a, b = ha_pair()
    b.start(0)
    b.receive("collector", [b"c", *pub("/a/1", U[0])], 0)  # pending: a passive server does not broadcast
    assert list(b.pending) == [U[0]]
    assert not notes(b.handle_timer(2000 * MS), "ha-state") and b.state == "passive"  # silent peer, no vote yet
    assert notes(b.receive("snapshot", [b"c", *S.encode("SYNCSTART", {"subtrees": [], "sequence": 0})], 2100 * MS),
                 "not-serving")
    out = b.handle_timer(b.get_timer() or 0)
    assert notes(out, "ha-state")[0].data["state"] == "primary"
    (bc,) = sends(out, "BROADCAST")  # what was pending goes out
    assert S.decode(bc.frames, channel="publisher")["uuid"] == U[0]


def test_an_active_backup_yields_when_the_primary_broadcasts_too() -> None:
    a, b = ha_pair()
    a.start(0)
    a.handle_timer(300 * MS)
    b.start(0)
    b.receive("snapshot", [b"c", *S.encode("SYNCSTART", {"subtrees": [], "sequence": 0})], 700 * MS)
    assert notes(b.handle_timer(800 * MS), "ha-state")[0].data["state"] == "primary"
    out = b.receive("feed", publish(a, "/a/1", U[0]).frames, 2000 * MS)  # the primary was only slow
    assert notes(out, "ha-state")[0].data["state"] == "backup" and b.state == "passive"


def test_a_backup_asks_again_then_on_a_new_replica_connection() -> None:
    a, b = ha_pair()
    (first,) = sends(b.start(0), "SYNCSTART")
    out = b.handle_timer(600 * MS)  # unanswered for ha_timeout: late, or ignored; once more on the old one
    assert [type(x).__name__ for x in out] == ["Send"] and out[0].socket == "replica"
    out = b.handle_timer(1200 * MS)
    assert [type(x).__name__ for x in out] == ["Note", "Disconnect", "Connect", "Send"]
    assert notes(out, "replica-reconnect") and [(x.socket, x.endpoint) for x in of(out, Connect)] == [
        ("replica", "tcp://a:1000")]
    # an answer resets the count: the next unanswered request goes on the same connection
    b.receive("replica", [*S.encode("SYNCEND", {"subtrees": [], "sequence": 0})], 1300 * MS)
    assert not of(b.handle_timer(1400 * MS), Disconnect)
    assert not of(b.handle_timer(2000 * MS), Disconnect)
    assert of(b.handle_timer(2600 * MS), Disconnect)


class View:
    def __init__(self, notes_: dict[str, dict[str, Any]], running: set[str]) -> None:
        self.notes, self.running = notes_, running

    def node_names(self) -> list[str]:
        return ["a", "b", "c"]

    def role_of(self, name: str) -> str:
        return "client" if name == "c" else "server"

    def is_running(self, name: str) -> bool:
        return name in self.running

    def last_note(self, name: str, kind: str) -> dict[str, Any] | None:
        return self.notes.get(name) if kind == "ha-state" else None


def test_the_fault_target_primary_follows_the_ha_state_notes() -> None:
    a, b = ha_pair()
    a.start(0)
    state_a = notes(a.handle_timer(300 * MS), "ha-state")[-1].data
    state_b = notes(b.start(0), "ha-state")[-1].data
    assert resolve_target("primary", View({"a": state_a, "b": state_b}, {"a", "b", "c"})) == ["a"]
    assert resolve_target("primary", View({"a": state_a, "b": state_b}, {"b", "c"})) == []
    assert resolve_target("leader", View({}, set())) is None


# ---- client ------------------------------------------------------------------------------------


def client(**config: Any) -> Client:
    return Client(ctx("c1", connect=ENDPOINT, **config))


def syncend(seq: int, subtrees: list[str] | None = None) -> list[bytes]:
    return S.encode("SYNCEND", {"subtrees": subtrees or [], "sequence": seq})


def bcast(topic: str, seq: int, uuid: str) -> list[bytes]:
    return S.encode("BROADCAST", {"topic": topic, "sequence": seq, "producer": "p",
                                  "timestamp": "2017-05-04T10:20:30.123Z", "uuid": uuid, "data": 1})


def sync_msg(topic: str, seq: int, uuid: str) -> list[bytes]:
    return S.encode("SYNC", {"topic": topic, "sequence": seq, "producer": "p",
                             "timestamp": "2017-05-04T10:20:30.123Z", "uuid": uuid, "data": 1})


def applied(actions: list[Any]) -> list[tuple[str, int, str]]:
    return [(a.data["source"], a.data["sequence"], a.data["uuid"]) for a in of(actions, Deliver) if a.kind == "event"]


def test_client_subscribes_before_it_asks_from_zero() -> None:
    c = client(subtrees=["/a/", "/b/"])
    socks = {x.name: x for x in c.sockets()}
    assert socks["publisher"].subscribe == (b"/a/", b"/b/") and socks["snapshot"].identity == b"c1"
    (ask,) = sends(c.start(0))
    assert ask.frames == [b"SYNCSTART", b"/a/;/b/", bytes(8)]


def test_client_holds_broadcasts_until_syncend_then_applies_the_newer_ones_once() -> None:
    c = client()
    c.start(0)
    assert c.receive("publisher", bcast("/x", 2, U[1]), MS) == []  # held
    assert c.receive("publisher", bcast("/x", 3, U[2]), MS) == []
    out = c.receive("snapshot", sync_msg("/x", 2, U[1]), 2 * MS)
    assert applied(out) == [("sync", 2, U[1])]
    out = c.receive("snapshot", syncend(2), 2 * MS)
    assert applied(out) == [("broadcast", 3, U[2])]  # 2 is not above the SYNCEND
    out = c.receive("publisher", bcast("/x", 3, U[2]), 3 * MS)  # a duplicate
    assert applied(out) == [] and notes(out, "stale-broadcast")
    assert applied(c.receive("publisher", bcast("/x", 5, U[3]), 3 * MS)) == [("broadcast", 5, U[3])]


def test_client_catches_up_when_its_first_broadcast_is_newer_than_its_snapshot() -> None:
    c = client(resync_ms=0)
    c.start(0)
    c.receive("snapshot", syncend(4), MS)
    out = c.receive("publisher", bcast("/x", 7, U[0]), 2 * MS)  # 5 and 6 may have passed unsubscribed
    (ask,) = sends(out, "SYNCSTART")
    assert S.decode(ask.frames)["sequence"] == 4


def test_client_fails_over_to_the_backup_when_the_primary_is_silent() -> None:
    c = Client(ctx("c1", servers=["tcp://a:1000", "tcp://b:2000"], sync_timeout_ms=300))
    assert [x.name for x in c.sockets()][3:] == ["snapshot.1", "publisher.1", "collector.1"]
    c.start(0)
    out = c.handle_timer(300 * MS)
    assert notes(out, "failover")[0].data["to"] == 1
    (ask,) = sends(out, "SYNCSTART")
    assert ask.socket == "snapshot.1" and S.decode(ask.frames)["sequence"] == 0
    assert not of(out, Disconnect)  # the first timeout keeps the connections
    # the second in a row: the backup's snapshot connection is made anew (a ROUTER without
    # handover may ignore the old one for good); not its collector: PUBs may wait there
    out = c.handle_timer(600 * MS)
    assert [(type(a).__name__, a.socket, a.endpoint) for a in out if isinstance(a, (Disconnect, Connect))] == [
        ("Disconnect", "snapshot.1", "tcp://b:2000"), ("Connect", "snapshot.1", "tcp://b:2000")]


def test_client_asks_its_only_server_again_then_on_a_new_connection() -> None:
    c = client(sync_timeout_ms=300, resync_ms=0)
    c.start(0)
    out = c.handle_timer(300 * MS)
    assert [type(a).__name__ for a in out] == ["Note", "Send"]  # late, or ignored: once on the old connection
    out = c.handle_timer(600 * MS)
    assert [type(a).__name__ for a in out] == ["Note", "Disconnect", "Connect", "Send"]
    assert notes(out, "sync-timeout") and sends(out, "SYNCSTART")[0].socket == "snapshot"
    # an answer resets the count
    c.receive("snapshot", sync_msg("/x", 1, U[0]), 700 * MS)
    out = c.handle_timer(1000 * MS)
    assert not of(out, Disconnect) and sends(out, "SYNCSTART")


def test_client_publishes_a_well_formed_pub_to_every_server_and_resends_it_until_seen() -> None:
    c = Client(ctx("c1", servers=["tcp://a:1000", "tcp://b:2000"], subtrees=["/a/"], publish_timeout_ms=100))
    c.start(0)
    out = c.command({"op": "publish", "topic": "/a/x", "data": {"k": 1}}, 5 * MS)
    pubs = sends(out, "PUB")
    assert [p.socket for p in pubs] == ["collector", "collector.1"]
    m = S.decode(pubs[0].frames, channel="collector")
    assert m["sequence"] == 1 and m["producer"] == "c1" and m["timestamp"] == iso8601(5 * MS)
    assert sends(c.handle_timer(105 * MS), "PUB")[0].frames == pubs[0].frames  # resent byte for byte
    c.receive("snapshot", syncend(0), 106 * MS)
    c.receive("publisher", bcast("/a/x", 1, m["uuid"]), 107 * MS)  # seen: no more resends
    assert not c.unconfirmed


@pytest.mark.parametrize("config,match", [({"identity": "a b"}, "printable"), ({"subtrees": "a;b"}, "subtrees"),
                                          ({"servers": []}, "non-empty")])
def test_client_config_errors_name_the_key(config: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        client(**config)


@pytest.mark.parametrize("mutant", ["two-frame-syncstart", "comma-subtrees", "hello-first"])
def test_client_mutants_that_rewrite_syncstart_also_catch_up(mutant: str) -> None:
    """A client's catch-up synchronisation asks from a given sequence (``since``); the mutants that
    rewrite SYNCSTART took no ``since`` and raised there (found live, the reference client run as
    an external process with --mutant: 'got an unexpected keyword argument'), so the run
    reported a crash, not the clause the mutant breaks."""
    from reference_nodes.eventbus.mutants import MUTANTS
    from tests.reference_nodes.node_helpers import ctx, sends

    node = MUTANTS[mutant][1](ctx("c", servers=["tcp://s:5000"], subtrees=["/a/", "/b/"]))
    node.start(0)
    assert [s.msg_type for s in sends(node._sync(1, full=False, since=3))][-1] == "SYNCSTART"
