"""Every Dafka invariant checker catches a deliberately broken node (reference_nodes/dafka/
mutants.py) in a real simulated scenario, and passes with the reference nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_sim
from harness.scenario import parse_scenario
from reference_nodes.dafka import mutants

CHAOS = Path("scenarios/dafka/chaos")


EXTRA = {  # scenario variants that make a mutant's misbehaviour observable
    "clean+duplicates": ("clean", '  - rule: {message: RECORD, duplicate: 30%}\n'),
}


def run(name: str, seed: int = 1, **factories) -> RunResult:
    base, extra = EXTRA.get(name, (name, ""))
    text = (CHAOS / f"{base}.yaml").read_text()
    if extra:
        text = text.replace("check:", "faults:\n" + extra + "check:") if "faults:" not in text else \
            text.replace("faults:\n", "faults:\n" + extra)
    return run_sim(parse_scenario(text, f"{name}.yaml"), seed, factories=factories)


def verdict(result: RunResult, check: str):
    return next(v for v in result.verdicts if v.check == check)


@pytest.mark.parametrize("scenario,node,mutant,check,clause", [
    ("clean", "producer", mutants.SkipOffsetProducer, "offsets", "dafka.record.offset-increments"),
    ("clean", "producer", mutants.OffsetOneProducer, "offsets", "dafka.record.offset-starts-at-zero"),
    ("clean+duplicates", "early", mutants.DuplicateDeliveryConsumer, "consumer-order", "dafka.record.offset-increments"),
    ("lossy", "consumers.0", mutants.OutOfOrderConsumer, "consumer-order", "dafka.record.offset-increments"),
    ("lossy", "consumers.1", mutants.SkipGapConsumer, "consumer-order", "dafka.record.offset-increments"),
    ("lossy", "producer", mutants.DescendingFetchProducer, "fetch-ascending", "dafka.fetch.ascending-order"),
    ("producer-dies", "store", mutants.DescendingFetchStore, "fetch-ascending", "dafka.fetch.ascending-order"),
    ("lossy", "producer", mutants.EarlyReleaseProducer, "keep-until-ack", "dafka.producer.keep-until-ack"),
    ("store-restart", "store", mutants.MemoryStore, "acked-retrievable", "dafka.producer.keep-until-ack"),
    ("store-restart", "store", mutants.MemoryStore, "complete-delivery", "dafka.fetch.on-gap"),
])
def test_checker_catches_mutant(scenario: str, node: str, mutant, check: str, clause: str) -> None:
    assert verdict(run(scenario), check).ok, "the reference nodes must pass first"
    bad = verdict(run(scenario, **{node: mutant}), check)
    assert not bad.ok, f"{check} missed {mutant.__name__} in {scenario}"
    assert bad.clause == clause and bad.detail


def test_reference_nodes_pass_every_chaos_scenario_check() -> None:
    for path in sorted(CHAOS.glob("*.yaml")):
        r = run(path.stem, seed=2)
        assert r.ok, (path.stem, [v.to_dict() for v in r.failed])


def test_faults_really_happen() -> None:
    restart = run("store-restart")
    acked = verdict(restart, "acked-retrievable")
    assert acked.ok and "across a restart" in acked.detail
    lossy = run("lossy")
    assert sum(lossy.stats["dropped"].values()) > 10
    assert int(verdict(lossy, "fetch-ascending").detail.split()[0]) > 0  # gaps were repaired by FETCH


# Found by explore on the reference nodes (2026-11-27): the producer crashed 1 ms after
# publishing record 27, which died in its queue; restarted, it is a new partition (a new UUID,
# E-DAFKA-21), so nobody can ever fetch 27. complete-delivery demanded it anyway.
_LOST_WITH_ITS_PRODUCER = """
protocol: dafka
name: dafka-lost-with-its-producer
duration: 3800ms
nodes:
  tower: {role: tower}
  producer: {role: producer, config: {topic: orders, head: 200ms, beacon: 100ms}}
  store: {role: store, config: {beacon: 100ms, fetch_retry: 150ms}}
  early: {role: consumer, config: {topics: orders, offset_reset: earliest, beacon: 100ms, fetch_retry: 150ms}}
  late: {role: consumer, start: 2500ms, config: {topics: orders, offset_reset: earliest, beacon: 100ms,
                                                  fetch_retry: 150ms, get_heads: 500ms}}
workload:
  - {nodes: producer, op: produce, rate: 20/s, from: 500ms, until: 1800ms, size: 32, limit: 28}
faults:
  - {at: 1786ms, crash: producer, restart_after: 10ms}
