"""Hand-made captures: ZMTP conversations written with scapy's `wrpcap`, with the faults a real
capture has (segments split, repeated, reordered, cut short, missing) on demand."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet
from scapy.utils import wrpcap

from harness.capture import zmtp


def greeting(mechanism: str = "NULL", as_server: bool = False, minor: int = 1) -> bytes:
    return (b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, minor]) + mechanism.encode().ljust(20, b"\x00")
            + bytes([1 if as_server else 0]) + b"\x00" * 31)


def frame(body: bytes, more: bool = False, command: bool = False) -> bytes:
    flags = (zmtp.MORE if more else 0) | (zmtp.COMMAND if command else 0)
    if len(body) > 255:
        return bytes([flags | zmtp.LONG]) + struct.pack("!Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def command(name: str, data: bytes = b"") -> bytes:
    return frame(bytes([len(name)]) + name.encode() + data, command=True)


def ready(socket_type: str, identity: bytes | None = None) -> bytes:
    props = {"Socket-Type": socket_type.encode()}
    if identity is not None:
        props["Identity"] = identity
    body = b"".join(bytes([len(k)]) + k.encode() + struct.pack("!I", len(v)) + v for k, v in props.items())
    return command("READY", body)


def message(frames: list[bytes]) -> bytes:
    return b"".join(frame(f, more=i < len(frames) - 1) for i, f in enumerate(frames))


@dataclass
class Conversation:
    """One TCP connection between ``client`` and ``server``: `open` (SYN handshake), `send`
    bytes either way, `close`. Every packet gets the next timestamp (1 ms apart)."""

    client: tuple[str, int] = ("127.0.0.1", 40001)
    server: tuple[str, int] = ("127.0.0.1", 5555)
    clock: list[float] = field(default_factory=lambda: [1000.0])
    packets: list[Packet] = field(default_factory=list)
    seq: list[int] = field(default_factory=lambda: [1000, 900000])

    def _pkt(self, from_client: bool, flags: str, payload: bytes = b"", seq: int | None = None) -> Packet:
        (sh, sp), (dh, dp) = (self.client, self.server) if from_client else (self.server, self.client)
        i = 0 if from_client else 1
        ip = IPv6(src=sh, dst=dh) if ":" in sh else IP(src=sh, dst=dh)
        p = Ether() / ip / TCP(sport=sp, dport=dp, flags=flags,
                                             seq=self.seq[i] if seq is None else seq, ack=self.seq[1 - i])
        if payload:
            p = p / payload
        self.clock[0] += 0.001
        p.time = self.clock[0]
        return p

    def emit(self, p: Packet) -> Packet:
        self.packets.append(p)
        return p

    def open(self) -> "Conversation":
        self.emit(self._pkt(True, "S"))
        self.seq[0] += 1
        self.emit(self._pkt(False, "SA"))
        self.seq[1] += 1
        self.emit(self._pkt(True, "A"))
        return self

    def segment(self, from_client: bool, payload: bytes) -> Packet:
        """The segment carrying ``payload`` next, without sending it (to reorder or drop it)."""
        p = self._pkt(from_client, "PA", payload)
        self.seq[0 if from_client else 1] += len(payload)
        return p

    def send(self, from_client: bool, payload: bytes, pieces: int = 1) -> list[Packet]:
        step = max(1, -(-len(payload) // pieces))
        return [self.emit(self.segment(from_client, payload[i:i + step])) for i in range(0, len(payload), step)]

    def zmtp_open(self, client_type: str = "DEALER", server_type: str = "ROUTER",
                  identity: bytes | None = None) -> "Conversation":
        self.open()
        self.send(False, greeting(as_server=True))
        self.send(True, greeting())
        self.send(False, ready(server_type, b"" if server_type == "ROUTER" else None))
        self.send(True, ready(client_type, identity))
        return self

    def close(self) -> None:
        self.emit(self._pkt(True, "FA"))
        self.seq[0] += 1
        self.emit(self._pkt(False, "FA"))
        self.seq[1] += 1


def write(path: str, *conversations: Conversation, packets: list[Packet] | None = None) -> str:
    pkts = packets if packets is not None else sorted((p for c in conversations for p in c.packets),
                                                       key=lambda p: p.time)
    wrpcap(path, pkts)
    return path
