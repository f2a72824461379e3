"""The conductor: a sans-IO node that plays every scripted peer of a conformance case.

It owns one socket per scripted peer, executes the case's steps in order (send, expect with a
deadline, expect nothing for a while, wait, process control), keeps the whole exchange as
evidence, and ends with a ``Deliver("case-result", ...)``. Being a node, it runs unchanged in
the simulator (against reference nodes and mutants) and over real sockets (against any
implementation), so the same cases exercise both transports.

A failure is attributed to one clause: the clause a malformed message from the implementation
breaks (from the codec's DecodeError), else the clause of the failing step (``clause:`` on the
step, default the case's first clause). So a broken implementation fails on the clause it
breaks, and unrelated clauses of the same case stay unjudged rather than failing.

Peers that are nodes of a publish/subscribe mesh (Dafka; built by a suite's ``build_peers``,
see `PeerPlan`) add, all optional and unused by the other suites:

* a second socket for receiving (``PeerSocket.recv``): the main socket sends (an XPUB bound
  at the peer's own endpoint), the second receives (a SUB connected to the implementation's
  XPUB, with its subscriptions, decoded on its channel);
* subscriptions as evidence: a notification (``01``/``00`` + prefix) on a peer's XPUB is
  recorded, not decoded. A ``send`` on an XPUB waits (``send_wait_ns``) until the
  implementation holds a subscription that lets the message through, since PUB/SUB drops it
  otherwise; none in time fails the step (or skips the case, for ``optional_sends``);
* announcements: a message sent every ``every_ns`` and at once when a subscription that lets
  it through arrives (a tower's forwarded beacons, so the implementation discovers the
  scripted peers); a ``disconnect`` step silences the announcements about that peer;
* root causes (``PeerSocket.blame``): a failure on a peer that never heard from the
  implementation at all (``silent``), whose XPUB never got a subscription (``unsubscribed``,
  deferring to the peer it is discovered through, ``discovered_via``) or whose receiving
  socket never got a message (``recv-silent``) is attributed to that clause;
* placeholders: a value or matcher that is exactly ``"{name}"`` is the run's value of that
  placeholder (``PeerPlan.values``: ``{topic}``, ``{port}``, ...);
* evidence: a received message equal to one already logged (periodic beacons and heads) is
  counted on that entry (``repeats``) instead of logged again (``fold_repeats``);
* announced endpoints (``PeerPlan.announced``): a message of the implementation that announces
  one of its addresses and endpoints (a Dafka BEACON) makes every receiving socket that
  ``follow``s connect to that endpoint, as a real node would, so an implementation that binds
  ports of its own choosing is reached, and one made of several nodes (each with its address
  and endpoint) is reached in every part; ``{iut_address: true}`` is one of those addresses.

What the implementation prints for its application (``expect_output`` steps) reaches the
conductor as commands ``{"op": "output", "line": text}`` from the runner (the implementation's
standard output live; its deliveries, through the protocol's ``output``, in simulation). A line
that is a JSON object is kept until a step takes it; other lines are ignored.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from harness.conformance.answers import Answers
from harness.conformance.case import Case, Step, refs_in
from harness.conformance.conductor_pubsub import PubSubPeers
from harness.conformance.exchange_log import ExchangeLog
from harness.conformance.matchers import is_field_mapping, matches
from harness.conformance.plan import Announcement, PeerSocket
from harness.node import Action, BaseNode, Connect, Deliver, Disconnect, Note, Send, SocketSpec, SocketType
from harness.protocols import Codec, DecodeError
from harness.protocols.codec import Message
from harness.protocols.errors import FieldError


RECV = "/recv"  # suffix of a peer's second (receiving) socket
# Not a clause of any document: an implementation that crashes or aborts during a case has
# failed whatever it was doing, at MUST level, whichever step was waiting (docs/conformance.md).
ROBUSTNESS = "harness.robustness"
# The messages one case takes in from the implementation at most: each stays in memory for the
# case's expectations, so an implementation that floods the harness ends the case (an error:
# nothing further can be judged) before it exhausts memory; no case of the shipped suites
# needs a hundredth of this. The trace keeps every message.
MAX_RECEIVED = 200_000
IUT_CRASHED = "iut-crashed"  # the command the runner hands the conductor when the IUT died
# With ``hold_start``, the script waits for this command (the runner sends it once the IUT's
# process has connected to the harness) or for the IUT's first message: a slow start-up is the
# implementation's own business, so no step's ``within`` counts from before it (docs/conformance.md).
IUT_CONNECTED = "iut-connected"


class Conductor(PubSubPeers, BaseNode):
    role = "conductor"

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.case: Case = self.config["case"]
        self.codec: Codec = self.config["codec"]
        self.peers: dict[str, PeerSocket] = self.config["peers"]
        self.protocol = self.case.protocol
        self.i = 0
        self.deadline: int | None = None
        self.buffers: dict[str, list[tuple[int, Message | None, list[bytes]]]] = {p: [] for p in self.peers}
        self.iut_ident: dict[str, bytes] = {}
        self.captured: dict[str, Message] = {}
        self.seen: dict[str, list[tuple[int, Message | None, list[bytes]]]] = {}
        self.step_seen = 0
        self.counted = 0  # matching messages an expect_nothing with at_most has allowed so far
        self.log = ExchangeLog()  # the evidence, bounded (an implementation may flood the harness)
        self.t0 = 0
        self.done = False
        # publish/subscribe peers (all empty for router/dealer suites)
        self._sock_peer: dict[str, str] = {}
        for p in self.peers.values():
            self._sock_peer[p.name] = p.name
            if p.recv is not None:
                self._sock_peer[p.name + RECV] = p.name
        self.announce: list[Announcement] = list(self.config.get("announce", ()))
        self.values: dict[str, Any] = dict(self.config.get("values", {}))
        self.send_wait_ns: int = int(self.config.get("send_wait_ns", 0))
        self.optional_sends: dict[str, str] = dict(self.config.get("optional_sends", {}))
        self.subs: dict[str, dict[bytes, int]] = {p: {} for p in self.peers}  # what the IUT holds, per XPUB
        self.ever_subscribed: set[str] = set()
        self.heard: set[str] = set()  # peers that received anything (message or subscription)
        self.recv_heard: set[str] = set()  # peers whose receiving socket got a message
        self.silenced: set[str] = set()  # scripted peers whose announcements stopped
        self._ann_frames: list[list[bytes]] = [self.codec.encode(a.message, dict(a.fields)) for a in self.announce]
        self._ann_due: list[int | None] = [None] * len(self.announce)
        self._folded: dict[tuple[str, str, str], dict[str, Any]] | None = \
            {} if self.config.get("fold_repeats") else None
        self.announced: Callable[[Message], tuple[str, str] | None] | None = self.config.get("announced")
        self.iut_addresses: dict[str, str] = {}  # announced address -> endpoint, in the order heard
        self.followed: set[str] = {p.recv.endpoint for p in self.peers.values()
                                   if p.recv is not None and p.recv.endpoint is not None}
        following = [p.recv for p in self.peers.values() if p.recv is not None and p.recv.follow]
        only_follow = bool(following) and all(r.endpoint is None for r in following)
        self.reached_at: int | None = None if only_follow else 0
        self.wake_at: int | None = None
        self.outputs: list[dict[str, Any]] = []  # output lines no expect_output took yet
        self.answers = Answers(self.codec)  # responses without a type of their own (Raft's)
        self.holding = bool(self.config.get("hold_start"))
        # Live, the conductor's own timers can fire late (an overloaded machine, a process the OS
        # stopped): a case's timing is then not what it scripts. With ``watch_lateness_ns`` it
        # keeps a timer that often, so that a stall shows even while it only waits for a message,
        # and its result says how late it ran at worst once the script had begun.
        self.watch_ns = int(self.config.get("watch_lateness_ns", 0))
        self.tick_at: int | None = None
        self.late_ns = 0

    # ---- node contract --------------------------------------------------------------------

    def sockets(self) -> list[SocketSpec]:
        out = []
        for p in self.peers.values():
            out.append(SocketSpec(p.name, p.type, bind=(p.endpoint,) if p.bind else (),
                                  connect=() if p.bind else (p.endpoint,), identity=p.identity,
                                  subscribe=p.subscribe, welcome=p.welcome,
                                  handover=p.type is SocketType.ROUTER))
            if p.recv is not None:
                r = p.recv
                at = () if r.endpoint is None else (r.endpoint,)
                out.append(SocketSpec(p.name + RECV, r.type, bind=at if r.bind else (),
                                      connect=() if r.bind else at, subscribe=r.subscribe))
        return out

    def start(self, now: int) -> list[Action]:
        self.t0 = now
        if self.watch_ns > 0:
            self.tick_at = now + self.watch_ns
        out = self._announce_due(now)
        return out + self._advance(now)

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if self.done:
            return []
        self.holding = False  # the IUT is up: it talks
        name = self._sock_peer.get(socket, socket)
        peer = self.peers[name]
        on_recv = socket != name
        if peer.routed:
            if not frames:
                return []
            self.iut_ident[socket] = frames[0]
            frames = frames[1:]
        if not on_recv and peer.type is SocketType.XPUB and _is_subscription(frames):
            return self._on_subscription(peer, frames[0], now) + self._advance(now)
        channel = (peer.recv.channel if on_recv and peer.recv is not None else peer.channel)
        answer = self.answers.name(name, frames)
        try:
            msg: Message | None = (self.codec.decode(frames, as_=answer) if answer is not None
                                   else self.codec.decode(frames) if channel is None
                                   else self.codec.decode(frames, channel=channel))
            error = None
        except DecodeError as e:
            msg, error = None, e
        self.heard.add(name)
        if on_recv:
            self.recv_heard.add(name)
        self._log(now, "in", name, frames, msg, error)
        if error is not None:
            return self._fail(now, f"the implementation sent a malformed message: {error}", error.clause)
        self.buffers[name].append((now, msg, frames))
        self.seen.setdefault(name, []).append((now, msg, frames))
        if self.received > MAX_RECEIVED:  # (a case talks to a handful of peers)
            return self._fail(now, f"the implementation flooded the harness: more than {MAX_RECEIVED:,} messages in "
                                   f"this case ({len(self.seen[name]):,} to {name}, the last a "
                                   f"{msg.name if msg is not None else 'message'}); the case stops here", "", error=True)
        follow = self._follow(msg, now) if on_recv and self.announced is not None and msg is not None else []
        return follow + self._advance(now)

    def handle_timer(self, now: int) -> list[Action]:
        if self.done:
            return []
        due = self.get_timer()
        if due is not None and now - due > self.late_ns and not self.holding:
            self.late_ns = now - due
        if self.tick_at is not None and now >= self.tick_at:
            self.tick_at = now + self.watch_ns
        if self.wake_at is not None and now >= self.wake_at:
            self.wake_at = None
        return self._announce_due(now) + self._advance(now)

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        """``{"op": "iut-crashed", "reason": ...}``: the implementation crashed; the case ends
        with a robustness failure carrying the exchange so far. ``{"op": "output", "line": ...}``:
        a line the implementation printed for its application."""
        op = request.get("op")
        if self.done:
            return []
        if op == IUT_CRASHED:
            return self._fail(now, str(request.get("reason", "the implementation crashed")), ROBUSTNESS)
        if op == IUT_CONNECTED:
            if not self.holding:
                return []
            self.holding = False
            return self._advance(now)
        if op != "output":
            return []
        self.holding = False  # the IUT is up: it prints
        try:
            line = json.loads(str(request.get("line", "")))
        except ValueError:
            return []
        if not isinstance(line, dict):
            return []
        self.outputs.append(line)
        self.log.append({"t_ms": round((now - self.t0) / 1e6, 3), "dir": "in", "peer": "(output)",
                         "message": "(output)", "fields": line})
        return self._advance(now)

    # ---- the script -----------------------------------------------------------------------

    def _advance(self, now: int) -> list[Action]:
        if self.holding:
            return []  # the script has not begun: the IUT is still starting
        out: list[Action] = []
        while not self.done and self.i < len(self.case.steps):
            step = self.case.steps[self.i]
            kind = step.kind
            if kind == "send" and self._unanswerable(step):
                pass  # it answers a message that never came (a `maybe` expect found none)
            elif kind == "send":
                try:
                    frames = self._encode_send(step)
                except ValueError as e:  # a value taken from the run does not fit: the case's error
                    return out + self._fail(now, f"the case cannot build its {step.message}: {e}",
                                            self._clause(step), error=True)
                held = self._hold_send(step, frames, now)
                if held is not None:
                    return out + held
                out.extend(self._send(step, frames, now))
                if self.done:
                    return out
            elif kind == "send_raw":
                try:
                    raw = [f if isinstance(f, bytes) else self._ref_frame(str(f["ref"])) for f in step.frames or []]
                except ValueError as e:
                    return out + self._fail(now, f"the case cannot build its frames: {e}", self._clause(step), error=True)
                held = self._hold_send(step, raw, now)
                if held is not None:
                    return out + held
                out.extend(self._send(step, raw, now))
                if self.done:
                    return out
            elif kind == "disconnect":
                peer = self.peers[step.peer]
                if not peer.bind:
                    out.append(Disconnect(peer.name, peer.endpoint))
                else:  # a bound peer goes away: its announcements stop, its receiving side too
                    self.silenced.add(peer.name)
                    out.extend(Disconnect(peer.name + RECV, ep) for ep in self._recv_endpoints(peer))
            elif kind in ("restart_iut", "kill_iut"):
                out.append(Note("iut-control", {"action": kind, "step": self.i}))
            elif kind == "expect_subscription":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                first = self.codec.encode(step.message, self._resolve(step.fields))[0]
                if not self._subscribed(step.peer, bytes(first)):
                    if now < self.deadline:
                        return out  # waiting: get_timer() names the deadline
                    return out + self._fail_unsubscribed(step, self._unsubscribed_reason(step, bytes(first)), now)
            elif kind == "wait":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                if now < self.deadline:
                    return out  # waiting: get_timer() names the deadline
            elif kind == "expect":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                    self.step_seen = len(self.seen.get(step.peer, [])) - len(self.buffers[step.peer])
                found = self._take(step)
                if found is None and step.maybe and self._next_came_first(step):
                    # what the next expect waits for came first: the message that may come did not
                    # come before it (a client that updates at once must not wait out the window:
                    # its own response TTL may be shorter, E-RAFT-32); it is left for that step
                    self.deadline = now
                if found is None and step.first and self.buffers[step.peer]:
                    reason, clause = self._diagnose(step, before=True)
                    return out + self._fail(now, reason, clause)
                if found is None and not (step.maybe and now >= self.deadline):
                    if now >= self.deadline and step.optional and self._not_applicable(step):
                        self.done = True  # a message the implementation may never send: not applicable
                        what = (f"no matching {step.message} at {step.peer} within {step.within_ns / 1e6:g} ms, one "
                                f"matching skip_on instead" if step.skip_on else
                                f"no {step.message} at {step.peer} within {step.within_ns / 1e6:g} ms")
                        return out + [Deliver("case-result", self._result(
                            "skipped", f"{what} (line {step.line}); not applicable: {step.optional}", "", now))]
                    if now >= self.deadline:
                        reason, clause = self._diagnose(step)
                        root = self._blame_expect(self.peers[step.peer])
                        if root is not None and root != clause:
                            reason, clause = f"{reason} [{root[1]}]", root[0]
                        return out + self._fail(now, reason, clause)
                    return out  # waiting: get_timer() names the deadline
                if step.capture and found is not None:
                    self.captured[step.capture] = found
            elif kind == "expect_nothing":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                    self.buffers[step.peer].clear()  # only what arrives from now on counts
                    self.counted = 0
                hit = self._take(step, consume=True)
                while hit is not None and self.counted < step.at_most:  # allowed ones (at_most: N)
                    self.counted += 1
                    hit = self._take(step, consume=True)
                if hit is not None:
                    what = f"more than {step.at_most} matching messages" if step.at_most else "nothing"
                    return out + self._fail(now, f"{step.peer} received {hit.name} {_brief(self.codec, hit)} "
                                                 f"where {what} was expected", self._clause(step))
                if now < self.deadline:
                    return out  # waiting: get_timer() names the deadline
            elif kind == "expect_output":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                k = self._output(step)
                if k is None:
                    if now >= self.deadline:
                        got = "; ".join(json.dumps(o) for o in self.outputs[-5:]) or "none"
                        return out + self._fail(now, f"expected an output line with {_fmt(step.fields)} within "
                                                     f"{step.within_ns / 1e6:g} ms (line {step.line}); lines not "
                                                     f"taken yet: {got}", self._clause(step))
                    return out  # waiting: get_timer() names the deadline
                del self.outputs[k]
            elif kind == "expect_no_output":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                k = self._output(step)
                if k is not None:
                    return out + self._fail(now, f"the implementation output {json.dumps(self.outputs[k])} where no "
                                                 f"line with {_fmt(step.fields)} was expected (line {step.line})",
                                            self._clause(step))
                if now < self.deadline:
                    return out  # waiting: get_timer() names the deadline
            self.i += 1
            self.deadline = None
        if not self.done and self.i >= len(self.case.steps):
            self.done = True
            out.append(Deliver("case-result", self._result("pass", "", "", now)))
        return out

    def _send(self, step: Step, frames: list[bytes], now: int) -> list[Action]:
        peer = self.peers[step.peer]
        sent: Message | None = None
        if step.message is not None:
            try:
                sent = self.codec.decode(frames, as_=step.message)
            except DecodeError:
                sent = None
            self.answers.sent(peer.name, step.message, frames)
        self._log(now, "out", peer.name, frames, sent, None)
        if peer.routed:
            ident = self.iut_ident.get(peer.name)
            if ident is None:
                return self._fail(now, f"{peer.name} cannot send yet: the implementation has not connected "
                                       "and sent anything to it", self._clause(step), error=True)
            frames = [ident, *frames]
        return [Send(peer.name, frames, step.message or "raw")]

    def _output(self, step: Step) -> int | None:
        """The index of the first output line not taken yet whose keys match the step."""
        for k, line in enumerate(self.outputs):
            if all(matches(self._resolve_matcher(m), line.get(f)) for f, m in step.fields.items()):
                return k
        return None

    def _take(self, step: Step, consume: bool = True) -> Message | None:
        buf = self.buffers[step.peer]
        order = range(len(buf) - 1, -1, -1) if step.latest else range(len(buf))
        for k in order:
            _, msg, frames = buf[k]
            if msg is not None and (step.message is None or msg.name == step.message) and self._match(step, msg) \
                    and _raw_matches(step.raw, frames):
                if consume:
                    del buf[: k + 1]  # messages before the match were seen and passed over
                return msg
            if step.first:
                return None  # only the first unconsumed message may match
        return None

    def _next_came_first(self, step: Step) -> bool:
        """Whether a message of the type the next expect at the same peer waits for (past sends
        and other `maybe` expects) is already waiting there, unconsumed."""
        waiting = {msg.name for _, msg, _ in self.buffers[step.peer] if msg is not None}
        for nxt in self.case.steps[self.i + 1:]:
            if nxt.kind == "send":
                continue
            if nxt.kind == "expect" and nxt.maybe:
                if nxt.peer == step.peer and nxt.message in waiting:
                    return True  # what a later message that may come waits for came first
                continue
            if nxt.kind != "expect" or nxt.peer != step.peer:
                return False
            return nxt.message in waiting
        return False

    def _not_applicable(self, step: Step) -> bool:
        """An optional expect that found nothing: no message of its type came, or (with
        ``skip_on``) one that matches ``skip_on`` did."""
        if not step.skip_on:
            return not self._type_arrived(step)
        return self._type_arrived(step, step.skip_on)

    def _type_arrived(self, step: Step, fields: dict[str, Any] | None = None) -> bool:
        """A message of the step's type arrived (unconsumed, or during the step), whatever its
        fields, or (``fields``) one that matches them."""
        fresh = self.seen.get(step.peer or "", [])[max(self.step_seen, 0):]
        return any(msg is not None and msg.name == step.message and (fields is None or self._fields_match(fields, msg))
                   for _, msg, _ in fresh)

    def _match(self, step: Step, msg: Message) -> bool:
        return self._fields_match(step.fields, msg)

    def _fields_match(self, fields: dict[str, Any], msg: Message) -> bool:
        return all(matches(self._resolve_matcher(m), msg.fields.get(f)) for f, m in fields.items())

    def _resolve(self, fields: dict[str, Any]) -> dict[str, Any]:
        return {k: self._resolve_value(v) for k, v in fields.items()}

    def _resolve_value(self, v: Any, nested: bool = False) -> Any:
        """A send's value with what the run gave filled in: captured fields and identities,
        also inside a list of mappings (log entries), and placeholders."""
        if isinstance(v, dict) and set(v) == {"ref"}:
            return self._ref(v["ref"])
        if isinstance(v, dict) and set(v) == {"ref", "add"}:
            base = self._ref(v["ref"])
            if not isinstance(base, int) or isinstance(base, bool) or not isinstance(v["add"], int):
                raise ValueError(f"{v['ref']} is {base!r}: add {v['add']!r} needs whole numbers")
            return base + v["add"]
        if isinstance(v, dict) and set(v) == {"identity_of"}:
            return self._identity(str(v["identity_of"]))
        if isinstance(v, list) and any(isinstance(x, dict) for x in v):
            return [self._resolve_value(x, True) for x in v]
        if nested and isinstance(v, dict) and set(v) != {"iut_address"}:
            return {k: self._resolve_value(x, True) for k, x in v.items()}
        return self._placeholder(v) if self.values else v

    def _unanswerable(self, step: Step) -> bool:
        """A send that refers to a capture that was not made (only a `maybe` expect leaves one
        unmade: the case would have failed otherwise)."""
        return any(str(r).split(".")[0] not in self.captured for r in refs_in(step.fields))

    def _placeholder(self, v: Any) -> Any:
        """``"{name}"`` is the run's value of placeholder ``name`` (only with ``values``)."""
        if isinstance(v, str) and len(v) > 2 and v[0] == "{" and v[-1] == "}" and v[1:-1] in self.values:
            return self.values[v[1:-1]]
        if isinstance(v, list):
            return [self._placeholder(x) for x in v]
        return v

    def _resolve_matcher(self, m: Any) -> Any:
        """Values taken from the run (captured fields, routing identities), also inside
        ``not``, ``one_of`` and ``has``."""
        if isinstance(m, dict) and len(m) == 1:
            (k, v), = m.items()
            if k == "ref":
                return self._ref(v)
            if k == "identity_of":
                return self._identity(str(v))
            if k == "iut_address":
                return {"one_of": list(self.iut_addresses)}
            if k in ("not", "gt"):
                return {k: self._resolve_matcher(v)}
            if k == "has":
                if is_field_mapping(v):
                    return {k: {f: self._resolve_matcher(fm) for f, fm in v.items()}}
                return {k: self._resolve_matcher(v)}
            if k == "one_of" and isinstance(v, list):
                return {"one_of": [self._resolve_matcher(x) for x in v]}
        if self.values:
            return self._placeholder(m)
        return m

    def _encode_send(self, step: Step) -> list[bytes]:
        """The frames of a send step. A field ``{iut_address: true}`` takes the announced address
        that a subscription of the implementation at the peer lets through (the first one
        announced while none does, so that the step waits for one)."""
        fields = self._resolve(step.fields)
        slots = [f for f, v in fields.items() if isinstance(v, dict) and set(v) == {"iut_address"}]
        if not slots:
            return self.codec.encode(step.message, fields)
        if not self.iut_addresses:
            raise ValueError("the implementation has announced no address yet")
        variants = [self.codec.encode(step.message, {**fields, **{f: a for f in slots}}) for a in self.iut_addresses]
        return next((v for v in variants if self._subscribed(step.peer, bytes(v[0]))), variants[0])

    def _recv_endpoints(self, peer: PeerSocket) -> list[str]:
        """The endpoints a peer's receiving socket is connected to."""
        r = peer.recv
        if r is None or r.bind:
            return []
        given = [] if r.endpoint is None else [r.endpoint]
        return given + ([ep for ep in sorted(self.followed) if ep not in given] if r.follow else [])

    def _follow(self, msg: Message, now: int) -> list[Action]:
        """An announcement of the implementation: remember its address; connect every
        following receiving socket to an endpoint not heard of before."""
        found = self.announced(msg) if self.announced is not None else None
        if found is None:
            return []
        address, endpoint = found
        self.iut_addresses.setdefault(address, endpoint)
        if endpoint in self.followed:
            return []
        self.followed.add(endpoint)
        self._followed_first(now)
        return [Connect(p.name + RECV, endpoint) for p in self.peers.values() if p.recv is not None and p.recv.follow]

    def _identity(self, peer: str) -> bytes | None:
        """The routing identity of the peer's connection to the implementation, as the ROUTER
        side sees it: the identity a DEALER peer set, or the one the implementation's DEALER
        showed a ROUTER peer (None until it has sent something)."""
        p = self.peers.get(peer)
        if p is None:
            return None
        if p.address is not None:  # a mesh node: its protocol address
            return p.address
        return self.iut_ident.get(peer) if p.routed else p.identity

    def _ref(self, ref: str) -> Any:
        name, _, field = str(ref).partition(".")
        msg = self.captured.get(name)
        return None if msg is None else (msg.fields.get(field) if field else msg)

    def _ref_frame(self, ref: str) -> bytes:
        """A captured field as the frame its table encodes it in (send_raw)."""
        value, fname = self._ref(ref), ref.partition(".")[2]
        if value is None or fname not in self.codec.table.fields:
            raise ValueError(f"nothing captured as {ref}")
        try:
            return self.codec.table.fields[fname].type.encode(value)
        except FieldError as e:
            raise ValueError(f"{ref}: {e}") from None

    def _clause(self, step: Step) -> str:
        return step.clause or self.case.clauses[0]

    def _diagnose(self, step: Step, before: bool = False) -> tuple[str, str]:
        """Why an expect failed (timed out, or ``before``: something else arrived first), and
        which clause that breaks. If a message of the right type came with wrong fields, name
        them (and their clause, if the step maps them)."""
        want = step.message + (f" with {_fmt(step.fields)}" if step.fields else "")
        if before:
            base = f"{step.peer} expected {want} first (line {step.line})"
            fresh = self.buffers[step.peer][:1]
        else:
            base = f"{step.peer} expected {want} within {step.within_ns / 1e6:g} ms (line {step.line})"
            fresh = self.seen.get(step.peer, [])[max(self.step_seen, 0):]  # unconsumed or arrived during the step
        near = [(m, f) for _, m, f in fresh if m is not None and m.name == step.message]
        if near:
            m, frames = near[-1]
            wrong = [f for f, matcher in step.fields.items() if not matches(self._resolve_matcher(matcher), m.fields.get(f))]
            shown = self.codec.show(m)
            detail = "; ".join(f"{f} was {shown.get(f)!r}" for f in wrong)
            if not _raw_matches(step.raw, frames):
                wrong.append("raw")
                detail = "; ".join(filter(None, [detail, "frames " + ", ".join(
                    f"{i} were {frames[i].hex() if i < len(frames) else 'missing'}" for i in step.raw)]))
            clause = next((step.field_clauses[f] for f in wrong if f in step.field_clauses), self._clause(step))
            return f"{base}; a {m.name} arrived but {detail}", clause
        if before:
            m = fresh[0][1] if fresh else None
            got = f"{m.name} {_brief(self.codec, m)}" if m is not None else "a malformed message"
            return f"{base}; {got} arrived before it", self._clause(step)
        seen = self.log.last(5, lambda e: e["dir"] == "in" and e["peer"] == step.peer)
        got = "; ".join(f"{e['message']} {e.get('fields', '')}" for e in seen) or "nothing"
        return f"{base}; received: {got}", self._clause(step)

    def _fail(self, now: int, reason: str, clause: str, error: bool = False) -> list[Action]:
        self.done = True
        return [Deliver("case-result", self._result("error" if error else "fail", reason, clause, now))]

    @property
    def received(self) -> int:
        """The messages taken in from the implementation in this case."""
        return sum(map(len, self.seen.values()))

    def get_timer(self) -> int | None:
        """The step's deadline (every unfinished step waits on one) or the next announcement."""
        if self.done:
            return None
        times = [t for t in (self.deadline, self.wake_at, self.tick_at, *self._ann_due) if t is not None]
        return min(times) if times else None

    def _result(self, verdict: str, reason: str, clause: str, now: int) -> dict[str, Any]:
        step = self.case.steps[min(self.i, len(self.case.steps) - 1)]
        return {"case": self.case.id, "verdict": verdict, "reason": reason, "clause": clause,
                "step": self.i, "step_line": step.line, "step_text": step.text,
                "elapsed_ms": round((now - self.t0) / 1e6, 3), "exchange": self.log.entries(),
                "harness_late_ms": round(self.late_ns / 1e6, 1), "received": self.received}

    def _log(self, now: int, direction: str, peer: str, frames: list[bytes], msg: Message | None,
             error: DecodeError | None) -> None:
        entry: dict[str, Any] = {"t_ms": round((now - self.t0) / 1e6, 3), "dir": direction, "peer": peer}
        if msg is None and direction == "out":
            channel = self.peers[peer].channel if peer in self.peers else None
            try:
                msg = self.codec.decode(frames) if channel is None else self.codec.decode(frames, channel=channel)
            except DecodeError as e:
                error = e
        if msg is not None:
            entry["message"] = msg.name
            entry["fields"] = self.codec.show(msg)
            if self._folded is not None and direction == "in":  # periodic messages (beacons, heads)
                key = (peer, msg.name, repr(entry["fields"]))
                seen = self._folded.get(key)
                if seen is not None:
                    seen["repeats"] = seen.get("repeats", 0) + 1
                    seen["last_t_ms"] = entry["t_ms"]
                    return
                self._folded[key] = entry
        else:
            entry["message"] = "(malformed)"
            entry["frames"] = ["0x" + f.hex() if f else "" for f in frames[:16]]
            if error is not None:
                entry["error"] = str(error)
        self.log.append(entry)


def _raw_matches(raw: dict[int, bytes], frames: list[bytes]) -> bool:
    return all(i < len(frames) and bytes(frames[i]) == b for i, b in raw.items())


def _is_subscription(frames: list[bytes]) -> bool:
    return len(frames) == 1 and len(frames[0]) >= 1 and frames[0][0] in (0, 1)


def _brief(codec: Codec, msg: Message) -> str:
    return _fmt(codec.show(msg))


def _fmt(d: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"
