"""Message rules: per-message network faults, ordered, first match wins.

Ground floor: this module imports nothing of the simulator, so the live ZMTP proxy can apply
the same rules to real traffic. The caller hands in the random generator (the simulator gives
each link its own seeded one), which keeps decisions reproducible.

A rule has a match (source node, destination node, message type, socket, endpoint, direction:
all globs; and optionally field values of the decoded message, globs on their text) and an
effect:

    Pass()                        let the message through untouched
    Drop()                        lose it
    Delay(latency)                add extra latency (FIFO holds: later messages queue behind it)
    Duplicate(copies=1)           deliver ``copies`` extra copies right behind the original
    Reorder(window, behind_next)  take it out of FIFO order: release it behind the next message
                                  on the same connection, or after ``window`` at the latest
    Corrupt(how)                  deliver it with its frames damaged (`fault_injection.damage`:
                                  one of truncate, flip, drop_frame, add_frame, garbage, drawn
                                  from the link's generator) so that it no longer decodes

and a probability (the effect applies with that probability, else the message passes; a
matched rule always ends the search, so rules never stack). ``nth`` picks messages by count
instead: the positions (1-based) among the messages the rule matched over the run (``nth: 3``,
the third; ``nth: 1-5``, the first five); the others pass. A `RuleSet` counts per run: a run
takes its own ``fresh()`` copy.

Directions are relative to the connection: ``to_binder`` is from the connecting socket to the
bound one, ``to_connecter`` the other way, ``any`` both.

Durations and distributions (``"5ms"``, ``"uniform(1ms, 5ms)"``) are parsed in
`fault_injection.distributions` and re-exported here.
"""

from __future__ import annotations

import fnmatch
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fault_injection.damage import HOWS, KNOWN_HOWS, check_hows
from fault_injection.distributions import (
    DURATION_EXAMPLES, Distribution, DistSpec, duration_ns, parse_duration, parse_probability,
)

# ---- effects -------------------------------------------------------------------------------------

# The effects after which a message may not arrive in time, or at all (a check of what must
# arrive by the end of a run allows for them)
LOSSY_EFFECTS = frozenset({"drop", "delay", "reorder", "corrupt"})


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


@dataclass(frozen=True)
class Corrupt:
    how: tuple[str, ...] = HOWS  # the kinds of damage drawn from
    name = "corrupt"

    def __post_init__(self) -> None:
        object.__setattr__(self, "how", check_hows(self.how))


Effect = Pass | Drop | Delay | Duplicate | Reorder | Corrupt

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
    fields: tuple[tuple[str, str], ...] = ()  # (field name, glob on its decoded value as text)

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} is not one of {', '.join(DIRECTIONS)}")
        object.__setattr__(self, "fields", tuple((str(k), str(v)) for k, v in dict(self.fields).items()))


@dataclass(frozen=True)
class Rule:
    match: Match
    effect: Effect
    probability: float = 1.0
    name: str = ""  # label in the trace; RuleSet names unnamed rules "rule-<index>"
    nth: frozenset[int] | None = None  # positions (1-based) among the messages the rule matched

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"rule {self.name or '?'}: probability {self.probability} outside [0, 1]")
        if self.nth is not None:
            object.__setattr__(self, "nth", frozenset(self.nth))
            if not self.nth or min(self.nth) < 1:
                raise ValueError(f"rule {self.name or '?'}: nth counts from 1, got {sorted(self.nth)}")

    @classmethod
    def from_yaml(cls, item: Any, where: str = "fault", *, check_node: Callable[[str], None] | None = None) -> Rule:
        """A message rule as a fault item: ``{rule: {message: REQUEST, drop: 5%}}``; a rule
        applies for the whole run. ``check_node`` validates node names (not globs) in
        ``from``/``to``. Errors are `FaultSpecError`s naming the field."""
        return _rule_fault_from_yaml(item, where, check_node)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one message. ``label`` ("drop:rule-2") goes into the trace's fault column."""

    effect: str  # pass | drop | delay | duplicate | reorder | corrupt
    label: str = ""
    delay_ns: int = 0  # delay: extra latency
    copies: int = 0  # duplicate: extra copies
    hold_ns: int = 0  # reorder: latest release, after the normal latency
    behind_next: bool = False  # reorder: release behind the next message
    how: tuple[str, ...] = ()  # corrupt: the kinds of damage to draw from (`fault_injection.damage`)


