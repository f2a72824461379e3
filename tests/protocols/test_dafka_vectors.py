"""Dafka golden vectors: every message of both dialects as exact hex frames, both directions,
every wire fact of INTEROP.md's Dafka section, and the errors the document's rules (as settled
by docs/errata.md) produce, each with the message, field and clause it names."""

from __future__ import annotations

import pytest

from harness.protocols import ConformanceError, DecodeError, EncodeError, catalogue, codec
from harness.protocols.codec import Message
from harness.protocols.dafka import (
    COMMAND_IDS, TOPIC_RULES, Subscription, matches, parse_subscription, subscription,
)


def H(*frames: str) -> list[bytes]:
    """Frames written as hex (spaces allowed)."""
    return [bytes.fromhex(f) for f in frames]


def strict() -> object:
    return codec("dafka")


def zproto() -> object:
    return codec("dafka", "dafka:zproto")


# Addresses used below: producer/partition "P1" (50 31), consumer "C9" (43 39), store "S7"
# (53 37); topic "foo" (66 6f 6f). A realistic node address is zuuid_str: 32 uppercase hex.
UUID = "0123456789ABCDEF0123456789ABCDEF"
UUID_HEX = UUID.encode().hex()

# ---- strict: topic frame, body (AA A5, id, 01, fields), content frame -------------------------

STRICT = [
    # RECORD: topic = topic name; body = address (producer), subject, sequence; content frame
    ("RECORD", {"topic": "foo", "version": 1, "address": "P1", "subject": "foo", "sequence": 5, "content": b"hi"},
     H("4d 666f6f",
       "aaa5 4d 01 02 5031 03 666f6f 0000000000000005",
       "6869")),
    # empty content ("zero or more octets"), empty topic, sequence byte order (big-endian)
    ("RECORD", {"topic": "", "version": 1, "address": "P1", "subject": "", "sequence": 0x0102030405060708,
                "content": b""},
     H("4d",
       "aaa5 4d 01 02 5031 00 0102030405060708",
       "")),
    # any octets in topic, strings and content survive (E-DAFKA-10): space, 0xff, NUL
    ("RECORD", {"topic": "a b\udcff\x00", "version": 1, "address": "P\udcfe", "subject": "a b\udcff\x00",
                "sequence": 1, "content": b"\x00\xff"},
     H("4d 612062ff00",
       "aaa5 4d 01 02 50fe 05 612062ff00 0000000000000001",
       "00ff")),
    # a realistic producer address: zuuid_str, 32 uppercase hex digits
    ("RECORD", {"topic": "foo", "version": 1, "address": UUID, "subject": "foo", "sequence": 2**64 - 1,
                "content": b"x"},
     H("4d 666f6f",
       f"aaa5 4d 01 20 {UUID_HEX} 03 666f6f ffffffffffffffff",
       "78")),
    # DIRECT-RECORD: topic = requestor's address (E-DAFKA-07)
    ("DIRECT-RECORD", {"topic": "C9", "version": 1, "address": "P1", "subject": "foo", "sequence": 7,
                       "content": b"\x00\xff"},
     H("44 4339",
       "aaa5 44 01 02 5031 03 666f6f 0000000000000007",
       "00ff")),
    # FETCH: topic = partition (E-DAFKA-06); address = requestor; count number-4
    ("FETCH", {"topic": "P1", "version": 1, "address": "C9", "subject": "foo", "sequence": 3, "count": 4},
     H("46 5031",
       "aaa5 46 01 02 4339 03 666f6f 0000000000000003 00000004")),
    ("FETCH", {"topic": "P1", "version": 1, "address": "S7", "subject": "foo", "sequence": 0, "count": 0x01020304},
     H("46 5031",
       "aaa5 46 01 02 5337 03 666f6f 0000000000000000 01020304")),
    # ACK: topic = partition; address = the store (E-DAFKA-09)
    ("ACK", {"topic": "P1", "version": 1, "address": "S7", "subject": "foo", "sequence": 9},
     H("4b 5031",
       "aaa5 4b 01 02 5337 03 666f6f 0000000000000009")),
    # HEAD: topic = topic name (E-DAFKA-05)
    ("HEAD", {"topic": "foo", "version": 1, "address": "P1", "subject": "foo", "sequence": 12},
     H("48 666f6f",
       "aaa5 48 01 02 5031 03 666f6f 000000000000000c")),
    # DIRECT-HEAD: topic = requestor's address (E-DAFKA-08)
    ("DIRECT-HEAD", {"topic": "C9", "version": 1, "address": "P1", "subject": "foo", "sequence": 12},
     H("45 4339",
       "aaa5 45 01 02 5031 03 666f6f 000000000000000c")),
    # GET-HEADS: topic = topic name; address = the consumer
    ("GET-HEADS", {"topic": "foo", "version": 1, "address": "C9"},
     H("47 666f6f",
       "aaa5 47 01 02 4339")),
    # CONSUMER-HELLO: topic = the store's address; subjects = 4-byte count, 4-byte lengths
    ("CONSUMER-HELLO", {"topic": "S7", "version": 1, "address": "C9", "subjects": ["foo", "ba"]},
     H("57 5337",
       "aaa5 57 01 02 4339 00000002 00000003 666f6f 00000002 6261")),
    ("CONSUMER-HELLO", {"topic": "S7", "version": 1, "address": "C9", "subjects": []},
     H("57 5337",
       "aaa5 57 01 02 4339 00000000")),
    ("CONSUMER-HELLO", {"topic": "S7", "version": 1, "address": "C9", "subjects": [""]},
     H("57 5337",
       "aaa5 57 01 02 4339 00000001 00000000")),
    # STORE-HELLO: topic = the consumer's address; address = the store
    ("STORE-HELLO", {"topic": "C9", "version": 1, "address": "S7"},
     H("4c 4339",
       "aaa5 4c 01 02 5337")),
]

