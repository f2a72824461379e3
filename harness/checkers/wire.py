"""The wire grammar, judged message by message: `FrameDecoder`, `ClauseTally` and the
`wire-conformance` check of every run.

`FrameDecoder` decodes a message's frames in a dialect the way its receiver would: the channel
comes from the protocol's capture hints (sender and receiver socket types); a response that
carries no type (Raft) is decoded as the response to the request its sender received on the same
link with the id the response repeats (``correlation_frame``; else the oldest it has not answered
yet), and some responses may come several times for one request (``repeats``). A "link" is
whatever key the caller gives: a TCP connection and a direction for a capture
(`harness.capture.wire`), a node, socket and routing id in a run. When the dialect is not strict
and ``strict_too``, the message is also decoded strictly, so a capture reports both.

`ClauseTally` counts, per clause, the messages that conform and the ones that break it (the
clause a `DecodeError` names), with evidence; `verdicts()` gives one verdict per clause seen.

`WireConformance` is the check every simulated and live run gets (like ``no-node-errors``): it
decodes every message a node sends, in the run's dialect, and a message that does not decode
breaks the clause its error names. Only what a node sends is judged: a node must survive
anything it receives, so what it receives is read only to know which answer it owes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable, Protocol as TypingProtocol

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Checker, Event, Verdict
from harness.node import SocketSpec
from harness.protocols import Codec, ConformanceError, DecodeError, codec
from harness.protocols.codec import Message

if TYPE_CHECKING:
    from harness.checkers.wire_receipts import ExternalSenders, ReceiptJudge

EVIDENCE = 8  # failing messages kept per clause
OWED_MAX = 4096  # answers a link may owe at once; the oldest is forgotten past it
WIRE_CHECK = "wire-conformance"  # one name, in runs and in captures


class Hints(TypingProtocol):
    """What a decoder needs of a package's `CaptureHints` (harness.packages.base)."""

    channels: dict[tuple[str, str], "str | tuple[str, ...]"]
    correlation_frame: int | None
    repeats: frozenset[str]


@dataclass
class Decoded:
    message: Message | None  # in the chosen dialect; None when it does not decode
    error: DecodeError | None  # why it does not (in the chosen dialect)
    strict_error: DecodeError | None  # strict decoding's error, when the dialect is not strict
    channel: str | None = None  # the channel it decoded on


Channels = tuple["str | None", ...]
Attempt = Callable[["str | None", "str | None"], "Message | None"]  # (as_, channel) -> message or None


def _attempt(codec_: Codec, frames: list[bytes]) -> Attempt:
    def attempt(as_: str | None, channel: str | None) -> Message | None:
        try:
            return codec_.decode(frames, as_=as_, channel=channel)
        except DecodeError:
            return None

    return attempt


