"""Golden vectors of the ZMQ Raft wire table (harness/protocols/raft.py).

* every worked example of specs/zmq-raft.md ("Examples"), encoded and decoded exactly (the
  first log entry example with its data offsets 14/15 read as 21/22);
* every message of both dialects as explicit hex frames, checked in both directions;
* every fact of the ZMQ Raft section of INTEROP.md;
* decode errors, each naming the message, the field and the clause.
"""

from __future__ import annotations

import copy
import pickle

import msgpack
import pytest

from harness.protocols import ConformanceError, DecodeError, codec, tables
from harness.protocols.errors import EncodeError, FieldError
from harness.protocols.raft import NULL, TYPE_BYTES, LogEntry

STRICT = codec("raft")
ZR = codec("raft", "raft:zmq-raft")
CODECS = {"strict": STRICT, "raft:zmq-raft": ZR}
BOTH = ("strict", "raft:zmq-raft")
FIELDS = tables("raft")["strict"].fields
ZR_FIELDS = tables("raft")["raft:zmq-raft"].fields


def H(*frames: str) -> list[bytes]:
    return [bytes.fromhex(f) for f in frames]


# The document's reqid example and its two log entry examples.
RID = "5956dc8826f27e10dcccab20"
REQID = bytes.fromhex(RID)
E1_HEX = "5956dc8826f27e10dcccab20" "00" "2a000000000000" "666f6f"
E2_HEX = "000000000000000000000000" "02" "2b000000000000" "c0"
E1 = LogEntry(REQID, 0, 42, b"foo")
E2 = LogEntry(bytes(12), 2, 43, b"\xc0")
CLUSTER = "6331"  # b"c1"
PEERS_HEX = "9192a27031a97463703a2f2f613a31"  # [["p1", "tcp://a:1"]]
URL = "tcp://127.0.0.1:8047"
URL_HEX = "7463703a2f2f3132372e302e302e313a38303437"


# ---- the document's worked examples -------------------------------------------------------


@pytest.mark.parametrize("field,value,hex_", [
    ("peer_id", "foo", "666f6f"),  # string
    ("term", 255, "ff"),  # uint
    ("term", 256, "0001"),
    ("term", 9007199254740991, "ffffffffffff1f"),
    ("success", False, ""),  # bool
    ("success", True, "01"),
    ("ignored", NULL, "c0"),  # json null
    ("ignored", [42, "foo", False], "932aa3666f6fc2"),  # json [42, "foo", false]
    ("entries", E1, E1_HEX),  # entry [5956dc..., STATE, 42, "foo"]
    ("entries", E2, E2_HEX),  # entry [000..., CHECKPOINT, 43, 0xc0]
])
def test_worked_examples(field: str, value, hex_: str) -> None:
    t = FIELDS[field].type
    assert t.encode(value).hex() == hex_
    decoded = t.decode(bytes.fromhex(hex_))
    assert decoded == value and type(decoded) is type(value)


def test_entry_example_offsets() -> None:
    # The document numbers the data bytes of the first entry 20, 14, 15: they are 20, 21, 22.
    raw = bytes.fromhex(E1_HEX)
    assert len(raw) == 23 and raw[20:23] == b"foo"
    assert raw[12] == 0 and raw[13:20] == bytes([42, 0, 0, 0, 0, 0, 0])


def test_entry_show_and_dict() -> None:
    assert E1.to_dict() == {"reqid": RID, "type": "state", "term": 42, "data": b"foo"}
    assert FIELDS["entries"].type.show(E2) == {"reqid": "00" * 12, "type": "checkpoint", "term": 43,
                                               "data": "0xc0"}
    assert FIELDS["entries"].type.encode({"reqid": REQID, "type": 0, "term": 42, "data": b"foo"}).hex() == E1_HEX


def test_uint_decodes_any_width_and_encodes_fewest() -> None:
    t = FIELDS["term"].type
    assert t.decode(bytes.fromhex("ff00")) == 255  # not minimal, still 255
    assert t.decode(bytes.fromhex("0000000000000000")) == 0
    assert t.decode(bytes.fromhex("ffffffffffffffff")) == 2**64 - 1
    assert t.encode(0).hex() == "00"
    assert t.encode(2**64 - 1).hex() == "ff" * 8


def test_bool_reading() -> None:
    t = FIELDS["success"].type
    assert t.decode(b"") is False
    assert t.decode(b"\x00") is False
    assert t.decode(b"\x00\x01") is False  # only the first byte counts
    assert t.decode(b"\x02") is True
    assert t.decode(b"\x01\x00") is True


def test_null_is_a_falsy_singleton() -> None:
    assert not NULL and repr(NULL) == "NULL"
    assert copy.copy(NULL) is NULL and copy.deepcopy(NULL) is NULL
    assert pickle.loads(pickle.dumps(NULL)) is NULL
    assert FIELDS["leader_id"].type.show(NULL) is None


# ---- every message, both directions -------------------------------------------------------

