"""The Dafka suites against an implementation whose logic is not ours:
tests/standins/dafka_independent.py, written from the document alone (no harness or reference
import). Each test names the false alarm the harness raised before, or shows it still catches a
broken node the same way.

* A node that binds ports of its own choosing is heard only once the harness has followed the
  endpoint its beacon announces. The harness sent its requests as soon as the node subscribed
  (which it does as soon as the tower announces the harness's nodes), so the answers of a node
  whose first beacon came later went where no one listened: ``fetch`` and ``version-discard``
  failed ``dafka.fetch.direct-record-reply`` against a correct store. A send now also waits
  until the harness can hear the node (`harness.conformance.conductor_pubsub.FOLLOW_SETTLE_NS`).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.conformance.conductor import Conductor
from harness.conformance.conductor_pubsub import FOLLOW_SETTLE_NS
from harness.conformance.runner import _conductor_config, _sim_endpoints, _values, load_suite, run_suite
from harness.node import Connect, Deliver, DurableStore, NodeContext, Send
from harness.registry import suite

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "dafka_independent.py"
COMMON = "--towers {tower_sub},{tower_pub} --dialect {dialect} --peer-expiry-ms {peer_expiry_ms}"
PRODUCER = (f"{{python}} {STANDIN} producer {COMMON} --beacon-ms {{beacon_ms}} --topic {{topic}} --records {{records}} "
            "--delay-ms {delay_ms} --interval-ms {interval_ms} --content {content} --head-ms {head_ms}")
STORE = f"{{python}} {STANDIN} store {COMMON} --beacon-ms {{beacon_ms}} --fetch-retry-ms {{fetch_retry_ms}}"
CONSUMER = f"{{python}} {STANDIN} consumer {COMMON} --beacon-ms {{beacon_ms}} --topics '{{topics}}' --fetch-retry-ms {{fetch_retry_ms}}"
# its first beacon 700 ms after it starts, none on the tower's welcome: lawful (a beacon "at a
# regular interval"), and what any node whose first beacon is lost looks like
LATE_BEACON_STORE = f"{{python}} {STANDIN} store {COMMON} --beacon-ms 700 --no-welcome-beacon"


def run(role: str, cmd: str, dialect: str, cases: list[str] | None = None) -> list:
    return run_suite(load_suite("dafka", role, only=cases), cmd=cmd, dialect=dialect)


def evidence(results: list) -> list[tuple[str, str, str, str]]:
    return [(r.case.id, r.verdict, r.clause, r.reason[:400]) for r in results if r.verdict not in ("pass", "skipped")]


def own_port_conductor(case_id: str) -> Conductor:
    """The conductor of a store case whose implementation binds ports of its own (followed)."""
    [case] = load_suite("dafka", "store", only=[case_id])
    rs, alloc = suite("dafka", "store"), _sim_endpoints()
    values = {**_values(case, rs, "strict", "tcp://iut:5000", alloc), "endpoint": None, "port": None}
    config, _ = _conductor_config(case, rs, "strict", "tcp://iut:5000", "", values, alloc)
    return Conductor(NodeContext("conductor", random.Random(1), DurableStore(), config))


def sends_to(actions: list, peer: str) -> list[Send]:
    return [a for a in actions if isinstance(a, Send) and a.socket == peer]


def test_a_send_waits_until_the_harness_can_hear_a_node_on_its_own_ports() -> None:
    c = own_port_conductor("fetch")
    c.start(0)
    ms = 1_000_000
    # the store subscribes to RECORDs at producer.p: allowed through, but the store has not
    # announced where it can be heard, so the RECORD (and the FETCH after it) must wait
    assert not sends_to(c.receive("producer.p", [b"\x01M"], 1 * ms), "producer.p")
    beacon = [b"B", b"0b9a7e52-7c43-4bb0-9c1a-1e6b3a3f1e00", b"127.0.0.1", b"40999"]
    out = c.receive("tower.t/recv", beacon, 5 * ms)
    assert {(a.socket, a.endpoint) for a in out if isinstance(a, Connect)} == {
        (p + "/recv", "tcp://127.0.0.1:40999") for p in ("producer.p", "consumer.c", "store.t")}
    assert not sends_to(out, "producer.p"), "sent before the harness's SUBs could be subscribed there"
    assert c.get_timer() == 5 * ms + FOLLOW_SETTLE_NS
    out = c.handle_timer(5 * ms + FOLLOW_SETTLE_NS)
    assert [s.msg_type for s in sends_to(out, "producer.p")][:1] == ["RECORD"]


def test_a_node_that_never_announces_itself_fails_on_its_link_to_the_tower() -> None:
    c = own_port_conductor("fetch")
    c.start(0)
    c.receive("tower.t", [b"\x01B"], 1_000_000)  # it subscribed at the tower, but never beacons
    c.receive("producer.p", [b"\x01M"], 2_000_000)
    results: list[Deliver] = []
    while not results and (due := c.get_timer()) is not None and due < 20_000_000_000:
        results = [a for a in c.handle_timer(due) if isinstance(a, Deliver) and a.kind == "case-result"]
    assert [(r.data["verdict"], r.data["clause"]) for r in results] == [("fail", "dafka.interconnect.tower-pub-connect")]
    assert "announced no endpoint" in results[0].data["reason"]


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_store_whose_first_beacon_comes_late_is_not_blamed_for_answers_lost_before_it() -> None:
    # Before: both cases failed dafka.fetch.direct-record-reply (the FETCH went out before the
    # harness had connected to the store's XPUB; the store's answer was lost).
    results = run("store", LATE_BEACON_STORE, "strict", ["fetch", "version-discard"])
    assert all(r.verdict == "pass" for r in results), evidence(results)


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_store_that_does_not_answer_fetch_still_fails_on_its_own_ports() -> None:
    # the late-beacon store, deaf to FETCH (it does not subscribe to F): still caught
    results = run("store", LATE_BEACON_STORE + " --mutant no-fetch-subscription", "strict", ["fetch"])
    assert [(r.verdict, r.clause) for r in results] == [("fail", "dafka.subscription.store-fetch")], evidence(results)


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dialect", ["strict", "dafka:zproto"])
@pytest.mark.parametrize("role,cmd", [("producer", PRODUCER + " --linger-ms 300"), ("store", STORE),
                                      ("consumer", CONSUMER)], ids=["producer", "store", "consumer"])
def test_every_case_passes_against_the_independent_stand_in(role: str, cmd: str, dialect: str) -> None:
    """On ports of its own, told only the tower's endpoints; the producer exits 0 once its records
    are ACKed. Not applicable (skipped): the signature cases in dafka:zproto, ``ack-optional``
    (it does not subscribe to ACKs, a MAY)."""
    results = run(role, cmd, dialect)
    assert not evidence(results), evidence(results)
    skipped = {r.case.id for r in results if r.verdict == "skipped"}
    assert skipped <= {"signature-discard", "ack-optional"}, skipped
