"""PPPP golden vectors: every message as exact hex frames, tested in both directions
(encode(fields) == frames, decode(frames) == message), and the errors the document and
docs/errata.md produce, each with the message, field and clause it names.

PPPP has no public implementation (INTEROP.md), so there is only the strict table."""

from __future__ import annotations

import pytest

from harness.protocols import ConformanceError, DecodeError, EncodeError, codec, dialects
from harness.protocols.codec import Message
from harness.protocols.pppp import SeqRange

H = bytes.fromhex

GRAMMAR = "pppp.wire.grammar"
SEQ = "pppp.wire.sequence-format"
NACK = "pppp.wire.nack-range-format"
CHANNEL = "pppp.wire.channel-name"

TO_PUB = "to-publisher"
TO_SUB = "to-subscriber"

NEWS = H("6e657773")  # "news"

# (message, channel, frames, fields)
VECTORS = [
    ("SUBSCRIBE", TO_PUB, [H("016e657773")], {"channel": b"news"}),  # 0x01 "news"
    ("SUBSCRIBE", TO_PUB, [H("01")], {"channel": b""}),  # the empty subscription: all channels (E-PPPP-07)
    ("SUBSCRIBE", TO_PUB, [H("0105ff")], {"channel": b"\x05\xff"}),  # 0x05 is the first allowed byte; any bytes
    ("ACK", TO_PUB, [H("026e657773"), H("0000000000000010")], {"channel": b"news", "sequence": 16, "nacks": []}),
    ("ACK", TO_PUB,
     [H("026e657773"), H("0000000000000020"),
      H("0000000000000003" "0000000000000005"),  # 3..5 missing
      H("000000000000000a" "000000000000000a")],  # 10 missing (first = last)
     {"channel": b"news", "sequence": 32, "nacks": [(3, 5), (10, 10)]}),
    ("ACK", TO_PUB, [H("02"), H("0000000000000000")], {"channel": b"", "sequence": 0, "nacks": []}),  # nothing yet
    ("ACK", TO_PUB,
     [H("026e657773"), H("ffffffffffffffff"), H("0000000000000000" "fffffffffffffffe")],
     {"channel": b"news", "sequence": 2**64 - 1, "nacks": [(0, 2**64 - 2)]}),
    ("HEARTBEAT", TO_PUB, [H("03")], {}),
    ("HEARTBEAT", TO_SUB, [H("03")], {}),
    ("CUSTOM", TO_PUB, [H("04")], {"payload": []}),
    ("CUSTOM", TO_PUB, [H("04"), H("68656c6c6f"), H("")], {"payload": [b"hello", b""]}),  # "hello", empty
    ("PUBLISH", TO_SUB, [NEWS, H("0000000000000001"), H("7061796c6f6164")],  # "payload"
     {"channel": b"news", "sequence": 1, "payload": [b"payload"]}),
    ("PUBLISH", TO_SUB, [NEWS, H("0000000000000002")], {"channel": b"news", "sequence": 2, "payload": []}),
    ("PUBLISH", TO_SUB, [H(""), H("0000000000000003"), H(""), H("00")],
     {"channel": b"", "sequence": 3, "payload": [b"", b"\x00"]}),
    ("PUBLISH", TO_SUB, [H("05"), H("ffffffffffffffff"), H("ff")],
     {"channel": b"\x05", "sequence": 2**64 - 1, "payload": [b"\xff"]}),
]


def _ids(vectors: list) -> list[str]:
    return [f"{v[0]}-{i}" for i, v in enumerate(vectors)]


@pytest.mark.parametrize("name,channel,frames,fields", VECTORS, ids=_ids(VECTORS))
def test_encode(name: str, channel: str, frames: list[bytes], fields: dict) -> None:
    assert codec("pppp").encode(name, fields) == frames


@pytest.mark.parametrize("name,channel,frames,fields", VECTORS, ids=_ids(VECTORS))
def test_decode(name: str, channel: str, frames: list[bytes], fields: dict) -> None:
    c = codec("pppp")
    want = Message(name, fields)
    assert c.decode(frames, channel=channel) == want
    assert c.decode(frames, as_=name) == want
    # Channel names never start with a command byte, so even without the direction every valid
    # message is identified.
    assert c.decode(frames) == want


def test_nack_ranges_decode_as_named_pairs_and_encode_from_tuples_or_lists() -> None:
    c = codec("pppp")
    msg = c.decode([H("026e657773"), H("0000000000000020"), H("0000000000000003" "0000000000000005")])
    (r,) = msg["nacks"]
    assert isinstance(r, SeqRange) and (r.first, r.last) == (3, 5) and r == (3, 5)
    assert c.show(msg)["nacks"] == [[3, 5]]
    frames = [H("026e657773"), H("0000000000000020"), H("0000000000000003" "0000000000000005")]
    assert c.encode("ACK", channel=b"news", sequence=32, nacks=[[3, 5]]) == frames
    assert c.encode("ACK", channel=b"news", sequence=32, nacks=[SeqRange(3, 5)]) == frames


