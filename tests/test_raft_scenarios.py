"""The shipped Raft chaos scenarios hold on the reference nodes: two seeds each in the normal
suite, 1,000 in the slow suite (ZMQ_HARNESS_SLOW=1 ./scripts/test, or -m slow)."""

from __future__ import annotations

import glob
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.composition import run_sim
from harness.scenario import load_scenario
from harness.trace import read_trace
from tests.sweeps import sweep

RAFT = sorted(glob.glob("scenarios/raft/chaos/*.yaml"))


def test_the_scenarios_are_shipped() -> None:
    names = {p.rsplit("/", 1)[1] for p in RAFT}
    assert {"leader-crash.yaml", "rolling-restarts.yaml", "partitions.yaml", "one-way.yaml", "lossy.yaml",
            "clock-pauses.yaml", "snapshot-install.yaml", "five-peers-everything.yaml",
            "snapshot-restart.yaml"} <= names


@pytest.mark.parametrize("path", RAFT)
def test_every_scenario_with_clients_checks_linearizability(path: str) -> None:
    scenario = load_scenario(path)
    if any(g.role == "client" for g in scenario.groups.values()):
        assert "linearizable" in [name for name, _ in scenario.checks], path


@pytest.mark.parametrize("path", RAFT)
def test_scenario_passes_a_few_seeds(path: str) -> None:
    sweep(path, [1, 2])


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
@pytest.mark.parametrize("path", RAFT)
def test_scenario_passes_1000_seeds(path: str) -> None:
    sweep(path, load_scenario(path).seeds[:1000])


def test_five_peers_everything_seed_301() -> None:
    """A 1,000-seed sweep found it: a peer compacting with snapshot_keep snapshotted the state of
    its last applied entry under an earlier index, so a client restoring it and replaying the kept
    entries read a value no history explains (test_raft_nodes has the unit test)."""
    sweep("scenarios/raft/chaos/five-peers-everything.yaml", [301])


def test_faults_really_happen() -> None:
    """The scenarios are not vacuous: leaders change, messages are lost, snapshots are installed."""
    crash = run_sim(load_scenario("scenarios/raft/chaos/leader-crash.yaml"), 2)
    elections = next(v for v in crash.verdicts if v.check == "election-safety")
    assert elections.ok and int(elections.detail.split()[0]) >= 2
    lossy = run_sim(load_scenario("scenarios/raft/chaos/lossy.yaml"), 1)
    assert sum(lossy.stats["dropped"].values()) > 30
    part = run_sim(load_scenario("scenarios/raft/chaos/partitions.yaml"), 1)
    assert part.stats["dropped"].get("partition", 0) > 50


def test_snapshots_are_installed_and_read(tmp_path: Path) -> None:
    r = run_sim(load_scenario("scenarios/raft/chaos/snapshot-install.yaml"), 1, str(tmp_path))
    rows = pq.read_table(r.trace_path, columns=["node", "kind", "msg_type"]).to_pylist()
    sent = [x["msg_type"] for x in rows if x["kind"] == "send"]
    assert sent.count("InstallSnapshot") >= 2  # in chunks
    late = [x for x in rows if x["node"] == "late" and x["kind"] == "recv" and x["msg_type"] == "RequestEntriesResponse"]
    assert late and r.ok
    snapshots = next(v for v in r.verdicts if v.check == "snapshot-state")
    assert snapshots.ok and "whole: judged 0;" not in snapshots.detail, snapshots.detail  # it saw the snapshots


@pytest.mark.parametrize("path", RAFT)
def test_every_scenario_that_compacts_checks_the_snapshots(path: str) -> None:
    scenario = load_scenario(path)
    if any(g.role == "peer" and g.config.get("snapshot_every") for g in scenario.groups.values()):
        assert "snapshot-state" in [name for name, _ in scenario.checks], path


