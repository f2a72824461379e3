"""An Event BUS server run as an external process, seen from the in-process clients: what each
client sent it and got back, as the server's own probe would report it (`server_view`), for the
server checks (`ServerViews`) that can judge a server from one client connection at a time."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import RECV, SEND, Checker, Event

VIA_CLIENT = "client"  # Event.via of a server event seen at a client (its time bounds the server's)


# A client's socket to server i is named after the server port (snapshot, publisher, collector),
# with ".i" from the second server on (reference_nodes.eventbus.common.socket_name).
_SERVER_VIEW = {(SEND, "snapshot"): RECV, (RECV, "snapshot"): SEND, (SEND, "collector"): RECV,
                (RECV, "publisher"): SEND}


def server_view(ev: Event, external: dict[int, str]) -> Event | None:
    """What an in-process client's send or receive on its socket to an external server shows of
    that server, as the server's own probe would report it (a ROUTER's routing id, the client's
    node name, in front of snapshot and collector messages), or None. ``external``: server index
    (the clients' order) -> node. A send bounds the server's receipt from below, a receipt its
    send from above; on one connection the order is the server's."""
    if ev.role != "client" or ev.via or not ev.frames:
        return None
    channel, _, index = ev.socket.partition(".")
    server = external.get(int(index) if index.isdigit() else 0)
    kind = _SERVER_VIEW.get((ev.kind, channel))
    if server is None or kind is None:
        return None
    msg = ev.decoded(channel=channel)  # a client's receipts carry no message type
    frames = ev.frames if channel == "publisher" else [ev.node.encode(), *ev.frames]
    seen = Event(ev.time_ns, server, "server", kind, channel, frames, msg.name if msg else ev.msg_type, codec=ev.codec)
    seen.via = VIA_CLIENT
    return seen


class ServerViews(Checker):
    """A server check that, for servers run as external processes (no probe), reads what the
    in-process clients exchange with them instead (`server_view`)."""

    def __init__(self, external_servers: dict[int, str] | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.external_servers = dict(external_servers or {})
        if self.external_servers:
            self.roles = frozenset({"client", "server"})  # the clients' events show the external servers

    def on_event(self, ev: Event) -> None:
        if ev.via:  # an external node as the chaos proxy saw it: only a check that says so reads it
            if ev.role == "server":
                self.on_observed(ev)
            return
        if ev.role == "client":
            seen = server_view(ev, self.external_servers)
            if seen is not None:
                self.on_server_event(seen)
            return
        self.on_server_event(ev)

    def on_server_event(self, ev: Event) -> None:
        raise NotImplementedError

    def on_observed(self, ev: Event) -> None:
        """A send or receipt of an external server as the chaos proxy saw it (``via="proxy"``):
        the in-process clients' views already show it on their connections, so by default it is
        not read again."""
