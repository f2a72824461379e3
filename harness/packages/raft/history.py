"""The key-value history of a Raft run, as the linearizability checker reads it.

Each client operation becomes two history events (the Jepsen shape of
`harness.checkers.history`): its invocation and its completion, the client's
``Deliver("op", ...)``. Both are stamped with the run's clock (virtual time in simulation, wall
time live), never with the client's own clock, which a scenario may skew. Operations are paired
by (client, id); ``status`` ``ok``/``fail``/``info`` as the client reports it (``info``: the
client never learned whether it took effect).

The invocation is the moment the client starts the operation, when it says so with a
``Note("op-start", {"id": ...})`` (the reference client does, as it sends the operation's first
RequestUpdate: a client runs its operations one at a time and queues the others, which cannot
take effect before they are sent). Otherwise it is the application's command. Starting the
interval there keeps it around the operation's effect and keeps queued operations from all
looking concurrent, which made the search exponential (32 operations of one key in flight at
once during a partition, undecided after 5,000,000 steps).

Inputs follow the checker's key-value model: put ``{key, value}``, get ``{key}``, cas ``{key,
expected, new}``, delete ``{key}``; outputs: get the value read (None: absent), cas True or
False, put and delete None.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import COMMAND, DELIVER, NOTE, Event

OPS = ("put", "get", "cas", "delete")
START = "op-start"


def model_input(op: str, data: dict[str, Any]) -> dict[str, Any]:
    inp: dict[str, Any] = {"key": data.get("key")}
    if op == "put":
        inp["value"] = data.get("value")
    elif op == "cas":
        inp["expected"], inp["new"] = data.get("expected"), data.get("value")
    return inp


def invoke(node: str, op_id: Any, data: dict[str, Any], time_ns: int) -> dict[str, Any]:
    return {"process": node, "id": op_id, "type": "invoke", "f": data["op"], "input": model_input(data["op"], data),
            "time": time_ns}


class KVHistory:
    """Turns a run's client events into history entries (call it with each event); then
    `unfinished` gives the invocations of operations still waiting for their start or result."""

    def __init__(self) -> None:
        self.commanded: dict[tuple[str, Any], tuple[int, dict[str, Any]]] = {}  # not started yet
        self.started: set[tuple[str, Any]] = set()
        self.noting: set[str] = set()  # clients that say when they start an operation

    def __call__(self, ev: Event) -> list[dict[str, Any]] | dict[str, Any] | None:
        data = ev.data or {}
        if ev.role != "client":
            return None
        if ev.kind == NOTE and ev.msg_type == START:
            self.noting.add(ev.node)
            key = (ev.node, data.get("id"))
            found = self.commanded.pop(key, None)
            if found is None:
                return None
            self.started.add(key)
            return invoke(ev.node, key[1], found[1], ev.time_ns)
        if data.get("op") not in OPS:
            return None
        key = (ev.node, data.get("id"))
        if ev.kind == COMMAND:
            if key[1] is None or key in self.commanded or key in self.started:  # cannot be told apart later
                return invoke(ev.node, key[1], data, ev.time_ns)
            self.commanded[key] = (ev.time_ns, data)
            return None
        if ev.kind == DELIVER and ev.msg_type == "op":
            status = data.get("status")
            out: dict[str, Any] = {"process": ev.node, "id": key[1], "type": status, "time": ev.time_ns}
            if status == "ok":
                out["output"] = data.get("output")
            if key in self.started:
                self.started.discard(key)
                return out
            found = self.commanded.pop(key, None)
            return out if found is None else [invoke(ev.node, key[1], found[1], found[0]), out]
        return None

    def unfinished(self) -> list[dict[str, Any]]:
        """Invocations of operations commanded but neither started nor completed: of unknown
        outcome when their client does not say when it starts one; left out otherwise (a
        queued operation was never sent)."""
        return [invoke(node, op_id, data, t) for (node, op_id), (t, data) in self.commanded.items()
                if node not in self.noting]
