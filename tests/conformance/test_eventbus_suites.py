"""Proof that the Event BUS conformance suites (scenarios/eventbus/conformance/<role>/*.yaml) are
complete and can fail.

* Every case passes against the reference node of its role: in simulation in both dialects
  (and over several seeds), and over real sockets with the reference node started as a
  subprocess (`zmq-harness node eventbus ROLE ...`), in both dialects.
* Every wire-observable clause that binds a role has a case (none lacks one for the Event BUS).
* Every MUST clause the suites cover has a mutant (reference_nodes/eventbus/mutants.py) that
  breaks it. Every mutant fails at least one case of its role's suite in every dialect it
  differs in, and every failure is attributed to the mutant's clause (or one that
  ``ALSO_BREAKS`` lists with its reason) — in simulation for all mutants, live for a subset.
  The mutants no suite can see (``OUT_OF_REACH``) pass every case.
* Conformant variants that the document allows but the reference does not do pass (sequence
  gaps, SYNCs in descending order, a history that does not survive a restart, a PUB sequence
  that is always 0, a client that never resynchronises or resends).
* `zmq-harness conform eventbus ...` reports coverage and exits by the levels.

`python tests/conformance/test_eventbus_suites.py --write` regenerates the coverage tables in
docs/conformance-eventbus.md from the case files.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.conformance.case import Case
from harness.conformance.runner import CaseResult, load_suite, run_case_live, run_case_sim
from harness.node import Action, NodeContext
from harness.protocols import catalogue
from harness.registry import package, suite
from reference_nodes.eventbus import mutants as M
from reference_nodes.eventbus.client import Client
from reference_nodes.eventbus.common import Event
from reference_nodes.eventbus.server import Server

if not __package__:  # run as a script (--write): `tests` lives at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.conformance import suite_proof as proof  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = str(ROOT / "scenarios")
DOC = ROOT / "docs" / "conformance-eventbus.md"
ROLES = ("server", "client")
DIALECTS = ("strict", "eventbus:micro-toolkit")
CAT = catalogue("eventbus")
LIVE_WORKERS = 6  # live cases side by side (mostly waiting): each has its own ports, processes and sockets

CASES: dict[str, list[Case]] = {role: load_suite("eventbus", role, SCENARIOS) for role in ROLES}
UNCOVERED: dict[str, dict[str, str]] = {"server": {}, "client": {}}  # every observable clause has a case


def ref_factory(role: str) -> Any:
    return package("eventbus").roles[role].factory



def failures(results: list[CaseResult]) -> list[tuple[str, str, str]]:
    return [(r.case.id, r.verdict, r.clause) for r in results if r.verdict not in ("pass", "skipped")]


def expected_verdict(case: Case, dialect: str) -> str:
    return "skipped" if case.dialects is not None and dialect not in case.dialects else "pass"


def case_id(c: Case) -> str:
    return f"{c.role}/{c.id}"


def run_live(jobs: list[tuple[Case, str, str]]) -> list[CaseResult]:
    """(case, command line, dialect) jobs over real sockets, side by side."""
    with ThreadPoolExecutor(LIVE_WORKERS) as ex:
        return list(ex.map(lambda j: run_case_live(j[0], cmd=j[1], dialect=j[2]), jobs))


# ---- the reference passes ----------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_every_case_in_simulation(role: str, dialect: str) -> None:
    bad = [(c.id, r.verdict, r.clause, r.reason, r.exchange[-6:]) for c in CASES[role]
           for r in [run_case_sim(c, ref_factory(role), dialect=dialect)] if r.verdict != expected_verdict(c, dialect)]
    assert not bad, bad


@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_over_other_seeds(role: str) -> None:
    """Latencies come from the seed: the cases must not depend on them."""
    bad = [(c.id, d, seed, r.clause, r.reason) for c in CASES[role] for d in DIALECTS for seed in (2, 3)
           for r in [run_case_sim(c, ref_factory(role), dialect=d, seed=seed)] if r.verdict != expected_verdict(c, d)]
    assert not bad, bad


def _live_by_default(role: str, dialect: str) -> Any:
    """By default the client's strict suite only: every case of both roles and dialects passes in
    simulation by default, the server suite runs live by default against an outside server
    (tests/conformance/test_eventbus_standins.py) and the reference server's process meets
    three server mutants live below; the rest is slow."""
    default = role == "client" and dialect == "strict"
    return pytest.param(role, dialect, id=f"{role}-{dialect}", marks=() if default else pytest.mark.slow)


@pytest.mark.live
@pytest.mark.timeout(240)
@pytest.mark.parametrize("role,dialect", [_live_by_default(r, d) for d in DIALECTS for r in ROLES])
def test_reference_passes_every_case_live(role: str, dialect: str) -> None:
    jobs = [(c, suite("eventbus", role).reference_cmd, dialect) for c in CASES[role]
            if expected_verdict(c, dialect) == "pass"]
    bad = [(r.case.role, r.case.id, r.verdict, r.clause, r.reason, r.iut_output)
           for r in run_live(jobs) if r.verdict != "pass"]
    assert not bad, bad


# ---- coverage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_every_observable_clause_of_the_role_has_a_case(role: str) -> None:
    proof.check_coverage("eventbus", role, CASES[role], UNCOVERED[role], DOC)


def test_the_coverage_tables_in_the_docs_are_current() -> None:
    text = DOC.read_text()
    assert _replace_tables(text) == text, "run: python tests/conformance/test_eventbus_suites.py --write"


@pytest.mark.parametrize("role", ROLES)
def test_every_case_names_clauses_that_bind_its_role(role: str) -> None:
    proof.check_clauses_bind_role(role, CASES[role], CAT)


# ---- mutants -------------------------------------------------------------------------------------


def test_every_mandatory_clause_the_suites_cover_has_a_mutant_that_breaks_it() -> None:
    proof.check_mandatory_clauses_have_mutants(CASES, CAT, M)


def test_every_mutant_clause_is_covered_by_its_roles_suite_or_out_of_reach() -> None:
    proof.check_mutant_clauses_have_cases(CASES, CAT, M)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(M.MUTANTS))
def test_mutant_fails_its_suite_on_its_clause_in_simulation(name: str, dialect: str) -> None:
    role, factory, _ = M.MUTANTS[name]
    proof.check_mutant_fails_on_its_clause(M, name, dialect, [run_case_sim(c, factory, dialect=dialect)
                                                              for c in CASES[role]], DIALECTS)


@pytest.mark.parametrize("role", ROLES)
def test_every_case_fails_against_a_mutant_that_breaks_one_of_its_clauses(role: str) -> None:
    caught = {c.id: False for c in CASES[role]}
    for name, (mrole, factory, clause) in M.MUTANTS.items():
        if mrole != role or name in M.OUT_OF_REACH:
            continue
        for c in CASES[role]:
            if clause not in c.clauses or caught[c.id]:
                continue
            for d in M.DIALECTS.get(name, DIALECTS):
                r = run_case_sim(c, factory, dialect=d)
                if r.verdict == "fail" and (r.clause in c.clauses or (name in M.CRASHES and r.clause == proof.ROBUSTNESS)):
                    caught[c.id] = True
                    break
    assert all(caught.values()), [k for k, v in caught.items() if not v]


@pytest.mark.live
@pytest.mark.timeout(180)
def test_cases_pass_again_against_a_server_that_keeps_its_events(tmp_path: Path) -> None:
    """A store outside {tmpdir} (the deployed bus keeps its events in MongoDB) holds every earlier
    run's events, these cases' own among them: the snapshot cases ask from the sequence of a marker
    event they publish first. Before, a second run of snapshot-subtrees got the first run's /sf/a/
    events too and failed."""
    cmd = suite("eventbus", "server").reference_cmd.replace("{tmpdir}/bus.store", str(tmp_path / "bus.store"))
    cases = load_suite("eventbus", "server", only=["snapshot-subtrees", "syncend-latest", "empty-topic",
                                                              "snapshot-while-publishing"])
    dialect = "eventbus:micro-toolkit"  # (syncend-latest is of this dialect)
    for attempt in (1, 2):
        results = [run_case_live(c, cmd=cmd, dialect=dialect) for c in cases]
        assert all(r.verdict == "pass" for r in results), \
            (attempt, [(r.case.id, r.verdict, r.clause, r.reason[:300]) for r in results])
    assert (tmp_path / "bus.store").exists()


# Live, a representative subset: the restart (a process with its store in {tmpdir}), snapshots,
# identities, raw bytes, socket types, crashes; for the client its first message, its
# connections and crashes. By default the first four (a restart, a snapshot, ports, a client's
# connections: ~10 s); every mutant fails its suite in simulation by default, the rest of the
# subset live in the slow suite.
LIVE_MUTANTS = ("volatile-sequence", "syncend-latest", "swapped-ports", "no-subscriber", "no-subtree-filter",
                "first-client", "reencodes-data", "server-crash-on-malformed", "hello-first",
                "client-crash-on-malformed")
LIVE_BY_DEFAULT = 4


@pytest.mark.live
@pytest.mark.timeout(300)
@pytest.mark.parametrize("subset", ["default", pytest.param("slow", marks=pytest.mark.slow)])
def test_mutants_fail_live_as_in_simulation(subset: str) -> None:
    """Each mutant as a real subprocess (`zmq-harness node eventbus ROLE ... --mutant NAME`): a
    case it fails in simulation fails live on the same clause (and, for the first two, one it
    passes passes)."""
    names = LIVE_MUTANTS[:LIVE_BY_DEFAULT] if subset == "default" else LIVE_MUTANTS[LIVE_BY_DEFAULT:]
    jobs, expected = [], []
    for name in names:
        role, factory, _ = M.MUTANTS[name]
        sim = {c.id: run_case_sim(c, factory) for c in CASES[role]}
        chosen = [c for c in CASES[role] if sim[c.id].verdict == "fail"][:1]
        if name in LIVE_MUTANTS[:2]:
            chosen += [c for c in CASES[role] if sim[c.id].verdict == "pass"][:1]
        for c in chosen:
            jobs.append((c, suite("eventbus", role).reference_cmd + f" --mutant {name}", "strict"))
            expected.append((name, c.id, sim[c.id].verdict, sim[c.id].clause))
    results = run_live(jobs)
    got = [(e[0], r.case.id, r.verdict, r.clause) for e, r in zip(expected, results)]
    mismatch = [(e, g, r.reason) for e, g, r in zip(expected, got, results) if e != g]
    assert not mismatch, mismatch


# ---- the suites do not ask for more than the document ------------------------------------------


class GappyServer(Server):
    """Conformant (E-EVENTBUS-10): its sequences grow by 2, not 1."""

    def accept(self, msg: Any, frames: list[bytes]) -> list[Action]:
        self.seq += 1
        return super().accept(msg, frames)


class DescendingServer(Server):
    """Conformant (E-EVENTBUS-09): sends the SYNCs of a snapshot newest first."""

    def selected(self, subtrees: list[str], since: int) -> list[Event]:
        return list(reversed(super().selected(subtrees, since)))


class ForgetfulServer(Server):
    """Conformant (E-EVENTBUS-09): keeps its sequence counter across a restart, not its history."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.events, self.seqs, self.uuids = [], [], {}


