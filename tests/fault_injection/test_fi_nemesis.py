"""Fault schedules: the data classes, building them from plain data, and installing them on
the simulator (the object with the nemesis primitives)."""

from __future__ import annotations

import pytest

from fault_injection.nemesis import (
    ClockSkew,
    Crash,
    Partition,
    Pause,
    SlowLink,
    fault_from_dict,
    faults_from_dicts,
    install,
)
from fault_injection.rules import Distribution
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
    ], sim)
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


def test_symbolic_names_are_resolved_when_the_fault_fires(tmp_path) -> None:
    sim, trace = _sim(tmp_path)
    leader = {"now": "a"}
    sim.schedule(5 * MS, lambda: leader.update(now="b"))
    install([Crash(10 * MS, "leader", restart_after=10 * MS)], sim,
            resolve=lambda n: leader["now"] if n == "leader" else n)
    sim.schedule(15 * MS, lambda: leader.update(now="c"))  # the restart still targets b
    sim.run(30 * MS)
    assert [e for e in _events(trace)] == [(10, "b", "crash", "crash"), (20, "b", "restart", "restart")]


def test_one_way_partition_and_open_ended_faults(tmp_path) -> None:
    sim, _ = _sim(tmp_path)
    install([Partition(1 * MS, None, (("a",), ("b",)), one_way=True), Pause(1 * MS, None, "c")], sim)
    sim.run(1_000 * MS)
    assert sim.network.is_cut("a", "b") and not sim.network.is_cut("b", "a")
    assert sim.is_paused("c")


def test_fault_data_classes_validate() -> None:
    with pytest.raises(ValueError, match="two groups"):
        Partition(0, 1, (("a",),))
    with pytest.raises(ValueError, match="exactly two"):
        Partition(0, 1, (("a",), ("b",), ("c",)), one_way=True)
    with pytest.raises(ValueError, match="before start"):
        Pause(10, 5, "a")
    with pytest.raises(ValueError, match="drift"):
        ClockSkew(0, "a", 0, drift=-1.0)
    slow = SlowLink(0, 1, "a", "b", "uniform(1ms, 2ms)")  # type: ignore[arg-type]  # strings are parsed
    assert slow.latency == Distribution("uniform", MS, 2 * MS)


def test_faults_from_plain_data() -> None:
    faults = faults_from_dicts([
        {"crash": "peer-1", "at": "5s", "restart_after": "3s"},
        {"partition": [["a", "b"], ["c"]], "from": "10s", "until": "14s"},
        {"partition": [["a"], ["b"]], "from": 0, "one_way": True},
        {"pause": "w", "from": "1s", "until": "2s"},
        {"clock": "p", "at": 0, "offset": "50ms", "drift": 0.001},
        {"slow": ["client", "broker"], "from": "1s", "until": "3s", "latency": "uniform(10ms, 50ms)"},
    ])
    s = 1_000_000_000
    assert faults == [
        Crash(5 * s, "peer-1", 3 * s),
        Partition(10 * s, 14 * s, (("a", "b"), ("c",))),
        Partition(0, None, (("a",), ("b",)), one_way=True),
        Pause(1 * s, 2 * s, "w"),
        ClockSkew(0, "p", 50 * MS, 0.001),
        SlowLink(1 * s, 3 * s, "client", "broker", Distribution("uniform", 10 * MS, 50 * MS)),
    ]


@pytest.mark.parametrize("item, message", [
    ({"at": 5}, "exactly one of"),
    ({"crash": "a"}, "fault 0 \\(crash\\): missing at"),
    ({"crash": "a", "at": "soon"}, "at: not a duration"),
    ({"pause": "a", "from": 0, "for": 3}, "unknown key"),
    ({"partition": "a,b", "from": 0}, "list of groups"),
    ({"partition": [["a"]], "from": 0}, "at least two groups"),
    ({"slow": ["a"], "from": 0, "latency": 1}, "\\[src, dst\\]"),
    ({"slow": ["a", "b"], "from": 0}, "missing latency"),
])
def test_bad_fault_data_names_the_problem(item, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        fault_from_dict(item)
