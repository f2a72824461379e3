"""Linearizability of a history of client operations against a sequential model.

    from harness.checkers.linearizability import check
    from harness.checkers.models import KeyValue

    result = check(history, KeyValue())   # history: dicts or Operations (harness.checkers.history)
    result.ok            # True, False, or None when undecided within the budget
    print(result.render())

The search is Wing & Gong's with Lowe's memoisation (`harness.checkers.wgl`), run on each part
the model's ``partition`` gives (each key of a key-value map). When a part is not linearizable,
the result carries a `Counterexample` (`harness.checkers.shrink`): a few completed operations of
that part that no order explains, whichever of the part's other operations took effect, shrunk
by delta debugging until, without any one of them, the rest can be explained. The search never
guesses: a part it cannot decide within the step budget makes the result unknown (``ok is
None``) with the reason, unless another part is definitely not linearizable.

`Linearizable` is the same check as a run `Checker`: a protocol package gives it a function
that turns the events it observes into history entries.
"""

from __future__ import annotations

import gc
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from harness.checkers.base import DELIVER, Checker, Event, Verdict
from harness.checkers.history import UNKNOWN, HistoryError, Operation, history_from_dicts
from harness.checkers.models import KeyValue, Model
from harness.checkers.shrink import Shrunk, refute
from harness.checkers.shrink import shrink as shrink_found
from harness.checkers.wgl import Allowance, Search, search


@dataclass(frozen=True)
class Budget:
    """How much work a check may do. Steps (calls of the model) are deterministic: the same
    history gives the same answer on any machine. ``timeout`` (wall seconds) is not, so it is off
    by default. ``shrink_steps`` bounds the search for the smallest counterexample; when it runs
    out the counterexample is reported as found so far, marked not minimal. It also pays for
    refuting, with a short window, a part whose search ran out of steps."""

    max_steps: int = 5_000_000
    timeout: float | None = None
    shrink_steps: int = 2_000_000


PROBE_STEPS = 200_000  # the first search of a part: at most this, 20 steps per operation,
PROBE_PER_OP = 20      # at least 20,000 (realistic histories need 2-9 steps per operation)


@dataclass
class Counterexample:
    """Completed operations of one part (``key``) that no order explains, whichever of the
    part's other operations took effect (`harness.checkers.shrink`)."""

    key: Any
    ops: list[Operation]          # in call order
    culprit: Operation            # the one whose return no order of what could precede it passes
    states: list[Any]             # the states it could meet there (at most these)
    minimal: bool                 # without any one of the ops, the rest can be explained (proved)
    part_size: int                # operations of that part in the whole history
    model: Model

    def to_dict(self) -> dict[str, Any]:
        return {"key": jsonable(self.key), "operations": [self.op_dict(op) for op in self.ops],
                "culprit": self.culprit.index, "states": [self.model.describe_state(s) for s in self.states],
                "minimal": self.minimal, "part_size": self.part_size}

    def op_dict(self, op: Operation) -> dict[str, Any]:
        d = jsonable(op.to_dict())
        d["operation"] = self.model.describe(op)
        if op is self.culprit:
            d["culprit"] = True
        return d

    def explanation(self) -> str:
        states = sorted(self.model.describe_state(s) for s in self.states)
        could = "could be in no state" if not states else f"could only be {states[0]}" if len(states) == 1 \
            else f"could only be one of {', '.join(states)}"
        return (f"{self.model.describe(self.culprit)} (history entry {self.culprit.index}) cannot be explained: "
                f"whatever took effect before it returned, the state {could}")

    def render(self, format_time: Callable[[float], str] = repr) -> str:
        """A table of the operations (entry index, process, times, operation, status), the culprit
        marked, and why it cannot be explained."""
        where = "" if self.key is None else f" on {self.model.part_name} {self.key!r}"
        others = self.part_size - len(self.ops)
        size = (f"{plural(len(self.ops), 'operation')}{where} cannot all be explained"
                + (f", whichever of the {plural(others, 'other')} took effect" if others else ""))
        size += ("; without any one of them, the rest can be explained" if self.minimal
                 else "; not shrunk to a minimum (shrink budget exhausted)")
        rows = [("entry", "process", "invoke", "return", "operation", "status")]
        for op in self.ops:
            ret = "never" if op.ret is None else format_time(op.ret)
            mark = "  <- cannot be explained" if op is self.culprit else ""
            rows.append((str(op.index), str(op.process), format_time(op.invoke), ret,
                         self.model.describe(op), op.status + mark))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in rows]
        return "\n".join([f"not linearizable: {size}", *lines, self.explanation()])


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@dataclass
class PartResult:
    key: Any
    size: int
    ok: bool | None
    steps: int
    order: list[Operation] = field(default_factory=list)  # a linearization, when ok


