"""Event BUS (Clone pattern / CHP): wire tables (`harness.protocols.eventbus`, strict and the
micro-toolkit dialect) and the clause catalogue (`harness.protocols.eventbus_clauses`). No
reference nodes, workload, checkers, mutants or conformance suites yet (``zmq-harness
protocols``).

Symbolic fault target ``primary``: the running server whose latest ``ha-state`` note says
``{"state": "primary"}``. The contract for servers (reference nodes to come, or a probe of an
implementation under test): a server of a dual-server (primary/backup) configuration emits
``Note("ha-state", {"state": S})`` whenever its state changes, and once at start, with S
``primary`` while it serves clients and ``backup`` while it stands by."""

from __future__ import annotations

from harness.packages.base import ProtocolPackage, TargetView
from harness.protocols.eventbus import TABLES
from harness.protocols.eventbus_clauses import CATALOGUE


def primary(view: TargetView) -> list[str]:
    """Every running server whose latest ``ha-state`` note says primary (one, unless both
    servers believe they are primary), in scenario order; [] when none does."""
    out = []
    for name in view.node_names():
        if view.role_of(name) == "server" and view.is_running(name):
            note = view.last_note(name, "ha-state")
            if note and note.get("state") == "primary":
                out.append(name)
    return out


def resolve_target(name: str, view: TargetView) -> list[str] | None:
    if name == "primary":
        return primary(view)
    return None


PACKAGE = ProtocolPackage(
    name="eventbus",
    tables=TABLES,
    catalogue=CATALOGUE,
    targets={"primary": "the running server whose latest 'ha-state' note says primary"},
    resolve_target=resolve_target,
)