PASS = Verdict("pass")


def _glob(pattern: str) -> Callable[[str], bool]:
    if pattern == "*":
        return lambda s: True
    if not any(c in pattern for c in "*?["):
        return pattern.__eq__
    regex = re.compile(fnmatch.translate(pattern))
    return lambda s: regex.match(s) is not None


def _type_glob(pattern: str) -> Callable[[str], bool]:
    """A message-type glob. Socket-internal messages (``zmq.subscribe``, ``zmq.unsubscribe``,
    ``zmq.welcome``) match only a glob that names them (``zmq.*``, ``zmq*``): ZeroMQ carries them on the
    connection's own stream and never loses one while it stands, so a rule on "every message"
    that dropped a subscription would leave a SUB deaf for good, a state no real network makes."""
    matches = _glob(pattern)
    if pattern.startswith("zmq"):
        return matches
    return lambda s: not s.startswith("zmq.") and matches(s)


FieldsOf = Callable[[], "Mapping[str, Any] | None"]  # the decoded fields of the message (None: undecodable)


def field_text(value: Any) -> list[str]:
    """A decoded field value as the texts a field glob is matched against (each element of a
    list; bytes as UTF-8 with escapes)."""
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in field_text(v)]
    if isinstance(value, (bytes, bytearray)):
        return [bytes(value).decode("utf-8", "backslashreplace")]
    return [str(value)]


