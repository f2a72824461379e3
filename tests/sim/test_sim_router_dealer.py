"""ROUTER and DEALER semantics: identities, routing, round-robin, fair queuing, FIFO."""

from __future__ import annotations

from harness.node import Send, SocketSpec, SocketType
from harness.sim import LatencyModel, Simulation
from tests.sim.sim_helpers import (
    MS,
    fixed_sim,
    log,
    rows,
    run_expecting_failure,
    scripted,
    send,
    writer,
)
from tests.sim.sim_test_nodes import EchoServer, PingClient

ROUTER = SocketType.ROUTER
DEALER = SocketType.DEALER
EP = "tcp://server:5555"


def test_echo_round_trip_with_two_clients() -> None:
    sim = Simulation(7)
    sim.add_node("server", EchoServer, role="echo")
    for name in ("c1", "c2"):
        sim.add_node(name, PingClient, role="client", config={"endpoints": [EP], "count": 20, "window": 3})
    sim.run(2_000 * MS)
    for name in ("c1", "c2"):
        assert sim.node(name).replies == list(range(20))  # type: ignore[union-attr]
    assert sim.stats.delivered == 80 and sim.stats.sent == 80 and sim.stats.dropped == {}


def test_router_prepends_explicit_or_generated_identity_and_routes_replies() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "alice", SocketSpec("d", DEALER, connect=(EP,), identity=b"alice"))
    scripted(sim, "anon1", SocketSpec("d", DEALER, connect=(EP,)))
    scripted(sim, "anon2", SocketSpec("d", DEALER, connect=(EP,)))
    send(sim, 0, "alice", "d", b"from-alice")
    send(sim, 1 * MS, "anon1", "d", b"from-anon1")
    send(sim, 2 * MS, "anon2", "d", b"from-anon2")
    sim.run(10 * MS)
    got = {f[1]: f[0] for f in log(sim, "server")}
    assert got[b"from-alice"] == b"alice"
    ids = [got[b"from-anon1"], got[b"from-anon2"]]
    for rid in ids:
        assert len(rid) == 5 and rid[0] == 0  # 0x00 + 4-byte counter, as libzmq does
    # One counter per ROUTER socket, incremented per new peer (anon1 connected first).
    assert int.from_bytes(ids[1][1:], "big") == (int.from_bytes(ids[0][1:], "big") + 1) & 0xFFFFFFFF
    for rid, who in ((b"alice", "alice"), (ids[0], "anon1"), (ids[1], "anon2")):
        send(sim, 10 * MS, "server", "r", rid, b"reply-" + who.encode())
    sim.run(20 * MS)
    assert log(sim, "alice") == [[b"reply-alice"]]
    assert log(sim, "anon1") == [[b"reply-anon1"]]
    assert log(sim, "anon2") == [[b"reply-anon2"]]


def test_generated_routing_ids_depend_on_the_seed_only() -> None:
    def first_id(seed: int) -> bytes:
        sim = fixed_sim(seed)
        scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
        scripted(sim, "c", SocketSpec("d", DEALER, connect=(EP,)))
        send(sim, 0, "c", "d", b"x")
        sim.run(10 * MS)
        return log(sim, "server")[0][0]

    assert first_id(1) == first_id(1)
    assert first_id(1) != first_id(2)


def test_unroutable_message_is_dropped_silently_and_traced(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    send(sim, 1 * MS, "server", "r", b"nobody", b"payload", msg_type="reply")
    sim.run(5 * MS)
    trace.close()
    assert sim.stats.dropped == {"unroutable": 1}
    (drop,) = rows(trace.path, kind="drop")
    assert drop["fault"] == "unroutable" and drop["node"] == "server" and drop["msg_type"] == "reply"
    (sent,) = rows(trace.path, kind="send")
    assert sent["msg_id"] == drop["msg_id"]


def test_dealer_round_robins_over_its_pipes() -> None:
    sim = fixed_sim()
    endpoints = tuple(f"tcp://s{i}:1" for i in range(3))
    for i, ep in enumerate(endpoints):
        scripted(sim, f"s{i}", SocketSpec("r", ROUTER, bind=(ep,)))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=endpoints))
    for k in range(9):
        send(sim, 5 * MS, "client", "d", str(k).encode())
    sim.run(20 * MS)
    for i in range(3):
        assert [f[1] for f in log(sim, f"s{i}")] == [str(k).encode() for k in range(i, 9, 3)]


def test_dealer_round_robin_includes_a_pipe_still_connecting_whose_messages_wait() -> None:
    sim = fixed_sim()
    scripted(sim, "up", SocketSpec("r", ROUTER, bind=("tcp://up:1",)))
    scripted(sim, "late", SocketSpec("r", ROUTER, bind=("tcp://late:1",)), start_at=250 * MS)
    scripted(sim, "client", SocketSpec("d", DEALER, connect=("tcp://up:1", "tcp://late:1")))
    for k in range(4):
        send(sim, 10 * MS, "client", "d", str(k).encode())
    sim.run(200 * MS)
    assert [f[1] for f in log(sim, "up")] == [b"0", b"2"]
    sim.run(400 * MS)
    assert [f[1] for f in log(sim, "late")] == [b"1", b"3"]  # queued, delivered once bound


