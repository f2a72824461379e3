"""PPPP reference publisher (specs/pppp.txt with docs/errata.md).

One ROUTER socket (``"router"``) bound to ``bind``; the routing id of a message names the
subscriber (E-PPPP-09), and every message sent starts with the recipient's routing id.

- SUBSCRIBE (E-PPPP-07, E-PPPP-10): a new subscriber's first SUBSCRIBE starts its conversation;
  a prefix selects every channel starting with it ("" selects all). A new subscriber gets
  nothing old: it is owed every message published on a matching channel from then on. A
  SUBSCRIBE for a prefix it already holds, or from a subscriber this publisher considers
  disconnected (or does not talk to since its own restart), starts a new conversation for the
  channels of the prefix: SYNC by backlog replay (E-PPPP-08), every message of those channels
  the subscriber has not acknowledged, with its original number, in ascending order.
- Publishing (E-PPPP-02): per channel the numbers are 1, 2, 3, ...; a message is kept until
  every subscriber it is owed to (not permanently disconnected) acknowledged it
  (``pppp.publisher.preserve-until-acked``); a ``Note("released")`` names what is let go.
- ACK/NACK (E-PPPP-04): sequence h acknowledges every owed number <= h that no NACK range
  holds; the NACKed numbers are resent at once with their numbers and payloads
  (``pppp.publisher.resend-nacked``). After a resend on silence of k with last published L, the
  reply's h also NACKs every number in (max(k, h), L] (E-PPPP-15, ``pppp.publisher.implicit-nack``).
- Resend on silence (E-PPPP-15): a subscriber with unacknowledged messages that has neither
  sent an ACK/NACK nor been sent a PUBLISH for ``liveness`` x ``first_idle`` gets, per channel
  with unacknowledged messages, the highest of them again.
- Heartbeats (E-PPPP-14): the next message to a subscriber is due ``first_idle`` after the
  last message other than HEARTBEAT sent to it (its SUBSCRIBE counts as the start), then
  ``idle`` after each HEARTBEAT; a HEARTBEAT goes out when nothing else did.
- Dead subscribers (E-PPPP-13, E-PPPP-16): nothing heard for ``liveness`` x ``idle``: it is
  disconnected (Note ``subscriber-lost``) and sent nothing more; its pending and future
  messages are kept for ``grace``, after which it is permanently disconnected (Note
  ``subscriber-dropped``): its backlog is dropped and it is forgotten. Coming back after that
  it is a new subscriber; this publisher has no application state besides the messages, so
  its full state dump is empty (E-PPPP-08).
- CUSTOM (E-PPPP-17): handed to the application (``Deliver("custom")``); with ``reply_channel``
  (standalone: by default the first of ``channels``) the payload is published back on that
  channel, as an ordinary message.
- Durable state (``DurableStore``): the next number per channel, every kept message, and each
  subscriber's subscriptions with the first number it is owed per channel. After a restart
  the publisher sends nothing to a subscriber until it SUBSCRIBEs again (it will: it hears
  nothing for ``liveness`` x ``idle``), then replays what the subscriber may not have
  acknowledged; duplicates are the subscriber's to drop.

Application commands: ``{"op": "publish", "channel": c, "payload": bytes | [bytes, ...]}``
(Deliver ``published`` with the number), the same with ``"batch": [payload, ...]`` instead of
``payload`` (a burst: one message per payload, in order) and ``{"op": "status"}``. Standalone mode: with
``channels`` and ``count``, the publisher publishes ``count`` messages on each channel, one per
channel every 1/``rate`` seconds, beginning ``start_delay_ms`` (200) after its first SUBSCRIBE, so
that subscribers connecting at the same time are in (payload ``<channel>:<n>``).

Config: ``bind`` (endpoint or list, default ``tcp://127.0.0.1:5560``), the timing keys of
`reference_nodes.pppp.common`, ``channels``, ``count`` (0), ``rate`` (per second, 10),
``start_delay_ms`` (200), ``reply_channel`` (none), ``handover`` (true: a subscriber back with its
identity takes it over at once; false: libzmq's default), ``dialect``.
"""

from __future__ import annotations

import heapq
from typing import Any