@dataclass
class Result:
    """``ok``: True (linearizable), False (not; see ``counterexample``), None (undecided, see
    ``reason``). ``parts`` gives each part's answer."""

    ok: bool | None
    parts: list[PartResult]
    counterexample: Counterexample | None = None
    reason: str = ""
    steps: int = 0
    part_name: str = ""  # what the model's parts are ("key"), "" when it has one part

    @property
    def failed_keys(self) -> list[Any]:
        return [p.key for p in self.parts if p.ok is False]

    def summary(self) -> str:
        ops = sum(p.size for p in self.parts)
        part = self.part_name
        if self.ok:
            within = f" on {plural(len(self.parts), part)}" if part else ""
            return f"linearizable: {plural(ops, 'operation')}{within}, {self.steps:,} model steps"
        if self.ok is None:
            return f"unknown: {self.reason}"
        bad = self.failed_keys
        keys = "" if not part else f" on {len(bad)} of {plural(len(self.parts), part)}: " \
            f"{', '.join(repr(k) for k in bad[:5])}{', ...' if len(bad) > 5 else ''}"
        return f"not linearizable{keys}"

    def render(self, format_time: Callable[[float], str] = repr) -> str:
        if self.counterexample is None:
            return self.summary()
        return self.summary() + "\n" + self.counterexample.render(format_time)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "summary": self.summary(), "steps": self.steps}
        if self.reason:
            out["reason"] = self.reason
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample.to_dict()
        return out


def jsonable(value: Any) -> Any:
    """``value`` with what JSON cannot hold turned into text (bytes as hex)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if value is UNKNOWN:
        return None
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return repr(value)


def prepare(history: Iterable[Mapping[str, Any] | Operation], model: Model) -> list[Operation]:
    """The operations of ``history``, validated against ``model`` (`HistoryError` on a bad one)."""
    ops = history_from_dicts(history)
    for op in ops:
        model.validate(op)
    return ops


def check(history: Iterable[Mapping[str, Any] | Operation], model: Model | None = None,
          budget: Budget = Budget()) -> Result:
    """Is ``history`` linearizable with respect to ``model`` (default: `KeyValue`)? See `_check`.
    Python's cycle collector is paused meanwhile: the search allocates millions of small
    objects and no cycles, and the collector's passes cost a third of the time on 100,000
    operations."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _check(history, model or KeyValue(), budget)
    finally:
        if paused:
            gc.enable()