PEER_VECTORS = [
    ("RequestVote", dict(message_id=1, cluster=b"c1", peer_id="p1", term=5, last_log_index=256, last_log_term=4),
     H("01", "3f", CLUSTER, "7031", "05", "0001", "04")),
    ("RequestVoteResponse", dict(message_id=1, term=5, vote_granted=True), H("01", "05", "01")),
    ("RequestVoteResponse", dict(message_id=16777215, term=6, vote_granted=False), H("ffffff", "06", "")),
    ("AppendEntries", dict(message_id=0x123456, cluster=b"c1", peer_id="p1", term=5, prev_log_index=20,
                           prev_log_term=4, commit_index=19, entries=[E1, E2]),
     H("563412", "2b", CLUSTER, "7031", "05", "14", "04", "13", E1_HEX, E2_HEX)),
    ("AppendEntries", dict(message_id=0, cluster=b"", peer_id="p1", term=5, prev_log_index=22,
                           prev_log_term=5, commit_index=22, entries=[]),
     H("00", "2b", "", "7031", "05", "16", "05", "16")),  # heartbeat; id wrapped to 0; empty ident
    ("InstallSnapshot", dict(message_id=2, cluster=b"c1", peer_id="p1", term=5, last_included_index=100,
                             last_included_term=4, snapshot_offset=0, snapshot_size=1000, chunk=b"\x01\x02\x03"),
     H("02", "24", CLUSTER, "7031", "05", "64", "04", "00", "e803", "010203")),
    ("InstallSnapshotResponse", dict(message_id=2, term=5, next_offset=None), H("02", "05")),
    ("InstallSnapshotResponse", dict(message_id=2, term=5, next_offset=512), H("02", "05", "0002")),
    ("StateBroadcast", dict(cluster=b"c1", term=5, last_applied=21, entries=[E1]), H(CLUSTER, "05", "15", E1_HEX)),
    ("StateBroadcast", dict(cluster=b"c1", term=5, last_applied=21, entries=[]), H(CLUSTER, "05", "15")),
]

STRICT_VECTORS = PEER_VECTORS + [
    ("AppendEntriesResponse", dict(message_id=1, term=5, success=True, conflict_term=None, conflict_index=None),
     H("01", "05", "01")),
    ("AppendEntriesResponse", dict(message_id=1, term=5, success=False, conflict_term=3, conflict_index=None),
     H("01", "05", "", "03")),
    ("AppendEntriesResponse", dict(message_id=1, term=5, success=False, conflict_term=3, conflict_index=7),
     H("01", "05", "", "03", "07")),
    ("RequestConfig", dict(reqid=REQID), H(RID, "5e")),
    ("RequestConfigResponse", dict(reqid=REQID, is_leader=True, leader_id="p1",
                                   peers=[["p1", "tcp://a:1"]]),
     H(RID, "01", "a27031", PEERS_HEX)),
    ("RequestConfigResponse", dict(reqid=REQID, is_leader=False, leader_id=NULL, peers=None),
     H(RID, "", "c0")),
    ("RequestUpdate", dict(reqid=REQID, data=b"foo"), H(RID, "3d", "666f6f")),
    ("RequestUpdateResponse", dict(reqid=REQID, success=True, log_index=42, leader_id=None), H(RID, "01", "2a")),
    ("RequestUpdateResponse", dict(reqid=REQID, success=True, log_index=None, leader_id=None), H(RID, "01")),
    ("RequestUpdateResponse", dict(reqid=REQID, success=False, log_index=None, leader_id="p2"),
     H(RID, "", "a27032")),
    ("RequestUpdateResponse", dict(reqid=REQID, success=False, log_index=None, leader_id=NULL),
     H(RID, "", "c0")),  # not the leader, leader unknown
    ("RequestUpdateResponse", dict(reqid=REQID, success=False, log_index=None, leader_id=None),
     H(RID, "")),  # expired
    ("RequestEntries", dict(reqid=REQID, prev_log_index=20, count=None), H(RID, "3c", "14")),
    ("RequestEntries", dict(reqid=REQID, prev_log_index=20, count=0), H(RID, "3c", "14", "00")),
    ("RequestEntriesResponse", dict(reqid=REQID, status=0, leader_id="p2", ignored=None, snapshot_info=None,
                                    last_index=None, entries=None, chunk=None),
     H(RID, "00", "a27032")),
    ("RequestEntriesResponse", dict(reqid=REQID, status=2, leader_id=None, ignored=NULL, snapshot_info=None,
                                    last_index=22, entries=[E1, E2], chunk=None),
     H(RID, "02", "c0", "16", E1_HEX, E2_HEX)),
    ("RequestEntriesResponse", dict(reqid=REQID, status=1, leader_id=None, ignored=NULL, snapshot_info=None,
                                    last_index=20, entries=[], chunk=None),
     H(RID, "01", "c0", "14")),
    ("RequestEntriesResponse", dict(reqid=REQID, status=3, leader_id=None, ignored=None, snapshot_info=[0, 1000],
                                    last_index=100, entries=None, chunk=b"\x01\x02\x03"),
     H(RID, "03", "9200cd03e8", "64", "010203")),
    ("RequestLogInfo", dict(reqid=REQID), H(RID, "25")),
    ("RequestLogInfoResponse", dict(reqid=REQID, is_leader=True, leader_id="p1", term=5, first_index=1,
                                    last_applied=19, commit_index=20, last_index=22, snapshot_size=0),
     H(RID, "01", "a27031", "05", "01", "13", "14", "16", "00")),
    ("RequestBroadcastStateUrl", dict(reqid=REQID), H(RID, "2a")),
    ("RequestBroadcastStateUrlResponse", dict(reqid=REQID, url=URL), H(RID, URL_HEX)),
    ("RequestBroadcastStateUrlResponse", dict(reqid=REQID, url=None), H(RID)),
]

