"""A fault schedule over time: crashes, partitions, pauses, clock skew, slow links.

One schema, parsed once: each fault kind is a dataclass with a ``from_yaml`` that reads it as
written in a scenario file (every duration with its unit) and raises `FaultSpecError` naming
the field; `parse_fault` picks the kind by its key (``crash``, ``partition``, ``pause``,
``clock_skew``, ``slow_link``, or ``rule`` for a message rule).

Faults name **targets**, not nodes: a node, a group, a role, a glob, ``any``, ``random``, or a
protocol's own (``leader``). A target is resolved when its fault fires (``install`` takes the
resolver), so ``crash: leader`` crashes whoever leads at that moment; a target that names no
node then (no leader during an election) skips the fault with a trace row saying so.

``install`` puts a schedule onto any `harness.runtime.Runtime` — the simulator and the live
runtime alike; the nemesis is written once. All times are nanoseconds since the run began.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from fault_injection.rules import (
    Distribution, FaultSpecError, Rule, did_you_mean, parse_duration,
)
from harness.runtime import CLOCK, CRASH, PARTITION, PAUSE, RESTART, SLOW_LINK, Runtime

# (target expression) -> the nodes it names now; [] when none (the fault is skipped).
Resolve = Callable[[str], list[str]]
# Load-time check of a target expression: raises ValueError saying what is wrong.
CheckTarget = Callable[[str], None]

REST = "rest"  # in a partition: every node the other sides do not name


def _time(item: Mapping[str, Any], key: str, where: str, required: bool = True, default: int | None = None,
          signed: bool = False) -> int | None:
    if key not in item or item[key] is None:
        if required:
            raise FaultSpecError(where, (), f"missing required field '{key}'")
        return default
    try:
        ns = parse_duration(item[key])
    except ValueError as exc:
        raise FaultSpecError(where, (key,), str(exc)) from None
    if ns < 0 and not signed:
        raise FaultSpecError(where, (key,), f"must not be negative, got {item[key]!r}")
    return ns


def _known(item: Mapping[str, Any], where: str, allowed: set[str]) -> None:
    for key in item:
        if key not in allowed:
            raise FaultSpecError(where, (key,), f"unknown field{did_you_mean(str(key), allowed)} "
                                                f"(known: {', '.join(sorted(allowed))})")


def _target(value: Any, where: str, path: tuple[Any, ...], check: CheckTarget | None) -> str:
    if not isinstance(value, str) or not value:
        raise FaultSpecError(where, path, f"expected a target (a node, group, role, any, random, ...), got {value!r}")
    if check is not None:
        try:
            check(value)
        except ValueError as exc:
            raise FaultSpecError(where, path, str(exc)) from None
    return value


def _window(item: Mapping[str, Any], where: str) -> tuple[int, int | None]:
    start = _time(item, "from", where, required=False, default=0)
    end = _time(item, "until", where, required=False)
    assert start is not None
    if end is not None and end <= start:
        raise FaultSpecError(where, ("until",), "must be after 'from'")
    return start, end


def _flag(item: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = item.get(key, default)
    if not isinstance(value, bool):
        raise FaultSpecError(where, (key,), f"expected true or false, got {value!r}")
    return value


def _check_window(start: int, end: int | None, what: str) -> None:
    if start < 0:
        raise ValueError(f"{what}: start {start} is negative")
    if end is not None and end < start:
        raise ValueError(f"{what}: end {end} is before start {start}")


# ---- the fault kinds -----------------------------------------------------------------------


@dataclass(frozen=True)
class Crash:
    """Crash ``target`` at ``at``; restart the nodes it crashed ``restart_after`` later (None:
    they stay down)."""

    at: int
    target: str
    restart_after: int | None = None
    key: ClassVar[str] = "crash"

    @classmethod
    def from_yaml(cls, item: Mapping[str, Any], where: str, check: CheckTarget | None = None) -> Crash:
        _known(item, where, {"crash", "at", "restart_after"})
        at = _time(item, "at", where)
        after = _time(item, "restart_after", where, required=False)
        if after is not None and after <= 0:
            raise FaultSpecError(where, ("restart_after",), "must be positive")
        return cls(at, _target(item["crash"], where, ("crash",), check), after)  # type: ignore[arg-type]

    @property
    def capabilities(self) -> tuple[str, ...]:
        return (CRASH, RESTART) if self.restart_after is not None else (CRASH,)

    @property
    def start(self) -> int:
        return self.at

    @property
    def end(self) -> int | None:
        return None if self.restart_after is None else self.at + self.restart_after


@dataclass(frozen=True)
class Partition:
    """Cut the network between ``sides`` from ``start`` until ``end`` (None: never heals).

    Symmetric: nodes on different sides cannot talk. ``one_way``: only messages from
    sides[0] to sides[1] are cut. A side is a list of targets; ``rest`` names every node that
    the other sides do not."""

    start: int
    end: int | None
    sides: tuple[tuple[str, ...], ...]
    one_way: bool = False
    key: ClassVar[str] = "partition"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sides", tuple(tuple(g) for g in self.sides))
        if len(self.sides) < 2:
            raise ValueError(f"a partition needs at least two sides, got {self.sides}")
        if self.one_way and len(self.sides) != 2:
            raise ValueError("a one-way partition takes exactly two sides: from, to")
        if sum(REST in side for side in self.sides) > 1:
            raise ValueError("only one side may be 'rest'")
        _check_window(self.start, self.end, "partition")

    @classmethod
    def from_yaml(cls, item: Mapping[str, Any], where: str, check: CheckTarget | None = None) -> Partition:
        _known(item, where, {"partition", "from", "until", "one_way"})
        start, end = _window(item, where)
        sides_in = item["partition"]
        if not isinstance(sides_in, list) or len(sides_in) < 2:
            raise FaultSpecError(where, ("partition",), "a partition is two or more lists of nodes: [[a, b], [c]]")
        sides = []
        for j, side in enumerate(sides_in):
            side = side if isinstance(side, list) else [side]
            if not side:
                raise FaultSpecError(where, ("partition", j), "a side names at least one node")
            sides.append(tuple(t if t == REST else _target(t, where, ("partition", j, k), check)
                               for k, t in enumerate(side)))
        try:
            return cls(start, end, tuple(sides), _flag(item, "one_way", where, False))
        except ValueError as exc:
            raise FaultSpecError(where, ("partition",), str(exc)) from None

    @property
    def capabilities(self) -> tuple[str, ...]:
        return (PARTITION,)


@dataclass(frozen=True)
class Pause:
    """Stop ``target`` (SIGSTOP-like) from ``start`` until ``end`` (None: never resumes)."""

    start: int
    end: int | None
    target: str
    key: ClassVar[str] = "pause"

    def __post_init__(self) -> None:
        _check_window(self.start, self.end, "pause")

    @classmethod
    def from_yaml(cls, item: Mapping[str, Any], where: str, check: CheckTarget | None = None) -> Pause:
        _known(item, where, {"pause", "from", "until"})
        start, end = _window(item, where)
        return cls(start, end, _target(item["pause"], where, ("pause",), check))

    @property
    def capabilities(self) -> tuple[str, ...]:
        return (PAUSE,)


@dataclass(frozen=True)
class ClockSkew:
    """From ``at`` on, ``target`` reads ``virtual + offset + drift * virtual``."""

    at: int
    target: str
    offset: int
    drift: float = 0.0
    key: ClassVar[str] = "clock_skew"

    def __post_init__(self) -> None:
        if self.drift <= -1.0:
            raise ValueError(f"clock drift must be > -1 (the clock must move forward), got {self.drift}")

    @classmethod
    def from_yaml(cls, item: Mapping[str, Any], where: str, check: CheckTarget | None = None) -> ClockSkew:
        _known(item, where, {"clock_skew", "at", "offset", "drift"})
        at = _time(item, "at", where, required=False, default=0)
        offset = _time(item, "offset", where, required=False, default=0, signed=True)
        drift = item.get("drift", 0.0)
        if isinstance(drift, bool) or not isinstance(drift, (int, float)):
            raise FaultSpecError(where, ("drift",), f"expected a number (0.001 = 1 ms per second), got {drift!r}")
        try:
            return cls(at, _target(item["clock_skew"], where, ("clock_skew",), check), offset, float(drift))  # type: ignore[arg-type]
        except ValueError as exc:
            raise FaultSpecError(where, ("drift",), str(exc)) from None

    @property
    def start(self) -> int:
        return self.at

    @property
    def capabilities(self) -> tuple[str, ...]:
        return (CLOCK,)


@dataclass(frozen=True)
class SlowLink:
    """Replace the latency from ``src`` to ``dst`` by ``latency`` during the window;
    ``both_ways`` also slows ``dst`` to ``src``."""

    start: int
    end: int | None
    src: str
    dst: str
    latency: Distribution
    both_ways: bool = True
    key: ClassVar[str] = "slow_link"

    def __post_init__(self) -> None:
        object.__setattr__(self, "latency", Distribution.parse(self.latency))
        _check_window(self.start, self.end, "slow link")

    @classmethod
    def from_yaml(cls, item: Mapping[str, Any], where: str, check: CheckTarget | None = None) -> SlowLink:
        _known(item, where, {"slow_link", "from", "until", "latency", "both_ways"})
        start, end = _window(item, where)
        ends = item["slow_link"]
        if not isinstance(ends, list) or len(ends) != 2:
            raise FaultSpecError(where, ("slow_link",), "a slow link is [source, destination]")
        if "latency" not in item:
            raise FaultSpecError(where, (), "missing required field 'latency'")
        try:
            latency = Distribution.from_yaml(item["latency"])
        except ValueError as exc:
            raise FaultSpecError(where, ("latency",), str(exc)) from None
        return cls(start, end, _target(ends[0], where, ("slow_link", 0), check),
                   _target(ends[1], where, ("slow_link", 1), check), latency, _flag(item, "both_ways", where, True))

    @property
    def capabilities(self) -> tuple[str, ...]:
        return (SLOW_LINK,)


Fault = Crash | Partition | Pause | ClockSkew | SlowLink
FAULT_KINDS: dict[str, Any] = {c.key: c for c in (Crash, Partition, Pause, ClockSkew, SlowLink)}
FAULT_KINDS["rule"] = Rule


def parse_fault(item: Any, where: str = "fault", check: CheckTarget | None = None) -> Rule | Fault:
    """One item of a scenario's ``faults`` list; `FaultSpecError` names what is wrong."""
    if not isinstance(item, Mapping):
        raise FaultSpecError(where, (), f"a fault must be a mapping, got {type(item).__name__}")
    kinds = [k for k in FAULT_KINDS if k in item]
    if len(kinds) != 1:
        hint = ""
        if not kinds:
            for key in item:
                hint = hint or did_you_mean(str(key), FAULT_KINDS)
        raise FaultSpecError(where, (), f"each fault needs exactly one of {', '.join(FAULT_KINDS)}"
                                        f"{' (it has ' + ' and '.join(kinds) + ')' if kinds else ''}{hint}")
    kind = FAULT_KINDS[kinds[0]]
    if kind is Rule:
        return Rule.from_yaml(item, where, check_node=check)
    return kind.from_yaml(item, where, check)


