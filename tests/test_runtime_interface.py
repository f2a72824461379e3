"""The one runtime interface (harness.runtime): the simulator and the live runtime both
implement it, so the same driver code — nodes, commands at a time, a command stream, the
nemesis, run until — runs on either, with the same seeds and the same policy for a node that
raises."""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any, Callable

import pytest

from fault_injection.nemesis import Crash, Pause, install
from harness.live.external import ExternalNode
from harness.live.runtime import LiveRuntime
from harness.live.supervisor import ManagedProcess, ReadyDelay
from harness.node import Action, BaseNode, Deliver, Note
from harness.runtime import Runtime, node_rng
from harness.sim import Simulation
from tests.live.live_test_nodes import Ticker

MS = 1_000_000


def interface_methods() -> list[str]:
    return [n for n, _ in inspect.getmembers(Runtime) if not n.startswith("_")]


@pytest.mark.parametrize("cls", [Simulation, LiveRuntime])
def test_both_runtimes_implement_every_method_of_the_interface(cls: type) -> None:
    missing = [n for n in interface_methods() if not hasattr(cls, n) and n not in ("seed",)]
    assert not missing, f"{cls.__name__} lacks {missing}"


class Dice(BaseNode):
    """Delivers its first random draw and the incarnation its store counted."""

    protocol, role = "test", "dice"

    def start(self, now: int) -> list[Action]:
        boots = (self.store.get("boots") or 0) + 1
        self.store.put("boots", boots)
        return [Deliver("roll", {"value": self.rng.random(), "boots": boots}), Note("role", {"role": "leader", "term": boots})]

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        if request.get("explode"):
            raise ValueError("asked to explode")
        return [Deliver("command", dict(request))]


def drive(runtime: Any, run_to: Callable[[int], None]) -> None:
    """The same driver code for both runtimes: a node, timed commands, a crash of the node a
    target names when it fires, a restart, and a command that makes the node raise."""
    runtime.add_node("d", Dice, role="dice")
    runtime.add_node("t", Ticker, role="ticker", config={"period_ms": 30, "ticks": 100})
    runtime.command_stream(iter([(50 * MS, "d", {"n": 1}), (60 * MS, "d", {"n": 2})]))
    install([Crash(100 * MS, "the-dice", restart_after=50 * MS)], runtime,
            lambda t: [n for n in runtime.node_names() if (runtime.last_note(n, "role") or {}).get("role") == "leader"])
    runtime.command(250 * MS, "d", {"explode": True})
    run_to(400 * MS)


