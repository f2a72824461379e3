"""Shrinking a non-linearizable part of a history to a small, faithful counterexample.

A counterexample is a few completed operations that no subset of the other operations can
explain: every other operation is made *optional* (it took effect within its interval with its
recorded output, or not at all; a pending one stays pending). That makes it a faithful witness
of the whole history. Merely deleting the others would not be: a read looks wrong as soon as its
write is deleted, so deletion always shrinks to a lone read.

Proving a candidate non-linearizable means exhausting every order of the operations before the
return the search cannot pass, and with most operations optional there are many. So, when the
model can over-approximate the states a set of operations may leave (`Model.reachable_states`),
the shrinker first looks for a short *window* at the end: the operations invoked from some time
T on, started from every state the operations invoked before T could have left. If no start
explains the window, neither does the whole history, and candidates are searched in the window
only. The window grows (1, 2, 4, ... operations back from the culprit) until it suffices.

Then ddmin (Zeller) removes chunks, then single operations, while every start still fails.
A last pass, on the whole history from the real initial state, checks each remaining operation:
if the rest is still not linearizable without it, it goes. When every such check was decided,
the counterexample is minimal: without any one of its operations, the rest can be explained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.checkers.history import Operation
from harness.checkers.models import Model
from harness.checkers.wgl import INIT, Allowance, Search, search, searchable


@dataclass
class Shrunk:
    ops: list[Operation]        # the counterexample's operations (all completed), in call order
    culprit: Operation          # the one whose return no order of what could precede it passes
    states: list[Any]           # the states it could meet there (a superset when windowed)
    minimal: bool               # every single removal was proved to make it explicable


class _Shrinker:
    """``part``: the searchable operations of one part; ``culprit``: the operation whose return
    a search could not pass (or got furthest to); ``failed``: that search, if it failed."""

    def __init__(self, part: list[Operation], culprit: Operation, model: Model, steps: int,
                 failed: Search | None = None) -> None:
        self.model = model
        self.part = part
        self.allowance = Allowance(steps)
        self.per_attempt = max(steps // 16, 10_000)
        self.complete = True
        self.culprit = culprit
        # Operations called after the cut cannot matter: after the culprit's return, or after
        # the last that the failed search needed (it may have looked further ahead).
        self.cut: float = culprit.ret if failed is None else max(op.invoke for op in failed.prefix)  # type: ignore[assignment]
        self.best: list[Search] = [failed] if failed is not None else []

    def universe(self, cut: float, since: float | None) -> list[Operation]:
        """The operations called up to ``cut``; with a window from ``since``, those that can
        still take effect at or after it (completed before it: summed up by the starts)."""
        ops = [op for op in self.part if op.invoke <= cut]
        if since is None:
            return ops
        return [op for op in ops if op.pending or op.invoke >= since or op.ret >= since]  # type: ignore[operator]

    def starts(self, since: float | None, universe: list[Operation]) -> list[Any] | None:
        """Where searches start: the real initial state, or, for a window from ``since``, every
        state the operations called before it could have left (as told apart by ``universe``)."""
        if since is None:
            return [INIT]
        return self.model.reachable_states([op for op in self.part if op.invoke < since], universe)

    def attempt(self, keep: list[Operation], since: float | None = None) -> list[Search] | None:
        """The failed searches, one per start, if ``keep`` cannot be explained from any start,
        whichever of the other operations took effect; else None. Operations straddling the
        window's start are optional: they may have taken effect before it."""
        kept = {op.index for op in keep}
        cut = self.cut
        while True:
            if self.allowance.expired():
                self.complete = False
                return None
            universe = self.universe(cut, since)
            starts = self.starts(since, universe)
            if starts is None:
                return None
            optional = frozenset(op.index for op in universe if not op.pending and (
                op.index not in kept or (since is not None and op.invoke < since)))
            failures = []
            for start in starts:
                tried = self.search(universe, optional, start)
                if tried.linearizable is None:
                    self.complete = False
                    return None
                if tried.linearizable:
                    return None
                failures.append(tried)
            # Sound only if no search got past the cut: operations called after it were left
            # out. Otherwise widen the universe to where they got and ask again.
            reached = max(f.stuck.ret for f in failures)  # type: ignore[union-attr, type-var]
            if reached <= cut:
                return failures
            cut = reached

    def search(self, universe: list[Operation], optional: frozenset[int], start: Any) -> Search:
        """A quick search (value flow on, at most one pending operation in a row) that finds
        most linearizations at once, and when it finds none, a full search without the value
        flow: the cut of `attempt` relies on where a failed search got stuck, which the value
        flow's look-ahead blurs. Both within this attempt's share of the allowance."""
        granted = min(self.per_attempt, self.allowance.steps)
        sub = Allowance(granted)
        tried = search(universe, self.model, sub, optional, start, chain=1)
        if tried.linearizable is not True:
            tried = search(universe, self.model, sub, optional, start, flow=False)
        self.allowance.steps -= granted - sub.steps
        return tried

    def window(self) -> tuple[list[Operation], float] | None:
        """The shortest window found that cannot be explained from any start (candidates, its
        start time T), or None."""
        times = sorted({op.invoke for op in self.part if not op.pending and op.invoke <= self.culprit.invoke},
                       reverse=True)
        k = 1
        while k < len(times) and not self.allowance.expired():
            t = times[k - 1]
            if self.model.reachable_states([]) is None:
                return None
            candidates = [op for op in self.universe(self.cut, t) if not op.pending and op.invoke >= t]
            failed = self.attempt(candidates, t)
            if failed is not None:
                self.accept(failed)
                return candidates, t
            k *= 2
        return None

    def accept(self, failed: list[Search]) -> None:
        self.best = failed
        self.cut = max(f.stuck.ret for f in failed)  # type: ignore[union-attr, type-var]

    def ddmin(self, current: list[Operation], since: float | None) -> list[Operation]:
        granularity = 2
        while len(current) >= 2 and not self.allowance.expired():
            chunks = _split(current, granularity)
            for i in range(len(chunks)):
                rest = [op for j, c in enumerate(chunks) if j != i for op in c]
                failed = self.attempt(rest, since)
                if failed is not None:
                    self.accept(failed)
                    current = [op for op in rest if op.invoke <= self.cut]
                    granularity = max(granularity - 1, 2)
                    break
            else:
                if granularity >= len(current):
                    return current
                granularity = min(granularity * 2, len(current))
        if len(current) >= 2:
            self.complete = False
        return current

    def last_pass(self, current: list[Operation]) -> list[Operation]:
        """Drops, on the whole history from the real start, any operation the rest does without."""
        if len(current) == 1:
            return current  # with nothing to explain, everything can be explained
        i = 0
        while i < len(current):
            rest = current[:i] + current[i + 1:]
            failed = self.attempt(rest)
            if failed is not None:
                self.accept(failed)
                current, i = rest, 0
            else:
                i += 1
        return current

    def finish(self, window: tuple[list[Operation], float] | None) -> Shrunk:
        """Shrinks within ``window`` (candidates, T) if one was found, else on the whole history
        from the real start; then the last pass."""
        if window is not None:
            candidates, t = window
            current = self.ddmin(candidates, t)
        else:
            current = self.ddmin([op for op in self.universe(self.cut, None) if not op.pending], None)
        current = self.last_pass(current)
        culprit, states = _culprit(self.best)  # the culprit is always one of the kept operations
        return Shrunk(sorted(current, key=lambda o: (o.invoke, o.index)), culprit, states, self.complete)


