"""Proof that the DCP conformance suites (scenarios/dcp/conformance/<role>/*.yaml) are complete
and can fail.

* Every case passes against the reference node of its role: in simulation in both dialects,
  and over real sockets with the reference node started as a subprocess (`zmq-harness node`).
* Every wire- or timing-observable clause that binds a role has a case, or a reason here (and
  in docs/conformance.md) why no harness playing the other roles can exercise it.
* Every MUST / MUST NOT clause the suites cover has a mutant (reference_nodes/dcp/mutants.py)
  that breaks it. Every mutant fails at least one case of its role's suite, and every failure
  is attributed to the mutant's clause (or one that ``ALSO_BREAKS`` lists with its reason) — in
  simulation for all mutants, live for a representative subset.
* Conformant variants that the document allows but the reference does not do (a worker that
  never gives up on a silent broker, a client that names its own address) pass.
* The exit status of `zmq-harness conform` follows the levels, and the JUnit XML is written.

`python tests/conformance/test_dcp_suites.py --write` regenerates the coverage tables in
docs/conformance.md from the case files.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.conformance.case import Case
from harness.conformance.report import exit_status
from harness.conformance.runner import CaseResult, load_suite, run_case_sim, run_suite
from harness.registry import package, suite
from harness.protocols import catalogue
from harness.protocols.clauses import Level
from reference_nodes.dcp import mutants as M
from reference_nodes.dcp.client import Client
from reference_nodes.dcp.worker import Worker

if not __package__:  # run as a script (--write): `tests` lives at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.conformance import suite_proof as proof  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = str(ROOT / "scenarios")
DOC = ROOT / "docs" / "conformance.md"
ROLES = ("broker", "worker", "client")
DIALECTS = ("strict", "dcp:dagbox")
CAT = catalogue("dcp")
MANDATORY = (Level.MUST, Level.MUST_NOT)

CASES: dict[str, list[Case]] = {role: load_suite("dcp", role, SCENARIOS) for role in ROLES}

# Clauses that bind a role and show on the wire or in timing, but that no case exercises, and
# why. docs/conformance.md repeats them (generated from here) and the case files say so too.
_ZMTP = ("Every case runs over ØMQ, so an implementation that does not speak ZMTP fails the first "
         "expect of every case; no case can tell that apart from the behaviour its step probes, so "
         "none names this clause.")
_SOCKET_TYPE = ("The socket type travels only in the ZMTP handshake (the Socket-Type property), which "
                "neither the simulator nor the live transport exposes to a case. ")
UNCOVERED: dict[str, dict[str, str]] = {
    "broker": {
        "dcp.connection.zeromq": _ZMTP,
        "dcp.broker.router-socket": _SOCKET_TYPE + "What a ROUTER gives on the wire, every message "
                                    "reaching the peer it is addressed to, is judged as "
                                    "dcp.broker.recipient-address.",
        "dcp.broker.multiple-sockets": "A permission (MAY) the harness cannot observe: it reaches the broker "
                                       "at the one endpoint it is given ({endpoint}); other sockets are "
                                       "invisible to it, and a broker with one socket conforms.",
        "dcp.broker.any-transport": "A permission (MAY) the harness cannot observe through one endpoint: it "
                                    "reaches the broker over tcp (a virtual transport in --sim), and a "
                                    "broker that offers only tcp conforms.",
    },
    "worker": {
        "dcp.connection.zeromq": _ZMTP,
        "dcp.connection.dealer-socket": _SOCKET_TYPE + "A worker on another socket type shows only through "
                                        "the consequences (a REQ socket cannot send its pings: "
                                        "dcp.heartbeat.worker-interval).",
    },
    "client": {
        "dcp.architecture.clients-workers-any-number": "A statement about the deployment (MAY): the harness "
                                                       "plays the one broker a client talks to, so a single "
                                                       "client under test can do nothing with or against other "
                                                       "clients; the broker and worker suites exercise it.",
        "dcp.connection.zeromq": _ZMTP,
        "dcp.client.may-register": "A client that registers becomes a worker, which the worker suite tests; "
                                   "the client suite tests a pure client.",
        "dcp.connection.dealer-socket": _SOCKET_TYPE + "A client on another socket type shows only through the "
                                        "consequences (a REQ socket cannot have two requests outstanding: "
                                        "dcp.client.pipelining).",
    },
}


def ref_factory(role: str) -> Any:
    return package("dcp").roles[role].factory


def acceptable(name: str) -> set[str]:
    return proof.acceptable(M, name)  # a crash (M.CRASHES) is reported as such, whichever step was waiting


def observable(clause: str) -> bool:
    return proof.observable(CAT, clause)


def failures(results: list[CaseResult]) -> list[tuple[str, str, str]]:
    return [(r.case.id, r.verdict, r.clause) for r in results if r.verdict != "pass"]


def case_id(c: Case) -> str:
    return f"{c.role}/{c.id}"


# ---- the reference passes ----------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", [c for r in ROLES for c in CASES[r]], ids=case_id)
def test_reference_passes_every_case_in_simulation(case: Case, dialect: str) -> None:
    r = run_case_sim(case, ref_factory(case.role), dialect=dialect)
    assert r.verdict == "pass", (r.clause, r.reason, r.exchange[-6:])


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("role,dialect,share", [
    # by default every second case of each role live, for the suite's time budget (every case runs
    # in simulation by default); every case of both dialects in the slow suite
    *(("broker", "worker", "client")[i:i + 1] + ("strict", 2) for i in range(3)),
    *(pytest.param(r, d, 1, marks=pytest.mark.slow) for d in ("strict", "dcp:dagbox")
      for r in ("broker", "worker", "client"))])
def test_reference_passes_every_case_live(role: str, dialect: str, share: int) -> None:
    results = run_suite(CASES[role][::share], cmd=suite("dcp", role).reference_cmd, dialect=dialect)
    assert not failures(results), [(r.case.id, r.clause, r.reason, r.iut_output) for r in results
                                   if r.verdict != "pass"]


# ---- coverage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_every_observable_clause_of_the_role_has_a_case_or_a_reason(role: str) -> None:
    proof.check_coverage("dcp", role, CASES[role], UNCOVERED[role], DOC)


def test_the_coverage_tables_in_the_docs_are_current() -> None:
    text = DOC.read_text()
    assert _replace_tables(text) == text, "run: python tests/conformance/test_dcp_suites.py --write"


@pytest.mark.parametrize("role", ROLES)
def test_every_case_names_clauses_that_bind_its_role(role: str) -> None:
    proof.check_clauses_bind_role(role, CASES[role], CAT)


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
        assert clause in named or not observable(clause), (name, clause)
        for extra in M.ALSO_BREAKS.get(name, {}):
            assert extra in CAT, (name, extra)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(M.MUTANTS))
def test_mutant_fails_its_suite_on_its_clause_in_simulation(name: str, dialect: str) -> None:
    role, factory, clause = M.MUTANTS[name]
    results = [run_case_sim(c, factory, dialect=dialect) for c in CASES[role]]
    failed = failures(results)
    if not observable(clause):
        # Out of reach of any conformance suite: it shows only to the application (the chaos
        # checkers catch it, tests/checkers). The suite must not blame it for anything else.
        assert not failed, failed
        return
    assert failed, f"{name} passes every {role} case: the suite has a hole for {clause}"
    wrong = [f for f in failed if f[1] != "fail" or f[2] not in acceptable(name)]
    assert not wrong, f"{name} breaks {clause}, but cases failed on: {wrong}"


# A representative subset, live: each role, MUST and SHOULD clauses, timing, crashes, routing; the
# default suite runs four of them (a broker's, a worker's, timing, a crash), the slow suite all
# (the suite's time budget).
LIVE_MUTANTS = ("busy-worker", "misroutes-reply", "crash-on-malformed", "slow-ping",
                *(pytest.param(m, marks=pytest.mark.slow)
                  for m in ("never-expire", "any-service", "no-reregister", "wrong-reply-address", "pings", "no-retry",
                            "foreign-client-address")))


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", LIVE_MUTANTS)
def test_mutant_fails_live_as_in_simulation(name: str) -> None:
    """The mutant as a real subprocess (`zmq-harness node dcp ROLE --mutant NAME`): the cases it
    fails in simulation fail live on the same clause, and one case it passes in simulation
    passes live too."""
    role, factory, _ = M.MUTANTS[name]
    sim = {c.id: run_case_sim(c, factory) for c in CASES[role]}
    chosen = [c for c in CASES[role] if sim[c.id].verdict != "pass"][:3]
    chosen += [c for c in CASES[role] if sim[c.id].verdict == "pass"][:1]
    live = run_suite(chosen, cmd=suite("dcp", role).reference_cmd + f" --mutant {name}")
    evidence = [(r.case.id, r.verdict, r.clause, r.reason[:200]) for r in live]
    for r, c in zip(live, chosen):
        s = sim[c.id]
        if s.verdict != "pass":  # what fails in simulation fails live, on the same clause
            assert (r.verdict, r.clause) == (s.verdict, s.clause), evidence
        else:  # a timing mutant may also trip a passing case live, but only on its own clause
            assert r.verdict == "pass" or r.clause in acceptable(name), evidence
    assert all(r.clause in acceptable(name) for r in live if r.verdict != "pass"), evidence


# ---- the suite does not ask for more than the document -------------------------------------------


class PatientWorker(Worker):
    """Conformant: never gives up on a silent broker (no clause asks for that, E-DCP-09); it
    registers again only when told to by a RECONNECT."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.lost_ns = 10**18


