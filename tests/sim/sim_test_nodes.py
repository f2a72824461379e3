"""Small sans-IO nodes for the simulator's tests and benchmark.

They import only ``harness.node`` and the standard library — no zmq, no simpy — which is the
point of the node contract: ``test_sim_sans_io`` checks that.
"""

from __future__ import annotations

from typing import Any

from harness.node import (
    NS_PER_MS,
    Action,
    BaseNode,
    Deliver,
    Discard,
    NodeContext,
    Note,
    Send,
    SocketSpec,
    SocketType,
)


class Scripted(BaseNode):
    """A node whose sockets come from ``config["sockets"]`` and whose behaviour is driven by
    commands. It logs everything it receives as (socket, frames, now).

    Commands: ``{"op": "send", "socket", "frames", "msg_type"?, "meta"?}``,
    ``{"op": "do", "actions": [...]}`` (raw actions), ``{"op": "timer", "at": ns}``.
    ``config["echo"]``: socket names whose input is sent straight back.
    """

    role = "scripted"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.log: list[tuple[str, list[bytes], int]] = []
        self.timer_calls: list[int] = []
        self.commands: list[tuple[dict[str, Any], int]] = []
        self.started_at: int | None = None
        self.wake: int | None = None  # what get_timer() answers; {"op": "timer"} sets it

    def sockets(self) -> list[SocketSpec]:
        return list(self.config.get("sockets", []))

    def start(self, now: int) -> list[Action]:
        self.started_at = now
        return list(self.config.get("on_start", []))

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.log.append((socket, list(frames), now))
        if socket in self.config.get("echo", ()):
            return [Send(socket, frames, "echo")]
        return []

    def handle_timer(self, now: int) -> list[Action]:
        self.timer_calls.append(now)
        self.wake = None
        return []

    def get_timer(self) -> int | None:
        return self.wake

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        self.commands.append((request, now))
        op = request["op"]
        if op == "send":
            return [Send(request["socket"], list(request["frames"]), request.get("msg_type", ""),
                         request.get("meta"))]
        if op == "do":
            return list(request["actions"])
        if op == "timer":
            self.wake = request["at"]
            return []
        return []

    def frames_on(self, socket: str) -> list[list[bytes]]:
        return [frames for s, frames, _ in self.log if s == socket]


class EchoServer(BaseNode):
    """ROUTER echo: sends every request back to its sender. Counts requests in memory and in
    the durable store, so a test can tell which survives a crash."""

    role = "echo"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.served = 0
        self.endpoint = self.config.get("endpoint", "tcp://server:5555")

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("router", SocketType.ROUTER, bind=(self.endpoint,),
                           hwm=self.config.get("hwm", 1000))]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.served += 1
        if self.config.get("durable", True):
            self.store.put("served", self.store.get("served", 0) + 1)
        if len(frames) < 2:
            return [Discard(socket, frames, "no payload", "test.echo.payload")]
        return [Send(socket, frames, "reply", {"seq": _seq(frames[-1])})]


class PingClient(BaseNode):
    """DEALER client: keeps ``window`` requests outstanding against ``endpoints`` until it has
    sent ``count`` of them; each reply is delivered to the application. Think time between
    replies and requests is drawn from the node's rng, so the seed changes the schedule."""

    role = "client"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.count = self.config.get("count", 10)
        self.window = self.config.get("window", 1)
        self.think_ns = self.config.get("think_ns", 0)
        self.deliver = self.config.get("deliver", True)
        self.sent = 0
        self.replies: list[int] = []
        self._due = 0  # requests waiting for the think timer
        self._wake: int | None = None

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("dealer", SocketType.DEALER, connect=tuple(self.config["endpoints"]),
                           identity=self.config.get("identity"), hwm=self.config.get("hwm", 1000))]

    def start(self, now: int) -> list[Action]:
        return self._send(min(self.window, self.count), now)

    def _send(self, n: int, now: int) -> list[Action]:
        actions: list[Action] = []
        for _ in range(n):
            if self.sent >= self.count:
                break
            seq = self.sent
            self.sent += 1
            actions.append(Send("dealer", [b"", seq.to_bytes(8, "big")], "request",
                                {"seq": seq, "corr": f"{self.name}/{seq}"}))
        return actions

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        seq = _seq(frames[-1])
        self.replies.append(seq)
        actions: list[Action] = []
        if self.deliver:
            actions.append(Deliver("reply", {"seq": seq, "corr": f"{self.name}/{seq}"}))
        if self.think_ns:
            self._due += 1
            self._wake = now + self.rng.randrange(self.think_ns)
        else:
            actions.extend(self._send(1, now))
        return actions

    def handle_timer(self, now: int) -> list[Action]:
        due, self._due = self._due, 0
        self._wake = None
        return self._send(due, now)

    def get_timer(self) -> int | None:
        return self._wake


class Ticker(BaseNode):
    """PUB/XPUB publisher: every ``period_ns`` publishes one message per topic in ``topics``
    (frame 0 = topic + b":" + seq). Logs what its socket hands it (XPUB notifications)."""

    wake: int | None = None

    role = "publisher"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.period = self.config.get("period_ns", 10 * NS_PER_MS)
        self.topics: list[bytes] = list(self.config.get("topics", [b"a"]))
        self.limit = self.config.get("limit", 1_000_000)
        self.seq = 0
        self.log: list[list[bytes]] = []

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("pub", SocketType(self.config.get("type", "PUB")),
                           bind=tuple(self.config.get("bind", ())),
                           connect=tuple(self.config.get("connect", ())),
                           hwm=self.config.get("hwm", 1000),
                           xpub_verbose=self.config.get("verbose", False),
                           welcome=self.config.get("welcome"))]

    def start(self, now: int) -> list[Action]:
        self.wake = now + self.period
        return []

    def get_timer(self) -> int | None:
        return self.wake

    def handle_timer(self, now: int) -> list[Action]:
        actions: list[Action] = []
        if self.seq < self.limit:
            for topic in self.topics:
                actions.append(Send("pub", [topic + b":" + str(self.seq).encode(), b"payload"],
                                    "tick", {"topic": topic, "seq": self.seq}))
            self.seq += 1
        self.wake = now + self.period
        return actions

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.log.append(frames)
        return [Note("subscription", {"frame": frames[0]})]


class Subscriber(BaseNode):
    """SUB: subscribes to ``topics`` up front; logs frame 0 of what it receives."""

    role = "subscriber"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.got: list[bytes] = []

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec("sub", SocketType.SUB, connect=tuple(self.config.get("connect", ())),
                           bind=tuple(self.config.get("bind", ())),
                           subscribe=tuple(self.config.get("topics", [b""])),
                           hwm=self.config.get("hwm", 1000))]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        self.got.append(frames[0])
        return [Deliver("tick", {"frame": frames[0]})]


class Proxy(BaseNode):
    """XSUB (upstream, connects to publishers) -> XPUB (downstream, binds for subscribers):
    data flows down, subscriptions flow up — zmq_proxy in sans-IO form."""

    role = "proxy"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.up_log: list[list[bytes]] = []

    def sockets(self) -> list[SocketSpec]:
        return [
            SocketSpec("up", SocketType.XSUB, connect=tuple(self.config["upstream"])),
            SocketSpec("down", SocketType.XPUB, bind=(self.config["downstream"],),
                       xpub_verbose=self.config.get("verbose", False)),
        ]

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if socket == "up":
            return [Send("down", frames, "forward")]
        self.up_log.append(frames)
        return [Send("up", frames, "subscription")]


def _seq(frame: bytes) -> int:
    return int.from_bytes(frame[-8:], "big") if frame else -1
