"""Shrinking a failing candidate while it still fails *the same property*.

Hypothesis finds the failure; the reductions here know what a scenario is made of, so each
step is one a reader understands, and the same shrinker serves failures hypothesis found and
failing seeds of a ``zmq-harness run --seeds`` sweep (which no hypothesis choice sequence
describes). Passes, repeated until none makes progress or the budget is spent:

1. **fewer faults** — delta debugging (Zeller's ddmin) over the fault list, after trying none;
2. **shorter** — the shortest duration (100 ms steps, binary search) that still fails;
3. **fewer nodes** — each group's count, down to one;
4. **fewer messages** — each workload item dropped, or capped (``limit``) at the fewest
   operations per node that still fail;
5. **simpler faults** — a group target narrowed to one node, ``random``/``any`` to the node,
   shorter windows and restarts, lower rule probabilities, smaller delays and skews, times
   rounded to 100 ms.

A reduction is kept only if the candidate still fails the property the search found (the
check and its clause); that another property fails too, or stops failing, does not matter.
The seed never changes: every step is a deterministic replay of that seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from fault_injection.rules import parse_duration, parse_probability
from harness.explore.candidate import Candidate, Differential, Outcome, Property, fault_window, fmt_duration, \
    fmt_probability
from harness.explore.space import PROBABILITY_LADDER
from harness.packages.base import as_rate
from harness.scenario import Scenario
from harness.targets import ANY, RANDOM

MAX_POSITIONS = 1 << 14  # a rule pinned to messages counts at most this far
DDMIN_POSITIONS = 8  # a range this short is narrowed to the positions that matter
GRAIN_NS = 100_000_000  # durations and times are shrunk in 100 ms steps ...
FINE_NS = 10_000_000  # ... then fault lengths in 10 ms steps


class _Spent(Exception):
    """The shrink budget is spent: keep the smallest candidate so far."""


@dataclass
class Step:
    """One accepted reduction."""

    what: str
    runs: int  # shrink runs made when it was accepted


@dataclass
class ShrinkResult:
    candidate: Candidate
    outcome: Outcome
    steps: list[Step] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0
    complete: bool = True  # False: the budget ran out before no pass could shrink further


class Shrinker:
    def __init__(self, runner: Differential, scenario: Scenario, prop: Property, *, runs: int = 200,
                 seconds: float | None = None, confirm: int = 1, quiet_ns: int = 0) -> None:
        self.runner = runner
        # A shorter run keeps this long after its last fault and its last node's start (the
        # space's quiet stretch): the time the file gives the nodes to recover is part of the
        # property, and a run cut short of it fails for want of time, not for the faults
        self.quiet_ns = quiet_ns
        self.last_start_ns = max((g.start_ns for g in scenario.groups.values()), default=0)
        self.confirm = confirm  # runs a reduction must fail in a row (2 live, where runs vary)
        self.scenario = scenario
        self.prop = prop
        self.max_runs = runs
        self.max_seconds = seconds
        self.steps: list[Step] = []
        self._start_runs = runner.runs
        self._t0 = time.monotonic()

    @property
    def runs(self) -> int:
        return self.runner.runs - self._start_runs

    def holds(self, cand: Candidate) -> bool:
        """Does ``cand`` still fail the property? (A run, unless the runner knows the answer.)"""
        if self._over():
            raise _Spent
        for attempt in range(self.confirm):  # live: a reduction must fail every time it is run
            outcome = self.runner.evaluate(cand, fresh=attempt > 0)
            if outcome.invalid or not outcome.fails(self.prop):
                return False
            if attempt + 1 < self.confirm and self._over():
                raise _Spent
        return True

    def _over(self) -> bool:
        return self.runs >= self.max_runs or (self.max_seconds is not None
                                              and time.monotonic() - self._t0 >= self.max_seconds)

    def shrink(self, cand: Candidate) -> ShrinkResult:
        complete = True
        try:
            while True:
                before = cand
                for shrink_pass in (self.fewer_faults, self.shorter, self.fewer_nodes, self.fewer_messages,
                                    self.exact_messages, self.simpler_faults):
                    cand = shrink_pass(cand)
                if cand == before:
                    break
        except _Spent:
            complete = False
        outcome = self.runner.evaluate(cand)
        return ShrinkResult(cand, outcome, self.steps, self.runs, time.monotonic() - self._t0, complete)

    def _accept(self, what: str) -> None:
        self.steps.append(Step(what, self.runs))

    # ---- 1. fewer faults ------------------------------------------------------------------------
    def fewer_faults(self, cand: Candidate) -> Candidate:
        faults = list(cand.faults)
        if not faults:
            return cand
        kept = ddmin(faults, lambda sub: self.holds(cand.with_(faults=tuple(sub))))
        if len(kept) < len(faults):
            self._accept(f"faults: {len(faults)} -> {len(kept)}")
            return cand.with_(faults=tuple(kept))
        return cand

    # ---- 2. shorter ------------------------------------------------------------------------------
    def shorter(self, cand: Candidate) -> Candidate:
        def fails(d: int) -> bool:
            shorter = cut(cand, d, self.scenario.settle_ns)
            return self.leaves_quiet(shorter) and self.holds(shorter)

        best = smallest(GRAIN_NS, cand.duration_ns, GRAIN_NS, fails)
        if best < cand.duration_ns:
            self._accept(f"duration: {fmt_duration(cand.duration_ns)} -> {fmt_duration(best)}")
            return cut(cand, best, self.scenario.settle_ns)
        return cand

    def leaves_quiet(self, cand: Candidate) -> bool:
        """Whether the run goes on for the quiet stretch after its last fault ends (or, for a
        fault without an end, begins) and after its last node starts."""
        last = self.last_start_ns
        for item in cand.faults:
            window = fault_window(item)
            if window is not None:
                last = max(last, window[0] if window[1] is None else window[1])
        return cand.duration_ns >= last + self.quiet_ns

    # ---- 3. fewer nodes -----------------------------------------------------------------------------
    def fewer_nodes(self, cand: Candidate) -> Candidate:
        for i, (group, count) in enumerate(cand.counts):
            if count <= 1:
                continue

            def with_count(n: int, i: int = i, group: str = group) -> Candidate:
                counts = list(cand.counts)
                counts[i] = (group, n)
                return cand.with_(counts=tuple(counts))

            best = smallest(1, count, 1, lambda n: self.holds(with_count(n)))
            if best < count:
                self._accept(f"{group}: {count} -> {best} node(s)")
                cand = with_count(best)
        return cand

    # ---- 4. fewer messages ---------------------------------------------------------------------------
    def fewer_messages(self, cand: Candidate) -> Candidate:
        i = 0
        while i < len(cand.workload):
            without = cand.with_(workload=cand.workload[:i] + cand.workload[i + 1:])
            if self.holds(without):
                self._accept(f"workload item {i + 1} ({cand.workload[i].get('op')}) removed")
                cand = without
                continue
            item = cand.workload[i]
            most = ops_per_node(item, cand.duration_ns)

            def limited(n: int, i: int = i, item: dict[str, Any] = item) -> Candidate:
                return cand.with_(workload=cand.workload[:i] + ({**item, "limit": n},) + cand.workload[i + 1:])

            best = smallest(1, most, 1, lambda n: self.holds(limited(n)))
            if best < most:
                self._accept(f"workload item {i + 1} ({item.get('op')}): at most {best} per node")
                cand = limited(best)
            i += 1
        return cand

    # ---- 5. exact messages -----------------------------------------------------------------------------
    def exact_messages(self, cand: Candidate) -> Candidate:
        """A rule that acts on a share of the messages it matches becomes one that acts on the
        few it must: the positions (``nth``) among those it matches, narrowed from the front
        and the back, then, for a handful, to the ones that matter, and at 100% if that still
        fails (a longer range keeps its share)."""
        for i, item in enumerate(cand.faults):
            if "rule" not in item or "nth" in item["rule"]:
                continue

            def pinned(nth: list[int], probability: str | None = item["rule"].get("probability"),
                       i: int = i, item: dict[str, Any] = item) -> Candidate:
                body = {k: v for k, v in item["rule"].items() if k != "probability"}
                body["nth"] = nth_text(nth)
                if probability is not None:
                    body["probability"] = probability
                return cand.with_(faults=cand.faults[:i] + ({"rule": body},) + cand.faults[i + 1:])

            last = 1
            while not self.holds(pinned(list(range(1, last + 1)))):
                last *= 2
                if last > MAX_POSITIONS:
                    break
            if last > MAX_POSITIONS:
                continue
            last = smallest(last // 2 + 1, last, 1, lambda b: self.holds(pinned(list(range(1, b + 1))))) \
                if last > 1 else 1
            span = smallest(0, last - 1, 1, lambda d: self.holds(pinned(list(range(last - d, last + 1)))))
            positions = list(range(last - span, last + 1))
            probability = item["rule"].get("probability")
            # At 100% only for a handful: every one of a long range is a far harsher fault than the
            # share the space allows (every SYNC of a run corrupted defeats any client), not the same
            if probability is not None and len(positions) <= DDMIN_POSITIONS and self.holds(pinned(positions, None)):
                probability = None
            if len(positions) <= DDMIN_POSITIONS:
                positions = ddmin(positions, lambda sub: bool(sub) and self.holds(pinned(sub, probability))) or positions
            cand = pinned(positions, probability)
            self._accept(f"fault {i + 1}: only the {item['rule'].get('message', '')} message(s) number "
                         f"{nth_text(positions)}" + (f" ({probability})" if probability else ""))
        return cand

    # ---- 6. simpler faults -----------------------------------------------------------------------------
    def simpler_faults(self, cand: Candidate) -> Candidate:
        for i in range(len(cand.faults)):
            def at(item: dict[str, Any], i: int = i) -> Candidate:
                return cand.with_(faults=cand.faults[:i] + (item,) + cand.faults[i + 1:])

            progress = True
            while progress:  # each narrowing is of the fault as it stands after the last one kept
                progress = False
                for what, simpler in narrowings(self.scenario, cand, cand.faults[i]):
                    if simpler != cand.faults[i] and self.holds(at(simpler)):
                        self._accept(f"fault {i + 1}: {what}")
                        cand, progress = at(simpler), True
                        break
            for m in magnitudes(cand.faults[i]):
                item = cand.faults[i]
                best = smallest(m.lowest, m.value, m.grain, lambda v: self.holds(at(m.set(item, v))))
                if best < m.value:
                    self._accept(f"fault {i + 1}: {m.name} {m.show(m.value)} -> {m.show(best)}")
                    cand = at(m.set(item, best))
        return cand


# ---- the reductions, as pure functions ---------------------------------------------------------------


def ddmin(items: Sequence[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
    """Zeller and Hildebrandt's ddmin: a 1-minimal sublist of ``items`` that still ``fails``
    (``items`` itself is known to fail). The empty list is tried first; no sublist is tried
    twice (with two chunks, each one's complement is the other)."""
    every = list(items)
    known: dict[tuple[int, ...], bool] = {}

    def test(sub: list[int]) -> bool:  # sublists as positions, so equal items stay apart
        key = tuple(sub)
        if key not in known:
            known[key] = fails([every[i] for i in sub])
        return known[key]

    kept = list(range(len(every)))
    if test([]):
        return []
    n = 2
    while len(kept) >= 2:
        size = -(-len(kept) // n)
        chunks = [kept[k:k + size] for k in range(0, len(kept), size)]
        for chunk in chunks:  # one chunk alone
            if len(chunk) < len(kept) and test(chunk):
                kept, n = chunk, 2
                break
        else:
            for k in range(len(chunks) if len(chunks) > 2 else 0):  # everything but one chunk
                rest = [x for j, c in enumerate(chunks) if j != k for x in c]
                if test(rest):
                    kept, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(kept):
                    break
                n = min(len(kept), 2 * n)
    return [every[i] for i in kept]


def smallest(lo: int, hi: int, step: int, fails: Callable[[int], bool]) -> int:
    """The smallest value in ``lo..hi`` (multiples of ``step`` from ``lo``, and ``hi``) that
    still fails, by binary search; ``hi`` is known to fail. ``lo`` is tried first."""
    if hi <= lo:
        return hi
    if fails(lo):
        return lo
    bad_lo, good = lo, hi  # lo passes, hi fails
    while good - bad_lo > step:
        mid = bad_lo + ((good - bad_lo) // 2 // step) * step
        mid = max(mid, bad_lo + step)
        if mid >= good:
            break
        if fails(mid):
            good = mid
        else:
            bad_lo = mid
    return good


def nth_text(positions: list[int]) -> int | str | list[int]:
    """Positions as a rule's ``nth`` is written: 3, "2-5" or [1, 4]."""
    if len(positions) == 1:
        return positions[0]
    if positions == list(range(positions[0], positions[-1] + 1)):
        return f"{positions[0]}-{positions[-1]}"
    return list(positions)


def cut(cand: Candidate, duration_ns: int, settle_ns: int = 0) -> Candidate:
    """The candidate ending at ``duration_ns``: faults that would start later, or end (restart,
    heal) after the run's end (a file refuses both), and workload items that would begin later
    are left out, the others end by then."""
    def within(item: dict[str, Any]) -> bool:
        start, end = fault_window(item) or (0, None)
        return start < duration_ns and (end is None or end <= duration_ns + settle_ns)

    faults = tuple(f for f in cand.faults if within(f))
    workload = []
    for item in cand.workload:
        start = parse_duration(item.get("from", 0))
        if "until" in item:  # keep the quiet stretch the file leaves after the operations
            until = parse_duration(item["until"])
            until = min(until, duration_ns - (cand.duration_ns - until))
            if until <= start:
                continue
            item = {**item, "until": fmt_duration(until)}
        elif start >= duration_ns:
            continue
        workload.append(item)
    return cand.with_(duration_ns=duration_ns, faults=faults, workload=tuple(workload))


def ops_per_node(item: dict[str, Any], duration_ns: int) -> int:
    """An upper bound on the operations one node of a workload item performs (its limit, or
    three times the expected count, at least 1)."""
    if "limit" in item:
        return int(item["limit"])
    start = parse_duration(item.get("from", 0))
    end = parse_duration(item["until"]) if "until" in item else duration_ns
    return max(1, int(3 * as_rate(item["rate"]) * (end - start) / 1e9) + 1)


def narrowings(scenario: Scenario, cand: Candidate, item: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Simpler variants of one fault item that are not a matter of size: a target narrowed to
    one node, a start time rounded down to 100 ms."""
    nodes = cand.nodes(scenario)
    for key in ("crash", "pause", "clock_skew"):
        if key in item:
            for node in _narrower(scenario, item[key], nodes):
                yield f"{key} {item[key]} -> {node}", {**item, key: node}
    if "partition" in item:
        for j, side in enumerate(item["partition"]):
            for k, t in enumerate(side):
                for node in _narrower(scenario, t, nodes):
                    sides = [list(s) for s in item["partition"]]
                    sides[j][k] = node
                    yield f"partition side {t} -> {node}", {**item, "partition": sides}
    if "slow_link" in item:
        for j, t in enumerate(item["slow_link"]):
            for node in _narrower(scenario, t, nodes):
                ends = list(item["slow_link"])
                ends[j] = node
                yield f"slow link end {t} -> {node}", {**item, "slow_link": ends}
    for key in ("at", "from"):
        if key in item:
            t = parse_duration(item[key])
            rounded = (t // GRAIN_NS) * GRAIN_NS
            if rounded != t:
                moved = {**item, key: fmt_duration(rounded)}
                if "until" in item and key == "from":
                    moved["until"] = fmt_duration(parse_duration(item["until"]) - (t - rounded))
                yield f"{key} {item[key]} -> {fmt_duration(rounded)}", moved


@dataclass(frozen=True)
class Magnitude:
    """A size in a fault item (a length, a latency, a probability) the shrinker makes as small
    as it can by binary search: values ``lowest, lowest + grain, ...`` up to ``value``."""

    name: str
    value: int
    lowest: int
    grain: int
    set: Callable[[dict[str, Any], int], dict[str, Any]]
    show: Callable[[int], str] = fmt_duration


def magnitudes(item: dict[str, Any]) -> list[Magnitude]:
    out: list[Magnitude] = []
    if "rule" in item:
        body = item["rule"]
        p = parse_probability(body["probability"]) if "probability" in body else 1.0
        ladder = [q for q in PROBABILITY_LADDER if q < p] + [p]
        if len(ladder) > 1 and "nth" not in body:  # a pinned rule is simplest at 100%
            out.append(Magnitude("probability", len(ladder) - 1, 0, 1,
                                 lambda it, k, ladder=ladder: {"rule": {**it["rule"], "probability":
                                                                        fmt_probability(ladder[k])}},
                                 lambda k, ladder=ladder: fmt_probability(ladder[k])))
        lat = _fixed_ns(body.get("delay"))
        if lat is not None:
            out.append(Magnitude("delay", lat, 1_000_000, 1_000_000,
                                 lambda it, v: {"rule": {**it["rule"], "delay": f"fixed({fmt_duration(v)})"}}))
        return out
    if "restart_after" in item:
        out.append(Magnitude("restart after", parse_duration(item["restart_after"]), FINE_NS, FINE_NS,
                             lambda it, v: {**it, "restart_after": fmt_duration(v)}))
    if "from" in item and "until" in item:
        out.append(Magnitude("length", parse_duration(item["until"]) - parse_duration(item["from"]), FINE_NS, FINE_NS,
                             lambda it, v: {**it, "until": fmt_duration(parse_duration(it["from"]) + v)}))
    lat = _fixed_ns(item.get("latency"))
    if lat is not None:
        out.append(Magnitude("latency", lat, 1_000_000, 1_000_000, lambda it, v: {**it, "latency": f"fixed({fmt_duration(v)})"}))
    if "offset" in item:
        off = parse_duration(item["offset"])
        sign = -1 if off < 0 else 1
        out.append(Magnitude("clock offset", abs(off), 1_000_000, 1_000_000,
                             lambda it, v, sign=sign: {**it, "offset": fmt_duration(sign * v)}))
    return [m for m in out if m.value > m.lowest]


def _narrower(scenario: Scenario, target: str, nodes: list[str]) -> list[str]:
    """Single nodes a target could be narrowed to (none for a node or a protocol target)."""
    expr = target
    for prefix in (ANY, RANDOM):
        if target == prefix:
            return list(nodes)
        if target.startswith(prefix + ":"):
            expr = target[len(prefix) + 1:]
    named = [n for n in nodes if expr in (_group_of(scenario, n), scenario.groups[_group_of(scenario, n)].role)]
    return [] if named == [target] else named


def _group_of(scenario: Scenario, node: str) -> str:
    return node if node in scenario.groups else node.rsplit(".", 1)[0]


def _fixed_ns(spec: Any) -> int | None:
    if isinstance(spec, str) and spec.startswith("fixed(") and spec.endswith(")"):
        return parse_duration(spec[len("fixed("):-1])
    return None