# ---- tower discovery: the same in both modes (E-DAFKA-13) -------------------------------------

TOWER = [
    # node -> tower: ["B", sender, host, port as decimal]; nodes bind ephemeral ports
    ("BEACON", {"sender": UUID, "host": "127.0.0.1", "port": 54321},
     H("42", UUID_HEX, "3132372e302e302e31", "3534333231")),
    ("BEACON", {"sender": "P1", "host": "node-a", "port": 0},
     H("42", "5031", "6e6f64652d61", "30")),
    # tower -> nodes: ["B", sender, "tcp://host:port"]
    ("TOWER-BEACON", {"sender": UUID, "endpoint": "tcp://127.0.0.1:54321"},
     H("42", UUID_HEX, "7463703a2f2f3132372e302e302e313a3534333231")),
    ("TOWER-BEACON", {"sender": "P1", "endpoint": "tcp://::1:5556"},
     H("42", "5031", "7463703a2f2f3a3a313a35353536")),
    # tower -> new subscriber: the XPUB welcome message, one frame "W"
    ("TOWER-WELCOME", {}, H("57")),
]


# ---- dafka:zproto: [id][topic][00][01][fields] (+ content frame) ------------------------------

ZPROTO = [
    ("RECORD", {"topic": "foo", "version": 1, "address": "P1", "subject": "foo", "sequence": 5, "content": b"hi"},
     H("4d 666f6f 00 01 02 5031 03 666f6f 0000000000000005",
       "6869")),
    ("RECORD", {"topic": "", "version": 1, "address": "P1", "subject": "", "sequence": 0x0102030405060708,
                "content": b""},
     H("4d 00 01 02 5031 00 0102030405060708",
       "")),
    ("DIRECT-RECORD", {"topic": "C9", "version": 1, "address": "P1", "subject": "foo", "sequence": 7,
                       "content": b"\x00\xff"},
     H("44 4339 00 01 02 5031 03 666f6f 0000000000000007",
       "00ff")),
    ("FETCH", {"topic": "P1", "version": 1, "address": "C9", "subject": "foo", "sequence": 3, "count": 4},
     H("46 5031 00 01 02 4339 03 666f6f 0000000000000003 00000004")),
    # ACK: only subject and sequence; topic = the producer's address
    ("ACK", {"topic": "P1", "version": 1, "subject": "foo", "sequence": 9},
     H("4b 5031 00 01 03 666f6f 0000000000000009")),
    ("HEAD", {"topic": "foo", "version": 1, "address": "P1", "subject": "foo", "sequence": 12},
     H("48 666f6f 00 01 02 5031 03 666f6f 000000000000000c")),
    ("DIRECT-HEAD", {"topic": "C9", "version": 1, "address": "P1", "subject": "foo", "sequence": 12},
     H("45 4339 00 01 02 5031 03 666f6f 000000000000000c")),
    ("GET-HEADS", {"topic": "foo", "version": 1, "address": "C9"},
     H("47 666f6f 00 01 02 4339")),
    ("CONSUMER-HELLO", {"topic": "S7", "version": 1, "address": "C9", "subjects": ["foo", "ba"]},
     H("57 5337 00 01 02 4339 00000002 00000003 666f6f 00000002 6261")),
    ("CONSUMER-HELLO", {"topic": "S7", "version": 1, "address": "C9", "subjects": []},
     H("57 5337 00 01 02 4339 00000000")),
    ("STORE-HELLO", {"topic": "C9", "version": 1, "address": "S7"},
     H("4c 4339 00 01 02 5337")),
    # a realistic address in the topic and the body
    ("STORE-HELLO", {"topic": UUID, "version": 1, "address": UUID},
     H(f"4c {UUID_HEX} 00 01 20 {UUID_HEX}")),
]

COMMANDS = tuple(COMMAND_IDS)
ALL_NAMES = COMMANDS + ("BEACON", "TOWER-BEACON", "TOWER-WELCOME")


def _ids(vectors: list) -> list[str]:
    return [f"{i}-{v[0]}" for i, v in enumerate(vectors)]


# ---- both directions --------------------------------------------------------------------------


@pytest.mark.parametrize("name,fields,frames", STRICT + TOWER, ids=_ids(STRICT + TOWER))
def test_strict_vectors_both_directions(name: str, fields: dict, frames: list[bytes]) -> None:
    c = strict()
    assert c.encode(name, fields) == frames
    assert c.decode(frames) == Message(name, fields)


@pytest.mark.parametrize("name,fields,frames", ZPROTO + TOWER, ids=_ids(ZPROTO + TOWER))
def test_zproto_vectors_both_directions(name: str, fields: dict, frames: list[bytes]) -> None:
    z = zproto()
    assert z.encode(name, fields) == frames
    assert z.decode(frames) == Message(name, fields)