def test_peers_that_compact_after_every_three_entries_are_still_live() -> None:
    """When a peer compacts its log is its own choice. With snapshot_every: 3 the harness's clients
    often find their entry already in a snapshot and end the operation "info" (applied, result
    unknown); live-after-heal counted those as not completed and failed leader-crash, lossy and
    four other chaos files on every seed. It now counts an operation the cluster applied."""
    import dataclasses

    base = load_scenario("scenarios/raft/chaos/leader-crash.yaml")
    groups = {k: dataclasses.replace(g, config={**g.config, "snapshot_every": 3}) if g.role == "peer" else g
              for k, g in base.groups.items()}
    result = run_sim(dataclasses.replace(base, groups=groups), 1)
    assert result.ok, [v.to_dict() for v in result.failed]
    live = [v for v in result.verdicts if v.check == "live-after-heal"]
    assert live and "operation" in live[0].detail


def test_the_deployed_dialect_passes_too() -> None:
    text = Path("scenarios/raft/chaos/leader-crash.yaml").read_text().replace(
        "name: raft-leader-crash", "name: raft-leader-crash-0.7\ndialect: \"raft:zmq-raft\"")
    from harness.scenario import parse_scenario

    r = run_sim(parse_scenario(text, "leader-crash-0.7.yaml"), 1)
    assert r.ok, [(v.check, v.detail) for v in r.failed]
    updates = next(v for v in r.verdicts if v.check == "update-once")
    assert int(updates.detail.split()[0]) > 50


LIVE = """
protocol: raft
name: raft-leader-crash-live
duration: 6s
nodes:
  peers: {role: peer, count: 3}
  clients: {role: client, count: 2}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 800ms, until: 5500ms}
  - {nodes: clients, op: get, rate: 5/s, from: 800ms, until: 5500ms}
faults:
  - {at: 1500ms, crash: leader, restart_after: 1s}
check: [election-safety, vote-once, term-update, log-matching, leader-append-only, leader-completeness,
        state-machine-safety, committed-durable, commit-rule, update-once, {live-after-heal: 3s}]
"""


@pytest.mark.live
@pytest.mark.timeout(120)
def test_leader_crash_passes_live(tmp_path: Path, no_thread_leak: None) -> None:
    """The leader crash over real sockets on loopback: the same nodes and checks, wall-clock time."""
    from harness.composition import run_live
    from harness.scenario import parse_scenario

    r = run_live(parse_scenario(LIVE, "leader-crash-live.yaml"), 1, str(tmp_path))
    assert r.ok, [(v.check, v.detail) for v in r.failed]
    elections = next(v for v in r.verdicts if v.check == "election-safety")
    assert int(elections.detail.split()[0]) >= 2  # the crash hit the leader and another took over


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(120)
def test_skewed_clocks_and_pauses_pass_live(tmp_path: Path, no_thread_leak: None) -> None:
    """clock-pauses.yaml over real sockets: the live runtime skews and drifts the in-process
    peers' and a client's clocks (peer 0 runs 20% fast, 2 s ahead) and pauses them."""
    from harness.composition import run_live

    r = run_live(load_scenario("scenarios/raft/chaos/clock-pauses.yaml"), 1, str(tmp_path))
    assert r.ok, [(v.check, v.detail) for v in r.failed]
    clocks = [row for row in read_trace(r.trace_path).to_pylist() if row["kind"] == "fault" and row["fault"] == "clock"]
    assert len(clocks) == 3, clocks


def test_the_follower_restarts_in_the_middle_of_its_snapshot_transfer() -> None:
    """snapshot-restart.yaml is not vacuous: the leader hears an offset other than the end of the
    chunk it sent (the restarted follower starts again from 0) and goes on from it."""
    import re

    result = run_sim(load_scenario("scenarios/raft/chaos/snapshot-restart.yaml"), 1)
    v = next(v for v in result.verdicts if v.check == "snapshot-resume")
    pattern = r"(\d+) answer\(s\) .* \((\d+) of them not the end of the chunk answered\); (\d+) next"
    named, resumed, judged = (int(n) for n in re.match(pattern, v.detail).groups())
    assert v.ok and resumed >= 1 and judged >= 20 and named >= judged, v.detail
