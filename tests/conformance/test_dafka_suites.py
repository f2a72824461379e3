"""Proof that the Dafka conformance suites (scenarios/dafka/conformance/<role>/*.yaml) are
complete and can fail.

* Every case passes against the reference node of its role: in simulation in both dialects
  (and over several seeds), and over real sockets with the reference node started as a
  subprocess (`zmq-harness node dafka ROLE --set bind=... --set towers=...`), in both dialects.
* Every wire- or timing-observable clause that binds a role has a case, or a reason here (and
  in docs/conformance-dafka.md and the case files) why no harness playing the other roles can
  exercise it on its own.
* Every MUST / MUST NOT clause the suites cover has a mutant (reference_nodes/dafka/mutants.py)
  that breaks it. Every mutant fails at least one case of its role's suite in every dialect
  it differs in, and every failure is attributed to the mutant's clause (or one that
  ``ALSO_BREAKS`` lists with its reason) — in simulation for all mutants, live for a
  representative subset. The mutants no suite can see (``OUT_OF_REACH``) pass every case.
* Conformant variants that the document allows but the reference does not do pass (a producer
  that does not subscribe to GET-HEADS, a consumer that subscribes to ACKs, a store that
  subscribes to CONSUMER-HELLO for its own address only).
* `zmq-harness conform dafka ...` reports coverage, exits by the levels and runs a `--cmd`.

`python tests/conformance/test_dafka_suites.py --write` regenerates the coverage tables in
docs/conformance-dafka.md from the case files.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.conformance.case import Case
from harness.conformance.runner import CaseResult, load_suite, run_case_live, run_case_sim
from harness.registry import package, suite
from harness.protocols import catalogue
from harness.protocols.dafka import subscription
from reference_nodes.dafka import mutants as M
from reference_nodes.dafka.consumer import Consumer
from reference_nodes.dafka.producer import Producer
from reference_nodes.dafka.store import Store

if not __package__:  # run as a script (--write): `tests` lives at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.conformance import suite_proof as proof  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = str(ROOT / "scenarios")
DOC = ROOT / "docs" / "conformance-dafka.md"
ROLES = ("producer", "store", "consumer")
DIALECTS = ("strict", "dafka:zproto")
CAT = catalogue("dafka")
LIVE_WORKERS = 8  # live cases run side by side: each has its own ports, processes and sockets

CASES: dict[str, list[Case]] = {role: load_suite("dafka", role, SCENARIOS) for role in ROLES}

# Clauses that bind a role and show on the wire or in timing, but that no case can single out,
# and why. docs/conformance-dafka.md repeats them (generated from here) and the case files too.
_SECOND_SUB = ("A node's SUB socket for its peers shows on the wire only as the subscriptions that arrive "
               "at the nodes it discovered, which is what dafka.interconnect.connect-on-discovery is judged "
               "on (case discovery); whether they come from a second SUB socket or another one cannot be "
               "seen over ZMTP.")
_REGISTER = ("The umbrella of the role's own subscription clauses, each of which has a case (a message that "
             "waits for the subscription that lets it through); no subscription at all at a node is judged "
             "as dafka.interconnect.connect-on-discovery, since a SUB that connects and subscribes nothing "
             "looks the same over ZMTP.")
_XPUB = ("Only answers travel on the node's XPUB ({role}s send nothing by themselves), so an unreachable XPUB "
         "cannot be told apart from a node that does not answer: every case that expects an answer fails, on "
         "the clause of that answer. The producer suite covers it, since a producer publishes on its own.")
UNCOVERED: dict[str, dict[str, str]] = {
    "producer": {"dafka.interconnect.second-sub": _SECOND_SUB, "dafka.subscription.register": _REGISTER},
    "store": {"dafka.interconnect.second-sub": _SECOND_SUB, "dafka.subscription.register": _REGISTER,
              "dafka.interconnect.xpub-bind": _XPUB.format(role="store")},
    "consumer": {"dafka.interconnect.second-sub": _SECOND_SUB, "dafka.subscription.register": _REGISTER,
                 "dafka.interconnect.xpub-bind": _XPUB.format(role="consumer")},
}

# Cases the reference node leaves not applicable (skipped), and why.
REFERENCE_SKIPS = {("consumer", "ack-optional"): "the reference consumer does not subscribe to ACKs (a MAY)"}


def ref_factory(role: str) -> Any:
    return package("dafka").roles[role].factory


def acceptable(name: str) -> set[str]:
    return proof.acceptable(M, name)



def observable(clause: str) -> bool:
    return proof.observable(CAT, clause)


def failures(results: list[CaseResult]) -> list[tuple[str, str, str]]:
    return [(r.case.id, r.verdict, r.clause) for r in results if r.verdict not in ("pass", "skipped")]


def expected_verdict(case: Case, dialect: str) -> str:
    if case.dialects is not None and dialect not in case.dialects:
        return "skipped"
    return "skipped" if (case.role, case.id) in REFERENCE_SKIPS else "pass"


def case_id(c: Case) -> str:
    return f"{c.role}/{c.id}"


def run_live(jobs: list[tuple[Case, str, str]]) -> list[CaseResult]:
    """(case, command line, dialect) jobs over real sockets, side by side."""
    with ThreadPoolExecutor(LIVE_WORKERS) as ex:
        return list(ex.map(lambda j: run_case_live(j[0], cmd=j[1], dialect=j[2]), jobs))


# ---- the reference passes ----------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", [c for r in ROLES for c in CASES[r]], ids=case_id)
def test_reference_passes_every_case_in_simulation(case: Case, dialect: str) -> None:
    r = run_case_sim(case, ref_factory(case.role), dialect=dialect)
    assert r.verdict == expected_verdict(case, dialect), (r.clause, r.reason, r.exchange[-6:])


@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_over_other_seeds(role: str) -> None:
    """Network latencies and node addresses come from the seed: the cases must not depend on them."""
    bad = [(c.id, d, seed, r.clause, r.reason) for c in CASES[role] for d in DIALECTS for seed in (2, 3, 4)
           for r in [run_case_sim(c, ref_factory(role), dialect=d, seed=seed)] if r.verdict != expected_verdict(c, d)]
    assert not bad, bad


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("dialect,share", [
    # by default every fourth case of each role live, for the suite's time budget (every case
    # runs in simulation, and the stand-in tests run most of them live against other programs);
    # all of them, both dialects, slow
    ("strict", 4),
    pytest.param("strict", 1, marks=pytest.mark.slow),
    *(pytest.param(d, 1, marks=pytest.mark.slow) for d in DIALECTS if d != "strict")])
def test_reference_passes_every_case_live(dialect: str, share: int) -> None:
    jobs = [(c, suite("dafka", role).reference_cmd, dialect) for role in ROLES for c in CASES[role][::share]]
    results = run_live(jobs)
    bad = [(r.case.role, r.case.id, r.verdict, r.clause, r.reason, r.iut_output) for r in results
           if r.verdict != expected_verdict(r.case, dialect)]
    assert not bad, bad


# ---- coverage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_every_observable_clause_of_the_role_has_a_case_or_a_reason(role: str) -> None:
    proof.check_coverage("dafka", role, CASES[role], UNCOVERED[role], DOC)


def test_the_coverage_tables_in_the_docs_are_current() -> None:
    text = DOC.read_text()
    assert _replace_tables(text) == text, "run: python tests/conformance/test_dafka_suites.py --write"


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


# A representative subset, live: each role; wire format, timing, discovery, subscriptions,
# discards, root-cause attribution (tower). Not xpub-elsewhere: live, a node that does not bind
# {endpoint} never becomes ready, and the case is an error of the run (the harness waits for
# that port before it starts its side), not a verdict.
LIVE_MUTANTS = ("wrong-signature", "early-release", "head-next-offset", "fetch-from-zero", "impostor",
                "no-store-hello", "descending-fetch-store", "deaf-to-tower", "accepts-any-version", "heads-by-prefix",
                "skip-gaps", "no-get-heads", "mute-to-tower", "beacon-once", "hello-without-subscription",
                "no-store-hello-subscription")


def _mutants_live(names: tuple[str, ...], fails: int, passes: int) -> None:
    """Each mutant as a real subprocess (`zmq-harness node dafka ROLE ... --mutant NAME`): the first
    ``fails`` cases it fails in simulation fail live on the same clause, and the first ``passes``
    cases it passes in simulation pass live too."""
    jobs, expected = [], []
    for name in names:
        role, factory, _ = M.MUTANTS[name]
        sim = {c.id: run_case_sim(c, factory) for c in CASES[role]}
        chosen = [c for c in CASES[role] if sim[c.id].verdict == "fail"][:fails]
        chosen += [c for c in CASES[role] if sim[c.id].verdict == "pass"][:passes]
        for c in chosen:
            jobs.append((c, suite("dafka", role).reference_cmd + f" --mutant {name}", "strict"))
            expected.append((name, c.id, sim[c.id].verdict, sim[c.id].clause))
    results = run_live(jobs)
    got = [(e[0], r.case.id, r.verdict, r.clause) for e, r in zip(expected, results)]
    mismatch = [(e, g, r.reason) for e, g, r in zip(expected, got, results) if e != g]
    assert not mismatch, mismatch
    assert all(r.clause in acceptable(e[0]) for e, r in zip(expected, results) if r.verdict != "pass")


@pytest.mark.live
@pytest.mark.timeout(120)
def test_mutants_fail_live_as_in_simulation() -> None:
    """Five live mutants, of each role and the tower, fail their first failing case live on the
    same clause as in simulation (by default, for the suite's time budget; every one, with two
    failing cases and a passing one each, is the slow test below)."""
    _mutants_live(("wrong-signature", "fetch-from-zero", "deaf-to-tower", "skip-gaps", "mute-to-tower"),
                  fails=1, passes=0)


@pytest.mark.live
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_mutants_fail_and_pass_live_as_in_simulation() -> None:
    _mutants_live(LIVE_MUTANTS, fails=2, passes=1)


# ---- the suites do not ask for more than the document ------------------------------------------


class NoGetHeadsProducer(Producer):
    """Conformant (E-DAFKA-15): does not subscribe to GET-HEADS, like zeromq/dafka's producers."""

    def peer_subscriptions(self) -> list[bytes]:
        return [s for s in super().peer_subscriptions() if not s.startswith(b"G")]

    def on_command(self, op: Any, request: dict[str, Any], now: int) -> list[Any]:
        return [a for a in super().on_command(op, request, now) if type(a).__name__ != "Subscribe"]


