"""Every role of DCP and Dafka as an external process (`command:` group) in a live chaos run:
the reference node run as a process (`zmq-harness node P ROLE ...`) passes every check the file
names, and the checks say what they do not judge of it; a mutant of the role run so is still
caught where its fault shows on the wire (docs/real-implementations.md, "External DCP and Dafka
roles in chaos runs", has the whole table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.composition import RunResult, run_live
from harness.scenario import parse_scenario
from harness.trace import read_trace

pytestmark = pytest.mark.live

DCP_WORKER = ("{zmq_harness} node dcp worker --connect {connect} --identity {name} --set service=echo "
              "--set behaviour=echo --set service_time=2ms --set heartbeat=200ms --set liveness=3")
DCP_CLIENT = ("{zmq_harness} node dcp client --connect {connect} --identity {name} --set requests=8 "
              "--set service=echo --set timeout=400ms --set max_attempts=20")
DCP_BROKER = "{zmq_harness} node dcp broker --bind {endpoint} --set heartbeat=200ms --set liveness=3"
# a command-line client (plain pyzmq): it sends its requests, retries, and exits 0 once all are answered
EXITING_CLIENT = "{python} " + str(Path(__file__).parents[1] / "standins" / "dcp_client_exits.py") + \
    " --connect {connect} --requests 4 --timeout-ms 400"

DCP = """protocol: dcp
name: dcp-external-roles
duration: 2s
nodes:
  broker: {BROKER}
  workers: {role: worker, config: {service: echo, behaviour: echo, service_time: 2ms, heartbeat: 200ms, liveness: 3}}
  outside: {role: worker, command: "WORKER", ready: {line: READY}}
  clients: {role: client, count: 2, config: {timeout: 400ms, max_attempts: 20}}
  app: {role: client, command: "CLIENT"APP_READY}
workload:
  - {nodes: clients, op: request, service: echo, rate: 10/s, from: 300ms, until: 1500ms, size: 32}
check: [exactly-once, metadata-unchanged, one-request-per-worker, worker-expiry, heartbeat-answers, reply-unchanged,
        worker-registers]
"""
IN_PROCESS_BROKER = "{role: broker, config: {heartbeat: 200ms, liveness: 3}}"


def dcp(broker: str = "", worker: str = "", client: str = "") -> str:
    """The DCP file, with ``--mutant NAME`` added to the external broker (replacing the in-process
    one when given), worker or client (the reference client; the client that exits when neither a
    client nor a broker is given: an external broker may be up before the harness is, and such a
    client done before the harness sees it start)."""
    external = f'{{role: broker, command: "{DCP_BROKER} {broker}", ready: {{line: READY}}}}'
    app = (f"{DCP_CLIENT} {client}", ", ready: {line: READY}") if client or broker else (EXITING_CLIENT, "")
    return DCP.replace("{BROKER}", external if broker else IN_PROCESS_BROKER).replace(
        "WORKER", f"{DCP_WORKER} {worker}".strip()).replace("CLIENT", app[0]).replace("APP_READY", app[1])


DAFKA_NODE = ("{zmq_harness} node dafka ROLE --name {name} --set bind={bind} --set advertise={advertise} "
              "--set towers={towers} --set beacon=200ms")
DAFKA_TOWER = "{zmq_harness} node dafka tower --name {name} --set bind_sub={bind_sub} --set bind_pub={bind_pub}"
DAFKA_PRODUCER = DAFKA_NODE.replace("ROLE", "producer") + (" --set topic=orders --set head=250ms --set records=20 "
                                                           "--set delay=500ms --set interval=50ms")
DAFKA_CONSUMER = DAFKA_NODE.replace("ROLE", "consumer") + (" --set topics=orders --set offset_reset=earliest "
                                                           "--set fetch_retry=200ms")
DAFKA_STORE = DAFKA_NODE.replace("ROLE", "store") + " --set fetch_retry=200ms --data-dir {data_dir}"

DAFKA = f"""protocol: dafka
name: dafka-external-roles
duration: 2500ms
nodes:
  tower: {{role: tower}}
  producer: {{role: producer, command: "{DAFKA_PRODUCER}", ready: {{line: READY}}}}
  store: {{role: store, config: {{beacon: 200ms, fetch_retry: 200ms}}}}
  early: {{role: consumer, command: "{DAFKA_CONSUMER}", ready: {{line: READY}}}}
  late: {{role: consumer, config: {{topics: orders, offset_reset: earliest, beacon: 200ms, fetch_retry: 200ms}}}}
