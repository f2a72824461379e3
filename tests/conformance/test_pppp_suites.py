"""Proof that the PPPP conformance suites (scenarios/pppp/conformance/<role>/*.yaml) are complete
and can fail.

* Every case passes against the reference node of its role in simulation, and over real sockets
  with the reference node started as a subprocess (`zmq-harness node pppp ...`, its deliveries
  read from its standard output): a representative subset by default, every case in the slow
  suite.
* Every wire- or timing-observable clause that binds a role has a case, or a reason here (and
  in docs/conformance-pppp.md and the case files) why no harness playing the other role can
  exercise it.
* Every MUST / MUST NOT clause the suites cover has a mutant (reference_nodes/pppp/mutants.py)
  that breaks it; every mutant fails at least one case of its role's suite, and every failure is
  attributed to the mutant's clause (or one ``ALSO_BREAKS`` lists with its reason), in
  simulation for all mutants and live for a subset.
* Conformant variants the document allows (immediate ACKs, in-order delivery, the multiple 5,
  lazy NACK answers, full-dump SYNC) fail no MUST or SHOULD case.
* The exit status of `zmq-harness conform` follows the levels.

`python tests/conformance/test_pppp_suites.py --write` regenerates the coverage tables in
docs/conformance-pppp.md from the case files.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.conformance.case import Case
from harness.conformance.runner import CaseResult, load_suite, run_case_sim, run_suite
from harness.protocols import catalogue
from harness.protocols.clauses import Level
from harness.registry import package, suite
from reference_nodes.pppp import mutants as M

if not __package__:  # run as a script (--write): `tests` lives at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.conformance import suite_proof as proof  # noqa: E402
from tests.reference_nodes.pppp_variants import (  # noqa: E402
    FullDumpPublisher, ImmediateAckSubscriber, InOrderSubscriber, LazyResendPublisher, Multiple5Publisher,
    Multiple5Subscriber,
)

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = str(ROOT / "scenarios")
DOC = ROOT / "docs" / "conformance-pppp.md"
ROLES = ("publisher", "subscriber")
CAT = catalogue("pppp")
MANDATORY = (Level.MUST, Level.MUST_NOT)
LENIENT = (Level.MAY,)  # a failed MAY case is reported, never a failure of the run

CASES: dict[str, list[Case]] = {role: load_suite("pppp", role, SCENARIOS) for role in ROLES}

_NAMES = ("The channel names are the harness's own ({channels}): an implementation only uses the "
          "names it is given, so no case can make it choose one that starts with a reserved byte. "
          "The codec rejects such a name wherever one arrives, in every case.")
UNCOVERED: dict[str, dict[str, str]] = {
    "publisher": {
        "pppp.wire.channel-name": _NAMES,
        "pppp.publisher.resend-shared-pick": "A permission (MAY): which message serves most subscribers on a resend "
                                             "on silence is the publisher's choice, and every choice conforms.",
        "pppp.publisher.implicit-nack": "It binds only a publisher whose resend on silence is not the last "
                                        "message (k < L); which message it resends is its own choice, so no "
                                        "script can make it exercise the rule. The chaos checker resend-nacked "
                                        "judges it wherever it happens (mutant ignores-implicit-nack).",
    },
    "subscriber": {
        "pppp.wire.channel-name": _NAMES,
        "pppp.custom.subscriber-may-send": "A permission (MAY): whether to send CUSTOM is the subscriber's "
                                           "application's choice, and one that never does conforms.",
        "pppp.subscriber.ack-cumulative": "A permission (MAY): a subscriber may ACK/NACK every message on its "
                                          "own, and then conforms.",
    },
}
# A mutant kept for a chaos checker whose clause no case can reach (see UNCOVERED).
CHECKER_ONLY = {"ignores-implicit-nack"}


def ref_factory(role: str) -> Any:
    return package("pppp").roles[role].factory


def acceptable(name: str) -> set[str]:
    return proof.acceptable(M, name)  # a crash (M.CRASHES) is reported as such, whichever step was waiting


def failures(results: list[CaseResult], lenient: bool = False) -> list[tuple[str, str, str]]:
    """(case, verdict, clause) of the cases that did not pass (with ``lenient``, MAY failures
    left out)."""
    return [(r.case.id, r.verdict, r.clause) for r in results if r.verdict != "pass"
            and not (lenient and r.verdict == "fail" and r.clause in CAT and CAT[r.clause].level in LENIENT)]


def case_id(c: Case) -> str:
    return f"{c.role}/{c.id}"


# ---- the reference passes ----------------------------------------------------------------------


@pytest.mark.parametrize("case", [c for r in ROLES for c in CASES[r]], ids=case_id)
def test_reference_passes_every_case_in_simulation(case: Case) -> None:
    r = run_case_sim(case, ref_factory(case.role))
    assert r.verdict == "pass", (r.clause, r.reason, r.exchange[-6:])


# Cases whose windows are wide (half a second or more on top of the implementation's own
# times), so that a loaded machine does not fail them; every case runs live in the slow suite.
LIVE_SUBSET = {"publisher": ("publish-format", "preserve-until-acked", "survives-malformed"),
               "subscriber": ("exactly-once", "nack-gaps", "resubscribe")}


@pytest.mark.live
@pytest.mark.timeout(180)
@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_live(role: str) -> None:
    """A subset over real sockets, the subscriber's deliveries read from its standard output."""
    cases = [c for c in CASES[role] if c.id in LIVE_SUBSET[role]]
    results = run_suite(cases, cmd=suite("pppp", role).reference_cmd)
    assert not failures(results), [(r.case.id, r.clause, r.reason, r.iut_output) for r in results
                                   if r.verdict != "pass"]


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(600)
@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_every_case_live(role: str) -> None:
    results = run_suite(CASES[role], cmd=suite("pppp", role).reference_cmd)
    assert not failures(results), [(r.case.id, r.clause, r.reason, r.iut_output) for r in results
                                   if r.verdict != "pass"]


