"""Case-format features added for the Event BUS suites, which every protocol can use: ``first``
and ``raw`` on an expect step, the ``gt`` matcher (and, for the Raft suite, ``at_most`` on an
expect_nothing step). What they catch is proven by the mutants of
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


def test_at_most_bounds_an_expect_nothing() -> None:
    # what it catches: the entries-pipeline case of the Raft suite against unbounded-pipeline
    c = case("  - {as: publisher.a, expect_nothing: {type: BROADCAST}, at_most: 5, for: 1s}\n"
             "  - {as: publisher.a, expect_nothing: {type: BROADCAST}, for: 1s}\n")
    assert [s.at_most for s in c.steps] == [5, 0]


def test_latest_takes_the_newest_matching_message_and_needs_parses() -> None:
    """``latest: true`` takes the newest of the matching messages waiting (the Raft client case
    broadcast-url-after-leader answers the RequestConfig the client repeated last; its reference
    client ignores an answer to an older one); ``needs:`` lists placeholders of an optional
    feature (the Raft peer's broadcast cases, skipped for a command line without them)."""
    from harness.conformance.conductor import Conductor
    from harness.protocols import codec

    c = parse_case(HEAD.replace("steps:", "needs: [topic_url]\nsteps:") +
                   "  - {as: publisher.a, expect: {type: BROADCAST, sequence: {gt: 0}}, latest: true, capture: b}\n",
                   PEERS)
    assert c.needs == ["topic_url"] and c.steps[0].latest
    k = codec("eventbus")
    msgs = [k.decode(k.encode("BROADCAST", {"topic": "/t", "sequence": n, "producer": "p", "uuid":
                                            "0f8fad5b-d9cb-469f-a165-70867728950e", "data": b"1"}), as_="BROADCAST") for n in (1, 2, 3)]
    conductor = Conductor.__new__(Conductor)
    conductor.buffers, conductor.values, conductor.captured = {"publisher.a": [(0, m, []) for m in msgs]}, {}, {}
    assert conductor._take(c.steps[0]).fields["sequence"] == 3 and conductor.buffers["publisher.a"] == []
    with pytest.raises(CaseError, match="placeholder names"):
        parse_case(HEAD.replace("steps:", "needs: ['{topic_url}']\nsteps:") +
                   "  - {as: publisher.a, expect: {type: BROADCAST}}\n", PEERS)


@pytest.mark.parametrize("step,error", [
    ("{as: publisher.a, expect: {type: BROADCAST}, first: yes please}", "first is true or false"),
    ("{as: publisher.a, expect: {type: BROADCAST}, raw: {5: zz}}", "hex"),
    ("{as: publisher.a, expect: {type: BROADCAST}, raw: {-1: '00'}}", "frame index"),
    ("{as: publisher.a, expect: {type: BROADCAST, sequence: {gt: many}}}", "gt takes"),
    ("{as: publisher.a, expect: {type: BROADCAST, sequence: {gt: {ref: nothing.sequence}}}}", "captured"),
    ("{as: snapshot.a, send: {type: SYNCSTART, subtrees: [], sequence: 0}, first: true}", "unknown step field"),
    ("{as: publisher.a, expect: {type: BROADCAST}, optional: ''}", "optional says why"),
    ("{as: snapshot.a, send: {type: SYNCSTART, subtrees: [], sequence: 0}, optional: why}", "unknown step field"),
    ("{as: publisher.a, expect_nothing: {type: BROADCAST}, at_most: 0, for: 1s}", "at_most is how many"),
    ("{as: publisher.a, expect_nothing: {type: BROADCAST}, at_most: five, for: 1s}", "at_most is how many"),
    ("{as: publisher.a, expect: {type: BROADCAST}, at_most: 2}", "unknown step field"),
    ("{as: publisher.a, expect: {type: BROADCAST}, latest: 1}", "latest is true or false"),
    ("{as: publisher.a, expect: {type: BROADCAST}, latest: true, first: true}", "not with first"),
    ("{as: publisher.a, expect_nothing: {type: BROADCAST}, latest: true, for: 1s}", "unknown step field"),
])
def test_wrong_uses_name_the_line_and_the_problem(step: str, error: str) -> None:
    with pytest.raises(CaseError, match=error) as e:
        case(f"  - {step}\n")
    assert ":6:" in str(e.value)


def _reference_commands() -> list[tuple[str, str, str]]:
    from harness.registry import suite, suites

    return [(p, role, suite(p, role).reference_cmd) for p, role in suites()]


@pytest.mark.parametrize("protocol,role,cmd", _reference_commands(), ids=lambda x: x if len(x) < 20 else "cmd")
def test_every_reference_command_passes_the_command_line_check(protocol: str, role: str, cmd: str) -> None:
    """conform refuses a --cmd naming a placeholder it does not fill; the suite's own reference
    command (what docs and tests run) must never be refused ({tmpdir} once was)."""
    from harness.conformance.runner import check_command
    from harness.registry import suite

    check_command(suite(protocol, role), cmd)


def test_the_command_line_check_refuses_an_unknown_placeholder() -> None:
    from harness.conformance.runner import check_command
    from harness.live.supervisor import PlaceholderError
    from harness.registry import suite

    with pytest.raises(PlaceholderError):
        check_command(suite("dcp", "broker"), "mybroker --bind {endpiont}")


@pytest.mark.live
def test_zmq_harness_is_a_placeholder_of_conformance_command_lines_as_of_chaos_ones() -> None:
    """`{zmq_harness}` (this installation's command) was known to chaos scenarios only: a
    conformance command line naming it was refused as an unknown placeholder."""
    from harness.conformance.runner import check_command, load_suite, run_case_live
    from harness.registry import suite

    cmd = "{zmq_harness} node dcp broker --bind {endpoint} --identity iut --set heartbeat={heartbeat_ms}ms"
    check_command(suite("dcp", "broker"), cmd)
    result = run_case_live(load_suite("dcp", "broker", only=["ping-pong"])[0], cmd=cmd)
    assert result.verdict == "pass", (result.reason, result.iut_output)


def test_skip_on_needs_a_reason_and_fields_of_the_message() -> None:
    head = ("protocol: raft\nrole: peer\ncase: x\nclauses: [raft.wire.grammar]\nsteps:\n"
            "  - {as: client.x, send: {type: RequestEntries, reqid: {hex: '000000000000000000000001'}, prev_log_index: 0}}\n")
    step = "  - {as: client.x, expect: {type: RequestEntriesResponse}, %s}\n"
    roles = package("raft").peer_roles()
    ok = parse_case(head + step % "skip_on: {status: 3}, optional: 'a snapshot instead'", roles)
    assert ok.steps[-1].skip_on == {"status": 3}
    with pytest.raises(CaseError, match="skip_on needs optional"):
        parse_case(head + step % "skip_on: {status: 3}", roles)
    with pytest.raises(CaseError, match="has no field 'colour'"):
        parse_case(head + step % "skip_on: {colour: 3}, optional: 'x'", roles)


def test_maybe_expects_and_sends_that_answer_them() -> None:
    roles = package("raft").peer_roles()
    head = ("protocol: raft\nrole: client\ncase: x\nclauses: [raft.wire.grammar]\nsteps:\n"
            "  - {as: peer.a, expect: {type: RequestUpdate}, capture: first}\n")
    ok = parse_case(head + "  - {as: peer.a, expect: {type: RequestEntries}, capture: read, maybe: true}\n"
                    "  - {as: peer.a, send: {type: RequestEntriesResponse, reqid: {ref: read.reqid}, status: 1, "
                    "last_index: 1, entries: [{reqid: {ref: first.reqid}, term: 1, data: {ref: first.data}}]}}\n",
                    roles)
    assert ok.steps[1].maybe
    added = parse_case(head + "  - {as: peer.a, send: {type: RequestEntries, reqid: {ref: first.reqid}, "
                              "prev_log_index: {ref: first.log_index, add: -1}}}\n", roles)
    assert added.steps[1].fields["prev_log_index"] == {"ref": "first.log_index", "add": -1}
    with pytest.raises(CaseError, match="no earlier step captured a message named 'nothing'"):
        parse_case(head + "  - {as: peer.a, send: {type: RequestEntriesResponse, reqid: {ref: first.reqid}, status: 1, "
                          "last_index: 1, entries: [{reqid: {ref: nothing.reqid}, term: 1}]}}\n", roles)
    with pytest.raises(CaseError, match="maybe: true"):
        parse_case(head + "  - {as: peer.a, expect: {type: RequestEntries}, maybe: yes-please}\n", roles)


RAFT_PEERS = package("raft").peer_roles()
RAFT_HEAD = "protocol: raft\nrole: client\ncase: x\nclauses: [raft.wire.grammar]\nsteps:\n"


def test_a_send_raw_frame_may_be_a_captured_field() -> None:
    """Added for the Raft client suite: a malformed answer must carry the request's id, or the
    client drops it unread (the reference matches answers by id before decoding them)."""
    c = parse_case(RAFT_HEAD + "  - {as: peer.a, expect: {type: RequestConfig}, capture: ask}\n"
                                "  - {as: peer.a, send_raw: [{ref: ask.reqid}, '01', c1]}\n", RAFT_PEERS)
    assert c.steps[1].frames == [{"ref": "ask.reqid"}, b"\x01", b"\xc1"]
    with pytest.raises(CaseError, match="no earlier step captured a message named 'nothing'"):
        parse_case(RAFT_HEAD + "  - {as: peer.a, send_raw: [{ref: nothing.reqid}]}\n", RAFT_PEERS)


def test_has_matches_one_element_of_a_repeated_field() -> None:
    from harness.conformance.matchers import matches
    from harness.protocols.raft import LogEntry

    entries = [LogEntry(bytes(12), 2, 1, b"\xc0"), LogEntry(bytes.fromhex("69e0c0000000000000000001"), 0, 1, b"d")]
    wanted = {"has": {"reqid": {"hex": "69e0c0000000000000000001"}, "type": 0}}
    assert matches(wanted, entries)
    assert not matches(wanted, entries[:1]) and not matches(wanted, []) and not matches(wanted, None)
    assert not matches({"has": {"reqid": {"hex": "69e0c0000000000000000001"}, "type": 2}}, entries)
    assert matches({"has": {"gt": 2}}, [1, 3]) and not matches({"has": {"gt": 3}}, [1, 3])
    assert matches({"has": [{"reqid": "x"}]}, [[{"reqid": "x"}]])  # a plain value: equal
    c = case("  - {as: publisher.a, expect: {type: BROADCAST}, capture: b}\n"
             "  - {as: publisher.a, expect: {type: BROADCAST, topic: {has: {x: {ref: b.topic}}}}}\n")
    assert c.steps[1].fields["topic"] == {"has": {"x": {"ref": "b.topic"}}}
    with pytest.raises(CaseError, match="captured"):
        case("  - {as: publisher.a, expect: {type: BROADCAST, topic: {has: {x: {ref: nothing.topic}}}}}\n")