@pytest.mark.parametrize("name,fields,frames", STRICT + TOWER, ids=_ids(STRICT + TOWER))
def test_strict_vectors_decode_on_their_channel(name: str, fields: dict, frames: list[bytes]) -> None:
    channel = {"BEACON": "to-tower", "TOWER-BEACON": "from-tower", "TOWER-WELCOME": "from-tower"}.get(name, "peer")
    assert strict().decode(frames, channel=channel) == Message(name, fields)
    assert strict().decode(frames, as_=name) == Message(name, fields)


def test_vectors_cover_every_message_of_both_dialects() -> None:
    assert {v[0] for v in STRICT + TOWER} == set(ALL_NAMES) == set(strict().messages)
    assert {v[0] for v in ZPROTO + TOWER} == set(ALL_NAMES) == set(zproto().messages)


def test_message_table_frames_per_dialect() -> None:
    """Frame counts: strict 2 (3 with content); zproto 1 (2 with content); tower 4/3/1."""
    expected_strict = {n: 3 if n in ("RECORD", "DIRECT-RECORD") else 2 for n in COMMANDS}
    expected_zproto = {n: 2 if n in ("RECORD", "DIRECT-RECORD") else 1 for n in COMMANDS}
    tower = {"BEACON": 4, "TOWER-BEACON": 3, "TOWER-WELCOME": 1}
    assert {n: len(strict().encode(n)) for n in ALL_NAMES} == {**expected_strict, **tower}
    assert {n: len(zproto().encode(n)) for n in ALL_NAMES} == {**expected_zproto, **tower}


def test_defaults_encode_a_valid_message() -> None:
    assert strict().encode("GET-HEADS") == H("47", "aaa5 47 01 00")
    assert zproto().encode("GET-HEADS") == H("47 00 01 00")


# ---- strict decoding of zproto bytes: a conformance finding naming the dialect ----------------

# What strict decoding reports about the zproto bytes (message, field, clause): the zproto
# first frame is taken as the topic frame, so the body frame (or the content frame) is missing.
ZPROTO_AS_STRICT = {
    "RECORD": ("RECORD", "content", "dafka.wire.single-frame-content"),
    "DIRECT-RECORD": ("DIRECT-RECORD", "content", "dafka.wire.single-frame-content"),
    **{n: (n, "version", "dafka.wire.grammar")
       for n in ("FETCH", "ACK", "HEAD", "DIRECT-HEAD", "GET-HEADS", "CONSUMER-HELLO", "STORE-HELLO")},
}


@pytest.mark.parametrize("name,fields,frames", ZPROTO, ids=_ids(ZPROTO))
def test_strict_decoding_of_zproto_bytes_is_a_conformance_error(name: str, fields: dict, frames: list[bytes]) -> None:
    with pytest.raises(ConformanceError) as e:
        strict().decode(frames)
    assert e.value.dialects == ["dafka:zproto"]
    assert e.value.decoded == Message(name, fields)
    assert (e.value.message, e.value.field, e.value.clause) == ZPROTO_AS_STRICT[name], str(e.value)
    assert "dafka:zproto" in str(e.value)
    assert not e.value.internal
    # ... and on the peer channel too
    with pytest.raises(ConformanceError):
        strict().decode(frames, channel="peer")


@pytest.mark.parametrize("name,fields,frames", STRICT, ids=_ids(STRICT))
def test_zproto_decoding_of_strict_bytes_fails(name: str, fields: dict, frames: list[bytes]) -> None:
    with pytest.raises(DecodeError) as e:
        zproto().decode(frames)
    assert type(e.value) is DecodeError
    assert e.value.message == name
    assert e.value.dialect == "dafka:zproto"


# ---- INTEROP facts ----------------------------------------------------------------------------


@pytest.mark.parametrize("name,fields,frames", ZPROTO, ids=_ids(ZPROTO))
def test_interop_no_signature_in_zproto(name: str, fields: dict, frames: list[bytes]) -> None:
    assert b"\xaa\xa5" not in frames[0] and b"\xaa\xa0" not in frames[0]
    # the strict body carries it right at the start
    s = strict().encode(name, fields)
    assert s[1][:2] == b"\xaa\xa5"


@pytest.mark.parametrize("name,fields,frames", ZPROTO, ids=_ids(ZPROTO))
def test_interop_first_frame_layout(name: str, fields: dict, frames: list[bytes]) -> None:
    """[command id, one ASCII byte][topic bytes][0x00][version 0x01][fields...]."""
    first = frames[0]
    topic = fields["topic"].encode("utf-8", "surrogateescape")
    assert first[:1] == COMMAND_IDS[name]
    assert first[1 : 1 + len(topic)] == topic
    assert first[1 + len(topic)] == 0x00
    assert first[2 + len(topic)] == 0x01
    # the rest of the frame is the body fields: the strict body after signature, id, version
    # (for ACK also after the strict address field, here 02 "S7")
    rest = first[3 + len(topic):]
    if name == "ACK":
        body = strict().encode(name, {**fields, "address": "S7"})[1]
        assert body[4:7] == b"\x02S7" and rest == body[7:]
    else:
        assert rest == strict().encode(name, fields)[1][4:]


@pytest.mark.parametrize("name", COMMANDS)
def test_interop_ids_are_uppercase_ascii(name: str) -> None:
    cid = COMMAND_IDS[name]
    assert len(cid) == 1 and cid.isupper() and cid.isascii()
    s, z = strict().encode(name), zproto().encode(name)
    assert s[0][:1] == cid and s[1][2:3] == cid  # topic frame and body agree
    assert z[0][:1] == cid


