"""wire-conformance judges what an external node (a ``command:`` group) sends the harness's
nodes, as they receive it (harness/checkers/wire_receipts.py).

Each protocol: one short simulated run with a broken node (a shipped mutant, or a reference node
made to break one message), its checker events recorded, then given to ``wire-conformance`` as
a live run with that node external would give them: the external node's own sends, receipts,
commands, deliveries and notes are left out (it has no probe) and its sockets are not declared.
A malformed message is caught with the mutant's clause, naming sender and receiver; the same run
with a reference node external passes; with two external nodes the receiver cannot tell apart, the
messages are counted as not judged; a scenario whose rules corrupt messages judges none. Before
this module ``wire-conformance`` had no ``external`` parameter and judged none of these."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from harness import composition
from harness.checkers.base import CRASH, PAUSE, RESTART, RESUME, Checker, Event, Verdict
from harness.checkers.wire import WireConformance
from harness.checkers.wire_receipts import ExternalSenders
from harness.node import NodeFactory, SocketSpec
from harness.registry import package
from harness.checkers.external import corrupts
from harness.scenario import load_scenario, parse_scenario
from tests.checkers.test_wire_raft import SMALL
from tests.checkers.wire_helpers import rewriting

RUNTIME_KINDS = frozenset({CRASH, RESTART, PAUSE, RESUME})  # what the runtime reports of any node


class Recorder(Checker):
    """Every event and socket declaration of a run, in order."""

    name = "recorder"

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, Any]] = []

    def on_event(self, ev: Event) -> None:
        self.log.append(("event", ev))

    def on_sockets(self, node: str, sockets: list[SocketSpec]) -> None:
        self.log.append(("sockets", (node, sockets)))

    def finish(self, end_ns: int) -> list[Verdict]:
        return []


def own_identity(factory: NodeFactory) -> NodeFactory:
    """The node with a routing identity of its own (not its node name, which the harness gives
    its nodes): what an implementation run as a process may well have."""
    return lambda ctx: factory(dataclasses.replace(ctx, config={**ctx.config, "identity": b"own-id"}))


@dataclasses.dataclass(frozen=True)
class Case:
    text: str
    broken: str  # the node replaced
    make: Any  # () -> its factory
    clause: str  # what it breaks
    error: str  # how (in each error)


def mutant(protocol: str, name: str) -> Any:
    return lambda: own_identity(package(protocol).mutants[name][1])


CASES = {
    "dcp": Case("""protocol: dcp
name: rx
duration: 1500ms
nodes:
  broker: {role: broker}
  workers: {role: worker, count: 2, config: {service: echo, heartbeat: 200ms}}
  clients: {role: client, count: 2, config: {timeout: 300ms}}
workload:
  - {nodes: clients, op: request, service: echo, rate: 10/s, from: 200ms, until: 1200ms}
check: []
""", "workers.0", mutant("dcp", "worker-wrong-header"), "dcp.wire.header", "REGISTER.delimiter"),
    "pppp": Case("""protocol: pppp
name: rx
duration: 1500ms
nodes:
  pub: {role: publisher}
  subs: {role: subscriber, count: 2}
workload:
  - {nodes: pub, op: publish, rate: 20/s, from: 200ms, until: 1200ms}
check: []
""", "subs.0", mutant("pppp", "subscriber-short-sequence"), "pppp.wire.sequence-format", ".sequence"),
    "eventbus": Case("""protocol: eventbus
name: rx
duration: 1500ms
nodes:
  bus: {role: server}
  clients: {role: client, count: 2, config: {subtrees: [/a/], resync: 300ms, sync_timeout: 300ms}}
workload:
  - {nodes: clients, op: publish, topics: [/a/x], rate: 8/s, from: 200ms, until: 1200ms}
check: []
""", "clients.0", mutant("eventbus", "two-frame-syncstart"), "eventbus.wire.syncstart-frames",
                     "SYNCSTART.sequence: missing"),
    "dafka": Case("""protocol: dafka