def test_dealer_skips_full_pipes_and_drops_only_when_all_are_full() -> None:
    sim = fixed_sim()
    for name in ("a", "b"):
        scripted(sim, name, SocketSpec("r", ROUTER, bind=(f"tcp://{name}:1",), hwm=1))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=("tcp://a:1", "tcp://b:1"), hwm=1))
    sim.run(5 * MS)
    sim.pause("a")
    sim.pause("b")
    for k in range(6):
        send(sim, 6 * MS, "client", "d", str(k).encode())
    sim.run(20 * MS)
    # Each pipe holds sndhwm + rcvhwm = 2 messages; the rest is dropped at the high-water mark.
    assert sim.stats.dropped == {"hwm": 2}
    sim.resume("a")
    sim.resume("b")
    sim.run(30 * MS)
    assert sorted(f[1] for f in log(sim, "a") + log(sim, "b")) == [b"0", b"1", b"2", b"3"]


def test_dealer_with_no_peer_drops() -> None:
    sim = fixed_sim()
    scripted(sim, "lonely", SocketSpec("d", DEALER, bind=("tcp://lonely:1",)))
    send(sim, 1 * MS, "lonely", "d", b"x")
    sim.run(5 * MS)
    assert sim.stats.dropped == {"no-peer": 1}


def test_dealer_input_from_several_peers_is_fair_queued_and_fifo_per_peer() -> None:
    sim = Simulation(3, latency=LatencyModel(("uniform", 0, 5 * MS)))
    scripted(sim, "sink", SocketSpec("d", DEALER, bind=("tcp://sink:1",)))
    for name in ("p", "q"):
        scripted(sim, name, SocketSpec("d", DEALER, connect=("tcp://sink:1",)))
        for k in range(50):
            send(sim, 20 * MS, name, "d", name.encode(), str(k).encode())
    sim.run(200 * MS)
    got = log(sim, "sink")
    for peer in (b"p", b"q"):
        assert [f[1] for f in got if f[0] == peer] == [str(k).encode() for k in range(50)]
    # Both peers are served while either has messages: no peer waits for the other to finish.
    order = [f[0] for f in got]
    assert order.index(b"q") < order.index(b"p") + 50 and order.index(b"p") < order.index(b"q") + 50


def test_fifo_per_connection_under_random_latency() -> None:
    sim = Simulation(11, latency=LatencyModel(("uniform", 0, 20 * MS)))
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,)))
    for k in range(300):
        send(sim, k * 10_000, "client", "d", k.to_bytes(4, "big"))
    sim.run(500 * MS)
    assert [int.from_bytes(f[1], "big") for f in log(sim, "server")] == list(range(300))


def two_peers_with_one_identity(handover: bool, trace=None):
    """A ROUTER, a DEALER "first" with identity "same", a second one with the same identity 10 ms
    later; each sends at 20 ms, and the ROUTER sends "back" to "same" at 30 ms."""
    sim = fixed_sim(trace=trace)
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,), handover=handover))
    scripted(sim, "first", SocketSpec("d", DEALER, connect=(EP,), identity=b"same"))
    scripted(sim, "second", SocketSpec("d", DEALER, connect=(EP,), identity=b"same"), start_at=10 * MS)
    send(sim, 20 * MS, "first", "d", b"one")
    send(sim, 20 * MS, "second", "d", b"two")
    send(sim, 30 * MS, "server", "r", b"same", b"back")
    sim.run(50 * MS)
    return sim


def test_duplicate_identity_is_not_routable(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = two_peers_with_one_identity(False, trace)
    trace.close()
    assert log(sim, "server") == [[b"same", b"one"]]
    assert log(sim, "first") == [[b"back"]] and log(sim, "second") == []
    assert sim.stats.dropped == {"duplicate-identity": 1}
    assert [r["fault"] for r in rows(trace.path, kind="fault")] == ["duplicate-identity"]


def test_handover_gives_the_identity_to_the_newcomer() -> None:
    # ZMQ_ROUTER_HANDOVER: the later connection takes the identity; the first keeps talking
    # under a fresh anonymous id (0x00 + 4 bytes), and nothing is dropped.
    sim = two_peers_with_one_identity(True)
    got = log(sim, "server")
    assert [b"same", b"two"] in got
    [(anon, one)] = [(f[0], f[1]) for f in got if f[1] == b"one"]
    assert anon[:1] == b"\x00" and len(anon) == 5 and one == b"one"
    assert log(sim, "second") == [[b"back"]] and log(sim, "first") == []
    assert not sim.stats.dropped


def test_router_to_router_with_identities() -> None:
    sim = fixed_sim()
    scripted(sim, "a", SocketSpec("r", ROUTER, bind=("tcp://a:1",), identity=b"A"))
    scripted(sim, "b", SocketSpec("r", ROUTER, connect=("tcp://a:1",), identity=b"B"))
    send(sim, 10 * MS, "b", "r", b"A", b"hello")
    send(sim, 10 * MS, "a", "r", b"B", b"hi")
    sim.run(20 * MS)
    assert log(sim, "a") == [[b"B", b"hello"]]
    assert log(sim, "b") == [[b"A", b"hi"]]


def test_router_message_without_payload_is_an_error() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    sim.command(1 * MS, "server", {"op": "do", "actions": [Send("r", [b"id-only"])]})
    run_expecting_failure(sim, 5 * MS, "server", "no frames after the routing id")
