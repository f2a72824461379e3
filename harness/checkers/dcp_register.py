"""A DCP worker registers on its own (``dcp.worker.register``, E-DCP-12) and again when a broker
asks it to (``dcp.worker.reregister-on-reconnect``, E-DCP-13), judged from what the worker sends
and gets: its own probe's events, or an external worker's as the chaos proxy saw them.

The network plays no part: the rule reads only the worker's sends and the RECONNECTs it got,
which the broker sends only in answer to something the worker sent. On one connection the proxy
sees a worker's messages in the order it sent them, so an observed REGISTER that came first
is seen first.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    CRASH, PAUSE, RECV, RESTART, RESUME, SEND, STALL, START, Checker, Event, Pauses, Verdict,
)
from harness.checkers.dcp_external import kind_of
from harness.checkers.external import not_judged

NS_PER_MS = 1_000_000
GRACE_MS = 2000  # running time after its first message by which a worker has registered


class WorkerLife:
    """What one life of a worker has sent so far, and the RECONNECT it has not yet answered."""

    __slots__ = ("first", "registered", "messages", "told")

    def __init__(self, first: Event) -> None:
        self.first = first  # its first DCP message of the life
        self.registered = kind_of(first) == "REGISTER"
        self.messages = 1
        self.told: Event | None = None  # the first RECONNECT it got since its last REGISTER


REREGISTER = "dcp.worker.reregister-on-reconnect"


class Registers(Checker):
    """Each life of a worker (from its start or restart) registers without being asked, and
    again whenever it is asked:

    * it sends a REGISTER before a RECONNECT it gets after its first message (the broker's answer
      to a heartbeat of a worker it does not know), and within ``grace`` (default 2 s) of running
      time after its first message (``dcp.worker.register``: the worker MUST send the
      registration). A worker that first pings and registers only when told fails;
    * after each RECONNECT it gets, it sends a REGISTER within ``grace`` of running time
      (``dcp.worker.reregister-on-reconnect``, E-DCP-13: on either connection). A life that ends
      sooner, or a run that ends sooner, owes nothing.

    An external worker is judged from its sends as the chaos proxy saw them, and its RECONNECTs as
    the proxy handed them on (it took them in later); one the run does not observe, or of which no
    message was seen, is named as not judged."""

    name = "worker-registers"
    clause = "dcp.worker.register"
    kinds = frozenset({SEND, RECV, START, CRASH, RESTART, PAUSE, RESUME, STALL})
    roles = frozenset({"worker"})
    capture_note = ("a capture shows no process start or restart: which message was a worker life's first, and "
                    "whether the capture began before it, is not known")

    def __init__(self, external_workers: frozenset[str] = frozenset(), observed: bool = True,
                 grace_ms: int = GRACE_MS, **params: Any) -> None:
        super().__init__(**params)
        self.external, self.observed = external_workers, observed
        self.grace = int(grace_ms) * NS_PER_MS
        self.pauses = Pauses()
        self.lives: dict[str, WorkerLife] = {}  # worker -> its current life, once it sent something
        self.seen: set[str] = set()  # workers with a message seen
        self.problems: list[tuple[str, str, list[Event]]] = []  # (detail, clause, evidence)
        self.judged = 0
        self.reconnects = 0

    def on_event(self, ev: Event) -> None:
        node = ev.node
        if ev.kind in (START, CRASH, RESTART):
            life = self.lives.pop(node, None)
            if life is not None:
                self._overdue(life, node, ev.time_ns)
        self.pauses.on_event(ev)
        if ev.kind == SEND:
            self._sent(ev)
        elif ev.kind == RECV and kind_of(ev) == "RECONNECT":
            life = self.lives.get(node)
            if life is None:
                return  # (it sent nothing in this life: the RECONNECT answers nothing of it)
            self.reconnects += 1
            if not life.registered:
                self._unregistered(life, ev, f"{node} was told to register (RECONNECT at {ev.time_ns / 1e6:.1f} "
                                             f"ms) before it registered on its own")
            if life.told is None:
                life.told = ev

    def _sent(self, ev: Event) -> None:
        kind = kind_of(ev)
        if not kind:
            return  # (not DCP: wire-conformance judges it)
        node = ev.node
        self.seen.add(node)
        life = self.lives.get(node)
        if life is None:
            self.lives[node] = WorkerLife(ev)
            self.judged += 1
            return
        life.messages += 1
        self._overdue(life, node, ev.time_ns)
        if kind == "REGISTER":
            life.registered = True
            life.told = None
        elif not life.registered:
            running = self._running(node, life.first.time_ns, ev.time_ns)
            if running > self.grace:
                self._unregistered(life, ev, f"{node} sent {life.messages} messages over {running / NS_PER_MS:.0f} "
                                             f"ms of running time and no REGISTER")

    def _running(self, node: str, since: int, until: int) -> int:
        return until - since - self.pauses.between(node, since, until)

    def _overdue(self, life: WorkerLife, node: str, now: int) -> None:
        """A RECONNECT of the life still unanswered by a REGISTER after ``grace`` of running time."""
        told = life.told
        if told is None:
            return
        running = self._running(node, told.time_ns, now)
        if running > self.grace:
            self.problems.append((f"{node} sent no REGISTER in the {running / NS_PER_MS:.0f} ms of running time "
                                  f"after the RECONNECT it got at {told.time_ns / 1e6:.1f} ms", REREGISTER, [told]))
            life.told = None  # (one failure per RECONNECT left unanswered)

    def _unregistered(self, life: WorkerLife, ev: Event, why: str) -> None:
        """The life did not register on its own (one failure per life)."""
        first = life.first
        self.problems.append((f"{why} (its first message of that life: a {kind_of(first)} at "
                              f"{first.time_ns / 1e6:.1f} ms)", self.clause, [first, ev]))
        life.registered = True

    def finish(self, end_ns: int) -> list[Verdict]:
        for node, life in self.lives.items():
            self._overdue(life, node, end_ns)
        unseen = not_judged("their registrations (the run does not observe them)" if not self.observed
                            else "their registrations (no message of theirs seen)",
                            self.external if not self.observed else self.external - self.seen)
        if not self.problems:
            lives = "life" if self.judged == 1 else "lives"
            told = f"; {self.reconnects} RECONNECT(s) each answered with a REGISTER" if self.reconnects else ""
            return [self.ok(f"{self.judged} worker {lives}, each registered before anything told it to{told}"
                            f"{unseen}")]
        detail, clause, _ = self.problems[0]
        evidence = [e.describe() for _, _, events in self.problems for e in events][:6]
        return [self.fail(f"{len(self.problems)} registration problem(s); first: {detail}{unseen}", evidence,
                          clause=clause)]
