"""A simulated ROUTER keeps a dead connection's routing id while its paused node has not read what
that connection sent, as libzmq does: a peer that comes back with the id meanwhile is ignored,
unless the socket hands over (tests/live/test_router_handover.py shows the real race). Before,
the simulator freed the id at once, so a live failure of this kind could not be replayed."""

from __future__ import annotations

from harness.node import SocketSpec, SocketType
from harness.sim import Simulation
from tests.sim.sim_helpers import MS, fixed_sim, log, rows, scripted, send, writer

EP = "tcp://server:5555"


def back_while_paused(handover: bool, pause: bool = True, trace=None) -> Simulation:
    """The server's ROUTER is paused from 10 to 50 ms. Client "c" (identity "same") sends "old"
    at 12 ms, crashes at 20 ms and is back at 30 ms; it sends "new" at 40 ms, and the server
    sends "back" to "same" at 60 ms."""
    sim = fixed_sim(trace=trace)
    scripted(sim, "server", SocketSpec("r", SocketType.ROUTER, bind=(EP,), handover=handover))
    scripted(sim, "c", SocketSpec("d", SocketType.DEALER, connect=(EP,), identity=b"same"))
    if pause:
        sim.schedule(10 * MS, lambda: sim.pause("server"))
        sim.schedule(50 * MS, lambda: sim.resume("server"))
    send(sim, 12 * MS, "c", "d", b"old")
    sim.schedule(20 * MS, lambda: sim.crash("c"))
    sim.schedule(30 * MS, lambda: sim.restart("c"))
    send(sim, 40 * MS, "c", "d", b"new")
    send(sim, 60 * MS, "server", "r", b"same", b"back")
    sim.run(80 * MS)
    return sim


def test_without_handover_the_returning_peer_is_ignored_for_good(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = back_while_paused(handover=False, trace=trace)
    trace.close()
    assert log(sim, "server") == [[b"same", b"old"]]  # read after the pause, under its id
    assert log(sim, "c") == []
    assert sim.stats.dropped == {"duplicate-identity": 1, "unroutable": 1}  # "new", then "back"
    assert [r["fault"] for r in rows(trace.path, node="server", kind="drop")] == ["duplicate-identity", "unroutable"]


def test_with_handover_the_returning_peer_takes_its_id_and_the_old_messages_come_anonymous() -> None:
    sim = back_while_paused(handover=True)
    got = log(sim, "server")
    [(anon, old)] = [(f[0], f[1]) for f in got if f[1] == b"old"]
    assert anon[:1] == b"\x00" and len(anon) == 5  # the lingering pipe's generated id
    assert [b"same", b"new"] in got
    assert log(sim, "c") == [[b"back"]]
    assert not sim.stats.dropped


def test_a_connection_with_nothing_unread_frees_its_id_at_once() -> None:
    # Not paused: the server read "old" when it came, so the id is free when "c" is back.
    sim = back_while_paused(handover=False, pause=False)
    assert log(sim, "server") == [[b"same", b"old"], [b"same", b"new"]]
    assert log(sim, "c") == [[b"back"]]
    assert not sim.stats.dropped
