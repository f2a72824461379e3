"""The key-value history of a Raft run, as the linearizability checker reads it.

Each client operation becomes two history events (the Jepsen shape of
`harness.checkers.history`, on the lin branch): its invocation, when the client application
commanded it (the observer's COMMAND event), and its completion, the client's
``Deliver("op", ...)``. Both are stamped with the run's clock (virtual time in simulation, wall
time live), never with the client's own clock, which a scenario may skew. Operations are paired
by (client, id); ``status`` ``ok``/``fail``/``info`` as the client reports it (``info``: the
client never learned whether it took effect).

Inputs follow the checker's key-value model: put ``{key, value}``, get ``{key}``, cas ``{key,
expected, new}``, delete ``{key}``; outputs: get the value read (None: absent), cas True or
False, put and delete None.
"""

from __future__ import annotations

from typing import Any

from harness.checkers.base import COMMAND, DELIVER, Event

OPS = ("put", "get", "cas", "delete")


def model_input(op: str, data: dict[str, Any]) -> dict[str, Any]:
    inp: dict[str, Any] = {"key": data.get("key")}
    if op == "put":
        inp["value"] = data.get("value")
    elif op == "cas":
        inp["expected"], inp["new"] = data.get("expected"), data.get("value")
    return inp


def entries_of(ev: Event) -> dict[str, Any] | None:
    """The history event of an observed event, or None when it is none."""
    data = ev.data or {}
    if ev.role != "client" or data.get("op") not in OPS:
        return None
    if ev.kind == COMMAND:
        return {"process": ev.node, "id": data.get("id"), "type": "invoke", "f": data["op"],
                "input": model_input(data["op"], data), "time": ev.time_ns}
    if ev.kind == DELIVER and ev.msg_type == "op":
        status = data.get("status")
        out: dict[str, Any] = {"process": ev.node, "id": data.get("id"), "type": status, "time": ev.time_ns}
        if status == "ok":
            out["output"] = data.get("output")
        return out
    return None
