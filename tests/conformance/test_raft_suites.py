"""Proof that the Raft conformance suites (scenarios/raft/conformance/<role>/*.yaml) are complete
and can fail.

* Every case passes against the reference node of its role in simulation in both dialects, and
  over real sockets with the reference node started as a subprocess (`zmq-harness node raft
  ...`, its durable state in ``{data_dir}``): strict by default, ``raft:zmq-raft`` in the slow
  suite.
* Every wire- or timing-observable clause that binds a role has a case, or a reason here (and in
  docs/conformance-raft.md and the case files) why none does.
* Every MUST / MUST NOT clause the suites cover has a mutant (reference_nodes/raft/mutants.py)
  that breaks it; every mutant a suite can reach fails at least one case of its role, each
  failure attributed to the mutant's clause (or one ``ALSO_BREAKS`` lists); every case fails
  against some mutant.

`python tests/conformance/test_raft_suites.py --write` regenerates the coverage tables in
docs/conformance-raft.md from the case files.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.conformance.case import Case
from harness.conformance.runner import CaseResult, load_suite, run_case_sim, run_suite
from harness.protocols import catalogue
from harness.registry import package, suite
from reference_nodes.raft import mutants as M

if not __package__:  # run as a script (--write): `tests` lives at the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.conformance import suite_proof as proof  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = str(ROOT / "scenarios")
DOC = ROOT / "docs" / "conformance-raft.md"
ROLES = ("peer", "client")
DIALECTS = ("strict", "raft:zmq-raft")
CAT = catalogue("raft")

CASES: dict[str, list[Case]] = {role: load_suite("raft", role, SCENARIOS) for role in ROLES}

_TYPES = ("Every message a case sends and every message the implementation sends is encoded and decoded "
          "by the dialect's table, so a frame of the wrong type fails raft.wire.grammar (or this clause, "
          "when the codec names it) in whichever case it shows; no case is about it alone.")
_SOCKET = ("The socket type travels only in the ZMTP handshake, which neither the simulator nor the live "
           "transport hands to a case; what the socket gives (requests answered at {endpoint}, requests "
           "arriving at the scripted peers' ROUTERs) every case relies on.")
_CLUSTER = ("Judged by the chaos checks over a whole cluster (docs/raft.md): a property of several peers' "
            "logs and terms, not of one peer's answers to a script.")
UNCOVERED: dict[str, dict[str, str]] = {
    "peer": {
        "raft.wire.message-type": _TYPES,
        "raft.wire.uint": _TYPES,
        "raft.wire.bool": _TYPES,
        "raft.wire.string": _TYPES,
        "raft.wire.msgpack": _TYPES,
        "raft.wire.reqid": _TYPES,
        "raft.wire.entry": _TYPES,
        "raft.peer.router-socket": _SOCKET,
        "raft.peer.dealer-per-peer": _SOCKET,
        "raft.peer.unique-id": "The ids are the harness's ({id} and the scripted peers'); no case can make "
                               "an implementation choose one.",
        "raft.rpc.timeout-default": "A SHOULD on a preferred value (50 ms); the suite judges only the bound "
                                    "(the retry within 500 ms in election-timeout).",
        "raft.rpc.longer-timeout": "A permission (MAY), and every choice within the bound conforms.",
        "raft.snapshot.resume-offset": "It binds a leader sending a snapshot (E-RAFT-20), and when a peer "
                                       "compacts its log is its own choice, not on the wire: no case can make "
                                       "the peer under test hold a snapshot to send. The chaos check "
                                       "snapshot-resume judges it (scenarios/raft/chaos/snapshot-restart.yaml).",
        "raft.append.conflict-hint": "A permission (MAY), and E-RAFT-20 decides that the harness does not "
                                     "judge the hints' values.",
        "raft.update.accepted-repeat": "A permission (MAY): update-once and read-log accept it before the "
                                       "answer with the index.",
        "raft.safety.election-safety": _CLUSTER,
        "raft.safety.leader-completeness": _CLUSTER,
        "raft.safety.state-machine-safety": _CLUSTER,
        "raft.safety.leader-append-only": _CLUSTER,
        "raft.algorithm.availability": _CLUSTER,
    },
}


_CLIENT_TYPES = ("Every message the client sends is decoded by the dialect's table, so a frame of the wrong "
                 "type fails in whichever case it shows; no case is about it alone.")
UNCOVERED["client"] = {
    **{c: _CLIENT_TYPES for c in ("raft.wire.message-type", "raft.wire.uint", "raft.wire.bool", "raft.wire.string",
                                  "raft.wire.msgpack", "raft.wire.reqid", "raft.wire.entry")},
    "raft.wire.reqid-layout": "The time, machine and process parts of a reqid are the client's to choose; a "
                              "case can check only that reqids differ (raft.reqid.unique).",
    "raft.client.dealer-socket": "The socket type travels only in the ZMTP handshake, which no case sees.",
    "raft.client.periodic-config": "A permission (MAY).",
    "raft.client.response-ttl": "Judged through retry-same-reqid (the repeat after SERVER_RESPONSE_TTL, "
                                "raft.client.broken-leader-search); no case times the TTL itself.",
    "raft.client.reconnect-leader": "Its observable half, the next request going to the new leader, is "
                                    "raft.client.broken-leader (redirect, find-leader); the disconnect from the "
                                    "other peers is a TCP close in ZMTP, which neither the simulator nor the live "
                                    "transport hands to a case.",
    "raft.update.reset-timeout": "The client's RPC timeout is its own (the document gives it no value), so no "
                                 "interval of \"accepted\" answers is sure to be shorter than it; and a client "
                                 "that repeats its update (same reqid) after one conforms for a timeout shorter "
                                 "than the interval. Not judgeable without knowing the timeout.",
    "raft.entries.stop": "A permission (MAY).",
    "raft.broadcast.subscribe": "A permission (MAY).",
}


def ref_factory(role: str) -> Any:
    return package("raft").roles[role].factory


def failures(results: list[CaseResult]) -> list[tuple[str, str, str]]:
    return [(r.case.id, r.verdict, r.clause) for r in results if r.verdict not in ("pass", "skipped")]


def case_id(c: Case) -> str:
    return f"{c.role}/{c.id}"


# ---- the reference passes ----------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_every_case_in_simulation(role: str, dialect: str) -> None:
    results = [run_case_sim(c, ref_factory(role), dialect=dialect) for c in CASES[role]]
    assert not failures(results), [(r.case.id, r.clause, r.reason, r.exchange[-6:]) for r in results
                                   if r.verdict != "pass"]


def test_a_peer_that_compacts_its_log_at_once_passes_and_is_not_judged_on_entries_it_no_longer_has() -> None:
    """When a peer compacts its log is its own choice: one that snapshots after every two applied
    entries answers a RequestEntries from index 0 with snapshot chunks. update-in-entry and
    entries-stop failed it on raft.update.reqid-in-entry and raft.entries.committed-only; they now
    say they cannot judge it (skip_on a snapshot answer)."""
    import dataclasses

    peer = ref_factory("peer")
    compacting = functools.partial(lambda ctx: peer(dataclasses.replace(ctx, config={**ctx.config,
                                                                                       "snapshot_every": 2})))
    results = {c.id: run_case_sim(c, compacting) for c in CASES["peer"]}
    assert not failures(list(results.values())), failures(list(results.values()))
    skipped = {k for k, r in results.items() if r.verdict == "skipped"}
    assert skipped == {"update-in-entry", "entries-stop"}
    assert all("compacted its log" in results[k].reason for k in skipped)


# Cases over real sockets by default: a vote, a restart with {data_dir} kept, an election with
# the message id check, a client finding the leader (about 10 s); every case live in the slow
# suite (about 40 s a dialect for the peer; the client's retry-same-reqid waits out the
# reference client's 10 s operation timeout).
LIVE_SUBSET = {"peer": ("vote-once", "restart-keeps-vote", "response-id"), "client": ("find-leader",)}


def _live(role: str, dialect: str, only: tuple[str, ...] | None = None) -> None:
    cases = [c for c in CASES[role] if only is None or c.id in only]
    results = run_suite(cases, cmd=suite("raft", role).reference_cmd, dialect=dialect)
    assert not failures(results), [(r.case.id, r.clause, r.reason, r.iut_output) for r in results
                                   if r.verdict != "pass"]


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_live(role: str) -> None:
    _live(role, "strict", LIVE_SUBSET[role])


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(300)
@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_every_case_live(role: str) -> None:
    _live(role, "strict")


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(300)
@pytest.mark.parametrize("role", ROLES)
def test_reference_passes_every_case_live_in_zmq_raft_dialect(role: str) -> None:
    _live(role, "raft:zmq-raft")


# ---- coverage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_every_observable_clause_of_the_role_has_a_case_or_a_reason(role: str) -> None:
    proof.check_coverage("raft", role, CASES[role], UNCOVERED[role], DOC)


@pytest.mark.parametrize("role", ROLES)
def test_every_case_names_clauses_that_bind_its_role(role: str) -> None:
    proof.check_clauses_bind_role(role, CASES[role], CAT)


def test_the_coverage_tables_in_the_docs_are_current() -> None:
    text = DOC.read_text()
    assert _replace_tables(text) == text, "run: python tests/conformance/test_raft_suites.py --write"


# ---- mutants -------------------------------------------------------------------------------------


def test_every_mandatory_clause_the_suites_cover_has_a_mutant_that_breaks_it() -> None:
    proof.check_mandatory_clauses_have_mutants(CASES, CAT, M)


def test_every_reachable_mutant_clause_is_named_by_a_case_of_its_role() -> None:
    """The clause of every mutant a suite can reach, or one its ``ALSO_BREAKS`` names (a clause
    only the node itself sees, such as persistence, shows through another), is named by a case
    of its role."""
    assert set(M.OUT_OF_REACH) <= set(M.MUTANTS) and set(M.ALSO_BREAKS) <= set(M.MUTANTS)
    for name, (role, _, clause) in M.MUTANTS.items():
        if name in M.OUT_OF_REACH:
            continue
        named = {cl for c in CASES[role] for cl in c.clauses} | {s.clause for c in CASES[role] for s in c.steps}
        seen = ({clause} if proof.observable(CAT, clause) else set()) | set(M.ALSO_BREAKS.get(name, {}))
        assert seen & named, (name, clause)
        for extra in M.ALSO_BREAKS.get(name, {}):
            assert extra in CAT, (name, extra)


@functools.lru_cache(maxsize=None)
def mutant_results(name: str) -> tuple[CaseResult, ...]:
    """Every case of the mutant's role, run in simulation against it (once per test session)."""
    role, factory, _ = M.MUTANTS[name]
    return tuple(run_case_sim(c, factory) for c in CASES.get(role, []))


