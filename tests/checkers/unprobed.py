"""Simulated runs judged as a live run judges a node run as an external process: no probe
reports its sends and receipts, so a check sees it only through the other nodes."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import Checker, Event, Verdict


class Unprobed(Checker):
    """Feeds ``inner`` every event but those of ``hidden``, except the kinds of ``passed`` (what
    a live run still reports of a process: its crashes and starts, when a test wants them)."""

    name = "unprobed"

    def __init__(self, inner: Checker, hidden: str, passed: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.inner, self.hidden, self.passed = inner, hidden, passed

    def on_event(self, ev: Event) -> None:
        if ev.node != self.hidden or ev.kind in self.passed:
            self.inner.on_event(ev)

    def on_sockets(self, node: str, sockets: Any) -> None:
        self.inner.on_sockets(node, sockets)

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.inner.finish(end_ns)
