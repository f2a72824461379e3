"""Message rules: per-message network faults, ordered, first match wins.

Ground floor: this module imports nothing of the simulator, so the live ZMTP proxy can apply
the same rules to real traffic. The caller hands in the random generator (the simulator gives
each link its own seeded one), which keeps decisions reproducible.

A rule has a match (source node, destination node, message type, socket, endpoint, direction:
all globs) and an effect:

    Pass()                        let the message through untouched
    Drop()                        lose it
    Delay(latency)                add extra latency (FIFO holds: later messages queue behind it)
    Duplicate(copies=1)           deliver ``copies`` extra copies right behind the original
    Reorder(window, behind_next)  take it out of FIFO order: release it behind the next message
                                  on the same connection, or after ``window`` at the latest

and a probability (the effect applies with that probability, else the message passes; a
matched rule always ends the search, so rules never stack).

Directions are relative to the connection: ``to_binder`` is from the connecting socket to the
bound one, ``to_connecter`` the other way, ``any`` both.

Distributions and durations are parsed here too (``"5ms"``, ``"uniform(1ms, 5ms)"``,
``("normal", mean_ns, sd_ns)``) because both rules and the simulator's latency model use them.
"""

from __future__ import annotations

import fnmatch
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# ---- durations ---------------------------------------------------------------------------------
#
# One rule: a duration written in a file or on a command line carries its unit ("250ms", "2s",
# "40us", "1.5s"); a bare number is refused (only 0 may go without one). Inside Python a
# duration is an int of nanoseconds: ``duration_ns`` takes those, and text through
# ``parse_duration``.

_UNITS: dict[str, int] = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)?\s*$")
DURATION_EXAMPLES = "250ms, 2s, 40us, 1.5s"


def parse_duration(value: str | int | float) -> int:
    """Nanoseconds from a duration as written in a file or on a command line: a number and a
    unit (``"250ms"``, ``"2s"``, ``"40us"``, ``"1.5s"``, ``"-50ms"``). A bare number is an error
    that says to give a unit — except 0, which means the same in every unit."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r} (use e.g. {DURATION_EXAMPLES})")
    if isinstance(value, (int, float)):
        if value == 0:
            return 0
        raise ValueError(_bare(value))
    if isinstance(value, str):
        m = _DURATION_RE.match(value)
        if m:
            number, unit = m.group(1), m.group(2)
            if unit is None:
                if float(number) == 0:
                    return 0
                raise ValueError(_bare(number))
            return int(round(float(number) * _UNITS[unit]))
    raise ValueError(f"not a duration: {value!r} (use e.g. {DURATION_EXAMPLES})")


def _bare(number: int | float | str) -> str:
    return f"the duration {number} has no unit; give a unit, e.g. {number}ms or {number}s"


def duration_ns(value: int | float | str) -> int:
    """For Python callers: an int (or float) is already nanoseconds; text goes through
    ``parse_duration`` and so needs its unit."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(round(value))
    return parse_duration(value)


def parse_probability(value: float | int | str) -> float:
    """A probability from 0.25, 1 or ``"25%"``."""
    if isinstance(value, str):
        text = value.strip()
        p = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        p = float(value)
    else:
        raise ValueError(f"not a probability: {value!r}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability {value!r} is outside [0, 1]")
    return p


# ---- distributions -------------------------------------------------------------------------------


