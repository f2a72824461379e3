"""What nodes run as external processes send the harness's nodes, judged by ``wire-conformance``
as those nodes receive it.

An external node (a ``command:`` group) has no probe: its sends are not events. What it sends a
probed node is seen as that node's receipt, and `ReceiptJudge` decodes such a receipt exactly as
`harness.checkers.wire.WireConformance` decodes a probed node's send: the same codec in the run's
dialect, the channels of the package's capture hints for the two socket types, an untyped
response as the answer to the request the receiver sent on that link, and a message that does not
decode breaks the clause its error names, in the same per-clause verdicts (evidence: the external
sender, the receiver, time, frames in hex, the error).

Why inside ``wire-conformance`` rather than a wider ``external-wire`` check: every run gets
``wire-conformance`` whatever its ``check:`` list says, and it already holds the codec, the
channels and the answers each link owes; a second check would repeat all three and could
judge the same message under two names. (``external-wire`` still reads the reference nodes'
drops for the Event BUS and PPPP.)

Attribution, which must be certain (a false alarm is as serious as a miss):

* every probed node's send (and every send the chaos proxy observed, which is judged as a send)
  is remembered by its bytes; a receipt with the same bytes was judged at its sender and is not
  judged again. Without a ``corrupt`` rule a receipt is a byte copy of a send, so a receipt
  that matches no probed send came from a node without a probe: an external node. A scenario
  whose rules corrupt messages judges no receipt (a damaged copy would be blamed on its
  sender);
* which external node: the package's ``senders`` (receiver role, socket, frames -> the roles
  that may send it that, or the one node the wiring connects that socket to) narrows the run's
  external nodes; one left is the sender; of several,
  a ROUTER's routing id equal to one's node name names it; else the message is not judged and
  the verdict counts it ("sender not told");
* once more sends were made than are remembered (`SENT_MAX`, far above a live run's), a receipt
  that does not decode and matches none is counted as not told, never blamed;
* an untyped response (Raft) that answers no request the receiver owes an answer to (a copy a
  ``duplicate`` rule made of an answer already judged) cannot be decoded at all: counted, not
  judged.

A run without external nodes builds none of this: `WireConformance` then pays nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable

from harness.checkers.base import Event
from harness.checkers.wire import JUDGED_PER_SENDER, WireConformance, Route, hex_frames, only_in
from harness.protocols import DecodeError

SENT_MAX = 1 << 18  # distinct sends remembered by their bytes (a live run makes far fewer)
EXTERNAL = "external"  # the last part of a link key on which an external node owes answers
# (receiver role, receiver socket, frames as received) -> the roles that may have sent it (None:
# any), or the one node that can have (a str: a socket connected to one node by the wiring)
Senders = Callable[[str, str, list[bytes]], "tuple[str, ...] | str | None"]


@dataclass(frozen=True)
class ExternalSenders:
    """What a run tells `WireConformance` about its external nodes."""

    nodes: dict[str, str]  # external node -> its role
    damaged: bool = False  # a rule of the scenario corrupts messages in flight
    senders: Senders | None = None  # the package's narrowing of who may send what (None: anyone)


class _Untold:
    pass


UNTOLD = _Untold()  # an external node sent it, which one cannot be told


class ReceiptJudge:
    """The receipts part of `WireConformance` (see the module docstring)."""

    def __init__(self, check: WireConformance, external: ExternalSenders) -> None:
        self.check = check
        self.nodes = dict(external.nodes)
        self.damaged = external.damaged
        self.senders = external.senders
        self.by_identity = {n.encode(): n for n in self.nodes}
        self.sent: dict[tuple[bytes, ...], None] = {}  # bodies sent, oldest first
        self.forgot = False  # some were forgotten (SENT_MAX)
        self.requests = frozenset(check.decoder.answers)
        responses = frozenset(check.decoder.answers.values())
        # channels untyped responses travel on
        self.answer_channels = frozenset(c for m in check.decoder.codec.table.messages if m.name in responses
                                         for c in (m.channels or (None,)))
        self.judged: dict[str, int] = {}  # external node -> its messages decoded as received
        self.untold = 0  # receipts from an external node that cannot be told
        self.unasked = 0  # untyped responses to no request seen
        self.ignored = 0  # receipts not judged because rules damage messages
        self._failures: dict[tuple[str, str], int] = {}  # (sender, receiving socket) -> violations

    # ---- sends: what was judged at the sender, and the answers an external node owes ----------

    def on_send(self, ev: Event, route: Route | None) -> None:
        frames = ev.frames or []
        skip = route.skip if route is not None else 0
        body = tuple(frames[skip:])
        if body not in self.sent:
            self.sent[body] = None
            if len(self.sent) > SENT_MAX:
                del self.sent[next(iter(self.sent))]
                self.forgot = True
        if ev.via or route is None or ev.msg_type not in self.requests:
            return
        for ch in route.out:  # a request: whoever receives it owes the answer on this link
            msg = ev.decoded(skip, None, ch)
            if msg is not None:
                self.check.decoder.owe(msg, list(body), self._link(ev, skip))
                return

    @staticmethod
    def _link(ev: Event, skip: int) -> Hashable:
        return (ev.node, ev.socket, ev.frames[0] if skip and ev.frames else None, EXTERNAL)

    # ---- receipts ---------------------------------------------------------------------------

    def on_receipt(self, ev: Event, route: Route) -> None:
        frames = ev.frames or []
        skip = route.skip
        if len(frames) <= skip or tuple(frames[skip:]) in self.sent:
            return  # judged where it was sent
        sender = self._sender(ev, frames, skip)
        if sender is None:
            return
        if self.damaged:
            self.ignored += 1
            return
        if sender is UNTOLD:
            self.untold += 1
            return
        assert isinstance(sender, str)
        self._judge(ev, route, sender, frames, skip)

    def _sender(self, ev: Event, frames: list[bytes], skip: int) -> "str | _Untold | None":
        """The external node that sent a receipt no probed node sent (None: no external node may
        have sent it, such as an XPUB's welcome message; UNTOLD: one of several)."""
        roles = self.senders(ev.role, ev.socket, frames[skip:]) if self.senders is not None else None
        if isinstance(roles, str):  # the one node that socket hears (not external: no one to judge)
            return roles if roles in self.nodes else None
        found = [n for n, r in self.nodes.items() if roles is None or r in roles]
        if len(found) == 1:
            return found[0]
        if not found:
            return None
        named = self.by_identity.get(frames[0]) if skip else None
        return named if named in found else UNTOLD

    def _judge(self, ev: Event, route: Route, sender: str, frames: list[bytes], skip: int) -> None:
        check = self.check
        key = (sender, ev.socket)
        link = self._link(ev, skip)
        owed = check.decoder.owes(link)
        if not owed and self._failures.get(key, 0) >= JUDGED_PER_SENDER:
            check.unjudged += 1
            return
        body = frames[skip:]
        if owed:  # an answer to what the receiver asked: as that answer
            err = check.decoder.decode_frames(body, route.into, link,
                                              shared=lambda as_, ch: ev.decoded(skip, as_, ch)).error
        else:
            err = check.decode_on(route.into, body, ev, skip)[0]
        if err is not None and err.message is None and self._may_be_answer(route):
            # an untyped response to no request owed (a duplicated copy of an answer, one to a
            # request of an earlier life): what it should be cannot be told
            self.unasked += 1
            return
        if err is not None and self.forgot:
            self.untold += 1  # its bytes may be those of a forgotten probed send
            return
        self.judged[sender] = self.judged.get(sender, 0) + 1
        if err is None:
            check.tally.conform()
            return
        self._failures[key] = self._failures.get(key, 0) + 1
        check.tally.violate(err, lambda: _evidence(ev, sender, body, err), where=f"sent by {sender} (external), "
                            f"received by {ev.node} on {ev.socket}")

    def _may_be_answer(self, route: Route) -> bool:
        return bool(self.answer_channels) and any(c is None or c in self.answer_channels for c in route.into)

    # ---- the verdict ------------------------------------------------------------------------

    def note(self) -> str:
        """What the verdicts add about the external nodes."""
        parts = []
        if self.judged:
            who = ", ".join(f"{n} {k}" for n, k in sorted(self.judged.items()))
            parts.append(f"judged as the harness's nodes received them, from external nodes: {who}")
        if self.ignored:
            parts.append(f"not judged: {self.ignored} message(s) the harness's nodes received from external nodes "
                         "(the scenario's rules damage messages in flight)")
        if self.untold:
            parts.append(f"not judged: {self.untold} message(s) from external nodes whose sender cannot be told "
                         f"(external: {', '.join(sorted(self.nodes))})")
        if self.unasked:
            parts.append(f"not judged: {self.unasked} response(s) from external nodes answering no request owed "
                         "(duplicates)")
        return "".join("; " + p for p in parts)


def _evidence(ev: Event, sender: str, body: list[bytes], err: DecodeError) -> dict[str, object]:
    return {"time_ms": round(ev.time_ns / 1e6, 3), "node": sender, "received_by": ev.node, "socket": ev.socket,
            "error": f"{err}{only_in(err)}", "frames": hex_frames(body)}
