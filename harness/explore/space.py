"""What ``zmq-harness explore`` may vary in a scenario: its fault vocabulary and bounds.

A scenario file may carry an ``explore:`` section (``zmq-harness run`` ignores it); without
one, the defaults below hold. The bounds are part of the property: a schedule that, say,
drops every reply for the whole run defeats any correct client, so the vocabulary is bounded
to what a correct implementation must survive (rules lose at most a few percent, every crash
restarts, every fault ends before the run's quiet end). docs/explore.md explains each field.

    explore:
      max_faults: 3                     # faults drawn per schedule (the file's own faults come on top)
      kinds: [crash, pause, partition, slow_link, rule]     # clock_skew too, when named
      targets: [broker, workers]        # what node faults strike (groups, nodes, roles, protocol targets)
      messages: [REQUEST, REPLY]        # what message rules match (default: every message of the dialect)
      effects: {drop: 5%, duplicate: 10%, delay: 20%, reorder: 10%, corrupt: 5%}   # rule effects, highest probability
      damage: [header]                  # what corrupt rules do (fault_injection.damage; default: the five kinds)
      latency: 50ms                     # longest extra delay of a rule, slowest slow link
      skew: 100ms                       # largest clock offset
      from: 0s                          # no fault starts earlier
      quiet: 2s                         # the run's last stretch is free of faults (default: a third)
      shortest: 50ms                    # fault lengths (restart_after, windows) in [shortest, longest]
      longest: 1s
      counts: {workers: [1, 4]}         # group sizes to try (default: as written)
      rate: [50%, 200%]                 # workload rate, as a factor of the written one (default 100%)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fault_injection.damage import KNOWN_HOWS
from fault_injection.rules import parse_probability
from harness.packages.base import as_duration, as_positive_int
from harness.registry import package
from harness.scenario import Scenario, Validator
from harness.yamlsrc import Locations

SECTION = "explore"
RULE = "rule"
NODE_KINDS = ("crash", "pause", "partition", "slow_link", "clock_skew")
DEFAULT_KINDS = ("crash", "pause", "partition", "slow_link", RULE)
# In the order rules draw them (corrupt last: the older effects keep their places).
EFFECTS = ("delay", "drop", "duplicate", "reorder", "corrupt")
# A corrupted message is malformed (fault_injection.damage), so a correct receiver discards it:
# at worst a lost message, bounded as drop is.
DEFAULT_EFFECTS = {"drop": 0.05, "duplicate": 0.10, "delay": 0.20, "reorder": 0.10, "corrupt": 0.05}
# Probabilities a rule is drawn with (those up to its effect's bound, and the bound itself).
PROBABILITY_LADDER = (0.01, 0.02, 0.05, 0.10, 0.20, 0.50, 1.0)
RATE_LADDER = (0.25, 0.5, 1.0, 2.0, 4.0)
MS = 1_000_000
KEYS = {"max_faults", "kinds", "targets", "messages", "effects", "latency", "skew", "from", "quiet", "shortest",
        "longest", "counts", "rate", "damage"}


@dataclass(frozen=True)
class Space:
    """The bounds of one exploration. Times are nanoseconds since the run began."""

    max_faults: int
    kinds: tuple[str, ...]
    targets: tuple[str, ...]  # node-fault targets as written (expanded per node count when drawn)
    messages: tuple[str, ...]
    effects: dict[str, float]  # rule effect -> highest probability
    latency_ns: int
    skew_ns: int
    start_ns: int  # earliest fault start
    quiet_ns: int  # faults end this long before the run does
    shortest_ns: int
    longest_ns: int
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)  # group -> (fewest, most)
    rate: tuple[float, float] = (1.0, 1.0)
    damage: tuple[str, ...] = ()  # the damage kinds of drawn corrupt rules; () = the rule's default

    def last_end_ns(self, duration_ns: int) -> int:
        """No fault acts after this."""
        return duration_ns - self.quiet_ns

    def probabilities(self, effect: str) -> list[float]:
        bound = self.effects[effect]
        out = [p for p in PROBABILITY_LADDER if p <= bound]
        return out if bound in out else out + [bound]

    def rates(self) -> list[float]:
        lo, hi = self.rate
        out = [r for r in RATE_LADDER if lo <= r <= hi]
        return sorted(set(out) | {lo, hi}) if lo != hi else [lo]


def space_of(scenario: Scenario, locs: Locations | None = None, capabilities: frozenset[str] | None = None) -> Space:
    """The space of a scenario: its ``explore:`` section over the defaults. ``capabilities``
    (a runtime's, e.g. live) leaves out the fault kinds it cannot carry out. Errors name the
    file, line and field (`harness.scenario.ScenarioError`)."""
    raw = scenario.raw.get(SECTION) or {}
    v = Validator(scenario.raw, locs or Locations(scenario.path))
    p: tuple[Any, ...] = (SECTION,)
    raw = v.mapping(raw, p, "explore")
    v.known(raw, p, KEYS)
    pkg = package(scenario.protocol)
    duration = scenario.duration_ns

    kinds = tuple(v.get(raw, p, "kinds", _names("fault kind", (*NODE_KINDS, RULE)), DEFAULT_KINDS))
    if capabilities is not None:
        kinds = tuple(k for k in kinds if _can(k, capabilities))
    targets = tuple(v.get(raw, p, "targets", _strings("target"), _default_targets(scenario, pkg.targets)))
    for i, t in enumerate(targets):
        try:
            scenario.targets.check(t)
        except ValueError as e:
            raise v.fail(p + ("targets", i), str(e)) from None
    table = pkg.tables[scenario.dialect]
    known_messages = [m.name for m in table.messages]
    messages = tuple(v.get(raw, p, "messages", _names("message", known_messages), known_messages))
    effects = v.get(raw, p, "effects", _effects, dict(DEFAULT_EFFECTS))
    if RULE in kinds and not effects:
        raise v.fail(p + ("effects",), "rules are in 'kinds' but no effect is allowed")

    quiet = v.get(raw, p, "quiet", as_duration, duration // 3)
    start = v.get(raw, p, "from", as_duration, 0)
    shortest = v.get(raw, p, "shortest", as_duration, 50 * MS)
    longest = v.get(raw, p, "longest", as_duration, max(shortest, min(1000 * MS, duration // 6)))
    if longest < shortest:
        raise v.fail(p + ("longest",), "must not be shorter than 'shortest'")
    if start + shortest > duration - quiet:
        raise v.fail(p + ("quiet",), f"leaves no room for a fault: faults start at {start / 1e9:g}s or later, "
                                     f"last at least {shortest / 1e9:g}s and end {quiet / 1e9:g}s before the end "
                                     f"({duration / 1e9:g}s)")
    counts = _counts(v, raw, p, scenario)
    rate = v.get(raw, p, "rate", _rate, (1.0, 1.0))
    damage = tuple(v.get(raw, p, "damage", _names("damage", KNOWN_HOWS), []))
    return Space(
        max_faults=v.get(raw, p, "max_faults", _count, 3), kinds=kinds, targets=targets, messages=messages,
        effects=effects, latency_ns=v.get(raw, p, "latency", as_duration, 50 * MS),
        skew_ns=v.get(raw, p, "skew", as_duration, 100 * MS), start_ns=start, quiet_ns=quiet,
        shortest_ns=shortest, longest_ns=longest, counts=counts, rate=rate, damage=damage,
    )


def _can(kind: str, capabilities: frozenset[str]) -> bool:
    if kind == RULE:
        return "rules" in capabilities
    return kind in capabilities


def _default_targets(scenario: Scenario, protocol_targets: dict[str, str]) -> list[str]:
    """Every group, and the protocol's own targets (``leader``), as node-fault targets; a group
    also stands for each of its nodes when a fault is drawn (see `strategies`)."""
    return list(scenario.groups) + [t for t in protocol_targets if t not in scenario.groups]


def _strings(what: str) -> Any:
    def parse(value: Any) -> list[str]:
        if not isinstance(value, list) or not value or not all(isinstance(x, str) and x for x in value):
            raise ValueError(f"expected a non-empty list of {what}s")
        return list(dict.fromkeys(value))

    return parse


def _names(what: str, known: list[str] | tuple[str, ...]) -> Any:
    strings = _strings(what)

    def parse(value: Any) -> list[str]:
        out = strings(value)
        for x in out:
            if x not in known:
                raise ValueError(f"no {what} {x!r} (known: {', '.join(known)})")
        return out

    return parse


def _effects(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of rule effects to their highest probability, e.g. "
                         f"{{drop: 5%, duplicate: 10%}}, got {value!r}")
    out = {}
    for key, p in value.items():
        if key not in EFFECTS:
            raise ValueError(f"no rule effect {key!r} (effects: {', '.join(EFFECTS)})")
        prob = parse_probability(p)
        if prob <= 0:
            raise ValueError(f"{key}: a highest probability of 0 leaves the effect out; remove it instead")
        out[str(key)] = prob
    return out


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value == 0:
        return 0
    return as_positive_int(value)


def _rate(value: Any) -> tuple[float, float]:
    if not (isinstance(value, list) and len(value) == 2):
        raise ValueError(f"expected [lowest, highest] factors of the written rate, e.g. [50%, 200%], got {value!r}")
    lo, hi = (_factor(x) for x in value)
    if hi < lo:
        raise ValueError("the highest factor is below the lowest")
    return lo, hi


def _factor(value: Any) -> float:
    if isinstance(value, str) and value.strip().endswith("%"):
        f = float(value.strip()[:-1]) / 100
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        f = float(value)
    else:
        raise ValueError(f"not a factor: {value!r} (use e.g. 50% or 2)")
    if f <= 0:
        raise ValueError(f"a rate factor must be positive, got {value!r}")
    return f


def _counts(v: Validator, raw: dict[str, Any], p: tuple[Any, ...], scenario: Scenario) -> dict[str, tuple[int, int]]:
    given = v.mapping(raw.get("counts", {}) or {}, p + ("counts",), "counts")
    out = {}
    for name, bounds in given.items():
        where = p + ("counts", name)
        group = scenario.groups.get(name)
        if group is None:
            raise v.fail(where, f"no group named {name!r} (groups: {', '.join(scenario.groups)})")
        if group.count is None:
            raise v.fail(where, f"group {name!r} is one node (no count); give it a count to vary it")
        if not (isinstance(bounds, list) and len(bounds) == 2):
            raise v.fail(where, "expected [fewest, most]")
        try:
            lo, hi = (as_positive_int(b) for b in bounds)
        except ValueError as e:
            raise v.fail(where, str(e)) from None
        if hi < lo:
            raise v.fail(where, "most is below fewest")
        out[name] = (lo, hi)
    return out