# ---- coverage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_every_observable_clause_of_the_role_has_a_case_or_a_reason(role: str) -> None:
    proof.check_coverage("pppp", role, CASES[role], UNCOVERED[role], DOC)


def test_the_coverage_tables_in_the_docs_are_current() -> None:
    text = DOC.read_text()
    assert _replace_tables(text) == text, "run: python tests/conformance/test_pppp_suites.py --write"


@pytest.mark.parametrize("role", ROLES)
def test_every_case_names_clauses_that_bind_its_role(role: str) -> None:
    proof.check_clauses_bind_role(role, CASES[role], CAT)


def test_what_the_application_gets_is_judged_from_the_output() -> None:
    internal = {cl for c in CASES["subscriber"] for cl in c.clauses if not proof.observable(CAT, cl)}
    assert internal == {"pppp.subscriber.exactly-once"}


# ---- mutants -------------------------------------------------------------------------------------


def test_every_mandatory_clause_the_suites_cover_has_a_mutant_that_breaks_it() -> None:
    broken = {clause for _, _, clause in M.MUTANTS.values()}
    for role in ROLES:
        for c in CASES[role]:
            for clause in c.clauses:
                if CAT[clause].level in MANDATORY:
                    assert clause in broken, f"{role}: no mutant breaks {clause}"


def test_every_mutant_clause_is_covered_by_its_roles_suite_or_out_of_reach() -> None:
    for name, (role, _, clause) in M.MUTANTS.items():
        named = {cl for c in CASES[role] for cl in c.clauses}
        if name in CHECKER_ONLY:
            assert clause in UNCOVERED[role], name
        else:
            assert clause in named or not proof.observable(CAT, clause), (name, clause)
        for extra in M.ALSO_BREAKS.get(name, {}):
            assert extra in CAT, (name, extra)


@functools.lru_cache(maxsize=None)
def mutant_results(name: str) -> tuple[CaseResult, ...]:
    """Every case of the mutant's role, run in simulation against it (once per test session)."""
    role, factory, _ = M.MUTANTS[name]
    return tuple(run_case_sim(c, factory) for c in CASES[role])


@pytest.mark.parametrize("name", sorted(M.MUTANTS))
def test_mutant_fails_its_suite_on_its_clause_in_simulation(name: str) -> None:
    role, _, clause = M.MUTANTS[name]
    failed = failures(list(mutant_results(name)))
    if name not in CHECKER_ONLY:
        assert failed, f"{name} passes every {role} case: the suite has a hole for {clause}"
    wrong = [f for f in failed if f[1] != "fail" or f[2] not in acceptable(name)]
    assert not wrong, f"{name} breaks {clause}, but cases failed on: {wrong}"


def test_every_case_fails_against_a_mutant_of_its_own_clauses() -> None:
    """Each case can fail: some mutant that breaks one of the case's clauses fails it."""
    failing: dict[str, set[str]] = {}
    for name, (role, _, clause) in M.MUTANTS.items():
        for r in mutant_results(name):
            if r.verdict == "fail" and clause in r.case.clauses:
                failing.setdefault(f"{role}/{r.case.id}", set()).add(name)
    every = {f"{role}/{c.id}" for role in ROLES for c in CASES[role]}
    assert every - set(failing) == set(), "cases no mutant of their clauses fails"


