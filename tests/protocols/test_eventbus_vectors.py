"""Event BUS golden vectors: every message of both dialects as exact hex frames, tested in both
directions (encode(fields) == frames, decode(frames) == message); the INTEROP.md facts of the
micro-toolkit dialect; and the errors the document and docs/errata.md produce, each
with the message, field and clause it names."""

from __future__ import annotations

import pytest

from harness.protocols import ConformanceError, DecodeError, EncodeError, codec
from harness.protocols.codec import Message

H = bytes.fromhex
DIALECT = "eventbus:micro-toolkit"

GRAMMAR = "eventbus.wire.grammar"
FRAMES = "eventbus.wire.syncstart-frames"
SEQ = "eventbus.wire.sequence-format"
SUBTREE = "eventbus.wire.subtree-format"
UUID4 = "eventbus.wire.uuid-v4"
TIME = "eventbus.wire.timestamp-iso8601"
DATA = "eventbus.wire.data-msgpack"

# Frames used by several vectors (ASCII in the comments).
SYNCSTART = H("53594e435354415254")  # "SYNCSTART"
SYNC = H("53594e43")  # "SYNC"
SYNCEND = H("53594e43454e44")  # "SYNCEND"
TOPIC = H("2f746f7069632f61")  # "/topic/a"
PRODUCER = H("70726f64756365722d31")  # "producer-1"
TS_Z = H("323031372d30352d30345431303a32303a33302e3132335a")  # "2017-05-04T10:20:30.123Z"
TS_OFFSET = H("323031372d30352d30345431323a32303a33302b30323a3030")  # "2017-05-04T12:20:30+02:00"
UUID_A = H("30663866616435622d643963622d343639662d613136352d373038363737323839353065")
# "0f8fad5b-d9cb-469f-a165-70867728950e"
UUID_B = H("39613363326231652d376634642d346532612d623563362d643865396630613162326333")
# "9a3c2b1e-7f4d-4e2a-b5c6-d8e9f0a1b2c3"
EX_TOPIC = H("2f6578616d706c65732f61")  # "/examples/a"
NODE = H("6e6f64652d37")  # "node-7"