class OwnAddressClient(Client):
    """Conformant: puts its own routing identity in the optional client-address part."""

    def command(self, request: dict[str, Any], now: int) -> list[Any]:
        out = super().command(request, now)
        for a in out:
            p = next((q for q in self.pending.values() if q.frames == getattr(a, "frames", None)), None)
            if p is not None:
                msg = self.codec.decode(p.frames)
                p.frames = self.enc["REQUEST"]({"service": msg["service"], "client_address": self.identity,
                                                "metadata": msg["metadata"], "data": msg["data"]})
                a.frames[:] = p.frames
        return out


@pytest.mark.parametrize("role,factory", [("worker", PatientWorker), ("client", OwnAddressClient)])
def test_conformant_variants_pass(role: str, factory: Any) -> None:
    results = [run_case_sim(c, factory) for c in CASES[role]]
    assert not failures(results), [(r.case.id, r.clause, r.reason) for r in results if r.verdict != "pass"]
    if factory is OwnAddressClient:  # it did send its address
        r = run_case_sim(next(c for c in CASES["client"] if c.id == "request-format"), factory)
        sent = next(e for e in r.exchange if e["dir"] == "in")
        assert sent["message"] == "REQUEST" and sent["fields"]["client_address"] == "iut", sent


# ---- exit status and JUnit -----------------------------------------------------------------------


