"""The ZMTP stream parser: on bytes libzmq really sends, on hand-made frames, and on what a
hostile or foreign peer sends (it goes opaque, loses nothing and never raises)."""

from __future__ import annotations

import itertools
import random
from typing import Iterator

import pytest
import zmq

from fault_injection.zmtp import (
    CMD, GREETING_BYTES, HANDSHAKE, MESSAGE, OPAQUE, Command, Greeting, ZmtpError, ZmtpStream, encode_command,
    encode_frame, encode_message, frames_of, parse_properties, ready_command,
)
from tests.fault_injection.zmtp_peers import RawServer, chunks, handshake, recv_exactly, recv_for

NULL_GREETING = Greeting(3, 1, "NULL").encode()
READY_DEALER = ready_command({"Socket-Type": b"DEALER", "Identity": b"w1"})


def parse_all(data: bytes, sizes: Iterator[int] | None = None, max_message: int = 1 << 26) -> tuple[ZmtpStream, list]:
    stream = ZmtpStream(max_message)
    units = []
    for chunk in chunks(data, sizes or itertools.repeat(len(data) or 1)):
        stream.feed(chunk)
        units.extend(stream.units())
    return stream, units


def test_greeting_round_trip_and_errors() -> None:
    g = Greeting(3, 1, "PLAIN", True)
    raw = g.encode()
    assert len(raw) == 64 and raw[:1] == b"\xff" and raw[9:10] == b"\x7f"
    assert Greeting.parse(raw) == g
    with pytest.raises(ZmtpError, match="64"):
        Greeting.parse(raw[:20])
    with pytest.raises(ZmtpError, match="signature"):
        Greeting.parse(b"\x00" + raw[1:])
    with pytest.raises(ZmtpError, match="longer"):
        Greeting(mechanism="X" * 21).encode()


def test_frames_short_long_more_and_command_flags() -> None:
    assert encode_frame(b"ab") == b"\x00\x02ab"
    assert encode_frame(b"ab", more=True) == b"\x01\x02ab"
    assert encode_frame(b"x" * 256)[:9] == b"\x02" + (256).to_bytes(8, "big")
    assert encode_frame(b"\x04PING", command=True) == b"\x04\x05\x04PING"
    body = [b"", b"x" * 300, b"end"]
    assert frames_of(encode_message(body)) == body
    with pytest.raises(ZmtpError, match="reserved"):
        frames_of(b"\x08\x00")
    with pytest.raises(ZmtpError, match="truncated"):
        frames_of(b"\x00\x05ab")


def test_commands_and_ready_properties() -> None:
    cmd = Command.parse(READY_DEALER[2:])
    assert cmd.name == "READY" and cmd.socket_type == "DEALER" and cmd.identity == b"w1"
    ping = Command.parse(encode_command("PING", b"\x00\x0actx")[2:])
    assert (ping.name, ping.data) == ("PING", b"\x00\x0actx")
    assert Command.parse(encode_command("SUBSCRIBE", b"topic")[2:]).data == b"topic"
    with pytest.raises(ZmtpError):
        parse_properties(b"\x05Ident\x00\x00")
    with pytest.raises(ZmtpError):
        Command.parse(b"\x09SUB")


def _dealer_session() -> tuple[bytes, list[list[bytes]]]:
    """Everything a real libzmq DEALER sends to a ROUTER-like raw peer: greeting, READY and
    multipart messages with short and long frames."""
    sent = [[b"hello"], [b"", b"DGBX\x01", b"\x04", b"echo", b"x" * 300], [b"big" * 40_000], [b""] * 6]
    ctx = zmq.Context()
    try:
        with RawServer() as srv:
            dealer = ctx.socket(zmq.DEALER)
            dealer.setsockopt(zmq.ROUTING_ID, b"w1")
            dealer.connect(srv.endpoint)
            conn = srv.accept()
            head = handshake(conn, b"ROUTER", as_server=True)
            for msg in sent:
                dealer.send_multipart(msg)
            body = recv_exactly(conn, sum(len(encode_message(m)) for m in sent))
            dealer.close(0)
    finally:
        ctx.term()
    return head + body, sent


def test_a_real_dealer_session_byte_by_byte_and_in_one_piece() -> None:
    data, sent = _dealer_session()
    for sizes in (itertools.repeat(1), itertools.repeat(len(data)), (random.Random(s).randrange(1, 700)
                                                                      for s in itertools.count())):
        stream, units = parse_all(data, sizes)
        assert b"".join(u[1] for u in units) == data, "the units' raw bytes are exactly the input"
        assert stream.greeting == Greeting(3, 1, "NULL", False)
        assert stream.ready is not None and stream.ready.socket_type == "DEALER" and stream.ready.identity == b"w1"
        assert [u[2] for u in units if u[0] == MESSAGE] == sent
        assert {u[0] for u in units} == {GREETING_BYTES, HANDSHAKE, MESSAGE}
        assert stream.messages == len(sent)