name: rx
duration: 2s
nodes:
  tower: {role: tower}
  producer: {role: producer, config: {topic: orders, head: 200ms, beacon: 100ms}}
  store: {role: store, config: {beacon: 100ms, fetch_retry: 150ms}}
  consumers: {role: consumer, count: 2, config: {topics: orders, offset_reset: earliest, beacon: 100ms}}
workload:
  - {nodes: producer, op: produce, rate: 20/s, from: 400ms, until: 1500ms, size: 32}
check: []
""", "producer", mutant("dafka", "wrong-version"), "dafka.wire.version", ".version (frame 1): must be 1, got 2"),
    # no shipped Raft mutant breaks the wire: a follower whose AppendEntriesResponse lacks its
    # success frame (as the answer to AppendEntries it is malformed)
    "raft": Case(SMALL, "peers.0", lambda: rewriting(package("raft").roles["peer"].factory, "AppendEntriesResponse",
                                  lambda f: f[:3]), "raft.wire.grammar", "AppendEntriesResponse.success: missing"),
}
# a well-formed node of the same run, and a second external node the receivers of the broken
# one's messages cannot tell from it
WELL_FORMED = {"dcp": "workers.1", "pppp": "subs.1", "eventbus": "clients.1", "dafka": "consumers.0",
               "raft": "peers.1"}
ALSO_EXTERNAL = {"dcp": "clients.0", "pppp": "subs.1", "eventbus": "clients.1", "dafka": "consumers.0"}


def record(scenario: Any, seed: int = 1, factories: dict[str, NodeFactory] | None = None) -> list[tuple[str, Any]]:
    """The events and socket declarations of one simulated run."""
    recorder = Recorder()
    build = composition.build_checkers
    composition.build_checkers = lambda s: [*build(s), recorder]  # type: ignore[assignment]
    try:
        composition.run_sim(scenario, seed, factories=factories)
    finally:
        composition.build_checkers = build  # type: ignore[assignment]
    return recorder.log


@lru_cache(maxsize=None)
def recorded(protocol: str) -> tuple[Any, list[tuple[str, Any]]]:
    """The scenario and the recorded events of its run with the broken node."""
    case = CASES[protocol]
    scenario = parse_scenario(case.text, "rx.yaml")
    return scenario, record(scenario, factories={case.broken: case.make()})


def judged(protocol: str, external: list[str], damaged: bool = False) -> list[Verdict]:
    """wire-conformance's verdicts on the recorded run, ``external`` nodes seen as a live run
    sees a ``command:`` group's nodes."""
    return replay(*recorded(protocol), external, damaged)


def replay(scenario: Any, log: list[tuple[str, Any]], external: list[str], damaged: bool = False) -> list[Verdict]:
    protocol = scenario.protocol
    roles = {n: g.role for g in scenario.groups.values() for n in g.nodes}
    pkg = package(protocol)
    check = WireConformance(protocol, scenario.dialect, pkg.capture,
                            external=ExternalSenders({n: roles[n] for n in external}, damaged, pkg.senders))
    for what, item in log:
        if what == "sockets":
            if item[0] not in external:
                check.on_sockets(*item)
            continue
        ev: Event = item
        if (ev.node in external and ev.kind not in RUNTIME_KINDS) or ev.kind not in check.kinds:
            continue
        check.on_event(Event(ev.time_ns, ev.node, ev.role, ev.kind, ev.socket, ev.frames, ev.msg_type, ev.data,
                             ev.codec))
    return check.finish(10**12)


