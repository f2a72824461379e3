"""What nodes run as external processes send, judged where a reference node received it.

``wire-conformance`` decodes what every probed node sends; an external node has no probe, so its
messages are seen only by the in-process nodes that receive them. A reference node drops a
message that does not decode with a ``Discard`` naming the clause it breaks: `ExternalWire`
fails on such a drop of a message an external node sent (an in-process sender's messages are
wire-conformance's), after decoding the frames again to tell a malformed message from one
dropped for another reason (a late answer, a peer the receiver does not know). The drop holds
the message as a ROUTER received it (its routing id first) or without the routing id: the
latest receipt of that socket with the same frames names the sender. A scenario whose rules
damage messages in flight (``corrupt``, `harness.checkers.external.corrupts`) is not judged: the damage would be blamed on the sender.
A package subclasses it with `sender`: which external node a discarded message came from.
(``wire-conformance`` also decodes every receipt from an external node, dropped or tolerated, for
every protocol: harness/checkers/wire_receipts.py; this check keeps the receiver's own word.)
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import DISCARD, RECV, Checker, Event, Verdict

NAME = "external-wire"


class ExternalWire(Checker):
    """Every message a node run as an external process sent a reference node decodes, as the
    receiver found it (its ``Discard`` names the clause a malformed one breaks)."""

    name = NAME
    clause = ""
    kinds = frozenset({DISCARD, RECV})
    fan_in: frozenset[str] = frozenset()  # roles whose socket receives from many peers (a ROUTER)

    def __init__(self, damaged: bool = False, any_external: bool = True, **params: Any) -> None:
        super().__init__(**params)
        self.damaged = damaged
        self.any_external = any_external
        if not any_external:
            self.kinds = frozenset()  # nothing to judge: a run without external nodes pays nothing
        self.bad: list[tuple[Event, str, str]] = []
        self.judged = 0
        self.received: dict[tuple[str, str], Event] = {}  # (node, socket) -> its latest receipt

    def sender(self, ev: Event, routing_id: bytes | None) -> tuple[str, str | None] | None:
        """(the external sender, the channel to decode the message on) of a discarded message
        (``routing_id``: the peer's, for a fan-in socket), or None when an in-process node sent it."""
        raise NotImplementedError

    def on_event(self, ev: Event) -> None:
        if ev.via or self.damaged:
            return
        if ev.kind == RECV:
            if ev.role in self.fan_in:
                self.received[(ev.node, ev.socket)] = ev
            return
        receipt = self.received.get((ev.node, ev.socket))
        got = receipt.frames if receipt is not None and receipt.frames else None
        # the drop holds the message with its routing id (as received) or without it
        skip = 1 if got is not None and got == ev.frames else 0
        rid = got[0] if got is not None and (skip or got[1:] == ev.frames) else None
        found = self.sender(ev, rid) if ev.frames else None
        if found is None:
            return
        who, channel = found
        self.judged += 1
        if ev.decoded(skip=skip, channel=channel) is not None:
            return  # it decodes: dropped for another reason (late, unexpected), not malformed
        d = ev.data or {}
        self.bad.append((ev, f"{who} sent {ev.node} a malformed message on {ev.socket}: {d.get('reason', '')}",
                         str(d.get("clause") or "")))

    def finish(self, end_ns: int) -> list[Verdict]:
        if not self.any_external:
            return [self.ok("no node runs as an external process")]
        if self.damaged:
            return [self.ok("not judged: the scenario's rules damage messages in flight")]
        if self.bad:
            return [self.first_problem(self.bad, "malformed message(s) from external nodes")]
        return [self.ok(f"no malformed message from an external node ({self.judged} dropped message(s) of theirs "
                        "decoded)")]
