"""`heartbeat-answers` owes every REGISTER a broker receives its own echo (E-DCP-07: silence is
the failure), judged from the broker's events: echoes match REGISTERs in order, and one is
unconfirmed once two more PINGs or REGISTERs of that peer reached the broker. A broker that lost
a worker's first registration in silence passed every check before (the worker registered again
and was served)."""

from __future__ import annotations

from typing import Any

from harness.checkers.base import CRASH, RECV, RESTART, SEND, Observer, Verdict
from harness.checkers.dcp_heartbeat import HeartbeatAnswers
from harness.node import SocketSpec, SocketType
from harness.protocols import codec
from tests.checkers.test_dcp_checkers import CLEAN, run, verdict
from reference_nodes.dcp import mutants

DCP = codec("dcp")
MS = 1_000_000


def frames(name: str, **fields: Any) -> list[bytes]:
    return DCP.encoder(name)(fields)


REGISTER, PING, PONG = frames("REGISTER", service="echo"), frames("PING"), frames("PONG")
REQUEST = frames("REQUEST", service="echo", client_address=b"c", metadata=[b"1"], data=[b"x"])


def judge(events: list[tuple[int, str, bytes, list[bytes] | None]], end_ms: int = 10_000) -> Verdict:
    """Feed (time ms, kind, peer, message frames) of the broker to a fresh check."""
    obs = Observer([HeartbeatAnswers()], DCP, {"broker": "broker"})
    obs.declare("broker", [SocketSpec("router", SocketType.ROUTER, bind=("tcp://b",))])
    for t, kind, peer, msg in events:
        if msg is None:
            obs.emit(t * MS, "broker", kind)
        else:
            obs.emit(t * MS, "broker", kind, socket="router", frames=[peer, *msg])
    (v,) = obs.finish(end_ms * MS)
    return v


def test_each_register_is_owed_its_own_echo_in_order() -> None:
    # the first REGISTER is lost in silence; the echo of the second answers the first
    lost = [(0, RECV, b"w", REGISTER), (100, RECV, b"w", REGISTER), (100, SEND, b"w", REGISTER),
            (200, RECV, b"w", PING), (200, SEND, b"w", PONG), (300, RECV, b"w", PING)]
    v = judge(lost)
    assert not v.ok and v.clause == "dcp.broker.register-confirm"
    assert "did not confirm the REGISTER of b'w' received at 100.0 ms" in v.detail, v.detail
    # a broker that echoes both passes; so does one whose echo comes after one more PING
    both = lost[:3] + [(101, SEND, b"w", REGISTER)] + lost[3:]
    assert judge(both).ok, judge(both).detail
    late = [(0, RECV, b"w", REGISTER), (100, RECV, b"w", PING), (150, SEND, b"w", REGISTER),
            (150, SEND, b"w", PONG), (200, RECV, b"w", PING), (300, RECV, b"w", PING)]
    assert judge(late).ok


def test_requests_do_not_count_and_other_peers_are_apart() -> None:
    burst = [(0, RECV, b"w", REGISTER)] + [(1, RECV, b"w", REQUEST)] * 5 + [(2, SEND, b"w", REGISTER),
                                                                            (3, RECV, b"v", REGISTER),
                                                                            (4, RECV, b"w", PING),
                                                                            (5, RECV, b"w", PING)]
    v = judge(burst)
    assert v.ok, v.detail  # v's REGISTER waits for two more of v's own messages, which never came
    v = judge(burst + [(6, RECV, b"v", PING), (7, RECV, b"v", PING)])
    assert not v.ok and "REGISTER of b'v'" in v.detail


def test_a_broker_that_crashes_owes_nothing_of_its_earlier_life() -> None:
    events = [(0, RECV, b"w", REGISTER), (50, CRASH, b"", None), (60, RESTART, b"", None),
              (100, RECV, b"w", PING), (200, RECV, b"w", PING), (300, RECV, b"w", PING)]
    v = judge(events)
    # (the PINGs of an unknown peer are owed a RECONNECT: that rule fails, not the registration)
    assert "register-confirm" not in (v.clause or "") and "REGISTER" not in v.detail.split(";")[0], v.detail


def test_an_accepted_registration_without_any_echo_still_fails_at_the_end_of_the_life() -> None:
    """The older rule stays: a broker that gave the peer a request accepted its registration."""
    v = judge([(0, RECV, b"w", REGISTER), (10, SEND, b"w", REQUEST)])
    assert not v.ok and "accepted its registration" in v.detail


def test_the_mutants_that_lose_or_skip_the_echo_fail_and_the_reference_passes() -> None:
    assert verdict(run(CLEAN), "heartbeat-answers").ok
    for mutant in (mutants.LosesRegistrationBroker, mutants.NoRegisterEchoBroker):
        v = verdict(run(CLEAN, broker=mutant), "heartbeat-answers")
        assert not v.ok and v.clause == "dcp.broker.register-confirm", (mutant, v.detail)