class FrameDecoder:
    def __init__(self, protocol: str, dialect: str, hints: Hints, *, strict_too: bool = True) -> None:
        self.codec: Codec = codec(protocol, dialect)
        self.strict: Codec | None = codec(protocol) if strict_too and dialect != "strict" else None
        self.hinted = hints.channels
        table = self.codec.table
        self.answers = {m.answers: m.name for m in table.messages if m.answers}  # request -> response
        self.key_frame = hints.correlation_frame
        self.repeats = hints.repeats
        # link key -> {the request's id frame (None without ids): the responses owed, oldest
        # first}, the oldest id first; bounded, as a response that repeats stays owed
        self._owed: dict[Hashable, OrderedDict[bytes | None, list[str]]] = {}

    def channels(self, sender_type: str, receiver_type: str) -> Channels:
        """The channels a message from one socket type to another may travel on, in the order
        to try them (one socket pair may carry several: an Event BUS client's DEALERs reach the
        snapshot and the collector ROUTERs; the first that decodes wins)."""
        hinted = self.hinted.get((sender_type, receiver_type))
        return (hinted,) if hinted is None or isinstance(hinted, str) else tuple(hinted)

    def decode_frames(self, frames: list[bytes], channels: Channels, link: Hashable,
                      answered_on: Hashable | None = None, shared: Attempt | None = None) -> Decoded:
        """Decode one message; ``link``: where its sender may owe answers; ``answered_on``:
        where the receiver owes the answer when it is a request (None: not tracked here).
        ``shared(as_, channel)``: a decoding others may have done already (a run's checkers
        share them on the event), None when the frames do not decode that way."""
        attempt = shared or _attempt(self.codec, frames)
        owed = self._owed.get(link)
        msg, failed = None, []
        if owed:
            msg, failed = self._as_response(frames, owed, attempt)
        channel = channels[0]
        for ch in channels if msg is None else ():
            msg = attempt(None, ch)
            if msg is not None:
                channel = ch
                break
            failed.append((None, ch))
        err = self._error(frames, failed) if msg is None else None
        strict_err = None
        if self.strict is not None:
            strict_err = self._strict(frames, msg, channel)
        if msg is not None and answered_on is not None:
            self.owe(msg, frames, answered_on)
        return Decoded(msg, err, strict_err, channel)

    def _error(self, frames: list[bytes], failed: list[tuple[str | None, str | None]]) -> DecodeError | None:
        """Why the frames decode none of the ways tried: the first owed response's error, else
        the first channel's, unless another channel identified the message (an Event BUS PUB is
        no SYNCSTART: the collector's error says more than "unknown message" on the snapshot)."""
        err: DecodeError | None = None
        for as_, ch in failed:
            try:
                self.codec.decode(frames, as_=as_, channel=ch)
            except DecodeError as e:
                if err is None or (err.message is None and e.message is not None):
                    err = e
        return err

    def owe(self, msg: Message, frames: list[bytes], link: Hashable) -> None:
        """The receiver of ``msg`` owes its answer on ``link`` when it is a request."""
        response = self.answers.get(msg.name)
        if response is None:
            return
        owed = self._owed.get(link)
        if owed is None:
            owed = self._owed[link] = OrderedDict()
        key = self._key(frames)
        names = owed.get(key)
        if names is None:
            owed[key] = [response]
            if len(owed) > OWED_MAX:
                owed.popitem(last=False)
        elif response not in self.repeats or response not in names:  # a repeating answer is owed once
            names.append(response)
            if len(names) > OWED_MAX:
                del names[0]

    def forget(self, *links: Hashable) -> None:
        for link in links:
            self._owed.pop(link, None)

    def owing_links(self) -> list[Hashable]:
        return list(self._owed)

    def owes(self, link: Hashable) -> bool:
        return bool(self._owed.get(link))

    def _key(self, frames: list[bytes]) -> bytes | None:
        k = self.key_frame
        return frames[k] if k is not None and k < len(frames) else None

    def _as_response(self, frames: list[bytes], owed: OrderedDict[bytes | None, list[str]], attempt: Attempt
                      ) -> tuple[Message | None, list[tuple[str | None, str | None]]]:
        """Decode as one of the owed responses: the one whose request id it repeats when the
        protocol has ids (the latest request with that id), else the oldest first (a peer may
        answer out of order); else the ways tried. A response that does not repeat is owed no
        more once it came."""
        key = self._key(frames)
        names = owed.get(key)
        if not names:
            return None, []
        order = range(len(names) - 1, -1, -1) if self.key_frame is not None else range(len(names))
        failed: list[tuple[str | None, str | None]] = []
        for i in order:
            name = names[i]
            if (name, None) in failed:
                continue
            msg = attempt(name, None)
            if msg is None:
                failed.append((name, None))
                continue
            if name not in self.repeats:
                del names[i]
                if not names:
                    del owed[key]
            return msg, []
        return None, failed

    def _strict(self, frames: list[bytes], msg: Message | None, channel: str | None) -> DecodeError | None:
        assert self.strict is not None
        try:
            if msg is not None:
                self.strict.decode(frames, as_=msg.name)
            else:
                self.strict.decode(frames, channel=channel)
        except DecodeError as e:
            return e
        return None


@dataclass
class _Clause:
    passed: int = 0
    failed: int = 0
    evidence: list[dict[str, Any]] = field(default_factory=list)
    first: str = ""


