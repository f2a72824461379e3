"""The garbage collections of the harness process are told apart from a node's own time in a
live run (harness.live.collector_time); the runtime's use of it is proven in
test_runtime_stalls.py (a collection inside a handler is excused)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import pytest

from harness.live.collector_time import CollectorTime, FrozenHeap, frozen_heap, frozen_runs
from harness.live.loop import LiveRuntimeError
from harness.live.runtime import LiveRuntime
from harness.node import Action
from tests.live.live_test_nodes import Ticker, collect_for


def collect_over_a_heap_for(seconds: float) -> None:
    """Full collections over a heap of our own, for ``seconds`` of this thread's CPU time."""
    heap = [[i] for i in range(100_000)]
    collect_for(seconds)
    del heap


@pytest.fixture
def no_other_run() -> None:
    """The frozen-heap tests count holds from zero (a loop an earlier test left behind would
    still hold one: that test's no_thread_leak says so)."""
    if frozen_runs():
        pytest.skip("a live loop of an earlier test still holds the frozen heap")


def test_it_counts_the_collections_of_its_own_thread_and_nothing_else() -> None:
    with CollectorTime() as collections:
        collect_over_a_heap_for(0.05)
        mine = collections.spent
        other = threading.Thread(target=collect_over_a_heap_for, args=(0.05,))
        other.start()
        other.join()
        spin = time.thread_time() + 0.02  # CPU time outside any collection
        while time.thread_time() < spin:
            pass
        after = collections.spent
    assert mine >= 40_000_000, mine  # nearly all of the 50 ms went to collections
    assert collections.count >= 2 and 0 < collections.longest < mine, (collections.count, collections.longest)
    assert after == mine  # the other thread's collections and the spin are not its
    assert collections._on_collection not in gc.callbacks  # gone once left
    collect_over_a_heap_for(0.01)
    assert collections.spent == after


def test_an_end_without_its_start_counts_nothing() -> None:
    """Another callback that leaves the list during a collection makes CPython skip the next
    one's call of that phase: an end whose start was not seen is not a figure."""
    with CollectorTime() as collections:
        collections._on_collection("start", {})
        collections._on_collection("stop", {})
        counted = collections.count, collections.spent
        spin = time.thread_time() + 0.01
        while time.thread_time() < spin:
            pass
        collections._on_collection("stop", {"generation": 2})  # its start missed
    assert (collections.count, collections.spent) == counted


def test_own_cpu_is_the_threads_cpu_time_without_its_collections() -> None:
    with CollectorTime() as collections:
        before, cpu = collections.own_cpu(), time.thread_time_ns()
        collect_over_a_heap_for(0.05)
        own, total = collections.own_cpu() - before, time.thread_time_ns() - cpu
    assert total >= 50_000_000
    assert own < total - 40_000_000, (own, total)


def test_the_heap_stays_frozen_until_the_last_run_leaves(no_other_run: None) -> None:
    kept = [[i] for i in range(1000)]
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)  # out of every collection now
        with frozen_heap():  # a second runtime at once
            assert gc.get_freeze_count() >= frozen
        assert gc.get_freeze_count() >= frozen  # the first one still runs
    assert gc.get_freeze_count() == 0 and frozen_runs() == 0


def test_a_hold_given_up_twice_counts_once(no_other_run: None) -> None:
    first, second = FrozenHeap(), FrozenHeap()
    first.release()
    first.release()  # (the runtime gave a stuck loop's hold up; then the loop ended after all)
    assert frozen_runs() == 1 and gc.get_freeze_count() > 0  # the second still holds it
    second.release()
    assert frozen_runs() == 0 and gc.get_freeze_count() == 0


def test_a_running_loop_keeps_what_the_process_held_before_out_of_every_collection(
        no_other_run: None, no_thread_leak: None) -> None:
    before = [[i] for i in range(1000)]
    with LiveRuntime(seed=1) as rt:
        rt.add_node("t", Ticker, role="ticker", config={"period_ms": 5, "ticks": 3})
        rt.start()
        assert rt.call(gc.get_freeze_count) >= len(before)  # on the loop thread, as it runs
        assert rt.call(lambda: rt.gc_collections._on_collection in gc.callbacks)
    assert gc.get_freeze_count() == 0 and frozen_runs() == 0  # given back when the loop ended
    assert rt.gc_collections._on_collection not in gc.callbacks


class Stuck(Ticker):
    """Its first tick sleeps 1.5 s: the loop is inside it when the runtime is stopped."""

    entered = threading.Event()

    def handle_timer(self, now: int) -> list[Action]:
        type(self).entered.set()
        time.sleep(1.5)
        return super().handle_timer(now)


def test_a_loop_stuck_in_a_handler_gives_the_frozen_heap_back_when_it_is_stopped(
        no_other_run: None, no_thread_leak: None) -> None:
    Stuck.entered.clear()
    rt = LiveRuntime(seed=1)
    rt.add_node("t", Stuck, role="ticker", config={"period_ms": 5, "ticks": 1})
    rt.start()
    assert Stuck.entered.wait(5)
    with pytest.raises(LiveRuntimeError, match="did not stop"):
        rt.stop(timeout=0.2)
    held: Any = (frozen_runs(), gc.get_freeze_count(), rt.gc_collections._on_collection in gc.callbacks)
    loop = rt._thread
    assert loop is not None
    loop.join(5)  # the handler returns, the loop ends: its own release then does nothing
    assert held == (0, 0, False)
    assert not loop.is_alive() and frozen_runs() == 0 and gc.get_freeze_count() == 0