from harness.node import Action, Deliver, Discard, Note, NodeContext, Send, SocketSpec, SocketType
from harness.protocols import DecodeError
from reference_nodes import config
from reference_nodes.pppp.common import (
    PROTOCOL, DEFAULT_ENDPOINT, ROUTER, PpppNode, as_bytes, channel_list, channel_name, channel_text, ms_to_ns,
)

SOCKET = ROUTER
NEVER = 1 << 62


class Sub:
    """What the publisher knows of one subscriber (keyed by routing id)."""

    __slots__ = ("identity", "prefixes", "live", "subscribed", "last_heard", "down_since", "last_sent", "last_hb",
                 "silence_from", "pending", "start", "resent", "version", "entry_due")

    def __init__(self, identity: bytes, now: int) -> None:
        self.identity = identity
        self.prefixes: dict[bytes, None] = {}
        self.live = True  # not considered disconnected
        self.subscribed = True  # in a conversation with this incarnation of the publisher
        self.last_heard = now
        self.down_since = 0
        self.last_sent = now
        self.last_hb = False
        self.silence_from = now
        self.pending: dict[bytes, dict[int, None]] = {}  # channel -> unacknowledged owed numbers, ascending
        self.start: dict[bytes, int] = {}  # channel -> first number owed
        self.resent: dict[bytes, tuple[int, int]] = {}  # channel -> (k, L) of the last resend on silence
        self.version = 0  # of its entry in the publisher's timer heap
        self.entry_due: int | None = None  # when that entry fires (None: no entry)

    def matches(self, channel: bytes) -> bool:
        for p in self.prefixes:
            if channel.startswith(p):
                return True
        return False

    @property
    def talking(self) -> bool:
        return self.live and self.subscribed


