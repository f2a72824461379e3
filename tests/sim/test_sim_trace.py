"""What the simulator writes to the trace, what hooks see, and its counters."""

from __future__ import annotations

from typing import Any

from harness.node import (
    Action,
    BaseNode,
    Deliver,
    Discard,
    Note,
    Send,
    SocketSpec,
    SocketType,
)
from harness.sim import Simulation
from harness.trace import pack_data, pack_frames, unpack_data, unpack_frames
from tests.sim.sim_helpers import (
    FIXED_1MS,
    MS,
    do,
    fixed_sim,
    rows,
    scripted,
    send,
    writer,
)
from tests.sim.sim_test_nodes import EchoServer, PingClient

EP = "tcp://server:5555"


def test_send_and_recv_rows_are_linked_and_carry_the_meta(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    sim.add_node("server", EchoServer, role="echo", implementation="mutant:x")
    sim.add_node("client", PingClient, role="client",
                 config={"endpoints": [EP], "count": 1, "identity": b"cli"})
    sim.run(20 * MS)
    trace.close()
    (request,) = rows(trace.path, kind="send", node="client")
    (arrival,) = rows(trace.path, kind="recv", node="server")
    assert request["msg_id"] == arrival["msg_id"]
    for r in (request, arrival):
        assert (r["msg_type"], r["seq"], r["corr"], r["size"]) == ("request", 0, "client/0", 8)
    assert request["peer"] == EP  # sent before the connection was up: the endpoint names the peer
    assert arrival["peer"] == "client" and arrival["socket"] == "router"
    assert (arrival["role"], arrival["implementation"], arrival["seed"]) == ("echo", "mutant:x", 1)
    # frames: what the node gave / got, so the ROUTER side shows the routing id.
    assert unpack_frames(request["frames"]) == [b"", (0).to_bytes(8, "big")]
    assert unpack_frames(arrival["frames"]) == [b"cli", b"", (0).to_bytes(8, "big")]
    (reply,) = rows(trace.path, kind="send", node="server")
    assert reply["peer"] == "client" and unpack_frames(reply["frames"]) == [b"cli", b"", (0).to_bytes(8, "big")]
    (back,) = rows(trace.path, kind="recv", node="client")
    assert back["msg_id"] == reply["msg_id"] and unpack_frames(back["frames"]) == [b"", (0).to_bytes(8, "big")]
    (deliver,) = rows(trace.path, kind="deliver")
    assert (deliver["msg_type"], deliver["seq"], deliver["corr"]) == ("reply", 0, "client/0")
    assert unpack_data(deliver["data"]) == {"seq": 0, "corr": "client/0"} and deliver["detail"] is None


def test_frames_column_matches_pack_frames_and_can_be_switched_off(tmp_path) -> None:
    for record in (True, False):
        trace = writer(tmp_path, f"t{record}.parquet")
        sim = Simulation(1, trace, latency=FIXED_1MS, record_frames=record)
        scripted(sim, "a", SocketSpec("d", SocketType.DEALER, bind=("tcp://a:1",)))
        scripted(sim, "b", SocketSpec("d", SocketType.DEALER, connect=("tcp://a:1",)))
        send(sim, 10 * MS, "b", "d", b"x", b"\x00\xff" * 3)
        sim.run(20 * MS)
        trace.close()
        for kind in ("send", "recv"):
            (row,) = rows(trace.path, kind=kind)
            assert row["frames"] == (pack_frames([b"x", b"\x00\xff" * 3]) if record else None)
            assert row["size"] == 7


class Chatty(BaseNode):
    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        return [
            Note("elected", {"term": 3, "topic": b"raw\xff", "members": {"b", "a", "c"}}),
            Discard("s", [b"junk"], "bad magic", "proto.magic"),
            Deliver("record", {"topic": "t", "seq": 9, "index": 4, "term": 2, "corr": 77}),
        ]


def test_note_discard_deliver_and_command_rows(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = Simulation(1, trace)
    sim.add_node("n", Chatty, role="chatty")
    sim.command(5 * MS, "n", {"op": "go", "corr": "c-1", "seq": 1})
    sim.run(10 * MS)
    trace.close()
    command, note, discard, deliver = rows(trace.path, node="n")
    assert (command["kind"], command["msg_type"], command["corr"], command["seq"]) == ("command", "go", "c-1", 1)
    assert unpack_data(command["data"]) == {"op": "go", "corr": "c-1", "seq": 1}
    assert (note["kind"], note["msg_type"], note["term"], note["topic"]) == ("note", "elected", 3, "raw\\xff")
    # bytes stay bytes; sets become sorted lists, so the bytes never depend on hash order
    assert unpack_data(note["data"]) == {"term": 3, "topic": b"raw\xff", "members": ["a", "b", "c"]}
    assert (discard["kind"], discard["clause"], discard["detail"], discard["socket"]) == (
        "discard", "proto.magic", "bad magic", "s")
    assert discard["frames"] == pack_frames([b"junk"]) and discard["size"] == 4
    assert (deliver["topic"], deliver["seq"], deliver["index"], deliver["term"], deliver["corr"]) == (
        "t", 9, 4, 2, "77")
    assert discard["data"] is None and unpack_data(deliver["data"])["corr"] == 77


def test_data_column_keeps_what_msgpack_has_no_type_for() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "Opaque()"

    value = {1: (2, 3), "big": 2**70, "o": Opaque(), "fs": frozenset({3, 1}), "mixed": {"b", 2}}
    assert unpack_data(pack_data(value)) == {1: [2, 3], "big": str(2**70), "o": "Opaque()", "fs": [1, 3],
                                             "mixed": [2, "b"]}
    deep: list[Any] = []
    inner = deep
    for _ in range(3000):  # deeper than MessagePack nests: said so, and the run goes on
        inner.append([])
        inner = inner[0]
    assert unpack_data(pack_data(deep)) == "<list nested too deep to record>"
    assert unpack_data(pack_data({"after": "an error"})) == {"after": "an error"}  # the packer recovered


def test_on_action_hooks_see_every_action_with_virtual_time() -> None:
    sim = fixed_sim()
    seen: list[tuple[str, Action, int]] = []
    sim.on_action(lambda node, action, t: seen.append((node, action, t)))
    sim.add_node("server", EchoServer, role="echo")
    sim.add_node("client", PingClient, role="client", config={"endpoints": [EP], "count": 2})
    sim.set_clock("client", 10_000 * MS)  # hooks get virtual time, not the node's clock
    sim.run(50 * MS)
    delivers = [(n, a.data["seq"], t) for n, a, t in seen if isinstance(a, Deliver)]
    assert [(n, s) for n, s, _ in delivers] == [("client", 0), ("client", 1)]
    assert all(t < 50 * MS for _, _, t in delivers)
    sends = [(n, a.msg_type) for n, a, _ in seen if isinstance(a, Send)]
    assert sends == [("client", "request"), ("server", "reply"), ("client", "request"), ("server", "reply")]


def test_a_hook_may_crash_the_node_in_the_middle_of_a_batch() -> None:
    sim = fixed_sim()
    scripted(sim, "a", SocketSpec("d", SocketType.DEALER, bind=("tcp://a:1",)))
    scripted(sim, "b", SocketSpec("d", SocketType.DEALER, connect=("tcp://a:1",)))
    sim.on_action(lambda node, action, t: sim.crash(node) if isinstance(action, Note) else None)
    do(sim, 10 * MS, "b", Send("d", [b"1"]), Note("boom", {}), Send("d", [b"2"]))
    sim.run(20 * MS)
    assert sim.node("a").log == [] and sim.stats.sent == 1  # type: ignore[union-attr]


def test_stats_count_sends_deliveries_drops_and_events() -> None:
    sim = fixed_sim()
    scripted(sim, "pub", SocketSpec("p", SocketType.PUB, bind=("tcp://p:1",), hwm=1))
    scripted(sim, "sub", SocketSpec("s", SocketType.SUB, connect=("tcp://p:1",), subscribe=(b"",), hwm=1))
    sim.schedule(5 * MS, lambda: sim.pause("sub"))
    for k in range(5):
        send(sim, 6 * MS, "pub", "p", b"%d" % k)
    sim.schedule(10 * MS, lambda: sim.resume("sub"))
    sim.run(20 * MS)
    s = sim.stats
    assert (s.sent, s.control, s.delivered, s.dropped, s.dropped_total) == (5, 1, 2, {"hwm": 3}, 3)
    assert s.wire == 3 and s.events > 10
