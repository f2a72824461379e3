"""The checks of an external DCP broker, judged from the wire (harness/checkers/dcp_external.py),
on event streams written out by hand: what each rule proves, and the lawful timings it must not
blame (a PING crossing a request, one PONG for several PINGs, a connection or a broker life that
ends before an answer was owed). The live proofs with the mutants as the external process are in
tests/live/test_dcp_external_broker.py."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import (
    CRASH, DISCONNECT, PAUSE, RECV, RESTART, RESUME, SEND, VIA_PROXY, Checker, Observer, Verdict,
)
from harness.checkers.dcp_external import (
    PingAnswersAsWorkersGetThem, RepliesAsClientsGetThem, RequestsAsWorkersGetThem,
)
from harness.composition import build_checkers
from harness.node import SocketSpec, SocketType
from harness.protocols import codec
from harness.scenario import parse_scenario

DCP = codec("dcp")
ROLES = {"w": "worker", "v": "worker", "c": "client", "broker": "broker"}
MS = 1_000_000


def frames(name: str, **fields: Any) -> list[bytes]:
    return DCP.encoder(name)(fields)


PING, PONG, RECONNECT, REGISTER = (frames(n) if n != "REGISTER" else frames(n, service="echo")
                                   for n in ("PING", "PONG", "RECONNECT", "REGISTER"))


def request(i: int) -> list[bytes]:
    return frames("REQUEST", service="echo", client_address=b"c", metadata=[b"r%d" % i], data=[b"x"])


def reply(i: int, address: bytes = b"c", data: bytes = b"x") -> list[bytes]:
    return frames("REPLY", client_address=address, metadata=[b"r%d" % i], data=[data])


def judge(checker: Checker, events: list[tuple[int, str, str, list[bytes] | None]], end_ms: int) -> Verdict:
    """Feed (time ms, node, kind, frames) to the checker through an observer, as a run does."""
    obs = Observer([checker], DCP, ROLES)
    obs.declare("c", [SocketSpec("dealer", SocketType.DEALER, connect=("tcp://b",), identity=b"c")])
    for t, node, kind, fr in events:
        obs.emit(t * MS, node, kind, socket="dealer" if fr is not None else "", frames=fr)
    (v,) = obs.finish(end_ms * MS)
    return v


def pings() -> PingAnswersAsWorkersGetThem:
    return PingAnswersAsWorkersGetThem(heartbeat_ms={"w": 200}, brokers=frozenset({"broker"}))


def test_a_ping_no_answer_reaches_for_two_intervals_and_a_second_fails_pong() -> None:
    v = judge(pings(), [(0, "w", SEND, REGISTER), (1, "w", RECV, REGISTER), (200, "w", SEND, PING),
                        (400, "w", SEND, PING), (600, "w", SEND, PING)], end_ms=1700)
    assert not v.ok and v.clause == "dcp.heartbeat.pong" and "PING w sent at 200.0 ms" in v.detail, v.detail
    assert v.evidence and "3 PING(s) unanswered" in v.detail


def test_a_register_no_echo_reaches_for_two_intervals_and_a_second_fails_register_confirm() -> None:
    """E-DCP-07: the broker confirms a REGISTER with a REGISTER; silence is the failure. The
    reference worker registers again when it hears nothing; each REGISTER is owed its own echo,
    in order (a repeat is echoed again), so a broker that lost the first in silence and echoed
    the second leaves one unconfirmed."""
    silent = [(0, "w", SEND, REGISTER), (600, "w", SEND, REGISTER), (1200, "w", SEND, REGISTER)]
    v = judge(pings(), silent, end_ms=1500)
    assert not v.ok and v.clause == "dcp.broker.register-confirm", v.detail
    assert "REGISTER w sent at 0.0 ms" in v.detail and "3 REGISTER(s) unconfirmed" in v.detail and v.evidence
    echoes = [(1300, "w", RECV, REGISTER), (1301, "w", RECV, REGISTER), (1302, "w", RECV, REGISTER)]
    v = judge(pings(), [*silent, *echoes], end_ms=1500)
    assert v.ok and "3 REGISTER(s) confirmed" in v.detail, v.detail
    lost_first = [(0, "w", SEND, REGISTER), (600, "w", SEND, REGISTER), (601, "w", RECV, REGISTER),
                  (800, "w", SEND, PING), (801, "w", RECV, PONG)]
    v = judge(pings(), lost_first, end_ms=2100)
    assert not v.ok and v.clause == "dcp.broker.register-confirm", v.detail
    assert "REGISTER w sent at 600.0 ms" in v.detail and "1 REGISTER(s) unconfirmed" in v.detail, v.detail
    assert judge(pings(), lost_first, end_ms=1900).ok  # (the second waited less than the bound)
    # a REGISTER sent to a broker that is down or not yet heard from since its restart is owed nothing
    down = [(0, "broker", CRASH, None), (100, "w", SEND, REGISTER), (900, "broker", RESTART, None),
            (1000, "w", SEND, REGISTER), (3000, "w", RECV, PONG)]
    assert judge(pings(), down, end_ms=3100).ok


def test_one_late_answer_clears_every_ping_before_it() -> None:
    """A broker may answer on its own tick, and answer several PINGs with one PONG; a RECONNECT
    answers too (a broker that forgot the worker, E-DCP-08)."""
    events = [(200, "w", SEND, PING), (400, "w", SEND, PING), (600, "w", SEND, PING), (1500, "w", RECV, PONG),
              (1700, "w", SEND, PING), (1900, "w", RECV, RECONNECT)]
    v = judge(pings(), events, end_ms=4000)
    assert v.ok and v.detail.startswith("4 PING(s) of the harness's workers answered"), v.detail


def test_a_ping_is_not_judged_when_its_connection_or_the_broker_s_life_ends_first() -> None:
    """The reference worker reopens its socket when it hears nothing (an answer in flight is lost
    with the connection); a crashed broker owes nothing, nor a restarted one before a worker heard
    from it (a restart waits for the process); a paused one answers late."""
    events = [(200, "w", SEND, PING), (1300, "w", DISCONNECT, None),
              (1400, "w", SEND, PING), (1500, "broker", CRASH, None), (1600, "w", SEND, PING),
              (2000, "broker", RESTART, None), (2100, "w", SEND, PING), (4500, "w", RECV, RECONNECT),
              (4600, "w", SEND, PING), (4700, "broker", PAUSE, None), (4800, "w", SEND, PING),
              (9000, "broker", RESUME, None), (9001, "w", RECV, PONG)]
    assert judge(pings(), events, end_ms=9100).ok


def test_a_file_whose_rules_may_lose_a_ping_judges_none_and_says_so() -> None:
    checker = PingAnswersAsWorkersGetThem(heartbeat_ms={"w": 200}, brokers=frozenset({"broker"}),
                                          unsound="rule rule-0 may drop a PING from * to *")
    v = judge(checker, [(200, "w", SEND, PING), (400, "w", SEND, PING), (600, "w", SEND, PING)], end_ms=5000)
    assert v.ok and "not judged: its answers to PINGs and REGISTERs (rule rule-0 may drop" in v.detail, v.detail
    assert v.detail.endswith("(external: broker)")


def seen(checker: Checker, events: list[tuple[int, str, str, list[bytes] | None, int]], end_ms: int) -> Verdict:
    """Feed (time ms, node, kind, frames, connection) to the checker: the broker's events are its
    side of the proxy (a ROUTER's: the worker's routing id in front, the worker as the peer), the
    workers' their probes' (the worker's own sends and receipts, and its lifecycle)."""
    obs = Observer([checker], DCP, ROLES)
    for t, node, kind, fr, connection in events:
        if node == "broker" and fr is not None:
            peer = "v" if connection >= 100 else "w"
            obs.emit(t * MS, node, kind, socket="router", frames=[peer.encode(), *fr],
                     data={"peer": peer, "connection": connection}, via=VIA_PROXY)
        else:
            obs.emit(t * MS, node, kind, socket="dealer" if fr is not None else "", frames=fr)
    (v,) = obs.finish(end_ms * MS)
    return v


def observed() -> PingAnswersAsWorkersGetThem:
    return PingAnswersAsWorkersGetThem(heartbeat_ms={"w": 200, "v": 200}, brokers=frozenset({"broker"}),
                                       observed=True, workers=frozenset({"w"}))


def test_observed_a_ping_handed_to_the_broker_and_never_answered_fails_pong() -> None:
    """On a file whose rules may lose a PING or its answer, the proxy's view of the broker judges:
    a PING it handed the broker is owed an answer the broker sends."""
    events = [(200, "w", SEND, PING, 0), (201, "broker", RECV, PING, 1), (400, "w", SEND, PING, 0),
              (401, "broker", RECV, PING, 1), (2000, "w", SEND, PING, 0)]
    v = seen(observed(), events, end_ms=2000)
    assert not v.ok and v.clause == "dcp.heartbeat.pong", v.detail
    assert ("PING of w handed to it at 201.0 ms: it sent w no PONG or RECONNECT in 1799 ms (seen by the proxy"
            in v.detail)
    assert v.evidence and v.evidence[0]["seen_by"] == "proxy" and "2 PING(s) unanswered" in v.detail


def test_observed_a_dropped_ping_is_owed_nothing_and_a_lost_pong_answers() -> None:
    """A PING a rule dropped never reached the broker; a PONG a rule dropped after the broker sent
    it was sent all the same: neither is the broker's fault, so neither fails, though the worker
    heard nothing for the whole run."""
    events = [(0, "w", SEND, REGISTER, 0), (1, "broker", RECV, REGISTER, 1), (2, "broker", SEND, REGISTER, 1),
              (200, "w", SEND, PING, 0), (201, "broker", RECV, PING, 1), (202, "broker", SEND, PONG, 1),
              (400, "w", SEND, PING, 0), (600, "w", SEND, PING, 0), (800, "w", SEND, PING, 0)]
    v = seen(observed(), events, end_ms=5000)
    assert v.ok, v.detail
    assert "1 PING(s) of the harness's workers answered and 1 REGISTER(s) confirmed" in v.detail
    assert "where the proxy handed it the PINGs and saw it send the answers" in v.detail
    # the same run judged from the worker's side would blame the broker for the lost answers
    worker_side = PingAnswersAsWorkersGetThem(heartbeat_ms={"w": 200}, brokers=frozenset({"broker"}))
    assert not seen(worker_side, events, end_ms=5000).ok


def test_observed_a_register_handed_to_the_broker_is_owed_its_echo() -> None:
    events = [(0, "broker", RECV, REGISTER, 1), (600, "broker", RECV, REGISTER, 1), (1500, "broker", SEND, PONG, 1)]
    v = seen(observed(), events, end_ms=1500)
    assert not v.ok and v.clause == "dcp.broker.register-confirm", v.detail
    assert "REGISTER of w handed to it at 0.0 ms" in v.detail and "2 REGISTER(s) unconfirmed" in v.detail


def test_observed_stretches_end_with_the_connection_the_broker_s_life_or_a_pause() -> None:
    """A PING on a connection that was replaced, one handed to a paused or crashed broker, one to a
    restarted broker that has not spoken to the worker yet, and another worker's (not one of the
    harness's) are owed nothing."""
    events = [(200, "broker", RECV, PING, 1), (900, "broker", RECV, PING, 2), (950, "broker", SEND, PONG, 2),
              (1000, "broker", PAUSE, None, 0), (1100, "broker", RECV, PING, 2), (4000, "broker", RESUME, None, 0),
              (4100, "broker", RECV, PING, 2), (4200, "broker", CRASH, None, 0), (4300, "broker", RESTART, None, 0),
              (4400, "broker", RECV, PING, 3), (9000, "broker", SEND, RECONNECT, 3), (9100, "broker", RECV, PING, 3),
              (9150, "broker", SEND, PONG, 3), (100, "broker", RECV, PING, 100)]
    v = seen(observed(), sorted(events, key=lambda e: e[0]), end_ms=12000)
    assert v.ok and v.detail.startswith("2 PING(s) of the harness's workers answered"), v.detail
    # the same PING on the same connection with no answer for the bound fails
    v = seen(observed(), [(200, "broker", RECV, PING, 1), (1700, "broker", RECV, PING, 1)], end_ms=1700)
    assert not v.ok and "handed to it at 200.0 ms" in v.detail, v.detail


def test_a_worker_given_more_requests_than_it_sent_ready_signals_fails() -> None:
    events = [(0, "w", SEND, REGISTER), (300, "w", RECV, request(1)), (310, "w", RECV, request(2))]
    v = judge(RequestsAsWorkersGetThem(), events, end_ms=1000)
    assert not v.ok and v.clause == "dcp.broker.one-request-per-worker" and "request no. 2" in v.detail, v.detail


def test_a_ping_that_crossed_a_request_counts_for_the_next_one() -> None:
    """The worker pinged before the first request reached it: the broker may have read that PING
    after it gave the request (E-DCP-06: a PING asks for more work), so the second is lawful."""
    events = [(0, "w", SEND, REGISTER), (299, "w", SEND, PING), (300, "w", RECV, request(1)),
              (301, "w", RECV, request(2)), (360, "w", SEND, reply(1)), (361, "w", RECV, request(3))]
    v = judge(RequestsAsWorkersGetThem(), events, end_ms=1000)
    assert v.ok and v.detail.startswith("3 request(s)"), v.detail
    assert "not judged: a request it gave a busy worker that had sent ready signals to spare" in v.detail


def test_a_reply_for_the_client_passes_and_one_readdressed_or_for_another_fails() -> None:
    ok = [(300, "w", SEND, reply(1)), (301, "c", RECV, reply(1))]
    assert judge(RepliesAsClientsGetThem(), ok, end_ms=1000).ok
    readdressed = judge(RepliesAsClientsGetThem(), [(300, "w", SEND, reply(1)), (301, "c", RECV, reply(1, b"w"))], 1000)
    assert not readdressed.ok and readdressed.clause == "dcp.reply.format", readdressed.detail
    assert "re-addressed" in readdressed.detail
    # (sent by a worker outside the harness: misrouted or re-addressed, the broker's fault either way)
    other = judge(RepliesAsClientsGetThem(external_workers=frozenset({"x"})), [(301, "c", RECV, reply(1, b"d"))], 1000)
    assert not other.ok and other.clause == "dcp.broker.route-reply" and "received a reply for b'd'" in other.detail


def test_reply_parts_are_compared_only_when_every_worker_is_the_harness_s() -> None:
    altered = [(300, "w", SEND, reply(1)), (301, "c", RECV, reply(1, data=b"y"))]
    v = judge(RepliesAsClientsGetThem(), altered, end_ms=1000)
    assert not v.ok and "no worker sent" in v.detail, v.detail
    v = judge(RepliesAsClientsGetThem(external_workers=frozenset({"x"})), altered, end_ms=1000)
    assert v.ok and "not judged: whether the replies of external workers came unchanged (external: x)" in v.detail


EXTERNAL = """protocol: dcp
name: t
duration: 2s
nodes:
  broker: {role: broker, command: "broker {endpoint}"}
  workers: {role: worker, count: 2}
  clients: {role: client}
FAULTS
check: [one-request-per-worker, heartbeat-answers, reply-unchanged]
"""


def unsound(faults: str) -> dict[str, str]:
    checkers = build_checkers(parse_scenario(EXTERNAL.replace("FAULTS", faults), "t.yaml"))
    return {c.name: getattr(c, "unsound", None) for c in checkers if c.name in
            ("one-request-per-worker", "heartbeat-answers", "reply-unchanged")}


def test_what_the_file_s_faults_leave_provable_decides_what_is_judged() -> None:
    assert unsound("") == {"one-request-per-worker": "", "heartbeat-answers": "", "reply-unchanged": ""}
    lossy = unsound("faults:\n  - rule: {drop: 5%}")
    assert not lossy["heartbeat-answers"] and not lossy["reply-unchanged"]  # judged where the proxy stands
    assert observed_mode("faults:\n  - rule: {drop: 5%}")
    unobserved = unsound("live: {observe: false}\nfaults:\n  - rule: {drop: 5%}")["heartbeat-answers"]
    assert unobserved.startswith("rule rule-0 may drop a PING/REGISTER")
    damaging = unsound('faults:\n  - rule: {message: PING, corrupt: 1%}')["heartbeat-answers"]
    assert damaging.startswith("rule rule-0 may corrupt a PING/REGISTER")
    assert not lossy["one-request-per-worker"]  # a lost signal or request only makes the count kinder
    dup = unsound('faults:\n  - rule: {message: REQUEST, to: "workers.*", duplicate: 3%}')
    assert "may duplicate a REQUEST" in dup["one-request-per-worker"] and not dup["heartbeat-answers"]
    assert "may corrupt a REPLY" in unsound("faults:\n  - rule: {message: REPLY, corrupt: 1%}")["reply-unchanged"]
    # the clients cut off from the broker: the workers' heartbeats are untouched
    assert not unsound("faults:\n  - {from: 1s, until: 2s, partition: [[clients], [broker]]}")["heartbeat-answers"]
    assert "partition" in unsound("faults:\n  - {from: 1s, until: 2s, partition: [[workers.1], [rest]]}")[
        "heartbeat-answers"]
    slow = "faults:\n  - {from: 1s, until: 2s, slow_link: [broker, workers.0], latency: 50ms}"
    assert not unsound(slow)["heartbeat-answers"] and observed_mode(slow)  # the proxy sees past the delay
    assert "slow link" in unsound("live: {observe: false}\n" + slow)["heartbeat-answers"]
    assert not observed_mode("")  # a file that loses nothing is judged as the workers got the answers


def observed_mode(faults: str) -> bool:
    (checker,) = [c for c in build_checkers(parse_scenario(EXTERNAL.replace("FAULTS", faults), "t.yaml"))
                  if c.name == "heartbeat-answers"]
    return bool(getattr(checker, "observed", False))
