"""live-after-heal judges the cluster, not the client's queue: an operation counts from when the
client sent it (its ``op-start`` note), or from the heal if it was open then.

A client runs its operations one at a time. The independent stand-in peer commits an update with
its next AppendEntries (its heartbeat, 100 ms: lawful, E-RAFT-12), so a client gets about 10
operations a second from it, and a chaos file's 13 a second per client queued up all run long;
counted from the command, every operation after the heal of `scenarios/raft/chaos/leader-crash.yaml`
"took" more than 2 s and the check failed a correct cluster. (main's cdad2f4 made the same change
to the checker, with the client's op-committed note besides; these tests hold for it.)"""

from __future__ import annotations

from harness.checkers.base import COMMAND, DELIVER, NOTE, Event
from harness.checkers.raft.liveness import LiveAfterHeal

S = 1_000_000_000
MS = 1_000_000


def ev(t: int, kind: str, msg_type: str = "", **data: object) -> Event:
    return Event(t, "clients.0", "client", kind, msg_type=msg_type, data=dict(data))


def client_run(service_ms: int, *, notes: bool = True, stuck: int | None = None,
               before_heal_done_ms: int | None = None) -> list[Event]:
    """A client commanded 13 operations a second from 1 s (60 of them), each served ``service_ms``
    after it is sent, one at a time (operation ``stuck`` never completes); with
    ``before_heal_done_ms``, an operation sent at 0.5 s, before the heal, completes then."""
    out: list[Event] = []
    if before_heal_done_ms is not None:
        out += [ev(500 * MS, COMMAND, "put", id="early"), ev(500 * MS, NOTE, "op-start", id="early"),
                ev(before_heal_done_ms * MS, DELIVER, "op", id="early", status="ok")]
    free = S if before_heal_done_ms is None else max(S, before_heal_done_ms * MS)
    for k in range(60):
        at = S + k * S // 13
        out.append(ev(at, COMMAND, "put", id=f"op{k}"))
        if stuck is not None and k > stuck:
            continue  # waits behind the stuck one: never sent
        start = max(at, free)
        if notes:
            out.append(ev(start, NOTE, "op-start", id=f"op{k}"))
        if k == stuck:
            free = 10**18
            continue
        free = start + service_ms * MS
        out.append(ev(free, DELIVER, "op", id=f"op{k}", status="ok"))
    return sorted(out, key=lambda e: e.time_ns)


def judge(events: list[Event], end_s: int = 12) -> tuple[bool, str]:
    checker = LiveAfterHeal(heal_ns=S, within_ms=2000)
    for e in events:
        checker.on_event(e)
    (verdict,) = checker.finish(end_s * S)
    return verdict.ok, verdict.detail


def test_a_cluster_serving_each_operation_in_150_ms_passes_though_the_clients_queue_grows() -> None:
    events = client_run(150)
    waits = [d.time_ns - c.time_ns for c in events if c.kind == COMMAND
             for d in events if d.kind == DELIVER and d.data == {"id": c.data["id"], "status": "ok"}]
    assert max(waits) > 2 * S, "the queue makes later operations wait longer than the bound"
    ok, detail = judge(events)
    assert ok, detail
    assert "60 later operation(s) committed within 2 s" in detail, detail


def test_an_operation_the_cluster_never_answers_fails_and_what_waits_behind_it_is_not_counted() -> None:
    ok, detail = judge(client_run(110, stuck=4))
    assert not ok and detail.startswith("1 violation(s): operation op4 of clients.0 sent at"), detail
    assert "not committed" in detail


def test_an_operation_open_at_the_heal_counts_from_the_heal() -> None:
    ok, detail = judge(client_run(50, before_heal_done_ms=3200))  # 2.2 s after the heal at 1 s
    assert not ok and "operation early of clients.0 pending at the heal, sent at 0.500 s: ok after 2.700 s" \
        in detail, detail
    ok, detail = judge(client_run(50, before_heal_done_ms=2500))
    assert ok, detail


def test_a_slow_cluster_still_fails() -> None:
    ok, detail = judge(client_run(2100))
    assert not ok and "ok after 2.100 s" in detail, detail


def test_a_client_without_op_start_notes_is_judged_from_its_commands() -> None:
    ok, detail = judge(client_run(150, notes=False))
    assert not ok and "invoked at" in detail, detail
    assert judge(client_run(30, notes=False))[0]


def test_an_operation_its_client_gave_up_soon_after_sending_it_is_not_judged() -> None:
    """The client's ``op_timeout`` counts from the command: an operation that waited in its queue
    is given up (``info``, "timed out") soon after it is sent, and whether the cluster would have
    committed it within the bound is unknown (live, the stand-in's 100 ms commits and
    snapshot-restart.yaml's 40 updates a second: 13 such operations failed a correct cluster).
    One the client waited for until the bound is judged as before."""
    sent_at = 3 * S
    base = [ev(S, COMMAND, "put", id="old"), ev(sent_at, NOTE, "op-start", id="old"),  # and one that shows a leader:
            ev(1200 * MS, COMMAND, "put", id="x"), ev(1200 * MS, NOTE, "op-start", id="x"),
            ev(1500 * MS, DELIVER, "op", id="x", status="ok")]
    ok, detail = judge(base + [ev(sent_at + 20 * MS, DELIVER, "op", id="old", status="info", reason="timed out")])
    assert ok and "1 given up by their client before the bound: not judged" in detail, detail
    assert "1 later operation(s) committed" in detail, detail
    ok, detail = judge(base + [ev(sent_at + 2100 * MS, DELIVER, "op", id="old", status="info", reason="timed out")])
    assert not ok and "not committed (ended info)" in detail, detail
    # an "info" for another reason (the cluster's answer, not the client's own give-up) is judged
    ok, detail = judge(base + [ev(sent_at + 20 * MS, DELIVER, "op", id="old", status="info", reason="reqid expired")])
    assert not ok, detail
