"""How a client finds the leader and the StateBroadcast URL, judged from its own requests and
the answers it received (the document's Client and RequestBroadcastStateUrl sections). Every
check here judges a SHOULD: a scenario that names it says the client under test does this.

What a client knows is read from the answers it received, never from its private state: an
answer names a leader when it is a RequestConfig answer with a LEADER ID, a negative
RequestUpdate or RequestEntries answer naming one (a redirect), a positive RequestUpdate answer
or a RequestBroadcastStateUrl answer with the URL (only the leader gives either, E-RAFT-21).
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, PAUSE, RECV, RESTART, RESUME, SEND, STALL, START, Event, Pauses, Verdict
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.timing import NS_PER_MS
from harness.checkers.raft.wire import show
from harness.protocols.codec import Message
from harness.protocols.raft import RE_NOT_LEADER

CONFIG, URL = "RequestConfig", "RequestBroadcastStateUrl"


def names_leader(request: Message, msg: Message) -> bool:
    """Whether an answer tells the client who leads (see the module)."""
    name = msg.name
    if name == "RequestConfigResponse":
        return isinstance(msg.get("leader_id"), str)
    if name == "RequestUpdateResponse":
        return bool(msg["success"]) or isinstance(msg.get("leader_id"), str)
    if name == "RequestEntriesResponse":
        return msg["status"] == RE_NOT_LEADER and isinstance(msg.get("leader_id"), str)
    if name == "RequestBroadcastStateUrlResponse":
        return msg.get("url") is not None
    return False


class Latest:
    """The latest request of one kind each client sent, and whether it was answered: only the
    first answer to the latest request is one a client acts on (a late or repeated answer to an
    earlier one is dropped, as the reference client does)."""

    def __init__(self) -> None:
        self.sent: dict[str, list[Any]] = {}  # client -> [its id frame, answered]

    def asked(self, ev: Event) -> None:
        self.sent[ev.node] = [(ev.frames or [b""])[0], False]

    def first_answer(self, ev: Event) -> bool:
        latest = self.sent.get(ev.node)
        if latest is None or latest[1] or latest[0] != (ev.frames or [b""])[0]:
            return False
        latest[1] = True
        return True


class BroadcastUrl(RaftChecker):
    """A client asks for the StateBroadcast URL only once an answer has named a leader, and an
    answer without the URL makes it ask for the configuration before it asks for the URL again
    (E-RAFT-21, E-RAFT-27 point 4). Fails a RequestBroadcastStateUrl a client sends before any
    answer it received named a leader (``raft.broadcast.url-after-leader``), or after the first
    answer to its latest RequestBroadcastStateUrl came without the URL and before it sent a
    RequestConfig or received an answer naming a leader (``raft.broadcast.config-on-missing-url``).
    Reads the clients' requests and the answers paired with them."""

    name = "broadcast-url"
    clause = "raft.broadcast.url-after-leader"
    level = "SHOULD"
    kinds = frozenset({SEND, RECV, CRASH})

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.told: set[str] = set()  # clients an answer named a leader to (ever: a restart may remember it)
        self.latest = Latest()
        self.missing: dict[str, tuple[Event, Message]] = {}  # client -> the answer without the URL
        self.problems: list[tuple[str, list[dict[str, Any]], str]] = []
        self.asked = 0

    def request_sent(self, ev: Event, msg: Message) -> None:
        if ev.role != "client":
            return
        if msg.name == CONFIG:
            self.missing.pop(ev.node, None)
        elif msg.name == URL:
            self.asked += 1
            self.latest.asked(ev)
            gone = self.missing.pop(ev.node, None)
            if len(self.problems) >= 50:
                return
            if ev.node not in self.told:
                self.problems.append((f"{ev.node} asked for the StateBroadcast URL before any answer named a leader",
                                      [show(ev, msg)], "raft.broadcast.url-after-leader"))
            elif gone is not None:
                self.problems.append((f"{ev.node} asked for the StateBroadcast URL again after an answer without it, "
                                      f"without a RequestConfig in between", [show(*gone), show(ev, msg)],
                                      "raft.broadcast.config-on-missing-url"))

    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if ev.role != "client":
            return
        if names_leader(request, msg):
            self.told.add(ev.node)
            self.missing.pop(ev.node, None)
        if request.name == URL and self.latest.first_answer(ev) and msg.get("url") is None:
            self.missing[ev.node] = (ev, msg)

    def on_other(self, ev: Event) -> None:
        self.missing.pop(ev.node, None)  # a crash: what it had heard is gone

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict_of(self.problems, f"{self.asked} RequestBroadcastStateUrl(s), each after a leader was "
                                              f"named and, after an answer without the URL, a RequestConfig")


class ClientTiming(RaftChecker):
    """A client check with a bound on the client's own clock: ``within`` maps each client to it
    in ms (default ``default_within_ms``); time the client is paused does not count, a span
    across one of its clock changes (``clock_changes``, ns) is not judged, and the bound is
    divided by its slowest clock rate (``slowest``)."""

    level = "SHOULD"
    kinds = frozenset({SEND, RECV, START, CRASH, RESTART, PAUSE, RESUME, STALL})

    def __init__(self, within: dict[str, int] | None = None, default_within_ms: int = 1000,
                 slowest: dict[str, float] | None = None, clock_changes: dict[str, tuple[int, ...]] | None = None,
                 **params: Any) -> None:
        super().__init__(**params)
        self.within = {n: int(ms) * NS_PER_MS for n, ms in (within or {}).items()}
        self.default_within = int(default_within_ms) * NS_PER_MS
        self.slowest = dict(slowest or {})
        self.clock_changes = {n: tuple(sorted(ts)) for n, ts in (clock_changes or {}).items()}
        self.pauses = Pauses()
        self.problems: list[tuple[str, list[dict[str, Any]]]] = []

    def bound(self, node: str) -> int:
        return int(self.within.get(node, self.default_within) / self.slowest.get(node, 1.0))

    def over(self, node: str, since: int, now: int) -> int | None:
        """How long past its bound the client went between ``since`` and ``now`` (None: not past it,
        or not known because its clock changed in between)."""
        if any(since < t <= now for t in self.clock_changes.get(node, ())):
            return None
        spent = now - since - self.pauses.between(node, since, now)
        return spent if spent > self.bound(node) else None

    def on_other(self, ev: Event) -> None:
        if ev.role != "client":
            return
        self.pauses.on_event(ev)
        self.life_event(ev)

    def life_event(self, ev: Event) -> None:
        """A client's START, CRASH, RESTART, PAUSE or RESUME."""