@pytest.mark.parametrize("name", sorted(M.MUTANTS))
def test_mutant_fails_its_suite_on_its_clause_in_simulation(name: str) -> None:
    proof.check_mutant_fails_on_its_clause(M, name, "strict", list(mutant_results(name)), DIALECTS)


def test_every_case_fails_against_some_mutant() -> None:
    failing = {f"{M.MUTANTS[n][0]}/{r.case.id}" for n in M.MUTANTS for r in mutant_results(n) if r.verdict == "fail"}
    every = {f"{role}/{c.id}" for role in ROLES for c in CASES[role]}
    assert every - failing == set(), "cases no mutant fails"


LIVE_MUTANTS = ("forget-vote", "vote-twice", "no-debounce", "dies-on-malformed", "ignores-redirect", "stale-last-applied",
                "no-broadcast-heartbeat", "url-before-leader", "commit-old-term")


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", LIVE_MUTANTS)
def test_mutant_fails_live_as_in_simulation(name: str) -> None:
    """The mutant as a real subprocess (`zmq-harness node raft ROLE --mutant NAME`, its state in
    {data_dir}): the cases it fails in simulation fail live on the same clause."""
    role, factory, _ = M.MUTANTS[name]
    sim = {c.id: run_case_sim(c, factory) for c in CASES[role]}
    chosen = [c for c in CASES[role] if sim[c.id].verdict != "pass"][:2]
    live = run_suite(chosen, cmd=suite("raft", role).reference_cmd + f" --mutant {name}")
    assert [(r.case.id, r.verdict, r.clause) for r in live] == \
        [(c.id, sim[c.id].verdict, sim[c.id].clause) for c in chosen], [(r.case.id, r.reason[:200]) for r in live]


