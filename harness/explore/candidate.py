"""One point of the exploration space, and running it.

A `Candidate` is everything explore varies in a scenario: the seed, the duration, the fault
list (items exactly as a scenario file writes them), the group sizes and the workload items.
`Runner.render` turns it into the text of an ordinary scenario file, and `Runner.evaluate`
runs *that text* (parsed like any file), so what was run is byte for byte what gets written:
the shrunk file replays the failure because it is the very input that failed.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import yaml

from fault_injection import nemesis
from fault_injection.rules import Rule
from harness.composition import RunError, RunResult, run_scenario
from harness.explore.coverage import Feature, FeatureCollector
from harness.scenario import Scenario, ScenarioError, parse_scenario

NS_PER_MS = 1_000_000
# The order of a written file's sections (as the shipped scenarios have them).
KEY_ORDER = ("protocol", "name", "description", "duration", "settle", "seeds", "dialect", "record_frames", "network",
             "nodes", "workload", "faults", "check")


class Property(NamedTuple):
    """A failed property: the check and the clause its verdict names."""

    check: str
    clause: str

    def __str__(self) -> str:
        return f"{self.check} [{self.clause}]" if self.clause and self.clause != self.check else self.check


@dataclass(frozen=True)
class Candidate:
    seed: int
    duration_ns: int
    faults: tuple[dict[str, Any], ...] = ()
    counts: tuple[tuple[str, int], ...] = ()  # (group, count) for the groups that have a count
    workload: tuple[dict[str, Any], ...] = ()

    def with_(self, **changes: Any) -> Candidate:
        return replace(self, **changes)

    @property
    def count_of(self) -> dict[str, int]:
        return dict(self.counts)

    def nodes(self, scenario: Scenario) -> list[str]:
        """The node names of the candidate's topology (its group sizes)."""
        sizes = self.count_of
        out: list[str] = []
        for g in scenario.groups.values():
            n = sizes.get(g.name, g.count)
            out.extend([g.name] if n is None else [f"{g.name}.{i}" for i in range(n)])
        return out


def from_scenario(scenario: Scenario, seed: int) -> Candidate:
    """The candidate that is the file as written, with one seed."""
    raw = scenario.raw
    return Candidate(seed=seed, duration_ns=scenario.duration_ns,
                     faults=tuple(copy.deepcopy(raw.get("faults") or [])),
                     counts=tuple((g.name, g.count) for g in scenario.groups.values() if g.count is not None),
                     workload=tuple(copy.deepcopy(_workload_items(raw))))


def _workload_items(raw: dict[str, Any]) -> list[dict[str, Any]]:
    items = raw.get("workload") or []
    return [items] if isinstance(items, dict) else list(items)


def fault_window(item: dict[str, Any]) -> tuple[int, int | None] | None:
    """(start, end) of a timed fault as written; None for a message rule (it acts all the run)."""
    fault = nemesis.parse_fault(item)
    if isinstance(fault, Rule):
        return None
    return nemesis.window_of(fault)


def fmt_duration(ns: int) -> str:
    """A duration as a file writes it, with its unit (whole seconds or milliseconds if exact)."""
    if ns == 0:
        return "0s"
    if ns % 1_000_000_000 == 0:
        return f"{ns // 1_000_000_000}s"
    if ns % NS_PER_MS == 0:
        return f"{ns // NS_PER_MS}ms"
    if ns % 1000 == 0:
        return f"{ns // 1000}us"
    return f"{ns}ns"


def fmt_probability(p: float) -> str:
    return f"{round(p * 100, 4):g}%"


# ---- running a candidate ----------------------------------------------------------------------


@dataclass
class Outcome:
    """What one run of a candidate showed. ``invalid`` says why the candidate is not a valid
    scenario (a fault naming a node the smaller topology lacks, say): such a candidate never
    runs and never counts as failing."""

    failed: tuple[Property, ...] = ()
    result: RunResult | None = None
    features: frozenset[Feature] = frozenset()
    invalid: str = ""
    seconds: float = 0.0
    reference_failed: tuple[Property, ...] = ()  # failed with the reference nodes too (`Differential`)

    def fails(self, prop: Property) -> bool:
        return prop in self.failed

    @property
    def first(self) -> Property | None:
        return self.failed[0] if self.failed else None


KEEP_FAILED = 64  # failed live runs whose traces a Runner keeps at most (the shrinker makes many)


