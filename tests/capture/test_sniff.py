"""The loopback recorder: only the ports asked for, each packet once, and a clear refusal of
what it cannot do."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq

from harness.capture import bpf
from harness.capture.pcapfile import segments
from harness.capture.sniff import CaptureError, LiveCapture

pytestmark = [pytest.mark.live, pytest.mark.timeout(60)]


def exchange(ctx: zmq.Context, port: int, n: int) -> None:
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    a.bind(f"tcp://127.0.0.1:{port}")
    b.connect(f"tcp://127.0.0.1:{port}")
    for i in range(n):
        a.send(b"x%d" % i)
        assert b.recv(), "no message"
    a.close(linger=1000)
    b.close(linger=1000)


def test_only_the_ports_asked_for_each_packet_once(tmp_path: Path) -> None:
    from harness.live.supervisor import free_port

    wanted, other = free_port(), free_port()
    path = str(tmp_path / "x.pcap")
    ctx = zmq.Context()
    try:
        with LiveCapture(path, [wanted]) as cap:
            exchange(ctx, wanted, 20)
            exchange(ctx, other, 20)
    finally:
        ctx.term()
    segs = list(segments(path))
    assert segs and all(wanted in (s.sport, s.dport) for s in segs)
    keys = [(s.src, s.sport, s.dst, s.dport, s.seq, s.payload) for s in segs if s.payload]
    assert len(keys) >= 10 and len(keys) == len(set(keys))  # not recorded twice (loopback's outgoing copies)
    assert cap.summary is not None and cap.summary.packets == len(segs) and not cap.summary.dropped
    assert cap.summary.tool in ("tcpdump", "scapy AsyncSniffer")


def test_the_filter_program_stays_within_its_limits() -> None:
    prog = bpf.program(range(5000, 5000 + bpf.MAX_PORTS))
    assert all(0 <= jt <= 255 and 0 <= jf <= 255 for _, jt, jf, _ in prog)
    with pytest.raises(ValueError, match="at most"):
        bpf.program(range(5000, 5001 + bpf.MAX_PORTS))
    with pytest.raises(CaptureError, match="no ports"):
        LiveCapture("x.pcap", [])
