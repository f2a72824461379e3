"""What a protocol contributes to scenarios: its roles, their settings, workload operations,
checkers and how nodes are wired together. `harness.scenario` validates files against it and
`harness.composition` builds runs from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fault_injection.rules import parse_duration, parse_probability
from harness.node import NodeFactory

Parser = Callable[[Any], Any]


def as_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected a whole number, got {v!r}")
    return v


def as_positive_int(v: Any) -> int:
    n = as_int(v)
    if n < 1:
        raise ValueError(f"expected a whole number >= 1, got {v!r}")
    return n


def as_str(v: Any) -> str:
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ValueError(f"expected a string, got {v!r}")
    return str(v)


def as_bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected true or false, got {v!r}")
    return v


def as_ms(v: Any) -> int:
    """A duration ("250ms", "2s") as whole milliseconds; a bare number is milliseconds."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return int(v)
    ns = parse_duration(v)
    if ns < 0:
        raise ValueError(f"duration {v!r} is negative")
    return ns // 1_000_000


def as_duration(v: Any) -> int:
    """A duration in ns; a bare number is seconds (scenario-level times read better so)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return int(v * 1_000_000_000)
    ns = parse_duration(v)
    if ns < 0:
        raise ValueError(f"duration {v!r} is negative")
    return ns


def as_rate(v: Any) -> float:
    """Operations per second: 20, "20/s", "300/min", "1/100ms"."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if v <= 0:
            raise ValueError("rate must be positive")
        return float(v)
    if isinstance(v, str) and "/" in v:
        count, per = v.split("/", 1)
        per = per.strip()
        per_ns = {"s": 1e9, "sec": 1e9, "min": 60e9, "ms": 1e6}.get(per)
        if per_ns is None:
            per_ns = float(parse_duration(per))
        rate = float(count) * 1e9 / per_ns
        if rate <= 0:
            raise ValueError("rate must be positive")
        return rate
    raise ValueError(f"not a rate: {v!r} (use e.g. 20/s, 300/min)")


def one_of(*choices: str) -> Parser:
    def parse(v: Any) -> str:
        if v not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {v!r}")
        return v

    return parse


def as_probability(v: Any) -> float:
    return parse_probability(v)


@dataclass(frozen=True)
class Setting:
    """One setting of a role: the node config key it becomes, its parser and its meaning."""

    key: str
    parse: Parser
    doc: str = ""


@dataclass(frozen=True)
class Role:
    name: str
    factory: NodeFactory
    settings: dict[str, Setting]
    doc: str = ""


@dataclass(frozen=True)
class Operation:
    """A workload operation: who performs it and which parameters it takes."""

    name: str
    roles: tuple[str, ...]
    params: dict[str, Setting]
    doc: str = ""


@dataclass(frozen=True)
class Check:
    name: str
    factory: Callable[..., Any]  # (scenario, params) -> checker
    params: dict[str, Setting] = field(default_factory=dict)
    doc: str = ""
    clause: str = ""


class Profile:
    """Subclassed per protocol."""

    protocol = ""
    roles: dict[str, Role] = {}
    operations: dict[str, Operation] = {}
    checks: dict[str, Check] = {}
    default_checks: tuple[str, ...] = ()
    final_status: tuple[str, ...] = ()  # roles asked {"op": "status"} just before the checks are judged

    def wire(self, nodes: dict[str, tuple[str, dict[str, Any]]], endpoint: Callable[[str, str], str]) -> None:
        """Fill in endpoints (and identities) in each node's config, in place.

        ``nodes`` maps node name -> (role, config); ``endpoint(node, purpose)`` returns the
        endpoint a node binds for a purpose (simulated names or free loopback ports)."""
        raise NotImplementedError

    def command(self, op: str, node: str, params: dict[str, Any], k: int, rng: Any) -> dict[str, Any]:
        """The application command the k-th operation of a workload item sends to a node."""
        raise NotImplementedError