@dataclass
class Runner:
    """Runs candidates of one scenario (with its mutants) and remembers every answer, so a
    candidate the search or the shrinker meets twice costs one run."""

    scenario: Scenario
    mutants: dict[str, str] = field(default_factory=dict)  # group -> shipped mutant
    mode: str = "sim"  # or "live"
    coverage: bool = False
    reference_only: bool = False  # run every group's reference node (mutants of the file left out too)
    runs: int = 0  # runs made (cached answers and invalid candidates do not count)
    seconds: float = 0.0  # time spent in runs
    _cache: dict[tuple[str, int], Outcome] = field(default_factory=dict, repr=False)
    # The scratch directories of live runs that failed, kept with their traces: a live failure
    # may not happen again on replay, and then that run is the only evidence (`discard_kept`)
    kept: list[str] = field(default_factory=list, repr=False)

    def render(self, cand: Candidate, comment: str = "") -> str:
        """The scenario file of a candidate (with ``comment`` lines on top)."""
        data = copy.deepcopy(self.scenario.raw)
        data.pop("explore", None)
        data["duration"] = fmt_duration(cand.duration_ns)
        data["seeds"] = cand.seed
        nodes = data["nodes"]
        for group, count in cand.counts:
            nodes[group]["count"] = count
        for group, mutant in self.mutants.items():
            nodes[group]["mutant"] = mutant
        if self.reference_only:
            for spec in nodes.values():
                spec.pop("mutant", None)
        _set_or_drop(data, "faults", [copy.deepcopy(f) for f in cand.faults])
        _set_or_drop(data, "workload", [copy.deepcopy(w) for w in cand.workload])
        head = "".join(f"# {line}\n" if line else "#\n" for line in comment.splitlines())
        order = {k: i for i, k in enumerate(KEY_ORDER)}
        return head + dump_yaml(dict(sorted(data.items(), key=lambda kv: order.get(kv[0], len(order)))))

    def evaluate(self, cand: Candidate, fresh: bool = False) -> Outcome:
        """Run a candidate, or recall its outcome (``fresh``: run it again all the same, as a
        live failure is confirmed)."""
        text = self.render(cand)
        key = (text, cand.seed)
        known = self._cache.get(key)
        if known is not None and (not fresh or known.invalid):
            return known
        try:
            scenario = parse_scenario(text, f"{self.scenario.path} (explored)")
        except ScenarioError as e:
            outcome = Outcome(invalid=str(e))
            self._cache[key] = outcome
            return outcome
        outcome = self.run(scenario, cand.seed)
        self._cache[key] = outcome
        return outcome

    def run(self, scenario: Scenario, seed: int, out_dir: str | None = None) -> Outcome:
        """One run of a parsed scenario: its failed properties, in verdict order, and coverage."""
        collector = FeatureCollector()
        observers = [collector] if self.coverage else []
        scratch = None
        if out_dir is None and self.mode == "live":  # a live run always writes its trace
            scratch = out_dir = tempfile.mkdtemp(prefix="zmq-harness-explore-")
        t0 = time.monotonic()
        keep = False
        try:
            result = run_scenario(scenario, seed, self.mode, out_dir, observers=observers)
            keep = scratch is not None and bool(result.failed) and len(self.kept) < KEEP_FAILED
        except RunError as e:
            return Outcome(invalid=str(e))
        finally:
            if scratch is not None and not keep:
                shutil.rmtree(scratch, ignore_errors=True)
        if keep:
            assert scratch is not None
            self.kept.append(scratch)
        elapsed = time.monotonic() - t0
        self.runs += 1
        self.seconds += elapsed
        failed = tuple(dict.fromkeys(Property(v.check, v.clause or v.check) for v in result.failed))
        return Outcome(failed, result, collector.features(), seconds=elapsed)

    def discard_kept(self) -> None:
        """Remove the kept scratch directories of failed live runs (what the report needs of
        one is copied out first)."""
        for scratch in self.kept:
            shutil.rmtree(scratch, ignore_errors=True)
        self.kept.clear()


class Differential:
    """Runs candidates with the mutants, and the reference nodes on the same schedule: a
    failure counts only when the reference nodes pass that property on that very candidate.
    Otherwise the schedule is beyond what a correct implementation survives (or the reference
    has the bug), and it says nothing about the mutant. Without mutants there is nothing to
    compare: every failure counts."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        mutated = bool(runner.mutants) or any(g.mutant for g in runner.scenario.groups.values())
        self.reference = Runner(runner.scenario, {}, runner.mode, reference_only=True) if mutated else None
        self.reference_failures = 0  # candidates that failed with the reference nodes too

    @property
    def runs(self) -> int:
        return self.runner.runs + (self.reference.runs if self.reference else 0)

    def discard_kept(self) -> None:
        self.runner.discard_kept()
        if self.reference is not None:
            self.reference.discard_kept()

    def evaluate(self, cand: Candidate, fresh: bool = False) -> Outcome:
        """The candidate's outcome, its failed properties narrowed to those the reference passes."""
        outcome = self.runner.evaluate(cand, fresh)
        if not outcome.failed or self.reference is None:
            return outcome
        ref = self.reference.evaluate(cand)
        kept = tuple(p for p in outcome.failed if not ref.fails(p))
        if len(kept) < len(outcome.failed):
            self.reference_failures += 1
        return replace(outcome, failed=kept, reference_failed=tuple(p for p in outcome.failed if ref.fails(p)))


def _set_or_drop(data: dict[str, Any], key: str, items: list[Any]) -> None:
    if items:
        data[key] = items
    else:
        data.pop(key, None)


class _Dumper(yaml.SafeDumper):
    """Block style at the top, flow style for the small mappings of nodes, faults and
    workload items (one line each, as people write them)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(data: dict[str, Any]) -> str:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and value and key in ("nodes", "network", "explore"):
            out.append(f"{key}:\n")
            for k, v in value.items():
                out.append(f"  {_one_line({k: v})}\n")
        elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            out.append(f"{key}:\n")
            for v in value:
                out.append(f"  - {_one_line(v)}\n")
        else:
            out.append(_one_line({key: value}) + "\n")
    return "".join(out)


def _one_line(value: Any) -> str:
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, sort_keys=False, width=10_000,
                     allow_unicode=True).strip()
    if isinstance(value, dict) and text.startswith("{") and text.endswith("}"):
        inner = text[1:-1]
        # a top-level mapping of one key reads better without its braces
        if len(value) == 1:
            return inner
    return text


def trace_dir(out_dir: str) -> str:
    path = os.path.join(out_dir, "trace")
    os.makedirs(path, exist_ok=True)
    return path