class Distribution:
    """A seeded-sampling latency distribution over integer nanoseconds.

    Kinds: ``fixed(v)``, ``uniform(lo, hi)``, ``normal(mean, sd)`` clipped at 0,
    ``exponential(mean[, offset])``. ``sample(rng)`` always returns a non-negative int; the
    per-kind sampler is bound once at construction so sampling does not branch on the kind.
    """

    __slots__ = ("kind", "params", "sample")

    KINDS = ("fixed", "uniform", "normal", "exponential")

    def __init__(self, kind: str, *params: int | float) -> None:
        self.kind = kind
        self.params: tuple[int, ...] = tuple(int(round(p)) for p in params)
        self.sample: Callable[[random.Random], int]
        p = self.params
        if kind == "fixed":
            _arity(kind, p, 1, 1)
            value = max(0, p[0])
            self.sample = lambda rng: value
        elif kind == "uniform":
            _arity(kind, p, 2, 2)
            lo, hi = p
            if hi < lo or lo < 0:
                raise ValueError(f"uniform({lo}, {hi}): need 0 <= lo <= hi")
            span = hi - lo
            self.sample = lambda rng: lo + int(rng.random() * span)
        elif kind == "normal":
            _arity(kind, p, 2, 2)
            mean, sd = p
            if sd < 0:
                raise ValueError(f"normal({mean}, {sd}): sd must be >= 0")
            self.sample = lambda rng: max(0, int(rng.gauss(mean, sd)))
        elif kind == "exponential":
            _arity(kind, p, 1, 2)
            mean = p[0]
            offset = p[1] if len(p) > 1 else 0
            if mean <= 0 or offset < 0:
                raise ValueError(f"exponential({mean}, {offset}): need mean > 0, offset >= 0")
            rate = 1.0 / mean
            self.sample = lambda rng: offset + int(rng.expovariate(rate))
        else:
            raise ValueError(f"unknown distribution {kind!r}; use one of {', '.join(self.KINDS)}")

    @classmethod
    def parse(cls, spec: DistSpec) -> Distribution:
        """For Python callers: from a Distribution, an int (fixed ns), a duration string (fixed),
        a tuple ``("uniform", lo, hi)`` (ints are ns, strings need units) or a string
        ``"uniform(200us, 800us)"``. Values from files go through ``from_yaml``."""
        if isinstance(spec, Distribution):
            return spec
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return cls("fixed", spec)
        if isinstance(spec, (tuple, list)) and spec and isinstance(spec[0], str):
            return cls(spec[0], *(duration_ns(v) for v in spec[1:]))
        if isinstance(spec, str):
            m = re.match(r"^\s*([a-z]+)\s*\((.*)\)\s*$", spec)
            if m:
                args = [a for a in (x.strip() for x in m.group(2).split(",")) if a]
                return cls(m.group(1), *(parse_duration(a) for a in args))
            return cls("fixed", parse_duration(spec))
        raise ValueError(
            f"not a distribution: {spec!r} (use e.g. 500000, '2ms', ('uniform', lo, hi), "
            "'normal(1ms, 200us)', 'exponential(1ms)')"
        )

    @classmethod
    def from_yaml(cls, value: Any) -> Distribution:
        """A distribution as written in a file: ``2ms``, ``fixed(2ms)``, ``uniform(1ms, 5ms)``,
        ``normal(2ms, 500us)``, ``exponential(1ms)`` or ``[uniform, 1ms, 5ms]``; every duration in
        it carries its unit (a bare 0 is allowed)."""
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, list) and value and isinstance(value[0], str):
            return cls(value[0], *(parse_duration(v) for v in value[1:]))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls("fixed", parse_duration(value))
        raise ValueError(f"not a distribution: {value!r} (use e.g. 2ms, uniform(1ms, 5ms), normal(2ms, 500us), "
                         "exponential(1ms))")

    def mean(self) -> float:
        p = self.params
        if self.kind == "fixed":
            return float(p[0])
        if self.kind == "uniform":
            return (p[0] + p[1]) / 2.0
        if self.kind == "normal":
            return float(p[0])  # ignoring the clip at 0
        return float(p[0] + (p[1] if len(p) > 1 else 0))

    def __repr__(self) -> str:
        return f"{self.kind}({', '.join(str(v) for v in self.params)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Distribution) and (self.kind, self.params) == (other.kind, other.params)

    def __hash__(self) -> int:
        return hash((self.kind, self.params))


DistSpec = Distribution | int | float | str | tuple[Any, ...] | list[Any]


def _arity(kind: str, params: tuple[int, ...], lo: int, hi: int) -> None:
    if not lo <= len(params) <= hi:
        want = str(lo) if lo == hi else f"{lo}-{hi}"
        raise ValueError(f"{kind} takes {want} parameter(s), got {len(params)}: {params}")


# ---- effects -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pass:
    name = "pass"


@dataclass(frozen=True)
class Drop:
    name = "drop"


@dataclass(frozen=True)
class Delay:
    latency: Distribution
    name = "delay"

    def __init__(self, latency: DistSpec) -> None:
        object.__setattr__(self, "latency", Distribution.parse(latency))


@dataclass(frozen=True)
class Duplicate:
    copies: int = 1  # extra copies: the message arrives 1 + copies times
    name = "duplicate"

    def __post_init__(self) -> None:
        if self.copies < 1:
            raise ValueError(f"duplicate needs copies >= 1, got {self.copies}")


