"""What the application side of a live run sees: Deliver actions, with waits.

The loop thread appends; tests and conformance wait on a condition variable, always with a
timeout.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True, slots=True)
class Delivery:
    """One `Deliver` action, as seen by tests and conformance."""

    index: int  # position in the log
    node: str
    kind: str
    data: dict[str, Any]
    time_ns: int


class DeliveryLog:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._items: list[Delivery] = []

    def append(self, node: str, kind: str, data: dict[str, Any], time_ns: int) -> None:
        with self.cond:
            self._items.append(Delivery(len(self._items), node, kind, data, time_ns))
            self.cond.notify_all()

    def snapshot(self) -> list[Delivery]:
        with self.cond:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def wake(self) -> None:
        """Let waiters re-check their predicate and ``broken`` (an error, the loop stopping)."""
        with self.cond:
            self.cond.notify_all()

    def wait_for(
        self,
        predicate: Callable[[list[Delivery]], bool],
        timeout: float,
        broken: Callable[[], str | None] = lambda: None,
        context: Callable[[], str] = lambda: "",
    ) -> list[Delivery]:
        """Block until ``predicate(deliveries)`` holds; it runs under the lock on the live list,
        so it must be quick and read-only. ``broken()`` returning a message ends the wait with
        a RuntimeError; on timeout, TimeoutError says how far it got plus ``context()``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if predicate(self._items):
                    return list(self._items)
                reason = broken()
                if reason is not None:
                    raise RuntimeError(reason)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"condition not met within {timeout}s ({len(self._items)} deliveries so "
                        f"far{context()})"
                    )
                self.cond.wait(remaining)

    def wait_delivery(
        self,
        kind: str | None,
        node: str | None,
        where: Callable[[Delivery], bool] | None,
        start: int,
        timeout: float,
        broken: Callable[[], str | None] = lambda: None,
        context: Callable[[], str] = lambda: "",
    ) -> Delivery:
        found: list[Delivery] = []
        scanned = start

        def match(items: list[Delivery]) -> bool:
            nonlocal scanned
            for d in items[scanned:]:
                if (kind is None or d.kind == kind) and (node is None or d.node == node) and (
                    where is None or where(d)
                ):
                    found.append(d)
                    return True
            scanned = max(scanned, len(items))
            return False

        self.wait_for(match, timeout, broken, context)
        return found[0]
