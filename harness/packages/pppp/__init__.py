"""PPPP (Paranoid Pirate Publishing Protocol): the wire table (`harness.protocols.pppp`) and
the clause catalogue (`harness.protocols.pppp_clauses`). No reference nodes, workload,
checkers, mutants or conformance suites yet (``zmq-harness protocols``).

Symbolic fault target ``publisher``: the running node of role ``publisher`` (PPPP connects a
single publisher and a pool of subscribers), whatever its group is called."""

from __future__ import annotations

from harness.packages.base import ProtocolPackage, TargetView, running_with_role
from harness.protocols.pppp import TABLES
from harness.protocols.pppp_clauses import CATALOGUE


def resolve_target(name: str, view: TargetView) -> list[str] | None:
    if name == "publisher":
        return running_with_role(view, "publisher")
    return None


PACKAGE = ProtocolPackage(
    name="pppp",
    tables=TABLES,
    catalogue=CATALOGUE,
    targets={"publisher": "the running publisher (PPPP connects a single publisher)"},
    resolve_target=resolve_target,
)