class AckSubscribingConsumer(Consumer):
    """Conformant (a MAY): subscribes to every ACK."""

    def peer_subscriptions(self) -> list[bytes]:
        return super().peer_subscriptions() + [subscription("ACK")]


class LatestConsumer(Consumer):
    """Conformant (E-DAFKA-25): starts a partition it has not seen at the first offset it learns
    of (``offset_reset: latest``), not at 0. Five consumer cases failed it on
    dafka.fetch.on-gap before they gave each partition its record 0 first."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.offset_reset = "latest"


class OwnHelloStore(Store):
    """Conformant (E-DAFKA-18): subscribes to CONSUMER-HELLO for its own address only, like
    zeromq/dafka's stores."""

    def peer_subscriptions(self) -> list[bytes]:
        return [subscription("CONSUMER-HELLO", self.address) if s == subscription("CONSUMER-HELLO") else s
                for s in super().peer_subscriptions()]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("role,factory,skips", [
    ("producer", NoGetHeadsProducer, dict.fromkeys(("direct-head", "signature-discard", "survives-malformed"),
                                                   "E-DAFKA-15")),
    ("consumer", AckSubscribingConsumer, {}),
    ("consumer", LatestConsumer, {"ack-optional": "dafka.subscription.consumer-ack"}),
    ("store", OwnHelloStore, {}),
])
def test_conformant_variants_pass(role: str, factory: Any, skips: dict[str, str], dialect: str) -> None:
    results = {c.id: run_case_sim(c, factory, dialect=dialect) for c in CASES[role]}
    assert not failures(list(results.values())), [(r.case.id, r.clause, r.reason) for r in results.values()
                                                  if r.verdict not in ("pass", "skipped")]
    skipped = {k for k, r in results.items() if r.verdict == "skipped"}
    by_dialect = {c.id for c in CASES[role] if c.dialects is not None and dialect not in c.dialects}
    assert skipped == set(skips) | by_dialect
    for k in set(skips) - by_dialect:  # not applicable, and the report says why
        assert "not applicable" in results[k].reason and skips[k] in results[k].reason


