"""A DCP worker registers on its own (``dcp.worker.register``, E-DCP-12), judged from what the
worker sends: its own probe's sends, or an external worker's as the chaos proxy saw them.

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
    """What one life of a worker has sent so far."""

    __slots__ = ("first", "registered", "messages")

    def __init__(self, first: Event) -> None:
        self.first = first  # its first DCP message of the life
        self.registered = kind_of(first) == "REGISTER"
        self.messages = 1


class Registers(Checker):
    """Each life of a worker (from its start or restart) registers without being asked: it sends
    a REGISTER before a RECONNECT it gets after its first message (the broker's answer to a
    heartbeat of a worker it does not know), and within ``grace`` (default 2 s) of running
    time after its first message (``dcp.worker.register``: the worker MUST send the
    registration; a RECONNECT is how a broker that lost it asks again, E-DCP-13). A worker that
    first pings and registers only when told fails. An external worker is judged from its sends
    as the chaos proxy sees them; one the run does not observe, or of which no message was seen,
    is named as not judged."""

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
        self.bad: list[tuple[Event, str, str]] = []
        self.judged = 0

    def on_event(self, ev: Event) -> None:
        node = ev.node
        if ev.kind in (START, CRASH, RESTART):
            self.lives.pop(node, None)
        self.pauses.on_event(ev)
        if ev.kind == SEND:
            self._sent(ev)
        elif ev.kind == RECV and kind_of(ev) == "RECONNECT":
            life = self.lives.get(node)
            if life is not None and not life.registered:
                self._fail(life, ev, f"{node} was told to register (RECONNECT at {ev.time_ns / 1e6:.1f} ms) "
                                     f"before it registered on its own")

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
        if kind == "REGISTER":
            life.registered = True
        elif not life.registered:
            running = ev.time_ns - life.first.time_ns - self.pauses.between(node, life.first.time_ns, ev.time_ns)
            if running > self.grace:
                self._fail(life, ev, f"{node} sent {life.messages} messages over {running / NS_PER_MS:.0f} ms of "
                                     f"running time and no REGISTER")

    def _fail(self, life: WorkerLife, ev: Event, why: str) -> None:
        first = life.first
        self.bad.append((first, f"{why} (its first message of that life: a {kind_of(first)} at "
                                f"{first.time_ns / 1e6:.1f} ms)", self.clause))
        self.bad.append((ev, why, self.clause))
        life.registered = True  # (one failure per life)

    def finish(self, end_ns: int) -> list[Verdict]:
        unseen = not_judged("their registrations (the run does not observe them)" if not self.observed
                            else "their registrations (no message of theirs seen)",
                            self.external if not self.observed else self.external - self.seen)
        if not self.bad:
            lives = "life" if self.judged == 1 else "lives"
            return [self.ok(f"{self.judged} worker {lives}, each registered before anything told it to{unseen}")]
        verdict = self.first_problem(self.bad[::2], "worker life(s) that did not register on their own")
        verdict.evidence = [e.describe() for e, _, _ in self.bad[:6]]
        verdict.detail += unseen
        return [verdict]
