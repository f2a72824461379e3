"""RequestUpdate idempotency, judged from the wire: every acknowledged update is applied
exactly once, at the index its acknowledgement names."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import Event, Verdict
from harness.checkers.raft.commits import KnowledgeChecker
from harness.checkers.raft.logs import Ref
from harness.checkers.raft.wire import show
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