@pytest.mark.parametrize("protocol", list(CASES))
def test_a_malformed_message_from_an_external_node_is_caught_with_its_clause(protocol: str) -> None:
    case = CASES[protocol]
    failed = [v for v in judged(protocol, [case.broken]) if not v.ok]
    assert [v.clause for v in failed] == [case.clause], [v.to_dict() for v in failed]
    first = failed[0].evidence[0]
    assert first["node"] == case.broken and first["received_by"] != case.broken and first["frames"], first
    assert all(e["node"] == case.broken and case.error in e["error"] for e in failed[0].evidence), failed[0].evidence
    assert f"sent by {case.broken} (external), received by {first['received_by']}" in failed[0].detail


@pytest.mark.parametrize("protocol", list(CASES))
def test_what_a_well_formed_external_node_sends_conforms(protocol: str) -> None:
    node = WELL_FORMED[protocol]
    verdicts = judged(protocol, [node])
    failed = [v for v in verdicts if not v.ok]
    assert [v.clause for v in failed] == [CASES[protocol].clause], [v.to_dict() for v in verdicts]
    assert {e["node"] for v in failed for e in v.evidence} == {CASES[protocol].broken}  # the in-process mutant's sends
    assert all(f"from external nodes: {node} " in v.detail for v in verdicts), [v.detail for v in verdicts]


@pytest.mark.parametrize("protocol", [p for p in CASES if p != "raft"])  # raft: the test after this one
def test_a_message_whose_external_sender_cannot_be_told_is_counted_not_judged(protocol: str) -> None:
    case = CASES[protocol]
    verdicts = judged(protocol, [case.broken, ALSO_EXTERNAL[protocol]])
    assert all(v.ok for v in verdicts), [v.to_dict() for v in verdicts]
    assert "whose sender cannot be told" in verdicts[0].detail, verdicts[0].detail


def test_a_raft_peers_link_names_its_peer_so_two_external_peers_are_told_apart() -> None:
    """A peer's DEALER ``peer:ID`` is connected to the peer ID only: what it receives is that
    peer's, and the broken follower's answers to the leader are caught; the client, connected to
    every peer, cannot tell the two apart: what it received from them is counted, not judged."""
    verdicts = judged("raft", ["peers.0", "peers.1"])
    (v,) = verdicts
    assert not v.ok and v.clause == "raft.wire.grammar" and {e["node"] for e in v.evidence} == {"peers.0"}, v.detail
    assert all(CASES["raft"].error in e["error"] for e in v.evidence), v.evidence
    assert "whose sender cannot be told" in v.detail
    # a copy of a RequestVoteResponse a duplicate rule made answers no request owed: not judged
    assert "not judged: 1 response(s) from external nodes answering no request owed" in v.detail


@pytest.mark.parametrize("protocol", list(CASES))
def test_a_scenario_that_corrupts_messages_judges_no_receipt(protocol: str) -> None:
    verdicts = judged(protocol, [CASES[protocol].broken], damaged=True)
    assert all(v.ok for v in verdicts), [v.to_dict() for v in verdicts]
    assert "rules damage messages in flight" in verdicts[0].detail


def test_what_an_external_raft_client_sends_the_peers_is_judged() -> None:
    """A client's RequestUpdate without its data frame, as the peer's ROUTER received it; beside
    an external peer, the routing id (not the client's node name) does not tell them apart."""
    scenario = parse_scenario(SMALL, "rx.yaml")
    log = record(scenario, factories={"clients.0": rewriting(package("raft").roles["client"].factory, "RequestUpdate",
                                                             lambda f: f[:2])})
    (v,) = replay(scenario, log, ["clients.0"])
    assert not v.ok and all(e["node"] == "clients.0" and e["socket"] == "router" and "RequestUpdate.data: missing"
                            in e["error"] for e in v.evidence), v.to_dict()
    (v,) = replay(scenario, log, ["clients.0", "peers.0"])
    assert v.ok and "whose sender cannot be told" in v.detail, v.detail


