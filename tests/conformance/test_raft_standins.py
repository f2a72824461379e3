"""The Raft peer suite against an independent stand-in (tests/standins/raft_peer.py): a peer
written from the document and the Raft paper only, making other choices than the reference
wherever the document leaves one (no checkpoint entry, no conflict hints, ``false`` as 0x00, an
update answered once committed and not "accepted" first, RequestEntries answered at once with
no entries, no reply cache, its own timers, its state in a JSON file in ``{data_dir}``). It
passes every case: a case it failed would be a false alarm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.conformance.runner import load_suite, run_suite

PEER = Path(__file__).resolve().parents[1] / "standins" / "raft_peer.py"
CMD = (f"{{python}} {PEER} --id {{id}} --endpoint {{endpoint}} --peers {{peers}} --data-dir {{data_dir}} "
       "--election-min {election_min_ms} --election-max {election_max_ms} --seed {seed}")
# Where its choices differ from the reference's (about 5 s); every case in the slow suite.
DIFFERS = ("log-mismatch", "update-once", "read-committed", "restart-keeps-vote")


def _run(only: tuple[str, ...] | None) -> None:
    results = run_suite(load_suite("raft", "peer", only=list(only) if only else None), cmd=CMD)
    assert results
    bad = [(r.case.id, r.clause, r.reason, r.iut_output) for r in results if r.verdict != "pass"]
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