def window_of(fault: Fault) -> tuple[int, int | None]:
    """When a fault acts: (start, end), end None when it does not end."""
    if isinstance(fault, Crash):
        return fault.at, fault.end
    if isinstance(fault, ClockSkew):
        return fault.at, None
    return fault.start, fault.end


# ---- putting a schedule onto a runtime -------------------------------------------------------


def install(faults: Iterable[Fault], runtime: Runtime, resolve: Resolve) -> None:
    """Schedule every fault on ``runtime``. Faults are scheduled in the order given, so two
    faults at the same instant fire in that order; targets are resolved when a fault fires."""
    for fault in faults:
        _INSTALL[type(fault)](fault, runtime, resolve)


def _named(runtime: Runtime, resolve: Resolve, target: str, what: str) -> list[str]:
    nodes = resolve(target)
    if not nodes:
        runtime.fault_note("skipped", f"{what}: no node is {target!r} now")
    return nodes


def _install_crash(f: Crash, runtime: Runtime, resolve: Resolve) -> None:
    def crash() -> None:
        nodes = _named(runtime, resolve, f.target, "crash")  # resolved once: the restart brings back these
        for node in nodes:
            runtime.crash(node)
        if f.restart_after is not None and nodes:
            runtime.schedule(f.at + f.restart_after, lambda: [runtime.restart(n) for n in nodes])

    runtime.schedule(f.at, crash)


