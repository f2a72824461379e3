"""The simulator replays the race of tests/live/test_reconnect_without_handover.py: a ROUTER without
handover (``handover: false``), paused while a client of the harness restarts, ignores the
client's new connection (its messages dropped as `duplicate-identity`), and the client recovers
by connecting again after a silence. Deterministic, so the recovery is shown on many seeds."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.composition import run_sim
from harness.scenario import parse_scenario
from tests.live.test_reconnect_without_handover import (
    DCP, EVENTBUS, EVENTBUS_BACKUP, EVENTBUS_PUBLISHER, PPPP, assert_every_event_of_reaches, replica_recovered,
)

CASES = {"pppp": (PPPP, "subs.0"), "eventbus": (EVENTBUS, "watchers.0"), "dcp": (DCP, "clients.0"),
         "eventbus-publisher": (EVENTBUS_PUBLISHER, "pubs.0")}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("protocol", sorted(CASES))
def test_a_client_ignored_by_a_router_without_handover_recovers(protocol: str, seed: int, tmp_path: Path) -> None:
    text, client = CASES[protocol]
    result = run_sim(parse_scenario(text, f"{protocol}-no-handover.yaml"), seed, str(tmp_path))
    columns = ["node", "kind", "msg_type", "peer", "fault", "time_ns", "data"]
    rows = pq.read_table(result.trace_path, columns=columns).to_pylist()
    [back] = [r["time_ns"] for r in rows if r["node"] == client and r["kind"] == "restart"]
    ignored = [r for r in rows if r["kind"] == "drop" and r["fault"] == "duplicate-identity" and r["peer"] == client
               and r["time_ns"] > back]
    assert ignored, f"the ROUTER heard {client}'s new connection: no race"
    if protocol == "eventbus-publisher":
        assert_every_event_of_reaches(rows, client, back, ["watchers.0", "watchers.1"])
    failed = {v.check: v.detail for v in result.verdicts if not v.ok}
    assert not failed, failed




@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_passive_server_ignored_by_its_peer_connects_again_and_is_answered(seed: int, tmp_path: Path) -> None:
    # Before: after its restart the backup's replica requests were dropped as duplicate-identity
    # by the paused primary's ROUTER, and it never heard an answer for the rest of the run (its
    # repairs of what the feed missed, and its word that the peer is alive, gone).
    result = run_sim(parse_scenario(EVENTBUS_BACKUP, "eventbus-backup-no-handover.yaml"), seed, str(tmp_path))
    rows = pq.read_table(result.trace_path, columns=["node", "kind", "msg_type", "socket", "fault",
                                                     "time_ns"]).to_pylist()
    ignored = replica_recovered(rows, "duplicate-identity")
    assert ignored, "the primary heard the backup's new connection: no race"
    failed = {v.check: v.detail for v in result.verdicts if not v.ok}
    assert not failed, failed