class Publisher(PpppNode):
    role = "publisher"
    FIRST_SEQ = 1  # E-PPPP-02

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.bind = config.endpoints(PROTOCOL, self.config.get("bind", [DEFAULT_ENDPOINT]))
        self.handover = config.flag(PROTOCOL, self.config.get("handover", True), "handover")
        self.auto_channels = channel_list(self.config.get("channels"), "channels")
        self.auto_count = int(self.config.get("count", 0) or 0)
        rate = float(self.config.get("rate", 10) or 10)
        if rate <= 0:
            raise ValueError(f"pppp publisher config 'rate' must be positive, got {rate!r}")
        self.auto_every = int(1e9 / rate)
        self.auto_delay = ms_to_ns(self.config.get("start_delay_ms", 200), "start_delay_ms")
        self.auto_sent = 0
        self.auto_next: int | None = None
        reply = self.config.get("reply_channel")
        if reply is None and self.auto_channels:
            reply = self.auto_channels[0]  # standalone: answer CUSTOM on the first channel
        self.reply_channel = None if reply is None else channel_name(reply, "pppp config 'reply_channel'")
        self.subs: dict[bytes, Sub] = {}
        self.next_seq: dict[bytes, int] = {}
        self.held: dict[bytes, dict[int, list[bytes]]] = {}  # channel -> number -> payload frames
        self.refs: dict[bytes, dict[int, int]] = {}  # channel -> number -> subscribers still owed it
        self.routes: dict[bytes, list[Sub]] = {}  # channel -> subscribers it matches (cache)
        self.topics: dict[bytes, str] = {}
        self._heartbeat = self.enc["HEARTBEAT"]({})
        self._publish = self.enc["PUBLISH"]
        self._restored_at: int | None = None
        # Timers: one heap entry (due, counter, version, identity) per subscriber whose deadline
        # changed; older entries of a subscriber are stale. Subscribers touched by an input are
        # collected in _dirty and their deadline recomputed once, when the runtime asks.
        self._heap: list[tuple[int, int, int, bytes]] = []
        self._dirty: dict[bytes, Sub] = {}
        self._pushes = 0

    def sockets(self) -> list[SocketSpec]:
        # Handover: a subscriber that comes back with its identity is reachable at once, even
        # while the pipe of its old connection still holds messages this node has not read.
        return [SocketSpec(SOCKET, SocketType.ROUTER, bind=self.bind, handover=self.handover)]

    # ---- inputs ----------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        out: list[Action] = []
        self._restore(now, out)
        return out

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        out: list[Action] = []
        if len(frames) < 2:
            return [Discard(socket, list(frames), reason="no PPPP message after the routing id",
                            clause="pppp.wire.grammar")]
        identity = frames[0]
        body = frames[1:]
        try:
            msg = self.codec.decode(body, channel="to-publisher")
        except DecodeError as e:
            return self.malformed(socket, frames, e)
        sub = self.subs.get(identity)
        name = msg.name
        if name == "SUBSCRIBE":
            self._on_subscribe(identity, sub, msg["channel"], now, out)
        elif name == "CUSTOM":
            if sub is not None:
                self._heard(sub, now, out)
            self._on_custom(identity, msg["payload"], now, out)
        elif sub is None:
            out.append(Discard(socket, list(frames), reason=f"{name} from a peer that never subscribed",
                               clause="pppp.conversation.subscribe-first"))
        else:
            self._heard(sub, now, out)
            if name == "ACK":
                self._on_ack(sub, msg["channel"], msg["sequence"], msg["nacks"], now, out)
        return out

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        if self.auto_next is not None and now >= self.auto_next:
            self._auto_publish(now, out)
        self._flush()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, version, ident = heapq.heappop(heap)
            sub = self.subs.get(ident)
            if sub is not None and sub.version == version:
                sub.entry_due = None
                self._tick(sub, now, out)
                self._dirty[ident] = sub
        return out

    def _tick(self, sub: Sub, now: int, out: list[Action]) -> None:
        """Whatever is due for one subscriber: disconnection, resend on silence, heartbeat,
        the end of the grace period."""
        t = self.timing
        if sub.live:
            if now >= sub.last_heard + t.dead_after:
                sub.live = False
                sub.down_since = now
                out.append(Note("subscriber-lost", {"subscriber": sub.identity, "last_heard": sub.last_heard,
                                                    "at": now}))
                return
            if not sub.subscribed:
                return
            if now >= sub.silence_from + t.silence_after and self._unacked(sub):
                self._resend_on_silence(sub, now, out)
            if now >= t.next_due(sub.last_sent, sub.last_hb):
                self.send_heartbeat(sub, now, out)
        elif now >= sub.down_since + t.grace:
            self._drop(sub, now, out)

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op == "publish":
            channel = channel_name(request.get("channel", b""), "the channel of a publish")
            batch = request.get("batch")
            if batch is None:
                batch = [request.get("payload", [])]
            elif not isinstance(batch, (list, tuple)):
                raise ValueError(f"pppp publisher: 'batch' is a list of payloads, not {type(batch).__name__}")
            corr = request.get("corr")  # the workload's correlation id: "published" names it
            out: list[Action] = []
            for payload in batch:  # an application may hand over a burst at once: one command, many messages
                if isinstance(payload, (bytes, bytearray, str)):
                    payload = [payload]
                self.publish(channel, [as_bytes(p, "a payload frame") for p in payload], now, out, corr)
            return out
        if op == "status":
            return [Deliver("publisher-status", self.status())]
        raise ValueError(f"pppp publisher: unknown command {op!r} (known: 'publish', 'status')")

    def status(self) -> dict[str, Any]:
        return {
            "subscribers": {s.identity: {"live": s.live, "subscribed": s.subscribed,
                                         "prefixes": list(s.prefixes),
                                         "pending": {channel_text(c): len(p) for c, p in s.pending.items() if p}}
                            for s in self.subs.values()},
            "held": {channel_text(c): len(h) for c, h in self.held.items() if h},
            "next": {channel_text(c): n for c, n in self.next_seq.items()},
        }

    # ---- publishing ------------------------------------------------------------------------

    def publish(self, channel: bytes, payload: list[bytes], now: int, out: list[Action],
                corr: str | None = None) -> int:
        """Give the message the channel's next number, keep it for every subscriber it is owed
        to, send it to those in a conversation; returns the number."""
        seq = self.next_seq.get(channel, self.FIRST_SEQ)
        self.next_seq[channel] = seq + 1
        key = channel.hex()
        self.store.put(f"n:{key}", seq + 1)
        subs = self.routes.get(channel)
        if subs is None:
            subs = self._route(channel)
        topic = self.topics.get(channel) or self._topic(channel)
        if subs:
            self.held.setdefault(channel, {})[seq] = payload
            self.refs.setdefault(channel, {})[seq] = len(subs)
            self.store.put(f"m:{key}:{seq}", payload)
            frames = self._publish({"channel": channel, "sequence": seq, "payload": payload})
            meta = {"topic": topic, "seq": seq}
            for sub in subs:
                pending = sub.pending.get(channel)
                if pending is None:
                    pending = sub.pending[channel] = {}
                    if channel not in sub.start:
                        sub.start[channel] = seq
                        self._save_sub(sub)
                pending[seq] = None
                if sub.talking:
                    self._send(sub, frames, "PUBLISH", meta, now, out=out)
        done: dict[str, Any] = {"channel": channel, "seq": seq, "topic": topic}
        if corr is not None:
            done["corr"] = corr
        out.append(Deliver("published", done))
        return seq

    def _auto_publish(self, now: int, out: list[Action]) -> None:
        for c in self.auto_channels:
            self.publish(c, [c + b":%d" % (self.auto_sent + 1)], now, out)
        self.auto_sent += 1
        self.auto_next = now + self.auto_every if self.auto_sent < self.auto_count else None

    # ---- messages --------------------------------------------------------------------------

    def _on_subscribe(self, identity: bytes, sub: Sub | None, prefix: bytes, now: int, out: list[Action]) -> None:
        if sub is None:
            sub = self.subs[identity] = Sub(identity, now)
            out.append(Note("subscriber-new", {"subscriber": identity, "at": now}))
        again = prefix in sub.prefixes or not sub.talking
        if prefix not in sub.prefixes:
            sub.prefixes[prefix] = None
            self.routes.clear()
            self._save_sub(sub)
        if not sub.talking:
            out.append(Note("subscriber-back", {"subscriber": identity, "at": now}))
        sub.live = sub.subscribed = True
        sub.last_heard = now
        sub.last_sent, sub.last_hb = now, False  # the conversation (re)starts: first heartbeat after first_idle
        sub.silence_from = now
        self._dirty[identity] = sub
        if self.auto_count and self.auto_channels and self.auto_next is None and self.auto_sent == 0:
            self.auto_next = now + self.auto_delay  # standalone: publishing begins after the first SUBSCRIBE
        if again:
            self._replay(sub, prefix, now, out)

    def _replay(self, sub: Sub, prefix: bytes, now: int, out: list[Action]) -> None:
        """SYNC by backlog (E-PPPP-08): what the subscriber has not acknowledged on the channels
        of the prefix, with the original numbers."""
        sub.resent.clear()
        for channel, pending in sub.pending.items():
            if channel.startswith(prefix):
                for seq in list(pending):
                    self._resend(sub, channel, seq, now, out)

    def _on_ack(self, sub: Sub, channel: bytes, h: int, nacks: list[tuple[int, int]], now: int,
                out: list[Action]) -> None:
        sub.silence_from = now
        self._dirty[sub.identity] = sub
        ranges = list(nacks)
        implicit = self.implicit_nacks(sub, channel, h)
        if implicit is not None:
            ranges.append(implicit)
        pending = sub.pending.get(channel)
        if not pending:
            return
        acked = []
        nacked = []
        top = max([h, *(last for _, last in ranges)])
        for seq in pending:
            if seq > top:
                break  # pending is ascending
            if ranges and _inside(seq, ranges):
                nacked.append(seq)
            elif seq <= h:
                acked.append(seq)
        for seq in acked:
            del pending[seq]
        if acked:
            self._unref(channel, acked, out)
        if nacked:
            self.answer_nacks(sub, channel, nacked, now, out)

    def implicit_nacks(self, sub: Sub, channel: bytes, h: int) -> tuple[int, int] | None:
        """After a resend on silence of k with last published L, the reply's h NACKs (max(k, h), L]
        as well (E-PPPP-15)."""
        resent = sub.resent.pop(channel, None)
        if resent is None:
            return None
        k, last = resent
        return (max(k, h) + 1, last) if max(k, h) < last else None

    def answer_nacks(self, sub: Sub, channel: bytes, seqs: list[int], now: int, out: list[Action]) -> None:
        """Resend the NACKed messages with their numbers (pppp.publisher.resend-nacked)."""
        for seq in seqs:
            self._resend(sub, channel, seq, now, out)

    def _on_custom(self, identity: bytes, payload: list[bytes], now: int, out: list[Action]) -> None:
        out.append(Deliver("custom", {"from": identity, "payload": list(payload)}))
        if self.reply_channel is not None:
            self.publish(self.reply_channel, list(payload) or [b""], now, out)

    def _heard(self, sub: Sub, now: int, out: list[Action]) -> None:
        sub.last_heard = now
        self._dirty[sub.identity] = sub
        if not sub.live:  # it was only silent (a one-way outage): talk to it again
            sub.live = True
            out.append(Note("subscriber-back", {"subscriber": sub.identity, "at": now}))

    # ---- resends ---------------------------------------------------------------------------

    def _unacked(self, sub: Sub) -> bool:
        for p in sub.pending.values():
            if p:
                return True
        return False

    def _resend_on_silence(self, sub: Sub, now: int, out: list[Action]) -> None:
        """E-PPPP-15: per channel with unacknowledged messages, the highest of them again."""
        for channel, pending in sub.pending.items():
            if pending:
                k = self.pick_on_silence(pending)
                sub.resent[channel] = (k, self.next_seq.get(channel, 1) - 1)
                self._resend(sub, channel, k, now, out)
        sub.silence_from = now

    def pick_on_silence(self, pending: dict[int, None]) -> int:
        """Which unacknowledged message to resend on silence: the last (E-PPPP-15)."""
        return next(reversed(pending))

    def send_heartbeat(self, sub: Sub, now: int, out: list[Action]) -> None:
        self._send(sub, self._heartbeat, "HEARTBEAT", None, now, heartbeat=True, out=out)

    def _resend(self, sub: Sub, channel: bytes, seq: int, now: int, out: list[Action]) -> None:
        payload = self.held.get(channel, {}).get(seq)
        if payload is None or not sub.talking:
            return
        frames = self._publish({"channel": channel, "sequence": seq, "payload": payload})
        self._send(sub, frames, "PUBLISH", {"topic": self.topics.get(channel) or self._topic(channel), "seq": seq,
                                            "corr": "resend"}, now, out=out)

    # ---- subscribers -------------------------------------------------------------------------

    def _unref(self, channel: bytes, seqs: list[int], out: list[Action]) -> None:
        refs = self.refs.get(channel)
        if refs is None:
            return
        released = []
        for seq in seqs:
            n = refs.get(seq)
            if n is None:
                continue
            if n > 1:
                refs[seq] = n - 1
            else:
                del refs[seq]
                released.append(seq)
        if released:
            self.release(channel, released, out)

    def release(self, channel: bytes, seqs: list[int], out: list[Action]) -> None:
        """Every subscriber owed these messages acknowledged them (or is permanently gone)."""
        held = self.held.get(channel, {})
        key = channel.hex()
        for seq in seqs:
            held.pop(seq, None)
            self.store.delete(f"m:{key}:{seq}")
        out.append(Note("released", {"channel": channel, "seqs": seqs}))

    def _drop(self, sub: Sub, now: int, out: list[Action]) -> None:
        """The grace period is over: permanently disconnected, its backlog dropped (E-PPPP-16)."""
        del self.subs[sub.identity]
        self.routes.clear()
        self.store.delete(f"s:{sub.identity.hex()}")
        out.append(Note("subscriber-dropped", {"subscriber": sub.identity, "down_since": sub.down_since, "at": now}))
        for channel, pending in sub.pending.items():
            if pending:
                self._unref(channel, list(pending), out)

    def _route(self, channel: bytes) -> list[Sub]:
        subs = [s for s in self.subs.values() if s.matches(channel)]
        self.routes[channel] = subs
        return subs

    def _topic(self, channel: bytes) -> str:
        t = self.topics[channel] = channel_text(channel)
        return t

    def _send(self, sub: Sub, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int, *,
              heartbeat: bool = False, out: list[Action]) -> None:
        sub.last_sent = now
        sub.last_hb = heartbeat
        if not heartbeat:
            sub.silence_from = now
        self._dirty[sub.identity] = sub
        out.append(Send(SOCKET, [sub.identity, *frames], msg_type, meta))

    # ---- durable state -----------------------------------------------------------------------

    def _save_sub(self, sub: Sub) -> None:
        self.store.put(f"s:{sub.identity.hex()}", {"prefixes": list(sub.prefixes),
                                                   "start": {c.hex(): s for c, s in sub.start.items()}})

    def _restore(self, now: int, out: list[Action]) -> None:
        """After a restart: numbers, kept messages and subscribers from the store. Restored
        subscribers are not talked to until they SUBSCRIBE again; their grace runs from now."""
        for key in self.store.keys("n:"):
            self.next_seq[bytes.fromhex(key[2:])] = int(self.store.get(key))
        for key in self.store.keys("m:"):
            _, chex, seq = key.split(":")
            self.held.setdefault(bytes.fromhex(chex), {})[int(seq)] = list(self.store.get(key))
        for key in self.store.keys("s:"):
            rec = self.store.get(key)
            sub = Sub(bytes.fromhex(key[2:]), now)
            sub.prefixes = dict.fromkeys(rec["prefixes"])
            sub.start = {bytes.fromhex(c): int(s) for c, s in rec["start"].items()}
            sub.live = sub.subscribed = False
            sub.down_since = now
            for channel, first in sub.start.items():
                owed = sorted(s for s in self.held.get(channel, {}) if s >= first)
                sub.pending[channel] = dict.fromkeys(owed)
                refs = self.refs.setdefault(channel, {})
                for s in owed:
                    refs[s] = refs.get(s, 0) + 1
            self.subs[sub.identity] = sub
            self._dirty[sub.identity] = sub
        for channel, held in self.held.items():
            orphans = [s for s in held if s not in self.refs.get(channel, {})]
            if orphans:
                self.release(channel, orphans, out)
        if self.subs or self.held:
            self._restored_at = now
            out.append(Note("restored", {"subscribers": len(self.subs),
                                         "held": sum(len(h) for h in self.held.values()), "at": now}))

    # ---- timers ----------------------------------------------------------------------------

    def _due(self, sub: Sub) -> int:
        t = self.timing
        if not sub.live:
            return sub.down_since + t.grace
        due = sub.last_heard + t.dead_after
        if sub.subscribed:
            hb = t.next_due(sub.last_sent, sub.last_hb)
            if hb < due:
                due = hb
            silence = sub.silence_from + t.silence_after
            if silence < due and self._unacked(sub):
                due = silence
        return due

    def _flush(self) -> None:
        """Recompute the deadline of every subscriber an input touched."""
        if not self._dirty:
            return
        heap = self._heap
        for ident, sub in self._dirty.items():
            if self.subs.get(ident) is not sub:
                continue  # dropped meanwhile
            due = self._due(sub)
            if sub.entry_due is not None and sub.entry_due <= due:
                continue  # its entry fires first; _tick finds what is due then and asks again
            self._pushes += 1
            sub.version = self._pushes  # unique: a subscriber dropped and made anew is not fooled
            sub.entry_due = due
            heapq.heappush(heap, (due, self._pushes, sub.version, ident))
        self._dirty.clear()
        if len(heap) > 8 * len(self.subs) + 64:  # mostly stale entries: rebuild
            self._heap = [e for e in heap if (s := self.subs.get(e[3])) is not None and s.version == e[2]]
            heapq.heapify(self._heap)

    def get_timer(self) -> int | None:
        self._flush()
        heap = self._heap
        while heap:
            _, _, version, ident = heap[0]
            sub = self.subs.get(ident)
            if sub is not None and sub.version == version:
                break
            heapq.heappop(heap)
        at = heap[0][0] if heap else NEVER
        if self.auto_next is not None and self.auto_next < at:
            at = self.auto_next
        return None if at == NEVER else at


def _inside(seq: int, ranges: list[tuple[int, int]]) -> bool:
    for first, last in ranges:
        if first <= seq <= last:
            return True
    return False
