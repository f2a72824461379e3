"""Explore finds a crash-on-malformed mutant through a drawn corrupt rule, shrinks the schedule to
that rule (or little more) and writes a file that replays the failure; the figures for every such
mutant are made by bench/bench_explore.py."""

from __future__ import annotations

from pathlib import Path

from harness.composition import run_sim
from harness.explore import explore
from harness.scenario import load_scenario


def test_explore_finds_and_shrinks_a_broker_that_crashes_on_malformed_input(tmp_path: Path) -> None:
    report = explore("scenarios/dcp/explore/basic.yaml", budget=15, mutants={"broker": "crash-on-malformed"},
                     out_dir=str(tmp_path), shrink_runs=40)
    assert report.failed and report.shrunk is not None and report.written is not None
    assert report.prop is not None and report.prop.check == "no-node-errors"
    faults = report.shrunk.candidate.faults
    assert 1 <= len(faults) <= 2 and any("corrupt" in f.get("rule", {}) for f in faults)
    assert report.replayed
    written = load_scenario(report.written)
    assert "corrupt" in Path(report.written).read_text()
    assert "no-node-errors" in {v.check for v in run_sim(written, written.seeds[0]).failed}
