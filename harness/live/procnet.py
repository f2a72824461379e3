"""What Linux's /proc says about the TCP connections of a process group (an implementation
under test started by the harness may be several processes: a shell and its program, a
launcher and its workers). Without /proc every question answers "unknown" (False / empty)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

_ESTABLISHED = "01"
_TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def _tcp_rows(tables: tuple[str, ...] = _TCP_TABLES) -> Iterator[list[str]]:
    """The rows of the kernel's TCP tables, split: [1] local and [2] remote address as
    ``HEXADDR:HEXPORT``, [3] the state, [9] the socket's inode."""
    for table in tables:
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9:
                yield fields


def _hex_addr(addr: tuple[str, int]) -> str:
    return f"{socket.inet_aton(addr[0])[::-1].hex().upper()}:{addr[1]:04X}"


def connection_inode(local: tuple[str, int], remote: tuple[str, int]) -> str | None:
    """The inode of the IPv4 TCP socket with local address ``local`` connected to ``remote``.
    The whole pair, not the local address alone: the kernel gives one local port to
    connections towards different destinations, and the table keeps a closed one for a minute
    (TIME_WAIT, inode 0), so a local address alone can name the wrong socket or none."""
    want_local, want_remote = _hex_addr(local), _hex_addr(remote)
    return next((fields[9] for fields in _tcp_rows(_TCP_TABLES[:1])
                 if fields[1] == want_local and fields[2] == want_remote and fields[9] != "0"), None)


def group_members(pgid: int) -> list[int]:
    """The processes of the group led by ``pgid`` (the leader first)."""
    out = [pgid]
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if entry.isdigit() and int(entry) != pgid:
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


def socket_inodes(pgid: int) -> set[str]:
    """The inodes of every socket a process of the group holds open."""
    out: set[str] = set()
    for member in group_members(pgid):
        try:
            fds = os.listdir(f"/proc/{member}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{member}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(target[8:-1])
    return out


def connects_to(pgid: int, ports: set[int]) -> bool:
    """Whether a process of the group has an established TCP connection to one of ``ports``
    (on any local address): the implementation reached a socket the harness bound."""
    if not ports:
        return False
    wanted = {f"{p:04X}" for p in ports}
    inodes: set[str] | None = None  # read only once a connection to a wanted port exists
    for fields in _tcp_rows():
        if fields[3] != _ESTABLISHED or fields[2].rsplit(":", 1)[-1] not in wanted:
            continue
        if inodes is None:
            inodes = socket_inodes(pgid)
        if fields[9] in inodes:
            return True
    return False


__all__ = ["connection_inode", "connects_to", "group_members", "socket_inodes"]
