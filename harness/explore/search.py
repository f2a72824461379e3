"""The search for a failing schedule, driven by hypothesis, within a budget of runs and seconds.

The file as written comes first (one run with its first seed). Then hypothesis draws
candidates from `harness.explore.strategies` and each is run in the simulator (or live) until
one fails a property or the budget is spent. Hypothesis is seeded (``search_seed``), so a
budget in runs gives the same search every time; a budget in seconds stops wherever the clock
says.

Coverage-guided search (``guided=True``) tells hypothesis, through ``hypothesis.target``, how
many distinct protocol events each run reached (`harness.explore.coverage`); its targeting
phase then mutates the schedules that reached the most, instead of only drawing fresh ones.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable

from hypothesis import HealthCheck, Phase, find, settings, target
from hypothesis.errors import NoSuchExample

from harness.explore.candidate import Candidate, Differential, Outcome
from harness.explore.coverage import Feature

# (runs so far, the candidate, its outcome) after every run: the command line's progress line.
Progress = Callable[[int, Candidate, Outcome], None]


@dataclass
class Budget:
    """At most ``runs`` runs and (if given) ``seconds`` of wall time, counted from `start`."""

    runs: int
    seconds: float | None = None
    started: float = field(default_factory=time.monotonic)

    def spent(self, runs: int) -> bool:
        if runs >= self.runs:
            return True
        return self.seconds is not None and time.monotonic() - self.started >= self.seconds


@dataclass
class SearchResult:
    found: Candidate | None
    outcome: Outcome | None
    runs: int  # runs made by the search (the first failing one included)
    seconds: float
    candidates: int  # candidates hypothesis drew (repeats and invalid ones included)
    coverage: set[Feature] = field(default_factory=set)  # distinct features over every run

    @property
    def failed(self) -> bool:
        return self.found is not None


def search(runner: Differential, strategy: object, base: Candidate, budget: Budget, *, guided: bool = False,
           search_seed: int = 0, progress: Progress | None = None) -> SearchResult:
    """Run ``base``, then candidates drawn from ``strategy``, until one fails or the budget is spent."""
    t0 = time.monotonic()
    start_runs = runner.runs
    coverage: set[Feature] = set()
    found: list[tuple[Candidate, Outcome]] = []
    drawn = [0]

    def run(cand: Candidate) -> Outcome:
        outcome = runner.evaluate(cand)
        coverage.update(outcome.features)
        if progress is not None:
            progress(runner.runs - start_runs, cand, outcome)
        return outcome

    first = run(base)
    if first.invalid:  # the file as written does not run (a command that does not start, say)
        raise ValueError(first.invalid)
    if first.failed:
        return SearchResult(base, first, runner.runs - start_runs, time.monotonic() - t0, 1, coverage)

    def fails(cand: Candidate) -> bool:
        drawn[0] += 1
        if found:  # hypothesis replays what failed: say the same again, without a run
            return cand == found[0][0]
        if budget.spent(runner.runs - start_runs):
            return False  # cheap from here on: hypothesis draws out its examples without runs
        outcome = run(cand)
        if guided and outcome.features:
            target(float(len(outcome.features)), label="distinct protocol events")
        if outcome.failed:
            found.append((cand, outcome))
            return True
        return False

    phases = (Phase.generate, Phase.target) if guided else (Phase.generate,)
    config = settings(max_examples=max(1, 4 * budget.runs), phases=phases, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))
    try:
        find(strategy, fails, settings=config, random=random.Random(search_seed))  # type: ignore[arg-type]
    except NoSuchExample:
        pass
    cand, outcome = found[0] if found else (None, None)
    return SearchResult(cand, outcome, runner.runs - start_runs, time.monotonic() - t0, drawn[0], coverage)
