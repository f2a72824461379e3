"""Every Event BUS invariant checker catches a deliberately broken node (reference_nodes/eventbus/
mutants.py) in a real simulated scenario, and passes with the reference nodes."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from harness.checkers.base import Verdict
from harness.composition import RunResult, run_sim
from harness.scenario import parse_scenario
from reference_nodes.eventbus import mutants as M

CHAOS = Path("scenarios/eventbus/chaos")

# Scenario variants that make a mutant's misbehaviour observable: (base scenario, text replacements).
VARIANTS = {
    # publishers that never resend (a PUB the server swallows stays lost)
    "clean+no-resend": ("clean", [("subtrees: [/weather/]}", "subtrees: [/weather/], publish_timeout: 0ms}"),
                                  ("subtrees: [/news/]}", "subtrees: [/news/], publish_timeout: 0ms}")]),
    # the primary does not come back: only a client that fails over can make the backup take over
    "failover+no-restart": ("failover", [("crash: primary, restart_after: 2s}", "crash: primary}")]),
    # late joiners that never resynchronise: what their first snapshot misses stays missing
    "late-join+no-resync": ("client-crash-late-join", [("subtrees: [/orders/eu/, /orders/us/]}",
                                                        "subtrees: [/orders/eu/, /orders/us/], resync: 0ms}")]),
    # publishing to the last moment: the last events are on their way when the run ends
    "clean+to-the-end": ("clean", [(", until: 3s}", "}")]),
    "lossy+to-the-end": ("lossy", [(", until: 4s}", "}")]),
    "clean+no-resend+to-the-end": ("clean", [(", until: 3s}", "}")] + [
        ("subtrees: [/weather/]}", "subtrees: [/weather/], publish_timeout: 0ms}"),
        ("subtrees: [/news/]}", "subtrees: [/news/], publish_timeout: 0ms}")]),
    "late-join+to-the-end": ("client-crash-late-join", [(", until: 4500ms}", "}")]),
    # the partition heals 10 ms before the end: the cut clients' resynchronisations come too late
    "partition-heal+late-heal": ("partition-heal", [("until: 3500ms, partition", "until: 7990ms, partition")]),
    # ... and a client back from a crash 1 ms before the end, too late to have synchronised
    "clean+to-the-end+late-restart": ("clean", [(", until: 3s}", "}")] + [
        ("check:", "faults:\n  - {at: 4990ms, crash: all, restart_after: 9ms}\ncheck:")]),
}


@functools.lru_cache(maxsize=None)
def reference(name: str) -> RunResult:
    return run(name)


def run(name: str, seed: int = 1, **factories) -> RunResult:
    base, edits = VARIANTS.get(name, (name, []))
    text = (CHAOS / f"{base}.yaml").read_text()
    for old, new in edits:
        assert old in text, (name, old)
        text = text.replace(old, new)
    return run_sim(parse_scenario(text, f"{name}.yaml"), seed, factories=factories)


def verdict(result: RunResult, check: str) -> Verdict:
    return next(v for v in result.verdicts if v.check == check)


CAUGHT = [
    ("clean", "weather.0", "foreign-topics", "client-subtrees"),
    ("client-crash-late-join", "bus", "empty-snapshot", "convergence"),
    ("failover+no-restart", "clients.*", "no-failover", "convergence"),
    ("clean+no-resend", "bus", "drops-pub", "complete-delivery"),
    ("client-crash-late-join", "bus", "empty-snapshot", "complete-delivery"),
    ("lossy", "news.*", "no-discard", "client-sequence"),
    ("client-crash-late-join", "late.*", "applies-early", "client-sequence"),
    ("clean", "all", "applies-twice", "applied-once"),
    ("clean", "bus", "syncend-latest", "syncend-sequence"),
    ("clean", "bus", "syncend-filter", "syncend-sequence"),
    ("clean", "bus", "syncend-ahead", "syncend-sequence"),
    ("client-crash-late-join", "bus", "empty-snapshot", "syncend-sequence"),
    ("server-restart", "bus", "volatile-sequence", "server-sequence"),
    ("clean", "bus", "pub-sequence", "server-sequence"),
    ("clean", "bus", "no-sequence-filter", "snapshot-filter"),
    ("clean", "bus", "no-subtree-filter", "snapshot-filter"),
    ("clean", "bus", "syncend-no-subtrees", "snapshot-filter"),
    ("clean", "bus", "alters-data", "forward-unchanged"),
    ("clean", "bus", "restamps", "forward-unchanged"),
    ("clean", "bus", "reencodes-data", "forward-unchanged"),
    ("server-restart", "clients.*", "hello-first", "syncstart-first"),
]


def nodes_of(scenario: str, pattern: str) -> list[str]:
    import fnmatch

    from harness.scenario import load_scenario

    base = VARIANTS.get(scenario, (scenario, []))[0]
    names = load_scenario(str(CHAOS / f"{base}.yaml")).node_names
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


@pytest.mark.parametrize("scenario,nodes,mutant,check", CAUGHT, ids=[f"{c[3]}-{c[2]}" for c in CAUGHT])
def test_checker_catches_mutant(scenario: str, nodes: str, mutant: str, check: str) -> None:
    assert verdict(reference(scenario), check).ok, "the reference nodes must pass first"
    _, factory, _ = M.MUTANTS[mutant]
    bad = verdict(run(scenario, **{n: factory for n in nodes_of(scenario, nodes)}), check)
    assert not bad.ok, f"{check} missed {mutant} in {scenario}"
    # the two server checks name the clause the snapshot or forwarded event broke: the mutant's
    assert bad.clause == M_CLAUSE.get(check, M.MUTANTS[mutant][2]) and bad.detail


M_CLAUSE = {
    # what a failure proves, the clients judged being reference ones (E-EVENTBUS-18): the servers
    # gave no complete snapshot (also when the client is a mutant that stays with a dead server)
    "convergence": "eventbus.server.sync-response",
    "complete-delivery": "eventbus.server.broadcast",
    "client-sequence": "eventbus.client.discard-old",
    "applied-once": "eventbus.client.discard-old",
    "syncend-sequence": "eventbus.server.syncend-sequence",
    "server-sequence": "eventbus.server.sequence-increasing",
}


def test_every_checker_is_proven_by_a_mutant() -> None:
    from harness.registry import package

    from tests.checkers.test_eventbus_client_checks import CAUGHT as CLIENT_CAUGHT  # the opt-in SHOULDs

    from tests.checkers.test_eventbus_external import PROVEN  # external-wire: what external nodes send

    assert {c[3] for c in CAUGHT} | {c[1] for c in CLIENT_CAUGHT} | PROVEN == set(package("eventbus").checks)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_joining_clients_lose_nothing_without_resync(seed: int) -> None:
    """Held BROADCASTs, and the catch-up after the first one, cover a join on slow links without
    the periodic resynchronisation."""
    r = run("late-join+no-resync", seed)
    assert r.ok, [v.to_dict() for v in r.failed]


def test_faults_really_happen() -> None:
    assert sum(reference("lossy").stats["dropped"].values()) > 20
    assert "across 1 restart" in verdict(reference("server-restart"), "server-sequence").detail
    # the failover: tests/test_eventbus_scenarios.py::test_failover_passes_live


def _stood_by_then_served(stands_by: bool) -> Verdict:
    """A server broadcasts /b/x as 1 while it is briefly active, then (maybe) stands by, and later
    serves a snapshot of /b/ up to 5 that does not hold it (its history is now its peer's)."""
    from harness.checkers.base import NOTE, RECV, SEND, Event
    from harness.checkers.eventbus import SyncEndSequence
    from harness.protocols import codec

    c = codec("eventbus", "strict")
    event = {"sequence": 1, "producer": "p", "timestamp": "2026-01-01T00:00:00.000Z",
             "uuid": "0c2f7b4e-8d1a-4f6e-9b3a-5d6c7e8f9a0b"}
    checker = SyncEndSequence()
    ident = b"client"
    events = [Event(1, "bus-b", "server", SEND, "publisher", c.encode("BROADCAST", {**event, "topic": "/b/x", "data": b"d"}),
                    "BROADCAST", codec=c)]
    if stands_by:
        events.append(Event(2, "bus-b", "server", NOTE, msg_type="ha-state", data={"state": "backup"}))
    events += [Event(3, "bus-b", "server", NOTE, msg_type="ha-state", data={"state": "primary", "sequence": 5}),
               Event(4, "bus-b", "server", RECV, "snapshot",
                     [ident, *c.encode("SYNCSTART", {"subtrees": ["/b/"], "sequence": 0})], "SYNCSTART", codec=c),
               Event(5, "bus-b", "server", SEND, "snapshot",
                     [ident, *c.encode("SYNCEND", {"subtrees": ["/b/"], "sequence": 5})], "SYNCEND", codec=c)]
    for ev in events:
        checker.on_event(ev)
    return checker.finish(10)[0]


def test_syncend_sequence_forgets_what_a_server_broadcast_before_it_stood_by() -> None:
    # failover.yaml seeds 431 and 481: both servers active for a moment at start, the one that
    # yielded later served its peer's history; not a wrong snapshot.
    assert _stood_by_then_served(stands_by=True).ok
    assert not _stood_by_then_served(stands_by=False).ok  # without standing by it still counts


# Found by `zmq-harness explore scenarios/eventbus/explore/failover.yaml --search-seed 21`
# (shrunk): 2% of bus-b's SYNCs dropped. The client 'late' joins at 4 s and loses the same SYNC
# in its full snapshot and in the resync that offers it again; convergence and complete-delivery
# blamed the server, which had sent it twice. (Seed 469856 then; since the clients connect anew
# after a sync timeout the runs differ, and seed 469007 is one where the rules lose a SYNC so.)
SYNCS_LOST = """
protocol: eventbus
name: eventbus-syncs-lost
duration: 7s
nodes:
  bus-a: {role: server, config: {ha: primary, poll: 100ms, ha_timeout: 600ms, check: 400ms}}
  bus-b: {role: server, config: {ha: backup, poll: 100ms, ha_timeout: 600ms}}
  clients: {role: client, count: 4, config: {subtrees: [/a/, /b/], resync: 300ms, sync_timeout: 300ms, publish_timeout: 500ms}}
  late: {role: client, start: 4s, config: {subtrees: [/b/]}}
workload:
  - {nodes: clients, op: publish, topics: [/a/x, /b/y], rate: 8/s, from: 700ms, until: 4s, limit: 26}
faults:
  - {at: 2s, crash: primary}
  - rule: {message: SYNC, from: bus-b, drop: true, nth: 873-937, probability: 2%}
check: [convergence, complete-delivery]
"""


def test_an_event_whose_syncs_the_rules_dropped_is_not_held_against_the_server() -> None:
    result = run_sim(parse_scenario(SYNCS_LOST, "syncs-lost.yaml"), 469007)
    for check in ("convergence", "complete-delivery"):
        v = verdict(result, check)
        assert v.ok and "1 (client, event) pair(s) a server sent in a SYNC" in v.detail, v.detail


def test_a_server_that_sends_no_snapshot_is_still_caught_where_rules_drop_syncs() -> None:
    """What a server never sent is not excused by the rules: an empty snapshot still fails."""
    result = run_sim(parse_scenario(SYNCS_LOST, "syncs-lost.yaml"), 469007,
                     factories={"bus-b": M.EmptySnapshotServer})
    v = verdict(result, "convergence")
    assert not v.ok and "lacks" in v.detail, v.detail


def test_what_a_fault_held_up_until_just_before_the_end_is_in_flight() -> None:
    """Cut off until 10 ms before the end, the cut clients lacked some 40 events each, published
    from 1.5 s on, on seeds 1-6 (the repair of a partition's losses begins at its heal)."""
    result = run("partition-heal+late-heal")
    for check in ("convergence", "complete-delivery"):
        v = verdict(result, check)
        assert v.ok and "still in flight when the run ended" in v.detail, v.detail


# Seeds on which a correct bus failed before the in-flight rule (clean: an event accepted 0.1 ms
# before the end; lossy: events whose BROADCAST was dropped in the last 80 ms, before a resync).
@pytest.mark.parametrize("name,seed", [("clean+to-the-end", 5), ("clean+to-the-end", 6), ("lossy+to-the-end", 20),
                                       ("late-join+to-the-end", 2)])
def test_events_still_on_their_way_when_the_run_ends_are_not_owed(name: str, seed: int) -> None:
    result = run(name, seed)
    for check in ("convergence", "complete-delivery"):
        v = verdict(result, check)
        assert v.ok and "still in flight when the run ended" in v.detail, v.detail
        assert "(client, event) pair(s) of events first offered to the bus then" in v.detail, v.detail


def test_a_client_back_too_late_to_synchronise_is_not_judged() -> None:
    v = verdict(run("clean+to-the-end+late-restart"), "convergence")
    assert v.ok and "1 client(s) started or restarted then (all)" in v.detail, v.detail


def test_a_client_started_too_late_to_synchronise_is_not_judged() -> None:
    """(It failed "late never synchronised", started 1 ms before the end.)"""
    text = (CHAOS / "clean.yaml").read_text().replace(
        "  all: {role: client}\n", "  all: {role: client}\n  late: {role: client, start: 4999ms}\n")
    assert "late:" in text
    result = run_sim(parse_scenario(text, "late-start.yaml"), 1)
    for check in ("convergence", "complete-delivery"):
        v = verdict(result, check)
        assert v.ok and "1 client(s) started or restarted then (late)" in v.detail, v.detail


@pytest.mark.parametrize("name,nodes,mutant,check", [
    ("clean+no-resend+to-the-end", "bus", "drops-pub", "complete-delivery"),
    ("late-join+to-the-end", "bus", "empty-snapshot", "convergence"),
    ("late-join+to-the-end", "bus", "empty-snapshot", "complete-delivery"),
    ("clean+to-the-end+late-restart", "bus", "no-syncend", "convergence"),
    ("partition-heal+late-heal", "bus", "drops-pub", "complete-delivery"),
    ("partition-heal+late-heal", "bus", "no-syncend", "convergence"),
])
def test_what_is_in_flight_at_the_end_does_not_hide_a_broken_server(name: str, nodes: str, mutant: str,
                                                                     check: str) -> None:
    _, factory, _ = M.MUTANTS[mutant]
    v = verdict(run(name, **{n: factory for n in nodes_of(name, nodes)}), check)
    assert not v.ok and v.clause == M_CLAUSE[check], v.detail


def test_the_in_flight_window_is_the_sync_timeout_and_where_a_loss_may_come_late_two_repairs_more() -> None:
    from harness.packages.eventbus import faults_over_ns, in_flight_windows, last_loss_ns
    from harness.scenario import load_scenario

    def windows(name: str, old: str = "", new: str = "") -> set[int]:
        text = (CHAOS / f"{name}.yaml").read_text()
        assert old in text
        return set(in_flight_windows(parse_scenario(text.replace(old, new), f"{name}.yaml")).values())

    clean = in_flight_windows(load_scenario(str(CHAOS / "clean.yaml")))
    assert set(clean.values()) == {500} and "all" in clean  # the default sync timeout
    # lossy: its rules act all run long: 500 + 2 x its 400 ms resync + 2 x the publishers' 600 ms PUB timeout
    assert windows("lossy") == {2500}
    # the server is back at 3 s of 8: a loss then is repaired well before the end (its clients'
    # sync timeouts are 300 and 500 ms)
    assert last_loss_ns(load_scenario(str(CHAOS / "server-restart.yaml"))) == 3_000_000_000
    assert windows("server-restart") == {300, 500}
    assert max(windows("server-restart", "restart_after: 1s", "restart_after: 4500ms")) > 3000
    # a client's crash loses nothing the bus owes the others
    assert last_loss_ns(load_scenario(str(CHAOS / "client-crash-late-join.yaml"))) is None
    # a message rule strikes each message as it is sent: it holds up no older event
    assert faults_over_ns(load_scenario(str(CHAOS / "lossy.yaml"))) is None
    assert faults_over_ns(load_scenario(str(CHAOS / "partition-heal.yaml"))) == 3_500_000_000
