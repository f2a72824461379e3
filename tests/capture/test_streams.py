"""Reading hand-made captures: TCP reassembly (split, repeated, reordered, overlapping, missing
and cut-short segments), ZMTP framing, and the errors every kind of bad input gives."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import CookedLinux
from scapy.utils import PcapNgWriter, wrpcap

from harness.capture.pcapfile import CaptureFileError, ReadStats, segments
from harness.capture.streams import (
    ENCRYPTED, FRAMING, GAP, JOINED_LATE, NOT_ZMTP, LinkReader, LinkUp, Problem, WireMessage, WireSubscription,
    read_links,
)
from harness.protocols import codec
from tests.capture.pcaps import Conversation, command, greeting, message, ready, write

DCP = codec("dcp")
PING = DCP.encode("PING")
REQUEST = DCP.encode("REQUEST", service="echo", metadata=[b"m1"], data=[b"x" * 300])


def events(path: str, ports: set[int] | None = None) -> tuple[list, LinkReader]:
    """Two passes, as `zmq-harness pcap` reads: the first finds the gaps, the second stops each
    link at its gap."""
    first = LinkReader(ports)
    list(read_links(path, ports, ReadStats(), first))
    reader = LinkReader(ports, cuts=first.gaps)
    return list(read_links(path, ports, ReadStats(), reader)), reader


def messages(evs: list) -> list[list[bytes]]:
    return [e.frames for e in evs if isinstance(e, WireMessage)]


def conversation(pieces: int = 1) -> Conversation:
    c = Conversation().zmtp_open(identity=b"w1")
    c.send(True, message(PING), pieces)
    c.send(False, message(REQUEST), pieces)
    c.send(True, message(PING), pieces)
    return c


def test_a_clean_conversation_gives_its_messages_in_order(tmp_path: Path) -> None:
    evs, reader = events(write(str(tmp_path / "a.pcap"), conversation()))
    assert messages(evs) == [PING, REQUEST, PING]
    up = [e for e in evs if isinstance(e, LinkUp)][0].link
    assert (up.sides[0].socket_type, up.sides[0].identity, up.sides[1].socket_type) == ("DEALER", b"w1", "ROUTER")
    assert not reader.stats.problems and reader.reassembly.gaps == 0


@pytest.mark.parametrize("pieces", [2, 7, 400])
def test_messages_split_over_many_segments_are_reassembled(tmp_path: Path, pieces: int) -> None:
    evs, _ = events(write(str(tmp_path / "a.pcap"), conversation(pieces)))
    assert messages(evs) == [PING, REQUEST, PING]


def test_retransmitted_and_overlapping_segments_are_read_once(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    data = message(REQUEST)
    first = c.segment(True, data[:100])
    rest = c.segment(True, data[100:])
    c.emit(first)
    c.emit(first.copy())  # the same segment again
    overlap = first.copy()
    overlap[TCP].seq += 50
    overlap[TCP].remove_payload()
    overlap = overlap / (data[50:100] + data[100:120])  # half old, half new
    c.emit(overlap)
    rest[TCP].seq += 20
    rest[TCP].remove_payload()
    c.emit(rest / data[120:])
    evs, reader = events(write(str(tmp_path / "a.pcap"), c))
    assert messages(evs) == [REQUEST]
    assert reader.reassembly.retransmitted_bytes == 100 + 50


def test_out_of_order_segments_wait_for_the_hole_to_fill(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    segs = [c.segment(True, message(PING)), c.segment(True, message(REQUEST)), c.segment(True, message(PING))]
    for p in (segs[2], segs[1], segs[0]):
        c.emit(p)
    evs, reader = events(write(str(tmp_path / "a.pcap"), packets=c.packets))
    assert messages(evs) == [PING, REQUEST, PING]
    assert reader.reassembly.out_of_order_segments == 2


def test_sequence_numbers_wrap_around(tmp_path: Path) -> None:
    c = Conversation(seq=[2**32 - 150, 2**32 - 10])
    c.zmtp_open()
    c.send(True, message(REQUEST), 5)
    c.send(False, message(PING))
    for p in c.packets:
        p[TCP].seq %= 2**32
        p[TCP].ack %= 2**32
    evs, _ = events(write(str(tmp_path / "a.pcap"), c))
    assert messages(evs) == [REQUEST, PING]


def test_a_missing_segment_ends_the_link_at_the_gap(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    c.send(True, message(PING))
    c.segment(True, message(REQUEST))  # never captured
    c.send(True, message(PING))
    c.send(False, message(PING))  # after the gap: the other direction is not read either
    c.close()
    evs, reader = events(write(str(tmp_path / "a.pcap"), c))
    assert messages(evs) == [PING]
    gaps = [e for e in evs if isinstance(e, Problem)]
    assert [g.kind for g in gaps] == [GAP]
    assert f"{len(message(REQUEST))} byte(s) missing" in gaps[0].detail


def test_a_capture_that_ends_mid_stream_reports_what_is_missing(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    c.send(True, message(PING))
    c.segment(True, message(PING))
    c.send(True, message(PING))  # waits behind the hole until the end of the file
    evs, _ = events(write(str(tmp_path / "a.pcap"), c))
    assert messages(evs) == [PING]
    assert [e.kind for e in evs if isinstance(e, Problem)] == [GAP]


def write_raw(path: str, records: list[tuple[float, bytes, int]], cut: int = 0) -> str:
    """A pcap written byte by byte: (time, captured bytes, length on the wire) per packet;
    ``cut`` bytes taken off the end of the file."""
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for t, data, wirelen in records:
        out += struct.pack("<IIII", int(t), int(t % 1 * 1e6), len(data), wirelen) + data
    Path(path).write_bytes(out[:len(out) - cut] if cut else out)
    return path


def test_packets_cut_by_the_snapshot_length_are_a_gap(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    c.send(True, message(PING))
    cut = c.send(True, message(REQUEST))[0]
    c.send(True, message(PING))
    records = [(float(p.time), bytes(p), len(bytes(p))) for p in c.packets]
    i = c.packets.index(cut)
    records[i] = (records[i][0], records[i][1][:80], records[i][2])
    st = ReadStats()
    reader = LinkReader(None)
    evs = list(read_links(write_raw(str(tmp_path / "a.pcap"), records), None, st, reader))
    assert messages(evs) == [PING]
    assert st.truncated_packets == 1
    assert [e.kind for e in evs if isinstance(e, Problem)] == [GAP]


def test_a_file_cut_inside_a_packet_record_is_noticed(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    c.send(True, message(PING))
    c.send(True, message(REQUEST))
    records = [(float(p.time), bytes(p), len(bytes(p))) for p in c.packets]
    st = ReadStats()
    evs = list(read_links(write_raw(str(tmp_path / "a.pcap"), records, cut=100), None, st, LinkReader(None)))
    assert st.truncated_file
    assert messages(evs) == [PING]
    assert [e.kind for e in evs if isinstance(e, Problem)] == [GAP]


def test_garbage_on_a_named_port_is_a_finding_and_ignored_otherwise(tmp_path: Path) -> None:
    c = Conversation()
    c.open()
    c.send(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    path = write(str(tmp_path / "a.pcap"), c)
    evs, _ = events(path, {5555})
    problems = [e for e in evs if isinstance(e, Problem)]
    assert [p.kind for p in problems] == [NOT_ZMTP]
    assert "first byte 0x47, a greeting starts with 0xff" in problems[0].detail
    evs, reader = events(path)
    assert not [e for e in evs if isinstance(e, Problem)] and reader.stats.ignored_connections == 1


def test_framing_errors_end_the_link_with_the_offset(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    c.send(True, message(PING))
    c.send(True, b"\x81\x02ab")  # reserved flag bit 7
    c.send(True, message(PING))
    evs, _ = events(write(str(tmp_path / "a.pcap"), c), {5555})
    assert messages(evs) == [PING]
    (p,) = [e for e in evs if isinstance(e, Problem)]
    assert p.kind == FRAMING and "flags 0x81 set reserved bits" in p.detail
    assert f"byte {64 + len(ready('DEALER', None)) + len(message(PING))}" in p.detail


def test_an_old_zmtp_revision_is_named(tmp_path: Path) -> None:
    c = Conversation()
    c.open()
    c.send(True, b"\xff" + b"\x00" * 8 + b"\x7f\x01\x05")  # ZMTP/2.0: revision 1, socket type
    evs, _ = events(write(str(tmp_path / "a.pcap"), c), {5555})
    (p,) = [e for e in evs if isinstance(e, Problem)]
    assert p.kind == NOT_ZMTP and "ZMTP/2.0 or older" in p.detail


def test_a_connection_the_capture_joined_late_is_skipped_not_blamed(tmp_path: Path) -> None:
    c = Conversation().zmtp_open()
    c.send(True, message(PING))
    c.send(True, message(REQUEST))
    late = c.packets[-1:]  # only the last segment: no SYN, no greeting
    evs, reader = events(write(str(tmp_path / "a.pcap"), packets=late), {5555})
    assert [e.kind for e in evs if isinstance(e, Problem)] == [JOINED_LATE]
    assert not messages(evs)


def test_curve_connections_are_said_to_be_unreadable(tmp_path: Path) -> None:
    c = Conversation()
    c.open()
    c.send(False, greeting("CURVE", as_server=True))
    c.send(True, greeting("CURVE"))
    evs, _ = events(write(str(tmp_path / "a.pcap"), c))
    assert [e.kind for e in evs if isinstance(e, Problem)] == [ENCRYPTED]


def test_subscriptions_as_commands_and_as_zmtp_3_0_messages(tmp_path: Path) -> None:
    c = Conversation().zmtp_open("SUB", "XPUB")
    c.send(True, command("SUBSCRIBE", b"Mtopic"))
    c.send(True, message([b"\x01Htopic"]))
    c.send(True, command("CANCEL", b"Mtopic"))
    evs, _ = events(write(str(tmp_path / "a.pcap"), c))
    subs = [(s.subscribe, s.topic) for s in evs if isinstance(s, WireSubscription)]
    assert subs == [(True, b"Mtopic"), (True, b"Htopic"), (False, b"Mtopic")]
    assert not messages(evs)


def test_a_new_connection_on_the_same_ports_is_a_new_link(tmp_path: Path) -> None:
    a = Conversation().zmtp_open()
    a.send(True, message(PING))
    a.close()
    b = Conversation(clock=a.clock, seq=[555000, 777000]).zmtp_open()
    b.send(True, message(REQUEST))
    evs, reader = events(write(str(tmp_path / "a.pcap"), packets=a.packets + b.packets))
    assert messages(evs) == [PING, REQUEST]
    assert len({e.link.id for e in evs if isinstance(e, LinkUp)}) == 2


def test_pcapng_and_other_link_types_read_the_same(tmp_path: Path) -> None:
    c = conversation(3)
    ng = str(tmp_path / "a.pcapng")
    with PcapNgWriter(ng) as w:
        for p in c.packets:
            w.write(p)
    assert messages(events(ng)[0]) == [PING, REQUEST, PING]
    cooked = []
    for p in c.packets:
        q = CookedLinux(proto=0x0800) / p[IP]
        q.time = p.time
        cooked.append(q)
    sll = str(tmp_path / "sll.pcap")
    wrpcap(sll, cooked)
    assert messages(events(sll)[0]) == [PING, REQUEST, PING]
    raw = str(tmp_path / "raw.pcap")
    wrpcap(raw, [p[IP] for p in c.packets], linktype=101)
    assert messages(events(raw)[0]) == [PING, REQUEST, PING]


def test_ipv6_segments_are_read(tmp_path: Path) -> None:
    c = Conversation(client=("::1", 40001), server=("::1", 5555)).zmtp_open()
    c.send(True, message(PING))
    evs, _ = events(write(str(tmp_path / "a.pcap"), c))
    assert messages(evs) == [PING]
    assert [e for e in evs if isinstance(e, LinkUp)][0].link.sides[1].endpoint == "[::1]:5555"


@pytest.mark.parametrize("content,error", [
    (b"", "not a pcap or pcapng capture"),
    (b"hello, this is not a capture at all", "not a pcap or pcapng capture"),
])
def test_files_that_are_not_captures_give_one_clear_error(tmp_path: Path, content: bytes, error: str) -> None:
    p = tmp_path / "x.pcap"
    p.write_bytes(content)
    with pytest.raises(CaptureFileError, match=error):
        list(segments(str(p)))


def test_missing_files_and_directories_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CaptureFileError, match="no such file"):
        list(segments(str(tmp_path / "none.pcap")))
    with pytest.raises(CaptureFileError, match="is a directory"):
        list(segments(str(tmp_path)))


def test_an_unknown_link_type_is_named(tmp_path: Path) -> None:
    p = write_raw(str(tmp_path / "a.pcap"), [(1.0, b"\x00" * 40, 40)])
    data = bytearray(Path(p).read_bytes())
    data[20:24] = struct.pack("<I", 147)  # a user-defined link type
    Path(p).write_bytes(bytes(data))
    with pytest.raises(CaptureFileError, match="link type 147 is not supported"):
        list(segments(p))