def test_interop_id_letters() -> None:
    assert COMMAND_IDS == {"RECORD": b"M", "DIRECT-RECORD": b"D", "FETCH": b"F", "ACK": b"K", "HEAD": b"H",
                           "DIRECT-HEAD": b"E", "GET-HEADS": b"G", "CONSUMER-HELLO": b"W", "STORE-HELLO": b"L"}


@pytest.mark.parametrize("dialect", ["strict", "dafka:zproto"])
@pytest.mark.parametrize("name", ["RECORD", "DIRECT-RECORD"])
def test_interop_content_is_a_separate_last_frame(dialect: str, name: str) -> None:
    frames = codec("dafka", dialect).encode(name, topic="t", address="a", subject="t", sequence=1,
                                            content=b"\x00content\x00")
    assert frames[-1] == b"\x00content\x00"
    assert all(b"content" not in f for f in frames[:-1])


def test_interop_string_encodings() -> None:
    """string = 1-byte length + bytes, no terminator; strings = 4-byte count + 4-byte lengths."""
    z = zproto()
    f = z.encode("CONSUMER-HELLO", topic="", address="abc", subjects=["x", "yz"])[0]
    assert f == H("57 00 01 03 616263 00000002 00000001 78 00000002 797a")[0]
    # a 255-octet string is the longest a 1-byte length can carry (E-DAFKA-11) ...
    long = "s" * 255
    s = strict().encode("GET-HEADS", topic="t", address=long)
    assert s[1] == b"\xaa\xa5G\x01\xff" + long.encode()
    assert strict().decode(s)["address"] == long
    # ... while a longstr in subjects may be longer
    hello = strict().encode("CONSUMER-HELLO", topic="S7", address="C9", subjects=["t" * 300])
    assert hello[1][7:15] == H("00000001 0000012c")[0]
    assert strict().decode(hello)["subjects"] == ["t" * 300]


@pytest.mark.parametrize("dialect", ["strict", "dafka:zproto"])
def test_interop_numbers_are_big_endian(dialect: str) -> None:
    frames = codec("dafka", dialect).encode("FETCH", topic="", address="", subject="", sequence=0x0102030405060708,
                                            count=0x0A0B0C0D)
    body = frames[-1]
    assert body.endswith(H("0102030405060708 0a0b0c0d")[0])


def test_interop_ack_has_only_subject_and_sequence_in_zproto() -> None:
    z = zproto()
    assert list(z.decode(H("4b 5031 00 01 03 666f6f 0000000000000009")).fields) == ["topic", "version", "subject",
                                                                                    "sequence"]
    with pytest.raises(EncodeError) as e:
        z.encode("ACK", topic="P1", address="S7", subject="foo", sequence=9)
    assert e.value.field == "address"
    # strict ACK carries the store's address (E-DAFKA-09)
    assert list(strict().decode(strict().encode("ACK")).fields) == ["topic", "version", "address", "subject",
                                                                   "sequence"]


def test_interop_default_beacon_has_an_empty_host() -> None:
    """zeromq/dafka's nodes beacon ``["B", uuid, beacon/address (default ""), port]`` and its
    tower puts the connection's address in place of an empty host: dafka:zproto takes it;
    strict keeps its decision (a node names its host) and points at the dialect."""
    beacon = H("42", UUID_HEX, "", "3534333231")
    msg = zproto().decode(beacon, channel="to-tower")
    assert (msg.name, msg["host"], msg["port"]) == ("BEACON", "", 54321)
    assert zproto().encode("BEACON", sender=UUID, host="", port=54321) == beacon
    with pytest.raises(DecodeError) as e:
        strict().decode(beacon, channel="to-tower")
    assert (e.value.message, e.value.field, e.value.clause) == ("BEACON", "host", "dafka.interconnect.address-beacon")
    assert "dafka:zproto" in str(e.value)


def test_interop_ack_topic_is_the_producer_address() -> None:
    """The ACK's topic is the partition; a producer subscribes to "K" + its own address."""
    frames = zproto().encode("ACK", topic=UUID, subject="foo", sequence=3)
    assert matches(subscription("ACK", UUID), frames)
    assert TOPIC_RULES["ACK"].clause == "dafka.wire.topic-ack"


# ---- version: 1 required -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0x00, 0x02, 0x30, 0xFF])
def test_strict_version_other_than_one_is_rejected(version: int) -> None:
    frames = H("48 666f6f", f"aaa5 48 {version:02x} 02 5031 03 666f6f 000000000000000c")
    with pytest.raises(DecodeError) as e:
        strict().decode(frames)
    assert type(e.value) is DecodeError
    assert (e.value.message, e.value.field, e.value.clause) == ("HEAD", "version", "dafka.wire.version")
    assert e.value.frame == 1
    assert e.value.reason == f"must be 1, got {version}"


@pytest.mark.parametrize("version", [0x00, 0x02, 0x30, 0xFF])
def test_zproto_version_other_than_one_is_rejected(version: int) -> None:
    frames = H(f"48 666f6f 00 {version:02x} 02 5031 03 666f6f 000000000000000c")
    with pytest.raises(DecodeError) as e:
        zproto().decode(frames)
    assert (e.value.message, e.value.field, e.value.clause) == ("HEAD", "version", "dafka.wire.version")
    # the strict codec reports the strict reading (not a ConformanceError: zproto rejects it too)
    with pytest.raises(DecodeError) as e:
        strict().decode(frames)
    assert type(e.value) is DecodeError


