"""The network faults a ZMTP proxy applies, and the trace rows it reports them with.

`NetworkFaults` holds what is in force — message rules, partitions (one-way or both, with or
without closing connections), slow links (latency and bandwidth) — and answers the proxy's
questions about one path (src node -> dst node): is it cut, how much later does a message
leave, does any rule look at it. It is plain bookkeeping: the proxy's loop thread owns it.

`FaultEvent` is one trace row in the shape the simulator writes for the same fault (a rule's
drop is a ``drop`` row of the sending node, a partition loss a ``drop`` row of the receiving
node, a partition itself a ``fault`` row of the ``nemesis`` node), so live and simulated traces
are read the same way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

from fault_injection.partitions import Matcher, PartitionTable, matcher
from fault_injection.rules import Distribution, DistSpec, RuleSet
from harness.trace import DROP, FAULT

NEMESIS = "nemesis"  # the node column of rows about the whole network (as in the simulator)
UNKNOWN = "?"  # a connecter the proxy could not name


class FaultEvent(NamedTuple):
    """One trace row about a fault. ``time_ns`` is on the clock the proxy was given."""

    time_ns: int
    node: str
    kind: str  # drop | fault
    fault: str  # "drop:rule-2", "partition", "reset", "opaque", ...
    peer: str | None = None
    socket: str | None = None
    msg_type: str | None = None
    size: int | None = None
    detail: str | None = None

    def row(self) -> dict[str, Any]:
        """Keyword arguments of ``TraceWriter.emit`` (after node, kind, time)."""
        return {"socket": self.socket, "msg_type": self.msg_type, "peer": self.peer, "size": self.size,
                "fault": self.fault, "detail": self.detail}


def message_drop(now: int, src: str, dst: str, socket: str, msg_type: str, size: int, label: str) -> FaultEvent:
    """A message a rule dropped: a row of the sender, as the simulator writes it."""
    return FaultEvent(now, src, DROP, label, dst, socket or None, msg_type, size, "proxy")


def message_fault(now: int, src: str, dst: str, socket: str, msg_type: str, size: int, label: str,
                  detail: str) -> FaultEvent:
    return FaultEvent(now, src, FAULT, label, dst, socket or None, msg_type, size, detail)


def network_fault(now: int, fault: str, detail: str) -> FaultEvent:
    return FaultEvent(now, NEMESIS, FAULT, fault, detail=detail)


@dataclass
class _Slow:
    src: Matcher
    dst: Matcher
    latency: Distribution | None
    bandwidth: int | None  # bytes per second
    text: str


class NetworkFaults:
    """What the proxy applies now. Ids of partitions and slow links share one counter, as in
    the simulator, so trace rows name them alike (``p3``, ``l4``)."""

    def __init__(self, rules: RuleSet | None = None, seed: int = 0) -> None:
        self.seed = seed
        self.rules = rules.fresh() if rules is not None else RuleSet()  # counts (nth) are per run
        self.partitions = PartitionTable()
        self._closing: set[int] = set()  # partitions that close connections
        self._slow: dict[int, _Slow] = {}
        self._next_id = 1
        self._rngs: dict[tuple[str, str], random.Random] = {}
        self.version = 0  # bumped on every change: paths re-read their state

    # -- rules

    def set_rules(self, rules: RuleSet) -> None:
        self.rules = rules.fresh()
        self.version += 1

    def rng(self, src: str, dst: str) -> random.Random:
        """The generator of rule draws on src -> dst, derived from the seed as the simulator's."""
        key = (src, dst)
        rng = self._rngs.get(key)
        if rng is None:
            rng = self._rngs[key] = random.Random(f"{self.seed}/rules/{src}>{dst}")
        return rng

    # -- partitions

    def partition(self, groups: Sequence[Sequence[str]], one_way: bool = False, close: bool = False) -> int:
        pid = self.partitions.add(groups, one_way, self._next_id)
        self._next_id += 1
        if close:
            self._closing.add(pid)
        self.version += 1
        return pid

    def heal(self, pid: int | None = None) -> list[int]:
        healed = self.partitions.heal(pid)
        for p in healed:
            self._closing.discard(p)
        self.version += 1
        return healed

    def is_cut(self, src: str, dst: str) -> bool:
        return self.partitions.is_cut(src, dst)

    def refuses(self, a: str, b: str) -> bool:
        """Whether a closing partition forbids a connection between a and b now."""
        if not self._closing:
            return False
        return any(self.partitions.cut_by(pid, a, b) or self.partitions.cut_by(pid, b, a) for pid in self._closing)

    def describe_partition(self, pid: int) -> str:
        groups = [list(g) for g in self.partitions.groups(pid)]
        mode = "one-way " if self.partitions.one_way(pid) else ""
        return f"p{pid} {mode}{groups}" + (" closing connections" if pid in self._closing else "")

    # -- slow links

    def slow_link(self, src: str, dst: str, latency: DistSpec | None = None, bandwidth: int | None = None) -> int:
        """Messages from src to dst (names or globs) leave ``latency`` later and no faster than
        ``bandwidth`` bytes per second; returns the id for ``restore_link``."""
        if latency is None and bandwidth is None:
            raise ValueError("a slow link needs a latency, a bandwidth or both")
        if bandwidth is not None and bandwidth <= 0:
            raise ValueError(f"bandwidth must be positive, got {bandwidth}")
        lid = self._next_id
        self._next_id += 1
        dist = None if latency is None else Distribution.parse(latency)
        text = f"l{lid} {src}->{dst}" + (f" {dist!r}" if dist else "") + (f" {bandwidth}B/s" if bandwidth else "")
        self._slow[lid] = _Slow(matcher(src), matcher(dst), dist, bandwidth, text)
        self.version += 1
        return lid

    def restore_link(self, lid: int) -> str | None:
        slow = self._slow.pop(lid, None)
        if slow is None:
            return None
        self.version += 1
        return slow.text

    def shaping(self, src: str, dst: str) -> tuple[Distribution | None, int | None]:
        """(latency, bandwidth) on src -> dst: the latest slow link that covers it wins."""
        for slow in reversed(list(self._slow.values())):
            if slow.src(src) and slow.dst(dst):
                return slow.latency, slow.bandwidth
        return None, None

    def touches(self, src: str, dst: str, socket: str, direction: str, endpoint: str) -> bool:
        """Whether anything in force may act on messages of this path (else they go straight
        through without being looked at)."""
        return (self.partitions.partitioned and self.is_cut(src, dst)) or bool(self._slow and any(
            s.src(src) and s.dst(dst) for s in self._slow.values())) or self.rules.may_match(
            src, dst, socket, direction, endpoint)