def test_strict_is_the_only_dialect() -> None:
    assert dialects("pppp") == ["strict"]


def test_message_directions() -> None:
    from harness.protocols.pppp import TABLES

    assert {m.name: m.channels for m in TABLES["strict"].messages} == {
        "SUBSCRIBE": (TO_PUB,), "ACK": (TO_PUB,), "HEARTBEAT": (TO_SUB, TO_PUB), "CUSTOM": (TO_PUB,),
        "PUBLISH": (TO_SUB,),
    }


# ---- errors ---------------------------------------------------------------------------------

ERRORS = [
    # (frames, decode keyword arguments, message, field, clause, frame)
    # -- SUBSCRIBE: one frame, 0x01 + channel
    ([H("016e657773"), H("")], {"channel": TO_PUB}, "SUBSCRIBE", None, GRAMMAR, None),
    ([H("01006e")], {"channel": TO_PUB}, "SUBSCRIBE", "channel", CHANNEL, 0),  # channel starts with 0x00
    ([H("01046e")], {"channel": TO_PUB}, "SUBSCRIBE", "channel", CHANNEL, 0),  # ... with 0x04
    # -- ACK: 0x02 + channel, 8-byte sequence, 16-byte NACK ranges
    ([H("026e657773")], {"channel": TO_PUB}, "ACK", "sequence", GRAMMAR, None),  # missing frame
    ([H("026e657773"), H("00000000000010")], {"channel": TO_PUB}, "ACK", "sequence", SEQ, 1),  # 7 bytes
    ([H("026e657773"), H("000000000000000010")], {"channel": TO_PUB}, "ACK", "sequence", SEQ, 1),  # 9 bytes
    ([H("026e657773"), H("")], {"channel": TO_PUB}, "ACK", "sequence", SEQ, 1),
    ([H("02036e"), H("0000000000000010")], {"channel": TO_PUB}, "ACK", "channel", CHANNEL, 0),
    ([H("026e657773"), H("0000000000000010"), H("0000000000000005" "0000000000000003")],
     {"channel": TO_PUB}, "ACK", "nacks", NACK, 2),  # first > last
    ([H("026e657773"), H("0000000000000010"), H("0000000000000003" "0000000000000005"),
      H("0000000000000007" "00000000000008")], {"channel": TO_PUB}, "ACK", "nacks", NACK, 3),  # 15 bytes
    ([H("026e657773"), H("0000000000000010"), H("0000000000000007" "000000000000000800")],
     {"channel": TO_PUB}, "ACK", "nacks", NACK, 2),  # 17 bytes
    ([H("026e657773"), H("0000000000000010"), H("0000000000000007")],
     {"channel": TO_PUB}, "ACK", "nacks", NACK, 2),  # one number, not a range
    ([H("026e657773"), H("0000000000000010"), H("")], {"channel": TO_PUB}, "ACK", "nacks", NACK, 2),
    # -- HEARTBEAT: exactly one frame, exactly 0x03
    ([H("0300")], {"channel": TO_PUB}, "HEARTBEAT", "command", GRAMMAR, 0),  # extra byte
    ([H("0300")], {"channel": TO_SUB}, "HEARTBEAT", "command", GRAMMAR, 0),
    ([H("03"), H("")], {"channel": TO_PUB}, "HEARTBEAT", None, GRAMMAR, None),  # extra frame
    # -- CUSTOM: frame 0 exactly 0x04
    ([H("0400"), H("68656c6c6f")], {"channel": TO_PUB}, "CUSTOM", "command", GRAMMAR, 0),
    # -- PUBLISH: channel, 8-byte sequence, payload; channel not starting with 0x00-0x04
    ([H("016e657773"), H("0000000000000001")], {"channel": TO_SUB}, "PUBLISH", "channel", CHANNEL, 0),
    ([H("006e657773"), H("0000000000000001")], {"channel": TO_SUB}, "PUBLISH", "channel", CHANNEL, 0),
    ([H("026e657773"), H("0000000000000001"), H("00")], {"channel": TO_SUB}, "PUBLISH", "channel", CHANNEL, 0),
    ([H("046e657773"), H("0000000000000001")], {"channel": TO_SUB}, "PUBLISH", "channel", CHANNEL, 0),
    ([NEWS, H("00000000000001")], {"channel": TO_SUB}, "PUBLISH", "sequence", SEQ, 1),  # 7 bytes
    ([NEWS, H("000000000000000001")], {"channel": TO_SUB}, "PUBLISH", "sequence", SEQ, 1),  # 9 bytes
    ([NEWS], {"channel": TO_SUB}, "PUBLISH", "sequence", GRAMMAR, None),  # missing frame
    ([], {"channel": TO_SUB}, "PUBLISH", "channel", GRAMMAR, None),
    # -- direction (E-PPPP-06): PUBLISH only to subscribers; SUBSCRIBE/ACK/CUSTOM only to the publisher
    ([NEWS, H("0000000000000001")], {"channel": TO_PUB}, None, None, GRAMMAR, None),
    ([H("016e657773")], {"channel": TO_SUB}, "PUBLISH", "sequence", GRAMMAR, None),  # read as a short PUBLISH
    ([H("04"), H("68656c6c6f")], {"channel": TO_SUB}, "PUBLISH", "channel", CHANNEL, 0),
    # -- unknown commands to the publisher: unsubscribe 0x00 (E-PPPP-07), 0x05, empty
    ([H("006e657773")], {"channel": TO_PUB}, None, None, GRAMMAR, None),
    ([H("05")], {"channel": TO_PUB}, None, None, GRAMMAR, None),
    ([H("")], {"channel": TO_PUB}, None, None, GRAMMAR, None),
    ([], {"channel": TO_PUB}, None, None, GRAMMAR, None),
    # -- naming the message
    ([H("03")], {"as_": "SUBSCRIBE"}, "SUBSCRIBE", "command", GRAMMAR, 0),
    ([H("03")], {"as_": "SYNC"}, "SYNC", None, GRAMMAR, None),  # SYNC has no wire format (E-PPPP-08)
]


