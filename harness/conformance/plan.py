"""What a suite's ``build_peers`` gives the conductor for one case (`PeerPlan`): the scripted
peers' sockets, the messages they announce periodically, placeholder values, and how the
implementation announces its own endpoints. See `harness.conformance.conductor`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from harness.node import SocketType
from harness.protocols.codec import Message


@dataclass(frozen=True)
class PeerLink:
    """A scripted peer's second socket, used to receive (e.g. a SUB connected to the
    implementation's XPUB) when its main socket only sends."""

    type: SocketType
    endpoint: str | None  # None: nowhere at first (it follows what the implementation announces)
    bind: bool
    subscribe: tuple[bytes, ...] = ()
    channel: str | None = None  # decode what arrives here as a message of this channel
    follow: bool = False  # also connect to every endpoint the implementation announces


@dataclass(frozen=True)
class PeerSocket:
    name: str
    type: SocketType
    endpoint: str
    bind: bool
    identity: bytes | None = None
    # Optional, for peers that are nodes of a publish/subscribe mesh (see the module docstring).
    recv: PeerLink | None = None
    subscribe: tuple[bytes, ...] = ()  # SUB/XSUB main socket: its subscriptions
    channel: str | None = None  # decode channel of the main socket
    welcome: bytes | None = None  # XPUB main socket: ZMQ_XPUB_WELCOME_MSG
    address: str | None = None  # the peer's protocol address: what identity_of gives
    blame: Mapping[str, str] = field(default_factory=dict)  # silent / unsubscribed / recv-silent -> clause
    discovered_via: str | None = None  # the peer through which the implementation learns of this one

    @property
    def routed(self) -> bool:
        return self.type is SocketType.ROUTER


@dataclass(frozen=True)
class Announcement:
    """A message a peer sends on its main socket every ``every_ns`` (and at once when a
    subscription that lets it through arrives): e.g. a tower forwarding the beacon of
    scripted peer ``about``."""

    peer: str
    message: str
    fields: Mapping[str, Any]
    every_ns: int
    about: str | None = None  # the scripted peer it announces; silenced by a disconnect step


@dataclass
class PeerPlan:
    """What a suite's ``build_peers`` gives the conductor for one case."""

    peers: dict[str, PeerSocket]
    announce: list[Announcement] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)  # placeholders usable as "{name}" in steps
    send_wait_ns: int = 0  # how long a send on an XPUB waits for a subscription (0: no wait)
    optional_sends: dict[str, str] = field(default_factory=dict)  # message -> why the case is then n/a
    fold_repeats: bool = True  # evidence: a message equal to one already logged counts as a repeat
    # (address, endpoint) that a message of the implementation announces (a Dafka BEACON), else None
    announced: Callable[[Message], tuple[str, str] | None] | None = None
    # The case as the conductor plays it, when the suite rewrites it for the dialect (Raft: the
    # request id field of each message, named by the dialect's table); None: the case as loaded.
    case: Any = None

    def conductor_config(self) -> dict[str, Any]:
        out = {"peers": self.peers, "announce": list(self.announce), "values": dict(self.values),
               "send_wait_ns": self.send_wait_ns, "optional_sends": dict(self.optional_sends),
               "fold_repeats": self.fold_repeats, "announced": self.announced}
        if self.case is not None:
            out["case"] = self.case
        return out
