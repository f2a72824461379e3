"""Virtual ZeroMQ sockets: the per-type semantics the protocols depend on (DESIGN rule 4).

A socket owns pipes, one per connection. A connecting socket's pipe exists from the moment it
connects and survives disconnects (messages queue in it, as libzmq's does); a binding socket's
pipe exists only while its connection is up. The runtime moves messages between pipes; this
module decides, per socket type, where a sent message goes (``outgoing``), what the node sees
of an arriving one (``incoming``), and which socket-internal messages a new or re-established
connection carries (subscriptions, the XPUB welcome).

Semantics follow libzmq 4.3:
- ROUTER prepends the peer's routing id (its identity, else 0x00 + a 4-byte counter that starts
  at a seeded value) and routes sends by the first frame; unknown ids are dropped silently. A
  second peer with an identity already in use is not routable (libzmq ignores it), unless the
  socket hands over (``SocketSpec.handover``, ZMQ_ROUTER_HANDOVER): then the newcomer takes it.
- DEALER round-robins over its pipes, skipping full ones.
- PUB/XPUB deliver to each pipe with a subscription that prefix-matches frame 0.
- XPUB passes new subscriptions to the node (duplicates too with ``xpub_verbose``) and an
  unsubscription when no pipe is subscribed to the topic any more, also when a pipe goes away.
  Other messages from XSUB peers go to the node as they are.
- SUB/XSUB keep a reference-counted subscription set: a subscribe is always sent upstream, an
  unsubscribe only when the count drops to zero; the set is re-sent on every new connection.
  SUB filters what it receives; XSUB does not (the publisher filters).
"""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from harness.node import SocketSpec, SocketType
from harness.sim.errors import SimulationError, SocketUsageError
from harness.sim.network import Link
from harness.sim.slots import NodeSlot

# What ``incoming`` returns instead of frames when the node must not see the message.
ABSORBED = "absorbed"  # consumed by the socket itself (a subscription at a PUB, a duplicate at XPUB)
FILTERED = "filtered"  # SUB: no subscription matches
ANONYMOUS = "duplicate-identity"  # ROUTER: the peer's identity is already taken

SUBSCRIBE = "zmq.subscribe"
UNSUBSCRIBE = "zmq.unsubscribe"
WELCOME = "zmq.welcome"

ControlMessage = tuple[list[bytes], str]  # frames, msg_type for the trace

_COMPATIBLE: dict[SocketType, frozenset[SocketType]] = {
    SocketType.PUB: frozenset({SocketType.SUB, SocketType.XSUB}),
    SocketType.XPUB: frozenset({SocketType.SUB, SocketType.XSUB}),
    SocketType.SUB: frozenset({SocketType.PUB, SocketType.XPUB}),
    SocketType.XSUB: frozenset({SocketType.PUB, SocketType.XPUB}),
    SocketType.ROUTER: frozenset({SocketType.DEALER, SocketType.ROUTER}),
    SocketType.DEALER: frozenset({SocketType.DEALER, SocketType.ROUTER}),
}


def compatible(a: SocketType, b: SocketType) -> bool:
    """Whether the ZMTP handshake between these two socket types succeeds."""
    return b in _COMPATIBLE[a]


class Message:
    """One sent message, shared by every copy of it in flight (PUB fan-out, duplicates)."""

    __slots__ = ("msg_id", "frames", "msg_type", "topic", "seq", "term", "index", "corr",
                 "size", "src", "packed", "row")

    def __init__(self, msg_id: int, frames: list[bytes], msg_type: str, topic: str | None,
                 seq: int | None, term: int | None, index: int | None, corr: str | None,
                 size: int, src: str) -> None:
        self.msg_id = msg_id
        self.frames = frames  # as on the wire (no ROUTER routing id); never mutated
        self.msg_type = msg_type
        self.topic = topic
        self.seq = seq
        self.term = term
        self.index = index
        self.corr = corr
        self.size = size
        self.src = src
        self.packed: bytes | None = None  # msgpack of ``frames`` for the trace, made once
        # The trace's MESSAGE_COLUMNS, shared by every row of this message.
        self.row = (msg_type, topic, seq, term, index, msg_id, corr, size, None, None, None)