class ZeroSequenceClient(Client):
    """Conformant (E-EVENTBUS-03): every PUB carries sequence 0."""

    def event_fields(self, topic: str, data: Any, now: int) -> dict[str, Any]:
        return {**super().event_fields(topic, data, now), "sequence": 0}


class PlainClient(Client):
    """Conformant: never resynchronises, never resends an event."""

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(NodeContext(ctx.name, ctx.rng, ctx.store,
                                     {**ctx.config, "resync_ms": 0, "publish_timeout_ms": 0}))


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("role,factory", [("server", GappyServer), ("server", DescendingServer),
                                          ("server", ForgetfulServer), ("client", ZeroSequenceClient),
                                          ("client", PlainClient)], ids=lambda x: getattr(x, "__name__", x))
def test_conformant_variants_pass(role: str, factory: Any, dialect: str) -> None:
    results = [run_case_sim(c, factory, dialect=dialect) for c in CASES[role]]
    assert not failures(results), [(r.case.id, r.clause, r.reason) for r in results if r.verdict != "pass"]


# ---- the command line ------------------------------------------------------------------------------


def test_exit_status_and_coverage_in_simulation(tmp_path: Path) -> None:
    code, out, junit = proof.conform(tmp_path, "eventbus", "server", "--sim", "-v")
    assert code == 0 and junit.get("failures") == "0", out
    assert "coverage: 17/17 wire/timing clauses for the server role have a case" in out
    code, out, junit = proof.conform(tmp_path, "eventbus", "server", "--sim", "--mutant", "syncend-filter",
                                     "--case", "syncend-sequence", "--case", "ports")
    assert code == 1, out
    fails = [tc.find("failure") for tc in junit.iter("testcase") if tc.find("failure") is not None]
    assert [f.get("type") for f in fails] == ["eventbus.server.syncend-sequence"]


# ---- the coverage tables in docs/conformance-eventbus.md -------------------------------------------


def coverage_tables() -> str:
    return "\n".join(proof.clause_tables("eventbus", CASES, UNCOVERED, CAT) + proof.mutant_table(M, ROLES))


def _replace_tables(text: str) -> str:
    return proof.replace_tables(text, "test_eventbus_suites.py", "docs/conformance-eventbus.md", coverage_tables())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(_replace_tables(DOC.read_text()))
    else:
        print(coverage_tables())