def conform(tmp_path: Path, *args: str) -> tuple[int, str, ET.Element]:
    return proof.conform(tmp_path, "dcp", *args)


@pytest.mark.live
@pytest.mark.slow  # the suite's time budget: exit statuses are proven in simulation and by the MUST/SHOULD live test
@pytest.mark.timeout(120)
def test_exit_status_of_the_reference_broker_live(tmp_path: Path) -> None:
    code, out, junit = conform(tmp_path, "broker", "--reference")
    assert code == 0, out
    assert junit.get("tests") == str(len(CASES["broker"])) and junit.get("failures") == "0", out
    assert "coverage: 20/24" in out


@pytest.mark.live
@pytest.mark.slow  # the suite's time budget: the same exit statuses are proven in simulation
@pytest.mark.timeout(120)
def test_exit_status_must_and_should_failures_live(tmp_path: Path) -> None:
    # a MUST broken: non-zero, and the JUnit failure names the clause
    code, out, junit = conform(tmp_path, "broker", "--reference", "--mutant", "no-pong",
                               "--case", "ping-pong", "--case", "register-echo")
    assert code == 1, out
    cases = {tc.get("name"): tc for tc in junit.iter("testcase")}
    fail = cases["ping-pong"].find("failure")
    assert fail is not None and fail.get("type") == "dcp.heartbeat.pong" and "MUST" in fail.get("message", "")
    assert cases["register-echo"].find("failure") is None
    assert junit.get("failures") == "1"
    # a SHOULD NOT broken (and nothing else): zero by default, non-zero with --fail-on should
    args = ("broker", "--reference", "--mutant", "busy-worker", "--case", "one-request-per-worker", "--case",
            "ping-pong")
    code, out, junit = conform(tmp_path, *args)
    assert code == 0, out
    assert "[dcp.broker.one-request-per-worker SHOULD NOT]" in out
    assert junit.get("failures") == "1"
    code, out, _ = conform(tmp_path, *args, "--fail-on", "should")
    assert code == 1, out


