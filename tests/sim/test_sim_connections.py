"""Connection life cycle: connect before bind, reconnect, disconnect, what survives and what is
lost, endpoint conflicts and incompatible socket types."""

from __future__ import annotations

from harness.node import Connect, Disconnect, SocketSpec, SocketType
from harness.sim import RECONNECT_IVL_NS
from tests.sim.sim_helpers import MS, do, fixed_sim, log, rows, scripted, send, writer
from tests.sim.sim_test_nodes import EchoServer, PingClient

ROUTER, DEALER = SocketType.ROUTER, SocketType.DEALER
EP = "tcp://server:5555"


def test_connect_before_bind_connects_once_the_endpoint_is_bound(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,)))
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)), start_at=250 * MS)
    send(sim, 10 * MS, "client", "d", b"early")
    sim.run(400 * MS)
    trace.close()
    # Attempts at 0, 100, 200, 300 ms (the reconnect interval); the one at 300 ms succeeds
    # after a 2 ms handshake, then the queued message needs 1 ms.
    (connect,) = rows(trace.path, kind="connect")
    assert RECONNECT_IVL_NS == 100 * MS
    assert connect["time_ns"] == 302 * MS and connect["peer"] == "server"
    ((_, frames, now),) = sim.node("server").log  # type: ignore[union-attr]
    assert frames[1:] == [b"early"] and now == 303 * MS


def test_binding_an_endpoint_twice_fails_the_second_node_with_a_clear_error() -> None:
    sim = fixed_sim()
    scripted(sim, "one", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "two", SocketSpec("r", ROUTER, bind=(EP,)))
    sim.run(1 * MS)  # the run goes on: the node that cannot bind is crashed, the other keeps its port
    (failure,) = sim.failures
    assert failure.node == "two" and failure.where == "start"
    assert "cannot bind socket 'r' to 'tcp://server:5555': it is already bound by node one, socket 'r'" \
        in failure.error
    assert sim.is_running("one") and not sim.is_running("two")


def test_endpoint_can_be_bound_again_after_its_owner_crashed() -> None:
    sim = fixed_sim()
    scripted(sim, "one", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "two", SocketSpec("r", ROUTER, bind=(EP,)), start_at=10 * MS)
    sim.schedule(5 * MS, lambda: sim.crash("one"))
    sim.run(20 * MS)
    assert sim.is_running("two")


def test_connecting_side_queue_survives_the_binder_crash_and_is_delivered_after_restart() -> None:
    sim = fixed_sim()
    sim.add_node("server", EchoServer, role="echo")
    sim.add_node("client", PingClient, role="client",
                 config={"endpoints": [EP], "count": 5, "window": 5, "think_ns": 0})
    sim.run(1 * MS)  # requests queued, handshake in progress
    sim.crash("server")
    sim.schedule(50 * MS, lambda: sim.restart("server"))
    sim.run(500 * MS)
    assert sim.node("client").replies == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    assert sim.stats.dropped == {}


def test_messages_in_flight_at_a_crash_are_lost(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    sim.add_node("server", EchoServer, role="echo")
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,)))
    send(sim, 10 * MS, "client", "d", b"", b"x" * 8, msg_type="request")
    sim.schedule(10 * MS + 500_000, lambda: sim.crash("server"))
    sim.schedule(20 * MS, lambda: sim.restart("server"))
    sim.run(200 * MS)
    trace.close()
    assert sim.stats.dropped == {"crash": 1}
    (drop,) = rows(trace.path, kind="drop")
    assert (drop["node"], drop["peer"], drop["msg_type"], drop["time_ns"]) == ("server", "client", "request", 11 * MS)
    assert sim.store("server").get("served") is None  # never arrived
    assert log(sim, "client") == []


def test_binding_side_pipe_is_destroyed_when_the_connecter_goes_away() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,), identity=b"c"))
    send(sim, 5 * MS, "client", "d", b"hi")
    sim.schedule(10 * MS, lambda: sim.crash("client"))
    send(sim, 11 * MS, "server", "r", b"c", b"anyone?")
    sim.run(20 * MS)
    assert sim.stats.dropped == {"unroutable": 1}


def test_disconnect_action_drops_the_queue_and_the_peer_route(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP, "tcp://nobody:1"), identity=b"c"))
    for k in range(4):
        send(sim, 5 * MS, "client", "d", b"%d" % k)  # round-robin: 0, 2 to the server; 1, 3 queued
    do(sim, 10 * MS, "client", Disconnect("d", "tcp://nobody:1"), Disconnect("d", EP))
    send(sim, 11 * MS, "server", "r", b"c", b"gone")
    sim.run(20 * MS)
    trace.close()
    assert [f[1] for f in log(sim, "server")] == [b"0", b"2"]
    assert sim.stats.dropped == {"disconnect": 2, "unroutable": 1}
    disconnects = rows(trace.path, kind="disconnect")
    assert [(r["node"], r["peer"], r["fault"]) for r in disconnects] == [("client", "server", "disconnect")]


def test_connect_action_at_runtime() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "client", SocketSpec("d", DEALER))
    do(sim, 5 * MS, "client", Connect("d", EP))
    send(sim, 5 * MS, "client", "d", b"hi")
    sim.run(20 * MS)
    assert [f[1] for f in log(sim, "server")] == [b"hi"]


def test_unbind_closes_accepted_connections_and_peers_keep_retrying() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,)))
    do(sim, 10 * MS, "server", Disconnect("r", EP))
    send(sim, 20 * MS, "client", "d", b"waits")
    sim.run(100 * MS)
    assert log(sim, "server") == []
    # Someone else binds it: the client's reconnect finds the new binder, the queue flows.
    scripted(sim, "other", SocketSpec("r", ROUTER, bind=(EP,)), start_at=150 * MS)
    sim.run(400 * MS)
    assert [f[1] for f in log(sim, "other")] == [b"waits"]


def test_incompatible_socket_types_never_connect(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "pub", SocketSpec("p", SocketType.PUB, connect=(EP,)))
    sim.run(500 * MS)
    trace.close()
    (fault,) = rows(trace.path, kind="fault")
    assert fault["fault"] == "incompatible-sockets" and "PUB cannot talk to ROUTER" in fault["detail"]
    assert rows(trace.path, kind="connect") == []


def test_restarted_peer_gets_a_new_generated_routing_id() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,)))
    send(sim, 5 * MS, "client", "d", b"one")
    sim.schedule(10 * MS, lambda: sim.restart("client"))
    send(sim, 20 * MS, "client", "d", b"two")
    sim.run(30 * MS)
    (first, second) = log(sim, "server")
    assert first[1:] == [b"one"] and second[1:] == [b"two"] and first[0] != second[0]
