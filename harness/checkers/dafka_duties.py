"""What the Dafka run checks share: the time a node owes something (a duty with a bound that a
pause extends and a crash cancels), and what each node's lives (incarnations) are.

A duty arises at some event (a node's start, a subscription notification, a request) and is
discharged by a later event of the same node. It breaks its clause when it is discharged later
than ``within`` after it arose, or when the node is still alive ``within`` after it arose and
has not discharged it. The time a node spends paused does not count (a paused node does
nothing, rightly), and a crash ends every duty of the node's life: a node that is gone owes
nothing, and a restarted node owes what its new life asks of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from harness.checkers.base import CLOCK, CRASH, PAUSE, RESUME, STALL, START, Event, Pauses

DEFAULT_WITHIN_NS = 1_000_000_000  # generous: reference nodes discharge in the same handler
Problem = tuple[Event, str, str]  # (evidence, detail, clause), what Checker.first_problem takes


@dataclass
class Duty:
    since: int
    event: Event
    detail: str  # what is owed, for the failure text
    clause: str


class Duties:
    """Duties per node; ``kinds`` of events a checker using it must ask for: PAUSE, RESUME, CRASH,
    START (and CLOCK, which does not move virtual time and is ignored here)."""

    kinds = frozenset({PAUSE, RESUME, STALL, CRASH, START, CLOCK})

    def __init__(self, within_ns: int = DEFAULT_WITHIN_NS) -> None:
        self.within = within_ns
        self.pauses = Pauses()
        self.owed: dict[str, dict[Hashable, Duty]] = {}
        self.problems: list[Problem] = []
        self.met = 0

    def on_event(self, ev: Event) -> None:
        """Lifecycle events: call for every PAUSE/RESUME/CRASH/START before using the node."""
        if ev.kind in (CRASH, START):
            self._close(ev.node, ev.time_ns)
        self.pauses.on_event(ev)

    def owe(self, node: str, key: Hashable, ev: Event, detail: str, clause: str) -> None:
        self.owed.setdefault(node, {}).setdefault(key, Duty(ev.time_ns, ev, detail, clause))

    def owes(self, node: str, key: Hashable) -> bool:
        return key in self.owed.get(node, {})

    def discharge(self, node: str, key: Hashable, now: int) -> None:
        duty = self.owed.get(node, {}).pop(key, None)
        if duty is None:
            return
        took = now - duty.since - self.pauses.between(node, duty.since, now)
        if took > self.within:
            self.problems.append((duty.event, f"{node} {duty.detail} only {took / 1e6:.0f} ms later "
                                              f"(bound {self.within / 1e6:.0f} ms)", duty.clause))
        else:
            self.met += 1

    def _close(self, node: str, end: int) -> None:
        for duty in self.owed.pop(node, {}).values():
            waited = end - duty.since - self.pauses.between(node, duty.since, end)
            if waited >= self.within:
                self.problems.append((duty.event, f"{node} {duty.detail}: not done in {waited / 1e6:.0f} ms "
                                                  f"(bound {self.within / 1e6:.0f} ms)", duty.clause))

    def finish(self, end_ns: int) -> list[Problem]:
        for node in list(self.owed):
            self._close(node, end_ns)
        return self.problems
