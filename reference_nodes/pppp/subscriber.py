"""PPPP reference subscriber (specs/pppp.txt with docs/errata.md).

One DEALER socket (``"dealer"``) connected to the publisher; a PPPP message is the whole
multipart message (no envelope on a DEALER, E-PPPP-09).

- Conversation (E-PPPP-10): the first message is SUBSCRIBE, one per channel of ``channels``
  (a prefix; "" is every channel, E-PPPP-07).
- Delivery (``pppp.subscriber.exactly-once``): every message goes to the application once,
  as ``Deliver("message", {"channel", "seq", "payload"})``, in the order it arrives (the
  document leaves the order to the application). What was delivered is kept in the durable
  store per channel (every number up to a floor, and the numbers above it), so duplicates,
  backlog replays after a re-SUBSCRIBE and redeliveries after a crash of this subscriber are
  recognised and not delivered again.
- ACK/NACK (E-PPPP-04, E-PPPP-14): per channel, within ``ack_delay_ms`` (default a fifth of
  ``first_idle``) of a PUBLISH, duplicates included, an ACK with the highest number received in
  this conversation and one NACK range per gap below it. Gaps are judged from the first number
  of the conversation (E-PPPP-02) or, on a channel this subscriber delivered before, from its
  delivered floor, so that the first messages of a backlog replay are NACKed if they are lost;
  numbers it delivered before are never NACKed. A NACKed number stays NACKed in every ACK of the
  channel until it arrives.
- Heartbeats (E-PPPP-14): the next message to the publisher is due ``first_idle`` after the
  last message other than HEARTBEAT, then ``idle`` after each HEARTBEAT.
- Publisher lost (E-PPPP-13): nothing heard for ``liveness`` x ``idle``: Note
  ``publisher-lost``, a new connection (Disconnect + Connect: a publisher whose ROUTER ignored
  this one, as libzmq does without handover while the old connection of this identity still
  held unread messages, hears the new one) and SUBSCRIBE again for every channel, a new
  conversation (``pppp.subscriber.resubscribe``); again after every further such silence. A floor older than
  ``grace`` is not used to judge gaps: the publisher has dropped what it did not deliver by then.

Application commands: ``{"op": "custom", "payload": bytes | [bytes, ...]}`` sends a CUSTOM;
``{"op": "status"}``. Standalone (``zmq-harness node pppp subscriber``) it prints one JSON line
per delivery on standard output (`reference_nodes.pppp.common.delivery_line`).

Config: ``connect`` (publisher endpoint, default ``tcp://127.0.0.1:5560``), ``channels``
(list or "a,b"; default every channel), ``identity`` (routing id), the timing keys of
`reference_nodes.pppp.common`, ``ack_delay_ms``, ``dialect``.
"""

from __future__ import annotations

from typing import Any

from harness.node import (
    Action, Deliver, DurableStore, Note, NodeContext, Send, SocketSpec, SocketType, reconnect,
)
from harness.protocols import DecodeError
from harness.protocols.pppp import CUSTOM, cut_number, ranges_without
from reference_nodes.correlation import CORR_TAG, corr_of
from reference_nodes.pppp.common import (
    DEALER, DEFAULT_ENDPOINT, PpppNode, as_bytes, channel_list, channel_text, endpoint_of, identity_of, ms_to_ns,
)

SOCKET = DEALER


class Delivered:
    """What the application of one channel has received: every number <= ``floor`` (or not
    owed: below where it started), and ``extras`` above it. Durable: the floor under a key of
    its own (a plain int, cheap to write after every delivery), the extras only when they change,
    the time of the last change only when it moved on by a sixteenth of the grace period (it only
    tells whether the grace period passed)."""

    __slots__ = ("floor", "extras", "at", "keys", "changed", "saved_at")

    def __init__(self, channel: bytes, floor: int, extras: set[int], at: int) -> None:
        self.floor = floor
        self.extras = extras
        self.at = at  # when it last changed (node clock)
        key = channel.hex()
        self.keys = (f"f:{key}", f"t:{key}", f"x:{key}")
        self.changed = True  # the extras differ from what the store holds
        self.saved_at: int | None = None

    def has(self, seq: int) -> bool:
        return seq <= self.floor or seq in self.extras

    def add(self, seq: int, now: int) -> None:
        if seq == self.floor + 1:
            self.floor = seq
            extras = self.extras
            if extras:
                while self.floor + 1 in extras:
                    self.floor += 1
                    extras.discard(self.floor)
                    self.changed = True
        else:
            self.extras.add(seq)
            self.changed = True
        self.at = now

    def save(self, store: DurableStore, grace: int) -> None:
        floor_key, at_key, extras_key = self.keys
        store.put(floor_key, self.floor)
        if self.saved_at is None or self.at - self.saved_at >= grace >> 4:
            store.put(at_key, self.at)
            self.saved_at = self.at
        if self.changed:
            store.put(extras_key, sorted(self.extras))
            self.changed = False

    @classmethod
    def load(cls, store: DurableStore) -> dict[bytes, "Delivered"]:
        out = {}
        for key in store.keys("f:"):
            channel = bytes.fromhex(key[2:])
            d = cls(channel, int(store.get(key)), set(store.get("x:" + key[2:], [])), int(store.get("t:" + key[2:], 0)))
            d.changed = False
            d.saved_at = d.at
            out[channel] = d
        return out