def test_version_missing_names_the_version_field() -> None:
    with pytest.raises(DecodeError) as e:
        strict().decode(H("47 666f6f", "aaa5 47"))
    assert (e.value.message, e.value.field, e.value.clause) == ("GET-HEADS", "version", "dafka.wire.version")


def test_encoding_another_version_is_possible_for_fault_injection_and_is_rejected_on_decode() -> None:
    frames = strict().encode("STORE-HELLO", topic="C9", version=2, address="S7")
    assert frames == H("4c 4339", "aaa5 4c 02 02 5337")
    with pytest.raises(EncodeError) as e:
        strict().validate("STORE-HELLO", {"topic": "C9", "version": 2, "address": "S7"})
    assert e.value.field == "version"


def test_error_text_is_readable() -> None:
    with pytest.raises(DecodeError) as e:
        strict().decode(H("4c 4339", "aaa5 4c 07 02 5337"))
    assert str(e.value) == "dafka [strict] STORE-HELLO.version (frame 1): must be 1, got 7 [clause dafka.wire.version]"


# ---- errors: each names message, field and clause ----------------------------------------------

S_ERRORS = [
    # (id, frames, message, field, clause)
    # wrong signature: the document's ZRE-copied AA A0 (E-DAFKA-01), ZRE's own AA A1, swapped, none
    ("sig-aaa0", H("4d 666f6f", "aaa0 4d 01 02 5031 03 666f6f 0000000000000005", "6869"),
     "RECORD", "signature", "dafka.wire.signature"),
    ("sig-aaa1", H("48 666f6f", "aaa1 48 01 02 5031 03 666f6f 000000000000000c"),
     "HEAD", "signature", "dafka.wire.signature"),
    ("sig-a5aa", H("4c 4339", "a5aa 4c 01 02 5337"), "STORE-HELLO", "signature", "dafka.wire.signature"),
    ("sig-missing", H("4c 4339", "4c 01 02 5337"), "STORE-HELLO", "signature", "dafka.wire.signature"),
    ("sig-empty-body", H("4c 4339", ""), "STORE-HELLO", "signature", "dafka.wire.signature"),
    # topic-frame id and body id differ (E-DAFKA-03)
    ("id-mismatch", H("48 666f6f", "aaa5 4d 01 02 5031 03 666f6f 0000000000000005"),
     "HEAD", "id", "dafka.wire.grammar"),
    ("id-mismatch-case", H("4c 4339", "aaa5 6c 01 02 5337"), "STORE-HELLO", "id", "dafka.wire.grammar"),
    # unknown or lowercase command id in the topic frame (E-DAFKA-22)
    ("unknown-id", H("58 666f6f", "aaa5 58 01 02 5031"), None, None, "dafka.wire.grammar"),
    ("lowercase-id", H("6d 666f6f", "aaa5 6d 01 02 5031 03 666f6f 0000000000000005", "6869"),
     None, None, "dafka.wire.grammar"),
    # the body sent as the first frame: there is no topic frame
    ("body-first", H("aaa5 4c 01 02 5337", "4c 4339"), None, None, "dafka.wire.grammar"),
    ("empty-first-frame", H("", "aaa5 4c 01 02 5337"), None, None, "dafka.wire.grammar"),
    ("no-frames", [], None, None, "dafka.wire.grammar"),
    # truncated strings: the length byte points beyond the frame
    ("trunc-address", H("48 666f6f", "aaa5 48 01 10 5031"), "HEAD", "address", "dafka.wire.grammar"),
    ("trunc-subject", H("48 666f6f", "aaa5 48 01 02 5031 09 666f6f"), "HEAD", "subject", "dafka.wire.grammar"),
    ("no-length-byte", H("47 666f6f", "aaa5 47 01"), "GET-HEADS", "address", "dafka.wire.grammar"),
    ("trunc-sequence", H("48 666f6f", "aaa5 48 01 02 5031 03 666f6f 0000000c"), "HEAD", "sequence",
     "dafka.wire.grammar"),
    ("trunc-count", H("46 5031", "aaa5 46 01 02 4339 03 666f6f 0000000000000003 0004"), "FETCH", "count",
     "dafka.wire.grammar"),
    ("trunc-longstr", H("57 5337", "aaa5 57 01 02 4339 00000001 00000009 666f6f"), "CONSUMER-HELLO", "subjects",
     "dafka.wire.grammar"),
    ("subjects-count-too-big", H("57 5337", "aaa5 57 01 02 4339 ffffffff"), "CONSUMER-HELLO", "subjects",
     "dafka.wire.grammar"),
    ("subjects-missing", H("57 5337", "aaa5 57 01 02 4339"), "CONSUMER-HELLO", "subjects", "dafka.wire.grammar"),
    # trailing bytes after the last field: the last field is named
    ("trailing-head", H("48 666f6f", "aaa5 48 01 02 5031 03 666f6f 000000000000000c 00"), "HEAD", "sequence",
     "dafka.wire.grammar"),
    ("trailing-get-heads", H("47 666f6f", "aaa5 47 01 02 4339 ff"), "GET-HEADS", "address", "dafka.wire.grammar"),
    ("trailing-hello", H("57 5337", "aaa5 57 01 02 4339 00000000 00"), "CONSUMER-HELLO", "subjects",
     "dafka.wire.grammar"),
    # missing content frame (RECORD/DIRECT-RECORD: the message clause is the single-frame one)
    ("missing-content", H("4d 666f6f", "aaa5 4d 01 02 5031 03 666f6f 0000000000000005"), "RECORD", "content",
     "dafka.wire.single-frame-content"),
    ("missing-content-direct", H("44 4339", "aaa5 44 01 02 5031 03 666f6f 0000000000000007"), "DIRECT-RECORD",
     "content", "dafka.wire.single-frame-content"),
    # multi-frame content
    ("two-content-frames", H("4d 666f6f", "aaa5 4d 01 02 5031 03 666f6f 0000000000000005", "6869", "6869"),
     "RECORD", None, "dafka.wire.single-frame-content"),
    ("three-content-frames", H("44 4339", "aaa5 44 01 02 5031 03 666f6f 0000000000000007", "", "", ""),
     "DIRECT-RECORD", None, "dafka.wire.single-frame-content"),
    # extra frame on a command without content; missing body
    ("extra-frame-head", H("48 666f6f", "aaa5 48 01 02 5031 03 666f6f 000000000000000c", "6869"), "HEAD", None,
     "dafka.wire.grammar"),
    ("extra-frame-hello", H("4c 4339", "aaa5 4c 01 02 5337", ""), "STORE-HELLO", None, "dafka.wire.grammar"),
    ("missing-body", H("4c 4339"), "STORE-HELLO", "version", "dafka.wire.grammar"),
    # "W" plus something else is neither a welcome nor a CONSUMER-HELLO
    ("welcome-with-extra-frame", H("57", "aa"), "CONSUMER-HELLO", "signature", "dafka.wire.signature"),
]


