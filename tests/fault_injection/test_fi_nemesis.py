"""Fault schedules: the data classes, the one schema they are read from (``parse_fault``), and
installing them on a runtime (here the simulator) with targets resolved when a fault fires."""

from __future__ import annotations

from typing import Callable

import pytest

from fault_injection.nemesis import (
    ClockSkew,
    Crash,
    Partition,
    Pause,
    SlowLink,
    install,
    parse_fault,
)
from fault_injection.rules import Distribution, FaultSpecError, Rule
from harness.node import SocketSpec, SocketType
from harness.sim import LatencyModel, Simulation
from harness.trace import RunInfo, TraceWriter, read_trace
from tests.sim.sim_test_nodes import Scripted

MS = 1_000_000


def _sim(tmp_path, names=("a", "b", "c")) -> tuple[Simulation, TraceWriter]:  # type: ignore[no-untyped-def]
    trace = TraceWriter(str(tmp_path / "t.parquet"), RunInfo("t/1", 1, "t", "sim"))
    sim = Simulation(1, trace, latency=LatencyModel(("fixed", MS)))
    for name in names:
        sim.add_node(name, Scripted, role="r",
                     config={"sockets": [SocketSpec("d", SocketType.DEALER, bind=(f"tcp://{name}:1",))]})
    return sim, trace


def by_name(expr: str) -> list[str]:
    """The plainest resolver: a target is a node name."""
    return [expr]