ZMQ_RAFT_VECTORS = PEER_VECTORS + [
    ("AppendEntriesResponse", dict(message_id=1, term=5, success=True, conflict_index=None, conflict_term=None),
     H("01", "05", "01")),
    ("AppendEntriesResponse", dict(message_id=1, term=5, success=False, conflict_index=21, conflict_term=None),
     H("01", "05", "", "15")),
    ("AppendEntriesResponse", dict(message_id=1, term=5, success=False, conflict_index=21, conflict_term=4),
     H("01", "05", "", "15", "04")),
    ("RequestConfig", dict(request_id=1, cluster=b"c1"), H("01", "5e", CLUSTER)),
    ("RequestConfigResponse", dict(request_id=1, is_leader=True, leader_id="p1", peers=[["p1", "tcp://a:1"]]),
     H("01", "01", "a27031", PEERS_HEX)),
    ("RequestConfigResponse", dict(request_id=1, is_leader=False, leader_id=NULL, peers=[]),
     H("01", "", "c0", "90")),
    ("RequestUpdate", dict(reqid=REQID, cluster=b"c1", data=b"foo"), H(RID, "3d", CLUSTER, "666f6f")),
    ("RequestUpdateResponse", dict(reqid=REQID, success=True, log_index=42, leader_id=None), H(RID, "01", "2a")),
    ("RequestUpdateResponse", dict(reqid=REQID, success=False, log_index=None, leader_id=NULL), H(RID, "", "c0")),
    ("RequestUpdateResponse", dict(reqid=REQID, success=False, log_index=None, leader_id=None), H(RID, "")),
    ("ConfigUpdate", dict(reqid=REQID, cluster=b"c1", peers=[["p1", "tcp://a:1"], ["p2", "tcp://b:2"]]),
     H(RID, "26", CLUSTER, "9292a27031a97463703a2f2f613a3192a27032a97463703a2f2f623a32")),
    ("ConfigUpdateResponse", dict(reqid=REQID, config_status=0, leader_id="p2", result=None),
     H(RID, "00", "a27032")),
    ("ConfigUpdateResponse", dict(reqid=REQID, config_status=0, leader_id=NULL, result=None), H(RID, "00", "c0")),
    ("ConfigUpdateResponse", dict(reqid=REQID, config_status=1, leader_id=None, result=None), H(RID, "01")),
    ("ConfigUpdateResponse", dict(reqid=REQID, config_status=2, leader_id=None, result=42), H(RID, "02", "2a")),
    ("ConfigUpdateResponse", dict(reqid=REQID, config_status=3, leader_id=None, result=None), H(RID, "03")),
    ("ConfigUpdateResponse", dict(reqid=REQID, config_status=4, leader_id=None, result=None), H(RID, "04")),
    ("RequestEntries", dict(request_id=0x01020304, cluster=b"c1", prev_log_index=20, count=None,
                            snapshot_offset=None),
     H("04030201", "3c", CLUSTER, "14")),
    ("RequestEntries", dict(request_id=1, cluster=b"c1", prev_log_index=20, count=5, snapshot_offset=None),
     H("01", "3c", CLUSTER, "14", "05")),
    ("RequestEntries", dict(request_id=1, cluster=b"c1", prev_log_index=20, count=NULL, snapshot_offset=None),
     H("01", "3c", CLUSTER, "14", "")),
    ("RequestEntries", dict(request_id=1, cluster=b"c1", prev_log_index=20, count=NULL, snapshot_offset=512),
     H("01", "3c", CLUSTER, "14", "", "0002")),
    ("RequestEntriesResponse", dict(request_id=1, status=0, leader_id="p2", snapshot_info=None, last_index=None,
                                    entries=None, chunk=None),
     H("01", "00", "a27032")),
    ("RequestEntriesResponse", dict(request_id=1, status=1, leader_id=NULL, snapshot_info=None, last_index=21,
                                    entries=[E1], chunk=None),
     H("01", "01", "c0", "15", E1_HEX)),
    ("RequestEntriesResponse", dict(request_id=1, status=3, leader_id=None, snapshot_info=[0, 3, 7],
                                    last_index=100, entries=None, chunk=b"\x01\x02\x03"),
     H("01", "03", "93000307", "64", "010203")),
    ("RequestLogInfo", dict(request_id=1, cluster=b"c1"), H("01", "25", CLUSTER)),
    ("RequestLogInfoResponse", dict(request_id=1, is_leader=False, leader_id="p2", term=5, first_index=1,
                                    last_applied=19, commit_index=20, last_index=22, snapshot_size=1000,
                                    prune_index=10),
     H("01", "", "a27032", "05", "01", "13", "14", "16", "e803", "0a")),
    ("RequestBroadcastStateUrl", dict(request_id=1, cluster=b"c1"), H("01", "2a", CLUSTER)),
    ("RequestBroadcastStateUrlResponse", dict(request_id=1, url=URL), H("01", URL_HEX)),
    ("RequestBroadcastStateUrlResponse", dict(request_id=1, url=None), H("01")),
]

