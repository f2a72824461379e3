"""zmq-harness explore end to end, in simulation: a mutant's failure is found, shrunk to a few
faults and written as a scenario file that replays it from disk; the reference nodes yield
nothing; a failing seed of a sweep is shrunk the same way; the command line's exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.composition import run_sim
from harness.explore import explore
from harness.explore.candidate import Property
from harness.scenario import load_scenario

BIN = Path(sys.executable).parent / "zmq-harness"
DCP = "scenarios/dcp/explore/basic.yaml"
DAFKA = "scenarios/dafka/explore/basic.yaml"


def replays(path: str, seed: int, prop: Property) -> bool:
    result = run_sim(load_scenario(path), seed)
    return any(v.check == prop.check and (v.clause or v.check) == prop.clause for v in result.failed)


def test_a_mutant_that_needs_faults_is_found_shrunk_and_written(tmp_path: Path) -> None:
    report = explore(DCP, budget=40, mutants={"broker": "never-expire"}, out_dir=str(tmp_path), shrink_runs=120)
    assert report.failed and report.prop is not None and report.shrunk is not None
    small = report.shrunk.candidate
    assert 1 <= len(small.faults) <= 2 and any("crash" in f for f in small.faults)
    assert report.written and report.replayed
    text = Path(report.written).read_text()
    assert "mutant: never-expire" in text and f"seeds: {small.seed}" in text and "explore:" not in text
    assert replays(report.written, small.seed, report.prop)  # again, from disk, as `zmq-harness run` would
    assert Path(report.explanation or "").read_text().count("crash") >= 1
    assert "<svg" in Path(report.page or "").read_text()


def test_a_mutant_that_fails_without_faults_shrinks_to_none(tmp_path: Path) -> None:
    report = explore(DAFKA, budget=5, mutants={"producer": "skip-offset"}, out_dir=str(tmp_path), shrink_runs=80)
    assert report.failed and report.search is not None
    assert report.search.runs == 2  # the file as written, and the reference nodes on it (they pass)
    assert report.prop == Property("offsets", "dafka.record.offset-increments")
    assert report.shrunk is not None and report.shrunk.candidate.faults == ()
    assert report.shrunk.candidate.duration_ns < 5_000_000_000 and report.replayed


def test_the_reference_nodes_yield_nothing(tmp_path: Path) -> None:
    report = explore(DCP, budget=12, out_dir=str(tmp_path))
    assert not report.failed and report.search is not None and report.search.runs == 12
    assert report.search.coverage and not list(tmp_path.iterdir())


def test_a_failing_seed_of_a_sweep_is_shrunk_the_same_way(tmp_path: Path) -> None:
    source = tmp_path / "sweep.yaml"
    source.write_text(Path(DCP).read_text() + "faults:\n  - {from: 300ms, until: 500ms, pause: clients.1}\n"
                      "  - {at: 600ms, crash: workers.0, restart_after: 550ms}\n")
    report = explore(str(source), seed=3, mutants={"broker": "never-expire"}, out_dir=str(tmp_path / "out"),
                     shrink_runs=80)
    assert report.search is None and report.failed and report.original is not None
    assert report.original.seed == 3 and len(report.original.faults) == 2
    assert report.shrunk is not None and report.shrunk.candidate.seed == 3
    assert [f.get("crash") for f in report.shrunk.candidate.faults] == ["workers.0"] and report.replayed
    passing = explore(str(source), seed=3, out_dir=str(tmp_path / "none"))
    assert not passing.failed and passing.notes == ["seed 3 passes: nothing to shrink"]


@pytest.mark.parametrize("guided", [False, True])
def test_the_search_is_the_same_for_the_same_search_seed(tmp_path: Path, guided: bool) -> None:
    def schedules(search_seed: int) -> list[tuple[int, tuple]]:
        seen: list[tuple[int, tuple]] = []
        explore(DCP, budget=6, out_dir=str(tmp_path), guided=guided, search_seed=search_seed,
                progress=lambda n, cand, outcome: seen.append((cand.seed, cand.faults)))
        return seen

    first = schedules(0)
    assert len(first) >= 6 and schedules(0) == first
    assert schedules(1) != first


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=600)


def test_the_command_line_exits_1_with_a_shrunk_failure_and_0_without(tmp_path: Path) -> None:
    found = cli("explore", DAFKA, "--budget", "3", "--mutant", "producer=offset-one", "--out", str(tmp_path),
                "--shrink-budget", "30")
    assert found.returncode == 1, found.stderr
    assert "FAIL offsets [dafka.record.offset-starts-at-zero]" in found.stdout
    written = tmp_path / "dafka-explore-basic-shrunk.yaml"
    assert f"replay:      zmq-harness run {written} --seed" in found.stdout and written.exists()
    again = cli("run", str(written), "--out", str(tmp_path / "replay"))  # not the checkout's runs/
    assert again.returncode == 1 and "FAIL offsets" in again.stdout
    nothing = cli("explore", DCP, "--budget", "2", "--out", str(tmp_path / "n"))
    assert nothing.returncode == 0 and nothing.stdout.startswith("nothing fails: 2 run(s)")


@pytest.mark.parametrize("args,message", [
    (["--mutant", "broker=no-such"], "dcp has no mutant 'no-such'"),
    (["--mutant", "worker=busy-worker"], "mutant 'busy-worker' is a broker, not a worker"),
    (["--mutant", "brokr=busy-worker"], "no role or group named 'brokr'"),
    (["--mutant", "busy-worker"], "--mutant takes ROLE=NAME"),
    (["--budget", "0"], "--budget must be at least 1"),
])
def test_bad_input_exits_2_with_a_clear_error(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", DCP, "--quiet", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_broken_explore_section_exits_2_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(DCP).read_text().replace("max_faults: 3", "max_faults: three"))
    assert main(["explore", str(bad), "--budget", "1", "--quiet"]) == 2
    assert f"{bad}:14: explore.max_faults: expected a whole number" in capsys.readouterr().err
