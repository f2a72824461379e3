"""Who is who in a capture: TCP endpoints grouped into nodes, and the nodes' roles.

A capture shows TCP endpoints, not nodes. The first pass over the file (`Survey`) records, for
each side of each link, its ZMTP socket type, the routing identity it presented and the
messages it sent; `Survey.nodes()` then names the nodes:

* the listening side of a link is the node ``host:port`` (every connection to it is one of
  its sockets' peers), or the name the user gave that port (``--ports 5555=broker/hq``);
* a connecting side that presented a routing identity (ZMTP ``Identity`` property) is the
  node of that identity, whatever its port, so a reconnection is the same node (the DCP
  package sets each node's identity to its name, so such a capture names nodes like the run);
* sides the protocol's `CaptureHints` tie together are one node: a subscription that names
  its subscriber (``subscriber``), a message that names its sender and the endpoint it listens
  on (``announces``; a Dafka BEACON), so a node's SUB connections join its XPUB endpoint;
* any other connecting side is the node ``host:port`` of its own ephemeral endpoint.

Roles: the role the user gave the listening port (``--ports 5555=broker``), else the
protocol's `CaptureHints.role` from the node's socket type and the messages it sent, else
unknown ("").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from harness.capture.streams import LinkUp, WireEvent, WireMessage, WireSubscription
from harness.packages.base import CaptureHints
from harness.protocols import Codec, DecodeError

SideKey = tuple[int, int]  # (link id, 0 = connecting side / 1 = listening side)


@dataclass(frozen=True)
class PortSpec:
    """One ``--ports`` item: ``PORT``, ``PORT=ROLE`` or ``PORT=ROLE/NAME``."""

    port: int
    role: str = ""
    name: str = ""

    @staticmethod
    def parse(text: str) -> "PortSpec":
        port, _, rest = text.strip().partition("=")
        role, _, name = rest.partition("/")
        try:
            p = int(port)
        except ValueError:
            raise ValueError(f"--ports: {text!r}: expected PORT, PORT=ROLE or PORT=ROLE/NAME") from None
        if not 0 < p < 65536:
            raise ValueError(f"--ports: {text!r}: port {p} is out of range")
        return PortSpec(p, role.strip(), name.strip())


def parse_ports(items: list[str] | None) -> dict[int, PortSpec] | None:
    """``--ports`` values (each may hold several items separated by commas) by port; None for none."""
    if not items:
        return None
    out: dict[int, PortSpec] = {}
    for item in items:
        for part in item.split(","):
            if part.strip():
                spec = PortSpec.parse(part)
                out[spec.port] = spec
    return out


def identity_name(identity: bytes) -> str:
    """A routing identity as a node name: its text when printable, else ``id:<hex>``."""
    if identity and all(0x21 <= b < 0x7F for b in identity):
        return identity.decode("ascii")
    return "id:" + identity.hex()


@dataclass
class _SideInfo:
    endpoint: str
    port: int
    listening: bool
    socket_type: str = ""
    identity: bytes = b""


@dataclass
class NodeMap:
    """The outcome of the survey: the node of each side of each link, and each node's role."""

    node_of: dict[SideKey, str] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # node -> role ("" unknown), first-seen order
    socket_types: dict[str, str] = field(default_factory=dict)  # node -> its ZMTP socket type
    endpoints: dict[str, list[str]] = field(default_factory=dict)  # node -> the endpoints it used

    def role_of(self, node: str) -> str:
        return self.roles.get(node, "")


