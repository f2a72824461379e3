"""The shipped chaos files with one role's reference nodes set up another way the documents allow:
another implementation's habits, which the run checks must not fail. A check that fails one
blames a correct implementation (tests/conformance/test_lawful_variants.py does the same for the
conformance suites).

A setting the file gives the group itself is kept (the file chose it, e.g. a short DCP heartbeat
under loss); so are settings every node of a run must share (PPPP's idle times, E-PPPP-12). Found
this way: Raft peers compacting after every 3 entries (live-after-heal counted operations whose
entry was compacted before the client read it as not completed), and peers compacting after
every 2 entries into 16-byte chunks (live-after-heal timed the harness client's read-back,
not the cluster: tests/checkers/test_raft_liveness.py). Slow: about 3 minutes of CPU."""

from __future__ import annotations

import dataclasses
import glob
from typing import Any

import pytest

from harness.composition import run_sim
from harness.scenario import Scenario, load_scenario

VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    ("dcp", "broker", {"queue_limit": 4}),  # a broker need not queue much (dcp.broker.service-queue is a SHOULD)
    ("dcp", "worker", {"liveness": 5}),
    ("dcp", "client", {"dedup_window": 1}),
    ("dafka", "producer", {"release_acked": False}),
    ("dafka", "consumer", {"get_heads_ms": 0}),  # asks for heads once, never again
    ("dafka", "consumer", {"peer_expiry_ms": 2000}),
    ("eventbus", "server", {"check_ms": 50, "poll_ms": 10}),
    ("eventbus", "client", {"sync_timeout_ms": 500}),
    ("pppp", "subscriber", {"ack_delay_ms": 0}),
    ("pppp", "publisher", {"grace_ms": 1000}),
    ("raft", "peer", {"heartbeat_ms": 99, "rpc_timeout_ms": 100}),  # E-RAFT-11: at most half the election minimum
    ("raft", "peer", {"snapshot_every": 5, "snapshot_keep": 2}),
    ("raft", "peer", {"max_entries": 1, "entries_pipeline": 1}),
]


def files(protocol: str) -> list[str]:
    found = sorted(glob.glob(f"scenarios/{protocol}/chaos/*.yaml"))
    return found + (sorted(glob.glob("scenarios/dcp/*.yaml")) if protocol == "dcp" else [])


def configured(scenario: Scenario, role: str, extra: dict[str, Any]) -> Scenario | None:
    """The scenario with ``extra`` under the file's own settings of the role's groups; None when
    the file has no such group or already sets all of it."""
    changed = False
    groups = {}
    for name, g in scenario.groups.items():
        if g.role == role and g.command is None:
            config = {**extra, **g.config}
            changed |= config != g.config
            g = dataclasses.replace(g, config=config)
        groups[name] = g
    return dataclasses.replace(scenario, groups=groups) if changed else None


@pytest.mark.slow
@pytest.mark.parametrize("protocol,role,extra", VARIANTS,
                         ids=[f"{p}-{r}-{'-'.join(k for k in e)}" for p, r, e in VARIANTS])
def test_the_chaos_files_pass_with_a_lawful_setting_of_a_role(protocol: str, role: str, extra: dict[str, Any]) -> None:
    ran, failures = 0, []
    for path in files(protocol):
        scenario = configured(load_scenario(path), role, extra)
        if scenario is None:
            continue
        ran += 1
        result = run_sim(scenario, 1)
        failures += [(path, v.check, v.detail[:300]) for v in result.failed]
    assert ran, f"no {protocol} chaos file has a {role} group to set up"
    assert not failures, failures


@pytest.mark.slow
def test_raft_peers_compacting_every_two_entries_into_small_chunks_pass_the_crash_files() -> None:
    extra = {"snapshot_every": 2, "chunk_size": 16, "max_entries": 2}
    for path in ("scenarios/raft/chaos/leader-crash.yaml", "scenarios/raft/chaos/rolling-restarts.yaml"):
        scenario = configured(load_scenario(path), "peer", extra)
        assert scenario is not None
        result = run_sim(scenario, 1)
        assert result.ok, (path, [v.to_dict() for v in result.failed])
