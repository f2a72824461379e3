"""Faults in simulation: crash/restart, pause/resume, partitions, clock skew, slow links and
message rules (drop, delay, duplicate, reorder)."""

from __future__ import annotations

from typing import Any

import pytest

from fault_injection.rules import Delay, Drop, Duplicate, Match, Reorder, Rule, RuleSet
from harness.node import BaseNode, NodeContext, SocketSpec, SocketType
from harness.sim import LatencyModel, Simulation, SimulationError
from tests.sim.sim_helpers import (
    FIXED_1MS,
    MS,
    fixed_sim,
    log,
    rows,
    scripted,
    send,
    writer,
)
from tests.sim.sim_test_nodes import EchoServer, PingClient, Scripted

ROUTER, DEALER = SocketType.ROUTER, SocketType.DEALER
EP = "tcp://server:5555"


# ---- crash / restart -----------------------------------------------------------------------


class Remembering(BaseNode):
    """Keeps a count in memory and in the durable store; records its first random draw."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.memory = 0
        self.first_draw = ctx.rng.random()

    def command(self, request: dict[str, Any], now: int) -> list:  # type: ignore[type-arg]
        self.memory += 1
        self.store.put("count", self.store.get("count", 0) + 1)
        return []


def test_crash_loses_memory_restart_keeps_the_durable_store(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = Simulation(5, trace)
    sim.add_node("n", Remembering, role="r")
    for k in range(3):
        sim.command(k * MS, "n", {"op": "inc"})
    sim.run(10 * MS)
    before = sim.node("n")
    assert before.memory == 3 and sim.store("n").get("count") == 3  # type: ignore[union-attr]
    sim.crash("n")
    assert sim.node("n") is None and not sim.is_running("n")
    sim.command(11 * MS, "n", {"op": "inc"})  # lost: the node is down
    sim.schedule(20 * MS, lambda: sim.restart("n"))
    sim.command(21 * MS, "n", {"op": "inc"})
    sim.run(30 * MS)
    after = sim.node("n")
    assert after is not before and sim.incarnation("n") == 1
    assert after.memory == 1 and sim.store("n").get("count") == 4  # type: ignore[union-attr]
    assert after.first_draw != before.first_draw  # type: ignore[union-attr]
    trace.close()
    kinds = [r["kind"] for r in rows(trace.path, node="n")]
    assert kinds == ["command"] * 3 + ["crash", "command", "restart", "command"]
    assert rows(trace.path, kind="command")[3]["fault"] == "node-down"


def test_node_rng_is_derived_from_seed_name_and_incarnation() -> None:
    def draws(seed: int) -> list[float]:
        sim = Simulation(seed)
        sim.add_node("n", Remembering, role="r")
        sim.run(1)
        out = [sim.node("n").first_draw]  # type: ignore[union-attr]
        sim.restart("n")
        out.append(sim.node("n").first_draw)  # type: ignore[union-attr]
        return out

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)
    import random
    assert draws(1)[1] == random.Random("1/n/1").random()


def test_restart_of_a_running_node_crashes_it_first_and_rebinds() -> None:
    sim = fixed_sim()
    sim.add_node("server", EchoServer, role="echo")
    sim.add_node("client", PingClient, role="client", config={"endpoints": [EP], "count": 3})
    sim.run(50 * MS)
    sim.restart("server")
    sim.add_node("late", PingClient, role="client", config={"endpoints": [EP], "count": 2}, start_at_ns=60 * MS)
    sim.run(300 * MS)
    assert sim.node("server").served == 2  # type: ignore[union-attr]
    assert sim.store("server").get("served") == 5
    assert sim.node("late").replies == [0, 1]  # type: ignore[union-attr]


# ---- pause / resume -----------------------------------------------------------------------


def test_pause_holds_messages_commands_and_timers_then_handles_them_in_order() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "c1", SocketSpec("d", DEALER, connect=(EP,), identity=b"c1"))
    scripted(sim, "c2", SocketSpec("d", DEALER, connect=(EP,), identity=b"c2"))
    sim.command(5 * MS, "server", {"op": "timer", "at": 15 * MS})
    sim.schedule(10 * MS, lambda: sim.pause("server"))
    for k in range(3):
        send(sim, 11 * MS + k * 100_000, "c1", "d", b"1-%d" % k)
        send(sim, 11 * MS + k * 100_000 + 50_000, "c2", "d", b"2-%d" % k)
    sim.command(16 * MS, "server", {"op": "note"})
    sim.schedule(30 * MS, lambda: sim.resume("server"))
    sim.run(29 * MS)
    server: Scripted = sim.node("server")  # type: ignore[assignment]
    assert server.log == [] and server.timer_calls == [] and len(server.commands) == 1
    sim.run(40 * MS)
    assert [f[1] for f in log(sim, "server")] == [b"1-0", b"2-0", b"1-1", b"2-1", b"1-2", b"2-2"]
    assert all(now == 30 * MS for _, _, now in server.log)
    assert server.timer_calls == [30 * MS]  # the timer (due at 15 ms) waited for the resume
    assert len(server.commands) == 2 and server.commands[1][1] == 30 * MS


def test_crash_while_paused_loses_what_was_waiting() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,)))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,)))
    sim.schedule(5 * MS, lambda: sim.pause("server"))
    send(sim, 6 * MS, "client", "d", b"x")
    sim.schedule(10 * MS, lambda: sim.crash("server"))
    sim.schedule(11 * MS, lambda: sim.restart("server"))
    sim.run(50 * MS)
    assert log(sim, "server") == [] and not sim.is_paused("server")
    assert sim.stats.dropped == {"crash": 1}


def test_dealer_to_paused_router_drops_at_the_high_water_mark() -> None:
    sim = fixed_sim()
    scripted(sim, "server", SocketSpec("r", ROUTER, bind=(EP,), hwm=3))
    scripted(sim, "client", SocketSpec("d", DEALER, connect=(EP,), hwm=3))
    sim.schedule(5 * MS, lambda: sim.pause("server"))
    for k in range(10):
        send(sim, 6 * MS, "client", "d", b"%d" % k)
    sim.schedule(20 * MS, lambda: sim.resume("server"))
    sim.run(30 * MS)
    assert [f[1] for f in log(sim, "server")] == [b"%d" % k for k in range(6)]
    assert sim.stats.dropped == {"hwm": 4}


# ---- partitions -----------------------------------------------------------------------------


def _pair(sim: Simulation) -> None:
    scripted(sim, "a", SocketSpec("d", DEALER, bind=("tcp://a:1",)))
    scripted(sim, "b", SocketSpec("d", DEALER, connect=("tcp://a:1",)))


def test_symmetric_partition_cuts_both_directions_until_healed(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = fixed_sim(trace=trace)
    _pair(sim)
    pid: list[int] = []
    sim.schedule(10 * MS, lambda: pid.append(sim.partition([["a"], ["b"]])))
    send(sim, 11 * MS, "a", "d", b"a-lost")
    send(sim, 11 * MS, "b", "d", b"b-lost")
    sim.schedule(20 * MS, lambda: sim.heal(pid[0]))
    send(sim, 21 * MS, "a", "d", b"a-ok")
    send(sim, 21 * MS, "b", "d", b"b-ok")
    sim.run(30 * MS)
    trace.close()
    assert log(sim, "a") == [[b"b-ok"]] and log(sim, "b") == [[b"a-ok"]]
    assert sim.stats.dropped == {"partition": 2}
    faults = rows(trace.path, kind="fault", node="nemesis")
    assert [r["fault"] for r in faults] == ["partition", "heal"]


def test_one_way_partition_cuts_only_from_the_first_group_to_the_second() -> None:
    sim = fixed_sim()
    _pair(sim)
    sim.schedule(10 * MS, lambda: sim.partition([["a"], ["b"]], one_way=True))
    send(sim, 11 * MS, "a", "d", b"a-lost")
    send(sim, 11 * MS, "b", "d", b"b-ok")
    sim.run(20 * MS)
    assert log(sim, "a") == [[b"b-ok"]] and log(sim, "b") == []
    sim.heal()
    send(sim, 21 * MS, "a", "d", b"a-ok")
    sim.run(30 * MS)
    assert log(sim, "b") == [[b"a-ok"]]


def test_messages_in_flight_when_a_partition_starts_are_lost() -> None:
    sim = fixed_sim()
    _pair(sim)
    send(sim, 10 * MS, "a", "d", b"in-flight")
    sim.schedule(10 * MS + 500_000, lambda: sim.partition([["a"], ["b"]]))
    sim.run(20 * MS)
    assert log(sim, "b") == [] and sim.stats.dropped == {"partition": 1}


def test_partition_blocks_new_connections_until_heal() -> None:
    sim = fixed_sim()
    _pair(sim)
    sim.partition([["a"], ["b"]])
    send(sim, 10 * MS, "b", "d", b"queued")
    sim.schedule(150 * MS, lambda: sim.heal())
    sim.run(400 * MS)
    assert log(sim, "a") == [[b"queued"]] and sim.stats.dropped == {}


def test_partition_groups_bridge_and_globs() -> None:
    sim = fixed_sim()
    for name in ("n1", "n2", "n3"):
        scripted(sim, name, SocketSpec("d", DEALER, bind=(f"tcp://{name}:1",)))
    net = sim.network
    sim.partition([["n1", "n2"], ["n2", "n3"]])  # n2 bridges
    assert net.is_cut("n1", "n3") and net.is_cut("n3", "n1")
    assert not net.is_cut("n1", "n2") and not net.is_cut("n2", "n3")
    sim.heal()
    sim.partition([["n1"], ["n[23]"]])
    assert net.is_cut("n1", "n2") and net.is_cut("n3", "n1") and not net.is_cut("n2", "n3")
    with pytest.raises(SimulationError, match="unknown node 'nx'"):
        sim.partition([["n1"], ["nx"]])


# ---- clock skew -----------------------------------------------------------------------------


def test_clock_offset_shifts_now_and_timers_are_converted_back() -> None:
    sim = fixed_sim()
    scripted(sim, "n")
    sim.set_clock("n", 1_000 * MS)
    sim.command(10 * MS, "n", {"op": "timer", "at": 1_050 * MS})  # node time
    sim.run(100 * MS)
    node: Scripted = sim.node("n")  # type: ignore[assignment]
    assert node.started_at == 1_000 * MS
    assert node.commands[0][1] == 1_010 * MS
    assert node.timer_calls == [1_050 * MS]  # fired at virtual 50 ms
    assert sim.node_time("n") == 1_100 * MS


def test_clock_drift_and_re_conversion_of_a_pending_timer() -> None:
    sim = fixed_sim()
    scripted(sim, "n")
    sim.command(10 * MS, "n", {"op": "timer", "at": 100 * MS})
    sim.schedule(20 * MS, lambda: sim.set_clock("n", 0, drift=1.0))  # runs twice as fast from now
    sim.run(1)
    node: Scripted = sim.node("n")  # type: ignore[assignment]
    # At virtual 20 ms the clock jumps to 40 ms; 100 ms node time is reached at virtual 50 ms.
    sim.run(50 * MS)
    assert node.timer_calls == []
    sim.run(50 * MS + 1)
    assert node.timer_calls == [100 * MS]
    sim.run(200 * MS)
    assert sim.node_time("n") == 400 * MS


def test_clock_set_backwards_delays_a_timer() -> None:
    sim = fixed_sim()
    scripted(sim, "n")
    sim.command(10 * MS, "n", {"op": "timer", "at": 50 * MS})
    sim.schedule(20 * MS, lambda: sim.set_clock("n", -30 * MS))
    sim.run(80 * MS)
    assert sim.node("n").timer_calls == []  # type: ignore[union-attr]
    sim.run(200 * MS)
    assert sim.node("n").timer_calls == [50 * MS]  # type: ignore[union-attr]
    assert sim.node_time("n") == 170 * MS


# ---- slow links ----------------------------------------------------------------------------


def test_slow_link_changes_latency_until_restored() -> None:
    sim = fixed_sim()
    _pair(sim)
    lid: list[int] = []
    sim.schedule(10 * MS, lambda: lid.append(sim.slow_link("a", "b", ("fixed", 20 * MS))))
    send(sim, 11 * MS, "a", "d", b"slow")
    send(sim, 11 * MS, "b", "d", b"fast")  # the other direction is untouched
    sim.schedule(40 * MS, lambda: sim.restore_link(lid[0]))
    send(sim, 41 * MS, "a", "d", b"normal")
    sim.run(60 * MS)
    assert [(f, t) for _, f, t in sim.node("b").log] == [([b"slow"], 31 * MS), ([b"normal"], 42 * MS)]  # type: ignore[union-attr]
    assert [(f, t) for _, f, t in sim.node("a").log] == [([b"fast"], 12 * MS)]  # type: ignore[union-attr]


def test_latency_model_links_apply_per_pair() -> None:
    latency = LatencyModel(("fixed", MS), links={("a", "b"): ("fixed", 5 * MS)})
    sim = Simulation(1, latency=latency)
    _pair(sim)
    send(sim, 20 * MS, "a", "d", b"x")
    sim.run(40 * MS)
    assert sim.node("b").log[0][2] == 25 * MS  # type: ignore[union-attr]


# ---- message rules --------------------------------------------------------------------------


def _rules_sim(rule: Rule, trace: Any = None) -> Simulation:
    sim = Simulation(1, trace, latency=FIXED_1MS, rules=RuleSet([rule]))
    _pair(sim)
    return sim


def test_drop_rule_matches_msg_type_and_is_traced(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = _rules_sim(Rule(Match(src="a", msg_type="req*"), Drop()), trace)
    send(sim, 10 * MS, "a", "d", b"1", msg_type="request")
    send(sim, 10 * MS, "a", "d", b"2", msg_type="other")
    send(sim, 10 * MS, "b", "d", b"3", msg_type="request")
    sim.run(20 * MS)
    trace.close()
    assert log(sim, "b") == [[b"2"]] and log(sim, "a") == [[b"3"]]
    assert sim.stats.dropped == {"drop:rule-0": 1}
    (drop,) = rows(trace.path, kind="drop")
    assert drop["fault"] == "drop:rule-0" and drop["node"] == "a" and drop["peer"] == "b"


def test_delay_rule_delays_and_fifo_holds_behind_it(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = _rules_sim(Rule(Match(msg_type="slow"), Delay(("fixed", 10 * MS))), trace)
    send(sim, 10 * MS, "a", "d", b"1", msg_type="slow")
    send(sim, 10 * MS, "a", "d", b"2", msg_type="fast")
    sim.run(30 * MS)
    trace.close()
    assert [(f, t) for _, f, t in sim.node("b").log] == [([b"1"], 21 * MS), ([b"2"], 21 * MS)]  # type: ignore[union-attr]
    (fault,) = rows(trace.path, kind="fault")
    assert fault["fault"] == "delay:rule-0" and fault["detail"] == f"+{10 * MS}ns"
    recv = rows(trace.path, kind="recv", node="b")
    assert [r["fault"] for r in recv] == ["delay:rule-0", None]


def test_duplicate_rule_delivers_extra_copies_with_the_same_msg_id(tmp_path) -> None:
    trace = writer(tmp_path)
    sim = _rules_sim(Rule(Match(src="a"), Duplicate(2)), trace)
    send(sim, 10 * MS, "a", "d", b"x")
    send(sim, 10 * MS, "a", "d", b"y")
    sim.run(20 * MS)
    trace.close()
    assert log(sim, "b") == [[b"x"]] * 3 + [[b"y"]] * 3
    recv = rows(trace.path, kind="recv", node="b")
    assert len({r["msg_id"] for r in recv}) == 2 and len(recv) == 6


def test_reorder_rule_releases_behind_the_next_message() -> None:
    rule = Rule(Match(msg_type="first"), Reorder(window=("fixed", 50 * MS)))
    sim = _rules_sim(rule)
    send(sim, 10 * MS, "a", "d", b"1", msg_type="first")
    send(sim, 12 * MS, "a", "d", b"2")
    send(sim, 12 * MS, "a", "d", b"3")
    sim.run(100 * MS)
    assert [(f, t) for _, f, t in sim.node("b").log] == [  # type: ignore[union-attr]
        ([b"2"], 13 * MS), ([b"1"], 13 * MS), ([b"3"], 13 * MS)]


def test_reorder_rule_window_lets_later_messages_overtake() -> None:
    rule = Rule(Match(msg_type="first"), Reorder(window=("fixed", 5 * MS), behind_next=False))
    sim = _rules_sim(rule)
    send(sim, 10 * MS, "a", "d", b"1", msg_type="first")
    send(sim, 11 * MS, "a", "d", b"2")
    send(sim, 20 * MS, "a", "d", b"3")
    sim.run(40 * MS)
    assert [(f, t) for _, f, t in sim.node("b").log] == [  # type: ignore[union-attr]
        ([b"2"], 12 * MS), ([b"1"], 16 * MS), ([b"3"], 21 * MS)]


def test_reorder_with_no_next_message_is_released_after_the_window() -> None:
    sim = _rules_sim(Rule(Match(), Reorder(window=("fixed", 5 * MS))))
    send(sim, 10 * MS, "a", "d", b"alone")
    sim.run(40 * MS)
    assert [(f, t) for _, f, t in sim.node("b").log] == [([b"alone"], 16 * MS)]  # type: ignore[union-attr]


def test_rule_probability_is_seeded() -> None:
    def delivered(seed: int) -> list[bytes]:
        sim = Simulation(seed, latency=FIXED_1MS, rules=RuleSet([Rule(Match(), Drop(), probability=0.5)]))
        _pair(sim)
        for k in range(40):
            send(sim, 10 * MS, "a", "d", b"%d" % k)
        sim.run(20 * MS)
        return [f[0] for f in log(sim, "b")]

    first = delivered(1)
    assert 5 < len(first) < 35
    assert delivered(1) == first and delivered(2) != first


def test_rules_apply_to_socket_internal_messages_too() -> None:
    sim = Simulation(1, latency=FIXED_1MS, rules=RuleSet([Rule(Match(msg_type="zmq.subscribe"), Drop())]))
    scripted(sim, "pub", SocketSpec("p", SocketType.PUB, bind=("tcp://p:1",)))
    scripted(sim, "sub", SocketSpec("s", SocketType.SUB, connect=("tcp://p:1",), subscribe=(b"",)))
    send(sim, 10 * MS, "pub", "p", b"x")
    sim.run(20 * MS)
    assert log(sim, "sub") == []


def test_a_rule_on_every_message_leaves_socket_internal_messages_alone() -> None:
    """Only a rule that names them (``zmq.*``) touches subscriptions: one dropped by ``drop: 5%``
    left a Dafka consumer deaf to its FETCH answers for the rest of a run (109 records lacking)."""
    for match in (Match(src="sub"), Match(dst="pub", msg_type="*"), Match(msg_type="zmq*")):  # (sub -> pub: only
        sim = Simulation(1, latency=FIXED_1MS, rules=RuleSet([Rule(match, Drop())]))          # subscriptions)
        scripted(sim, "pub", SocketSpec("p", SocketType.PUB, bind=("tcp://p:1",)))
        scripted(sim, "sub", SocketSpec("s", SocketType.SUB, connect=("tcp://p:1",), subscribe=(b"",)))
        send(sim, 10 * MS, "pub", "p", b"y")
        sim.run(20 * MS)
        assert [f[0] for f in log(sim, "sub")] == ([] if match.msg_type == "zmq*" else [b"y"]), match


def test_timer_in_the_past_fires_at_once() -> None:
    sim = fixed_sim()
    scripted(sim, "n")
    sim.command(10 * MS, "n", {"op": "timer", "at": 1 * MS})
    sim.run(20 * MS)
    assert sim.node("n").timer_calls == [10 * MS]  # type: ignore[union-attr]


def test_rules_by_count_and_by_decoded_field(tmp_path) -> None:
    """nth counts the messages a rule matched over the run; fields look into decoded messages."""
    trace = writer(tmp_path)
    rules = RuleSet([Rule(Match(msg_type="req"), Drop(), nth=frozenset({2})),
                     Rule(Match(fields=(("body", "drop-*"),)), Drop())])
    sim = Simulation(1, trace, latency=FIXED_1MS, rules=rules,
                     fields_of=lambda frames: {"body": frames[-1]} if frames[-1] != b"?" else None)
    _pair(sim)
    for k, body in enumerate([b"1", b"2", b"3", b"drop-me", b"?", b"keep"]):
        send(sim, (10 + k) * MS, "a", "d", body, msg_type="req" if k < 3 else "other")
    sim.run(50 * MS)
    assert [f[-1] for f in log(sim, "b")] == [b"1", b"3", b"?", b"keep"]
    trace.close()
    assert [r["fault"] for r in rows(trace.path, kind="drop")] == ["drop:rule-0", "drop:rule-1"]
    again = Simulation(1, latency=FIXED_1MS, rules=rules)  # the same RuleSet, a new run: counting starts over
    _pair(again)
    for k in range(3):
        send(again, (10 + k) * MS, "a", "d", str(k).encode(), msg_type="req")
    again.run(50 * MS)
    assert [f[-1] for f in log(again, "b")] == [b"0", b"2"]
