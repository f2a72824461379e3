"""Case-format features added for the Event BUS suites, which every protocol can use: ``first``
and ``raw`` on an expect step, the ``gt`` matcher. What they catch is proven by the mutants of
tests/conformance/test_eventbus_suites.py (hello-first, reencodes-data, pub-sequence); here: how
they parse, and what a wrong use says."""

from __future__ import annotations

import pytest

from harness.conformance.case import CaseError, parse_case
from harness.registry import package

PEERS = package("eventbus").peer_roles()
HEAD = "protocol: eventbus\nrole: server\ncase: x\nclauses: [eventbus.server.broadcast]\nsteps:\n"


def case(steps: str):
    return parse_case(HEAD + steps, PEERS)


def test_first_raw_and_gt_parse() -> None:
    c = case("  - {as: collector.a, send: {type: PUB, topic: /t, sequence: 1, producer: p, "
             "timestamp: '2017-05-04T10:20:30Z', uuid: 0f8fad5b-d9cb-469f-a165-70867728950e, data: 1}}\n"
             "  - {as: publisher.a, expect: {type: BROADCAST, sequence: {gt: 0}}, capture: b, first: true, "
             "raw: {5: '01'}, field_clauses: {raw: eventbus.server.forward-unchanged}}\n"
             "  - {as: publisher.a, expect: {type: BROADCAST, sequence: {gt: {ref: b.sequence}}}}\n")
    step = c.steps[1]
    assert step.first and step.raw == {5: b"\x01"} and step.field_clauses == {"raw": "eventbus.server.forward-unchanged"}


@pytest.mark.parametrize("step,error", [
    ("{as: publisher.a, expect: {type: BROADCAST}, first: yes please}", "first is true or false"),
    ("{as: publisher.a, expect: {type: BROADCAST}, raw: {5: zz}}", "hex"),
    ("{as: publisher.a, expect: {type: BROADCAST}, raw: {-1: '00'}}", "frame index"),
    ("{as: publisher.a, expect: {type: BROADCAST, sequence: {gt: many}}}", "gt takes"),
    ("{as: publisher.a, expect: {type: BROADCAST, sequence: {gt: {ref: nothing.sequence}}}}", "captured"),
    ("{as: snapshot.a, send: {type: SYNCSTART, subtrees: [], sequence: 0}, first: true}", "unknown step field"),
])
def test_wrong_uses_name_the_line_and_the_problem(step: str, error: str) -> None:
    with pytest.raises(CaseError, match=error) as e:
        case(f"  - {step}\n")
    assert ":6:" in str(e.value)
