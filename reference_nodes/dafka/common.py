"""What the Dafka reference nodes share: config, the codec, tower discovery, the peer mesh, the
timer discipline and the FETCH pacing (specs/dafka-46.md with docs/errata.md).

Every producer, store and consumer (`DafkaNode`) has the four sockets of the Interconnection
Model:

=============  =====  ============================================================================
socket         type   use
=============  =====  ============================================================================
``tower_pub``  PUB    connected to every tower's XSUB (``towers[i][0]``): the node's BEACON
``tower_sub``  SUB    connected to every tower's XPUB (``towers[i][1]``), subscribed to ``B``
                      (TOWER-BEACON) and ``W`` (TOWER-WELCOME)
``xpub``       XPUB   bound at ``bind``: every Dafka command the node sends; its subscription
                      notifications (``01``/``00`` + prefix) reach the node (verbose)
``peer_sub``   SUB    connected to the XPUB of every peer the node discovers; the role's
                      subscriptions (`peer_subscriptions`)
=============  =====  ============================================================================

Discovery (E-DAFKA-13): the node sends ``BEACON ["B", address, host, port]`` on ``tower_pub``
at start, on every TOWER-WELCOME (a tower is there) and every ``beacon_ms``. A TOWER-BEACON from
another node whose endpoint is new makes the node connect ``peer_sub`` to it (Note
``peer-discovered``); a peer not heard of for ``peer_expiry_ms`` is disconnected (Note
``peer-expired``, the MAY of ``dafka.interconnect.disconnect-unresponsive``) and connected again
at its next beacon. Peers are keyed by endpoint, as zeromq/dafka does.

Addresses (E-DAFKA-12): 32 uppercase hexadecimal digits of a UUID drawn from ``ctx.rng``, or
``config["address"]``.

Trace and input: every ``Send`` names its message (``msg_type``) and carries ``meta``
``{"topic": <dafka topic or None>, "seq": <offset or None>}``, plus ``"partition"`` for the
messages about one partition. Input that does not decode is dropped with a ``Discard`` naming
the ``DecodeError``'s clause (``dafka.wire.signature``, ``dafka.wire.version``, ...); a message
that decodes but that the role never subscribes to is discarded with
``dafka.subscription.register``; one meant for another node or topic that a prefix subscription
let through (E-DAFKA-20) is ignored without a trace row.

Timers: a node keeps named deadlines (``deadlines`` plus a role's ``extra_deadline``) and
answers ``get_timer()`` with the earliest; the runtime asks after every input (harness.node).

Config shared by producer, store and consumer:

- ``towers``: list of ``[xsub endpoint, xpub endpoint]`` pairs, default
  ``[["tcp://127.0.0.1:5556", "tcp://127.0.0.1:5557"]]`` (zeromq/dafka's tower ports);
- ``bind``: the XPUB endpoint ``tcp://host:port``; default ``tcp://127.0.0.1:<port>`` with a
  port drawn from ``ctx.rng`` (scenarios should set it: two nodes cannot bind one endpoint);
- ``advertise``: the endpoint announced in beacons (default ``bind``; a ``*`` or ``0.0.0.0`` host
  is announced as ``127.0.0.1``);
- ``beacon_ms`` (1000), ``peer_expiry_ms`` (4000; 0 never expires peers), ``dialect``
  (``"strict"`` | ``"dafka:zproto"``), ``address`` (optional fixed node address).
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from typing import Any, Iterable

from harness.node import (
    Action, BaseNode, Connect, Deliver, Discard, Disconnect, NodeContext, Note, Send,
    SocketSpec, SocketType,
)
from harness.protocols import DecodeError, EncodeError
from harness.protocols.codec import Message
from harness.protocols.dafka import FROM_TOWER, PEER, Subscription, parse_subscription, subscription
from harness.protocols.table import fields_of
from reference_nodes import config
# A record's content may carry the correlation id of the request that produced it; the
# consumer's delivery names it (re-exported for the Dafka nodes and package).
from reference_nodes.correlation import CORR_TAG, corr_of, tagged_content  # noqa: F401

PROTOCOL = "dafka"
DIALECTS = ("strict", "dafka:zproto")
ms_to_ns = functools.partial(config.ms_to_ns, PROTOCOL)

DEFAULT_TOWER = ("tcp://127.0.0.1:5556", "tcp://127.0.0.1:5557")  # (XSUB, XPUB), zeromq/dafka's
DEFAULT_BEACON_MS = 1000  # E-DAFKA-14
DEFAULT_HEAD_MS = 1000  # E-DAFKA-14
DEFAULT_PEER_EXPIRY_MS = 4000  # E-DAFKA-14
DEFAULT_FETCH_RETRY_MS = 500  # not in the document: how long a FETCH may go unanswered
MAX_COUNT = 0xFFFF_FFFF  # FETCH count is number-4

TOWER_PUB = "tower_pub"
TOWER_SUB = "tower_sub"
XPUB = "xpub"
PEER_SUB = "peer_sub"

# Clause of a message that decodes but that this role never expects on that socket.
UNEXPECTED_CLAUSE = "dafka.subscription.register"
GRAMMAR_CLAUSE = "dafka.wire.grammar"

_TCP = re.compile(r"^tcp://(?P<host>[^/\s]+):(?P<port>[0-9]{1,5})$")


# ---- plain helpers ---------------------------------------------------------------------------


def new_address(rng: Any) -> str:
    """A node address: a 128-bit UUID from the node's rng as 32 uppercase hex digits
    (E-DAFKA-12, zeromq/dafka's ``zuuid_str``)."""
    return f"{rng.getrandbits(128):032X}"


def raw(text: str) -> bytes:
    """The bytes of a codec string (any octets survive as surrogate escapes, E-DAFKA-10)."""
    return text.encode("utf-8", "surrogateescape")


def unraw(b: bytes) -> str:
    return bytes(b).decode("utf-8", "surrogateescape")


def topic_name(value: Any, what: str = "a dafka topic") -> str:
    """A topic as the codec holds it: str, or bytes kept by surrogateescape."""
    if isinstance(value, (bytes, bytearray)):
        value = unraw(bytes(value))
    if not isinstance(value, str):
        raise ValueError(f"{what} must be str or bytes, not {type(value).__name__}")
    if len(raw(value)) > 255:
        raise ValueError(f"{what} is longer than 255 octets (E-DAFKA-11): {value[:40]!r}...")
    return value


def as_content(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ValueError(f"a record's content must be bytes or str, not {type(value).__name__}")


def positive_ms(value: Any, key: str) -> int:
    ns = ms_to_ns(value, key)
    if ns <= 0:
        raise ValueError(f"dafka config {key!r} must be positive, got {value!r}")
    return ns


def endpoints(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"dafka config {key!r} must be an endpoint or a list of them, got {value!r}")
    return tuple(value)


def towers_of(value: Any) -> tuple[tuple[str, str], ...]:
    """``towers``: a list of (XSUB endpoint, XPUB endpoint) pairs; one pair alone is accepted."""
    if (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        value = [value]
    ok = isinstance(value, (list, tuple)) and value and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(e, str) and e for e in p) for p in value)
    if not ok:
        raise ValueError("dafka config 'towers' must be a non-empty list of [xsub endpoint, xpub endpoint]"
                         f" pairs, got {value!r}")
    return tuple((p[0], p[1]) for p in value)


def split_tcp(endpoint: str, key: str) -> tuple[str, int]:
    m = _TCP.match(endpoint)
    if not m or int(m.group("port")) > 65535:
        raise ValueError(f"dafka config {key!r} must be tcp://host:port (the beacon carries host and"
                         f" port, E-DAFKA-13), got {endpoint!r}")
    return m.group("host"), int(m.group("port"))


def set_of_topics(values: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for v in values:
        t = topic_name(v)
        if t not in out:
            out.append(t)
    return out


# ---- sets of offsets ---------------------------------------------------------------------------


class Runs:
    """A set of offsets kept as sorted, disjoint, non-adjacent runs ``[start, end]``: what a
    store holds of a partition, what a consumer has buffered. Adding, membership and the
    missing range are O(log n + runs), whatever the number of offsets."""

    __slots__ = ("starts", "ends", "count")

    def __init__(self, offsets: Iterable[int] = ()) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.count = 0
        for o in sorted(offsets):
            self.add(o)

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def _run(self, o: int) -> int:
        """Index of the run holding ``o``, or -1."""
        i = bisect_right(self.starts, o) - 1
        return i if i >= 0 and o <= self.ends[i] else -1

    def __contains__(self, o: int) -> bool:
        return self._run(o) >= 0

    def add(self, o: int) -> bool:
        """Add an offset; False if it was already there."""
        starts, ends = self.starts, self.ends
        i = bisect_right(starts, o) - 1
        if i >= 0 and o <= ends[i]:
            return False
        left = i >= 0 and ends[i] == o - 1
        right = i + 1 < len(starts) and starts[i + 1] == o + 1
        if left and right:
            ends[i] = ends[i + 1]
            del starts[i + 1], ends[i + 1]
        elif left:
            ends[i] = o
        elif right:
            starts[i + 1] = o
        else:
            starts.insert(i + 1, o)
            ends.insert(i + 1, o)
        self.count += 1
        return True

    def discard_below(self, n: int) -> None:
        """Forget every offset lower than ``n``."""
        starts, ends = self.starts, self.ends
        while starts and ends[0] < n:
            self.count -= ends[0] - starts[0] + 1
            del starts[0], ends[0]
        if starts and starts[0] < n:
            self.count -= n - starts[0]
            starts[0] = n

    def prefix_end(self) -> int:
        """The highest n such that every offset 0..n is held, else -1."""
        return self.ends[0] if self.starts and self.starts[0] == 0 else -1

    def lowest_run_end(self) -> int:
        """The end of the run that holds the lowest offset, else -1."""
        return self.ends[0] if self.starts else -1

    def missing(self, first: int, upto: int) -> tuple[int, int]:
        """The lowest and the highest offset in ``first..upto`` not held (first > last: none)."""
        i = self._run(first)
        if i >= 0:
            first = self.ends[i] + 1
        j = self._run(upto)
        last = self.starts[j] - 1 if j >= 0 else upto
        return first, last

    def within(self, lo: int, hi: int) -> list[int]:
        """The offsets held in ``lo..hi-1``, ascending."""
        out: list[int] = []
        if hi <= lo:
            return out
        i = max(bisect_right(self.starts, lo) - 1, 0)
        for k in range(i, len(self.starts)):
            s, e = self.starts[k], self.ends[k]
            if s >= hi:
                break
            out.extend(range(max(s, lo), min(e + 1, hi)))
        return out


# ---- FETCH pacing ------------------------------------------------------------------------------


class FetchState:
    """When a partition's missing records were last asked for (consumer and store).

    A gap is asked for at once; the same records again only after ``retry_ns`` without them
    (FETCHes and DIRECT-RECORDs can be lost, and nobody may hold them yet); records found
    missing beyond an outstanding FETCH are asked for at once, alone.
    """

    __slots__ = ("fetch_at", "fetch_upto")

    def __init__(self) -> None:
        self.fetch_at: int | None = None  # when the oldest outstanding FETCH went out
        self.fetch_upto = -1  # the highest offset an outstanding FETCH asked for

    def plan(self, held: Runs, first: int, last: int, now: int, retry_ns: int) -> tuple[int, int] | None:
        """(sequence, count) to FETCH, or None. ``first..last`` is the range of missing offsets
        (``held.missing``): its ends are missing, offsets between them may be held."""
        if first > last:
            self.fetch_at = None
            self.fetch_upto = -1
            return None
        if self.fetch_at is None or self.fetch_upto < first or now >= self.fetch_at + retry_ns:
            self.fetch_at = now
            seq = first
        elif last > self.fetch_upto:
            seq, _ = held.missing(self.fetch_upto + 1, last)
        else:
            return None
        count = min(last - seq + 1, MAX_COUNT)  # a peer may claim an absurd head
        self.fetch_upto = seq + count - 1
        return seq, count

    def deadline(self, retry_ns: int) -> int | None:
        return None if self.fetch_at is None else self.fetch_at + retry_ns


# ---- the node base -------------------------------------------------------------------------------


class Peer:
    __slots__ = ("sender", "last_seen")

    def __init__(self, sender: str, now: int) -> None:
        self.sender = sender
        self.last_seen = now


class DafkaNode(BaseNode):
    """Base of producer, store and consumer: sockets, discovery, codec, timers."""

    protocol = PROTOCOL
    xpub_verbose = True  # every (re)subscription is news: hellos and GET-HEADS follow them

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        cfg = self.config
        self.dialect, self.codec = config.dialect_codec(PROTOCOL, cfg, DIALECTS)
        self._fields = {m.name: frozenset(fields_of(m)) for m in self.codec.table.messages}
        self.towers = towers_of(cfg.get("towers", [list(DEFAULT_TOWER)]))
        bind = cfg.get("bind")
        if bind is None:
            bind = f"tcp://127.0.0.1:{20000 + self.rng.randrange(40000)}"
        if not isinstance(bind, str):
            raise ValueError(f"dafka config 'bind' must be one tcp://host:port endpoint, got {bind!r}")
        split_tcp(bind, "bind")
        self.bind = bind
        advertise = cfg.get("advertise", bind)
        if not isinstance(advertise, str):
            raise ValueError(f"dafka config 'advertise' must be an endpoint string, got {advertise!r}")
        host, port = split_tcp(advertise, "advertise")
        if host in ("*", "0.0.0.0"):
            host = "127.0.0.1"
        self.host, self.port = host, port
        self.endpoint = f"tcp://{host}:{port}"
        self.beacon_ns = positive_ms(cfg.get("beacon_ms", DEFAULT_BEACON_MS), "beacon_ms")
        self.expiry_ns = ms_to_ns(cfg.get("peer_expiry_ms", DEFAULT_PEER_EXPIRY_MS), "peer_expiry_ms")
        self.address = self.make_address()
        if not isinstance(self.address, str) or not self.address or len(raw(self.address)) > 255:
            raise ValueError(f"dafka config 'address' must be a non-empty string of at most 255 octets,"
                             f" got {self.address!r}")
        self.peers: dict[str, Peer] = {}  # endpoint -> peer, discovery order
        self.deadlines: dict[str, int | None] = {"beacon": None, "expiry": None}
        self.tower_welcomes = 0

    def make_address(self) -> str:
        a = self.config.get("address")
        return a if a is not None else new_address(self.rng)

    # ---- what a role declares ----------------------------------------------------------------

    def peer_subscriptions(self) -> list[bytes]:
        """The prefixes ``peer_sub`` starts with."""
        return []

    def sockets(self) -> list[SocketSpec]:
        return [
            SocketSpec(TOWER_PUB, SocketType.PUB, connect=tuple(x for x, _ in self.towers)),
            SocketSpec(TOWER_SUB, SocketType.SUB, connect=tuple(p for _, p in self.towers),
                       subscribe=(subscription("TOWER-BEACON"), subscription("TOWER-WELCOME"))),
            SocketSpec(XPUB, SocketType.XPUB, bind=(self.bind,), xpub_verbose=self.xpub_verbose),
            SocketSpec(PEER_SUB, SocketType.SUB, subscribe=tuple(self.peer_subscriptions())),
        ]

    # ---- the contract --------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        out: list[Action] = [self.beacon()]
        self.deadlines["beacon"] = now + self.beacon_ns
        out.extend(self.on_start(now))
        return out

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        out: list[Action] = []
        if socket == PEER_SUB:
            try:
                msg = self.codec.decode(frames, channel=PEER)
            except DecodeError as e:
                out.append(self.malformed(socket, frames, e))
            else:
                try:
                    out.extend(self.on_message(msg, frames, now))
                except EncodeError as e:
                    # The answer cannot be encoded (in zproto an address with a 0x00 octet cannot
                    # be a topic): the request is dropped, the node keeps running.
                    out.append(Discard(socket, list(frames), f"cannot answer {msg.name}: {e}", GRAMMAR_CLAUSE))
        elif socket == XPUB:
            sub = None
            if len(frames) != 1:
                out.append(Discard(socket, list(frames), f"XPUB: a {len(frames)}-frame message, not a"
                                   " subscription notification", UNEXPECTED_CLAUSE))
            else:
                try:
                    sub = parse_subscription(frames[0])
                except DecodeError as e:
                    out.append(self.malformed(socket, frames, e))
            if sub is not None:
                out.extend(self.on_subscription(sub, now))
        elif socket == TOWER_SUB:
            try:
                msg = self.codec.decode(frames, channel=FROM_TOWER)
            except DecodeError as e:
                out.append(self.malformed(socket, frames, e))
            else:
                out.extend(self._on_tower(msg, frames, now))
        else:
            out.append(Discard(socket, list(frames), f"nothing is expected on socket {socket!r}",
                               UNEXPECTED_CLAUSE))
        return out

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        due = self.deadlines.get("beacon")
        if due is not None and now >= due:
            out.append(self.beacon())
            self.deadlines["beacon"] = now + self.beacon_ns
        due = self.deadlines.get("expiry")
        if due is not None and now >= due:
            self._expire(now, out)
        out.extend(self.on_timer(now))
        return out

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op == "status":
            return [self._deliver_status(request.get("corr"))]
        out = self.on_command(op, request, now)
        return out

    # ---- role hooks ------------------------------------------------------------------------------

    def on_start(self, now: int) -> list[Action]:
        return []

    def on_message(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        return [self.unexpected(frames, msg)]

    def on_subscription(self, sub: Subscription, now: int) -> list[Action]:
        return []

    def on_timer(self, now: int) -> list[Action]:
        return []

    def on_command(self, op: Any, request: dict[str, Any], now: int) -> list[Action]:
        raise ValueError(f"dafka {self.role}: unknown command {op!r}")

    def status(self) -> dict[str, Any]:
        return {"address": self.address, "endpoint": self.endpoint,
                "peers": {e: p.sender for e, p in self.peers.items()}}

    def _deliver_status(self, corr: Any = None) -> Action:
        status = self.status()
        if corr is not None:  # the answer names the request, for the trace's pairing
            status["corr"] = corr
        return Deliver(f"{self.role}-status", status)

    # ---- discovery -------------------------------------------------------------------------------

    def beacon(self) -> Send:
        frames = self.codec.encode("BEACON", {"sender": self.address, "host": self.host, "port": self.port})
        return Send(TOWER_PUB, frames, "BEACON", {"topic": None, "seq": None})

    def _on_tower(self, msg: Message, frames: list[bytes], now: int) -> list[Action]:
        if msg.name == "TOWER-WELCOME":
            self.tower_welcomes += 1
            out: list[Action] = [Note("tower-welcome", {"count": self.tower_welcomes})]
            out.append(self.beacon())  # the tower is there: announce ourselves at once
            return out
        if msg.name != "TOWER-BEACON":
            return [self.unexpected(frames, msg, TOWER_SUB)]
        sender, endpoint = msg["sender"], msg["endpoint"]
        if sender == self.address or endpoint == self.endpoint:
            return []  # our own beacon, forwarded back to us
        out = []
        peer = self.peers.get(endpoint)
        if peer is None:
            self.peers[endpoint] = Peer(sender, now)
            out.append(Connect(PEER_SUB, endpoint))
            out.append(Note("peer-discovered", {"peer": sender, "endpoint": endpoint}))
        else:
            if peer.sender != sender:
                out.append(Note("peer-changed", {"peer": sender, "was": peer.sender, "endpoint": endpoint}))
                peer.sender = sender
            peer.last_seen = now
            # keep discovery order == least recently heard first, for expiry
            del self.peers[endpoint]
            self.peers[endpoint] = peer
        if self.expiry_ns and self.deadlines.get("expiry") is None:
            self.deadlines["expiry"] = now + self.expiry_ns
        return out

    def _expire(self, now: int, out: list[Action]) -> None:
        self.deadlines["expiry"] = None
        for endpoint, peer in list(self.peers.items()):
            if now - peer.last_seen >= self.expiry_ns:
                del self.peers[endpoint]
                out.append(Disconnect(PEER_SUB, endpoint))
                out.append(Note("peer-expired", {"peer": peer.sender, "endpoint": endpoint}))
            else:
                self.deadlines["expiry"] = peer.last_seen + self.expiry_ns
                break  # the rest were heard from later

    # ---- messages -----------------------------------------------------------------------------

    def encode(self, name: str, fields: dict[str, Any]) -> list[bytes]:
        """Encode, leaving out fields the dialect does not carry (zproto's ACK address)."""
        allowed = self._fields[name]
        return self.codec.encode(name, {k: v for k, v in fields.items() if k in allowed})

    def send(self, name: str, fields: dict[str, Any], topic: str | None = None, seq: int | None = None,
             partition: str | None = None) -> Send:
        """A Dafka command on the XPUB; ``topic``/``seq``/``partition`` describe it for the trace."""
        meta: dict[str, Any] = {"topic": topic, "seq": seq}
        if partition is not None:
            meta["partition"] = partition
        return Send(XPUB, self.encode(name, fields), name, meta)

    def malformed(self, socket: str, frames: list[bytes], err: DecodeError) -> Discard:
        """Malformed input is dropped and recorded, nothing is sent (dafka.wire.*-discard)."""
        return Discard(socket, list(frames), reason=str(err), clause=err.clause)

    def unexpected(self, frames: list[bytes], msg: Message, socket: str = PEER_SUB) -> Discard:
        return Discard(socket, list(frames), reason=f"unexpected {msg.name} for a {self.role}",
                       clause=UNEXPECTED_CLAUSE)

    def inconsistent_topic(self, frames: list[bytes], msg: Message, clause: str) -> Discard:
        return Discard(PEER_SUB, list(frames),
                       reason=f"{msg.name}: topic frame {msg['topic']!r} does not name the subject"
                              f" {msg['subject']!r}", clause=clause)

    # ---- timers ------------------------------------------------------------------------------

    def extra_deadline(self) -> int | None:
        """A role's deadline that is not kept in ``deadlines`` (computed on demand)."""
        return None

    def get_timer(self) -> int | None:
        times = [t for t in self.deadlines.values() if t is not None]
        extra = self.extra_deadline()
        if extra is not None:
            times.append(extra)
        return min(times) if times else None