VECTORS = [("strict", *v) for v in STRICT_VECTORS] + [("raft:zmq-raft", *v) for v in ZMQ_RAFT_VECTORS]
IDS = [f"{d}-{n}-{i}" for i, (d, n, _, _) in enumerate(VECTORS)]


@pytest.mark.parametrize("dialect,name,fields,frames", VECTORS, ids=IDS)
def test_vector_encode(dialect: str, name: str, fields: dict, frames: list[bytes]) -> None:
    assert CODECS[dialect].encode(name, fields) == frames


@pytest.mark.parametrize("dialect,name,fields,frames", VECTORS, ids=IDS)
def test_vector_decode(dialect: str, name: str, fields: dict, frames: list[bytes]) -> None:
    c = CODECS[dialect]
    spec = c.table.message(name)
    msg = c.decode(frames, as_=name)
    assert msg.name == name and msg.fields == fields
    for k, v in fields.items():  # NULL and None stay distinct, ints stay ints (not bools)
        assert type(msg[k]) is type(v), k
    if spec.channels == ("request",):
        # Requests are identified by their type byte, with or without the channel.
        assert c.decode(frames) == msg
        assert c.decode(frames, channel="request") == msg
    elif spec.channels == ("broadcast",):
        assert c.decode(frames, channel="broadcast") == msg
    else:
        assert spec.answers and spec.answers in c.messages
        assert spec.answers + "Response" == name


def test_every_message_has_a_vector() -> None:
    for dialect, c in CODECS.items():
        covered = {n for d, n, _, _ in VECTORS if d == dialect}
        assert covered == set(c.messages), dialect


# ---- INTEROP.md: node-zmq-raft 0.7 ----------------------------------------------------------


def test_message_tables() -> None:
    peer = ["RequestVote", "RequestVoteResponse", "AppendEntries", "AppendEntriesResponse", "InstallSnapshot",
            "InstallSnapshotResponse", "StateBroadcast"]
    client = ["RequestConfig", "RequestConfigResponse", "RequestUpdate", "RequestUpdateResponse",
              "RequestEntries", "RequestEntriesResponse", "RequestLogInfo", "RequestLogInfoResponse",
              "RequestBroadcastStateUrl", "RequestBroadcastStateUrlResponse"]
    assert STRICT.messages == peer + client
    assert ZR.messages == peer + client + ["ConfigUpdate", "ConfigUpdateResponse"]
    assert tables("raft")["raft:zmq-raft"].notes


def test_type_bytes() -> None:
    assert {n: b.hex() for n, b in TYPE_BYTES.items()} == {
        "AppendEntries": "2b", "RequestVote": "3f", "InstallSnapshot": "24", "RequestUpdate": "3d",
        "ConfigUpdate": "26", "RequestEntries": "3c", "RequestConfig": "5e", "RequestLogInfo": "25",
        "RequestBroadcastStateUrl": "2a",
    }
    assert [TYPE_BYTES[n] for n in ("AppendEntries", "RequestVote", "InstallSnapshot", "RequestUpdate",
                                    "ConfigUpdate", "RequestEntries", "RequestConfig", "RequestLogInfo",
                                    "RequestBroadcastStateUrl")] == [bytes([c]) for c in b"+?$=&<^%*"]
    for dialect, c in CODECS.items():
        for name in c.messages:
            spec = c.table.message(name)
            if spec.channels == ("request",):
                assert spec.layout[1].value == TYPE_BYTES[name], (dialect, name)
                assert c.encode(name)[1] == TYPE_BYTES[name]


def test_request_entries_type_is_0x3c_not_0x3d() -> None:
    # The document gives RequestEntries 0x3d, RequestUpdate's byte: 0x3d frames are RequestUpdate.
    assert STRICT.encode("RequestEntries", reqid=REQID, prev_log_index=20)[1] == b"\x3c"
    assert STRICT.decode(H(RID, "3d", "14")).name == "RequestUpdate"


def test_cluster_ident_in_every_client_request() -> None:
    for name in ("RequestConfig", "RequestUpdate", "ConfigUpdate", "RequestEntries", "RequestLogInfo",
                 "RequestBroadcastStateUrl"):
        assert ZR.table.message(name).layout[2] == "cluster", name
        assert "cluster" not in STRICT.table.message(name).layout if name in STRICT.messages else True
    with pytest.raises(DecodeError) as ei:
        ZR.decode(H("01", "5e"), channel="request")
    e = ei.value
    assert (e.message, e.field, e.clause) == ("RequestConfig", "cluster", "raft.wire.grammar")
    assert "missing" in e.reason


