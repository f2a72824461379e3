"""Scenario files: what a valid file becomes, and the error a broken one gets (file, line and
field named)."""

from __future__ import annotations

import glob
import textwrap

import pytest

from fault_injection import nemesis
from harness.scenario import ScenarioError, load_scenario, parse_scenario, parse_seeds

BASE = """\
protocol: dcp
name: t
duration: 2s
nodes:
  broker: {role: broker, config: {heartbeat: 250ms}}
  workers: {role: worker, count: 2, config: {service: echo}}
  clients: {role: client, count: 3}
"""


def parse(extra: str = "", base: str = BASE):
    return parse_scenario(base + textwrap.dedent(extra), "x.yaml")


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(textwrap.dedent(text), "x.yaml")
    return e.value


def test_a_valid_file_becomes_nodes_workload_faults_and_checks() -> None:
    s = parse("""\
        seeds: 1-3,9
        workload:
          - {nodes: clients, op: request, rate: 20/s, until: 1500ms, size: 8}
        faults:
          - rule: {message: REQUEST, drop: 5%}
          - {at: 1s, crash: workers.1, restart_after: 300ms}
          - {from: 200ms, until: 900ms, partition: [[clients], [broker]], one_way: true}
          - {from: 1s, until: 1200ms, pause: broker}
          - {at: 0s, clock_skew: "workers.*", offset: -50ms, drift: 0.001}
        check: [exactly-once, {worker-expiry: {}}]
        """)
    assert s.node_names == ["broker", "workers.0", "workers.1", "clients.0", "clients.1", "clients.2"]
    assert s.seeds == [1, 2, 3, 9]
    assert s.groups["broker"].config == {"heartbeat_ms": 250}
    assert s.workload[0].nodes == ["clients.0", "clients.1", "clients.2"] and s.workload[0].rate == 20.0
    assert s.workload[0].end_ns == 1_500_000_000 and s.workload[0].params == {"size": 8}
    assert len(s.rules) == 1
    assert nemesis.Crash(1_000_000_000, "workers.1", 300_000_000) in s.faults
    part = [f for f in s.faults if isinstance(f, nemesis.Partition)][0]
    assert part.sides == (("clients",), ("broker",)) and part.one_way  # targets, resolved when it fires
    (skew,) = [f for f in s.faults if isinstance(f, nemesis.ClockSkew)]
    assert skew.target == "workers.*" and skew.offset == -50_000_000 and skew.drift == 0.001
    assert [c for c, _ in s.checks] == ["exactly-once", "worker-expiry"]


BROKEN = [
    # (text appended to BASE or a whole file, expected line, expected text in the message)
    ("nodes:\n  broker: {role: brokr}\n", None, "nodes.broker.role: dcp has no role 'brokr'"),
    ("workload:\n  - {nodes: clients, op: request, rate: fast}\n", 9, "workload[0].rate: not a rate"),
    ("workload:\n  - {nodes: clientz, op: request, rate: 1/s}\n", 9, "no node or group named 'clientz'"),
    ("workload:\n  - {nodes: workers, op: request, rate: 1/s}\n", 9, "workers.0 is a worker; request is done by client"),
    ("workload:\n  - {nodes: clients, op: request, rate: 1/s, until: 9s}\n", 9, "is after the scenario's duration"),
    ("faults:\n  - {at: 1s, crash: workers.7}\n", 9, "faults[0].crash: no node, group, role or dcp target named 'workers.7'"),
    ("faults:\n  - {at: soon, crash: broker}\n", 9, "faults[0].at: not a duration"),
    ("faults:\n  - {from: 2s, until: 1s, pause: broker}\n", 9, "faults[0].until: must be after 'from'"),
    ("faults:\n  - {crash: broker, pause: broker, at: 1s}\n", 9, "each fault needs exactly one of"),
    ("faults:\n  - rule: {message: REQUEST, drop: 150%}\n", 9, "faults[0].rule.drop: probability"),
    ("faults:\n  - rule: {message: REQUEST, explode: true}\n", 9, "unknown key 'explode'"),
    ("faults:\n  - {from: 0s, partition: [[clients], [clients.0, broker]]}\n", 9, "node(s) on both sides"),
    ("faults:\n  - rule: {message: REQUEST, fields: {servise: echo}, drop: true}\n", 9,
     "faults[0].rule.fields.servise: no message has a field 'servise'; did you mean 'service'?"),
    ("faults:\n  - rule: {message: PING, nth: 0, drop: true}\n", 9, "nth: positions count from 1"),
    ("check: [exactly-onse]\n", 8, "did you mean 'exactly-once'"),
    ("dialect: dcp:zmq\n", 8, "dcp has no dialect 'dcp:zmq'"),
    ("seeds: 5-1\n", 8, "runs backwards"),
    ("colour: blue\n", 8, "colour: unknown field"),
]


@pytest.mark.parametrize("extra,line,text", BROKEN)
def test_broken_files_name_the_file_line_and_field(extra: str, line: int | None, text: str) -> None:
    base = BASE if not extra.startswith("nodes:") else BASE.split("nodes:")[0]
    e = error_of(base + extra)
    assert text in str(e), str(e)
    assert str(e).startswith("x.yaml:")
    if line is not None:
        assert e.where is not None and e.where.line == line, str(e)


