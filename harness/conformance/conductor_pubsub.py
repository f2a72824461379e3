"""The conductor's publish/subscribe peers (Dafka's mesh; see `harness.conformance.conductor`):
subscriptions the implementation holds at a peer's XPUB, sends that wait for one, the
announcements they let through, and the root cause of a silence."""

from __future__ import annotations

from typing import Any

from harness.conformance.case import Step
from harness.conformance.exchange_log import ExchangeLog
from harness.conformance.plan import Announcement, PeerSocket
from harness.node import Action, Deliver, Send, SocketType

# After the peers' receiving sockets connect to an endpoint the implementation announced, its
# XPUB delivers to them only once their subscriptions have crossed (a ZMTP handshake away):
# until then an answer the implementation publishes is lost to them.
FOLLOW_SETTLE_NS = 100_000_000


class PubSubPeers:
    """Mixed into `Conductor`, which owns the state named below."""

    peers: dict[str, PeerSocket]
    subs: dict[str, dict[bytes, int]]
    heard: set[str]
    recv_heard: set[str]
    ever_subscribed: set[str]
    announce: list[Announcement]
    silenced: set[str]
    log: ExchangeLog
    t0: int
    send_wait_ns: int
    deadline: int | None
    optional_sends: dict[str, str]
    done: bool
    _ann_frames: list[list[bytes]]
    _ann_due: list[int | None]
    reached_at: int | None  # when the peers can hear the implementation (None: not yet known)
    wake_at: int | None  # a held send's next look (the settle time running)

    def _result(self, verdict: str, reason: str, clause: str, now: int) -> dict[str, Any]:
        raise NotImplementedError

    def _clause(self, step: Step) -> str:
        raise NotImplementedError

    def _fail(self, now: int, reason: str, clause: str, error: bool = False) -> list[Action]:
        raise NotImplementedError

    def _on_subscription(self, peer: PeerSocket, note: bytes, now: int) -> list[Action]:
        """The implementation (un)subscribed at a peer's XPUB: record it; announcements it lets
        through go out at once."""
        prefix = bytes(note[1:])
        held = self.subs[peer.name]
        self.heard.add(peer.name)
        out: list[Action] = []
        if note[0] == 1:
            self.ever_subscribed.add(peer.name)
            held[prefix] = held.get(prefix, 0) + 1
            for i, a in enumerate(self.announce):
                if a.peer == peer.name and a.about not in self.silenced and self._ann_frames[i][0].startswith(prefix):
                    out.append(Send(peer.name, list(self._ann_frames[i]), a.message))
        else:
            held.pop(prefix, None)
        self.log.append({"t_ms": round((now - self.t0) / 1e6, 3), "dir": "in", "peer": peer.name,
                         "message": "(subscribe)" if note[0] == 1 else "(unsubscribe)",
                         "fields": {"prefix": prefix.decode("utf-8", "backslashreplace")}})
        return out

    def _subscribed(self, peer: str, first: bytes) -> bool:
        return any(first.startswith(p) for p in self.subs.get(peer, {}))

    def _hold_send(self, step: Step, frames: list[bytes], now: int) -> list[Action] | None:
        """None: send now. Else wait for a subscription that lets the message through (a PUB
        drops it otherwise), and fail (or skip the case) when none comes in time."""
        peer = self.peers[step.peer]
        if not self.send_wait_ns or peer.type is not SocketType.XPUB or not frames:
            return None
        subscribed = self._subscribed(peer.name, bytes(frames[0]))
        if subscribed and self._reachable(now):
            return None
        if self.deadline is None:
            self.deadline = now + self.send_wait_ns
        if now < self.deadline:
            if subscribed and self.reached_at is not None:
                self.wake_at = self.reached_at
            return []  # waiting: get_timer() names the deadline (or the settle time)
        if subscribed:
            return self._fail_unannounced(step, peer, now)
        reason = self._unsubscribed_reason(step, bytes(frames[0]), self.send_wait_ns)
        if step.message in self.optional_sends:
            self.done = True
            data = self._result("skipped", f"{reason}; not applicable: {self.optional_sends[step.message]}", "", now)
            return [Deliver("case-result", data)]
        return self._fail_unsubscribed(step, reason, now)

    def _reachable(self, now: int) -> bool:
        """Whether what the implementation publishes now reaches the peers' receiving sockets:
        at once when they connect to an endpoint given to it; when they only follow the endpoints
        it announces, from ``FOLLOW_SETTLE_NS`` after the first announcement (before that, an
        answer to what a peer sends would be lost, and a correct implementation blamed)."""
        return self.reached_at is not None and now >= self.reached_at

    def _followed_first(self, now: int) -> None:
        if self.reached_at is None:
            self.reached_at = now + FOLLOW_SETTLE_NS

    def _fail_unannounced(self, step: Step, peer: PeerSocket, now: int) -> list[Action]:
        """A send was let through but the implementation never announced where it can be heard."""
        reason = (f"{peer.name} could not send {step.message or 'message'} (line {step.line}): in "
                  f"{self.send_wait_ns / 1e6:g} ms the implementation announced no endpoint to hear its answer on")
        via = self.peers.get(peer.discovered_via or "")
        clause = self._clause(step)
        if via is not None:
            root = self._blame_expect(via)
            if root is not None and root[0] != clause:
                reason, clause = f"{reason} [{root[1]}]", root[0]
        return self._fail(now, reason, clause)

    def _fail_unsubscribed(self, step: Step, reason: str, now: int) -> list[Action]:
        """No subscription came in time: the step's clause, or the root cause of the silence."""
        clause = self._clause(step)
        root = self._blame_unsubscribed(self.peers[step.peer or ""])
        if root is not None and root[0] != clause:
            reason, clause = f"{reason} [{root[1]}]", root[0]
        return self._fail(now, reason, clause)

    def _unsubscribed_reason(self, step: Step, first: bytes, waited_ns: int | None = None) -> str:
        peer = step.peer or ""
        what = step.message or "message"
        waited = step.within_ns if waited_ns is None else waited_ns
        have = ", ".join(repr(p.decode("utf-8", "backslashreplace")) for p in self.subs.get(peer, {})) or "none"
        doing = "send" if step.kind != "expect_subscription" else "see a subscription for"
        return (f"{peer} could not {doing} {what} (topic frame {first[:40]!r}): in {waited / 1e6:g} ms the "
                f"implementation held no subscription at {peer} that lets it through (line {step.line}; its "
                f"subscriptions there: {have})")

    def _blame_unsubscribed(self, p: PeerSocket) -> tuple[str, str] | None:
        if p.name not in self.heard and p.blame.get("silent"):
            return p.blame["silent"], f"the implementation never reached {p.name} at all"
        if p.name in self.ever_subscribed:
            return None
        via = self.peers.get(p.discovered_via or "")
        if via is not None and via.name not in self.ever_subscribed:
            if via.name not in self.heard and via.blame.get("silent"):
                return via.blame["silent"], f"the implementation never reached {via.name} at all"
            if via.blame.get("unsubscribed"):
                return via.blame["unsubscribed"], (f"it never subscribed at {via.name}, so it could not "
                                                   f"learn of {p.name}")
        if p.blame.get("unsubscribed"):
            return p.blame["unsubscribed"], f"no subscription at all ever arrived at {p.name}"
        return None

    def _blame_expect(self, p: PeerSocket) -> tuple[str, str] | None:
        if p.name not in self.heard and p.blame.get("silent"):
            return p.blame["silent"], f"the implementation never reached {p.name} at all"
        if p.name not in self.recv_heard and p.blame.get("recv-silent"):
            return p.blame["recv-silent"], f"nothing at all arrived at {p.name} from the implementation"
        return None

    def _announce_due(self, now: int) -> list[Action]:
        out: list[Action] = []
        for i, a in enumerate(self.announce):
            due = self._ann_due[i]
            if due is None or now >= due:
                if due is not None and a.about not in self.silenced:
                    out.append(Send(a.peer, list(self._ann_frames[i]), a.message))
                self._ann_due[i] = now + a.every_ns
        return out
