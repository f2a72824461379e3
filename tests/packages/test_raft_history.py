"""The Raft package turns client commands and deliveries into linearizability history events,
on the run's clock, with the key-value model's inputs."""

from __future__ import annotations

from harness.checkers.base import COMMAND, DELIVER, NOTE, Event
from harness.packages.raft.history import entries_of


def ev(kind: str, t: int, data: dict, node: str = "clients.0", role: str = "client", msg_type: str = "") -> Event:
    return Event(t, node, role, kind, msg_type=msg_type, data=data)


def test_a_command_is_an_invocation_and_a_delivery_its_completion_on_the_run_clock() -> None:
    cmd = ev(COMMAND, 100, {"op": "cas", "key": "k", "expected": "a", "value": "b", "id": "c-1"})
    assert entries_of(cmd) == {"process": "clients.0", "id": "c-1", "type": "invoke", "f": "cas",
                               "input": {"key": "k", "expected": "a", "new": "b"}, "time": 100}
    done = ev(DELIVER, 250, {"op": "cas", "key": "k", "id": "c-1", "status": "ok", "output": False,
                             "invoke_ns": 7, "complete_ns": 9}, msg_type="op")  # the client's skewed clock
    assert entries_of(done) == {"process": "clients.0", "id": "c-1", "type": "ok", "time": 250, "output": False}
    lost = ev(DELIVER, 300, {"op": "put", "key": "k", "id": "c-2", "status": "info", "output": None}, msg_type="op")
    assert entries_of(lost) == {"process": "clients.0", "id": "c-2", "type": "info", "time": 300}


def test_other_events_are_not_history() -> None:
    assert entries_of(ev(NOTE, 1, {"role": "leader", "term": 1}, "peers.0", "peer", "role")) is None
    assert entries_of(ev(COMMAND, 1, {"op": "status"})) is None
    assert entries_of(ev(COMMAND, 1, {"op": "put", "key": "k", "value": 1}, "peers.0", "peer")) is None
