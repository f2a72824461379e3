"""Sequential specifications for the linearizability checker.

A `Model` says what one operation does to a state, in isolation: ``init()`` is the state before
the first operation; ``step(state, f, input, output)`` returns ``(ok, new_state)``, where ``ok``
says whether the operation ``f(input)`` may return ``output`` in ``state``. States must be
hashable and compare equal exactly when they are the same state (the checker remembers the
states it has explored). ``output`` is `UNKNOWN` for an operation whose outcome the client never
learned: ``step`` must then accept it and return the state it leaves (models are deterministic:
one state per input and state).

``partition(ops)`` splits a history into parts that can be checked independently (Porcupine's
``Partition``): the `KeyValue` model checks each key on its own, which linearizability allows
(it is a local property, Herlihy & Wing 1990). ``describe(op)`` and ``describe_state(state)``
make counterexamples readable; ``validate(op)`` rejects a malformed operation before checking.

Three hooks are for speed and need not be overridden: ``stepper(op)`` returns a function of
the state alone (the new state, or `REJECT`); ``read_only(op)`` names operations that never
change the state (a pending one can be left out: whether it took effect cannot matter); and
``effect(op)`` gives pending operations that change every state the same way the same hashable
label, so the checker tries only the earliest unused one of them (any linearization that uses
a later one can use the earliest instead), which keeps many timed-out writes of a few values
from multiplying the search.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Hashable, Sequence

from harness.checkers.history import UNKNOWN, HistoryError, Operation

REJECT: Any = type("Reject", (), {"__repr__": lambda self: "REJECT"})()
NOTHING: Any = type("Nothing", (), {"__repr__": lambda self: "NOTHING"})()   # demands / supplies no state
ANYTHING: Any = type("Anything", (), {"__repr__": lambda self: "ANYTHING"})()  # may supply any state
Stepper = Callable[[Any], Any]


class Model:
    """The interface; subclass it and implement at least ``init`` and ``step``."""

    name = "model"
    part_name = ""  # what ``partition``'s labels name, for reports ("key"); "" if one part

    def init(self) -> Hashable:
        raise NotImplementedError

    def step(self, state: Any, f: str, input: Any, output: Any) -> tuple[bool, Any]:
        raise NotImplementedError

    def partition(self, ops: Sequence[Operation]) -> list[tuple[Any, list[Operation]]]:
        """Independent parts of the history, each with a label (shown in reports)."""
        return [(None, list(ops))]

    def validate(self, op: Operation) -> None:
        """Raise `HistoryError` if ``op`` is not an operation of this model."""

    def read_only(self, op: Operation) -> bool:
        """True when ``op``, with its output, never changes the state (a read). The search then
        linearizes it as soon as the state allows and never tries it later instead (it cannot
        help), and leaves it out when it is pending (whether it took effect cannot matter)."""
        return False

    def effect(self, op: Operation) -> Hashable:
        """A label shared by pending operations that are interchangeable (None: not known to be)."""
        return None

    def blind(self, op: Operation) -> bool:
        """True when ``op`` is accepted in every state and leaves the same state whatever the
        state before (a write). Right after an operation of unknown outcome takes effect, the
        search then skips it: the two together leave what it alone would."""
        return False

    def demand(self, op: Operation) -> Any:
        """The one state ``op`` (completed, with its output) can take effect in, or `NOTHING`
        when it is not that simple (a read of 3 demands 3; a write demands nothing)."""
        return NOTHING

    def supply(self, op: Operation) -> Any:
        """The state ``op`` may leave that differs from the one it found, `NOTHING` if it never
        changes the state, `ANYTHING` if it cannot be said (the default: turns the check off).
        With both, the search abandons an order as soon as it leaves a state that some
        operation still needs while nothing left can bring that state back."""
        return ANYTHING

    def reachable_states(self, ops: Sequence[Operation], then: Sequence[Operation] = ()) -> list[Any] | None:
        """Every state that some of ``ops``, in some order, could leave behind starting from
        ``init()`` (more is fine, fewer is not), or None if the model cannot tell. States that
        no operation of ``then`` can tell apart may be given as one. It lets the shrinker look at
        a short window of a long history (``then``), starting from any of these states, instead
        of searching the whole history again for every candidate."""
        return None

    def describe(self, op: Operation) -> str:
        out = "?" if op.output is UNKNOWN else repr(op.output)
        return f"{op.f}({op.input!r}) -> {out}"

    def describe_state(self, state: Any) -> str:
        return repr(state)

    def stepper(self, op: Operation) -> Stepper:
        step, f, inp, out = self.step, op.f, op.input, op.output

        def run(state: Any) -> Any:
            ok, new = step(state, f, inp, out)
            return new if ok else REJECT

        return run


_ATOMS = frozenset({int, str, bytes, float, bool, type(None)})


def freeze(value: Any) -> Hashable:
    """A hashable value equal to another frozen value exactly when the originals are equal
    (lists and tuples become tuples: after MessagePack or JSON they are the same thing)."""
    if type(value) in _ATOMS:
        return value
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return frozenset((freeze(k), freeze(v)) for k, v in value.items())
    if isinstance(value, (set, frozenset)):
        return frozenset(freeze(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    hash(value)  # anything else must be hashable already (TypeError otherwise)
    return value


# Register operations: the fields each input needs, besides the key of a map.
REGISTER_FIELDS = {"put": ("value",), "get": (), "cas": ("expected", "new"), "delete": ()}


class Register(Model):
    """One register that may be empty (None): ``put`` {value}, ``get`` {} -> value (None when
    empty), ``cas`` {expected, new} -> true when the value was ``expected`` (and is now ``new``)
    else false (unchanged), ``delete`` {} (empties it). The outputs of put and delete are not
    checked. Inputs are dicts; values are compared after `freeze`. ``initial`` is the value
    before the first operation (None: empty)."""

    name = "register"
    key_field: str | None = None

    def __init__(self, initial: Any = None) -> None:
        self.initial = freeze(initial)
        self._need = {f: self._fields(f) for f in REGISTER_FIELDS}

    def init(self) -> Hashable:
        return self.initial

    def validate(self, op: Operation) -> None:
        fields = self._need.get(op.f)
        if fields is None:
            raise HistoryError(f"history entry {op.index}: operation {op.f!r} is not one of "
                               f"{', '.join(REGISTER_FIELDS)} ({self.name} model)")
        inp = op.input
        if inp is None and not fields:
            inp = {}  # a register's get or delete needs no input
        if type(inp) is not dict and not isinstance(inp, Mapping):
            raise HistoryError(f"{self._where(op)}: 'input' must be a dict with {', '.join(fields)}, not {inp!r}")
        for k in fields:
            if k not in inp:
                missing = [k for k in fields if k not in inp]
                raise HistoryError(f"{self._where(op)}: 'input' lacks {', '.join(missing)} "
                                   f"(needs {', '.join(fields)})")
            if type(inp[k]) not in _ATOMS:
                try:
                    freeze(inp[k])
                except TypeError:
                    raise HistoryError(f"{self._where(op)}: input {k!r} is not a comparable value: {inp[k]!r}") from None
        out = op.output
        if out is UNKNOWN or type(out) in _ATOMS and op.f != "cas":
            return
        if op.f == "cas" and type(out) is not bool:
            raise HistoryError(f"{self._where(op)}: a completed cas outputs true or false, not {out!r}")
        if op.f == "get":
            try:
                freeze(out)
            except TypeError:
                raise HistoryError(f"{self._where(op)}: output is not a comparable value: {out!r}") from None

    @staticmethod
    def _where(op: Operation) -> str:
        return f"history entry {op.index} ({op.f})"

    def _fields(self, f: str) -> tuple[str, ...]:
        extra = REGISTER_FIELDS[f]
        return (self.key_field, *extra) if self.key_field else extra

    def read_only(self, op: Operation) -> bool:
        return op.f == "get" or (op.f == "cas" and op.output is False)

    def blind(self, op: Operation) -> bool:
        return op.f in ("put", "delete")

    def effect(self, op: Operation) -> Hashable:
        if op.f == "put":
            return ("put", freeze(op.input["value"]))
        if op.f == "cas":
            return ("cas", freeze(op.input["expected"]), freeze(op.input["new"]))
        return (op.f,)  # delete (a pending get is left out before this is asked)

    def step(self, state: Any, f: str, input: Any, output: Any) -> tuple[bool, Any]:
        if f == "put":
            return True, freeze(input["value"])
        if f == "delete":
            return True, None
        if f == "get":
            return output is UNKNOWN or state == freeze(output), state
        if f == "cas":
            hit = state == freeze(input["expected"])
            new = freeze(input["new"]) if hit else state
            return output is UNKNOWN or output == hit, new
        raise HistoryError(f"operation {f!r} is not one of {', '.join(REGISTER_FIELDS)}")

    def demand(self, op: Operation) -> Any:
        if op.output is UNKNOWN:
            return NOTHING
        if op.f == "get":
            return freeze(op.output)
        if op.f == "cas" and op.output is True:
            return freeze(op.input["expected"])
        return NOTHING

    def supply(self, op: Operation) -> Any:
        if op.f == "put":
            return freeze(op.input["value"])
        if op.f == "delete":
            return None
        if op.f == "cas" and op.output is not False:
            return freeze(op.input["new"])
        return NOTHING

    def reachable_states(self, ops: Sequence[Operation], then: Sequence[Operation] = ()) -> list[Any] | None:
        # A value matters to later operations only if one compares with it (a read's output, a
        # cas's expected value); all the others behave alike: one stands for them.
        compared = {freeze(op.output) for op in then if op.f == "get" and op.output is not UNKNOWN}
        compared |= {freeze(op.input["expected"]) for op in then if op.f == "cas"}
        out = [self.initial]
        other = self.initial not in compared
        for op in ops:
            if op.f == "put":
                new = freeze(op.input["value"])
            elif op.f == "cas":
                new = freeze(op.input["new"])
            elif op.f == "delete":
                new = None
            else:
                continue
            if new in compared or not then:
                if new not in out:
                    out.append(new)
            elif not other:
                other = True
                out.append(new)
        return out

    def stepper(self, op: Operation) -> Stepper:
        # One closure per operation with its constants frozen once: the search calls it often.
        f, inp, out = op.f, op.input, op.output
        if f == "put":
            value = freeze(inp["value"])
            return lambda s: value
        if f == "delete":
            return lambda s: None
        if f == "get":
            if out is UNKNOWN:
                return lambda s: s
            want = freeze(out)
            return lambda s: s if s == want else REJECT
        expected, new = freeze(inp["expected"]), freeze(inp["new"])
        if out is UNKNOWN:
            return lambda s: new if s == expected else s
        if out:
            return lambda s: new if s == expected else REJECT
        return lambda s: s if s != expected else REJECT

    def describe(self, op: Operation) -> str:
        inp = op.input if isinstance(op.input, Mapping) else {}
        args = [repr(inp.get(k)) for k in self._fields(op.f)]
        call = f"{op.f}({', '.join(args)})"
        if op.output is UNKNOWN:
            return call + (" -> ?" if op.f in ("get", "cas") else "")
        if op.f == "get":
            return f"{call} -> {op.output!r}"
        if op.f == "cas":
            return f"{call} -> {'true' if op.output else 'false'}"
        return call

    def describe_state(self, state: Any) -> str:
        return "empty (None)" if state is None else repr(state)


class KeyValue(Register):
    """A map of registers, one per key: the `Register` operations with a ``key`` in every input
    (``get`` of a missing key reads None, or ``initial``). Each key is checked on its own."""

    name = "key-value"
    key_field = "key"
    part_name = "key"

    def partition(self, ops: Sequence[Operation]) -> list[tuple[Any, list[Operation]]]:
        parts: dict[Hashable, tuple[Any, list[Operation]]] = {}
        for op in ops:
            key = op.input["key"]
            frozen = freeze(key)
            part = parts.get(frozen)
            if part is None:
                parts[frozen] = part = (key, [])
            part[1].append(op)
        return list(parts.values())