@pytest.mark.parametrize("frames,message,field,clause", [e[1:] for e in S_ERRORS], ids=[e[0] for e in S_ERRORS])
def test_strict_errors_name_message_field_and_clause(frames, message, field, clause) -> None:
    with pytest.raises(DecodeError) as e:
        strict().decode(frames)
    assert type(e.value) is DecodeError, str(e.value)
    assert (e.value.message, e.value.field, e.value.clause) == (message, field, clause), str(e.value)
    assert e.value.dialect == "strict" and e.value.protocol == "dafka"
    assert not e.value.internal
    assert e.value.clause in catalogue("dafka")


# Tower messages, decoded on their channel (without one, BEACON and TOWER-BEACON share the key
# "B" and the first candidate's error is reported, see test_beacon_and_tower_beacon_...).
TOWER_ERRORS = [
    ("beacon-port-leading-zero", "to-tower", H("42", "5031", "6e6f6465", "3035353536"), "BEACON", "port",
     "dafka.interconnect.address-beacon"),
    ("beacon-port-too-big", "to-tower", H("42", "5031", "6e6f6465", "3635353336"), "BEACON", "port",
     "dafka.interconnect.address-beacon"),
    ("beacon-port-not-decimal", "to-tower", H("42", "5031", "6e6f6465", "2d31"), "BEACON", "port",
     "dafka.interconnect.address-beacon"),
    ("beacon-empty-sender", "to-tower", H("42", "", "6e6f6465", "35353536"), "BEACON", "sender",
     "dafka.interconnect.address-beacon"),
    ("beacon-one-frame", "to-tower", H("42"), "BEACON", "sender", "dafka.interconnect.address-beacon"),
    ("beacon-five-frames", "to-tower", H("42", "5031", "68", "31", "32"), "BEACON", None,
     "dafka.interconnect.address-beacon"),
    ("tower-beacon-not-tcp", "from-tower", H("42", "5031", "7564703a2f2f683a31"), "TOWER-BEACON", "endpoint",
     "dafka.interconnect.address-beacon"),
    ("tower-beacon-no-port", "from-tower", H("42", "5031", "7463703a2f2f68"), "TOWER-BEACON", "endpoint",
     "dafka.interconnect.address-beacon"),
    ("tower-beacon-port-too-big", "from-tower", H("42", "5031", "7463703a2f2f683a3939393939"), "TOWER-BEACON",
     "endpoint", "dafka.interconnect.address-beacon"),
    ("tower-beacon-not-utf8", "from-tower", H("42", "5031", "7463703a2f2f ff 3a31"), "TOWER-BEACON", "endpoint",
     "dafka.interconnect.address-beacon"),
    ("welcome-not-w", "from-tower", H("58"), None, None, "dafka.wire.grammar"),
    ("welcome-extra-frame", "from-tower", H("57", ""), "TOWER-WELCOME", None,
     "dafka.interconnect.tower-sub-connect"),
]


@pytest.mark.parametrize("channel,frames,message,field,clause", [e[1:] for e in TOWER_ERRORS],
                         ids=[e[0] for e in TOWER_ERRORS])
@pytest.mark.parametrize("dialect", ["strict", "dafka:zproto"])
def test_tower_errors_name_message_field_and_clause(dialect, channel, frames, message, field, clause) -> None:
    with pytest.raises(DecodeError) as e:
        codec("dafka", dialect).decode(frames, channel=channel)
    assert type(e.value) is DecodeError, str(e.value)
    assert (e.value.message, e.value.field, e.value.clause) == (message, field, clause), str(e.value)
    assert not e.value.internal