# ---- the command line ------------------------------------------------------------------------------


def conform(tmp_path: Path, *args: str) -> tuple[int, str, ET.Element]:
    return proof.conform(tmp_path, "dafka", *args)


def test_exit_status_and_coverage_in_simulation(tmp_path: Path) -> None:
    code, out, junit = conform(tmp_path, "store", "--sim", "-v")
    assert code == 0 and junit.get("failures") == "0", out
    assert "coverage: 30/33 wire/timing clauses for the store role have a case" in out
    code, out, junit = conform(tmp_path, "store", "--sim", "--mutant", "no-store-hello")
    assert code == 1, out
    fails = [tc.find("failure") for tc in junit.iter("testcase") if tc.find("failure") is not None]
    assert fails and {f.get("type") for f in fails} == {"dafka.store.hello-on-subscription"}
    # a SHOULD broken (and nothing else): zero by default, non-zero with --fail-on should
    args = ("consumer", "--sim", "--mutant", "no-hello-reply", "--case", "store-hello", "--case", "get-heads")
    code, out, junit = conform(tmp_path, *args)
    assert code == 0 and "[dafka.consumer.hello-reply SHOULD]" in out and junit.get("failures") == "1", out
    code, out, _ = conform(tmp_path, *args, "--fail-on", "should")
    assert code == 1, out
    code, out, _ = conform(tmp_path, "consumer", "--sim", "--dialect", "dafka:zproto")
    assert code == 0 and "2 skipped" in out, out