def _check(history: Iterable[Mapping[str, Any] | Operation], model: Model, budget: Budget) -> Result:
    """Each part first gets a short search (a share of the budget, at most `PROBE_STEPS`, and
    at most one operation of unknown outcome taking effect in a row), which decides most; an
    undecided part may then be refuted by a window at the furthest point its search reached;
    the parts still undecided share what is left of the budget in a full search. So an easy
    violation on one key is found even when another key is too hard to decide."""
    ops = prepare(history, model)
    deadline = None if budget.timeout is None else time.monotonic() + budget.timeout
    allowance = Allowance(budget.max_steps, deadline)
    split = model.partition(ops)
    found: list[Search | None] = [None] * len(split)
    small: list[Shrunk | None] = [None] * len(split)
    for i, (key, part) in enumerate(split):
        if allowance.expired():
            break
        probe = min(PROBE_STEPS, max(PROBE_PER_OP * len(part), 20_000))
        share = Allowance(min(probe, max(allowance.steps // (len(split) - i), 1)), deadline)
        found[i] = first = search(part, model, share, chain=1)
        allowance.steps -= first.steps
        if first.linearizable is False and first.limited:  # not a proof: search again in full
            first.linearizable, first.deepest = None, first.stuck
        if first.linearizable is None and budget.shrink_steps:
            for hint in dict.fromkeys(h for h in (first.starved_by, first.deepest) if h is not None):
                small[i] = refute(part, hint, model, budget.shrink_steps)
                if small[i] is not None:
                    first.linearizable = False
                    break
    for i, (key, part) in enumerate(split):
        first = found[i]
        if first is not None and first.linearizable is None and not allowance.expired():
            found[i] = again = search(part, model, allowance)
            again.steps += first.steps
    parts = [PartResult(key, len(part), None, 0) if f is None else
             PartResult(key, len(part), f.linearizable, f.steps, f.order) for (key, part), f in zip(split, found)]
    steps = sum(p.steps for p in parts)
    bad = next((i for i, p in enumerate(parts) if p.ok is False), None)
    if bad is None:
        undecided = next((i for i, p in enumerate(parts) if p.ok is None), None)
        if undecided is None:
            return Result(True, parts, steps=steps, part_name=model.part_name)
        return Result(None, parts, reason=_budget_reason(budget, model, *split[undecided]), steps=steps,
                      part_name=model.part_name)
    key, part = split[bad]
    first = found[bad]
    assert first is not None
    shrunk = small[bad] or shrink_found(part, first, model, budget.shrink_steps)
    cx = Counterexample(key, shrunk.ops, shrunk.culprit, shrunk.states, shrunk.minimal, len(part), model)
    return Result(False, parts, cx, steps=steps, part_name=model.part_name)


def _budget_reason(budget: Budget, model: Model, key: Any, part: list[Operation]) -> str:
    where = "" if key is None else f" on {model.part_name} {key!r}"
    pending = sum(op.pending for op in part)
    limit = f"{budget.max_steps:,} model steps" + ("" if budget.timeout is None else f" or {budget.timeout}s")
    return (f"the search{where} ({len(part)} operations, {pending} of them with unknown outcome) did not finish "
            f"within {limit}; raise the budget or shorten the history")


EntriesOf = Callable[[Event], "Mapping[str, Any] | Iterable[Mapping[str, Any]] | None"]


class Linearizable(Checker):
    """The clients' operations, as the run observed them, are linearizable.

    ``entries_of(event)`` turns an observed event (by default only ``deliver`` events; widen
    ``kinds`` to also see ``command`` events) into history entries: one dict, a list of dicts,
    or None to ignore the event. Either shape of `harness.checkers.history` works; times are the
    events' ``time_ns``. Operations invoked but never completed by the end of the run are
    pending (they may or may not have taken effect). The verdict fails with the smallest
    counterexample as evidence, or fails as undecided when the budget runs out (never a pass
    that was not proved)."""

    name = "linearizable"
    clause = ""
    kinds = frozenset({DELIVER})

    def __init__(self, entries_of: EntriesOf, model: Model | None = None, *, kinds: Iterable[str] | None = None,
                 roles: Iterable[str] | None = None, clause: str = "", budget: Budget = Budget(),
                 max_steps: int | None = None, shrink_steps: int | None = None, **params: Any) -> None:
        """``max_steps`` and ``shrink_steps``, when given (a scenario's check parameters, say),
        override those of ``budget``."""
        super().__init__(**params)
        self.entries_of = entries_of
        self.model = model or KeyValue()
        if kinds is not None:
            self.kinds = frozenset(kinds)
        if roles is not None:
            self.roles = frozenset(roles)
        if clause:
            self.clause = clause
        self.budget = replace(budget, **{k: v for k, v in (("max_steps", max_steps), ("shrink_steps", shrink_steps))
                                         if v is not None})
        self.entries: list[Mapping[str, Any]] = []

    def on_event(self, ev: Event) -> None:
        got = self.entries_of(ev)
        if got is None:
            return
        if isinstance(got, Mapping):
            self.entries.append(got)
        else:
            self.entries.extend(got)

    def finish(self, end_ns: int) -> list[Verdict]:
        try:
            result = check(self.entries, self.model, self.budget)
        except HistoryError as e:
            return [self.fail(f"the history of client operations is malformed: {e}")]
        if result.ok:
            return [self.ok(result.summary())]
        if result.ok is None:
            return [self.fail(result.summary(), [{"undecided": True, "reason": result.reason}])]
        cx = result.counterexample
        assert cx is not None
        header = {"key": jsonable(cx.key), "minimal": cx.minimal, "explanation": cx.explanation(),
                  "table": cx.render(format_ms)}
        return [self.fail(f"{result.summary()}: {cx.explanation()}",
                          [header, *(cx.op_dict(op) for op in cx.ops)])]


def format_ms(ns: float) -> str:
    """A time in nanoseconds shown in milliseconds."""
    return f"{ns / 1e6:.3f}ms"
