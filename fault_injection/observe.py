"""What the chaos proxy reports of the traffic it relays between two named nodes: `Seen`.

The proxy reads each whole message of an observed connection from its sender and hands it on
to its receiver (or not: a rule drops it, a partition loses it, a closed connection loses what
was delayed). Each message read is a ``send`` of the sender; each copy handed on is a ``recv``
of the receiver, carrying the frames the receiver gets (damaged ones after a ``corrupt`` rule).
A dropped message is therefore a send without a receive, a duplicated one a send with two, as
in simulation. Socket-internal messages (an XPUB's welcome, ZMTP commands) are not reported: a
node's probe does not report them either. A subscription (a SUB's ``\x01`` message, or a ZMTP
3.1 SUBSCRIBE or CANCEL command) is reported as a send of the subscriber, of type
``zmq.subscribe`` or ``zmq.unsubscribe`` with the prefix as its one frame, and never as received
(the publishing socket reads it, not its node): it is what a probe reports as a node's
``Subscribe``, seen on one connection. Bytes the proxy cannot frame as ZMTP are not messages and
are not reported.

A `Seen` carries what a consumer needs to present the message as a node's probe would: the
ZMTP socket types of both sides (from their READY commands) and the routing id each side has
on the connection (its READY Identity, else a made-up one, unique per connection, as a ROUTER
makes up one), so a ROUTER's receive can carry the routing id in front, as ZeroMQ hands it to
the application.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

SEEN_SEND, SEEN_RECV = "send", "recv"
SUBSCRIBED, UNSUBSCRIBED = "zmq.subscribe", "zmq.unsubscribe"  # the msg_type of a reported subscription


@dataclass(frozen=True, slots=True)
class Seen:
    kind: str  # SEEN_SEND (read from the sender) or SEEN_RECV (handed on to the receiver)
    number: int  # the message's number in the proxy: a receive carries the number of its send
    time_ns: int  # the proxy's clock when it read or handed on the message
    src: str
    dst: str
    src_socket: str  # the sender's socket name, when the run could name it (else "")
    dst_socket: str
    src_type: str  # ZMTP socket types, from each side's READY ("" if not seen)
    dst_type: str
    src_id: bytes  # the routing id of each side on this connection
    dst_id: bytes
    endpoint: str  # the endpoint the binder binds (the connection's target)
    binder: str  # which of src and dst binds it
    msg_type: str
    frames: tuple[bytes, ...]
    connection: int = -1  # the proxy's number of the connection (-1: not given)


SeenHook = Callable[[Seen], None]
ObservePairs = Callable[[str, str], bool]  # (src, dst) -> whether their traffic is reported


def made_up_id(connection: int) -> bytes:
    """A routing id for a side that presented none: 5 bytes, a zero then the connection's
    number (libzmq makes up ids of the same shape)."""
    return b"\x00" + (connection & 0xFFFFFFFF).to_bytes(4, "big")


__all__ = ["ObservePairs", "SEEN_RECV", "SEEN_SEND", "SUBSCRIBED", "Seen", "SeenHook", "UNSUBSCRIBED", "made_up_id"]
