"""The Raft suites against independent stand-ins written from the document (and, for the peer,
the Raft paper) only, making other choices than the reference wherever the document leaves one.

* tests/standins/raft_peer.py: a checkpoint entry only over entries not known committed, no
  conflict hints, ``false`` as 0x00, an update answered once committed and not "accepted" first, RequestEntries answered at once with
  no entries, no reply cache, its own timers, its state in a JSON file in ``{data_dir}``; with
  ``--broadcast {broadcast_url}`` a BroadcastStateMachine of its own (one StateBroadcast of all
  newly applied entries, a 400 ms heartbeat not restarted by other broadcasts); with
  ``--compact-every {snapshot_every}`` log compaction of its own (a JSON snapshot, 300-byte
  chunks, one status-3 answer per RequestEntries, no entry kept after the snapshot);
* tests/standins/raft_client.py: an update is done when answered committed (no reading the log
  back), it asks again for the leader after 200 ms, data of its own shape, exits 0 when done;
  with ``--subscribe true`` it asks the leader for the broadcast URL (and RequestConfig when the
  URL is missing) and holds a SUB there.

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
CLIENT_CMD = f"{{python}} {CLIENT} --peers {{peers}} --updates {{updates}} --key {{key}} --subscribe {{subscribe}}"


def _run(only: tuple[str, ...] | None, role: str = "peer", cmd: str = CMD) -> None:
    results = run_suite(load_suite("raft", role, only=list(only) if only else None), cmd=cmd)
    assert results
    # a skip only where the case lets the implementation never send a message (optional:), or
    # where it needs a placeholder the command line does not name (needs:, an optional feature)
    bad = [(r.case.id, r.clause, r.reason, r.iut_output) for r in results
           if r.verdict != "pass" and not (r.verdict == "skipped" and "not applicable" in r.reason
                                           and (any(s.optional for s in r.case.steps) or r.case.needs))]
    assert not bad, bad


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
    """About 5 s: it takes a committed answer for done, so retry-same-reqid's second update comes
    at once (the reference client reads the log back first and waits out its operation timeout);
    it never reads the log, so entries-follow-up is skipped after its 3 s wait (optional:)."""
    _run(None, "client", CLIENT_CMD)


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
