"""Garbage collections of the harness process, kept apart from a node's own time in a live run.

The live runtime counts the CPU time a node's handler took as the node's own (a handler that
ran long made its own deadline late). But Python's collector runs inside whichever call
allocates when a threshold is crossed: a full collection of a big process (a long test
session) may take 100 ms or more inside the handler of a reference node that did nothing
slow. That is the harness's work holding the loop, as a trace write is: the nodes it held up
are owed a stall row, not blamed.

Two things keep it so:
- `CollectorTime` counts the CPU time the collections on the loop thread took, so the runtime
  takes it out of a handler's own time;
- `FrozenHeap` moves what the process held before the run out of the collector's sight
  (`gc.freeze`), so a full collection during the run walks only what the run made.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

thread_time = time.thread_time_ns


class CollectorTime:
    """The CPU time garbage collections took on the thread that entered it (``spent``, ns), read
    from `gc.callbacks`. A collection on another thread holds the GIL: the entering thread waits
    without CPU time, which the runtime counts as the loop's already."""

    __slots__ = ("spent", "count", "longest", "_began", "_ident")

    def __init__(self) -> None:
        self.spent = 0
        self.count = 0  # collections on the thread (a live run's stats say how many, and the longest)
        self.longest = 0  # ns of CPU time
        self._began: int | None = None  # when the thread's collection now running began
        self._ident: int | None = None

    def __enter__(self) -> CollectorTime:
        self._ident = threading.get_ident()
        gc.callbacks.append(self._on_collection)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop counting (idempotent)."""
        try:
            gc.callbacks.remove(self._on_collection)
        except ValueError:  # (removed already: nothing left to undo)
            pass

    def own_cpu(self) -> int:
        """The thread's CPU time without its collections so far (ns)."""
        return thread_time() - self.spent

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != self._ident:
            return
        if phase == "start":
            self._began = thread_time()
        elif self._began is not None:  # (None: its start was not seen, as when another
            # callback left the list during that collection: nothing to count, rather than a wrong figure)
            took = thread_time() - self._began
            self._began = None
            self.spent += took
            self.count += 1
            if took > self.longest:
                self.longest = took


_frozen_lock = threading.Lock()
_frozen_runs = 0


class FrozenHeap:
    """One run's hold on the frozen heap: the objects that existed when the first hold was taken
    are kept out of every collection (`gc.freeze`) until the last hold is released
    (`gc.unfreeze`; both constant time). Garbage among them waits for the first full collection
    after that, and so does the full collection a frozen run put off: it then walks the whole
    heap, outside any run. `release` is idempotent: the runtime gives up a stuck loop's hold
    itself, and the loop's own release, if it ever comes, does nothing."""

    def __init__(self) -> None:
        global _frozen_runs
        self._held = True
        with _frozen_lock:
            _frozen_runs += 1
            gc.freeze()

    def release(self) -> None:
        global _frozen_runs
        with _frozen_lock:
            if not self._held:
                return
            self._held = False
            _frozen_runs -= 1
            if _frozen_runs == 0:
                gc.unfreeze()


@contextmanager
def frozen_heap() -> Iterator[FrozenHeap]:
    """A `FrozenHeap` hold for the block."""
    hold = FrozenHeap()
    try:
        yield hold
    finally:
        hold.release()


def frozen_runs() -> int:
    """How many holds on the frozen heap there are now."""
    return _frozen_runs
