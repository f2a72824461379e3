"""External nodes (``command:`` groups) as the checks see them: which nodes of a scenario are
external, and how a verdict says what it could not judge of them.

A check never fails for lack of observation: an external node produces no COMMAND, DELIVER,
NOTE or socket events, and its sends and receipts are seen only where a probed node (a reference
node) is at the other end, or when the chaos proxy observes them (``ev.via``). What a check judges
of an external node it judges from that wire; what the wire does not show, its verdict names
("not judged: ... (external: ...)")."""

from __future__ import annotations

from typing import Any, Iterable

from harness.checkers.wire_receipts import ExternalSenders, Senders


def external_nodes(scenario: Any, role: str | None = None) -> frozenset[str]:
    """The nodes of the scenario's ``command:`` groups (of ``role`` only, when given)."""
    return frozenset(n for g in scenario.groups.values() if g.command and (role is None or g.role == role)
                     for n in g.nodes)


def external_senders(scenario: Any, senders: Senders | None = None) -> ExternalSenders | None:
    """What ``wire-conformance`` needs to judge what the scenario's external nodes send the
    harness's nodes (`harness.checkers.wire_receipts`); None without external nodes.
    ``senders``: the package's (receiver role, socket, frames) -> roles that may send it that."""
    nodes = {n: g.role for g in scenario.groups.values() if g.command for n in g.nodes}
    return ExternalSenders(nodes, corrupts(scenario), senders) if nodes else None


def rule_effects(scenario: Any) -> set[str]:
    """The effects of the scenario's message rules (drop, delay, duplicate, reorder, corrupt)."""
    return {getattr(rule.effect, "name", "") for rule in scenario.rules.rules}


def corrupts(scenario: Any) -> bool:
    """Whether a message rule of the scenario corrupts messages: what the harness's nodes receive
    is then no proof of what an external node sent (a damaged copy may read as another message)."""
    return "corrupt" in rule_effects(scenario)


def fifo(scenario: Any) -> bool:
    """No message rule of the scenario delays, reorders, duplicates or damages a message: what a
    node receives on a connection is what the other end sent, in its order, less losses."""
    return rule_effects(scenario) <= {"drop"}


def not_judged(what: str, nodes: Iterable[str]) -> str:
    """The verdict-detail suffix naming what was not judged and the external nodes it concerns
    (empty when there are none)."""
    names = sorted(nodes)
    return f"; not judged: {what} (external: {', '.join(names)})" if names else ""


def noting_external(checker: Any, scenario: Any, roles: tuple[str, ...], what: str) -> Any:
    """``checker``, whose verdicts end by naming ``what`` it does not judge of the scenario's
    external nodes of ``roles`` (a check that judges only what the probes of the nodes the
    harness runs report)."""
    note = not_judged(what, (n for r in roles for n in external_nodes(scenario, r)))
    if not note:
        return checker
    finish = checker.finish

    def finish_noted(end_ns: int) -> Any:
        verdicts = finish(end_ns)
        for v in verdicts:
            v.detail += note
        return verdicts

    checker.finish = finish_noted
    return checker
