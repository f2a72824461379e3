"""`zmq-harness pcap` on hand-made captures: nodes and roles, trace rows, checker verdicts found
from the capture alone, clause verdicts, dialects, PUB fan-out, request/response pairing, ports,
and the exit status for every kind of input."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from harness.capture.convert import PcapInputError, PcapOptions, check_pcap
from harness.capture.nodes import parse_ports
from harness.cli import main
from harness.protocols import codec
from harness.trace import read_trace
from tests.capture.pcaps import Conversation, message, write

DCP = codec("dcp")


def dcp_capture(path: str, *, second_request_early: bool = False, pong_version: int = 1,
                dialect: str = "strict") -> str:
    """A worker (identity w1) and a client (c1) on a broker at 5555: register, two requests
    answered one after the other. ``second_request_early``: the broker hands the worker the
    second request before the worker replied to the first (dcp.broker.one-request-per-worker)."""
    c = codec("dcp", dialect)
    clock = [1000.0]
    w = Conversation(("127.0.0.1", 40001), ("127.0.0.1", 5555), clock).zmtp_open(identity=b"w1")
    k = Conversation(("127.0.0.1", 40002), ("127.0.0.1", 5555), clock, seq=[5000, 700000]).zmtp_open(identity=b"c1")
    w.send(True, message(c.encode("REGISTER", service="echo")))
    w.send(False, message(c.encode("REGISTER", service="echo")))
    w.send(True, message(c.encode("PING")))
    pong = c.encode("PONG")
    pong[1] = b"DGBX" + bytes([pong_version])
    w.send(False, message(pong))
    for i in (1, 2):
        k.send(True, message(c.encode("REQUEST", service="echo", metadata=[b"m%d" % i], data=[b"d%d" % i])))
    req = [c.encode("REQUEST", service="echo", client_address=b"c1", metadata=[b"m%d" % i], data=[b"d%d" % i])
           for i in (1, 2)]
    rep = [c.encode("REPLY", client_address=b"c1", metadata=[b"m%d" % i], data=[b"d%d" % i]) for i in (1, 2)]
    w.send(False, message(req[0]))
    if second_request_early:
        w.send(False, message(req[1]))
    w.send(True, message(rep[0]))
    k.send(False, message(rep[0]))
    if not second_request_early:
        w.send(False, message(req[1]))
    w.send(True, message(rep[1]))
    k.send(False, message(rep[1]))
    return write(path, w, k)


def run(path: str, tmp_path: Path, protocol: str = "dcp", **kw):
    return check_pcap(path, PcapOptions(protocol, out_dir=str(tmp_path / "out"), **kw))


def verdicts(result) -> dict[tuple[str, str], bool]:
    return {(v.check, v.clause): v.ok for v in result.verdicts}


def test_a_clean_capture_names_nodes_and_roles_and_passes(tmp_path: Path) -> None:
    r = run(dcp_capture(str(tmp_path / "a.pcap")), tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    assert r.nodes == {"w1": "worker", "127.0.0.1:5555": "broker", "c1": "client"}
    got = verdicts(r)
    assert got[("one-request-per-worker", "dcp.broker.one-request-per-worker")]
    assert got[("metadata-unchanged", "dcp.worker.metadata-copied")]
    assert got[("wire-conformance", "dcp.wire.grammar")]
    # heartbeat-answers needs restarts ("PONGs only peers that registered since it started")
    assert [c for c, _ in r.not_applicable] == ["exactly-once", "worker-expiry", "heartbeat-answers", "reply-unchanged", "worker-interval",
                                                 "worker-registers"]
    assert "4 repl" not in str(r.verdicts) and "2 request(s) given to workers" in str(r.verdicts)


def test_the_trace_has_a_send_and_a_recv_row_per_message(tmp_path: Path) -> None:
    r = run(dcp_capture(str(tmp_path / "a.pcap")), tmp_path)
    t = read_trace(r.trace_path)
    sends = t.filter(pc.equal(t["kind"], "send")).to_pylist()
    recvs = {row["msg_id"]: row for row in t.filter(pc.equal(t["kind"], "recv")).to_pylist()}
    assert len(sends) == len(recvs) == r.stats["messages"] == 12
    first = sends[0]
    assert (first["node"], first["role"], first["msg_type"], first["peer"], first["topic"]) == \
        ("w1", "worker", "REGISTER", "127.0.0.1:5555", "echo")
    back = recvs[first["msg_id"]]
    assert (back["node"], back["peer"], back["time_ns"]) == ("127.0.0.1:5555", "w1", first["time_ns"])
    assert sends[0]["time_ns"] > 0 and t["implementation"][0].as_py() in ("", "captured")
    kinds = set(t["kind"].to_pylist())
    assert {"connect", "send", "recv", "verdict"} <= kinds
    skipped = t.filter(pc.equal(t["verdict"], "skipped"))["msg_type"].to_pylist()
    assert skipped == ["exactly-once", "worker-expiry", "heartbeat-answers", "reply-unchanged", "worker-interval",
                       "worker-registers"]


def test_a_broker_that_overloads_a_worker_is_caught_from_the_capture_alone(tmp_path: Path) -> None:
    r = run(dcp_capture(str(tmp_path / "a.pcap"), second_request_early=True), tmp_path)
    bad = [v for v in r.failed]
    assert [(v.check, v.clause) for v in bad] == [("one-request-per-worker", "dcp.broker.one-request-per-worker")]
    assert "to b'w1'" in bad[0].detail


def test_a_wrong_version_breaks_its_clause(tmp_path: Path) -> None:
    r = run(dcp_capture(str(tmp_path / "a.pcap"), pong_version=2), tmp_path)
    (bad,) = r.failed
    assert (bad.check, bad.clause) == ("wire-conformance", "dcp.wire.version")
    assert "1 message(s) break it" in bad.detail and bad.evidence[0]["from"] == "127.0.0.1:5555"
    assert verdicts(r)[("wire-conformance", "dcp.wire.grammar")]  # the other 11 conform


def test_a_dialect_run_reports_strict_conformance_too(tmp_path: Path) -> None:
    path = dcp_capture(str(tmp_path / "a.pcap"), dialect="dcp:dagbox")
    r = run(path, tmp_path, dialect="dcp:dagbox")
    got = verdicts(r)
    assert got[("dialect:dcp:dagbox", "dcp.wire.grammar")]
    assert not got[("wire-conformance", "dcp.wire.message-type")]
    assert got[("one-request-per-worker", "dcp.broker.one-request-per-worker")]
    strict = [v for v in r.failed if v.check == "wire-conformance"][0]
    assert "valid only in dialect dcp:dagbox" in strict.detail
    r2 = run(path, tmp_path)  # read strictly: every message breaks the type clause
    assert not verdicts(r2)[("wire-conformance", "dcp.wire.message-type")]


def test_ports_select_the_protocol_and_name_roles_and_nodes(tmp_path: Path) -> None:
    dcp = dcp_capture(str(tmp_path / "a.pcap"))
    other = Conversation(("127.0.0.1", 40009), ("127.0.0.1", 6000), [2000.0]).zmtp_open("DEALER", "ROUTER")
    other.send(True, message([b"not", b"dcp"]))
    from scapy.utils import rdpcap

    both = write(str(tmp_path / "both.pcap"), packets=sorted(list(rdpcap(dcp)) + other.packets, key=lambda p: p.time))
    mixed = run(both, tmp_path)
    assert [v.check for v in mixed.failed] == ["wire-conformance"]  # port 6000 is not DCP
    r = run(both, tmp_path, ports=parse_ports(["5555=broker/hq"]))
    assert r.ok and r.nodes["hq"] == "broker" and r.stats["messages"] == 12


def test_gaps_make_the_capture_incomplete(tmp_path: Path) -> None:
    c = Conversation().zmtp_open(identity=b"w1")
    c.send(True, message(DCP.encode("REGISTER", service="echo")))
    c.segment(True, message(DCP.encode("PING")))  # lost
    c.send(True, message(DCP.encode("PING")))
    c.close()
    r = run(write(str(tmp_path / "a.pcap"), c), tmp_path)
    (bad,) = r.failed
    assert bad.check == "capture-complete" and "not necessarily of the implementation" in bad.detail


def test_garbage_on_a_named_port_fails_the_framing_check(tmp_path: Path) -> None:
    good = Conversation().zmtp_open(identity=b"w1")
    good.send(True, message(DCP.encode("PING")))
    bad = Conversation(("127.0.0.1", 40005), ("127.0.0.1", 5555), good.clock)
    bad.open()
    bad.send(True, b"\x00" * 10 + b"garbage")
    r = run(write(str(tmp_path / "a.pcap"), good, bad), tmp_path, ports=parse_ports(["5555"]))
    (v,) = r.failed
    assert v.check == "zmtp-framing" and "127.0.0.1:40005, byte 0 of its stream: not a ZMTP stream" in v.detail


def test_pub_fan_out_is_one_send_and_a_recv_per_subscriber(tmp_path: Path) -> None:
    dafka = codec("dafka")
    record = dafka.encode("RECORD", topic="orders", address="p1", subject="orders", sequence=0, content=b"x")
    clock = [1000.0]
    subs = [Conversation(("127.0.0.1", 40000 + i), ("127.0.0.1", 6001), clock, seq=[1000 * i, 90000 * i])
            .zmtp_open("SUB", "XPUB") for i in (1, 2)]
    for s in subs:
        s.send(False, message(record))
    for s in subs:
        s.send(False, message(record))  # a second, identical send
    r = run(write(str(tmp_path / "a.pcap"), *subs), tmp_path, protocol="dafka")
    t = read_trace(r.trace_path)
    sends = t.filter(pc.equal(t["kind"], "send")).to_pylist()
    recvs = t.filter(pc.equal(t["kind"], "recv")).to_pylist()
    assert len(sends) == 2 and len(recvs) == 4
    assert sorted(row["msg_id"] for row in recvs) == sorted([sends[0]["msg_id"], sends[1]["msg_id"]] * 2)
    assert r.nodes["127.0.0.1:6001"] == "producer" and sends[0]["seq"] == 0 and sends[0]["topic"] == "orders"


def test_responses_without_a_type_are_paired_with_their_requests(tmp_path: Path) -> None:
    raft = codec("raft")
    req = raft.encode("RequestVote", message_id=7, cluster=b"c", peer_id="p1", term=3, last_log_index=0,
                      last_log_term=0)
    resp = raft.encode("RequestVoteResponse", message_id=7, term=3, vote_granted=True)
    c = Conversation(("127.0.0.1", 40001), ("127.0.0.1", 7001)).zmtp_open(identity=b"p1")
    c.send(True, message(req))
    c.send(False, message(resp))
    r = run(write(str(tmp_path / "a.pcap"), c), tmp_path, protocol="raft")
    t = read_trace(r.trace_path)
    names = t.filter(pc.equal(t["kind"], "send"))["msg_type"].to_pylist()
    assert names == ["RequestVote", "RequestVoteResponse"]
    assert r.ok and t.filter(pc.equal(t["kind"], "send"))["term"].to_pylist() == [3, 3]


def test_raft_responses_pair_by_request_id_and_may_repeat(tmp_path: Path) -> None:
    """A live Raft capture once failed wire-conformance on every RequestUpdate: the leader answers
    it twice ("accepted", then "committed") and RequestEntries in a pipeline, and only the first
    answer was decoded. Responses pair by the id they repeat; one with no request is still an error."""
    raft = codec("raft")
    u1, u2, e1 = b"u" * 12, b"v" * 12, b"e" * 12
    c = Conversation(("127.0.0.1", 40001), ("127.0.0.1", 7001)).zmtp_open()
    c.send(True, message(raft.encode("RequestUpdate", reqid=u1, data=b"put")))
    c.send(True, message(raft.encode("RequestUpdate", reqid=u2, data=b"cas")))
    c.send(True, message(raft.encode("RequestEntries", reqid=e1, prev_log_index=0, count=4)))
    for rid in (u2, u1, u1, u2):  # accepted and committed, out of order
        c.send(False, message(raft.encode("RequestUpdateResponse", reqid=rid, success=True, log_index=1)))
    for status in (2, 1):  # a pipeline of two
        c.send(False, message(raft.encode("RequestEntriesResponse", reqid=e1, status=status, ignored=None, last_index=4,
                                          entries=[])))
    r = run(write(str(tmp_path / "a.pcap"), c), tmp_path, protocol="raft")
    t = read_trace(r.trace_path)
    names = t.filter(pc.equal(t["kind"], "send"))["msg_type"].to_pylist()
    assert names == ["RequestUpdate"] * 2 + ["RequestEntries"] + ["RequestUpdateResponse"] * 4 + [
        "RequestEntriesResponse"] * 2
    assert r.ok, [v.to_dict() for v in r.verdicts if not v.ok]

    stray = Conversation(("127.0.0.1", 40002), ("127.0.0.1", 7001)).zmtp_open()
    stray.send(True, message(raft.encode("RequestUpdate", reqid=u1, data=b"put")))
    stray.send(False, message(raft.encode("RequestUpdateResponse", reqid=u2, success=True, log_index=1)))
    bad = run(write(str(tmp_path / "b.pcap"), stray), tmp_path / "b", protocol="raft")
    assert not verdicts(bad)[("wire-conformance", "raft.wire.grammar")]


def test_an_event_bus_clients_dealers_reach_snapshot_and_collector(tmp_path: Path) -> None:
    """A live Event BUS capture once failed wire-conformance on every PUB: a client's DEALER sends
    SYNCSTART to the snapshot ROUTER and PUB to the collector ROUTER, and a PUB alone reads as a
    BROADCAST too. Both channels of that socket pair are tried, in order."""
    bus = codec("eventbus")
    event = dict(topic="/news/", sequence=0, producer="p1", timestamp="2026-11-27T01:00:00.000Z",
                 uuid="00000000-0000-4000-8000-000000000001", data={"n": 1})
    clock = [1000.0]
    snap = Conversation(("127.0.0.1", 40001), ("127.0.0.1", 7000), clock).zmtp_open(identity=b"c1")
    coll = Conversation(("127.0.0.1", 40002), ("127.0.0.1", 7002), clock, seq=[5000, 700000]).zmtp_open(identity=b"c1")
    snap.send(True, message(bus.encode("SYNCSTART", subtrees=["/news/"], sequence=0)))
    snap.send(False, message(bus.encode("SYNCEND", subtrees=["/news/"], sequence=0)))
    coll.send(True, message(bus.encode("PUB", **event)))
    r = run(write(str(tmp_path / "a.pcap"), snap, coll), tmp_path, protocol="eventbus")
    t = read_trace(r.trace_path)
    assert t.filter(pc.equal(t["kind"], "send"))["msg_type"].to_pylist() == ["SYNCSTART", "SYNCEND", "PUB"]
    assert r.ok, [v.to_dict() for v in r.verdicts if not v.ok]


@pytest.mark.parametrize("make,error", [
    (lambda d: (d / "x.pcap").write_bytes(b"junk") and str(d / "x.pcap"), "not a pcap or pcapng capture"),
    (lambda d: str(d / "missing.pcap"), "no such file"),
])
def test_input_that_is_not_a_capture_is_refused(tmp_path: Path, make, error: str) -> None:
    with pytest.raises(PcapInputError, match=error):
        run(make(tmp_path), tmp_path)


def test_a_capture_without_zmtp_is_refused(tmp_path: Path) -> None:
    c = Conversation()
    c.open()
    c.send(True, b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(PcapInputError, match="no ZMTP connection to check .no connection starts with a ZMTP"):
        run(write(str(tmp_path / "a.pcap"), c), tmp_path)


def test_exit_status_is_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = ["--out", str(tmp_path / "out")]
    assert main(["pcap", dcp_capture(str(tmp_path / "a.pcap")), "--protocol", "dcp", *out]) == 0
    text = capsys.readouterr().out
    assert "PASS pcap-a (pcap)" in text and "  n/a  exactly-once: needs application commands" in text
    assert "  ok   one-request-per-worker [dcp.broker.one-request-per-worker]" in text
    assert main(["pcap", dcp_capture(str(tmp_path / "b.pcap"), second_request_early=True), "--protocol", "dcp",
                 *out]) == 1
    assert "FAIL one-request-per-worker" in capsys.readouterr().out
    (tmp_path / "c.pcap").write_bytes(b"junk")
    assert main(["pcap", str(tmp_path / "c.pcap"), "--protocol", "dcp", *out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zmq-harness pcap: ") and err.count("\n") == 1
    assert main(["pcap", str(tmp_path / "a.pcap"), "--protocol", "dcp", "--dialect", "nope", *out]) == 2
    assert "dcp has no dialect 'nope'" in capsys.readouterr().err
    assert main(["pcap", str(tmp_path / "a.pcap"), "--protocol", "dcp", "--ports", "x=1", *out]) == 2
    assert main(["pcap", str(tmp_path / "a.pcap"), "--protocol", "dcp", "--ports", "6000", *out]) == 2
    assert "no ZMTP connection to check on port(s) 6000" in capsys.readouterr().err
