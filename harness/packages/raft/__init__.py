"""Raft over ZeroMQ: wire tables (`harness.protocols.raft`, strict and ``raft:zmq-raft``) and
the clause catalogue (`harness.protocols.raft_clauses`). No reference nodes, workload,
checkers, mutants or conformance suites yet (``zmq-harness protocols``).

Symbolic fault target ``leader``: the running peer whose latest ``role`` note says it leads,
in the highest term. The contract for peers (reference nodes to come, or a probe of an
implementation under test): a peer emits ``Note("role", {"role": R, "term": T})`` whenever its
role or its term changes, and once at start, with R one of ``follower``, ``candidate``,
``leader`` and T its current term (an int)."""

from __future__ import annotations

from harness.packages.base import ProtocolPackage, TargetView
from harness.protocols.raft import TABLES
from harness.protocols.raft_clauses import CATALOGUE


def leader(view: TargetView) -> list[str]:
    """The running peer whose latest ``role`` note says ``leader`` with the highest term; [] when
    none claims to lead (an election is under way). Two peers claiming the same highest term
    (what election safety forbids) are both named, in scenario order."""
    best: int | None = None
    found: list[str] = []
    for name in view.node_names():
        if view.role_of(name) != "peer" or not view.is_running(name):
            continue
        note = view.last_note(name, "role")
        if not note or note.get("role") != "leader":
            continue
        term = note.get("term")
        if not isinstance(term, int) or isinstance(term, bool):
            continue
        if best is None or term > best:
            best, found = term, [name]
        elif term == best:
            found.append(name)
    return found


def resolve_target(name: str, view: TargetView) -> list[str] | None:
    if name == "leader":
        return leader(view)
    return None


PACKAGE = ProtocolPackage(
    name="raft",
    tables=TABLES,
    catalogue=CATALOGUE,
    targets={"leader": "the running peer whose latest 'role' note says leader, in the highest term"},
    resolve_target=resolve_target,
)
