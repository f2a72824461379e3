"""Writes of clients the run does not observe (harness/packages/raft/foreign.py): the
linearizable check takes them from the wire instead of failing a correct cluster, and still
catches a client that breaks linearizability.

An external client (a ``command`` group) has no probe and no command channel. Here it is
played in simulation by reference clients whose every event the check is kept from seeing —
what the check saw of an external process until now. Their writes hit the keys the observed
clients read."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checkers.base import Event, Verdict
from harness.composition import RunResult, run_sim
from harness.packages.raft.checks import KVLinearizable
from harness.packages.raft.foreign import ForeignWrites
from harness.scenario import parse_scenario
from reference_nodes.raft.mutants import MUTANTS

SCENARIO = """
protocol: raft
name: raft-test-unobserved-writers
duration: 3s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 2, config: {op_timeout: 2s}}
  outside: {role: client, count: 2, config: {op_timeout: 2s}}
workload:
  - {nodes: clients, op: get, rate: 15/s, from: 300ms, until: 2500ms, keys: 2}
  - {nodes: clients, op: put, rate: 3/s, from: 300ms, until: 2500ms, keys: 2}
  - {nodes: outside, op: put, rate: 10/s, from: 300ms, until: 2500ms, keys: 2}
  - {nodes: outside, op: cas, rate: 5/s, from: 300ms, until: 2500ms, keys: 2}
check: [update-once]
"""


class Unobserved(KVLinearizable):
    """The linearizable check as it is built for a run with external clients, blind to every
    event of the ``outside`` clients (an external process produces none)."""

    name = "linearizable-unobserved"

    def __init__(self, foreign: ForeignWrites | None) -> None:
        super().__init__(foreign=foreign)

    def on_event(self, ev: Event) -> None:
        if not ev.node.startswith("outside"):
            super().on_event(ev)


def run(seed: int, foreign: bool, client_mutant: str | None = None) -> Verdict:
    sc = parse_scenario(SCENARIO, "unobserved.yaml")
    factories: dict[str, Any] = {}
    if client_mutant is not None:
        factories = {n: MUTANTS[client_mutant][1] for n in sc.node_names if n.startswith("clients")}
    check = Unobserved(ForeignWrites() if foreign else None)
    result: RunResult = run_sim(sc, seed, factories=factories, observers=[check])
    return next(v for v in result.verdicts if v.check == "linearizable-unobserved")


def test_external_writers_were_a_false_alarm_and_are_now_operations_of_unknown_outcome() -> None:
    # Before: a read of an unobserved client's value "cannot be explained".
    blind = run(1, foreign=False)
    assert not blind.ok and "cannot be explained" in blind.detail, blind.detail
    for seed in (1, 2, 3):
        v = run(seed, foreign=True)
        assert v.ok, (seed, v.detail)
        assert "write(s) of external clients seen on the wire" in v.detail
        seen = int(v.detail.split("(with ")[1].split()[0])
        assert seen > 20, v.detail  # the outside clients' puts and cas (about 2 x 2.2 s x 15/s)


def test_a_client_that_reads_its_own_replica_is_still_caught_among_external_writers() -> None:
    assert MUTANTS["local-read"][0] == "client"
    v = run(2, foreign=True, client_mutant="local-read")  # seed 1 passes it, 2-6 fail it
    assert not v.ok and "cannot be explained" in v.detail, v.detail


def test_runs_without_external_clients_do_not_watch_the_wire() -> None:
    sc = parse_scenario(SCENARIO, "unobserved.yaml")
    assert ForeignWrites.for_scenario(sc) is None
    external = parse_scenario(SCENARIO.replace("outside: {role: client, count: 2, config: {op_timeout: 2s}}",
                                               'outside: {role: client, count: 2, command: "theirs {peers}"}')
                              .split("workload:")[0] + "check: [linearizable]\n", "external.yaml")
    assert isinstance(ForeignWrites.for_scenario(external), ForeignWrites)


STANDIN = """
protocol: raft
name: raft-test-standin-clients
duration: 4s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 2}
  theirs:
    role: client
    count: 2
    command: "{python} tests/standins/raft_client.py --peers {peers} --updates 10 --key k0"
workload:
  - {nodes: clients, op: put, rate: 5/s, from: 500ms, until: 3500ms, keys: 1}
  - {nodes: clients, op: get, rate: 5/s, from: 500ms, until: 3500ms, keys: 1}
"""


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_client_written_from_the_document_alone_runs_beside_the_harness_clients(tmp_path: Any) -> None:
    """The stand-in client (its own reqids and data shape, exits 0 once its updates are done)
    as an external group: every default check passes, and it ended by itself, normally."""
    from harness.composition import run_live

    r = run_live(parse_scenario(STANDIN, "standin.yaml"), 1, str(tmp_path))
    assert r.ok, [v.to_dict() for v in r.failed]
    ended = [v for v in r.verdicts if v.check == "process-alive"]
    assert ended and all("status 0" in v.detail for v in ended), [v.detail for v in ended]