LIVE_MUTANTS = ("ignores-nacks", "releases-on-first-ack", "publisher-slow-first-heartbeat", "talks-first",
                "no-dedup", "late-ack", "no-resubscribe", "subscriber-crash-on-malformed")


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", LIVE_MUTANTS)
def test_mutant_fails_live_as_in_simulation(name: str) -> None:
    """The mutant as a real subprocess (`zmq-harness node pppp ROLE --mutant NAME`): the cases it
    fails in simulation fail live on the same clause, and one case it passes in simulation
    passes live too (a timing mutant may trip it too, but only on its own clause)."""
    role, factory, _ = M.MUTANTS[name]
    sim = {c.id: run_case_sim(c, factory) for c in CASES[role]}
    chosen = [c for c in CASES[role] if sim[c.id].verdict != "pass"][:2]
    chosen += [c for c in CASES[role] if sim[c.id].verdict == "pass"][:1]
    live = run_suite(chosen, cmd=suite("pppp", role).reference_cmd + f" --mutant {name}")
    evidence = [(r.case.id, r.verdict, r.clause, r.reason[:200]) for r in live]
    for r, c in zip(live, chosen):
        s = sim[c.id]
        if s.verdict != "pass":
            assert (r.verdict, r.clause) == (s.verdict, s.clause), evidence
        else:
            assert r.verdict == "pass" or r.clause in acceptable(name), evidence


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_mutant_fails_live_on_what_it_prints() -> None:
    """The subscriber that delivers a duplicate, as a subprocess: the duplicate line on its
    standard output fails the exactly-once case."""
    case = next(c for c in CASES["subscriber"] if c.id == "exactly-once")
    r = run_suite([case], cmd=suite("pppp", "subscriber").reference_cmd + " --mutant no-dedup")[0]
    assert (r.verdict, r.clause) == ("fail", "pppp.subscriber.exactly-once"), r.reason
    assert "output" in r.reason and '"sequence": 2' in r.reason


# ---- the suites do not ask for more than the document --------------------------------------------


VARIANTS = [("publisher", Multiple5Publisher), ("publisher", LazyResendPublisher),
            ("publisher", FullDumpPublisher), ("subscriber", ImmediateAckSubscriber),
            ("subscriber", InOrderSubscriber), ("subscriber", Multiple5Subscriber)]


@pytest.mark.parametrize("role,factory", VARIANTS, ids=[f.__name__ for _, f in VARIANTS])
def test_conformant_variants_fail_no_must_or_should_case(role: str, factory: Any) -> None:
    results = [run_case_sim(c, factory) for c in CASES[role]]
    assert not failures(results, lenient=True), [(r.case.id, r.clause, r.reason) for r in results
                                                 if r.verdict != "pass"]


def test_a_publisher_without_backlog_sync_fails_only_the_may_case() -> None:
    results = [run_case_sim(c, FullDumpPublisher) for c in CASES["publisher"]]
    assert [(r.case.id, r.clause) for r in results if r.verdict != "pass"] == \
        [("resubscribe-replay", "pppp.conversation.sync-optional")]


# ---- exit status ---------------------------------------------------------------------------------


def test_exit_status_in_simulation(tmp_path: Path) -> None:
    # A MUST failure fails the run, a SHOULD one only with --fail-on should, a MAY one never.
    for role, mutant, case, code in (("subscriber", "late-ack", "ack-within-first-idle", 1),
                                     ("publisher", "never-stops", "stop-to-disconnected", 0),
                                     ("publisher", "no-replay", "resubscribe-replay", 0)):
        got, out, junit = proof.conform(tmp_path, "pppp", role, "--sim", "--mutant", mutant, "--case", case,
                                        "--case", "subscribe-first")
        assert got == code, (mutant, out)
        assert junit.get("failures") == "1", out
    got, out, _ = proof.conform(tmp_path, "pppp", "publisher", "--sim", "--mutant", "never-stops", "--case",
                                "stop-to-disconnected", "--fail-on", "should")
    assert got == 1, out


# ---- docs/conformance-pppp.md --------------------------------------------------------------------


def test_the_example_cases_in_the_docs_load_and_pass_against_the_reference() -> None:
    from harness.conformance.case import parse_case

    blocks = re.findall(r"```yaml-case\n(.*?)```", DOC.read_text(), re.S)
    assert blocks
    for i, text in enumerate(blocks):
        case = parse_case(text, package("pppp").peer_roles(), f"docs/conformance-pppp.md#{i}")
        r = run_case_sim(case, ref_factory(case.role))
        assert r.verdict == "pass", (r.clause, r.reason)
        r = run_case_sim(case, M.MUTANTS["no-dedup"][1])
        assert (r.verdict, r.clause) == ("fail", "pppp.subscriber.exactly-once"), r.reason


def coverage_tables() -> str:
    out = proof.clause_tables("pppp", CASES, UNCOVERED, CAT)
    out += proof.observed_mutant_table(
        M, CASES, CAT, run_case_sim,
        intro="Each mutant's role suite in the simulator: the cases that fail, and th"
              "e clause each failure is attributed to.",
        unreached="none: no case can reach the clause (the chaos checker catches it)")
    return "\n".join(out)


def _replace_tables(text: str) -> str:
    return proof.replace_tables(text, "test_pppp_suites.py", "docs/conformance-pppp.md", coverage_tables())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(_replace_tables(DOC.read_text()))
    else:
        print(coverage_tables())
