"""The garbage collections of the harness process are told apart from a node's own time in a
live run (harness.live.collector_time); the runtime's use of it is proven in
test_runtime_stalls.py (a collection inside a handler is excused)."""

from __future__ import annotations

import gc
import threading
import time

from harness.live.collector_time import CollectorTime, frozen_heap
from harness.live.runtime import LiveRuntime
from tests.live.live_test_nodes import Ticker


def collect_for(seconds: float) -> None:
    """Full collections over a heap of our own, for ``seconds`` of this thread's CPU time."""
    heap = [[i] for i in range(100_000)]
    spin = time.thread_time() + seconds
    while time.thread_time() < spin:
        gc.collect()
    del heap


def test_it_counts_the_collections_of_its_own_thread_and_nothing_else() -> None:
    with CollectorTime() as collections:
        collect_for(0.05)
        mine = collections.spent
        other = threading.Thread(target=collect_for, args=(0.05,))
        other.start()
        other.join()
        spin = time.thread_time() + 0.02  # CPU time outside any collection
        while time.thread_time() < spin:
            pass
        after = collections.spent
    assert mine >= 40_000_000, mine  # nearly all of the 50 ms went to collections
    assert after == mine  # the other thread's collections and the spin are not its
    assert collections._on_collection not in gc.callbacks  # gone once left
    collect_for(0.01)
    assert collections.spent == after


def test_own_cpu_is_the_threads_cpu_time_without_its_collections() -> None:
    with CollectorTime() as collections:
        before, cpu = collections.own_cpu(), time.thread_time_ns()
        collect_for(0.05)
        own, total = collections.own_cpu() - before, time.thread_time_ns() - cpu
    assert total >= 50_000_000
    assert own < total - 40_000_000, (own, total)


def test_the_heap_stays_frozen_until_the_last_run_leaves() -> None:
    assert gc.get_freeze_count() == 0
    kept = [[i] for i in range(1000)]
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)  # out of every collection now
        with frozen_heap():  # a second runtime at once
            assert gc.get_freeze_count() >= frozen
        assert gc.get_freeze_count() >= frozen  # the first one still runs
    assert gc.get_freeze_count() == 0


def test_a_running_loop_keeps_what_the_process_held_before_out_of_every_collection(
        no_thread_leak: None) -> None:
    before = [[i] for i in range(1000)]
    with LiveRuntime(seed=1) as rt:
        rt.add_node("t", Ticker, role="ticker", config={"period_ms": 5, "ticks": 3})
        rt.start()
        assert rt.call(gc.get_freeze_count) >= len(before)  # on the loop thread, as it runs
        assert rt.call(lambda: rt._collections._on_collection in gc.callbacks)
    assert gc.get_freeze_count() == 0  # given back when the loop ended
    assert rt._collections._on_collection not in gc.callbacks
