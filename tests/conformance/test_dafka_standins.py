"""The Dafka suites against stand-ins of zeromq/dafka's programs (tests/standins/dafka_node.py,
docs/real-implementations.md; issue 11, items 3-5). Each test names what the harness did before:

* nodes that bind ports of their own choosing and announce them in beacons are reached (the
  harness follows what beacons announce, as a real Dafka node does), with only the tower's
  placeholders on their command line;
* a store that is two nodes (writer and reader, each with its own address, XPUB and beacon) is
  testable: no case takes the first beacon for "the store";
* zeromq/dafka's beacon with an empty host is taken in ``dafka:zproto`` (strict keeps refusing it);
* a consumer that subscribes a second after it starts is tested once it observably has.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.conformance.runner import binds_own_ports, load_suite, run_suite
from harness.packages.dafka.suites import _beacon_endpoint
from harness.protocols import codec
from harness.registry import suite

NODE = Path(__file__).resolve().parents[1] / "standins" / "dafka_node.py"
TOWER = "--towers {tower_sub},{tower_pub} --beacon-ms {beacon_ms} --peer-expiry-ms {peer_expiry_ms}"
PRODUCER = f"{{python}} {NODE} producer {TOWER} --topic {{topic}} --records {{records}} --head-ms {{head_ms}}"
STORE = f"{{python}} {NODE} store {TOWER}"
CONSUMER = f"{{python}} {NODE} consumer {TOWER} --topics {{topic}}"


def verdicts(results: list) -> dict[str, tuple[str, str]]:
    return {r.case.id: (r.verdict, r.clause) for r in results}


def run(role: str, cmd: str, cases: list[str], dialect: str) -> list:
    return run_suite(load_suite("dafka", role, only=cases), cmd=cmd, dialect=dialect)


def passed(results: list) -> bool:
    return all(r.verdict == "pass" for r in results)


def evidence(results: list) -> list[tuple[str, str, str, str]]:
    return [(r.case.id, r.verdict, r.clause, r.reason[:300]) for r in results if r.verdict != "pass"]


def test_a_command_without_endpoint_or_port_binds_its_own_ports() -> None:
    dafka, dcp = suite("dafka", "store"), suite("dcp", "broker")
    assert binds_own_ports(dafka, STORE) and not binds_own_ports(dafka, STORE + " --bind {endpoint}")
    assert not binds_own_ports(dafka, STORE + " --port {port}") and binds_own_ports(dafka, STORE + " {{port}}")
    assert not binds_own_ports(dcp, "mybroker"), "a DCP broker announces nothing: it must bind {endpoint}"


def test_an_empty_beacon_host_is_the_connections_host() -> None:
    z = codec("dafka", "dafka:zproto")
    empty = z.decode([b"B", b"A1", b"", b"40001"], channel="to-tower")
    named = z.decode([b"B", b"A2", b"node-a", b"40002"], channel="to-tower")
    live, sim = _beacon_endpoint("tcp://127.0.0.1:5555"), _beacon_endpoint("tcp://iut:5555")
    assert live(empty) == ("A1", "tcp://127.0.0.1:40001") and sim(empty) == ("A1", "tcp://iut:40001")
    assert live(named) == ("A2", "tcp://node-a:40002")
    assert live(z.decode([b"W"], channel="from-tower")) is None


@pytest.mark.live
@pytest.mark.timeout(180)
def test_a_producer_on_its_own_port_with_an_empty_beacon_host_is_reached() -> None:
    # Before: every case "did not start" ({endpoint} never accepted connections), and an empty
    # host failed dafka:zproto's decoding of the beacon: a stock producer failed 20/20 cases.
    results = run("producer", PRODUCER + " --empty-host",
                  ["first-record", "fetch", "beacon-interval"], "dafka:zproto")
    assert passed(results), evidence(results)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_strict_still_fails_an_empty_beacon_host_on_its_clause() -> None:
    [r] = run("producer", PRODUCER + " --empty-host --dialect strict --bind {endpoint}", ["beacon-interval"], "strict")
    assert (r.verdict, r.clause) == ("fail", "dafka.interconnect.address-beacon"), r.reason
    assert "dafka:zproto" in r.reason


@pytest.mark.live
@pytest.mark.timeout(180)
def test_a_store_of_two_nodes_on_their_own_ports_passes() -> None:
    # Before: unreachable (as above); and cases took the first BEACON for the store, whose
    # STORE-HELLO and FETCH name the reader's or the writer's address.
    results = run("store", STORE + " --two-nodes --dialect strict",
                  ["hello", "on-gap", "gap-fill", "subscriptions"], "strict")
    assert passed(results), evidence(results)


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_consumer_that_subscribes_a_second_late_is_judged_once_it_has() -> None:
    # Before: store-hello failed dafka.consumer.hello-reply and direct-head dafka.fetch.on-gap:
    # their STORE-HELLO and DIRECT-HEAD reached it before it held a subscription to the topic.
    results = run("consumer", CONSUMER + " --subscribe-after-ms 1000 --bind {endpoint}",
                  ["store-hello", "direct-head"], "dafka:zproto")
    assert passed(results), evidence(results)