class ClauseTally:
    """Per clause: conforming messages and violations (a message that does not decode breaks
    the clause its error names; one that decodes conforms to the grammar clause)."""

    def __init__(self, grammar_clause: str, check: str = WIRE_CHECK, how: str = "decoded strictly") -> None:
        self.grammar = grammar_clause
        self.check = check
        self.how = how
        self.clauses: dict[str, _Clause] = {}
        self.conforming = 0  # messages that decode (the grammar clause's passes)

    def conform(self) -> None:
        self.conforming += 1

    def violate(self, err: DecodeError, evidence: "dict[str, Any] | Callable[[], dict[str, Any]]",
                where: str = "") -> None:
        """One message breaks the clause ``err`` names; ``evidence`` (or what it makes, built
        only while evidence is still kept) describes it; ``where``: who sent it to whom, when the
        evidence alone does not say it."""
        c = self.clauses.setdefault(err.clause or self.grammar, _Clause())
        c.failed += 1
        if not c.first:
            c.first = f"{err} ({where})" if where else str(err)
        if len(c.evidence) < EVIDENCE:
            c.evidence.append(evidence() if callable(evidence) else evidence)

    def verdicts(self) -> list[Verdict]:
        out = []
        if self.conforming:
            self.clauses.setdefault(self.grammar, _Clause()).passed += self.conforming
            self.conforming = 0
        for clause in sorted(self.clauses, key=lambda k: (k != self.grammar, k)):
            c = self.clauses[clause]
            if c.failed:
                out.append(Verdict(self.check, clause, False, f"{c.failed} message(s) break it; first: {c.first}",
                                   c.evidence))
            else:
                out.append(Verdict(self.check, clause, True, f"{c.passed} message(s) {self.how}, all conform"))
        return out


def only_in(err: DecodeError) -> str:
    """', valid only in dialect X' for a conformance error, else ''."""
    return f" (valid only in {', '.join(err.dialects)})" if isinstance(err, ConformanceError) else ""


def hex_frames(frames: Iterable[bytes], limit: int = 12) -> list[str]:
    return ["0x" + f.hex() if f else "" for f in list(frames)[:limit]]


# ---- the check of every run ------------------------------------------------------------------

# The socket types a socket of each type exchanges messages with, the first being what it most
# likely talks to when the run's topology does not say (a peer that connects at run time).
PEERS = {"DEALER": ("ROUTER", "DEALER"), "ROUTER": ("DEALER", "ROUTER"), "PUB": ("SUB", "XSUB"),
         "XPUB": ("SUB", "XSUB"), "SUB": ("PUB", "XPUB"), "XSUB": ("PUB", "XPUB")}
# Sockets whose sends are subscriptions, not protocol messages (a Dafka tower's XSUB forwards
# what its XPUB hears), and whose receives are subscriptions (an XPUB's).
NO_MESSAGES_SENT = frozenset({"SUB", "XSUB"})
NO_MESSAGES_RECEIVED = frozenset({"XPUB"})
# Violations of one sender and message type decoded before the rest of them are only counted:
# a mutant that breaks every message would otherwise pay a failed decode for each.
JUDGED_PER_SENDER = 50
CACHE_MAX = 4096  # verdicts of distinct (channels, frames) kept


@dataclass
class Route:
    """How the messages of one socket of one node are read."""

    skip: int  # envelope frames before the message (a ROUTER's routing id)
    sends: bool  # its sends are protocol messages
    receives: bool  # its receives may be requests, whose answers it then owes
    messages_in: bool  # its receives are protocol messages (an XPUB's are subscriptions)
    out: Channels  # channels of what it sends (the last one a message decoded on first)
    into: Channels  # channels of what it receives
    allowed_out: frozenset[str] | None  # messages that may travel on ``out`` (None: any)


