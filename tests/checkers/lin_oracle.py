"""A brute-force linearizability oracle for small key-value histories, written independently of
the checker (no partitioning, no memoisation tricks, its own store semantics), to compare with.

It tries every choice of which pending and optional operations take effect and every order of
the operations that do, respecting real time (an operation that returned strictly before
another was invoked comes first), on a plain dict."""

from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable

from harness.checkers.history import Operation


def _frozen(v: Any) -> Any:
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


def apply(store: tuple, op: Operation, check_output: bool) -> tuple | None:
    """The store after ``op`` (a sorted tuple of items), or None when its output is impossible."""
    d = dict(store)
    key = op.input["key"]
    if op.f == "put":
        d[key] = _frozen(op.input["value"])
    elif op.f == "delete":
        d.pop(key, None)
    elif op.f == "get":
        if check_output and d.get(key) != _frozen(op.output):
            return None
    elif op.f == "cas":
        hit = d.get(key) == _frozen(op.input["expected"])
        if check_output and op.output != hit:
            return None
        if hit:
            d[key] = _frozen(op.input["new"])
    else:
        raise ValueError(op.f)
    return tuple(sorted(d.items(), key=repr))


def _orderable(chosen: list[Operation], store: tuple) -> bool:
    # DFS over orders; constraint: a (with a return) before b when a.ret < b.invoke.
    dead: set[tuple[frozenset[int], tuple]] = set()  # (placed, store) already refuted

    def go(placed: frozenset[int], store: tuple) -> bool:
        if len(placed) == len(chosen):
            return True
        if (placed, store) in dead:
            return False
        dead.add((placed, store))
        for i, op in enumerate(chosen):
            if i in placed:
                continue
            if any(j not in placed and other.ret is not None and not other.pending and other.ret < op.invoke
                   for j, other in enumerate(chosen)):
                continue
            nxt = apply(store, op, not op.pending)
            if nxt is not None and go(placed | {i}, nxt):
                return True
        return False

    return go(frozenset(), store)


def linearizable(ops: Iterable[Operation], optional: Iterable[int] = ()) -> bool:
    """Whether the history is linearizable; ``optional`` ops (by index) may be left out."""
    ops = [op for op in ops if op.status != "fail"]
    may = set(optional)
    must = [op for op in ops if not op.pending and op.index not in may]
    maybe = [op for op in ops if op.pending or op.index in may]
    for k in range(len(maybe) + 1):
        for extra in combinations(maybe, k):
            if _orderable(must + list(extra), ()):
                return True
    return False


def valid_order(order: list[Operation], ops: Iterable[Operation]) -> str:
    """'' if ``order`` is a linearization of ``ops`` (every completed op once, pending ones at
    most once, real time respected, outputs right), else what is wrong."""
    ops = [op for op in ops if op.status != "fail"]
    ids = [op.index for op in order]
    if len(set(ids)) != len(ids):
        return "an operation appears twice"
    missing = [op.index for op in ops if not op.pending and op.index not in set(ids)]
    if missing:
        return f"completed operations {missing} are missing"
    pos = {op.index: k for k, op in enumerate(order)}
    for a in order:
        for b in order:
            if not a.pending and a.ret is not None and a.ret < b.invoke and pos[a.index] > pos[b.index]:
                return f"{a.index} returned before {b.index} was invoked but comes after it"
    store: tuple | None = ()
    for op in order:
        store = apply(store, op, not op.pending)
        if store is None:
            return f"operation {op.index} ({op.f}) cannot return {op.output!r} there"
    return ""
