"""Record loopback TCP traffic on some ports into a pcap file, in a helper process.

    with LiveCapture("run.pcap", [5555, 5556]) as cap:
        ...                      # the traffic to record
    print(cap.summary)           # tool, packets written, packets the kernel dropped

The recorder is ``tcpdump -i lo`` when tcpdump is installed, otherwise scapy's `AsyncSniffer`
on ``lo`` run by ``python -m harness.capture.sniff`` (this module), with a BPF filter on the
ports (`harness.capture.bpf`, since scapy needs libpcap or tcpdump to compile filter text).
Either runs as a separate process, so recording never competes with the nodes of a live run
for the interpreter, and is managed like every other process the harness starts
(`harness.live.supervisor`): waited for until it is listening, stopped with SIGTERM (it
writes out what it holds), and always reaped. Capturing needs root or CAP_NET_RAW;
`CaptureError` says so in one line when it is not permitted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import struct
import sys
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from harness.live.supervisor import ManagedProcess, ReadyLine, SupervisorError

READY_TIMEOUT_S = 20.0
STOP_GRACE_S = 10.0
SETTLE_S = 0.3  # after the traffic stops, before the recorder is told to stop: let it catch up
RCVBUF = 64 << 20  # the packet socket's buffer: a loaded machine must not drop a burst
SOL_PACKET, PACKET_STATISTICS = 263, 6
ETH_P_ALL = 0x0003
LINKTYPE_ETHERNET = 1


class CaptureError(RuntimeError):
    """Recording is not possible (not permitted, no such interface, recorder failed)."""


@dataclass
class CaptureSummary:
    tool: str  # "tcpdump" or "scapy AsyncSniffer"
    path: str
    packets: int | None  # written to the file, when the recorder says
    dropped: int | None  # dropped by the kernel (the capture has gaps), when the recorder says

    def __str__(self) -> str:
        counts = "" if self.packets is None else f": {self.packets} packet(s)"
        if self.dropped:
            counts += f", {self.dropped} DROPPED by the kernel (the capture has gaps)"
        return f"captured with {self.tool}{counts} -> {self.path}"


def check_permitted(interface: str = "lo") -> None:
    """Raise CaptureError (one line) when this process may not open a packet socket."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    except PermissionError:
        raise CaptureError("capturing traffic needs root or CAP_NET_RAW (not permitted for this user)") from None
    except (AttributeError, OSError) as e:
        raise CaptureError(f"cannot capture on this system: {e}") from None
    try:
        s.bind((interface, 0))
    except OSError as e:
        raise CaptureError(f"cannot capture on interface {interface!r}: {e.strerror or e}") from None
    finally:
        s.close()


def port_filter(ports: Sequence[int]) -> str:
    return "tcp and (" + " or ".join(f"port {p}" for p in sorted(set(ports))) + ")"


class LiveCapture:
    """Record ``ports`` on ``interface`` into ``path`` between `start` and `stop`."""

    def __init__(self, path: str, ports: Sequence[int], interface: str = "lo", tool: str = "auto") -> None:
        if not ports:
            raise CaptureError("no ports to capture")
        self.path = path
        self.ports = sorted(set(int(p) for p in ports))
        self.interface = interface
        if tool == "auto":
            tool = "tcpdump" if shutil.which("tcpdump") else "scapy"
        if tool not in ("tcpdump", "scapy"):
            raise CaptureError(f"unknown capture tool {tool!r} (tcpdump or scapy)")
        self.tool = tool
        self.summary: CaptureSummary | None = None
        self._proc: ManagedProcess | None = None

    def start(self) -> "LiveCapture":
        check_permitted(self.interface)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        if self.tool == "tcpdump":
            cmd = ["tcpdump", "-i", self.interface, "-U", "-s", "0", "-w", self.path, port_filter(self.ports)]
            ready = ReadyLine(r"listening on", stream="stderr", timeout=READY_TIMEOUT_S)
        else:
            cmd = [sys.executable, "-m", "harness.capture.sniff", "--out", self.path, "--interface", self.interface,
                   "--ports", ",".join(map(str, self.ports))]
            ready = ReadyLine(r"^READY", stream="stdout", timeout=READY_TIMEOUT_S)
        self._proc = ManagedProcess(cmd, ready=ready, name=f"capture ({self.tool})")
        try:
            self._proc.start()
        except SupervisorError as e:
            self._proc = None
            raise CaptureError(f"the {self.tool} recorder did not start: {str(e).splitlines()[0]}") from None
        return self

    def stop(self) -> CaptureSummary:
        """Stop the recorder (it writes out what it holds) and reap it."""
        if self._proc is None:
            if self.summary is None:
                raise CaptureError("the capture was never started")
            return self.summary
        threading.Event().wait(SETTLE_S)
        proc, self._proc = self._proc, None
        proc.stop(grace=STOP_GRACE_S)
        text = proc.output()
        if self.tool == "tcpdump":
            got = re.search(r"(\d+) packets? captured", text)
            lost = re.search(r"(\d+) packets? dropped by kernel", text)
            tool = "tcpdump"
        else:
            got = re.search(r"CAPTURED (\d+)", text)
            lost = re.search(r"DROPPED (\d+)", text)
            tool = "scapy AsyncSniffer"
        if not os.path.exists(self.path):
            raise CaptureError(f"the {tool} recorder wrote no file: {proc.tail(5)}")
        self.summary = CaptureSummary(tool, self.path, int(got.group(1)) if got else None,
                                      int(lost.group(1)) if lost else None)
        return self.summary

    def __enter__(self) -> "LiveCapture":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self._proc is not None:
            self.stop()


