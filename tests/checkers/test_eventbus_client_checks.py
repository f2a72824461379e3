"""The Event BUS client checks of SHOULDs (harness/checkers/eventbus_client.py): each catches its
mutant on the exploration file that names it, the reference clients pass, and neither judges
what the document allows (a new producer id after a restart, a life too short to connect)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from harness.checkers.base import CRASH, START, Verdict
from harness.checkers.eventbus_client import SyncStartFirst
from harness.composition import RunResult, run_sim
from harness.node import NodeContext
from harness.packages.eventbus import in_process_identities
from harness.scenario import parse_scenario
from reference_nodes.eventbus.client import Client
from reference_nodes.eventbus.mutants import MUTANTS
from tests.checkers.unprobed import Unprobed

BASIC = Path("scenarios/eventbus/explore/basic.yaml")
NEW_CHECKS = ("producer-id", "client-connections")
# (mutant, the check that must catch it, the clause it names)
CAUGHT = [("shifting-producer", "producer-id", "eventbus.client.producer-id"),
          ("no-subscriber", "client-connections", "eventbus.client.connections")]


def run(text: str, seed: int = 1, **factories: Any) -> RunResult:
    return run_sim(parse_scenario(text, "basic.yaml"), seed, factories=factories)


def verdict(result: RunResult, check: str) -> Verdict:
    return next(v for v in result.verdicts if v.check == check)


@functools.lru_cache(maxsize=None)
def reference() -> RunResult:
    return run(BASIC.read_text())


def test_the_reference_clients_pass_and_the_checks_are_shoulds() -> None:
    for check in NEW_CHECKS:
        v = verdict(reference(), check)
        assert v.ok and v.level == "SHOULD", v.detail
    assert "5 client life(s)" in verdict(reference(), "client-connections").detail
    assert reference().ok, [v.to_dict() for v in reference().failed]


@pytest.mark.parametrize("mutant,check,clause", CAUGHT, ids=[c[0] for c in CAUGHT])
def test_check_catches_mutant(mutant: str, check: str, clause: str) -> None:
    factory = MUTANTS[mutant][1]
    result = run(BASIC.read_text(), **{f"clients.{i}": factory for i in range(4)})
    bad = verdict(result, check)
    assert not bad.ok and bad.clause == clause and bad.level == "SHOULD", bad.detail
    # ... and it is the only check that fails: the mutant's clients converge all the same
    assert [v.check for v in result.failed] == [check]


class NewIdEachStart(Client):
    """A client that draws its producer id when it starts: it still identifies itself."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.producer = f"{self.name}-{self.rng.randrange(1 << 30)}"


def test_a_new_producer_id_after_a_restart_is_no_failure() -> None:
    text = BASIC.read_text().replace("check:", "faults:\n  - {at: 1s, crash: clients.0, restart_after: 300ms}\n"
                                               "  - {at: 3500ms, crash: late, restart_after: 300ms}\ncheck:")
    result = run(text, **{"clients.0": NewIdEachStart})
    assert verdict(result, "producer-id").ok, verdict(result, "producer-id").detail
    # late's first life (3 s to 3.5 s) is too short to owe its connections; the six others are judged
    connections = verdict(result, "client-connections")
    assert connections.ok and "6 client life(s)" in connections.detail, connections.detail


# ---- syncstart-first (a MUST, a default check) ----------------------------------------------

def test_syncstart_first_catches_a_client_that_greets_before_its_syncstart() -> None:
    factory = MUTANTS["hello-first"][1]
    result = run(BASIC.read_text(), **{"clients.0": factory})
    bad = verdict(result, "syncstart-first")
    assert not bad.ok and bad.clause == "eventbus.client.syncstart-first" and bad.level == "MUST", bad.detail
    assert "clients.0 sent SYNCEND on snapshot" in bad.detail and "1 snapshot connection(s)" in bad.detail
    # the server drops the stray SYNCEND and the bus converges: only this check sees it
    assert [v.check for v in result.failed] == ["syncstart-first"]


def test_syncstart_first_judges_every_snapshot_connection_of_the_reference() -> None:
    v = verdict(reference(), "syncstart-first")
    assert v.ok and "5 snapshot connection(s)" in v.detail, v.detail