def _install_partition(f: Partition, runtime: Runtime, resolve: Resolve) -> None:
    pid: list[int] = []

    def cut() -> None:
        sides: list[list[str]] = []
        for side in f.sides:
            names: list[str] = []
            for target in side:
                if target != REST:
                    names.extend(n for n in resolve(target) if n not in names)
            sides.append(names)
        named = {n for side in sides for n in side}
        for side_targets, names in zip(f.sides, sides):
            if REST in side_targets:
                names.extend(n for n in runtime.node_names() if n not in named)
        seen: set[str] = set()
        for names in sides:  # a node two sides name stays on the first
            names[:] = [n for n in names if n not in seen]
            seen.update(names)
        if sum(1 for names in sides if names) < 2:
            runtime.fault_note("skipped", f"partition {[list(s) for s in f.sides]}: fewer than two sides name a node now")
            return
        pid.append(runtime.partition([tuple(names) for names in sides if names], f.one_way))

    runtime.schedule(f.start, cut)
    if f.end is not None:
        runtime.schedule(f.end, lambda: runtime.heal(pid.pop()) if pid else None)


def _install_pause(f: Pause, runtime: Runtime, resolve: Resolve) -> None:
    paused: list[str] = []

    def pause() -> None:
        paused.extend(_named(runtime, resolve, f.target, "pause"))
        for node in paused:
            runtime.pause(node)

    def resume() -> None:
        while paused:
            runtime.resume(paused.pop(0))

    runtime.schedule(f.start, pause)
    if f.end is not None:
        runtime.schedule(f.end, resume)