@dataclass(frozen=True)
class Reorder:
    window: Distribution  # latest release, after the normal latency
    behind_next: bool = True  # release right behind the next message on the same connection
    name = "reorder"

    def __init__(self, window: DistSpec = 1_000_000, behind_next: bool = True) -> None:
        object.__setattr__(self, "window", Distribution.parse(window))
        object.__setattr__(self, "behind_next", behind_next)


Effect = Pass | Drop | Delay | Duplicate | Reorder

DIRECTIONS = ("any", "to_binder", "to_connecter")


@dataclass(frozen=True)
class Match:
    """Which messages a rule applies to. Every field is a glob (``fnmatch``, case-sensitive)."""

    src: str = "*"  # sending node
    dst: str = "*"  # receiving node
    msg_type: str = "*"  # Send.msg_type ("" when the node gave none)
    socket: str = "*"  # name of the sending socket
    endpoint: str = "*"  # endpoint of the connection ("tcp://broker:5555")
    direction: str = "any"

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} is not one of {', '.join(DIRECTIONS)}")


@dataclass(frozen=True)
class Rule:
    match: Match
    effect: Effect
    probability: float = 1.0
    name: str = ""  # label in the trace; RuleSet names unnamed rules "rule-<index>"

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"rule {self.name or '?'}: probability {self.probability} outside [0, 1]")

    @classmethod
    def from_yaml(cls, item: Any, where: str = "fault", *, check_node: Callable[[str], None] | None = None) -> Rule:
        """A message rule as a fault item: ``{rule: {message: REQUEST, drop: 5%}}``; a rule
        applies for the whole run. ``check_node`` validates node names (not globs) in
        ``from``/``to``. Errors are `FaultSpecError`s naming the field."""
        return _rule_fault_from_yaml(item, where, check_node)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one message. ``label`` ("drop:rule-2") goes into the trace's fault column."""

    effect: str  # pass | drop | delay | duplicate | reorder
    label: str = ""
    delay_ns: int = 0  # delay: extra latency
    copies: int = 0  # duplicate: extra copies
    hold_ns: int = 0  # reorder: latest release, after the normal latency
    behind_next: bool = False  # reorder: release behind the next message


PASS = Verdict("pass")


def _glob(pattern: str) -> Callable[[str], bool]:
    if pattern == "*":
        return lambda s: True
    if not any(c in pattern for c in "*?["):
        return pattern.__eq__
    regex = re.compile(fnmatch.translate(pattern))
    return lambda s: regex.match(s) is not None


class RuleSet:
    """Ordered message rules; ``decide`` returns the verdict of the first matching rule.

    Which rule matches a (src, dst, msg_type, socket, endpoint, direction) combination is
    memoised: the answer is a pure function of the key, so caching changes no decision.
    """

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules: list[Rule] = []
        for i, rule in enumerate(rules):
            if not rule.name:
                rule = Rule(rule.match, rule.effect, rule.probability, f"rule-{i}")
            self.rules.append(rule)
        self._matchers = [
            (
                _glob(r.match.src), _glob(r.match.dst), _glob(r.match.msg_type),
                _glob(r.match.socket), _glob(r.match.endpoint), r.match.direction,
            )
            for r in self.rules
        ]
        self._cache: dict[tuple[str, str, str, str, str, str], int] = {}

    def __len__(self) -> int:
        return len(self.rules)

    def match(self, src: str, dst: str, msg_type: str, socket: str, direction: str,
              endpoint: str = "") -> Rule | None:
        """The first rule whose match covers the message, or None."""
        key = (src, dst, msg_type, socket, endpoint, direction)
        index = self._cache.get(key)
        if index is None:
            index = -1
            for i, (m_src, m_dst, m_type, m_sock, m_ep, m_dir) in enumerate(self._matchers):
                if (m_src(src) and m_dst(dst) and m_type(msg_type) and m_sock(socket)
                        and m_ep(endpoint) and (m_dir == "any" or m_dir == direction)):
                    index = i
                    break
            self._cache[key] = index
        return self.rules[index] if index >= 0 else None

    def decide(self, src: str, dst: str, msg_type: str, socket: str, direction: str,
               rng: random.Random, endpoint: str = "") -> Verdict:
        """The verdict for one message. Draws from ``rng`` only for a matched rule whose
        probability is below 1 and for sampled delays/windows."""
        rule = self.match(src, dst, msg_type, socket, direction, endpoint)
        if rule is None:
            return PASS
        if rule.probability < 1.0 and rng.random() >= rule.probability:
            return PASS
        effect = rule.effect
        label = f"{effect.name}:{rule.name}"
        if isinstance(effect, Drop):
            return Verdict("drop", label)
        if isinstance(effect, Delay):
            return Verdict("delay", label, delay_ns=effect.latency.sample(rng))
        if isinstance(effect, Duplicate):
            return Verdict("duplicate", label, copies=effect.copies)
        if isinstance(effect, Reorder):
            return Verdict("reorder", label, hold_ns=effect.window.sample(rng),
                           behind_next=effect.behind_next)
        return PASS

    @classmethod
    def from_dicts(cls, items: Sequence[Mapping[str, Any]]) -> RuleSet:
        return cls(rule_from_dict(item, i) for i, item in enumerate(items))