class Session:
    """One established connection. In-flight messages carry it; a dead one means they are lost."""

    __slots__ = ("alive", "cause", "connecter", "binder")

    def __init__(self, connecter: Pipe, binder: Pipe) -> None:
        self.alive = True
        self.cause = ""
        self.connecter = connecter
        self.binder = binder


class Pipe:
    """One end of a connection, owned by a socket; holds the outbound direction's state.

    ``pending`` counts messages written into the pipe and not yet consumed by the peer node
    (queued + in flight + waiting in a paused peer): the high-water mark applies to it.
    """

    __slots__ = (
        "socket", "slot", "endpoint", "is_connecter", "direction", "session", "peer", "peer_name",
        "link", "queue", "pending", "inflight", "cap", "last", "held", "subs", "rid", "closed",
        "connecting", "ever_connected", "incompat_reported", "lingering",
    )

    def __init__(self, socket: SimSocket, endpoint: str, is_connecter: bool) -> None:
        self.socket = socket
        self.slot: NodeSlot = socket.slot
        self.endpoint = endpoint
        self.is_connecter = is_connecter
        self.direction = "to_binder" if is_connecter else "to_connecter"
        self.session: Session | None = None
        self.peer: Pipe | None = None
        self.peer_name = ""  # the peer node's name while connected
        self.link: Link | None = None
        self.queue: deque[Message] = deque()  # connecter side, while not connected
        self.pending = 0
        self.inflight = 0
        self.cap = socket.hwm  # sndhwm alone until connected; sndhwm + peer's rcvhwm after
        self.last = 0  # latest scheduled arrival: keeps FIFO under random latency
        self.held: list[list[object]] | None = None  # reorder: messages waiting behind the next
        self.subs: dict[bytes, None] = {}  # PUB/XPUB: the peer's subscriptions (ordered set)
        self.rid: bytes | None = None  # ROUTER: the peer's routing id
        self.closed = False
        self.connecting = False  # an attempt or handshake is scheduled
        self.ever_connected = False
        self.incompat_reported = False
        # ROUTER, binder side: messages of a dead connection its paused node has not read yet.
        # libzmq keeps such a pipe, and its routing id, until they are read.
        self.lingering = 0

    def label(self) -> str:
        """The peer for trace rows: its node name, or the endpoint while not connected."""
        return self.peer_name if self.session is not None else self.endpoint

    def full(self) -> bool:
        return bool(self.cap) and self.pending >= self.cap


def _hwm(value: int) -> int:
    return value if value > 0 else 0  # 0 or less: no limit, as in libzmq


def pipe_capacity(own: SocketSpec, peer: SocketSpec | None) -> int:
    if own.hwm <= 0 or (peer is not None and peer.hwm <= 0):
        return 0
    return own.hwm + (peer.hwm if peer is not None else 0)


class SimSocket:
    """Common state; the subclasses below add each type's semantics."""

    kind: ClassVar[SocketType]
    is_router: ClassVar[bool] = False

    def __init__(self, slot: NodeSlot, spec: SocketSpec, rid_seed: int) -> None:
        self.slot = slot
        self.spec = spec
        self.name = spec.name
        self.hwm = _hwm(spec.hwm)
        self.pipes: list[Pipe] = []
        self.bound: list[str] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"<{self.kind.value} {self.slot.name}.{self.name}>"

    # -- sending ------------------------------------------------------------------------
    def outgoing(self, frames: list[bytes]) -> tuple[list[bytes], list[Pipe], str | None]:
        """(wire frames, target pipes, drop cause when nothing can take the message)."""
        raise NotImplementedError

    def subscribe(self, topic: bytes) -> list[bytes] | None:
        raise SocketUsageError(f"{self}: Subscribe works on SUB and XSUB sockets only")

    def unsubscribe(self, topic: bytes) -> list[bytes] | None:
        raise SocketUsageError(f"{self}: Unsubscribe works on SUB and XSUB sockets only")

    # -- receiving ----------------------------------------------------------------------
    def incoming(self, pipe: Pipe, msg: Message) -> list[bytes] | str:
        """Frames for the node (a fresh list it may mutate), or why it does not see them."""
        return list(msg.frames)

    # -- connection life cycle --------------------------------------------------------
    def attach(self, pipe: Pipe) -> list[ControlMessage]:
        """A pipe came into being (connecter: at connect; binder: when a peer connected)."""
        self.pipes.append(pipe)
        return []

    def hiccup(self, pipe: Pipe) -> list[ControlMessage]:
        """A connecter pipe's connection was re-established."""
        return []

    def identify(self, pipe: Pipe, peer_identity: bytes | None) -> str | None:
        """Learn the peer's routing id (ROUTER only); returns a problem, if any."""
        return None

    def detach(self, pipe: Pipe) -> list[list[bytes]]:
        """A pipe went away; returns notifications for the node (XPUB unsubscriptions)."""
        if pipe in self.pipes:
            self.pipes.remove(pipe)
        return []