check: [complete-delivery]
"""


def test_a_record_that_died_with_its_producer_is_not_owed() -> None:
    result = run_sim(parse_scenario(_LOST_WITH_ITS_PRODUCER, "lost.yaml"), 143)
    v = verdict(result, "complete-delivery")
    assert v.ok, v.detail  # failed before: "early lacks 1 of orders/... (offsets 27..27)"
    assert "54 (consumer, record) deliveries" in v.detail  # 0..26 to both consumers: still owed and made


# Found by explore on the reference nodes (2026-11-28, search seed 41 of lossy.yaml): restarted,
# the producer published records 0 and 1 of its new partition; 0 reached nobody (the consumer and
# the store were still subscribing), 1 reached both, and the producer was restarted again before
# its DIRECT-RECORD answering the FETCH of 0 arrived. 0 is gone, so the consumer, which delivers
# without gaps, waits for it for good; complete-delivery demanded 1 all the same.
_HOLE_BEFORE_A_STORED_RECORD = """
protocol: dafka
name: dafka-hole-before-a-stored-record
duration: 4400ms
nodes:
  tower: {role: tower}
  producer: {role: producer, config: {topic: orders, head: 200ms, beacon: 100ms}}
  store: {role: store, config: {beacon: 100ms, fetch_retry: 150ms}}
  consumers: {role: consumer, count: 1, config: {topics: orders, offset_reset: earliest, beacon: 100ms,
                                                 fetch_retry: 150ms, get_heads: 500ms}}
workload:
  - {nodes: producer, op: produce, rate: 25/s, from: 500ms, until: 2400ms, size: 32, limit: 46}
faults:
  - {at: 1955ms, crash: producer, restart_after: 310ms}
  - {at: 2s, crash: producer, restart_after: 360ms}
