"""A transparent wrapper around a node that reports what it sees and does to an `Observer`.

The probe is itself a sans-IO node, so it runs unchanged in the simulator and the live
runtime. It reports every received message, application command, returned action (send,
delivery, discard, note). A node that raises is crashed by the runtime, which reports the
failure (`harness.runtime`); the run driver passes it on to the checkers (``no-node-errors``).
"""

from __future__ import annotations

from typing import Any, Callable

from harness.checkers.base import (
    COMMAND, CONNECT, DELIVER, DISCARD, DISCONNECT, NOTE, RECV, SEND, START, SUBSCRIBE, UNSUBSCRIBE, Observer,
)
from harness.node import (
    Action, Connect, Deliver, Discard, Disconnect, Node, NodeContext, NodeFactory, Note, Send, SocketSpec, Subscribe,
    Unsubscribe,
)


class Probe:
    """Reports a node's inputs and outputs to an observer; a node that raises is the
    runtime's business (it crashes the node and reports a `NodeFailure`), so the probe lets the
    exception through untouched."""

    def __init__(self, inner: Node, observer: Observer, clock: Callable[[], int]) -> None:
        self.inner = inner
        self.protocol = inner.protocol
        self.role = inner.role
        self.name = inner.name
        self.observer = observer
        self.clock = clock
        observer.declare(self.name, inner.sockets())  # socket types: what a send's frames are (wire-conformance)

    def sockets(self) -> list[SocketSpec]:
        return self.inner.sockets()

    def _report(self, actions: list[Action]) -> list[Action]:
        if not actions:
            return actions
        now = self.clock()
        for a in actions:
            report = _REPORTS.get(a.__class__)
            if report is not None:
                report(self.observer.emit, now, self.name, a)
        return actions

    def start(self, now: int) -> list[Action]:
        self.observer.emit(self.clock(), self.name, START)
        return self._report(self.inner.start(now))

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.observer.emit(self.clock(), self.name, RECV, socket=socket, frames=frames)
        return self._report(self.inner.receive(socket, frames, now))

    def handle_timer(self, now: int) -> list[Action]:
        return self._report(self.inner.handle_timer(now))

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        self.observer.emit(self.clock(), self.name, COMMAND, data=request)
        return self._report(self.inner.command(request, now))

    def get_timer(self) -> int | None:
        return self.inner.get_timer()


def probed(factory: NodeFactory, observer: Observer, clock: Callable[[], int]) -> NodeFactory:
    """A factory whose nodes are wrapped in probes."""

    def build(ctx: NodeContext) -> Node:
        return Probe(factory(ctx), observer, clock)  # type: ignore[return-value]

    return build


# What the observer hears of each kind of action.
_REPORTS: dict[type, Callable[[Callable[..., None], int, str, Any], None]] = {
    Send: lambda emit, now, name, a: emit(now, name, SEND, socket=a.socket, frames=a.frames, msg_type=a.msg_type),
    Deliver: lambda emit, now, name, a: emit(now, name, DELIVER, msg_type=a.kind, data=a.data),
    Note: lambda emit, now, name, a: emit(now, name, NOTE, msg_type=a.kind, data=a.data),
    Discard: lambda emit, now, name, a: emit(now, name, DISCARD, socket=a.socket, frames=a.frames,
                                             data={"reason": a.reason, "clause": a.clause}),
    Subscribe: lambda emit, now, name, a: emit(now, name, SUBSCRIBE, socket=a.socket, data={"topic": a.topic}),
    Unsubscribe: lambda emit, now, name, a: emit(now, name, UNSUBSCRIBE, socket=a.socket, data={"topic": a.topic}),
    Connect: lambda emit, now, name, a: emit(now, name, CONNECT, socket=a.socket, data={"endpoint": a.endpoint}),
    Disconnect: lambda emit, now, name, a: emit(now, name, DISCONNECT, socket=a.socket, data={"endpoint": a.endpoint}),
}