# ---- the recorder process (scapy) ---------------------------------------------------------------


def _raw_socket_class() -> type:
    from scapy.arch.linux import L2ListenSocket
    from scapy.config import conf

    class RawListenSocket(L2ListenSocket):  # type: ignore[misc]
        """scapy's listening packet socket, without dissecting what it reads (the recorder only
        writes bytes; dissecting each packet costs ~50x more) and without truncating packets to
        the Ethernet MTU (loopback carries up to 64 KiB)."""

        def recv_raw(self, x: int = 0) -> tuple[Any, Any, Any]:
            pkt, sa_ll, ts = self._recv_raw(self.ins, 1 << 18)
            if not pkt:
                return None, None, None
            return conf.raw_layer, pkt, ts

    return RawListenSocket


def _kernel_drops(sock: socket.socket) -> int:
    try:
        _, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        return drops
    except OSError:
        return 0


def _record(out: str, interface: str, ports: list[int]) -> int:
    from scapy.sendrecv import AsyncSniffer
    from scapy.utils import PcapWriter

    from harness.capture import bpf

    sock = _raw_socket_class()(iface=interface, nofilter=1)
    bpf.attach(sock.ins, ports)
    sock.ins.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)  # SO_RCVBUFFORCE: beyond rmem_max (root)
    sock.ins.setblocking(False)
    while True:  # what arrived before the filter was attached
        try:
            sock.ins.recv(1 << 18)
        except BlockingIOError:
            break
    sock.ins.setblocking(True)
    _kernel_drops(sock.ins)  # reading the statistics resets them
    writer = PcapWriter(out, linktype=LINKTYPE_ETHERNET, nano=True, sync=False)
    count = [0]

    def write(pkt: Any) -> None:
        writer.write(pkt)
        count[0] += 1

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    sniffer = AsyncSniffer(opened_socket=sock, prn=write, store=False)
    sniffer.start()
    print(f"READY capturing tcp ports {','.join(map(str, ports))} on {interface} -> {out}", flush=True)
    while not stop.wait(0.2):
        if not sniffer.running and sniffer.thread is not None and not sniffer.thread.is_alive():
            break
    sniffer.stop()
    sock.ins.setblocking(False)
    while True:  # what is still queued in the socket when the sniffer stopped
        try:
            cls, val, ts = sock.recv_raw()
        except (BlockingIOError, OSError):
            break
        if val is None:
            break
        pkt = cls(val)
        pkt.time = ts
        write(pkt)
    drops = _kernel_drops(sock.ins)
    writer.close()
    sock.close()
    print(f"CAPTURED {count[0]} packets, DROPPED {drops}", flush=True)
    if sniffer.exception is not None:
        print(f"error: the sniffer failed: {sniffer.exception}", file=sys.stderr, flush=True)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.capture.sniff",
                                 description="Record TCP traffic on some ports of an interface into a pcap file "
                                 "until SIGTERM/SIGINT (used by `zmq-harness run --live --capture`).")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ports", required=True, help="comma-separated TCP ports")
    ap.add_argument("--interface", default="lo")
    args = ap.parse_args(argv)
    try:
        ports = [int(p) for p in args.ports.split(",") if p.strip()]
        check_permitted(args.interface)
        return _record(args.out, args.interface, ports)
    except (CaptureError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