@pytest.mark.parametrize("frames,kw,message,field,clause,frame", ERRORS)
def test_errors_name_message_field_and_clause(frames, kw, message, field, clause, frame) -> None:
    with pytest.raises(DecodeError) as e:
        codec("pppp").decode(frames, **kw)
    err = e.value
    assert type(err) is DecodeError, str(err)
    assert (err.message, err.field, err.clause) == (message, field, clause), str(err)
    assert err.frame == frame, str(err)
    assert not err.internal
    assert err.protocol == "pppp" and err.dialect == "strict"


def test_without_the_direction_the_candidate_whose_frame_count_fits_is_reported() -> None:
    """[0x01 "news", sequence] has a command byte but two frames: not a SUBSCRIBE (one frame), so
    the codec reports it as the PUBLISH it could be, with the channel rule it breaks."""
    with pytest.raises(DecodeError) as e:
        codec("pppp").decode([H("016e657773"), H("0000000000000001")])
    assert (e.value.message, e.value.field, e.value.clause, e.value.frame) == ("PUBLISH", "channel", CHANNEL, 0)


def test_heartbeat_byte_with_more_frames_to_a_subscriber_is_a_bad_publish() -> None:
    """E-PPPP-05: to a subscriber, a message is a HEARTBEAT only if it is exactly the one frame
    0x03, otherwise a PUBLISH -- here one whose channel starts with 0x03."""
    for kw in ({"channel": TO_SUB}, {"as_": "PUBLISH"}):
        with pytest.raises(DecodeError) as e:
            codec("pppp").decode([H("03"), H("0000000000000001")], **kw)
        assert (e.value.message, e.value.field, e.value.clause, e.value.frame) == ("PUBLISH", "channel", CHANNEL, 0)


def test_no_conformance_errors_without_dialects() -> None:
    with pytest.raises(DecodeError) as e:
        codec("pppp").decode([H("0300")])
    assert not isinstance(e.value, ConformanceError)


ENCODE_ERRORS = [
    # (message, fields, field)  -- EncodeError has no clause: it is our own output
    ("ACK", {"channel": b"news", "sequence": 9, "nacks": [(5, 3)]}, "nacks"),
    ("ACK", {"channel": b"news", "sequence": 9, "nacks": [(1, 2**64)]}, "nacks"),
    ("ACK", {"channel": b"news", "sequence": 9, "nacks": [(1, 2, 3)]}, "nacks"),
    ("ACK", {"channel": b"news", "sequence": 9, "nacks": [(True, 2)]}, "nacks"),
    ("ACK", {"channel": b"news", "sequence": 9, "nacks": (1, 2)}, "nacks"),  # a range, not a list of ranges
    ("ACK", {"channel": b"\x02news", "sequence": 9}, "channel"),
    ("SUBSCRIBE", {"channel": "news"}, "channel"),  # text, not bytes
    ("PUBLISH", {"channel": b"\x01news", "sequence": 1}, "channel"),
    ("PUBLISH", {"channel": b"news", "sequence": -1}, "sequence"),
    ("PUBLISH", {"channel": b"news", "sequence": 1, "payload": ["text"]}, "payload"),
]


@pytest.mark.parametrize("name,fields,field", ENCODE_ERRORS)
def test_encode_errors_name_message_and_field(name: str, fields: dict, field: str) -> None:
    with pytest.raises(EncodeError) as e:
        codec("pppp").encode(name, fields)
    assert (e.value.message, e.value.field) == (name, field), str(e.value)
