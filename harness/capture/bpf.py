"""A classic BPF program for "TCP to or from these ports", built without libpcap.

scapy compiles filter text with libpcap (or tcpdump), which a minimal machine has neither of;
the program a live capture needs is small enough to assemble here. It is the program
``tcpdump -dd 'tcp and (port A or port B ...)'`` prints for an Ethernet link (what Linux
loopback delivers), with one addition: packets the packet socket sees going out are
rejected, so each loopback packet is captured once (libpcap does the same on ``lo``).
`attach(sock, ports)` attaches it to a packet socket.
"""

from __future__ import annotations

import ctypes
import socket
from typing import Iterable

# Opcodes (linux/filter.h).
LD_W_ABS, LD_H_ABS, LD_B_ABS, LD_H_IND, LDX_B_MSH = 0x20, 0x28, 0x30, 0x48, 0xB1
JEQ_K, JSET_K, RET_K = 0x15, 0x45, 0x06
SKF_AD_PKTTYPE = 0xFFFFF000 + 4  # ancillary load: the packet type
PACKET_OUTGOING = 4
SO_ATTACH_FILTER = 26
SNAP = 262144  # bytes kept of an accepted packet (all of it)
MAX_PORTS = 60  # jump offsets are 8 bits; 2 x 60 port tests stay well inside them


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Insn))]


Instruction = tuple[int, "int | str", "int | str", int]  # code, jt, jf (labels or 0), k


def program(ports: Iterable[int]) -> list[tuple[int, int, int, int]]:
    """The instructions (code, jt, jf, k) accepting IPv4/IPv6 TCP segments with either port in
    ``ports`` on an Ethernet link, and rejecting outgoing copies."""
    ps = sorted(set(int(p) for p in ports))
    if not ps:
        raise ValueError("no ports to capture")
    if len(ps) > MAX_PORTS:
        raise ValueError(f"at most {MAX_PORTS} ports can be filtered, got {len(ps)}")
    code: list[tuple[str | None, Instruction]] = []

    def emit(op: int, jt: int | str = 0, jf: int | str = 0, k: int = 0, label: str | None = None) -> None:
        code.append((label, (op, jt, jf, k)))

    def port_tests(load: int, at: int, miss: str, label: str | None = None) -> None:
        """Load the port at ``at``; accept on a match, else go to ``miss``."""
        emit(load, k=at, label=label)
        for i, p in enumerate(ps):
            emit(JEQ_K, "accept", miss if i == len(ps) - 1 else 0, p)

    emit(LD_W_ABS, k=SKF_AD_PKTTYPE)
    emit(JEQ_K, "reject", 0, PACKET_OUTGOING)
    emit(LD_H_ABS, k=12)
    emit(JEQ_K, "ipv4", 0, 0x0800)
    emit(JEQ_K, "ipv6", "reject", 0x86DD)
    # IPv4: protocol TCP, not a fragment, then source and destination port after the header.
    emit(LD_B_ABS, 0, 0, 23, label="ipv4")
    emit(JEQ_K, 0, "reject", socket.IPPROTO_TCP)
    emit(LD_H_ABS, k=20)
    emit(JSET_K, "reject", 0, 0x1FFF)
    emit(LDX_B_MSH, k=14)
    port_tests(LD_H_IND, 14, "v4dst")
    port_tests(LD_H_IND, 16, "reject", label="v4dst")
    # IPv6: next header TCP (no extension headers), ports at fixed offsets.
    emit(LD_B_ABS, 0, 0, 20, label="ipv6")
    emit(JEQ_K, 0, "reject", socket.IPPROTO_TCP)
    port_tests(LD_H_ABS, 54, "v6dst")
    port_tests(LD_H_ABS, 56, "reject", label="v6dst")
    emit(RET_K, k=SNAP, label="accept")
    emit(RET_K, k=0, label="reject")
    where = {label: i for i, (label, _) in enumerate(code) if label}
    out = []
    for i, (_, (op, jt, jf, k)) in enumerate(code):
        rt = where[jt] - i - 1 if isinstance(jt, str) else jt
        rf = where[jf] - i - 1 if isinstance(jf, str) else jf
        if not (0 <= rt <= 255 and 0 <= rf <= 255):
            raise ValueError("BPF jump out of range")  # cannot happen below MAX_PORTS
        out.append((op, rt, rf, k))
    return out


def attach(sock: socket.socket, ports: Iterable[int]) -> None:
    """Attach the program to a packet socket (the kernel copies it)."""
    insns = program(ports)
    array = (_Insn * len(insns))(*[_Insn(*i) for i in insns])
    prog = _Prog(len(insns), ctypes.cast(array, ctypes.POINTER(_Insn)))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, bytes(memoryview(prog)))  # type: ignore[arg-type]
