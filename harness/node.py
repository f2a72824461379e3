"""The sans-IO node contract.

A node is a pure state machine. The runtime (``harness.sim`` or ``harness.live``) owns the
sockets, the clock, the randomness and the durable storage; the node only reacts:

    start(now)                      -> actions
    receive(socket, frames, now)    -> actions
    handle_timer(now)               -> actions
    command(request, now)           -> actions   (the application asks for something)
    get_timer()                     -> when to call handle_timer next (node clock, ns) or None

Timers are pulled, as in aioquic: after every input the runtime asks ``get_timer()`` and
calls ``handle_timer(now)`` once that time has come. A node keeps its own deadlines and answers
with the earliest; it never pushes a timer, so a deadline that moves needs no bookkeeping
in the node or the runtime. ``handle_timer`` may be called early or late (a paused node, a
skewed clock): it handles whatever is due at ``now``.

Times are integer nanoseconds on the node's own clock (the simulator adds clock skew there).
Randomness comes from the ``random.Random`` handed to the constructor, durable state from the
``DurableStore`` handed to it. A crash throws the node object away and builds a new one from
its factory with the same store; nothing else survives.

The node declares its sockets up front (``sockets()``); later it may connect, disconnect and
change subscriptions with actions. Frames are ``bytes``; for ROUTER sockets the first frame
received is the peer's routing identity and the first frame sent is the destination's.
"""

from __future__ import annotations

import random
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, Callable, Iterator, Protocol, TypeVar, Union

_T = TypeVar("_T")

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class SocketType(str, Enum):
    PUB = "PUB"
    SUB = "SUB"
    XPUB = "XPUB"
    XSUB = "XSUB"
    ROUTER = "ROUTER"
    DEALER = "DEALER"


@dataclass(frozen=True)
class SocketSpec:
    """A socket the node wants; the runtime creates it before ``start``."""

    name: str
    type: SocketType
    bind: tuple[str, ...] = ()
    connect: tuple[str, ...] = ()
    subscribe: tuple[bytes, ...] = ()  # SUB only: initial prefix subscriptions
    identity: bytes | None = None  # routing id this socket presents to ROUTER peers
    hwm: int = 1000  # send and receive high-water mark, in messages
    xpub_verbose: bool = False  # XPUB: pass on duplicate subscriptions too
    welcome: bytes | None = None  # XPUB: message sent to each new subscriber (ZMQ_XPUB_WELCOME_MSG)
    # ROUTER: a peer that connects with an identity already in use takes it over
    # (ZMQ_ROUTER_HANDOVER). Without it libzmq ignores the newcomer for good while the old
    # connection's pipe lingers, which it does until the node has read what that pipe holds.
    handover: bool = False


# ---- actions: what a node asks its runtime to do ------------------------------------------


