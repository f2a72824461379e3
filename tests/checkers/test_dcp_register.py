"""``worker-registers`` (dcp.worker.register): a worker registers on its own. Real simulated runs
with the reference worker and the ``no-register`` mutant, and event streams for what a run
seldom shows (a silent broker, pauses, restarts, external workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.checkers.base import CRASH, PAUSE, RECV, RESTART, RESUME, SEND, VIA_PROXY, Event, Verdict
from harness.checkers.dcp_heartbeat import HeartbeatAnswers
from harness.checkers.dcp_register import Registers
from harness.composition import run_sim
from harness.scenario import parse_scenario
from reference_nodes.dcp import mutants

MS = 1_000_000
CLEAN = Path("scenarios/dcp/clean.yaml").read_text().replace("duration: 6s", "duration: 3s").replace(
    "until: 5s", "until: 2s")


def ev(t_ms: float, kind: str, msg_type: str, node: str = "workers.0", role: str = "worker", via: str = "") -> Event:
    return Event(int(t_ms * MS), node, role, kind, socket="dealer", frames=[b"DGBX\x01"], msg_type=msg_type, via=via)


def judge(*events: Event, **params) -> Verdict:
    check = Registers(**params)
    for e in events:
        check.on_event(e)
    return check.finish(10_000 * MS)[0]


def registers_verdict(**factories) -> Verdict:
    r = run_sim(parse_scenario(CLEAN, "clean.yaml"), 1, factories=factories)
    return next(v for v in r.verdicts if v.check == "worker-registers")


def test_reference_workers_register_first() -> None:
    v = registers_verdict()
    assert v.ok and v.detail.startswith("4 worker lives, each registered"), v.detail


@pytest.mark.parametrize("worker", ["workers.0", "workers.3"])
def test_a_worker_that_pings_first_and_registers_when_told_fails(worker: str) -> None:
    v = registers_verdict(**{worker: mutants.NoRegisterWorker})
    assert not v.ok and v.clause == "dcp.worker.register"
    assert f"{worker} was told to register (RECONNECT" in v.detail and "a PING at 0.0 ms" in v.detail
    assert [e["node"] for e in v.evidence] == [worker, worker]


def test_a_worker_that_never_registers_fails_after_the_grace() -> None:
    """Against a broker that never says RECONNECT, the grace bounds it: 2 s of running time."""
    pings = [ev(t, SEND, "PING") for t in range(0, 2500, 250)]
    v = judge(*pings)
    assert not v.ok and "sent 10 messages over 2250 ms of running time and no REGISTER" in v.detail
    assert judge(*pings[:9]).ok, "2000 ms is within the grace"


def test_paused_time_is_not_running_time() -> None:
    v = judge(ev(0, SEND, "PING"), ev(100, PAUSE, ""), ev(2100, RESUME, ""), ev(2200, SEND, "REGISTER"),
              ev(2300, SEND, "PING"))
    assert v.ok, v.detail


def test_a_reconnect_before_its_first_message_does_not_count() -> None:
    """A RECONNECT a life gets before it sent anything answers nothing of that life (a broker's
    stale answer to the life before)."""
    assert judge(ev(0, RECV, "RECONNECT"), ev(1, SEND, "REGISTER")).ok
    assert judge(ev(0, SEND, "REGISTER"), ev(5, RECV, "RECONNECT"), ev(6, SEND, "REGISTER")).ok


def test_each_life_is_judged_apart() -> None:
    first = [ev(0, SEND, "REGISTER"), ev(250, SEND, "PING"), ev(300, CRASH, "")]
    v = judge(*first, ev(800, RESTART, ""), ev(900, SEND, "PING"), ev(902, RECV, "RECONNECT"))
    assert not v.ok and "RECONNECT at 902.0 ms" in v.detail and "a PING at 900.0 ms" in v.detail
    assert judge(*first, ev(800, RESTART, ""), ev(900, SEND, "REGISTER"), ev(902, RECV, "RECONNECT"),
                 ev(903, SEND, "REGISTER")).ok


def test_an_external_worker_is_judged_from_what_the_proxy_saw() -> None:
    observed = [ev(0, SEND, "PING", node="ext.0", via=VIA_PROXY), ev(3, RECV, "RECONNECT", node="ext.0", via=VIA_PROXY)]
    v = judge(*observed, external_workers=frozenset({"ext.0"}))
    assert not v.ok and "ext.0 was told to register" in v.detail and "not judged" not in v.detail
    quiet = judge(ev(0, SEND, "REGISTER"), external_workers=frozenset({"ext.0"}))
    assert quiet.ok and quiet.detail.endswith("not judged: their registrations (no message of theirs seen) "
                                              "(external: ext.0)")
    unobserved = judge(ev(0, SEND, "REGISTER"), external_workers=frozenset({"ext.0"}), observed=False)
    assert unobserved.ok and "(the run does not observe them) (external: ext.0)" in unobserved.detail


def test_a_client_that_registers_may_ping() -> None:
    """A client that registers is a worker (dcp.client.may-register): its PINGs, as its probe or
    the proxy saw them, are no client heartbeat."""
    check = HeartbeatAnswers()
    for e in (ev(0, SEND, "REGISTER", node="clients.0", role="client", via=VIA_PROXY),
              ev(250, SEND, "PING", node="clients.0", role="client", via=VIA_PROXY)):
        check.on_event(e)
    assert check.finish(MS * 1000)[0].ok
    check.on_event(ev(300, SEND, "PING", node="clients.1", role="client", via=VIA_PROXY))
    v = check.finish(MS * 1000)[0]
    assert not v.ok and v.clause == "dcp.heartbeat.client-no-heartbeat" and "clients.1 sent a PING" in v.detail


BROKER_RESTART = Path("scenarios/dcp/broker-restart.yaml").read_text()


def test_a_worker_registers_again_when_told() -> None:
    """broker-restart.yaml: the broker comes back without its workers; each worker's next PING gets
    a RECONNECT, and it registers again. The mutant that ignores a RECONNECT fails."""
    scenario = parse_scenario(BROKER_RESTART, "broker-restart.yaml")
    good = next(v for v in run_sim(scenario, 1).verdicts if v.check == "worker-registers")
    assert good.ok and "RECONNECT(s) each answered with a REGISTER" in good.detail, good.detail
    bad = next(v for v in run_sim(scenario, 1, factories={"workers.1": mutants.NoReregisterWorker}).verdicts
               if v.check == "worker-registers")
    assert not bad.ok and bad.clause == "dcp.worker.reregister-on-reconnect", bad.detail
    assert "workers.1 sent no REGISTER in the" in bad.detail and "after the RECONNECT it got at" in bad.detail


def test_a_reconnect_is_owed_a_register_within_the_grace_of_running_time() -> None:
    told = [ev(0, SEND, "REGISTER"), ev(1000, SEND, "PING"), ev(1001, RECV, "RECONNECT")]
    assert judge(*told, ev(1002, SEND, "REGISTER")).ok
    v = judge(*told, ev(1250, SEND, "PING"), ev(3100, SEND, "PING"))
    assert not v.ok and v.clause == "dcp.worker.reregister-on-reconnect"
    assert ("workers.0 sent no REGISTER in the 2099 ms of running time after the RECONNECT it got at 1001.0 ms"
            in v.detail)
    assert judge(*told, ev(1100, PAUSE, ""), ev(2500, RESUME, ""), ev(2600, SEND, "REGISTER")).ok, "paused"
    assert judge(*told, ev(2000, CRASH, ""), ev(5000, RESTART, ""), ev(5001, SEND, "REGISTER")).ok, "its life ended"
    check = Registers()
    for e in told:
        check.on_event(e)
    assert check.finish(2500 * MS)[0].ok, "the run ended first"
    assert not check.finish(3500 * MS)[0].ok
