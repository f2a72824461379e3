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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness.conformance.case import Case, Step
from harness.node import Action, BaseNode, Deliver, Disconnect, Note, Send, SetTimer, SocketSpec, SocketType
from harness.protocols import Codec, DecodeError
from harness.protocols.codec import Message


@dataclass(frozen=True)
class PeerSocket:
    name: str
    type: SocketType
    endpoint: str
    bind: bool
    identity: bytes | None = None

    @property
    def routed(self) -> bool:
        return self.type is SocketType.ROUTER


class Conductor(BaseNode):
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
        self.log: list[dict[str, Any]] = []
        self.t0 = 0
        self.done = False

    # ---- node contract --------------------------------------------------------------------

    def sockets(self) -> list[SocketSpec]:
        return [SocketSpec(p.name, p.type, bind=(p.endpoint,) if p.bind else (),
                           connect=() if p.bind else (p.endpoint,), identity=p.identity)
                for p in self.peers.values()]

    def start(self, now: int) -> list[Action]:
        self.t0 = now
        return self._advance(now)

    def receive(self, socket: str, frames: list[bytes], now: int) -> list[Action]:
        if self.done:
            return []
        peer = self.peers[socket]
        if peer.routed:
            if not frames:
                return []
            self.iut_ident[socket] = frames[0]
            frames = frames[1:]
        try:
            msg: Message | None = self.codec.decode(frames)
            error = None
        except DecodeError as e:
            msg, error = None, e
        self._log(now, "in", socket, frames, msg, error)
        if error is not None:
            return self._fail(now, f"the implementation sent a malformed message: {error}", error.clause)
        self.buffers[socket].append((now, msg, frames))
        self.seen.setdefault(socket, []).append((now, msg, frames))
        return self._advance(now)

    def handle_timer(self, now: int) -> list[Action]:
        return [] if self.done else self._advance(now)

    def command(self, request: dict[str, Any], now: int) -> list[Action]:
        return []

    # ---- the script -----------------------------------------------------------------------

    def _advance(self, now: int) -> list[Action]:
        out: list[Action] = []
        while not self.done and self.i < len(self.case.steps):
            step = self.case.steps[self.i]
            kind = step.kind
            if kind == "send":
                frames = self.codec.encode(step.message, self._resolve(step.fields))
                out.extend(self._send(step, frames, now))
                if self.done:
                    return out
            elif kind == "send_raw":
                out.extend(self._send(step, list(step.frames or []), now))
                if self.done:
                    return out
            elif kind == "disconnect":
                peer = self.peers[step.peer]
                if not peer.bind:
                    out.append(Disconnect(peer.name, peer.endpoint))
            elif kind in ("restart_iut", "kill_iut"):
                out.append(Note("iut-control", {"action": kind, "step": self.i}))
            elif kind == "wait":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                if now < self.deadline:
                    out.append(SetTimer(self.deadline))
                    return out
            elif kind == "expect":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                    self.step_seen = len(self.seen.get(step.peer, [])) - len(self.buffers[step.peer])
                found = self._take(step)
                if found is None:
                    if now >= self.deadline:
                        reason, clause = self._diagnose(step)
                        return out + self._fail(now, reason, clause)
                    out.append(SetTimer(self.deadline))
                    return out
                if step.capture:
                    self.captured[step.capture] = found
            elif kind == "expect_nothing":
                if self.deadline is None:
                    self.deadline = now + step.within_ns
                    self.buffers[step.peer].clear()  # only what arrives from now on counts
                hit = self._take(step, consume=True)
                if hit is not None:
                    return out + self._fail(now, f"{step.peer} received {hit.name} "
                                                 f"{_brief(self.codec, hit)} where nothing was expected", self._clause(step))
                if now < self.deadline:
                    out.append(SetTimer(self.deadline))
                    return out
            self.i += 1
            self.deadline = None
        if not self.done and self.i >= len(self.case.steps):
            self.done = True
            out.append(Deliver("case-result", self._result("pass", "", "", now)))
        return out

    def _send(self, step: Step, frames: list[bytes], now: int) -> list[Action]:
        peer = self.peers[step.peer]
        self._log(now, "out", peer.name, frames, None, None)
        if peer.routed:
            ident = self.iut_ident.get(peer.name)
            if ident is None:
                return self._fail(now, f"{peer.name} cannot send yet: the implementation has not connected "
                                       "and sent anything to it", self._clause(step), error=True)
            frames = [ident, *frames]
        return [Send(peer.name, frames, step.message or "raw")]

    def _take(self, step: Step, consume: bool = True) -> Message | None:
        buf = self.buffers[step.peer]
        for k, (_, msg, _) in enumerate(buf):
            if msg is not None and (step.message is None or msg.name == step.message) and self._match(step, msg):
                if consume:
                    del buf[: k + 1]  # messages before the match were seen and passed over
                return msg
        return None

    def _match(self, step: Step, msg: Message) -> bool:
        return all(_matches(self._resolve_matcher(m), msg.fields.get(f)) for f, m in step.fields.items())

    def _resolve(self, fields: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in fields.items():
            if isinstance(v, dict) and set(v) == {"ref"}:
                v = self._ref(v["ref"])
            out[k] = v
        return out

    def _resolve_matcher(self, m: Any) -> Any:
        if isinstance(m, dict) and set(m) == {"ref"}:
            return self._ref(m["ref"])
        return m

    def _ref(self, ref: str) -> Any:
        name, _, field = str(ref).partition(".")
        msg = self.captured.get(name)
        return None if msg is None else (msg.fields.get(field) if field else msg)

    def _clause(self, step: Step) -> str:
        return step.clause or self.case.clauses[0]

    def _diagnose(self, step: Step) -> tuple[str, str]:
        """Why an expect timed out, and which clause that breaks. If a message of the right
        type came with wrong fields, name them (and their clause, if the step maps them)."""
        want = step.message + (f" with {_fmt(step.fields)}" if step.fields else "")
        base = f"{step.peer} expected {want} within {step.within_ns / 1e6:g} ms (line {step.line})"
        fresh = self.seen.get(step.peer, [])[max(self.step_seen, 0):]  # unconsumed or arrived during the step
        near = [m for _, m, _ in fresh if m is not None and m.name == step.message]
        if near:
            m = near[-1]
            wrong = [f for f, matcher in step.fields.items() if not _matches(self._resolve_matcher(matcher), m.fields.get(f))]
            shown = self.codec.show(m)
            detail = "; ".join(f"{f} was {shown.get(f)!r}" for f in wrong)
            clause = next((step.field_clauses[f] for f in wrong if f in step.field_clauses), self._clause(step))
            return f"{base}; a {m.name} arrived but {detail}", clause
        seen = [e for e in self.log if e["dir"] == "in" and e["peer"] == step.peer][-5:]
        got = "; ".join(f"{e['message']} {e.get('fields', '')}" for e in seen) or "nothing"
        return f"{base}; received: {got}", self._clause(step)

    def _fail(self, now: int, reason: str, clause: str, error: bool = False) -> list[Action]:
        self.done = True
        return [Deliver("case-result", self._result("error" if error else "fail", reason, clause, now))]

    def _result(self, verdict: str, reason: str, clause: str, now: int) -> dict[str, Any]:
        step = self.case.steps[min(self.i, len(self.case.steps) - 1)]
        return {"case": self.case.id, "verdict": verdict, "reason": reason, "clause": clause,
                "step": self.i, "step_line": step.line, "step_text": step.text,
                "elapsed_ms": round((now - self.t0) / 1e6, 3), "exchange": list(self.log)}

    def _log(self, now: int, direction: str, peer: str, frames: list[bytes], msg: Message | None,
             error: DecodeError | None) -> None:
        entry: dict[str, Any] = {"t_ms": round((now - self.t0) / 1e6, 3), "dir": direction, "peer": peer}
        if msg is None and direction == "out":
            try:
                msg = self.codec.decode(frames)
            except DecodeError as e:
                error = e
        if msg is not None:
            entry["message"] = msg.name
            entry["fields"] = self.codec.show(msg)
        else:
            entry["message"] = "(malformed)"
            entry["frames"] = ["0x" + f.hex() if f else "" for f in frames[:16]]
            if error is not None:
                entry["error"] = str(error)
        if len(self.log) < 500:
            self.log.append(entry)


def _brief(codec: Codec, msg: Message) -> str:
    return _fmt(codec.show(msg))


def _fmt(d: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


def _as_bytes(v: Any) -> Any:
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, dict) and set(v) == {"hex"}:
        return bytes.fromhex(str(v["hex"]).replace(" ", ""))
    if isinstance(v, list):
        return [_as_bytes(x) for x in v]
    return v


def _equal(expected: Any, actual: Any) -> bool:
    if expected == actual:
        return True
    if isinstance(actual, (bytes, list)):
        return _as_bytes(expected) == actual
    return False


def _matches(m: Any, actual: Any) -> bool:
    if isinstance(m, dict) and len(m) == 1:
        (k, v), = m.items()
        if k == "hex":
            return actual == bytes.fromhex(str(v).replace(" ", ""))
        if k == "pattern":
            text = actual.decode("utf-8", "replace") if isinstance(actual, bytes) else str(actual)
            return re.fullmatch(str(v), text) is not None
        if k == "any":
            return actual is not None
        if k == "not":
            return not _equal(v, actual)
        if k == "len":
            return actual is not None and len(actual) == int(v)
        if k == "one_of":
            return any(_equal(x, actual) for x in v)
        if k == "nonempty":
            return bool(actual) == bool(v)
        if k == "ref":  # unresolved (nothing captured): never matches
            return False
    return _equal(m, actual)