class RuleSet:
    """Ordered message rules; ``decide`` returns the verdict of the first matching rule.

    Which rules a (src, dst, msg_type, socket, endpoint, direction) combination can match is
    memoised: the answer is a pure function of the key, so caching changes no decision. Field
    conditions are checked per message, on fields decoded only when a rule needs them.
    """

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules: list[Rule] = []
        for i, rule in enumerate(rules):
            if not rule.name:
                rule = Rule(rule.match, rule.effect, rule.probability, f"rule-{i}", rule.nth)
            self.rules.append(rule)
        self._matchers = [
            (
                _glob(r.match.src), _glob(r.match.dst), _type_glob(r.match.msg_type),
                _glob(r.match.socket), _glob(r.match.endpoint), r.match.direction,
            )
            for r in self.rules
        ]
        self._field_matchers = [[(name, _glob(pattern)) for name, pattern in r.match.fields] for r in self.rules]
        self.needs_fields = any(self._field_matchers)
        self._cache: dict[tuple[str, str, str, str, str, str], Any] = {}
        self._counts = [0] * len(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def fresh(self) -> RuleSet:
        """The same rules with their counts (``nth``) at zero: one per run."""
        return RuleSet(self.rules)

    def _candidates(self, key: tuple[str, str, str, str, str, str]) -> list[int]:
        src, dst, msg_type, socket, endpoint, direction = key
        return [i for i, (m_src, m_dst, m_type, m_sock, m_ep, m_dir) in enumerate(self._matchers)
                if m_src(src) and m_dst(dst) and m_type(msg_type) and m_sock(socket) and m_ep(endpoint)
                and (m_dir == "any" or m_dir == direction)]

    def _index(self, src: str, dst: str, msg_type: str, socket: str, direction: str, endpoint: str,
               fields: FieldsOf | None) -> int:
        key = (src, dst, msg_type, socket, endpoint, direction)
        if not self.needs_fields:
            index = self._cache.get(key)
            if index is None:
                found = self._candidates(key)
                index = self._cache[key] = found[0] if found else -1
            return index
        candidates = self._cache.get(key)
        if candidates is None:
            candidates = self._cache[key] = self._candidates(key)
        decoded: Mapping[str, Any] | None = None
        looked = False
        for i in candidates:
            conditions = self._field_matchers[i]
            if not conditions:
                return i
            if not looked:
                looked = True
                decoded = fields() if fields is not None else None
            if decoded is not None and all(name in decoded and any(m(t) for t in field_text(decoded[name]))
                                           for name, m in conditions):
                return i
        return -1

    def match(self, src: str, dst: str, msg_type: str, socket: str, direction: str,
              endpoint: str = "", fields: FieldsOf | None = None) -> Rule | None:
        """The first rule whose match covers the message, or None. ``fields`` gives the decoded
        fields when a rule has field conditions (without it such rules never match)."""
        index = self._index(src, dst, msg_type, socket, direction, endpoint, fields)
        return self.rules[index] if index >= 0 else None

    def may_match(self, src: str, dst: str, socket: str, direction: str, endpoint: str = "") -> bool:
        """Whether some rule could match a message on this path, whatever its type (a proxy
        relays a path no rule can touch without looking at its messages)."""
        for m_src, m_dst, _, m_sock, m_ep, m_dir in self._matchers:
            if (m_src(src) and m_dst(dst) and m_sock(socket) and m_ep(endpoint)
                    and (m_dir == "any" or m_dir == direction)):
                return True
        return False

    def decide(self, src: str, dst: str, msg_type: str, socket: str, direction: str,
               rng: random.Random, endpoint: str = "", fields: FieldsOf | None = None) -> Verdict:
        """The verdict for one message. Draws from ``rng`` only for a matched rule whose
        probability is below 1 and for sampled delays/windows."""
        index = self._index(src, dst, msg_type, socket, direction, endpoint, fields)
        if index < 0:
            return PASS
        rule = self.rules[index]
        if rule.nth is not None:
            self._counts[index] += 1
            if self._counts[index] not in rule.nth:
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
        if isinstance(effect, Corrupt):
            return Verdict("corrupt", label, how=effect.how)
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
_EFFECT_KEYS = ("pass", "drop", "delay", "duplicate", "reorder", "corrupt")
_RULE_KEYS = sorted(set(_MATCH_KEYS) | set(_EFFECT_KEYS) | {"match", "probability", "name", "nth", "fields"})


def parse_nth(value: Any) -> frozenset[int]:
    """Message positions from ``3``, ``[1, 4]`` or ``"2-5"`` (1-based, inclusive)."""
    if isinstance(value, bool):
        raise ValueError(f"not a position: {value!r}")
    if isinstance(value, int):
        out = {value}
    elif isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        out = set(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*\d+\s*-\s*\d+\s*", value):
        lo, hi = (int(x) for x in value.split("-"))
        if hi < lo or hi - lo > 1_000_000:
            raise ValueError(f"position range {value!r} runs backwards or is too long")
        out = set(range(lo, hi + 1))
    else:
        raise ValueError(f"expected a position (3), a list of them ([1, 4]) or a range ('2-5'), got {value!r}")
    if min(out) < 1:
        raise ValueError(f"positions count from 1, got {value!r}")
    return frozenset(out)


def rule_from_dict(item: Mapping[str, Any], index: int = 0) -> Rule:
    """Build a rule from plain data (as in a file), for example::

        {message: AppendEntries, from: "peer*", direction: any, drop: 5%}
        {to: broker, delay: "uniform(1ms, 20ms)", probability: 0.5}
        {message: RECORD, duplicate: 2}
        {reorder: 10ms}                  # or {reorder: {window: 10ms, behind_next: false}}
        {message: PING, from: "workers.1", nth: 3, drop: true}     # only the third
        {message: REQUEST, fields: {service: "echo*"}, delay: 5ms}  # by a decoded field
        {message: PUBLISH, corrupt: 5%}  # or corrupt: truncate / [flip, garbage] /
                                         #    {how: [truncate, add_frame], probability: 5%}

    For ``drop``, ``duplicate``, ``reorder`` and ``corrupt`` a percentage given as the effect's value is the
    probability (``drop: 5%``); ``drop: true`` always drops. Durations carry their unit.
    Errors (``FaultSpecError``) name the rule and the key.
    """
    return _rule_from(item, f"rule {index}", (), None)


def _rule_from(item: Any, where: str, at: tuple[Any, ...], check_node: Callable[[str], None] | None) -> Rule:
    """The rule in ``item``; ``at`` is where ``item`` sits in the fault (for error paths), and
    ``check_node`` (if given) validates a node name that is not a glob."""
    if not isinstance(item, Mapping):
        raise FaultSpecError(where, at, f"a rule must be a mapping, got {type(item).__name__}")
    match_args: dict[str, Any] = {}
    effect: Effect | None = None
    probability: float | None = None
    name = ""
    nth: frozenset[int] | None = None

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
        elif key == "nth":
            nth = _field(where, at + (key,), parse_nth, value)
        elif key == "fields":
            if not isinstance(value, Mapping) or not value:
                raise FaultSpecError(where, at + (key,), "'fields' maps field names to globs of their values, "
                                                         "e.g. {service: echo}")
            match_args["fields"] = tuple((str(k), "" if v is None else str(v)) for k, v in value.items())
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
    return Rule(match, effect, 1.0 if probability is None else probability, name, nth)


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
    if key == "corrupt":
        return _corrupt_from(where, path, value)
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


def _corrupt_from(where: str, path: tuple[Any, ...], value: Any) -> tuple[Effect, float | None]:
    """``corrupt: true | 5% | truncate | [flip, garbage] | {how: ..., probability: 5%}``."""
    probability = None
    how: Any = None
    if isinstance(value, Mapping):
        for k in value:
            if k not in ("how", "probability"):
                raise FaultSpecError(where, path + (k,), f"unknown key {k!r}{did_you_mean(str(k), ['how', 'probability'])}"
                                                         " (corrupt takes how and probability)")
        how = value.get("how")
        if value.get("probability") is not None:
            probability = _field(where, path + ("probability",), parse_probability, value["probability"])
        at = path + ("how",)
    elif isinstance(value, str) and value.strip().endswith("%"):
        return Corrupt(), _field(where, path, parse_probability, value)
    elif value is True or value is None:
        return Corrupt(), None
    else:
        how, at = value, path
    if how is None:
        return Corrupt(), probability
    hows = [how] if isinstance(how, str) else how
    if not isinstance(hows, list) or not all(isinstance(h, str) for h in hows):
        raise FaultSpecError(where, at, f"expected a damage or a list of them ({', '.join(KNOWN_HOWS)}), got {how!r}")
    try:
        return Corrupt(tuple(hows)), probability
    except ValueError as exc:
        raise FaultSpecError(where, at, str(exc)) from None


def _rule_fault_from_yaml(item: Any, where: str, check_node: Callable[[str], None] | None) -> Rule:
    if not isinstance(item, Mapping):
        raise FaultSpecError(where, (), f"a fault must be a mapping, got {type(item).__name__}")
    for key in item:
        if key != "rule":
            raise FaultSpecError(where, (key,), f"unknown field{did_you_mean(str(key), ['rule'])} "
                                                "(a rule fault has only 'rule'; a rule applies all the run)")
    return _rule_from(item["rule"], where, ("rule",), check_node)



__all__ = [
    "Corrupt", "DIRECTIONS", "DURATION_EXAMPLES", "Delay", "DistSpec", "Distribution", "Drop", "Duplicate", "Effect", "Match",
    "FaultSpecError", "FieldsOf", "PASS", "Pass", "Reorder", "Rule", "RuleSet", "Verdict", "did_you_mean",
    "duration_ns", "field_text", "parse_duration", "parse_nth", "parse_probability", "rule_from_dict",
]
