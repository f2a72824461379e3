"""Tiny sans-IO nodes used only by the live tests (and the standalone / benchmark scripts)."""

from __future__ import annotations

import gc
import time
from typing import Any

from harness.node import (
    NS_PER_MS, Action, BaseNode, Connect, Deliver, Disconnect, Discard, Note, Send, SocketSpec,
    SocketType, Subscribe, Unsubscribe,
)

ANY_PORT = "tcp://127.0.0.1:*"


def collect_for(seconds: float) -> None:
    """Full garbage collections of the process for ``seconds`` of this thread's CPU time (the
    harness's own collections, as a long test session has them)."""
    spin = time.thread_time() + seconds
    while time.thread_time() < spin:
        gc.collect()


class EchoServer(BaseNode):
    """ROUTER that sends every message straight back; counts boots in its durable store."""

    protocol = "test"
    role = "server"

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("srv", SocketType.ROUTER, bind=(self.config.get("bind", ANY_PORT),))]

    def start(self, now: int) -> list[Action]:
        boots = self.store.get("boots", 0) + 1
        self.store.put("boots", boots)
        self.seen = 0  # memory: lost on a crash
        return [Deliver("boot", {"boots": boots})]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if frames[-1] == b"boom":
            raise ValueError("asked to explode")
        if len(frames) != 2:
            return [Discard(socket, frames, "expected identity + body", "test.echo.shape")]
        self.seen += 1
        return [Send("srv", frames, "ECHO", {"seq": self.seen})]


class EchoClient(BaseNode):
    """DEALER that keeps ``window`` requests in flight until ``n`` replies came back."""

    protocol = "test"
    role = "client"

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("cli", SocketType.DEALER, connect=tuple(self.config.get("connect", ())),
                           identity=self.config.get("identity"))]

    def start(self, now: int) -> list[Action]:
        self.n = int(self.config.get("n", 10))
        self.sent = 0
        self.got = 0
        return [self._request() for _ in range(min(int(self.config.get("window", 1)), self.n))]

    def _request(self) -> Send:
        self.sent += 1
        return Send("cli", [b"%d" % self.sent], "REQ", {"seq": self.sent, "corr": str(self.sent)})

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.got += 1
        actions: list[Action] = [Deliver("reply", {"body": frames[-1], "corr": frames[-1].decode()})]
        if self.sent < self.n:
            actions.append(self._request())
        return actions

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        if "connect" in request:
            return [Connect("cli", request["connect"])]
        if "disconnect" in request:
            return [Disconnect("cli", request["disconnect"]), Deliver("disconnected", {})]
        if "send" in request:
            return [Send("cli", [request["send"]], "REQ")]
        return []


class Ticker(BaseNode):
    """Fires ``ticks`` timers ``period_ms`` apart, delivering each."""

    wake: int | None = None

    protocol = "test"
    role = "ticker"

    def start(self, now: int) -> list[Action]:
        self.period = int(self.config.get("period_ms", 20)) * NS_PER_MS
        self.left = int(self.config.get("ticks", 3))
        self.wake: int | None = now + self.period
        return []

    def get_timer(self) -> int | None:
        return self.wake

    def handle_timer(self, now: int) -> list[Action]:
        self.left -= 1
        self.wake = now + self.period if self.left > 0 else None
        return [Deliver("tick", {"now": now, "left": self.left})]

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        if request.get("cancel"):
            self.wake = None
            return [Note("cancelled", {})]
        if request.get("explode"):
            raise RuntimeError("command exploded")
        return [Deliver("command", dict(request))]


class Publisher(BaseNode):
    """PUB (or XPUB) that publishes on command; an XPUB delivers the subscriptions it sees."""

    protocol = "test"
    role = "publisher"

    def sockets(self) -> list[SocketSpec]:
        kind = SocketType.XPUB if self.config.get("xpub") else SocketType.PUB
        return [SocketSpec("pub", kind, bind=(self.config.get("bind", ANY_PORT),),
                           xpub_verbose=bool(self.config.get("verbose")),
                           welcome=self.config.get("welcome"))]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        frame = frames[0]
        return [Deliver("subscription", {"on": frame[:1] == b"\x01", "topic": frame[1:]})]

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        return [Send("pub", [request["topic"], request["body"]], "PUB", {"topic": request["topic"]})]


class Subscriber(BaseNode):
    """SUB that delivers what it receives; subscribes and unsubscribes on command."""

    protocol = "test"
    role = "subscriber"

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("sub", SocketType.SUB, connect=tuple(self.config["connect"]),
                           subscribe=tuple(self.config.get("topics", ())))]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        return [Deliver("message", {"topic": frames[0], "body": frames[-1]})]

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        if "subscribe" in request:
            return [Subscribe("sub", request["subscribe"])]
        return [Unsubscribe("sub", request["unsubscribe"])]