class GreetsAfterRestart(MUTANTS["hello-first"][1]):  # type: ignore[misc,valid-type]
    """Starts its first life right, and greets before its SYNCSTART in every later one."""

    started: set[str] = set()

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.greeted = self.name not in GreetsAfterRestart.started
        GreetsAfterRestart.started.add(self.name)


RESTARTS = ("faults:\n  - {at: 1s, crash: clients.0, restart_after: 300ms}\n"
            "  - {at: 3500ms, crash: late, restart_after: 300ms}\ncheck:")


def test_syncstart_first_judges_each_life_afresh() -> None:
    GreetsAfterRestart.started.clear()
    result = run(BASIC.read_text().replace("check:", RESTARTS), **{"clients.0": GreetsAfterRestart})
    bad = verdict(result, "syncstart-first")
    assert not bad.ok and "clients.0 sent SYNCEND" in bad.detail, bad.detail
    assert "at 1300.0 ms" in bad.detail and bad.evidence[0]["time_ms"] == 1300.0  # its second life, from 1.3 s
    # the reference restarted: each new life starts with a SYNCSTART again, and passes
    result = run(BASIC.read_text().replace("check:", RESTARTS))
    v = verdict(result, "syncstart-first")
    assert v.ok and "7 snapshot connection(s)" in v.detail, v.detail


class PublishOnly(Client):
    """Never synchronises (E-EVENTBUS-15: a client that only publishes sends no SYNCSTART)."""

    def _sync(self, now: int, full: bool, since: int | None = None) -> list[Any]:
        return []


def test_a_client_that_sends_no_syncstart_is_not_judged_by_syncstart_first() -> None:
    result = run(BASIC.read_text(), **{f"clients.{i}": PublishOnly for i in range(4)})
    v = verdict(result, "syncstart-first")
    assert v.ok and "1 snapshot connection(s)" in v.detail, v.detail


# ---- syncstart-first of a client run as an external process: judged as the server received it --

def judged_as_external(text: str, external_servers: bool = False, **factories: Any) -> Verdict:
    scenario = parse_scenario(text, "basic.yaml")
    check = SyncStartFirst(in_process=in_process_identities(scenario) - {"clients.0"},
                           external_clients=frozenset({"clients.0"}), external_servers=external_servers)
    watcher = Unprobed(check, "clients.0", passed=frozenset({CRASH, START}))  # (process faults)
    run_sim(scenario, 1, factories=factories, observers=[watcher])
    [v] = watcher.finish(scenario.duration_ns)
    return v


def test_an_external_client_that_greets_first_is_caught_where_the_server_received_it() -> None:
    # before: judged by nobody: the server dropped the well-formed SYNCEND as unexpected, which
    # external-wire does not count (it decodes), and this check read only the client's own sends
    bad = judged_as_external(BASIC.read_text(), **{"clients.0": MUTANTS["hello-first"][1]})
    assert not bad.ok and bad.clause == "eventbus.client.syncstart-first", bad.detail
    assert "bus received SYNCEND on its snapshot port from the client with identity b'clients.0'" in bad.detail
    # the reference passes, its connection judged as received
    v = judged_as_external(BASIC.read_text())
    assert v.ok and "of external clients, 1 connection(s) as the servers received them" in v.detail, v.detail
    # an external server's replica connection cannot be told from a client's: not judged, and said so
    v = judged_as_external(BASIC.read_text(), external_servers=True, **{"clients.0": MUTANTS["hello-first"][1]})
    assert v.ok and "not judged: the external clients" in v.detail, v.detail


def test_an_external_client_is_judged_afresh_in_each_life() -> None:
    GreetsAfterRestart.started.clear()
    text = BASIC.read_text().replace("check:", RESTARTS)
    bad = judged_as_external(text, **{"clients.0": GreetsAfterRestart})
    assert not bad.ok and "from the client with identity b'clients.0'" in bad.detail, bad.detail
    assert bad.evidence[0]["time_ms"] >= 1300.0  # its second life
    v = judged_as_external(text)
    assert v.ok and "of external clients, 2 connection(s)" in v.detail, v.detail