def test_exit_status_in_simulation(tmp_path: Path) -> None:
    for role, mutant, must in (("worker", "slow-ping", True), ("client", "no-retry", False),
                               ("broker", "never-expire", False), ("client", "duplicate-delivery", None)):
        code, out, junit = conform(tmp_path, role, "--sim", "--mutant", mutant)
        assert code == (1 if must else 0), (mutant, out)
        if must is not None:
            assert int(junit.get("failures") or 0) >= 1
            code, out, _ = conform(tmp_path, role, "--sim", "--mutant", mutant, "--fail-on", "should")
            assert code == 1, (mutant, out)
    code, out, junit = conform(tmp_path, "client", "--sim", "--dialect", "dcp:dagbox")
    assert code == 0 and junit.get("failures") == "0", out


def test_exit_status_rule_matches_the_levels() -> None:
    def res(level_clause: str) -> CaseResult:
        return CaseResult(CASES["broker"][0], "fail", "x", level_clause)

    assert exit_status([res("dcp.heartbeat.pong")]) == 1
    assert exit_status([res("dcp.broker.one-request-per-worker")]) == 0
    assert exit_status([res("dcp.broker.one-request-per-worker")], "should") == 1
    assert exit_status([res("dcp.request.clients-and-workers")], "should") == 0  # a MAY never fails a run


# ---- docs/conformance.md -----------------------------------------------------------------------


def test_the_example_cases_in_the_docs_load_and_pass_against_the_reference() -> None:
    from harness.conformance.case import parse_case

    blocks = re.findall(r"```yaml-case\n(.*?)```", DOC.read_text(), re.S)
    assert blocks
    for i, text in enumerate(blocks):
        case = parse_case(text, package("dcp").peer_roles(), f"docs/conformance.md#{i}")
        r = run_case_sim(case, ref_factory(case.role))
        assert r.verdict == "pass", (r.clause, r.reason)
        r = run_case_sim(case, M.MUTANTS["busy-worker"][1])
        assert (r.verdict, r.clause) == ("fail", "dcp.broker.one-request-per-worker"), r.reason


def test_a_case_naming_an_unknown_peer_for_identity_of_is_rejected() -> None:
    from harness.conformance.case import CaseError, parse_case

    text = ("protocol: dcp\nrole: broker\ncase: x\nclauses: [dcp.heartbeat.pong]\nsteps:\n"
            "  - {as: worker.a, expect: {type: REQUEST, client_address: {identity_of: client.zz}}}\n")
    with pytest.raises(CaseError, match="identity_of names 'client.zz'"):
        parse_case(text, package("dcp").peer_roles())


# ---- the coverage tables in docs/conformance.md ------------------------------------------------


def coverage_tables() -> str:
    out = proof.clause_tables("dcp", CASES, UNCOVERED, CAT)
    out += proof.observed_mutant_table(
        M, CASES, CAT, run_case_sim,
        intro="Each mutant's role suite in the simulator (strict): the cases that fai"
              "l, and the clause each failure is attributed to.",
        unreached="none: the clause shows only inside the node (the chaos checkers catch it)")
    return "\n".join(out)


def _replace_tables(text: str) -> str:
    return proof.replace_tables(text, "test_dcp_suites.py", "docs/conformance.md", coverage_tables())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(_replace_tables(DOC.read_text()))
    else:
        print(coverage_tables())
