"""Histories of client operations, the input of the linearizability checker.

An `Operation` is one call a client (a *process*) made: its name ``f`` and ``input``, the time it
was invoked, the time it returned and its ``output``, and a status:

* ``ok``: it completed with ``output``; it took effect exactly once, between invoke and return;
* ``fail``: it definitely did not take effect (a refusal the client is sure of); it is left out;
* ``info``: the client never learned the outcome (a timeout, a crash, still in flight at the end
  of the run): it may have taken effect at any time after its invoke, or never. Its output is
  `UNKNOWN` and a return time, if given, is only shown, never used.

Histories come from plain dicts in one of two shapes, mixable in one list:

* a whole operation: ``{"process": "c1", "f": "put", "input": {...}, "invoke": 10, "return": 25,
  "output": None, "status": "ok"}`` (``return`` absent or None means ``info``; ``status`` defaults
  to ``ok`` when there is a return time, ``info`` otherwise);
* Jepsen-style events, paired per process (and ``id``, when a process has several operations in
  flight): ``{"process": "c1", "type": "invoke", "f": "get", "input": {...}, "time": 10}`` then
  ``{"process": "c1", "type": "ok", "output": 3, "time": 25}`` (``type`` one of ok, fail, info).
  An invoke that is never completed, or that the same process follows with another invoke, is
  ``info``: the client went away without learning the outcome.

Times are numbers on one clock (the harness uses nanoseconds); only their order matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Hashable, Iterable

OK, FAIL, INFO = "ok", "fail", "info"
STATUSES = (OK, FAIL, INFO)
EVENT_TYPES = ("invoke", OK, FAIL, INFO)


class _Unknown:
    """The output of an operation whose outcome the client never learned."""

    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


class HistoryError(ValueError):
    """A malformed history entry; the message names the entry (its position) and the field."""


@dataclass(slots=True, eq=False)
class Operation:
    """One operation of a history. ``index`` is its position in the history as given (entries
    of the event shape count once, at their invoke), so reports can point back to the source.
    Treat it as immutable (it is not frozen only because frozen dataclasses are three times
    slower to build, which shows on 100,000-operation histories); it compares by identity."""

    index: int
    process: Hashable
    f: str
    input: Any
    invoke: float
    ret: float | None
    output: Any
    status: str

    @property
    def pending(self) -> bool:
        """True when the outcome is unknown: it may take effect any time after invoke, or never."""
        return self.status == INFO

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "process": self.process, "f": self.f, "input": self.input,
                               "invoke": self.invoke, "return": self.ret, "status": self.status}
        out["output"] = None if self.output is UNKNOWN else self.output
        return out


def _time(entry: Mapping[str, Any], field: str, where: str, required: bool) -> float | None:
    value = entry.get(field)
    if type(value) is int:  # the common case, first
        return value
    if value is None:
        if required:
            raise HistoryError(f"{where}: '{field}' is missing (a time, a number)")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise HistoryError(f"{where}: '{field}' must be a number (a time), not {value!r}")
    return value


def _process(entry: Mapping[str, Any], where: str) -> Hashable:
    if "process" not in entry:
        raise HistoryError(f"{where}: 'process' is missing (the client that made the call)")
    p = entry["process"]
    try:
        hash(p)
    except TypeError:
        raise HistoryError(f"{where}: 'process' must be hashable (a name or a number), not {p!r}") from None
    return p


def _name(entry: Mapping[str, Any], where: str) -> str:
    f = entry.get("f")
    if not isinstance(f, str) or not f:
        raise HistoryError(f"{where}: 'f' (the operation's name) must be a non-empty string, not {f!r}")
    return f


OP_FIELDS = frozenset({"process", "f", "input", "output", "invoke", "return", "status"})
EVENT_FIELDS = frozenset({"process", "type", "f", "input", "output", "time", "id"})


def _check_fields(entry: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    if allowed.issuperset(entry):
        return
    extra = sorted(str(k) for k in entry if k not in allowed)
    if extra:
        raise HistoryError(f"{where}: unknown field(s) {', '.join(extra)} (known: {', '.join(sorted(allowed))})")


def operation_from_dict(entry: Mapping[str, Any], index: int) -> Operation:
    """One whole operation from its dict (see the module docstring)."""
    get = entry.get
    invoke, ret, status, f, process = get("invoke"), get("return"), get("status"), get("f"), get("process")
    if not (OP_FIELDS.issuperset(entry) and type(invoke) is int and type(ret) is int and status in _COMPLETE
            and type(f) is str and f and type(process) in _SIMPLE and invoke <= ret):
        # not the common shape: check everything, with the error that names what is wrong
        where = f"history entry {index}"
        _check_fields(entry, OP_FIELDS, where)
        invoke = _time(entry, "invoke", where, True)
        ret = _time(entry, "return", where, False)
        status = get("status", OK if ret is not None else INFO)
        if status not in STATUSES:
            raise HistoryError(f"{where}: 'status' must be one of {', '.join(STATUSES)}, not {status!r}")
        if status == OK and ret is None:
            raise HistoryError(f"{where}: status ok needs a 'return' time (an operation that never returned is info)")
        assert invoke is not None
        if ret is not None and ret < invoke:
            raise HistoryError(f"{where}: returns ({ret}) before it is invoked ({invoke})")
        process, f = _process(entry, where), _name(entry, where)
    elif status is None:
        status = OK
    return Operation(index, process, f, get("input"), invoke, ret, get("output") if status == OK else UNKNOWN, status)


_COMPLETE = frozenset({OK, FAIL, INFO, None})
_SIMPLE = frozenset({str, int})


def _operations_from_events(entries: Iterable[tuple[int, Mapping[str, Any]]], out: list[Operation]) -> None:
    """Pairs invoke and completion events per (process, id), appending whole operations."""
    open_calls: dict[tuple[Hashable, Hashable], tuple[int, Mapping[str, Any], str]] = {}
    for index, entry in entries:
        where = f"history entry {index}"
        _check_fields(entry, EVENT_FIELDS, where)
        kind = entry.get("type")
        if kind not in EVENT_TYPES:
            raise HistoryError(f"{where}: 'type' must be one of {', '.join(EVENT_TYPES)}, not {kind!r}")
        process = _process(entry, where)
        key = (process, entry.get("id"))
        if isinstance(key[1], (list, dict, set)):
            raise HistoryError(f"{where}: 'id' must be hashable, not {key[1]!r}")
        time = _time(entry, "time", where, True)
        if kind == "invoke":
            _name(entry, where)
            previous = open_calls.pop(key, None)
            if previous is not None:  # the process moved on without an outcome: unknown
                out.append(_paired(previous, None))
            open_calls[key] = (index, entry, where)
            continue
        call = open_calls.pop(key, None)
        if call is None:
            raise HistoryError(f"{where}: a {kind} event of process {process!r}"
                               f"{'' if key[1] is None else f' id {key[1]!r}'} with no invoke before it")
        if "f" in entry and entry["f"] != call[1]["f"]:
            raise HistoryError(f"{where}: completes {entry['f']!r} but the invoke ({call[2]}) was {call[1]['f']!r}")
        out.append(_paired(call, (kind, time, entry)))
    for call in open_calls.values():
        out.append(_paired(call, None))


def _paired(call: tuple[int, Mapping[str, Any], str], done: tuple[str, float | None, Mapping[str, Any]] | None) -> Operation:
    index, entry, where = call
    invoke = _time(entry, "time", where, True)
    assert invoke is not None
    if done is None:
        return Operation(index, entry["process"], entry["f"], entry.get("input"), invoke, None, UNKNOWN, INFO)
    kind, ret, completion = done
    if ret is not None and ret < invoke:
        raise HistoryError(f"{where}: completed at {ret}, before it is invoked ({invoke})")
    output = completion.get("output") if kind == OK else UNKNOWN
    inp = completion["input"] if entry.get("input") is None and "input" in completion else entry.get("input")
    return Operation(index, entry["process"], entry["f"], inp, invoke, ret, output, kind)


def history_from_dicts(entries: Iterable[Mapping[str, Any]]) -> list[Operation]:
    """Operations from plain dicts of either shape (see the module docstring), in the order of
    their (first) entries. Raises `HistoryError` naming the entry and field on a malformed one."""
    ops: list[Operation] = []
    events: list[tuple[int, Mapping[str, Any]]] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, Operation):
            ops.append(entry)
        elif type(entry) is not dict and not isinstance(entry, Mapping):
            raise HistoryError(f"history entry {index}: expected a dict, not {type(entry).__name__}")
        elif "type" in entry:
            events.append((index, entry))
        else:
            ops.append(operation_from_dict(entry, index))
    if events:
        _operations_from_events(events, ops)
        ops.sort(key=lambda o: o.index)
    return ops