EVENT_A = {"topic": "/topic/a", "producer": "producer-1", "timestamp": "2017-05-04T10:20:30.123Z",
           "uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "data": {"a": 1}}


def event(**kw: object) -> dict:
    return {**EVENT_A, **kw}


# (message, channel, frames, fields)
STRICT = [
    # everything, no filter (E-EVENTBUS-02: 0 = no filter; E-EVENTBUS-05: empty = all topics)
    ("SYNCSTART", "snapshot", [SYNCSTART, H(""), H("0000000000000000")], {"subtrees": [], "sequence": 0}),
    # two subtrees joined by ';', events above 42
    ("SYNCSTART", "snapshot",
     [SYNCSTART, H("2f746f7069632f3b2f6f746865722f746f7069632f"), H("000000000000002a")],  # "/topic/;/other/topic/"
     {"subtrees": ["/topic/", "/other/topic/"], "sequence": 42}),
    ("SYNC", "snapshot",
     [SYNC, TOPIC, H("0000000000000007"), PRODUCER, TS_Z, UUID_A, H("81a16101")],  # {"a": 1}
     event(sequence=7)),
    ("SYNCEND", "snapshot", [SYNCEND, H("2f746f7069632f"), H("0000000000000007")],  # "/topic/"
     {"subtrees": ["/topic/"], "sequence": 7}),
    ("SYNCEND", "snapshot", [SYNCEND, H(""), H("0000000000000000")], {"subtrees": [], "sequence": 0}),
    ("BROADCAST", "publisher",
     [TOPIC, H("0102030405060708"), PRODUCER, TS_OFFSET, UUID_B, H("9301a178c0")],  # [1, "x", nil]
     event(sequence=0x0102030405060708, timestamp="2017-05-04T12:20:30+02:00",
           uuid="9a3c2b1e-7f4d-4e2a-b5c6-d8e9f0a1b2c3", data=[1, "x", None])),
    # E-EVENTBUS-03: a PUB may carry any 8-byte value; "no data" is nil (E-EVENTBUS-14)
    ("PUB", "collector", [TOPIC, H("ffffffffffffffff"), PRODUCER, TS_Z, UUID_A, H("c0")],
     event(sequence=2**64 - 1, data=None)),
    ("PUB", "collector",
     [H(""), H("0000000000000000"), H(""), TS_Z, UUID_A,
      H("82a57072696365cb4023000000000000a47461677391c40200ff")],  # {"price": 9.5, "tags": [bin 00ff]}
     event(topic="", producer="", sequence=0, data={"price": 9.5, "tags": [b"\x00\xff"]})),
]

# (message, channel, frames, fields, (field, clause) that strict decoding names)
MICRO_TOOLKIT = [
    ("SYNCSTART", "snapshot",
     [SYNCSTART, H("2f6578616d706c65732c2f6f74686572"), H("30")],  # "/examples,/other", "0"
     {"subtrees": ["/examples", "/other"], "sequence": 0}, ("subtrees", SUBTREE)),
    ("SYNCSTART", "snapshot", [SYNCSTART, H(""), H("3137")], {"subtrees": [], "sequence": 17},  # "17"
     ("sequence", SEQ)),
    ("SYNC", "snapshot", [SYNC, EX_TOPIC, H("3432"), NODE, TS_Z, UUID_A, H("81a16101")],  # "42"
     event(topic="/examples/a", producer="node-7", sequence=42), ("sequence", SEQ)),
    ("SYNCEND", "snapshot", [SYNCEND, H("2f6578616d706c6573"), H("3132")],  # "/examples", "12"
     {"subtrees": ["/examples"], "sequence": 12}, ("subtrees", SUBTREE)),
    ("SYNCEND", "snapshot", [SYNCEND, H(""), H("30")], {"subtrees": [], "sequence": 0}, ("sequence", SEQ)),
    ("BROADCAST", "publisher", [EX_TOPIC, H("3132"), NODE, TS_Z, UUID_A, H("c0")],
     event(topic="/examples/a", producer="node-7", sequence=12, data=None), ("sequence", SEQ)),
    # a publisher without a sequence sends "null"
    ("PUB", "collector", [EX_TOPIC, H("6e756c6c"), NODE, TS_Z, UUID_A, H("a26869")],  # "null", "hi"
     event(topic="/examples/a", producer="node-7", sequence=None, data="hi"), ("sequence", SEQ)),
]

KEYED = {"SYNCSTART", "SYNC", "SYNCEND"}


def _ids(vectors: list) -> list[str]:
    return [f"{v[0]}-{i}" for i, v in enumerate(vectors)]


@pytest.mark.parametrize("name,channel,frames,fields", STRICT, ids=_ids(STRICT))
def test_strict_encode(name: str, channel: str, frames: list[bytes], fields: dict) -> None:
    assert codec("eventbus").encode(name, fields) == frames


@pytest.mark.parametrize("name,channel,frames,fields", STRICT, ids=_ids(STRICT))
def test_strict_decode(name: str, channel: str, frames: list[bytes], fields: dict) -> None:
    c = codec("eventbus")
    want = Message(name, fields)
    assert c.decode(frames, channel=channel) == want
    assert c.decode(frames, as_=name) == want
    if name in KEYED:  # the command frame identifies it without context
        assert c.decode(frames) == want


@pytest.mark.parametrize("name,channel,frames,fields,strict", MICRO_TOOLKIT, ids=_ids(MICRO_TOOLKIT))
def test_micro_toolkit_encode(name: str, channel: str, frames: list[bytes], fields: dict, strict: tuple) -> None:
    assert codec("eventbus", DIALECT).encode(name, fields) == frames


@pytest.mark.parametrize("name,channel,frames,fields,strict", MICRO_TOOLKIT, ids=_ids(MICRO_TOOLKIT))
def test_micro_toolkit_decode(name: str, channel: str, frames: list[bytes], fields: dict, strict: tuple) -> None:
    d = codec("eventbus", DIALECT)
    want = Message(name, fields)
    assert d.decode(frames, channel=channel) == want
    assert d.decode(frames, as_=name) == want
    if name in KEYED:
        assert d.decode(frames) == want


@pytest.mark.parametrize("name,channel,frames,fields,strict", MICRO_TOOLKIT, ids=_ids(MICRO_TOOLKIT))
def test_micro_toolkit_bytes_are_a_strict_conformance_error(
    name: str, channel: str, frames: list[bytes], fields: dict, strict: tuple
) -> None:
    """Strict decoding of dialect-only bytes is a ConformanceError that names the dialect and
    carries the message as the dialect decodes it."""
    with pytest.raises(ConformanceError) as e:
        codec("eventbus").decode(frames, channel=channel)
    err = e.value
    assert (err.message, err.field, err.clause) == (name, *strict), str(err)
    assert err.dialect == "strict"
    assert err.dialects == [DIALECT]
    assert err.decoded == Message(name, fields)
    assert DIALECT in str(err)
    assert err.to_dict()["only_in_dialects"] == [DIALECT]


# ---- INTEROP.md facts -----------------------------------------------------------------------


def test_interop_sequences_are_ascii_decimal() -> None:
    d = codec("eventbus", DIALECT)
    assert d.encode("SYNCEND", subtrees=[], sequence=18446744073709551615)[2] == b"18446744073709551615"
    assert d.decode([SYNCEND, b"", b"18446744073709551615"])["sequence"] == 2**64 - 1
    for bad in (b"007", b"-1", b"1.0", b" 1", b"18446744073709551616", b"", b"NULL"):
        with pytest.raises(DecodeError) as e:
            d.decode([SYNCEND, b"", bad])
        assert (e.value.message, e.value.field, e.value.clause) == ("SYNCEND", "sequence", SEQ), bad
    # The dialect does not accept the document's 8-byte form: a plain error there.
    with pytest.raises(DecodeError) as e:
        d.decode([SYNCEND, b"", H("0000000000000007")])
    assert type(e.value) is DecodeError
    assert (e.value.message, e.value.field, e.value.clause, e.value.frame) == ("SYNCEND", "sequence", SEQ, 2)


def test_interop_publisher_without_sequence_sends_null() -> None:
    d = codec("eventbus", DIALECT)
    frames = d.encode("PUB", event(sequence=None))
    assert frames[1] == H("6e756c6c")  # "null"
    assert d.decode(frames, channel="collector")["sequence"] is None
    # The document has no null sequence: strict reads it as the dialect's.
    with pytest.raises(ConformanceError) as e:
        codec("eventbus").decode(frames, as_="PUB")
    assert (e.value.message, e.value.field, e.value.clause, e.value.frame) == ("PUB", "sequence", SEQ, 1)
    assert e.value.dialects == [DIALECT]


def test_strict_cannot_encode_a_null_sequence() -> None:
    with pytest.raises(EncodeError) as ee:
        codec("eventbus").encode("PUB", event(sequence=None))
    assert (ee.value.message, ee.value.field) == ("PUB", "sequence")


def test_interop_comma_separates_subtrees() -> None:
    d = codec("eventbus", DIALECT)
    assert d.encode("SYNCSTART", subtrees=["/a/", "/b/"], sequence=0) == [SYNCSTART, H("2f612f2c2f622f"), H("30")]
    assert d.decode([SYNCSTART, H("2f612f2c2f622f"), H("30")])["subtrees"] == ["/a/", "/b/"]
    # Strict: '/a/,/b/' is not one subtree (',' is not a segment byte here, see eventbus.py);
    # with the dialect's decimal sequence the whole message is a conformance finding ...
    with pytest.raises(ConformanceError) as e:
        codec("eventbus").decode([SYNCSTART, H("2f612f2c2f622f"), H("30")])
    assert (e.value.message, e.value.field, e.value.clause, e.value.frame) == ("SYNCSTART", "subtrees", SUBTREE, 1)
    assert e.value.dialects == [DIALECT]
    assert e.value.decoded["subtrees"] == ["/a/", "/b/"]
    # ... and with the document's 8-byte sequence it is malformed in both: a plain error.
    with pytest.raises(DecodeError) as e2:
        codec("eventbus").decode([SYNCSTART, H("2f612f2c2f622f"), H("0000000000000000")])
    assert type(e2.value) is DecodeError
    assert (e2.value.message, e2.value.field, e2.value.clause) == ("SYNCSTART", "subtrees", SUBTREE)
    # The dialect's items are plain prefixes but never empty and never hold ','.
    for bad in (b"/a,", b",/a", b"/a,,/b"):
        with pytest.raises(DecodeError) as e3:
            d.decode([SYNCSTART, bad, b"0"])
        assert (e3.value.message, e3.value.field, e3.value.clause) == ("SYNCSTART", "subtrees", SUBTREE), bad
    with pytest.raises(EncodeError) as ee:
        d.encode("SYNCSTART", subtrees=["/a,b"], sequence=0)
    assert (ee.value.message, ee.value.field) == ("SYNCSTART", "subtrees")


@pytest.mark.parametrize("dialect", ["strict", DIALECT])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_interop_syncstart_has_exactly_three_frames(dialect: str, count: int) -> None:
    """E-EVENTBUS-01 and INTEROP: three frames, although the document's text says two."""
    seq = H("30") if dialect == DIALECT else H("0000000000000000")
    frames = ([SYNCSTART, H(""), seq] + [H("")])[:count]
    with pytest.raises(DecodeError) as e:
        codec("eventbus", dialect).decode(frames)
    assert type(e.value) is DecodeError
    missing = {1: "subtrees", 2: "sequence", 4: None}[count]
    assert (e.value.message, e.value.field, e.value.clause) == ("SYNCSTART", missing, FRAMES), str(e.value)


def test_interop_syncend_has_the_same_frames_in_both_dialects() -> None:
    """The bus's SYNCEND carries its latest sequence (a checker matter); the frames are those of
    the document, only the sequence is decimal."""
    s = codec("eventbus").encode("SYNCEND", subtrees=["/topic/"], sequence=12)
    d = codec("eventbus", DIALECT).encode("SYNCEND", subtrees=["/topic/"], sequence=12)
    assert s[:2] == d[:2] == [SYNCEND, H("2f746f7069632f")]
    assert (s[2], d[2]) == (H("000000000000000c"), H("3132"))


def test_eight_digit_decimal_is_also_a_valid_strict_sequence() -> None:
    """Known overlap: 8 ASCII digits are 8 bytes, so strict reads them as a (huge) number."""
    assert codec("eventbus").decode([SYNCEND, b"", b"12345678"])["sequence"] == 0x3132333435363738


# ---- errors ---------------------------------------------------------------------------------


def _event_frames(**over: bytes) -> list[bytes]:
    parts = {"topic": TOPIC, "sequence": H("0000000000000007"), "producer": PRODUCER, "timestamp": TS_Z,
             "uuid": UUID_A, "data": H("81a16101")}
    parts.update(over)
    return list(parts.values())


def sync(**over: bytes) -> list[bytes]:
    return [SYNC] + _event_frames(**over)


def bcast(**over: bytes) -> list[bytes]:
    return _event_frames(**over)


def start(subtrees: bytes = H(""), sequence: bytes = H("0000000000000000")) -> list[bytes]:
    return [SYNCSTART, subtrees, sequence]


ERRORS = [
    # (frames, decode keyword arguments, message, field, clause, frame)
    # -- frame counts
    (start()[:2], {}, "SYNCSTART", "sequence", FRAMES, None),
    (start() + [H("")], {}, "SYNCSTART", None, FRAMES, None),
    (sync()[:6], {"channel": "snapshot"}, "SYNC", "data", GRAMMAR, None),
    (sync() + [H("c0")], {}, "SYNC", None, GRAMMAR, None),
    ([SYNCEND, H("")], {}, "SYNCEND", "sequence", GRAMMAR, None),
    ([SYNCEND, H(""), H("0000000000000000"), H("")], {}, "SYNCEND", None, GRAMMAR, None),
    (bcast()[:5], {"channel": "publisher"}, "BROADCAST", "data", GRAMMAR, None),
    (bcast() + [H("")], {"channel": "collector"}, "PUB", None, GRAMMAR, None),
    # -- sequence: exactly 8 bytes (E-EVENTBUS-02, -14)
    (start(sequence=H("00000000000000")), {}, "SYNCSTART", "sequence", SEQ, 2),  # 7 bytes
    (start(sequence=H("")), {}, "SYNCSTART", "sequence", SEQ, 2),  # "MAY be 0", never empty
    (bcast(sequence=H("000000000000000001")), {"channel": "publisher"}, "BROADCAST", "sequence", SEQ, 1),  # 9
    (sync(sequence=H("00000000000000")), {}, "SYNC", "sequence", SEQ, 2),
    # -- UUID: version 4, RFC 4122 variant, 36 characters (E-EVENTBUS-13, -14)
    (sync(uuid=b"0f8fad5b-d9cb-11e7-a165-70867728950e"), {}, "SYNC", "uuid", UUID4, 5),  # version 1
    (bcast(uuid=b"0f8fad5b-d9cb-469f-c165-70867728950e"), {"as_": "BROADCAST"}, "BROADCAST", "uuid", UUID4, 4),
    (bcast(uuid=b"{0f8fad5b-d9cb-469f-a165-70867728950e}"), {"as_": "PUB"}, "PUB", "uuid", UUID4, 4),
    (bcast(uuid=b"urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e"), {"as_": "PUB"}, "PUB", "uuid", UUID4, 4),
    (bcast(uuid=b"0f8fad5bd9cb469fa16570867728950e"), {"as_": "PUB"}, "PUB", "uuid", UUID4, 4),
    (bcast(uuid=UUID_A + b"\n"), {"as_": "PUB"}, "PUB", "uuid", UUID4, 4),
    (bcast(uuid=b""), {"as_": "PUB"}, "PUB", "uuid", UUID4, 4),
    # -- timestamp: ISO-8601 with seconds and zone, RFC 3339 profile (E-EVENTBUS-14)
    (sync(timestamp=b"2017-13-04T10:20:30Z"), {}, "SYNC", "timestamp", TIME, 4),
    (sync(timestamp=b"2017-02-29T10:20:30Z"), {}, "SYNC", "timestamp", TIME, 4),
    (sync(timestamp=b"2017-05-04T24:00:00Z"), {}, "SYNC", "timestamp", TIME, 4),
    (sync(timestamp=b"2017-05-04T10:20:30"), {}, "SYNC", "timestamp", TIME, 4),  # no zone
    (sync(timestamp=b"2017-05-04T10:20Z"), {}, "SYNC", "timestamp", TIME, 4),  # no seconds
    (sync(timestamp=b"2017-05-04"), {}, "SYNC", "timestamp", TIME, 4),  # date alone
    (sync(timestamp=b"2017-W18-4T10:20:30Z"), {}, "SYNC", "timestamp", TIME, 4),  # week date
    (sync(timestamp=b"2017-05-04T10:20:30+0200"), {}, "SYNC", "timestamp", TIME, 4),
    (sync(timestamp=TS_Z + b"\n"), {}, "SYNC", "timestamp", TIME, 4),
    (sync(timestamp="٢٠١٧-05-04T10:20:30Z".encode()), {}, "SYNC", "timestamp", TIME, 4),  # Arabic-Indic digits
    (sync(timestamp=b"yesterday"), {}, "SYNC", "timestamp", TIME, 4),
    # -- data: exactly one MessagePack value (E-EVENTBUS-14)
    (sync(data=H("c1")), {}, "SYNC", "data", DATA, 6),  # never-used byte
    (sync(data=H("")), {}, "SYNC", "data", DATA, 6),
    (sync(data=H("0102")), {}, "SYNC", "data", DATA, 6),  # trailing bytes
    (sync(data=H("81a161")), {}, "SYNC", "data", DATA, 6),  # map without its value
    (bcast(data=H("a2ffff")), {"channel": "publisher"}, "BROADCAST", "data", DATA, 5),  # str, not UTF-8
    (bcast(data=H("dbffffffff")), {"channel": "publisher"}, "BROADCAST", "data", DATA, 5),  # absurd length
    # -- subtrees: '' or '/seg/.../' joined by ';' (E-EVENTBUS-05)
    (start(subtrees=b"topic/"), {}, "SYNCSTART", "subtrees", SUBTREE, 1),  # no leading slash
    (start(subtrees=b"/topic"), {}, "SYNCSTART", "subtrees", SUBTREE, 1),  # no trailing slash
    (start(subtrees=b"/"), {}, "SYNCSTART", "subtrees", SUBTREE, 1),  # no segment
    (start(subtrees=b"/a//"), {}, "SYNCSTART", "subtrees", SUBTREE, 1),  # empty segment
    (start(subtrees=b"/a/;;/b/"), {}, "SYNCSTART", "subtrees", SUBTREE, 1),  # empty element
    (start(subtrees=b"/a/;"), {}, "SYNCSTART", "subtrees", SUBTREE, 1),  # trailing ';'
    (start(subtrees=b"/a/ "), {}, "SYNCSTART", "subtrees", SUBTREE, 1),
    (start(subtrees=b"/\xff/"), {}, "SYNCSTART", "subtrees", SUBTREE, 1),  # not UTF-8
    ([SYNCEND, b"/topic", H("0000000000000000")], {}, "SYNCEND", "subtrees", SUBTREE, 1),
    # -- strings are UTF-8 (E-EVENTBUS-14)
    (sync(topic=H("2fff")), {}, "SYNC", "topic", GRAMMAR, 1),
    (bcast(producer=H("c3")), {"channel": "collector"}, "PUB", "producer", GRAMMAR, 2),
    # -- command names are exact
    ([SYNC, H(""), H("0000000000000000")], {"as_": "SYNCEND"}, "SYNCEND", "command", GRAMMAR, 0),
    ([b"SYNCSTOP", H(""), H("0000000000000000")], {"channel": "snapshot"}, None, None, GRAMMAR, None),
    ([b"syncstart", H(""), H("0000000000000000")], {"channel": "snapshot"}, None, None, GRAMMAR, None),
    (bcast(), {"channel": "snapshot"}, None, None, GRAMMAR, None),  # an event on the snapshot socket
    ([], {"channel": "snapshot"}, None, None, GRAMMAR, None),
    (bcast(), {"as_": "HUGZ"}, "HUGZ", None, GRAMMAR, None),  # no heartbeat command (E-EVENTBUS-04)
]


@pytest.mark.parametrize("frames,kw,message,field,clause,frame", ERRORS)
def test_errors_name_message_field_and_clause(frames, kw, message, field, clause, frame) -> None:
    with pytest.raises(DecodeError) as e:
        codec("eventbus").decode(frames, **kw)
    err = e.value
    assert type(err) is DecodeError, str(err)  # malformed in every dialect: no ConformanceError
    assert (err.message, err.field, err.clause) == (message, field, clause), str(err)
    assert err.frame == frame, str(err)
    assert not err.internal
    assert err.protocol == "eventbus" and err.dialect == "strict"


@pytest.mark.parametrize("frames", [bcast(), bcast(sequence=H("ffffffffffffffff"), data=H("c0")), []])
def test_broadcast_and_pub_are_ambiguous_without_a_channel(frames: list[bytes]) -> None:
    c = codec("eventbus")
    with pytest.raises(DecodeError) as e:
        c.decode(frames)
    err = e.value
    assert (err.message, err.field, err.clause) == (None, None, GRAMMAR)
    assert "BROADCAST / PUB" in err.reason and "channel" in err.reason
    if frames:
        assert c.decode(frames, channel="publisher").name == "BROADCAST"
        assert c.decode(frames, channel="collector").name == "PUB"
        assert c.decode(frames, as_="PUB").name == "PUB"


def test_a_topic_that_spells_a_command_is_still_an_event_on_its_socket() -> None:
    c = codec("eventbus")
    frames = bcast(topic=SYNC)  # topic "SYNC", 6 frames
    assert c.decode(frames, channel="publisher") == Message("BROADCAST", event(topic="SYNC", sequence=7))


def test_a_short_sync_without_a_channel_is_judged_as_the_event_whose_frame_count_fits() -> None:
    """Without the socket, a 6-frame SYNC also has the shape of a BROADCAST/PUB (topic "SYNC");
    the codec reports the candidate whose frame count fits. On the snapshot socket it is a
    SYNC with a missing frame (see ERRORS)."""
    with pytest.raises(DecodeError) as e:
        codec("eventbus").decode(sync()[:6])
    assert (e.value.message, e.value.field, e.value.clause) == ("BROADCAST", "timestamp", TIME)


ENCODE_ERRORS = [
    # (message, fields, dialect, field)  -- EncodeError has no clause: it is our own output
    ("SYNCSTART", {"subtrees": ["/a;b/"], "sequence": 0}, "strict", "subtrees"),
    ("SYNCSTART", {"subtrees": ["/topic"], "sequence": 0}, "strict", "subtrees"),
    ("SYNCSTART", {"subtrees": "/topic/", "sequence": 0}, "strict", "subtrees"),
    ("SYNCSTART", {"subtrees": [], "sequence": 2**64}, "strict", "sequence"),
    ("SYNCSTART", {"subtrees": [], "sequence": -1}, "strict", "sequence"),
    ("SYNC", event(sequence=1, uuid="0f8fad5b-d9cb-11e7-a165-70867728950e"), "strict", "uuid"),
    ("SYNC", event(sequence=1, timestamp="2017-05-04T10:20:30"), "strict", "timestamp"),
    ("BROADCAST", event(sequence=1, data=object()), "strict", "data"),
    ("PUB", event(sequence=-1), DIALECT, "sequence"),
    ("PUB", event(sequence=1, topic=b"/topic/a"), DIALECT, "topic"),
]


@pytest.mark.parametrize("name,fields,dialect,field", ENCODE_ERRORS)
def test_encode_errors_name_message_and_field(name: str, fields: dict, dialect: str, field: str) -> None:
    with pytest.raises(EncodeError) as e:
        codec("eventbus", dialect).encode(name, fields)
    assert (e.value.message, e.value.field) == (name, field), str(e.value)


def test_tables_declare_channels_and_notes() -> None:
    from harness.protocols.eventbus import TABLES

    strict, mt = TABLES["strict"], TABLES[DIALECT]
    assert [m.name for m in strict.messages] == ["SYNCSTART", "SYNC", "SYNCEND", "BROADCAST", "PUB"]
    assert {m.name: m.channels for m in mt.messages} == {
        "SYNCSTART": ("snapshot",), "SYNC": ("snapshot",), "SYNCEND": ("snapshot",),
        "BROADCAST": ("publisher",), "PUB": ("collector",),
    }
    assert strict.notes == () and len(mt.notes) >= 3