def _quick_init(cls: type[_T]) -> type[_T]:
    """Give a frozen, slotted dataclass an ``__init__`` that fills each slot through the slot's
    own descriptor. The generated one calls ``object.__setattr__`` per field (the price of
    ``frozen``), which is most of the cost of building an action, and nodes build several per
    message. Fields, defaults, keywords and immutability are unchanged."""
    ns: dict[str, Any] = {}
    params, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.default is MISSING:
            params.append(f.name)
        else:
            ns[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        ns[f"_set_{f.name}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        body.append(f"    _set_{f.name}(self, {f.name})")
    exec(f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body), ns)  # noqa: S102
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    return cls


@_quick_init
@dataclass(frozen=True, slots=True)
class Send:
    """Send a multipart message. ``msg_type`` and ``meta`` describe it for the trace."""

    socket: str
    frames: list[bytes]
    msg_type: str = ""
    meta: dict[str, Any] | None = None  # topic / seq / term / index for the trace


@_quick_init
@dataclass(frozen=True, slots=True)
class Connect:
    socket: str
    endpoint: str


@_quick_init
@dataclass(frozen=True, slots=True)
class Disconnect:
    socket: str
    endpoint: str


@_quick_init
@dataclass(frozen=True, slots=True)
class Subscribe:
    socket: str
    topic: bytes


@_quick_init
@dataclass(frozen=True, slots=True)
class Unsubscribe:
    socket: str
    topic: bytes


@_quick_init
@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand something to the application: a reply, a record, an event. Checkers read these."""

    kind: str
    data: dict[str, Any]


@_quick_init
@dataclass(frozen=True, slots=True)
class Discard:
    """The node dropped an incoming message as its specification requires (malformed, stale,
    unknown). ``clause`` names the rule; ``reason`` says what was wrong."""

    socket: str
    frames: list[bytes]
    reason: str
    clause: str = ""


@_quick_init
@dataclass(frozen=True, slots=True)
class Note:
    """A state change worth a trace row (elected leader, worker expired, ...)."""

    kind: str
    data: dict[str, Any]


Action = Union[Send, Connect, Disconnect, Subscribe, Unsubscribe, Deliver, Discard, Note]


def reconnect(socket: str, endpoint: str) -> list[Action]:
    """A new connection of ``socket`` to ``endpoint``: what the old one still queued is dropped,
    and a ROUTER without handover that ignored the old one (libzmq, while an older connection of
    the same identity still held unread messages) hears the new one."""
    return [Disconnect(socket, endpoint), Connect(socket, endpoint)]


# ---- durable storage -----------------------------------------------------------------------


class DurableStore:
    """Key/value storage that survives a crash of the node (memory does not).

    Values must be plain data (msgpack-able); the store keeps its own copies so a node cannot
    keep a reference that silently survives a crash. Iteration order is insertion order.
    """

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.writes = 0

    def get(self, key: str, default: Any = None) -> Any:
        value = self._data.get(key, default)
        return _copy(value)

    def put(self, key: str, value: Any) -> None:
        # an immutable scalar needs no copy (nodes write an int per delivery on hot paths)
        self._data[key] = value if value.__class__ in _SCALARS else _copy(value)
        self.writes += 1

    def delete(self, key: str) -> None:
        self._data.pop(key, None)
        self.writes += 1

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def keys(self, prefix: str = "") -> Iterator[str]:
        return (k for k in list(self._data) if k.startswith(prefix))

    def snapshot(self) -> dict[str, Any]:
        return {k: _copy(v) for k, v in self._data.items()}


_SCALARS = frozenset({int, bytes, str, float, bool, type(None)})


def _copy(value: Any) -> Any:
    if isinstance(value, (bytes, str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    raise TypeError(f"DurableStore values must be plain data, not {type(value).__name__}")


# ---- the node itself ---------------------------------------------------------------------


class Node(Protocol):
    """What every reference node (and every mutant of one) provides."""

    protocol: str
    role: str
    name: str

    def sockets(self) -> list[SocketSpec]: ...

    def start(self, now: int) -> list[Action]: ...

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]: ...

    def handle_timer(self, now: int) -> list[Action]: ...

    def command(self, request: dict[str, Any], now: int) -> list[Action]: ...

    def get_timer(self) -> int | None: ...


@dataclass(frozen=True)
class NodeContext:
    """Everything a node is built from. The runtime makes one per (re)start."""

    name: str
    rng: random.Random
    store: DurableStore
    config: dict[str, Any] = field(default_factory=dict)


NodeFactory = Callable[[NodeContext], Node]


class BaseNode:
    """Convenience base: keeps name/rng/store/config and gives no-op handlers."""

    protocol = ""
    role = ""

    def __init__(self, ctx: NodeContext) -> None:
        self.name = ctx.name
        self.rng = ctx.rng
        self.store = ctx.store
        self.config = dict(ctx.config)

    def sockets(self) -> list[SocketSpec]:
        return []

    def start(self, now: int) -> list[Action]:
        return []

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        return []

    def handle_timer(self, now: int) -> list[Action]:
        return []

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        return []

    def get_timer(self) -> int | None:
        return None
