"""Protocol coverage of a run, for coverage-guided exploration.

A run's *features* are what its nodes did, by role: each message type sent, each note, each
delivery kind, each discard (by the clause it names), each crash, restart and node error, with
how often in AFL-style buckets (1, 2, 3, 4-7, 8-15, ...), so that "RECONNECT sent 3 times" is
a different state from "once". The coverage-guided search prefers schedules that reach many
of them (`harness.explore.search`); ``explore`` reports how many distinct ones it saw.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.checkers.base import CRASH, DELIVER, DISCARD, ERROR, NOTE, RESTART, SEND, Checker, Event, Verdict

Feature = tuple[str, str, str, int]  # (role, event kind, message type / note kind / clause, count bucket)


def bucket(n: int) -> int:
    """AFL's hit-count buckets: 1, 2, 3, then powers of two (4-7 -> 4, 8-15 -> 8, ...)."""
    if n <= 3:
        return n
    return 1 << (n.bit_length() - 1)


class FeatureCollector(Checker):
    """Counts what each role does; gives no verdict (an observer, not a check)."""

    name = "explore-coverage"
    kinds = frozenset({SEND, NOTE, DELIVER, DISCARD, CRASH, RESTART, ERROR})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def on_event(self, ev: Event) -> None:
        what = ev.msg_type
        if ev.kind == DISCARD:
            what = str((ev.data or {}).get("clause") or "")
        self.counts[(ev.role, ev.kind, what)] += 1

    def finish(self, end_ns: int) -> list[Verdict]:
        return []

    def features(self) -> frozenset[Feature]:
        return frozenset((role, kind, what, bucket(n)) for (role, kind, what), n in self.counts.items())
