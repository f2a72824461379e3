"""Explore on Raft, PPPP and the Event BUS (scenarios/<p>/explore/basic.yaml): with a small
budget the reference nodes yield nothing, and one mutant per protocol is found, shrunk to a
handful of faults and replayed from the written file. The every-mutant proof with the bench's
budget is the slow test in test_explore_mutants.py; the figures are in bench/RESULTS.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import run_sim
from harness.explore import explore
from harness.registry import package
from harness.scenario import load_scenario

HANDFUL = 5
# One mutant per protocol the bench finds in two runs (the file as written already fails).
QUICK = [("raft", "local-read"), ("pppp", "never-acks"), ("eventbus", "drops-pub")]


def scenario_file(protocol: str) -> str:
    return f"scenarios/{protocol}/explore/basic.yaml"


@pytest.mark.parametrize("protocol", ["raft", "pppp", "eventbus"])
def test_reference_nodes_yield_nothing_in_a_few_runs(protocol: str, tmp_path: Path) -> None:
    report = explore(scenario_file(protocol), budget=3, out_dir=str(tmp_path))
    assert not report.failed, f"{protocol}: the reference nodes fail {report.prop} ({report.replay})"
    assert report.search is not None and report.search.runs == 3


@pytest.mark.parametrize("protocol,name", QUICK)
def test_one_mutant_is_found_shrunk_and_replayed(protocol: str, name: str, tmp_path: Path) -> None:
    role = package(protocol).mutants[name][0]
    report = explore(scenario_file(protocol), budget=5, mutants={role: name}, out_dir=str(tmp_path), shrink_runs=20)
    assert report.failed and report.shrunk is not None and report.written is not None
    assert len(report.shrunk.candidate.faults) <= HANDFUL
    assert report.replayed
    # The written file names the mutant and fails the same property when run again.
    written = load_scenario(report.written)
    assert any(g.mutant == name for g in written.groups.values())
    result = run_sim(written, written.seeds[0])
    assert report.prop is not None and report.prop.check in {v.check for v in result.failed}


# A mutant each that only the newer scenarios or checks expose, found in a few runs: the DCP
# broker that never PONGs (heartbeat-answers) and the PPPP publisher that ignores NACKs (the
# PUBLISH losses pppp/explore/lossy.yaml draws).
NEWER = [("scenarios/dcp/explore/basic.yaml", "broker", "no-pong"),
         ("scenarios/pppp/explore/lossy.yaml", "publisher", "ignores-nacks")]


@pytest.mark.parametrize("path,role,name", NEWER, ids=[n for _, _, n in NEWER])
def test_a_mutant_only_the_newer_scenarios_or_checks_expose_is_found(path: str, role: str, name: str,
                                                                     tmp_path: Path) -> None:
    report = explore(path, budget=5, mutants={role: name}, out_dir=str(tmp_path), shrink_runs=20)
    assert report.failed and report.shrunk is not None and report.replayed, report.notes
    assert len(report.shrunk.candidate.faults) <= HANDFUL