def test_uint32_request_ids() -> None:
    assert ZR.decode(H("01", "25", CLUSTER))["request_id"] == 1
    assert ZR.decode(H("ffffffff", "25", CLUSTER))["request_id"] == 2**32 - 1
    assert ZR.encode("RequestLogInfo", request_id=1, cluster=b"c1")[0] == b"\x01"
    with pytest.raises(DecodeError) as ei:  # a 12-byte reqid is not a uint32
        ZR.decode(H(RID, "25", CLUSTER), channel="request")
    e = ei.value
    assert (e.message, e.field, e.clause, e.frame) == ("RequestLogInfo", "request_id", "raft.wire.uint", 0)
    with pytest.raises(EncodeError) as ei2:
        ZR.encode("RequestLogInfo", request_id=2**32, cluster=b"")
    assert ei2.value.field == "request_id"
    # RequestUpdate and ConfigUpdate keep the 12-byte reqid.
    with pytest.raises(DecodeError) as ei3:
        ZR.decode(H("01", "3d", CLUSTER, "666f6f"), channel="request")
    e = ei3.value
    assert (e.message, e.field, e.clause) == ("RequestUpdate", "reqid", "raft.wire.reqid")


def test_nuint_empty_is_null() -> None:
    t = ZR_FIELDS["count"].type
    assert t.decode(b"") is NULL and t.encode(NULL) == b""
    assert t.decode(b"\x00") == 0 and t.decode(b"\x05") == 5
    msg = ZR.decode(H("01", "3c", CLUSTER, "14", ""))
    assert msg["count"] is NULL and msg["snapshot_offset"] is None
    assert ZR.show(msg)["count"] is None
    # Strict count is a plain uint: an empty frame is an error.
    with pytest.raises(DecodeError) as ei:
        STRICT.decode(H(RID, "3c", "14", ""))
    e = ei.value
    assert (e.message, e.field, e.clause) == ("RequestEntries", "count", "raft.wire.uint")


def test_request_entries_frames_5_and_6() -> None:
    msg = ZR.decode(H("01", "3c", CLUSTER, "14", "00", "0002"))
    assert (msg["prev_log_index"], msg["count"], msg["snapshot_offset"]) == (20, 0, 512)
    # The strict layout has no cluster frame and no offset frame.
    with pytest.raises(ConformanceError) as ei:
        STRICT.decode(H("01", "3c", CLUSTER, "14", "00", "0002"), channel="request")
    assert ei.value.dialects == ["raft:zmq-raft"] and ei.value.decoded == msg


def test_prune_index_frame() -> None:
    frames = H("01", "01", "a27031", "05", "01", "13", "14", "16", "00", "0a")
    assert ZR.decode(frames, as_="RequestLogInfoResponse")["prune_index"] == 10
    with pytest.raises(DecodeError) as ei:  # 0.7 without the prune index
        ZR.decode(frames[:-1], as_="RequestLogInfoResponse")
    e = ei.value
    assert (e.message, e.field, e.clause) == ("RequestLogInfoResponse", "prune_index", "raft.wire.grammar")
    with pytest.raises(ConformanceError) as ei2:
        STRICT.decode(frames, as_="RequestLogInfoResponse")
    e = ei2.value  # ten frames where the document has nine
    assert (e.message, e.field, e.clause) == ("RequestLogInfoResponse", None, "raft.wire.grammar")
    assert e.dialects == ["raft:zmq-raft"] and e.decoded["prune_index"] == 10
    # Strict with a 12-byte reqid but ten frames: too many frames.
    with pytest.raises(DecodeError) as ei3:
        STRICT.decode([REQID] + frames[1:], as_="RequestLogInfoResponse")
    e = ei3.value
    assert (e.message, e.field, e.clause) == ("RequestLogInfoResponse", None, "raft.wire.grammar")


def test_config_update_layout_and_statuses() -> None:
    msg = ZR.decode(H(RID, "26", CLUSTER, PEERS_HEX))
    assert msg.name == "ConfigUpdate" and msg["peers"] == [["p1", "tcp://a:1"]]
    statuses = [ZR.decode(H(RID, f"0{s}"), as_="ConfigUpdateResponse")["config_status"] for s in range(5)]
    assert statuses == [0, 1, 2, 3, 4]
    with pytest.raises(DecodeError) as ei:
        ZR.decode(H(RID, "05"), as_="ConfigUpdateResponse")
    e = ei.value
    assert (e.message, e.field, e.clause) == ("ConfigUpdateResponse", "config_status", "raft.wire.grammar")
    with pytest.raises(DecodeError) as ei2:  # peers must be [[id, url], ...]
        ZR.decode(H(RID, "26", CLUSTER, "91a27031"))
    e = ei2.value
    assert (e.message, e.field, e.clause) == ("ConfigUpdate", "peers", "raft.wire.msgpack")
    with pytest.raises(EncodeError) as ei3:
        ZR.encode("ConfigUpdateResponse", reqid=REQID, config_status=5)
    assert ei3.value.field == "config_status"


