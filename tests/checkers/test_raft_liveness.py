"""live-after-heal (harness/checkers/raft/liveness.py) times the cluster's part of an operation:
until its client knows the entry is committed, not until the client has read the result back.

Found with peers set up another lawful way (compaction after every 2 entries, 16-byte snapshot
chunks, 2 entries per answer): the harness's own clients kept restarting snapshot reads that
the peers replaced faster than they could be read, so puts completed 2.0-2.2 s after they were
sent (committed within milliseconds) and operations queued behind them later still; the check
failed leader-crash on seeds 1-3, lossy and partitions on seed 2, blaming the peers'
availability for the harness client's read-back. The mutant that breaks availability is still
caught (tests/checkers/test_raft_checkers.py, ``fixed-timeout``)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checkers.base import COMMAND, CRASH, DELIVER, NOTE, Event
from harness.checkers.raft.liveness import LiveAfterHeal
from harness.composition import run_sim
from harness.scenario import load_scenario
from tests.test_lawful_chaos_variants import configured

MS = 1_000_000


def command(t: int, op: str) -> Event:
    return Event(t * MS, "c", "client", COMMAND, data={"op": "put", "id": op, "key": "k", "value": 1})


def note(t: int, name: str, op: str) -> Event:
    return Event(t * MS, "c", "client", NOTE, msg_type=name, data={"id": op})


def deliver(t: int, op: str, status: str, **extra: Any) -> Event:
    return Event(t * MS, "c", "client", DELIVER, msg_type="op", data={"id": op, "status": status, **extra})


def failures(events: list[Event], heal_ms: int = 1000, within_ms: int = 2000, end_ms: int = 10_000) -> list[str]:
    check = LiveAfterHeal(heal_ns=heal_ms * MS, within_ms=within_ms)
    for e in events:
        check.on_event(e)
    return [v.detail for v in check.finish(end_ms * MS) if not v.ok]


def test_an_operation_committed_in_time_and_read_back_late_passes() -> None:
    events = [command(1100, "a"), note(1100, "op-start", "a"), note(1150, "op-committed", "a"),
              deliver(3500, "a", "ok")]
    assert failures(events) == []


def test_an_operation_never_committed_fails_even_if_the_client_ends_it() -> None:
    events = [command(1100, "a"), note(1100, "op-start", "a"), deliver(3500, "a", "info")]
    [detail] = failures(events)
    assert "operation a of c sent at 1.100 s: not committed (ended info)" in detail


def test_an_operation_committed_too_late_fails() -> None:
    events = [command(1100, "a"), note(1100, "op-start", "a"), note(3200, "op-committed", "a"),
              deliver(3200, "a", "ok")]
    [detail] = failures(events)
    assert "committed after 2.100 s" in detail


def test_one_queued_behind_another_counts_from_when_it_was_sent() -> None:
    events = [command(1100, "a"), command(1200, "b"), note(1100, "op-start", "a"), note(1150, "op-committed", "a"),
              deliver(3000, "a", "ok"), note(3000, "op-start", "b"), note(3010, "op-committed", "b")]
    assert failures(events) == []


def test_an_operation_pending_at_the_heal_must_commit_within_the_bound_after_it() -> None:
    """A client stuck on an operation sent during the fault queues the rest: that operation is
    judged from the heal, so a cluster that never commits it is not hidden behind the queue."""
    stuck = [command(500, "a"), note(500, "op-start", "a"), command(1500, "b")]
    assert "operation a of c pending at the heal, sent at 0.500 s: not committed" in failures(stuck)[0]
    healed = stuck[:2] + [note(2500, "op-committed", "a"), deliver(2600, "a", "ok"), stuck[2],
                          note(2600, "op-start", "b"), note(2650, "op-committed", "b")]
    assert failures(healed) == []


def test_an_operation_its_client_crashed_with_is_not_owed() -> None:
    """The client crashes with an operation in flight (explore, search seed 21 of
    raft/explore/basic.yaml: a client crashed 2 ms after sending a get): it and the application
    that waited for it are gone, nobody reads the answer. One it sends after its restart is owed."""
    crash = Event(1105 * MS, "c", "client", CRASH)
    lost = [command(1100, "a"), note(1100, "op-start", "a"), crash]
    assert not any("operation a" in d for d in failures(lost)), failures(lost)
    after = lost + [command(1300, "b"), note(1300, "op-start", "b")]
    assert "operation b of c sent at 1.300 s: not committed" in failures(after)[0]
    done_first = [command(1100, "a"), note(1100, "op-start", "a"), note(1102, "op-committed", "a"), crash]
    assert failures(done_first) == []


def test_a_client_without_notes_is_timed_by_its_deliveries() -> None:
    assert failures([command(1100, "a"), deliver(1500, "a", "ok")]) == []
    assert failures([command(1100, "a"), deliver(1500, "a", "info", applied=True)]) == []
    [detail] = failures([command(1100, "a"), deliver(3500, "a", "ok")])
    assert "operation a of c invoked at 1.100 s: ok after 2.400 s" in detail


@pytest.mark.slow
def test_peers_compacting_every_two_entries_into_small_chunks_are_live() -> None:
    """(About 15 s: the clients read thousands of 16-byte snapshot chunks.)"""
    scenario = configured(load_scenario("scenarios/raft/chaos/partitions.yaml"), "peer",
                          {"snapshot_every": 2, "chunk_size": 16, "max_entries": 2})
    assert scenario is not None
    result = run_sim(scenario, 2)
    live = next(v for v in result.verdicts if v.check == "live-after-heal")
    assert live.ok, live.detail
    assert result.ok, [v.to_dict() for v in result.failed]
