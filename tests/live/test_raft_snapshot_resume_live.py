"""snapshot-resume over real sockets: scenarios/raft/chaos/snapshot-restart.yaml live, with the
reference peers in-process and as external processes (their traffic judged from what the chaos
proxy read and handed on), the independent stand-in peer (tests/standins/raft_peer.py) as the
peers, and the reference peer broken to go on from its own count (``ignores-resume-offset``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bench.raft_external import external_scenario
from harness.composition import run_live
from harness.scenario import load_scenario

pytestmark = [pytest.mark.live, pytest.mark.slow, pytest.mark.timeout(300)]
FILE = "scenarios/raft/chaos/snapshot-restart.yaml"


def resume(result: Any) -> tuple[Any, int, int]:
    """The snapshot-resume verdict, the answers that sent the leader back, the chunks judged."""
    v = next(v for v in result.verdicts if v.check == "snapshot-resume")
    m = re.search(r"\((\d+) of them not the end of the chunk answered\); (\d+) next", v.detail)
    return v, int(m.group(1)) if m else 0, int(m.group(2)) if m else 0


def run_twice(scenario: Any, out: Path) -> Any:
    result = run_live(scenario, 1, str(out))
    if not result.ok:  # a loaded machine: a live run that fails is run again before it counts
        result = run_live(scenario, 1, str(out / "again"))
    return result


def test_the_reference_peers_in_process_resume_where_the_restarted_follower_asks(tmp_path: Path) -> None:
    result = run_twice(load_scenario(FILE), tmp_path)
    assert result.ok, [v.to_dict() for v in result.failed]
    v, resumed, judged = resume(result)
    assert resumed >= 1 and judged >= 20, v.detail


@pytest.mark.parametrize("impl", ["reference", "standin"])
def test_external_peers_pass(impl: str, tmp_path: Path) -> None:
    scenario, _ = external_scenario("snapshot-restart", impl)
    result = run_twice(scenario, tmp_path)
    assert result.ok, [v.to_dict() for v in result.failed]
    v, resumed, _ = resume(result)
    assert resumed >= 1, v.detail  # the follower's restart was seen from the proxy


def test_an_external_leader_that_ignores_the_offset_fails_from_the_proxys_view(tmp_path: Path) -> None:
    scenario, _ = external_scenario("snapshot-restart", "mutant:ignores-resume-offset")
    result = run_live(scenario, 1, str(tmp_path))
    v, _, _ = resume(result)
    assert not v.ok and v.clause == "raft.snapshot.resume-offset", v.detail
    assert "on dealer:peers.2 after the follower's answer asked for byte 0" in v.detail, v.detail
    assert {v.check for v in result.failed} == {"snapshot-resume"}, [v.to_dict() for v in result.failed]
