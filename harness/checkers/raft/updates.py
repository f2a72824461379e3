"""RequestUpdate idempotency, judged from the wire: every acknowledged update is applied
exactly once, at the index its acknowledgement names."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, NOTE, RECV, RESTART, SEND, VIA_PROXY, Event, Verdict
from harness.checkers.raft.commits import KnowledgeChecker
from harness.checkers.raft.elections import RaftChecker
from harness.checkers.raft.logs import Ref
from harness.checkers.raft.wire import ROUTER, entries_of, only, show
from harness.protocols.codec import Message

NO_REQID = bytes(12)


class UpdateOnce(KnowledgeChecker):
    """Every acknowledged RequestUpdate is applied exactly once, at its acknowledged index
    (E-RAFT-15, E-RAFT-16). Reads the RequestUpdate responses "true" with an index (sent by peers
    or received by clients; frame 1 is the reqid) and the committed entries the wire shows with
    their reqids (see `harness.checkers.raft.commits`): the entry at an acknowledged index must
    carry the acknowledged reqid, one reqid is never acknowledged at two indexes, and no reqid
    appears in two committed entries. An acknowledgement whose index no committed entry on the
    wire shows is counted as unverified, not failed."""

    name = "update-once"
    clause = "raft.update.idempotent"

    def __init__(self, peers: int = 0, **params: Any) -> None:
        super().__init__(peers, **params)
        self.acks: dict[bytes, dict[int, Ref]] = {}  # reqid -> acknowledged index -> evidence
        self.content: dict[int, tuple[bytes, Ref]] = {}  # committed index -> the reqid of its entry
        self.where: dict[bytes, dict[int, Ref]] = {}  # reqid -> committed indexes holding it

    def on_acked(self, ev: Event, request: Message, msg: Message) -> None:
        self.acks.setdefault(msg["reqid"], {}).setdefault(msg["log_index"], (ev, msg))

    def on_learned(self, i: int, t: int | None, crc: int | None, reqid: bytes | None, term: int | None,
                   ref: Ref) -> None:
        if t is not None and reqid is not None and i not in self.content:
            self.content[i] = (reqid, ref)
            if reqid != NO_REQID:
                self.where.setdefault(reqid, {}).setdefault(i, ref)

    def finish(self, end_ns: int) -> list[Verdict]:
        problems: list[tuple[str, list[dict[str, Any]]]] = []
        verified = 0
        for reqid, acks in self.acks.items():
            if len(acks) > 1:
                problems.append((f"update {reqid.hex()} acknowledged at indexes {sorted(acks)}",
                                 [show(*r) for r in acks.values()]))
            for i, ref in acks.items():
                held = self.content.get(i)
                if held is None:
                    continue
                if held[0] != reqid:
                    problems.append((f"update {reqid.hex()} acknowledged at index {i}, which holds update "
                                     f"{held[0].hex()}", [show(*ref), show(*held[1])]))
                else:
                    verified += 1
        for reqid, at in self.where.items():
            if len(at) > 1:
                problems.append((f"update {reqid.hex()} is in the committed log {len(at)} times, at "
                                 f"{sorted(at)}", [show(*r) for r in list(at.values())[:4]]))
        acked = sum(len(a) for a in self.acks.values())
        return self.verdict(problems[:50], f"{acked} acknowledged update(s), {verified} seen applied once at "
                                           f"their index, {acked - verified} not read back")



REQID_SECONDS = 4  # a reqid begins with the seconds since the Unix epoch, big-endian (E-RAFT-09)


class UpdateExpiry(RaftChecker):
    """A leader refuses a RequestUpdate whose reqid is older than REQUEST_UPDATE_TTL and that the
    cluster never took before (``raft.update.reqid-freshness``), and says so with a refusal
    without a third frame: a refusal naming a leader, or nil, says "not the leader", which a peer
    that leads never says (``raft.update.expired``, E-RAFT-15).

    The age of a reqid is its leader's clock minus the reqid's timestamp (its first four bytes,
    seconds, E-RAFT-16), with each peer's ``ttl`` (ms, its ``update_ttl``) and ``epoch_s`` (the
    run's start on the epoch scale). It is judged only beyond the TTL plus 1 s (the timestamp's
    granularity) plus what the scenario's clock faults may have moved that peer's clock
    (``clock_slack``: per peer, (sum of offsets in ns, sum of drifts)), and only for a reqid no
    peer acknowledged and no AppendEntries carried before (it may have reached the cluster in
    time). A peer leads from its ``role`` note saying ``leader`` until its next ``role`` note or
    crash; peers without notes are not judged on the second rule. The answers of an external
    peer seen by the chaos proxy are not judged (its clock is its host's, and the proxy's read
    time bounds the answer from above only); what they acknowledge still counts as taken."""

    name = "update-expiry"
    clause = "raft.update.reqid-freshness"
    kinds = frozenset({SEND, RECV, NOTE, CRASH, RESTART})

    def __init__(self, ttl_ms: dict[str, int] | None = None, epoch_s: dict[str, int] | None = None,
                 clock_slack: dict[str, tuple[int, float]] | None = None, **params: Any) -> None:
        super().__init__(**params)
        self.ttl = {n: int(ms) * 1_000_000 for n, ms in (ttl_ms or {}).items()}
        self.epoch = dict(epoch_s or {})
        self.slack = dict(clock_slack or {})
        self.taken: set[bytes] = set()  # reqids some peer acknowledged or replicated
        self.leading: dict[str, int] = {}  # peer -> the term its role note says it leads
        self.bad: list[tuple[str, list[dict[str, Any]], str]] = []
        self.answers = 0

    def on_other(self, ev: Event) -> None:
        if ev.kind == NOTE and ev.msg_type == "role" and ev.data:
            if ev.data.get("role") == "leader" and isinstance(ev.data.get("term"), int):
                self.leading[ev.node] = ev.data["term"]
            else:
                self.leading.pop(ev.node, None)
        elif ev.kind in (CRASH, RESTART):
            self.leading.pop(ev.node, None)

    def carried(self, ev: Event, msg: Message, skip: int = 0) -> None:
        for raw in entries_of(ev, msg, skip)[1]:
            self.taken.add(bytes(raw[:12]))

    @only("AppendEntries")
    def request_sent(self, ev: Event, msg: Message) -> None:
        if msg.name == "AppendEntries":
            self.carried(ev, msg)

    @only("AppendEntries")
    def request_received(self, ev: Event, msg: Message) -> None:
        if msg.name == "AppendEntries":
            self.carried(ev, msg, 1)

    @only("RequestUpdateResponse")
    def response_received(self, ev: Event, request: Message, msg: Message) -> None:
        if request.name == "RequestUpdate" and msg["success"]:
            self.taken.add(msg["reqid"])

    def age_beyond(self, node: str, reqid: bytes, now: int) -> float | None:
        """How far past its TTL and every allowance the reqid is on ``node``'s clock (s), or None."""
        ttl = self.ttl.get(node)
        if ttl is None or len(reqid) < REQID_SECONDS:
            return None
        offsets, drifts = self.slack.get(node, (0, 0.0))
        clock_s = self.epoch.get(node, 0) + now / 1e9
        age_s = clock_s - int.from_bytes(reqid[:REQID_SECONDS], "big")
        beyond = age_s - ttl / 1e9 - 1.0 - (offsets + drifts * now) / 1e9
        return beyond if beyond > 0 else None

    @only("RequestUpdateResponse")
    def response_sent(self, ev: Event, request: Message, msg: Message) -> None:
        if request.name != "RequestUpdate" or ev.socket != ROUTER:
            return
        if ev.via == VIA_PROXY:  # an external peer: its clock and when it answered are unknown
            if msg["success"]:
                self.taken.add(msg["reqid"])
            return
        self.answers += 1
        reqid = msg["reqid"]
        if msg["success"]:
            if reqid not in self.taken:
                beyond = self.age_beyond(ev.node, reqid, ev.time_ns)
                if beyond is not None and len(self.bad) < 50:
                    self.bad.append((f"{ev.node} took update {reqid.hex()}, {beyond:.1f} s past its TTL on its clock "
                                     f"(with every allowance), never taken before",
                                     [show(ev, msg)], "raft.update.reqid-freshness"))
            self.taken.add(reqid)
        elif msg.fields.get("leader_id") is not None and ev.node in self.leading and len(self.bad) < 50:
            self.bad.append((f"{ev.node}, leader of term {self.leading[ev.node]}, refused update {reqid.hex()} as "
                             f"not the leader", [show(ev, msg)], "raft.update.expired"))

    def finish(self, end_ns: int) -> list[Verdict]:
        return self.verdict_of(self.bad, f"{self.answers} RequestUpdate answer(s): no expired update taken, no "
                                         f"leader saying it is not the leader")
