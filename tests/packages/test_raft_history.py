"""The Raft package turns client commands, start notes and deliveries into linearizability
history events, on the run's clock, with the key-value model's inputs."""

from __future__ import annotations

from harness.checkers.base import COMMAND, DELIVER, NOTE, Event
from harness.packages.raft.history import KVHistory


def ev(kind: str, t: int, data: dict, node: str = "clients.0", role: str = "client", msg_type: str = "") -> Event:
    return Event(t, node, role, kind, msg_type=msg_type, data=data)


def done(t: int, op_id: str, status: str = "ok", output: object = None, op: str = "put") -> Event:
    return ev(DELIVER, t, {"op": op, "key": "k", "id": op_id, "status": status, "output": output,
                           "invoke_ns": 7, "complete_ns": 9}, msg_type="op")  # the client's skewed clock


def test_an_operation_runs_from_its_start_note_to_its_delivery_on_the_run_clock() -> None:
    h = KVHistory()
    assert h(ev(COMMAND, 100, {"op": "cas", "key": "k", "expected": "a", "value": "b", "id": "c-1"})) is None
    assert h(ev(NOTE, 180, {"id": "c-1", "reqid": "00"}, msg_type="op-start")) == {
        "process": "clients.0", "id": "c-1", "type": "invoke", "f": "cas",
        "input": {"key": "k", "expected": "a", "new": "b"}, "time": 180}
    assert h(done(250, "c-1", output=False, op="cas")) == {
        "process": "clients.0", "id": "c-1", "type": "ok", "time": 250, "output": False}
    assert h.unfinished() == []


def test_without_start_notes_the_command_is_the_invocation_and_unfinished_ones_are_pending() -> None:
    h = KVHistory()
    h(ev(COMMAND, 100, {"op": "put", "key": "k", "value": "v", "id": "c-1"}))
    h(ev(COMMAND, 120, {"op": "get", "key": "k", "id": "c-2"}))
    put = {"process": "clients.0", "id": "c-1", "type": "invoke", "f": "put", "input": {"key": "k", "value": "v"},
           "time": 100}
    assert h(done(300, "c-1", status="info")) == [put, {"process": "clients.0", "id": "c-1", "type": "info",
                                                        "time": 300}]
    assert h.unfinished() == [{"process": "clients.0", "id": "c-2", "type": "invoke", "f": "get",
                               "input": {"key": "k"}, "time": 120}]


def test_a_client_that_notes_its_starts_leaves_out_what_it_never_started() -> None:
    h = KVHistory()
    h(ev(COMMAND, 100, {"op": "put", "key": "k", "value": "v", "id": "c-1"}))
    h(ev(COMMAND, 110, {"op": "put", "key": "k", "value": "w", "id": "c-2"}))
    h(ev(NOTE, 120, {"id": "c-1"}, msg_type="op-start"))
    assert h.unfinished() == []  # c-2 waits in the client's queue: it was never sent


def test_other_events_are_not_history() -> None:
    h = KVHistory()
    assert h(ev(NOTE, 1, {"role": "leader", "term": 1}, "peers.0", "peer", "role")) is None
    assert h(ev(COMMAND, 1, {"op": "status"})) is None
    assert h(ev(COMMAND, 1, {"op": "put", "key": "k", "value": 1}, "peers.0", "peer")) is None
    assert h(ev(NOTE, 1, {"id": "x"}, msg_type="op-start")) is None  # no such command