@pytest.mark.parametrize("minor,expected", [(0, MESSAGE), (1, CMD)])
def test_a_real_sub_subscribes_by_message_to_zmtp_3_0_and_by_command_to_3_1(minor: int, expected: int) -> None:
    ctx = zmq.Context()
    try:
        with RawServer() as srv:
            sub = ctx.socket(zmq.SUB)
            sub.connect(srv.endpoint)
            sub.setsockopt(zmq.SUBSCRIBE, b"topic")
            conn = srv.accept()
            stream = ZmtpStream()
            stream.feed(handshake(conn, b"PUB", minor=minor))
            assert [u[0] for u in stream.units()] == [GREETING_BYTES, HANDSHAKE]
            assert stream.ready is not None and stream.ready.socket_type == "SUB"
            stream.feed(recv_for(conn, 0.5))
            units = stream.units()
            sub.close(0)
    finally:
        ctx.term()
    assert len(units) == 1 and units[0][0] == expected
    if expected == CMD:
        assert (units[0][3].name, units[0][3].data) == ("SUBSCRIBE", b"topic")
    else:
        assert units[0][2] == [b"\x01topic"]


def test_take_messages_cuts_at_message_boundaries_only() -> None:
    msgs = [[b"a" * k for k in range(n)] + [b"z" * 300] for n in range(8)] + [[b"p"]]
    wire = b"".join(encode_message(m) for m in msgs) + encode_command("PING", b"\x00\x00")
    rng = random.Random(5)
    stream = ZmtpStream()
    stream.feed(NULL_GREETING + READY_DEALER)
    stream.units()
    out, count = bytearray(), 0
    for chunk in chunks(wire, (rng.randrange(1, 40) for _ in itertools.count())):
        stream.feed(chunk)
        raw, n = stream.take_messages()
        out += raw
        count += n
        assert frames_of(bytes(out)) is not None  # always whole frames
    assert bytes(out) == wire and count == len(msgs) + 1 and stream.buffered == 0


OPAQUE_CASES = {
    "garbage": (b"GET / HTTP/1.1\r\n\r\n", "no ZMTP signature"),
    "zmtp-1.0": (b"\xff" + b"\x00" * 8 + b"\x00" + b"rest", "ZMTP 1.0"),
    "zmtp-2.0": (b"\xff" + b"\x00" * 8 + b"\x7f\x01\x05rest", "version 1"),
    "plain": (Greeting(3, 0, "PLAIN").encode() + encode_command("HELLO", b"\x01u\x01p"), "mechanism PLAIN"),
    "curve": (Greeting(3, 0, "CURVE").encode() + b"\x04\xff" + b"\x00" * 300, "mechanism CURVE"),
    "data-in-handshake": (NULL_GREETING + encode_frame(b"x"), "is not a command"),
    "reserved-flags": (NULL_GREETING + READY_DEALER + b"\x10\x01x" + b"more", "reserved flag"),
    "command-in-multipart": (NULL_GREETING + READY_DEALER + encode_frame(b"a", more=True)
                             + encode_command("PING"), "inside a multipart"),
    "command-with-more": (NULL_GREETING + READY_DEALER + b"\x05\x05\x04PING", "MORE flag"),
    "huge-frame": (NULL_GREETING + READY_DEALER + b"\x02" + (1 << 60).to_bytes(8, "big") + b"x", "over"),
    "huge-handshake": (NULL_GREETING + b"\x06" + (1 << 40).to_bytes(8, "big"), "handshake command of"),
}


@pytest.mark.parametrize("case", sorted(OPAQUE_CASES))
def test_what_it_cannot_follow_goes_opaque_and_loses_nothing(case: str) -> None:
    data, reason = OPAQUE_CASES[case]
    for sizes in (itertools.repeat(1), itertools.repeat(len(data))):
        stream, units = parse_all(data, sizes)
        assert stream.opaque and reason in stream.opaque_reason
        assert b"".join(u[1] for u in units) == data
        assert units[-1][0] == OPAQUE
        stream.feed(b"anything after")
        assert stream.units() == [(OPAQUE, b"anything after", None, None)]


@pytest.mark.parametrize("last", [[b"y" * 2000], [b"z"] * 600], ids=["one-big-frame", "endless-more"])
def test_a_message_over_the_limit_goes_opaque(last: list[bytes]) -> None:
    data = NULL_GREETING + READY_DEALER + encode_message([b"x" * 100]) + encode_message(last)
    for sizes in (itertools.repeat(len(data)), itertools.repeat(100)):
        stream, units = parse_all(data, sizes, max_message=1000)
        assert [u[0] for u in units if u[0] != OPAQUE][-1] == MESSAGE and units[-1][0] == OPAQUE
        assert "over 1000" in stream.opaque_reason
        assert b"".join(u[1] for u in units) == data