Z_ERRORS = [
    ("no-nul", H("48 666f6f"), "HEAD", "topic", "dafka.wire.topic-frame"),
    ("trunc-address", H("48 666f6f 00 01 10 5031"), "HEAD", "address", "dafka.wire.grammar"),
    ("trunc-subject", H("4b 5031 00 01 09 666f6f"), "ACK", "subject", "dafka.wire.grammar"),
    ("trunc-sequence", H("4b 5031 00 01 03 666f6f 0009"), "ACK", "sequence", "dafka.wire.grammar"),
    ("trunc-longstr", H("57 5337 00 01 02 4339 00000001 00000009 666f6f"), "CONSUMER-HELLO", "subjects",
     "dafka.wire.grammar"),
    ("version-missing", H("4c 4339 00"), "STORE-HELLO", "version", "dafka.wire.version"),
    ("trailing", H("4b 5031 00 01 03 666f6f 0000000000000009 00"), "ACK", "sequence", "dafka.wire.grammar"),
    # the strict ACK body (with address) in the zproto layout: the address reads as the subject
    ("ack-with-address", H("4b 5031 00 01 02 5337 03 666f6f 0000000000000009"), "ACK", "sequence",
     "dafka.wire.grammar"),
    ("missing-content", H("4d 666f6f 00 01 02 5031 03 666f6f 0000000000000005"), "RECORD", "content",
     "dafka.wire.single-frame-content"),
    ("two-content-frames", H("4d 666f6f 00 01 02 5031 03 666f6f 0000000000000005", "68", "69"), "RECORD", None,
     "dafka.wire.single-frame-content"),
    ("extra-frame", H("4c 4339 00 01 02 5337", "00"), "STORE-HELLO", None, "dafka.wire.grammar"),
    ("unknown-id", H("58 666f6f 00 01 02 5031"), None, None, "dafka.wire.grammar"),
    ("signature-first", H("aaa5 4c 4339 00 01 02 5337"), None, None, "dafka.wire.grammar"),
]


@pytest.mark.parametrize("frames,message,field,clause", [e[1:] for e in Z_ERRORS], ids=[e[0] for e in Z_ERRORS])
def test_zproto_errors_name_message_field_and_clause(frames, message, field, clause) -> None:
    with pytest.raises(DecodeError) as e:
        zproto().decode(frames)
    assert (e.value.message, e.value.field, e.value.clause) == (message, field, clause), str(e.value)
    assert e.value.dialect == "dafka:zproto"
    assert not e.value.internal


def test_truncated_string_reason_says_how_far_the_length_points() -> None:
    with pytest.raises(DecodeError) as e:
        strict().decode(H("48 666f6f", "aaa5 48 01 10 5031"))
    assert e.value.reason == "length byte says 16 byte(s), only 2 left"
    assert e.value.frame == 1


def test_id_mismatch_is_reported_on_the_body_frame() -> None:
    with pytest.raises(DecodeError) as e:
        strict().decode(H("48 666f6f", "aaa5 4d 01 02 5031 03 666f6f 0000000000000005"))
    assert e.value.frame == 1
    assert e.value.reason == "expected b'H' at byte 2, got b'M'"


def test_topic_frame_id_checked_when_the_message_is_named() -> None:
    with pytest.raises(DecodeError) as e:
        strict().decode(H("48 666f6f", "aaa5 4d 01 02 5031 03 666f6f 0000000000000005", "6869"), as_="RECORD")
    assert (e.value.message, e.value.field, e.value.clause, e.value.frame) == (
        "RECORD", "id", "dafka.wire.topic-frame", 0)


# ---- telling apart messages that share a key ---------------------------------------------------


def test_welcome_and_consumer_hello_share_w() -> None:
    c = strict()
    assert c.decode([b"W"]) == Message("TOWER-WELCOME", {})
    assert c.decode([b"W"], channel="from-tower") == Message("TOWER-WELCOME", {})
    hello = c.encode("CONSUMER-HELLO", topic="S7", address="C9", subjects=["foo"])
    assert c.decode(hello).name == "CONSUMER-HELLO"
    # on the peer channel a lone "W" is a broken CONSUMER-HELLO (its body is missing)
    with pytest.raises(DecodeError) as e:
        c.decode([b"W"], channel="peer")
    assert (e.value.message, e.value.field, e.value.clause) == ("CONSUMER-HELLO", "version", "dafka.wire.grammar")
    # and a hello on the tower channel is not a welcome (the welcome is exactly the frame "W")
    with pytest.raises(DecodeError) as e:
        c.decode(hello, channel="from-tower")
    assert (e.value.message, e.value.field, e.value.clause) == (None, None, "dafka.wire.grammar")


def test_beacon_and_tower_beacon_differ_by_frame_count_and_channel() -> None:
    c = strict()
    node = H("42", "5031", "68", "35353536")
    tower = H("42", "5031", "7463703a2f2f683a35353536")
    assert c.decode(node).name == "BEACON"
    assert c.decode(tower).name == "TOWER-BEACON"
    assert c.decode(node, channel="to-tower").name == "BEACON"
    assert c.decode(tower, channel="from-tower").name == "TOWER-BEACON"
    with pytest.raises(DecodeError) as e:
        c.decode(tower, channel="to-tower")
    assert (e.value.message, e.value.field, e.value.clause) == ("BEACON", "port", "dafka.interconnect.address-beacon")
    with pytest.raises(DecodeError) as e:
        c.decode(node, channel="from-tower")
    assert (e.value.message, e.value.field, e.value.clause) == ("TOWER-BEACON", None,
                                                                "dafka.interconnect.address-beacon")
    with pytest.raises(DecodeError) as e:
        c.decode(node, channel="peer")
    assert (e.value.message, e.value.field, e.value.clause) == (None, None, "dafka.wire.grammar")


