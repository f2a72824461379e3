"""The scapy layers: ZMTP units over scapy's own TCPSession, whole messages with a protocol layer
that shows decoded fields, and building packets from fields."""

from __future__ import annotations

from pathlib import Path

from scapy.sendrecv import sniff
from scapy.sessions import TCPSession

from harness.capture.layers import DCP, ZMTP, Dafka, ZMTPCommand, ZMTPGreeting, ZMTPMessage, bind_zmtp, messages
from harness.protocols import codec
from tests.capture.pcaps import Conversation, message, write

C = codec("dcp")


def capture(path: str, pieces: int = 1) -> str:
    c = Conversation(server=("127.0.0.1", 5601)).zmtp_open(identity=b"w1")
    c.send(True, message(C.encode("REGISTER", service="echo")), pieces)
    c.send(False, message(C.encode("REQUEST", service="echo", client_address=b"c1", metadata=[b"m"],
                                   data=[b"x" * 400])), pieces)
    c.send(True, message([b"", b"DGBX\x07", b"\x02"]))
    return write(path, c)


def test_messages_show_their_decoded_fields(tmp_path: Path) -> None:
    pkts = list(messages(capture(str(tmp_path / "a.pcap")), "dcp"))
    assert [p[DCP].msg_type for p in pkts] == [b"REGISTER", b"REQUEST", b"(malformed)"]
    shown = pkts[1].show(dump=True)
    assert "msg_type  = b'REQUEST'" in shown and 'service   = "echo"' in shown and 'metadata  = ["m"]' in shown
    assert "client_address" in shown and "frame" in shown
    assert pkts[1].summary() == 'ZMTPMessage / DCP REQUEST version=1 service="echo" client_address="c1" metadata=["m"]'
    assert pkts[1][ZMTPMessage].src == b"127.0.0.1:40001" or pkts[1][ZMTPMessage].dst == b"127.0.0.1:40001"
    assert "version" in pkts[2][DCP].error and pkts[0].time > 1000


def test_scapy_tcp_session_gives_whole_zmtp_units(tmp_path: Path) -> None:
    bind_zmtp([5601])
    pkts = [p for p in sniff(offline=capture(str(tmp_path / "a.pcap"), pieces=3), session=TCPSession) if ZMTP in p]
    units = [u for p in pkts for u in p[ZMTP].units]
    assert sum(isinstance(u, ZMTPGreeting) for u in units) == 2
    readies = [u[ZMTPCommand] for u in units if ZMTPCommand in u]
    assert [r.cmd for r in readies] == [b"READY", b"READY"]
    props = {p.key: p.value for r in readies for p in r.properties}
    assert props[b"Socket-Type"] in (b"ROUTER", b"DEALER") and props[b"Identity"] in (b"", b"w1")
    data = [u for u in units if ZMTPCommand not in u and not isinstance(u, ZMTPGreeting)]
    assert len(data) == 4 + 9 + 3  # the frames of the three messages, each whole
    assert any(u.long_size == 400 for u in data)
    assert "ZMTP 3.1 greeting NULL" in pkts[0].summary()


def test_a_protocol_layer_builds_the_frames_of_its_message() -> None:
    pkt = Dafka(msg_type="RECORD", topic="orders", address="p1", subject="orders", sequence=5, content=b"hi")
    back = Dafka(bytes(pkt))
    assert back.msg_type == b"RECORD" and back.sequence == 5 and back.content == b"hi"
    frames = ZMTPMessage(bytes(pkt)).bodies()
    assert codec("dafka").decode(frames).fields["sequence"] == 5