class RequestConfig(ClientTiming):
    """A client asks for the cluster state with RequestConfig before anything else (the
    document's Client section, ``raft.client.request-config``, a SHOULD): the first request of
    each client life (from its start to its crash) must be a RequestConfig, sent within
    ``within`` (default 1 s) of its start. Reads the clients' requests, starts, crashes and
    pauses."""

    name = "request-config"
    clause = "raft.client.request-config"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.lives: dict[str, list[Any]] = {}  # client -> [started at, its first request or None, the start]
        self.judged = 0

    def life_event(self, ev: Event) -> None:
        if ev.kind in (START, CRASH, RESTART):
            self.close(ev.node, ev.time_ns)
        if ev.kind == START:
            self.lives[ev.node] = [ev.time_ns, None, ev]

    def request_sent(self, ev: Event, msg: Message) -> None:
        life = self.lives.get(ev.node)
        if ev.role != "client" or life is None or life[1] is not None:
            return
        life[1] = msg.name
        self.judged += 1
        if msg.name != CONFIG and len(self.problems) < 50:
            self.problems.append((f"{ev.node}'s first request was a {msg.name}, not a RequestConfig",
                                  [show(life[2]), show(ev, msg)]))
        else:
            late = self.over(ev.node, life[0], ev.time_ns)
            if late is not None and len(self.problems) < 50:
                self.problems.append((f"{ev.node} sent its first RequestConfig {late / 1e6:.1f} ms after it started "
                                      f"(bound {self.bound(ev.node) / 1e6:.1f} ms)", [show(life[2]), show(ev, msg)]))

    def close(self, node: str, at: int) -> None:
        life = self.lives.pop(node, None)
        if life is None or life[1] is not None:
            return
        late = self.over(node, life[0], at)
        if late is not None and len(self.problems) < 50:
            self.judged += 1
            self.problems.append((f"{node} sent no RequestConfig (no request at all) in the {late / 1e6:.1f} ms after "
                                  f"it started (bound {self.bound(node) / 1e6:.1f} ms)", [show(life[2])]))

    def finish(self, end_ns: int) -> list[Verdict]:
        for node in list(self.lives):
            self.close(node, end_ns)
        return self.verdict(self.problems, f"{self.judged} client life(s), each asking RequestConfig first")


class RepeatConfig(ClientTiming):
    """A client told that the cluster has no leader asks again (the document's Client section,
    ``raft.client.repeat-config``, a SHOULD; E-RAFT-14: "transit state" is a RequestConfig
    answer whose LEADER ID is null, and the client repeats after SERVER_ELECTION_GRACE_MS): after
    the first answer to its latest RequestConfig names no leader, the client sends another
    RequestConfig, or receives an answer naming a leader, within ``within`` (default 1 s, or
    twice its SERVER_ELECTION_GRACE_MS when that is longer). A crash ends the wait; the end of
    the run judges it only once the bound is over. Reads the clients' requests, the answers,
    crashes and pauses."""

    name = "repeat-config"
    clause = "raft.client.repeat-config"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.latest = Latest()
        self.waiting: dict[str, tuple[Event, Message]] = {}  # client -> the answer naming no leader
        self.judged = 0

    def request_sent(self, ev: Event, msg: Message) -> None:
        if ev.role != "client" or msg.name != CONFIG:
            return
        self.latest.asked(ev)
        self.resolve(ev.node, ev.time_ns, (ev, msg))

    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if ev.role != "client":
            return
        if names_leader(request, msg):
            self.resolve(ev.node, ev.time_ns, (ev, msg))
        elif request.name == CONFIG and self.latest.first_answer(ev):
            self.waiting.setdefault(ev.node, (ev, msg))

    def life_event(self, ev: Event) -> None:
        if ev.kind in (CRASH, RESTART):
            self.resolve(ev.node, ev.time_ns, (ev, None))

    def resolve(self, node: str, at: int, then: tuple[Event, Message | None] | None) -> None:
        """The wait of ``node`` is over at ``at`` (by ``then``, shown only in a problem): judge how
        long it took."""
        wait = self.waiting.pop(node, None)
        if wait is None:
            return
        self.judged += 1
        late = self.over(node, wait[0].time_ns, at)
        if late is not None and len(self.problems) < 50:
            self.problems.append((f"{node} was told no leader is known and sent no RequestConfig for "
                                  f"{late / 1e6:.1f} ms "
                                  f"(bound {self.bound(node) / 1e6:.1f} ms)",
                                  [show(*wait)] + ([show(*then)] if then is not None else [])))

    def finish(self, end_ns: int) -> list[Verdict]:
        for node in list(self.waiting):
            self.resolve(node, end_ns, None)
        return self.verdict(self.problems, f"{self.judged} answer(s) naming no leader, each followed by another "
                                           f"RequestConfig or a leader in time")
