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
- `frozen_heap` moves what the process held before the run out of the collector's sight
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

    __slots__ = ("spent", "_began", "_ident")

    def __init__(self) -> None:
        self.spent = 0
        self._began = 0
        self._ident: int | None = None

    def __enter__(self) -> CollectorTime:
        self._ident = threading.get_ident()
        gc.callbacks.append(self._on_collection)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            gc.callbacks.remove(self._on_collection)
        except ValueError:  # (removed by someone else: nothing left to undo)
            pass

    def own_cpu(self) -> int:
        """The thread's CPU time without its collections so far (ns)."""
        return thread_time() - self.spent

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != self._ident:
            return
        if phase == "start":
            self._began = thread_time()
        else:
            self.spent += thread_time() - self._began


_frozen_lock = threading.Lock()
_frozen_runs = 0


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the objects that exist now out of every collection until the last run that entered
    this leaves it (`gc.freeze`, `gc.unfreeze`: both constant time). Garbage among them waits for
    the first full collection after that."""
    global _frozen_runs
    with _frozen_lock:
        _frozen_runs += 1
        gc.freeze()
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen_runs -= 1
            if _frozen_runs == 0:
                gc.unfreeze()
