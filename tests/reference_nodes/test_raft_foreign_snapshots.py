"""A lawful peer with a snapshot format of its own (E-RAFT-26: a snapshot's bytes are the state
machine's business; the harness reads only its documented ``zmq-harness/raft-snapshot-1``).

The harness's client learns results by replaying the committed log on its replica; a snapshot
it read with RequestEntries used to reset that replica to an empty map when it was in another
format, so every later get of a key the snapshot held answered "absent" and `linearizable`
blamed the cluster (the stand-in peer's JSON snapshots, live: snapshot-install.yaml failed 3 of
4 runs). Now a result that depends on what such a snapshot held is unknown (``info``), and
results over keys written after it are still judged: a client that answers reads from its own
lagging replica (the `local-read` mutant) still fails.

Simulation: the reference peers with their snapshot wrapped in an envelope of their own, which
they read back and the client does not."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import reference_nodes.raft.peer as peer_module
from harness.composition import run_sim
from harness.scenario import parse_scenario
from reference_nodes.raft.client_reader import UNKNOWN, Replica
from reference_nodes.raft.mutants import MUTANTS
from reference_nodes.raft.state_machine import encode_op, pack_snapshot, unpack_snapshot

ENVELOPE = b"opaque-kv-1\n"  # a format that is not the harness's

SCENARIO = """
protocol: raft
name: raft-foreign-snapshot-read
duration: 4s
nodes:
  peers: {role: peer, count: 3, config: {snapshot_every: 10, chunk_size: 64}}
  writers: {role: client, count: 2}
  late: {role: client, start: 2500ms}
workload:
  - {nodes: writers, op: put, rate: 20/s, from: 300ms, until: 3500ms, keys: 6}
  - {nodes: writers, op: cas, rate: 5/s, from: 300ms, until: 3500ms, keys: 6}
  - {nodes: late, op: get, rate: 10/s, from: 2600ms, until: 3700ms, keys: 6}
  - {nodes: late, op: cas, rate: 5/s, from: 2600ms, until: 3700ms, keys: 6}
check: [linearizable, update-once, snapshot-state, state-machine-safety, committed-durable]
"""


@pytest.fixture
def foreign_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference peers write (and read back) their snapshots in an envelope of their own."""
    monkeypatch.setattr(peer_module, "pack_snapshot", lambda state, reqids: ENVELOPE + pack_snapshot(state, reqids))
    monkeypatch.setattr(peer_module, "unpack_snapshot",
                        lambda data: unpack_snapshot(data[len(ENVELOPE):]) if data.startswith(ENVELOPE) else (None, {}))


def _ops(result: Any, group: str) -> Counter[tuple[str, str]]:
    from harness.trace import read_trace, unpack_data

    ops = [unpack_data(r["data"]) for r in read_trace(result.trace_path).to_pylist()
           if r["kind"] == "deliver" and r["msg_type"] == "op" and r["node"].split(".")[0] == group]
    return Counter((o["op"], o["status"]) for o in ops)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_snapshot_in_another_format_is_no_reason_to_blame_the_cluster(foreign_format: None, seed: int,
                                                                          tmp_path: Any) -> None:
    result = run_sim(parse_scenario(SCENARIO), seed, str(tmp_path))
    assert result.ok, [(v.check, v.detail[:300]) for v in result.failed]
    snapshots = next(v for v in result.verdicts if v.check == "snapshot-state")
    assert "not in the key-value snapshot format" in snapshots.detail and "judged 0" in snapshots.detail
    late = _ops(result, "late")
    # the late client read the snapshot: some results unknown, the later ones still judged
    assert late[("get", "info")] + late[("cas", "info")] > 0, late
    assert late[("get", "ok")] > 0, late
    # a put acknowledged at an index inside such a snapshot took effect there: ok, not unknown
    assert _ops(result, "writers")[("put", "info")] == 0


def test_a_client_reading_its_own_lagging_replica_is_still_caught(foreign_format: None, tmp_path: Any) -> None:
    local_read = MUTANTS["local-read"][1]
    result = run_sim(parse_scenario(SCENARIO), 1, str(tmp_path), factories={"late": local_read})
    assert [v.check for v in result.failed] == ["linearizable"]


def test_the_replica_after_a_snapshot_it_cannot_read_knows_only_what_was_written_since() -> None:
    from harness.protocols.raft import LogEntry

    def op(*args: Any, **kw: Any) -> LogEntry:
        return LogEntry(bytes(12), 0, 1, encode_op(*args, **kw))

    r = Replica()
    r.apply(1, op("put", "a", "1"))
    r.forget()
    assert r.apply(2, op("get", "a")) is UNKNOWN
    assert r.apply(3, op("cas", "a", "2", expected="1")) is UNKNOWN
    assert r.apply(4, op("get", "a")) is UNKNOWN  # the cas may or may not have swapped
    r.apply(5, op("put", "a", "3"))
    r.apply(6, op("delete", "b"))
    assert (r.apply(7, op("get", "a")), r.apply(8, op("get", "b"))) == ("3", None)
    assert r.apply(9, op("cas", "a", "4", expected="3")) is True
    r.restore({"kv": {"c": 1}})  # a snapshot it reads: every key known again
    assert (r.apply(10, op("get", "a")), r.apply(11, op("get", "c"))) == (None, 1)
