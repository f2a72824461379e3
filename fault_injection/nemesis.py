"""A fault schedule over time: crashes, partitions, pauses, clock skew, slow links.

Ground floor, like ``rules``: the schedule is plain data, and ``install`` puts it onto any
object that offers the nemesis primitives (``NemesisTarget``) — the simulator does; a live
runtime can offer the same methods over real processes. All times are nanoseconds on the
target's clock (virtual time in simulation).

Node names may be symbolic ("leader"): ``install(..., resolve=fn)`` maps them to a concrete
node when the fault fires, so a scenario can crash whoever leads at that moment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fault_injection.rules import Distribution, DistSpec, parse_duration


class NemesisTarget(Protocol):
    """The primitives a runtime offers; ``harness.sim.Simulation`` implements all of them."""

    def schedule(self, at_ns: int, fn: Callable[[], object]) -> None: ...

    def crash(self, node: str) -> None: ...

    def restart(self, node: str) -> None: ...

    def pause(self, node: str) -> None: ...

    def resume(self, node: str) -> None: ...

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False) -> int: ...

    def heal(self, pid: int | None = None) -> None: ...

    def set_clock(self, node: str, offset_ns: int, drift: float = 0.0) -> None: ...

    def slow_link(self, src: str, dst: str, latency: DistSpec) -> int: ...

    def restore_link(self, lid: int) -> None: ...


@dataclass(frozen=True)
class Crash:
    """Crash ``node`` at ``at``; restart it ``restart_after`` later (None: stays down)."""

    at: int
    node: str
    restart_after: int | None = None


@dataclass(frozen=True)
class Partition:
    """Cut the network between ``groups`` from ``start`` until ``end`` (None: never heals).

    Symmetric: nodes in different groups cannot talk (a node in several groups bridges them).
    ``one_way``: only messages from groups[0] to groups[1] are cut."""

    start: int
    end: int | None
    groups: tuple[tuple[str, ...], ...]
    one_way: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(tuple(g) for g in self.groups))
        if len(self.groups) < 2:
            raise ValueError(f"a partition needs at least two groups, got {self.groups}")
        if self.one_way and len(self.groups) != 2:
            raise ValueError("a one-way partition takes exactly two groups: from, to")
        _window(self.start, self.end, "partition")


@dataclass(frozen=True)
class Pause:
    """Stop ``node`` (SIGSTOP-like) from ``start`` until ``end`` (None: never resumes)."""

    start: int
    end: int | None
    node: str

    def __post_init__(self) -> None:
        _window(self.start, self.end, "pause")


@dataclass(frozen=True)
class ClockSkew:
    """From ``at`` on, ``node`` reads ``virtual + offset + drift * virtual``."""

    at: int
    node: str
    offset: int
    drift: float = 0.0

    def __post_init__(self) -> None:
        if self.drift <= -1.0:
            raise ValueError(f"clock drift must be > -1 (the clock must move forward), got {self.drift}")


@dataclass(frozen=True)
class SlowLink:
    """Replace the latency from ``src`` to ``dst`` (globs) by ``latency`` during the window;
    ``both_ways`` also slows ``dst`` to ``src``."""

    start: int
    end: int | None
    src: str
    dst: str
    latency: Distribution
    both_ways: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "latency", Distribution.parse(self.latency))
        _window(self.start, self.end, "slow link")


Fault = Crash | Partition | Pause | ClockSkew | SlowLink


def _window(start: int, end: int | None, what: str) -> None:
    if start < 0:
        raise ValueError(f"{what}: start {start} is negative")
    if end is not None and end < start:
        raise ValueError(f"{what}: end {end} is before start {start}")


def install(faults: Iterable[Fault], target: NemesisTarget, *,
            resolve: Callable[[str], str] | None = None) -> None:
    """Schedule every fault on ``target``. Faults are scheduled in the order given, so two
    faults at the same instant fire in that order."""
    name: Callable[[str], str] = resolve or _same
    for fault in faults:
        if isinstance(fault, Crash):
            _install_crash(fault, target, name)
        elif isinstance(fault, Partition):
            _install_partition(fault, target, name)
        elif isinstance(fault, Pause):
            _install_pause(fault, target, name)
        elif isinstance(fault, ClockSkew):
            _install_clock(fault, target, name)
        elif isinstance(fault, SlowLink):
            _install_slow_link(fault, target, name)
        else:
            raise TypeError(f"not a fault: {fault!r}")


def _same(node: str) -> str:
    return node


def _install_crash(f: Crash, target: NemesisTarget, name: Callable[[str], str]) -> None:
    def crash() -> None:
        node = name(f.node)  # resolved once, so the restart brings back the node that crashed
        target.crash(node)
        if f.restart_after is not None:
            target.schedule(f.at + f.restart_after, lambda: target.restart(node))

    target.schedule(f.at, crash)


def _install_partition(f: Partition, target: NemesisTarget, name: Callable[[str], str]) -> None:
    pid: list[int] = []

    def cut() -> None:
        pid.append(target.partition([[name(n) for n in g] for g in f.groups], f.one_way))

    target.schedule(f.start, cut)
    if f.end is not None:
        target.schedule(f.end, lambda: target.heal(pid.pop()) if pid else None)


def _install_pause(f: Pause, target: NemesisTarget, name: Callable[[str], str]) -> None:
    paused: list[str] = []

    def pause() -> None:
        paused.append(name(f.node))
        target.pause(paused[-1])

    target.schedule(f.start, pause)
    if f.end is not None:
        target.schedule(f.end, lambda: target.resume(paused.pop()) if paused else None)


def _install_clock(f: ClockSkew, target: NemesisTarget, name: Callable[[str], str]) -> None:
    target.schedule(f.at, lambda: target.set_clock(name(f.node), f.offset, f.drift))


def _install_slow_link(f: SlowLink, target: NemesisTarget, name: Callable[[str], str]) -> None:
    ids: list[int] = []

    def slow() -> None:
        src, dst = name(f.src), name(f.dst)
        ids.append(target.slow_link(src, dst, f.latency))
        if f.both_ways:
            ids.append(target.slow_link(dst, src, f.latency))

    def restore() -> None:
        while ids:
            target.restore_link(ids.pop(0))

    target.schedule(f.start, slow)
    if f.end is not None:
        target.schedule(f.end, restore)


# ---- building faults from plain data (YAML) --------------------------------------------------


def fault_from_dict(item: Mapping[str, Any], index: int = 0) -> Fault:
    """Build one fault from plain data; times are ns ints or duration strings::

        {crash: peer-1, at: 5s, restart_after: 3s}
        {partition: [[a, b], [c]], from: 10s, until: 14s, one_way: false}
        {pause: worker-2, from: 1s, until: 2s}
        {clock: peer-3, at: 0, offset: 50ms, drift: 0.001}
        {slow: [client, broker], from: 1s, until: 3s, latency: "uniform(10ms, 50ms)"}
    """
    where = f"fault {index}"
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(item).__name__}")
    kinds = [k for k in ("crash", "partition", "pause", "clock", "slow") if k in item]
    if len(kinds) != 1:
        raise ValueError(f"{where}: give exactly one of crash, partition, pause, clock, slow "
                         f"(got {kinds or 'none'})")
    kind = kinds[0]
    allowed = {
        "crash": {"crash", "at", "restart_after"},
        "partition": {"partition", "from", "start", "until", "end", "one_way"},
        "pause": {"pause", "from", "start", "until", "end"},
        "clock": {"clock", "at", "offset", "drift"},
        "slow": {"slow", "from", "start", "until", "end", "latency", "both_ways"},
    }[kind]
    unknown = [k for k in item if k not in allowed]
    if unknown:
        raise ValueError(f"{where} ({kind}): unknown key(s) {unknown}; allowed: {sorted(allowed)}")

    def time(*keys: str, required: bool = True) -> int | None:
        for k in keys:
            if k in item and item[k] is not None:
                try:
                    return parse_duration(item[k])
                except ValueError as exc:
                    raise ValueError(f"{where} ({kind}): {k}: {exc}") from None
        if required:
            raise ValueError(f"{where} ({kind}): missing {' / '.join(keys)}")
        return None

    try:
        if kind == "crash":
            return Crash(time("at"), str(item["crash"]), time("restart_after", required=False))  # type: ignore[arg-type]
        if kind == "partition":
            groups = item["partition"]
            if not isinstance(groups, Sequence) or isinstance(groups, str):
                raise ValueError("partition: expected a list of groups (lists of node names)")
            return Partition(time("from", "start"), time("until", "end", required=False),  # type: ignore[arg-type]
                             tuple(tuple(str(n) for n in g) for g in groups), bool(item.get("one_way", False)))
        if kind == "pause":
            return Pause(time("from", "start"), time("until", "end", required=False), str(item["pause"]))  # type: ignore[arg-type]
        if kind == "clock":
            return ClockSkew(time("at"), str(item["clock"]), time("offset") or 0,  # type: ignore[arg-type]
                             float(item.get("drift", 0.0)))
        pair = item["slow"]
        if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
            raise ValueError("slow: expected [src, dst]")
        if "latency" not in item:
            raise ValueError("slow: missing latency")
        return SlowLink(time("from", "start"), time("until", "end", required=False),  # type: ignore[arg-type]
                        str(pair[0]), str(pair[1]), Distribution.parse(item["latency"]),
                        bool(item.get("both_ways", True)))
    except ValueError as exc:
        if str(exc).startswith(where):
            raise
        raise ValueError(f"{where} ({kind}): {exc}") from None


def faults_from_dicts(items: Sequence[Mapping[str, Any]]) -> list[Fault]:
    return [fault_from_dict(item, i) for i, item in enumerate(items)]


__all__ = [
    "ClockSkew", "Crash", "Fault", "NemesisTarget", "Partition", "Pause", "SlowLink",
    "fault_from_dict", "faults_from_dicts", "install",
]