def _culprit(failures: list[Search]) -> tuple[Operation, list[Any]]:
    """The latest operation any start got stuck at, and every state met there."""
    last = max(failures, key=lambda s: (s.stuck.ret, s.stuck.index))  # type: ignore[union-attr]
    culprit = last.stuck
    assert culprit is not None
    states: list[Any] = []
    for s in failures:
        if s.stuck is culprit:
            states.extend(x for x in s.stuck_states if x not in states)
    return culprit, states


def _split(ops: list[Operation], parts: int) -> list[list[Operation]]:
    size, extra = divmod(len(ops), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(ops[start:end])
        start = end
    return [c for c in out if c]


def shrink(part: list[Operation], found: Search, model: Model, steps: int) -> Shrunk:
    """A small faithful counterexample for ``part``, which ``found`` (a failed search of it)
    proved not linearizable; ``steps`` bounds the work (model steps)."""
    hint = found.starved_by or found.stuck  # a read starved by the value-flow check, if any
    assert hint is not None
    shrinker = _Shrinker(searchable(part, model), hint, model, steps, found)
    return shrinker.finish(shrinker.window())


def refute(part: list[Operation], hint: Operation, model: Model, steps: int) -> Shrunk | None:
    """Proves ``part`` not linearizable with a window ending at the return of ``hint`` (the
    furthest an undecided search got), then shrinks; None when no window is enough or the model
    cannot over-approximate states. Cheap where the full search is not: a read of a value that
    nothing could have written is refuted with a window of one operation."""
    if hint.ret is None:
        return None
    shrinker = _Shrinker(searchable(part, model), hint, model, steps)
    window = shrinker.window()
    return None if window is None else shrinker.finish(window)