def test_append_entries_response_conflict_frames_swapped() -> None:
    frames = H("01", "05", "", "15", "04")
    s, z = STRICT.decode(frames, as_="AppendEntriesResponse"), ZR.decode(frames, as_="AppendEntriesResponse")
    assert (s["conflict_term"], s["conflict_index"]) == (21, 4)
    assert (z["conflict_index"], z["conflict_term"]) == (21, 4)
    only_index = ZR.decode(frames[:4], as_="AppendEntriesResponse")
    assert (only_index["conflict_index"], only_index["conflict_term"]) == (21, None)
    assert ZR.encode("AppendEntriesResponse", message_id=1, term=5, success=False, conflict_index=21,
                     conflict_term=4) == frames


def test_entries_response_msgpack_leader_for_every_status() -> None:
    nil_leader = ZR.decode(H("01", "02", "c0", "15", E1_HEX), as_="RequestEntriesResponse")
    assert nil_leader["leader_id"] is NULL and nil_leader["entries"] == [E1]
    # A status-1 frame 3 that is not a leader id: the dialect refuses it, the document ignores it.
    frames = H("01", "01", "2a", "14")
    with pytest.raises(DecodeError) as ei:
        ZR.decode(frames, as_="RequestEntriesResponse")
    e = ei.value
    assert (e.message, e.field, e.clause, e.frame) == ("RequestEntriesResponse", "leader_id", "raft.wire.msgpack", 2)
    assert STRICT.decode([REQID] + frames[1:], as_="RequestEntriesResponse")["ignored"] == 42
    # Status 3: INTEROP.md's leader id (nil) and the source's [offset, size, term] both decode.
    assert ZR.decode(H("01", "03", "c0", "64", ""), as_="RequestEntriesResponse")["snapshot_info"] is NULL
    assert ZR.decode(H("01", "03", "93000307", "64", ""), as_="RequestEntriesResponse")["snapshot_info"] == [0, 3, 7]
    # Frame 3 must be MessagePack in both.
    for c, rid in ((STRICT, RID), (ZR, "01")):
        with pytest.raises(DecodeError) as ei2:
            c.decode(H(rid, "01", "", "14"), as_="RequestEntriesResponse")
        assert ei2.value.clause == "raft.wire.msgpack"


def test_request_config_response_peers_always_sent() -> None:
    with pytest.raises(DecodeError) as ei:
        ZR.decode(H("01", "01", "a27031"), as_="RequestConfigResponse")
    e = ei.value
    assert (e.message, e.field) == ("RequestConfigResponse", "peers")
    assert STRICT.decode(H(RID, "01", "a27031"), as_="RequestConfigResponse")["peers"] is None


def test_peer_message_ids_1_to_3_bytes() -> None:
    for c in CODECS.values():
        assert c.decode(H("ffffff", "05", "01"), as_="RequestVoteResponse")["message_id"] == 16777215
        assert c.encode("RequestVoteResponse", message_id=16777215, term=5, vote_granted=True)[0] == b"\xff\xff\xff"
        assert c.encode("RequestVoteResponse", message_id=0, term=5, vote_granted=True)[0] == b"\x00"
        with pytest.raises(EncodeError) as ei:
            c.encode("RequestVoteResponse", message_id=16777216, term=5, vote_granted=True)
        assert ei.value.field == "message_id"


def test_bool_false_is_empty() -> None:
    for c in CODECS.values():
        assert c.encode("RequestVoteResponse", message_id=1, term=5, vote_granted=False)[2] == b""


def test_request_update_response_nil_versus_absent() -> None:
    nil = STRICT.decode(H(RID, "", "c0"), as_="RequestUpdateResponse")
    absent = STRICT.decode(H(RID, ""), as_="RequestUpdateResponse")
    assert nil["leader_id"] is NULL and absent["leader_id"] is None
    assert STRICT.show(nil)["leader_id"] is None
    with pytest.raises(DecodeError) as ei:  # success with a leader id instead of an index
        STRICT.decode(H(RID, "01", "a27032"), as_="RequestUpdateResponse")
    e = ei.value
    assert (e.message, e.field, e.clause) == ("RequestUpdateResponse", "log_index", "raft.wire.msgpack")


# ---- errors ---------------------------------------------------------------------------------

VOTE = ["01", "3f", CLUSTER, "7031", "05", "0001", "04"]


def _vote(**changes: str) -> list[bytes]:
    frames = list(VOTE)
    for k, v in changes.items():
        frames[int(k[1:])] = v
    return H(*frames)