def _install_clock(f: ClockSkew, runtime: Runtime, resolve: Resolve) -> None:
    def skew() -> None:
        for node in _named(runtime, resolve, f.target, "clock skew"):
            runtime.set_clock(node, f.offset, f.drift)

    runtime.schedule(f.at, skew)


def _install_slow_link(f: SlowLink, runtime: Runtime, resolve: Resolve) -> None:
    ids: list[int] = []

    def slow() -> None:
        srcs = _named(runtime, resolve, f.src, "slow link")
        dsts = _named(runtime, resolve, f.dst, "slow link") if srcs else []
        for src in srcs:
            for dst in dsts:
                ids.append(runtime.slow_link(src, dst, f.latency))
                if f.both_ways:
                    ids.append(runtime.slow_link(dst, src, f.latency))

    def restore() -> None:
        while ids:
            runtime.restore_link(ids.pop(0))

    runtime.schedule(f.start, slow)
    if f.end is not None:
        runtime.schedule(f.end, restore)


_INSTALL: dict[type, Callable[[Any, Runtime, Resolve], None]] = {
    Crash: _install_crash, Partition: _install_partition, Pause: _install_pause, ClockSkew: _install_clock,
    SlowLink: _install_slow_link,
}


__all__ = [
    "FAULT_KINDS", "REST", "CheckTarget", "ClockSkew", "Crash", "Fault", "Partition", "Pause", "Resolve", "SlowLink",
    "install", "parse_fault", "window_of",
]
