"""The linearizability checker: classic histories (from the Porcupine and Knossos test suites
and the literature), agreement with a brute-force oracle on every small history hypothesis
finds, histories of a real atomic store (always linearizable, with a valid witness), corrupted
reads (never linearizable, with a minimal faithful counterexample), the history format's
errors, determinism, the budget, and the run checker fed by observed events."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checkers.base import COMMAND, DELIVER, Observer
from harness.checkers.history import INFO, UNKNOWN, HistoryError, Operation, history_from_dicts
from harness.checkers.history_gen import atomic_kv_history
from harness.checkers.linearizability import Budget, Linearizable, check, prepare
from harness.checkers.models import KeyValue, Register
from harness.checkers.wgl import Allowance, search
from tests.checkers import lin_oracle

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def op(process: Any, f: str, invoke: float, ret: float | None, output: Any = None, status: str | None = None,
       key: str = "x", **inp: Any) -> dict[str, Any]:
    d = {"process": process, "f": f, "input": {"key": key, **inp}, "invoke": invoke, "return": ret, "output": output}
    if status:
        d["status"] = status
    return d


def put(p: Any, v: Any, a: float, b: float | None, **kw: Any) -> dict[str, Any]:
    return op(p, "put", a, b, value=v, **kw)


def get(p: Any, out: Any, a: float, b: float | None, **kw: Any) -> dict[str, Any]:
    return op(p, "get", a, b, output=out, **kw)


def cas(p: Any, exp: Any, new: Any, out: Any, a: float, b: float | None, **kw: Any) -> dict[str, Any]:
    return op(p, "cas", a, b, output=out, expected=exp, new=new, **kw)


def delete(p: Any, a: float, b: float | None, **kw: Any) -> dict[str, Any]:
    return op(p, "delete", a, b, **kw)


# --- classic histories -------------------------------------------------------------------------

CLASSIC = {
    # Porcupine's register test (6.824 quiz, 2017): a read concurrent with a write may see
    # either value; a read after one that saw the new value cannot see the old one.
    "porcupine quiz, linearizable": (True, [put(0, 100, 0, 100), get(1, 100, 25, 75), get(2, 0, 30, 60)]),
    "porcupine quiz, new then old": (False, [put(0, 200, 0, 100), get(1, 200, 10, 30), get(2, 0, 40, 90)]),
    # Knossos' README: a read of a value nobody wrote.
    "read of a value never written": (False, [put(0, 1, 0, 1), get(1, 2, 2, 3)]),
    "stale read": (False, [put(0, 1, 0, 1), put(1, 2, 2, 3), get(0, 1, 4, 5)]),
    "concurrent read may see old or new": (True, [put(0, 1, 0, 1), put(1, 2, 2, 10), get(0, 1, 4, 5), get(2, 2, 6, 7)]),
    "no flip-flop: new, then old, while a write is in flight": (
        False, [put(0, 1, 0, 1), put(1, 2, 2, 20), get(0, 2, 4, 5), get(2, 1, 6, 7)]),
    "lost write": (False, [put(0, 1, 0, 2), put(1, 2, 1, 3), get(0, 1, 4, 5), get(1, 2, 6, 7)]),
    "read your write": (False, [put(0, 1, 0, 1), get(0, None, 2, 3)]),
    "touching intervals are concurrent": (True, [put(0, 1, 0, 5), get(1, None, 5, 6)]),
    "a read after the write returned sees it": (False, [put(0, 1, 0, 5), get(1, None, 6, 7)]),
    "cas race: both succeed": (False, [put(0, 0, 0, 1), cas(1, 0, 1, True, 2, 5), cas(2, 0, 2, True, 3, 6)]),
    "cas race: one wins": (True, [put(0, 0, 0, 1), cas(1, 0, 1, True, 2, 5), cas(2, 0, 2, False, 3, 6), get(0, 1, 7, 8)]),
    "cas race: the loser's value is read": (
        False, [put(0, 0, 0, 1), cas(1, 0, 1, True, 2, 5), cas(2, 0, 2, False, 3, 6), get(0, 2, 7, 8)]),
    "cas false must see another value": (False, [put(0, 3, 0, 1), cas(1, 3, 4, False, 2, 3)]),
    "cas on a missing key": (True, [cas(1, None, 7, True, 0, 1), get(0, 7, 2, 3)]),
    "delete then read": (True, [put(0, 1, 0, 1), delete(1, 2, 3), get(0, None, 4, 5)]),
    "read after delete sees nothing": (False, [put(0, 1, 0, 1), delete(1, 2, 3), get(0, 1, 4, 5)]),
    # Pending (info) operations: may take effect any time after their invoke, or never.
    "pending write must take effect": (True, [put(0, 1, 0, None), get(1, 1, 10, 11)]),
    "pending write may never take effect": (True, [put(0, 1, 0, None), get(1, None, 10, 11)]),
    "pending write takes effect after the client gave up": (
        True, [put(0, 1, 0, 2, status="info"), get(1, None, 3, 4), get(1, 1, 5, 6)]),
    "pending write cannot act before its invoke": (False, [get(1, 1, 0, 1), put(0, 1, 2, None)]),
    "pending write takes effect once": (
        False, [put(0, 1, 0, None), get(1, 1, 2, 3), put(1, 2, 4, 5), get(1, 1, 6, 7)]),
    "two pending writes of one value each count": (
        True, [put(0, 1, 0, None), put(2, 1, 0, None), get(1, 1, 2, 3), put(1, 2, 4, 5), get(1, 1, 6, 7)]),
    "pending cas applies only if it matches": (
        False, [put(0, 0, 0, 1), cas(1, 5, 6, None, 2, None), get(0, 6, 3, 4)]),
    "pending cas took effect, no going back": (
        False, [put(0, 0, 0, 1), cas(1, 0, 1, None, 2, None), get(0, 1, 3, 4), get(0, 0, 5, 6)]),
    "failed write never took effect": (False, [put(0, 1, 0, 1, status="fail"), get(1, 1, 2, 3)]),
    "a pending read constrains nothing": (True, [put(0, 1, 0, 1), get(1, 7, 2, None)]),
}


@pytest.mark.parametrize("name", list(CLASSIC))
def test_classic_histories(name: str) -> None:
    want, history = CLASSIC[name]
    model = KeyValue(initial=0) if name.startswith("porcupine") else KeyValue()
    result = check(history, model)
    assert result.ok is want, result.render()
    ops = prepare(history, model)
    assert lin_oracle.linearizable(ops) is want or name.startswith("porcupine")
    if want:
        assert not lin_oracle.valid_order(result.parts[0].order, ops) or name.startswith("porcupine")
    else:
        cx = result.counterexample
        assert cx is not None and cx.minimal and cx.culprit in cx.ops


def test_stale_read_counterexample_names_the_read_and_the_writes() -> None:
    history = [put("a", 1, 0, 10), put("b", 2, 20, 30), get("a", 1, 40, 50),
               put("c", 5, 0, 10, key="y"), get("c", 5, 20, 30, key="y")]
    result = check(history)
    assert result.ok is False and result.failed_keys == ["x"]
    cx = result.counterexample
    assert cx is not None and cx.key == "x" and cx.minimal
    # put 1 is not needed: whether it took effect or not, put 2 came after it, before the read
    assert [o.index for o in cx.ops] == [1, 2] and cx.culprit.index == 2 and cx.states == [2]
    text = result.render()
    assert "get('x') -> 1" in text and "<- cannot be explained" in text and "the state could only be 2" in text
    evidence = json.loads(json.dumps(result.to_dict()))
    assert evidence["counterexample"]["culprit"] == 2 and evidence["counterexample"]["minimal"] is True
    assert [o["operation"] for o in evidence["counterexample"]["operations"]] == ["put('x', 2)", "get('x') -> 1"]


def test_keys_are_checked_independently() -> None:
    history = [put(0, 1, 0, 1, key="a"), get(1, 1, 2, 3, key="a"),
               put(0, 1, 4, 5, key="b"), get(1, 2, 6, 7, key="b"), get(2, None, 0, 9, key="c")]
    result = check(history)
    assert result.ok is False and result.failed_keys == ["b"]
    assert [(p.key, p.ok) for p in result.parts] == [("a", True), ("b", False), ("c", True)]


# --- against a brute-force oracle ---------------------------------------------------------------

@st.composite
def small_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 6))
    keys = draw(st.sampled_from([["x"], ["x", "y"]]))
    values = st.integers(0, 2)
    out = []
    for _ in range(n):
        f = draw(st.sampled_from(["put", "get", "cas", "delete"]))
        a = draw(st.integers(0, 8))
        b = a + draw(st.integers(0, 5))
        status = draw(st.sampled_from(["ok", "ok", "ok", "ok", "info", "fail"]))
        entry: dict[str, Any] = {"process": draw(st.integers(0, 2)), "f": f, "invoke": a,
                                 "return": None if status == "info" and draw(st.booleans()) else b,
                                 "status": status, "input": {"key": draw(st.sampled_from(keys))}}
        if f == "put":
            entry["input"]["value"] = draw(values)
        elif f == "cas":
            entry["input"].update(expected=draw(st.one_of(st.none(), values)), new=draw(values))
            entry["output"] = draw(st.booleans())
        elif f == "get":
            entry["output"] = draw(st.one_of(st.none(), values))
        out.append(entry)
    return out


@SETTINGS
@given(small_histories())
def test_agrees_with_the_brute_force_oracle(history: list[dict[str, Any]]) -> None:
    result = check(history)
    ops = prepare(history, KeyValue())
    assert result.ok is lin_oracle.linearizable(ops)
    if result.ok:
        for part in result.parts:
            assert lin_oracle.valid_order(part.order, [o for o in ops if o.input["key"] == part.key]) == ""
        return
    cx = result.counterexample
    assert cx is not None and cx.minimal and cx.culprit in cx.ops
    part = [o for o in ops if o.input["key"] == cx.key]
    kept = {o.index for o in cx.ops}
    others = [o.index for o in part if o.index not in kept]
    # faithful: no subset of the other operations explains the counterexample ...
    assert not lin_oracle.linearizable(part, optional=others)
    # ... and minimal: without any one of its operations, some subset explains the rest
    for o in cx.ops:
        assert lin_oracle.linearizable(part, optional=[*others, o.index])


@SETTINGS
@given(small_histories(), st.data())
def test_optional_operations_agree_with_the_oracle(history: list[dict[str, Any]], data: st.DataObject) -> None:
    ops = [o for o in prepare(history, KeyValue()) if o.input["key"] == "x"]
    optional = data.draw(st.sets(st.sampled_from([o.index for o in ops]))) if ops else set()
    want = lin_oracle.linearizable(ops, optional)
    for flow in (True, False):  # with and without the value-flow pruning
        found = search(ops, KeyValue(), Allowance(10**6), frozenset(optional), flow=flow)
        assert found.linearizable is want
        quick = search(ops, KeyValue(), Allowance(10**6), frozenset(optional), chain=1, flow=flow)
        assert quick.linearizable is want or (quick.linearizable is False and quick.limited)


# --- histories of a real atomic store -------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), clients=st.integers(1, 8), keys=st.integers(1, 3),
       info=st.sampled_from([0.0, 0.1, 0.3]), fail=st.sampled_from([0.0, 0.1]))
def test_histories_of_an_atomic_store_are_linearizable(seed: int, clients: int, keys: int, info: float,
                                                       fail: float) -> None:
    history = atomic_kv_history(random.Random(seed), 300, clients=clients, keys=keys, info_rate=info,
                                fail_rate=fail)
    result = check(history)
    assert result.ok is True, result.render()
    ops = prepare(history, KeyValue())
    for part in result.parts:
        assert lin_oracle.valid_order(part.order, [o for o in ops if o.input["key"] == part.key]) == ""


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), clients=st.integers(2, 6), info=st.sampled_from([0.0, 0.2]), data=st.data())
def test_one_corrupted_read_is_caught_with_a_minimal_faithful_counterexample(
        seed: int, clients: int, info: float, data: st.DataObject) -> None:
    history = atomic_kv_history(random.Random(seed), 200, clients=clients, keys=2, info_rate=info)
    reads = [i for i, h in enumerate(history) if h["f"] == "get" and h["status"] == "ok"]
    if not reads:
        return
    victim = data.draw(st.sampled_from(reads))
    history[victim]["output"] = 99  # a value no operation writes
    result = check(history)
    assert result.ok is False
    cx = result.counterexample
    assert cx is not None and cx.minimal
    assert [o.index for o in cx.ops] == [victim] and cx.culprit.index == victim


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), data=st.data())
def test_a_read_changed_to_another_written_value_gives_a_faithful_minimal_counterexample(
        seed: int, data: st.DataObject) -> None:
    history = atomic_kv_history(random.Random(seed), 40, clients=3, keys=1, values=3, info_rate=0.1)
    reads = [i for i, h in enumerate(history) if h["f"] == "get" and h["status"] == "ok"]
    if not reads:
        return
    victim = data.draw(st.sampled_from(reads))
    history[victim]["output"] = data.draw(st.sampled_from([None, 0, 1, 2]))
    result = check(history)
    if result.ok:
        return  # the new value could also have been read there
    cx = result.counterexample
    assert cx is not None and cx.minimal
    assert not lin_oracle.linearizable(cx.ops)  # the counterexample alone is not linearizable
    ops = prepare(history, KeyValue())
    # faithful and minimal, checked by the checker's own search on the whole key
    kept = {o.index for o in cx.ops}
    others = frozenset(o.index for o in ops if o.index not in kept)
    assert search(ops, KeyValue(), Allowance(10**7), others).linearizable is False
    for o in cx.ops:
        assert search(ops, KeyValue(), Allowance(10**7), others | {o.index}).linearizable is True


# --- history format -----------------------------------------------------------------------------

def test_event_shape_pairs_invokes_and_completions_per_process() -> None:
    events = [
        {"process": "c1", "type": "invoke", "f": "put", "input": {"key": "x", "value": 1}, "time": 0},
        {"process": "c2", "type": "invoke", "f": "get", "input": {"key": "x"}, "time": 1},
        {"process": "c1", "type": "ok", "time": 2},
        {"process": "c2", "type": "ok", "output": 1, "time": 3},
        {"process": "c1", "type": "invoke", "f": "put", "input": {"key": "x", "value": 2}, "time": 4},
        {"process": "c1", "type": "info", "time": 5},
        {"process": "c2", "type": "invoke", "f": "put", "input": {"key": "x", "value": 3}, "time": 6},
        {"process": "c2", "type": "invoke", "f": "get", "input": {"key": "x"}, "time": 7},  # c2 moved on
        {"process": "c3", "type": "invoke", "f": "put", "input": {"key": "x", "value": 4}, "time": 8},  # never completed
    ]
    ops = history_from_dicts(events)
    assert [(o.index, o.f, o.status, o.invoke, o.ret) for o in ops] == [
        (0, "put", "ok", 0, 2), (1, "get", "ok", 1, 3), (4, "put", "info", 4, 5),
        (6, "put", "info", 6, None), (7, "get", "info", 7, None), (8, "put", "info", 8, None)]
    assert ops[1].output == 1 and ops[2].output is UNKNOWN and ops[2].pending
    assert check(events).ok is True


@pytest.mark.parametrize("entry,message", [
    ({"process": "c", "f": "get", "input": {"key": "x"}, "invoke": 5, "return": 4}, "returns (4) before it is invoked (5)"),
    ({"process": "c", "f": "get", "input": {"key": "x"}, "return": 4}, "'invoke' is missing"),
    ({"process": "c", "f": "get", "input": {"key": "x"}, "invoke": "0", "return": 4}, "'invoke' must be a number"),
    ({"f": "get", "input": {"key": "x"}, "invoke": 0, "return": 4}, "'process' is missing"),
    ({"process": "c", "input": {"key": "x"}, "invoke": 0, "return": 4}, "'f' (the operation's name)"),
    ({"process": "c", "f": "get", "input": {"key": "x"}, "invoke": 0, "return": 4, "status": "done"}, "'status' must be one of"),
    ({"process": "c", "f": "get", "input": {"key": "x"}, "invoke": 0, "status": "ok"}, "status ok needs a 'return' time"),
    ({"process": "c", "f": "get", "input": {"key": "x"}, "invoke": 0, "return": 1, "outptu": 3}, "unknown field(s) outptu"),
    ({"process": "c", "f": "incr", "input": {"key": "x"}, "invoke": 0, "return": 1}, "'incr' is not one of put, get, cas, delete"),
    ({"process": "c", "f": "put", "input": {"key": "x"}, "invoke": 0, "return": 1}, "'input' lacks value"),
    ({"process": "c", "f": "put", "input": 3, "invoke": 0, "return": 1}, "'input' must be a dict"),
    ({"process": "c", "f": "cas", "input": {"key": "x", "expected": 1, "new": 2}, "invoke": 0, "return": 1,
      "output": "yes"}, "a completed cas outputs true or false"),
    ({"process": "c", "type": "ok", "time": 3}, "with no invoke before it"),
    ({"process": "c", "type": "done", "time": 3}, "'type' must be one of"),
    ("put x 1", "expected a dict, not str"),
])
def test_malformed_entries_are_named(entry: Any, message: str) -> None:
    history = [{"process": "a", "f": "get", "input": {"key": "x"}, "invoke": 0, "return": 1, "output": None}, entry]
    with pytest.raises(HistoryError) as e:
        check(history)
    assert message in str(e.value) and "history entry 1" in str(e.value)


def test_values_are_compared_after_freezing_lists() -> None:
    history = [put(0, [1, [2, 3]], 0, 1), get(1, (1, (2, 3)), 2, 3), put(0, b"\x00", 4, 5), get(1, bytearray(b"\x00"), 6, 7)]
    assert check(history).ok is True


def test_register_model_has_no_key() -> None:
    history = [{"process": 0, "f": "put", "input": {"value": 1}, "invoke": 0, "return": 1},
               {"process": 1, "f": "get", "output": 2, "invoke": 2, "return": 3}]
    result = check(history, Register())
    assert result.ok is False and result.failed_keys == [None]
    assert "get() -> 2" in result.render()


# --- determinism and budget ---------------------------------------------------------------------

def _stale_read_at_the_end(n: int = 400) -> list[dict[str, Any]]:
    """A busy key (12 clients, values from 1000), then put 1001, put 1002 and a read of 1001:
    stale. Its counterexample is the last two, but finding that takes searching."""
    history = atomic_kv_history(random.Random(7), n, clients=12, keys=1, values=1000, think_ns=0)
    last = max(h["return"] for h in history)
    history += [put("z", 1001, last + 1, last + 2, key="k0"), put("z", 1002, last + 3, last + 4, key="k0"),
                get("z", 1001, last + 5, last + 6, key="k0")]
    return history


def test_same_history_same_answer_byte_for_byte() -> None:
    history = _stale_read_at_the_end()
    first = json.dumps(check(history).to_dict(), sort_keys=True)
    again = json.dumps(check([dict(h) for h in history]).to_dict(), sort_keys=True)
    assert first == again


DETERMINISM_SCRIPT = """
import json, random
from harness.checkers.history_gen import atomic_kv_history
from harness.checkers.linearizability import check
h = atomic_kv_history(random.Random(11), 3000, clients=6, keys=5, info_rate=0.05, fail_rate=0.02)
for e in h:  # string keys and values: their hashes change with PYTHONHASHSEED
    e["input"] = {k: (f"v{v}" if k != "key" else v) for k, v in e["input"].items()}
    if e["f"] == "get" and e.get("output") is not None:
        e["output"] = f"v{e['output']}"