def test_beacon_is_not_a_dafka_command() -> None:
    """E-DAFKA-13: no signature, version or topic frame in beacons, in either mode."""
    for c in (strict(), zproto()):
        frames = c.encode("BEACON", sender=UUID, host="10.0.0.2", port=40000)
        assert frames == [b"B", UUID.encode(), b"10.0.0.2", b"40000"]
        assert c.encode("TOWER-WELCOME") == [b"W"]


# ---- encoding errors ---------------------------------------------------------------------------


def test_string_longer_than_255_octets_cannot_be_encoded() -> None:
    """E-DAFKA-11: the encoder refuses it with an error naming the field."""
    for c in (strict(), zproto()):
        with pytest.raises(EncodeError) as e:
            c.encode("HEAD", topic="t", address="P1", subject="t" * 256, sequence=0)
        assert e.value.field == "subject"


def test_zproto_topic_cannot_hold_a_nul_but_strict_can() -> None:
    with pytest.raises(EncodeError) as e:
        zproto().encode("RECORD", topic="a\x00b")
    assert e.value.field == "topic"
    assert strict().encode("RECORD", topic="a\x00b")[0] == b"Ma\x00b"


def test_bad_endpoint_and_port_cannot_be_encoded() -> None:
    with pytest.raises(EncodeError) as e:
        strict().encode("TOWER-BEACON", sender="P1", endpoint="127.0.0.1:5556")
    assert e.value.field == "endpoint"
    with pytest.raises(EncodeError) as e:
        strict().encode("BEACON", sender="P1", host="h", port=70000)
    assert e.value.field == "port"


# ---- subscriptions (INTEROP: the id byte followed by the topic, prefix match) ------------------


def test_subscription_prefix_is_id_plus_topic() -> None:
    assert subscription("RECORD", "foo") == b"Mfoo"
    assert subscription("RECORD") == b"M"  # a store: every RECORD
    assert subscription("DIRECT-RECORD", UUID) == b"D" + UUID.encode()
    assert subscription("STORE-HELLO", "C9") == b"LC9"
    assert subscription("HEAD", b"\xff") == b"H\xff"
    assert subscription("HEAD", "\udcff") == b"H\xff"
    assert subscription("BEACON") == b"B" and subscription("TOWER-WELCOME") == b"W"
    with pytest.raises(KeyError):
        subscription("NOPE")


@pytest.mark.parametrize("dialect", ["strict", "dafka:zproto"])
def test_subscription_matches_both_dialects_by_prefix(dialect: str) -> None:
    c = codec("dafka", dialect)
    rec = c.encode("RECORD", topic="foobar", address="P1", subject="foobar", sequence=0, content=b"")
    assert matches(subscription("RECORD", "foobar"), rec)
    assert matches(subscription("RECORD"), rec)
    # E-DAFKA-20: prefix matching delivers "foobar" to a "foo" subscriber; receivers compare subject
    assert matches(subscription("RECORD", "foo"), rec)
    assert not matches(subscription("HEAD", "foo"), rec)
    assert not matches(subscription("RECORD", "foobaz"), rec)
    assert not matches(b"M", [])


def test_parse_xpub_subscription_notification() -> None:
    assert parse_subscription(b"\x01LC9") == Subscription(True, "STORE-HELLO", "C9", b"LC9")
    assert parse_subscription(b"\x00Mfoo") == Subscription(False, "RECORD", "foo", b"Mfoo")
    assert parse_subscription(b"\x01M") == Subscription(True, "RECORD", "", b"M")
    assert parse_subscription(b"\x01") == Subscription(True, None, "", b"")
    assert parse_subscription(b"\x01B") == Subscription(True, None, "", b"B")
    assert parse_subscription(b"\x01H\xff") == Subscription(True, "HEAD", "\udcff", b"H\xff")


@pytest.mark.parametrize("frame", [b"", b"\x02LC9", b"LC9"])
def test_parse_subscription_rejects_non_notifications(frame: bytes) -> None:
    with pytest.raises(DecodeError) as e:
        parse_subscription(frame)
    assert (e.value.message, e.value.field, e.value.clause) == (None, "subscription", "dafka.subscription.register")


# ---- the table's own bookkeeping ---------------------------------------------------------------


def test_topic_rules_cover_every_command_and_name_catalogued_clauses() -> None:
    assert set(TOPIC_RULES) == set(COMMANDS)
    cat = catalogue("dafka")
    assert all(r.clause in cat for r in TOPIC_RULES.values())


def test_channels() -> None:
    t = strict().table
    assert {m.name: m.channels for m in t.messages} == {
        **{n: ("peer",) for n in COMMANDS},
        "BEACON": ("to-tower",), "TOWER-BEACON": ("from-tower",), "TOWER-WELCOME": ("from-tower",),
    }
    assert {m.name: m.channels for m in zproto().table.messages} == {m.name: m.channels for m in t.messages}