check: [complete-delivery, consumer-order]
"""


def test_a_stored_record_behind_one_that_died_with_its_producer_is_not_owed() -> None:
    result = run_sim(parse_scenario(_HOLE_BEFORE_A_STORED_RECORD, "hole.yaml"), 774)
    v = verdict(result, "complete-delivery")
    assert v.ok, v.detail  # failed before: "consumers.0 lacks 1 of orders/... (offsets 1..1)"
    assert "38 (consumer, record) deliveries" in v.detail and "1 stored record(s) not owed" in v.detail, v.detail
    assert verdict(result, "consumer-order").ok


def test_what_a_store_received_is_owed_after_its_producer_crashed() -> None:
    # the same crash, with a store that loses what it held at a restart: what it had received
    # from the dead partition is owed still, and missing
    text = _LOST_WITH_ITS_PRODUCER.replace("  - {at: 1786ms, crash: producer, restart_after: 10ms}",
                                           "  - {at: 1786ms, crash: producer, restart_after: 10ms}\n"
                                           "  - {at: 2000ms, crash: store, restart_after: 10ms}")
    result = run_sim(parse_scenario(text, "lost-store.yaml"), 143, factories={"store": mutants.MemoryStore})
    v = verdict(result, "complete-delivery")
    assert not v.ok and "late lacks" in v.detail, v.detail


def test_complete_delivery_does_not_owe_what_is_still_in_flight_at_the_end() -> None:
    """lossy.yaml producing to its very end: a RECORD lost in the last rounds of HEAD and FETCH retry
    has had no time to be fetched (before, seed 1 failed: "consumers.1 lacks 4 of orders/...
    (offsets 143..146)", produced in the run's last 300 ms)."""
    text = (CHAOS / "lossy.yaml").read_text().replace("until: 4s", "until: 7s")
    v = verdict(run_sim(parse_scenario(text, "to-the-end.yaml"), 1), "complete-delivery")
    assert v.ok and "deliveries not owed: still in flight" in v.detail, v.detail


def test_only_a_lossy_file_leaves_records_in_flight() -> None:
    from harness.packages.dafka import _complete
    clean = parse_scenario((CHAOS / "clean.yaml").read_text(), "clean.yaml")
    lossy = parse_scenario((CHAOS / "lossy.yaml").read_text(), "lossy.yaml")
    assert _complete(clean).in_flight_ns == 0
    assert _complete(lossy).in_flight_ns == 3 * (200 + 150) * 1_000_000  # its HEAD interval and FETCH retry


# partition-heal.yaml with its partition moved to end 100 ms before the run does, producing to the end
LATE_HEAL = (CHAOS / "partition-heal.yaml").read_text().replace(
    "{from: 1500ms, until: 3500ms,", "{from: 5900ms, until: 7900ms,").replace(", until: 5s, size", ", size")


def test_complete_delivery_does_not_owe_what_a_fault_held_up_until_just_before_the_end() -> None:
    """The cut consumer, whole again 100 ms before the end, has had no time to fetch what it missed
    (before, seed 4 failed: "cut lacks 13 of orders/... (offsets 94..106)", produced 1 s earlier)."""
    assert "5900ms" in LATE_HEAL and "until: 5s" not in LATE_HEAL
    v = verdict(run_sim(parse_scenario(LATE_HEAL, "late-heal.yaml"), 4), "complete-delivery")
    assert v.ok and "deliveries not owed: still in flight" in v.detail, v.detail


def test_a_late_fault_leaves_in_flight_only_what_it_touched() -> None:
    """The other consumer was never cut off: a gap it skips is still owed."""
    from harness.packages.dafka import _complete
    text = LATE_HEAL.replace("faults:\n", "faults:\n  - rule: {message: RECORD, to: other, drop: 10%}\n"
                                          "  - rule: {message: DIRECT-RECORD, to: other, drop: 10%}\n")
    assert _complete(parse_scenario(text, "t.yaml")).healed_ns == {"cut": 7_900_000_000, "other": 0}
    v = verdict(run_sim(parse_scenario(text, "t.yaml"), 4, factories={"other": mutants.SkipGapConsumer}),
                "complete-delivery")
    assert not v.ok and "other lacks" in v.detail, v.detail


def _late_consumer(before_end_ms: int) -> str:
    return (CHAOS / "clean.yaml").read_text().replace(
        "  late: {role: consumer,", f"  late2: {{role: consumer, start: {6000 - before_end_ms}ms, config: "
        "{topics: orders, offset_reset: earliest, beacon: 200ms, fetch_retry: 200ms}}\n  late: {role: consumer,", 1)


def test_a_consumer_started_too_late_to_catch_up_is_owed_nothing_yet() -> None:
    """Started 30 ms before the end it lacked all 55 records ("late2 lacks 55 of orders/..."); one
    started 1.5 s before the end, past the three rounds of HEAD and FETCH, is owed them all and has
    them."""
    v = verdict(run_sim(parse_scenario(_late_consumer(30), "late.yaml"), 1), "complete-delivery")
    assert v.ok and "55 (consumer, record) deliveries not owed: their consumer started less than" in v.detail, \
        v.detail
    v = verdict(run_sim(parse_scenario(_late_consumer(1500), "late.yaml"), 1), "complete-delivery")
    assert v.ok and "not owed" not in v.detail and v.detail.startswith("165 (consumer, record)"), v.detail
    late = parse_scenario(_late_consumer(1500), "late.yaml")  # (a consumer that skips to the head misses them)
    v = verdict(run_sim(late, 1, factories={"late2": mutants.SkipGapConsumer}), "complete-delivery")
    assert not v.ok and "late2 lacks" in v.detail, v.detail


def test_a_consumer_there_from_the_start_is_judged_however_short_the_run() -> None:
    """A run of 1.3 s, shorter than the catch-up window (1,350 ms): consumers there from the start
    are owed what the producer's skipped offset holds up (the window once counted from 0 for them,
    and a live run with an external skip-offset producer passed complete-delivery)."""
    text = (CHAOS / "clean.yaml").read_text().replace("duration: 6s", "duration: 1300ms").replace(
        "from: 1s, until: 4s,", "from: 300ms, until: 1s,")
    assert "1300ms" in text and "until: 1s" in text
    v = verdict(run_sim(parse_scenario(text, "short.yaml"), 1, factories={"producer": mutants.SkipOffsetProducer}),
                "complete-delivery")
    assert not v.ok and "early lacks" in v.detail and "late lacks" in v.detail, v.detail


def _acked_then_reported(held: int, report_at: int, acks: int = 10) -> "object":
    """A store ACKs offsets 0..acks-1 of partition P1 (one a millisecond) and reports, at
    ``report_at`` ms, that it holds P1 up to ``held``."""
    from harness.checkers.base import DELIVER, SEND, Event
    from harness.checkers.dafka import AckedRetrievable
    from harness.protocols import codec

    c = codec("dafka", "strict")
    checker = AckedRetrievable()
    events = [Event(k * 1_000_000, "store", "store", SEND, "pub",
                    c.encode("ACK", {"topic": "P1", "address": "S1", "subject": "orders", "sequence": k}), "ACK",
                    codec=c) for k in range(acks)]
    events.append(Event(report_at * 1_000_000, "store", "store", DELIVER, msg_type="store-status",
                        data={"partitions": {"orders/P1": {"prefix": held}}}))
    for ev in sorted(events, key=lambda e: e.time_ns):
        checker.on_event(ev)
    return checker.finish(20_000_000)[0]


def test_acked_retrievable_judges_what_was_acked_before_the_status() -> None:
    # Live, the status is asked 300 ms before the end while a workload that runs to the end is
    # still being ACKed: the late variants of partition-heal, producer-dies and two-stores
    # failed "store ACKed .. up to 140 but holds only up to 132", the 8 ACKs after the report.
    late = _acked_then_reported(held=5, report_at=5)  # ACKs 0..5 before the report, 6..9 after
    assert late.ok and "1 (store, partition) pair(s) ACKed more after the store's last status" in late.detail
    assert not _acked_then_reported(held=4, report_at=5).ok  # ACKed 5 before the report, holds up to 4
    assert _acked_then_reported(held=9, report_at=15).ok
    assert not _acked_then_reported(held=8, report_at=15).ok
