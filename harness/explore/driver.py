"""``zmq-harness explore``: search a scenario's fault space for a failure, shrink it, and write
the smallest failing schedule as an ordinary scenario file, with its explanation and its
space-time diagram.

    report = explore("scenarios/dcp/explore/basic.yaml", budget=50, out_dir="runs/explore",
                     mutants={"clients": "duplicate-delivery"})
    report.failed         # True: report.written has the scenario file, report.page the diagram

The written file is replayed from disk before explore returns (``report.replayed``): it must
fail the same property (the same check, the same clause) — in simulation every time, since a
seed fixes the whole run.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass, field
from typing import Callable

from harness.composition import slug
from harness.explore.candidate import Candidate, Differential, Outcome, Property, Runner, from_scenario
from harness.explore.diagram import lamport_svg, write_page
from harness.explore.explain import Explanation, explain
from harness.explore.search import Budget, Progress, SearchResult, search
from harness.explore.shrink import ShrinkResult, Shrinker
from harness.explore.space import space_of
from harness.explore.strategies import candidates, mutations
from harness.registry import package
from harness.scenario import Scenario, load_scenario, load_scenario_source, mutant_groups


LIVE_REPLAYS = 3  # a live shrunk file is replayed this many times; the report says how often it failed


@dataclass
class ExploreReport:
    scenario: str  # the explored file
    mode: str
    search: SearchResult | None = None  # None when a given seed was shrunk
    prop: Property | None = None
    original: Candidate | None = None
    shrunk: ShrinkResult | None = None
    written: str | None = None  # the minimal scenario file
    explanation: str | None = None  # its Markdown explanation
    page: str | None = None  # its HTML page with the space-time diagram
    replayed: bool | None = None  # the written file failed the same property when run again
    replay: str = ""  # the command that replays it
    reference_failures: int = 0  # failing candidates set aside because the reference nodes failed them too
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.prop is not None


def explore(path: str, *, budget: int = 100, seconds: float | None = None, mutants: dict[str, str] | None = None,
            out_dir: str = "runs/explore", seed: int | None = None, live: bool = False, guided: bool = False,
            shrink_runs: int = 200, shrink_seconds: float | None = None, search_seed: int = 0,
            progress: Progress | None = None, log: Callable[[str], None] | None = None) -> ExploreReport:
    """Explore a scenario file (see the module docstring). ``seed`` skips the search: that seed
    of the file as written is run and, if it fails, shrunk (a failing seed of a sweep).
    ``mutants`` maps roles or groups to shipped mutants (``--mutant ROLE=NAME``)."""
    say = log or (lambda _: None)
    scenario, locs = load_scenario_source(path)
    chosen = mutant_groups(scenario, mutants or {})
    in_file = {g.name: g.mutant for g in scenario.groups.values() if g.mutant}
    mode = "live" if live else "sim"
    capabilities = _capabilities(mode)
    space = space_of(scenario, locs, capabilities)
    runner = Differential(Runner(scenario, chosen, mode, coverage=True))
    report = ExploreReport(path, mode)
    try:
        base = from_scenario(scenario, seed if seed is not None else scenario.seeds[0])
        if seed is not None:
            outcome = runner.evaluate(base)
            if outcome.invalid:
                raise ValueError(outcome.invalid)
            if progress is not None:
                progress(1, base, outcome)
            if not outcome.failed:
                report.notes.append(f"seed {seed} passes: nothing to shrink" if not outcome.reference_failed else
                                    f"seed {seed} fails {', '.join(map(str, outcome.reference_failed))} with the "
                                    "reference nodes too: the schedule, not the mutant, breaks it")
                return report
            found, first = base, outcome
        else:
            result = search(runner, candidates(scenario, space, base), base, Budget(budget, seconds),
                            children=mutations(scenario, space, base), guided=guided, search_seed=search_seed,
                            progress=progress)
            report.search = result
            report.reference_failures = runner.reference_failures
            if result.found is None or result.outcome is None:
                return report
            found, first = result.found, result.outcome
        prop = first.first
        assert prop is not None  # a failing outcome names at least one property
        report.prop, report.original = prop, found
        say(f"{prop} fails; shrinking (at most {shrink_runs} runs)")
        shrinker = Shrinker(runner, scenario, prop, runs=shrink_runs, seconds=shrink_seconds,
                            confirm=2 if live else 1, quiet_ns=space.quiet_ns)
        report.shrunk = shrinker.shrink(found)
        report.reference_failures = runner.reference_failures
        _write(report, scenario, runner.runner, chosen, {**in_file, **chosen}, out_dir, guided,
               compared=runner.reference is not None)
        return report
    finally:
        runner.discard_kept()  # the traces of failed live runs (what the report needs is copied out)


def _capabilities(mode: str) -> frozenset[str]:
    if mode == "sim":
        from harness.sim.runtime import Simulation  # noqa: PLC0415

        return Simulation.capabilities
    from harness.live.runtime import LiveRuntime  # noqa: PLC0415

    return LiveRuntime.capabilities


def _write(report: ExploreReport, scenario: Scenario, runner: Runner, chosen: dict[str, str],
           all_mutants: dict[str, str], out_dir: str, guided: bool, compared: bool) -> None:
    """The scenario file, replayed from disk; its explanation; its page with the diagram."""
    assert report.shrunk is not None and report.prop is not None and report.original is not None
    cand, prop = report.shrunk.candidate, report.prop
    os.makedirs(out_dir, exist_ok=True)
    name = f"{slug(scenario.name)}-shrunk"
    path = os.path.join(out_dir, f"{name}.yaml")
    live = " --live" if report.mode == "live" else ""
    report.replay = f"zmq-harness run {path} --seed {cand.seed}{live}"
    header = (f"Shrunk by `zmq-harness explore` from {scenario.path}: fails {prop}.\n"
              f"Replay: {report.replay}\n"
              f"Explanation: {name}.md; space-time diagram: {name}.html")
    runner_named = Runner(_renamed(scenario, f"{scenario.name}-shrunk"), chosen, runner.mode, coverage=False)
    with open(path, "w", encoding="utf-8") as f:
        f.write(runner_named.render(cand, header))
    report.written = path

    replayed = load_scenario(path)
    tries = 1 if report.mode == "sim" else LIVE_REPLAYS  # a seed fixes a simulated run; a live one varies
    outcomes = [runner_named.run(replayed, cand.seed, os.path.join(out_dir, "trace", str(i)) if tries > 1
                                 else os.path.join(out_dir, "trace")) for i in range(tries)]
    failing = [o for o in outcomes if o.fails(prop)]
    report.replayed = len(failing) == tries
    if not report.replayed:
        report.notes.append(f"the written file failed {prop} in {len(failing)} of {tries} replay(s)"
                            + (" (live runs are not deterministic)" if report.mode == "live" else ""))
    outcome = failing[0] if failing else _found_run(report, prop, out_dir, runner.kept) or outcomes[0]
    verdict = next((v for v in (outcome.result.verdicts if outcome.result else [])
                    if not v.ok and Property(v.check, v.clause or v.check) == prop), None)
    ex = _explanation(report, scenario, replayed, cand, prop, verdict, all_mutants, path, guided, compared)
    report.explanation = os.path.join(out_dir, f"{name}.md")
    with open(report.explanation, "w", encoding="utf-8") as f:
        f.write(ex.to_markdown())
    if outcome.result is not None and outcome.result.trace_path:
        nodes = replayed.node_names
        roles = {n: replayed.role_of(n) for n in nodes}
        labels = {n: f"mutant: {all_mutants[g.name]}" for g in replayed.groups.values() if g.name in all_mutants
                  for n in g.nodes}
        svg, note = lamport_svg(outcome.result.trace_path, nodes, roles, verdict.evidence if verdict else [], labels,
                                f"fails: {prop}")
        report.page = os.path.join(out_dir, f"{name}.html")
        write_page(report.page, ex.title, ex.to_html(), svg, note)


def _found_run(report: ExploreReport, prop: Property, out_dir: str, kept: list[str]) -> Outcome | None:
    """When no replay of a live failure fails again: the run that failed during the search or
    the shrinking, with its trace copied to ``out_dir``/trace/found (the explanation and the
    diagram then show that run, and a note says so). None if its trace was not kept."""
    assert report.shrunk is not None
    found = report.shrunk.outcome
    result = found.result
    if not found.fails(prop) or result is None or not result.trace_path or not os.path.exists(result.trace_path):
        return None
    source = next((k for k in kept if result.trace_path.startswith(k + os.sep)), None)
    if source is None:
        return None
    dest = os.path.join(out_dir, "trace", "found")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest)
    moved = os.path.join(dest, os.path.relpath(result.trace_path, source))
    report.notes.append(f"the explanation shows the run that failed during the search (its trace: {moved})")
    return dataclasses.replace(found, result=dataclasses.replace(result, trace_path=moved))


def _renamed(scenario: Scenario, name: str) -> Scenario:
    return dataclasses.replace(scenario, raw={**scenario.raw, "name": name})


def _explanation(report: ExploreReport, scenario: Scenario, replayed: Scenario, cand: Candidate, prop: Property,
                 verdict: object, chosen: dict[str, str], path: str, guided: bool, compared: bool) -> Explanation:
    assert report.shrunk is not None and report.original is not None
    pkg = package(scenario.protocol)
    shrunk, original = report.shrunk, report.original
    if report.search is not None:
        s = report.search
        how = "the file as written" if s.runs == 1 and original == from_scenario(scenario, original.seed) else (
            f"{'coverage-guided' if guided else 'random'} search")
        found_by = f"found by {how} after {s.runs} run(s) ({s.seconds:.1f} s)"
    else:
        found_by = f"seed {original.seed} of the file as written"
    found_by += (f"; shrunk in {shrunk.runs} run(s) ({shrunk.seconds:.1f} s) from {len(original.faults)} fault(s), "
                 f"{len(original.nodes(scenario))} node(s) and {original.duration_ns / 1e9:g} s")
    if not shrunk.complete:
        found_by += " (shrink budget spent: it may shrink further with a larger --shrink-budget)"
    if compared:
        found_by += ("; every failure kept was checked against the reference nodes, which pass the same schedule"
                     + (f" ({report.reference_failures} schedule(s) set aside that the reference fails too)"
                        if report.reference_failures else ""))
    return explain(protocol=scenario.protocol, scenario_file=path, source=scenario.path, prop=prop,
                   verdict=verdict,  # type: ignore[arg-type]
                   seed=cand.seed, faults=list(cand.faults),
                   mutants={g: (m, pkg.mutants[m][2]) for g, m in chosen.items()}, topology=replayed.node_names,
                   duration_ns=cand.duration_ns, replay=report.replay,
                   history=[f"{s.what} (after {s.runs} shrink runs)" for s in shrunk.steps], found_by=found_by)


__all__ = ["ExploreReport", "Outcome", "explore"]
