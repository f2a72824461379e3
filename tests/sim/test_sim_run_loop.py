"""Simulation.run steps simpy's event queue itself: the order, the clock and failures must be
exactly what simpy's own Environment.run gives."""

from __future__ import annotations

import pytest
import simpy

from harness.sim import Simulation

MS = 1_000_000


def test_events_before_until_run_and_the_clock_ends_at_until() -> None:
    sim = Simulation(1)
    seen: list[tuple[str, int]] = []
    for at, name in ((5 * MS, "a"), (10 * MS, "at-until"), (3 * MS, "b"), (5 * MS, "c")):
        sim.schedule(at, lambda name=name: seen.append((name, sim.now_ns)))
    sim.run(10 * MS)
    assert seen == [("b", 3 * MS), ("a", 5 * MS), ("c", 5 * MS)]  # ties in scheduling order
    assert sim.now_ns == 10 * MS
    sim.run(10 * MS)  # not later than now: nothing happens
    assert len(seen) == 3
    sim.run(10 * MS + 1)  # an event due exactly at the old ``until`` runs in the next call
    assert seen[-1] == ("at-until", 10 * MS) and sim.now_ns == 10 * MS + 1


def test_simpy_processes_on_env_interleave_as_simpy_orders_them() -> None:
    def script(env: simpy.Environment, log: list[tuple[str, int]], schedule: object) -> None:
        def proc() -> simpy.events.ProcessGenerator:
            for _ in range(3):
                yield env.timeout(2 * MS)
                log.append(("proc", int(env.now)))
        env.process(proc())
        for at in (1 * MS, 2 * MS, 4 * MS, 7 * MS):
            schedule(at, lambda at=at: log.append(("call", at)))  # type: ignore[operator]

    sim = Simulation(1)
    ours: list[tuple[str, int]] = []
    script(sim.env, ours, sim.schedule)
    sim.run(3 * MS)
    sim.run(9 * MS)

    env = simpy.Environment()
    theirs: list[tuple[str, int]] = []

    def at_time(at: int, fn: object) -> None:
        ev = env.timeout(at - int(env.now))
        ev.callbacks.append(lambda _e: fn())  # type: ignore[operator]

    script(env, theirs, at_time)
    env.run(until=3 * MS)
    env.run(until=9 * MS)
    assert ours == theirs and len(ours) == 7


def test_a_failed_simpy_event_crashes_the_run_like_simpy() -> None:
    sim = Simulation(1)

    def failing() -> simpy.events.ProcessGenerator:
        yield sim.env.timeout(1 * MS)
        raise KeyError("boom")

    sim.env.process(failing())
    with pytest.raises(KeyError, match="boom"):
        sim.run(5 * MS)


def test_simpys_own_loop_runs_the_simulators_events_too() -> None:
    sim = Simulation(1)
    seen: list[int] = []
    for at in (2 * MS, 1 * MS):
        sim.schedule(at, lambda at=at: seen.append(at))
    sim.env.run(until=3 * MS)  # Environment.step on our events: the class-level callback runs them
    assert seen == [1 * MS, 2 * MS]
