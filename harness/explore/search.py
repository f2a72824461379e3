"""The search for a failing schedule, driven by hypothesis, within a budget of runs and seconds.

The file as written comes first (one run with its first seed). Then hypothesis draws
candidates and each is run in the simulator (or live) until one fails a property or the budget
is spent. Every draw is seeded (``search_seed``), so a budget in runs gives the same search
every time; a budget in seconds stops wherever the clock says.

Random search draws every candidate afresh from `harness.explore.strategies.candidates`.

Coverage-guided search (``guided=True``) works as AFL does, with hypothesis as its mutator: a
third of the budget draws fresh candidates; every candidate that reaches a protocol event no
earlier run reached (`harness.explore.coverage`) joins a corpus; then, round after round, the
corpus entry whose events are rarest so far (each pick halves its claim) is the parent of a
few children drawn from `harness.explore.strategies.mutations` (another seed, one fault more,
one fewer, one replaced or moved), and children that reach new events join the corpus too.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from harness.explore.candidate import Candidate, Differential, Outcome
from harness.explore.coverage import Feature

# (runs so far, the candidate, its outcome) after every run: the command line's progress line.
Progress = Callable[[int, Candidate, Outcome], None]
# The strategies the search draws from: fresh candidates, and children of a parent.
Fresh = Any  # st.SearchStrategy[Candidate]
Children = Callable[[Candidate], Any]  # parent -> st.SearchStrategy[Candidate]

FRESH_SHARE = 3  # guided: the first 1/FRESH_SHARE of the budget draws fresh candidates
CHILDREN_PER_PICK = 6  # runs given to the children of one parent before the next pick
MAX_IDLE_ROUNDS = 20  # rounds in a row without a new run end the search


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
    candidates: int  # candidates drawn (repeats and invalid ones included)
    coverage: set[Feature] = field(default_factory=set)  # distinct features over every run
    corpus: int = 0  # guided: schedules kept for reaching new events

    @property
    def failed(self) -> bool:
        return self.found is not None


class _Search:
    def __init__(self, runner: Differential, budget: Budget, progress: Progress | None) -> None:
        self.runner = runner
        self.budget = budget
        self.progress = progress
        self.start_runs = runner.runs
        self.t0 = time.monotonic()
        self.seen: Counter[Feature] = Counter()  # how many runs reached each feature
        self.found: tuple[Candidate, Outcome] | None = None
        self.drawn = 0
        self.corpus: list[tuple[Candidate, frozenset[Feature]]] = []
        self.picks: Counter[int] = Counter()

    @property
    def runs(self) -> int:
        return self.runner.runs - self.start_runs

    def run(self, cand: Candidate) -> Outcome:
        outcome = self.runner.evaluate(cand)
        new = [f for f in outcome.features if f not in self.seen]
        self.seen.update(outcome.features)
        if new and not outcome.invalid:
            self.corpus.append((cand, outcome.features))
        if self.progress is not None:
            self.progress(self.runs, cand, outcome)
        return outcome

    def draw_until(self, strategy: Any, runs: int, seed: int) -> None:
        """Draw from ``strategy`` and run, until a failure, ``runs`` more runs, or the budget."""
        stop_at = self.runs + runs

        def fails(cand: Candidate) -> bool:
            self.drawn += 1
            if self.found is not None:  # hypothesis replays what failed: the same answer, no run
                return cand == self.found[0]
            if self.budget.spent(self.runs) or self.runs >= stop_at:
                return False  # cheap from here on: hypothesis draws out its examples without runs
            outcome = self.run(cand)
            if outcome.failed:
                self.found = (cand, outcome)
                return True
            return False

        config = settings(max_examples=max(1, 4 * runs), phases=(Phase.generate,), database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
        try:
            find(strategy, fails, settings=config, random=random.Random(seed))
        except NoSuchExample:
            pass

    def pick(self) -> Candidate:
        """The corpus entry whose features are rarest so far; each pick halves its claim."""
        def score(i: int) -> float:
            features = self.corpus[i][1]
            return sum(1.0 / self.seen[f] for f in features) / (2 ** self.picks[i])

        best = max(range(len(self.corpus)), key=lambda i: (score(i), -i))
        self.picks[best] += 1
        return self.corpus[best][0]

    def result(self) -> SearchResult:
        cand, outcome = self.found if self.found else (None, None)
        return SearchResult(cand, outcome, self.runs, time.monotonic() - self.t0, self.drawn, set(self.seen),
                            len(self.corpus))


def search(runner: Differential, fresh: Fresh, base: Candidate, budget: Budget, *, children: Children | None = None,
           guided: bool = False, search_seed: int = 0, progress: Progress | None = None) -> SearchResult:
    """Run ``base``, then candidates drawn from ``fresh`` (random) or, guided, from ``fresh`` and
    the ``children`` of corpus entries, until one fails or the budget is spent."""
    s = _Search(runner, budget, progress)
    first = s.run(base)
    if first.invalid:  # the file as written does not run (a command that does not start, say)
        raise ValueError(first.invalid)
    if first.failed:
        s.found = (base, first)
        return s.result()
    if not guided or children is None:
        s.draw_until(fresh, budget.runs, search_seed)
        return s.result()
    s.draw_until(fresh, max(1, budget.runs // FRESH_SHARE), search_seed)
    rounds = idle = 0
    while s.found is None and not budget.spent(s.runs) and idle < MAX_IDLE_ROUNDS:
        rounds += 1
        before = s.runs
        s.draw_until(children(s.pick()) if s.corpus else fresh, CHILDREN_PER_PICK, search_seed + rounds)
        idle = idle + 1 if s.runs == before else 0  # every child already known: the space runs dry
    return s.result()