def _events(trace: TraceWriter) -> list[tuple[int, str, str, str]]:
    trace.close()
    return [(r["time_ns"] // MS, r["node"], r["kind"], r["fault"])
            for r in read_trace(trace.path).to_pylist() if r["kind"] not in ("send", "recv", "connect")]


def test_install_schedules_every_fault_kind(tmp_path) -> None:
    sim, trace = _sim(tmp_path)
    install([
        Crash(10 * MS, "a", restart_after=5 * MS),
        Partition(20 * MS, 30 * MS, (("a",), ("b", "c"))),
        Pause(40 * MS, 45 * MS, "b"),
        ClockSkew(50 * MS, "c", offset=7 * MS, drift=0.0),
        SlowLink(60 * MS, 70 * MS, "a", "b", Distribution.parse("5ms")),
        Crash(80 * MS, "c"),  # stays down
    ], sim, by_name)
    sim.run(31 * MS)
    assert sim.network.active_partitions() == []
    sim.run(42 * MS)
    assert sim.is_paused("b")
    sim.run(65 * MS)
    assert sim.network.link("b", "a").dist.params == (5 * MS,)  # both ways by default
    sim.run(100 * MS)
    assert sim.node_time("c") == 107 * MS and not sim.is_running("c") and sim.incarnation("a") == 1
    assert sim.network.link("a", "b").dist.params == (MS,)
    assert _events(trace) == [
        (10, "a", "crash", "crash"), (15, "a", "restart", "restart"),
        (20, "nemesis", "fault", "partition"), (30, "nemesis", "fault", "heal"),
        (40, "b", "pause", "pause"), (45, "b", "resume", "resume"),
        (50, "c", "fault", "clock"),
        (60, "nemesis", "fault", "slow-link"), (60, "nemesis", "fault", "slow-link"),
        (70, "nemesis", "fault", "restore-link"), (70, "nemesis", "fault", "restore-link"),
        (80, "c", "crash", "crash"),
    ]


def test_targets_are_resolved_when_the_fault_fires_and_the_restart_brings_back_the_same_node(tmp_path) -> None:
    sim, trace = _sim(tmp_path)
    leader = {"now": "a"}
    resolve: Callable[[str], list[str]] = lambda n: [leader["now"]] if n == "leader" else [n]  # noqa: E731
    sim.schedule(5 * MS, lambda: leader.update(now="b"))
    install([Crash(10 * MS, "leader", restart_after=10 * MS)], sim, resolve)
    sim.schedule(15 * MS, lambda: leader.update(now="c"))  # the restart still targets b
    sim.run(30 * MS)
    assert [e for e in _events(trace)] == [(10, "b", "crash", "crash"), (20, "b", "restart", "restart")]


def test_a_target_that_names_no_node_when_the_fault_fires_skips_it_with_a_row(tmp_path) -> None:
    sim, trace = _sim(tmp_path)
    install([Crash(10 * MS, "leader"), Pause(12 * MS, 20 * MS, "leader")], sim, lambda expr: [])
    sim.run(30 * MS)
    rows = [r for r in read_trace((trace.close(), trace.path)[1]).to_pylist() if r["kind"] == "fault"]
    assert [(r["time_ns"] // MS, r["fault"], r["detail"]) for r in rows] == [
        (10, "skipped", "crash: no node is 'leader' now"), (12, "skipped", "pause: no node is 'leader' now")]
    assert all(sim.is_running(n) for n in "abc")


def test_partition_sides_settle_overlaps_and_rest_at_fire_time(tmp_path) -> None:
    sim, _ = _sim(tmp_path)
    groups = {"all": ["a", "b", "c"]}
    install([Partition(1 * MS, None, (("b",), ("all",))), Partition(1 * MS, None, (("c",), ("rest",)))], sim,
            lambda expr: groups.get(expr, [expr]))
    sim.run(2 * MS)
    net = sim.network
    # b stays on the side that names it first: cut from a and c, which still talk
    assert net.is_cut("b", "a") and net.is_cut("c", "b") and net.is_cut("a", "b")
    # 'rest' is every node the other side does not name: c is cut from a and b
    assert net.is_cut("c", "a") and net.is_cut("a", "c") and not net.is_cut("a", "a")


def test_one_way_partition_and_open_ended_faults(tmp_path) -> None:
    sim, _ = _sim(tmp_path)
    install([Partition(1 * MS, None, (("a",), ("b",)), one_way=True), Pause(1 * MS, None, "c")], sim, by_name)
    sim.run(1_000 * MS)
    assert sim.network.is_cut("a", "b") and not sim.network.is_cut("b", "a")
    assert sim.is_paused("c")


def test_fault_data_classes_validate() -> None:
    with pytest.raises(ValueError, match="two sides"):
        Partition(0, 1, (("a",),))
    with pytest.raises(ValueError, match="exactly two"):
        Partition(0, 1, (("a",), ("b",), ("c",)), one_way=True)
    with pytest.raises(ValueError, match="before start"):
        Pause(10, 5, "a")
    with pytest.raises(ValueError, match="drift"):
        ClockSkew(0, "a", 0, drift=-1.0)
    slow = SlowLink(0, 1, "a", "b", "uniform(1ms, 2ms)")  # type: ignore[arg-type]  # strings are parsed
    assert slow.latency == Distribution("uniform", MS, 2 * MS)


def test_every_fault_kind_is_read_by_one_schema() -> None:
    s = 1_000_000_000
    items = [
        {"crash": "peer-1", "at": "5s", "restart_after": "3s"},
        {"partition": [["a", "b"], ["c"]], "from": "10s", "until": "14s"},
        {"partition": [["a"], ["b"]], "from": 0, "one_way": True},
        {"pause": "w", "from": "1s", "until": "2s"},
        {"clock_skew": "p", "at": 0, "offset": "-50ms", "drift": 0.001},
        {"slow_link": ["client", "broker"], "from": "1s", "until": "3s", "latency": "uniform(10ms, 50ms)"},
    ]
    assert [parse_fault(item, f"fault {i}") for i, item in enumerate(items)] == [
        Crash(5 * s, "peer-1", 3 * s),
        Partition(10 * s, 14 * s, (("a", "b"), ("c",))),
        Partition(0, None, (("a",), ("b",)), one_way=True),
        Pause(1 * s, 2 * s, "w"),
        ClockSkew(0, "p", -50 * MS, 0.001),
        SlowLink(1 * s, 3 * s, "client", "broker", Distribution("uniform", 10 * MS, 50 * MS)),
    ]
    rule = parse_fault({"rule": {"message": "REQUEST", "drop": "5%"}})
    assert isinstance(rule, Rule) and rule.probability == 0.05


def test_targets_are_checked_by_the_callers_checker() -> None:
    def check(expr: str) -> None:
        if expr != "broker":
            raise ValueError(f"no node named {expr!r}")

    with pytest.raises(FaultSpecError, match=r"fault 0: crash: no node named 'brokr'"):
        parse_fault({"crash": "brokr", "at": "1s"}, "fault 0", check)
    with pytest.raises(FaultSpecError, match=r"fault 0: partition\[1\]\[0\]: no node named 'x'"):
        parse_fault({"partition": [["broker"], ["x"]], "from": "1s"}, "fault 0", check)


@pytest.mark.parametrize("item, message", [
    ({"at": "5s"}, "exactly one of"),
    ({"crash": "a", "pause": "b", "at": "1s"}, "it has crash and pause"),
    ({"crahs": "a", "at": "1s"}, "did you mean 'crash'"),
    ({"crash": "a"}, "missing required field 'at'"),
    ({"crash": "a", "at": "soon"}, "at: not a duration"),
    ({"crash": "a", "at": 5}, "at: the duration 5 has no unit"),  # one rule: units in files
    ({"pause": "a", "from": "0s", "for": "3s"}, "for: unknown field"),
    ({"partition": "a,b", "from": "0s"}, "two or more lists"),
    ({"partition": [["a"]], "from": "0s"}, "two or more lists"),
    ({"partition": [["a"], ["b"]], "from": "2s", "until": "1s"}, "until: must be after 'from'"),
    ({"slow_link": ["a"], "from": "0s", "latency": "1ms"}, "\\[source, destination\\]"),
    ({"slow_link": ["a", "b"], "from": "0s"}, "missing required field 'latency'"),
    ({"slow_link": ["a", "b"], "latency": 2}, "latency: the duration 2 has no unit"),
    ({"clock_skew": "a", "drift": "fast"}, "drift: expected a number"),
    ({"clock": "a", "offset": "1ms"}, "exactly one of"),  # the old key is gone: one schema
])
def test_bad_fault_data_names_the_problem(item, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FaultSpecError, match=message):
        parse_fault(item, "fault 0")
