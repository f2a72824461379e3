"""What a DCP scenario's faults may do to the messages between the harness's workers or clients
and the broker: the checks of an external broker, judged from the wire
(`harness.checkers.dcp_external`), judge only what those faults leave provable.

Conservative by construction: a rule counts when its source, destination and message-type globs
could cover the message, whatever its socket, endpoint, direction, field conditions, probability
and the rules before it; a fault target that is neither a group, a node nor ``broker`` counts as
any node."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Iterable

from fault_injection.nemesis import REST, Crash, Partition, Pause, SlowLink
from fault_injection.rules import LOSSY_EFFECTS
from harness.packages.base import fault_ends_ns

DAMAGE = frozenset({"corrupt"})
REPLY_DAMAGE = DAMAGE  # a copy, a loss or a delay of a reply proves nothing wrong
COUNT_DAMAGE = frozenset({"duplicate", "corrupt"})  # an extra copy is an extra request or signal
LOSS = LOSSY_EFFECTS  # an answer that may not arrive in time


def nodes_with_role(scenario: Any, role: str) -> list[str]:
    """The scenario's nodes of ``role``, in scenario order."""
    return [n for n in scenario.node_names if scenario.role_of(n) == role]


def rule_touching(scenario: Any, effects: frozenset[str], src: Iterable[str], dst: Iterable[str],
                  types: Iterable[str]) -> str:
    """Why some message rule may apply one of ``effects`` to a message of ``types`` from a node of
    ``src`` to one of ``dst`` ("" if none may)."""
    src, dst, types = list(src), list(dst), list(types)
    for rule in scenario.rules.rules:
        effect = getattr(rule.effect, "name", "")
        m = rule.match
        if (effect in effects and any(fnmatchcase(s, m.src) for s in src) and any(fnmatchcase(d, m.dst) for d in dst)
                and any(fnmatchcase(t, m.msg_type) for t in types)):
            return f"rule {rule.name} may {effect} a {'/'.join(types)} from {m.src} to {m.dst}"
    return ""


def fault_between(scenario: Any, ours: Iterable[str], broker: Iterable[str], slow: bool = True) -> str:
    """Why a partition or (``slow``) a slow link of the file may stand between a node of ``ours``
    and the broker ("" if none may)."""
    ours, broker = set(ours), set(broker)
    for fault in scenario.faults:
        if isinstance(fault, Partition) and _separates(scenario, fault, ours, broker):
            return f"a partition ({[list(s) for s in fault.sides]}) may cut them off"
        if slow and isinstance(fault, SlowLink):
            a, b = _nodes(scenario, fault.src), _nodes(scenario, fault.dst)
            if _meets(a, ours) and _meets(b, broker) or _meets(a, broker) and _meets(b, ours):
                return f"a slow link ({fault.src} -> {fault.dst}) may delay them"
    return ""


def _nodes(scenario: Any, target: str) -> set[str] | None:
    """The nodes a fault target names, or None when it cannot be told before the run (any node)."""
    if target in scenario.groups:
        return set(scenario.groups[target].nodes)
    if target in scenario.node_names:
        return {target}
    if target == "broker":
        return set(nodes_with_role(scenario, "broker"))
    return None


def _meets(nodes: set[str] | None, some: set[str]) -> bool:
    return nodes is None or bool(nodes & some)


def _separates(scenario: Any, fault: Partition, ours: set[str], broker: set[str]) -> bool:
    sides: list[set[str] | None] = []
    named: set[str] = set()
    for side in fault.sides:
        nodes: set[str] | None = set()
        for target in side:
            if target == REST:
                continue
            found = _nodes(scenario, target)
            nodes = None if found is None or nodes is None else nodes | found
        sides.append(nodes)
        named |= nodes or set()
    if any(s is None for s in sides):
        return True
    for side, targets in zip(sides, fault.sides):
        if REST in targets and side is not None:
            side |= set(scenario.node_names) - named
    return any(i != j and _meets(a, ours) and _meets(b, broker)
               for i, a in enumerate(sides) for j, b in enumerate(sides))


def may_lose_requests(scenario: Any, client: str) -> str:
    """Why the file's faults may take an attempt of ``client``'s request or its reply on the way
    client -> broker -> worker and back ("" if none may): a loss rule, a partition or slow link, or
    a crash or pause of the broker or a worker (which may hold the request)."""
    brokers, workers = nodes_with_role(scenario, "broker"), nodes_with_role(scenario, "worker")
    why = (rule_touching(scenario, LOSS, [client], brokers, ("REQUEST",))
           or rule_touching(scenario, LOSS, brokers, [client], ("REPLY",))
           or rule_touching(scenario, LOSS, brokers, workers, ("REQUEST",))
           or rule_touching(scenario, LOSS, workers, brokers, ("REPLY",))
           or fault_between(scenario, [client], brokers) or fault_between(scenario, workers, brokers))
    if why:
        return why
    for fault in scenario.faults:
        if isinstance(fault, (Crash, Pause)) and _meets(_nodes(scenario, fault.target), set(brokers + workers)):
            return f"a {fault.key} of {fault.target} may take it"
    return ""


def path_cut_until(scenario: Any, client: str) -> int:
    """The latest moment (ns of the run) a time-bounded fault may still cut ``client``'s path to
    the broker and a worker and back (0 if none may): a partition or slow link between them until it
    ends, a pause of the broker or a worker until it resumes, a crash of one until it comes back.
    A fault that never ends, or a crash of a broker or worker that never comes back, cuts it to the
    run's end. (A message rule's losses are spread over the whole run: `may_lose_requests`.)"""
    end = scenario.duration_ns + scenario.settle_ns
    brokers, workers = nodes_with_role(scenario, "broker"), nodes_with_role(scenario, "worker")
    cut = 0
    for fault in scenario.faults:
        if isinstance(fault, Partition):
            touches = _separates(scenario, fault, {client}, set(brokers)) or _separates(
                scenario, fault, set(workers), set(brokers))
        elif isinstance(fault, SlowLink):
            a, b = _nodes(scenario, fault.src), _nodes(scenario, fault.dst)
            ours = {client, *workers}
            touches = _meets(a, ours) and _meets(b, set(brokers)) or _meets(a, set(brokers)) and _meets(b, ours)
        elif isinstance(fault, (Crash, Pause)):
            touches = _meets(_nodes(scenario, fault.target), set(brokers + workers))
        else:
            continue
        if touches:
            ends = fault_ends_ns(fault, end)
            cut = max(cut, end if ends is None else ends)
    return cut
