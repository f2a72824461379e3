"""The Raft suites against independent stand-ins written from the document (and, for the peer,
the Raft paper) only, making other choices than the reference wherever the document leaves one.

* tests/standins/raft_peer.py: a checkpoint entry only over entries not known committed, no
  conflict hints, ``false`` as 0x00, an update answered once committed and not "accepted" first, RequestEntries answered at once with
  no entries, no reply cache, its own timers, its state in a JSON file in ``{data_dir}``; with
  ``--broadcast {broadcast_url}`` a BroadcastStateMachine of its own (one StateBroadcast of all
  newly applied entries, a 400 ms heartbeat not restarted by other broadcasts); with
  ``--compact-every {snapshot_every}`` log compaction of its own (a JSON snapshot, 300-byte
  chunks, one status-3 answer per RequestEntries, no entry kept after the snapshot);
* tests/standins/raft_client.py: an update is done when answered committed, it asks again for
  the leader after 200 ms, data of its own shape, exits 0 when done; with ``--subscribe true`` it
  asks the leader for the broadcast URL (and RequestConfig when the URL is missing) and holds a
  SUB there; with ``--read`` it reads the log with RequestEntries (its own count, "stop",
  RequestLogInfo first or not, snapshot chunks of any format), in either dialect.

Each passes every case of its role: a case one failed would be a false alarm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.conformance.runner import load_suite, run_suite

PEER = Path(__file__).resolve().parents[1] / "standins" / "raft_peer.py"
CMD = (f"{{python}} {PEER} --id {{id}} --endpoint {{endpoint}} --peers {{peers}} --data-dir {{data_dir}} "
       "--election-min {election_min_ms} --election-max {election_max_ms} --seed {seed} --broadcast {broadcast_url} "
       "--compact-every {snapshot_every}")
# Where its choices differ from the reference's (about 12 s; entries-pipeline: it answers a
# RequestEntries with its whole log at once, the reference five answers at a time;
# broadcast-on-apply: every newly applied entry in one StateBroadcast, a 400 ms heartbeat not
# restarted by it; entries-snapshot: its own JSON snapshot, one 300-byte chunk per request, no
# entry kept after the snapshot); every case in the slow suite.
DIFFERS = ("log-mismatch", "update-once", "read-committed", "restart-keeps-vote", "entries-pipeline",
           "broadcast-on-apply", "entries-snapshot")


CLIENT = Path(__file__).resolve().parents[1] / "standins" / "raft_client.py"
CLIENT_CMD = (f"{{python}} {CLIENT} --peers {{peers}} --updates {{updates}} --key {{key}} --subscribe {{subscribe}} "
              "--dialect {dialect}")
READING = ("entries-follow-up", "entries-not-leader", "entries-snapshot-follow-up", "retry-same-reqid")


def _run(only: tuple[str, ...] | None, role: str = "peer", cmd: str = CMD, dialect: str = "strict") -> list:
    results = run_suite(load_suite("raft", role, only=list(only) if only else None), cmd=cmd, dialect=dialect)
    assert results
    # a skip only where the case lets the implementation never send a message (optional:), where
    # it needs a placeholder the command line does not name (needs:, an optional feature), or
    # where the case is not played in this dialect
    bad = [(r.case.id, r.clause, r.reason, r.iut_output) for r in results
           if r.verdict != "pass" and not (r.verdict == "skipped" and (
               "not applicable" in r.reason and (any(s.optional for s in r.case.steps) or r.case.needs)
               or r.reason.startswith("only for dialect")))]
    assert not bad, bad
    return results


def _verdicts(results: list) -> dict[str, str]:
    return {r.case.id: r.verdict for r in results}


@pytest.mark.live
@pytest.mark.timeout(120)
def test_the_standin_passes_the_cases_where_its_choices_differ() -> None:
    _run(DIFFERS)


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(300)
def test_the_standin_passes_every_peer_case() -> None:
    _run(None)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_the_client_standin_passes_every_client_case() -> None:
    """About 15 s: it takes a committed answer for done, so retry-same-reqid's second update comes
    at once; without ``--read`` it never reads the log, so the three entries cases are skipped
    after their 3 s wait (optional:)."""
    _run(None, "client", CLIENT_CMD)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_the_client_standin_reading_the_log_back_is_judged_and_passes_the_reading_cases() -> None:
    """About 6 s: with ``--read each --log-info true`` it asks RequestLogInfo, then reads each
    update back with RequestEntries: every reading case judges it (none skipped), and it passes.
    (Before the cases answered RequestLogInfo, retry-same-reqid failed it on raft.reqid.unique, a
    MUST: its read-back hung on the unanswered RequestLogInfo, so no second update came.)"""
    results = _run(READING, "client", CLIENT_CMD + " --read each --log-info true")
    assert _verdicts(results) == dict.fromkeys(READING, "pass")


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(600)
@pytest.mark.parametrize("dialect", ["strict", "raft:zmq-raft"])
@pytest.mark.parametrize("flags", ["--read end", "--read each", "--read end --read-count 3 --stop-after 1",
                                   "--read end --log-info true --read-from 1 --redirect-read new", "--read start",
                                   "--read end --confirm-leader"])
def test_the_client_standin_reader_passes_every_client_case(dialect: str, flags: str) -> None:
    """Its lawful choices (when it reads, from where, with a count, stopping, RequestLogInfo first,
    a new RPC after "not the leader") in both dialects: every case judged and passed, entries-snapshot-follow-up in strict only.
    ``--read start`` reads only before its updates, so the three entries cases see no read after
    the commit and are skipped (before the cases answered a read before the update, it failed
    eight cases on raft.client.follow-leader)."""
    results = _run(None, "client", f"{CLIENT_CMD} {flags}", dialect)
    skipped = {"entries-snapshot-follow-up"} if dialect != "strict" else set()
    if "start" in flags:
        skipped |= set(READING[:3])
    assert _verdicts(results) == {r.case.id: "skipped" if r.case.id in skipped else "pass" for r in results}


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("broken, failing", [
    ("new-reqid", {"entries-follow-up", "entries-snapshot-follow-up"}),
    ("no-follow-up", {"entries-follow-up", "entries-snapshot-follow-up"}),
    ("ignore-not-leader", {"entries-not-leader"}),
])
def test_the_client_standin_breaking_a_reading_rule_fails_its_case(broken: str, failing: set[str]) -> None:
    """``--break`` makes the stand-in break one rule of the RequestEntries section; the case about
    it fails on that clause, the other reading cases still pass (about 4 s each)."""
    cases = [c for c in load_suite("raft", "client") if c.id in READING[:3]]
    results = run_suite(cases, cmd=f"{CLIENT_CMD} --read end --break {broken}")
    clause = "raft.entries.not-leader" if broken == "ignore-not-leader" else "raft.entries.follow-up"
    assert {r.case.id: (r.verdict, r.clause if r.verdict == "fail" else "") for r in results} == \
        {c.id: ("fail", clause) if c.id in failing else ("pass", "") for c in cases}, [r.reason for r in results]


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_client_that_asks_the_named_leader_for_the_config_passes_every_client_case() -> None:
    """node-zmq-raft's client takes a RequestConfig answer only from the leader: told by a that b
    leads, it asks b first. find-leader, transit-state, survives-malformed and
    broadcast-url-after-leader left that request unanswered and failed it (or skipped it as not
    subscribing); each now answers it as the leader (``maybe:``)."""
    results = _run(None, "client", f"{CLIENT_CMD} --confirm-leader")
    assert {r.case.id for r in results if r.verdict == "pass"} >= {
        "find-leader", "transit-state", "survives-malformed", "broadcast-url-after-leader"}


# The cases node-zmq-raft's habits reach (E-RAFT-04, E-RAFT-34): a reply replayed from its debounce
# cache, higher terms a candidate that has not heard from a majority disregards, no new election
# while it has not (election-timeout waited for one with every vote request unanswered)
ZMQ_RAFT_HABITS = ("election-timeout", "higher-term", "vote-once", "response-id", "append-retry-bound",
                   "keep-matching-entries")


@pytest.mark.live
@pytest.mark.timeout(180)
def test_the_standin_with_node_zmq_raft_habits_passes_the_cases_they_reach() -> None:
    _run(ZMQ_RAFT_HABITS, cmd=CMD + " --replay-cache --prevent-spiral")


@pytest.mark.live
@pytest.mark.timeout(120)
def test_the_standin_that_cuts_its_log_on_every_append_fails_keep_matching_entries() -> None:
    """node-zmq-raft's FileLog cuts the log after an AppendEntries' previous entry whatever it
    held; a late AppendEntries then drops entries the follower acknowledged. Below its commit
    index it exits instead ("cowardly refusing to truncate"), as the case's late AppendEntries
    reaches: the crash fails the case."""
    cases = [c for c in load_suite("raft", "peer") if c.id in ("keep-matching-entries", "truncate-conflicts")]
    results = run_suite(cases, cmd=CMD + " --break truncate-on-append")
    assert {r.case.id: (r.verdict, r.clause if r.verdict == "fail" else "") for r in results} == \
        {"keep-matching-entries": ("fail", "harness.robustness"),
         "truncate-conflicts": ("pass", "")}, [r.reason for r in results]


def test_a_peer_without_broadcast_url_in_its_command_line_skips_the_broadcast_cases() -> None:
    """The BroadcastStateMachine is optional (E-RAFT-27): the stand-in started without
    ``--broadcast {broadcast_url}`` has none, and the cases that need it are skipped, not failed
    (decided before any process starts)."""
    cases = [c for c in load_suite("raft", "peer") if "broadcast_url" in c.needs]
    assert {c.id for c in cases} == {"broadcast-heartbeat", "broadcast-on-apply", "broadcast-uncommitted"}
    results = run_suite(cases, cmd=CMD.replace(" --broadcast {broadcast_url}", ""))
    assert [(r.verdict, "does not name {broadcast_url}" in r.reason) for r in results] == [("skipped", True)] * 3


def test_a_peer_that_does_not_compact_skips_the_snapshot_case() -> None:
    """Log compaction is optional too (E-RAFT-29): without ``{snapshot_every}`` in its command
    line, entries-snapshot is skipped, not failed (decided before any process starts)."""
    cases = [c for c in load_suite("raft", "peer") if c.needs and "broadcast_url" not in c.needs]
    assert [(c.id, c.needs) for c in cases] == [("entries-snapshot", ["snapshot_every"])]
    results = run_suite(cases, cmd=CMD.replace(" --compact-every {snapshot_every}", ""))
    assert [(r.verdict, "does not name {snapshot_every}" in r.reason) for r in results] == [("skipped", True)]


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("dialect", ["strict", "raft:zmq-raft"])
def test_the_client_standin_reads_a_compacted_log_from_the_reference_peer(dialect: str) -> None:
    """Interoperation beyond the suite's scripts (about 4 s): a reference peer leading alone
    compacts every 3 entries and sends one entry per answer and 16-byte snapshot chunks; the
    stand-in makes 7 updates, then reads the log from 0: the snapshot (the reference's key-value
    format, printed as its map) and the entries after it, up to the last."""
    import json
    import subprocess
    import sys

    from harness.live.supervisor import ManagedProcess, ReadyLine, free_port

    url = f"tcp://127.0.0.1:{free_port()}"
    peer = [sys.executable, "-m", "harness.cli", "node", "raft", "peer", "--dialect", dialect,
            "--set", "id=p1", "--set", f"endpoint={url}", "--set", f"peers=p1={url}",
            "--set", "election_min=150ms", "--set", "election_max=300ms", "--set", "snapshot_every=3",
            "--set", "chunk_size=16", "--set", "max_entries=1"]
    with ManagedProcess(peer, ready=ReadyLine(r"^READY ", "stdout")):
        out = subprocess.run([sys.executable, str(CLIENT), "--peers", f"p1={url}", "--updates", "7",
                              "--dialect", dialect, "--read", "end"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    lines = [json.loads(x) for x in out.splitlines()]
    snapshots = [x for x in lines if "snapshot" in x]
    entries = [x["entry"] for x in lines if "entry" in x]
    assert snapshots and isinstance(snapshots[-1].get("kv"), dict), lines
    assert entries == list(range(snapshots[-1]["snapshot"] + 1, entries[-1] + 1)) and entries[-1] >= 8, lines
    assert lines[-1]["read_end"] == "last", lines