def test_an_implementation_that_is_already_up_cannot_be_tested() -> None:
    """The tower is the harness's and new for every case: --endpoint is refused, with the reason."""
    r = run_case_live(CASES["store"][0], endpoint="tcp://127.0.0.1:1")
    assert (r.verdict, r.clause) == ("error", "") and "--cmd" in r.reason


@pytest.mark.live
@pytest.mark.slow  # the suite's time budget: the stand-in tests run placeholder command lines live by default
@pytest.mark.timeout(120)
def test_a_command_line_with_the_placeholders_runs_live(tmp_path: Path) -> None:
    cmd = (f"{sys.executable} -m harness.cli node dafka consumer --dialect {{dialect}} --set bind={{endpoint}} "
           "--set towers={tower_sub},{tower_pub} --set topics={topics}")
    code, out, junit = conform(tmp_path, "consumer", "--cmd", cmd, "--case", "get-heads", "--case", "store-hello",
                               "--case", "no-hello-without-topics", "--dialect", "dafka:zproto")
    assert code == 0 and junit.get("tests") == "3" and junit.get("failures") == "0", out


# ---- the coverage tables in docs/conformance-dafka.md ---------------------------------------------


def coverage_tables() -> str:
    return "\n".join(proof.clause_tables("dafka", CASES, UNCOVERED, CAT) + proof.mutant_table(M, ROLES))


def _replace_tables(text: str) -> str:
    return proof.replace_tables(text, "test_dafka_suites.py", "docs/conformance-dafka.md", coverage_tables())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(_replace_tables(DOC.read_text()))
    else:
        print(coverage_tables())
