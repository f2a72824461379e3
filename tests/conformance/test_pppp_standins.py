"""The PPPP suites against an independent subscriber (tests/standins/pppp_subscriber.py), written
only from pppp.txt, the E-PPPP errata and docs/conformance-pppp.md, importing neither the
reference nodes nor the harness's codecs. It makes choices the reference does not (an ACK/NACK
as soon as its socket is drained, delivery in arrival order, early heartbeats, a slow start),
so a case that judged the reference's choices instead of the document's rules fails here: a
false alarm of the harness.

Before this stand-in no program other than the reference nodes (and their mutants and
variants, which share their code) had been through the PPPP suites over real sockets.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.conformance.runner import load_suite, run_suite

SUBSCRIBER = Path(__file__).resolve().parents[1] / "standins" / "pppp_subscriber.py"
SUBSCRIBER_CMD = (f"{{python}} {SUBSCRIBER} --connect {{endpoint}} --channels {{channels}} --idle-ms {{idle_ms}} "
                  "--first-idle-ms {first_idle_ms} --dead-multiple {dead_multiple}")
# By default the cases where its choices differ most from the reference's (about 6 s); all in slow.
SUBSCRIBER_DEFAULT = ["ack-within-first-idle", "nack-gaps", "exactly-once", "heartbeat-first-idle"]


def evidence(results: list) -> list[tuple[str, str, str, str]]:
    return [(r.case.id, r.verdict, r.clause, r.reason[:300]) for r in results if r.verdict != "pass"]


def run(role: str, cmd: str, only: list[str] | None) -> list:
    results = run_suite(load_suite("pppp", role, only=only), cmd=cmd, dialect="strict")
    assert results, "no case ran"
    return results


@pytest.mark.live
@pytest.mark.timeout(120)
def test_an_independent_subscriber_passes_the_cases_where_it_differs_most() -> None:
    results = run("subscriber", SUBSCRIBER_CMD, SUBSCRIBER_DEFAULT)
    assert sorted(r.case.id for r in results) == sorted(SUBSCRIBER_DEFAULT)
    assert not evidence(results), evidence(results)


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(300)
def test_an_independent_subscriber_passes_every_subscriber_case() -> None:
    results = run("subscriber", SUBSCRIBER_CMD, None)
    assert len(results) == len(load_suite("pppp", "subscriber")), "every case ran"
    assert not evidence(results), evidence(results)


def test_the_standins_import_nothing_of_the_harness() -> None:
    for path in (SUBSCRIBER,):
        text = path.read_text()
        assert "harness" not in "".join(l for l in text.splitlines() if l.startswith(("import", "from"))), path
        assert "reference_nodes" not in text, path
    assert sys.executable  # {python} is this interpreter