@pytest.mark.parametrize("dialect", BOTH)
@pytest.mark.parametrize("frames,field,clause,frame", [
    (_vote(f4=""), "term", "raft.wire.uint", 4),  # uint of 0 bytes
    (_vote(f4="010203040506070809"), "term", "raft.wire.uint", 4),  # uint of 9 bytes
    (_vote(f0="01020304"), "message_id", "raft.wire.message-id", 0),  # message id of 4 bytes
    (_vote(f0=""), "message_id", "raft.wire.message-id", 0),
    (_vote(f3="ff"), "peer_id", "raft.wire.string", 3),  # not UTF-8
    (H("01", "2b", CLUSTER, "7031", "05", "14", "04", "13", E1_HEX, E1_HEX[:38]), "entries", "raft.wire.entry", 9),
    (H("01", "2b", CLUSTER, "7031", "05", "14", "04", "13", E1_HEX[:24] + "03" + E1_HEX[26:]), "entries",
     "raft.wire.entry", 8),  # entry type 3
])
def test_peer_decode_errors(dialect: str, frames: list[bytes], field: str, clause: str, frame: int) -> None:
    c = CODECS[dialect]
    name = "AppendEntries" if frames[1] == b"+" else "RequestVote"
    for kw in ({}, {"channel": "request"}, {"as_": name}):
        with pytest.raises(DecodeError) as ei:
            c.decode(frames, **kw)
        e = ei.value
        assert not isinstance(e, ConformanceError)
        assert (e.message, e.field, e.clause, e.frame) == (name, field, clause, frame), kw
        assert not e.internal


def test_entry_type_errors() -> None:
    t = FIELDS["entries"].type
    with pytest.raises(FieldError, match="at least 20 bytes"):
        t.decode(bytes(19))
    assert t.decode(bytes(20)) == LogEntry(bytes(12), 0, 0, b"")
    with pytest.raises(FieldError, match="type"):
        t.decode(bytes(12) + b"\x03" + bytes(7))
    for bad in (LogEntry(bytes(11), 0, 0, b""), LogEntry(bytes(12), 3, 0, b""), LogEntry(bytes(12), 0, 2**56, b""),
                LogEntry(bytes(12), 0, 0, "text")):
        with pytest.raises(FieldError):
            t.encode(bad)
    with pytest.raises(EncodeError) as ei:
        STRICT.encode("AppendEntries", entries=[LogEntry(bytes(12), 3, 0, b"")])
    assert ei.value.field == "entries"


def test_reqid_of_11_bytes() -> None:
    with pytest.raises(DecodeError) as ei:
        STRICT.decode([REQID[:11], b"^"])
    e = ei.value
    assert not isinstance(e, ConformanceError)
    assert (e.message, e.field, e.clause, e.frame) == ("RequestConfig", "reqid", "raft.wire.reqid", 0)
    with pytest.raises(DecodeError) as ei2:
        ZR.decode([REQID[:11], b"=", b"c1", b"foo"])
    e = ei2.value
    assert (e.message, e.field, e.clause, e.frame) == ("RequestUpdate", "reqid", "raft.wire.reqid", 0)
    with pytest.raises(EncodeError) as ei3:
        STRICT.encode("RequestConfig", reqid=REQID[:11])
    assert ei3.value.field == "reqid"


@pytest.mark.parametrize("leader,reason", [
    ("c1", "not a valid MessagePack value"),  # 0xc1 is never used
    ("92a2", "not a valid MessagePack value"),  # truncated
    ("c0c0", "trailing bytes"),
    ("a27031c0", "trailing bytes"),
    ("", "empty frame"),
    ("d6ff00000000", "JSON string or null"),  # a well-formed MessagePack timestamp, but no LEADER ID
    ("d40100", "JSON string or null"),  # extension type 1
    ("2a", "JSON string or null"),
])
def test_msgpack_errors(leader: str, reason: str) -> None:
    for c, rid in ((STRICT, RID), (ZR, "01")):
        with pytest.raises(DecodeError) as ei:
            c.decode(H(rid, "01", leader, "05", "01", "13", "14", "16", "00", "0a")[: 9 if c is STRICT else 10],
                     as_="RequestLogInfoResponse")
        e = ei.value
        assert (e.message, e.field, e.clause, e.frame) == \
            ("RequestLogInfoResponse", "leader_id", "raft.wire.msgpack", 2)
        assert reason in e.reason


def test_entries_response_missing_last_index() -> None:
    with pytest.raises(DecodeError) as ei:
        STRICT.decode(H(RID, "01", "c0"), as_="RequestEntriesResponse")
    e = ei.value
    assert (e.message, e.field, e.clause) == ("RequestEntriesResponse", "last_index", "raft.wire.grammar")
    assert "missing" in e.reason