# ---- docs/conformance-raft.md --------------------------------------------------------------------


def coverage_tables() -> str:
    out = proof.clause_tables("raft", CASES, UNCOVERED, CAT)
    out += proof.observed_mutant_table(
        M, CASES, CAT, lambda c, f: run_case_sim(c, f),
        intro="Each mutant's role suite in the simulator (strict): the cases that fail, and the clause each "
              "failure is attributed to.",
        unreached="none: out of reach of the suite (the chaos checks catch it)")
    return "\n".join(out)


def _replace_tables(text: str) -> str:
    return proof.replace_tables(text, "test_raft_suites.py", "docs/conformance-raft.md", coverage_tables())


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(_replace_tables(DOC.read_text()))
    else:
        print(coverage_tables())


def test_an_optional_expect_skips_a_client_that_never_sends_it_and_fails_a_wrong_one() -> None:
    """entries-follow-up waits for a RequestEntries with ``optional:``: a client that never reads
    the log skips the case (not applicable); one that reads but follows up wrongly fails it."""
    from reference_nodes.raft.client import Client

    class NeverReads(Client):
        def read_to(self, target: int, now: int) -> list[Any]:
            return []

    case = next(c for c in CASES["client"] if c.id == "entries-follow-up")
    skipped = run_case_sim(case, NeverReads)
    assert skipped.verdict == "skipped" and "not applicable: a client need not read the log" in skipped.reason
    failed = run_case_sim(case, M.MUTANTS["new-reqid-follow-up"][1])
    assert (failed.verdict, failed.clause) == ("fail", "raft.entries.follow-up")