def test_node_settings_are_checked_against_the_role() -> None:
    e = error_of(BASE.replace("{service: echo}", "{service: echo, heartbeat: often}"))
    assert "nodes.workers.config.heartbeat" in str(e) and "not a duration" in str(e)
    assert e.where.line == 6
    e = error_of(BASE.replace("{service: echo}", "{sevice: echo}"))
    assert "did you mean 'service'" in str(e)


def test_missing_required_fields_and_bad_yaml() -> None:
    assert "missing required field 'duration'" in str(error_of("protocol: dcp\nname: t\nnodes: {b: {role: broker}}\n"))
    assert "unknown protocol 'mqtt'" in str(error_of("protocol: mqtt\nname: t\n"))
    e = error_of("protocol: dcp\nname: [oops\n")
    assert "not valid YAML" in str(e) and e.where.line == 3
    assert "duplicate key" in str(error_of("protocol: dcp\nprotocol: dcp\n"))
    assert "the file is empty" in str(error_of(""))
    assert "a scenario must be a mapping" in str(error_of("- 1\n- 2\n"))


def test_unreadable_files_are_clear(tmp_path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(str(tmp_path / "missing.yaml"))
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(str(p))


def test_seed_specs() -> None:
    assert parse_seeds("1-3,10") == [1, 2, 3, 10]
    assert parse_seeds(7) == [7] and parse_seeds([1, "4-5"]) == [1, 4, 5]
    with pytest.raises(ValueError):
        parse_seeds("a-b")


@pytest.mark.parametrize("path", sorted(glob.glob("scenarios/*/*.yaml") + glob.glob("scenarios/*/*/*.yaml")))
def test_every_shipped_scenario_is_valid(path: str) -> None:
    s = load_scenario(path)
    assert s.node_names and s.duration_ns > 0 and s.checks


def test_a_group_may_run_a_shipped_mutant_and_run_options_choose_one() -> None:
    from harness.scenario import parse_mutant_options, with_mutants

    s = parse("", BASE.replace("broker: {role: broker,", "broker: {role: broker, mutant: busy-worker,"))
    assert s.groups["broker"].mutant == "busy-worker" and s.groups["broker"].implementation == "mutant:busy-worker"
    assert "x.yaml:5: nodes.broker.mutant: dcp has no mutant 'busy-workr'; did you mean 'busy-worker'?" in str(
        error_of(BASE.replace("broker: {role: broker,", "broker: {role: broker, mutant: busy-workr,")))
    assert "nodes.workers.mutant: mutant 'busy-worker' is a broker, not a worker" in str(
        error_of(BASE.replace("workers: {role: worker,", "workers: {role: worker, mutant: busy-worker,")))
    chosen = with_mutants(parse(), parse_mutant_options(["worker=no-ping", "clients=no-retry"]))
    assert (chosen.groups["workers"].mutant, chosen.groups["clients"].mutant, chosen.groups["broker"].mutant) == (
        "no-ping", "no-retry", None)
    for bad, message in ((["broker"], "--mutant takes ROLE=NAME"), (["tower=x"], "no role or group named 'tower'")):
        with pytest.raises(ValueError, match=message):
            with_mutants(parse(), parse_mutant_options(bad))


def test_a_mutant_named_in_the_file_or_on_the_command_line_runs(tmp_path) -> None:
    from harness.cli import main
    from harness.composition import run_sim

    # (exactly-once, a SHOULD check, named: the mutant's requests go unanswered)
    text = BASE + "workload:\n  - {nodes: clients, op: request, rate: 10/s, until: 1s}\ncheck: [exactly-once]\n"
    assert run_sim(parse_scenario(text, "x.yaml"), 1).ok
    bad = run_sim(parse_scenario(text.replace("clients: {role: client,", "clients: {role: client, mutant: "
                                                                          "foreign-client-address,"), "x.yaml"), 1)
    assert not bad.ok
    path = tmp_path / "x.yaml"
    path.write_text(text)
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--mutant", "client=foreign-client-address"]) == 1
    assert main(["run", str(path), "--mutant", "client=busy-worker"]) == 2


_EXTERNAL = {
    "raft": "protocol: raft\nname: x\nduration: 1s\nLIVE\nnodes:\n  peers: {role: peer, count: 3, command: \"p {endpoint}\"}\n",
    "dcp": ("protocol: dcp\nname: x\nduration: 1s\nLIVE\nnodes:\n  broker: {role: broker, command: \"b {endpoint}\"}\n"
            "  workers: {role: worker, count: 2, command: \"w {connect}\"}\n"),
    "eventbus": ("protocol: eventbus\nname: x\nduration: 1s\nLIVE\nnodes:\n  servers: {role: server, count: 2, "
                 "command: \"s {endpoint}\"}\n  clients: {role: client, count: 2, command: \"c\"}\n"),
}


@pytest.mark.parametrize("protocol, live, observed", [
    ("raft", "", True),  # its checks were reviewed for what the proxy reports
    ("raft", "live: {observe: false}", False),
    ("dcp", "", True),  # reviewed too: worker-interval gives an external worker more slack (a read bounds a send)
    ("dcp", "live: {observe: false}", False),
    ("eventbus", "", True),  # reviewed too: the server checks that read it judge per connection
    ("eventbus", "live: {observe: false}", False),
])
def test_the_traffic_between_external_nodes_is_observed_by_default_where_the_checks_allow(
        protocol: str, live: str, observed: bool) -> None:
    from harness.live_faults import observed_nodes

    scenario = parse_scenario(_EXTERNAL[protocol].replace("LIVE", live), "x.yaml")
    assert scenario.observe is observed
    assert bool(observed_nodes(scenario)) is observed
