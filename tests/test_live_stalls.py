"""Live runs: in-process nodes that the harness's one loop held up (a busy neighbour) are not
blamed by the timing checks; the node that was slow by itself still is (harness.live.node_io,
``stall`` events)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness import composition
from harness.composition import run_live
from harness.node import Action, Node, NodeContext
from harness.registry import package
from harness.scenario import parse_scenario
from harness.trace import read_trace

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]
BURN_S = 0.15  # well beyond the 25 ms tolerance of the PPPP timing checks

SCENARIO = """protocol: pppp
name: pppp-busy-neighbour
duration: 1600ms
settle: 300ms
nodes:
  publisher: {role: publisher, config: {idle: 100ms, first_idle: 50ms, liveness: 3}}
  subs: {role: subscriber, count: 3, config: {channels: [news]}}
workload:
  - {nodes: publisher, op: publish, rate: 20/s, from: 200ms, until: 1300ms, channel: news, size: 16}
check: [subscriber-heartbeats, ack-timing, exactly-once]
"""


class BusyOnce:
    """A reference subscriber whose timer handler, once past 700 ms, burns ``burn_s`` of CPU
    before answering: slow by itself, and holding the loop every other node shares."""

    implementation = "busy-once"
    wall_ns = 0  # how long the burn took (wall time: more than burn_s when the OS gives the core away)

    def __init__(self, inner: Node, burn_s: float = BURN_S) -> None:
        self.inner = inner
        self.burnt = False
        self.burn_s = burn_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def handle_timer(self, now: int) -> list[Action]:
        if not self.burnt and now > 700_000_000:
            self.burnt = True
            began = time.monotonic_ns()
            spin = time.thread_time() + self.burn_s
            while time.thread_time() < spin:
                pass
            BusyOnce.wall_ns = time.monotonic_ns() - began
        return self.inner.handle_timer(now)


def busy_once(ctx: NodeContext) -> Node:
    return BusyOnce(package("pppp").roles["subscriber"].factory(ctx))  # type: ignore[return-value]


busy_once.implementation = "busy-once"  # type: ignore[attr-defined]


def test_only_the_slow_node_is_blamed_not_those_it_held_up(tmp_path: Path) -> None:
    r = run_live(parse_scenario(SCENARIO, "busy.yaml"), 1, str(tmp_path), factories={"subs.0": busy_once})
    failed = {v.check: v.detail for v in r.failed}
    assert "subscriber-heartbeats" in failed, [v.to_dict() for v in r.verdicts]  # subs.0 sent nothing while busy
    blamed = {w.rstrip(":,;") for d in failed.values() for w in d.split(" [the harness itself")[0].split()
              if w.startswith("subs.")}
    assert blamed == {"subs.0"}, failed
    rows = read_trace(r.trace_path).to_pylist()  # type: ignore[arg-type]
    held: dict[str, float] = {}  # node -> its longest stall (ms)
    for x in rows:
        if x["kind"] == "stall":
            held[x["node"]] = max(held.get(x["node"], 0.0), float(x["detail"].split()[1]))
    assert {n for n, ms in held.items() if ms > 100} & {"subs.1", "subs.2", "publisher"}, "the others were held up by it"
    # its own 150 ms of CPU are never excused; only what the OS took besides (a loaded machine)
    assert held.get("subs.0", 0) < (BusyOnce.wall_ns - BURN_S * 1e9) / 1e6 + 50, (held, BusyOnce.wall_ns)


def test_a_run_whose_loop_ran_far_behind_says_so_on_its_failures(tmp_path: Path) -> None:
    """A neighbour that holds the loop for 0.6 s: every bound of the run stretched that much, so
    each failure says the harness itself ran late (and the run's stats how late)."""
    def hog(ctx: NodeContext) -> Node:
        return BusyOnce(package("pppp").roles["subscriber"].factory(ctx), burn_s=0.6)  # type: ignore[return-value]

    r = run_live(parse_scenario(SCENARIO, "hog.yaml"), 1, str(tmp_path), factories={"subs.0": hog})
    assert r.stats["stalls"]["worst_ms"] >= 250 and r.stats["stalls"]["worst_node"] != "subs.0", r.stats["stalls"]
    assert r.failed and all("the harness itself ran late in this run" in v.detail for v in r.failed)
    assert all("ran late" not in v.detail for v in r.verdicts if v.ok)


SLOW_CLIENT = """protocol: eventbus
name: eventbus-slow-client
duration: 2s
nodes:
  bus: {role: server, command: "{zmq_harness} node eventbus server --bind {endpoint}", ready: {line: READY}}
  source: {role: client, command: "{zmq_harness} node eventbus client --identity {name} --set servers={snapshots}
    --set publish=60 --set interval=20ms --set topic=/a/x --set resync=0s", ready: {line: READY}}
  fast: {role: client, count: 2}
  slow: {role: client, config: {resync: 0s}}
check: [convergence, complete-delivery]
"""
# a BROADCAST: 60 events in 1.2 s (less those its first SYNC brings) outrun the run, also when a
# loaded host stretches the external source's 20 ms between events (35 ms behind once at 0.03), and
# the loop still catches up within the wait after the end (the run's duration, 2 s here)
HANDLER_S = 0.045


class SlowHandler:
    """A reference client that takes ``HANDLER_S`` over every BROADCAST: the loop every in-process
    node shares runs behind, as on a host short of CPU, and is still behind at the run's end. (Its
    SYNCs are quick, and it never resynchronises: each SYNC would bring it every event it is behind
    on again.)"""

    implementation = "slow-handler"

    def __init__(self, inner: Node) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket.startswith("publisher"):
            time.sleep(HANDLER_S)
        return self.inner.receive(socket, frames, now)


def slow_client(ctx: NodeContext) -> Node:
    return SlowHandler(package("eventbus").roles["client"].factory(ctx))  # type: ignore[return-value]


def test_what_was_queued_unread_at_the_end_is_judged_once_the_loop_caught_up(tmp_path: Path) -> None:
    r = run_live(parse_scenario(SLOW_CLIENT, "slow.yaml"), 1, str(tmp_path), factories={"slow": slow_client})
    assert r.ok, [v.to_dict() for v in r.failed]
    # it was behind at the end: at least two BROADCASTs were still queued unread (730 ms on a quiet
    # machine, 770 to 815 ms beside three CPU hogs). The run starts once the external source is ready
    # (READY), so a loaded host that starts it late cannot leave it too little of the run to publish
    # in (5 ms behind once, before)
    behind = r.stats["catch_up_ms"]
    assert behind is not None and behind > 2 * HANDLER_S * 1000, r.stats


def test_input_still_unread_when_the_wait_ends_is_said_on_the_failures(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the wait (bound 0) the same run judges the clients on what the loop had read by the
    end: the clients the slow one held up lack the events still queued for them (a false alarm),
    and each failure says the harness was behind."""
    monkeypatch.setattr(composition, "LIVE_CATCH_UP_NS", 0)
    r = run_live(parse_scenario(SLOW_CLIENT, "slow.yaml"), 1, str(tmp_path), factories={"slow": slow_client})
    assert r.stats["catch_up_ms"] is None
    failed = {v.check: v.detail for v in r.failed}
    assert "convergence" in failed and "fast.0 lacks" in failed["convergence"], [v.to_dict() for v in r.verdicts]
    assert all("after the end it still had input unread" in d for d in failed.values()), failed


class StuckOnce(BusyOnce):
    """A reference subscriber whose timer handler, once past 700 ms, sleeps 2.5 s: the loop is
    still inside it when the run ends."""

    def handle_timer(self, now: int) -> list[Action]:
        if not self.burnt and now > 700_000_000:
            self.burnt = True
            time.sleep(2.5)
        return self.inner.handle_timer(now)


def test_a_loop_that_cannot_get_to_judging_ends_the_run_with_a_clear_error(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(composition, "LIVE_CATCH_UP_NS", 200_000_000)
    monkeypatch.setattr(composition, "LIVE_JUDGE_WAIT_S", 0.2)

    def stuck(ctx: NodeContext) -> Node:
        return StuckOnce(package("pppp").roles["subscriber"].factory(ctx))  # type: ignore[return-value]

    with pytest.raises(composition.RunError, match="did not get to judging the run within 0.2 s"):
        run_live(parse_scenario(SCENARIO, "stuck.yaml"), 1, str(tmp_path), factories={"subs.0": stuck})
    traces = list(tmp_path.glob("*/live-seed-1.parquet"))
    assert traces and read_trace(str(traces[0])).num_rows > 0  # what it recorded is kept