class Survey:
    """The first pass: what each link side is and sends (message names from the codec's
    dispatch index, decoded only when the index names several, or the hints read the
    message), and which sides belong together."""

    def __init__(self, codec: Codec, ports: dict[int, PortSpec] | None, hints: CaptureHints) -> None:
        self.codec = codec
        self.ports = ports or {}
        self.hints = hints
        self.sides: dict[SideKey, _SideInfo] = {}
        self.sent: dict[SideKey, set[str]] = {}
        self._parent: dict[Hashable, Hashable] = {}
        self._announced: list[tuple[str, str]] = []  # (node key, its listening endpoint host:port)

    def _find(self, a: Hashable) -> Hashable:
        parent = self._parent
        parent.setdefault(a, a)
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def _union(self, a: Hashable, b: Hashable) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[rb] = ra

    def on(self, ev: WireEvent) -> None:
        if isinstance(ev, LinkUp):
            for i, side in enumerate(ev.link.sides):
                key = (ev.link.id, i)
                port = int(side.endpoint.rsplit(":", 1)[1])
                self.sides[key] = _SideInfo(side.endpoint, port, i == 1, side.socket_type, side.identity)
                self._find(key)
                if i == 1:
                    self._union(("endpoint", side.endpoint), key)
                elif side.identity:
                    self._union(("identity", side.identity), key)
        elif isinstance(ev, WireMessage):
            key = (ev.link.id, 0 if ev.from_client else 1)
            names = self.codec.candidates(ev.frames)
            if len(names) > 1:  # only decoding tells which (a Dafka "W" is a hello or a welcome)
                try:
                    names = [self.codec.decode(ev.frames).name]
                except DecodeError:
                    names = []
            if names:
                self.sent.setdefault(key, set()).add(names[0])
                if self.hints.announces is not None and names[0] in self.hints.announcing:
                    self._announce(key, ev.frames)
        elif isinstance(ev, WireSubscription) and self.hints.subscriber is not None:
            node = self.hints.subscriber(ev.topic)
            if node is not None:
                self._union(("key", node), (ev.link.id, 0 if ev.from_client else 1))

    def _announce(self, key: SideKey, frames: list[bytes]) -> None:
        try:
            msg = self.codec.decode(frames)
        except DecodeError:
            return  # the conversion reports it; it names nobody
        said = self.hints.announces(msg) if self.hints.announces is not None else None
        if said is not None:
            node, endpoint = said
            self._union(("key", node), key)
            if endpoint:
                self._announced.append((node, endpoint))

    def nodes(self) -> NodeMap:
        listening = {info.endpoint: key for key, info in self.sides.items() if info.listening}
        by_port: dict[int, list[str]] = {}
        for ep in listening:
            by_port.setdefault(int(ep.rsplit(":", 1)[1]), []).append(ep)
        for node, endpoint in self._announced:
            if endpoint in listening:
                self._union(("key", node), ("endpoint", endpoint))
            else:  # announced as a host name or a wildcard: the one listening endpoint on that port
                port = endpoint.rsplit(":", 1)[-1]
                same = by_port.get(int(port), []) if port.isdigit() else []
                if len(same) == 1:
                    self._union(("key", node), ("endpoint", same[0]))
        groups: dict[Hashable, list[SideKey]] = {}
        for key in self.sides:
            groups.setdefault(self._find(key), []).append(key)
        m = NodeMap()
        taken: dict[str, Hashable] = {}  # name -> the group it names
        for root, keys in groups.items():
            infos = [self.sides[k] for k in keys]
            main = next((i for i in infos if i.listening), None)
            spec = self.ports.get(main.port) if main is not None else None
            if main is not None:
                name = (spec.name if spec is not None and spec.name else "") or main.endpoint
            elif infos[0].identity:
                name = identity_name(infos[0].identity)
            else:
                name = infos[0].endpoint
            name = self._unique(name, root, taken)
            head = main or infos[0]
            m.roles[name] = ""
            m.socket_types[name] = head.socket_type
            m.endpoints[name] = list(dict.fromkeys(i.endpoint for i in infos))
            sent: set[str] = set()
            for k in keys:
                m.node_of[k] = name
                sent |= self.sent.get(k, set())
            role = spec.role if spec is not None and spec.role else ""
            if not role and self.hints.role is not None:
                role = self.hints.role(head.socket_type, frozenset(sent)) or ""
            m.roles[name] = role
        return m

    @staticmethod
    def _unique(name: str, what: Hashable, taken: dict[str, Hashable]) -> str:
        base, n = name, 2
        while name in taken and taken[name] != what:
            name, n = f"{base}#{n}", n + 1
        taken[name] = what
        return name
