"""A transparent wrapper around a node that reports what it sees and does to an `Observer`.

The probe is itself a sans-IO node, so it runs unchanged in the simulator and the live
runtime. It reports every received message, application command, returned action (send,
delivery, discard, note) and every exception. A node that raises is treated like a process
that crashed: the exception is reported (the run goes on, the ``no-node-errors`` check fails)
and the node ignores all further input until it is restarted.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable

from harness.checkers.base import COMMAND, DELIVER, DISCARD, ERROR, NOTE, RECV, SEND, Observer
from harness.node import Action, Deliver, Discard, Node, NodeContext, NodeFactory, Note, Send, SocketSpec


class Probe:
    def __init__(self, inner: Node, observer: Observer, clock: Callable[[], int]) -> None:
        self.inner = inner
        self.protocol = inner.protocol
        self.role = inner.role
        self.name = inner.name
        self.observer = observer
        self.clock = clock
        self.dead = False

    def sockets(self) -> list[SocketSpec]:
        return self.inner.sockets()

    def _guard(self, what: str, call: Callable[[], list[Action]]) -> list[Action]:
        if self.dead:
            return []
        try:
            actions = call()
        except Exception as e:  # the node under test crashed on this input
            self.dead = True
            tb = traceback.extract_tb(e.__traceback__)
            where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
            self.observer.emit(self.clock(), self.name, ERROR,
                               data={"error": f"{type(e).__name__}: {e}", "during": what, "at": where})
            return []
        emit = self.observer.emit
        now = self.clock()
        for a in actions:
            cls = a.__class__
            if cls is Send:
                emit(now, self.name, SEND, socket=a.socket, frames=a.frames, msg_type=a.msg_type)
            elif cls is Deliver:
                emit(now, self.name, DELIVER, msg_type=a.kind, data=a.data)
            elif cls is Note:
                emit(now, self.name, NOTE, msg_type=a.kind, data=a.data)
            elif cls is Discard:
                emit(now, self.name, DISCARD, socket=a.socket, frames=a.frames,
                     data={"reason": a.reason, "clause": a.clause})
        return actions

    def start(self, now: int) -> list[Action]:
        return self._guard("start", lambda: self.inner.start(now))

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if not self.dead:
            self.observer.emit(self.clock(), self.name, RECV, socket=socket, frames=frames)
        return self._guard("receive", lambda: self.inner.receive(socket, frames, now))

    def handle_timer(self, now: int) -> list[Action]:
        return self._guard("timer", lambda: self.inner.handle_timer(now))

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        if not self.dead:
            self.observer.emit(self.clock(), self.name, COMMAND, data=request)
        return self._guard("command", lambda: self.inner.command(request, now))

    def get_timer(self) -> int | None:
        if self.dead:
            return None
        return self.inner.get_timer()


def probed(factory: NodeFactory, observer: Observer, clock: Callable[[], int]) -> NodeFactory:
    """A factory whose nodes are wrapped in probes."""

    def build(ctx: NodeContext) -> Node:
        return Probe(factory(ctx), observer, clock)  # type: ignore[return-value]

    return build