h[-1] = {**h[-1], "f": "get", "input": {"key": h[-1]["input"]["key"]}, "output": "v9", "status": "ok"}
print(json.dumps(check(h).to_dict(), sort_keys=True))
"""


def test_same_answer_whatever_the_hash_seed() -> None:
    outs = [subprocess.run([sys.executable, "-c", DETERMINISM_SCRIPT], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout for seed in ("1", "2")]
    assert outs[0] == outs[1] and '"ok": false' in outs[0]


def test_a_budget_too_small_gives_unknown_with_the_reason_never_a_guess() -> None:
    history = atomic_kv_history(random.Random(3), 2000, clients=16, keys=1)
    tiny = check(history, budget=Budget(max_steps=500))
    assert tiny.ok is None and "did not finish within 500 model steps" in tiny.reason
    assert tiny.summary().startswith("unknown:")
    assert check(history).ok is True
    bad = _stale_read_at_the_end()
    assert check(bad, budget=Budget(max_steps=50, shrink_steps=0)).ok is None
    assert check(bad).ok is False


def test_a_read_of_a_value_nothing_wrote_is_refuted_where_the_search_stalls() -> None:
    # The search cannot exhaust the orders before the bad read within the budget; the window
    # at the furthest point it reached proves the history wrong with that read alone.
    history = atomic_kv_history(random.Random(3), 2000, clients=16, keys=1, info_rate=0.2)
    victim = [i for i, h in enumerate(history) if h["f"] == "get" and h["status"] == "ok"][10]
    history[victim]["output"] = 99
    result = check(history, budget=Budget(max_steps=1000))
    assert result.ok is False and result.counterexample is not None
    assert [o.index for o in result.counterexample.ops] == [victim] and result.counterexample.minimal


@pytest.mark.parametrize("info", [0.0, 0.05])
def test_a_stale_read_in_the_middle_of_a_long_history_is_found_and_shrunk(info: float) -> None:
    # Unique values turn on the value-flow pruning, whose look-ahead makes the search fail
    # early at a write; the counterexample must still be the stale read and what overwrote it.
    history = atomic_kv_history(random.Random(5), 3000, clients=8, keys=2, values=10**6, info_rate=info)
    on_k0 = [i for i, h in enumerate(history) if h["input"]["key"] == "k0"]
    victim = next(i for i in on_k0[800:] if history[i]["f"] == "get" and history[i]["status"] == "ok")
    old = [i for i in on_k0[:500] if history[i]["f"] == "put" and history[i]["status"] == "ok"][-1]
    history[victim]["output"] = history[old]["input"]["value"]  # unique: written once, long before
    result = check(history)
    assert result.ok is False and result.failed_keys == ["k0"]
    cx = result.counterexample
    assert cx is not None and cx.minimal and cx.culprit.index == victim and 2 <= len(cx.ops) <= 4
    assert result.steps < 1_000_000


def test_a_definite_violation_on_one_key_wins_over_an_undecided_one() -> None:
    history = atomic_kv_history(random.Random(3), 2000, clients=16, keys=1)
    history += [put("z", 1, 0, 1, key="other"), get("z", 2, 2, 3, key="other")]
    result = check(history, budget=Budget(max_steps=3000))
    assert result.ok is False and result.failed_keys == ["other"]


def test_timeout_zero_is_unknown() -> None:
    result = check([put(0, 1, 0, 1), get(1, 1, 2, 3)], budget=Budget(timeout=0.0))
    assert result.ok is None and "or 0.0s" in result.reason


def test_shrink_budget_exhausted_reports_a_valid_but_unminimised_counterexample() -> None:
    history = _stale_read_at_the_end()
    full = check(history)
    assert full.counterexample is not None and full.counterexample.minimal
    assert [o.input.get("value") for o in full.counterexample.ops] == [1002, None]
    cut = check(history, budget=Budget(shrink_steps=1))
    assert cut.ok is False and cut.counterexample is not None and not cut.counterexample.minimal
    assert len(cut.counterexample.ops) > 2 and "not shrunk to a minimum" in cut.render()
    assert check(list(cut.counterexample.ops)).ok is False  # still a counterexample on its own


def test_pending_writes_of_few_values_do_not_blow_up_the_search() -> None:
    # 60 timed-out writes of 3 values; a read after put 7 sees 1 (one of them took effect
    # late), then a read sees 7 again: impossible. Refuting it means trying the timed-out writes
    # everywhere; classes of interchangeable ones keep that small (else up to 2^60 subsets).
    history = [put(f"p{i}", i % 3, i, None) for i in range(60)]
    history += [put("a", 7, 100, 101), get("a", 1, 102, 103), get("a", 7, 104, 105)]
    assert check(history[:-1]).ok is True
    result = check(history, budget=Budget(max_steps=200_000))
    assert result.ok is False and result.steps < 10_000
    assert result.counterexample is not None and result.counterexample.minimal
    assert [o.index for o in result.counterexample.ops] == [61, 62]


def test_the_docs_first_example_prints_what_the_docs_show(capsys: pytest.CaptureFixture[str]) -> None:
    text = Path("docs/linearizability.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    shown = re.search(r"prints\n\n```text\n(.*?)```", text, re.S)
    assert code and shown
    exec(compile(code.group(1), "docs/linearizability.md", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out == shown.group(1)


# --- the run checker --------------------------------------------------------------------------------

def kv_deliver_entry(ev: Any) -> dict[str, Any] | None:
    """How a protocol might map a client's deliveries: the command is the invoke, the
    delivery of its result the completion."""
    d = ev.data or {}
    if ev.kind == COMMAND:
        return {"process": ev.node, "type": "invoke", "f": d["op"], "input": d["input"], "time": ev.time_ns}
    if ev.msg_type == "result":
        return {"process": ev.node, "type": d["status"], "output": d.get("output"), "time": ev.time_ns}
    return None


def replicated_store_run(observer: Observer, stale_reads: bool, seed: int = 5) -> None:
    """Three clients of a primary-backup store, as the checker would observe them: writes take
    effect on the primary and reach the backup 5 ms later; a correct store reads the primary, the
    broken one (the mutant) reads the backup. Some writes time out (info)."""
    rng = random.Random(seed)
    planned = []
    now = [0, 0, 0]
    for n in range(600):
        c = n % 3
        t = now[c] + rng.randrange(1_000_000)
        at = t + rng.randrange(1, 2_000_000)
        done = at + rng.randrange(1, 2_000_000)
        now[c] = done
        key = f"k{rng.randrange(2)}"
        if rng.random() < 0.5:
            planned.append((c, t, at, done, "put", {"key": key, "value": rng.randrange(100)}))
        else:
            planned.append((c, t, at, done, "get", {"key": key}))
    writes: dict[str, list[tuple[int, int]]] = {}
    for c, t, at, done, f, inp in sorted(planned, key=lambda p: p[2]):
        if f == "put":
            writes.setdefault(inp["key"], []).append((at, inp["value"]))
    events = []
    for c, t, at, done, f, inp in planned:
        events.append((t, f"clients.{c}", COMMAND, "", {"op": f, "input": inp}))
        if f == "put":
            result = {"status": "info" if rng.random() < 0.05 else "ok"}
        else:
            seen_at = at - 5_000_000 if stale_reads else at
            seen = [v for when, v in writes.get(inp["key"], []) if when <= seen_at]
            result = {"status": "ok", "output": seen[-1] if seen else None}
        events.append((done, f"clients.{c}", DELIVER, "result", result))
    for time_ns, node, kind, msg_type, data in sorted(events, key=lambda e: e[0]):
        observer.emit(time_ns, node, kind, msg_type=msg_type, data=data)


@pytest.mark.parametrize("stale", [False, True])
def test_run_checker_passes_a_correct_store_and_catches_stale_reads(stale: bool) -> None:
    checker = Linearizable(kv_deliver_entry, kinds=[COMMAND, DELIVER], roles=["client"])
    observer = Observer([checker], None, {f"clients.{i}": "client" for i in range(3)})
    replicated_store_run(observer, stale_reads=stale)
    [verdict] = observer.finish(10**12)
    assert verdict.check == "linearizable"
    if not stale:
        assert verdict.ok and "linearizable: 600 operations on 2 keys" in verdict.detail
        return
    assert not verdict.ok and "cannot be explained" in verdict.detail
    header, *ops = verdict.evidence
    assert header["minimal"] and "<- cannot be explained" in header["table"] and "ms" in header["table"]
    assert sum(1 for o in ops if o.get("culprit")) == 1 and ops[-1]["f"] == "get"
    json.dumps(verdict.to_dict())


def test_run_checker_counts_unfinished_calls_as_pending() -> None:
    checker = Linearizable(kv_deliver_entry, kinds=[COMMAND, DELIVER])
    observer = Observer([checker], None, {})
    observer.emit(0, "c1", COMMAND, data={"op": "put", "input": {"key": "x", "value": 1}})  # never answered
    observer.emit(5, "c2", COMMAND, data={"op": "get", "input": {"key": "x"}})
    observer.emit(6, "c2", DELIVER, msg_type="result", data={"status": "ok", "output": 1})
    assert observer.finish(100)[0].ok


def test_run_checker_budget_from_parameters() -> None:
    checker = Linearizable(kv_deliver_entry, kinds=[COMMAND, DELIVER], max_steps=1, shrink_steps=0)
    assert checker.budget == Budget(max_steps=1, shrink_steps=0)
    observer = Observer([checker], None, {f"clients.{i}": "client" for i in range(3)})
    replicated_store_run(observer, stale_reads=False)
    [verdict] = observer.finish(10**12)
    assert not verdict.ok and verdict.detail.startswith("unknown:") and verdict.evidence[0]["undecided"]


def test_run_checker_reports_a_malformed_history_as_a_failed_verdict() -> None:
    checker = Linearizable(lambda ev: {"process": ev.node, "f": "get", "invoke": "soon"})
    observer = Observer([checker], None, {})
    observer.emit(0, "c1", DELIVER, msg_type="result", data={})
    [verdict] = observer.finish(1)
    assert not verdict.ok and "malformed" in verdict.detail and "'invoke' must be a number" in verdict.detail


def test_operations_pass_through_unchanged() -> None:
    o = Operation(3, "c", "get", {"key": "x"}, 0, None, UNKNOWN, INFO)
    assert history_from_dicts([o]) == [o] and o.pending and o.to_dict()["output"] is None
