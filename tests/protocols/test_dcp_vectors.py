"""DCP golden vectors: every message of both dialects as exact frames, both directions, and
the errors the document's rules produce (with the clause each one names)."""

from __future__ import annotations

import pytest

from harness.protocols import ConformanceError, DecodeError, codec
from harness.protocols.codec import Message

H = bytes.fromhex


def hdr(t: str) -> list[bytes]:
    return [b"", b"DGBX\x01", H(t)]


# (message, fields, frames) in strict mode
STRICT = [
    ("REGISTER", {"version": 1, "service": "echo"}, hdr("01") + [b"echo"]),
    ("REGISTER", {"version": 1, "service": ""}, hdr("01") + [b""]),  # "any number of bytes"
    ("REGISTER", {"version": 1, "service": "s\udcff"}, hdr("01") + [b"s\xff"]),  # any byte survives
    ("PING", {"version": 1}, hdr("02")),
    ("PONG", {"version": 1}, hdr("03")),
    ("RECONNECT", {"version": 1}, hdr("06")),
    # a client's request: no client address, one metadata part, two data parts
    ("REQUEST", {"version": 1, "service": "echo", "client_address": None, "metadata": [b"req-1"],
                 "data": [b"hello", b""]},
     hdr("04") + [b"echo", b"", b"req-1", b"", b"hello", b""]),
    # the broker inserted the client's routing id; no metadata, no data
    ("REQUEST", {"version": 1, "service": "svc", "client_address": H("0080000001"), "metadata": [], "data": []},
     hdr("04") + [b"svc", H("0080000001"), b"", b""]),
    ("REPLY", {"version": 1, "client_address": H("0080000001"), "metadata": [b"req-1", b"x"], "data": [b"HELLO"]},
     hdr("05") + [H("0080000001"), b"", b"req-1", b"x", b"", b"HELLO"]),
]


@pytest.mark.parametrize("name,fields,frames", STRICT)
def test_strict_vectors_both_directions(name: str, fields: dict, frames: list[bytes]) -> None:
    c = codec("dcp")
    assert c.encode(name, fields) == frames
    assert c.decode(frames) == Message(name, fields)


@pytest.mark.parametrize("name,fields,frames", STRICT)
def test_dagbox_vectors_use_a_four_byte_little_endian_type(name: str, fields: dict, frames: list[bytes]) -> None:
    """INTEROP: the message-type part is a 4-byte enum in host (little-endian) order."""
    d = codec("dcp", "dcp:dagbox")
    dag = frames[:2] + [frames[2] + b"\x00\x00\x00"] + frames[3:]
    assert d.encode(name, fields) == dag
    assert d.decode(dag) == Message(name, fields)
    # Strict decoding of the DagBox bytes is a conformance finding that names the dialect.
    with pytest.raises(ConformanceError) as e:
        codec("dcp").decode(dag)
    assert e.value.dialects == ["dcp:dagbox"]
    assert e.value.decoded.name == name
    assert e.value.clause == "dcp.wire.message-type"


def test_interop_header_is_dgbx_and_version_one() -> None:
    frames = codec("dcp").encode("PING")
    assert frames[1] == b"DGBX" + bytes([0x01])


def test_interop_registration_is_echoed_byte_for_byte() -> None:
    """INTEROP: a registration is echoed back; the echo decodes as the same REGISTER."""
    c = codec("dcp")
    reg = c.encode("REGISTER", service="svc")
    assert c.decode(list(reg)) == c.decode(reg)


def test_interop_reconnect_is_type_six() -> None:
    assert codec("dcp").encode("RECONNECT")[2] == b"\x06"
    assert codec("dcp", "dcp:dagbox").encode("RECONNECT")[2] == b"\x06\x00\x00\x00"


ERRORS = [
    # frames, message, field, clause
    ([b"", b"DGBX\x02", H("02")], "PING", "version", "dcp.wire.version"),
    ([b"", b"DGBZ\x01", H("02")], "PING", "protocol", "dcp.wire.header"),
    ([b"", b"DGBX", H("02")], "PING", "version", "dcp.wire.version"),
    ([b"x", b"DGBX\x01", H("02")], "PING", "delimiter", "dcp.wire.header"),
    (hdr("02") + [b"extra"], "PING", None, "dcp.heartbeat.header-only"),
    (hdr("03") + [b""], "PONG", None, "dcp.heartbeat.header-only"),
    (hdr("09"), None, None, "dcp.wire.message-type"),
    (hdr("0400"), None, None, "dcp.wire.message-type"),
    (hdr("01"), "REGISTER", "service", "dcp.worker.register"),
    (hdr("04") + [b"svc", b"cli"], "REQUEST", "client_address", "dcp.request.format"),
    (hdr("04") + [b"svc", b"cli", b"second"], "REQUEST", "client_address", "dcp.request.format"),
    (hdr("04") + [b"svc", b"", b"meta"], "REQUEST", "metadata", "dcp.request.format"),
    (hdr("05") + [b"", b"", b""], "REPLY", "client_address", "dcp.reply.format"),
    (hdr("05") + [b"cli", b"x"], "REPLY", "address_delimiter", "dcp.reply.format"),
    ([], None, None, "dcp.wire.message-type"),
    ([b""], None, None, "dcp.wire.message-type"),
]


@pytest.mark.parametrize("frames,message,field,clause", ERRORS)
def test_errors_name_message_field_and_clause(frames, message, field, clause) -> None:
    with pytest.raises(DecodeError) as e:
        codec("dcp").decode(frames)
    assert type(e.value) is DecodeError
    assert (e.value.message, e.value.field, e.value.clause) == (message, field, clause), str(e.value)
    assert not e.value.internal


def test_error_text_is_readable() -> None:
    with pytest.raises(DecodeError) as e:
        codec("dcp").decode([b"", b"DGBX\x07", b"\x02"])
    assert str(e.value) == "dcp [strict] PING.version (frame 1): must be 1, got 7 [clause dcp.wire.version]"