def rolls(deliveries: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    return [(kind, data.get("value", data.get("n"))) for node, kind, data in deliveries if node == "d"]


def test_the_same_driver_code_runs_on_both_runtimes_with_the_same_seeds() -> None:
    sim = Simulation(5)
    seen: list[tuple[str, str, dict[str, Any]]] = []
    sim.on_action(lambda n, a, t: seen.append((n, a.kind, a.data)) if isinstance(a, Deliver) else None)
    drive(sim, sim.run)

    live = LiveRuntime(seed=5)
    try:
        drive(live, live.run)
        live_seen = [(d.node, d.kind, d.data) for d in live.deliveries]
    finally:
        live.stop()

    expected_first = node_rng(5, "d", 0).random()
    expected_second = node_rng(5, "d", 1).random()  # the restart is incarnation 1, in both
    for got in (seen, live_seen):
        assert rolls(got) == [("roll", expected_first), ("command", 1), ("command", 2), ("roll", expected_second)]
    for rt in (sim, live):
        (failure,) = rt.failures
        assert failure.node == "d" and failure.where == "command" and failure.incarnation == 1
        assert "asked to explode" in failure.error
        assert not rt.is_running("d") and rt.is_running("t")  # the run went on without it


def test_live_pause_holds_timers_and_commands_until_resume(no_thread_leak: None) -> None:
    rt = LiveRuntime(seed=1)
    try:
        rt.add_node("t", Ticker, role="ticker", config={"period_ms": 20, "ticks": 1000})
        install([Pause(100 * MS, 300 * MS, "t")], rt, lambda t: [t])
        rt.command(200 * MS, "t", {"during": "pause"})
        rt.run(290 * MS)
        ticks = [d for d in rt.deliveries if d.kind == "tick"]
        assert ticks and max(d.time_ns for d in ticks) < 110 * MS  # nothing while paused
        assert not [d for d in rt.deliveries if d.kind == "command"]
        rt.run(450 * MS)
        (cmd,) = [d for d in rt.deliveries if d.kind == "command"]
        assert cmd.time_ns >= 300 * MS and cmd.data == {"during": "pause"}
        assert max(d.time_ns for d in rt.deliveries if d.kind == "tick") > 300 * MS
    finally:
        rt.stop()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[1].split()[0]


def _becomes(pid: int, stopped: bool) -> bool:
    """Signals arrive asynchronously: wait (bounded) for the process to be (not) stopped."""
    deadline = time.monotonic() + 5
    while (_state(pid) == "T") != stopped and time.monotonic() < deadline:
        time.sleep(0.01)
    return (_state(pid) == "T") == stopped


def test_processes_are_nodes_for_faults_and_targets(no_thread_leak: None) -> None:
    proc = ManagedProcess([sys.executable, "-c", "import time; time.sleep(60)"], ready=ReadyDelay(0.0), name="sleeper")
    rt = LiveRuntime(seed=1)
    try:
        rt.attach_process("impl", ExternalNode(proc, "broker"))
        proc.start()
        assert rt.node_names() == ["impl"] and rt.role_of("impl") == "broker" and rt.is_running("impl")
        rt.start()
        rt.pause("impl")
        assert _becomes(proc.pid, stopped=True)  # type: ignore[arg-type]
        rt.resume("impl")
        assert _becomes(proc.pid, stopped=False)  # type: ignore[arg-type]
        first = proc.pid
        rt.crash("impl")
        assert not rt.is_running("impl") and proc.returncode == -9
        rt.restart("impl")
        deadline = time.monotonic() + 10
        while not rt.is_running("impl") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rt.is_running("impl") and proc.pid != first
    finally:
        rt.stop()
        proc.stop()


# Ignores SIGTERM (a graceful shutdown that takes its time) and writes "pid wall-clock-ns" every 5 ms.
STUBBORN = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "with open(sys.argv[1], 'a') as f:\n"
            "    for _ in range(12000):\n"
            "        f.write('%d %d\\n' % (os.getpid(), time.time_ns())); f.flush(); time.sleep(0.005)\n")


def test_restarting_a_running_process_kills_it_before_the_call_returns(tmp_path: Any, no_thread_leak: None) -> None:
    # A restart fault is a crash and a start, as for an in-process node: the old process must be
    # gone when the crash is reported, or what it still sends would count as the new one's
    # (it was stopped by SIGTERM with 0.5 s of grace, in the background, after both were reported).
    out = tmp_path / "beats.txt"
    proc = ManagedProcess([sys.executable, "-c", STUBBORN, str(out)], ready=ReadyDelay(0.0), name="stubborn")
    rt = LiveRuntime(seed=1)
    try:
        rt.attach_process("impl", ExternalNode(proc, "broker"))
        proc.start()
        rt.start()
        while not out.exists() or out.stat().st_size == 0:
            time.sleep(0.01)
        first = proc.pid
        rt.restart("impl")
        returned = time.time_ns()
        deadline = time.monotonic() + 10
        while not (rt.is_running("impl") and proc.pid != first) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rt.is_running("impl") and proc.pid != first
    finally:
        rt.stop()
        proc.stop(grace=0.1)
    beats = [line.split() for line in out.read_text().splitlines() if line.count(" ") == 1]
    old = [int(t) for pid, t in beats if int(pid) == first]
    assert old and max(old) < returned, f"the old process wrote {(max(old) - returned) / 1e6:.0f} ms after the restart"


def test_faults_the_live_runtime_cannot_do_say_why() -> None:
    from harness.runtime import UnsupportedFault

    rt = LiveRuntime()
    try:
        rt._external["x"] = object()  # type: ignore[assignment]  # (what attach_process registers)
        with pytest.raises(UnsupportedFault, match="external process reads the host's clock"):
            rt.set_clock("x", 1)
        with pytest.raises(UnsupportedFault, match="ZMTP proxy"):
            rt.partition([["a"], ["b"]])
    finally:
        rt.stop()