def test_a_corrupt_rule_is_why_receipts_are_not_judged() -> None:
    """A damaged copy of a reference client's REQUEST, seen as an external client's message,
    breaks the grammar: judged, it would blame the client for the rule's damage; the scenario's
    corrupt rule turns the judging of receipts off (and the verdict says so)."""
    scenario = parse_scenario(CASES["dcp"].text.replace("check: []", "faults:\n  - rule: {message: REQUEST, corrupt: 50%}\n"
                                                      "check: []"), "rx.yaml")
    log = record(scenario)
    assert corrupts(scenario)
    blamed = replay(scenario, log, ["clients.0"], damaged=False)
    assert any(not v.ok and v.evidence[0]["node"] == "clients.0" for v in blamed), [v.to_dict() for v in blamed]
    verdicts = replay(scenario, log, ["clients.0"], damaged=corrupts(scenario))
    assert all(v.ok for v in verdicts) and "rules damage messages in flight" in verdicts[0].detail


def test_a_run_without_external_nodes_builds_nothing_for_them() -> None:
    scenario = parse_scenario(CASES["dcp"].text, "rx.yaml")
    (check,) = [c for c in composition.build_checkers(scenario) if isinstance(c, WireConformance)]
    assert check.receipts is None and check.kinds == frozenset({"send"})


def test_the_scenario_tells_wire_conformance_its_external_nodes() -> None:
    text = CASES["dcp"].text.replace("  broker: {role: broker}",
                                     '  broker: {role: broker, command: "broker --bind {endpoint}"}')
    (check,) = [c for c in composition.build_checkers(parse_scenario(text, "rx.yaml")) if isinstance(c, WireConformance)]
    assert check.receipts is not None and check.receipts.nodes == {"broker": "broker"}
    assert "recv" in check.kinds


CHAOS = sorted(str(p) for p in [*Path("scenarios").glob("*/chaos/*.yaml"), *Path("scenarios/dcp").glob("*.yaml")])


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAOS)
def test_reference_nodes_of_every_shipped_chaos_file_pass_as_external_nodes(path: str) -> None:
    """No false alarm: each shipped chaos file's simulated run (seed 1, reference nodes) replayed
    with each group external (its first node, then all of it) passes wire-conformance, and with
    a corrupting rule judges nothing as received."""
    scenario = load_scenario(path)
    log = record(scenario)
    damaged = corrupts(scenario)
    for g in scenario.groups.values():
        for external in ([g.nodes[0]], list(g.nodes)) if len(g.nodes) > 1 else ([g.nodes[0]],):
            verdicts = replay(scenario, log, external, damaged)
            assert all(v.ok for v in verdicts), (external, [v.to_dict() for v in verdicts if not v.ok])


DIALECT_FILES = {"raft:zmq-raft": "scenarios/raft/chaos/leader-crash.yaml", "dafka:zproto": "scenarios/dafka/chaos/clean.yaml",
                 "dcp:dagbox": "scenarios/dcp/clean.yaml", "eventbus:micro-toolkit": "scenarios/eventbus/chaos/clean.yaml"}


@pytest.mark.slow
@pytest.mark.parametrize("dialect", list(DIALECT_FILES))
def test_in_a_dialect_run_the_dialect_decides_and_reference_external_nodes_pass(dialect: str) -> None:
    """The same sweep on one chaos file per dialect (the nodes speak the run's dialect): what the
    external nodes send is judged in that dialect (strictly it would not decode) and passes."""
    text = f'dialect: "{dialect}"\n' + Path(DIALECT_FILES[dialect]).read_text()
    scenario = parse_scenario(text, "dialect.yaml")
    log = record(scenario)
    judged_any = False
    for g in scenario.groups.values():
        verdicts = replay(scenario, log, [g.nodes[0]])
        assert all(v.ok for v in verdicts), (g.nodes[0], [v.to_dict() for v in verdicts if not v.ok])
        assert f"in {dialect}, all conform" in verdicts[0].detail
        # (a node whose every message has the bytes of another's, such as a client's SYNCSTART,
        # is judged at that other sender only)
        judged_any |= "from external nodes:" in verdicts[0].detail
    assert judged_any