class RouterSocket(SimSocket):
    kind = SocketType.ROUTER
    is_router = True

    def __init__(self, slot: NodeSlot, spec: SocketSpec, rid_seed: int) -> None:
        super().__init__(slot, spec, rid_seed)
        self.routes: dict[bytes, Pipe] = {}
        self._next_rid = rid_seed & 0xFFFFFFFF  # libzmq starts its counter at a random value

    def outgoing(self, frames: list[bytes]) -> tuple[list[bytes], list[Pipe], str | None]:
        pipe = self.routes.get(frames[0])
        wire = frames[1:]
        if pipe is None or pipe.lingering:  # a lingering pipe's connection is gone
            return wire, [], "unroutable"
        return wire, [pipe], None

    def incoming(self, pipe: Pipe, msg: Message) -> list[bytes] | str:
        rid = pipe.rid
        if rid is None:
            return ANONYMOUS
        out = [rid]
        out.extend(msg.frames)
        return out

    def identify(self, pipe: Pipe, peer_identity: bytes | None) -> str | None:
        if pipe.rid is not None and self.routes.get(pipe.rid) is pipe:
            if not peer_identity or peer_identity == pipe.rid:
                return None  # a re-established connecter pipe keeps its routing id
            del self.routes[pipe.rid]
        rid = peer_identity or self._generated_rid()
        if rid in self.routes:
            if not self.spec.handover:
                pipe.rid = None
                return ANONYMOUS
            # ZMQ_ROUTER_HANDOVER: the old pipe keeps a fresh anonymous id, as libzmq's does
            # until it ends, and the newcomer is the one the identity routes to.
            old = self.routes[rid]
            old.rid = self._generated_rid()
            self.routes[old.rid] = old
        self.routes[rid] = pipe
        pipe.rid = rid
        return None

    def _generated_rid(self) -> bytes:
        """0x00 and the next value of the socket's 4-byte counter, as libzmq names an anonymous peer."""
        rid = b"\x00" + self._next_rid.to_bytes(4, "big")
        self._next_rid = (self._next_rid + 1) & 0xFFFFFFFF
        return rid

    def detach(self, pipe: Pipe) -> list[list[bytes]]:
        if pipe.rid is not None and self.routes.get(pipe.rid) is pipe:
            del self.routes[pipe.rid]
        return super().detach(pipe)


class DealerSocket(SimSocket):
    kind = SocketType.DEALER

    def __init__(self, slot: NodeSlot, spec: SocketSpec, rid_seed: int) -> None:
        super().__init__(slot, spec, rid_seed)
        self._rr = 0

    def outgoing(self, frames: list[bytes]) -> tuple[list[bytes], list[Pipe], str | None]:
        pipes = self.pipes
        n = len(pipes)
        if not n:
            return list(frames), [], "no-peer"
        start = self._rr
        for k in range(n):
            i = (start + k) % n
            pipe = pipes[i]
            if not pipe.cap or pipe.pending < pipe.cap:
                self._rr = i + 1
                return list(frames), [pipe], None
        return list(frames), [], "hwm"


def _matches(subs: dict[bytes, None] | dict[bytes, int], first: bytes) -> bool:
    for topic in subs:
        if first.startswith(topic):
            return True
    return False