def test_entries_response_frames_per_status() -> None:
    # E-RAFT-18: status 0 has exactly three frames; 1-3 need frame 4; 3 needs the chunk.
    cases = [
        (H(RID, "00", "c0", "14"), None, "raft.wire.grammar", "extra frame"),
        (H(RID, "03", "9200cd03e8", "64"), "chunk", "raft.wire.grammar", "missing"),
        (H(RID, "04", "c0"), "status", "raft.wire.grammar", "must be one of"),
        (H(RID, "03", "91cd03e8", "64", "01"), "snapshot_info", "raft.wire.msgpack", "JSON array"),
        (H(RID, "03", "92a178cd03e8", "64", "01"), "snapshot_info", "raft.wire.msgpack", "unsigned"),
        (H(RID, "", "c0"), "status", "raft.wire.uint", "1-8 bytes"),
    ]
    for frames, field, clause, reason in cases:
        with pytest.raises(DecodeError) as ei:
            STRICT.decode(frames, as_="RequestEntriesResponse")
        e = ei.value
        assert (e.message, e.field, e.clause) == ("RequestEntriesResponse", field, clause), frames
        assert reason in e.reason
    # Further elements of the snapshot array are ignored (node-zmq-raft adds the snapshot term).
    msg = STRICT.decode(H(RID, "03", "93000307", "64", ""), as_="RequestEntriesResponse")
    assert (msg["snapshot_info"], msg["chunk"]) == ([0, 3, 7], b"")
    # Frame 3 of a status 1 or 2 response holds any MessagePack value, an extension type too.
    ignored = STRICT.decode(H(RID, "01", "d40100", "14"), as_="RequestEntriesResponse")["ignored"]
    assert ignored == msgpack.ExtType(1, b"\x00")


def test_unknown_type_byte() -> None:
    for c in CODECS.values():
        with pytest.raises(DecodeError) as ei:
            c.decode(H("01", "21", CLUSTER), channel="request")
        e = ei.value
        assert not isinstance(e, ConformanceError)
        assert (e.message, e.field, e.clause) == (None, None, "raft.wire.grammar")
        assert e.reason.startswith("unknown message") and "b'+'" in e.reason


def test_response_needs_a_name() -> None:
    for c in CODECS.values():
        for kw in ({}, {"channel": "response"}):
            with pytest.raises(DecodeError) as ei:
                c.decode(H("01", "05", "01"), **kw)
            e = ei.value
            assert (e.message, e.field, e.clause) == (None, None, "raft.wire.grammar")
            assert "cannot tell" in e.reason and "RequestVoteResponse" in e.reason
        assert c.decode(H("01", "05", "01"), as_="RequestVoteResponse")["vote_granted"] is True
    with pytest.raises(DecodeError) as ei2:
        STRICT.decode(H("01", "05", "01"), as_="NoSuchResponse")
    assert ei2.value.message == "NoSuchResponse" and ei2.value.clause == "raft.wire.grammar"


def test_strict_reports_config_update_as_conformance_error() -> None:
    frames = H(RID, "26", CLUSTER, PEERS_HEX)
    with pytest.raises(ConformanceError) as ei:
        STRICT.decode(frames, channel="request")
    e = ei.value
    assert e.dialects == ["raft:zmq-raft"]
    assert (e.message, e.field, e.clause) == (None, None, "raft.wire.grammar")
    assert e.decoded.name == "ConfigUpdate" and e.decoded["peers"] == [["p1", "tcp://a:1"]]
    with pytest.raises(ConformanceError) as ei2:
        STRICT.decode(frames, as_="ConfigUpdate")
    e = ei2.value
    assert (e.message, e.field, e.clause, e.dialects) == ("ConfigUpdate", None, "raft.wire.grammar", ["raft:zmq-raft"])
    with pytest.raises(ConformanceError) as ei3:
        STRICT.decode(H(RID, "00", "c0"), as_="ConfigUpdateResponse")
    assert ei3.value.dialects == ["raft:zmq-raft"]


def test_strict_reports_request_config_with_cluster_ident() -> None:
    with pytest.raises(ConformanceError) as ei:
        STRICT.decode(H("01", "5e", CLUSTER), channel="request")
    e = ei.value
    assert e.dialects == ["raft:zmq-raft"]
    assert (e.message, e.field, e.clause) == ("RequestConfig", None, "raft.wire.grammar")
    assert "extra frame" in e.reason and "raft:zmq-raft" in e.reason
    assert e.decoded.name == "RequestConfig" and e.decoded.fields == {"request_id": 1, "cluster": b"c1"}
    # A 0.7 RequestUpdate (cluster frame) too.
    with pytest.raises(ConformanceError) as ei3:
        STRICT.decode(H(RID, "3d", CLUSTER, "666f6f"), channel="request")
    e = ei3.value
    assert (e.message, e.field, e.clause, e.dialects) == ("RequestUpdate", None, "raft.wire.grammar", ["raft:zmq-raft"])


def test_dialect_does_not_take_strict_client_requests() -> None:
    with pytest.raises(DecodeError) as ei:
        ZR.decode(H(RID, "5e"), channel="request")
    e = ei.value
    assert (e.message, e.field, e.clause) == ("RequestConfig", "cluster", "raft.wire.grammar")
    with pytest.raises(DecodeError) as ei2:
        ZR.decode(H(RID, "5e", CLUSTER), channel="request")
    e = ei2.value
    assert (e.message, e.field, e.clause, e.frame) == ("RequestConfig", "request_id", "raft.wire.uint", 0)