class Conversation:
    """One channel in the current conversation: the highest number received and the gaps below
    it (inclusive ranges, ascending), each NACKed in every ACK until it is filled."""

    __slots__ = ("highest", "missing", "ack")

    def __init__(self, highest: int) -> None:
        self.highest = highest
        self.missing: list[list[int]] = []
        self.ack = False

    def gap(self, first: int, last: int, delivered: Delivered) -> None:
        """Numbers first..last were skipped: each one not delivered before is missing."""
        self.missing.extend(ranges_without(max(first, delivered.floor + 1), last, delivered.extras))

    def fill(self, seq: int) -> None:
        cut_number(self.missing, seq)


class Subscriber(PpppNode):
    role = "subscriber"

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.endpoint = endpoint_of(self.config.get("connect", DEFAULT_ENDPOINT), "connect")
        self.channels = channel_list(self.config.get("channels", ""), "channels") or [b""]
        self.identity = identity_of(self.config.get("identity"))
        delay = self.config.get("ack_delay_ms")
        self.ack_delay = self.timing.first_idle // 5 if delay is None else ms_to_ns(delay, "ack_delay_ms")
        if self.ack_delay >= self.timing.first_idle:
            raise ValueError("pppp config 'ack_delay_ms' must be shorter than 'first_idle_ms' (E-PPPP-14)")
        self.delivered: dict[bytes, Delivered] = Delivered.load(self.store)
        self.conv: dict[bytes, Conversation] = {}
        self.ack_at: int | None = None
        self.last_sent = 0
        self.last_hb = False
        self.last_heard = 0
        self.topics: dict[bytes, str] = {}
        self._heartbeat = self.enc["HEARTBEAT"]({})
        self._ack = self.enc["ACK"]
        self._decode = self.codec.decode
        self._decode_publish = self.codec.decoder("PUBLISH")

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec(SOCKET, SocketType.DEALER, connect=(self.endpoint,), identity=self.identity)]

    # ---- inputs ----------------------------------------------------------------------------

    def start(self, now: int) -> list[Action]:
        self.last_heard = now
        out: list[Action] = []
        self.open_conversation(now, out)
        return out

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        try:
            if len(frames) > 1 and frames[0] and frames[0][0] > CUSTOM:
                msg = self._decode_publish(frames)  # the hot path: no command byte, so a PUBLISH
            else:
                msg = self._decode(frames, channel="to-subscriber")
        except DecodeError as e:
            return self.malformed(socket, frames, e)
        self.last_heard = now  # any message counts as a heartbeat (pppp.heartbeat.implicit)
        name, fields = msg  # a Message is a (name, fields) tuple
        if name == "PUBLISH":
            return self.on_publish(fields["channel"], fields["sequence"], fields["payload"], now)
        return []  # HEARTBEAT

    def handle_timer(self, now: int) -> list[Action]:
        out: list[Action] = []
        t = self.timing
        if now >= self.last_heard + t.dead_after:
            out.append(Note("publisher-lost", {"last_heard": self.last_heard, "at": now}))
            self.last_heard = now
            self.on_publisher_lost(now, out)
        if self.ack_at is not None and now >= self.ack_at:
            self.send_acks(now, out)
        if now >= t.next_due(self.last_sent, self.last_hb):
            self.send_heartbeat(now, out)
        return out

    def send_heartbeat(self, now: int, out: list[Action]) -> None:
        self._send(self._heartbeat, "HEARTBEAT", None, now, out, heartbeat=True)

    def on_publisher_lost(self, now: int, out: list[Action]) -> None:
        """A new connection and a new conversation (pppp.subscriber.resubscribe)."""
        out.extend(reconnect(SOCKET, self.endpoint))
        self.open_conversation(now, out)

    def open_conversation(self, now: int, out: list[Action]) -> None:
        """The first messages of a conversation, at start and on every new connection: SUBSCRIBE
        to every channel (E-PPPP-10)."""
        self.subscribe_all(now, out)

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        op = request.get("op")
        if op == "custom":
            payload = request.get("payload", [])
            if isinstance(payload, (bytes, bytearray, str)):
                payload = [payload]
            out: list[Action] = []
            frames = self.enc["CUSTOM"]({"payload": [as_bytes(p, "a custom payload frame") for p in payload]})
            self._send(frames, "CUSTOM", None, now, out)
            return out
        if op == "status":
            return [Deliver("subscriber-status", {
                "channels": list(self.channels),
                "delivered": {channel_text(c): [d.floor, len(d.extras)] for c, d in self.delivered.items()},
                "missing": {channel_text(c): [list(r) for r in v.missing] for c, v in self.conv.items() if v.missing},
            })]
        raise ValueError(f"pppp subscriber: unknown command {op!r} (known: 'custom', 'status')")

    # ---- the conversation ------------------------------------------------------------------

    def subscribe_all(self, now: int, out: list[Action]) -> None:
        """Start a (new) conversation: one SUBSCRIBE per channel (E-PPPP-10)."""
        self.conv = {}
        self.ack_at = None
        for c in self.channels:
            self._send(self.enc["SUBSCRIBE"]({"channel": c}), "SUBSCRIBE", {"topic": channel_text(c)}, now, out)

    def on_publish(self, channel: bytes, seq: int, payload: list[bytes], now: int) -> list[Action]:
        out: list[Action] = []
        known = self.delivered.get(channel)
        conv = self.conv.get(channel)
        if known is None or (conv is None and now - known.at > self.timing.grace):
            # a new channel (or one this subscriber was away from for longer than the grace
            # period): gaps are judged from this first number on (E-PPPP-02)
            floor = seq - 1 if known is None else max(known.floor, seq - 1)
            extras = set() if known is None else {s for s in known.extras if s > floor}
            known = self.delivered[channel] = Delivered(channel, floor, extras, now)
        delivered = known
        if conv is None:
            conv = self.conv[channel] = Conversation(seq)
            if delivered.floor + 1 < seq:
                conv.gap(delivered.floor + 1, seq - 1, delivered)
        elif seq > conv.highest:
            if seq > conv.highest + 1:
                conv.gap(conv.highest + 1, seq - 1, delivered)
            conv.highest = seq
        elif conv.missing:
            conv.fill(seq)
        if not delivered.has(seq):
            self.deliver(channel, seq, payload, now, out)
            delivered.add(seq, now)
            delivered.save(self.store, self.timing.grace)
            conv.ack = True
        else:
            self.on_duplicate(channel, seq, payload, conv, now, out)
        due = now + self.ack_delay
        if self.ack_at is None or due < self.ack_at:
            self.ack_at = due
        return out

    def on_duplicate(self, channel: bytes, seq: int, payload: list[bytes], conv: Conversation, now: int,
                     out: list[Action]) -> None:
        """Not delivered again, but ACK/NACKed again (pppp.subscriber.ack-duplicates)."""
        conv.ack = True

    def deliver(self, channel: bytes, seq: int, payload: list[bytes], now: int, out: list[Action]) -> None:
        topic = self.topics.get(channel)
        if topic is None:
            topic = self.topics[channel] = channel_text(channel)
        data = {"channel": channel, "seq": seq, "payload": payload, "topic": topic}
        if payload and payload[0].startswith(CORR_TAG):  # a workload's message: the trace pairs it with its publish
            data["corr"] = corr_of(payload[0])
        out.append(Deliver("message", data))

    def send_acks(self, now: int, out: list[Action]) -> None:
        self.ack_at = None
        for channel, conv in self.conv.items():
            if conv.ack:
                conv.ack = False
                frames = self._ack({"channel": channel, "sequence": self.ack_sequence(conv),
                                    "nacks": self.nack_ranges(conv)})
                self._send(frames, "ACK", {"topic": self.topics.get(channel) or channel_text(channel),
                                           "seq": conv.highest}, now, out)

    def ack_sequence(self, conv: Conversation) -> int:
        """The ACK frame: the highest number received in this conversation (E-PPPP-04)."""
        return conv.highest

    def nack_ranges(self, conv: Conversation) -> list[tuple[int, int]]:
        return [(first, last) for first, last in conv.missing]

    def _send(self, frames: list[bytes], msg_type: str, meta: dict[str, Any] | None, now: int, out: list[Action],
              heartbeat: bool = False) -> None:
        self.last_sent = now
        self.last_hb = heartbeat
        out.append(Send(SOCKET, frames, msg_type, meta))

    def get_timer(self) -> int | None:
        t = self.timing
        at = self.last_heard + t.dead_after
        hb = t.next_due(self.last_sent, self.last_hb)
        if hb < at:
            at = hb
        if self.ack_at is not None and self.ack_at < at:
            at = self.ack_at
        return at