class PubSocket(SimSocket):
    kind = SocketType.PUB

    def outgoing(self, frames: list[bytes]) -> tuple[list[bytes], list[Pipe], str | None]:
        first = frames[0]
        return list(frames), [p for p in self.pipes if p.subs and _matches(p.subs, first)], None

    def incoming(self, pipe: Pipe, msg: Message) -> list[bytes] | str:
        self._subscription(pipe, msg.frames)
        return ABSORBED  # a PUB never hands anything to its node

    def _subscription(self, pipe: Pipe, frames: list[bytes]) -> bool | None:
        """Apply a (un)subscription from ``pipe``. Returns whether the XPUB node should hear
        of it, or None if the message is not a subscription."""
        if len(frames) != 1 or not frames[0] or frames[0][0] > 1:
            return None
        topic = frames[0][1:]
        if frames[0][0] == 1:
            new = not any(topic in p.subs for p in self.pipes)
            pipe.subs[topic] = None
            return new or self.spec.xpub_verbose
        pipe.subs.pop(topic, None)
        return not any(topic in p.subs for p in self.pipes)


class XPubSocket(PubSocket):
    kind = SocketType.XPUB

    def incoming(self, pipe: Pipe, msg: Message) -> list[bytes] | str:
        notify = self._subscription(pipe, msg.frames)
        if notify is None:
            return list(msg.frames)  # a user message sent upstream by an XSUB
        return list(msg.frames) if notify else ABSORBED

    def attach(self, pipe: Pipe) -> list[ControlMessage]:
        super().attach(pipe)
        if self.spec.welcome is not None:
            return [([self.spec.welcome], WELCOME)]
        return []

    def detach(self, pipe: Pipe) -> list[list[bytes]]:
        super().detach(pipe)
        gone = [t for t in pipe.subs if not any(t in p.subs for p in self.pipes)]
        pipe.subs = {}
        return [[b"\x00" + t] for t in gone]


class XSubSocket(SimSocket):
    kind = SocketType.XSUB

    def __init__(self, slot: NodeSlot, spec: SocketSpec, rid_seed: int) -> None:
        super().__init__(slot, spec, rid_seed)
        self.subs: dict[bytes, int] = {}  # topic -> reference count, in subscription order
        for topic in spec.subscribe:
            self.subs[topic] = self.subs.get(topic, 0) + 1

    def outgoing(self, frames: list[bytes]) -> tuple[list[bytes], list[Pipe], str | None]:
        if len(frames) == 1 and frames[0] and frames[0][0] <= 1:
            topic = frames[0][1:]
            sent = self.subscribe(topic) if frames[0][0] == 1 else self.unsubscribe(topic)
            return list(frames), (list(self.pipes) if sent is not None else []), None
        return list(frames), list(self.pipes), None

    def subscribe(self, topic: bytes) -> list[bytes] | None:
        self.subs[topic] = self.subs.get(topic, 0) + 1
        return [b"\x01" + topic]  # always forwarded: the XPUB decides what is a duplicate

    def unsubscribe(self, topic: bytes) -> list[bytes] | None:
        count = self.subs.get(topic, 0)
        if count == 0:
            return None
        if count > 1:
            self.subs[topic] = count - 1
            return None
        del self.subs[topic]
        return [b"\x00" + topic]

    def _subscriptions(self) -> list[ControlMessage]:
        return [([b"\x01" + t], SUBSCRIBE) for t in self.subs]

    def attach(self, pipe: Pipe) -> list[ControlMessage]:
        super().attach(pipe)
        return self._subscriptions()

    def hiccup(self, pipe: Pipe) -> list[ControlMessage]:
        return self._subscriptions()


class SubSocket(XSubSocket):
    kind = SocketType.SUB

    def outgoing(self, frames: list[bytes]) -> tuple[list[bytes], list[Pipe], str | None]:
        raise SocketUsageError(f"{self}: a SUB socket cannot send (use Subscribe / Unsubscribe)")

    def incoming(self, pipe: Pipe, msg: Message) -> list[bytes] | str:
        if _matches(self.subs, msg.frames[0]):
            return list(msg.frames)
        return FILTERED


_TYPES: dict[SocketType, type[SimSocket]] = {
    SocketType.ROUTER: RouterSocket,
    SocketType.DEALER: DealerSocket,
    SocketType.PUB: PubSocket,
    SocketType.XPUB: XPubSocket,
    SocketType.SUB: SubSocket,
    SocketType.XSUB: XSubSocket,
}


def make_socket(slot: NodeSlot, spec: SocketSpec, rid_seed: int) -> SimSocket:
    try:
        cls = _TYPES[SocketType(spec.type)]
    except (KeyError, ValueError):
        raise SimulationError(f"node {slot.name}: socket {spec.name!r} has unsupported type {spec.type!r}") from None
    return cls(slot, spec, rid_seed)
