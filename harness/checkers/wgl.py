"""The search of the linearizability checker: Wing & Gong's algorithm with Lowe's memoisation,
as Porcupine implements it, for one independent part of a history.

The operations' call and return entries sit in one doubly linked list in time order (calls
before returns at equal times: operations that touch are concurrent). The search walks the list
from its head: at a call entry it tries to linearize that operation next (the model accepts its
output in the current state); if so it records the choice on a stack, lifts the operation's
call and return entries out of the list and starts again from the head. Reaching a return entry
means an operation that has already returned has not been linearized: the last choice is
undone (backtracking) and the walk goes on after it. A configuration (which operations are
linearized, the state) already explored is never explored again.

What differs from Porcupine, and why:

* A pending operation (status info) has no return entry: nothing forces it to be linearized,
  so it may take effect any time after its call or never. Pending operations are kept out of
  the list and tried only when the walk reaches a return entry (completed operations first:
  most of the time no pending one is needed). The search succeeds as soon as every completed
  operation is linearized. A pending operation the model calls read-only is left out, and of
  pending operations with the same effect (`Model.effect`) only the earliest unused is tried.
* The set of linearized completed operations is kept as (lowest unlinearized rank, bitset of
  the ranks above it): every operation below that rank is linearized, so the key stays as small
  as the concurrency, not the history (memory stays flat on long histories).
* Pending operations get their own bitset, and a configuration is skipped when one already
  explored has the same completed set and state and linearized a subset of its pending
  operations (it can do everything this one can). Right after a pending operation, a blind
  write (`Model.blind`) is not tried: the pair leaves what the write alone leaves.
* A read-only operation (`Model.read_only`) is linearized as soon as the state allows, and
  trying it later instead is never explored: it cannot help.
* Value flow (`Model.demand`, `Model.supply`): an order that leaves a state which some
  unlinearized operation demands, while nothing left can supply it again, is abandoned at once
  (with unique values, a write must not overwrite a value still to be read).
* Optional operations (for the shrinker) may be left out when the walk reaches their return.
* ``chain`` bounds pending operations taken in a row, for a quick first search.
* A step budget (and an optional deadline) stops a search that would take too long; the answer
  is then "unknown", never a guess.

Each of these is checked against a brute-force oracle (tests/checkers/lin_oracle.py). The main
loop is one function on purpose: it runs millions of times, and calls cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Sequence

from harness.checkers.history import FAIL, INFO, Operation
from harness.checkers.models import ANYTHING, NOTHING, REJECT, Model


class Allowance:
    """Model steps (and optionally wall time) left for one or more searches."""

    def __init__(self, steps: int, deadline: float | None = None) -> None:
        self.steps = steps
        self.deadline = deadline  # time.monotonic() value, or None

    def expired(self) -> bool:
        return self.steps <= 0 or (self.deadline is not None and time.monotonic() >= self.deadline)


@dataclass
class Search:
    """The outcome of one search. ``linearizable`` is None when the allowance ran out."""

    linearizable: bool | None
    steps: int
    ops: list[Operation]                      # the operations searched (pending reads dropped)
    order: list[Operation] = field(default_factory=list)  # a linearization, when there is one
    # When not linearizable: the operation whose return could never be passed (every order of
    # the operations that returned before it leaves it unexplained), the states the search had
    # when it got there, and the operations that can matter: those called before that return
    # (all of them when the value-flow check looked further ahead; see `search`).
    stuck: Operation | None = None
    stuck_states: list[Any] = field(default_factory=list)
    prefix: list[Operation] = field(default_factory=list)
    # When undecided: the operation whose return was the furthest the search got (a hint).
    deepest: Operation | None = None
    limited: bool = False  # the ``chain`` limit cut some choices: a failure proves nothing
    # The latest operation demanding a state the value-flow check found starved (a hint).
    starved_by: Operation | None = None


def searchable(ops: Sequence[Operation], model: Model, optional: frozenset[int] = frozenset()) -> list[Operation]:
    """The operations that can matter, in call order: definite failures never took effect, and
    a read-only operation that need not be explained (pending or optional) cannot change anything."""
    live = [op for op in ops if op.status != FAIL
            and not ((op.status == INFO or op.index in optional) and model.read_only(op))]
    live.sort(key=attrgetter("index"))  # two stable sorts: by invoke, ties by index (fast when sorted)
    live.sort(key=attrgetter("invoke"))
    return live


INIT: Any = type("Init", (), {"__repr__": lambda self: "INIT"})()  # "start from model.init()"

# Choices on the stack, besides the class number of a pending op (>= 0):
COMPLETED, READ, DROPPED = -1, -2, -3
DOMINANCE_SCAN = 24  # configurations compared for pending-op dominance per key (the rest: exact)
FLOW_SUPPLIERS = 4   # value flow on when states have at most this many suppliers on average


def search(ops: Sequence[Operation], model: Model, allowance: Allowance,
           optional: frozenset[int] = frozenset(), initial: Any = INIT, chain: int | None = None,
           flow: bool = True, max_states: int = 8) -> Search:
    """Searches for a linearization of ``ops`` starting from ``initial`` (default: the model's
    ``init()``). Completed operations whose ``index`` is in ``optional`` need not take effect
    (if one does, it is within its interval with its output; the search ends when every other
    completed operation is linearized); the shrinker uses both to ask whether some operations
    can be explained whatever the others did.

    ``chain`` limits how many pending operations may take effect in a row, with no completed
    one between: a quick search that finds most linearizations without trying the chains of
    timed-out operations that can make a dead end very expensive to leave. If it finds none and
    the limit was reached (``Search.limited``), that proves nothing; search again without it.

    ``flow`` prunes orders that starve a demanded state (`Model.demand`, `Model.supply`). It
    looks ahead, so when it fired, a failure depends on operations called after the return the
    search could not pass, and ``prefix`` is then every operation; the shrinker, which needs the
    shorter prefix, searches without it."""
    live = searchable(ops, model, optional)
    done = [op for op in live if not op.pending]
    n = len(done)
    steppers = [model.stepper(op) for op in done]
    pure = [model.read_only(op) for op in done]
    droppable = [op.index in optional for op in done]
    need = [0 if d else 1 for d in droppable]  # only mandatory ops must be resolved
    blind = [model.blind(op) for op in done]
    # Pending operations, grouped into classes of interchangeable ones (same effect), each in
    # call order: only the earliest unused member of a class is ever tried.
    classes: dict[Any, list[Operation]] = {}
    for op in live:
        if op.pending:
            label = model.effect(op)
            classes.setdefault(op.index if label is None else ("effect", label), []).append(op)
    members = list(classes.values())
    nclasses = len(members)
    pend_steppers = [[model.stepper(op) for op in m] for m in members]
    pend_invoke = [[op.invoke for op in m] for m in members]
    pend_blind = [model.blind(m[0]) for m in members]
    pend_bit = []  # the bit of each pending op in the pending bitset
    bit = 0
    for m in members:
        pend_bit.append([1 << (bit + k) for k in range(len(m))])
        bit += len(m)
    used = [0] * nclasses  # members used, per class (always the earliest ones)

    # Value flow: how many unresolved mandatory ops demand each state, how many unresolved ops
    # may still supply it. Leaving a state that is demanded and that nothing can supply again
    # is a dead end, pruned at once (when the model tells demands and supplies).
    demand = [NOTHING if d else model.demand(op) for op, d in zip(done, droppable)]
    gives = [model.supply(op) for op in done]
    pend_gives = [model.supply(m[0]) for m in members]
    flow = flow and ANYTHING not in gives and ANYTHING not in pend_gives
    if flow:
        # It pays when states have few suppliers (unique values); with a handful of values
        # written over and over it never fires and only costs: then it is off.
        supplied = [g for g in gives if g is not NOTHING]
        flow = len(set(supplied)) * FLOW_SUPPLIERS >= len(supplied) + sum(len(m) for m in members)
    starved: list[Any] = []  # the states the value-flow check saw starved
    wanted: dict[Any, int] = {}
    offered: dict[Any, int] = {}
    if flow:
        for d in demand:
            if d is not NOTHING:
                wanted[d] = wanted.get(d, 0) + 1
        for g in gives:
            if g is not NOTHING:
                offered[g] = offered.get(g, 0) + 1
        for g, m in zip(pend_gives, members):
            if g is not NOTHING:
                offered[g] = offered.get(g, 0) + len(m)

    # The list: call entry of completed op i is i, its return n + i; head 2n, tail 2n + 1.
    # Completed ops are numbered in call order; pending ones live outside the list.
    head, tail = 2 * n, 2 * n + 1
    order = [head, *_timeline(done), tail]
    nxt = [0] * (2 * n + 2)
    prv = [0] * (2 * n + 2)
    position = [0] * (2 * n + 2)
    for k in range(len(order) - 1):
        nxt[order[k]] = order[k + 1]
        prv[order[k + 1]] = order[k]
        position[order[k]] = k
    ret_time = [0.0] * n + [op.ret for op in done]  # type: ignore[misc]

    state = model.init() if initial is INIT else initial
    lo = 0       # lowest completed op not yet resolved (linearized, or dropped when optional)
    window = 0   # bit r: completed op lo + r is resolved (bit 0 always clear)
    pbits = 0    # the pending ops linearized
    remaining = n - sum(droppable)
    seen_plain: set[tuple[int, int, Any]] = set()
    seen_pending: dict[tuple[int, int, Any], list[int]] = {}
    seen_overflow: set[tuple[int, int, Any, int]] = set()
    # A choice: (op or entry, state before, lo, window, pbits, what): what is the class of a
    # pending op, or COMPLETED, READ (a read-only op, linearized as soon as it could be: trying
    # it later instead cannot help) or DROPPED (an optional op left out).
    stack: list[tuple[int, Any, int, int, int, int]] = []
    steps = 0
    budget = allowance.steps
    deadline = allowance.deadline
    check_clock = 0
    best_pos = -1
    best_states: list[Any] = []
    verdict: bool | None = True

    def fresh(key: tuple[int, int, Any], pb: int) -> bool:
        """Records a configuration; False if it, or one that dominates it, was seen."""
        nonlocal steps
        known = seen_pending.get(key)
        if known is None:
            seen_pending[key] = [pb]
            return True
        steps += len(known) >> 3  # the comparisons are work too
        if any(p | pb == pb for p in known):
            return False
        if len(known) < DOMINANCE_SCAN:
            known.append(pb)
            return True
        full = (*key, pb)
        if full in seen_overflow:
            return False
        seen_overflow.add(full)
        return True

    def starving(before: Any, after: Any, supplied: Any) -> Any:
        """The state a step from ``before`` to ``after`` (that used up a supplier of
        ``supplied``) leaves demanded with nobody left to supply it, or NOTHING."""
        if after != before and wanted.get(before, 0) and not offered.get(before, 0):
            return before
        if supplied is not NOTHING and supplied != after and wanted.get(supplied, 0) and not offered[supplied]:
            return supplied
        return NOTHING

    def resolved(i: int) -> tuple[int, int]:
        """(lo, window) once completed op i is resolved."""
        bit = 1 << (i - lo)
        nwin = window | bit
        if bit != 1:
            return lo, nwin
        ones = (nwin ^ (nwin + 1)).bit_length() - 1  # slide the window past the run of ones
        return lo + ones, nwin >> ones

    e = nxt[head]
    cls = -1  # >= 0: at return entry e, the next class of pending ops to try
    # Pending ops taken in a row at the top of the stack. After one, a blind write would
    # overwrite it, which the configuration before it can do without it (and does, elsewhere).
    run = 0
    limited = False
    while remaining:
        if e < n:  # a call entry: try to linearize completed op e now
            if run and blind[e]:
                e = nxt[e]
                continue
            steps += 1
            new = steppers[e](state)
            if new is REJECT:
                e = nxt[e]
                continue
            bit = 1 << (e - lo)
            nwin = window | bit
            nlo = lo
            if bit == 1:  # the lowest gap is filled: slide the window past the run of ones
                ones = (nwin ^ (nwin + 1)).bit_length() - 1
                nwin >>= ones
                nlo = lo + ones
            if flow:
                d, g = demand[e], gives[e]
                if d is not NOTHING:
                    wanted[d] -= 1
                if g is not NOTHING:
                    offered[g] -= 1
                dead = starving(state, new, g)
                if dead is not NOTHING:
                    if d is not NOTHING:
                        wanted[d] += 1
                    if g is not NOTHING:
                        offered[g] += 1
                    if dead not in starved:
                        starved.append(dead)
                    e = nxt[e]
                    continue
            key = (nlo, nwin, new)
            if nclasses:
                fresh_key = fresh(key, pbits)
            elif key in seen_plain:
                fresh_key = False
            else:
                seen_plain.add(key)
                fresh_key = True
            if not fresh_key:
                if flow:
                    if d is not NOTHING:
                        wanted[d] += 1
                    if g is not NOTHING:
                        offered[g] += 1
                e = nxt[e]
                continue
            stack.append((e, state, lo, window, pbits, READ if pure[e] else COMPLETED))
            state, lo, window = new, nlo, nwin
            remaining -= need[e]
            run = 0
            # lift the call entry and its return entry out of the list
            p, q = prv[e], nxt[e]
            nxt[p] = q
            prv[q] = p
            r = n + e
            p, q = prv[r], nxt[r]
            nxt[p] = q
            prv[q] = p
            e = nxt[head]
            continue
        # A return entry: the op returning here is not linearized yet. It may be left out if
        # optional; pending ops called before it may take effect now; else undo the last choice.
        if cls < 0:
            pos = position[e]
            if pos >= best_pos:
                if pos > best_pos:
                    best_pos, best_states = pos, []
                if len(best_states) < max_states and state not in best_states:
                    best_states.append(state)
            cls = 0
            i = e - n
            g = gives[i]
            if droppable[i] and flow and g is not NOTHING and g != state and wanted.get(g, 0) \
                    and offered[g] == 1:
                if g not in starved:  # leaving it out: a demanded state without supplier
                    starved.append(g)
            elif droppable[i]:
                steps += 1
                nlo, nwin = resolved(i)
                key = (nlo, nwin, state)
                if fresh(key, pbits) if nclasses else key not in seen_plain:
                    if flow and g is not NOTHING:
                        offered[g] -= 1
                    if not nclasses:
                        seen_plain.add(key)
                    stack.append((i, state, lo, window, pbits, DROPPED))
                    lo, window = nlo, nwin
                    for x in (i, e):
                        p, q = prv[x], nxt[x]
                        nxt[p] = q
                        prv[q] = p
                    e, cls = nxt[head], -1
                    continue
        cut = ret_time[e]
        pushed = False
        if chain is not None and run >= chain and cls < nclasses:
            if not limited:
                limited = any(used[c] < len(pend_invoke[c]) and pend_invoke[c][used[c]] <= cut
                              for c in range(cls, nclasses))
            cls = nclasses
        while cls < nclasses:
            k = used[cls]
            if k < len(pend_invoke[cls]) and pend_invoke[cls][k] <= cut and not (run and pend_blind[cls]):
                steps += 1
                new = pend_steppers[cls][k](state)
                g = pend_gives[cls]
                if new is not REJECT and flow:
                    if g is not NOTHING:
                        offered[g] -= 1
                    dead = starving(state, new, g)
                    if dead is not NOTHING:
                        if dead not in starved:
                            starved.append(dead)
                        new = REJECT
                    if g is not NOTHING:
                        offered[g] += 1
                if new is not REJECT:
                    npb = pbits | pend_bit[cls][k]
                    if fresh((lo, window, new), npb):
                        if flow and g is not NOTHING:
                            offered[g] -= 1
                        stack.append((e, state, lo, window, pbits, cls))
                        state, pbits = new, npb
                        used[cls] = k + 1
                        pushed = True
                        run += 1
                        break
            cls += 1
        if pushed:
            e, cls = nxt[head], -1
            continue
        while True:  # undo the last choice that has an alternative
            if not stack:
                verdict = False
                break
            if steps > budget:
                verdict = None
                break
            check_clock += 1
            if deadline is not None and check_clock & 1023 == 0 and time.monotonic() >= deadline:
                verdict = None
                break
            x, state, lo, window, pbits, what = stack.pop()
            run = 0
            for below in reversed(stack):
                if below[5] >= 0:
                    run += 1
                elif below[5] != DROPPED:
                    break
            if what >= 0:  # a pending op: go on with the next class at the same return entry
                used[what] -= 1
                if flow and pend_gives[what] is not NOTHING:
                    offered[pend_gives[what]] += 1
                e, cls = x, what + 1
                break
            if flow:
                if demand[x] is not NOTHING:
                    wanted[demand[x]] += 1
                if gives[x] is not NOTHING:
                    offered[gives[x]] += 1
            remaining += need[x]
            r = n + x
            nxt[prv[r]] = r
            prv[nxt[r]] = r
            nxt[prv[x]] = x
            prv[nxt[x]] = x
            if what == COMPLETED:
                e, cls = nxt[x], -1
                break
            if what == DROPPED:  # back at its return entry: try the pending ops there
                e, cls = r, 0
                break
            # READ: no alternative; undo the choice before it too
        if verdict is not True:
            break
    allowance.steps -= steps
    result = Search(verdict, steps, live, limited=limited)
    if verdict:
        taken = [0] * nclasses  # members are used in call order along the path
        for s in stack:
            if s[5] >= 0:
                result.order.append(members[s[5]][taken[s[5]]])
                taken[s[5]] += 1
            elif s[5] != DROPPED:
                result.order.append(done[s[0]])
    elif verdict is False:
        stuck = done[order[best_pos] - n]
        result.stuck = stuck
        result.stuck_states = best_states
        result.prefix = live if starved else [op for op in live if op.invoke <= stuck.ret]  # type: ignore[operator]
    elif best_pos >= 0:
        result.deepest = done[order[best_pos] - n]
    if verdict is not True and starved:
        # the latest operation demanding a starved state: where a violation likely shows
        wanting = [op for op, d in zip(done, demand) if d is not NOTHING and d in starved]
        if wanting:
            result.starved_by = max(wanting, key=lambda o: (o.ret, o.index))
    return result


def _timeline(done: list[Operation]) -> list[int]:
    """The entries of completed ops (in call order) sorted by time, calls before returns at
    equal times: a merge of the calls (sorted already) and the returns (sorted by a stable sort,
    so ties stay in call order)."""
    n = len(done)
    rets = [op.ret for op in done]
    by_ret = sorted(range(n), key=rets.__getitem__)
    out: list[int] = []
    j = 0
    for i, op in enumerate(done):
        t = op.invoke
        while j < n and rets[by_ret[j]] < t:  # type: ignore[operator]
            out.append(n + by_ret[j])
            j += 1
        out.append(i)
    out.extend(n + r for r in by_ret[j:])
    return out
