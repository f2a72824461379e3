"""Who is who in a capture: TCP endpoints grouped into nodes, and the nodes' roles.

A capture shows TCP endpoints, not nodes. The first pass over the file (`Survey`) records, for
each side of each link, its ZMTP socket type, the routing identity it presented and the
messages it sent; `Survey.nodes()` then names the nodes:

* the listening side of a link is the node ``host:port`` (every connection to it is one of
  its sockets' peers), or the name the user gave that port (``--ports 5555=broker/hq``);
* a connecting side that presented a routing identity (ZMTP ``Identity`` property) is the
  node of that identity, whatever its port, so a reconnection is the same node (the DCP
  package sets each node's identity to its name, so such a capture names nodes like the run);
* any other connecting side is the node ``host:port`` of its own ephemeral endpoint.

Roles: the role the user gave the port (``--ports 5555=broker``), else the protocol's
`CaptureHints.role` from the node's socket type and the messages it sent, else unknown ("").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from harness.capture.streams import LinkUp, WireEvent, WireMessage
from harness.protocols import Codec

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
    """The first pass: what each link side is and sends (message names, cheaply guessed from
    the codec's dispatch index, not decoded)."""

    def __init__(self, codec: Codec, ports: dict[int, PortSpec] | None,
                 role_hint: Callable[[str, frozenset[str]], str | None] | None) -> None:
        self.codec = codec
        self.ports = ports or {}
        self.role_hint = role_hint
        self.sides: dict[SideKey, _SideInfo] = {}
        self.sent: dict[SideKey, set[str]] = {}

    def on(self, ev: WireEvent) -> None:
        if isinstance(ev, LinkUp):
            for i, side in enumerate(ev.link.sides):
                port = int(side.endpoint.rsplit(":", 1)[1])
                self.sides[(ev.link.id, i)] = _SideInfo(side.endpoint, port, i == 1, side.socket_type, side.identity)
        elif isinstance(ev, WireMessage):
            key = (ev.link.id, 0 if ev.from_client else 1)
            names = self.codec.candidates(ev.frames)
            if names:
                self.sent.setdefault(key, set()).add(names[0])

    def nodes(self) -> NodeMap:
        m = NodeMap()
        sent: dict[str, set[str]] = {}
        user_role: dict[str, str] = {}
        taken: dict[str, tuple] = {}  # name -> what it names, to keep two things from sharing a name
        for key, info in self.sides.items():
            spec = self.ports.get(info.port)
            if info.listening or (spec is not None and (spec.role or spec.name)
                                  and not self._other_side_on(key, info.port)):
                what: tuple = ("endpoint", info.endpoint)
                name = (spec.name if spec and spec.name else "") or info.endpoint
            elif info.identity:
                what, name = ("identity", info.identity), identity_name(info.identity)
            else:
                what, name = ("endpoint", info.endpoint), info.endpoint
            name = self._unique(name, what, taken)
            m.node_of[key] = name
            if name not in m.roles:
                m.roles[name] = ""
                m.socket_types[name] = info.socket_type
                m.endpoints[name] = []
            if info.endpoint not in m.endpoints[name]:
                m.endpoints[name].append(info.endpoint)
            sent.setdefault(name, set()).update(self.sent.get(key, ()))
            if spec is not None and spec.role and (info.listening or not self._other_side_on(key, info.port)):
                user_role[name] = spec.role
        for name in m.roles:
            role = user_role.get(name)
            if not role and self.role_hint is not None:
                role = self.role_hint(m.socket_types[name], frozenset(sent.get(name, ()))) or ""
            m.roles[name] = role or ""
        return m

    def _other_side_on(self, key: SideKey, port: int) -> bool:
        """Whether the other side of this link is the one on ``port`` (both sides of a loopback
        link may share a port number only in theory; the listening side wins)."""
        other = self.sides.get((key[0], 1 - key[1]))
        return other is not None and other.port == port and other.listening

    @staticmethod
    def _unique(name: str, what: tuple, taken: dict[str, tuple]) -> str:
        base, n = name, 2
        while name in taken and taken[name] != what:
            name, n = f"{base}#{n}", n + 1
        taken[name] = what
        return name
