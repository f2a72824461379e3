"""TCP segments out of a pcap or pcapng file, streamed: `segments(path)`.

scapy's `RawPcapReader` reads the records (it picks the pcap or pcapng reader from the magic
number and reads one record at a time, so memory stays flat however large the file); the
link, IP and TCP headers are parsed here with ``struct`` rather than dissected by scapy,
which would cost ~50 times more per packet. Link types: Ethernet (Linux loopback captures
are Ethernet with zero addresses), Linux cooked v1/v2, BSD loopback (NULL/LOOP) and raw IP.

What cannot be read becomes a `Segment` with ``missing`` bytes (a payload cut by the
snapshot length or by the end of a truncated file) or a count in `ReadStats` (non-TCP
packets, IP fragments, short headers), never an exception; a file that is not a capture at
all, or a link type this reader does not know, raises `CaptureFileError` with one clear line.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

# Link-layer header types (https://www.tcpdump.org/linktypes.html).
DLT_NULL, DLT_EN10MB, DLT_RAW, DLT_RAW_BSD, DLT_RAW_OPENBSD, DLT_LOOP = 0, 1, 101, 12, 14, 108
DLT_LINUX_SLL, DLT_IPV4, DLT_IPV6, DLT_LINUX_SLL2 = 113, 228, 229, 276
LINK_NAMES = {DLT_NULL: "BSD loopback", DLT_EN10MB: "Ethernet", DLT_RAW: "raw IP", DLT_RAW_BSD: "raw IP",
              DLT_RAW_OPENBSD: "raw IP", DLT_LOOP: "OpenBSD loopback", DLT_LINUX_SLL: "Linux cooked",
              DLT_IPV4: "raw IPv4", DLT_IPV6: "raw IPv6", DLT_LINUX_SLL2: "Linux cooked v2"}

ETH_IPV4, ETH_IPV6, ETH_VLAN, ETH_QINQ = 0x0800, 0x86DD, 0x8100, 0x88A8
IPPROTO_TCP = 6
# IPv6 extension headers walked to reach TCP (hop-by-hop, routing, destination options).
IPV6_EXTENSIONS = (0, 43, 60)
IPV6_FRAGMENT = 44

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10


class CaptureFileError(Exception):
    """A file that cannot be read as a capture: not pcap/pcapng, unknown link type, unreadable."""


class Segment(NamedTuple):
    """One TCP segment. ``missing`` counts payload bytes the packet carried on the wire that
    the capture does not hold (snapshot length, truncated file)."""

    time_ns: int
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    flags: int
    payload: bytes
    missing: int


@dataclass
class ReadStats:
    packets: int = 0
    tcp_segments: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> packets not used
    truncated_packets: int = 0  # packets whose TCP payload the capture cut short
    truncated_file: bool = False  # the last record ends before its declared length

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _open(path: str):  # -> a scapy raw reader
    from scapy.error import Scapy_Exception
    from scapy.utils import RawPcapReader

    if not os.path.exists(path):
        raise CaptureFileError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CaptureFileError(f"{path}: is a directory, not a capture file")
    try:
        return RawPcapReader(path)
    except Scapy_Exception as e:
        raise CaptureFileError(f"{path}: not a pcap or pcapng capture ({e})") from None
    except OSError as e:
        raise CaptureFileError(f"{path}: {e.strerror or e}") from None


def _pcap_time(meta, nano: bool) -> int:
    return meta.sec * 1_000_000_000 + (meta.usec if nano else meta.usec * 1000)


def _pcapng_time(meta) -> int:
    units = (meta.tshigh << 32) | meta.tslow
    resol = meta.tsresol or 1_000_000
    return units * 1_000_000_000 // resol


def _ip_offset(linktype: int, data: bytes) -> int | None:
    """Where the IP header starts in a frame of this link type; None for a frame that does not
    carry IP. Raises CaptureFileError for a link type this reader does not know."""
    if linktype == DLT_EN10MB:
        off, ethertype = 14, (data[12] << 8 | data[13]) if len(data) >= 14 else 0
        while ethertype in (ETH_VLAN, ETH_QINQ) and len(data) >= off + 4:
            ethertype = data[off + 2] << 8 | data[off + 3]
            off += 4
        return off if ethertype in (ETH_IPV4, ETH_IPV6) else None
    if linktype in (DLT_RAW, DLT_RAW_BSD, DLT_RAW_OPENBSD, DLT_IPV4, DLT_IPV6):
        return 0
    if linktype == DLT_LINUX_SLL:
        return 16 if len(data) >= 16 and (data[14] << 8 | data[15]) in (ETH_IPV4, ETH_IPV6) else None
    if linktype == DLT_LINUX_SLL2:
        return 20 if len(data) >= 20 and (data[0] << 8 | data[1]) in (ETH_IPV4, ETH_IPV6) else None
    if linktype in (DLT_NULL, DLT_LOOP):
        return 4  # the family word; the IP version nibble is checked next
    raise CaptureFileError(f"link type {linktype} is not supported (supported: "
                           + ", ".join(sorted({f"{v} ({k})" for k, v in LINK_NAMES.items()})) + ")")


_ADDRESSES: dict[bytes, str] = {}


def _address(raw: bytes) -> str:
    """An IPv4 or IPv6 address as text (remembered: a capture has few distinct addresses)."""
    text = _ADDRESSES.get(raw)
    if text is None:
        text = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
        if len(_ADDRESSES) < 65536:
            _ADDRESSES[raw] = text
    return text


def _tcp(data: bytes, off: int, stats: ReadStats, wire_extra: int) -> tuple | None:
    """(src, sport, dst, dport, seq, flags, payload, missing) of the TCP segment in the IP packet
    at ``off``; None (counted) for anything else. ``wire_extra`` is how many bytes of the frame
    the capture did not keep."""
    n = len(data)
    if n < off + 1:
        stats.skip("short header")
        return None
    version = data[off] >> 4
    if version == 4:
        if n < off + 20:
            stats.skip("short header")
            return None
        ihl = (data[off] & 0x0F) * 4
        total = data[off + 2] << 8 | data[off + 3]
        if data[off + 9] != IPPROTO_TCP:
            stats.skip("not TCP")
            return None
        if (data[off + 6] & 0x3F) or data[off + 7]:  # more-fragments flag or a fragment offset
            stats.skip("IP fragment")
            return None
        src, dst = _address(data[off + 12:off + 16]), _address(data[off + 16:off + 20])
        tcp_at, end = off + ihl, off + (total or (n - off))  # total 0: TSO on the capturing host
    elif version == 6:
        if n < off + 40:
            stats.skip("short header")
            return None
        nxt, payload_len = data[off + 6], data[off + 4] << 8 | data[off + 5]
        src, dst = _address(data[off + 8:off + 24]), _address(data[off + 24:off + 40])
        tcp_at, end = off + 40, off + 40 + (payload_len or (n - off - 40))
        while nxt in IPV6_EXTENSIONS and n >= tcp_at + 2:
            nxt, tcp_at = data[tcp_at], tcp_at + (data[tcp_at + 1] + 1) * 8
        if nxt == IPV6_FRAGMENT:
            stats.skip("IP fragment")
            return None
        if nxt != IPPROTO_TCP:
            stats.skip("not TCP")
            return None
    else:
        stats.skip("not IP")
        return None
    if n < tcp_at + 20:
        stats.skip("short header")
        return None
    sport, dport, seq = struct.unpack_from("!HHI", data, tcp_at)
    doff, flags = (data[tcp_at + 12] >> 4) * 4, data[tcp_at + 13]
    start = tcp_at + doff
    if start > end or n < min(start, end):
        stats.skip("short header")
        return None
    payload = data[start:end]
    missing = (end - start) - len(payload)
    if missing == 0 and wire_extra and end >= n:
        missing = wire_extra  # the IP length was itself cut: trust the wire length
    return src, sport, dst, dport, seq, flags, payload, missing


def segments(path: str, stats: ReadStats | None = None) -> Iterator[Segment]:
    """Every TCP segment of the capture, in file order. ``stats`` (when given) counts what was
    read and what was skipped."""
    st = stats if stats is not None else ReadStats()
    reader = _open(path)
    from scapy.utils import RawPcapNgReader

    ng = isinstance(reader, RawPcapNgReader)
    nano = getattr(reader, "nano", False)
    file_linktype = getattr(reader, "linktype", None)
    try:
        while True:
            try:
                data, meta = reader._read_packet()
            except EOFError:
                break
            st.packets += 1
            if ng:
                linktype, t, wirelen = meta.linktype, _pcapng_time(meta), meta.wirelen
            else:
                linktype, t, wirelen = file_linktype, _pcap_time(meta, nano), meta.wirelen
                if len(data) < meta.caplen:
                    st.truncated_file = True  # the file ends inside this record
            extra = max(wirelen - len(data), 0)
            off = _ip_offset(linktype, data)
            if off is None:
                st.skip("not IP")
                continue
            parsed = _tcp(data, off, st, extra)
            if parsed is None:
                continue
            st.tcp_segments += 1
            if parsed[7]:
                st.truncated_packets += 1
            yield Segment(t, *parsed)
    finally:
        reader.close()
