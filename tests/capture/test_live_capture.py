"""Captures the harness records of its own live runs: `zmq-harness run --live --capture`, then
`zmq-harness pcap` of the file gives the live run's verdicts — and finds a broken broker the
live run cannot see inside, from the capture alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

from harness.capture.convert import PcapOptions, check_pcap
from harness.capture.nodes import parse_ports
from harness.composition import run_live
from harness.scenario import parse_scenario
from harness.trace import read_trace

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]

BIN = Path(sys.executable).parent / "zmq-harness"
SCENARIO = """
protocol: dcp
name: dcp-captured
duration: 2500ms
nodes:
  broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}
  workers: {role: worker, count: 2, config: {service: echo, behaviour: echo, service_time: 2ms}}
  clients: {role: client, count: 3, config: {timeout: 500ms, max_attempts: 10}}
workload:
  - {nodes: clients, op: request, service: echo, rate: 10/s, from: 300ms, until: 2s, size: 64}
check: [exactly-once, metadata-unchanged, one-request-per-worker, worker-expiry]
"""


def external_broker(text: str, mutant: str) -> str:
    return text.replace(
        "broker: {role: broker, config: {heartbeat: 250ms, liveness: 3}}",
        f'broker: {{role: broker, command: "{BIN} node dcp broker --mutant {mutant} --bind {{endpoint}} '
        f'--set heartbeat=250ms", ready: {{line: READY}}}}')


def live_and_pcap(text: str, tmp_path: Path):
    scenario = parse_scenario(text, "captured.yaml")
    pcap = str(tmp_path / "run.pcap")
    live = run_live(scenario, 1, str(tmp_path / "live"), capture=pcap)
    assert live.stats["capture"]["path"] == pcap and live.stats["capture"]["packets"] > 100
    assert not live.stats["capture"]["dropped"]
    port = live.stats["endpoints"]["broker/frontend"].rsplit(":", 1)[1]
    captured = check_pcap(pcap, PcapOptions("dcp", out_dir=str(tmp_path / "pcap"),
                                            ports=parse_ports([f"{port}=broker/broker"])))
    return live, captured


def by_check(result) -> dict[str, tuple[bool, str]]:
    return {v.check: (v.ok, v.detail) for v in result.verdicts}


def sends(path: str) -> Counter:
    t = read_trace(path)
    rows = t.filter(pc.equal(t["kind"], "send")).select(["node", "msg_type"]).to_pylist()
    return Counter((r["node"], r["msg_type"]) for r in rows if r["msg_type"] in ("REGISTER", "REQUEST", "REPLY"))


def test_the_capture_of_a_live_run_gives_the_same_verdicts(tmp_path: Path) -> None:
    live, captured = live_and_pcap(SCENARIO, tmp_path)
    assert live.ok and captured.ok, [v.to_dict() for v in captured.failed]
    got, want = by_check(captured), by_check(live)
    for check in ("metadata-unchanged", "one-request-per-worker"):
        assert got[check] == want[check]  # the same verdict, with the same counts in its detail
    assert {c for c, _ in captured.not_applicable} == {"exactly-once", "worker-expiry", "heartbeat-answers", "reply-unchanged", "worker-interval",
                                                                 "worker-registers"}
    assert captured.nodes == {"broker": "broker", "workers.0": "worker", "workers.1": "worker",
                              "clients.0": "client", "clients.1": "client", "clients.2": "client"}
    assert sends(captured.trace_path) == sends(live.trace_path)  # every request and reply, by the same node


def test_a_broken_broker_is_found_from_the_capture_alone(tmp_path: Path) -> None:
    # One slow worker: requests arrive while it is busy, and the mutant hands them over anyway.
    text = external_broker(SCENARIO, "busy-worker").replace("count: 2, config: {service: echo, behaviour: echo, "
                                                              "service_time: 2ms}",
                                                              "count: 1, config: {service: echo, behaviour: echo, "
                                                              "service_time: 150ms}")
    live, captured = live_and_pcap(text, tmp_path)
    ok, detail = by_check(live)["one-request-per-worker"]
    # the live run judges an external broker from its workers' side (harness/checkers/dcp_external.py)
    assert not ok and "given to a worker that had not asked for them" in detail, detail
    ok, detail = by_check(captured)["one-request-per-worker"]
    assert not ok and "given to a worker still holding one" in detail
    assert [v.check for v in captured.failed] == ["one-request-per-worker"]


def test_a_broker_that_alters_metadata_fails_the_same_check_live_and_captured(tmp_path: Path) -> None:
    live, captured = live_and_pcap(external_broker(SCENARIO, "alters-metadata"), tmp_path)
    (live_ok, live_detail), (ok, detail) = by_check(live)["metadata-unchanged"], by_check(captured)["metadata-unchanged"]
    assert not live_ok and not ok and "carried metadata that no request of the client had" in detail
    # The wire holds every reply a client read, and maybe one it had not read yet when the run stopped.
    assert 0 <= int(detail.split()[0]) - int(live_detail.split()[0]) <= 3


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv to drop CAP_NET_RAW")
def test_capturing_without_the_capability_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    r = subprocess.run(["setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw", str(BIN), "run", str(path),
                        "--live", "--capture", str(tmp_path / "x.pcap"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "zmq-harness run --capture: capturing traffic needs root or CAP_NET_RAW (not permitted for " \
                       "this user)\n"


def test_capture_needs_live(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    r = subprocess.run([str(BIN), "run", str(path), "--capture"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--capture records real traffic; it needs --live" in r.stderr


@pytest.mark.slow  # the suite's time budget (the DCP captures run by default)
def test_a_dafka_capture_ties_each_nodes_connections_together(tmp_path: Path) -> None:
    text = Path("scenarios/dafka/chaos/clean.yaml").read_text().replace("duration: 6s", "duration: 3s") \
        .replace("until: 4s", "until: 2500ms")
    scenario = parse_scenario(text, "dafka.yaml")
    pcap = str(tmp_path / "dafka.pcap")
    live = run_live(scenario, 1, str(tmp_path / "live"), capture=pcap)
    assert live.ok and not live.stats["capture"]["dropped"]
    captured = check_pcap(pcap, PcapOptions("dafka", out_dir=str(tmp_path / "pcap")))
    assert captured.ok, [v.to_dict() for v in captured.failed]
    # Each node's XPUB endpoint, beacon link and SUB links are one node: five with roles (the
    # tower's XSUB and each node's tower subscription say nothing of whose they are).
    roles = sorted(r for r in captured.nodes.values() if r)
    assert roles == ["consumer", "consumer", "producer", "store", "tower"]
    xpubs = {e.rsplit(":", 1)[1] for k, e in live.stats["endpoints"].items() if k.endswith("/xpub")}
    named = {n.rsplit(":", 1)[1] for n, r in captured.nodes.items() if r}
    assert named == xpubs  # the nodes are named by the XPUB endpoints the run gave them
    t = read_trace(captured.trace_path)
    producer = [n for n, r in captured.nodes.items() if r == "producer"][0]
    fetches = t.filter(pc.and_(pc.equal(t["node"], producer), pc.equal(t["kind"], "subscribe")))
    assert any(topic.startswith("F") for topic in fetches["topic"].to_pylist())  # its SUB links are its own
    # every Dafka check needs more than the traffic; hello-reply too, which the file does not name
    assert {c for c, _ in captured.not_applicable} == {*scenario.raw["check"], "hello-reply"}


@pytest.mark.slow
@pytest.mark.parametrize("protocol,path", [("raft", "scenarios/raft/chaos/leader-crash.yaml"),
                                           ("eventbus", "scenarios/eventbus/chaos/clean.yaml"),
                                           ("pppp", "scenarios/pppp/chaos/restart-live.yaml")])
def test_the_capture_of_a_clean_live_run_conforms(protocol: str, path: str, tmp_path: Path) -> None:
    """Every message of a passing live run of reference nodes decodes strictly from its capture
    (Raft's repeated answers and the Event BUS's two ROUTERs behind one socket pair once failed)."""
    root = Path(__file__).resolve().parents[2]
    scenario = parse_scenario((root / path).read_text(), path)
    pcap = str(tmp_path / "run.pcap")
    live = run_live(scenario, 1, str(tmp_path / "live"), capture=pcap)
    assert live.ok, [v.to_dict() for v in live.failed]
    captured = check_pcap(pcap, PcapOptions(protocol, out_dir=str(tmp_path / "pcap")))
    wire = {v.check: v for v in captured.verdicts}
    assert wire["wire-conformance"].ok and wire["zmtp-framing"].ok and wire["capture-complete"].ok, \
        [v.to_dict() for v in captured.failed]