def test_entries_pipeline_bounds_the_answers_and_passes_a_peer_that_does_not_pipeline() -> None:
    """"Up to REQUEST_ENTRIES_PIPELINES" is a bound (E-RAFT-19): a peer that answers one at a time
    conforms; one that answers without waiting for follow-ups fails on the sixth answer."""
    from reference_nodes.raft.peer import Peer

    class OneAtATime(Peer):
        def init_request_handling(self) -> None:
            super().init_request_handling()
            self.pipeline = 1

    case = next(c for c in CASES["peer"] if c.id == "entries-pipeline")
    for dialect in DIALECTS:
        assert run_case_sim(case, OneAtATime, dialect=dialect).verdict == "pass"
        failed = run_case_sim(case, M.MUTANTS["unbounded-pipeline"][1], dialect=dialect)
        assert (failed.verdict, failed.clause) == ("fail", "raft.entries.pipeline")
        assert "more than 5 matching messages" in failed.reason


@pytest.mark.parametrize("role", ["peer", "client"])
def test_a_case_in_simulation_sends_the_same_bytes_every_run(role: str) -> None:
    """Request ids carry a time: in simulation a fixed epoch, not the wall clock (the bytes of a
    simulated case were once different on every run)."""
    case = next(c for c in CASES[role] if any(s.message == "RequestUpdate" for s in c.steps)) \
        if role == "peer" else CASES[role][0]
    first = run_case_sim(case, ref_factory(role))
    time.sleep(1.1)  # a wall-clock second later
    again = run_case_sim(case, ref_factory(role))
    assert first.verdict == "pass" and first.exchange == again.exchange