check: [offsets, consumer-order, complete-delivery, acked-retrievable, keep-until-ack, fetch-ascending, topic-frames, hello-subjects, subscriptions, tower-links, intervals, answers, producer-claims, store-input]
"""


def run(text: str, name: str, tmp_path: Path) -> RunResult:
    return run_live(parse_scenario(text, f"{name}.yaml"), 1, str(tmp_path))


def details(r: RunResult) -> dict[str, str]:
    return {v.check: v.detail for v in r.verdicts}


def test_dcp_worker_and_client_as_external_processes_pass_and_are_named(tmp_path: Path) -> None:
    """The client does its work and exits 0, as a command-line client may: process-alive says so
    and passes."""
    r = run(dcp(), "dcp-external", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = details(r)
    assert "not judged: the requests and replies of their applications (external: app)" in said["exactly-once"]
    assert "(external: outside)" in said["exactly-once"]
    # (a plain pyzmq client, its routing identity its own: judged from what the proxy saw of it)
    assert "not judged" not in said["metadata-unchanged"], said["metadata-unchanged"]
    assert said["worker-registers"].startswith("2 worker lives, each registered"), said["worker-registers"]
    assert "not judged" not in said["worker-registers"], said["worker-registers"]


@pytest.mark.slow  # (the default suite runs the same file: the example of docs/live.md)
def test_dafka_producer_and_consumer_as_external_processes_pass_and_are_judged(tmp_path: Path) -> None:
    r = run(DAFKA, "dafka-external", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = details(r)
    # the external producer's records are owed to the in-process consumer (learnt from the wire)
    assert said["complete-delivery"].startswith("20 (consumer, record) deliveries all made"), said["complete-delivery"]
    assert "not judged: what their applications get (external: early)" in said["complete-delivery"]
    assert "RECORD(s) of external producers as the tap heard them" in said["offsets"], said["offsets"]


STORE_RESTART = DAFKA.replace("duration: 2500ms", "duration: 6s").replace(
    "  tower: {role: tower}", '  tower: {role: tower, command: "' + DAFKA_TOWER + '", ready: {line: READY}}').replace(
    '  producer: {role: producer, command: "' + DAFKA_PRODUCER + '", ready: {line: READY}}',
    "  producer: {role: producer, config: {topic: orders, head: 200ms, beacon: 200ms}}").replace(
    "  store: {role: store, config: {beacon: 200ms, fetch_retry: 200ms}}",
    '  store: {role: store, command: "' + DAFKA_STORE + ' MUTANT", ready: {line: READY}}').replace(
    '  early: {role: consumer, command: "' + DAFKA_CONSUMER + '", ready: {line: READY}}',
    "  early: {role: consumer, config: {topics: orders, offset_reset: earliest, beacon: 200ms, fetch_retry: 200ms}}"
).replace("  late: {role: consumer, config: {", "  late: {role: consumer, start: 4s, config: {").replace(
    "check:", "workload:\n  - {nodes: producer, op: produce, rate: 20/s, from: 800ms, until: 3500ms, size: 100}\n"
    "faults:\n  - {at: 2s, crash: store, restart_after: 800ms}\ncheck:")


# Five seconds: an external node's tower links are judged in lives of 4 s or more (it is not seen to start).
LONGER = DAFKA.replace("duration: 2500ms", "duration: 5s")
STORE_EXTERNAL = LONGER.replace("  store: {role: store, config: {beacon: 200ms, fetch_retry: 200ms}}",
                                '  store: {role: store, command: "' + DAFKA_STORE + ' MUTANT", ready: {line: READY}}')


def _consumer(text: str, mutant: str) -> str:
    return text.replace('"' + DAFKA_CONSUMER + '"', '"' + DAFKA_CONSUMER + f' --mutant {mutant}"')


# Judged from what the chaos proxy saw of the external node's sockets (observed by default since
# 2026-11-28): before, each of these passed every check as the external node.
@pytest.mark.slow
@pytest.mark.parametrize("text,check,clause", [
    (STORE_EXTERNAL.replace("MUTANT", "--mutant no-record-subscription-store"), "subscriptions",
     "dafka.subscription.store-record"),
    (_consumer(LONGER, "no-direct-head-subscription"), "subscriptions", "dafka.subscription.consumer-direct-head"),
    (_consumer(LONGER, "no-record-subscription-consumer"), "subscriptions", "dafka.subscription.consumer-record"),
    (_consumer(LONGER, "mute-to-tower"), "tower-links", "dafka.interconnect.tower-pub-connect"),
    (STORE_EXTERNAL.replace("MUTANT", "--mutant deaf-to-tower"), "tower-links", "dafka.interconnect.tower-sub-connect"),
    (_consumer(LONGER, "no-connect"), "tower-links", "dafka.interconnect.connect-on-discovery"),
    (LONGER.replace("--set records=20", "--set records=20 --mutant no-head"), "intervals",
     "dafka.producer.head-interval"),
    (STORE_EXTERNAL.replace("MUTANT", "--mutant no-store-hello"), "answers", "dafka.store.hello-on-subscription"),
    (LONGER.replace("--set records=20", "--set records=20 --mutant head-next-offset"), "producer-claims",
     "dafka.producer.head-sequence"),
], ids=["store-no-record-subscription", "consumer-no-direct-head-subscription", "consumer-no-record-subscription",
        "consumer-mute-to-tower", "store-deaf-to-tower", "consumer-no-connect", "producer-no-head",
        "store-no-store-hello", "producer-head-next-offset"])
def test_an_external_dafka_mutant_is_caught_from_what_the_proxy_saw(text: str, check: str, clause: str,
                                                                    tmp_path: Path) -> None:
    r = run(text, "external-dafka-mutant", tmp_path)
    failed = {v.check: v for v in r.failed}
    assert check in failed, [v.to_dict() for v in r.verdicts]
    assert failed[check].clause == clause, failed[check].detail


@pytest.mark.slow
def test_external_dafka_nodes_observed_pass_and_are_judged(tmp_path: Path) -> None:
    """The reference producer and consumer as processes, and the store: judged from the wire."""
    r = run(STORE_EXTERNAL.replace(" MUTANT", ""), "external-dafka-observed", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = details(r)
    assert "more of the external nodes early, producer, store" in said["subscriptions"], said["subscriptions"]
    assert "not judged" not in said["tower-links"], said["tower-links"]
    assert "external nodes (early, producer, store) held to at least 1000 ms" in said["intervals"]
    assert "of external nodes (early, producer, store)" in said["answers"], said["answers"]


@pytest.mark.slow
@pytest.mark.parametrize("text,check,clause", [
    (dcp(broker="--mutant alters-metadata"), "metadata-unchanged", "dcp.worker.metadata-copied"),
    (dcp(worker="--mutant drops-metadata"), "metadata-unchanged", "dcp.worker.metadata-copied"),
    (dcp(client="--mutant pings"), "heartbeat-answers", "dcp.heartbeat.client-no-heartbeat"),
    # (its PING, as the proxy saw it, came first; the reference broker's RECONNECT told it to register)
    (dcp(worker="--mutant no-register"), "worker-registers", "dcp.worker.register"),
    (DAFKA.replace("--set records=20", "--set records=20 --mutant skip-offset"), "complete-delivery",
     "dafka.fetch.on-gap"),
    (STORE_RESTART.replace("MUTANT", "--mutant memory-store"), "complete-delivery", "dafka.fetch.on-gap"),
    # (the late consumer's FETCH, as the proxy handed it on, and the answers on its connection, highest first)
    (STORE_RESTART.replace("MUTANT", "--mutant descending-fetch-store"), "fetch-ascending",
     "dafka.fetch.ascending-order"),
    # (the store greets the consumer, which was up first, as soon as it sees its subscription: 4 of
    # 4 runs on 2026-11-27; with the tower external too, or the consumer started later, it was lost
    # in 8 of 9 runs: the reference store subscribes to every CONSUMER-HELLO, so none is sent again)
    (DAFKA.replace('"' + DAFKA_CONSUMER + '"', '"' + DAFKA_CONSUMER + ' --mutant empty-hello"'), "hello-subjects",
     "dafka.consumer.hello-subjects"),
    # (the reference store subscribes to every RECORD and HEAD, whatever the topic frame)
    (DAFKA.replace("--set records=20", "--set records=20 --mutant record-by-address"), "topic-frames",
     "dafka.wire.topic-record"),
    (DAFKA.replace("--set records=20", "--set records=20 --mutant head-by-partition"), "topic-frames",
     "dafka.wire.topic-head"),
    # (no node subscribes to what these publish, so it never left the process: the tap, subscribed
    # to everything on the external node's XPUB, hears it; before, they passed every check)
    (DAFKA.replace("--set records=20", "--set records=20 --mutant no-topic-frame"), "topic-frames",
     "dafka.wire.topic-frame"),
    (STORE_RESTART.replace("MUTANT", "--mutant ack-by-topic"), "topic-frames", "dafka.wire.topic-ack"),
    # (a GET-HEADS on the consumer's own address, heard by the tap: judged since its address is
    # none of the run's topics; before, only a topic or a store's address there was judged)
    (DAFKA.replace('"' + DAFKA_CONSUMER + '"', '"' + DAFKA_CONSUMER + ' --mutant heads-by-address"'), "topic-frames",
     "dafka.wire.topic-get-heads"),
], ids=["dcp-broker-alters-metadata", "dcp-worker-drops-metadata", "dcp-client-pings", "dcp-worker-no-register",
        "dafka-producer-skip-offset", "dafka-store-memory-store", "dafka-store-descending-fetch",
        "dafka-consumer-empty-hello",
        "dafka-producer-record-by-address", "dafka-producer-head-by-partition", "dafka-producer-no-topic-frame",
        "dafka-store-ack-by-topic", "dafka-consumer-heads-by-address"])
def test_a_mutant_run_as_the_external_process_is_caught(text: str, check: str, clause: str, tmp_path: Path) -> None:
    r = run(text, "external-mutant", tmp_path)
    if "node dcp client" in text and "node dcp broker" not in text:  # judged at the reference broker
        assert "not judged" not in next(v for v in r.verdicts if v.check == "metadata-unchanged").detail
    failed = {v.check: v for v in r.failed}
    assert check in failed, [v.to_dict() for v in r.verdicts]
    assert failed[check].clause == clause, failed[check].detail


def broker_forgets(text: str) -> str:
    """The DCP file with the in-process broker down for 300 ms at 1 s (less than the workers'
    600 ms liveness: they do not notice, and the broker's RECONNECT answers their next PING),
    and 4 s to run (2 s to answer it)."""
    return text.replace("duration: 2s", "duration: 4s").replace(
        "check:", "faults:\n  - {at: 1s, crash: broker, restart_after: 300ms}\ncheck:")


@pytest.mark.slow
@pytest.mark.parametrize("mutant", ["", "--mutant no-reregister"], ids=["reference", "no-reregister"])
def test_an_external_worker_must_register_again_when_told(mutant: str, tmp_path: Path) -> None:
    r = run(broker_forgets(dcp(worker=mutant)), "external-reregister", tmp_path)
    v = next(v for v in r.verdicts if v.check == "worker-registers")
    if not mutant:
        assert v.ok and "RECONNECT(s) each answered with a REGISTER" in v.detail, v.detail
        return
    assert not v.ok and v.clause == "dcp.worker.reregister-on-reconnect", v.detail
    assert "outside sent no REGISTER" in v.detail, v.detail


@pytest.mark.slow
def test_the_external_reference_store_across_a_restart_passes(tmp_path: Path) -> None:
    """The same file with the reference store (durable in its data_dir) and the reference tower
    as processes (`--set bind_sub=... --set bind_pub=...`): what catches memory-store is the
    mutant, not the file."""
    r = run(STORE_RESTART.replace(" MUTANT", ""), "external-store", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    said = details(r)["fetch-ascending"]
    assert "of them by external nodes, as the chaos proxy saw them" in said and "not judged" not in said, said


# The external producer alone (the consumer in the harness): what it sends the store and the
# consumer's peer SUBs is its own, so wire-conformance can name it.
PRODUCER_ALONE = DAFKA.replace(
    '  early: {role: consumer, command: "' + DAFKA_CONSUMER + '", ready: {line: READY}}',
    "  early: {role: consumer, config: {topics: orders, offset_reset: earliest, beacon: 200ms, fetch_retry: 200ms}}")


UNOBSERVED = "live: {observe: false}\n"  # (before ``nodes:``)


def unobserved(text: str) -> str:
    return text.replace("nodes:\n", UNOBSERVED + "nodes:\n", 1)


MALFORMED = [
    (dcp(worker="--mutant worker-wrong-header"), "outside", "dcp.wire.header"),
    (dcp(client="--mutant client-wrong-version"), "app", "dcp.wire.version"),
    (PRODUCER_ALONE.replace("--set records=20", "--set records=20 --mutant wrong-version"), "producer",
     "dafka.wire.version"),
]
MALFORMED_IDS = ["dcp-worker-wrong-header", "dcp-client-wrong-version", "dafka-producer-wrong-version"]


@pytest.mark.slow
@pytest.mark.parametrize("text,sender,clause", MALFORMED, ids=MALFORMED_IDS)
def test_a_malformed_message_of_the_external_process_is_caught_as_the_harness_receives_it(
        text: str, sender: str, clause: str, tmp_path: Path) -> None:
    """No probe sees what the process sends, and a lenient receiver (or a DCP broker, which only
    drops it) does not say it was malformed: with observation off, wire-conformance decodes it as
    the harness's node received it (harness/checkers/wire_receipts.py) and names the sender."""
    r = run(unobserved(text), "external-malformed", tmp_path)
    failed = [v for v in r.failed if v.check == "wire-conformance"]
    assert [v.clause for v in failed] == [clause], [v.to_dict() for v in r.verdicts]
    assert {e["node"] for e in failed[0].evidence} == {sender}, failed[0].evidence
    assert f"sent by {sender} (external)" in failed[0].detail


@pytest.mark.slow
@pytest.mark.parametrize("text,sender,clause", MALFORMED, ids=MALFORMED_IDS)
def test_a_malformed_message_of_the_observed_external_process_is_caught_as_its_send(
        text: str, sender: str, clause: str, tmp_path: Path) -> None:
    """Observed (the default for DCP and Dafka), the proxy's copy of what the process sent is
    decoded as a probed node's send, and the evidence names the process."""
    r = run(text, "external-malformed-observed", tmp_path)
    failed = [v for v in r.failed if v.check == "wire-conformance"]
    assert [v.clause for v in failed] == [clause], [v.to_dict() for v in r.verdicts]
    assert {e["node"] for e in failed[0].evidence} == {sender}, failed[0].evidence


@pytest.mark.slow
def test_the_external_reference_producer_alone_passes_and_is_judged_on_the_wire(tmp_path: Path) -> None:
    r = run(PRODUCER_ALONE, "external-producer", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    assert "from external nodes: producer " in details(r)["wire-conformance"]


# The independent DCP stand-in (tests/standins/dcp_standin.py, written from the document alone)
# as the external broker or worker, in each dialect.
STANDIN = "{python} " + str(Path(__file__).parents[1] / "standins" / "dcp_standin.py")
STANDIN_DCP = """protocol: dcp
name: dcp-standin
duration: 2s
nodes:
  broker: BROKER
  workers: {role: worker, config: {service: echo, behaviour: echo, heartbeat: 200ms, liveness: 3}}
  outside: WORKER
  clients: {role: client, count: 2, config: {timeout: 400ms, max_attempts: 20}}
workload:
  - {nodes: clients, op: request, service: echo, rate: 10/s, from: 300ms, until: 1500ms, size: 32}
"""


def standin_dcp(role: str, standin_dialect: str, run_dialect: str) -> str:
    """STANDIN_DCP with the stand-in as the broker or the worker 'outside' (the rest in-process)."""
    options = f"--heartbeat-ms 200 --dialect {standin_dialect}"
    external = {"broker": f'{{role: broker, command: "{STANDIN} broker --bind {{endpoint}} {options}"}}',
                "worker": f'{{role: worker, command: "{STANDIN} worker --connect {{connect}} --service echo {options}"}}'}
    in_process = {"broker": "{role: broker, config: {heartbeat: 200ms, liveness: 3}}",
                  "worker": "{role: worker, config: {service: echo, behaviour: echo, heartbeat: 200ms, liveness: 3}}"}
    text = STANDIN_DCP
    for r in ("broker", "worker"):
        text = text.replace(r.upper(), external[r] if r == role else in_process[r])
    return f'dialect: "{run_dialect}"\n' + text


@pytest.mark.slow
@pytest.mark.parametrize("role,dialect", [("broker", "strict"), ("worker", "strict"), ("broker", "dcp:dagbox"),
                                          ("worker", "dcp:dagbox")])
def test_an_independent_external_dcp_node_passes_wire_conformance_in_its_dialect(role: str, dialect: str,
                                                                                 tmp_path: Path) -> None:
    r = run(unobserved(standin_dcp(role, dialect, dialect)), "standin", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    sender = "broker" if role == "broker" else "outside"
    assert f"from external nodes: {sender} " in details(r)["wire-conformance"]


@pytest.mark.slow
@pytest.mark.parametrize("role,dialect", [("broker", "strict"), ("worker", "strict"), ("worker", "dcp:dagbox")])
def test_an_observed_independent_external_dcp_node_passes_every_check(role: str, dialect: str,
                                                                      tmp_path: Path) -> None:
    """Observed, its sends are judged as sends: by wire-conformance, and a worker's by worker-registers."""
    r = run(standin_dcp(role, dialect, dialect), "standin-observed", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    sender = "broker" if role == "broker" else "outside"
    rows = read_trace(r.trace_path).to_pylist()  # type: ignore[arg-type]
    assert any(x["node"] == sender and x["kind"] == "send" for x in rows), "no send of the stand-in was observed"
    if role == "worker":
        said = details(r)["worker-registers"]
        assert said.startswith("2 worker lives, each registered") and "not judged" not in said, said


@pytest.mark.slow
def test_the_runs_dialect_decides_what_an_external_node_is_judged_against(tmp_path: Path) -> None:
    """The stand-in worker speaking DagBox's message type in a strict run: its messages break
    dcp.wire.message-type as the reference broker receives them (the broker drops them)."""
    r = run(standin_dcp("worker", "dcp:dagbox", "strict"), "standin-dialect", tmp_path)
    failed = [v for v in r.failed if v.check == "wire-conformance"]
    assert [v.clause for v in failed] == ["dcp.wire.message-type"], [v.to_dict() for v in r.verdicts]
    assert {e["node"] for e in failed[0].evidence} == {"outside"}
    assert all("(valid only in dcp:dagbox)" in e["error"] for e in failed[0].evidence), failed[0].evidence


RAFT_ONE_EXTERNAL = """protocol: raft
name: raft-one-external-peer
duration: 4s
nodes:
  peers: {role: peer, count: 2}
  ext: {role: peer, command: "STANDIN --id {id} --endpoint {endpoint} --peers {peers} --data-dir {data_dir} --election-min {election_min_ms} --election-max {election_max_ms}"}
  clients: {role: client, count: 1}
workload:
  - {nodes: clients, op: put, rate: 10/s, from: 800ms, until: 3s}
faults:
  - rule: {message: AppendEntries, drop: 5%}
  - rule: {message: "Request*", duplicate: 10%}
"""


@pytest.mark.slow
def test_what_an_independent_external_raft_peer_sends_the_harness_is_judged_and_passes(tmp_path: Path) -> None:
    """The Raft stand-in peer (written from the documents alone) beside two reference peers and a
    client: its requests and its answers to the peers and the client are decoded as received
    (answers as the answer to the request the receiver sent; duplicated answers not blamed)."""
    standin = "{python} " + str(Path(__file__).parents[1] / "standins" / "raft_peer.py")
    r = run(RAFT_ONE_EXTERNAL.replace("STANDIN", standin), "raft-external", tmp_path)
    assert r.ok, [v.to_dict() for v in r.failed]
    assert "from external nodes: ext " in details(r)["wire-conformance"]