class WireConformance(Checker):
    """Every message a node sends decodes in the run's dialect: a message that does not breaks
    the clause its `DecodeError` names (evidence: node, time, message type, frames in hex, the
    error); the others conform to the grammar clause. Sound for every implementation the
    document allows: it judges the bytes against the codec, which follows the document and its
    errata, and only what the node itself sends."""

    name = WIRE_CHECK  # a capture (harness.capture.convert) tallies its messages under the same name

    def __init__(self, protocol: str, dialect: str, hints: Hints, external: "ExternalSenders | None" = None,
                 **params: Any) -> None:
        super().__init__(**params)
        self.decoder = FrameDecoder(protocol, dialect, hints, strict_too=False)
        self.dialect = dialect
        self.tracks_answers = bool(self.decoder.answers)
        # receives matter only to know which answer a node owes
        self.kinds = frozenset({SEND, RECV, CRASH, RESTART}) if self.tracks_answers else frozenset({SEND})
        how = "decoded strictly" + ("" if dialect == "strict" else f" in {dialect}")
        self.tally = ClauseTally(self.decoder.codec.table.grammar_clause, WIRE_CHECK, how)
        # message -> the channels it travels on (() = any)
        self.on_channel = {m.name: m.channels for m in self.decoder.codec.table.messages}
        self.sockets: dict[str, dict[str, SocketSpec]] = {}  # node -> socket name -> spec
        # endpoint (a TCP endpoint's port) -> the types of the sockets bound / connected there
        self._bound: dict[str, set[str]] = {}
        self._connected: dict[str, set[str]] = {}
        self._routes: dict[tuple[str, str], Route | None] = {}
        self._cache: dict[tuple[Channels, tuple[bytes, ...]], DecodeError | None] = {}
        self._failures: dict[tuple[str, str], int] = {}  # (node, message type) -> violations decoded
        self.unjudged = 0  # violations past JUDGED_PER_SENDER, counted only
        # what external nodes send the probed nodes (harness.checkers.wire_receipts); None
        # without external nodes, so that such runs (nearly all) pay nothing for it
        self.receipts: ReceiptJudge | None = None
        self._processes = frozenset(external.nodes if external is not None else ())  # external nodes
        if external is not None and external.nodes:
            from harness.checkers.wire_receipts import ReceiptJudge  # noqa: PLC0415 - it imports this module
            self.receipts = ReceiptJudge(self, external)
            self.kinds = frozenset({SEND, RECV, CRASH, RESTART})

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        specs = {s.name: s for s in sockets}
        if self.sockets.get(node) == specs:  # a restart: the same sockets as before
            return
        self.sockets[node] = specs
        for spec in sockets:
            for e in spec.bind:
                self._bound.setdefault(_port(e), set()).add(spec.type.value)
            for e in spec.connect:
                self._connected.setdefault(_port(e), set()).add(spec.type.value)
        self._routes.clear()  # a new node may be a peer of known sockets

    def on_event(self, ev: Event) -> None:
        kind = ev.kind
        receipts = self.receipts
        if kind == SEND:
            if receipts is not None:
                receipts.on_send(ev, self._route(ev.node, ev.socket))
            self._sent(ev)
        elif kind == RECV:
            if receipts is not None and not ev.via and ev.frames:  # (an observed receipt's sender is judged)
                route = self._route(ev.node, ev.socket)
                if route is not None and route.messages_in:
                    receipts.on_receipt(ev, route)
            self._received(ev)
        elif kind == CRASH and ev.node in self._processes:
            # A process's last answers may still come: the chaos proxy reports what it read from the
            # connection after the kill, and a killed process sends nothing until its restart, so
            # they answer what it owed before it. Forgotten at the restart.
            return
        else:  # a crashed or restarted node owes nothing any more
            self.decoder.forget(*[k for k in self.decoder.owing_links() if k[0] == ev.node])  # type: ignore[index]

    def _route(self, node: str, socket: str) -> Route | None:
        key = (node, socket)
        known = self._routes.get(key, _UNKNOWN)
        if known is not _UNKNOWN:
            return known
        spec = self.sockets.get(node, {}).get(socket)
        route = None
        if spec is not None:
            own = spec.type.value
            peers = self._peers(spec)
            out = _unique(ch for p in peers for ch in self.decoder.channels(own, p))
            into = _unique(ch for p in peers for ch in self.decoder.channels(p, own))
            allowed = self._on(out)
            allowed_in = self._on(into)
            requests_in = any(allowed_in is None or r in allowed_in for r in self.decoder.answers)
            route = Route(1 if own == "ROUTER" else 0, own not in NO_MESSAGES_SENT,
                          own not in NO_MESSAGES_RECEIVED and requests_in, own not in NO_MESSAGES_RECEIVED,
                          out, into, allowed)
        self._routes[key] = route
        return route

    def _on(self, channels: Channels) -> frozenset[str] | None:
        """The messages that may travel on these channels (None: any)."""
        if None in channels:
            return None
        return frozenset(m for m, chs in self.on_channel.items() if not chs or any(c in chs for c in channels))

    def _sent(self, ev: Event) -> None:
        route = self._route(ev.node, ev.socket)
        if route is None or not route.sends or not ev.frames:
            return
        skip = route.skip
        link = (ev.node, ev.socket, ev.frames[0] if skip else None) if self.tracks_answers else None
        if link is not None and self.decoder.owes(link):  # an answer: as the request it answers
            err = self.decoder.decode_frames(ev.frames[skip:], route.out, link,
                                             shared=lambda as_, ch: ev.decoded(skip, as_, ch)).error
        else:
            if self._failures and self._failures.get((ev.node, ev.msg_type), 0) >= JUDGED_PER_SENDER:
                self.unjudged += 1
                return
            # the run's other checkers judged before this one: what one of them decoded already
            # (without a channel) counts when its message may travel here
            known = ev._msg
            if known and ev._msg_skip == skip and (route.allowed_out is None or known.name in route.allowed_out):
                self.tally.conforming += 1
                return
            err = self._verdict(ev, route)
        if err is None:
            self.tally.conforming += 1
            return
        self._failures[(ev.node, ev.msg_type)] = self._failures.get((ev.node, ev.msg_type), 0) + 1
        self.tally.violate(err, lambda: {"time_ms": round(ev.time_ns / 1e6, 3), "node": ev.node,
                                         "socket": ev.socket, "message": ev.msg_type,
                                         "error": f"{err}{only_in(err)}", "frames": hex_frames(ev.frames[skip:])})

    def _verdict(self, ev: Event, route: Route) -> DecodeError | None:
        """Why a message that answers nothing does not decode on its socket's channels (None:
        it does)."""
        err, channel = self.decode_on(route.out, ev.frames[route.skip:], ev, route.skip)  # type: ignore[index]
        if channel is not None and channel != route.out[0]:
            # a socket carries one channel most of the time (an Event BUS client's DEALER to
            # the collector): try it first next time
            route.out = (channel, *(c for c in route.out if c != channel))
        return err

    def decode_on(self, channels: Channels, body: list[bytes], ev: Event, skip: int
                  ) -> tuple[DecodeError | None, str | None]:
        """Why ``body`` (``ev``'s frames after ``skip``) decodes on none of ``channels`` (None: it
        does), and the channel it decoded on when several were tried. The same bytes on the same
        channels decode the same way: a server's SYNC to a hundred clients, a publisher's
        PUBLISH to fifty subscribers are decoded once."""
        key = (channels, tuple(body))
        if key in self._cache:
            return self._cache[key], None
        err: DecodeError | None = None
        channel = None
        if len(channels) == 1:  # the common case, without the decoder's bookkeeping
            done = ev._decoded.get((skip, None, channels[0])) if ev._decoded else None
            if done is None:
                try:
                    self.decoder.codec.decode(body, channel=channels[0])
                except DecodeError as e:
                    err = e
        else:
            d = self.decoder.decode_frames(body, channels, None, shared=lambda as_, ch: ev.decoded(skip, as_, ch))
            err = d.error
            if d.message is not None:
                channel = d.channel
        self._cache[key] = err
        if len(self._cache) > CACHE_MAX:
            del self._cache[next(iter(self._cache))]
        return err, channel

    def _received(self, ev: Event) -> None:
        route = self._route(ev.node, ev.socket)
        if route is None or not route.receives or not ev.frames:
            return
        skip = route.skip
        for ch in route.into:
            msg = ev.decoded(skip, None, ch)
            if msg is not None:
                self.decoder.owe(msg, ev.frames[skip:], (ev.node, ev.socket, ev.frames[0] if skip else None))
                return

    def _peers(self, spec: SocketSpec) -> tuple[str, ...]:
        """The socket types a socket exchanges messages with, from the endpoints the run's
        nodes bind and connect to (``tcp://*:5555`` bound is ``tcp://127.0.0.1:5555``
        connected to); when that does not tell (a peer that connects at run time), the usual
        partner of its type."""
        compatible = PEERS.get(spec.type.value, ())
        seen: set[str] = set()
        for e in spec.connect:
            seen |= self._bound.get(_port(e), set())
        for e in spec.bind:
            seen |= self._connected.get(_port(e), set())
        return tuple(t for t in compatible if t in seen) or compatible[:1]

    def finish(self, end_ns: int) -> list[Verdict]:
        verdicts = self.tally.verdicts()
        note = self.receipts.note() if self.receipts is not None else ""
        if not verdicts:
            return [Verdict(self.name, self.tally.grammar, True, "no node sent a protocol message" + note)]
        for v in verdicts:
            v.detail += note
        if self.unjudged:
            for v in verdicts:
                if not v.ok:
                    v.detail += (f" ({self.unjudged} later message(s) of senders with {JUDGED_PER_SENDER} violations "
                                 "of their type already were not decoded)")
        return verdicts


_UNKNOWN = Route(0, False, False, False, (), (), None)  # a socket not looked at yet


def _unique(channels: Iterable[str | None]) -> Channels:
    return tuple(dict.fromkeys(channels)) or (None,)


def _port(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[-1] if endpoint.startswith("tcp://") else endpoint