# ---- building rules from plain data (YAML) ---------------------------------------------------


class FaultSpecError(ValueError):
    """A bad fault or rule in a file: ``path`` is the offending key inside the item (a tuple of
    keys and indexes, empty for the item itself), ``reason`` what is wrong with it. A loader turns
    it into an error naming the file, the line and the field."""

    def __init__(self, where: str, path: tuple[Any, ...], reason: str) -> None:
        self.where = where
        self.path = tuple(path)
        self.reason = reason
        field = _format_path(self.path)
        super().__init__(f"{where}: {field + ': ' if field else ''}{reason}")


def _format_path(path: tuple[Any, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + str(p)
    return out


def did_you_mean(word: str, options: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``options``, or ``""``."""
    import difflib

    m = difflib.get_close_matches(word, list(options), n=1)
    return f"; did you mean '{m[0]}'?" if m else ""


_MATCH_KEYS: dict[str, str] = {
    "src": "src", "from": "src", "dst": "dst", "to": "dst", "msg_type": "msg_type",
    "message": "msg_type", "type": "msg_type", "socket": "socket", "endpoint": "endpoint",
    "direction": "direction",
}
_NODE_KEYS = ("src", "from", "dst", "to")
_EFFECT_KEYS = ("pass", "drop", "delay", "duplicate", "reorder")
_RULE_KEYS = sorted(set(_MATCH_KEYS) | set(_EFFECT_KEYS) | {"match", "probability", "name"})


def rule_from_dict(item: Mapping[str, Any], index: int = 0) -> Rule:
    """Build a rule from plain data (as in a file), for example::

        {message: AppendEntries, from: "peer*", direction: any, drop: 5%}
        {to: broker, delay: "uniform(1ms, 20ms)", probability: 0.5}
        {message: RECORD, duplicate: 2}
        {reorder: 10ms}                  # or {reorder: {window: 10ms, behind_next: false}}

    For ``drop``, ``duplicate`` and ``reorder`` a percentage given as the effect's value is the
    probability (``drop: 5%``); ``drop: true`` always drops. Durations carry their unit.
    Errors (``FaultSpecError``) name the rule and the key.
    """
    return _rule_from(item, f"rule {index}", (), None)


def _rule_from(item: Any, where: str, at: tuple[Any, ...], check_node: Callable[[str], None] | None) -> Rule:
    """The rule in ``item``; ``at`` is where ``item`` sits in the fault (for error paths), and
    ``check_node`` (if given) validates a node name that is not a glob."""
    if not isinstance(item, Mapping):
        raise FaultSpecError(where, at, f"a rule must be a mapping, got {type(item).__name__}")
    match_args: dict[str, str] = {}
    effect: Effect | None = None
    probability: float | None = None
    name = ""

    def node(key: tuple[Any, ...], value: str) -> None:
        if check_node is not None and not any(c in value for c in "*?["):
            try:
                check_node(value)
            except ValueError as exc:
                raise FaultSpecError(where, at + key, str(exc)) from None

    for key, value in item.items():
        if key in _MATCH_KEYS:
            if not isinstance(value, str):
                raise FaultSpecError(where, at + (key,), f"{key!r} must be a string (a glob), got {value!r}")
            if key in _NODE_KEYS:
                node((key,), value)
            match_args[_MATCH_KEYS[key]] = value
        elif key == "match":
            if not isinstance(value, Mapping):
                raise FaultSpecError(where, at + (key,), "'match' must be a mapping")
            for mk, mv in value.items():
                if mk not in _MATCH_KEYS:
                    raise FaultSpecError(where, at + (key, mk), f"unknown match key {mk!r}"
                                         f"{did_you_mean(str(mk), _MATCH_KEYS)}")
                if mk in _NODE_KEYS and isinstance(mv, str):
                    node((key, mk), mv)
                match_args[_MATCH_KEYS[mk]] = str(mv)
        elif key == "probability":
            probability = _field(where, at + (key,), parse_probability, value)
        elif key == "name":
            name = str(value)
        elif key in _EFFECT_KEYS:
            if effect is not None:
                raise FaultSpecError(where, at + (key,), f"more than one effect ({effect.name} and {key})")
            effect, implied = _effect_from(where, at + (key,), key, value)
            if implied is not None:
                probability = implied if probability is None else probability
        else:
            raise FaultSpecError(where, at + (key,), f"unknown key {key!r}{did_you_mean(str(key), _RULE_KEYS)} "
                                                     f"(known: {', '.join(_RULE_KEYS)})")
    if effect is None:
        raise FaultSpecError(where, at, f"no effect; give one of {', '.join(_EFFECT_KEYS)}")
    try:
        match = Match(**match_args)
    except ValueError as exc:
        raise FaultSpecError(where, at + ("direction",), str(exc)) from None
    return Rule(match, effect, 1.0 if probability is None else probability, name)


def _field(where: str, path: tuple[Any, ...], parse: Callable[[Any], Any], value: Any) -> Any:
    try:
        return parse(value)
    except ValueError as exc:
        raise FaultSpecError(where, path, str(exc)) from None


def _effect_from(where: str, path: tuple[Any, ...], key: str, value: Any) -> tuple[Effect, float | None]:
    """The effect for ``key: value`` and the probability the value implies (or None)."""
    if key == "pass":
        return Pass(), None
    if key == "drop":
        if value is True or value is None:
            return Drop(), None
        return Drop(), _field(where, path, parse_probability, value)
    if key == "delay":
        return Delay(_field(where, path, Distribution.from_yaml, value)), None
    if key == "duplicate":
        if isinstance(value, Mapping):
            copies = value.get("copies", 1)
            if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
                raise FaultSpecError(where, path + ("copies",), f"expected a copy count >= 1, got {copies!r}")
            p = value.get("probability")
            return Duplicate(copies), None if p is None else _field(where, path + ("probability",),
                                                                    parse_probability, p)
        if isinstance(value, str) and value.strip().endswith("%"):
            return Duplicate(1), _field(where, path, parse_probability, value)
        if value is True or value is None:
            return Duplicate(1), None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return Duplicate(value), None
        raise FaultSpecError(where, path, "expected a copy count >= 1, a percentage or a mapping")
    # reorder
    if isinstance(value, Mapping):
        window = Reorder().window
        if "window" in value:
            window = _field(where, path + ("window",), Distribution.from_yaml, value["window"])
        behind = value.get("behind_next", True)
        if not isinstance(behind, bool):
            raise FaultSpecError(where, path + ("behind_next",), f"expected true or false, got {behind!r}")
        return Reorder(window, behind), None
    if isinstance(value, str) and value.strip().endswith("%"):
        return Reorder(), _field(where, path, parse_probability, value)
    if value is True or value is None:
        return Reorder(), None
    return Reorder(_field(where, path, Distribution.from_yaml, value)), None


def _rule_fault_from_yaml(item: Any, where: str, check_node: Callable[[str], None] | None) -> Rule:
    if not isinstance(item, Mapping):
        raise FaultSpecError(where, (), f"a fault must be a mapping, got {type(item).__name__}")
    for key in item:
        if key != "rule":
            raise FaultSpecError(where, (key,), f"unknown field{did_you_mean(str(key), ['rule'])} "
                                                "(a rule fault has only 'rule'; a rule applies all the run)")
    return _rule_from(item["rule"], where, ("rule",), check_node)



__all__ = [
    "DIRECTIONS", "Delay", "DistSpec", "Distribution", "Drop", "Duplicate", "Effect", "Match",
    "FaultSpecError", "PASS", "Pass", "Reorder", "Rule", "RuleSet", "Verdict", "did_you_mean", "duration_ns",
    "parse_duration", "parse_probability", "rule_from_dict",
]
